import json

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agenthost.messages import AgentHostError, ChatState, ErrorCode, from_wire, to_wire
from agenthost.messages.state import SessionSummary, Turn
from agenthost.messages.wire import iso_to_ms, message_types, ms_to_iso
from tests import strategies  # noqa: F401  (registers the message types' strategies)

VALUE_TYPES = (*message_types(), ChatState, Turn, SessionSummary)


@pytest.mark.parametrize("cls", VALUE_TYPES, ids=lambda c: c.__name__)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_every_message_and_state_value_round_trips_through_json(
    cls: type, data: st.DataObject
) -> None:
    value = data.draw(st.from_type(cls))
    wire = json.loads(json.dumps(to_wire(value)))
    assert from_wire(wire, cls) == value
    if cls in message_types():  # messages decode by their type tag alone
        assert from_wire(wire) == value


def test_field_names_are_camel_case_and_none_is_omitted() -> None:
    from agenthost.messages.events import TurnStarted
    from agenthost.messages.state import UserMessage

    wire = to_wire(TurnStarted(turn_id="t", message=UserMessage(text="x")))
    assert wire["type"] == "chat/turnStarted"
    assert wire["turnId"] == "t"
    assert "queuedMessageId" not in wire


def test_modified_at_is_iso_on_the_wire() -> None:
    assert ms_to_iso(9_999) == "1970-01-01T00:00:09.999Z"
    assert iso_to_ms("1970-01-01T00:00:09.999Z") == 9_999
    wire = to_wire(ChatState(resource="r", modified_at=9_999))
    assert wire["modifiedAt"] == "1970-01-01T00:00:09.999Z"


def test_unknown_keys_are_ignored_and_bad_data_is_a_clear_error() -> None:
    state = from_wire({"resource": "r", "somethingNew": 1}, ChatState)
    assert state == ChatState(resource="r")
    with pytest.raises(AgentHostError) as caught:
        from_wire({"type": "chat/nope"})
    assert caught.value.code is ErrorCode.INVALID_ARGUMENT
    with pytest.raises(AgentHostError):
        from_wire({"title": 3}, ChatState)


def test_errors_use_ahp_error_type() -> None:
    error = AgentHostError(code=ErrorCode.PROVIDER_ERROR, message="boom")
    assert to_wire(error)["errorType"] == "provider_error"
    assert attrs.evolve(error, message="x") != error


# -- AHP 1.1 shapes ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("wire", "cls"),
    [
        ({"kind": "chart", "points": [1, 2]}, "ResponsePart"),
        ({"kind": "timeRange", "startSeconds": 10}, "SourceLocation"),
        ({"type": "video", "label": "clip", "uri": "file:///c.mp4"}, "MessageAttachment"),
        ({"type": "pipeline", "label": "build", "relations": [{"kind": "created"}]}, "Artifact"),
        ({"kind": "schedule", "cron": "0 * * * *"}, "SessionOrigin"),
    ],
)
def test_a_variant_a_newer_peer_defines_decodes_and_re_encodes_whole(wire: dict, cls: str) -> None:
    from agenthost.messages import common, parts

    union = {
        "ResponsePart": parts.ResponsePart,
        "SourceLocation": parts.SourceLocation,
        "MessageAttachment": parts.MessageAttachment,
        "Artifact": common.Artifact,
        "SessionOrigin": common.SessionOrigin,
    }[cls]
    value = from_wire(wire, union)
    assert isinstance(value, common.Unknown)
    assert to_wire(value) == wire


def test_a_text_attachment_is_ahps_simple_attachment_and_old_exports_still_load() -> None:
    from agenthost.messages.parts import Attachment, ResourceAttachment
    from agenthost.messages.state import UserMessage

    message = UserMessage(
        text="see",
        attachments=(Attachment(name="notes.txt", text="hi"),),
        references=(ResourceAttachment(label="big.log", uri="file:///big.log"),),
    )
    wire = to_wire(message)
    assert wire["attachments"] == [
        {"type": "simple", "label": "notes.txt", "modelRepresentation": "hi"},
        {"type": "resource", "label": "big.log", "uri": "file:///big.log"},
    ]
    assert from_wire(wire, UserMessage) == message
    old = from_wire({"text": "see", "attachments": [{"name": "a.txt", "text": "x"}]}, UserMessage)
    assert old.attachments == (Attachment(name="a.txt", text="x"),)


def test_a_chat_origin_names_its_source_chat_by_uri_on_the_wire() -> None:
    from agenthost.messages.state import ChatOrigin, ChatOriginKind

    origin = ChatOrigin(kind=ChatOriginKind.TOOL, chat_id="parent", tool_call_id="call-1")
    wire = to_wire(origin)
    assert wire == {"kind": "tool", "chat": "ahp-chat:/parent", "toolCallId": "call-1"}
    assert from_wire(wire, ChatOrigin) == origin
    foreign = {"kind": "fork", "chat": "copilot:/s/c", "turnId": "t"}
    assert to_wire(from_wire(foreign, ChatOrigin)) == foreign


def test_a_chat_origin_a_peer_sent_goes_back_and_one_nobody_gave_stays_off() -> None:
    assert "origin" not in to_wire(ChatState(resource="r"))
    sent = from_wire({"resource": "r", "origin": {"kind": "user"}}, ChatState)
    assert sent == ChatState(resource="r")
    assert to_wire(sent)["origin"] == {"kind": "user"}


def test_a_client_tools_parameters_are_its_input_schema_on_the_wire() -> None:
    from agenthost.messages.state import ClientTool

    tool = ClientTool(name="fetch", parameters='{"type":"object"}')
    assert to_wire(tool) == {"name": "fetch", "inputSchema": {"type": "object"}}
    assert from_wire(to_wire(tool), ClientTool) == tool
    assert to_wire(ClientTool(name="fetch")) == {"name": "fetch"}


def test_json_types_are_not_coerced_and_the_error_names_the_field_by_its_wire_path() -> None:
    from agenthost.messages.errors import ValidationError
    from agenthost.messages.wire import action_from_wire

    with pytest.raises(ValidationError) as caught:
        from_wire({"resource": "r", "title": 3}, ChatState)
    assert caught.value.field == "title"
    assert caught.value.message == "title: expected a string, not an integer"
    with pytest.raises(ValidationError) as caught:
        action_from_wire({"type": "chat/turnStarted", "turnId": "t", "message": {"text": 1}})
    assert caught.value.field == "message.text"
    with pytest.raises(ValidationError) as caught:
        action_from_wire(
            {"type": "chat/queuedMessagesReordered", "order": ["a", 2]}  # the second entry
        )
    assert caught.value.field == "order[1]"
    with pytest.raises(ValidationError) as caught:
        action_from_wire({"type": "chat/turnComplete"})
    assert (caught.value.field, caught.value.code) == ("turnId", ErrorCode.INVALID_ARGUMENT)


@pytest.mark.parametrize("value", ["ab", {"a": "b"}, 3, True])
def test_a_sequence_is_a_json_array_not_a_string_or_an_object(value: object) -> None:
    from agenthost.messages.errors import ValidationError
    from agenthost.messages.wire import action_from_wire

    with pytest.raises(ValidationError) as caught:
        action_from_wire({"type": "chat/queuedMessagesReordered", "order": value})
    assert caught.value.field == "order" and "expected an array" in caught.value.message


def test_a_time_is_iso_text_or_milliseconds_never_a_boolean() -> None:
    from agenthost.messages.errors import ValidationError
    from agenthost.messages.wire import action_from_wire

    with pytest.raises(ValidationError) as caught:
        action_from_wire(
            {"type": "chat/turnStarted", "turnId": "t", "message": {"text": "x"}, "startedAt": True}
        )
    assert caught.value.field == "startedAt"
    started = action_from_wire(
        {"type": "chat/turnStarted", "turnId": "t", "message": {"text": "x"}, "startedAt": 5}
    )
    assert started.started_at == 5  # type: ignore[union-attr]

import json

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agenthost.messages import AgentHostError, ChatState, ErrorCode, from_wire, to_wire
from agenthost.messages.fields import Json
from agenthost.messages.state import SessionSummary, Turn
from agenthost.messages.wire import iso_to_ms, message_types, ms_to_iso

text = st.text(max_size=20)
st.register_type_strategy(
    AgentHostError,
    st.builds(
        AgentHostError, code=st.sampled_from(ErrorCode), message=text, resumable=st.booleans()
    ),
)
st.register_type_strategy(
    ChatState,
    st.builds(ChatState, modified_at=st.integers(0, 253_402_300_799_999)),  # up to year 9999
)
st.register_type_strategy(float, st.floats(allow_nan=False, allow_infinity=False))  # JSON numbers
_json_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | text
)
_json = st.recursive(
    _json_leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=6,
)
st.register_type_strategy(Json, st.builds(Json.of, _json.filter(lambda v: v is not None)))
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

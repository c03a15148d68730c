"""AHP protocol messages and the AHP-specific wire rules, beyond what the
conformance fixtures check."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agenthost.messages import protocol as p
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.events import (
    AssistantDelta,
    PendingMessageAdded,
    PendingMessageRemoved,
    ToolCallCompleted,
    TurnCompleted,
    TurnStarted,
)
from agenthost.messages.fields import Json
from agenthost.messages.reducers import reduce_chat
from agenthost.messages.state import (
    ChatState,
    ChatStatus,
    PendingKind,
    PendingMessage,
    Turn,
    TurnState,
    Usage,
    UserMessage,
    with_legacy_steering_slot,
)
from agenthost.messages.wire import action_from_wire, from_wire, to_wire
from tests import strategies  # noqa: F401  (registers the message types' strategies)

HELLO = UserMessage(text="hello")


def pending(id_: str, kind: PendingKind = PendingKind.STEERING) -> PendingMessage:
    return PendingMessage(id=id_, kind=kind, message=UserMessage(text=id_))


@pytest.mark.parametrize(
    ("frame", "cls"),
    [
        ({"jsonrpc": "2.0", "id": 1, "method": "ping"}, p.JsonRpcRequest),
        (
            {"jsonrpc": "2.0", "method": "unsubscribe", "params": {"channel": "c"}},
            p.JsonRpcNotification,
        ),
        ({"jsonrpc": "2.0", "id": "a", "result": {}}, p.JsonRpcSuccess),
        (
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "x"}},
            p.JsonRpcErrorResponse,
        ),
    ],
)
def test_a_json_rpc_frame_decodes_by_its_shape_and_re_encodes_as_it_came(
    frame: dict[str, object], cls: type
) -> None:
    message = from_wire(frame, p.JsonRpcMessage)
    assert type(message) is cls
    assert to_wire(message) == frame


def test_the_action_envelope_leaves_the_hosts_routing_ids_off_the_wire() -> None:
    action = TurnCompleted(session_id="s1", chat_id="c1", turn_id="t1")
    envelope = p.ActionEnvelope(
        channel="ahp-chat:/c1",
        action=action,
        server_seq=3,
        origin=p.ActionOrigin(client_id="k", client_seq=9),
        rejection_reason="no active turn",
    )
    assert to_wire(envelope) == {
        "channel": "ahp-chat:/c1",
        "action": {"type": "chat/turnComplete", "turnId": "t1"},
        "serverSeq": 3,
        "origin": {"clientId": "k", "clientSeq": 9},
        "rejectionReason": "no active turn",
    }


def test_a_dispatched_action_of_an_unknown_type_is_kept_not_refused() -> None:
    params = from_wire(
        {"channel": "ahp-chat:/c", "clientSeq": 1, "action": {"type": "chat/future", "a": [1]}},
        p.DispatchActionParams,
    )
    assert params.action == p.UnknownAction(type="chat/future", data=Json.of({"a": [1]}))


@pytest.mark.parametrize(
    "data", [{"type": "SendMessage", "text": "x"}, {"type": 3}, ["chat/delta"]]
)
def test_what_is_not_an_action_is_refused_as_invalid(data: object) -> None:
    with pytest.raises(AgentHostError) as caught:
        action_from_wire(data)
    assert caught.value.code is ErrorCode.INVALID_ARGUMENT


def test_a_snapshots_state_type_follows_its_channel_scheme() -> None:
    chat = from_wire(
        {"resource": "ahp-chat:/c", "state": {"resource": "ahp-chat:/c"}, "fromSeq": 1}, p.Snapshot
    )
    assert isinstance(chat.state, ChatState)
    root = from_wire({"resource": "ahp-root://", "state": {"agents": []}, "fromSeq": 0}, p.Snapshot)
    assert root.state == p.RootState()
    other = from_wire({"resource": "ahp-terminal:/t", "state": {"x": 1}, "fromSeq": 2}, p.Snapshot)
    assert other.state == Json.of({"x": 1})


def test_reconnect_results_are_told_apart_by_type() -> None:
    replay = from_wire(
        {"type": "replay", "actions": [], "missing": ["ahp-chat:/gone"]}, p.ReconnectResult
    )
    assert replay == p.ReconnectReplay(missing=("ahp-chat:/gone",))
    snapshot = from_wire({"type": "snapshot", "snapshots": []}, p.ReconnectResult)
    assert snapshot == p.ReconnectSnapshot()
    with pytest.raises(AgentHostError) as caught:
        from_wire({"type": "partial"}, p.ReconnectResult)
    assert caught.value.code is ErrorCode.INVALID_ARGUMENT


def test_initialize_params_default_to_the_root_channel() -> None:
    params = p.InitializeParams(client_id="k", protocol_versions=("1.1.0", "1.0.0"))
    assert to_wire(params) == {
        "channel": "ahp-root://",
        "clientId": "k",
        "protocolVersions": ["1.1.0", "1.0.0"],
    }


def test_older_peers_see_the_head_of_the_steering_list_in_the_single_slot() -> None:
    state = ChatState(resource="r", steering_messages=(pending("a"), pending("b")))
    wire = to_wire(with_legacy_steering_slot(state))
    assert wire["steeringMessage"] == {
        "id": "a",
        "message": {"text": "a", "origin": {"kind": "user"}},
    }
    assert "steeringMessages" not in wire


def test_consuming_or_removing_the_legacy_slots_message_clears_the_slot() -> None:
    state = ChatState(resource="r", steering_message=pending("s"))
    removed = reduce_chat(state, PendingMessageRemoved(kind=PendingKind.STEERING, pending_id="s"))
    assert removed.steering_message is None
    started = reduce_chat(state, TurnStarted(turn_id="t", message=HELLO, queued_message_id="s"))
    assert started.steering_message is None


def test_a_turn_keeps_the_archived_and_unknown_status_flags_and_clears_is_read() -> None:
    flags = ChatStatus.IS_ARCHIVED | ChatStatus(128)
    state = ChatState(resource="r", status=ChatStatus.IDLE | ChatStatus.IS_READ | flags)
    state = reduce_chat(state, TurnStarted(turn_id="t", message=HELLO))
    assert state.status == ChatStatus.IN_PROGRESS | flags
    state = reduce_chat(state, TurnCompleted(turn_id="t"))
    assert state.status == ChatStatus.IDLE | flags


def test_pending_message_set_is_flat_and_a_tool_result_is_nested_on_the_wire() -> None:
    assert to_wire(PendingMessageAdded(pending=pending("q", PendingKind.QUEUED))) == {
        "type": "chat/pendingMessageSet",
        "id": "q",
        "kind": "queued",
        "message": {"text": "q", "origin": {"kind": "user"}},
    }
    complete = ToolCallCompleted(turn_id="t", tool_call_id="c", past_tense_message="Ran")
    assert to_wire(complete) == {
        "type": "chat/toolCallComplete",
        "turnId": "t",
        "toolCallId": "c",
        "result": {"success": True, "pastTenseMessage": "Ran"},
    }
    assert to_wire(AssistantDelta(turn_id="t", part_id="p", text="x"))["content"] == "x"


def test_usage_uses_ahp_names_and_still_reads_the_old_ones() -> None:
    assert to_wire(Usage(prompt_tokens=2, completion_tokens=3)) == {
        "inputTokens": 2,
        "outputTokens": 3,
    }
    assert from_wire({"promptTokens": 2, "completionTokens": 3}, Usage) == Usage(
        prompt_tokens=2, completion_tokens=3
    )


def test_an_unknown_turn_state_survives_and_is_not_a_known_one() -> None:
    turn = from_wire({"id": "t", "message": {"text": "x"}, "state": "paused"}, Turn)
    assert turn.state == "paused"
    assert turn.state not in (TurnState.COMPLETE, TurnState.CANCELLED, TurnState.ERROR)


PLAIN = (
    p.InitializeParams,
    p.ConnectionReconnectParams,
    p.ChannelReconnectParams,
    p.SubscribeParams,
    p.AuthRequiredParams,
    p.SessionSummary,
    p.SessionAddedParams,
    p.JsonRpcError,
    p.ListSessionsResult,
    p.FetchTurnsParams,
    p.FetchTurnsResult,
    p.CreateSessionParams,
    p.CreateChatParams,
    p.SessionSummaryChangedParams,
    p.AuthenticateParams,
    p.CompletionsResult,
    p.ChannelFrameParams,
    p.ChannelCreditParams,
    p.SubscribeParams,
    p.ProgressParams,
    p.SessionConfigCompletionsParams,
)


@pytest.mark.parametrize("cls", PLAIN, ids=lambda c: c.__name__)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_protocol_messages_round_trip_through_json(cls: type, data: st.DataObject) -> None:
    value = data.draw(st.from_type(cls))
    assert from_wire(json.loads(json.dumps(to_wire(value))), cls) == value


def test_without_the_fixture_folder_the_fixture_tests_skip_and_say_why() -> None:
    env = {**os.environ, "AHP_FIXTURES": "/nonexistent/ahp-fixtures"}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:randomly",
            "tests/ahp/test_fixtures.py",
        ],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "no AHP fixtures at /nonexistent/ahp-fixtures" in run.stdout
    assert "AHP fixtures: none at /nonexistent/ahp-fixtures" in run.stdout
    assert " passed" not in run.stdout


def test_reconnect_params_are_told_apart_by_shape() -> None:
    wide = from_wire(
        {"clientId": "k", "lastSeenServerSeq": 9, "subscriptions": ["ahp-chat:/a"]},
        p.ReconnectParams,
    )
    assert wide == p.ConnectionReconnectParams(
        client_id="k", last_seen_server_seq=9, subscriptions=("ahp-chat:/a",)
    )
    cursors = from_wire(
        {"clientId": "k", "subscriptions": [{"channel": "ahp-chat:/a", "lastSeenServerSeq": 4}]},
        p.ReconnectParams,
    )
    assert cursors == p.ChannelReconnectParams(
        client_id="k",
        subscriptions=(p.ChannelCursor(channel="ahp-chat:/a", last_seen_server_seq=4),),
    )


def test_a_per_channel_reconnect_result_recovers_each_channel_its_own_way() -> None:
    wire = {
        "channels": [
            {"kind": "replay", "channel": "ahp-chat:/a", "actions": []},
            {
                "kind": "snapshot",
                "channel": "ahp-terminal:/t",
                "snapshot": {"resource": "ahp-terminal:/t", "state": {"rows": 3}, "fromSeq": 2},
            },
            {"kind": "missing", "channel": "ahp-chat:/gone"},
        ]
    }
    result = from_wire(wire, p.ReconnectResult)
    assert isinstance(result, p.ChannelReconnectResult)
    assert [type(c) for c in result.channels] == [
        p.ChannelReplay,
        p.ChannelSnapshot,
        p.ChannelMissing,
    ]
    assert to_wire(result) == wire


def test_auth_required_carries_resource_metadata_and_still_reads_a_bare_uri() -> None:
    from agenthost.messages.common import ProtectedResourceMetadata

    rich = {
        "channel": "ahp-root://",
        "resource": {"resource": "https://api", "authorization_servers": ["https://login"]},
        "reason": "expired",
    }
    params = from_wire(rich, p.AuthRequiredParams)
    assert params.resource == ProtectedResourceMetadata(
        resource="https://api", authorization_servers=("https://login",)
    )
    assert to_wire(params) == rich
    bare = {"channel": "ahp-root://", "resource": "https://api"}
    assert to_wire(from_wire(bare, p.AuthRequiredParams)) == bare


def test_fetch_turns_answers_in_either_versions_form() -> None:
    assert to_wire(p.FetchTurnsResult()) == {}
    old = p.FetchTurnsResult(turns=(), has_more=False)
    assert to_wire(old) == {"turns": [], "hasMore": False}


def test_a_summary_change_carries_only_what_changed() -> None:
    changed = p.SessionSummaryChangedParams(
        channel="ahp-root://",
        session="ahp-session:/s",
        changes=p.SessionSummaryChanges(title="New", status=ChatStatus.IN_PROGRESS),
    )
    assert to_wire(changed) == {
        "channel": "ahp-root://",
        "session": "ahp-session:/s",
        "changes": {"title": "New", "status": 8},
    }


def test_a_completion_attaches_any_attachment_kind() -> None:
    from agenthost.messages.parts import Attachment, ResourceAttachment

    wire = {
        "items": [
            {
                "insertText": "/help",
                "attachment": {"type": "simple", "label": "help", "modelRepresentation": "/help"},
            },
            {
                "insertText": "@a.py",
                "attachment": {"type": "resource", "label": "a.py", "uri": "file:///a.py"},
            },
        ]
    }
    result = from_wire(wire, p.CompletionsResult)
    assert [type(item.attachment) for item in result.items] == [Attachment, ResourceAttachment]
    assert to_wire(result) == wire

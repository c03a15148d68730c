"""The session reducer over AHP's flat SessionState (the fixtures 003, 004 and
088 use an older nested shape; these tests say the same things in the current one)."""

import attrs

from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.events import (
    ActiveClientRemoved,
    ActiveClientSet,
    ChatAdded,
    ChatRemoved,
    ChatUpdated,
    IsArchivedChanged,
    SessionCreationFailed,
    SessionReady,
)
from agenthost.messages.protocol import UnknownAction
from agenthost.messages.reducers import reduce_session
from agenthost.messages.state import (
    ActiveClient,
    ChatStatus,
    ChatSummary,
    SessionLifecycle,
    SessionState,
)
from agenthost.messages.wire import action_from_wire, from_wire, to_wire

CREATING = SessionState(
    provider="copilot",
    title="Test Session",
    lifecycle=SessionLifecycle.CREATING,
)


def test_session_ready_moves_a_creating_session_to_ready() -> None:
    state = reduce_session(CREATING, action_from_wire({"type": "session/ready"}))
    assert state == attrs.evolve(CREATING, lifecycle=SessionLifecycle.READY)


def test_creation_failed_records_the_error_and_the_failed_lifecycle() -> None:
    action = action_from_wire(
        {
            "type": "session/creationFailed",
            "error": {"errorType": "init", "message": "Failed to start"},
        }
    )
    assert isinstance(action, SessionCreationFailed)
    state = reduce_session(CREATING, action)
    assert to_wire(state)["lifecycle"] == "failed"
    assert to_wire(state)["creationError"] == {"errorType": "init", "message": "Failed to start"}


def test_an_unknown_session_action_decodes_and_changes_nothing() -> None:
    action = action_from_wire({"type": "session/nonExistentAction", "x": 1})
    assert isinstance(action, UnknownAction)
    assert reduce_session(CREATING, action) is CREATING  # type: ignore[arg-type]
    assert to_wire(action) == {"type": "session/nonExistentAction", "x": 1}


def test_chat_added_upserts_by_resource_and_chat_removed_drops_it() -> None:
    first = ChatSummary(resource="ahp-chat:/a", title="A")
    state = reduce_session(CREATING, ChatAdded(summary=first))
    state = reduce_session(state, ChatAdded(summary=attrs.evolve(first, title="A2")))
    assert state.chats == (attrs.evolve(first, title="A2"),)
    state = reduce_session(state, ChatRemoved(chat="ahp-chat:/a"))
    assert state.chats == ()


def test_chat_updated_writes_only_the_fields_it_carries() -> None:
    chat = ChatSummary(resource="ahp-chat:/a", title="A", modified_at=5)
    state = reduce_session(SessionState(chats=(chat,)), ChatUpdated(chat="ahp-chat:/a", title="B"))
    assert state.chats == (ChatSummary(resource="ahp-chat:/a", title="B", modified_at=5),)
    wire = to_wire(ChatUpdated(chat="ahp-chat:/a", status=ChatStatus.IN_PROGRESS))
    assert wire == {"type": "session/chatUpdated", "chat": "ahp-chat:/a", "changes": {"status": 8}}


def test_active_clients_are_keyed_by_client_id() -> None:
    vscode = ActiveClient(client_id="vscode-1", display_name="VS Code")
    state = reduce_session(CREATING, ActiveClientSet(active_client=vscode))
    state = reduce_session(
        state, ActiveClientSet(active_client=attrs.evolve(vscode, display_name="Code"))
    )
    assert [c.display_name for c in state.active_clients] == ["Code"]
    state = reduce_session(state, ActiveClientRemoved(client_id="vscode-1"))
    assert state.active_clients == ()


def test_read_and_archived_are_the_status_bits_on_the_wire() -> None:
    state = reduce_session(
        SessionState(read=True, status=ChatStatus.IN_PROGRESS), IsArchivedChanged(archived=True)
    )
    wire = to_wire(state)
    assert wire["status"] == ChatStatus.IN_PROGRESS | ChatStatus.IS_READ | ChatStatus.IS_ARCHIVED
    assert "read" not in wire and "archived" not in wire
    decoded = from_wire(wire, SessionState)
    assert (decoded.read, decoded.archived, decoded.status) == (True, True, ChatStatus.IN_PROGRESS)


def test_status_bits_a_newer_peer_defines_survive_a_round_trip() -> None:
    wire = {"title": "t", "status": 1 | 32 | 128}
    assert to_wire(from_wire(wire, SessionState))["status"] == 1 | 32 | 128


def test_config_values_and_schema_are_ahp_config_and_old_exports_still_load() -> None:
    state = from_wire(
        {"title": "t", "config": {"schema": {"type": "object"}, "values": {"mode": "review"}}},
        SessionState,
    )
    assert state.config == (("mode", "review"),)
    assert to_wire(state)["config"] == {"schema": {"type": "object"}, "values": {"mode": "review"}}
    old = from_wire(
        {"title": "t", "read": False, "archived": True, "config": [["k", "v"]]}, SessionState
    )
    assert (old.read, old.archived, old.config) == (False, True, (("k", "v"),))


def test_creation_error_keeps_an_error_type_agenthost_does_not_define() -> None:
    error = from_wire({"errorType": "init", "message": "m"}, AgentHostError)
    assert error.code == "init" and error.code != ErrorCode.INTERNAL
    assert to_wire(error) == {"errorType": "init", "message": "m"}


def test_session_ready_is_a_message_type_with_its_ahp_tag() -> None:
    assert to_wire(SessionReady()) == {"type": "session/ready"}

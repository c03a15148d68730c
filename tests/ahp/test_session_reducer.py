"""The session reducer over AHP's flat SessionState (the fixtures 003, 004 and
088 use an older nested shape; these tests say the same things in the current one)."""

import attrs

from agenthost.messages.common import DirectoryInfo
from agenthost.messages.customizations import (
    Customization,
    CustomizationType,
    Enablement,
    EnablementKind,
    McpServerState,
    McpServerStatus,
)
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.events import (
    ActiveClientRemoved,
    ActiveClientSet,
    ActiveSessionsChanged,
    AgentsChanged,
    ChatAdded,
    ChatRemoved,
    ChatsReordered,
    ChatUpdated,
    CustomizationRemoved,
    CustomizationToggled,
    CustomizationUpdated,
    IsArchivedChanged,
    McpServerStartRequested,
    McpServerStateChanged,
    McpServerStopRequested,
    RootConfigChanged,
    SessionCreationFailed,
    SessionInputNeededRemoved,
    SessionInputNeededSet,
    SessionReady,
    WorkingDirectoryRemoved,
    WorkingDirectoryReplaced,
    WorkingDirectorySet,
)
from agenthost.messages.fields import Json
from agenthost.messages.protocol import UnknownAction
from agenthost.messages.reducers import reduce_root, reduce_session
from agenthost.messages.state import (
    ActiveClient,
    AgentInfo,
    ChatStatus,
    ChatSummary,
    RootState,
    SessionInputKind,
    SessionInputRequest,
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


# -- AHP 1.1's session and root actions --------------------------------------------------

PLUGIN = Customization(
    type=CustomizationType.PLUGIN,
    id="plugin",
    uri="https://plugins.example/p",
    name="P",
    enabled=True,
    children=(
        Customization(type=CustomizationType.SKILL, id="skill", uri="p#skill", name="lint"),
        Customization(
            type=CustomizationType.MCP_SERVER,
            id="server",
            uri="p#mcp",
            name="Search",
            state=McpServerState(kind=McpServerStatus.STARTING),
        ),
    ),
)


def customized(*actions: object) -> SessionState:
    state = SessionState(customizations=(PLUGIN,))
    for action in actions:
        state = reduce_session(state, action)  # type: ignore[arg-type]
    return state


def child(state: SessionState, index: int) -> Customization:
    container = (state.customizations or ())[0]
    assert isinstance(container, Customization) and container.children is not None
    found = container.children[index]
    assert isinstance(found, Customization)
    return found


def test_a_customization_is_toggled_by_id_among_the_children_too() -> None:
    state = customized(CustomizationToggled(id="skill", enabled=False))
    assert child(state, 0).enabled is False
    decided = Enablement(kind=EnablementKind.WORKSPACE, uri="file:///w", enabled=False)
    state = customized(CustomizationToggled(id="skill", enablement=(decided,)))
    assert (child(state, 0).enabled, child(state, 0).enablement) == (False, (decided,))
    cleared = reduce_session(state, CustomizationToggled(id="skill", enablement=()))
    assert (child(cleared, 0).enabled, child(cleared, 0).enablement) == (True, None)
    assert customized(CustomizationToggled(id="nothing", enabled=False)) == customized()


def test_an_mcp_servers_state_changes_by_id_and_no_other_customization_has_one() -> None:
    ready = McpServerState(kind=McpServerStatus.READY)
    state = customized(McpServerStateChanged(id="server", state=ready, channel="mcp://search"))
    assert (child(state, 1).state, child(state, 1).channel) == (ready, "mcp://search")
    stopped = reduce_session(state, McpServerStopRequested(id="server"))
    assert (child(stopped, 1).state, child(stopped, 1).channel) == (
        McpServerState(kind=McpServerStatus.STOPPED),
        None,
    )
    assert customized(McpServerStateChanged(id="skill", state=ready)) == customized()
    assert customized(McpServerStartRequested(id="plugin")) == customized()


def test_customizations_upsert_by_id_and_a_removed_container_takes_its_children() -> None:
    other = Customization(type=CustomizationType.PLUGIN, id="other", uri="o", name="O")
    state = customized(CustomizationUpdated(customization=other))
    assert [c.id for c in state.customizations or () if isinstance(c, Customization)] == [
        "plugin",
        "other",
    ]
    state = reduce_session(state, CustomizationRemoved(id="skill"))
    assert [c.id for c in (child(state, 0),)] == ["server"]
    state = reduce_session(state, CustomizationRemoved(id="plugin"))
    assert state.customizations == (other,)


def test_a_customization_of_a_type_from_a_newer_peer_is_kept_whole() -> None:
    wire = {"type": "workflow", "id": "w", "steps": [1, 2]}
    action = action_from_wire({"type": "session/customizationsChanged", "customizations": [wire]})
    state = reduce_session(SessionState(), action)
    assert to_wire(state)["customizations"] == [wire]


def request(kind: SessionInputKind, request_id: str = "chat#1") -> SessionInputRequest:
    return SessionInputRequest(kind=kind, id=request_id, chat="ahp-chat:/c", turn_id="t")


def test_session_input_requests_make_the_session_input_needed_but_client_execution_does_not() -> (
    None
):
    busy = SessionState(status=ChatStatus.IN_PROGRESS)
    confirm = SessionInputNeededSet(request=request(SessionInputKind.TOOL_CONFIRMATION))
    state = reduce_session(busy, confirm)
    assert state.status is ChatStatus.INPUT_NEEDED
    execute = SessionInputNeededSet(
        request=request(SessionInputKind.TOOL_CLIENT_EXECUTION, "chat#2")
    )
    assert reduce_session(busy, execute).status is ChatStatus.IN_PROGRESS
    state = reduce_session(state, execute)
    state = reduce_session(state, SessionInputNeededRemoved(id="chat#1"))
    assert ([r.id for r in state.input_requests], state.status) == (
        ["chat#2"],
        ChatStatus.IN_PROGRESS,
    )
    assert reduce_session(state, SessionInputNeededRemoved(id="gone")) == state


def test_working_directories_are_keyed_by_uri_and_a_replacement_takes_the_place() -> None:
    rich = DirectoryInfo(uri="file:///b", repo="https://example.org/r.git")
    state = SessionState(working_directories=("file:///a", "file:///b"))
    state = reduce_session(state, WorkingDirectorySet(directory=rich))
    assert state.working_directories == ("file:///a", rich)
    assert reduce_session(state, WorkingDirectorySet(directory=rich)) == state
    replaced = reduce_session(
        state, WorkingDirectoryReplaced(directory="file:///a", replacement="file:///b")
    )
    assert replaced.working_directories == ("file:///b",)
    assert reduce_session(state, WorkingDirectoryRemoved(directory="file:///x")) == state
    assert reduce_session(
        state, WorkingDirectoryReplaced(directory="file:///x", replacement="file:///y")
    ) == (state)


def test_chats_reorder_only_by_a_complete_order() -> None:
    chats = tuple(ChatSummary(resource=f"ahp-chat:/{name}") for name in "abc")
    state = SessionState(chats=chats)
    reordered = reduce_session(
        state, ChatsReordered(order=("ahp-chat:/c", "ahp-chat:/a", "ahp-chat:/b"))
    )
    assert [c.resource[-1] for c in reordered.chats] == ["c", "a", "b"]
    for order in (("ahp-chat:/a",), ("ahp-chat:/a",) * 3, ("ahp-chat:/a", "ahp-chat:/b", "x")):
        assert reduce_session(state, ChatsReordered(order=order)) == state


def test_removing_the_default_chat_clears_the_default() -> None:
    chat = ChatSummary(resource="ahp-chat:/a")
    state = SessionState(chats=(chat,), default_chat="ahp-chat:/a")
    assert reduce_session(state, ChatRemoved(chat="ahp-chat:/a")).default_chat is None


def test_the_root_replaces_agents_and_merges_config_values() -> None:
    agents = (AgentInfo(provider="scripted", display_name="Scripted"),)
    state = reduce_root(RootState(), AgentsChanged(agents=agents))
    assert state.agents == agents
    assert reduce_root(state, RootConfigChanged(config=Json.of({"a": 1}))) == state  # no config yet
    configured = attrs.evolve(state, config=Json.of({"schema": {}, "values": {"a": 1, "b": 2}}))
    merged = reduce_root(configured, RootConfigChanged(config=Json.of({"b": 3})))
    assert merged.config == Json.of({"schema": {}, "values": {"a": 1, "b": 3}})
    replaced = reduce_root(configured, RootConfigChanged(config=Json.of({"b": 3}), replace=True))
    assert replaced.config == Json.of({"schema": {}, "values": {"b": 3}})
    assert reduce_root(state, ActiveSessionsChanged(active_sessions=4)).active_sessions == 4

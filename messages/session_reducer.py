"""The pure session and root reducers (re-exported by reducers.py, whose module
docstring lists every reducer's invariants)."""

from collections.abc import Callable
from typing import TypeVar

import attrs

from agenthost.messages.common import Unknown, WorkingDirectory, directory_uri
from agenthost.messages.customizations import (
    AnyCustomization,
    Customization,
    CustomizationType,
    McpServerState,
    McpServerStatus,
)
from agenthost.messages.session_events import (
    ActiveClientRemoved,
    ActiveClientSet,
    ActiveSessionsChanged,
    AgentsChanged,
    ChatAdded,
    ChatRemoved,
    ChatsReordered,
    ChatUpdated,
    ConfigChanged,
    CustomizationRemoved,
    CustomizationsChanged,
    CustomizationToggled,
    CustomizationUpdated,
    DefaultChatChanged,
    InputNeededRemoved,
    InputNeededSet,
    IsArchivedChanged,
    IsReadChanged,
    McpServerStartRequested,
    McpServerStateChanged,
    McpServerStopRequested,
    RootConfigChanged,
    RootEvent,
    ServerToolsChanged,
    SessionActivityChanged,
    SessionAgentChanged,
    SessionChangesetsChanged,
    SessionCreationFailed,
    SessionEvent,
    SessionInputNeededRemoved,
    SessionInputNeededSet,
    SessionMetaChanged,
    SessionModelChanged,
    SessionReady,
    SessionStatusChanged,
    SessionTitleChanged,
    WorkingDirectoryRemoved,
    WorkingDirectoryReplaced,
    WorkingDirectorySet,
)
from agenthost.messages.state import (
    ChatStatus,
    ChatSummary,
    RootState,
    SessionInputRequest,
    SessionLifecycle,
    SessionState,
    with_activity,
)

_INPUT_NEEDED_ONLY = int(ChatStatus.INPUT_NEEDED) & ~int(ChatStatus.IN_PROGRESS)


def _input_needed_status(
    status: ChatStatus, requests: tuple[SessionInputRequest, ...], *, removed: bool
) -> ChatStatus:
    """A request that awaits the user makes the session input-needed. Once none
    does, a removal clears the input-needed bit (a turn stays in progress, an
    idle session idle); a set of a request that does not await the user (a
    client executing a tool) leaves the status as it was."""
    if any(r.awaits_user for r in requests):
        return with_activity(status, ChatStatus.INPUT_NEEDED)
    return ChatStatus(int(status) & ~_INPUT_NEEDED_ONLY) if removed else status


T = TypeVar("T")


def _upsert(items: tuple[T, ...], item: T, key: Callable[[T], object]) -> tuple[T, ...]:
    """`item` in place of the entry with its key, or appended."""
    keys = [key(i) for i in items]
    if key(item) in keys:
        index = keys.index(key(item))
        return (*items[:index], item, *items[index + 1 :])
    return (*items, item)


def reduce_session(state: SessionState, action: SessionEvent, now_ms: int = 0) -> SessionState:
    """The session reducer: a derived title only fills an empty one; input
    needed is a set of chats; unknown actions are no-ops."""
    match action:
        case SessionTitleChanged(title=title, by_user=by_user):
            if not by_user and (state.user_titled or state.title):
                return state  # a derived title is the first one, and never the user's
            return attrs.evolve(state, title=title, user_titled=state.user_titled or by_user)
        case IsReadChanged(read=read):
            return attrs.evolve(state, read=read)
        case IsArchivedChanged(archived=archived):
            return attrs.evolve(state, archived=archived)
        case SessionStatusChanged(status=status):
            return attrs.evolve(state, status=status)
        case SessionActivityChanged(activity=activity):
            return attrs.evolve(state, activity=activity)
        case SessionMetaChanged(meta=meta):
            return attrs.evolve(state, meta=meta)
        case SessionModelChanged(model=model):
            return attrs.evolve(state, model=model)
        case SessionAgentChanged(agent=agent):
            return attrs.evolve(state, agent=agent)
        case ServerToolsChanged(tools=tools):
            return attrs.evolve(state, server_tools=tools)
        case SessionChangesetsChanged(changesets=changesets):
            return attrs.evolve(state, changesets=changesets)
        case ConfigChanged(config=changes, replace=replace):
            config = {} if replace else dict(state.config)
            for key, value in changes:
                if value:
                    config[key] = value
                else:
                    config.pop(key, None)
            return attrs.evolve(state, config=tuple(sorted(config.items())))
        case InputNeededSet(chat_id=chat_id) if chat_id not in state.input_needed:
            return attrs.evolve(state, input_needed=(*state.input_needed, chat_id))
        case InputNeededRemoved(chat_id=chat_id):
            return attrs.evolve(
                state, input_needed=tuple(c for c in state.input_needed if c != chat_id)
            )
        case SessionInputNeededSet(request=request):
            requests = _upsert(state.input_requests, request, lambda r: r.id)
            status = _input_needed_status(state.status, requests, removed=False)
            return attrs.evolve(state, input_requests=requests, status=status)
        case SessionInputNeededRemoved(id=request_id):
            kept = tuple(r for r in state.input_requests if r.id != request_id)
            if len(kept) == len(state.input_requests):
                return state
            status = _input_needed_status(state.status, kept, removed=True)
            return attrs.evolve(state, input_requests=kept, status=status)
        case SessionReady():
            return attrs.evolve(state, lifecycle=SessionLifecycle.READY)
        case SessionCreationFailed(error=error):
            return attrs.evolve(state, lifecycle=SessionLifecycle.FAILED, creation_error=error)
        case ChatAdded(summary=summary):
            return attrs.evolve(state, chats=_upsert(state.chats, summary, lambda c: c.resource))
        case ChatRemoved(chat=chat):
            kept_chats = tuple(c for c in state.chats if c.resource != chat)
            if len(kept_chats) == len(state.chats):
                return state
            default = None if state.default_chat == chat else state.default_chat
            return attrs.evolve(state, chats=kept_chats, default_chat=default)
        case ChatUpdated(chat=chat):
            chats = tuple(
                _chat_summary_updated(c, action) if c.resource == chat else c for c in state.chats
            )
            return attrs.evolve(state, chats=chats)
        case ChatsReordered(order=order):
            by_resource = {c.resource: c for c in state.chats}
            if sorted(order) != sorted(by_resource) or len(set(order)) != len(order):
                return state  # a partial, repeated or stale order changes nothing
            return attrs.evolve(state, chats=tuple(by_resource[r] for r in order))
        case DefaultChatChanged(default_chat=default_chat):
            return attrs.evolve(state, default_chat=default_chat)
        case ActiveClientSet(active_client=client):
            clients = _upsert(state.active_clients, client, lambda c: c.client_id)
            return attrs.evolve(state, active_clients=clients)
        case ActiveClientRemoved(client_id=client_id):
            clients = tuple(c for c in state.active_clients if c.client_id != client_id)
            return attrs.evolve(state, active_clients=clients)
        case WorkingDirectorySet(directory=directory):
            uri = directory_uri(directory)
            uris = [directory_uri(d) for d in state.working_directories]
            if directory in state.working_directories:
                return state
            if uri in uris:
                index = uris.index(uri)
                directories = state.working_directories
                updated = (*directories[:index], directory, *directories[index + 1 :])
                return attrs.evolve(state, working_directories=updated)
            return attrs.evolve(state, working_directories=(*state.working_directories, directory))
        case WorkingDirectoryRemoved(directory=uri):
            kept_dirs = tuple(d for d in state.working_directories if directory_uri(d) != uri)
            if len(kept_dirs) == len(state.working_directories):
                return state
            return attrs.evolve(state, working_directories=kept_dirs)
        case WorkingDirectoryReplaced(directory=uri, replacement=replacement):
            return _directory_replaced(state, uri, replacement)
        case CustomizationsChanged(customizations=customizations):
            return attrs.evolve(state, customizations=customizations)
        case CustomizationUpdated(customization=customization):
            current = state.customizations or ()
            upserted = _upsert(current, customization, _customization_id)
            return attrs.evolve(state, customizations=upserted)
        case CustomizationToggled():
            return _toggled(state, action)
        case CustomizationRemoved(id=ident):
            return _customization_removed(state, ident)
        case McpServerStateChanged(id=ident, state=server, channel=channel):
            return _mcp_server(state, ident, server, channel)
        case McpServerStartRequested(id=ident):
            return _mcp_server(state, ident, McpServerState(kind=McpServerStatus.STARTING), None)
        case McpServerStopRequested(id=ident):
            return _mcp_server(state, ident, McpServerState(kind=McpServerStatus.STOPPED), None)
    return state


def _chat_summary_updated(summary: ChatSummary, action: ChatUpdated) -> ChatSummary:
    """The fields the action carries replace the summary's; the rest stay."""
    changes = {
        field.name: getattr(action, field.name)
        for field in attrs.fields(ChatUpdated)
        if field.name not in ("session_id", "chat") and getattr(action, field.name) is not None
    }
    return attrs.evolve(summary, **changes)


def _directory_replaced(
    state: SessionState, uri: str, replacement: WorkingDirectory
) -> SessionState:
    """The directory at `uri` becomes `replacement` in its place; any other entry
    with the replacement's URI goes (so it is listed once)."""
    directories = state.working_directories
    uris = [directory_uri(d) for d in directories]
    if uri not in uris:
        return state
    index = uris.index(uri)
    new_uri = directory_uri(replacement)
    updated = tuple(
        replacement if i == index else d
        for i, d in enumerate(directories)
        if i == index or directory_uri(d) != new_uri
    )
    return attrs.evolve(state, working_directories=updated)


def _customization_id(customization: AnyCustomization) -> str | None:
    return customization.id if isinstance(customization, Customization) else customization.tag("id")


def _find_customization(
    customizations: tuple[AnyCustomization, ...], ident: str
) -> tuple[int, int | None] | None:
    """Where the customization `ident` is: (top-level index, child index or None)."""
    for index, entry in enumerate(customizations):
        if _customization_id(entry) == ident:
            return index, None
    for index, entry in enumerate(customizations):
        if isinstance(entry, Customization) and entry.children:
            for child_index, child in enumerate(entry.children):
                if _customization_id(child) == ident:
                    return index, child_index
    return None


def _replace_customization(
    state: SessionState,
    where: tuple[int, int | None],
    change: Callable[[AnyCustomization], AnyCustomization | None],
) -> SessionState:
    """`change` applied at `where`; None removes the entry."""
    top = list(state.customizations or ())
    index, child_index = where
    if child_index is None:
        changed = change(top[index])
        if changed is None:
            del top[index]
        else:
            top[index] = changed
    else:
        container = top[index]
        assert isinstance(container, Customization) and container.children is not None
        children = list(container.children)
        changed = change(children[child_index])
        if changed is None:
            del children[child_index]
        else:
            children[child_index] = changed
        top[index] = attrs.evolve(container, children=tuple(children))
    return attrs.evolve(state, customizations=tuple(top))


def _toggled(state: SessionState, action: CustomizationToggled) -> SessionState:
    where = _find_customization(state.customizations or (), action.id)
    if where is None:
        return state

    def toggle(entry: AnyCustomization) -> AnyCustomization:
        if not isinstance(entry, Customization):
            return entry
        if action.enablement is not None:
            return entry.with_enablement(action.enablement)
        if action.enabled is None:
            return entry
        return attrs.evolve(entry, enabled=action.enabled)

    return _replace_customization(state, where, toggle)


def _customization_removed(state: SessionState, ident: str) -> SessionState:
    where = _find_customization(state.customizations or (), ident)
    if where is None:
        return state
    return _replace_customization(state, where, lambda entry: None)


def _mcp_server(
    state: SessionState, ident: str, server: McpServerState, channel: str | None
) -> SessionState:
    """An MCP server customization's state and channel; a no-op for any other id."""
    where = _find_customization(state.customizations or (), ident)
    if where is None:
        return state

    def update(entry: AnyCustomization) -> AnyCustomization:
        if isinstance(entry, Unknown) or entry.type != CustomizationType.MCP_SERVER:
            return entry
        return attrs.evolve(entry, state=server, channel=channel)

    return _replace_customization(state, where, update)


def reduce_root(state: RootState, action: RootEvent, now_ms: int = 0) -> RootState:
    """The root reducer: agents and the active session count are replaced; config
    values merge into a config the root already has (`replace`: are replaced)."""
    match action:
        case AgentsChanged(agents=agents):
            return attrs.evolve(state, agents=agents)
        case ActiveSessionsChanged(active_sessions=count):
            return attrs.evolve(state, active_sessions=count)
        case RootConfigChanged(config=config, replace=replace):
            current = state.config.value if state.config is not None else None
            values = config.value
            if not isinstance(current, dict) or not isinstance(values, dict):
                return state
            old = current.get("values")
            merged = values if replace or not isinstance(old, dict) else {**old, **values}
            return attrs.evolve(state, config=type(config).of({**current, "values": merged}))
    return state

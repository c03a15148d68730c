"""What a session channel shows, and the session actions that take a client
from what it was last shown to what is true now.

`channel_state` is the session channel's state, from the session's entry,
summary and chat catalog read at one instant (`AsyncSession.view`): the
`subscribe` snapshot and the mirror server/broadcasts.py keeps per session
come from it alike. `changes(old, new)` is the session actions that carry
`old` to `new`: reducing them with `messages.reducers.reduce_session` from
`old` gives `new` (tests/server/test_session_sync.py checks this with
hypothesis).

`status` needs an extension: AHP 1.1's session reducer moves it only with
`session/isReadChanged`, `isArchivedChanged` and `inputNeededSet`/`Removed`
(upstream's types/channels-session/reducer.ts), so no 1.1 action says a
session started a turn, went idle or stopped at an error (a session's status
is its chats' aggregate; each chat's travels in `session/chatUpdated`, the
session's in `root/sessionSummaryChanged`). Where the 1.1 actions leave the
status short of the new one, `x-session/statusChanged {status}` follows them.

Nothing here reads the host: these are pure functions of what it answered.
"""

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import attrs

from agenthost.messages import versions
from agenthost.messages.commands import GetSessionViewReply
from agenthost.messages.common import directory_uri
from agenthost.messages.reducers import reduce_session
from agenthost.messages.session_events import (
    ActiveClientRemoved,
    ActiveClientSet,
    ChatAdded,
    ChatRemoved,
    ChatsReordered,
    ChatUpdated,
    ConfigChanged,
    CustomizationsChanged,
    DefaultChatChanged,
    InputNeededRemoved,
    InputNeededSet,
    IsArchivedChanged,
    IsReadChanged,
    ServerToolsChanged,
    SessionActivityChanged,
    SessionAgentChanged,
    SessionChangesetsChanged,
    SessionEvent,
    SessionInputNeededRemoved,
    SessionInputNeededSet,
    SessionMetaChanged,
    SessionModelChanged,
    SessionStatusChanged,
    SessionTitleChanged,
    WorkingDirectoryRemoved,
    WorkingDirectorySet,
)
from agenthost.messages.state import ChatSummary, SessionState
from agenthost.server.channels import chat_uri
from agenthost.server.session_config import SCHEMA
from agenthost.server.views import RESERVED_CONFIG, client_config

__all__ = ["changes", "channel_state", "for_version"]

T = TypeVar("T")


def channel_state(view: GetSessionViewReply) -> SessionState:
    """The session channel's state: the entry as clients may see it (no reserved
    config; the config's schema beside its values), the provider, the chats'
    aggregate status, the chat catalog."""
    entry = view.entry
    return attrs.evolve(
        entry,
        config=client_config(entry.config),
        provider=view.summary.provider,
        status=view.summary.status,
        chats=view.chats,
        default_chat=chat_uri(view.default_chat) if view.default_chat else None,
        config_schema=SCHEMA,
    )


def for_version(state: SessionState, version: str | None) -> SessionState:
    """The state as a peer of `version` is shown it: `inputNeeded` from 0.5.1."""
    if version is not None and not versions.at_least(version, "0.5.1"):
        return attrs.evolve(state, input_requests=())
    return state


def _listed(
    old: tuple[T, ...],
    new: tuple[T, ...],
    key: Callable[[T], Hashable],
    remove: Callable[[Hashable], SessionEvent],
    put: Callable[[T], SessionEvent],
) -> list[SessionEvent]:
    """A keyed list's actions: removals, then upserts (in place for a key
    already there, else appended). Where that would leave another order than
    `new`'s, every entry is removed and put again in `new`'s order."""
    new_keys = [key(item) for item in new]
    kept = [item for item in old if key(item) in set(new_keys)]
    out = [remove(key(item)) for item in old if key(item) not in set(new_keys)]
    kept_keys = [key(item) for item in kept]
    order = kept_keys + [k for k in new_keys if k not in set(kept_keys)]
    if order != new_keys:
        return [remove(key(item)) for item in old] + [put(item) for item in new]
    return out + [put(item) for item in new if item not in kept]


def _chat_changes(old: SessionState, new: SessionState) -> list[SessionEvent]:
    before = {c.resource: c for c in old.chats}
    after = {c.resource: c for c in new.chats}
    out: list[SessionEvent] = [ChatRemoved(chat=r) for r in before if r not in after]
    for resource, chat in after.items():
        was = before.get(resource)
        if was is None:
            out.append(ChatAdded(summary=chat))
        elif was != chat:
            out.extend(_chat_updated(was, chat))
    order = [r for r in before if r in after] + [r for r in after if r not in before]
    if order != list(after):
        out.append(ChatsReordered(order=tuple(after)))
    return out


def _chat_updated(was: ChatSummary, now: ChatSummary) -> list[SessionEvent]:
    """chatUpdated carries the fields that changed; a field that went back to
    None cannot be carried (None is "unchanged"), so the entry is set whole."""
    fields = [f.name for f in attrs.fields(ChatUpdated) if f.name not in ("session_id", "chat")]
    changed = {f: getattr(now, f) for f in fields if getattr(now, f) != getattr(was, f)}
    if any(value is None for value in changed.values()) or _other_fields_differ(was, now, fields):
        return [ChatAdded(summary=now)]
    return [ChatUpdated(chat=now.resource, **changed)] if changed else []


def _other_fields_differ(was: ChatSummary, now: ChatSummary, carried: list[str]) -> bool:
    return any(
        getattr(was, f.name) != getattr(now, f.name)
        for f in attrs.fields(ChatSummary)
        if f.name not in carried and f.name != "resource"
    )


def _config_changes(old: SessionState, new: SessionState) -> list[SessionEvent]:
    before, after = dict(old.config), dict(new.config)
    if before == after:
        return []
    changed = {k: v for k, v in after.items() if before.get(k) != v}
    removed = {k: "" for k in before if k not in after and not k.startswith(RESERVED_CONFIG)}
    return [ConfigChanged(config=tuple(sorted({**changed, **removed}.items())))]


def changes(old: SessionState, new: SessionState) -> tuple[SessionEvent, ...]:
    """The session actions that carry `old` to `new`: AHP's, then the
    extension for a status they do not reach (the module docstring)."""
    out: list[SessionEvent] = []
    if (old.title, old.user_titled) != (new.title, new.user_titled):
        out.append(SessionTitleChanged(title=new.title, by_user=new.user_titled or bool(old.title)))
    if old.read != new.read:
        out.append(IsReadChanged(read=new.read))
    if old.archived != new.archived:
        out.append(IsArchivedChanged(archived=new.archived))
    out.extend(_config_changes(old, new))
    out.extend(_chat_changes(old, new))
    kept = {c.resource for c in new.chats}
    default = old.default_chat if old.default_chat in kept else None  # chatRemoved clears it
    if default != new.default_chat:
        out.append(DefaultChatChanged(default_chat=new.default_chat))
    out.extend(
        _listed(
            old.input_needed,
            new.input_needed,
            lambda c: c,
            lambda c: InputNeededRemoved(chat_id=str(c)),
            lambda c: InputNeededSet(chat_id=c),
        )
    )
    out.extend(
        _listed(
            old.input_requests,
            new.input_requests,
            lambda r: r.id,
            lambda i: SessionInputNeededRemoved(id=str(i)),
            lambda r: SessionInputNeededSet(request=r),
        )
    )
    out.extend(
        _listed(
            old.active_clients,
            new.active_clients,
            lambda c: c.client_id,
            lambda i: ActiveClientRemoved(client_id=str(i)),
            lambda c: ActiveClientSet(active_client=c),
        )
    )
    out.extend(
        _listed(
            old.working_directories,
            new.working_directories,
            directory_uri,
            lambda u: WorkingDirectoryRemoved(directory=str(u)),
            lambda d: WorkingDirectorySet(directory=d),
        )
    )
    out.extend(_replaced(old, new))
    if out or old.status != new.status:  # an input-needed action moves it too
        reached = old
        for action in out:
            reached = reduce_session(reached, action)
        if reached.status != new.status:
            out.append(SessionStatusChanged(status=new.status))
    return tuple(out)


_WHOLE: tuple[tuple[str, Callable[[Any], SessionEvent | None]], ...] = (
    ("activity", lambda v: SessionActivityChanged(activity=v)),
    ("meta", lambda v: SessionMetaChanged(meta=v)),
    ("model", lambda v: None if v is None else SessionModelChanged(model=v)),
    ("agent", lambda v: SessionAgentChanged(agent=v)),
    ("server_tools", lambda v: None if v is None else ServerToolsChanged(tools=v)),
    ("changesets", lambda v: SessionChangesetsChanged(changesets=v)),
    ("customizations", lambda v: None if v is None else CustomizationsChanged(customizations=v)),
)
"""Fields an action replaces whole (a None it cannot carry is left as it was)."""


def _replaced(old: SessionState, new: SessionState) -> list[SessionEvent]:
    out = []
    for name, action in _WHOLE:
        value = getattr(new, name)
        if getattr(old, name) != value:
            made = action(value)
            if made is not None:
                out.append(made)
    return out

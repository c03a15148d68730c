"""What a client's dispatched action does: one handler per typed action class,
for the chat channels (`CHAT_ACTIONS`) and the session channels
(`SESSION_ACTIONS`). Adding a client-dispatchable action is one entry.

The connection decodes `dispatchAction` (messages/protocol.py's
DispatchActionParams: the action typed by its `type`, after `older_shapes`
turned an older form into the one it decodes) and queues it; `dispatch` then
takes the connection's actions one at a time, in the order they were sent.

Rules kept here (docs/protocol.md, "What the server does with dispatchAction"):
- an action for a channel that does not exist, or that the caller may not
  see, is ignored;
- an accepted action drives its side effect, and the host's event for it goes
  out with the client's origin (`ChatChannel.expecting`); an action that is
  invalid, or that the host refuses, is echoed to the sender as it was sent,
  with a rejectionReason, and changes nothing;
- removing steering the provider already holds is accepted only once the
  provider withdrew it (DESIGN.md rule 1), else echoed with a rejectionReason;
- the dispatcher outlives any one action: an unexpected error is logged (the
  action's type, never its content) and echoed as "internal error".
"""

import json
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs
import structlog

from agenthost.actors.aio import AsyncChat, AsyncSession
from agenthost.actors.chosen_ids import queued_turn
from agenthost.messages.commands import OutcomeState
from agenthost.messages.errors import AgentHostError, JsonRpcErrorCode, ValidationError
from agenthost.messages.events import (
    ChatIsArchivedChanged,
    ChatIsReadChanged,
    DraftChanged,
    InputAnswerChanged,
    InputCompleted,
    PendingMessageAdded,
    PendingMessageRemoved,
    QueuedMessagesReordered,
    ToolCallCompleted,
    ToolCallConfirmed,
    ToolCallContentChanged,
    ToolCallResultConfirmed,
    Truncated,
    TurnCancelled,
    TurnResumed,
    TurnStarted,
)
from agenthost.messages.inputs import AnswerState, InputResponseKind
from agenthost.messages.parts import UserMessage
from agenthost.messages.protocol import ActionOrigin, DispatchActionParams
from agenthost.messages.session_events import (
    ActiveClientRemoved,
    ActiveClientSet,
    ConfigChanged,
    CustomizationToggled,
    IsArchivedChanged,
    IsReadChanged,
    SessionEvent,
    SessionTitleChanged,
)
from agenthost.messages.state import PendingKind
from agenthost.messages.wire import to_wire
from agenthost.server.channels import CHAT_PREFIX, SESSION_PREFIX, ChatChannel
from agenthost.server.errors import HOST_LATE, RpcError, bad_param, invalid_params, is_not_found
from agenthost.server.refusals import REFUSED
from agenthost.server.views import RESERVED_CONFIG

if TYPE_CHECKING:
    from agenthost.server.connection import Connection

log = structlog.get_logger(__name__)


@attrs.frozen(kw_only=True)
class ChatAction:
    """What a chat action's handler acts on; `origin` as the wire carries it."""

    conn: "Connection"
    chat: AsyncChat
    channel: ChatChannel
    origin: dict[str, Any]

    @property
    def client_id(self) -> str | None:
        return self.conn.client_id


@attrs.frozen(kw_only=True)
class SessionAction:
    conn: "Connection"
    session: AsyncSession


ChatHandler = Callable[[ChatAction, Any], Awaitable[None]]
SessionHandler = Callable[[SessionAction, Any], Awaitable[SessionEvent | None]]
"""A session action's handler; what it returns goes out in the action's place."""


# -- older forms -------------------------------------------------------------------------
def older_shapes(params: Any) -> Any:
    """dispatchAction params with an action in an older form this server still
    takes, rewritten into the form its type decodes:
    - `chat/inputCompleted {requestId, answer}` (the form before 0.5, which the
      clients here send) answers the request's one question with that text;
    - `chat/pendingMessageRemoved {pendingId}` names the message by `id`."""
    action = params.get("action") if isinstance(params, dict) else None
    if not isinstance(action, dict):
        return params
    kind = action.get("type")
    if kind == "chat/inputCompleted" and "response" not in action and "answer" in action:
        rest = {k: v for k, v in action.items() if k != "answer"}
        value = {"kind": "text", "value": action["answer"]}
        answer = {"state": AnswerState.SUBMITTED.value, "value": value}
        action = {**rest, "response": InputResponseKind.ACCEPT.value, "answers": {"": answer}}
    elif kind == "chat/pendingMessageRemoved" and "id" not in action and "pendingId" in action:
        rest = {k: v for k, v in action.items() if k != "pendingId"}
        action = {**rest, "id": action["pendingId"]}
    else:
        return params
    return {**params, "action": action}


# -- dispatch ----------------------------------------------------------------------------
async def dispatch(conn: "Connection", params: DispatchActionParams, sent: Any) -> None:
    """Apply one dispatched action (`sent`: the action as the client sent it, for
    an echo). Runs on the connection's dispatch task."""
    uri = params.channel
    origin = to_wire(ActionOrigin(client_id=conn.client_id or "", client_seq=params.client_seq))
    try:
        await _dispatch(conn, uri, params.action, origin)
    except RpcError as error:
        reject(conn, uri, sent, origin, error.message)
    except AgentHostError as error:
        reject(conn, uri, sent, origin, error.message)
    except TimeoutError:
        reject(conn, uri, sent, origin, HOST_LATE)
    except Exception:  # the dispatcher must outlive any one action
        log.exception("dispatch_failed", action_type=getattr(params.action, "wire_type", "?"))
        reject(conn, uri, sent, origin, "internal error")


async def _dispatch(conn: "Connection", uri: str, action: Any, origin: dict[str, Any]) -> None:
    server = conn.server
    if uri.startswith(CHAT_PREFIX):
        try:
            session, chat = await server.registry.chat(uri[len(CHAT_PREFIX) :], conn.identity)
        except RpcError as error:
            if is_not_found(error):
                return  # an unknown channel: ignored, as the protocol says
            raise
        server.clients.touched(conn.client_id, session.id)
        chat_handler = CHAT_ACTIONS.get(type(action))
        if chat_handler is None:
            raise _not_dispatchable(action)
        channel = server.channels.followed_or_closing(await server.channels.channel(chat))
        await chat_handler(ChatAction(conn=conn, chat=chat, channel=channel, origin=origin), action)
    elif uri.startswith(SESSION_PREFIX):
        try:
            session = await server.registry.session(uri[len(SESSION_PREFIX) :], conn.identity)
        except RpcError as error:
            if is_not_found(error):
                return
            raise
        session_handler = SESSION_ACTIONS.get(type(action))
        if session_handler is None:
            raise _not_dispatchable(action)
        applied = await session_handler(SessionAction(conn=conn, session=session), action)
        sent = action if applied is None else applied
        server.summaries.client_action(session.id, sent, _origin_of(origin))
        server.summaries.may_have_changed(session.id)


def _origin_of(origin: dict[str, Any]) -> ActionOrigin:
    return ActionOrigin(client_id=origin["clientId"], client_seq=origin["clientSeq"])


def _not_dispatchable(action: Any) -> RpcError:
    """Refused: with its own reason where server/refusals.py has one."""
    reason = REFUSED.get(type(action))
    if reason is None:
        kind = getattr(action, "wire_type", None) or getattr(action, "type", "?")
        reason = f"{kind!r} cannot be dispatched by a client"
    return RpcError(JsonRpcErrorCode.INVALID_PARAMS, reason)


def reject(conn: "Connection", uri: str, action: Any, origin: Any, reason: str) -> None:
    """Echo an action to its sender, not applied, with the reason."""
    conn.server.metrics.rejected_actions += 1
    envelope = {"channel": uri, "action": action, "origin": origin, "rejectionReason": reason}
    conn.sink(uri).offer({"jsonrpc": "2.0", "method": "action", "params": envelope})


def echo_malformed(conn: "Connection", params: Any, error: ValidationError) -> bool:
    """A dispatched action that does not decode is echoed with the field it
    got wrong, when the envelope says where it goes; False if it does not."""
    if not error.field.startswith("action") or not isinstance(params, dict):
        return False
    uri, action, seq = params.get("channel"), params.get("action"), params.get("clientSeq")
    if not isinstance(uri, str) or not isinstance(action, dict):
        return False
    if not isinstance(seq, int) or isinstance(seq, bool):
        return False
    origin = {"clientId": conn.client_id, "clientSeq": seq}
    reject(conn, uri, action, origin, invalid_params(error, "invalid action").message)
    return True


# -- chat actions ------------------------------------------------------------------------
def _text(message: UserMessage) -> str:
    if not message.text.strip():
        raise bad_param("message.text", "must be a non-empty string")
    return message.text


async def _turn_started(ctx: ChatAction, action: TurnStarted) -> None:
    text = _text(action.message)
    started = time.monotonic()
    with ctx.channel.expecting(("turn", action.turn_id), ctx.origin):
        handle = await ctx.chat.send(text, client_id=ctx.client_id, turn_id=action.turn_id)
    if handle.done():  # settled without a turn: refused, or a local command
        ctx.channel.forget(("turn", action.turn_id), ctx.origin)
        outcome = handle.result(timeout=0)
        if outcome.state is OutcomeState.REJECTED and outcome.error is not None:
            raise outcome.error
        return
    ctx.conn.server.watch_turn(handle, started)


async def _turn_cancelled(ctx: ChatAction, action: TurnCancelled) -> None:
    """The running turn is cancelled, a queued one removed (answered by its
    queued message's pendingMessageRemoved); else refused saying why."""
    turn_id = action.turn_id
    queued = queued_turn(await ctx.chat.state(), turn_id)
    expected = ("cancelled", turn_id) if queued is None else ("removed", queued.id)
    with ctx.channel.expecting(expected, ctx.origin):
        await ctx.chat.cancel(turn_id, client_id=ctx.client_id)


async def _pending_set(ctx: ChatAction, action: PendingMessageAdded) -> None:
    pending = action.pending
    text = _text(pending.message)
    chat = ctx.chat
    with ctx.channel.expecting(("pending", pending.id), ctx.origin):
        if pending.kind == PendingKind.STEERING:
            await chat.steer(text, client_id=ctx.client_id, pending_id=pending.id)
        elif pending.id in {m.id for m in (await chat.state()).queued_messages}:
            await chat.edit_pending(pending.id, text)
        else:
            await chat.send(text, client_id=ctx.client_id, pending_id=pending.id)


async def _pending_removed(ctx: ChatAction, action: PendingMessageRemoved) -> None:
    with ctx.channel.expecting(("removed", action.pending_id), ctx.origin):
        removed = await ctx.chat.remove_pending(action.pending_id, client_id=ctx.client_id)
        if not removed:
            raise RpcError(
                JsonRpcErrorCode.INVALID_PARAMS, "the model already had this steering message"
            )


async def _reordered(ctx: ChatAction, action: QueuedMessagesReordered) -> None:
    with ctx.channel.expecting(("reordered",), ctx.origin):
        await ctx.chat.reorder_queue(list(action.order))


async def _truncated(ctx: ChatAction, action: Truncated) -> None:
    with ctx.channel.expecting(("truncated",), ctx.origin):
        await ctx.chat.truncate(action.turn_id)


async def _tool_confirmed(ctx: ChatAction, action: ToolCallConfirmed) -> None:
    """The user's decision on a call waiting for confirmation: approved or not,
    the option chosen among those the call offered (approved must agree with its
    kind), an edited tool input where the call is editable, and a denial's
    reason and reasonMessage (to the provider too). The host's
    chat/toolCallConfirmed answers the dispatch."""
    with ctx.channel.expecting(("confirmed", action.tool_call_id), ctx.origin):
        await ctx.chat.answer(
            action.tool_call_id,
            approved=action.approved,
            client_id=ctx.client_id,
            option=action.selected_option_id,
            edited_input=action.edited_tool_input,
            reason=action.reason,
            reason_message=action.reason_message,
        )


def _tool_result_text(action: ToolCallCompleted) -> str:
    """A client tool's result as the provider takes it: the text blocks of its
    content, else its structured content or content as JSON."""
    content = None if action.content is None else action.content.value
    if isinstance(content, list):
        texts = [b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"]
        if texts and all(isinstance(t, str) for t in texts):
            return "".join(texts)  # type: ignore[arg-type]
    if action.structured_content is not None:
        return action.structured_content.text
    return "" if content is None else json.dumps(content)


async def _tool_completed(ctx: ChatAction, action: ToolCallCompleted) -> None:
    """A client tool's result, from the client that executes it; with
    requiresResultConfirmation the model gets it once the user confirms it."""
    text = _tool_result_text(action)
    with ctx.channel.expecting(("completed", action.tool_call_id), ctx.origin):
        await ctx.chat.answer(
            action.tool_call_id,
            result=text,
            client_id=ctx.client_id,
            confirm_result=action.requires_result_confirmation,
        )


async def _tool_result_confirmed(ctx: ChatAction, action: ToolCallResultConfirmed) -> None:
    with ctx.channel.expecting(("result", action.tool_call_id), ctx.origin):
        await ctx.chat.confirm_tool_result(
            action.tool_call_id, action.approved, client_id=ctx.client_id
        )


async def _tool_content_changed(ctx: ChatAction, action: ToolCallContentChanged) -> None:
    with ctx.channel.expecting(("content", action.tool_call_id), ctx.origin):
        await ctx.chat.change_tool_content(
            action.tool_call_id, action.content.text, client_id=ctx.client_id
        )


async def _input_completed(ctx: ChatAction, action: InputCompleted) -> None:
    """Accepted with its answers (the ones clients synced count too; these
    replace theirs), declined, or cancelled (dismissed). The form before 0.5
    (one answer under the question id "") answers the request's first question.
    The host's chat/inputCompleted answers the dispatch."""
    answers = dict(action.answers or ())
    with ctx.channel.expecting(("input", action.request_id), ctx.origin):
        if action.response == InputResponseKind.DECLINE:
            await ctx.chat.answer(action.request_id, approved=False, client_id=ctx.client_id)
        elif action.response == InputResponseKind.CANCEL:
            await ctx.chat.answer(action.request_id, cancelled=True, client_id=ctx.client_id)
        elif set(answers) == {""}:
            value = answers[""].value
            raw = None if value is None else value.value.value
            text = raw if isinstance(raw, str) else json.dumps(raw)
            await ctx.chat.answer(action.request_id, answer=text, client_id=ctx.client_id)
        else:
            await ctx.chat.answer(action.request_id, answers=answers, client_id=ctx.client_id)


async def _input_answer_changed(ctx: ChatAction, action: InputAnswerChanged) -> None:
    key = ("answer", action.request_id, action.question_id)
    with ctx.channel.expecting(key, ctx.origin):
        await ctx.chat.set_input_answer(
            action.request_id, action.question_id, action.answer, client_id=ctx.client_id
        )


async def _turn_resumed(ctx: ChatAction, action: TurnResumed) -> None:
    """Run again the latest turn, stopped at a resumable error; else echoed
    with the reason. The host's chat/turnResume answers the dispatch."""
    with ctx.channel.expecting(("resume", action.turn_id), ctx.origin):
        await ctx.chat.resume(action.turn_id, client_id=ctx.client_id)


async def _chat_read_changed(ctx: ChatAction, action: ChatIsReadChanged) -> None:
    with ctx.channel.expecting(("read",), ctx.origin):
        await ctx.chat.set_flags(read=action.read, client_id=ctx.client_id)


async def _chat_archived_changed(ctx: ChatAction, action: ChatIsArchivedChanged) -> None:
    with ctx.channel.expecting(("archived",), ctx.origin):
        await ctx.chat.set_flags(archived=action.archived, client_id=ctx.client_id)


async def _draft_changed(ctx: ChatAction, action: DraftChanged) -> None:
    await ctx.chat.set_draft(action.draft)


CHAT_ACTIONS: dict[type, ChatHandler] = {
    TurnStarted: _turn_started,
    TurnCancelled: _turn_cancelled,
    PendingMessageAdded: _pending_set,
    PendingMessageRemoved: _pending_removed,
    QueuedMessagesReordered: _reordered,
    Truncated: _truncated,
    ToolCallConfirmed: _tool_confirmed,
    ToolCallCompleted: _tool_completed,
    ToolCallResultConfirmed: _tool_result_confirmed,
    ToolCallContentChanged: _tool_content_changed,
    InputCompleted: _input_completed,
    InputAnswerChanged: _input_answer_changed,
    DraftChanged: _draft_changed,
    TurnResumed: _turn_resumed,
    ChatIsReadChanged: _chat_read_changed,
    ChatIsArchivedChanged: _chat_archived_changed,
}
"""Chat actions a client may dispatch; any other is echoed with a rejectionReason."""


# -- session actions ---------------------------------------------------------------------
async def _title_changed(ctx: SessionAction, action: SessionTitleChanged) -> None:
    await ctx.session.rename(action.title)


async def _read_changed(ctx: SessionAction, action: IsReadChanged) -> None:
    if not action.read:
        raise RpcError(JsonRpcErrorCode.INVALID_PARAMS, "only the host marks a session unread")
    await ctx.session.mark_read()


async def _archived_changed(ctx: SessionAction, action: IsArchivedChanged) -> None:
    await (ctx.session.archive() if action.archived else ctx.session.unarchive())


async def _config_changed(ctx: SessionAction, action: ConfigChanged) -> None:
    if any(key.startswith(RESERVED_CONFIG) for key, _ in action.config):
        raise bad_param("config", f"{RESERVED_CONFIG!r} keys are reserved")
    await ctx.session.set_config(dict(action.config))


async def _customization_toggled(ctx: SessionAction, action: CustomizationToggled) -> SessionEvent:
    """One of the session's contributions on or off for this session; the host's
    action (`enabled` and `enablement` both set) is what goes out, with the
    dispatch's origin. An unknown id, or one that cannot be turned off, is
    echoed with the host's reason."""
    applied: SessionEvent = await ctx.session.apply_customization_toggle(
        action, client_id=ctx.conn.client_id
    )
    return applied


def own_client(conn: "Connection", client_id: str, field: str = "clientId") -> str:
    """`client_id`, if it is the connection's own; else refused saying why."""
    if conn.client_id is None:
        raise bad_param(field, "this connection has no clientId (initialize gives one)")
    if client_id != conn.client_id:
        raise bad_param(field, "a client sets or removes only its own activeClient")
    return client_id


async def _active_client_set(ctx: SessionAction, action: ActiveClientSet) -> None:
    """The dispatching client executes these tools for the session (calls to them
    wait for its chat/toolCallComplete); it leaves them when it goes (the
    client grace, server/clients.py) or removes itself."""
    client = action.active_client
    client_id = own_client(ctx.conn, client.client_id)
    await ctx.session.set_client_tools(client_id, client.tools, shown=client)
    ctx.conn.server.clients.touched(client_id, ctx.session.id)


async def _active_client_removed(ctx: SessionAction, action: ActiveClientRemoved) -> None:
    """The client's tools leave the session: every call it left parked fails."""
    await ctx.session.remove_client(own_client(ctx.conn, action.client_id))


SESSION_ACTIONS: dict[type, SessionHandler] = {
    SessionTitleChanged: _title_changed,
    IsReadChanged: _read_changed,
    IsArchivedChanged: _archived_changed,
    ConfigChanged: _config_changed,
    CustomizationToggled: _customization_toggled,
    ActiveClientSet: _active_client_set,
    ActiveClientRemoved: _active_client_removed,
}
"""Session actions a client may dispatch; after one applies it goes out on the
session channel with its origin, and the owner's root hears of the summary."""

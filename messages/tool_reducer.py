"""The tool-call state machine of the chat reducer (reducers.py's invariants
3 to 6): each action moves one tool call of the active turn, or does nothing
when it does not fit the call's status."""

from collections.abc import Callable
from typing import Any

import attrs

from agenthost.messages.common import ContributorKind
from agenthost.messages.events import (
    ToolCallAuthRequired,
    ToolCallAuthResolved,
    ToolCallCompleted,
    ToolCallConfirmed,
    ToolCallContentChanged,
    ToolCallDelta,
    ToolCallReady,
    ToolCallResultConfirmed,
    ToolCallStarted,
    ToolCallSubagentStarted,
)
from agenthost.messages.reduction import handles, with_active, with_status
from agenthost.messages.state import (
    ChatState,
    ConfirmationReason,
    ResponsePart,
    ToolCall,
    ToolCallPart,
    ToolCallStatus,
)


def _base(call: ToolCall, meta: Any = None) -> dict[str, Any]:
    """What every tool-call state has: its identity (and ours, the subagent's chat)."""
    return {
        "tool_call_id": call.tool_call_id,
        "tool_name": call.tool_name,
        "display_name": call.display_name,
        "intention": call.intention,
        "contributor": call.contributor,
        "meta": call.meta if meta is None else meta,
        "subagent_chat_id": call.subagent_chat_id,
    }


def cancelled(call: ToolCall, reason: str, meta: Any = None, **changes: Any) -> ToolCall:
    """AHP's cancelled state: identity, invocation, input, and why."""
    streaming = call.status is ToolCallStatus.STREAMING
    return ToolCall(
        **_base(call, meta),
        status=ToolCallStatus.CANCELLED,
        invocation_message="" if call.invocation_message is None else call.invocation_message,
        tool_input=None if streaming else call.tool_input,
        reason=reason,
        **changes,
    )


def _confirmed_fields(call: ToolCall) -> dict[str, Any]:
    """What a call past its confirmation carries from state to state."""
    return {
        "invocation_message": call.invocation_message,
        "tool_input": call.tool_input,
        "confirmed": call.confirmed,
        "selected_option": call.selected_option,
        "started_at": call.started_at,
    }


def skip_unfinished(parts: tuple[ResponsePart, ...]) -> tuple[ResponsePart, ...]:
    """A turn's end: every tool call not in a terminal state is cancelled (skipped)."""
    return tuple(
        [
            attrs.evolve(part, tool_call=cancelled(part.tool_call, "skipped"))
            if isinstance(part, ToolCallPart) and not part.tool_call.status.terminal
            else part
            for part in parts
        ]
    )


def _update_tool(
    state: ChatState, turn_id: str, tool_call_id: str, change: Callable[[ToolCall], ToolCall | None]
) -> ChatState:
    """Apply `change` to one tool call of the active turn; None means "does not fit"."""
    active = state.active_turn
    if active is None or active.id != turn_id:
        return state
    parts = list(active.response_parts)
    for index, part in enumerate(parts):
        if isinstance(part, ToolCallPart) and part.tool_call.tool_call_id == tool_call_id:
            changed = change(part.tool_call)
            if changed is None:
                return state
            parts[index] = attrs.evolve(part, tool_call=changed)
            updated = attrs.evolve(
                state, active_turn=attrs.evolve(active, response_parts=tuple(parts))
            )
            return with_status(updated)
    return state


@handles(ToolCallStarted)
def _tool_started(state: ChatState, action: ToolCallStarted, now_ms: int) -> ChatState:
    active = state.active_turn
    if active is None or active.id != action.turn_id:
        return state
    if any(
        isinstance(p, ToolCallPart) and p.id == action.tool_call_id for p in active.response_parts
    ):
        return state
    call = ToolCall(
        tool_call_id=action.tool_call_id,
        tool_name=action.tool_name,
        display_name=action.display_name,
        intention=action.intention,
        contributor=action.contributor,
        meta=action.meta,
    )
    return with_active(
        state, action.turn_id, response_parts=(*active.response_parts, ToolCallPart(tool_call=call))
    )


@handles(ToolCallDelta)
def _tool_delta(state: ChatState, action: ToolCallDelta, now_ms: int) -> ChatState:
    def change(call: ToolCall) -> ToolCall | None:
        if call.status is not ToolCallStatus.STREAMING:
            return None
        streamed = call.partial_input
        if action.content is not None:
            streamed = (streamed or "") + action.content
        return attrs.evolve(
            call,
            partial_input=streamed,
            invocation_message=action.invocation_message or call.invocation_message,
            meta=action.meta or call.meta,
        )

    return _update_tool(state, action.turn_id, action.tool_call_id, change)


def _refined_contributor(call: ToolCall, action: ToolCallReady) -> Any:
    """toolCallReady may refine who contributes a call, never who executes it: a
    client's call stays that client's, and no call becomes a client's late."""
    current, offered = call.contributor, action.contributor
    if offered is None:
        return current
    if current is not None and current.kind == ContributorKind.CLIENT:
        same = offered.kind == ContributorKind.CLIENT and offered.client_id == current.client_id
        return offered if same else current
    return current if offered.kind == ContributorKind.CLIENT else offered


@handles(ToolCallReady)
def _tool_ready(state: ChatState, action: ToolCallReady, now_ms: int) -> ChatState:
    ready_from = (
        ToolCallStatus.STREAMING,
        ToolCallStatus.RUNNING,
        ToolCallStatus.PENDING_CONFIRMATION,
    )

    def change(call: ToolCall) -> ToolCall | None:
        if call.status not in ready_from:
            return None
        base = _base(call, action.meta)
        base["contributor"] = _refined_contributor(call, action)
        base["intention"] = action.intention or call.intention
        streaming = call.status is ToolCallStatus.STREAMING
        tool_input = action.tool_input
        if tool_input is None and not streaming:
            tool_input = call.tool_input
        if action.confirmed:
            return ToolCall(
                **base,
                status=ToolCallStatus.RUNNING,
                invocation_message=action.invocation_message,
                tool_input=tool_input,
                confirmed=action.confirmed,
                started_at=action.started_at or call.started_at,
            )
        pending = call.status is ToolCallStatus.PENDING_CONFIRMATION

        def kept(new: Any, old: Any) -> Any:
            return new if new is not None or not pending else old

        return ToolCall(
            **base,
            status=ToolCallStatus.PENDING_CONFIRMATION,
            invocation_message=action.invocation_message,
            tool_input=tool_input,
            confirmation_title=kept(action.confirmation_title, call.confirmation_title),
            risk_assessment=kept(action.risk_assessment, call.risk_assessment),
            edits=kept(action.edits, call.edits),
            editable=kept(action.editable, call.editable),
            options=kept(action.options, call.options),
            started_at=action.started_at or call.started_at,
        )

    return _update_tool(state, action.turn_id, action.tool_call_id, change)


@handles(ToolCallConfirmed)
def _tool_confirmed(state: ChatState, action: ToolCallConfirmed, now_ms: int) -> ChatState:
    def change(call: ToolCall) -> ToolCall | None:
        if call.status is not ToolCallStatus.PENDING_CONFIRMATION:
            return None
        selected = next((o for o in call.options or () if o.id == action.selected_option_id), None)
        if action.approved:
            edited = action.edited_tool_input
            inline = call.tool_input is None or isinstance(call.tool_input, str)
            return ToolCall(
                **_base(call, action.meta),
                status=ToolCallStatus.RUNNING,
                invocation_message=call.invocation_message,
                tool_input=edited if edited is not None and inline else call.tool_input,
                confirmed=action.confirmed or ConfirmationReason.USER_ACTION.value,
                selected_option=selected,
                started_at=call.started_at,
            )
        return cancelled(
            call,
            action.reason or "denied",
            action.meta,
            reason_message=action.reason_message,
            user_suggestion=action.user_suggestion,
            selected_option=selected,
        )

    return _update_tool(state, action.turn_id, action.tool_call_id, change)


@handles(ToolCallCompleted)
def _tool_completed(state: ChatState, action: ToolCallCompleted, now_ms: int) -> ChatState:
    def change(call: ToolCall) -> ToolCall | None:
        status = call.status
        if status is ToolCallStatus.AUTH_REQUIRED and action.success:
            return None  # it never ran after its challenge: only a failure ends it
        if status not in (
            ToolCallStatus.RUNNING,
            ToolCallStatus.PENDING_CONFIRMATION,
            ToolCallStatus.AUTH_REQUIRED,
        ):
            return None
        fields = _confirmed_fields(call)
        if status is ToolCallStatus.PENDING_CONFIRMATION:  # done without asking
            fields.update(confirmed=ConfirmationReason.NOT_NEEDED.value, selected_option=None)
        content = call.content if status is ToolCallStatus.AUTH_REQUIRED else None
        confirm = action.requires_result_confirmation and status is not ToolCallStatus.AUTH_REQUIRED
        return ToolCall(
            **_base(call, action.meta),
            **fields,
            status=(
                ToolCallStatus.PENDING_RESULT_CONFIRMATION if confirm else ToolCallStatus.COMPLETED
            ),
            success=action.success,
            past_tense_message=action.past_tense_message,
            content=action.content if action.content is not None else content,
            structured_content=action.structured_content,
            error=action.error,
            duration=action.duration,
        )

    return _update_tool(state, action.turn_id, action.tool_call_id, change)


@handles(ToolCallResultConfirmed)
def _tool_result_confirmed(
    state: ChatState, action: ToolCallResultConfirmed, now_ms: int
) -> ChatState:
    def change(call: ToolCall) -> ToolCall | None:
        if call.status is not ToolCallStatus.PENDING_RESULT_CONFIRMATION:
            return None
        if action.approved:
            return attrs.evolve(
                call, status=ToolCallStatus.COMPLETED, meta=action.meta or call.meta
            )
        return cancelled(call, "result-denied", action.meta, selected_option=call.selected_option)

    return _update_tool(state, action.turn_id, action.tool_call_id, change)


@handles(ToolCallContentChanged)
def _tool_content(state: ChatState, action: ToolCallContentChanged, now_ms: int) -> ChatState:
    def change(call: ToolCall) -> ToolCall | None:
        if call.status is not ToolCallStatus.RUNNING:
            return None
        return attrs.evolve(call, content=action.content, meta=action.meta or call.meta)

    return _update_tool(state, action.turn_id, action.tool_call_id, change)


@handles(ToolCallAuthRequired)
def _tool_auth_required(state: ChatState, action: ToolCallAuthRequired, now_ms: int) -> ChatState:
    def change(call: ToolCall) -> ToolCall | None:
        contributor = call.contributor
        if call.status is not ToolCallStatus.RUNNING:
            return None
        if contributor is None or contributor.kind != ContributorKind.MCP:
            return None  # only an MCP server's call can wait for authentication
        return ToolCall(
            **_base(call, action.meta),
            **_confirmed_fields(call),
            status=ToolCallStatus.AUTH_REQUIRED,
            content=call.content,
            auth=action.auth,
        )

    return _update_tool(state, action.turn_id, action.tool_call_id, change)


@handles(ToolCallAuthResolved)
def _tool_auth_resolved(state: ChatState, action: ToolCallAuthResolved, now_ms: int) -> ChatState:
    def change(call: ToolCall) -> ToolCall | None:
        if call.status is not ToolCallStatus.AUTH_REQUIRED:
            return None
        return ToolCall(
            **_base(call, action.meta),
            **_confirmed_fields(call),
            status=ToolCallStatus.RUNNING,
            content=call.content,
        )

    return _update_tool(state, action.turn_id, action.tool_call_id, change)


@handles(ToolCallSubagentStarted)
def _tool_subagent(state: ChatState, action: ToolCallSubagentStarted, now_ms: int) -> ChatState:
    def change(call: ToolCall) -> ToolCall | None:
        return attrs.evolve(call, subagent_chat_id=action.subagent_chat_id)

    return _update_tool(state, action.turn_id, action.tool_call_id, change)

"""What Claude Code asks through the SDK's `can_use_tool` callback, as the
host's requests: a permission for a tool call, or, for its AskUserQuestion
tool, the questions it asks the user.

Runs on the claude provider loop (the SDK calls `can_use_tool` there).
Invariants:
1. A permission offers "allow" (once), one "remember" option per permission
   update the CLI suggests (the suggestion goes back with the allow), and
   "deny"; it is editable, and an edited input is the input the tool runs with.
2. AskUserQuestion's questions (each with its options, several where it is
   multi-select, freeform always: the CLI takes other text) are the host's
   user-input request; the answer goes back as the CLI's own answer shape
   (its input, with `answers`: question text -> the chosen labels, comma
   separated). A declined question is a deny.
3. The tool call is announced (ToolCallStarted) once, before its request.
"""

import json
import uuid
from collections.abc import Sequence
from typing import Any

from agenthost.messages.common import ConfirmationOption, ConfirmationOptionKind
from agenthost.messages.inputs import InputOption, InputQuestion, InputQuestionKind, chosen
from agenthost.messages.provider import (
    HostRequestKind,
    HostRequestOpened,
    ProviderAnswer,
    ProviderEvent,
)
from agenthost.providers.base import Emit, HostRequests
from agenthost.providers.claude_turns import ClaudeTurns, tool_started

try:
    import claude_agent_sdk as sdk  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # the `claude` extra is not installed: ClaudeProvider() says so
    sdk = None  # type: ignore[assignment,unused-ignore]

QUESTIONS_TOOL = "AskUserQuestion"
ALLOW = ConfirmationOption(id="allow", label="Allow once", kind=ConfirmationOptionKind.APPROVE)
DENY = ConfirmationOption(id="deny", label="Deny", kind=ConfirmationOptionKind.DENY)
DENIED = "The user denied this tool call."


class ClaudeRequests:
    def __init__(self, turns: ClaudeTurns, emit: Emit) -> None:
        self._turns = turns
        self._emit = emit
        self.waiting = HostRequests()

    async def can_use_tool(self, tool_name: str, tool_input: dict[str, Any], context: Any) -> Any:
        """The SDK's permission callback."""
        events: list[ProviderEvent] = self._turns.begin(())
        run = self._turns.run
        assert run is not None
        call_id = context.tool_use_id or f"permission-{uuid.uuid4().hex}"
        asks = tool_name == QUESTIONS_TOOL
        if call_id not in run.tools:
            run.tools.add(call_id)
            events.append(
                tool_started(run.key, call_id, tool_name, tool_input, permission=not asks)
            )
        for event in events:
            self._emit(event)
        if asks:
            return await self._questions(run.key, call_id, tool_input)
        suggestions: Sequence[Any] = getattr(context, "suggestions", None) or ()
        options = (ALLOW, *(_remember(i, s) for i, s in enumerate(suggestions, 1)), DENY)
        request = HostRequestOpened(
            turn_id=run.key,
            request_id=call_id,
            kind=HostRequestKind.PERMISSION,
            tool_call_id=call_id,
            tool_name=tool_name,
            arguments=json.dumps(tool_input),
            options=options,
            editable=True,
        )
        answer = await self.waiting.ask(request, self._emit)
        if not answer.approved or answer.error is not None:  # the user's words, if any
            return sdk.PermissionResultDeny(message=answer.error or answer.reason_message or DENIED)
        updated = tool_input if answer.edited_input is None else json.loads(answer.edited_input)
        remembered = _chosen_suggestion(answer, suggestions)
        return sdk.PermissionResultAllow(
            updated_input=updated,
            updated_permissions=None if remembered is None else [remembered],
        )

    async def _questions(self, key: str, call_id: str, tool_input: dict[str, Any]) -> Any:
        """AskUserQuestion: the user's answers as the CLI's own answer shape (rule 2)."""
        asked = _asked(tool_input.get("questions") or [])
        request = HostRequestOpened(
            turn_id=key,
            request_id=call_id,
            kind=HostRequestKind.USER_INPUT,
            tool_call_id=call_id,
            tool_name=QUESTIONS_TOOL,
            questions=tuple(question for question, _ in asked),
        )
        answer = await self.waiting.ask(request, self._emit)
        if answer.approved is False or answer.error is not None:
            return sdk.PermissionResultDeny(message=answer.error or "The user declined to answer.")
        given = dict(answer.answers or ())
        answers = {
            text: ", ".join(chosen(question, given.get(question.id)))
            for question, text in asked
            if question.id in given
        }
        return sdk.PermissionResultAllow(updated_input={**tool_input, "answers": answers})


def _asked(questions: Sequence[Any]) -> list[tuple[InputQuestion, str]]:
    """Each AskUserQuestion question as ours, beside its text (the answers' key)."""
    asked = []
    for i, raw in enumerate(q for q in questions if isinstance(q, dict)):
        text = str(raw.get("question", ""))
        options = tuple(
            InputOption(
                id=f"q{i + 1}-{j}",
                label=str(option.get("label", "")),
                description=option.get("description"),
            )
            for j, option in enumerate(raw.get("options") or [], 1)
            if isinstance(option, dict)
        )
        kind = (
            InputQuestionKind.MULTI_SELECT
            if raw.get("multiSelect")
            else InputQuestionKind.SINGLE_SELECT
        )
        if not options:
            kind = InputQuestionKind.TEXT
        question = InputQuestion(
            id=f"q{i + 1}",
            kind=kind,
            message=text,
            title=raw.get("header"),
            options=options or None,
            allow_freeform_input=True if options else None,
        )
        asked.append((question, text))
    return asked


def _remember(index: int, suggestion: Any) -> ConfirmationOption:
    return ConfirmationOption(
        id=f"remember-{index}",
        label=f"Allow, and {_described(suggestion)}",
        kind=ConfirmationOptionKind.APPROVE,
    )


def _described(suggestion: Any) -> str:
    """A permission update the CLI suggests, in words."""
    where = getattr(suggestion, "destination", None) or "session"
    kind = getattr(suggestion, "type", "")
    rules = getattr(suggestion, "rules", None) or []
    named = ", ".join(
        f"{r.tool_name}({r.rule_content})" if getattr(r, "rule_content", None) else r.tool_name
        for r in rules
    )
    if kind == "setMode":
        return f"switch to {getattr(suggestion, 'mode', '')} mode ({where})"
    if kind == "addDirectories":
        return f"allow {', '.join(getattr(suggestion, 'directories', None) or [])} ({where})"
    return f"always allow {named or 'this'} ({where})"


def _chosen_suggestion(answer: ProviderAnswer, suggestions: Sequence[Any]) -> Any:
    prefix = "remember-"
    if answer.option is None or not answer.option.startswith(prefix):
        return None
    index = int(answer.option[len(prefix) :]) - 1
    return suggestions[index] if 0 <= index < len(suggestions) else None

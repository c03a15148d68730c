"""What the Copilot CLI asks of its client, as the host's requests: permissions
(with the decisions the CLI takes as confirmation options), the model's
questions (ask_user, with its choices) and calls to client tools.

A plain object the CopilotAdapter holds (its loop's thread only); the SDK
calls its handlers there. Each becomes a HostRequestOpened and waits for the
host's ProviderAnswer. Invariants:
1. A permission offers "approve-once" and "reject", and "approve-for-session"
   only where the CLI says it can take one (`canOfferSessionApproval`) and the
   request's kind has a session approval to remember; the option chosen is the
   decision the CLI gets.
2. A question with choices is one select question (freeform where the CLI
   allows it); the answer the CLI gets is the choice's text, and whether it
   was freeform. A declined question is an error to the CLI's ask_user tool.
3. A tool call is announced (ToolCallStarted) once, before its request.
"""

import json
import uuid
from collections.abc import Callable
from typing import Any

from copilot import Tool, ToolInvocation, ToolResult
from copilot.generated.rpc import (
    PermissionDecisionApproveForSession,
    PermissionDecisionApproveForSessionApprovalCommands,
    PermissionDecisionApproveForSessionApprovalCustomTool,
    PermissionDecisionApproveForSessionApprovalMCP,
    PermissionDecisionApproveForSessionApprovalRead,
    PermissionDecisionApproveForSessionApprovalWrite,
)
from copilot.rpc import PermissionDecisionApproveOnce, PermissionDecisionReject
from copilot.session import (
    PermissionInvocation,
    PermissionRequestResult,
    UserInputRequest,
    UserInputResponse,
)
from copilot.session_events import PermissionRequest

from agenthost.messages.common import ConfirmationOption, ConfirmationOptionKind
from agenthost.messages.inputs import InputOption, InputQuestion, InputQuestionKind, chosen
from agenthost.messages.provider import (
    HostRequestKind,
    HostRequestOpened,
    ProviderAnswer,
    ToolCallStarted,
)
from agenthost.messages.state import ClientTool
from agenthost.providers.base import Emit, HostRequests

ONCE = ConfirmationOption(
    id="approve-once", label="Allow once", kind=ConfirmationOptionKind.APPROVE
)
SESSION = ConfirmationOption(
    id="approve-for-session", label="Allow for this session", kind=ConfirmationOptionKind.APPROVE
)
REJECT = ConfirmationOption(id="reject", label="Deny", kind=ConfirmationOptionKind.DENY)
QUESTION = "answer"  # the id of ask_user's one question


class CopilotRequests:
    def __init__(self, emit: Emit, key: Callable[[], str | None], announced: set[str]) -> None:
        self._emit = emit
        self._key = key  # the host run the CLI works on now
        self._announced = announced  # tool call ids the host has heard of (the adapter's)
        self.waiting = HostRequests()

    async def on_permission(
        self, request: PermissionRequest, invocation: PermissionInvocation
    ) -> PermissionRequestResult:
        """The CLI asks before a tool runs: the host's permission request (rule 1)."""
        tool_call_id = getattr(request, "tool_call_id", None) or uuid.uuid4().hex
        name = _permission_subject(request)
        key = self._key() or ""
        arguments = json_text(request.to_dict())
        self._announce(key, tool_call_id, name, arguments, permission=True)
        session = _session_approval(request)
        options = (ONCE, SESSION, REJECT) if session is not None else (ONCE, REJECT)
        reply = await self._ask(
            HostRequestOpened(
                turn_id=key,
                request_id=tool_call_id,
                kind=HostRequestKind.PERMISSION,
                tool_call_id=tool_call_id,
                tool_name=name,
                arguments=arguments,
                options=options,
            )
        )
        if not reply.approved or reply.error is not None:
            return PermissionDecisionReject(feedback=reply.error or reply.reason_message)
        if reply.option == SESSION.id and session is not None:
            return session
        return PermissionDecisionApproveOnce(approved_interactively=True)

    async def on_user_input(
        self, request: UserInputRequest, invocation: dict[str, str]
    ) -> UserInputResponse:
        """The model asks the user (its ask_user tool), with its choices (rule 2).

        Raises:
            RuntimeError: the host answered without an answer (declined, or the
                turn is over); the SDK reports it to the CLI as the request's error.
        """
        question = _question(request)
        reply = await self._ask(
            HostRequestOpened(
                turn_id=self._key() or "",
                request_id=uuid.uuid4().hex,
                kind=HostRequestKind.USER_INPUT,
                question=request.get("question", ""),
                questions=(question,),
            )
        )
        answered = dict(reply.answers or ()).get(QUESTION)
        words = chosen(question, answered)
        answer = ", ".join(words) if words else reply.answer
        if answer is None or reply.approved is False:
            raise RuntimeError(reply.error or "the user gave no answer")
        return {"answer": answer, "wasFreeform": answer not in request.get("choices", [])}

    def client_tool(self, tool: ClientTool) -> Tool:
        """A client tool, declared to the CLI; its calls wait for the client's result."""

        async def call(invocation: ToolInvocation) -> ToolResult:
            key = self._key() or ""
            arguments = json_text(invocation.arguments)
            self._announce(key, invocation.tool_call_id, tool.name, arguments)
            reply = await self._ask(
                HostRequestOpened(
                    turn_id=key,
                    request_id=invocation.tool_call_id,
                    kind=HostRequestKind.CLIENT_TOOL,
                    tool_call_id=invocation.tool_call_id,
                    tool_name=tool.name,
                    arguments=arguments,
                )
            )
            if reply.error is not None:
                return ToolResult(
                    text_result_for_llm=reply.error, result_type="failure", error=reply.error
                )
            return ToolResult(text_result_for_llm=reply.result or "", result_type="success")

        return Tool(
            name=tool.name,
            description=tool.description,
            handler=call,
            parameters=_load(tool.parameters),
            skip_permission=True,  # the client that runs it decides
        )

    def _announce(
        self, key: str, call_id: str, name: str, arguments: str, *, permission: bool = False
    ) -> None:
        if call_id in self._announced:  # its tool.execution_start came first
            return
        self._announced.add(call_id)
        self._emit(
            ToolCallStarted(
                turn_id=key,
                tool_call_id=call_id,
                name=name,
                arguments=arguments,
                needs_permission=permission,
            )
        )

    async def _ask(self, request: HostRequestOpened) -> ProviderAnswer:
        return await self.waiting.ask(request, self._emit)


def _session_approval(request: PermissionRequest) -> PermissionDecisionApproveForSession | None:
    """What "approve for this session" remembers for this request, where the CLI
    offers it and its kind has one; None: it offers approve-once and reject only."""
    if not getattr(request, "can_offer_session_approval", False):
        return None
    approval: Any
    match request.kind:
        case "shell":
            identifiers = [c.identifier for c in getattr(request, "commands", ())]
            approval = PermissionDecisionApproveForSessionApprovalCommands(identifiers)
        case "write":
            approval = PermissionDecisionApproveForSessionApprovalWrite()
        case "read":
            approval = PermissionDecisionApproveForSessionApprovalRead()
        case "mcp":
            approval = PermissionDecisionApproveForSessionApprovalMCP(
                server_name=getattr(request, "server_name", ""),
                tool_name=getattr(request, "tool_name", None),
            )
        case "custom-tool":
            approval = PermissionDecisionApproveForSessionApprovalCustomTool(
                tool_name=getattr(request, "tool_name", "")
            )
        case "url":
            return PermissionDecisionApproveForSession(domain=_domain(getattr(request, "url", "")))
        case _:
            return None
    return PermissionDecisionApproveForSession(approval=approval)


def _domain(url: str) -> str | None:
    from urllib.parse import urlsplit

    return urlsplit(url).hostname or None


def _question(request: UserInputRequest) -> InputQuestion:
    choices = request.get("choices") or []
    text = request.get("question", "")
    if not choices:
        return InputQuestion(id=QUESTION, kind=InputQuestionKind.TEXT, message=text)
    return InputQuestion(
        id=QUESTION,
        kind=InputQuestionKind.SINGLE_SELECT,
        message=text,
        options=tuple(InputOption(id=f"c{i}", label=c) for i, c in enumerate(choices, 1)),
        allow_freeform_input=request.get("allowFreeform", True),
    )


def _permission_subject(request: PermissionRequest) -> str:
    for name in ("tool_name", "full_command_text", "url", "path", "file_name"):
        value = getattr(request, name, None)
        if isinstance(value, str) and value:
            return value
    return str(getattr(request, "kind", "permission"))


def json_text(value: Any) -> str:
    try:
        return json.dumps(value if value is not None else {})
    except (TypeError, ValueError):
        return json.dumps(str(value))


def _load(parameters: str) -> dict[str, Any] | None:
    loaded = json.loads(parameters or "{}")
    return loaded if isinstance(loaded, dict) and loaded else None

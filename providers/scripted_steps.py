"""The scripted provider's script: the steps a scripted reply is made of.

Frozen values, one per thing the scripted model does (say, think, wait, fail,
call a tool, call an MCP tool that needs a token, ask the user, spawn a
subagent); ScriptedAdapter plays them in
order (providers/scripted_adapter.py). An unscripted prompt is answered
`echo_reply(prompt)` in `echo_steps(...)`. Every step is deterministic: what
it emits depends only on the script and the host's answers.
"""

import attrs

from agenthost.messages.common import ConfirmationOption
from agenthost.messages.inputs import InputOption, InputQuestion, InputQuestionKind

ANSWER = "answer"
"""The id of an AskUser's one question."""


@attrs.frozen
class Say:
    """Stream `text` as one delta."""

    text: str


@attrs.frozen
class SayEach:
    """Stream each of `texts` as a delta of its own, one step each (the echo reply
    of an unscripted prompt, paced by no pause)."""

    texts: tuple[str, ...]


@attrs.frozen
class Gate:
    """Wait until `provider.open(name)`; an opened gate stays open. The model
    reads the steering it was given once the gate opens, unless
    `reads_steering=False` (it then reads it at its next step boundary)."""

    name: str
    reads_steering: bool = True


@attrs.frozen
class Pause:
    """Paced delivery: wait on the provider's loop, never blocking a thread."""

    seconds: float


@attrs.frozen
class Crash:
    """The provider connection fails."""


@attrs.frozen
class DropCompletion:
    """The call resolves but no terminal event ever comes."""


@attrs.frozen
class NoFinishReason:
    """The reply ends without a finish reason (no final message, only idle)."""


@attrs.frozen
class Reject:
    """The send call fails with `message`. `before_start`: the provider never
    took the turn (else it had taken it). `resumable`: the error says the turn
    may be resumed (AHP's chat/turnResume), as an overloaded backend's would."""

    message: str
    before_start: bool = False
    resumable: bool = False


@attrs.frozen
class Think:
    """Stream `text` as reasoning (the model's thinking), apart from its reply."""

    text: str


@attrs.frozen
class ToolCall:
    """A tool the model runs; with `needs_permission` it first asks the host,
    offering `options` (an option of kind deny is a denial) and, where
    `editable`, taking an edited input, which the tool then runs with (its
    result says what it ran with). With `chunks`, the model streams the input
    first, in those pieces (they join into `arguments`), waiting at
    `stream_gate` (if given) after the first."""

    name: str
    arguments: str = "{}"
    needs_permission: bool = True
    options: tuple[ConfirmationOption, ...] = ()
    editable: bool = False
    chunks: tuple[str, ...] = ()
    stream_gate: str | None = None


@attrs.frozen
class AuthToolCall:
    """A tool of the MCP server `server` that needs a token for the protected
    `resource` (with `scopes`): the model runs it, the server challenges it,
    and the call waits until the host hands it a token for that resource (or
    the turn ends). With `accepts`, only that token works: any other is
    challenged again and the call waits once more; without it any token
    does. Then the call runs and completes (its result names the resource,
    never the token). With `crash_gate`, the provider connection fails if
    that gate opens while the call waits (a backend that dies meanwhile)."""

    name: str
    resource: str
    server: str = "mcp"
    scopes: tuple[str, ...] = ()
    arguments: str = "{}"
    accepts: str | None = attrs.field(default=None, repr=False)
    crash_gate: str | None = None


@attrs.frozen
class AskUser:
    """The model asks the user a question and waits for the answer; with
    `choices`, one of them (any text too where `freeform`; several where
    `several`). The model reads the answer in words (a choice's label)."""

    question: str
    choices: tuple[str, ...] = ()
    freeform: bool = True
    several: bool = False

    def asked(self) -> InputQuestion:
        """The question as the host gets it (choice ids c1, c2, ...)."""
        if not self.choices:
            return InputQuestion(id=ANSWER, kind=InputQuestionKind.TEXT, message=self.question)
        kind = InputQuestionKind.MULTI_SELECT if self.several else InputQuestionKind.SINGLE_SELECT
        return InputQuestion(
            id=ANSWER,
            kind=kind,
            message=self.question,
            options=tuple(
                InputOption(id=f"c{i}", label=label) for i, label in enumerate(self.choices, 1)
            ),
            allow_freeform_input=self.freeform,
        )


@attrs.frozen
class ClientToolCall:
    """The model calls a tool a client executes, and waits for its result.
    With `gate`, the call is announced first and the request waits for the gate."""

    tool: str
    arguments: str = "{}"
    gate: str | None = None


@attrs.frozen
class SpawnSubagent:
    """A tool call spawns a subagent that answers `prompt` (its own script, or
    the echo). `background`: the call returns at once and the subagent runs on.
    `drop_end`: the subagent's own end never arrives."""

    prompt: str
    background: bool = False
    drop_end: bool = False


@attrs.frozen
class SettleCall:
    """The send call resolves now (a call that settles with its turn), while the
    run goes on."""


Step = (
    Say
    | SayEach
    | Think
    | Gate
    | Pause
    | Crash
    | DropCompletion
    | NoFinishReason
    | Reject
    | ToolCall
    | AuthToolCall
    | AskUser
    | ClientToolCall
    | SpawnSubagent
    | SettleCall
)


def echo_reply(prompt: str) -> str:
    """What an unscripted prompt is answered with."""
    return f"echo: {prompt}"


IMMEDIATE = (Say, SayEach, Think, NoFinishReason, DropCompletion)
"""Steps that never wait: a script of only these is answered within the send."""


def echo_steps(prompt: str, deltas: int, delta_s: float) -> tuple[Step, ...]:
    """The echo reply in `deltas` nearly equal chunks (fewer only when the reply
    is shorter), `delta_s` apart: its pacing is then (deltas - 1) * delta_s."""
    reply = echo_reply(prompt)
    count = max(1, min(deltas, len(reply)))
    size = len(reply)
    chunks = tuple([reply[size * i // count : size * (i + 1) // count] for i in range(count)])
    if delta_s <= 0:
        return (SayEach(chunks),)
    steps: list[Step] = []
    for chunk in chunks:
        if steps:
            steps.append(Pause(delta_s))
        steps.append(Say(chunk))
    return tuple(steps)

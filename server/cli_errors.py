"""How the `agenthost` command line says what went wrong: one line on stderr.

Every mistake a user can make ends in `agenthost: <what>: <why>` and a
non-zero exit code: 2 for a malformed command line or a bad option value (a
store that cannot be opened among them), 1 for the rest. `--debug` shows the
traceback of an unexpected error instead; a malformed command line is one line
either way. Commands say what went wrong by raising `CliError` (or typer's
`BadParameter` for a bad option); `one_line_errors` prints what a command
raised, and `usage_line` words what the command line's parsing refused.

A command group called without its command (bare `agenthost`, `agenthost
store`) prints its help and then one line naming the commands, and exits 2,
as click does for a group that needs a command.
"""

import errno
import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import attrs
import typer

from agenthost.messages.errors import AgentHostError

USAGE = 2
"""The exit code of a malformed command line or a bad option value."""


class CliError(Exception):
    """A mistake or a refusal, shown as one line: `agenthost: <what>: <why>`;
    `code` 2 for a bad option value or a store that cannot be used, 1 for the rest."""

    def __init__(self, what: str, why: str = "", code: int = 1) -> None:
        super().__init__(f"{what}: {why}" if why else what)
        self.what = what
        self.why = why
        self.code = code


@attrs.define
class Options:
    """The global options of this run (set by the command line's callback)."""

    debug: bool = False
    log_level: str = "warning"  # handed to processes this one starts (serve --fronts)


options = Options()
F = TypeVar("F", bound=Callable[..., Any])


def one_line_errors(command: F) -> F:
    """What the command raises becomes one line on stderr and an exit code
    (with --debug, the traceback); a bad option stays typer's to report."""

    @functools.wraps(command)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except Exception as error:
            if options.debug or is_usage_error(error):
                raise
            print(f"agenthost: {error_line(error)}", file=sys.stderr)
            raise typer.Exit(code=error.code if isinstance(error, CliError) else 1) from None

    return guarded  # type: ignore[return-value]


def count(n: int, noun: str) -> str:
    """`n` and its noun, in words: "1 turn", "2 turns"."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def error_line(error: Exception) -> str:
    """An error as `<what>: <why>` (after `agenthost: `)."""
    if isinstance(error, CliError):
        return str(error)
    if isinstance(error, AgentHostError):
        return f"{error.code.value}: {error.message}"
    return f"unexpected {type(error).__name__}: {error} (--debug shows the traceback)"


def is_usage_error(error: Exception) -> bool:
    """A malformed command line: click's UsageError (typer >= 0.29 carries its own copy)."""
    return isinstance(getattr(error, "exit_code", None), int) and callable(
        getattr(error, "format_message", None)
    )


def usage_line(error: Exception) -> str:
    """A malformed command line as `<what>: <why>`."""
    message = str(getattr(error, "message", "") or "").removeprefix("Value error, ").rstrip(".")
    param = getattr(error, "param", None)
    context = getattr(error, "ctx", None)
    where = context.command_path if context is not None else "agenthost"
    command = where.removeprefix("agenthost").strip() or "usage"
    if _missing_command(error, message) and context is not None:
        return _command_needed(context)
    if type(error).__name__ == "MissingParameter" and param is not None:
        opts = getattr(param, "opts", None) or [getattr(param, "name", "") or ""]
        if getattr(param, "param_type_name", "") == "argument":
            name = f"argument {getattr(param, 'metavar', None) or opts[0].upper()}"
        else:
            name = f"option {opts[0]}"
        return f"{command}: missing {name} (see {where} --help)"
    hint = getattr(error, "param_hint", None)
    if hint is None and param is not None:
        hint = (getattr(param, "opts", None) or [getattr(param, "name", "")])[0]
    if hint is not None:
        what = " / ".join(hint) if isinstance(hint, (list, tuple)) else str(hint)
        return f"{what.strip(chr(39))}: {message}"
    return f"{command}: {message} (see {where} --help)"


def _missing_command(error: Exception, message: str) -> bool:
    """A group called without its command: bare (click printed the help as it
    raised NoArgsIsHelpError), or with options only ("Missing command")."""
    return type(error).__name__ == "NoArgsIsHelpError" or message == "Missing command"


def _command_needed(context: Any) -> str:
    group = context.command
    names = [n for n in group.list_commands(context) if not group.get_command(context, n).hidden]
    listed = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else "".join(names)
    where = context.command_path.removeprefix("agenthost").strip()
    return f"{where + ': ' if where else ''}a command is needed: {listed}"


def listen_error(host: str, port: int, error: OSError) -> CliError:
    if error.errno == errno.EADDRINUSE:
        why = "the address is in use (another server? --port 0 takes any free port)"
    else:
        why = error.strerror or str(error)
    return CliError(f"cannot listen on {host}:{port}", why)

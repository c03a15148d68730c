"""AgentHostError: a frozen value that frameworks can still annotate."""

import attrs
import pytest

from agenthost.messages.errors import AgentHostError, ErrorCode


def test_an_errors_fields_are_frozen_but_a_framework_may_annotate_it() -> None:
    error = AgentHostError(code=ErrorCode.NOT_FOUND, message="gone")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        error.message = "changed"  # type: ignore[misc]
    error.__typer_developer_exception__ = "typer sets this on what it re-raises"  # type: ignore[attr-defined]
    assert error == AgentHostError(code=ErrorCode.NOT_FOUND, message="gone")
    assert hash(error) == hash(AgentHostError(code=ErrorCode.NOT_FOUND, message="gone"))


def test_an_error_escaping_a_cli_command_is_reported_not_turned_into_another() -> None:
    import typer

    app = typer.Typer()

    @app.command()
    def fail() -> None:
        raise AgentHostError(code=ErrorCode.STORE_ERROR, message="the store is in use")

    with pytest.raises(AgentHostError, match="the store is in use"):
        app([], standalone_mode=False)  # through Typer.__call__, which annotates it

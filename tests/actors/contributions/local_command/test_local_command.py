"""local_command: slash commands without a turn."""

from agenthost.actors import Host
from agenthost.actors.contributions.local_command import HELP
from agenthost.messages import ErrorCode, OutcomeState
from tests.actors.contributions.conftest import settled


def test_rename_is_handled_without_a_turn_even_in_an_archived_session(host: Host) -> None:
    session = host.create_session()
    chat = session.chat()
    session.archive()
    outcome = chat.send("/rename  Release   notes").result(timeout=10)
    assert (outcome.state, outcome.turn_id) == (OutcomeState.HANDLED, None)
    assert chat.state().title == "Release notes"
    assert chat.state().turns == ()
    settled(chat)
    assert session.summary().title == "Release notes"  # the default chat's title cascades


def test_rename_works_in_a_read_only_chat_and_help_lists_the_commands(host: Host) -> None:
    chat = host.create_session().chat()
    chat.set_read_only(True)
    assert chat.send("/rename Plans").result(timeout=10).state is OutcomeState.HANDLED
    assert chat.state().title == "Plans"
    helped = chat.send("/help").result(timeout=10)
    assert (helped.state, helped.text) == (OutcomeState.HANDLED, HELP)
    bad = chat.send("/rename").result(timeout=10)
    assert bad.state is OutcomeState.REJECTED and bad.error is not None
    assert bad.error.code is ErrorCode.INVALID_ARGUMENT

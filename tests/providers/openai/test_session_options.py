"""Per-session model and instructions, and text attachments, through the public surface."""

from collections.abc import Callable
from pathlib import Path

import pytest

from agenthost.actors import Host
from agenthost.messages import AgentHostError, ErrorCode, OutcomeState
from agenthost.messages.state import Attachment
from tests.providers.openai.standin import StandIn

StartHost = Callable[..., Host]


def test_a_sessions_model_and_instructions_go_with_every_turn_and_survive_a_restart(
    start_openai_host: StartHost, standin: StandIn
) -> None:
    host = start_openai_host()
    session = host.create_session(
        provider="openai", model="big-model", instructions="Answer in French."
    )
    session.chat().send("hello").result(timeout=10)
    plain = host.create_session(provider="openai")
    plain.chat().send("hi").result(timeout=10)
    session_id = session.id
    host.stop()
    start_openai_host().open_session(session_id).chat().send("again").result(timeout=10)
    first, other, again = standin.requests
    assert first.body["model"] == again.body["model"] == "big-model"
    assert other.body["model"] == "m"  # the provider's own
    system = {"role": "system", "content": "Answer in French."}
    assert first.messages[0] == again.messages[0] == system
    assert other.messages[0]["role"] == "user"


def test_attachments_reach_the_model_are_stored_and_stay_in_the_history(
    start_openai_host: StartHost, standin: StandIn, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("line one\nline two\n")
    host = start_openai_host()
    chat = host.create_session(provider="openai").chat()
    outcome = chat.send("summarise this", attachments=[notes]).result(timeout=10)
    assert outcome.state is OutcomeState.COMPLETE
    sent = standin.requests[0].messages[-1]["content"]
    assert sent.startswith("summarise this") and "line one\nline two" in sent
    assert 'name="notes.txt"' in sent
    stored = chat.state().turns[0].message
    assert stored.attachments == (Attachment(name="notes.txt", text="line one\nline two\n"),)
    session_id, chat_id = chat.session.id, chat.id
    host.stop()
    restored = start_openai_host().open_session(session_id).chat(chat_id)
    assert restored.state().turns[0].message.attachments == stored.attachments
    restored.send("and now?").result(timeout=10)
    history = standin.requests[-1].messages
    assert "line one" in history[0]["content"]  # the earlier turn, attachment and all


def test_an_unreadable_attachment_is_a_clear_error_naming_it(
    start_openai_host: StartHost, tmp_path: Path
) -> None:
    chat = start_openai_host().create_session(provider="openai").chat()
    binary = tmp_path / "image.bin"
    binary.write_bytes(b"\xff\xfe\x00")
    for path in (tmp_path / "missing.txt", binary):
        with pytest.raises(AgentHostError) as refused:
            chat.send("look", attachments=[path])
        assert refused.value.code is ErrorCode.INVALID_ARGUMENT
        assert path.name in refused.value.message

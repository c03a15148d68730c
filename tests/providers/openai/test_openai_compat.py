"""The OpenAI-compatible provider through the public surface, against the stand-in."""

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from agenthost.actors import Host, Subscription
from agenthost.messages import ErrorCode, OutcomeState
from agenthost.messages.events import AssistantDelta, TurnFailed
from agenthost.messages.state import TurnState, Usage
from agenthost.store import SqliteStore
from tests.fakes.events import drain_events
from tests.providers.openai.conftest import KEY
from tests.providers.openai.standin import Reply, Request, StandIn

StartHost = Callable[..., Host]


def assert_alternating(request: Request, sent: list[str]) -> None:
    """The request carries the system text (if any), then strictly alternating user
    and assistant messages ending with the new user message, each user text once."""
    messages = request.messages
    if messages and messages[0]["role"] == "system":
        messages = messages[1:]
    roles = [m["role"] for m in messages]
    assert roles == ["user", "assistant"] * (len(roles) // 2) + ["user"], roles
    users = [m["content"] for m in messages if m["role"] == "user"]
    assert users == sent
    assert all(m["content"] for m in messages)  # no empty message either


def wait_delta(sub: Subscription, timeout: float = 10.0) -> AssistantDelta:
    while True:
        event = sub.next(timeout)
        if isinstance(event, AssistantDelta):
            return event


def test_each_turn_sends_the_whole_conversation_strictly_alternating(
    start_openai_host: StartHost, standin: StandIn
) -> None:
    host = start_openai_host()
    chat = host.create_session(provider="openai").chat()
    sent = ["first question", "second question", "third question"]
    for text in sent:
        outcome = chat.send(text).result(timeout=10)
        assert outcome.state is OutcomeState.COMPLETE
        assert outcome.text == f"echo: {text}"
    requests = standin.requests
    assert len(requests) == 3
    for index, request in enumerate(requests):
        assert_alternating(request, sent[: index + 1])
    assert requests[2].messages[:5] == [
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "echo: first question"},
        {"role": "user", "content": "second question"},
        {"role": "assistant", "content": "echo: second question"},
        {"role": "user", "content": "third question"},
    ]


def test_the_request_streams_with_usage_the_model_options_and_the_key(
    start_openai_host: StartHost, standin: StandIn
) -> None:
    host = start_openai_host(temperature=0.25, max_output_tokens=77)
    host.create_session(provider="openai").chat().send("hi").result(timeout=10)
    (request,) = standin.requests
    assert request.body["model"] == "m"
    assert request.body["stream"] is True
    assert request.body["stream_options"] == {"include_usage": True}
    assert request.body["temperature"] == 0.25
    assert request.body["max_tokens"] == 77
    assert request.authorization == f"Bearer {KEY}"


def test_usage_from_the_stream_is_recorded_per_turn(
    start_openai_host: StartHost, standin: StandIn
) -> None:
    standin.script(Reply(chunks=("a",), usage=(11, 3)), Reply(chunks=("b",), usage=(25, 7)))
    host = start_openai_host()
    chat = host.create_session(provider="openai").chat()
    chat.send("one").result(timeout=10)
    chat.send("two").result(timeout=10)
    assert [t.usage for t in chat.state().turns] == [
        Usage(prompt_tokens=11, completion_tokens=3),
        Usage(prompt_tokens=25, completion_tokens=7),
    ]


def stored(db_path: Path, chat_id: str) -> tuple[list[tuple[str, str, TurnState]], dict[str, Any]]:
    """What the store holds for the chat (the host must be stopped)."""
    store = SqliteStore(db_path)
    store.open()
    try:
        record = store.load_session(_session_of(store, chat_id))
        assert record is not None
        turns = next(c.turns for c in record.chats if c.chat_id == chat_id)
        return [(t.user_text, t.assistant_text, t.state) for t in turns], store.finish_reasons(
            chat_id
        )
    finally:
        store.close()


def _session_of(store: SqliteStore, chat_id: str) -> str:
    for summary in store.list_sessions():
        record = store.load_session(summary.id)
        if record is not None and any(c.chat_id == chat_id for c in record.chats):
            return summary.id
    raise AssertionError(f"no session holds chat {chat_id}")


def test_the_final_text_is_stored_when_the_stream_has_no_finish_reason(
    start_openai_host: StartHost, standin: StandIn, db_path: Path
) -> None:
    standin.script(Reply(chunks=("the last ", "words"), finish_reason=None))
    host = start_openai_host()
    chat = host.create_session(provider="openai").chat()
    outcome = chat.send("q").result(timeout=10)
    assert outcome.state is OutcomeState.COMPLETE
    assert outcome.text == "the last words"
    assert chat.state().turns[-1].assistant_text == "the last words"
    host.stop()
    turns, reasons = stored(db_path, chat.id)
    assert turns == [("q", "the last words", TurnState.COMPLETE)]
    assert reasons == {outcome.turn_id: None}


def test_a_length_capped_turn_stores_its_text_and_finish_reason_length(
    start_openai_host: StartHost, standin: StandIn, db_path: Path
) -> None:
    standin.script(Reply(chunks=("cut ", "sho"), finish_reason="length"), Reply())
    host = start_openai_host(max_output_tokens=2)
    chat = host.create_session(provider="openai").chat()
    capped = chat.send("long answer please").result(timeout=10)
    assert capped.state is OutcomeState.COMPLETE
    normal = chat.send("next").result(timeout=10)
    host.stop()
    turns, reasons = stored(db_path, chat.id)
    assert turns[0] == ("long answer please", "cut sho", TurnState.COMPLETE)
    assert reasons == {capped.turn_id: "length", normal.turn_id: "stop"}


def test_a_stream_failing_midway_fails_the_turn_with_the_providers_error_and_the_next_works(
    start_openai_host: StartHost, standin: StandIn, db_path: Path
) -> None:
    standin.script(Reply(chunks=("half ", "of it"), fail_after=1, error_message="overloaded"))
    host = start_openai_host()
    chat = host.create_session(provider="openai").chat()
    failed = chat.send("doomed").result(timeout=10)
    assert failed.state is OutcomeState.ERROR
    assert failed.error is not None
    assert failed.error.code is ErrorCode.PROVIDER_ERROR
    assert "overloaded" in failed.error.message
    assert chat.state().turns[-1].assistant_text == "half "
    assert chat.send("again").result(timeout=10).state is OutcomeState.COMPLETE
    assert_alternating(standin.requests[1], ["doomed", "again"])
    assert standin.requests[1].messages[1] == {"role": "assistant", "content": "half "}
    host.stop()
    turns, _ = stored(db_path, chat.id)
    assert turns[0] == ("doomed", "half ", TurnState.ERROR)  # what streamed before the failure


def test_a_dropped_connection_midway_fails_the_turn_as_taken(
    start_openai_host: StartHost, standin: StandIn
) -> None:
    standin.script(Reply(chunks=("partial", "rest"), fail_after=1, failure="disconnect"))
    host = start_openai_host()
    chat = host.create_session(provider="openai").chat()
    failed = chat.send("q").result(timeout=10)
    assert failed.state is OutcomeState.ERROR
    assert failed.error is not None
    assert failed.error.code is ErrorCode.PROVIDER_ERROR  # its own error, not abandoned
    assert chat.state().turns[-1].assistant_text == "partial"


def test_an_error_status_before_the_stream_keeps_the_providers_error_and_a_placeholder_reply(
    start_openai_host: StartHost, standin: StandIn
) -> None:
    standin.script(Reply(status=400, error_message="model m does not exist"))
    host = start_openai_host()
    chat = host.create_session(provider="openai").chat()
    failed = chat.send("hello?").result(timeout=10)
    assert failed.state is OutcomeState.ERROR
    assert failed.error is not None
    assert failed.error.message == "openai: HTTP 400: model m does not exist"
    chat.send("anyone?").result(timeout=10)
    assert_alternating(standin.requests[1], ["hello?", "anyone?"])
    assert standin.requests[1].messages[1] == {
        "role": "assistant",
        "content": "[no reply: this turn failed]",
    }


def test_a_refused_connection_abandons_the_turn_and_never_shows_the_key(
    start_openai_host: StartHost, standin: StandIn, unused_port: int
) -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    base_url = f"http://127.0.0.1:{unused_port}/v1"
    host = start_openai_host(base_url=base_url)
    chat = host.create_session(provider="openai").chat()
    sub = chat.subscribe()
    with structlog.testing.capture_logs() as logs:
        failed = chat.send("secret prompt text").result(timeout=10)
    assert failed.state is OutcomeState.ERROR
    assert failed.error is not None
    assert failed.error.code is ErrorCode.EXECUTION_ABANDONED  # never taken
    # The provider's own words, not a generic "never started".
    reason = f"openai: could not reach {base_url}: connection refused"
    assert failed.error.message == reason
    event = sub.next(10)
    while not isinstance(event, TurnFailed):
        event = sub.next(10)
    assert event.error.message == reason
    ended = [entry for entry in logs if entry["event"] == "turn_ended"]
    assert len(ended) == 1, ended
    assert ended[0]["reason"] == reason
    logged = repr(logs)
    assert KEY not in logged
    assert "secret prompt text" not in logged


@pytest.fixture
def unused_port() -> Iterator[int]:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    yield port  # closed: connecting is refused


def test_a_cancelled_turn_closes_the_stream_keeps_its_text_and_the_next_turn_follows(
    start_openai_host: StartHost, standin: StandIn, db_path: Path
) -> None:
    standin.script(Reply(chunks=("thinking", " more"), hold_after=1))
    host = start_openai_host()
    chat = host.create_session(provider="openai").chat()
    sub = chat.subscribe()
    turn = chat.send("slow one")
    standin.wait_held()
    assert wait_delta(sub).text == "thinking"
    assert chat.cancel() is True
    assert turn.result(timeout=10).state is OutcomeState.CANCELLED
    standin.wait_dropped()  # the client closed the stream
    assert chat.state().turns[-1].assistant_text == "thinking"
    assert chat.send("then this").result(timeout=10).state is OutcomeState.COMPLETE
    assert_alternating(standin.requests[1], ["slow one", "then this"])
    assert standin.requests[1].messages[1] == {"role": "assistant", "content": "thinking"}
    host.stop()
    turns, _ = stored(db_path, chat.id)
    assert turns[0] == ("slow one", "thinking", TurnState.CANCELLED)


def test_a_turn_cancelled_before_any_text_gets_a_placeholder_reply(
    start_openai_host: StartHost, standin: StandIn
) -> None:
    standin.script(Reply(chunks=("never",), hold_after=0))
    host = start_openai_host()
    chat = host.create_session(provider="openai").chat()
    turn = chat.send("stop me")
    standin.wait_held()
    assert chat.cancel() is True
    assert turn.result(timeout=10).state is OutcomeState.CANCELLED
    chat.send("next").result(timeout=10)
    assert_alternating(standin.requests[1], ["stop me", "next"])
    assert standin.requests[1].messages[1]["content"] == "[no reply: the user cancelled this turn]"


def test_a_restarted_host_continues_the_conversation_from_the_store(
    start_openai_host: StartHost, standin: StandIn
) -> None:
    standin.script(Reply(), Reply(chunks=("cut",), finish_reason=None), Reply())
    first = start_openai_host()
    session = first.create_session(provider="openai")
    chat = session.chat()
    chat.send("before restart").result(timeout=10)
    chat.send("no finish").result(timeout=10)
    first.stop()

    second = start_openai_host()
    restored = second.open_session(session.id).chat()
    assert [t.assistant_text for t in restored.state().turns] == ["echo: before restart", "cut"]
    assert restored.send("after restart").result(timeout=10).state is OutcomeState.COMPLETE
    request = standin.requests[-1]
    assert_alternating(request, ["before restart", "no finish", "after restart"])
    assert [m["content"] for m in request.messages if m["role"] == "assistant"] == [
        "echo: before restart",
        "cut",
    ]


def test_a_turn_running_when_the_host_stopped_is_restored_and_the_history_stays_alternating(
    start_openai_host: StartHost, standin: StandIn
) -> None:
    standin.script(Reply(chunks=("started",), hold_after=1))
    first = start_openai_host()
    session = first.create_session(provider="openai")
    chat = session.chat()
    sub = chat.subscribe()
    chat.send("interrupted")
    standin.wait_held()
    wait_delta(sub)
    first.stop()

    second = start_openai_host()
    restored = second.open_session(session.id).chat()
    assert [t.state for t in restored.state().turns] == [TurnState.ERROR]
    restored.send("resumed").result(timeout=10)
    assert_alternating(standin.requests[-1], ["interrupted", "resumed"])


def test_steering_is_held_and_runs_as_the_next_turn_and_removing_held_steering_drops_it(
    start_openai_host: StartHost, standin: StandIn
) -> None:
    standin.script(Reply(chunks=("work", "ing"), hold_after=1))
    host = start_openai_host()
    chat = host.create_session(provider="openai").chat()
    sub = chat.subscribe()
    turn = chat.send("long task")
    standin.wait_held()
    kept = chat.steer("also do this")
    dropped = chat.steer("never mind")
    assert chat.remove_pending(dropped.id) is True  # held by the host: simply dropped
    standin.release()
    assert turn.result(timeout=10).state is OutcomeState.COMPLETE
    drain_events(sub, turns=2)
    turns = chat.state().turns
    assert [t.user_text for t in turns] == ["long task", "also do this"]
    assert kept.text == "also do this"
    assert len(standin.requests) == 2
    assert_alternating(standin.requests[1], ["long task", "also do this"])
    assert standin.requests[1].messages[1] == {"role": "assistant", "content": "working"}


def test_logs_carry_ids_and_sizes_never_the_key_or_the_prompt(
    start_openai_host: StartHost, standin: StandIn
) -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    standin.script(Reply(chunks=("reply words",)), Reply(fail_after=0, error_message="down"))
    host = start_openai_host()
    chat = host.create_session(provider="openai").chat()
    with structlog.testing.capture_logs() as logs:
        done = chat.send("private question").result(timeout=10)
        chat.send("another private question").result(timeout=10)
    streamed = [e for e in logs if e["event"] == "completion_streamed"]
    assert streamed == [
        {
            "event": "completion_streamed",
            "log_level": "info",
            "session_id": chat.session.id,
            "chat_id": chat.id,
            "provider": "openai",
            "turn_id": done.turn_id,
            "reply_chars": len("reply words"),
            "finish_reason": "stop",
        }
    ]
    assert any(e["event"] == "completion_stream_failed" for e in logs)
    logged = repr(logs)
    assert KEY not in logged
    assert "private question" not in logged
    assert "reply words" not in logged

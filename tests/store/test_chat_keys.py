"""Ids a client chooses are its chat's own: a turn or pending message of one
chat is never named, overwritten or deleted through another chat's id."""

from agenthost.actors import Host
from agenthost.messages import OutcomeState
from agenthost.providers.scripted import Gate, ScriptedProvider
from agenthost.testing import FakeClock
from tests.fakes.stores import StoreFactory


def start(stores: StoreFactory, provider: ScriptedProvider | None = None) -> Host:
    return Host.start(
        store=stores(), providers={"scripted": provider or ScriptedProvider()}, clock=FakeClock()
    )


def stored_turns(stores: StoreFactory, session_id: str) -> list[tuple[str, str, str]]:
    """A session's turns as another process reads them: id, user and assistant text."""
    return [
        tuple(row)  # type: ignore[misc]
        for row in stores.query(
            "SELECT id, user_text, assistant_text FROM turns WHERE session_id = ? ORDER BY seq",
            (session_id,),
        )
    ]


def test_two_sessions_keep_turns_of_the_same_client_chosen_id_apart(
    store_factory: StoreFactory,
) -> None:
    host = start(store_factory)
    alice, bob = host.create_session(), host.create_session()
    try:
        first = alice.chat().send("alice's question", turn_id="turn-one").result(timeout=10)
        second = bob.chat().send("bob's question", turn_id="turn-one").result(timeout=10)
        assert (first.state, second.state) == (OutcomeState.COMPLETE, OutcomeState.COMPLETE)
    finally:
        host.stop()
    assert stored_turns(store_factory, alice.id) == [
        ("turn-one", "alice's question", "echo: alice's question")
    ]
    assert stored_turns(store_factory, bob.id) == [
        ("turn-one", "bob's question", "echo: bob's question")
    ]
    host = start(store_factory)
    try:
        for session, text in ((alice, "alice's question"), (bob, "bob's question")):
            [turn] = host.open_session(session.id).chat().state().turns
            assert (turn.id, turn.user_text, turn.assistant_text) == (
                "turn-one",
                text,
                f"echo: {text}",
            )
    finally:
        host.stop()


def test_removing_a_queued_message_leaves_another_chat_s_of_the_same_id(
    store_factory: StoreFactory,
) -> None:
    provider = ScriptedProvider().on("hold", Gate("never"))
    host = start(store_factory, provider)
    alice, bob = host.create_session(), host.create_session()
    for session, text in ((alice, "alice's later"), (bob, "bob's later")):
        chat = session.chat()
        chat.send("hold")
        chat.send(text, pending_id="p1")
    assert alice.chat().remove_pending("p1") is True
    host.stop()

    host = start(store_factory, provider)
    try:
        assert host.open_session(alice.id).chat().state().pending == ()
        [kept] = host.open_session(bob.id).chat().state().pending
        assert (kept.id, kept.text) == ("p1", "bob's later")
    finally:
        host.stop()


def test_a_store_of_schema_10_keeps_its_turns_steering_attachments_and_queue_when_upgraded(
    store_factory: StoreFactory,
) -> None:
    store_factory.write_schema(up_to=10)
    for statement in (
        "INSERT INTO sessions (id, provider, title, created_at, modified_at)"
        " VALUES ('s1', 'scripted', 'old', 1, 1)",
        "INSERT INTO chats (id, session_id, position) VALUES ('c1', 's1', 0)",
        "INSERT INTO turns (id, chat_id, session_id, seq, user_text, assistant_text, state,"
        " started_at) VALUES ('t1', 'c1', 's1', 0, 'hi', 'hello', 'complete', 1)",
        "INSERT INTO turn_steering VALUES ('t1', 0, 'p0', 'faster')",
        "INSERT INTO turn_attachments VALUES ('t1', 0, 'notes.txt', 'the notes')",
        "INSERT INTO pending_messages (id, chat_id, session_id, kind, text, position)"
        " VALUES ('q1', 'c1', 's1', 'queued', 'later', 0)",
    ):
        store_factory.execute(statement, ())
    host = start(store_factory, ScriptedProvider().on("hold", Gate("never")))
    try:
        state = host.open_session("s1").chat().state()
        [turn] = state.turns
        assert (turn.id, turn.user_text, turn.assistant_text) == ("t1", "hi", "hello")
        assert [(s.id, s.text) for s in turn.steering] == [("p0", "faster")]
        assert [(a.name, a.text) for a in turn.message.attachments] == [("notes.txt", "the notes")]
        assert [(p.id, p.text) for p in state.pending] == [("q1", "later")]
    finally:
        host.stop()

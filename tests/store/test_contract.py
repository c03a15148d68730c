"""The store contract, run against every store: group commit's batch semantics,
the per-owner listing and the client id bindings a server needs."""

from collections.abc import Iterator

import attrs
import pytest

from agenthost.actors import use_runtime
from agenthost.actors.protocol import ClaimClient, Committed, FindClient, ListSessionPage, Write
from agenthost.actors.store import StoreActor
from agenthost.messages import AgentHostError, ErrorCode
from agenthost.messages.customizations import (
    Customization,
    CustomizationType,
    Enablement,
    EnablementKind,
)
from agenthost.messages.state import (
    MarkdownPart,
    MessageOrigin,
    OriginKind,
    PendingKind,
    PendingMessage,
    SessionState,
    ToolCall,
    ToolCallPart,
    ToolCallStatus,
    TurnState,
    UserMessage,
)
from agenthost.store import ClientBinding, Store
from agenthost.store.base import CLIENT_KEEP_MS, OWNER_KEY, PRUNE_BATCH
from agenthost.store.records import (
    ChatRecord,
    DeleteSession,
    ImportSession,
    SaveChatMeta,
    SavePending,
    SaveSession,
    SaveSessionState,
    SaveTurnEnded,
    SaveTurnStarted,
    SessionRecord,
    StoreOp,
)
from agenthost.testing import DeterministicRunner
from tests.fakes.stores import Acks, StoreFactory, write_turns


@pytest.fixture
def store(store_factory: StoreFactory) -> Iterator[Store]:
    opened = store_factory()
    opened.open()
    yield opened
    opened.close()


def save_session(store: Store, session_id: str, created_at: int, owner: str | None) -> None:
    store.apply(
        SaveSession(
            session_id=session_id, provider="scripted", title="", created_at=created_at, chat_ids=()
        )
    )
    config = () if owner is None else ((OWNER_KEY, owner), ("model", "m"))
    store.apply(SaveSessionState(session_id=session_id, state=SessionState(config=config)))


def refused(store: Store, ops: list[StoreOp]) -> set[int]:
    """Apply `ops` as one batch (after a commit) and commit it; the positions of the writes the
    store undid (refused at once, or named by the commit's report)."""
    failed = set()
    for position, op in enumerate(ops):
        try:
            store.apply(op)
        except store.errors:
            failed.add(position)
    report = store.commit()
    return failed | set(report.failed if report is not None else ())


# -- batches ---------------------------------------------------------------------------------------
def test_a_failed_write_is_undone_alone_and_the_rest_of_its_batch_commits(
    store: Store, store_factory: StoreFactory
) -> None:
    save_session(store, "s1", 1, None)
    store.commit()
    duplicate = SessionRecord(
        session_id="s1", provider="scripted", title="", created_at=1, chats=()
    )
    s2 = SaveSession(session_id="s2", provider="scripted", title="", created_at=2, chat_ids=())
    assert refused(store, [ImportSession(record=duplicate), s2]) == {0}
    assert store_factory.query("SELECT id FROM sessions ORDER BY id") == [("s1",), ("s2",)]


def test_a_write_the_database_refuses_is_undone_alone_and_the_rest_of_its_batch_commits(
    store: Store, store_factory: StoreFactory
) -> None:
    # PostgreSQL aborts the whole transaction on a failed statement: the store
    # must undo the one write, not the batch whose other writes will be acked.
    save = SaveSession(
        session_id="s1", provider="scripted", title="", created_at=1, chat_ids=("c",)
    )
    turn = SaveTurnStarted(
        session_id="s1", chat_id="c", turn_id="t1", seq=0, user_text="hi", started_at=1
    )
    # the same turn id again
    assert refused(store, [save, turn, turn, attrs.evolve(turn, turn_id="t2", seq=1)]) == {2}
    assert store_factory.query("SELECT id FROM turns ORDER BY id") == [("t1",), ("t2",)]
    assert store_factory.query("SELECT id FROM sessions") == [("s1",)]


def test_reads_see_the_open_batch_and_other_readers_see_only_commits(
    store: Store, store_factory: StoreFactory
) -> None:
    save_session(store, "s1", 1, "ann")
    assert [s.id for s in store.list_sessions()] == ["s1"]
    assert store_factory.query("SELECT id FROM sessions") == []
    store.commit()
    assert store_factory.query("SELECT id FROM sessions") == [("s1",)]


# -- one owner's sessions, a page at a time --------------------------------------------------------
def test_a_page_lists_one_owners_sessions_oldest_first_with_a_cursor_to_the_next(
    store: Store,
) -> None:
    for n in range(7):
        save_session(store, f"ann{n}", created_at=100 + n // 2, owner="ann")  # ties on created_at
        save_session(store, f"bob{n}", created_at=100 + n, owner="bob")
    save_session(store, "nobody", created_at=1, owner=None)
    pages, after = [], None
    while True:
        page = store.list_sessions_page(owner="ann", limit=3, after=after)
        pages.append([s.id for s in page.items])
        if page.next_cursor is None:
            break
        after = page.next_cursor
    assert pages == [["ann0", "ann1", "ann2"], ["ann3", "ann4", "ann5"], ["ann6"]]
    [first] = store.list_sessions_page(owner="ann", limit=1).items
    assert dict(first.config) == {OWNER_KEY: "ann", "model": "m"}
    assert store.list_sessions_page(owner="carol", limit=3).items == ()


def test_a_session_changes_owner_with_its_config(store: Store) -> None:
    save_session(store, "s1", 1, "ann")
    store.apply(SaveSessionState(session_id="s1", state=SessionState(config=((OWNER_KEY, "bob"),))))
    assert store.list_sessions_page(owner="ann", limit=5).items == ()
    assert [s.id for s in store.list_sessions_page(owner="bob", limit=5).items] == ["s1"]


def test_a_page_past_the_last_is_empty_and_a_limit_is_exact(store: Store) -> None:
    for n in range(4):
        save_session(store, f"s{n}", n, "ann")
    page = store.list_sessions_page(owner="ann", limit=4)
    assert len(page.items) == 4 and page.next_cursor is None
    cursor = store.list_sessions_page(owner="ann", limit=2).next_cursor
    assert cursor is not None
    last = store.list_sessions_page(owner="ann", limit=2, after=cursor)
    assert [s.id for s in last.items] == ["s2", "s3"] and last.next_cursor is None


@pytest.mark.parametrize("cursor", ["", "abc", "12", "x.s1", "-1.s1"])
def test_a_cursor_the_store_did_not_make_is_refused(store: Store, cursor: str) -> None:
    with pytest.raises(AgentHostError) as caught:
        store.list_sessions_page(owner="ann", limit=2, after=cursor)
    assert caught.value.code is ErrorCode.INVALID_ARGUMENT


def test_a_limit_below_one_is_refused(store: Store) -> None:
    with pytest.raises(AgentHostError) as caught:
        store.list_sessions_page(owner="ann", limit=0)
    assert caught.value.code is ErrorCode.INVALID_ARGUMENT


def test_a_page_is_one_range_read_of_the_owner_index(
    store: Store, store_factory: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found in a 20-minute soak: listSessions loaded every identity's sessions
    # and filtered them, 117 ms a call with 13,090 stored. The plan shows a seek
    # into sessions_by_owner (owner, then after the cursor), so other owners'
    # sessions and earlier pages are never read.
    statements: list[tuple[str, tuple[object, ...]]] = []
    execute = store._execute  # type: ignore[attr-defined]

    def traced(statement: str, params: tuple[object, ...] = ()) -> object:
        statements.append((statement, params))
        return execute(statement, params)

    monkeypatch.setattr(store, "_execute", traced)
    save_session(store, "s1", 1, "ann")
    store.commit()  # the batch's writes are sent before a read: not the read's own statements
    statements.clear()
    store.list_sessions_page(owner="ann", limit=2, after="0.s0")
    [(statement, params)] = statements
    if store_factory.kind == "sqlite":
        plan = " ".join(str(row[3]) for row in execute(f"EXPLAIN QUERY PLAN {statement}", params))
        assert "SEARCH s USING INDEX sessions_by_owner (owner=? AND (created_at,id)>(?,?))" in plan
    else:
        execute("SET LOCAL enable_seqscan = off")  # tiny tables: judge the index, not the size
        plan = " ".join(str(row[0]) for row in execute(f"EXPLAIN {statement}", params))
        assert "Index Scan using sessions_by_owner" in plan
        assert "Index Cond: ((owner = 'ann'::text) AND (ROW(created_at, id) > ROW(" in plan


def test_migration_8_fills_the_owner_of_sessions_stored_before_it(
    store_factory: StoreFactory,
) -> None:
    store_factory.write_schema(up_to=7)
    for session_id, config in (("a", '{"ahp.owner": "ann", "x": "y"}'), ("b", "{}")):
        store_factory.execute(
            "INSERT INTO sessions (id, provider, created_at, modified_at, config)"
            " VALUES (?, 'scripted', 1, 1, ?)",
            (session_id, config),
        )
    store = store_factory()
    store.open()
    try:
        assert [s.id for s in store.list_sessions_page(owner="ann", limit=5).items] == ["a"]
        assert {s.id for s in store.list_sessions()} == {"a", "b"}
    finally:
        store.close()
    assert store_factory.query("SELECT id, owner FROM sessions ORDER BY id") == [
        ("a", "ann"),
        ("b", None),
    ]


# -- client ids ------------------------------------------------------------------------------------
DAY_MS = 24 * 3600 * 1000


def test_a_client_id_stays_with_the_identity_that_claimed_it_across_a_restart(
    store: Store, store_factory: StoreFactory
) -> None:
    assert store.claim_client("c1", "ann", now_ms=1_000) == ClientBinding(
        client_id="c1", identity="ann", first_seen=1_000, last_seen=1_000
    )
    store.commit()
    store.close()
    reopened = store_factory()
    reopened.open()
    try:
        held = reopened.claim_client("c1", "bob", now_ms=2_000)
        assert (held.identity, held.first_seen, held.last_seen) == ("ann", 1_000, 1_000)
        again = reopened.claim_client("c1", "ann", now_ms=3_000)
        assert (again.identity, again.first_seen, again.last_seen) == ("ann", 1_000, 3_000)
        assert reopened.find_client("c1") == again
        assert reopened.find_client("c2") is None
    finally:
        reopened.close()
        store.open()  # the fixture closes it


def test_a_binding_unused_for_longer_than_it_is_kept_goes_to_the_next_claimant(
    store: Store,
) -> None:
    store.claim_client("c1", "ann", now_ms=0)
    taken = store.claim_client("c1", "bob", now_ms=CLIENT_KEEP_MS + 1)
    assert (taken.identity, taken.first_seen) == ("bob", CLIENT_KEEP_MS + 1)
    renewed = store.claim_client("c2", "ann", now_ms=0)
    store.claim_client("c2", "ann", now_ms=CLIENT_KEEP_MS)  # seen again: kept from then on
    assert store.claim_client("c2", "bob", now_ms=CLIENT_KEEP_MS + 2).identity == "ann"
    assert renewed.first_seen == 0


def test_claims_prune_expired_bindings_a_bounded_batch_at_a_time(
    store: Store, store_factory: StoreFactory
) -> None:
    for n in range(PRUNE_BATCH + 20):
        store.claim_client(f"old{n}", "ann", now_ms=n)
    store.claim_client("new", "bob", now_ms=CLIENT_KEEP_MS + DAY_MS)
    store.commit()
    assert store_factory.query("SELECT COUNT(*) FROM client_bindings") == [(21,)]
    store.claim_client("newer", "bob", now_ms=CLIENT_KEEP_MS + DAY_MS)
    store.commit()
    assert store_factory.query("SELECT client_id FROM client_bindings ORDER BY client_id") == [
        ("new",),
        ("newer",),
    ]


def test_old_bindings_can_be_pruned_at_once(store: Store) -> None:
    for n in range(5):
        store.claim_client(f"c{n}", "ann", now_ms=n * DAY_MS)
    assert store.prune_clients(before_ms=3 * DAY_MS) == 3
    assert [store.find_client(f"c{n}") is None for n in range(5)] == [True] * 3 + [False] * 2


# -- through the store actor -----------------------------------------------------------------------
def test_the_store_actor_answers_a_claim_once_it_is_committed(
    store_factory: StoreFactory,
) -> None:
    with use_runtime(DeterministicRunner()) as runner:
        opened = store_factory()
        opened.open()
        store = StoreActor.start(opened)
        acks = Acks.start()
        op = SaveSession(session_id="s", provider="scripted", title="", created_at=0, chat_ids=())
        store.tell(Write(op=op, ack_to=acks, ack=Committed(seq=1)))
        store.tell(ClaimClient(client_id="c1", identity="ann", now_ms=5))
        claimed = store.ask(ClaimClient(client_id="c1", identity="bob", now_ms=6), block=False)
        runner.run()
        assert claimed.get(timeout=10).identity == "ann"
        assert store_factory.query("SELECT client_id, identity FROM client_bindings") == [
            ("c1", "ann")
        ]
        assert acks.proxy().acks.get() == [Committed(seq=1)]
        assert store.ask(FindClient(client_id="c1")).identity == "ann"
        state = SaveSessionState(session_id="s", state=SessionState(config=((OWNER_KEY, "ann"),)))
        store.tell(Write(op=state))
        page = store.ask(ListSessionPage(owner="ann", limit=10))
        assert [s.id for s in page.items] == ["s"] and page.next_cursor is None
        store.stop()


# -- turns and pending messages as they were ---------------------------------------------


def test_a_turns_parts_and_a_pending_messages_origin_come_back_as_written(
    store: Store, store_factory: StoreFactory
) -> None:
    """Parts that say more than the text (a tool call, a second markdown part)
    are kept as they were; a turn whose parts are its text alone keeps only the
    text, and comes back as the live turn's first part. A queued message keeps
    its origin (requeued steering stays steering)."""
    write_turns(store, "s1", turns=2)
    tool = ToolCallPart(
        tool_call=ToolCall(
            status=ToolCallStatus.COMPLETED, tool_call_id="call-1", tool_name="shell"
        )
    )
    parts = (
        MarkdownPart(id="s1-t1-md1", content="one "),
        tool,
        MarkdownPart(id="s1-t1-md2", content="two"),
    )
    store.apply(
        SaveTurnEnded(
            chat_id="s1-c",
            turn_id="s1-t1",
            state=TurnState.COMPLETE,
            assistant_text="one two",
            ended_at=2,
            response_parts=parts,
        )
    )
    steering = UserMessage(text="held", origin=MessageOrigin(kind=OriginKind.STEERING))
    store.apply(
        SavePending(
            session_id="s1",
            chat_id="s1-c",
            pending=PendingMessage(id="p1", kind=PendingKind.QUEUED, message=steering),
            position=0,
        )
    )
    store.commit()
    record = store.load_session("s1")
    assert record is not None
    [chat] = record.chats
    plain, rich = chat.turns
    assert plain.response_parts == (MarkdownPart(id="s1-t0-md1", content=plain.assistant_text),)
    assert rich.response_parts == parts
    assert chat.pending == (PendingMessage(id="p1", kind=PendingKind.QUEUED, message=steering),)
    rows = store_factory.query("SELECT id, response_parts FROM turns ORDER BY seq")
    assert rows[0] == ("s1-t0", None)


def test_a_sessions_enablement_decisions_are_kept_and_nothing_else_of_its_customizations(
    store: Store, store_factory: StoreFactory
) -> None:
    off = (Enablement(kind=EnablementKind.SESSION, enabled=False),)
    decided = Customization(
        type=CustomizationType.HOOK, id="mark_unread", uri="u:1", name="mark_unread"
    ).with_enablement(off)
    default = Customization(type=CustomizationType.HOOK, id="chat_draft", uri="u:2", name="d")
    plugin = Customization(
        type=CustomizationType.PLUGIN, id="p", uri="u:p", name="p", children=(decided, default)
    )
    save_session(store, "s1", 1, None)
    store.apply(SaveSessionState(session_id="s1", state=SessionState(customizations=(plugin,))))
    store.commit()
    record = store.load_session("s1")
    assert record is not None and record.state.customizations == (decided,)
    on_again = attrs.evolve(plugin, children=(decided.with_enablement(()), default))
    store.apply(SaveSessionState(session_id="s1", state=SessionState(customizations=(on_again,))))
    store.commit()
    record = store.load_session("s1")
    assert record is not None and record.state.customizations is None
    assert store_factory.query("SELECT customizations FROM sessions") == [(None,)]


# -- how many sessions an owner holds ----------------------------------------------------
def test_an_owners_count_follows_its_sessions_created_disposed_and_moved(store: Store) -> None:
    for n in range(3):
        save_session(store, f"ann{n}", n, "ann")
    save_session(store, "bob0", 9, "bob")
    save_session(store, "nobody", 10, None)
    assert (store.count_sessions("ann"), store.count_sessions("bob")) == (3, 1)
    store.apply(DeleteSession(session_id="ann1"))
    store.apply(
        SaveSessionState(session_id="ann2", state=SessionState(config=((OWNER_KEY, "bob"),)))
    )
    store.apply(
        SaveSessionState(
            session_id="bob0", state=SessionState(title="same owner", config=((OWNER_KEY, "bob"),))
        )
    )
    store.apply(
        SaveSessionState(session_id="nobody", state=SessionState(config=((OWNER_KEY, "cat"),)))
    )
    store.commit()
    counts = [store.count_sessions(owner) for owner in ("ann", "bob", "cat", "dan")]
    assert counts == [1, 2, 1, 0]


def test_an_imported_session_counts_for_its_owner_and_a_refused_one_does_not(
    store: Store,
) -> None:
    owned = SessionState(config=((OWNER_KEY, "ann"),))
    record = SessionRecord(
        session_id="s1", provider="scripted", title="", created_at=1, chats=(), state=owned
    )
    assert refused(store, [ImportSession(record=record), ImportSession(record=record)]) == {1}
    assert store.count_sessions("ann") == 1


def test_counting_an_owners_sessions_reads_one_row(
    store: Store, store_factory: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # activeSessions is read at each root subscribe: it must not cost a read of
    # the owner's sessions (issue 19: no per-request cost grows with the store).
    statements: list[tuple[str, tuple[object, ...]]] = []
    execute = store._execute  # type: ignore[attr-defined]

    def traced(statement: str, params: tuple[object, ...] = ()) -> object:
        statements.append((statement, params))
        return execute(statement, params)

    for n in range(5):
        save_session(store, f"s{n}", n, "ann")
    store.commit()
    monkeypatch.setattr(store, "_execute", traced)
    assert store.count_sessions("ann") == 5
    [(statement, params)] = statements
    assert "sessions WHERE" not in statement.replace("session_counts WHERE", "")
    if store_factory.kind == "sqlite":
        plan = " ".join(str(row[3]) for row in execute(f"EXPLAIN QUERY PLAN {statement}", params))
        assert "SEARCH session_counts USING INDEX" in plan and "(owner=?)" in plan
    else:
        execute("SET LOCAL enable_seqscan = off")
        plan = " ".join(str(row[0]) for row in execute(f"EXPLAIN {statement}", params))
        assert "Index Scan using session_counts_pkey" in plan


def test_migration_14_counts_the_sessions_stored_before_it(store_factory: StoreFactory) -> None:
    store_factory.write_schema(up_to=13)
    for session_id, owner in (("a", "ann"), ("b", "ann"), ("c", "bob"), ("d", None)):
        store_factory.execute(
            "INSERT INTO sessions (id, provider, created_at, modified_at, owner)"
            " VALUES (?, 'scripted', 1, 1, ?)",
            (session_id, owner),
        )
    store = store_factory()
    store.open()
    try:
        assert (store.count_sessions("ann"), store.count_sessions("bob")) == (2, 1)
        store.apply(DeleteSession(session_id="a"))
        store.commit()
        assert store.count_sessions("ann") == 1
    finally:
        store.close()


# -- a chat's read and archived flags ----------------------------------------------------
def test_a_chats_read_and_archived_flags_are_kept_and_come_back(store: Store) -> None:
    save = SaveSession(
        session_id="s1", provider="scripted", title="", created_at=1, chat_ids=("c1", "c2")
    )
    store.apply(save)
    store.apply(SaveChatMeta(chat_id="c1", read=True))
    store.apply(SaveChatMeta(chat_id="c1", archived=True))
    store.apply(SaveChatMeta(chat_id="c1", title="kept"))  # None: the flags unchanged
    store.apply(SaveChatMeta(chat_id="c2", read=True))
    store.apply(SaveChatMeta(chat_id="c2", read=False))
    store.commit()
    record = store.load_session("s1")
    assert record is not None
    first, second = record.chats
    assert (first.title, first.read, first.archived) == ("kept", True, True)
    assert (second.read, second.archived) == (False, False)


def test_an_imported_chat_keeps_its_flags(store: Store) -> None:
    chat = ChatRecord(
        chat_id="c1", title="", draft=None, turns=(), pending=(), read=True, archived=True
    )
    record = SessionRecord(
        session_id="s1", provider="scripted", title="", created_at=1, chats=(chat,)
    )
    store.apply(ImportSession(record=record))
    store.commit()
    loaded = store.load_session("s1")
    assert loaded is not None
    assert (loaded.chats[0].read, loaded.chats[0].archived) == (True, True)

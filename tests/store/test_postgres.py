"""What only PostgreSQL needs: a store shared by processes, an aborted batch never
committed as if it were whole, a lost connection, and its refusals."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from agenthost.actors import use_runtime
from agenthost.actors.protocol import Committed, Write
from agenthost.actors.store import StoreActor
from agenthost.messages import AgentHostError, ErrorCode
from agenthost.store import store_from_spec
from agenthost.store.records import SaveSession
from agenthost.testing import DeterministicRunner
from tests.fakes.stores import Acks, StoreFactory, store_factories

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (agenthost[scale])")


@pytest.fixture
def pg(db_path: Path) -> Iterator[StoreFactory]:
    yield from store_factories("postgres", db_path)


def session(session_id: str) -> SaveSession:
    return SaveSession(
        session_id=session_id, provider="scripted", title="", created_at=0, chat_ids=()
    )


def refused(store: object) -> str:
    with pytest.raises(AgentHostError) as caught:
        store.open()  # type: ignore[attr-defined]
    assert caught.value.code is ErrorCode.STORE_ERROR
    assert "\n" not in caught.value.message
    return caught.value.message


def test_two_processes_share_one_store_without_a_lock(pg: StoreFactory) -> None:
    first, second = pg(), pg()
    first.open()
    second.open()  # no lock file: shards share the database
    try:
        first.apply(session("a"))
        assert second.find_session("a") is None  # not committed yet
        first.commit()
        second.commit()  # its next transaction sees the commit
        found = second.find_session("a")
        assert found is not None and found.id == "a"
    finally:
        first.close()
        second.close()


def test_a_batch_a_failed_statement_aborted_is_refused_at_commit(pg: StoreFactory) -> None:
    # PostgreSQL answers COMMIT in an aborted transaction with a rollback and no
    # error: without the check, every write of the batch would be acked as
    # durable and lost.
    store = pg()
    store.open()
    try:
        store.apply(session("a"))
        with pytest.raises(psycopg.Error):
            store._execute("SELECT 1 / 0")  # type: ignore[attr-defined]
        with pytest.raises(psycopg.Error):
            store.commit()
        store.rollback()
        store.apply(session("b"))
        store.commit()
    finally:
        store.close()
    assert pg.query("SELECT id FROM sessions") == [("b",)]


def test_a_lost_connection_fails_its_batch_and_the_next_write_gets_through(
    pg: StoreFactory,
) -> None:
    with use_runtime(DeterministicRunner()) as runner:
        opened = pg()
        opened.open()
        store = StoreActor.start(opened)
        acks = Acks.start()
        admin = psycopg.connect(opened.conninfo, autocommit=True)  # type: ignore[attr-defined]
        with admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = %s AND pid <> pg_backend_pid()",
                (opened.schema,),  # type: ignore[attr-defined]
            )
        store.tell(Write(op=session("lost"), ack_to=acks, ack=Committed(seq=1)))
        runner.run()
        store.tell(Write(op=session("kept"), ack_to=acks, ack=Committed(seq=2)))
        runner.run()
        lost, kept = acks.proxy().acks.get()
        assert lost.error is not None and lost.error.code is ErrorCode.STORE_ERROR
        assert kept == Committed(seq=2)
        store.stop()
    assert pg.query("SELECT id FROM sessions") == [("kept",)]


def test_a_schema_of_another_program_is_refused_untouched(pg: StoreFactory) -> None:
    schema = pg().schema  # type: ignore[attr-defined]
    pg.execute(f"CREATE SCHEMA {schema}; CREATE TABLE {schema}.notes (body TEXT);")
    message = refused(pg())
    assert "another program's tables (notes)" in message and "?schema=NAME" in message
    assert pg.query(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = ?", (schema,)
    ) == [("notes",)]


def test_a_store_written_by_a_newer_agenthost_is_refused(pg: StoreFactory) -> None:
    store = pg()
    store.open()
    store.close()
    pg.execute("INSERT INTO schema_version VALUES (?)", (9999,))
    assert "schema version 9999 is newer" in refused(pg())


def test_a_store_that_should_exist_and_does_not_is_refused(pg: StoreFactory) -> None:
    message = refused(pg(create=False))
    assert "no agenthost store there" in message
    assert (
        pg.query(
            "SELECT 1 FROM pg_namespace WHERE nspname = ?",
            (pg().schema,),  # type: ignore[attr-defined]
        )
        == []
    )


def test_a_server_that_cannot_be_reached_is_refused_in_one_line() -> None:
    message = refused(store_from_spec("postgresql://postgres:secret@127.0.0.1:1/test"))
    assert message.startswith("store postgresql://postgres@127.0.0.1:1/test?schema=agenthost:")
    assert "cannot connect" in message and "secret" not in message


def test_a_schema_name_that_is_not_a_plain_identifier_is_refused() -> None:
    with pytest.raises(AgentHostError) as caught:
        store_from_spec("postgresql://postgres@127.0.0.1/test?schema=Bad-Name")
    assert "lowercase letters, digits and _" in caught.value.message


def test_check_reports_a_store_and_backup_points_at_pg_dump(pg: StoreFactory) -> None:
    store = pg()
    store.open()
    store.apply(session("a"))
    store.close()
    report = pg(create=False).check()
    assert (report.sessions, report.turns, report.schema_version) == (1, 0, report.known_version)
    with pytest.raises(AgentHostError) as caught:
        pg().backup("/tmp/never")
    assert "pg_dump" in caught.value.message

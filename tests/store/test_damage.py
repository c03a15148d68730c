"""A damaged, foreign, unreadable or empty SQLite store is refused when it opens,
with one line naming the file, what is wrong and what to do; nothing is written
to it, and `agenthost store check` says the same."""

import logging
import os
import random
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import structlog
from structlog.testing import capture_logs
from typer.testing import CliRunner

from agenthost.actors import Host
from agenthost.messages import AgentHostError, ErrorCode
from agenthost.server.cli import app
from agenthost.store import SqliteStore
from agenthost.testing import FakeClock
from tests.fakes.stores import write_turns

TURNS = 3000


def fill(store: SqliteStore, turns: int = TURNS) -> None:
    """A session with many turns (a store of some megabytes), committed."""
    write_turns(store, "s", turns, text_size=300)
    store.commit()


@pytest.fixture
def good(db_path: Path) -> Path:
    store = SqliteStore(db_path)
    store.open()
    fill(store)
    store.close()
    return db_path


def refusal(path: Path) -> str:
    """Open the store; the one line it is refused with."""
    store = SqliteStore(path)
    with pytest.raises(AgentHostError) as caught:
        store.open()
    error = caught.value
    assert error.code is ErrorCode.STORE_ERROR
    assert "\n" not in error.message
    assert str(path) in error.message
    return error.message


def overwrite(path: Path, offset: int, size: int, seed: int = 7) -> None:
    with open(path, "r+b") as file:
        file.seek(offset)
        file.write(random.Random(seed).randbytes(size))


def test_a_good_store_opens_and_reports_what_it_holds(good: Path) -> None:
    report = SqliteStore(good).check()
    assert (report.sessions, report.turns) == (1, TURNS)
    assert report.schema_version == report.known_version >= 8
    store = SqliteStore(good)
    store.open()
    try:
        assert store.created is False
        assert len(store.load_session("s").chats[0].turns) == TURNS  # type: ignore[union-attr]
    finally:
        store.close()


def test_a_truncated_store_is_refused_as_damaged(good: Path) -> None:
    os.truncate(good, good.stat().st_size // 2)
    message = refusal(good)
    assert "damaged" in message and "restore it from a backup" in message


def test_a_store_with_an_overwritten_header_is_refused(good: Path) -> None:
    overwrite(good, 0, 100)
    message = refusal(good)
    assert "not a SQLite database" in message and "restore it from a backup" in message


def test_a_store_with_overwritten_pages_in_the_middle_is_refused(good: Path) -> None:
    # Found by an adversarial tester: the server started without a word, then
    # answered some chats with internal errors; quick_check finds it at open.
    size = good.stat().st_size
    assert size > 1_000_000
    overwrite(good, (size // 2) // 4096 * 4096, 4 * 4096)
    message = refusal(good)
    assert "damaged" in message and "move it aside" in message


def test_a_damaged_store_stops_the_host_from_starting_and_stays_as_it_was(good: Path) -> None:
    size = good.stat().st_size
    overwrite(good, (size // 2) // 4096 * 4096, 4 * 4096)
    before = good.read_bytes()
    for _ in range(2):  # refused again, not "in use": the failed open let its lock go
        with pytest.raises(AgentHostError) as caught:
            Host.start(store=SqliteStore(good), clock=FakeClock())
        assert "damaged" in caught.value.message
    assert good.read_bytes() == before


def test_a_file_that_is_not_a_database_is_refused(db_path: Path) -> None:
    db_path.write_text("these are somebody's notes, not a database\n" * 100)
    assert "not a SQLite database" in refusal(db_path)
    assert db_path.read_text().startswith("these are somebody's notes")


def test_an_empty_file_is_refused_rather_than_taken_for_a_new_store(db_path: Path) -> None:
    db_path.touch()
    message = refusal(db_path)
    assert "empty (0 bytes)" in message and "delete it to start a new store" in message
    assert db_path.stat().st_size == 0


def test_a_sqlite_database_of_another_program_is_refused_untouched(db_path: Path) -> None:
    with sqlite3.connect(db_path) as db:
        db.execute("CREATE TABLE notes (body TEXT)")
    before = db_path.read_bytes()
    assert "another program (tables: notes)" in refusal(db_path)
    assert db_path.read_bytes() == before  # not switched to WAL, nothing migrated


def test_a_store_written_by_a_newer_agenthost_is_refused(good: Path) -> None:
    with sqlite3.connect(good) as db:
        db.execute("INSERT INTO schema_version VALUES (9999)")
    assert "schema version 9999 is newer" in refusal(good)


def test_a_folder_given_as_the_store_is_refused(tmp_path: Path) -> None:
    assert "it is a folder" in refusal(tmp_path)


def test_a_store_whose_file_is_gone_but_its_log_is_not_is_refused(good: Path) -> None:
    Path(f"{good}-wal").write_bytes(b"x" * 100)
    good.unlink()
    assert "write-ahead log is there" in refusal(good)
    assert not good.exists()


def test_a_missing_store_is_created_and_says_where(db_path: Path) -> None:
    store = SqliteStore(db_path)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    with capture_logs() as logs:
        store.open()
    store.close()
    assert store.created
    assert {"event": "store_created", "store": str(db_path), "log_level": "info"} in logs
    assert not db_path.with_name(db_path.name + ".new").exists()
    again = SqliteStore(db_path)
    again.open()
    again.close()
    assert not again.created


def test_a_missing_store_is_refused_where_it_should_exist(db_path: Path) -> None:
    store = SqliteStore(db_path, create=False)
    with pytest.raises(AgentHostError) as caught:
        store.open()
    assert "no such file" in caught.value.message
    assert not db_path.exists()


OPEN_AND_SAY = (
    "import sys; from agenthost.store import SqliteStore\n"
    "try:\n    SqliteStore(sys.argv[1]).open()\n"
    "except Exception as e:\n    print(type(e).__name__, e.message)"
)


def test_a_store_in_a_read_only_folder_is_refused(tmp_path: Path, db_path: Path) -> None:
    store = SqliteStore(db_path)
    store.open()
    fill(store, turns=10)
    store.close()
    os.remove(f"{db_path}.lock")
    command = [sys.executable, "-c", OPEN_AND_SAY, str(db_path)]
    if os.geteuid() == 0:  # root writes in any folder: mount this one read-only for the child
        folder = shlex.quote(str(tmp_path))
        command = [
            "unshare",
            "-m",
            "sh",
            "-c",
            f"mount --bind {folder} {folder} && mount -o remount,ro,bind {folder} {folder}"
            ' && exec "$@"',
            "sh",
            *command,
        ]
    else:
        tmp_path.chmod(0o555)
    try:
        opened = subprocess.run(command, capture_output=True, text=True, timeout=60)
    finally:
        tmp_path.chmod(0o755)
    if "mount" in opened.stderr or "unshare" in opened.stderr:
        pytest.skip(f"cannot make a read-only folder as root here: {opened.stderr.strip()}")
    assert opened.stderr == ""
    assert opened.stdout.count("\n") == 1
    assert opened.stdout.startswith(f"AgentHostError store {db_path}: cannot write in its folder")


# -- the command line ---------------------------------------------------------------------------


def test_store_check_says_ok_for_a_good_store_and_what_is_wrong_with_a_damaged_one(
    good: Path,
) -> None:
    runner = CliRunner()
    ok = runner.invoke(app, ["store", "check", str(good)])
    assert ok.exit_code == 0, ok.output
    assert ok.stdout.startswith(f"{good}: ok: 1 session, {TURNS:,} turns, schema")
    overwrite(good, (good.stat().st_size // 2) // 4096 * 4096, 4 * 4096)
    bad = runner.invoke(app, ["store", "check", f"sqlite:///{good}"])
    assert bad.exit_code == 1
    [line] = bad.stderr.splitlines()
    assert line.startswith(f"agenthost: store {good}: the database is damaged (integrity_check")


def test_store_check_does_not_create_a_store(db_path: Path) -> None:
    result = CliRunner().invoke(app, ["store", "check", str(db_path)])
    assert result.exit_code == 1
    assert (
        result.stderr
        == f"agenthost: store {db_path}: no such file; give the path of an existing store\n"
    )
    assert not db_path.exists() and not db_path.parent.joinpath(f"{db_path.name}.lock").exists()

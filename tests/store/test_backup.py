"""`agenthost store backup`: SQLite's online backup, consistent while a host writes."""

import threading
from pathlib import Path

from typer.testing import CliRunner

from agenthost.actors import Host
from agenthost.messages import OutcomeState
from agenthost.server.cli import app
from agenthost.store import SqliteStore
from agenthost.testing import FakeClock
from tests.fakes.stores import write_turns

TURNS_PER_SESSION = 20


class Writer(threading.Thread):
    """Writes session after session, each with its turns in one commit, until stopped."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.store = SqliteStore(path)
        self.store.open()
        self.stop = threading.Event()
        self.committed = 0
        self.progress = threading.Condition()

    def wait_committed(self, count: int) -> None:
        with self.progress:
            assert self.progress.wait_for(lambda: self.committed >= count, timeout=30)

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                write_turns(self.store, f"s{self.committed}", TURNS_PER_SESSION)
                self.store.commit()
                with self.progress:
                    self.committed += 1
                    self.progress.notify_all()
        finally:
            self.store.close()


def test_a_backup_taken_while_a_writer_keeps_writing_passes_check_and_loads(
    tmp_path: Path,
) -> None:
    source, copy = tmp_path / "live.db", tmp_path / "copy.db"
    writer = Writer(source)
    writer.start()
    try:
        writer.wait_committed(20)
        result = CliRunner().invoke(app, ["store", "backup", str(source), str(copy)])
        writer.wait_committed(writer.committed + 5)  # it kept writing
    finally:
        writer.stop.set()
        writer.join(timeout=30)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"{copy}: backed up: ")
    assert not (tmp_path / "copy.db.partial").exists()

    report = SqliteStore(copy).check()
    assert 20 <= report.sessions < writer.committed
    assert report.turns == report.sessions * TURNS_PER_SESSION  # whole commits only
    host = Host.start(store=SqliteStore(copy), clock=FakeClock())
    try:
        listed = host.list_sessions()
        assert len(listed) == report.sessions
        assert {s.turn_count for s in listed} == {TURNS_PER_SESSION}
        chat = host.open_session("s0").chat()
        assert len(chat.state().turns) == TURNS_PER_SESSION
        assert chat.send("after the restore").result(timeout=10).state is OutcomeState.COMPLETE
    finally:
        host.stop()


def test_a_backup_never_overwrites_a_file(tmp_path: Path) -> None:
    source = tmp_path / "live.db"
    store = SqliteStore(source)
    store.open()
    store.close()
    taken = tmp_path / "taken.db"
    taken.write_text("keep me")
    result = CliRunner().invoke(app, ["store", "backup", str(source), str(taken)])
    assert result.exit_code == 1
    assert result.stderr == f"agenthost: {taken} exists already; give a new name for the backup\n"
    assert taken.read_text() == "keep me"

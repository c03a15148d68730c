"""One `--store` form for every command: a path, sqlite:///path, or postgresql://..."""

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agenthost.actors import Host
from agenthost.messages import AgentHostError, ErrorCode
from agenthost.server.cli import app
from agenthost.store import SqliteStore, store_from_spec
from agenthost.testing import FakeClock


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ("store.db", "store.db"),
        ("sqlite:///store.db", "store.db"),
        ("sqlite:///data/store.db", "data/store.db"),
        ("sqlite:////abs/store.db", "/abs/store.db"),
        ("/abs/store.db", "/abs/store.db"),
        (Path("/abs/store.db"), "/abs/store.db"),
    ],
)
def test_a_path_or_a_sqlite_url_names_a_sqlite_file(spec: str | Path, path: str) -> None:
    store = store_from_spec(spec)
    assert isinstance(store, SqliteStore)
    assert store.path == Path(path)


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("", "the store is empty"),
        ("sqlite:x", "a SQLite URL is sqlite:///relative/path"),
        ("sqlite://x/y.db", "a SQLite URL is sqlite:///relative/path"),
        ("sqlite:///", "a SQLite URL is sqlite:///relative/path"),
        ("sqlite:///:memory:", "give a file path"),
        ("mysql://db/x", "unknown kind of store 'mysql'"),
    ],
)
def test_a_value_that_names_no_store_is_refused_saying_why(spec: str, says: str) -> None:
    with pytest.raises(AgentHostError) as caught:
        store_from_spec(spec)
    assert caught.value.code is ErrorCode.STORE_ERROR
    assert says in caught.value.message


def exported_session(tmp_path: Path) -> tuple[Path, str]:
    host = Host.start(store=SqliteStore(tmp_path / "a.db"), clock=FakeClock())
    session = host.create_session()
    session.chat().send("hello").result(timeout=10)
    host.stop()
    result = CliRunner().invoke(app, ["export", session.id, "--store", str(tmp_path / "a.db")])
    assert result.exit_code == 0, result.output
    exported = tmp_path / "s.json"
    exported.write_text(result.stdout)
    return exported, session.id


def test_import_into_a_sqlite_url_writes_that_file_and_says_it_is_new(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exported, session_id = exported_session(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    runner = CliRunner()
    bad = runner.invoke(app, ["import", str(exported), "--store", "sqlite:x"])
    assert bad.exit_code == 2
    assert bad.stderr.startswith("agenthost: sqlite:x: a SQLite URL is sqlite:///")
    assert os.listdir(work) == []  # no folder named `sqlite:`
    good = runner.invoke(app, ["import", str(exported), "--store", "sqlite:///b.db"])
    assert good.exit_code == 0, good.output
    assert good.stderr == "agenthost: created a new store at b.db\n"
    assert good.stdout.strip() == session_id
    again = runner.invoke(app, ["export", session_id, "--store", "sqlite:///b.db"])
    assert again.exit_code == 0, again.output
    assert again.stderr == ""
    before, after = json.loads(exported.read_text()), json.loads(again.stdout)
    assert after["session"]["chats"] == before["session"]["chats"]


def test_export_from_a_store_that_does_not_exist_creates_nothing(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["export", "abc", "--store", str(tmp_path / "no.db")])
    assert result.exit_code == 2
    assert result.stderr == (
        f"agenthost: store {tmp_path / 'no.db'}: no such file; give the path of an existing store\n"
    )
    assert os.listdir(tmp_path) == []

"""The command line as a user meets it: each mistake is one line, `agenthost:
<what>: <why>`, with a non-zero exit code and no traceback.

Commands run in process through `cli.run` (what the `agenthost` script
calls), so a store a test's host holds is held against them as another
process's would be (flock locks are per open file).
"""

import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

from agenthost.actors import Host
from agenthost.providers import ScriptedProvider
from agenthost.providers.scripted import Gate, Say
from agenthost.server import cli
from agenthost.store import SqliteStore
from agenthost.store.records import SaveTurnStarted, StoreOp


def agenthost(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.run(args)
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str, *words: str) -> str:
    """The error as the user sees it: one line, no traceback, saying `words`."""
    assert err.startswith("agenthost: ") and err.endswith("\n"), err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for word in words:
        assert word in err, err
    return err


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store with two sessions, one turn each; they are stored, not resident."""
    path = tmp_path / "agenthost.db"
    host = Host.start(store=SqliteStore(path))
    for text in ("first words", "second words"):
        host.create_session(session_id=f"ab{len(text)}-{text[0]}").chat().send(text).result()
    host.stop()
    return path


def test_the_version_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = agenthost(capsys, "--version")
    assert code == 0 and out.startswith("agenthost 0.")


def test_a_bogus_log_level_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = agenthost(capsys, "--log-level", "bogus", "sessions")
    assert code == 2
    one_line(err, "--log-level", "'bogus'", "debug")


def test_an_event_loop_agenthost_does_not_run_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTHOST_LOOP", "trio")
    code, _, err = agenthost(capsys, "load", "--chats", "1", "--turns", "1")
    assert code == 2
    assert err == "agenthost: AGENTHOST_LOOP='trio': choose uvloop or asyncio\n"


def test_a_missing_argument_and_an_unknown_command_are_one_line_each(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = agenthost(capsys, "export")
    assert code == 2
    one_line(err, "export: missing argument SESSION", "agenthost export --help")
    code, _, err = agenthost(capsys, "exprot")
    assert code == 2
    one_line(err, "exprot")


@pytest.mark.parametrize(
    ("args", "usage", "line"),
    [
        ((), "Usage: agenthost [OPTIONS] COMMAND", "agenthost: a command is needed: load, "),
        (("--log-level", "info"), None, "agenthost: a command is needed: load, "),
        (
            ("store",),
            "Usage: agenthost store [OPTIONS] COMMAND",
            "agenthost: store: a command is needed: check or backup\n",
        ),
    ],
)
def test_a_group_without_its_command_shows_its_help_and_names_the_commands(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], usage: str | None, line: str
) -> None:
    code, out, err = agenthost(capsys, *args)
    assert code == 2  # as click exits for a group that needs a command
    if usage is not None:
        assert usage in out
    one_line(err, line)
    assert err.startswith(line) and ":  (" not in err
    code, _, err = agenthost(capsys, "--debug", *args)  # no traceback for a command line
    assert code == 2 and err.startswith(line)


def test_each_command_is_summed_up_in_one_line_of_the_help() -> None:
    import typer

    group = typer.main.get_command(cli.app)
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        summary = (command.help or "").split("\n\n")[0]
        assert summary and "\n" not in summary, name  # no break in mid-sentence
    store = group.commands["store"]  # type: ignore[attr-defined]
    for name, command in store.commands.items():
        assert "\n" not in (command.help or "").split("\n\n")[0], name


def test_debug_shows_the_traceback(capsys: pytest.CaptureFixture[str], store: Path) -> None:
    with pytest.raises(cli.CliError):
        cli.run(["--debug", "export", "nosuch", "--store", str(store)])


def test_sessions_lists_each_session_with_its_title_turns_and_last_activity(
    capsys: pytest.CaptureFixture[str], store: Path
) -> None:
    code, out, _ = agenthost(capsys, "sessions", "--store", str(store))
    assert code == 0
    assert "2 sessions" in out
    for id_, title in (("ab11-f", "first words"), ("ab12-s", "second words")):
        row = next(line for line in out.splitlines() if id_ in line)
        assert title in row and "unread" in row and " 1 " in row and "20" in row  # a year
    code, out, _ = agenthost(capsys, "sessions", "--store", str(store), "--json")
    rows = json.loads(out)
    assert [r["id"] for r in rows] == ["ab12-s", "ab11-f"]  # the latest activity first
    assert {r["turns"] for r in rows} == {1}


def test_sessions_of_an_empty_or_missing_store(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    Host.start(store=SqliteStore(tmp_path / "empty.db")).stop()
    code, out, _ = agenthost(capsys, "sessions", "--store", f"sqlite:///{tmp_path}/empty.db")
    assert code == 0 and out.startswith("No sessions in ")
    code, _, err = agenthost(capsys, "sessions", "--store", str(tmp_path / "none.db"))
    assert code == 2  # a --store naming no usable store
    one_line(err, "none.db", "no such file")
    monkeypatch.setenv("HOME", str(tmp_path))  # a new user's default store: not a mistake
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    code, out, err = agenthost(capsys, "sessions")
    assert (code, err) == (0, "") and out.startswith("No sessions yet (")


@pytest.mark.parametrize("command", ["sessions", "export", "import", "store check"])
def test_a_folder_given_as_the_store_is_said_to_be_a_folder(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str
) -> None:
    args = {"export": ["ab11"], "import": [str(tmp_path / "s.json")]}.get(command, [])
    (tmp_path / "s.json").write_text('{"agenthost": 1, "session": {"provider": "scripted"}}')
    if command == "store check":
        code, _, err = agenthost(capsys, "store", "check", str(tmp_path))
    else:
        code, _, err = agenthost(capsys, command, *args, "--store", str(tmp_path))
    assert code in (1, 2) and code == (1 if command == "store check" else 2)
    one_line(err, str(tmp_path), "it is a folder", "agenthost.db")
    assert "no such file" not in err


def test_an_empty_session_id_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str], store: Path
) -> None:
    for empty in ("", " "):
        code, out, err = agenthost(capsys, "export", empty, "--store", str(store))
        assert (code, out) == (2, "")
        one_line(err, "export: the session id is empty", "agenthost sessions")


@pytest.mark.parametrize("command", ["load", "import", "serve"])
def test_a_store_in_a_missing_folder_is_refused_and_no_folder_is_made(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str
) -> None:
    (tmp_path / "s.json").write_text('{"agenthost": 1, "session": {"provider": "scripted"}}')
    missing = tmp_path / "no" / "such" / "dir"
    args = {
        "load": ["load", "--chats", "1", "--turns", "1"],
        "import": ["import", str(tmp_path / "s.json")],
        "serve": ["serve", "--port", "0"],
    }[command]
    code, out, err = agenthost(capsys, *args, "--store", str(missing))
    assert (code, out) == (2, "")
    one_line(err, f"store {missing}", f"its folder {missing.parent} does not exist")
    assert not (tmp_path / "no").exists()


def test_load_says_where_it_made_its_store_and_counts_in_words(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    given = ["--chats", "1", "--turns", "1", "--store", str(tmp_path)]
    code, out, err = agenthost(capsys, "load", *given)
    (made,) = tmp_path.glob("load-*.db")
    assert code == 0
    assert err == f"agenthost: created a new store at {made}\n"
    assert "1 chat x 1 turn (copilot)" in out and "│ store " in out
    code, out, err = agenthost(capsys, "load", *given, "--json")
    (_, again) = sorted(tmp_path.glob("load-*.db"))
    assert json.loads(out)["store"] == str(again) and str(again) in err
    code, out, err = agenthost(capsys, "load", "--chats", "2", "--turns", "3")
    assert (code, err) == (0, "")  # a temporary store: removed, so not announced
    assert "2 chats x 3 turns" in out and "a temporary file" in out


def test_load_refuses_a_store_it_cannot_use_as_every_command_does(
    capsys: pytest.CaptureFixture[str], store: Path, tmp_path: Path
) -> None:
    (tmp_path / "empty.db").write_bytes(b"")
    code, _, err = agenthost(capsys, "load", "--chats", "1", "--store", str(tmp_path / "empty.db"))
    assert code == 2  # a --store naming no usable store, as for serve, import, export
    one_line(err, "empty.db", "the file is empty")
    host = Host.start(store=SqliteStore(store))
    try:
        code, _, err = agenthost(capsys, "load", "--chats", "1", "--store", str(store))
    finally:
        host.stop()
    assert code == 2
    one_line(err, str(store), "in use by another agenthost process", "stop it")
    code, _, err = agenthost(capsys, "load", "--store", str(tmp_path / "nowhere") + "/")
    assert code == 2
    one_line(err, "nowhere/", "no such folder")


def test_chat_without_a_token_on_a_pipe_fails_in_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTHOST_TOKEN", raising=False)
    monkeypatch.setattr(sys, "stdin", io.StringIO("hello\n"))
    code, out, err = agenthost(capsys, "chat")
    assert (code, out) == (2, "")
    one_line(err, "--token: needed", "AGENTHOST_TOKEN", "not a terminal")
    assert "Warning" not in err


def test_chat_refuses_an_empty_session_to_open_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = agenthost(capsys, "chat", "--open", " ", "--token", "t" * 32)
    assert code == 2
    one_line(err, "--open: the session id is empty")


def test_chat_refuses_a_url_that_is_no_websocket_url_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = agenthost(capsys, "chat", "--url", "ftp://127.0.0.1/", "--token", "t" * 32)
    assert code == 2
    one_line(err, "--url", "give ws://HOST:PORT/ahp", "http:// URL")


def test_export_takes_a_unique_prefix_and_names_the_matches_of_an_ambiguous_one(
    capsys: pytest.CaptureFixture[str], store: Path
) -> None:
    code, out, _ = agenthost(capsys, "export", "ab11", "--store", str(store))
    assert code == 0
    assert json.loads(out)["session"]["sessionId"] == "ab11-f"
    code, _, err = agenthost(capsys, "export", "ab", "--store", str(store))
    assert code == 1
    one_line(err, "ab: 2 sessions start with it", "ab11-f", "ab12-s")
    code, _, err = agenthost(capsys, "export", "zz", "--store", str(store))
    assert code == 1
    one_line(err, "zz: no session in", "agenthost.db")


def test_export_reads_a_store_a_running_host_holds(
    capsys: pytest.CaptureFixture[str], store: Path
) -> None:
    host = Host.start(store=SqliteStore(store))
    try:
        host.create_session(session_id="live").chat().send("while it runs").result()
        code, out, err = agenthost(capsys, "export", "live", "--store", str(store))
        assert code == 0, err
        turns = json.loads(out)["session"]["chats"][0]["turns"]
        assert [t["message"]["text"] for t in turns] == ["while it runs"]
        code, out, _ = agenthost(capsys, "sessions", "--store", str(store))
        assert code == 0 and "live" in out
    finally:
        host.stop()


def test_import_beside_a_running_host_says_why_not(
    capsys: pytest.CaptureFixture[str], store: Path, tmp_path: Path
) -> None:
    code, out, _ = agenthost(capsys, "export", "ab11", "--store", str(store))
    (tmp_path / "s.json").write_text(out)
    other = tmp_path / "other.db"
    host = Host.start(store=SqliteStore(other))
    try:
        code, _, err = agenthost(capsys, "import", str(tmp_path / "s.json"), "--store", str(other))
        assert code == 2  # a --store naming no usable store
        one_line(err, "other.db", "in use by another agenthost process", "stop it")
    finally:
        host.stop()
    code, out, _ = agenthost(capsys, "import", str(tmp_path / "s.json"), "--store", str(other))
    assert (code, out) == (0, "ab11-f\n")


def test_import_refuses_a_missing_a_non_json_and_a_foreign_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "bad.json").write_text("not json")
    (tmp_path / "foreign.json").write_text('{"a": 1}')
    for name, why in (
        ("missing.json", "No such file"),
        ("bad.json", "not JSON"),
        ("foreign.json", "not a session that `agenthost export` printed"),
    ):
        code, _, err = agenthost(capsys, "import", str(tmp_path / name))
        assert code == 1
        one_line(err, name, why)
    assert not (tmp_path / ".local").exists()  # nothing was opened


def test_a_session_of_a_manifests_provider_is_imported_with_providers(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source = Host.start(store=SqliteStore(tmp_path / "a.db"), providers={"gpt": ScriptedProvider()})
    session = source.create_session("gpt")
    session.chat().send("hi").result()
    source.stop()
    code, out, _ = agenthost(capsys, "export", session.id, "--store", str(tmp_path / "a.db"))
    (tmp_path / "s.json").write_text(out)
    into = ["--store", str(tmp_path / "b.db")]
    code, _, err = agenthost(capsys, "import", str(tmp_path / "s.json"), *into)
    assert code == 1
    one_line(err, "'gpt'", "--providers")
    assert not (tmp_path / "b.db").exists()  # refused before a store was made for it
    (tmp_path / "m.toml").write_text('[providers.gpt]\nkind = "scripted"\n')
    code, out, err = agenthost(
        capsys, "import", str(tmp_path / "s.json"), *into, "--providers", str(tmp_path / "m.toml")
    )
    assert (code, out) == (0, f"{session.id}\n"), err
    assert err == f"agenthost: created a new store at {tmp_path / 'b.db'}\n"


def test_serve_refuses_a_provider_beside_a_manifest_and_an_unknown_provider(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "m.toml").write_text('[providers.gpt]\nkind = "scripted"\n')
    code, _, err = agenthost(
        capsys, "serve", "--providers", str(tmp_path / "m.toml"), "--provider", "nosuch"
    )
    assert code == 2
    one_line(err, "--provider and --providers", "give one")
    code, _, err = agenthost(capsys, "serve", "--provider", "nosuch")
    assert code == 2
    one_line(err, "--provider", "'nosuch'", "scripted")


def test_serve_says_the_port_is_in_use(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        code, out, err = agenthost(
            capsys, "serve", "--port", port, "--store", str(tmp_path / "s.db")
        )
    assert code == 1 and out == ""
    one_line(err, f"cannot listen on 127.0.0.1:{port}", "in use", "--port 0")
    assert not (tmp_path / "s.db").exists()  # refused before a store was made for it


def test_serve_says_what_is_wrong_with_a_token_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "tokens").write_text("# token identity\nshort alice\n")
    code, _, err = agenthost(capsys, "serve", "--token-file", str(tmp_path / "tokens"))
    assert code == 2
    one_line(err, "--token-file", "tokens:2", "16+ characters")
    code, _, err = agenthost(capsys, "serve", "--token-file", str(tmp_path / "none"))
    assert code == 2
    one_line(err, "--token-file", "No such file")


def test_serve_help_documents_the_token_file_format(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = agenthost(capsys, "serve", "--help")
    words = " ".join(out.replace("│", " ").split())  # as wrapped in the help's box
    assert code == 0
    assert "`TOKEN IDENTITY` lines: a token of 16 or more characters" in words


@pytest.mark.parametrize("flag", ["--send-buffer-bytes", "--replay-bytes", "--page-bytes"])
def test_serve_refuses_a_byte_limit_below_one(
    capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    code, _, err = agenthost(capsys, "serve", "--port", "0", flag, "0")
    assert code == 2
    assert err == f"agenthost: {flag}: Input should be greater than or equal to 1\n"


def test_serve_says_its_store_is_locked_or_read_only(
    capsys: pytest.CaptureFixture[str], store: Path, tmp_path: Path
) -> None:
    host = Host.start(store=SqliteStore(store))
    try:
        code, _, err = agenthost(capsys, "serve", "--port", "0", "--store", str(store))
    finally:
        host.stop()
    assert code == 2  # a --store naming no usable store
    one_line(err, str(store), "in use by another agenthost process")
    if os.geteuid() == 0:  # root writes anywhere but on a read-only file system
        if not Path("/sys/fs").is_dir():
            pytest.skip("no read-only file system to try (running as root, no /sys)")
        read_only = Path("/sys/fs/agenthost.db")
    else:
        (tmp_path / "ro").mkdir(mode=0o555)
        read_only = tmp_path / "ro" / "agenthost.db"
    code, _, err = agenthost(capsys, "serve", "--port", "0", "--store", str(read_only))
    assert code == 2  # a --store naming no usable store
    one_line(err, str(read_only), "writ")  # what cannot be written, and to make it writable


def test_the_installed_command_prints_one_line_and_no_traceback(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agenthost.server.cli", "export", "nosuch"],
        env={**os.environ, "HOME": str(tmp_path), "XDG_DATA_HOME": ""},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stdout == ""
    one_line(done.stderr, "no such file", str(tmp_path))


def test_serve_prints_its_store_its_providers_and_a_url_that_signs_the_page_in(
    tmp_path: Path,
) -> None:
    (tmp_path / "m.toml").write_text('[providers.fast]\nkind = "scripted"\n')
    store = tmp_path / "served.db"
    options = ["--port", "0", "--store", str(store), "--providers", str(tmp_path / "m.toml")]
    child = subprocess.Popen(
        [sys.executable, "-m", "agenthost.server.cli", "serve", *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        lines = [child.stdout.readline() for _ in range(5)]
        token = lines[1].rsplit(" ", 1)[-1].strip()
        url = re.search(r"open (http://127\.0\.0\.1:\d+/)#token=(\S+) to chat", lines[2])
        assert url is not None and url.group(2) == token, lines
        assert lines[3] == f"agenthost: store {store} (created now); providers: fast\n"
        with urllib.request.urlopen(url.group(1)) as page:  # the page the URL opens
            assert page.status == 200
    finally:
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=20) == 0
        assert child.stderr is not None and child.stderr.read() == ""


class StartCommitted(SqliteStore):
    """Says when a turn's start is committed (what another process can read)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.turn_started = threading.Event()
        self._started = False

    def apply(self, op: StoreOp) -> None:
        super().apply(op)
        self._started = self._started or isinstance(op, SaveTurnStarted)

    def commit(self) -> None:
        super().commit()
        if self._started:
            self.turn_started.set()


def test_export_beside_a_running_turn_leaves_that_turn_to_its_host(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    provider = ScriptedProvider().on("hold", Gate("g"), Say("held"))
    path = tmp_path / "live.db"
    store = StartCommitted(path)
    host = Host.start(store=store, providers={"scripted": provider})
    try:
        chat = host.create_session(session_id="busy").chat()
        turn = chat.send("hold")
        provider.wait_reached("g", 10)
        assert store.turn_started.wait(10)
        code, out, err = agenthost(capsys, "export", "busy", "--store", str(path))
        assert code == 0, err
        (exported,) = json.loads(out)["session"]["chats"][0]["turns"]
        # exported as a restore elsewhere would find it; the host's row is untouched
        assert exported["state"] == "error"
        assert exported["error"]["errorType"] == "execution_abandoned"
        provider.open("g")
        assert turn.result(timeout=10).text == "held"
    finally:
        host.stop()
    reopened = Host.start(store=SqliteStore(path), providers={"scripted": provider})
    try:
        (stored,) = reopened.open_session("busy").chat().state().turns
        assert (stored.state.value, stored.assistant_text) == ("complete", "held")
    finally:
        reopened.stop()


def test_serve_refuses_fronts_without_shards_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    store = tmp_path / "never.db"
    code, _, err = agenthost(capsys, "serve", "--port", "0", "--fronts", "2", "--store", str(store))
    assert code == 2
    one_line(err, "--fronts", "--shards")
    assert not store.exists()  # refused before a store is made for it

"""Fork, truncate, dispose, export and import, and worktrees (DESIGN.md rule 7)."""

import json
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agenthost.actors import Host
from agenthost.actors.worktree import git_env
from agenthost.messages import AgentHostError, ErrorCode, OutcomeState
from agenthost.providers.scripted import Gate, ScriptedProvider
from agenthost.server.cli import app
from agenthost.store import SqliteStore
from agenthost.testing import FakeClock


def start(path: Path, provider: ScriptedProvider | None = None) -> Host:
    return Host.start(
        store=SqliteStore(path),
        providers={"scripted": provider or ScriptedProvider()},
        clock=FakeClock(),
    )


def texts(chat) -> list[str]:  # type: ignore[no-untyped-def]
    return [t.user_text for t in chat.state().turns]


def test_fork_copies_the_turns_up_to_and_including_one(host: Host) -> None:
    session = host.create_session()
    chat = session.chat()
    ids = [chat.send(t).result(timeout=10).turn_id for t in ("one", "two", "three")]
    forked = session.fork(ids[1])
    assert forked.id != session.id
    assert texts(forked.chat()) == ["one", "two"]
    assert [s.title for s in host.list_sessions() if s.id == forked.id] == ["Forked: one"]
    assert forked.chat().send("four").result(timeout=10).state is OutcomeState.COMPLETE
    assert texts(chat) == ["one", "two", "three"]  # the source is untouched
    with pytest.raises(AgentHostError) as caught:
        session.fork("no such turn")
    assert caught.value.code is ErrorCode.NOT_FOUND


def test_a_chosen_session_id_never_replaces_a_stored_session(db_path: Path) -> None:
    host = start(db_path)
    session = host.create_session(session_id="mine")
    session.chat().send("keep me").result(timeout=10)
    with pytest.raises(AgentHostError):  # resident
        host.create_session(session_id="mine")
    host.stop()
    host = start(db_path)
    try:
        with pytest.raises(AgentHostError):  # only stored
            host.create_session(session_id="mine")
        assert texts(host.open_session("mine").chat()) == ["keep me"]
    finally:
        host.stop()


def test_truncate_keeps_turns_up_to_one_durably(db_path: Path) -> None:
    host = start(db_path)
    session = host.create_session()
    chat = session.chat()
    first = chat.send("one").result(timeout=10).turn_id
    chat.send("two").result(timeout=10)
    chat.truncate(first)
    assert texts(chat) == ["one"]
    host.stop()
    host = start(db_path)
    try:
        chat = host.open_session(session.id).chat()
        assert texts(chat) == ["one"]
        chat.truncate(None)
        assert texts(chat) == []
    finally:
        host.stop()


def test_truncate_refuses_while_a_turn_runs(host: Host, provider: ScriptedProvider) -> None:
    provider.on("long", Gate("g"))
    chat = host.create_session().chat()
    chat.send("long")
    provider.wait_reached("g")
    with pytest.raises(AgentHostError) as caught:
        chat.truncate(None)
    assert caught.value.code is ErrorCode.INVALID_ARGUMENT
    provider.open("g")


def test_dispose_deletes_the_session(host: Host) -> None:
    session = host.create_session()
    session.chat().send("bye").result(timeout=10)
    session.dispose()
    assert host.list_sessions() == []
    with pytest.raises(AgentHostError) as caught:
        host.open_session(session.id)
    assert caught.value.code is ErrorCode.NOT_FOUND


def test_a_session_moves_between_stores_by_export_and_import(tmp_path: Path) -> None:
    provider = ScriptedProvider().on("hold", Gate("never"))
    source = start(tmp_path / "a.db", provider)
    session = source.create_session()
    chat = session.chat()
    chat.send("one").result(timeout=10)
    chat.send("hold")
    provider.wait_reached("never")
    chat.send("queued")
    exported = json.loads(json.dumps(source.export_session(session.id)))
    source.stop()

    target = start(tmp_path / "b.db")
    try:
        imported = target.import_session(exported)
        assert imported.id == session.id
        state = imported.chat().state()
        assert [t.user_text for t in state.turns] == ["one", "hold"]
        assert state.turns[1].error is not None  # it was running: it comes back abandoned
        assert [m.text for m in state.pending] == ["queued"]
        with pytest.raises(AgentHostError) as again:
            target.import_session(exported)
        assert again.value.code is ErrorCode.INVALID_ARGUMENT
        with pytest.raises(AgentHostError):
            target.import_session({"something": "else"})
    finally:
        target.stop()


def test_the_cli_exports_and_imports(tmp_path: Path) -> None:
    host = start(tmp_path / "a.db")
    session = host.create_session()
    session.chat().send("hello").result(timeout=10)
    host.stop()
    runner = CliRunner()
    exported = runner.invoke(app, ["export", session.id, "--store", str(tmp_path / "a.db")])
    assert exported.exit_code == 0, exported.output
    (tmp_path / "s.json").write_text(exported.stdout)
    imported = runner.invoke(
        app, ["import", str(tmp_path / "s.json"), "--store", str(tmp_path / "b.db")]
    )
    assert imported.exit_code == 0, imported.output
    assert imported.stdout.strip() == session.id
    host = start(tmp_path / "b.db")
    try:
        assert texts(host.open_session(session.id).chat()) == ["hello"]
    finally:
        host.stop()


# -- worktrees --------------------------------------------------------------------------------


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-C", str(cwd), *args],
        env=git_env(),  # never the repository of a hook that runs the tests
        check=True,
        capture_output=True,
        text=True,
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "README").write_text("hello\n")
    git(path, "add", "README")
    git(path, "commit", "-q", "-m", "first")
    return path


def test_a_session_gets_an_isolated_worktree_and_a_clean_one_is_removed(
    host: Host, repo: Path
) -> None:
    session = host.create_session(worktree_of=repo)
    tree = session.worktree
    assert tree is not None and Path(tree.path, "README").exists()
    assert f"agenthost/{session.id}" in git(repo, "branch", "--list")
    session.dispose()
    assert not Path(tree.path).exists()
    assert f"agenthost/{session.id}" not in git(repo, "branch", "--list")
    assert host.list_sessions() == []


def test_a_worktree_of_a_path_under_home_is_given_with_a_tilde(
    host: Host, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(repo.parent))
    session = host.create_session(worktree_of="~/repo")
    assert session.worktree is not None and Path(session.worktree.path, "README").exists()
    session.dispose()


def test_a_worktree_with_uncommitted_changes_or_unpushed_commits_is_never_removed_unforced(
    host: Host, repo: Path
) -> None:
    session = host.create_session(worktree_of=repo)
    tree = session.worktree
    assert tree is not None
    Path(tree.path, "notes.txt").write_text("work in progress\n")
    with pytest.raises(AgentHostError) as dirty:
        session.dispose()
    assert dirty.value.code is ErrorCode.WORKTREE_DIRTY
    assert "notes.txt" in dirty.value.message
    git(Path(tree.path), "add", "notes.txt")
    git(Path(tree.path), "commit", "-q", "-m", "wip")
    with pytest.raises(AgentHostError) as unpushed:
        session.dispose()
    assert "1 unpushed commit" in unpushed.value.message
    assert Path(tree.path, "notes.txt").exists()
    assert [s.id for s in host.list_sessions()] == [session.id]
    session.dispose(force=True)
    assert not Path(tree.path).exists()
    assert host.list_sessions() == []


@pytest.mark.parametrize("state", ["missing", "detached"])
def test_unpushed_commits_on_the_session_branch_are_never_removed_unforced(
    host: Host, repo: Path, state: str
) -> None:
    import shutil

    session = host.create_session(worktree_of=repo)
    tree = session.worktree
    assert tree is not None
    Path(tree.path, "work.txt").write_text("precious\n")
    git(Path(tree.path), "add", "work.txt")
    git(Path(tree.path), "commit", "-q", "-m", "work")
    if state == "missing":
        shutil.rmtree(tree.path)  # the folder is gone; the branch holds the work
    else:
        git(Path(tree.path), "checkout", "-q", "--detach", tree.base)
    with pytest.raises(AgentHostError) as caught:
        session.dispose()
    assert "1 unpushed commit" in caught.value.message
    assert f"agenthost/{session.id}" in git(repo, "branch", "--list")


def test_a_worktree_is_made_in_its_own_repository_even_from_a_git_hook(
    host: Host, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """agenthost run from a git hook inherits GIT_DIR: git must still act on the
    repository it was given, never the hook's."""
    hooked = tmp_path / "hooked"
    hooked.mkdir()
    git(hooked, "init", "-q")
    monkeypatch.setenv("GIT_DIR", str(hooked / ".git"))
    session = host.create_session(worktree_of=repo)
    monkeypatch.delenv("GIT_DIR")
    assert f"agenthost/{session.id}" in git(repo, "branch", "--list")
    assert git(hooked, "branch", "--list") == ""


def test_a_client_id_is_bound_to_its_first_identity_across_a_restart(db_path: Path) -> None:
    host = start(db_path)
    assert host.find_client("phone") is None
    assert host.claim_client("phone", "alice").identity == "alice"
    host.stop()
    again = start(db_path)
    try:
        assert again.claim_client("phone", "bob").identity == "alice"  # bob is refused it
        found = again.find_client("phone")
        assert found is not None and found.identity == "alice"
    finally:
        again.stop()

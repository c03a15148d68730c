"""WorktreeActor: a session's isolated git worktree; the one actor that runs git.

Runs on its own thread (it does subprocess I/O). DESIGN.md rule 7: a worktree
with uncommitted changes or unpushed commits is never removed unless the
caller forces it; the refusal names what would be lost.
"""

import os
import subprocess
from pathlib import Path

import attrs
import structlog

from agenthost.actors.runtime import Actor, handles
from agenthost.actors.threads import ThreadingRuntime
from agenthost.messages.errors import AgentHostError, ErrorCode
from agenthost.messages.state import Worktree

log = structlog.get_logger(__name__)

GIT_TIMEOUT_S = 60.0


@attrs.frozen
class CreateWorktree:
    repo: str
    session_id: str


@attrs.frozen
class RemoveWorktree:
    worktree: Worktree
    session_id: str
    force: bool = False


def branch_of(session_id: str) -> str:
    return f"agenthost/{session_id}"


def git_env() -> dict[str, str]:
    """This process's environment without what points git at another repository
    (GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE, ...: set when agenthost runs from a
    git hook, they would make `git -C <repo>` act on the hook's repository)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}


class WorktreeActor(Actor):
    own_runtime = ThreadingRuntime()

    def _git(self, cwd: str, *args: str) -> str:
        try:
            done = subprocess.run(
                ["git", "-C", cwd, *args],
                env=git_env(),
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                timeout=GIT_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise AgentHostError(code=ErrorCode.INTERNAL, message=f"git {args[0]}: {exc}") from exc
        if done.returncode != 0:
            raise AgentHostError(
                code=ErrorCode.INVALID_ARGUMENT,
                message=f"git {' '.join(args)} failed in {cwd}: {done.stderr.strip()}",
            )
        return done.stdout

    @handles(CreateWorktree)
    def _create(self, message: CreateWorktree) -> Worktree:
        repo = str(Path(message.repo).resolve())
        base = self._git(repo, "rev-parse", "HEAD").strip()
        path = Path(repo).parent / f"{Path(repo).name}.agenthost" / message.session_id
        self._git(repo, "worktree", "add", "-b", branch_of(message.session_id), str(path), base)
        log.info("worktree_created", session_id=message.session_id, path=str(path))
        return Worktree(path=str(path), repo=repo, base=base)

    def _unpushed(self, cwd: str, tip: str, base: str) -> int:
        """Commits reachable from `tip` that are neither in `base` nor on any remote."""
        return int(self._git(cwd, "rev-list", "--count", tip, "--not", base, "--remotes") or 0)

    def _branch_exists(self, repo: str, branch: str) -> bool:
        try:
            self._git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}")
        except AgentHostError:
            return False
        return True

    @handles(RemoveWorktree)
    def _remove(self, message: RemoveWorktree) -> None:
        tree = message.worktree
        branch = branch_of(message.session_id)
        here = Path(tree.path).exists()
        if not message.force:
            # The branch is checked in the repository whatever state the worktree is
            # in (gone, detached, on another branch): that is where commits would go.
            unpushed = 0
            if self._branch_exists(tree.repo, branch):
                unpushed = self._unpushed(tree.repo, branch, tree.base)
            changed: list[str] = []
            if here:
                status = self._git(tree.path, "status", "--porcelain")
                changed = [line[3:] for line in status.splitlines()]
                unpushed = max(unpushed, self._unpushed(tree.path, "HEAD", tree.base))
            if changed or unpushed:
                lost = []
                if changed:
                    lost.append(f"uncommitted changes ({', '.join(changed)})")
                if unpushed:
                    lost.append(f"{unpushed} unpushed commit{'s' if unpushed > 1 else ''}")
                raise AgentHostError(
                    code=ErrorCode.WORKTREE_DIRTY,
                    message=(
                        f"The worktree {tree.path} has {' and '.join(lost)}; "
                        "dispose with force=True to remove it anyway."
                    ),
                )
        force = ("--force",) if message.force else ()
        if here:  # unforced, git itself refuses if files changed since the check
            self._git(tree.repo, "worktree", "remove", *force, tree.path)
        self._git(tree.repo, "worktree", "prune")
        if self._branch_exists(tree.repo, branch):
            try:
                self._git(tree.repo, "branch", "-D" if message.force else "-d", branch)
            except AgentHostError:
                log.info("worktree_branch_kept", session_id=message.session_id)
        log.info("worktree_removed", session_id=message.session_id, forced=message.force)

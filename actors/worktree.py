"""WorktreeActor: a session's isolated git worktree; the one actor that runs git.

Runs on its own thread (it does subprocess I/O). DESIGN.md rule 7: a worktree
with uncommitted changes or unpushed commits is never removed unless the
caller forces it; the refusal names what would be lost.
"""

import subprocess
from pathlib import Path

import attrs
import structlog

from agenthost.actors.runtime import Actor, ThreadingRuntime, handles
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


class WorktreeActor(Actor):
    own_runtime = ThreadingRuntime()

    def _git(self, cwd: str, *args: str) -> str:
        try:
            done = subprocess.run(
                ["git", "-C", cwd, *args],
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

    @handles(RemoveWorktree)
    def _remove(self, message: RemoveWorktree) -> None:
        tree = message.worktree
        if Path(tree.path).exists() and not message.force:
            changed = [
                line[3:] for line in self._git(tree.path, "status", "--porcelain").splitlines()
            ]
            unpushed = int(
                self._git(
                    tree.path, "rev-list", "--count", f"{tree.base}..HEAD", "--not", "--remotes"
                )
                or 0
            )
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
        if Path(tree.path).exists():
            self._git(tree.repo, "worktree", "remove", "--force", tree.path)
        self._git(tree.repo, "worktree", "prune")
        try:
            self._git(tree.repo, "branch", "-D", branch_of(message.session_id))
        except AgentHostError:
            log.info("worktree_branch_kept", session_id=message.session_id)
        log.info("worktree_removed", session_id=message.session_id, forced=message.force)

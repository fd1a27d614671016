"""A linked git worktree per slot, made once and reused, so parallel sessions never share a work tree;
and the rule that work is never lost: what a session leaves uncommitted in its worktree is committed
there on the slot's branch, never reset or deleted."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from mcp_harness.errors import InvalidArgument

FOLDER = Path(".mcp-harness") / "worktrees"  #: under the main checkout, listed in .git/info/exclude
AUTHOR = {"GIT_AUTHOR_NAME": "mcp-harness runner", "GIT_AUTHOR_EMAIL": "runner@mcp-harness.invalid"}
LISTED = 20  #: at most this many changed files named in a note


def _git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **AUTHOR, "GIT_COMMITTER_NAME": AUTHOR["GIT_AUTHOR_NAME"]}
    env["GIT_COMMITTER_EMAIL"] = AUTHOR["GIT_AUTHOR_EMAIL"]
    env.setdefault("GIT_TERMINAL_PROMPT", "0")
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=60)
    if check and done.returncode != 0:
        raise InvalidArgument(f"git {args[0]} failed in {cwd}: {done.stderr.strip().splitlines()[-1:] or ['?']}")
    return done


def top_level(folder: Path) -> Path | None:
    """The main checkout's top folder, or None outside a git repository."""
    try:
        done = _git(folder, "rev-parse", "--path-format=absolute", "--git-common-dir", check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    common = Path(done.stdout.strip())
    return common.parent if common.name == ".git" else None


def slot_worktree(root: Path, slot: int) -> Path:
    """The slot's worktree, `.mcp-harness/worktrees/slot-K` on branch `harness/slot-K`: made from HEAD the
    first time, then reused as it is (with whatever its branch holds)."""
    path = root / FOLDER / f"slot-{slot}"
    _exclude(root)
    if (path / ".git").exists():
        return path
    if _git(root, "rev-parse", "--verify", "-q", "HEAD", check=False).returncode != 0:
        raise InvalidArgument("--worktrees needs a repository with a first commit: commit the project first")
    branch = f"harness/slot-{slot}"
    exists = _git(root, "rev-parse", "--verify", "-q", f"refs/heads/{branch}", check=False).returncode == 0
    path.parent.mkdir(parents=True, exist_ok=True)
    if exists:
        _git(root, "worktree", "add", str(path), branch)
    else:
        _git(root, "worktree", "add", "-b", branch, str(path), "HEAD")
    return path


def _exclude(root: Path) -> None:
    exclude = root / ".git" / "info" / "exclude"
    line = "/.mcp-harness/"
    try:
        text = exclude.read_text() if exclude.exists() else ""
    except OSError:
        return
    if line not in text.splitlines():
        exclude.parent.mkdir(parents=True, exist_ok=True)
        exclude.write_text(text + ("" if not text or text.endswith("\n") else "\n") + line + "\n")


def changed_files(folder: Path) -> list[str]:
    """Uncommitted and untracked files of the work tree, as `git status` names them; [] outside a
    repository."""
    try:
        done = _git(folder, "status", "--porcelain", "--untracked-files=all", check=False)
    except (OSError, subprocess.SubprocessError):
        return []
    if done.returncode != 0:
        return []
    return [line[3:] for line in done.stdout.splitlines() if len(line) > 3]


def save_work(folder: Path, session: str, outcome: str) -> tuple[str, list[str]] | None:
    """Commit what a session left uncommitted in its worktree; (commit, files) or None when clean."""
    files = changed_files(folder)
    if not files:
        return None
    _git(folder, "add", "-A")
    _git(folder, "commit", "-q", "--no-verify", "-m", f"mcp-harness: work in progress of {session} ({outcome})")
    commit = _git(folder, "rev-parse", "--short", "HEAD").stdout.strip()
    return commit, files

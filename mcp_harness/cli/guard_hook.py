"""`init --guard`: the commit guard as the repository's git pre-commit hook, carrying the project's
database and workspace as `init` chose them. A pre-commit hook already there is kept and chained: it
is moved aside (`pre-commit.before-mcp-harness`) and runs first; `init --remove` puts it back. The
hook's path comes from git (`git rev-parse --git-path hooks/pre-commit`), so `core.hooksPath` is
honoured and every worktree of the repository shares it."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

MARK = "# mcp-harness:guard"
CHAINED = "pre-commit.before-mcp-harness"


def hook_path(root: Path) -> Path | None:
    """The repository's pre-commit hook file (None: not a git repository)."""
    try:
        out = subprocess.run(["git", "rev-parse", "--git-path", "hooks/pre-commit"], cwd=root,
                             capture_output=True, text=True, timeout=10)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0 or not out.stdout.strip():
        return None
    path = Path(out.stdout.strip())
    return path if path.is_absolute() else root / path


def script(command: str, db: str | None, workspace: str) -> str:
    where = [*(["--db", db] if db else []), "--workspace", workspace]
    guard = shlex.join([*shlex.split(command), "guard", *where])
    return (
        f"#!/bin/sh\n{MARK} (written by `mcp-harness init --guard`; `init --remove` takes it out)\n"
        "# Refuses a commit touching paths another agent's live lease reserves; git commit --no-verify skips it.\n"
        f'before="$(dirname "$0")/{CHAINED}"\n'
        'if [ -x "$before" ]; then "$before" "$@" || exit $?; fi\n'
        f"exec {guard}\n"
    )


def install(root: Path, command: str, db: str | None, workspace: str, *, dry_run: bool) -> str:
    """Write the hook (chaining one that is there); one line saying what was (or would be) done."""
    path = hook_path(root)
    if path is None:
        return "git pre-commit hook: not a git repository, so no commit guard was installed"
    text = script(command, db, workspace)
    old = path.read_text(encoding="utf-8", errors="replace") if path.exists() else None
    if old == text:
        return f"{path}: the commit guard is installed (unchanged)"
    chain = old is not None and MARK not in old
    if dry_run:
        return f"{path}: would install the commit guard" + (f" (the hook there would run first, as {CHAINED})"
                                                            if chain else "")  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    if chain:
        os.replace(path, path.with_name(CHAINED))
    tmp = path.with_name(path.name + ".mcp-harness-tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.chmod(0o755)
    tmp.replace(path)
    return f"{path}: commit guard installed" + (f"; the hook that was there runs first ({CHAINED})" if chain else "")


def remove(root: Path, *, dry_run: bool) -> str | None:
    """Take the guard out, putting a chained hook back; None when there is no guard."""
    path = hook_path(root)
    if path is None or not path.exists() or MARK not in path.read_text(encoding="utf-8", errors="replace"):
        return None
    before = path.with_name(CHAINED)
    if dry_run:
        return f"{path}: would remove the commit guard"
    if before.exists():
        os.replace(before, path)
        return f"{path}: commit guard removed; the hook it chained is back"
    path.unlink()
    return f"{path}: commit guard removed"

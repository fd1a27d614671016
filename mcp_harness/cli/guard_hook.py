"""`init --guard`: the commit guard as the repository's git hooks, carrying the project's database and
workspace as `init` chose them: `pre-commit`, and `pre-merge-commit` (git runs it for a merge that
makes a commit, with the merge staged), so that a merge does not bring in what a commit may not.
A hook of another program already there is kept and chained: it is moved aside
(`pre-commit.before-mcp-harness`) and runs first; `init --remove` puts it back. A guard already there
with other settings (another workspace or database) is reported and kept unless `--force`, as every
entry `init` writes. The hooks' paths come from git (`git rev-parse --git-path hooks/NAME`), so
`core.hooksPath` is honoured and every worktree of the repository shares them."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

MARK = "# mcp-harness:guard"
HOOKS = ("pre-commit", "pre-merge-commit")  #: the git hooks the guard is installed as
SUFFIX = ".before-mcp-harness"  #: a hook that was there, moved aside and run first


def hook_path(root: Path, name: str = "pre-commit") -> Path | None:
    """The repository's hook file `name` (None: not a git repository)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--git-path", f"hooks/{name}"], cwd=root, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0 or not out.stdout.strip():
        return None
    path = Path(out.stdout.strip())
    return path if path.is_absolute() else root / path


def script(command: str, db: str | None, workspace: str, name: str = "pre-commit") -> str:
    """The hook: `command` (this install's full path: git clients, IDEs and CI shells often run hooks
    without the PATH `init` ran with), else `mcp-harness` on the hook's PATH, else one line on stderr
    and the commit goes through unchecked (a hook that cannot run must not refuse every commit)."""
    where = [*(["--db", db] if db else []), "--workspace", workspace]
    program, *rest = [command] if Path(command).exists() else shlex.split(command)  # a path, or `python -m ...`
    what = "a merge commit" if name == "pre-merge-commit" else "a commit"
    verb = "merge" if name == "pre-merge-commit" else "commit"
    return (
        f"#!/bin/sh\n{MARK} (written by `mcp-harness init --guard`; `init --remove` takes it out)\n"
        f"# Refuses {what} touching paths another agent's live lease reserves; git {verb} --no-verify skips it.\n"
        f'before="$(dirname "$0")/{name}{SUFFIX}"\n'
        'if [ -x "$before" ]; then "$before" "$@" || exit $?; fi\n'
        f"run={shlex.quote(program)}\n"
        f'if [ -x "$run" ]; then\n  exec "$run" {shlex.join([*rest, "guard", *where])}\nfi\n'
        "if command -v mcp-harness >/dev/null 2>&1; then\n"
        f"  exec {shlex.join(['mcp-harness', 'guard', *where])}\nfi\n"
        f'echo "mcp-harness guard: cannot run $run, and mcp-harness is not on this PATH; the {verb} is not '
        'checked (run mcp-harness init --guard again where it is installed)" >&2\n'
        "exit 0\n"
    )


def _command(text: str) -> str:
    """What a guard hook runs, as its settings (`guard --db DB --workspace W`): the program may differ
    (a full path, or the name of an earlier version's hook) without the settings differing."""
    line = next((line.strip() for line in text.splitlines() if line.strip().startswith("exec ")), "")
    try:
        words = shlex.split(line)
    except ValueError:
        words = []
    return shlex.join(words[words.index("guard", 2) :]) if "guard" in words[2:] else "(no command)"


def install(root: Path, command: str, db: str | None, workspace: str, *, dry_run: bool, force: bool) -> list[str]:
    """Write each hook (chaining one of another program's); a line per hook saying what was (or would
    be) done, or why not."""
    said = []
    for name in HOOKS:
        path = hook_path(root, name)
        if path is None:
            return ["git hooks: not a git repository, so no commit guard was installed"]
        said.append(_install(path, script(command, db, workspace, name), dry_run=dry_run, force=force))
    return said


def _install(path: Path, text: str, *, dry_run: bool, force: bool) -> str:
    would = "would be " if dry_run else ""
    old = path.read_text(encoding="utf-8", errors="replace") if path.exists() else None
    if old == text:
        return f"{path}: the commit guard is already installed (unchanged)"
    ours = old is not None and MARK in old
    if ours and _command(old or "") != _command(text) and not force:
        return (
            f"{path}: a commit guard with other settings is there: kept; `mcp-harness init --guard --force` "
            f"replaces it\n      old: {_command(old or '')}\n      new: {_command(text)}"
        )
    before = path.with_name(path.name + SUFFIX)
    chain = old is not None and not ours
    if chain and before.exists():  # moving this hook aside would overwrite the one moved aside earlier
        return (
            f"{path}: a hook of another program is there and {before.name} too: kept, no guard installed; "
            "chain them by hand (or move one away) and run init --guard again"
        )
    if not ours:
        done = f"commit guard {would}installed"
    else:  # --force, or the same settings in an earlier version's words
        done = f"commit guard {would}{'replaced' if _command(old or '') != _command(text) else 'updated'}"
    if chain:
        done += f"; the hook that was there {'would run' if dry_run else 'runs'} first ({before.name})"
    if dry_run:
        return f"{path}: {done}"
    path.parent.mkdir(parents=True, exist_ok=True)
    if chain:
        os.replace(path, before)
    tmp = path.with_name(path.name + ".mcp-harness-tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.chmod(0o755)
    tmp.replace(path)
    return f"{path}: {done}"


def remove(root: Path, *, dry_run: bool) -> list[str]:
    """Take the guard out of each hook, putting a chained hook back; a line per hook it was in."""
    said = []
    for name in HOOKS:
        path = hook_path(root, name)
        if path is None or not path.exists() or MARK not in path.read_text(encoding="utf-8", errors="replace"):
            continue
        before = path.with_name(path.name + SUFFIX)
        if dry_run:
            said.append(f"{path}: would remove the commit guard")
        elif before.exists():
            os.replace(before, path)
            said.append(f"{path}: commit guard removed; the hook it chained is back")
        else:
            path.unlink()
            said.append(f"{path}: commit guard removed")
    return said

"""What a work tree holds that no commit does: the uncommitted and untracked files `git status` shows in
the repository a process runs in. When a lease ends without `complete` (a connection's end, a dead
process, a take-over, a runner's settling) the harness's note names those under the task's `paths`, so
half-finished work is never invisible to the next holder.

`git` runs in a worker thread with a short timeout, never on the event loop and never inside a write
transaction (callers gather first, then write); without git, outside a repository, past the timeout or
on any failure the answer is None and the note says nothing of files. Names are data: `shown` quotes
any name that could break a note's form (control characters, quotes, separators)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import anyio

from mcp_harness.tasks import patterns as paths

STATUS_SECONDS = 2.0  #: each git call gives up past this (the note then says nothing of files)
LISTED = 20  #: at most this many files named in one note
_SEPARATORS = frozenset('"\\, ')


@dataclass(frozen=True)
class Changes:
    """The repository's top folder and its changed files: (status code, path from the top), in git's order."""

    root: str
    files: tuple[tuple[str, str], ...]

    def under(self, patterns: Iterable[str] | None) -> list[tuple[str, str]]:
        """The files a task's `paths` name (every file when it has none), by the project's own matcher."""
        wanted = [paths.matcher(p) for p in patterns or ()]
        if not wanted:
            return list(self.files)
        return [(code, name) for code, name in self.files if any(match(name) for match in wanted)]

    def event_detail(self, patterns: Iterable[str] | None) -> dict[str, object]:
        """What a note's event keeps: where, the first `LISTED` files under `patterns` as `shown`, and how
        many more there are."""
        found = self.under(patterns)
        out: dict[str, object] = {"in": quoted(self.root), "files": [shown(c, n) for c, n in found[:LISTED]]}
        if len(found) > LISTED:
            out["more"] = len(found) - LISTED
        if patterns:
            out["under_paths"] = True
        return out


def shown(code: str, name: str) -> str:
    """One file as a note names it: its status code (`M`, `A`, `D`, `R`, `??` for untracked) and its name,
    quoted with backslash escapes when the name holds anything but plain printable characters."""
    return f"{code.strip() or '?'} {quoted(name)}"


def quoted(name: str) -> str:
    if name and all(ch.isprintable() and ch not in _SEPARATORS for ch in name):
        return name
    out = []
    for ch in name:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        else:  # control characters, line separators, undecodable bytes (surrogates)
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return '"' + "".join(out) + '"'


def parse(raw: bytes) -> list[tuple[str, str]]:
    """`git status --porcelain=v1 -z` output as (code, path) pairs; a rename's or copy's source is dropped."""
    fields = raw.split(b"\0")
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(fields):
        field = fields[i]
        i += 1
        if len(field) < 4:
            continue
        code = field[:2].decode("ascii", "replace")
        out.append((code, os.fsdecode(field[3:])))
        if "R" in code or "C" in code:
            i += 1  # the next field is where it came from
    return out


def _git(cwd: Path | None, *args: str) -> bytes | None:
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    try:
        done = subprocess.run(
            ["git", "--no-optional-locks", *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=STATUS_SECONDS,
            check=False,
        )
    except Exception:  # noqa: BLE001 - no git, a timeout, a refused start: nothing to say
        return None
    return done.stdout if done.returncode == 0 else None


def status(cwd: Path | None = None) -> Changes | None:
    """The changes of the repository `cwd` (default: this process's folder) is in; None outside one or
    when git cannot say. Blocking: call `gather` from async code."""
    top = _git(cwd, "rev-parse", "--show-toplevel")
    if top is None or not top.strip():
        return None
    raw = _git(cwd, "status", "--porcelain=v1", "-z", "--untracked-files=all")
    if raw is None:
        return None
    return Changes(os.fsdecode(top.strip()), tuple(parse(raw)))


async def gather(cwd: Path | None = None) -> Changes | None:
    """`status` off the event loop (a worker thread); never raises."""
    try:
        return await anyio.to_thread.run_sync(status, cwd, abandon_on_cancel=True)
    except Exception:  # noqa: BLE001 - the settling goes on without it
        return None

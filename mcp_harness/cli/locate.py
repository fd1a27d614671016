"""Commands run inside a project set up with `init` default to that project's workspace.

When neither `--workspace` nor MCP_HARNESS_WORKSPACE is given, the project's `harness` entry is
looked for from the current folder up to the git top level (`.mcp.json`, else `.cursor/mcp.json`,
else `.vscode/mcp.json`): its `--workspace` becomes the command's, and its `--db` too when neither
`--db` nor MCP_HARNESS_DB is given. An HTTP entry names no workspace: the defaults stay as they were.
In a linked worktree (`git worktree add`) that holds no entry, its repository's main working tree is
looked in last: every worktree of a repository is one workspace (`init`), so a person's `status` or
`msg list` in a worktree nobody ran `init` in still reads the team's. No git process is started: the
top level is the nearest folder holding `.git`, and a worktree's `.git` file names the repository's.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_harness.cli import jsonc
from mcp_harness.config import ENV_PREFIX

#: the project files `init` writes, in the order they are consulted, and the key holding the servers
ENTRY_FILES = ((".mcp.json", "mcpServers"), (".cursor/mcp.json", "mcpServers"), (".vscode/mcp.json", "servers"))
SERVER_NAME = "harness"
#: commands whose --workspace means something else (init chooses one; token filters or revokes by it)
NOT_PROJECT_AWARE = frozenset({"init", "token", "import"})


@dataclass(frozen=True)
class ProjectEntry:
    workspace: str
    db: str | None  #: as the entry names it; a relative file path made absolute against the project
    path: Path  #: the file it was found in


def apply_project_defaults(args: argparse.Namespace) -> None:
    """Fill `args.workspace` (and `args.db`) from the project's entry, where the person gave neither."""
    if args.command in NOT_PROJECT_AWARE or getattr(args, "workspace", "") is not None:
        return
    workspace, db = project_defaults(getattr(args, "db", None))
    if workspace is not None:
        args.workspace = workspace
        if hasattr(args, "db"):
            args.db = db


def project_defaults(db: str | None) -> tuple[str | None, str | None]:
    """The workspace and database a command without `--workspace` uses: the project's entry's (found from
    the current folder), its database only where neither `db` (the command's `--db`) nor MCP_HARNESS_DB
    is given. (None, `db`) when MCP_HARNESS_WORKSPACE is set or no entry names a workspace."""
    if os.environ.get(ENV_PREFIX + "WORKSPACE"):
        return None, db
    try:
        entry = find_entry(Path.cwd())
    except OSError:  # the current folder was removed, or cannot be read
        return None, db
    if entry is None:
        return None, db
    if db is None and not os.environ.get(ENV_PREFIX + "DB") and entry.db:
        return entry.workspace, entry.db
    return entry.workspace, db


def project_folders(start: Path) -> list[Path]:
    """`start` and its parents up to the git top level (the nearest holding `.git`); outside a git
    repository, `start` alone."""
    folders = []
    for folder in (start, *start.parents):
        folders.append(folder)
        if (folder / ".git").exists():
            return folders
    return [start]


def find_entry(start: Path) -> ProjectEntry | None:
    """The nearest `harness` entry's workspace and database (in a linked worktree without one: its main
    working tree's); None when there is none, or when the first one found names no workspace (an HTTP
    entry: the server decides)."""
    folders = project_folders(start)
    main = main_worktree(folders[-1])
    for folder in [*folders, *([main] if main is not None else [])]:
        for name, key in ENTRY_FILES:
            entry = _entry_in(folder / name, key)
            if entry is not None:
                return _settings(entry, folder / name, folder)
    return None


def main_worktree(top: Path) -> Path | None:
    """When `top` is a linked worktree (its `.git` is a file, `gitdir: <repo>/.git/worktrees/<name>`,
    whose `commondir` leads to `<repo>/.git`): the main working tree, `<repo>`; else None (also for a
    bare repository's worktrees, which have no main working tree)."""
    try:
        first = (top / ".git").read_text(encoding="utf-8").splitlines()[0]
    except (OSError, UnicodeDecodeError, IndexError):  # a folder (the main tree), absent, or unreadable
        return None
    if not first.startswith("gitdir:"):
        return None
    gitdir = (top / first[len("gitdir:") :].strip()).resolve()
    try:
        common = (gitdir / (gitdir / "commondir").read_text(encoding="utf-8").strip()).resolve()
    except (OSError, UnicodeDecodeError):  # not a worktree's git folder (a submodule's)
        return None
    return common.parent if common.name == ".git" and common.parent != top else None


def _entry_in(path: Path, key: str) -> dict[str, Any] | None:
    try:
        data = jsonc.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):  # absent or broken: `init` reports those
        return None
    servers = data.get(key) if isinstance(data, dict) else None
    entry = servers.get(SERVER_NAME) if isinstance(servers, dict) else None
    return entry if isinstance(entry, dict) else None


def _settings(entry: dict[str, Any], path: Path, folder: Path) -> ProjectEntry | None:
    words = entry.get("args")
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        return None
    workspace, db = _flag(words, "--workspace"), _flag(words, "--db")
    if not workspace:
        return None
    if db and "://" not in db:  # a plain file path: the client starts the server in the project folder
        db = str(folder / Path(db).expanduser())
    return ProjectEntry(workspace=workspace, db=db, path=path)


def _flag(words: list[str], name: str) -> str | None:
    for i, word in enumerate(words):
        if word == name and i + 1 < len(words):
            return words[i + 1]
        if word.startswith(name + "="):
            return word[len(name) + 1 :]
    return None

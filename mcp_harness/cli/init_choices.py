"""What `init` settles before it plans anything: the project folder, the workspace name, the
transport, and a database path fit to be written into files others open. Each refusal is one line
and comes before anything is written."""

from __future__ import annotations

import argparse
import re
import subprocess
import unicodedata
from pathlib import Path
from urllib.parse import urlsplit

from mcp_harness.cli.locate import find_entry
from mcp_harness.config import NAME_RE
from mcp_harness.errors import InvalidArgument

DEFAULT_TOKEN_ENV = "MCP_HARNESS_TOKEN"


def project_root() -> tuple[Path, bool]:
    """The git top-level folder of the current directory (and True), or the current directory itself
    (and False: not inside a git repository)."""
    try:
        out = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return Path.cwd(), False
    if out.returncode == 0 and out.stdout.strip():
        return Path(out.stdout.strip()), True
    return Path.cwd(), False


def main_checkout(root: Path) -> tuple[Path, bool] | None:
    """When `root` is a linked worktree (`git worktree add`): the repository's main working tree (or
    its bare folder, and True), which the first record of `git worktree list` names; else None."""
    try:
        out = subprocess.run(
            ["git", "worktree", "list", "--porcelain"], cwd=root, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    first = out.stdout.split("\n\n", 1)[0].splitlines() if out.returncode == 0 else []
    if not first or not first[0].startswith("worktree "):
        return None
    main = Path(first[0][len("worktree ") :])
    try:
        if main.resolve() == root.resolve():
            return None
    except OSError:
        return None
    return main, "bare" in first[1:]


def check_root(root: Path) -> None:
    """Refuse a project folder that is the home directory (init would write ~/.claude/settings.json,
    Claude Code's settings for every project of this user) or the file system's root."""
    resolved = root.resolve()
    if resolved == Path.home().resolve():
        raise InvalidArgument(
            f"{root} is your home directory: its .claude/settings.json holds Claude Code's "
            "settings for all your projects; run init inside a project folder "
            "(nothing was written)"
        )
    if resolved.parent == resolved:
        raise InvalidArgument(
            f"{root} is the file system's root: run init inside a project folder (nothing was written)"
        )


def workspace_name(folder: str) -> str:
    """A folder's name made a workspace name: accents dropped (`ünï` -> `uni`), other characters a
    name cannot hold replaced by `-`; empty when nothing usable is left."""
    plain = "".join(c for c in unicodedata.normalize("NFKD", folder) if not unicodedata.combining(c))
    name = re.sub(r"[^A-Za-z0-9._:/-]+", "-", plain)
    name = re.sub(r"^[^A-Za-z0-9]+", "", name)[:128].rstrip("-._:/")
    return name if NAME_RE.fullmatch(name or "-") else ""


def token_workspace(url: str, token_env: str) -> tuple[str | None, str]:
    """The workspace a shared server's token names (asked at its `/whoami`), or None and why not."""
    import json
    import os
    import urllib.error
    import urllib.request

    token = os.environ.get(token_env)
    if not token:
        return None, f"{token_env} is not set, so the server could not be asked which workspace the token names"
    parts = urlsplit(url)
    base = parts.path[: -len("/mcp")] if parts.path.endswith("/mcp") else parts.path.rstrip("/")
    ask = urllib.request.Request(
        parts._replace(path=f"{base}/whoami", query="").geturl(), headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(ask, timeout=10) as response:  # noqa: S310 - http(s) only (--url is checked)
            name = json.loads(response.read()).get("workspace")
    except urllib.error.HTTPError as exc:
        why = "refused the token in " + token_env if exc.code == 401 else f"answered HTTP {exc.code}"
        return None, f"the server {why}"
    except (OSError, ValueError) as exc:
        return None, f"the server could not be asked ({getattr(exc, 'reason', exc)})"
    return (name, "") if isinstance(name, str) and NAME_RE.fullmatch(name) else (None, "the server gave no workspace")


def choose_workspace(args: argparse.Namespace, root: Path) -> tuple[str, str]:
    """The workspace and a line saying where it came from."""
    if args.workspace is None and args.transport == "http":  # the token decides it: ask the server
        name, why = token_workspace(args.url or "", args.token_env)
        if name is not None:
            return name, f"Workspace {name!r} (the one the token in {args.token_env} names on {args.url})."
        raise InvalidArgument(
            f"{why}: set {args.token_env} to your token (or name the token's workspace with "
            "--workspace W) and run init again (nothing was written)"
        )
    if args.workspace is not None:
        if not NAME_RE.fullmatch(args.workspace):
            raise InvalidArgument(
                f"--workspace {args.workspace!r} is not a valid workspace name: use 1-128 characters "
                "from A-Z a-z 0-9 . _ : / -, starting with a letter or digit"
            )
        return args.workspace, f"Workspace {args.workspace!r} (from --workspace)."
    linked = main_checkout(root)
    if linked is not None:
        return _worktree_workspace(args, *linked)
    name = workspace_name(root.name)
    if not name:
        raise InvalidArgument(
            f"the folder name {root.name!r} leaves no valid workspace name: choose one with "
            "--workspace NAME (letters, digits and . _ : / -)"
        )
    return name, (
        f"Workspace {name!r} (from the project folder's name {root.name!r}; another project in a folder of the "
        "same name would share it: --workspace NAME chooses another)."
    )


def _worktree_workspace(args: argparse.Namespace, main: Path, bare: bool) -> tuple[str, str]:
    """A linked worktree's workspace is its repository's, so that agents in its worktrees coordinate:
    the one the main checkout's `init` entry names (and its database, when `--db` is not given), else
    the main checkout's folder name (a bare repository's, without `.git`)."""
    entry = None if bare else find_entry(main)
    if entry is not None:
        shared = ""
        if args.db is None and entry.db:
            args.db = entry.db
            shared = " and its database"
        return entry.workspace, (
            f"Workspace {entry.workspace!r}{shared}: this folder is a linked worktree of {main}, whose "
            f"{entry.path.relative_to(main)} names it (every worktree of a repository is one workspace; "
            "--workspace NAME chooses another)."
        )
    folder = main.name[: -len(".git")] if bare and main.name.endswith(".git") else main.name
    name = workspace_name(folder)
    if not name:
        raise InvalidArgument(
            f"the main checkout's folder name {folder!r} leaves no valid workspace name: choose "
            "one with --workspace NAME (letters, digits and . _ : / -)"
        )
    return name, (
        f"Workspace {name!r} (from the folder name {folder!r} of {main}: this folder is a linked worktree of it, "
        "and every worktree of a repository is one workspace; --workspace NAME chooses another)."
    )


def settle_transport(args: argparse.Namespace) -> None:
    """`--url` means HTTP; `--token-env` names an HTTP server's token, so it does not go with stdio."""
    if args.url and args.transport == "stdio":
        raise InvalidArgument("--url is the address of a shared HTTP server: drop --transport stdio (or --url)")
    args.transport = args.transport or ("http" if args.url else "stdio")
    if args.token_env is not None and args.transport == "stdio":
        raise InvalidArgument(
            "--token-env names the token of a shared HTTP server: use it with --transport http "
            "--url URL, or drop it for a stdio set-up"
        )
    args.token_env = args.token_env or DEFAULT_TOKEN_ENV


def project_db(db: str | None) -> str | None:
    """`--db` as the files will name it: a file path made absolute (hooks and servers start in other
    folders); a PostgreSQL URL with a password is refused, since the files are read by others."""
    if not db:
        return None
    if "://" not in db:
        return str(Path(db).expanduser().resolve())
    scheme, rest = db.split("://", 1)
    if scheme.startswith("sqlite"):
        if rest.startswith("/") and not rest.startswith("//") and rest not in ("/", "/:memory:"):
            path = Path(rest[1:].split("?", 1)[0])
            return db if path.is_absolute() else f"{scheme}:///{path.resolve()}"
        return db
    try:
        password = urlsplit(db).password
    except ValueError:
        password = None
    if password:
        raise InvalidArgument(
            "--db carries a password, which init would write into the project's files: give "
            "the URL without it and set PGPASSWORD or ~/.pgpass where the server runs, or use "
            "--transport http with a token (nothing was written)"
        )
    return db

"""`mcp-harness init`: set a project up for its MCP clients in one command.

Run inside a project: writes each client's project-scoped configuration (merged with what is there),
Claude Code's lifecycle hooks (the brief as the session's opening context) and its permission to call
the server's tools, and a marked section of AGENTS.md (or CLAUDE.md) with the session loop.
Idempotent: a second run changes nothing.
Claude Desktop has no project file: its entry is merged into the user's configuration, after a backup.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

from mcp_harness.cli.clients import (
    PROJECT_FILES,
    SERVER_NAME,
    command_path,
    desktop_config_path,
    http_entry,
    serve_args,
    stdio_entry,
    token_reference,
)
from mcp_harness.cli.common import env
from mcp_harness.cli.init_choices import check_root, choose_workspace, project_db, project_root, settle_transport
from mcp_harness.cli.project import (
    HOOK_EVENTS,
    Change,
    hook_command,
    in_turn,
    instructions,
    merge_hooks,
    merge_import,
    merge_instructions,
    merge_permission,
    merge_server,
    remove_hooks,
    remove_import,
    remove_instructions,
    remove_permission,
    remove_server,
    would,
)


def launcher() -> tuple[str, str]:
    """The command project files run, and a line saying what it resolves to. By name when
    `mcp-harness` is on PATH (so it works for whoever opens the project), else this install's path."""
    found = shutil.which("mcp-harness")
    if found:
        return "mcp-harness", f"'mcp-harness' resolves to {found} on this PATH."
    path = command_path()
    return path, (
        f"mcp-harness is not on PATH, so the files name {path}, which works on this machine only: "
        "install it on PATH (pipx install / uv tool install) and run init --force to use the name."
    )


def plan(args: argparse.Namespace, root: Path, workspace: str) -> tuple[list[Change], list[str]]:
    """Every change init would make, and notes for the person (nothing is written here)."""
    command, resolves = launcher()
    clients = args.client or ["claude-code", *[c for c in ("cursor", "vscode") if (root / f".{c}").is_dir()]]
    changes, notes = [], [resolves]
    for client in dict.fromkeys(clients):
        changes.append(_server_change(args, root, client, workspace, command))
    if "claude-code" in clients:  # its settings: the lifecycle hooks, and the permission to call the tools
        path, hooks = root / ".claude" / "settings.json", hook_commands(args, command, workspace)
        steps: list[Callable[[str | None], Change]] = []
        if not args.no_hooks:
            steps.append(lambda text: merge_hooks(path, text, hooks, force=args.force))
        steps.append(lambda text: merge_permission(path, text, SERVER_NAME))
        changes.append(in_turn(path, _read(path), steps))
    if not args.no_instructions and set(clients) != {"claude-desktop"}:  # Desktop reads no project file
        claude = root / "CLAUDE.md"
        old_home = claude.exists() and "<!-- mcp-harness:begin -->" in claude.read_text(encoding="utf-8")
        path = claude if old_home else root / "AGENTS.md"  # an earlier init wrote it into CLAUDE.md: it stays
        changes.append(merge_instructions(path, _read(path), instructions(workspace), force=args.force))
        if "claude-code" in clients and not old_home:
            changes.append(merge_import(claude, _read(claude)))
    if args.transport == "http":
        notes.append(
            f"HTTP entries send the token from the environment variable {args.token_env}: set it (an agent token "
            "from `mcp-harness token create`) where your client starts; no token is written."
        )
    return changes, notes


def hook_commands(args: argparse.Namespace, command: str, workspace: str) -> dict[str, str]:
    """The lifecycle pack: `mcp-harness hook EVENT` with the server's database and workspace (stdio; each
    hook finds the identity of its session's server), or the shared server and its token (HTTP)."""
    if args.transport == "http":
        where = ["--url", _url(args), "--token-env", args.token_env]
    else:
        where = [*_db(args), "--workspace", workspace, "--agent", args.agent or "claude-code"]
    return {
        event: hook_command(event, shlex.join([*shlex.split(command), "hook", event, *where])) for event in HOOK_EVENTS
    }


def removal(root: Path) -> list[Change]:
    """`init --remove`: what init added to this project, and nothing else (other servers, hooks and lines stay)."""
    from mcp_harness.cli.clients import PROJECT_FILES

    changes = []
    for path, key in [(root / p, k) for p, k in PROJECT_FILES.values()]:
        if path.exists():
            changes.append(remove_server(path, _read(path), key, SERVER_NAME))
    settings = root / ".claude" / "settings.json"
    if settings.exists():
        steps = (lambda text: remove_hooks(settings, text), lambda text: remove_permission(settings, text, SERVER_NAME))
        changes.append(in_turn(settings, _read(settings), steps))
    if (root / "AGENTS.md").exists():
        changes.append(remove_instructions(root / "AGENTS.md", _read(root / "AGENTS.md")))
    if (root / "CLAUDE.md").exists():
        changes.append(_unimport(root / "CLAUDE.md"))
    return changes


def _unimport(path: Path) -> Change:
    """CLAUDE.md without the import line init added (and a section an earlier init wrote there)."""
    text, what = _read(path), list[str]()
    for step in (remove_instructions, remove_import):
        change = step(path, text)
        if change.text is not None:
            text, what = change.text, [*what, change.what]
    return Change(path, text if what else None, "; ".join(what) or "nothing of mcp-harness in it (unchanged)")


def _server_change(args: argparse.Namespace, root: Path, client: str, workspace: str, command: str) -> Change:
    desktop = client == "claude-desktop"
    if args.transport == "http":
        entry = http_entry(client, _url(args), token_reference(client, args.token_env))
        runs = f"{_url(args)} with the token from {args.token_env}"
    else:
        exe = command_path() if desktop else command  # Desktop does not start servers with a shell's PATH
        entry = stdio_entry(client, exe, serve_args(workspace, args.agent or client, args.db))
        runs = shlex.join([entry["command"], *entry["args"]])
    path, key = (
        (desktop_config_path(), "mcpServers")
        if desktop
        else (root / PROJECT_FILES[client][0], PROJECT_FILES[client][1])
    )
    change = merge_server(
        path, _read(path), key, SERVER_NAME, entry, force=args.force, runs=runs, jsonc_ok=client == "vscode"
    )  # VS Code reads its file as JSONC
    change.backup = desktop
    return change


def _url(args: argparse.Namespace) -> str:
    return args.url or f"http://127.0.0.1:{env('PORT', '8765')}/mcp"


def _db(args: argparse.Namespace) -> list[str]:
    return ["--db", args.db] if args.db else []


def _read(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.exists() else None


def write(change: Change) -> str | None:
    """Write one change (a backup of the old file first where asked); returns the backup's path."""
    assert change.text is not None
    backup = None
    if change.backup and change.path.exists():
        backup = change.path.with_name(f"{change.path.name}.{time.strftime('%Y%m%d-%H%M%S')}.bak")
        shutil.copy2(change.path, backup)
    if change.text == "":  # init made this file and nothing else is left in it
        change.path.unlink(missing_ok=True)
        if change.path.parent.name == ".claude" and not any(change.path.parent.iterdir()):
            change.path.parent.rmdir()
        return None
    change.path.parent.mkdir(parents=True, exist_ok=True)
    tmp = change.path.with_name(change.path.name + ".mcp-harness-tmp")
    tmp.write_text(change.text, encoding="utf-8")
    tmp.replace(change.path)  # whole or not at all
    return str(backup) if backup else None


def commit_line(root: Path, changes: list[Change], *, removing: bool) -> str | None:
    """The command that commits what init just wrote or deleted in the project; None when it changed nothing
    there (a file outside the project, such as Claude Desktop's, is no part of the repository)."""
    inside = [c for c in changes if c.text is not None and c.path.is_relative_to(root)]
    written = [shlex.quote(str(c.path.relative_to(root))) for c in inside if c.text]
    deleted = [shlex.quote(str(c.path.relative_to(root))) for c in inside if c.text == ""]
    if not written and not deleted:
        return None
    steps = [f"git add {' '.join(written)}"] if written else []
    steps += [f"git rm -q --cached --ignore-unmatch {' '.join(deleted)}"] if deleted else []
    message = "remove mcp-harness" if removing else "mcp-harness"
    return f'Commit them: {" && ".join(steps)} && git commit -m "{message}"'


def cmd_init(args: argparse.Namespace) -> int:
    settle_transport(args)  # every refusal comes before anything is written
    root, in_git = project_root()
    check_root(root)
    if args.remove:
        notes: list[str] = []
        changes, origin = removal(root), "Removing what init added (other entries, hooks and lines stay)."
    else:
        args.db = project_db(args.db)
        args.url = _url(args) if args.transport == "http" else None
        workspace, origin = choose_workspace(args, root)
        changes, notes = plan(args, root, workspace)
    print(f"mcp-harness init{' (dry run: nothing is written)' if args.dry_run else ''}: project {root}")
    if not in_git:
        print("  (not inside a git repository: the current folder is treated as the project)")
    print(origin)
    for change in changes:
        shown = change.path.relative_to(root) if change.path.is_relative_to(root) else change.path
        if change.text is None:
            print(f"  {shown}: {change.what}")
        elif change.text == "" and args.dry_run:
            print(f"  {shown}: {would(change.what)}; nothing else would be left in it: would be deleted")
        elif change.text == "":
            print(f"  {shown}: {change.what}; nothing else is in it: deleted")
            write(change)
        elif args.dry_run:
            print(f"  {shown}: {would(change.what)}; would be written as:")
            print("    " + change.text.rstrip("\n").replace("\n", "\n    "))
        else:
            backup = write(change)
            print(f"  {shown}: {change.what}" + (f" (the old file is kept as {backup})" if backup else ""))
    if args.remove or getattr(args, "guard", False):  # the commit guard: git's pre-commit hook
        from mcp_harness.cli import guard_hook

        if args.remove:
            said = guard_hook.remove(root, dry_run=args.dry_run)
        else:
            said = guard_hook.install(root, command_path(), args.db, workspace, dry_run=args.dry_run, force=args.force)
        for line in said:
            print(f"  {line}")
    for line in notes:
        print(line)
    if in_git and not args.dry_run:
        commit = commit_line(root, changes, removing=args.remove)
        if commit:
            print(commit)
    asked = [c for c in changes if c.by_hand and "vscode" in (args.client or [])]
    if asked:  # asked for by name, and not done: the others are written, the exit status says so
        shown = asked[0].path.relative_to(root) if asked[0].path.is_relative_to(root) else asked[0].path
        print(
            f"mcp-harness: {shown} has comments or trailing commas and is not rewritten: add the harness entry "
            "shown above by hand",
            file=sys.stderr,
        )
        return 2
    return 0

"""`mcp-harness` subcommands. One error boundary: a one-line reason on stderr and a non-zero exit."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

from . import __version__
from .clientconfig import snippet
from .config import ENV_PREFIX, Settings, resolve_db_url
from .console import command as ui_command
from .errors import HarnessError, harness_error_in
from .service import Harness, Identity

log = logging.getLogger("mcp_harness")


def _env(name: str, default: str) -> str:
    return os.environ.get(ENV_PREFIX + name) or default


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcp-harness", description=__doc__)
    parser.add_argument("--version", action="version", version=f"mcp-harness {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", default=None, help="SQLAlchemy URL or file path (env MCP_HARNESS_DB)")
    ws = argparse.ArgumentParser(add_help=False)
    ws.add_argument("--workspace", default=None, help="workspace (env MCP_HARNESS_WORKSPACE, default 'default')")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("serve", parents=[common, ws], help="run the MCP server (stdio by default)")
    p.add_argument("--transport", choices=["stdio", "http"], default=_env("TRANSPORT", "stdio"))
    p.add_argument("--agent", default=None, help="agent name for stdio (env MCP_HARNESS_AGENT, default 'default')")
    p.add_argument("--host", default=_env("HOST", "127.0.0.1"))
    p.add_argument("--port", type=int, default=int(_env("PORT", "8765")))
    p.add_argument("--allowed-host", action="append", default=None, help="extra Host header value allowed (http)")
    p.add_argument("--allowed-origin", action="append", default=None, help="extra Origin allowed (http)")

    ui_command.add_parser(sub, [common, ws])  # `mcp-harness ui`, the operator console
    p = sub.add_parser("log", parents=[common, ws], help="the progress log, newest first")
    p.add_argument("--thread", default=None)
    p.add_argument("--task", default=None)
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("tasks", parents=[common, ws], help="the task board")
    p.add_argument(
        "--status", action="append", default=None, choices=["pending", "claimed", "done", "failed", "blocked"]
    )
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("history", parents=[common, ws], help="checkpoints of a thread, newest first")
    p.add_argument("thread")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("show", parents=[common, ws], help="print a thread's state (latest or --version)")
    p.add_argument("thread")
    p.add_argument("--version", type=int, default=None)

    p = sub.add_parser("status", parents=[common, ws], help="threads, task board and leases at a glance")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("export", parents=[common], help="write a workspace (or all) as JSON Lines to stdout")
    p.add_argument("--workspace", default=None)

    p = sub.add_parser("import", parents=[common], help="read an export back (into workspaces with no data)")
    p.add_argument("file", help="an export file, or - for stdin")

    p = sub.add_parser("prune", parents=[common, ws], help="delete old unlabelled checkpoints, return disk space")
    p.add_argument("--keep-last", type=int, required=True, help="checkpoints kept per thread (at least 1)")
    p.add_argument("--older-than", type=float, default=None, metavar="DAYS", help="only delete ones older than this")
    p.add_argument("--all-workspaces", action="store_true", help="prune every workspace")

    p = sub.add_parser("config", help="print a ready configuration for an MCP client")
    p.add_argument("client", choices=["claude-desktop", "claude-code", "cursor"])
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    p.add_argument("--db", default=None, help="database the stdio server uses (default: this machine's)")
    p.add_argument("--workspace", default=None)
    p.add_argument("--agent", default=None)
    p.add_argument("--url", default=None, help="http: the server's /mcp URL (default http://127.0.0.1:8765/mcp)")
    p.add_argument("--token", default=None, help="http: the bearer token (default: a placeholder to replace)")

    p = sub.add_parser("token", help="bearer tokens for the HTTP server")
    tsub = p.add_subparsers(dest="token_command", required=True, metavar="SUBCOMMAND")
    t = tsub.add_parser("create", parents=[common], help="create a token (printed once, on the last line)")
    t.add_argument("--workspace", required=True)
    t.add_argument("--agent", required=True)
    t.add_argument("--role", choices=["agent", "reader", "operator"], default="agent")
    t = tsub.add_parser("list", parents=[common], help="tokens (never their text)")
    t.add_argument("--workspace", default=None)
    t.add_argument("--json", action="store_true")
    t = tsub.add_parser("revoke", parents=[common], help="revoke a token, or all tokens of --workspace/--agent")
    t.add_argument("token", nargs="?", default=None, help="the token text or its id (tk_...)")
    t.add_argument("--workspace", default=None)
    t.add_argument("--agent", default=None)

    p = sub.add_parser("schema", help="state schemas")
    ssub = p.add_subparsers(dest="schema_command", required=True, metavar="SUBCOMMAND")
    s = ssub.add_parser("set", parents=[common, ws], help="register a JSON Schema (Draft 2020-12) for a thread")
    s.add_argument("--thread", required=True)
    s.add_argument("file", type=Path)
    return parser


def identity(args: argparse.Namespace, *, with_agent: bool = False) -> Identity:
    workspace = args.workspace or _env("WORKSPACE", "default")
    agent = (getattr(args, "agent", None) or _env("AGENT", "default")) if with_agent else "cli"
    return Identity(workspace=workspace, agent=agent)


def with_harness(args: argparse.Namespace, fn: Callable[[Harness], Awaitable[int]]) -> int:
    settings = Settings.from_env(args.db)

    async def run() -> int:
        async with Harness.open(settings) as harness:
            return await fn(harness)

    return anyio.run(run)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=os.environ.get(ENV_PREFIX + "LOG_LEVEL", "WARNING").upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return (getattr(args, "handler", None) or COMMANDS[args.command])(args)
    except (HarnessError, BaseExceptionGroup) as exc:  # a server's task group wraps what stopped it
        reason = harness_error_in(exc)
        if reason is None:
            raise
        print(f"mcp-harness: {reason.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except OSError as exc:
        print(f"mcp-harness: {exc}", file=sys.stderr)
        return 1


def cmd_serve(args: argparse.Namespace) -> int:
    from .server import create_server

    settings = Settings.from_env(args.db)
    if args.transport == "stdio":
        server = create_server(settings, identity(args, with_agent=True))
        server.run("stdio")
        return 0
    from .http import serve_http

    return serve_http(settings, args)


def cmd_log(args: argparse.Namespace) -> int:
    ident = identity(args)

    async def run(h: Harness) -> int:
        entries = await h.progress.recent(ident, thread=args.thread, task_key=args.task, limit=args.limit)
        if args.json:
            print(json.dumps([e.model_dump(mode="json") for e in entries], indent=2))
            return 0
        if not entries:
            print("no progress recorded yet")
        for e in entries:
            where = f" [{e.task_key}]" if e.task_key else ""
            print(f"#{e.seq} {e.created_at[:19].replace('T', ' ')} {e.agent} {e.status.upper()}{where} ({e.thread})")
            print(f"    {e.summary}")
            if e.details:
                print("    " + e.details.replace("\n", "\n    "))
            for step in e.next_steps or []:
                print(f"    next: {step}")
            if e.artifacts:
                print(f"    artifacts: {json.dumps(e.artifacts)}")
        return 0

    return with_harness(args, run)


def _time_left(expires_at: str | None) -> str:
    if not expires_at:
        return ""
    from datetime import UTC, datetime

    left = datetime.strptime(expires_at, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC) - datetime.now(UTC)
    seconds = int(left.total_seconds())
    return f"{seconds}s left" if seconds >= 0 else f"expired {-seconds}s ago"


def cmd_tasks(args: argparse.Namespace) -> int:
    ident = identity(args)

    async def run(h: Harness) -> int:
        tasks, counts = await h.tasks.board(ident, statuses=args.status)
        if args.json:
            print(
                json.dumps(
                    {
                        "tasks": [t.model_dump(mode="json", exclude={"lease": {"token"}}) for t in tasks],
                        "counts": counts.model_dump(),
                    },
                    indent=2,
                )
            )
            return 0
        print(
            f"pending {counts.pending}  claimed {counts.claimed}  done {counts.done}  "
            f"failed {counts.failed}  blocked {counts.blocked}"
        )
        if not tasks:
            print("no tasks")
            return 0
        print(f"{'KEY':<28} {'STATUS':<9} {'OWNER':<14} {'LEASE':<16} {'PRI':>4} {'TRY':>5}  TITLE")
        for t in tasks:
            lease = _time_left(t.lease.expires_at) if t.lease else ""
            print(
                f"{t.key[:28]:<28} {t.status:<9} {(t.owner or '-')[:14]:<14} {lease[:16]:<16} {t.priority:>4} "
                f"{t.attempts:>2}/{t.max_attempts:<2}  {t.title[:60]}"
            )
        return 0

    return with_harness(args, run)


def cmd_history(args: argparse.Namespace) -> int:
    ident = identity(args)

    async def run(h: Harness) -> int:
        page = await h.checkpoints.list(ident, thread=args.thread, limit=args.limit)
        if args.json:
            print(json.dumps(page.model_dump(mode="json")["checkpoints"], indent=2))
            return 0
        if not page.checkpoints:
            print(f"thread {args.thread!r} has no checkpoints")
        for c in page.checkpoints:
            label = f" [{c.label}]" if c.label else ""
            print(
                f"v{c.version:<5} {c.created_at[:19].replace('T', ' ')} {c.agent:<14} {c.size_bytes:>9} B "
                f"{c.checkpoint_id}{label}"
            )
        return 0

    return with_harness(args, run)


def cmd_show(args: argparse.Namespace) -> int:
    ident = identity(args)

    async def run(h: Harness) -> int:
        brief = await h.restore(ident, thread=args.thread, version=args.version, progress_limit=0)
        if not brief.found:
            raise HarnessError(f"thread {args.thread!r} has no checkpoint")
        print(json.dumps(brief.state, indent=2, ensure_ascii=False))
        return 0

    return with_harness(args, run)


def cmd_status(args: argparse.Namespace) -> int:
    from .status import render_status

    ident = identity(args)

    async def run(h: Harness) -> int:
        report = await h.status(ident)
        print(json.dumps(report, indent=2) if args.json else render_status(report))
        return 0

    return with_harness(args, run)


def cmd_schema(args: argparse.Namespace) -> int:
    ident = identity(args)
    try:
        schema = json.loads(args.file.read_text())
    except json.JSONDecodeError as exc:
        raise HarnessError(f"{args.file} is not valid JSON: {exc}") from exc

    async def run(h: Harness) -> int:
        version = await h.schemas.set_schema(ident, args.thread, schema)
        print(f"schema version {version} registered for thread {args.thread!r} in workspace {ident.workspace!r}")
        return 0

    return with_harness(args, run)


def cmd_token(args: argparse.Namespace) -> int:
    async def run(h: Harness) -> int:
        if args.token_command == "create":
            token = await h.tokens.create(args.workspace, args.agent, args.role)
            print(f"token for agent {args.agent!r} in workspace {args.workspace!r} (role {args.role}); "
                  "it is shown only now:")  # fmt: skip
            print(token)
        elif args.token_command == "list":
            rows = await h.tokens.list(args.workspace)
            if args.json:
                print(json.dumps([r.__dict__ for r in rows], indent=2))
                return 0
            if not rows:
                print("no tokens")
            for r in rows:
                state = f"revoked {r.revoked_at[:19]}" if r.revoked_at else "live"
                print(f"{r.token_id:<16} {r.workspace:<20} {r.agent:<20} {r.role:<7} {r.created_at[:19]}  {state}")
        else:
            count = await h.tokens.revoke(args.token, workspace=args.workspace, agent=args.agent)
            print(f"revoked {count} token{'s' if count != 1 else ''}")
        return 0

    return with_harness(args, run)


def _terminal_progress(what: str, count: int) -> None:
    """Long operations report progress on stderr when it is a terminal (stdout may be data)."""
    if sys.stderr.isatty():
        print(f"\r{what}: {count:,}", end="", file=sys.stderr, flush=True)


def cmd_export(args: argparse.Namespace) -> int:
    async def run(h: Harness) -> int:
        async for line in h.maintenance.export(args.workspace, progress=_terminal_progress):
            sys.stdout.write(line + "\n")
        if sys.stderr.isatty():
            print(file=sys.stderr)
        return 0

    return with_harness(args, run)


def cmd_import(args: argparse.Namespace) -> int:
    stream = sys.stdin.buffer if args.file == "-" else open(args.file, "rb")  # noqa: SIM115

    async def run(h: Harness) -> int:
        counts = await h.maintenance.import_lines(stream, progress=_terminal_progress)
        if sys.stderr.isatty():
            print(file=sys.stderr)
        print("imported " + ", ".join(f"{n} {kind}" for kind, n in counts.items()))
        return 0

    try:
        return with_harness(args, run)
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def cmd_prune(args: argparse.Namespace) -> int:
    workspace = None if args.all_workspaces else identity(args).workspace

    async def run(h: Harness) -> int:
        before = await h.database_bytes()
        report = await h.maintenance.prune(
            keep_last=args.keep_last, older_than_days=args.older_than, workspace=workspace,
            progress=_terminal_progress,
        )  # fmt: skip
        if sys.stderr.isatty():
            print(file=sys.stderr)
        after = await h.database_bytes()
        freed = f"; database {before / 1024:.0f} KiB -> {after / 1024:.0f} KiB"
        print(f"deleted {report.checkpoints_deleted} checkpoints and {report.values_deleted} unused values "
              f"in {report.workspaces} workspace(s){freed}")  # fmt: skip
        return 0

    return with_harness(args, run)


def cmd_config(args: argparse.Namespace) -> int:
    db = resolve_db_url(args.db or os.environ.get(ENV_PREFIX + "DB"))
    if db.startswith("sqlite+aiosqlite:///"):
        db = db.removeprefix("sqlite+aiosqlite:///")  # a plain path reads better in a config file
    ident = identity(args, with_agent=True)
    agent = args.agent or _env("AGENT", args.client)
    print(snippet(args.client, args.transport, db=db, workspace=ident.workspace, agent=agent,
                  url=args.url or f"http://127.0.0.1:{_env('PORT', '8765')}/mcp",
                  token=args.token or "PASTE-TOKEN-FROM-mcp-harness-token-create"))  # fmt: skip
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "serve": cmd_serve,
    "log": cmd_log,
    "tasks": cmd_tasks,
    "history": cmd_history,
    "show": cmd_show,
    "status": cmd_status,
    "schema": cmd_schema,
    "token": cmd_token,
    "export": cmd_export,
    "import": cmd_import,
    "prune": cmd_prune,
    "config": cmd_config,
}

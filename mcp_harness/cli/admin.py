"""Commands that change the database from outside the MCP tools: schemas, tokens, export, import, prune."""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import aclosing

from mcp_harness.cli.common import identity, with_harness
from mcp_harness.cli.progress import bar, sized
from mcp_harness.errors import HarnessError, NotFound
from mcp_harness.service import Harness


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
            print(
                f"token for agent {args.agent!r} in workspace {args.workspace!r} (role {args.role}); "
                "it is shown only now:"
            )
            print(token)
        elif args.token_command == "list":
            rows = await h.tokens.list(args.workspace)
            if args.json:
                print(json.dumps([r.__dict__ for r in rows], indent=2))
                return 0
            if not rows:
                print("no tokens")
                return 0
            from mcp_harness.cli.output import show, table

            t = table("ID", "WORKSPACE", "AGENT", "ROLE", "CREATED (UTC)", "STATE")  # aligned whatever the role
            for r in rows:
                state = f"revoked {r.revoked_at[:19].replace('T', ' ')}" if r.revoked_at else "live"
                t.add_row(r.token_id, r.workspace, r.agent, r.role, r.created_at[:19].replace("T", " "), state)
            show(t)
        else:
            count = await h.tokens.revoke(args.token, workspace=args.workspace, agent=args.agent)
            print(f"revoked {count} token{'s' if count != 1 else ''}")
        return 0

    # a token may be made before the server's first start; listing or revoking needs the database there
    return with_harness(args, run, existing=args.token_command != "create")


def cmd_export(args: argparse.Namespace) -> int:
    if args.all_workspaces:
        args.workspace = None

    async def run(h: Harness) -> int:
        if args.workspace is not None and args.workspace not in (names := await h.maintenance.workspaces()):
            held = ", ".join(names) if names else "nothing yet"
            raise NotFound(f"workspace {args.workspace!r} has no data to export; this database holds: {held}")
        # aclosing: a write that fails (a closed stdout) still ends the export's read transaction here
        with bar() as progress:
            async with aclosing(h.maintenance.export(args.workspace, progress=progress)) as lines:
                async for line in lines:
                    sys.stdout.write(line + "\n")
        return 0

    return with_harness(args, run, existing=True)


def cmd_import(args: argparse.Namespace) -> int:
    try:
        stream = sys.stdin.buffer if args.file == "-" else open(args.file, "rb")  # noqa: SIM115 - bytes: the import checks the encoding
    except OSError as exc:
        raise NotFound(f"cannot read {args.file}: {exc.strerror or exc}") from None

    async def run(h: Harness) -> int:
        with bar("bytes") as progress:
            lines = progress.lines(stream, sized(stream), "importing")
            counts = await h.maintenance.import_lines(lines)
        done = ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)
        print(f"imported {done}" if done else "imported nothing: the file holds no rows")
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
        with bar("workspaces") as progress:
            report = await h.maintenance.prune(
                keep_last=args.keep_last, older_than_days=args.older_than, workspace=workspace, progress=progress
            )
        after = await h.database_bytes()
        freed = f"; database {before / 1024:.0f} KiB -> {after / 1024:.0f} KiB"
        print(
            f"deleted {report.checkpoints_deleted} checkpoints and {report.values_deleted} unused values "
            f"in {report.workspaces} workspace(s){freed}"
        )
        return 0

    return with_harness(args, run, existing=True)

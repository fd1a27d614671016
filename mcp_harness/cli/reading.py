"""Read-only views for people: the progress log, the task board, a thread's history and state, status."""

from __future__ import annotations

import argparse
import json

from ..errors import HarnessError
from ..service import Harness
from .common import identity, with_harness


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
    from ..status import collect_status, render_status

    ident = identity(args)

    async def run(h: Harness) -> int:
        report = await collect_status(h, ident)
        print(json.dumps(report, indent=2) if args.json else render_status(report))
        return 0

    return with_harness(args, run)

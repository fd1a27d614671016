"""Read-only views for people: the progress log, the task board, a thread's history and state, status.

`--json` prints the stable JSON form; otherwise aligned tables (`tables.py`). When the workspace has
no data but the database holds others, a note on stderr names them (an empty workspace is not an
error, but it looks like lost data when the name was mistyped)."""

from __future__ import annotations

import argparse
import json

from mcp_harness.arguments import ListCheckpointsArgs, RestoreStateArgs
from mcp_harness.cli.brief import other_workspaces
from mcp_harness.cli.common import identity, with_harness
from mcp_harness.cli.output import clean, note, say, show
from mcp_harness.cli.parser import TASK_COMMANDS
from mcp_harness.cli.tables import counts_line, progress_log, status_report, task_board
from mcp_harness.config import check_name
from mcp_harness.errors import InvalidArgument, NotFound
from mcp_harness.models import EVERY_FIELD, every_field
from mcp_harness.service import Harness, Identity


async def note_if_empty(h: Harness, ident: Identity) -> None:
    if (message := await other_workspaces(h, ident)) is not None:
        note(message)


def cmd_log(args: argparse.Namespace) -> int:
    ident = identity(args)
    if args.query is not None and (args.thread is not None or args.task is not None):
        raise InvalidArgument(
            "--query searches the whole log, best matches first; it does not combine with "
            "--task or --thread (drop them, or drop --query to read one task's or thread's entries)"
        )
    if args.thread is not None:
        check_name("thread", args.thread)
    if args.task is not None:
        check_name("task", args.task)
    given = [("query", args.query)] if args.query is not None else [("thread", args.thread), ("task", args.task)]
    filters = [f"{name} {value!r}" for name, value in given if value is not None]

    async def run(h: Harness) -> int:
        if args.query is not None:
            entries = await h.progress.search(ident, args.query, limit=args.limit)
        else:
            entries = await h.progress.recent(ident, thread=args.thread, task_key=args.task, limit=args.limit)
        if args.json:
            # every field, as before: scripts read these (tool results leave unset ones out)
            print(json.dumps(every_field(entries), indent=2))
        elif entries:
            show(progress_log(entries))
        elif filters:  # entries may exist: say which filter found none
            print(clean(f"no progress entry matches {' and '.join(filters)}", multiline=False))
        else:
            print("no progress recorded yet")
        if not entries:
            await note_if_empty(h, ident)
        return 0

    return with_harness(args, run, existing=True)


def cmd_tasks(args: argparse.Namespace) -> int:
    ident = identity(args)
    if args.verb == "add":  # a person plans
        from mcp_harness.cli.task_add import add

        return add(args, args.key)
    if args.verb in TASK_COMMANDS:  # a person's action
        from mcp_harness.cli.review import task_action

        return task_action(args, args.verb, args.key)
    if args.verb == "show":  # tasks show KEY
        from mcp_harness.cli.task_story import show_task

        async def story(h: Harness) -> int:
            try:
                return await show_task(h, ident, args.key, as_json=args.json)
            except NotFound as exc:  # a mistyped workspace: name the ones there are, once
                others = await other_workspaces(h, ident)
                raise NotFound(f"{exc.message}; {others}" if others else exc.message) from None

        return with_harness(args, story, existing=True)

    async def run(h: Harness) -> int:
        tasks, counts = await h.tasks.board(ident, statuses=args.status, query=args.query)
        if args.json:
            rows = [t.model_dump(mode="json", context=EVERY_FIELD, exclude={"lease": {"token"}}) for t in tasks]
            board = {"tasks": rows, "counts": counts.model_dump()}
            print(json.dumps(board, indent=2))
        else:
            ended = {t.key for t in tasks if await h.lease_end_reason(ident, t)}  # as `status` lists them
            show(counts_line(counts.model_dump()), task_board(tasks, ended) if tasks else "no tasks")
        if not any(counts.model_dump().values()):
            await note_if_empty(h, ident)
        return 0

    return with_harness(args, run, existing=True)


def cmd_history(args: argparse.Namespace) -> int:
    ident = identity(args)

    async def run(h: Harness) -> int:
        page = await h.checkpoints.list(ident, ListCheckpointsArgs(thread=args.thread, limit=args.limit))
        if not page.checkpoints:
            await no_checkpoint(h, ident, args.thread)
        if args.json:
            print(json.dumps(page.model_dump(mode="json")["checkpoints"], indent=2))
            return 0
        from mcp_harness.cli.output import table

        t = table("VERSION", "SAVED (UTC)", "AGENT", "BYTES", "CHECKPOINT", "LABEL")
        for c in page.checkpoints:
            t.add_row(
                f"v{c.version}",
                c.created_at[:19].replace("T", " "),
                c.agent,
                str(c.size_bytes),
                c.checkpoint_id,
                c.label or "",
            )
        show(t)
        return 0

    return with_harness(args, run, existing=True)


async def no_checkpoint(h: Harness, ident: Identity, thread: str, version: int | None = None) -> None:
    """A thread with no checkpoint is an error for `show` and `history` (exit status 2)."""
    others = await other_workspaces(h, ident)
    what = f"no version {version}" if version is not None else "no checkpoint"
    raise NotFound(f"thread {thread!r} has {what}" + (f"; {others}" if others else ""))


def cmd_show(args: argparse.Namespace) -> int:
    ident = identity(args)

    async def run(h: Harness) -> int:
        brief = await h.restore(ident, RestoreStateArgs(thread=args.thread, version=args.version, progress_limit=0))
        if not brief.found:
            await no_checkpoint(h, ident, args.thread, args.version)
        say(json.dumps(brief.state, indent=2, ensure_ascii=False))  # escapes keep it JSON, with the same values
        return 0

    return with_harness(args, run, existing=True)


def cmd_status(args: argparse.Namespace) -> int:
    ident = identity(args)

    async def run(h: Harness) -> int:
        report = await h.status(ident)
        others = await other_workspaces(h, ident)
        if args.json:
            print(json.dumps(report, indent=2))
            if others:
                note(others)
        else:
            show(*status_report(report), *([others] if others else []))
        return 0

    return with_harness(args, run, existing=True)

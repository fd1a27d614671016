"""`mcp-harness run` and `mcp-harness sessions`: their arguments and how they run (the runner's modules
load only when one of them runs)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp_harness.errors import InvalidArgument

if TYPE_CHECKING:  # the runner's modules load only when `run` runs
    from mcp_harness.runner.agents import ClaudeCode, CommandAgent
    from mcp_harness.runner.loop import Options
    from mcp_harness.service import Harness

RUN_HELP = "keep the work going: headless agent sessions, one task each, until the plan is done"


def minutes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 7 * 24 * 60:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of minutes: use e.g. 10 or 0.5")
    return value


def count(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 10_000:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count: use a whole number from 1 to 10000")
    return int(text)


def amount(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1e9:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number")
    return value


def add_parser(sub: Any, parents: list[argparse.ArgumentParser], late: list[argparse.ArgumentParser]) -> None:
    """`run` and `sessions` (`late`: the shared flags again for a command's words, `sessions show ID`)."""
    p = sub.add_parser("run", parents=parents, help=RUN_HELP, description=RUN_HELP)
    p.add_argument("--parallel", type=count, default=1, metavar="N", help="sessions at once (default 1)")
    p.add_argument("--max-sessions", type=count, default=None, metavar="N", help="start at most N sessions")
    p.add_argument(
        "--max-cost",
        type=amount,
        default=None,
        metavar="USD",
        help="start none once the sessions' reported cost reaches this",
    )
    p.add_argument("--max-hours", type=amount, default=None, metavar="H", help="start none after H hours")
    p.add_argument(
        "--session-timeout",
        type=minutes,
        default=60,
        metavar="MIN",
        help="stop a session after MIN minutes (default 60)",
    )
    p.add_argument(
        "--stall-timeout",
        type=minutes,
        default=10,
        metavar="MIN",
        help="stop a session with no output for MIN minutes (default 10)",
    )
    p.add_argument("--tags", action="append", default=None, metavar="T", help="only tasks with one of these tags")
    p.add_argument(
        "--spec",
        type=Path,
        default=None,
        metavar="FILE",
        help="a workspace with no tasks: one initializer session plans them from FILE",
    )
    p.add_argument("--worktrees", action="store_true", help="each slot in its own linked git worktree")
    p.add_argument(
        "--exit-when-idle", action="store_true", help="exit (3) instead of waiting when the rest waits for a person"
    )
    p.add_argument("--dry-run", action="store_true", help="say what would run, start nothing")
    agent = p.add_mutually_exclusive_group()
    agent.add_argument("--claude", default=None, metavar="PATH", help="Claude Code's binary (default: claude)")
    agent.add_argument(
        "--command",
        default=None,
        metavar="TEMPLATE",
        help="another agent: placeholders {prompt} {prompt_file} {session} {task_key} {mcp_config} {workdir}",
    )
    p.add_argument(
        "agent_args", nargs=argparse.REMAINDER, metavar="-- ARGS", help="passed to every agent command as they are"
    )
    p.set_defaults(handler=run)

    p = sub.add_parser("sessions", parents=parents, help="the runner's agent sessions; `sessions show ID`; `stop ID`")
    p.add_argument("--live", action="store_true", help="only the sessions running now")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=sessions)
    words = p.add_subparsers(dest="verb", metavar="show|stop")
    w = words.add_parser("show", parents=late, help="one session, with its transcript's tool calls")
    w.add_argument("id", metavar="ID", help="the session's id, or the start of it")
    w.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
    w = words.add_parser("stop", parents=late, help="ask a live session's runner to stop it")
    w.add_argument("id", metavar="ID", help="the session's id, or the start of it")
    w.add_argument("--agent", default=None, help="who asks (default: your login name)")


def _extra(args: argparse.Namespace) -> list[str]:
    extra = list(args.agent_args or [])
    if extra and extra[0] == "--":
        extra = extra[1:]
    elif extra:
        raise InvalidArgument(f"unknown arguments {extra[:3]}: put the agent's own arguments after --")
    return extra


def run(args: argparse.Namespace) -> int:
    import anyio

    from mcp_harness.cli.common import check_db, db_setting
    from mcp_harness.config import Settings
    from mcp_harness.runner import agents
    from mcp_harness.runner.display import Display
    from mcp_harness.runner.loop import Options, Runner
    from mcp_harness.runner.worktrees import top_level
    from mcp_harness.service import Harness

    check_db(args, existing=False)  # a first run may make the database (`--spec`), never a mistyped path's folder
    if args.worktrees and args.parallel < 2:
        raise InvalidArgument("--worktrees gives each slot its own worktree: use it with --parallel 2 or more")
    if args.spec is not None:
        _readable_spec(args.spec)
    agent: ClaudeCode | CommandAgent | None = None
    missing: str | None = None  #: why no session could start: a dry run still shows the work, then says it
    try:
        agent = agents.choose(args.claude, args.command, _extra(args))
    except InvalidArgument as refused:
        if not args.dry_run:
            raise
        missing = refused.message
    here = Path.cwd()
    root = top_level(here)
    if args.worktrees and root is None:
        raise InvalidArgument("--worktrees needs a git repository: run it inside one (git init, then a commit)")
    options = Options(
        parallel=args.parallel,
        max_sessions=args.max_sessions,
        max_cost=args.max_cost,
        max_hours=args.max_hours,
        session_timeout=args.session_timeout * 60,
        stall_timeout=args.stall_timeout * 60,
        tags=args.tags,
        spec=args.spec,
        worktrees=args.worktrees,
        exit_when_idle=args.exit_when_idle,
    )
    workspace = args.workspace or "default"
    settings = Settings.from_env(db_setting(args))

    async def main() -> int:
        async with Harness.open(settings) as harness:
            if args.dry_run or agent is None:  # no agent: only a dry run goes on without one
                return await _dry_run(harness, workspace, agent, missing, options)
            runner = Runner(harness, workspace, agent, options, Display(options.parallel), root=root or here)
            return await runner.run()

    return anyio.run(main)


def _readable_spec(spec: Path) -> None:
    """The spec an initializer reads: a text file this user can read."""
    if spec.is_dir():
        raise InvalidArgument(f"--spec {spec}: a folder, not a file: give the spec's file")
    try:
        spec.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidArgument(f"--spec {spec}: no such file") from None
    except UnicodeDecodeError:
        raise InvalidArgument(f"--spec {spec}: not UTF-8 text: the initializer reads it as a document") from None
    except OSError as exc:
        raise InvalidArgument(f"--spec {spec}: cannot be read ({exc.strerror})") from None


async def _dry_run(
    harness: Harness, workspace: str, agent: ClaudeCode | CommandAgent | None, missing: str | None, options: Options
) -> int:
    """The ready work, then the command each session would run, or (`missing`) why none could start."""
    from mcp_harness.arguments import ListTasksArgs
    from mcp_harness.identity import Identity
    from mcp_harness.runner.agents import CommandAgent

    ident = Identity(workspace, "runner", own=True)
    ready: list[str] = []
    tags: list[str | None] = [*options.tags] if options.tags else [None]
    for tag in tags:  # what the run would take: a task with any of its --tags
        listed = await harness.tasks.list(ident, ListTasksArgs(ready=True, tag=tag, limit=20))
        ready += [t.key for t in listed.tasks if t.key not in ready]
    tagged = f" with the tags {', '.join(options.tags)}" if options.tags else ""
    print(
        f"workspace {workspace!r}: {len(ready)} task(s){tagged} ready now" + (f": {', '.join(ready)}" if ready else "")
    )
    if agent is None:
        print(f"no session could start: {missing}", file=sys.stderr)
        return 2
    words = agent.words if isinstance(agent, CommandAgent) else [agent.binary, "-p", "PROMPT", "..."]
    print(f"each session would run: {' '.join(words)} (up to {options.parallel} at once)")
    return 0


def sessions(args: argparse.Namespace) -> int:
    from mcp_harness.cli.common import identity, person, with_harness
    from mcp_harness.cli.output import clean, show, table

    async def go(h: Any) -> int:
        if args.verb == "stop":
            record = await h.runs.request_stop(person(args), _session_id(await h.runs.list(identity(args)), args.id))
            print(f"asked session {record.id[:8]} to stop (its runner stops it within seconds)")
            return 0
        ident = identity(args)
        if args.verb == "show":
            record = await h.runs.get(ident, _session_id(await h.runs.list(ident), args.id))
            calls = _tool_calls(record.transcript)
            if args.json:
                print(json.dumps({**record.model_dump(mode="json"), "tool_calls": calls}, indent=2))
                return 0
            for name, value in record.model_dump(mode="json").items():
                if value is not None:
                    text = f"{value:.4f}" if name == "cost_usd" else str(value)  # money as the summaries say it
                    print(f"{name}: {clean(text, multiline=False)}")
            print(f"tool calls ({len(calls)}):" if calls else "tool calls: none in the transcript")
            for call in calls:
                print(f"  {clean(call, multiline=False)}")
            return 0
        records = await h.runs.list(ident, live=args.live)
        if args.json:
            print(json.dumps([r.model_dump(mode="json") for r in records], indent=2))
            return 0
        if not records:
            print("no sessions yet: `mcp-harness run` starts them" if not args.live else "no session is running")
            return 0
        shown = table("session", "slot", "task", "outcome", "turns", "cost", "started", "last words", wide="last words")
        for r in records:
            cost = f"${r.cost_usd:.4f}" if r.cost_usd is not None else "unknown"
            turns = str(r.turns) if r.turns is not None else ""
            outcome = r.outcome or ("running, runner gone" if r.runner_gone else "running")
            shown.add_row(
                r.id[:8], str(r.slot), r.task_key or r.kind, outcome, turns, cost, r.started_at[:19], r.last_words or ""
            )
        show(shown)
        return 0

    return with_harness(args, go, existing=True)


def _session_id(known: list[Any], given: str) -> str:
    """A session by its id or a unique prefix of it (the listings show the first 8 characters)."""
    matches = [r.id for r in known if r.id.startswith(given)] if given else []
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise InvalidArgument(f"{given!r} names {len(matches)} sessions: give more of its id")
    return given


def _tool_calls(transcript: str | None) -> list[str]:
    """The tool calls a transcript holds, in order: `name {arguments}` each (arguments cut to 200)."""
    if not transcript:
        return []
    calls = []
    try:
        with open(transcript, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(event, dict) or event.get("type") != "assistant":
                    continue
                for block in (event.get("message") or {}).get("content") or []:
                    if isinstance(block, dict) and block.get("type") == "tool_use":
                        shown = json.dumps(block.get("input"), ensure_ascii=False)
                        calls.append(f"{block.get('name')} {shown[:200]}")
    except OSError as exc:
        print(f"mcp-harness: the transcript {transcript} cannot be read: {exc.strerror}", file=sys.stderr)
    return calls

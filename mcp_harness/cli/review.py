"""People's decisions from the command line: `review list | approve KEY | reject KEY --comment C`, and the
operator's `tasks release|retry|cancel KEY`. Each acts as the person `--agent` names (else the login
name, else `operator`), with the operator role, through `tasks.update`: the one entry point the update_task
tool and the console call too."""

from __future__ import annotations

import argparse
import json
import sys

from mcp_harness.arguments import UpdateTaskArgs
from mcp_harness.cli.common import identity, person, with_harness
from mcp_harness.cli.output import say, show
from mcp_harness.cli.parser import TASK_COMMANDS
from mcp_harness.cli.tables import styled, table, when
from mcp_harness.models import EVERY_FIELD, UpdateTaskResult
from mcp_harness.service import Harness, Identity
from mcp_harness.tasks.rules import PERSON_ACTIONS, RULES, Status


def _refuse(message: str) -> int:
    """A command used wrongly: one line on stderr, exit 2, nothing changed."""
    print(f"mcp-harness: {message}", file=sys.stderr)
    return 2


async def _done(h: Harness, who: Identity, answer: UpdateTaskResult, verb: str, as_json: bool) -> None:
    """A person reads what the action did; --json prints the task as it now stands, every field (the
    tool's answer is the compact one), and what the action reported about its dependents."""
    if as_json:
        task = await h.tasks.detail(who, answer.key)
        out = task.model_dump(mode="json", context=EVERY_FIELD, exclude={"lease"})
        reported = {k: getattr(answer, k) for k in ("unblocked", "revoked") if getattr(answer, k) is not None}
        print(json.dumps(out | reported, indent=2))
        return
    unblocked = f"; now claimable: {', '.join(answer.unblocked)}" if answer.unblocked else ""
    say(f"{verb} task {answer.key}: it is {answer.status} now{unblocked}")


def cmd_review(args: argparse.Namespace) -> int:
    if args.verb == "list":
        return _list(args)
    return _act(args, args.verb, args.key)


def _list(args: argparse.Namespace) -> int:
    ident = identity(args)

    async def run(h: Harness) -> int:
        tasks, _counts = await h.tasks.board(ident, statuses=[Status.IN_REVIEW])
        if args.json:
            rows = [t.model_dump(mode="json", context=EVERY_FIELD, exclude={"lease"}) for t in tasks]
            print(json.dumps(rows, indent=2))
            return 0
        if not tasks:
            print("nothing waits for review")
            return 0
        rejected = any(task.review_comment for task in tasks)  # sent back before: what the reviewer asked
        t = table(
            "KEY",
            "KIND",
            "BY",
            "SINCE (UTC)",
            "VERIFICATION",
            *(["REJECTED BEFORE"] if rejected else []),
            "TITLE",
            wide="TITLE",
        )
        for task in tasks:
            earlier = [task.review_comment or "-"] if rejected else []
            t.add_row(
                task.key,
                styled("in_review", task.kind),
                task.owner or "-",
                when(task.updated_at),
                task.verification or "-",
                *earlier,
                task.title,
            )
        show(t)
        if sys.stderr.isatty():  # a hint for a person; piped output stays the table alone
            print("next: mcp-harness review approve KEY [--comment C] | reject KEY --comment C", file=sys.stderr)
        return 0

    return with_harness(args, run, existing=True)


def task_action(args: argparse.Namespace, word: str, key: str) -> int:
    """`tasks release|retry|cancel|reopen KEY` (operator; reopen: anyone, as the tool)."""
    return _act(args, TASK_COMMANDS[word][0].public, key)


def _act(args: argparse.Namespace, name: str, key: str) -> int:
    """A person's action `name` on task `key`, with the flag its rule's argument is given by
    (`--reason` or `--comment`), refused here when the rule requires it and it is blank."""
    rule = RULES[PERSON_ACTIONS[name]]
    given = {rule.argument: getattr(args, rule.argument)} if rule.argument else {}
    if rule.required and not any((text or "").strip() for text in given.values()):
        return _refuse(rule.blank_refusal(f"{name} {key}", f"--{rule.argument}"))
    who = person(args)

    async def run(h: Harness) -> int:
        answer = await h.tasks.update(who, UpdateTaskArgs(task_key=key, action=name, **given))
        assert isinstance(answer, UpdateTaskResult)  # only heartbeat answers otherwise
        await _done(h, who, answer, rule.done, args.json)
        return 0

    return with_harness(args, run, existing=True)

"""`mcp-harness msg send|list|ack`: messages from the command line. A person acts as `--agent` (default
the login name) with the operator role, so that what is addressed to `operators` is theirs too; run from
an agent's session (its shell), without `--agent`, the command acts as that session's agent, as the
hooks and the commit guard do (`common.caller`)."""

from __future__ import annotations

import argparse
import json

from mcp_harness.arguments import MessageArgs
from mcp_harness.cli.common import caller, with_harness
from mcp_harness.cli.output import clean, note, say
from mcp_harness.cli.tables import when
from mcp_harness.errors import InvalidArgument
from mcp_harness.service import Harness


def cmd_msg(args: argparse.Namespace) -> int:
    verb, who = args.msg_verb, caller(args)
    if verb == "send":

        async def send(h: Harness) -> int:
            sent = await h.messages.act(
                who,
                MessageArgs(
                    action="send",
                    to=args.to,
                    body=args.body,
                    subject=args.subject,
                    task_key=args.task,
                    reply_to=args.reply_to,
                ),
            )
            if args.json:
                print(json.dumps(sent.model_dump(mode="json")))
            else:
                say(f"sent {sent.id} to {args.to} as {who.agent}")
            if sent.warning:  # who may read it (the JSON answer carries it too)
                note(f"warning: {sent.warning}")
            return 0

        return with_harness(args, send, existing=True)
    if verb == "list":

        async def listing(h: Harness) -> int:
            got = await h.messages.read(who, unread_only=not args.all, limit=min(args.limit, 200))
            messages = got.messages or []
            if args.json:
                print(json.dumps(got.model_dump(mode="json"), indent=2))
                return 0
            if not messages:
                say(f"no {'' if args.all else 'unread '}messages for {who.agent}")
            for m in messages:
                about = f" [{m.task_key}]" if m.task_key else ""
                subject = f" {clean(m.subject, multiline=False)}:" if m.subject else ""
                mark = "" if m.read else "* "
                say(f"{mark}{m.id} {when(m.at)} {m.from_} -> {m.to}{about}{subject} {clean(m.body, multiline=False)}")
            if messages:
                say(f"{got.unread} unread; `msg ack ID...` when dealt with")
            return 0

        return with_harness(args, listing, existing=True)
    if verb == "ack":
        ids = args.ids

        async def ack(h: Harness) -> int:
            got = await h.messages.act(who, MessageArgs(action="ack", ids=ids))
            if args.json:
                print(json.dumps(got.model_dump(mode="json")))
            else:
                say(f"acknowledged {got.acked} of {len(ids)}")
            return 0

        return with_harness(args, ack, existing=True)
    raise InvalidArgument("use `msg send --to AGENT BODY`, `msg list [--all]` or `msg ack ID...`")

"""Messages between agents and people: send, read (reading does not acknowledge), acknowledge.

Addressing: `to: A` reaches A and every `A:<session>` until one of them
acknowledges it; `to: "A:<session>"` that session only; `*` every agent that reads within
`BROADCAST_DAYS` of the sending (one about no task: within `LOOSE_SECONDS`, a day), each acknowledging
for itself; `operators` the callers with the operator
role (the people). What a caller reads is what is addressed to it; workspaces never see each other's.
A message about a task stops reaching readers that have not acknowledged it once the task's status has
changed after it was sent (the rule's one home is the store's `live_messages` view)."""

from __future__ import annotations

import re

from mcp_harness.arguments import MessageArgs
from mcp_harness.base import Identity, ServiceBase, iso, new_id
from mcp_harness.config import MESSAGE_BODY_BYTES, NAME_PATTERN
from mcp_harness.errors import InvalidArgument, NotFound, TooLarge
from mcp_harness.identity import reserved_agent
from mcp_harness.messages import store
from mcp_harness.models import Inbox, Message, MessageResult, Unread
from mcp_harness.store import Connection
from mcp_harness.store.common import ensure_workspace, now
from mcp_harness.store.records import MessageRow, TaskRecord
from mcp_harness.tasks.rules import UNKNOWN, Status
from mcp_harness.tasks.store import tasks as task_store

MAX_BODY_BYTES = MESSAGE_BODY_BYTES
#: messages to one addressee that nobody has acknowledged yet (for `*`: sent within the window)
MAX_OPEN_PER_ADDRESSEE = 1000
BROADCAST_DAYS = 7
BROADCAST_SECONDS = BROADCAST_DAYS * 86400
#: a `*` message about no task reaches readers this long (nothing else tells when it is stale)
LOOSE_SECONDS = 86400
#: how many unread messages restore_state carries
BRIEF_MESSAGES = 5
#: sessions a send's warning names at most
WARN_SESSIONS = 3
EVERY_AGENT, OPERATORS = "*", store.OPERATORS
_NAME = re.compile(NAME_PATTERN)


def message(row: MessageRow) -> Message:
    return Message.model_validate(
        {
            "id": row.message_id,
            "from": row.sender,
            "to": row.recipient,
            "subject": row.subject,
            "body": row.body,
            "task_key": row.task_key,
            "reply_to": row.reply_to,
            "at": iso(row.created_at),
            "read": row.read,
        }
    )


def who(ident: Identity) -> dict[str, str]:
    return store.addressees(ident.agent, ident.role == "operator")


def since() -> float:
    return now() - BROADCAST_SECONDS


def windows() -> dict[str, float]:
    """Where the windows of `*` messages start: about a task (`since`) and about none (`day`)."""
    at = now()
    return {"since": at - BROADCAST_SECONDS, "day": at - LOOSE_SECONDS}


async def unread(conn: Connection, ident: Identity) -> int:
    """How many messages wait for the caller (one indexed count)."""
    return await store.count_unread(conn, ident.workspace, who(ident), **windows())


async def unread_count(conn: Connection, ident: Identity) -> Unread | None:
    """`{unread}` for claim and heartbeat answers, or None when nothing waits."""
    count = await unread(conn, ident)
    return Unread(unread=count) if count else None


async def inbox(conn: Connection, ident: Identity) -> Inbox | None:
    """The caller's unread count and the newest few unread messages, or None when nothing waits."""
    count = await unread(conn, ident)
    if count == 0:
        return None
    rows = await store.inbox(conn, ident.workspace, who(ident), **windows(), unread_only=True, limit=BRIEF_MESSAGES)
    return Inbox(unread=count, messages=[message(r) for r in rows])


async def addressee_warning(conn: Connection, ident: Identity, to: str, task: TaskRecord | None) -> str | None:
    """What a sender should know about `to` before it waits for an answer (None: nothing): a name never
    seen in the workspace (a typo, a session that never was), a name several sessions share (the first
    to acknowledge takes the message from the others), a task held by another session than `to` reaches.
    A few indexed reads; the messages are scanned only for a name no call and no task knows."""
    if to in (EVERY_AGENT, OPERATORS):
        return None
    ws, base = ident.workspace, to.split(":", 1)[0]
    # the task's holder when it is another session of the name `to` gives (not `to`, not the sender)
    owner = task.owner if task is not None and task.status == Status.CLAIMED else None
    mine = owner is None or owner in (to, ident.agent) or owner.split(":", 1)[0] != base
    holder = None if mine else owner
    if not await store.name_seen(conn, ws, to):
        sessions = await store.sessions_seen(conn, ws, base, WARN_SESSIONS) if to != base else []
        if not sessions:
            return (
                f"nobody named {to!r} has been seen in this workspace (no call, task or message of theirs): "
                'check the name; people read to="operators", every agent to="*"'
            )
        also = f"; task {task.key!r} is held by {holder}" if holder and task else ""
        return (
            f"no session {to!r} has been seen in this workspace, so nobody may ever read this; sessions of "
            f"{base} seen: {', '.join(sessions)}{also}"
        )
    if holder is not None and task is not None:
        if to == base:
            return (
                f"{to!r} reaches every session of {base} (the first to acknowledge takes it from the others); "
                f'task {task.key!r} is held by {holder}: send to="{holder}" to reach that session only'
            )
        return f'task {task.key!r} is held by {holder}, not {to}: send to="{holder}" to reach its holder'
    if to == base:
        sessions = await store.sessions_seen(conn, ws, base, WARN_SESSIONS + 1)
        if len(sessions) > 1:
            named = ", ".join(sessions[:WARN_SESSIONS]) + (", ..." if len(sessions) > WARN_SESSIONS else "")
            return (
                f"{to!r} reaches every session of {base} seen here ({named}): the first to acknowledge "
                f'takes it from the others; to reach one, send to its full name (to="{sessions[0]}")'
            )
    return None


class MessageService(ServiceBase):
    async def act(self, ident: Identity, args: MessageArgs) -> MessageResult:
        """The `message` tool: send, read or ack."""
        if args.action == "send":
            return await self.send(ident, args)
        if args.action == "read":
            return await self.read(ident, unread_only=args.unread_only, limit=args.limit)
        return await self.ack(ident, args)

    async def send(self, ident: Identity, args: MessageArgs) -> MessageResult:
        if ident.role == "reader":
            raise InvalidArgument("a reader may not send messages")  # the server refuses it earlier
        to, body = args.to, args.body
        if to is None:
            raise InvalidArgument("send needs `to`: an agent's name, * (every agent) or operators")
        if to not in (EVERY_AGENT, OPERATORS) and not _NAME.match(to):
            raise InvalidArgument(f"`to` must be an agent's name, * (every agent) or operators; got {to[:60]!r}")
        if to != OPERATORS and reserved_agent(to):
            raise InvalidArgument(
                f"no agent is named {to!r} (a reserved name: nobody reads what is sent to it); write to "
                "operators for the people, or to the agent that holds the task"
            )
        if body is None or not body.strip():
            raise InvalidArgument("send needs a `body` (the message's text)")
        size = len(body.encode("utf-8", "surrogatepass"))
        if size > MAX_BODY_BYTES:
            raise TooLarge(
                f"body is {size} bytes, over the limit of {MAX_BODY_BYTES}: send a summary and put the rest "
                "in a file or a progress entry"
            )
        for name in ("ids",):
            if getattr(args, name) is not None:
                raise InvalidArgument(f"`{name}` belongs to ack, not send")

        async def body_(conn: Connection) -> MessageResult:
            ws = ident.workspace
            task = await task_store.get(conn, ws, args.task_key) if args.task_key is not None else None
            if args.task_key is not None and task is None:
                raise NotFound(
                    f"no task with key {args.task_key!r} in this workspace{UNKNOWN} (omit task_key for none)"
                )
            if args.reply_to is not None and not await store.exists(conn, ws, args.reply_to):
                raise NotFound(f"no message with id {args.reply_to!r} in this workspace to reply to")
            window = since() if to == EVERY_AGENT else 0.0
            await store.lock_addressee(conn, ws, to)  # the count below and the insert: one step
            if await store.count_open_to(conn, ws, to, window) >= MAX_OPEN_PER_ADDRESSEE:
                raise TooLarge(
                    f"{to} already has {MAX_OPEN_PER_ADDRESSEE} messages nobody acknowledged: wait for "
                    "answers before sending more"
                )
            created, message_id = now(), new_id("msg")
            row = {
                "message_id": message_id,
                "workspace": ws,
                "sender": ident.agent,
                "recipient": to,
                "subject": args.subject,
                "body": body,
                "task_key": args.task_key,
                "reply_to": args.reply_to,
                "created_at": created,
            }
            warning = await addressee_warning(conn, ident, to, task)
            await ensure_workspace(conn, ws)  # a workspace holding only messages is listed (and exported)
            await store.insert(conn, row)
            return MessageResult(id=message_id, at=iso(created), warning=warning)

        return await self.exactly_once(ident, args, MessageResult, body_)

    async def read(self, ident: Identity, *, unread_only: bool = True, limit: int = 20) -> MessageResult:
        """What is addressed to the caller, newest first, and how many are unread. Acknowledges nothing."""
        if not 1 <= limit <= 200:
            raise InvalidArgument(f"limit must be 1 to 200, got {limit}")
        async with self.db.read() as conn:
            rows = await store.inbox(
                conn, ident.workspace, who(ident), **windows(), unread_only=unread_only, limit=limit
            )
            count = await unread(conn, ident)
        return MessageResult(messages=[message(r) for r in rows], unread=count)

    async def ack(self, ident: Identity, args: MessageArgs) -> MessageResult:
        ids = list(dict.fromkeys(args.ids or ()))
        if not ids:
            raise InvalidArgument("ack needs `ids`: the ids of the messages read")

        async def body_(conn: Connection) -> MessageResult:
            me, at, acked = who(ident), now(), 0
            for message_id in ids:
                if not await store.addressed(conn, ident.workspace, message_id, me):
                    raise NotFound(f"no message {message_id!r} addressed to you in this workspace")
                acked += await store.ack(conn, ident.workspace, message_id, me, at)
            return MessageResult(acked=acked)

        return await self.exactly_once(ident, args, MessageResult, body_)

    async def about_task(self, ident: Identity, task_key: str) -> list[Message]:
        """The messages naming a task, newest first (for its story)."""
        async with self.db.read() as conn:
            return [message(r) for r in await store.about_task(conn, ident.workspace, task_key)]

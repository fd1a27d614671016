"""Messages between agents and people: the inbox reads and the exactly-once acknowledgements."""

from __future__ import annotations

import hashlib
from typing import Any

from mcp_harness.store import named
from mcp_harness.store.connection import Connection
from mcp_harness.store.records import MessageRow

Q = named.load("messages")
OPERATORS = "operators"  #: the people's address: the callers with the operator role


def addressees(agent: str, operator: bool) -> dict[str, str]:
    """Who a caller is, as the inbox queries name it: itself, its agent without the session suffix,
    and `operators` for an operator ('' otherwise: it names nobody). The people's inbox goes by the role
    alone: a caller's own name never reaches it, even one that `operators` or `operators:x` would match."""
    base = agent.split(":", 1)[0]
    if base == OPERATORS:
        agent = base = ""
    return {"me": agent, "base": base, "ops": OPERATORS if operator else ""}


async def insert(conn: Connection, row: dict[str, Any]) -> None:
    await conn.execute(Q.insert_message, row)


async def exists(conn: Connection, workspace: str, message_id: str) -> bool:
    return await conn.fetch_value(Q.message_exists, {"ws": workspace, "id": message_id}) is not None


async def count_unread(conn: Connection, workspace: str, who: dict[str, str], since: float, day: float) -> int:
    """What still reaches the caller unread (`since`: the window of `*` messages about a task, `day`: of
    those about none)."""
    return int(await conn.fetch_value(Q.count_unread, {"ws": workspace, "since": since, "day": day, **who}))


async def count_unread_operators(conn: Connection, workspace: str) -> int:
    """What still reaches the operators unread (the console's count)."""
    return int(await conn.fetch_value(Q.count_unread_operators, {"ws": workspace}))


async def inbox(
    conn: Connection,
    workspace: str,
    who: dict[str, str],
    *,
    since: float,
    day: float,
    unread_only: bool,
    limit: int,
) -> list[MessageRow]:
    """What is addressed to the caller, newest first (unread only: what still reaches it, see `count_unread`)."""
    if unread_only:
        params = {"ws": workspace, "since": since, "day": day, "limit": limit, **who}
        return await conn.fetch_all(Q.unread_messages, params)
    return await conn.fetch_all(Q.all_messages, {"ws": workspace, "limit": limit, **who})


async def about_task(conn: Connection, workspace: str, task_key: str, limit: int = 200) -> list[MessageRow]:
    return await conn.fetch_all(Q.task_messages, {"ws": workspace, "task": task_key, "limit": limit})


async def addressed(conn: Connection, workspace: str, message_id: str, who: dict[str, str]) -> bool:
    return bool(await conn.fetch_value(Q.addressed, {"ws": workspace, "id": message_id, **who}))


async def ack(conn: Connection, workspace: str, message_id: str, who: dict[str, str], at: float) -> int:
    """Acknowledge one message for the caller: 1 when this call did it, 0 when it was already done. The
    statement itself decides (a row's update, or a key's insert), so of two concurrent acks one counts."""
    params = {"ws": workspace, "id": message_id, "at": at, **who}
    done = await conn.execute(Q.ack_direct, params)
    if done:
        return done
    return await conn.execute(Q.ack_broadcast, {"ws": workspace, "id": message_id, "at": at, "me": who["me"]})


async def lock_addressee(conn: Connection, workspace: str, recipient: str) -> None:
    """PostgreSQL: take turns with every other send to `recipient` until commit (see `count_open_to`)."""
    if conn.dialect == "postgresql":
        digest = hashlib.blake2b(f"mcp-harness messages {workspace}\0{recipient}".encode(), digest_size=8).digest()
        await conn.execute(Q.lock_addressee, {"id": int.from_bytes(digest, "big", signed=True)})


async def count_open_to(conn: Connection, workspace: str, recipient: str, since: float) -> int:
    """Messages to `recipient` nobody has acknowledged on the message's row (sent since `since`). A send
    that counts to decide whether it may insert takes `lock_addressee` first."""
    return int(await conn.fetch_value(Q.count_open_to, {"ws": workspace, "to": recipient, "since": since}))


async def name_seen(conn: Connection, workspace: str, name: str) -> bool:
    """Whether `name`, or a session of it (`name:...`), has made a call, held a task or sent a message here."""
    params = {"ws": workspace, "name": name, "prefix": name + ":", "n": len(name) + 1}
    return await conn.fetch_value(Q.name_seen, params) is not None


async def sessions_seen(conn: Connection, workspace: str, name: str, limit: int) -> list[str]:
    """The sessions of `name` (`name:...`) that have made a call here, the latest first."""
    params = {"ws": workspace, "prefix": name + ":", "n": len(name) + 1, "limit": limit}
    return [row[0] for row in await conn.fetch_all(Q.sessions_seen, params)]

"""A quick read-only look at the database for the per-prompt hook, which runs on every prompt and
must cost little more than starting Python: `sqlite3` (opened read-only, never creating a file or a
schema) or `asyncpg` directly, with none of SQLAlchemy, pydantic or the service.

The only SQL outside `store/`, and only reads: what happened to an agent's tasks since an event id
(the events that agent must know of), the newest event id (the mark a session starts from), whether
an agent holds a task at all (the writing hooks: `holds`), and the live exclusive path reservations
(the commit guard, `cli/guard.py`; the same rows as the store's `reservations.live`)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the transitions a session must hear of when another hand made them on a task it held
NEWS_KINDS = ("take_over", "revoke", "operator_release", "reject", "approve", "cancel", "reopen", "expire")
CONNECT_SECONDS = 3.0
#: how long one query may wait (a lock another connection holds, a server that stops answering): past
#: it the read fails as `Unreachable`, so a hook or the commit guard never hangs (SQLite waits as long
#: for a write lock, `CONNECT_SECONDS`)
QUERY_SECONDS = 3.0
LIMIT = 20

_NEWS = (
    "SELECT e.id, e.task_key, e.kind, e.actor, e.detail FROM task_events e "
    "WHERE e.id > ? AND e.workspace = ? AND e.kind IN ({kinds}) AND EXISTS ("
    "SELECT 1 FROM task_events c WHERE c.workspace = e.workspace AND c.task_key = e.task_key "
    "AND c.actor = ? AND c.kind IN ('claim', 'take_over') AND c.id < e.id) ORDER BY e.id LIMIT {limit}"
).format(kinds=", ".join(f"'{k}'" for k in NEWS_KINDS), limit=LIMIT)
_LAST = "SELECT COALESCE(MAX(id), 0) FROM task_events"
_RESERVED = (
    'SELECT t."key", t.owner, r.pattern, t.lease_expires_at FROM tasks AS t JOIN task_reservations AS r '
    "ON r.task_id = t.id AND r.lease_token = t.lease_token WHERE t.workspace = ? AND t.status = 'claimed' "
    "AND t.lease_expires_at > ? AND r.shared = FALSE ORDER BY t.lease_expires_at, r.pattern"
)
#: whether an agent holds a claimed task (the store's `held_by`, claimed only), and one whose lease runs
#: past a time (`_HOLDS_LIVE`)
_HOLDS = "SELECT 1 FROM tasks WHERE workspace = ? AND owner = ? AND status = 'claimed' LIMIT 1"
_HOLDS_LIVE = _HOLDS.replace(" LIMIT", " AND lease_expires_at > ? LIMIT")
#: whether a workspace has a task at all (`uq_task_key`'s prefix: one seek)
_ANY_TASK = "SELECT 1 FROM tasks WHERE workspace = ? LIMIT 1"
#: unread messages for an agent (its name, and its agent's without the session suffix; `*` within the
#: window, a day for one about no task) that came after a message id, from the messages that still reach
#: readers (`live_messages`: messages/message_views.sql; messages/messages.sql holds the same rule)
_MESSAGES = (
    "SELECT m.id, m.sender, m.recipient, m.subject, m.body, m.task_key, m.message_id FROM live_messages m "
    "WHERE m.workspace = ? AND m.id > ? AND m.acked_at IS NULL AND (m.recipient IN (?, ?) OR (m.recipient = '*' "
    "AND m.sender <> ? AND m.created_at >= ? AND (m.task_key IS NOT NULL OR m.created_at >= ?) "
    "AND NOT EXISTS (SELECT 1 FROM message_acks a "
    "WHERE a.workspace = m.workspace AND a.message_id = m.message_id AND a.agent = ?))) ORDER BY m.id LIMIT 5"
)
_LAST_MESSAGE = "SELECT COALESCE(MAX(id), 0) FROM messages"
BROADCAST_SECONDS = 7 * 86400  #: as messages/service.py
LOOSE_SECONDS = 86400  #: as messages/service.py: a `*` message about no task


@dataclass(frozen=True)
class News:
    id: int
    task_key: str
    kind: str
    actor: str
    detail: dict[str, Any]


@dataclass(frozen=True)
class Note:
    """An unread message."""

    id: int
    sender: str
    to: str
    subject: str | None
    body: str
    task_key: str | None
    message_id: str


class Unreachable(Exception):
    """The database could not be read (named in one line, without a password)."""


def sqlite_path(db: str | None) -> Path | None:
    """The SQLite file `db` names (None: the default database), or None for PostgreSQL."""
    if not db:
        base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        return Path(base) / "mcp-harness" / "harness.db"
    if "://" not in db:
        return Path(db).expanduser()
    scheme, rest = db.split("://", 1)
    if scheme.startswith("sqlite"):
        return Path(rest[1:].split("?", 1)[0]) if rest.startswith("/") else Path(rest.split("?", 1)[0])
    return None


def _postgres_dsn(db: str) -> str:
    return re.sub(r"^[a-z0-9+]+://", "postgresql://", db)


def read(db: str | None, workspace: str, agent: str, after: int | None) -> tuple[list[News], int]:
    """The news for `agent` since event `after` (none when `after` is None) and the newest event id.
    A SQLite file that does not exist yet has no news (nothing is created); one in a folder that does
    not exist is a mistake, said on stderr."""
    path = sqlite_path(db)
    if path is not None:
        return _read_sqlite(path, workspace, agent, after)
    import asyncio

    return asyncio.run(_read_postgres(_postgres_dsn(db or ""), workspace, agent, after))


def _read_sqlite(path: Path, workspace: str, agent: str, after: int | None) -> tuple[list[News], int]:
    import sqlite3

    if not path.exists():
        if not path.parent.is_dir():  # a misconfigured --db, not a project whose server has not run yet
            raise Unreachable(f"cannot read {path}: its folder does not exist")
        return [], 0
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=CONNECT_SECONDS)
        try:
            last = conn.execute(_LAST).fetchone()[0]
            rows = conn.execute(_NEWS, (after, workspace, agent)).fetchall() if after is not None else []
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise Unreachable(f"cannot read {path}: {exc}") from None
    return [_news(row) for row in rows], int(last)


async def _read_postgres(dsn: str, workspace: str, agent: str, after: int | None) -> tuple[list[News], int]:
    import asyncpg

    numbered = _NEWS.replace("?", "{}").format("$1", "$2", "$3")
    try:
        conn = await asyncpg.connect(dsn, timeout=CONNECT_SECONDS, command_timeout=QUERY_SECONDS)
        try:
            last = await conn.fetchval(_LAST)
            rows = await conn.fetch(numbered, after, workspace, agent) if after is not None else []
        finally:
            await conn.close()
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        raise Unreachable(f"cannot reach the PostgreSQL database: {type(exc).__name__}") from None
    return [_news(tuple(row)) for row in rows], int(last)


def read_messages(db: str | None, workspace: str, agent: str, after: int | None) -> tuple[list[Note], int]:
    """The unread messages for `agent` that came after message `after` (none when `after` is None, the
    newest 5 at most) and the newest message id. A database without messages (an older schema the
    server has not upgraded yet) has none."""
    import time

    at = time.time()
    params = (
        workspace,
        after or 0,
        agent,
        agent.split(":", 1)[0],
        agent,
        at - BROADCAST_SECONDS,
        at - LOOSE_SECONDS,
        agent,
    )
    path = sqlite_path(db)
    if path is not None:
        import sqlite3

        if not path.exists():
            return [], 0
        try:
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=CONNECT_SECONDS)
            try:
                last = conn.execute(_LAST_MESSAGE).fetchone()[0]
                rows = conn.execute(_MESSAGES, params).fetchall() if after is not None else []
            finally:
                conn.close()
        except sqlite3.Error as exc:
            if "no such table" in str(exc):
                return [], 0
            raise Unreachable(f"cannot read {path}: {exc}") from None
        return [Note(*row) for row in rows], int(last)
    import asyncio

    return asyncio.run(_messages_postgres(_postgres_dsn(db or ""), params, after is not None))


async def _messages_postgres(dsn: str, params: tuple[Any, ...], wanted: bool) -> tuple[list[Note], int]:
    import asyncpg

    numbered = _MESSAGES
    for i in range(1, len(params) + 1):
        numbered = numbered.replace("?", f"${i}", 1)
    try:
        conn = await asyncpg.connect(dsn, timeout=CONNECT_SECONDS, command_timeout=QUERY_SECONDS)
        try:
            last = await conn.fetchval(_LAST_MESSAGE)
            rows = await conn.fetch(numbered, *params) if wanted else []
        finally:
            await conn.close()
    except asyncpg.UndefinedTableError:
        return [], 0
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        raise Unreachable(f"cannot reach the PostgreSQL database: {type(exc).__name__}") from None
    return [Note(*tuple(row)) for row in rows], int(last)


def holds(db: str | None, workspace: str, agent: str, live_at: float | None = None) -> bool | None:
    """Whether `agent` holds a claimed task in `workspace` (with `live_at`: one whose lease runs past
    it), in a SQLite database; False where the file does not exist. None for PostgreSQL: not looked at
    here (the caller does what it would do for a holder). Raises `Unreachable` when the file cannot be read."""
    path = sqlite_path(db)
    if path is None:
        return None
    import sqlite3

    if not path.exists():
        return False
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=CONNECT_SECONDS)
        try:
            if live_at is None:
                row = conn.execute(_HOLDS, (workspace, agent)).fetchone()
            else:
                row = conn.execute(_HOLDS_LIVE, (workspace, agent, live_at)).fetchone()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise Unreachable(f"cannot read {path}: {exc}") from None
    return row is not None


def _news(row: tuple[Any, ...]) -> News:
    try:
        detail = json.loads(row[4]) if row[4] else {}
    except ValueError:
        detail = {}
    return News(int(row[0]), row[1], row[2], row[3], detail if isinstance(detail, dict) else {})


@dataclass(frozen=True)
class Reserved:
    """A live exclusive reservation: the holding task, its owner, the pattern and when the lease ends."""

    key: str
    owner: str
    pattern: str
    expires_at: float


class Unchecked(Exception):
    """Nothing could be reserved where the guard looked: the database file does not exist, or the
    workspace holds no task in it (a wrong `--db` or `--workspace` would let every commit through)."""


def reserved(db: str | None, workspace: str, at: float) -> list[Reserved]:
    """The live exclusive path reservations of `workspace` at `at` (none in a database that no version
    with reservations has opened). Raises `Unchecked` when the SQLite file does not exist or the
    workspace has no task there, `Unreachable` when the database cannot be read."""
    path = sqlite_path(db)
    if path is not None:
        import sqlite3

        if not path.exists():
            raise Unchecked(f"no database at {path}")
        try:
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=CONNECT_SECONDS)
            try:
                known = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'task_reservations'").fetchone()
                rows = conn.execute(_RESERVED, (workspace, at)).fetchall() if known else []
                tasks = rows or (known and conn.execute(_ANY_TASK, (workspace,)).fetchone())
            finally:
                conn.close()
        except sqlite3.Error as exc:
            raise Unreachable(f"cannot read {path}: {exc}") from None
        if not tasks:
            raise Unchecked(f"workspace {workspace!r} has no task in {path}")
        return [Reserved(r[0], r[1], r[2], float(r[3])) for r in rows]
    import asyncio

    return asyncio.run(_reserved_postgres(_postgres_dsn(db or ""), workspace, at))


async def _reserved_postgres(dsn: str, workspace: str, at: float) -> list[Reserved]:
    import asyncpg

    try:
        conn = await asyncpg.connect(dsn, timeout=CONNECT_SECONDS, command_timeout=QUERY_SECONDS)
        try:
            known = await conn.fetchval("SELECT to_regclass('task_reservations') IS NOT NULL")
            rows = (
                await conn.fetch(_RESERVED.replace("?", "$1", 1).replace("?", "$2", 1), workspace, at) if known else []
            )
            tasks = rows or (known and await conn.fetchval(_ANY_TASK.replace("?", "$1"), workspace))
        finally:
            await conn.close()
    except TimeoutError:
        raise Unreachable(
            f"the PostgreSQL database did not answer within {QUERY_SECONDS:g} s (another connection may hold a "
            "lock on the reservations)"
        ) from None
    except (OSError, asyncpg.PostgresError) as exc:
        raise Unreachable(f"cannot reach the PostgreSQL database: {type(exc).__name__}") from None
    if not tasks:
        raise Unchecked(f"workspace {workspace!r} has no task in this PostgreSQL database")
    return [Reserved(r[0], r[1], r[2], float(r[3])) for r in rows]

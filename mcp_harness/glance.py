"""A quick read-only look at the database for the per-prompt hook, which runs on every prompt and
must cost little more than starting Python: `sqlite3` (opened read-only, never creating a file or a
schema) or `asyncpg` directly, with none of SQLAlchemy, pydantic or the service.

The only SQL outside `store/`, and only reads: what happened to an agent's tasks since an event id
(the events that agent must know of), and the newest event id (the mark a session starts from)."""

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
LIMIT = 20

_NEWS = (
    "SELECT e.id, e.task_key, e.kind, e.actor, e.detail FROM task_events e "
    "WHERE e.id > ? AND e.workspace = ? AND e.kind IN ({kinds}) AND EXISTS ("
    "SELECT 1 FROM task_events c WHERE c.workspace = e.workspace AND c.task_key = e.task_key "
    "AND c.actor = ? AND c.kind IN ('claim', 'take_over') AND c.id < e.id) ORDER BY e.id LIMIT {limit}"
).format(kinds=", ".join(f"'{k}'" for k in NEWS_KINDS), limit=LIMIT)
_LAST = "SELECT COALESCE(MAX(id), 0) FROM task_events"


@dataclass(frozen=True)
class News:
    id: int
    task_key: str
    kind: str
    actor: str
    detail: dict[str, Any]


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
        conn = await asyncpg.connect(dsn, timeout=CONNECT_SECONDS)
        try:
            last = await conn.fetchval(_LAST)
            rows = await conn.fetch(numbered, after, workspace, agent) if after is not None else []
        finally:
            await conn.close()
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        raise Unreachable(f"cannot reach the PostgreSQL database: {type(exc).__name__}") from None
    return [_news(tuple(row)) for row in rows], int(last)


def _news(row: tuple[Any, ...]) -> News:
    try:
        detail = json.loads(row[4]) if row[4] else {}
    except ValueError:
        detail = {}
    return News(int(row[0]), row[1], row[2], row[3], detail if isinstance(detail, dict) else {})

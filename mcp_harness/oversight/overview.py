"""What a person supervising agents needs at a glance: threads, task counts, live and expired leases,
the largest checkpoints and the database size, as one stable JSON-able report."""

from __future__ import annotations

import json
from typing import Any

from mcp_harness.base import Identity, iso
from mcp_harness.checkpoints.store import checkpoints as checkpoint_store
from mcp_harness.progress import store as progress_store
from mcp_harness.store import Database
from mcp_harness.store.common import now
from mcp_harness.tasks.rules import Status
from mcp_harness.tasks.service import TaskService
from mcp_harness.tasks.store import tasks as task_store


async def workspace_status(db: Database, tasks: TaskService, ident: Identity) -> dict[str, Any]:
    """The report `mcp-harness status` prints (its JSON form is documented and stable)."""
    async with db.read() as conn:
        threads = await checkpoint_store.list_threads(conn, ident.workspace)
        checkpoints = await checkpoint_store.count_checkpoints(conn, ident.workspace)
        entries = await progress_store.count(conn, ident.workspace)
        last = await progress_store.recent(conn, ident.workspace, limit=200)
        largest = await checkpoint_store.largest(conn, ident.workspace)
    claimed, counts = await tasks.board(ident, statuses=[Status.CLAIMED])
    at = now()
    last_seen: dict[str, float] = {}
    for row in last:
        last_seen.setdefault(row.agent, row.created_at)
    leases = []
    for t in claimed:
        if t.lease is None:
            continue
        ended = (
            await ended_by(db, ident, t.key, t.owner, t.lease.attempt, t.lease.expires_at) if t.lease.expired else None
        )
        leases.append(
            {
                "task": t.key,
                "owner": t.owner,
                "attempt": t.lease.attempt,
                "expires_at": t.lease.expires_at,
                "expired": bool(t.lease.expired),
                "last_progress_at": iso(last_seen.get(t.owner or "")),
                "paths": t.held_paths or [],  #: path patterns its live lease holds exclusively
                "shared_paths": t.shared_paths or [],
                #: why it ended when its holder's connection or session ended it (else null: it ran out)
                "ended": ended,
            }
        )
    db_bytes = await db.size_bytes()
    return {
        "workspace": ident.workspace,
        "generated_at": iso(at),
        "threads": [
            {
                "thread": r.name,
                "latest_version": r.latest_version,
                "size_bytes": r.size_bytes,
                "updated_at": iso(r.updated_at),
            }
            for r in threads
        ],
        "checkpoints": checkpoints,
        "progress_entries": entries,
        "task_counts": counts.model_dump(),
        "live_leases": [lease for lease in leases if not lease["expired"]],
        "stuck": [lease for lease in leases if lease["expired"]],
        "largest_checkpoints": [
            {"thread": r.thread, "version": r.version, "size_bytes": r.size_bytes, "label": r.label} for r in largest
        ],
        "database_bytes": db_bytes,
    }


async def ended_by(
    db: Database, ident: Identity, key: str, owner: str | None, attempt: int, expires_at: str
) -> str | None:
    """Why a lease past its time ended, when a connection's (a session's) end ended it: its `lease_end`
    event, of this attempt and holder, at the time the lease then expired (a lease renewed since ran out)."""
    async with db.read() as conn:
        ev = await task_store.last_event(conn, ident.workspace, key, "lease_end")
    if ev is None or ev.actor != owner or ev.attempt != attempt or iso(ev.created_at) != expires_at or not ev.detail:
        return None
    reason = json.loads(ev.detail).get("reason")
    return str(reason) if reason else None

"""`mcp-harness status`: what a person supervising agents needs at a glance."""

from __future__ import annotations

from typing import Any

from .service import Harness, Identity
from .service.base import iso
from .store import checkpoints as checkpoint_store
from .store import progress as progress_store
from .store.common import now


async def collect_status(h: Harness, ident: Identity) -> dict[str, Any]:
    """A stable JSON-able report: threads, task counts, live and expired leases, database size."""
    async with h.db.read() as conn:
        threads = await checkpoint_store.list_threads(conn, ident.workspace)
        checkpoints = await checkpoint_store.count_checkpoints(conn, ident.workspace)
        entries = await progress_store.count(conn, ident.workspace)
        last = await progress_store.recent(conn, ident.workspace, limit=200)
        largest = await checkpoint_store.largest(conn, ident.workspace)
    tasks, counts = await h.tasks.board(ident, statuses=["claimed"])
    at = now()
    last_seen: dict[str, float] = {}
    for row in last:
        last_seen.setdefault(row["agent"], row["created_at"])
    leases = []
    for t in tasks:
        if t.lease is None:
            continue
        leases.append(
            {
                "task": t.key,
                "owner": t.owner,
                "attempt": t.lease.attempt,
                "expires_at": t.lease.expires_at,
                "expired": t.lease.expired,
                "last_progress_at": iso(last_seen.get(t.owner or "")),
            }
        )
    db_bytes = await h.db.size_bytes()
    return {
        "workspace": ident.workspace,
        "generated_at": iso(at),
        "threads": [
            {
                "thread": r["name"],
                "latest_version": r["latest_version"],
                "size_bytes": r["size_bytes"],
                "updated_at": iso(r["updated_at"]),
            }
            for r in threads
        ],
        "checkpoints": checkpoints,
        "progress_entries": entries,
        "task_counts": counts.model_dump(),
        "live_leases": [lease for lease in leases if not lease["expired"]],
        "stuck": [lease for lease in leases if lease["expired"]],
        "largest_checkpoints": [
            {"thread": r["thread"], "version": r["version"], "size_bytes": r["size_bytes"], "label": r["label"]}
            for r in largest
        ],
        "database_bytes": db_bytes,
    }

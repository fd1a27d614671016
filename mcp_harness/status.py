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
        last_seen.setdefault(row.agent, row.created_at)
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
                "expired": bool(t.lease.expired),
                "last_progress_at": iso(last_seen.get(t.owner or "")),
            }
        )
    db_bytes = await h.db.size_bytes()
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


def render_status(report: dict[str, Any]) -> str:
    lines = [f"workspace {report['workspace']}  ({report['generated_at'][:19].replace('T', ' ')} UTC)"]
    lines.append(f"database: {report['database_bytes'] / 1024:.1f} KiB")
    lines.append(f"checkpoints: {report['checkpoints']}   progress entries: {report['progress_entries']}")
    lines.append("threads:" if report["threads"] else "threads: none")
    for t in report["threads"]:
        lines.append(f"  {t['thread']:<30} v{t['latest_version']:<6} {t['size_bytes']:>9} B")
    c = report["task_counts"]
    lines.append(
        f"tasks: pending {c['pending']}  claimed {c['claimed']}  done {c['done']}  failed {c['failed']}  "
        f"blocked {c['blocked']}"
    )
    stuck_title = "STUCK (lease ran out without a heartbeat; not re-claimed yet):"
    for title, key in (("live leases:", "live_leases"), (stuck_title, "stuck")):
        if report[key]:
            lines.append(title)
            for lease in report[key]:
                lines.append(
                    f"  {lease['task']:<28} {lease['owner']:<16} attempt {lease['attempt']}  "
                    f"expires {lease['expires_at'][:19].replace('T', ' ')}"
                )
    if report["largest_checkpoints"]:
        lines.append("largest checkpoints:")
        for c in report["largest_checkpoints"]:
            lines.append(f"  {c['thread']:<30} v{c['version']:<6} {c['size_bytes']:>9} B")
    return "\n".join(lines)

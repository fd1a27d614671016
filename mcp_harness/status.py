"""`mcp-harness status`: the report `Harness.status` gathers, as text for a person; and `tasks show KEY`."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from .errors import InvalidArgument
from .service import Harness, Identity


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


async def show_task(h: Harness, ident: Identity, words: list[str], *, as_json: bool) -> int:
    """`tasks show KEY`: the task, its lease, its events and the progress entries about it."""
    if len(words) != 2 or words[0] != "show":
        raise InvalidArgument("use `tasks show KEY` (or `tasks` alone for the board)")
    story = await h.tasks.story(ident, words[1])
    if as_json:
        print(json.dumps(story.model_dump(mode="json", exclude={"task": {"lease": {"token"}}}), indent=2))
        return 0
    t = story.task
    print(f"{t.key}: {t.title}\n  status {t.status}, attempts {t.attempts}/{t.max_attempts}, owner {t.owner or '-'}")
    if t.lease:
        left = datetime.strptime(t.lease.expires_at, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC) - datetime.now(UTC)
        print(f"  lease: attempt {t.lease.attempt}, {int(left.total_seconds())}s left")
    for name in ("depends_on", "last_error", "verification", "result"):
        if getattr(t, name) not in (None, []):
            print(f"  {name}: {json.dumps(getattr(t, name), ensure_ascii=False)}")
    print("events:" if story.events else "events: none")
    for e in story.events:
        detail = f" {json.dumps(e.detail, ensure_ascii=False)}" if e.detail else ""
        print(f"  {e.created_at[:19].replace('T', ' ')} {e.kind} by {e.actor} (attempt {e.attempt}){detail}")
    print("progress:" if story.progress else "progress: none")
    for p in story.progress:
        print(f"  #{p.seq} {p.created_at[:19].replace('T', ' ')} {p.agent} {p.status.upper()}: {p.summary}")
    return 0

"""`mcp-harness status`: the report `Harness.status` gathers, as text for a person."""

from __future__ import annotations

from typing import Any


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

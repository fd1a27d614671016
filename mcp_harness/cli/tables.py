"""Tables for people: the task board, the progress log and the status report (`rich`)."""

from __future__ import annotations

import json
from collections.abc import Collection
from datetime import UTC, datetime
from typing import Any

from rich.text import Text

from mcp_harness.cli.output import clean, table
from mcp_harness.tasks.rules import LOOKS

#: a status's colour on a terminal: a task's (`tasks.rules.LOOKS`), and the progress statuses of its own
STATUS_STYLE = {**{status: look.style for status, look in LOOKS.items()}, "in_progress": "yellow", "note": ""}
#: progress entries written by the harness itself (a fail, a lease taken over, a reopen) carry this agent
HARNESS_AGENT = "harness"


def when(iso: str | None) -> str:
    """`2026-11-30T10:02:03Z` -> `2026-11-30 10:02:03` (UTC)."""
    return iso[:19].replace("T", " ") if iso else "-"


def time_left(expires_at: str | None, *, at: datetime | None = None, ended: bool = False) -> str:
    """`30s left`, `expired 6s ago`, or for a lease its holder's connection or session ended (which set
    its expiry to that moment; `status` lists it as ENDED) `ended 6s ago`."""
    if not expires_at:
        return ""
    left = datetime.fromisoformat(expires_at) - (at or datetime.now(UTC))
    seconds = int(left.total_seconds())
    if ended:
        return f"ended {max(-seconds, 0)}s ago"
    return f"{seconds}s left" if seconds >= 0 else f"expired {-seconds}s ago"


def counts_line(counts: dict[str, int]) -> str:
    return "  ".join(f"{name} {n}" for name, n in counts.items())


def styled(status: str, text: str | None = None) -> Text:
    return Text(text or status, style=STATUS_STYLE.get(status, ""))


def task_board(tasks: list[Any], ended: Collection[str] = ()) -> Any:
    """KEY STATUS OWNER LEASE PRI TRY KIND TITLE, one row per task (`TaskView`s); KIND says `gate` or
    `review` (completing it waits for a person); LEASE also shows a pending task's retry backoff, and
    says `ended` for the tasks in `ended` (their holder's connection or session ended their lease)."""
    t = table("KEY", "STATUS", "OWNER", "LEASE", "PRI", "TRY", "KIND", "TITLE", wide="TITLE")
    for task in tasks:
        lease = time_left(task.lease.expires_at, ended=task.key in ended) if task.lease else ""
        if not lease and task.available_at:  # pending, waiting out a backoff (`tasks retry KEY` ends it)
            lease = "retry in " + time_left(task.available_at).removesuffix(" left")
        kind = "gate" if task.kind == "gate" else "review" if task.review else ""
        t.add_row(
            task.key,
            styled(task.status),
            task.owner or "-",
            lease,
            str(task.priority),
            f"{task.attempts}/{task.max_attempts}",
            kind,
            task.title,
        )
    return t


def progress_log(entries: list[Any]) -> Any:
    """# TIME AGENT STATUS TASK THREAD ENTRY, newest first; the entry cell holds the summary, then its
    details, next steps and artifacts. The harness's own entries are set apart (dim, italic)."""
    t = table("#", "TIME (UTC)", "AGENT", "STATUS", "TASK", "THREAD", "ENTRY", wide="ENTRY", multiline=True)
    for e in entries:  # one line each but the details (multi-line text), so no line passes for another
        body = [clean(e.summary, multiline=False), *([clean(e.details)] if e.details else [])]
        body += [f"next: {clean(step, multiline=False)}" for step in e.next_steps or []]
        if e.artifacts:
            body.append(f"artifacts: {json.dumps(e.artifacts, ensure_ascii=False)}")
        by_harness = e.agent == HARNESS_AGENT
        t.add_row(
            str(e.seq),
            when(e.created_at),
            Text(e.agent, style="italic" if by_harness else "bold"),
            styled(e.status, e.status.upper()),
            e.task_key or "-",
            e.thread,
            "\n".join(body),
            style="dim" if by_harness else None,
        )
    return t


def status_report(report: dict[str, Any]) -> list[Any]:
    """The status report as lines and tables (see `Harness.status` for its fields)."""
    out: list[Any] = [
        Text(f"workspace {report['workspace']}  ({when(report['generated_at'])} UTC)", style="bold"),
        f"database: {report['database_bytes'] / 1024:.1f} KiB",
        f"checkpoints: {report['checkpoints']}   progress entries: {report['progress_entries']}",
    ]
    out.append("threads:" if report["threads"] else "threads: none")
    if report["threads"]:
        threads = table("THREAD", "VERSION", "SIZE", "UPDATED (UTC)")
        for r in report["threads"]:
            threads.add_row(r["thread"], f"v{r['latest_version']}", f"{r['size_bytes']} B", when(r["updated_at"]))
        out.append(threads)
    out.append("tasks: " + counts_line(report["task_counts"]))
    stuck = "STUCK (lease ran out without a heartbeat; not re-claimed yet):"
    ended = "ENDED (the holder's connection or session ended; not re-claimed yet, the next claim takes it):"
    groups = (
        ("live leases:", "", report["live_leases"], False),
        (stuck, "red", [lease for lease in report["stuck"] if not lease.get("ended")], False),
        (ended, "yellow", [lease for lease in report["stuck"] if lease.get("ended")], True),  # when and why
    )
    for title, style, group, why in groups:
        if group:
            out.append(Text(title, style=style))
            held = any(lease.get("paths") or lease.get("shared_paths") for lease in group)
            leases = table(
                "TASK",
                "OWNER",
                "ATTEMPT",
                "ENDED (UTC)" if why else "EXPIRES (UTC)",
                *(["WHY"] * why),
                "LAST PROGRESS (UTC)",
                *(["PATHS"] * held),
            )
            for lease in group:
                paths = [*lease.get("paths", []), *(f"{p} (shared)" for p in lease.get("shared_paths", []))]
                leases.add_row(
                    lease["task"],
                    lease["owner"] or "-",
                    str(lease["attempt"]),
                    when(lease["expires_at"]),
                    *([lease.get("ended") or ""] * why),
                    when(lease["last_progress_at"]),
                    *([", ".join(paths)] * held),
                )
            out.append(leases)
    for runner in report.get("runners", []):
        waits = f", {runner['waiting']}" if runner.get("waiting") else ""
        since = when(runner["started_at"])
        out.append(f"runner {runner['id']} on {runner['host']} (pid {runner['pid']}, since {since}){waits}")
    if report.get("running_sessions"):
        out.append("running sessions:")
        running = table("SESSION", "SLOT", "TASK", "AGENT", "STARTED (UTC)", "TURNS", "COST", "LAST TOOL")
        for r in report["running_sessions"]:
            cost = f"${r['cost_usd']:.4f}" if r.get("cost_usd") is not None else "unknown"
            turns = str(r["turns"]) if r.get("turns") is not None else "unknown"
            session = r["id"][:8] + (" (runner gone)" if r.get("runner_gone") else "")
            running.add_row(
                session,
                str(r["slot"]),
                r["task_key"] or r["kind"],
                r["agent"],
                when(r["started_at"]),
                turns,
                cost,
                r.get("last_tool") or "",
            )
        out.append(running)
    if report["largest_checkpoints"]:
        out.append("largest checkpoints:")
        largest = table("THREAD", "VERSION", "SIZE", "LABEL")
        for c in report["largest_checkpoints"]:
            largest.add_row(c["thread"], f"v{c['version']}", f"{c['size_bytes']} B", c["label"] or "")
        out.append(largest)
    return out

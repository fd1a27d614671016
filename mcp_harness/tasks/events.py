"""Task events: every transition of a task is kept with its actor and time, and the ones the next session
must know also become progress entries written by the harness (agent `harness`), one per affected task.

Each kind is one entry of `KINDS`: whether it reaches the log, how its entry reads, and how a superseded
lease's `lease_lost` message tells it. The kind an action records is named by its row of
`tasks.rules.RULES`: a new action's kind is a new entry here."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mcp_harness.base import Identity
from mcp_harness.jsonvalue import dumps
from mcp_harness.progress.service import append_entry
from mcp_harness.store import Connection
from mcp_harness.store.records import TaskEventRow
from mcp_harness.tasks.rules import ENDED_ON_LAST_ATTEMPT, Status, TaskChange
from mcp_harness.tasks.store import tasks as store
from mcp_harness.tasks.work_tree import Changes

HARNESS = "harness"  #: the agent name of the progress entries the harness writes itself

#: the kinds whose note carries a reason (a handoff's `context` keeps them first when it must choose)
WITH_REASON = frozenset({"release", "operator_release", "reopen", "reject", "cancel", "fail", "expire"})

#: (task key, actor, attempt, detail) -> one line for the progress log
Says = Callable[[str, str, int, dict[str, Any]], str]


@dataclass(frozen=True)
class EventKind:
    says: Says | None = None  #: set for the kinds that also become a progress entry
    ended: str = ""  #: how a lease that this event ended is described in `lease_lost`
    status: Callable[[dict[str, Any]], str] = lambda _detail: "note"  #: the progress entry's status


def followed_by(text: str, rest: str) -> str:
    """`text` (an agent's or a person's words) followed by the harness's `rest`: "; rest", or a new
    sentence after words that end one (not "CHANGELOG.md.; it is pending again")."""
    text = text.rstrip()
    if text.endswith((".", "?", "!")):
        return f"{text} {rest[:1].upper()}{rest[1:]}"
    return f"{text}; {rest}"


#: a note's text in a handoff's `context` is cut here: a reopen says what it replaces within it
NOTE_CHARS = 300
MIN_ROOM = 60  #: what a reopen's note gives the result and verification it replaces, at least


def _within(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: max(chars - 1, 0)] + "…"


def _reopened(key: str, actor: str, attempt: int, d: dict[str, Any]) -> str:
    """A reopen's note; of a done task it says the result and verification it replaces (the reopen
    clears them), cut so the whole text fits `NOTE_CHARS` where the reason leaves room."""
    head = f"{actor} reopened task {key}: "
    if d.get("status") != Status.DONE or (d.get("result") is None and d.get("verification") is None):
        return head + d["reason"]
    result = dumps(json.loads(d["result"])) if d.get("result") is not None else None
    verification = d.get("verification")
    parts = [("with result ", result), ("verification ", verification)]
    labels = " / ".join(label for label, value in parts if value is not None)
    # a long reason leaves no room: a short start still follows it, past the handoff's cut (list_tasks
    # (task_key=K) shows notes whole), within what an import allows around a person's text
    room = max(NOTE_CHARS - len(head + followed_by(d["reason"], f"it was done {labels}")), MIN_ROOM)
    r, v = result or "", verification or ""
    v_room = min(len(v), max(room // 2, room - len(r)))
    said = [
        f"with result {_within(r, room - v_room)}" if result is not None else None,
        f"verification {_within(v, v_room)}" if verification is not None else None,
    ]
    return head + followed_by(d["reason"], "it was done " + " / ".join(x for x in said if x))


def _failed(key: str, actor: str, attempt: int, d: dict[str, Any]) -> str:
    after = f"will be retried in {d['retry_in']:g}s" if d.get("retry_in") is not None else "no attempts left: failed"
    return f"task {key} failed on attempt {attempt} ({actor}): " + followed_by(
        d.get("error") or "no error given", after
    )


def _left(detail: dict[str, Any]) -> str:
    """What a lease that ended without `complete` left uncommitted, as `git status` showed it to the
    process that ended it (`work_tree`); nothing when that process runs in no repository."""
    left = detail.get("uncommitted")
    if not isinstance(left, dict):
        return ""
    files = list(left.get("files") or [])
    if not files:
        where = " under its paths" if left.get("under_paths") else ""
        return f"; git status in {left.get('in')}: nothing uncommitted{where}"
    more = f" (+{left['more']} more)" if left.get("more") else ""
    where = " under its paths" if left.get("under_paths") else ""
    return f"; uncommitted{where} in {left.get('in')}: " + ", ".join(files) + more


def left_behind(changes: Changes | None, paths: str | None) -> dict[str, Any]:
    """The event detail naming what a task's ended lease left uncommitted (`paths`: the task's, as stored)."""
    return {} if changes is None else {"uncommitted": changes.event_detail(json.loads(paths) if paths else None)}


KINDS: dict[str, EventKind] = {
    "claim": EventKind(ended="it was claimed again by agent {actor!r} (attempt {attempt})"),
    "take_over": EventKind(
        says=lambda k, a, n, d: (
            f"{a} took over task {k} (attempt {n}): the lease of {d['previous_owner']} "
            + (f"ended: {d['ended']}" if d.get("ended") else "expired")
            + _left(d)
        ),  # `ended`: why, when a connection's end did it
        ended="the lease {lapsed} and agent {actor!r} took the task over (attempt {attempt})",
    ),
    "complete": EventKind(ended="it was completed by agent {actor!r}"),
    "fail": EventKind(
        says=_failed,
        ended="it was failed by agent {actor!r}",
        status=lambda d: "note" if d.get("retry_in") is not None else "blocked",
    ),
    "expire": EventKind(
        says=lambda k, a, n, d: (
            f"task {k} failed: the lease of {a} "
            + (
                f"ended on its last attempt ({n}): {d['ended']}"
                if d.get("ended")
                else f"expired on its last attempt ({n})"
            )
        ),  # `ended`: why, when a connection's end did it
        ended="the lease {how} and the task failed",
        status=lambda _d: "blocked",
    ),
    "release": EventKind(
        says=lambda k, a, n, d: f"{a} released task {k}" + (f": {d['reason']}" if d.get("reason") else ""),
        ended="it was released by agent {actor!r}",
    ),
    #: a session's (a connection's) end ended the lease as if it expired then (`tasks/end.py`)
    "lease_end": EventKind(
        says=lambda k, a, n, d: (
            f"the lease of {a} on task {k} ended: "
            + followed_by(
                d["reason"], "it was the last attempt" if d.get("last") else "the next claim takes it at once"
            )
            + _left(d)
        ),
    ),
    "revoke": EventKind(
        says=lambda k, a, n, d: (
            f"the lease of {d['owner']} on task {k} was revoked: its dependency {d['dependency']} was reopened by {a}"
        ),
        ended="it was revoked because a dependency was reopened ({dependency!r}, by agent {actor!r})",
    ),
    "reopen": EventKind(
        says=_reopened,
        ended="it was reopened by agent {actor!r} ({reason})",
    ),
    # review: a completed review task, or a gate whose dependencies are done, waits for a person
    "submit": EventKind(ended="it was completed and submitted for review by agent {actor!r}"),
    "approve": EventKind(says=lambda k, a, n, d: f"{a} approved task {k}" + _comment(d)),
    "reject": EventKind(
        says=lambda k, a, n, d: (
            f"{a} rejected task {k}: "
            + followed_by(
                d["comment"], "the gate failed" if d.get("gate") else "it is pending again for its next claimer"
            )
        ),
        status=lambda d: "blocked" if d.get("gate") else "note",
    ),
    "returned": EventKind(),  #: left review (back to pending): a dependency was reopened
    # operator powers
    "cancel": EventKind(
        says=lambda k, a, n, d: f"{a} cancelled task {k}: {d['reason']}",
        ended="it was cancelled by {actor!r} ({reason})",
    ),
    "operator_release": EventKind(
        says=lambda k, a, n, d: (
            f"operator {a} released task {k} (held by {d['owner']})"
            + (": " + followed_by(d["reason"], "it is pending again") if d.get("reason") else "; it is pending again")
        ),
        ended="an operator ({actor!r}) released it{because}",
    ),
    "retry_now": EventKind(),
    # path reservations: the holder reserved or dropped paths under its lease
    "reserve": EventKind(),
    "unreserve": EventKind(),
}


def _comment(detail: dict[str, Any]) -> str:
    return f": {detail['comment']}" if detail.get("comment") else ""


def fingerprint(token: str) -> str:
    """What the events keep of a lease token: enough to recognise it, nothing to use it with."""
    return hashlib.sha256(token.encode()).hexdigest()[:16]


def detail_text(detail: dict[str, Any] | None) -> str | None:
    return json.dumps(detail, separators=(",", ":"), ensure_ascii=False) if detail else None


def event(kind: str, actor: str, detail: dict[str, Any] | None = None) -> store.Event:
    if kind not in KINDS:
        raise ValueError(f"unknown task event kind {kind!r}")
    return store.Event(kind, actor, detail_text(detail))


async def logged(
    conn: Connection, workspace: str, key: str, attempt: int, ev: store.Event, at: float, *, recorded: bool = False
) -> None:
    """Record `ev` (unless the store `recorded` it with its change already) and, for the kinds the next
    session must know, the harness's progress entry about it."""
    if not recorded:
        await store.record_event(conn, workspace, key, attempt, ev, at)
    kind = KINDS[ev.kind]
    if kind.says is not None:
        detail = json.loads(ev.detail) if ev.detail else {}
        summary = kind.says(key, ev.actor, attempt, detail)
        await append_entry(
            conn,
            Identity(workspace, HARNESS, own=True),
            summary=summary,
            status=kind.status(detail),
            task_key=key,
            at=at,
        )


def how_it_ended(row: TaskEventRow, ended: str | None = None) -> str:
    """The `lease_lost` phrase for the event that ended a lease; `ended`: why it ended before a claim took
    it over (a connection's end, a process gone), when it did not simply run out."""
    detail = json.loads(row.detail) if row.detail else {}
    said = {
        "lapsed": f"ended ({ended})" if ended else "expired",
        "because": f" ({detail['reason']})" if detail.get("reason") else "",
        "how": f"ended on the last attempt, as {detail['ended']},"
        if detail.get("ended")
        else "expired on the last attempt",
    }
    return KINDS[row.kind].ended.format(actor=row.actor, attempt=row.attempt, **(said | detail))


def lease_history(rows: list[TaskEventRow], token: str) -> str | None:
    """What ended the lease `token` held, from the task's events: None if it never held the task."""
    mark = fingerprint(token)
    for i, row in enumerate(rows):
        if row.kind in ("claim", "take_over") and row.detail and json.loads(row.detail).get("lease") == mark:
            later = [r for r in rows[i + 1 :] if KINDS[r.kind].ended]
            if not later:
                return ""
            ends = [r.detail for r in rows[i + 1 : rows.index(later[0])] if r.kind == "lease_end" and r.detail]
            why = json.loads(ends[-1]).get("reason") if ends else None
            return how_it_ended(later[0], why)
    return None


async def fail_exhausted(conn: Connection, workspace: str, at: float, ended: dict[str, str] | None = None) -> None:
    """Fail the tasks whose lease ran out on their last attempt (each with its `expire` event) and
    settle what depends on them. `ended`: task key -> why its lease ended at `at` (a connection's end):
    its `last_error` and note say that rather than an expiry."""
    failed = []
    for key, why in (ended or {}).items():
        change = TaskChange(
            status=Status.FAILED,
            ready=False,
            lease_token=None,
            last_error=f"{ENDED_ON_LAST_ATTEMPT}: {why}",
            updated_at=at,
        )
        row = await store.update_where_status(conn, workspace, key, frozenset({Status.CLAIMED}), change)
        if row is not None:
            failed.append(row)
            await logged(conn, workspace, key, row.attempts, event("expire", row.owner or "?", {"ended": why}), at)
    expired = await store.fail_expired_exhausted(conn, workspace, at)
    for dead in expired:
        await logged(conn, workspace, dead.key, dead.attempts, event("expire", dead.owner or "?"), at)
    if failed or expired:
        await store.propagate(conn, workspace, [dead.key for dead in failed + expired], at)

"""A handoff's `context`: what the next holder of a task must know, read with the task it goes with.

`task_context(conn, workspace, row)` answers the task's newest notes (the harness's, paired with the
task event each one tells, agents' progress entries about the task with their next steps, and the
messages that name it: a person's answer to the previous holder reaches the next one), the status, result
and verification of what it depends on, directly or through others (nearest first), and, for a reopened
task, the result it had before the reopen; within `MAX_BYTES` of compact JSON; `full=True` answers it
whole (the result and texts uncut, no byte bound: one task read on purpose). It costs a few bounded
queries whatever the history: the newest `CANDIDATES` progress entries and messages about the task and its
newest events by index, and one read of its dependencies (one recursive statement, `DEPTH` steps and
`FARTHER` tasks beyond the direct ones at most; plus one event read per cancelled direct dependency, for
its reason, and per approved gate or review task among them, for the person's comment; a rejected one
carries its comment in its row)."""

from __future__ import annotations

import json
from typing import Any

from mcp_harness.base import iso
from mcp_harness.jsonvalue import dumps
from mcp_harness.messages import store as message_store
from mcp_harness.models import ContextDependency, ContextNote, TaskContext
from mcp_harness.progress import store as progress_store
from mcp_harness.store import Connection
from mcp_harness.store.records import MessageRow, ProgressRow, ReachedDependency, TaskEventRow, TaskRecord
from mcp_harness.tasks.events import HARNESS, KINDS, WITH_REASON
from mcp_harness.tasks.rules import Status, shown
from mcp_harness.tasks.store import tasks as store

NOTES = 5  #: notes at most, newest first
#: candidates read from each source (progress entries, messages) to choose the `NOTES` shown from: a
#: reason or a person's message older than a run of connection-end and take-over notes is still chosen
CANDIDATES = 20
TEXT_CHARS = 300  #: a note's text, a dependency's result (compact JSON) and verification are cut here
MAX_BYTES = 2000  #: the context's compact JSON (UTF-8) at most
CUT = "…"
DEPTH = 8  #: dependency steps followed from the task
FARTHER = 20  #: dependencies read beyond the direct ones at most (the nearest)
#: how far results and verifications are cut, in turn, when the notes alone do not bring it within bound;
#: the dependencies beyond the direct ones are left out (counted), farthest first, after the first two
_SHORTER = (150, 80, 40, 0)
_FARTHER_GO_AFTER = 2
#: a note's weight when the bound forces a choice: reasons (and messages: a question and its answer are
#: said on purpose, as a reason is) first, then agents' entries, then the rest
_REASON, _AGENT, _OTHER = 2, 1, 0


def _cut(text: str, chars: int | None) -> tuple[str, bool]:
    if chars is None or len(text) <= chars:
        return text, False
    return text[:chars] + CUT, True


def _note_text(row: ProgressRow) -> str:
    text = " ".join(row.summary.split())
    if row.details and row.agent != HARNESS:
        text += " | " + " ".join(row.details.split())
    return text


def _next_text(row: ProgressRow) -> str | None:
    """An entry's next steps, as one line (None when it has none)."""
    if not row.next_steps:
        return None
    steps = [" ".join(str(step).split()) for step in json.loads(row.next_steps)]
    return "; ".join(step for step in steps if step) or None


def _message_text(row: MessageRow) -> str:
    text = " ".join(row.body.split())
    return " ".join(row.subject.split()) + " | " + text if row.subject else text


def _chosen(out: list[tuple[float, int, ContextNote]]) -> list[tuple[int, ContextNote]]:
    """At most `NOTES` of the candidates, by weight (reasons and messages, then agents' entries, then the
    harness's other notes), newest first within a weight; answered newest first."""
    out.sort(key=lambda n: n[0], reverse=True)  # newest first (stable: each source is already)
    kept = sorted(range(len(out)), key=lambda i: -out[i][1])[:NOTES]  # stable: newest first per weight
    return [(out[i][1], out[i][2]) for i in sorted(kept)]


class _Read:
    """What reading the notes found on the way: the task's newest events (None: not read), and whether
    its newest entries filled `CANDIDATES` (older ones were not read)."""

    def __init__(self) -> None:
        self.events: list[TaskEventRow] | None = None
        self.full = False


async def _notes(conn: Connection, workspace: str, key: str, read: _Read) -> list[tuple[int, ContextNote]]:
    """The notes about the task shown with their weight, newest first: progress entries and messages
    naming it, chosen from the newest `CANDIDATES` of each (`_chosen`). A harness entry about a task
    event is dated as the event: that pairs it with its event, which names who caused it."""
    entries = await progress_store.recent(conn, workspace, task_key=key, limit=CANDIDATES)
    read.full = len(entries) >= CANDIDATES
    messages = await message_store.about_task(conn, workspace, key, limit=CANDIDATES)
    out = [
        (
            m.created_at,
            _REASON,
            ContextNote(message=m.message_id, at=iso(m.created_at), by=m.sender, text=_message_text(m)),
        )
        for m in messages
    ]
    if not entries:
        return _chosen(out)
    # (time, text) -> its event; time alone where the text cannot be told again
    events: dict[tuple[float, str | None], TaskEventRow] = {}
    if any(e.agent == HARNESS for e in entries):
        read.events = await store.recent_events(conn, workspace, key, 4 * CANDIDATES)
        for row in read.events:
            says = KINDS[row.kind].says
            if says is not None:
                try:
                    text: str | None = says(key, row.actor, row.attempt, json.loads(row.detail or "{}"))
                except (KeyError, ValueError, TypeError):
                    text = None
                events.setdefault((row.created_at, text), row)
                events.setdefault((row.created_at, None), row)
    for entry in entries:
        by, weight = entry.agent, _AGENT
        if entry.agent == HARNESS:
            ev = events.get((entry.created_at, entry.summary)) or events.get((entry.created_at, None))
            by, weight = (ev.actor, _REASON if ev.kind in WITH_REASON else _OTHER) if ev else (HARNESS, _OTHER)
        note = ContextNote(
            seq=entry.seq, at=iso(entry.created_at), by=by, text=_note_text(entry), next=_next_text(entry)
        )
        out.append((entry.created_at, weight, note))
    return _chosen(out)


def _result_of(raw: str | None, chars: int | None) -> tuple[Any, bool]:
    """The result as its JSON value while its compact JSON fits `chars`, else its start as a string, cut."""
    if raw is None:
        return None, False
    text = dumps(json.loads(raw))
    if chars is None or len(text) <= chars:
        return json.loads(raw), False
    return _cut(text, chars)


async def _previous_result(conn: Connection, workspace: str, row: TaskRecord, read: _Read) -> str | None:
    """A reopened task's result before its newest reopen (JSON text), while it is not done again: found
    among the task's newest events, which the notes read when a harness entry is among the newest entries
    (a reopen writes one); read here only when older entries went unread. Bounded: a reopen older than
    those events is not looked for."""
    if row.status == Status.DONE:
        return None
    events = read.events
    if events is None and read.full:
        events = await store.recent_events(conn, workspace, row.key, 4 * CANDIDATES)
    reopen = next((e for e in events or [] if e.kind == "reopen"), None)  # newest first
    if reopen is None or not reopen.detail:
        return None
    result = json.loads(reopen.detail).get("result")
    return result if isinstance(result, str) else None


def _dependency(
    row: ReachedDependency, reason: str | None, comment: str | None, chars: int | None
) -> ContextDependency:
    result, cut_result = _result_of(row.result, chars)
    verification, cut_verification = _cut(row.verification, chars) if row.verification is not None else (None, False)
    comment, cut_comment = _cut(comment, chars) if comment is not None else (None, False)
    return ContextDependency(
        key=row.key,
        status=shown(row.status, row.blocked),
        result=result,
        verification=verification,
        cut=cut_result or cut_verification or cut_comment or None,
        reason=reason,
        comment=comment,
    )


async def _approval_comments(conn: Connection, workspace: str, deps: list[ReachedDependency]) -> dict[str, str]:
    """The comment a person gave approving each done gate or review task among `deps` (its newest
    `approve` event: a task reopened and approved again says the newer word)."""
    comments = {}
    for dep in deps:
        if dep.status == Status.DONE and (dep.review or dep.kind == "gate"):
            ev = await store.last_event(conn, workspace, dep.key, "approve")
            comment = json.loads(ev.detail).get("comment") if ev is not None and ev.detail else None
            if comment:
                comments[dep.key] = comment
    return comments


def _size(context: TaskContext) -> int:
    return len(dumps(context.model_dump(mode="json")).encode())


async def task_context(conn: Connection, workspace: str, row: TaskRecord, *, full: bool = False) -> TaskContext | None:
    """`row`'s handoff context inside the caller's transaction; None when there is nothing to say.
    Within `MAX_BYTES` unless `full`: the lightest and oldest notes go first, then results and
    verifications are cut shorter (the dependencies beyond the direct ones leaving, farthest first, on
    the way), then note texts; direct dependencies are left out (counted) last."""
    read = _Read()
    notes = await _notes(conn, workspace, row.key, read)
    keys = json.loads(row.depends_on)
    position = {key: i for i, key in enumerate(keys)}
    reached = (
        await store.dependency_closure(conn, workspace, row.key, depth=DEPTH, limit=len(keys) + FARTHER) if keys else []
    )
    # nearest first: the direct ones in the order the task names them, the others oldest first
    present = sorted(reached, key=lambda d: (d.depth, position.get(d.key, 0), d.id))
    direct = [d for d in present if d.depth == 1]
    reasons: dict[str, str | None] = {}
    for dep in direct:
        if dep.status == Status.CANCELLED:
            ev = await store.last_event(conn, workspace, dep.key, "cancel")
            reasons[dep.key] = json.loads(ev.detail).get("reason") if ev is not None and ev.detail else None
    comments = await _approval_comments(conn, workspace, direct)
    for dep in present:  # a rejected gate or review says the person's comment (as a claim's `waiting_on`)
        if dep.review_comment and dep.status in (Status.PENDING, Status.FAILED):
            comments[dep.key] = dep.review_comment
    previous = await _previous_result(conn, workspace, row, read)
    if not notes and not present and previous is None:
        return None
    chars = None if full else TEXT_CHARS

    def build(
        kept: list[tuple[int, ContextNote]], chars: int | None, text_chars: int | None, n_deps: int
    ) -> TaskContext:
        shown = []
        for _weight, note in kept:
            text, _ = _cut(note.text, text_chars)
            after = _cut(note.next, text_chars)[0] if note.next else None
            shown.append(note.model_copy(update={"text": text, "next": after or None}))
        dependencies = [_dependency(d, reasons.get(d.key), comments.get(d.key), chars) for d in present[:n_deps]]
        return TaskContext(
            notes=shown or None,
            dependencies=dependencies or None,
            more_dependencies=(len(present) - n_deps) or None,
            previous_result=_result_of(previous, chars)[0],
        )

    context = build(notes, chars, chars, len(present))
    if full or _size(context) <= MAX_BYTES:
        return context
    kept = list(notes)
    # the oldest notes go first, the ones without a reason before those with one; one note stays
    while len(kept) > 1 and _size(context) > MAX_BYTES:
        drop = min(range(len(kept)), key=lambda i: (kept[i][0], -i))
        kept.pop(drop)
        context = build(kept, TEXT_CHARS, TEXT_CHARS, len(present))
    n = len(present)
    for step, shorter in enumerate(_SHORTER):  # then results and verifications are cut shorter
        if _size(context) <= MAX_BYTES:
            return context
        if step == _FARTHER_GO_AFTER:  # the farther dependencies leave, farthest first, before the near are cut
            while n > len(direct) and _size(context) > MAX_BYTES:
                n -= 1
                context = build(kept, _SHORTER[step - 1], TEXT_CHARS, n)
            if _size(context) <= MAX_BYTES:
                return context
        context = build(kept, shorter, TEXT_CHARS, n)
    for text_chars in (150, 60):  # then the last note's text
        if _size(context) <= MAX_BYTES:
            return context
        context = build(kept, 0, text_chars, n)
    if _size(context) > MAX_BYTES:
        kept = []
        context = build(kept, 0, 0, n)
    while n > 0 and _size(context) > MAX_BYTES:  # many dependencies with long keys: the rest are counted
        n -= 1
        context = build(kept, 0, 0, n)
    return context

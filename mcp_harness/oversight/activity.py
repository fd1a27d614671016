"""Who did what: the timeline of progress entries with the task events beside them, and the agents (their
last contact, what they hold, what their last claim answered, and the leases whose holders went quiet)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mcp_harness.base import Identity, ServiceBase, iso
from mcp_harness.config import check_int, check_name
from mcp_harness.errors import InvalidArgument
from mcp_harness.models import PROGRESS_STATUSES, ProgressEntry, TaskEvent
from mcp_harness.oversight.store import reads as store
from mcp_harness.oversight.tasks import AGENTS_SHOWN, EVENTS_PAGE, HELD_SHOWN, Card, held_card, silent_holders
from mcp_harness.progress.service import progress_entry
from mcp_harness.search.service import reading, search_terms
from mcp_harness.store.common import now
from mcp_harness.tasks.events import HARNESS, KINDS
from mcp_harness.tasks.store import reservations
from mcp_harness.tasks.views import task_event

FILTER_EVENTS = 1000  #: task events whose actors the agent filter offers (the newest; contacts add the rest)


@dataclass(frozen=True)
class TimelineEvent:
    """A task's transition, shown beside the progress entries."""

    task_key: str
    event: TaskEvent


@dataclass(frozen=True)
class Timeline:
    entries: list[ProgressEntry]
    next_before_seq: int | None
    events: list[TimelineEvent] = field(default_factory=list)  #: in the entries' time span, newest first


@dataclass(frozen=True)
class AgentRow:
    agent: str
    last_seen: str | None  #: its last contact: any call, or else the last thing it wrote
    holds: list[Card] = field(default_factory=list)
    last_tool: str | None = None  #: the tool of its last recorded call
    #: what its last claim answered (`claimed`, or why nothing), or what it then did with the task (`completed:K`)
    claim_outcome: str | None = None
    claim_at: str | None = None
    silent: bool = False  #: it holds a lease and has made no call for `silent_after` seconds
    overdue: bool = False  #: it holds a lease past its time and has made no call since the lease ran out

    @property
    def state(self) -> str:
        """`overdue` (its lease ran out and it made no call since), `silent`, `working` (holds a task), or
        `idle`."""
        return "overdue" if self.overdue else "silent" if self.silent else "working" if self.holds else "idle"

    @property
    def let_go(self) -> tuple[str, str] | None:
        """(`completed`, `released` or `failed`, the task's key) when its last word was that about the
        task it held (`contacts.LET_GO`): what it did before it went idle."""
        verb, _, key = (self.claim_outcome or "").partition(":")
        return (verb, key) if key else None


@dataclass(frozen=True)
class Agents:
    agents: list[AgentRow]
    overdue: list[Card]  #: leases past their time that nobody has taken over yet
    silent: list[Card] = field(default_factory=list)  #: leases still running whose holder went quiet
    silent_after: float | None = None  #: seconds without a call that make a holder silent (None: half its lease)


class ActivityReads(ServiceBase):
    """The timeline and the agents (a part of `ConsoleService`)."""

    async def timeline(
        self,
        ident: Identity,
        *,
        agent: str | None = None,
        task_key: str | None = None,
        thread: str | None = None,
        status: str | None = None,
        text: str | None = None,
        before_seq: int | None = None,
        limit: int = 50,
        with_events: bool = False,
        kind: str | None = None,
    ) -> Timeline:
        """Progress entries newest first, filtered by agent, task, thread and status, and by a full-text
        query on the summary or details; a page of `limit`, then `next_before_seq` for the next. With
        `with_events`, the task events of the page's time span beside them: of one `kind` if given, and
        those whose text (error, reason, comment) has every word of `text` when it is given."""
        if kind is not None and kind not in KINDS:
            raise InvalidArgument(f"kind must be one of {', '.join(sorted(KINDS))}, got {kind!r}")
        for field_name, name in (("agent", agent), ("task_key", task_key), ("thread", thread)):
            if name is not None:
                check_name(field_name, name)
        if status is not None and status not in PROGRESS_STATUSES:
            raise InvalidArgument(f"status must be one of {', '.join(PROGRESS_STATUSES)}, got {status!r}")
        if text is not None and len(text) > 200:
            raise InvalidArgument("search text must be at most 200 characters")
        terms = search_terms(text) if text else None
        check_int("limit", limit, 1, 500)
        async with reading(self.db, terms) as conn:
            rows = await store.timeline(
                conn,
                ident.workspace,
                agent=agent,
                task_key=task_key,
                thread=thread,
                status=status,
                text=terms,
                before_seq=before_seq,
                limit=limit + 1,
            )
            events = []
            if with_events and thread is None and status is None:
                shown = rows[:limit]
                # the span of this page: up to its newest entry (or now, on the first page), back to its
                # oldest entry when more entries follow (else to the beginning)
                until = float(shown[0].created_at) if shown and before_seq is not None else now()
                since = float(shown[-1].created_at) if shown and len(rows) > limit else None
                events = await store.events_window(
                    conn,
                    ident.workspace,
                    agent=agent,
                    task_key=task_key,
                    since=since,
                    until=until,
                    limit=EVENTS_PAGE,
                )
        more = rows[limit - 1].seq if len(rows) > limit else None
        shown_events = [TimelineEvent(e.task_key, task_event(e)) for e in events if kind is None or e.kind == kind]
        if text:
            words = [w.lower() for w in re.findall(r"\w+", text)]
            shown_events = [e for e in shown_events if all(w in _event_text(e.event) for w in words)]
        return Timeline([progress_entry(r) for r in rows[:limit]], more, shown_events)

    async def agent_names(self, ident: Identity) -> list[str]:
        """Everyone heard from in the workspace (for filters as choices), by name."""
        async with self.db.page_read() as conn:
            seen = await store.last_seen(conn, ident.workspace)
            contacts = await store.contacts(conn, ident.workspace, AGENTS_SHOWN)
            actors = await store.recent_actors(conn, ident.workspace, FILTER_EVENTS)
        # every actor seen: agents, the people who acted (operators) and the harness itself (expiries)
        names = set(seen) | {c.agent for c in contacts} | set(actors)
        return sorted(names)[:AGENTS_SHOWN]

    async def agents(self, ident: Identity) -> Agents:
        """Every agent: its last contact, what it holds (with the lease clock) or what its last claim
        answered; leases past their time; leases whose holder went silent before they ended."""
        at = now()
        quiet = self.settings.silent_after_seconds
        async with self.db.page_read() as conn:
            seen = await store.last_seen(conn, ident.workspace)
            contacts = {c.agent: c for c in await store.contacts(conn, ident.workspace, AGENTS_SHOWN)}
            held = await store.claimed(conn, ident.workspace, HELD_SHOWN)
            silent_rows = await silent_holders(conn, ident.workspace, at, self.settings.silent_after_seconds)
            reserved: dict[str, dict[str, bool]] = {}
            for res in await reservations.live(conn, ident.workspace, at):  # few: claimed tasks' leases only
                reserved.setdefault(res.key, {})[res.pattern] = bool(res.shared)
        seen.pop(HARNESS, None)  # the harness's own log entries: not an agent of the team
        for name, c in contacts.items():
            seen[name] = max(seen.get(name, 0.0), float(c.seen_at))
        quiet_keys = {r.key: r for r in silent_rows}
        holds: dict[str, list[Card]] = {}
        overdue, silent = [], []
        gone = set()  #: holders whose lease ran out and who made no call since: gone, not working
        for r in held:
            quiet_row = quiet_keys.get(r.key)
            card = held_card(r, at, iso(seen.get(r.owner)) if quiet_row is not None else None, reserved.get(r.key))
            holds.setdefault(r.owner, []).append(card)
            if card.lease_expired:
                overdue.append(card)
                if seen.get(r.owner, 0.0) < r.lease_expires_at:
                    gone.add(r.owner)
            elif quiet_row is not None:
                silent.append(card)
        silent_owners = {c.owner for c in silent}
        names = sorted(set(seen) | set(holds), key=lambda a: (-seen.get(a, 0.0), a))[:AGENTS_SHOWN]
        rows = []
        for a in names:
            c = contacts.get(a)
            rows.append(
                AgentRow(
                    a,
                    iso(seen.get(a)),
                    holds.get(a, []),
                    last_tool=c.tool if c else None,
                    claim_outcome=c.claim_outcome if c else None,
                    claim_at=iso(c.claim_at) if c and c.claim_at else None,
                    silent=a in silent_owners,
                    overdue=a in gone,
                )
            )
        return Agents(rows, overdue, silent, quiet)


def _event_text(event: TaskEvent) -> str:
    """What a search matches in a task event: its kind, actor and the words of its detail (lower case)."""
    detail = " ".join(str(v) for v in (event.detail or {}).values())
    return f"{event.kind} {event.actor} {detail}".lower()

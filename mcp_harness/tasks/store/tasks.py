"""The shared task list.

A claim is one `UPDATE ... WHERE id = (SELECT ... ORDER BY priority DESC, id LIMIT 1 [FOR UPDATE SKIP
LOCKED]) RETURNING ...` statement. `ready` and `blocked` are kept current in the transaction that changes
a dependency, so the claim scan only ever touches tasks that can run. The statements are named queries
(`tasks/store/tasks.sql`), but for those whose shape a call chooses (its filters, the columns a change sets),
which `tasks/store/queries.py` builds: the claim, the fenced updates, an empty claim's facts, the listing.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from mcp_harness.store import named
from mcp_harness.store.common import ensure_workspace
from mcp_harness.store.connection import Connection, array, fetch_row
from mcp_harness.store.records import (
    ClaimedTask,
    EmptyClaimFacts,
    HolderFactsRow,
    LeaseProcessRow,
    PathCandidate,
    ReachedDependency,
    RootRow,
    TaskCountRow,
    TaskEventRow,
    TaskRecord,
    WaitRow,
)
from mcp_harness.store.search import Terms, search_refused
from mcp_harness.tasks.rules import (
    EXPIRED_ON_LAST_ATTEMPT,
    SHOWN,
    Effect,
    Status,
    TaskChange,
    dependency_flags,
    settle,
    shown,
)
from mcp_harness.tasks.store import queries
from mcp_harness.tasks.store.queries import PathMode as PathMode

Q = named.load("tasks")
CONSOLE = named.load("console")
SEARCH = named.load("search_run")
#: PostgreSQL: a workspace of at most this many tasks is searched in its own tasks alone (a to_tsvector of each)
SCOPED_TASKS = 200
#: the status of the row `task_counts_ran_out` adds when a lease ran out on its last attempt
RAN_OUT = "ran_out"


class Event(NamedTuple):
    """A task event to record with a change: its kind, who made it, and its detail (JSON text or None)."""

    kind: str
    actor: str
    detail: str | None = None


class Contact(NamedTuple):
    """The caller's row in `agent_contacts` (when it last made a call, through which tool, and what its
    last claim came to: `console.record_contact`), written by the statement or in the transaction of
    the change it goes with, so that the call commits once."""

    agent: str
    at: float
    tool: str
    outcome: str

    def params(self) -> dict[str, Any]:
        return {"c_agent": self.agent, "c_at": self.at, "c_tool": self.tool, "c_outcome": self.outcome}


async def _record_contact(conn: Connection, workspace: str, contact: Contact) -> None:
    """SQLite: the contact row, in the change's transaction (PostgreSQL writes it in the change's statement)."""
    at, outcome = contact.at, contact.outcome
    params = {
        "ws": workspace,
        "agent": contact.agent,
        "at": at,
        "tool": contact.tool,
        "outcome": outcome,
        "claim_at": at,
    }
    await conn.execute(CONSOLE.record_contact, params)


class Settled(NamedTuple):
    """What bringing dependents up to date changed: keys that became ready, the claimed tasks whose
    lease was revoked because a dependency is no longer done (their rows before the revocation), the
    gates that entered review, and the tasks in review sent back to pending (rows before)."""

    unblocked: list[str]
    revoked: list[TaskRecord]
    opened: list[str]
    returned: list[TaskRecord]

    @classmethod
    def nothing(cls) -> Settled:
        return cls([], [], [], [])

    def add(self, effect: Effect, row: TaskRecord) -> None:
        """Note what settling `row` (as it was before) did."""
        if effect is Effect.REVOKE:
            self.revoked.append(row)
        elif effect is Effect.ENTER_REVIEW:
            self.opened.append(row.key)
        elif effect is Effect.LEAVE_REVIEW:
            self.returned.append(row)
        elif effect is Effect.UNBLOCK:
            self.unblocked.append(row.key)


async def record_event(conn: Connection, workspace: str, key: str, attempt: int, event: Event, at: float) -> None:
    params = {
        "ws": workspace,
        "key": key,
        "ev_kind": event.kind,
        "ev_actor": event.actor,
        "ev_attempt": attempt,
        "ev_detail": event.detail,
        "ev_at": at,
    }
    await conn.execute(Q.insert_task_event, params)


async def events(conn: Connection, workspace: str, key: str) -> list[TaskEventRow]:
    """A task's events, oldest first."""
    return await conn.fetch_all(Q.task_events, {"ws": workspace, "key": key})


async def recent_events(conn: Connection, workspace: str, key: str, limit: int) -> list[TaskEventRow]:
    """A task's newest `limit` events, newest first."""
    return await conn.fetch_all(Q.recent_task_events, {"ws": workspace, "key": key, "limit": limit})


async def last_event(conn: Connection, workspace: str, key: str, kind: str) -> TaskEventRow | None:
    """A task's newest event of `kind`, if any."""
    return await conn.fetch_one(Q.last_task_event, {"ws": workspace, "key": key, "kind": kind})


async def get(conn: Connection, workspace: str, key: str) -> TaskRecord | None:
    return await conn.fetch_one(Q.task_by_key, {"ws": workspace, "key": key})


async def get_many(conn: Connection, workspace: str, keys: list[str]) -> dict[str, TaskRecord]:
    if not keys:
        return {}
    rows = await conn.fetch_all(Q.tasks_by_key, {"ws": workspace, "keys": array(conn.dialect, dict.fromkeys(keys))})
    return {row.key: row for row in rows}


async def dependency_closure(
    conn: Connection, workspace: str, key: str, *, depth: int, limit: int
) -> list[ReachedDependency]:
    """What `key` depends on, directly or through others (at most `depth` steps away), each once,
    nearest first then oldest, at most `limit` of them: one statement."""
    return await conn.fetch_all(Q.dependency_closure, {"ws": workspace, "key": key, "depth": depth, "limit": limit})


async def insert(conn: Connection, workspace: str, rows: list[dict[str, Any]]) -> None:
    """Insert new tasks with their dependency edges and tags (rows: the columns of `Q.insert_task`,
    plus `_deps` and `_tags`). The workspace gets its row too: a workspace that holds only tasks is
    still listed, exported and imported."""
    if rows:
        await ensure_workspace(conn, workspace)
    for row in rows:
        dep_keys, tag_list = row.pop("_deps"), row.pop("_tags")
        task_id = await conn.fetch_value(Q.insert_task, row)
        if dep_keys:
            edges = [{"ws": workspace, "task_key": row["key"], "dep_key": d} for d in dep_keys]
            await conn.execute_many(Q.insert_dependency, edges)
        if tag_list:
            await conn.execute_many(Q.insert_tag, [{"ws": workspace, "tag": t, "task_id": task_id} for t in tag_list])


async def refresh_statistics(conn: Connection) -> None:
    """PostgreSQL: ANALYZE the task tables. Without statistics (autovacuum off, or not run yet) the
    planner takes the task list for tiny and answers a claim with a bitmap scan over every pending
    task plus a sort, instead of reading the first entry of `ix_task_claim`: O(n) per claim. SQLite
    plans by its indexes without statistics and needs nothing here."""
    if conn.dialect == "postgresql":
        await conn.execute(Q.analyze_tasks)


async def add_dependents(conn: Connection, workspace: str, counts: dict[str, int]) -> None:
    """Existing tasks gained `counts[key]` new dependents."""
    for key, n in counts.items():
        await conn.execute(Q.add_dependents, {"ws": workspace, "key": key, "n": n})


async def fail_expired_exhausted(conn: Connection, workspace: str, now: float) -> list[TaskRecord]:
    """Leases that ran out on their last attempt: the task fails. Returns the failed rows."""
    return await conn.fetch_all(
        Q.fail_expired_exhausted, {"ws": workspace, "now": now, "error": EXPIRED_ON_LAST_ATTEMPT}
    )


async def end_leases(
    conn: Connection, workspace: str, agent: str, now: float, tokens: list[str] | dict[str, float] | None = None
) -> list[TaskRecord]:
    """`agent`'s live leases (or only those of `tokens`) expire now. Returns the changed rows. With
    `tokens` as token -> the time a connection last took or renewed it, a lease renewed after that
    (through another connection) is left alone."""
    params = {"ws": workspace, "agent": agent, "now": now}
    if tokens is None:
        return await conn.fetch_all(Q.end_leases, params)
    if isinstance(tokens, dict):
        ended = []
        for token, since in tokens.items():
            row = await conn.fetch_one(Q.end_lease_since, {**params, "token": token, "since": since})
            if row is not None:
                ended.append(row)
        return ended
    return await conn.fetch_all(Q.end_leases_by_token, {**params, "tokens": array(conn.dialect, tokens)})


async def has_expired_lease(conn: Connection, workspace: str, now: float) -> bool:
    """Whether a lease of the workspace ran out and no claim took the task over yet."""
    return await conn.fetch_value(Q.has_expired_lease, {"ws": workspace, "now": now}) is not None


async def leases_with_process(conn: Connection, workspace: str, now: float) -> list[LeaseProcessRow]:
    """The live leases taken or last renewed through a stdio server, with the process it recorded."""
    return await conn.fetch_all(Q.leases_with_process, {"ws": workspace, "now": now})


async def end_lease_of_process(
    conn: Connection, workspace: str, token: str, process: str, now: float
) -> TaskRecord | None:
    """The lease `token` runs out now, if `process` still is the one that took or last renewed it."""
    params = {"ws": workspace, "token": token, "process": process, "now": now}
    return await conn.fetch_one(Q.end_lease_of_process, params)


async def holder_facts(conn: Connection, workspace: str, keys: list[str]) -> dict[str, HolderFactsRow]:
    """For each of `keys`: its lease's recorded process and when its owner last made a call."""
    if not keys:
        return {}
    rows = await conn.fetch_all(Q.holder_facts, {"ws": workspace, "keys": array(conn.dialect, keys)})
    return {row.key: row for row in rows}


def _filters(conn: Connection, params: dict[str, Any], tags: list[str] | None, key: str | None) -> dict[str, Any]:
    if tags:
        params["tags"] = array(conn.dialect, tags)
    if key is not None:
        params["key"] = key
    return params


async def claimable_exists(
    conn: Connection,
    workspace: str,
    *,
    now: float,
    tags: list[str] | None,
    task_key: str | None,
    without_paths: bool = False,
) -> bool:
    """Whether a claim would get a task now (`without_paths`: a task without paths): a cheap read that
    waiting claims poll."""
    params = _filters(conn, {"ws": workspace, "now": now}, tags, task_key)
    query = queries.claim_probe(bool(tags), task_key is not None, without_paths)
    return await conn.fetch_value(query, params) is not None


async def claim(
    conn: Connection,
    workspace: str,
    *,
    agent: str,
    token: str,
    fingerprint: str,
    now: float,
    lease_seconds: int,
    tags: list[str] | None,
    task_key: str | None,
    paths: PathMode = "any",
    allowed: int | None = None,
    process: str | None = None,
    contact: Contact | None = None,
    inbox: dict[str, Any] | None = None,
) -> ClaimedTask | None:
    """Atomically take the best claimable task (or the named one) and record the claim event (its
    detail names the lease by `fingerprint`): ONE statement on PostgreSQL, two on SQLite (`queries.claim_event`,
    then `queries.claim_taken`, with the contact row after them). `paths` says how tasks with
    paths are taken (`queries.PathMode`; `allowed`: the one such task `allowed` may take). `process`: the
    stdio server process taking it (`sessions.this_process`), recorded with the lease. `contact`: the
    caller's contact row, written only when a task was taken. `inbox`: the claimer as the unread count
    names it (`me`, `base`, `ops`, `since`: `messages.count_unread`); then the row is `ClaimedWithFacts`,
    read by the claim statement itself."""
    params = {
        "ws": workspace,
        "now": now,
        "agent": agent,
        "token": token,
        "expires": now + lease_seconds,
        "lease": lease_seconds,
        "fp": fingerprint,
        "process": process,
    }
    _filters(conn, params, tags, task_key)
    if paths == "allowed":
        params["allowed"] = -1 if allowed is None else allowed
    if conn.dialect == "postgresql":
        if contact is not None:
            params.update(contact.params())
        if inbox is not None:
            params.update(inbox)
        query = queries.claim(bool(tags), task_key is not None, paths, contact is not None, inbox is not None)
        return await conn.fetch_one(query, params)
    logged = await conn.fetch_one(queries.claim_event(bool(tags), task_key is not None, paths), params)
    if logged is None:
        return None
    taken_from = json.loads(logged.detail)["previous_owner"] if logged.kind == "take_over" else None
    params.update(picked=logged.task_key, taken_from=taken_from)
    if inbox is not None:
        params.update(inbox)
    row = await fetch_row(conn, queries.claim_taken(inbox is not None), params)
    if contact is not None:
        await _record_contact(conn, workspace, contact)
    return row


async def path_candidates(
    conn: Connection, workspace: str, *, now: float, tags: list[str] | None, task_key: str | None, limit: int
) -> list[PathCandidate]:
    """The claimable tasks with paths that the filters match (id, key, paths), in claim order."""
    params = _filters(conn, {"ws": workspace, "now": now, "limit": limit}, tags, task_key)
    return await conn.fetch_all(queries.path_candidates(bool(tags), task_key is not None), params)


def _values(change: TaskChange) -> tuple[tuple[str, ...], dict[str, Any]]:
    """The columns a change sets (sorted: one cached statement per set) and their parameters."""
    values = change.columns()
    columns = tuple(sorted(values))
    return columns, {f"v_{c}": values[c] for c in columns}


async def update_leased(
    conn: Connection,
    workspace: str,
    key: str,
    token: str,
    change: TaskChange,
    event: Event | None,
    at: float,
    *,
    leaf_only: bool = False,
    contact: Contact | None = None,
) -> TaskRecord | None:
    """Apply `change` to a claimed task only if `token` is its current lease (the fence), recording
    `event` (if any) with it, and the caller's `contact` row (with an event only). None if it is not
    (with `leaf_only`, also None if other tasks depend on it)."""
    columns, values = _values(change)
    params = {"ws": workspace, "key": key, "token": token, **values}
    if event is None:
        return await conn.fetch_one(queries.update_leased(columns, leaf_only), params)
    if conn.dialect == "postgresql":
        params.update(ev_kind=event.kind, ev_actor=event.actor, ev_detail=event.detail, ev_at=at)
        if contact is not None:
            params.update(contact.params())
        query = queries.update_leased(columns, leaf_only, logged=True, contact=contact is not None)
        return await conn.fetch_one(query, params)
    row = await conn.fetch_one(queries.update_leased(columns, leaf_only), params)
    if row is not None:
        await record_event(conn, workspace, key, row.attempts, event, at)
        if contact is not None:
            await _record_contact(conn, workspace, contact)
    return row


async def update_where_status(
    conn: Connection, workspace: str, key: str, statuses: frozenset[Status], change: TaskChange
) -> TaskRecord | None:
    """Apply `change` to a task only if its status is one of `statuses`; None if it is not."""
    columns, values = _values(change)
    params = {"ws": workspace, "key": key, "statuses": array(conn.dialect, sorted(str(s) for s in statuses)), **values}
    return await conn.fetch_one(queries.update_in_status(columns), params)


async def propagate(conn: Connection, workspace: str, changed: list[str], at: float = 0.0) -> Settled:
    """Recompute `ready`/`blocked` of everything downstream of `changed` tasks, transitively.

    A claimed task whose dependency is no longer done (it was reopened) loses its lease: it goes
    back to pending with the attempt given back, so no task is ever held while a dependency is not
    done; its holder's next call gets `lease_lost`."""
    settled = Settled.nothing()
    queue = list(changed)
    while queue:
        found = await conn.fetch_all(Q.dependents_of, {"ws": workspace, "keys": array(conn.dialect, queue)})
        dependents = list(dict.fromkeys(row.task_key for row in found))
        queue = []
        if not dependents:
            break
        if conn.dialect == "postgresql":  # take turns with other changes to these tasks' dependencies
            await conn.execute(Q.lock_tasks, {"ws": workspace, "keys": dependents})
        flags = await compute_flags(conn, workspace, dependents)
        current = await get_many(conn, workspace, dependents)
        done = [key for key, row in current.items() if row.status == Status.DONE]
        stale = await stale_among(conn, workspace, done)
        for key, (deps_done, blocked) in flags.items():
            row = current[key]
            decided = settle(row, deps_done, blocked, at, key in stale)  # the rule: tasks.rules.settle
            if decided is not None:
                effect, change = decided
                columns, values = _values(change)
                await conn.execute(queries.update_by_key(columns), {"ws": workspace, "key": key, **values})
                settled.add(effect, row)
            # what its own dependents read of it changed: its blocked flag, or (done) whether it is stale
            if row.blocked != blocked or (row.status == Status.DONE and (key in stale) == deps_done):
                queue.append(key)
    return settled


async def stale_among(conn: Connection, workspace: str, keys: list[str]) -> set[str]:
    """The stale ones among `keys` (done tasks behind a reopened dependency)."""
    if not keys:
        return set()
    rows = await conn.fetch_all(Q.stale_of, {"ws": workspace, "keys": array(conn.dialect, keys)})
    return {row.key for row in rows}


async def compute_flags(conn: Connection, workspace: str, keys: list[str]) -> dict[str, tuple[bool, bool]]:
    """(every dependency settled, a dependency failed or is blocked) for each task (`dependency_flags`)."""
    found: dict[str, list[tuple[str, bool, bool]]] = {key: [] for key in keys}
    params = {"ws": workspace, "keys": array(conn.dialect, keys)}
    for dep in await conn.fetch_all(Q.dependencies_of, params):
        found[dep.task_key].append((dep.status, dep.blocked, dep.stale))
    return {key: dependency_flags(deps) for key, deps in found.items()}


async def counts(conn: Connection, workspace: str) -> dict[str, int]:
    """Tasks per status over the whole workspace; pending tasks with a failed dependency are `blocked`.
    Read from the counters the triggers keep (a few rows); every status found is counted, whatever it is."""
    return _counted(await conn.fetch_all(Q.task_counts, {"ws": workspace}))


async def counts_and_ran_out(conn: Connection, workspace: str, now: float) -> tuple[dict[str, int], bool]:
    """`counts`, and whether a task's lease ran out on its last attempt by `now` (then the caller settles
    it: `fail_expired_exhausted`). One statement: the probe is an index seek riding on the counts."""
    rows = await conn.fetch_all(Q.task_counts_ran_out, {"ws": workspace, "now": now})
    counted = [row for row in rows if row.status != RAN_OUT]
    return _counted(counted), len(counted) < len(rows)


def _counted(rows: list[TaskCountRow]) -> dict[str, int]:
    out = {status: 0 for status in SHOWN}
    for row in rows:
        status = shown(row.status, row.blocked)
        out[status] = out.get(status, 0) + int(row.n)
    return out


async def empty_claim_facts(
    conn: Connection, workspace: str, *, now: float, tags: list[str] | None, task_key: str | None
) -> EmptyClaimFacts:
    """How many tasks an empty claim's filters match, and how many of them are done."""
    params = _filters(conn, {"ws": workspace, "now": now}, tags, task_key)
    return await fetch_row(conn, queries.empty_claim_counts(bool(tags), task_key is not None), params)


async def waiting(conn: Connection, workspace: str, *, tags: list[str] | None, task_key: str | None) -> list[WaitRow]:
    """The unfinished tasks the filters match, each with its dependencies that are not done."""
    params = _filters(conn, {"ws": workspace}, tags, task_key)
    return await conn.fetch_all(queries.waiting(bool(tags), task_key is not None), params)


async def roots(conn: Connection, workspace: str, *, now: float, limit: int) -> list[RootRow]:
    """Without filters: the first `limit` roots of each kind (pending in backoff, pending claimable,
    claimed, in review, failed), in creation order. Bounded: what `waiting` and the walk down the
    dependencies find, without reading the backlog."""
    params = {"ws": workspace, "now": now, "limit": limit}
    out: list[RootRow] = []
    for query in (Q.roots_in_backoff, Q.roots_claimable, Q.roots_claimed, Q.roots_in_review, Q.roots_failed):
        out.extend(await conn.fetch_all(query, params))
    return sorted(out, key=lambda r: r.id)


async def waiting_by_key(conn: Connection, workspace: str, keys: list[str]) -> list[WaitRow]:
    """The unfinished ones among `keys`, as `waiting` returns them."""
    params = {"ws": workspace, "keys": array(conn.dialect, keys)}
    return await conn.fetch_all(queries.waiting(False, False, by_keys=True), params)


async def known_tags(conn: Connection, workspace: str, *, limit: int) -> list[str]:
    """The first `limit` tags the workspace's tasks have, in order."""
    return [row.tag for row in await conn.fetch_all(Q.known_tags, {"ws": workspace, "limit": limit})]


async def held_by(conn: Connection, workspace: str, agent: str) -> list[TaskRecord]:
    """Tasks this agent holds a lease on now (expired but not re-claimed included)."""
    return await conn.fetch_all(Q.held_by, {"ws": workspace, "agent": agent})


async def page(
    conn: Connection,
    workspace: str,
    *,
    statuses: list[str] | None,
    tag: str | None,
    limit: int,
    after_id: int,
    ready: bool | None = None,
    now: float = 0.0,
    search: Terms | None = None,
) -> list[TaskRecord]:
    """Tasks in creation order. `statuses` may include `blocked` (pending with a failed dependency);
    `ready`: only the tasks a claim could take at `now` (true) or only the others (false)."""
    params: dict[str, Any] = {"ws": workspace, "after": after_id, "limit": limit, "tag": tag}
    if statuses:
        params["statuses"] = array(conn.dialect, statuses)
    if ready is not None:
        params["now"] = now
    if search is not None:
        params.update(search.params(conn.dialect))
    shape = search.shape if search is not None else None
    try:
        small = False
        if search is not None and conn.dialect != "sqlite":
            count = await conn.fetch_value(SEARCH.workspace_tasks_upto, {"ws": workspace, "n": SCOPED_TASKS + 1})
            small = int(count) <= SCOPED_TASKS
        return await conn.fetch_all(queries.task_page(bool(statuses), tag is not None, ready, shape, small), params)
    except Exception as exc:
        if search is None:
            raise
        raise search_refused(exc) from None


async def added_by(conn: Connection, workspace: str, key: str) -> str | None:
    """The agent (or person) whose add_tasks created the task."""
    return await conn.fetch_value(Q.added_by, {"ws": workspace, "key": key})

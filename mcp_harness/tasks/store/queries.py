"""The task statements Python builds: only those whose shape a call chooses at run time. Every other
statement is a named query in a `.sql` file beside its concept's store, loaded by `named.load()` (see
`store/named.py`); the progress log's builders are in `progress/store.py`, the console's in
`oversight/store/reads.py`.

A shape is chosen at run time in three ways, and each builder says which:
- optional filters (a claim's tags and key, a listing's statuses, tag and search, the console's
  filters): each combination is its own fixed statement, so each finds its index (one statement with
  `(:x IS NULL OR col = :x)` would have one plan for every combination, and lose the index);
- the columns a task's change sets (`tasks/rules.py`'s rows decide them): one statement per set;
- the number of terms of a full-text query (PostgreSQL's tsquery takes each as a parameter), or a
  sort column and direction a person picks (the console's table, from a whitelist).
A builder is cached: each shape is one fixed statement, made once, that the driver prepares once.

The fragments the task statements share are written once here: the claim's condition (`CLAIMABLE`),
the tag subquery (`tagged`), a claim's filters (`matching`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Literal

from mcp_harness.store import named
from mcp_harness.store.connection import Query, Record, columns
from mcp_harness.store.records import (
    ClaimedTask,
    ClaimedWithFacts,
    ClaimEvent,
    EmptyClaimFacts,
    PathCandidate,
    TaskRecord,
    WaitRow,
)
from mcp_harness.store.search import TASK_TEXT, Shape, tsquery
from mcp_harness.tasks.rules import SETTLED


def in_array(column: str, parameter: str, dialect: str) -> str:
    """`column` is one of the list passed as `parameter` (see `connection.array()`)."""
    if dialect == "sqlite":
        return f"{column} IN (SELECT value FROM json_each(:{parameter}))"
    return f"{column} = ANY(:{parameter})"


def _both(build: Callable[[str], str], *, row: type[Record] | None = None, name: str = "") -> Query:
    """A query whose SQL `build(dialect)` writes for each dialect."""
    return Query(build("sqlite"), postgresql=build("postgresql"), row=row, name=name)


TASK = columns(TaskRecord)
_EVENT_COLUMNS = "workspace, task_key, kind, actor, attempt, detail, created_at"

#: claimed tasks with attempts left: `ix_task_retry_lease`'s predicate (`tables.py` declares the index)
RETRY_LEASE = "status = 'claimed' AND attempts < max_attempts"
#: a claim's condition in its two parts, each read by an index of its own (`_pick`): a pending task past
#: its backoff (`ix_task_pending`), a claimed one whose lease ran out with attempts left
#: (`ix_task_retry_lease`: `RETRY_LEASE` spelled term for term, so that SQLite takes the partial index)
_PENDING_DUE = "status = 'pending' AND available_at <= :now"
_RAN_OUT = f"{RETRY_LEASE} AND lease_expires_at <= :now"
#: the claim's condition on one row, the one place it is written (`tasks.rules.claim_would_take` is its twin
#: in Python; the same text serves both dialects): open and runnable, pending past its backoff or
#: claimed with a lease that ran out and attempts left
CLAIMABLE = f"(ready = TRUE AND (({_PENDING_DUE}) OR ({_RAN_OUT})))"


def tagged(condition: str, alias: str = "") -> str:
    """The task has a tag that meets `condition` (`ONE_TAG`, or one of a list): the store's one tag subquery."""
    return f"{alias}id IN (SELECT task_id FROM task_tags WHERE workspace = :ws AND {condition})"


#: a listing's tag filter: one tag, compared with `=`, so that PostgreSQL reads `task_tags`' primary key
#: in task order and stops at a page's end (with a list, it reads every task of the tag and sorts them)
ONE_TAG = "tag = :tag"


def matching(by_tags: bool, by_key: bool, dialect: str, alias: str = "") -> str:
    """The tasks a claim's filters name (`alias`: the tasks table's, as `t.`): the workspace's, with one
    of `:tags`, the one `:key`."""
    where = f"{alias}workspace = :ws"
    if by_tags:
        where += " AND " + tagged(in_array("tag", "tags", dialect), alias)
    if by_key:
        where += f' AND {alias}"key" = :key'
    return where


def _unsettled(alias: str) -> str:
    """The task is unfinished (`status NOT IN` the settled statuses of `tasks.rules`)."""
    return f"{alias}status NOT IN ({', '.join(repr(str(s)) for s in sorted(SETTLED))})"


def _holding(alias: str) -> str:
    """The task holds its dependents back: unfinished, or done and `stale` (a dependency of its own was
    reopened and is not done again: `tasks.rules.dependency_flags`)."""
    return f"({_unsettled(alias)} OR {alias}stale = TRUE)"


# -- the claim -------------------------------------------------------------------------------------
# Built: its filters (tags, key) and how it treats tasks with paths are the caller's.

#: how a claim treats tasks with `paths` (see `tasks/reservations.py`): `first` takes the best task only
#: if it has none (the one statement without a lock), `any` takes any, `allowed` takes tasks without
#: paths and the one `:allowed` (whose paths the caller checked under the reservations' lock)
PathMode = Literal["first", "any", "allowed"]
#: which claimable tasks a pick reads: `allowed` as above, `without` paths or `with` them only
_Paths = Literal["any", "allowed", "without", "with"]
_PICK = "id, status AS was_status, owner AS was_owner, paths"


def _pick(
    by_tags: bool,
    by_key: bool,
    dialect: str,
    *,
    select: str = "id",
    paths: _Paths = "any",
    limit: str = "1",
    walk: bool = False,
) -> str:
    """The best claimable tasks, highest priority first, then oldest: the best `limit` pending ones
    (`ix_task_pending`, in claim order) and every claimed one whose lease ran out with attempts left
    (`ix_task_retry_lease`: few), merged. Not one walk of `ix_task_claim`: the live claimed tasks are
    ready too, and usually first in its order (they were claimed for their priority), so such a walk
    reads every held task before the first it may take. `walk`: that one walk all the same (PostgreSQL's
    claim, whose FOR UPDATE SKIP LOCKED locks rows as it walks, and may not lock the rows of a UNION)."""
    where = matching(by_tags, by_key, dialect)
    if paths == "allowed":
        where += " AND (paths IS NULL OR id = :allowed)"
    if paths in ("without", "with"):
        where += f" AND paths IS {'NOT ' if paths == 'with' else ''}NULL"
    order = f"ORDER BY priority DESC, id LIMIT {limit}"
    if walk:
        return f"SELECT {select} FROM tasks WHERE {where} AND {CLAIMABLE} {order}"
    pending = f"SELECT id FROM (SELECT id FROM tasks WHERE {where} AND ready = TRUE AND {_PENDING_DUE} {order}) AS best"
    ran_out = f"SELECT id FROM tasks WHERE {where} AND ready = TRUE AND {_RAN_OUT}"
    return f"SELECT {select} FROM tasks WHERE id IN ({pending} UNION ALL {ran_out}) {order}"


@cache
def claim_probe(by_tags: bool, by_key: bool, without_paths: bool = False) -> Query:
    """Whether a claim would get a task now (what waiting claims poll); `without_paths`: a task without
    paths (those with paths are judged against the reservations by the service)."""
    return _both(
        lambda d: _pick(by_tags, by_key, d, paths="without" if without_paths else "any"),
        name=f"claim_probe({by_tags}, {by_key}, {without_paths})",
    )


@cache
def path_candidates(by_tags: bool, by_key: bool) -> Query:
    """The claimable tasks with paths that the filters match, in claim order (`:limit` of them)."""
    return _both(
        lambda d: _pick(by_tags, by_key, d, select='id, "key", paths', paths="with", limit=":limit"),
        row=PathCandidate,
        name=f"path_candidates({by_tags}, {by_key})",
    )


_MESSAGES = named.load("messages")


def _noted(alias: str) -> str:
    """A note names the task: a progress entry or a message about it (`ix_progress_task`,
    `ix_message_task`: an index probe each)."""
    return (
        f'(EXISTS (SELECT 1 FROM progress AS p WHERE p.workspace = {alias}workspace AND p.task_key = {alias}"key") '
        f'OR EXISTS (SELECT 1 FROM messages AS m WHERE m.workspace = {alias}workspace AND m.task_key = {alias}"key"))'
    )


#: the claimer's unread messages (`messages.sql`'s `count_unread`: `:me`, `:base`, `:ops`, `:since`)
_UNREAD = f"({_MESSAGES.count_unread.sqlite})"


#: the caller's row in `agent_contacts` written by the statement that changes a task, in a CTE over the
#: changed row (`source`), so that only a change that happened records it: parameters `:c_agent`,
#: `:c_at`, `:c_tool`, `:c_outcome` (`tasks.Contact`). SQLite runs `console.sql`'s `record_contact`
#: after the change, in its transaction.
def contact_cte(source: str) -> str:
    return (
        "contact AS (INSERT INTO agent_contacts (workspace, agent, seen_at, tool, claim_outcome, claim_at) "
        f"SELECT :ws, :c_agent, :c_at, :c_tool, :c_outcome, :c_at FROM {source} LIMIT 1 "
        "ON CONFLICT (workspace, agent) DO UPDATE SET seen_at = excluded.seen_at, tool = excluded.tool, "
        "claim_outcome = excluded.claim_outcome, claim_at = excluded.claim_at)"
    )


@cache
def claim(by_tags: bool, by_key: bool, paths: PathMode = "any", contact: bool = False, facts: bool = False) -> Query:
    """PostgreSQL: take the best claimable task and record the claim: ONE statement. It skips rows another
    claim holds; the row says whose expired lease it took over (`taken_from`), and so does the event
    (kind `take_over`, else `claim`; `:fp` fingerprints the new lease); with `contact`, the caller's
    contact row too (`contact_cte`); with `facts`, the row carries its handoff facts (`ClaimedWithFacts`).
    What a claim sets is written here for PostgreSQL, in `_CLAIM_SETS` for SQLite (whose BEGIN IMMEDIATE
    keeps other writers out already: it runs `claim_event` and `claim_taken` instead)."""
    pick = _pick(
        by_tags, by_key, "postgresql", select=_PICK, paths="allowed" if paths == "allowed" else "any", walk=True
    )
    first = " AND pick.paths IS NULL" if paths == "first" else ""
    detail = (
        "CASE WHEN was_status = 'claimed' "
        "THEN json_build_object('lease', CAST(:fp AS text), 'previous_owner', was_owner)::text "
        "ELSE json_build_object('lease', CAST(:fp AS text))::text END"
    )
    sets = (
        "status = 'claimed', owner = :agent, lease_token = :token, lease_expires_at = :expires, "
        "lease_seconds = :lease, attempts = t.attempts + 1, updated_at = :now, lease_process = :process"
    )
    sql = (
        f"WITH pick AS ({pick} FOR UPDATE SKIP LOCKED), "
        f"taken AS (UPDATE tasks AS t SET {sets} FROM pick WHERE t.id = pick.id{first} "
        f"RETURNING {columns(TaskRecord, prefix='t.')}, pick.was_status, pick.was_owner), "
        f'logged AS (INSERT INTO task_events ({_EVENT_COLUMNS}) SELECT workspace, "key", '
        "CASE WHEN was_status = 'claimed' THEN 'take_over' ELSE 'claim' END, :agent, attempts, "
        f"{detail}, :now FROM taken)"
        + (f", {contact_cte('taken')} " if contact else " ")
        + f"SELECT {TASK}, CASE WHEN was_status = 'claimed' THEN was_owner END AS taken_from"
        + (f", {_noted('taken.')} AS noted, {_UNREAD} AS unread" if facts else "")
        + " FROM taken"
    )
    name = f"claim({by_tags}, {by_key}, {paths}{', contact' if contact else ''}{', facts' if facts else ''})"
    return Query(sql, row=ClaimedWithFacts if facts else ClaimedTask, name=name)


#: SQLite: what a claim sets (PostgreSQL's is in `claim`)
_CLAIM_SETS = (
    "status = 'claimed', owner = :agent, lease_token = :token, lease_expires_at = :expires, "
    "lease_seconds = :lease, attempts = attempts + 1, updated_at = :now, lease_process = :process"
)


@cache
def claim_event(by_tags: bool, by_key: bool, paths: PathMode = "any") -> Query:
    """SQLite, a claim's first statement: pick the task it takes and record its claim event (kind
    `take_over` with the `previous_owner` when it takes over a lease that ran out, else `claim`; `:fp`
    fingerprints the new lease), returning the task's key and the event (`ClaimEvent`). Nothing when no
    task is there (with `first`: when the best one has paths). `claim_taken` then sets the claim on the
    task: the event goes first because only the row as it was before says whose lease ran out."""
    select = f'workspace, "key", attempts, {_PICK}'
    pick = _pick(by_tags, by_key, "sqlite", select=select, paths="allowed" if paths == "allowed" else "any")
    first = " WHERE pick.paths IS NULL" if paths == "first" else ""
    sql = (
        f"INSERT INTO task_events ({_EVENT_COLUMNS}) "
        "SELECT workspace, \"key\", CASE WHEN was_status = 'claimed' THEN 'take_over' ELSE 'claim' END, :agent, "
        "attempts + 1, CASE WHEN was_status = 'claimed' THEN json_object('lease', :fp, 'previous_owner', was_owner) "
        f"ELSE json_object('lease', :fp) END, :now FROM ({pick}) AS pick{first} "
        "RETURNING task_key, kind, detail"
    )
    return Query(sql, row=ClaimEvent, name=f"claim_event({by_tags}, {by_key}, {paths})")


@cache
def claim_taken(facts: bool) -> Query:
    """SQLite, a claim's second statement: the claim set on the task `claim_event` picked (`:picked`, its
    key), returning the row with whose lease it took over (`:taken_from`, from the event) and, with
    `facts`, its handoff facts (`ClaimedWithFacts`), read in the same statement."""
    returned = f"{TASK}, CAST(:taken_from AS TEXT) AS taken_from"
    if facts:
        returned += f", {_noted('tasks.')} AS noted, {_UNREAD} AS unread"
    sql = f'UPDATE tasks SET {_CLAIM_SETS} WHERE workspace = :ws AND "key" = :picked RETURNING {returned}'
    return Query(sql, row=ClaimedWithFacts if facts else ClaimedTask, name=f"claim_taken({facts})")


# -- why a claim found nothing ---------------------------------------------------------------------
# Built: the claim's filters are the caller's (and, for `waiting`, the keys of the walk down the
# dependencies); the `waits_for` column, with its settled statuses from `tasks.rules`, is written once.


@cache
def empty_claim_counts(by_tags: bool, by_key: bool) -> Query:
    """How many tasks an empty claim's filters match, and how many of them are finished."""
    return _both(
        lambda d: (
            "SELECT count(*) AS total, count(*) FILTER (WHERE status = 'done') AS finished "
            f"FROM tasks WHERE {matching(by_tags, by_key, d)}"
        ),
        row=EmptyClaimFacts,
        name=f"empty_claim_counts({by_tags}, {by_key})",
    )


_AGG = {"sqlite": "json_group_array(d.dep_key)", "postgresql": "json_agg(d.dep_key)::text"}


@cache
def waiting(by_tags: bool, by_key: bool, by_keys: bool = False) -> Query:
    """The unfinished tasks an empty claim's filters match, in creation order (what the reasons start
    from); or, `by_keys`, those among `:keys` that hold their dependents back, stale done ones included
    (the walk down their dependencies). Each with `waits_for`, the keys of its dependencies that hold
    it back (a JSON list)."""

    def sql(dialect: str) -> str:
        select = (
            't."key", t.status, t.owner, t.ready, t.available_at, t.lease_expires_at, t.review_comment, '
            f"(SELECT {_AGG[dialect]} FROM task_deps AS d "
            'JOIN tasks AS x ON x.workspace = d.workspace AND x."key" = d.dep_key '
            f'WHERE d.workspace = t.workspace AND d.task_key = t."key" AND {_holding("x.")}) AS waits_for'
        )
        if by_keys:
            among = in_array('t."key"', "keys", dialect)
            return f"SELECT {select} FROM tasks AS t WHERE t.workspace = :ws AND {_holding('t.')} AND {among}"
        where = matching(by_tags, by_key, dialect, "t.")
        return f"SELECT {select} FROM tasks AS t WHERE {where} AND {_unsettled('t.')} ORDER BY t.id"

    name = f"waiting({by_tags}, {by_key})" if not by_keys else "waiting(keys)"
    return _both(sql, row=WaitRow, name=name)


# -- changes to a task -----------------------------------------------------------------------------
# Built: the columns a change sets (`TaskChange.columns()`, decided by the action's row in
# `tasks/rules.py`), parameters `v_<column>`: one statement per set of columns.


#: task columns a change may set that `TaskRecord` does not read back (only their own queries read them)
UNREAD_TASK_COLUMNS = frozenset({"lease_process", "stale"})


def _assignments(values: tuple[str, ...]) -> str:
    unknown = set(values) - set(TaskRecord._fields) - UNREAD_TASK_COLUMNS
    if unknown:
        raise ValueError(f"not columns of tasks: {sorted(unknown)}")
    return ", ".join(f"{c} = :v_{c}" for c in values)


@cache
def update_by_key(values: tuple[str, ...]) -> Query:
    """Set `values` on one task: what settling a dependent changes (`tasks.rules.settle`: its flags, a
    revoked lease, entering or leaving review)."""
    sql = f'UPDATE tasks SET {_assignments(values)} WHERE workspace = :ws AND "key" = :key'
    return Query(sql, name=f"update_by_key({', '.join(values)})")


def with_event(update: str, contact: bool = False) -> str:
    """PostgreSQL: `update` (an UPDATE ... RETURNING the task's columns) and the event of the change,
    as ONE statement (`:ev_kind`, `:ev_actor`, `:ev_detail`, `:ev_at`; the attempt is the task's); with
    `contact`, the caller's contact row too (`contact_cte`)."""
    return (
        f"WITH changed AS ({update}), logged AS (INSERT INTO task_events ({_EVENT_COLUMNS}) "
        'SELECT workspace, "key", :ev_kind, :ev_actor, attempts, :ev_detail, :ev_at FROM changed) '
        + (f", {contact_cte('changed')} " if contact else "")
        + "SELECT * FROM changed"
    )


@cache
def update_leased(values: tuple[str, ...], leaf_only: bool, logged: bool = False, contact: bool = False) -> Query:
    """Set `values` on a claimed task only if the lease token matches (the fence); with `leaf_only`, only
    if no task depends on it and it is not for review. `logged` (PostgreSQL): and record the change's
    event in the same statement (see `with_event`; SQLite runs `insert_task_event` after it), and with
    `contact` the caller's contact row."""
    where = "workspace = :ws AND \"key\" = :key AND status = 'claimed' AND lease_token = :token"
    where += " AND dependents = 0 AND review = FALSE" if leaf_only else ""
    sql = f"UPDATE tasks SET {_assignments(values)} WHERE {where} RETURNING {TASK}"
    name = f"update_leased({', '.join(values)}{'; logged' if logged else ''}{', contact' if contact else ''}; "
    name += f"leaf_only={leaf_only})"
    return Query(sql, postgresql=with_event(sql, contact) if logged else None, row=TaskRecord, name=name)


@cache
def update_in_status(values: tuple[str, ...]) -> Query:
    """Set `values` on a task whose status is one of `:statuses`."""
    return _both(
        lambda d: (
            f'UPDATE tasks SET {_assignments(values)} WHERE workspace = :ws AND "key" = :key '
            f"AND {in_array('status', 'statuses', d)} RETURNING {TASK}"
        ),
        row=TaskRecord,
        name=f"update_in_status({', '.join(values)})",
    )


# -- listings --------------------------------------------------------------------------------------
# Built: their filters are the caller's, and a full-text query's terms are PostgreSQL's parameters.


#: PostgreSQL: a small workspace's tasks read apart (see `SCOPED_PROGRESS`)
SCOPED_TASKS = "(WITH scope AS MATERIALIZED (SELECT * FROM tasks WHERE workspace = :ws) SELECT * FROM scope) AS t"


@cache
def task_page(
    by_status: bool, by_tag: bool, ready: bool | None = None, search: Shape | None = None, scoped: bool = False
) -> Query:
    """Tasks in creation order after `:after`; `:statuses` may name `blocked` (pending with a failed
    dependency, which `pending` then leaves out); `by_tag`: with the tag `:tag`; `ready`: only tasks a
    claim could take at `:now` (or, false, only the others); `scoped` (PostgreSQL, with `search`): a
    small workspace's tasks read apart (as `SCOPED_PROGRESS` does for entries)."""

    def sql(dialect: str) -> str:
        where = "workspace = :ws AND id > :after"
        if ready is not None:
            where += f" AND {'' if ready else 'NOT '}{CLAIMABLE}"
        if by_tag:
            where += " AND " + tagged(ONE_TAG)
        if by_status:
            shown = "(CASE WHEN status = 'pending' AND blocked THEN 'blocked' ELSE status END)"
            where += " AND " + in_array(shown, "statuses", dialect)
        if search is not None:  # full-text: the tasks whose text matches (search/service.py)
            if dialect == "sqlite":
                where += " AND id IN (SELECT rowid FROM tasks_fts WHERE tasks_fts MATCH :q)"
            else:
                where += f" AND {TASK_TEXT} @@ ({tsquery(search)})"
        source = SCOPED_TASKS if scoped and search is not None and dialect != "sqlite" else "tasks"
        return f"SELECT {TASK} FROM {source} WHERE {where} ORDER BY id LIMIT :limit"

    name = f"task_page({by_status}, {by_tag})" if ready is None else f"task_page({by_status}, {by_tag}, {ready})"
    name += f" search {search}{' scoped' if scoped else ''}" if search is not None else ""
    return _both(sql, row=TaskRecord, name=name)

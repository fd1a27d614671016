"""The task list's statements (see `queries.py` for how statements are written): claims, fenced
updates, dependency flags, task events, the facts behind an empty claim, and listings."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import Literal

from ..task_states import SETTLED
from .connection import Query
from .queries import _KEY, TASK, _both, columns, in_array
from .records import (
    ClaimedTask,
    DependencyRow,
    EmptyClaimFacts,
    RootRow,
    TaskCountRow,
    TaskEventRow,
    TaskRecord,
    WaitRow,
)
from .search import TASK_TEXT, tsquery

# -- tasks -----------------------------------------------------------------------------------------
TASK_BY_KEY = Query(f'SELECT {TASK} FROM tasks WHERE workspace = :ws AND "key" = :key', row=TaskRecord)
TASKS_BY_KEY = _both(
    lambda d: f"SELECT {TASK} FROM tasks WHERE workspace = :ws AND {in_array(_KEY, 'keys', d)}", row=TaskRecord
)
INSERT_TASK = Query(
    'INSERT INTO tasks (workspace, "key", title, description, steps, priority, depends_on, tags, max_attempts, '
    "dependents, content_hash, status, ready, blocked, attempts, available_at, created_at, updated_at, review, kind, "
    "paths) VALUES (:workspace, :key, :title, :description, :steps, :priority, :depends_on, :tags, :max_attempts, "
    ":dependents, :content_hash, :status, :ready, :blocked, 0, :available_at, :created_at, :updated_at, :review, "
    ":kind, :paths) RETURNING id"
)
INSERT_DEPENDENCY = Query("INSERT INTO task_deps (workspace, task_key, dep_key) VALUES (:ws, :task_key, :dep_key)")
INSERT_TAG = Query("INSERT INTO task_tags (workspace, tag, task_id) VALUES (:ws, :tag, :task_id)")
ADD_DEPENDENTS = Query('UPDATE tasks SET dependents = dependents + :n WHERE workspace = :ws AND "key" = :key')
#: PostgreSQL plans the claim by these statistics (see `tasks.refresh_statistics`)
ANALYZE_TASKS = Query("ANALYZE tasks, task_deps, task_tags")
#: a lease that ran out on its last attempt by :now; the partial index `ix_task_last_lease` holds exactly
#: the candidates (its predicate is spelled here as there, term for term, so both planners take it)
_RAN_OUT = "workspace = :ws AND status = 'claimed' AND attempts >= max_attempts AND lease_expires_at <= :now"
FAIL_EXPIRED_EXHAUSTED = Query(
    "UPDATE tasks SET status = 'failed', ready = FALSE, lease_token = NULL, last_error = :error, updated_at = :now "
    f"WHERE {_RAN_OUT} RETURNING {TASK}",
    row=TaskRecord,
)
#: a session (or connection) ended: its live leases run out now; the attempt stays counted, the owner
#: stays until a claim takes the task over (`tokens`: only these leases)
_END_LEASES = (
    "UPDATE tasks SET lease_expires_at = :now, updated_at = :now WHERE workspace = :ws AND owner = :agent "
    "AND status = 'claimed' AND lease_expires_at > :now"
)
END_LEASES = Query(f"{_END_LEASES} RETURNING {TASK}", row=TaskRecord)
END_LEASES_BY_TOKEN = _both(
    lambda d: f"{_END_LEASES} AND {in_array('lease_token', 'tokens', d)} RETURNING {TASK}", row=TaskRecord
)
#: one lease of a connection, unless another connection renewed (or took) it after `:since`
END_LEASE_SINCE = Query(
    f"{_END_LEASES} AND lease_token = :token AND updated_at <= :since RETURNING {TASK}", row=TaskRecord
)

#: `+id`: sort the few held rows rather than walk the workspace's tasks in id order (SQLite, without
#: statistics, chose ix_task_page: 3.4 ms against 0.09 at 10,000 tasks; tools/bench_scale.py)
HELD_BY = Query(
    f"SELECT {TASK} FROM tasks WHERE workspace = :ws AND owner = :agent AND status IN ('claimed', 'in_review') "
    "ORDER BY +id",
    row=TaskRecord,
)
#: the triggers' counters (migration 6): a few rows per workspace whatever its size
_TASK_COUNTS = (
    "SELECT status, blocked, CAST(sum(n) AS BIGINT) AS n FROM task_counts WHERE workspace = :ws "
    "GROUP BY status, blocked"
)
TASK_COUNTS = Query(_TASK_COUNTS, row=TaskCountRow)
#: the status of the row `TASK_COUNTS_RAN_OUT` adds when a lease ran out on its last attempt
RAN_OUT = "ran_out"
#: the counts, plus a row of status `ran_out` when a lease ran out on its last attempt: the probe that
#: list_tasks and restore_state make on every call rides on the counts' round trip (one seek of
#: `ix_task_last_lease`), and only a hit costs a write (`TaskService.settle_ran_out`)
TASK_COUNTS_RAN_OUT = Query(
    f"{_TASK_COUNTS} UNION ALL SELECT '{RAN_OUT}', FALSE, 1 WHERE EXISTS (SELECT 1 FROM tasks WHERE {_RAN_OUT})",
    row=TaskCountRow,
)
DEPENDENTS_OF = _both(
    lambda d: f"SELECT task_key FROM task_deps WHERE workspace = :ws AND {in_array('dep_key', 'keys', d)}"
)
DEPENDENCIES_OF = _both(
    lambda d: (
        "SELECT d.task_key, t.status, t.blocked FROM task_deps AS d "
        'JOIN tasks AS t ON t.workspace = d.workspace AND t."key" = d.dep_key '
        f"WHERE d.workspace = :ws AND {in_array('d.task_key', 'keys', d)}"
    ),
    row=DependencyRow,
)
#: PostgreSQL: the dependents whose flags a change recomputes, locked first (in id order), so that two
#: transactions finishing two dependencies of one task take turns and the second sees the first's commit
LOCK_TASKS = Query(
    'SELECT id FROM tasks WHERE workspace = :ws AND "key" = ANY(:keys) ORDER BY id FOR UPDATE', name="LOCK_TASKS"
)


@cache
def update_by_key(values: tuple[str, ...]) -> Query:
    """Set `values` (parameters `v_<column>`) on one task: what settling a dependent changes
    (`task_states.settle`: its flags, a revoked lease, entering or leaving review)."""
    sql = f'UPDATE tasks SET {_assignments(values)} WHERE workspace = :ws AND "key" = :key'
    return Query(sql, name=f"update_by_key({', '.join(values)})")


# -- task events -----------------------------------------------------------------------------------
_EVENT_COLUMNS = "workspace, task_key, kind, actor, attempt, detail, created_at"
INSERT_TASK_EVENT = Query(
    f"INSERT INTO task_events ({_EVENT_COLUMNS}) "
    "VALUES (:ws, :key, :ev_kind, :ev_actor, :ev_attempt, :ev_detail, :ev_at)"
)
TASK_EVENTS = Query(
    f"SELECT {columns(TaskEventRow)} FROM task_events WHERE workspace = :ws AND task_key = :key ORDER BY id",
    row=TaskEventRow,
)

#: a task's newest events (bounded: the index `ix_task_event_task` read backwards)
RECENT_TASK_EVENTS = Query(
    f"SELECT {columns(TaskEventRow)} FROM task_events WHERE workspace = :ws AND task_key = :key "
    "ORDER BY id DESC LIMIT :limit",
    row=TaskEventRow,
)
#: a task's newest event of one kind (bounded as above: kinds are few per task)
LAST_TASK_EVENT = Query(
    f"SELECT {columns(TaskEventRow)} FROM task_events WHERE workspace = :ws AND task_key = :key "
    "AND kind = :kind ORDER BY id DESC LIMIT 1",
    row=TaskEventRow,
)


def with_event(update: str) -> str:
    """PostgreSQL: `update` (an UPDATE ... RETURNING the task's columns) and the event of the change,
    as ONE statement (`:ev_kind`, `:ev_actor`, `:ev_detail`, `:ev_at`; the attempt is the task's)."""
    return (
        f"WITH changed AS ({update}), logged AS (INSERT INTO task_events ({_EVENT_COLUMNS}) "
        'SELECT workspace, "key", :ev_kind, :ev_actor, attempts, :ev_detail, :ev_at FROM changed) '
        "SELECT * FROM changed"
    )


def _tagged(dialect: str, alias: str = "") -> str:
    """The task carries one of the tags in `:tags`."""
    tagged = in_array("tag", "tags", dialect)
    return f" AND {alias}id IN (SELECT task_id FROM task_tags WHERE workspace = :ws AND {tagged})"


def _status_not_in(statuses: Iterable[str], alias: str) -> str:
    """`status NOT IN (...)` over a fixed set of `task_states` statuses."""
    return f"{alias}status NOT IN ({', '.join(repr(str(s)) for s in sorted(statuses))})"


#: the task (`t`), or its dependency (`x`), still holds its dependents back
_UNSETTLED = _status_not_in(SETTLED, "t.")
_UNSETTLED_DEP = _status_not_in(SETTLED, "x.")

#: the claim's condition on one row, the one place it is written (`task_states.claimable` is its
#: twin in Python): open and runnable, pending past its backoff or claimed with a lease that ran out
#: and attempts left
CLAIMABLE = (
    "(ready = TRUE AND ((status = 'pending' AND available_at <= :now) "
    "OR (status = 'claimed' AND lease_expires_at <= :now AND attempts < max_attempts)))"
)


#: how a claim treats tasks with `paths` (see `service/task_paths.py`): `first` takes the best task only
#: if it has none (the one statement without a lock), `any` takes any, `allowed` takes tasks without
#: paths and the one `:allowed` (whose paths the caller checked under the reservations' lock)
PathMode = Literal["first", "any", "allowed"]


def _claimable(
    by_tags: bool, by_key: bool, dialect: str, select: str = "id", paths: PathMode = "any", limit: str = "1"
) -> str:
    """The best claimable task (`ix_task_claim`: ready tasks, highest priority first, then oldest)."""
    where = "workspace = :ws" + (_tagged(dialect) if by_tags else "") + (' AND "key" = :key' if by_key else "")
    if paths == "allowed":
        where += " AND (paths IS NULL OR id = :allowed)"
    return f"SELECT {select} FROM tasks WHERE {where} AND {CLAIMABLE} ORDER BY priority DESC, id LIMIT {limit}"


@cache
def claimable(by_tags: bool, by_key: bool, without_paths: bool = False) -> Query:
    """Whether a claim would get a task now (what waiting claims poll); `without_paths`: a task without
    paths (those with paths are judged against the reservations by the service)."""

    def sql(dialect: str) -> str:
        pick = _claimable(by_tags, by_key, dialect)
        return pick.replace(" ORDER BY", " AND paths IS NULL ORDER BY", 1) if without_paths else pick

    return _both(sql, name=f"claimable({by_tags}, {by_key}, {without_paths})")


def _claim_set(alias: str = "") -> str:
    """What a claim sets (`alias`: the updated table's, where the statement joins another)."""
    return (
        "status = 'claimed', owner = :agent, lease_token = :token, lease_expires_at = :expires, "
        f"lease_seconds = :lease, attempts = {alias}attempts + 1, updated_at = :now"
    )


_PICK = "id, status AS was_status, owner AS was_owner, paths"


@cache
def path_candidates(by_tags: bool, by_key: bool) -> Query:
    """The claimable tasks with paths that the filters match, in claim order (`:limit` of them)."""

    def sql(dialect: str) -> str:
        pick = _claimable(by_tags, by_key, dialect, select='id, "key", paths', limit=":limit")
        return pick.replace(" ORDER BY", " AND paths IS NOT NULL ORDER BY", 1)

    return _both(sql, name=f"path_candidates({by_tags}, {by_key})")


@cache
def claim(by_tags: bool, by_key: bool, paths: PathMode = "any") -> Query:
    """Take the best claimable task and record the claim: ONE statement. PostgreSQL skips rows another
    claim holds; the row says whose expired lease it took over (`taken_from`), and so does the event
    (kind `take_over`, else `claim`; `:fp` fingerprints the new lease). SQLite (whose BEGIN IMMEDIATE
    keeps other writers out already) runs `claim_pick`, `CLAIM_BY_ID` and `INSERT_TASK_EVENT` instead."""
    pick = _claimable(by_tags, by_key, "postgresql", select=_PICK, paths=paths) + " FOR UPDATE SKIP LOCKED"
    first = " AND pick.paths IS NULL" if paths == "first" else ""
    detail = (
        "CASE WHEN was_status = 'claimed' "
        "THEN json_build_object('lease', CAST(:fp AS text), 'previous_owner', was_owner)::text "
        "ELSE json_build_object('lease', CAST(:fp AS text))::text END"
    )
    sql = (
        f"WITH pick AS ({pick}), "
        f"taken AS (UPDATE tasks AS t SET {_claim_set('t.')} FROM pick WHERE t.id = pick.id{first} "
        f"RETURNING {columns(TaskRecord, prefix='t.')}, pick.was_status, pick.was_owner), "
        f'logged AS (INSERT INTO task_events ({_EVENT_COLUMNS}) SELECT workspace, "key", '
        "CASE WHEN was_status = 'claimed' THEN 'take_over' ELSE 'claim' END, :agent, attempts, "
        f"{detail}, :now FROM taken) "
        f"SELECT {TASK}, CASE WHEN was_status = 'claimed' THEN was_owner END AS taken_from FROM taken"
    )
    return Query(sql, row=ClaimedTask, name=f"claim({by_tags}, {by_key}, {paths})")


@cache
def claim_pick(by_tags: bool, by_key: bool, paths: PathMode = "any") -> Query:
    """SQLite: the task a claim takes, with its status, owner and paths before the claim."""
    sql = _claimable(by_tags, by_key, "sqlite", select=_PICK, paths=paths)
    return Query(sql, name=f"claim_pick({by_tags}, {by_key}, {paths})")


CLAIM_BY_ID = Query(f"UPDATE tasks SET {_claim_set()} WHERE id = :id RETURNING {TASK}", row=TaskRecord)


def _assignments(values: tuple[str, ...]) -> str:
    unknown = set(values) - set(TaskRecord._fields)
    if unknown:
        raise ValueError(f"not columns of tasks: {sorted(unknown)}")
    return ", ".join(f"{c} = :v_{c}" for c in values)


@cache
def update_leased(values: tuple[str, ...], leaf_only: bool, logged: bool = False) -> Query:
    """Set `values` (parameters `v_<column>`) on a claimed task only if the lease token matches (the
    fence); with `leaf_only`, only if no task depends on it and it is not for review. `logged`
    (PostgreSQL): and record the change's event in the same statement (see `with_event`; SQLite runs
    `INSERT_TASK_EVENT` after it)."""
    where = "workspace = :ws AND \"key\" = :key AND status = 'claimed' AND lease_token = :token"
    where += " AND dependents = 0 AND review = FALSE" if leaf_only else ""
    sql = f"UPDATE tasks SET {_assignments(values)} WHERE {where} RETURNING {TASK}"
    name = f"update_leased({', '.join(values)}{'; logged' if logged else ''}; leaf_only={leaf_only})"
    return Query(sql, postgresql=with_event(sql) if logged else None, row=TaskRecord, name=name)


@cache
def update_in_status(values: tuple[str, ...]) -> Query:
    """Set `values` (parameters `v_<column>`) on a task whose status is one of `:statuses`."""
    return _both(
        lambda d: (
            f'UPDATE tasks SET {_assignments(values)} WHERE workspace = :ws AND "key" = :key '
            f"AND {in_array('status', 'statuses', d)} RETURNING {TASK}"
        ),
        row=TaskRecord,
        name=f"update_in_status({', '.join(values)})",
    )


def _matching(by_tags: bool, by_key: bool, dialect: str, alias: str = "") -> str:
    """The tasks an empty claim's filters name (`alias`: the tasks table's, as `t.`)."""
    where = f"{alias}workspace = :ws"
    if by_tags:
        where += _tagged(dialect, alias)
    if by_key:
        where += f' AND {alias}"key" = :key'
    return where


@cache
def why_nothing(by_tags: bool, by_key: bool) -> Query:
    """How many tasks an empty claim's filters match, and how many of them are finished."""

    def sql(dialect: str) -> str:
        return (
            "SELECT count(*) AS total, count(*) FILTER (WHERE status = 'done') AS finished "
            f"FROM tasks WHERE {_matching(by_tags, by_key, dialect)}"
        )

    return _both(sql, row=EmptyClaimFacts, name=f"why_nothing({by_tags}, {by_key})")


_WAIT_COLUMNS = (
    't."key", t.status, t.owner, t.ready, t.available_at, t.lease_expires_at, t.review_comment, '
    '(SELECT {agg} FROM task_deps AS d JOIN tasks AS x ON x.workspace = d.workspace AND x."key" = d.dep_key '
    'WHERE d.workspace = t.workspace AND d.task_key = t."key" AND ' + _UNSETTLED_DEP + ") AS waits_for"
)
_AGG = {"sqlite": "json_group_array(d.dep_key)", "postgresql": "json_agg(d.dep_key)::text"}


@cache
def waiting(by_tags: bool, by_key: bool) -> Query:
    """The unfinished tasks an empty claim's filters match (what the reasons start from)."""

    def sql(dialect: str) -> str:
        return (
            f"SELECT {_WAIT_COLUMNS.format(agg=_AGG[dialect])} FROM tasks AS t "
            f"WHERE {_matching(by_tags, by_key, dialect, 't.')} AND {_UNSETTLED} ORDER BY t.id"
        )

    return _both(sql, row=WaitRow, name=f"waiting({by_tags}, {by_key})")


_T_KEY = 't."key"'
WAITING_BY_KEY = _both(
    lambda d: (
        f"SELECT {_WAIT_COLUMNS.format(agg=_AGG[d])} FROM tasks AS t "
        f"WHERE t.workspace = :ws AND {_UNSETTLED} AND {in_array(_T_KEY, 'keys', d)}"
    ),
    row=WaitRow,
)


_ROOT = (
    'SELECT "key", status, owner, ready, available_at, lease_expires_at, review_comment, NULL AS waits_for, id '
    "FROM tasks "
)


#: An empty claim without filters: the tasks at the root of every wait are open tasks with every
#: dependency settled (`ready`), tasks in review (their dependencies are settled) and failed ones. The
#: first few of each kind, in the order the reasons show them (`ix_task_claim`, `ix_task_board`).
def _ready_roots(where: str, order: str) -> Query:
    """Open tasks with every dependency done (`ix_task_claim`; SQLite, planning without statistics,
    is kept off the status and creation-order indexes by a unary `+`, which would walk the backlog)."""

    def sql(off: str) -> str:
        return (
            f"{_ROOT}WHERE workspace = :ws AND ready = TRUE AND {off}status = 'pending' AND {where} "
            f"ORDER BY {off if order == 'id' else ''}{order} LIMIT :limit"
        )

    return Query(sql("+"), postgresql=sql(""), row=RootRow)


ROOTS_IN_BACKOFF = _ready_roots("available_at > :now", "available_at, id")
ROOTS_CLAIMABLE = _ready_roots("available_at <= :now", "id")
ROOTS_CLAIMED = Query(
    _ROOT + "WHERE workspace = :ws AND status = 'claimed' ORDER BY lease_expires_at, id LIMIT :limit", row=RootRow
)
ROOTS_IN_REVIEW = Query(_ROOT + "WHERE workspace = :ws AND status = 'in_review' ORDER BY id LIMIT :limit", row=RootRow)
ROOTS_FAILED = Query(_ROOT + "WHERE workspace = :ws AND status = 'failed' ORDER BY id LIMIT :limit", row=RootRow)


#: the tags tasks of a workspace have, for a claim whose tags match none (`task_tags`' primary key)
KNOWN_TAGS = Query("SELECT DISTINCT tag FROM task_tags WHERE workspace = :ws ORDER BY tag LIMIT :limit")


@cache
def task_page(
    by_status: bool, by_tag: bool, ready: bool | None = None, search: tuple[tuple[int, ...], int] | None = None
) -> Query:
    """Tasks in creation order after `:after`; `:statuses` may name `blocked` (pending with a failed
    dependency, which `pending` then leaves out); `ready`: only tasks a claim could take at `:now`
    (or, false, only the others)."""

    def sql(dialect: str) -> str:
        where = "workspace = :ws AND id > :after"
        if ready is not None:
            where += f" AND {'' if ready else 'NOT '}{CLAIMABLE}"
        if by_tag:
            where += " AND id IN (SELECT task_id FROM task_tags WHERE workspace = :ws AND tag = :tag)"
        if by_status:
            shown = "(CASE WHEN status = 'pending' AND blocked THEN 'blocked' ELSE status END)"
            where += " AND " + in_array(shown, "statuses", dialect)
        if search is not None:  # full-text: the tasks whose text matches (service/search.py)
            if dialect == "sqlite":
                where += " AND id IN (SELECT rowid FROM tasks_fts WHERE tasks_fts MATCH :q)"
            else:
                where += f" AND {TASK_TEXT} @@ ({tsquery(search)})"
        return f"SELECT {TASK} FROM tasks WHERE {where} ORDER BY id LIMIT :limit"

    name = f"task_page({by_status}, {by_tag})" if ready is None else f"task_page({by_status}, {by_tag}, {ready})"
    name += f" search {search}" if search is not None else ""
    return _both(sql, row=TaskRecord, name=name)


for _name, _query in list(globals().items()):
    if isinstance(_query, Query) and not _query.name:
        _query.name = _name

"""The database tables (SQLModel). JSON values are stored as text we serialise ourselves, so both
backends keep them byte-for-byte; times are float seconds since the epoch (UTC).

These declarations are what the code expects; the database itself is made by the migrations
(`sql/migrations/`). A change here needs a new migration there (`tests/test_migrations.py` compares
the two: columns, keys, indexes, and the triggers and functions declared in `tasks/store/task_counts.sql`)."""

from __future__ import annotations

from sqlalchemy import DDL, BigInteger, Index, Integer, LargeBinary, Table, Text, UniqueConstraint, event, text
from sqlalchemy import inspect as sa_inspect
from sqlmodel import Field, SQLModel

from mcp_harness.store import named
from mcp_harness.tasks.store.queries import RETRY_LEASE

metadata = SQLModel.metadata

#: 64-bit integers: BIGINT on PostgreSQL; INTEGER on SQLite, which is 64-bit there already (and SQLite
#: only auto-increments a column declared exactly INTEGER PRIMARY KEY)
Int64 = BigInteger().with_variant(Integer(), "sqlite")
BigId = Int64


def table_of(model: type[SQLModel]) -> Table:
    """A table model's SQLAlchemy `Table` (what `Model.__table__` holds, typed): its mapper's table."""
    table = sa_inspect(model).local_table
    if not isinstance(table, Table):
        raise TypeError(f"{model.__name__} is not mapped to one table")
    return table


class Meta(SQLModel, table=True):
    """Key/value facts about the database itself (the schema version)."""

    __tablename__ = "harness_meta"
    key: str = Field(primary_key=True)
    value: str


class Workspace(SQLModel, table=True):
    """One row per workspace: its counters. Updating a counter row-locks it, which orders writers."""

    __tablename__ = "workspaces"
    name: str = Field(primary_key=True)
    progress_seq: int = Field(default=0, sa_type=BigInteger)  #: last progress seq handed out
    created_at: float


class Thread(SQLModel, table=True):
    """A named line of checkpoints; `latest_version` is the version allocator."""

    __tablename__ = "threads"
    workspace: str = Field(primary_key=True)
    name: str = Field(primary_key=True)
    latest_version: int = Field(default=0, sa_type=Int64)
    latest_id: str | None = None
    updated_at: float


class Checkpoint(SQLModel, table=True):
    """Checkpoint metadata plus a manifest of content-addressed values (no state copy)."""

    __tablename__ = "checkpoints"
    __table_args__ = (
        UniqueConstraint("workspace", "thread", "version", name="uq_checkpoint_version"),
        # most checkpoints have no label: index only those that do (the label lookup implies it)
        Index(
            "ix_checkpoint_label",
            "workspace",
            "thread",
            "label",
            "version",
            sqlite_where=text("label IS NOT NULL"),
            postgresql_where=text("label IS NOT NULL"),
        ),
        Index("ix_checkpoint_agent", "workspace", "agent", "created_at"),  # the console: versions saved for a task
    )
    id: str = Field(primary_key=True)
    workspace: str
    thread: str
    version: int = Field(sa_type=Int64)  #: up to 2**53 - 1, as the tools' arguments allow
    parent_id: str | None = None
    label: str | None = None
    metadata_json: str | None = Field(default=None, sa_type=Text)
    manifest: str = Field(sa_type=Text)  #: JSON list of entries, see checkpoints/manifest.py
    size_bytes: int
    agent: str
    schema_version: int | None = None
    created_at: float


class Blob(SQLModel, table=True):
    """A JSON value stored once per workspace, addressed by the hash of its canonical form."""

    __tablename__ = "blobs"
    workspace: str = Field(primary_key=True)
    hash: str = Field(primary_key=True)
    data: bytes = Field(sa_type=LargeBinary)  #: canonical JSON, UTF-8


class Segment(SQLModel, table=True):
    """A run of elements of a long array (their canonical JSON joined by commas) and the segment
    before it: an array that grows by appends is a chain of these, so each save stores only what it
    appended (see checkpoints/chains.py). Ids only grow, so a segment's `prev` is always a smaller id."""

    __tablename__ = "segments"
    id: int | None = Field(default=None, primary_key=True, sa_type=BigId)
    workspace: str
    prev: int | None = Field(default=None, sa_type=BigInteger)
    data: bytes = Field(sa_type=LargeBinary)


class Progress(SQLModel, table=True):
    """The append-only progress log."""

    __tablename__ = "progress"
    __table_args__ = (
        Index("ix_progress_thread", "workspace", "thread", "seq"),
        Index("ix_progress_seq", "workspace", "seq"),
        Index("ix_progress_task", "workspace", "task_key", "seq"),
        Index("ix_progress_agent", "workspace", "agent", "created_at"),  # the console: an agent's entry near a save
    )
    id: int | None = Field(default=None, primary_key=True, sa_type=BigId)
    entry_id: str = Field(unique=True)
    workspace: str
    seq: int = Field(sa_type=BigInteger)
    thread: str
    agent: str
    status: str
    summary: str = Field(sa_type=Text)
    details: str | None = Field(default=None, sa_type=Text)
    next_steps: str | None = Field(default=None, sa_type=Text)  #: JSON list
    task_key: str | None = None
    artifacts: str | None = Field(default=None, sa_type=Text)  #: JSON object
    created_at: float


class Task(SQLModel, table=True):
    """A task of the shared list. `ready` (open, i.e. pending or claimed, with every dependency done)
    and `blocked` (a dependency failed, transitively) are maintained by the statements that change a
    task or its dependencies, so the claim scan walks only open, runnable tasks in claim order and
    never the finished ones (see `ix_task_claim` below)."""

    __tablename__ = "tasks"
    __table_args__ = (
        UniqueConstraint("workspace", "key", name="uq_task_key"),
        Index("ix_task_owner", "workspace", "owner", "status"),
    )
    id: int | None = Field(default=None, primary_key=True, sa_type=BigId)
    workspace: str
    key: str
    title: str = Field(sa_type=Text)
    description: str | None = Field(default=None, sa_type=Text)
    steps: str = Field(sa_type=Text)  #: JSON list
    priority: int = 0
    depends_on: str = Field(sa_type=Text)  #: JSON list
    tags: str = Field(sa_type=Text)  #: JSON list
    max_attempts: int = 3
    dependents: int = 0  #: tasks that depend on this one (edges only appear when tasks are added)
    content_hash: str
    status: str = "pending"
    ready: bool = False
    blocked: bool = False
    owner: str | None = None
    lease_token: str | None = None
    lease_expires_at: float | None = None
    lease_seconds: int | None = None
    attempts: int = 0
    available_at: float = 0.0
    last_error: str | None = Field(default=None, sa_type=Text)
    result: str | None = Field(default=None, sa_type=Text)  #: JSON value
    verification: str | None = Field(default=None, sa_type=Text)
    created_at: float
    updated_at: float
    completed_at: float | None = None
    #: completing it submits it for a person's review (`in_review`) instead of finishing it
    review: bool = Field(default=False, sa_column_kwargs={"server_default": text("FALSE")})
    #: `work`, or `gate`: a person's decision, never claimed, in review once its dependencies are done
    kind: str = Field(default="work", sa_column_kwargs={"server_default": text("'work'")})
    review_comment: str | None = Field(default=None, sa_type=Text)  #: the last reject's comment
    #: JSON list of path patterns a claim reserves (NULL: none); see `tasks/patterns.py`
    paths: str | None = Field(default=None, sa_type=Text)
    added_by: str | None = None  #: the agent (or person) whose add_tasks created it
    #: the stdio server process that took or last renewed the lease (`sessions.this_process`; NULL: over
    #: HTTP, or a server keeping its leases to their time): a lease whose process is gone ends at a look
    lease_process: str | None = None
    #: a done task with a dependency (direct, or through done tasks) that is not done: one was reopened
    #: since; its dependents wait on it as on an unfinished task (`tasks.rules.dependency_flags`)
    stale: bool = Field(default=False, sa_column_kwargs={"server_default": text("FALSE")})


_tasks = table_of(Task)
#: the claim's scan order: open runnable tasks of a workspace, highest priority first, then oldest
Index("ix_task_claim", _tasks.c.workspace, _tasks.c.ready, _tasks.c.priority.desc(), _tasks.c.id)
#: the task list's pages, in creation order
Index("ix_task_page", _tasks.c.workspace, _tasks.c.id)
#: the console board's columns, each read in its own order (pending, blocked; claimed by its prefix)
Index("ix_task_board", _tasks.c.workspace, _tasks.c.status, _tasks.c.blocked, _tasks.c.priority.desc(), _tasks.c.id)
_done, _failed = text("status = 'done'"), text("status = 'failed'")
Index(
    "ix_task_done", _tasks.c.workspace, _tasks.c.completed_at, _tasks.c.id, sqlite_where=_done, postgresql_where=_done
)
Index(
    "ix_task_failed",
    _tasks.c.workspace,
    _tasks.c.updated_at,
    _tasks.c.id,
    sqlite_where=_failed,
    postgresql_where=_failed,
)
#: claimed tasks on their last attempt, by expiry: list and restore probe it for a lease that ran out (to
#: settle it), a seek whatever the workspace's size (`tasks/store/tasks.sql`: `task_counts_ran_out`)
_last = text("status = 'claimed' AND attempts >= max_attempts")
Index("ix_task_last_lease", _tasks.c.workspace, _tasks.c.lease_expires_at, sqlite_where=_last, postgresql_where=_last)
#: a claim's two reads (`queries._pick`), so that it never walks the live claimed tasks: pending tasks in
#: claim order (`status` and `ready` as columns too: SQLite's planner then prefers it to `ix_task_claim`),
#: and claimed tasks with attempts left by expiry (with `ix_task_last_lease`: every claimed task, once)
_pending, _retry = text("status = 'pending'"), text(RETRY_LEASE)
Index(
    "ix_task_pending",
    _tasks.c.workspace,
    _tasks.c.status,
    _tasks.c.ready,
    _tasks.c.priority.desc(),
    _tasks.c.id,
    sqlite_where=_pending,
    postgresql_where=_pending,
)
Index(
    "ix_task_retry_lease", _tasks.c.workspace, _tasks.c.lease_expires_at, sqlite_where=_retry, postgresql_where=_retry
)


class TaskCount(SQLModel, table=True):
    """How many tasks of a workspace have a status (and blocked flag): kept by database triggers on
    `tasks` (migration 6), so counting costs the same at any size. A key may have several rows (on
    PostgreSQL, one per transaction that changed it at the same time as others): a count is their sum."""

    __tablename__ = "task_counts"
    __table_args__ = (Index("ix_task_counts", "workspace", "status", "blocked"),)
    id: int | None = Field(default=None, primary_key=True, sa_type=BigId)
    workspace: str
    status: str
    blocked: bool
    n: int = Field(sa_type=BigInteger)


class TaskEvent(SQLModel, table=True):
    """What happened to a task, one row per transition (claim, complete, fail...): who, when, and the
    detail a later reader needs (an error, a reason, the old values of fields a transition cleared)."""

    __tablename__ = "task_events"
    __table_args__ = (
        Index("ix_task_event_task", "workspace", "task_key", "id"),
        Index("ix_task_event_actor", "workspace", "actor", "created_at"),  # the console: what an agent held when
        Index("ix_task_event_time", "workspace", "created_at", "id"),  # the console: the timeline's events
    )
    id: int | None = Field(default=None, primary_key=True, sa_type=BigId)
    workspace: str
    task_key: str
    kind: str  #: see tasks/events.py
    actor: str  #: the agent (or person) whose call made it
    attempt: int  #: the task's attempt number when it happened
    detail: str | None = Field(default=None, sa_type=Text)  #: JSON object
    created_at: float


class TaskDep(SQLModel, table=True):
    """Edges of the dependency graph, indexed both ways."""

    __tablename__ = "task_deps"
    __table_args__ = (Index("ix_task_dep_rev", "workspace", "dep_key", "task_key"),)  # dependents in key order
    workspace: str = Field(primary_key=True)
    task_key: str = Field(primary_key=True)
    dep_key: str = Field(primary_key=True)


class TaskTag(SQLModel, table=True):
    __tablename__ = "task_tags"
    workspace: str = Field(primary_key=True)
    tag: str = Field(primary_key=True)
    task_id: int = Field(primary_key=True, sa_type=BigInteger)


class TaskReservation(SQLModel, table=True):
    """A path pattern a lease holds. Live while its task is claimed under this `lease_token` and the lease
    has not run out: it ends with the lease without a write (a new claim of the task deletes the old rows)."""

    __tablename__ = "task_reservations"
    __table_args__ = (Index("ix_task_reservation_anchor", "workspace", "anchor"),)
    task_id: int = Field(primary_key=True, sa_type=BigInteger)
    lease_token: str = Field(primary_key=True)
    pattern: str = Field(primary_key=True)
    workspace: str
    #: the pattern's leading segments without a wildcard (`paths.anchor`, joined by `/`): what finds the
    #: reservations that may overlap a pattern without reading them all
    anchor: str
    shared: bool  #: holds back only exclusive reservations


class IdempotencyKey(SQLModel, table=True):
    """The first successful result of a mutating call, replayed for retries with the same key."""

    __tablename__ = "idempotency_keys"
    __table_args__ = (Index("ix_idem_created", "created_at"),)
    workspace: str = Field(primary_key=True)
    agent: str = Field(primary_key=True)
    tool: str = Field(primary_key=True)
    key: str = Field(primary_key=True)
    request_hash: str
    result: str = Field(sa_type=Text)
    created_at: float


class ApiToken(SQLModel, table=True):
    """HTTP bearer tokens: only a hash is kept."""

    __tablename__ = "api_tokens"
    token_hash: str = Field(primary_key=True)
    token_id: str = Field(unique=True)
    workspace: str
    agent: str
    role: str
    created_at: float
    revoked_at: float | None = None


class StateSchema(SQLModel, table=True):
    """JSON Schemas registered per thread; each new registration gets the next version."""

    __tablename__ = "state_schemas"
    workspace: str = Field(primary_key=True)
    thread: str = Field(primary_key=True)
    version: int = Field(primary_key=True)
    document: str = Field(sa_type=Text)  #: the JSON Schema
    created_at: float


class ConsoleSession(SQLModel, table=True):
    """A sign-in to the shared server's console: only a hash of the session id (the cookie) is kept,
    with the token it was made from; revoking that token ends it."""

    __tablename__ = "console_sessions"
    __table_args__ = (Index("ix_console_session_token", "token_hash"),)
    session_hash: str = Field(primary_key=True)
    token_hash: str
    created_at: float
    expires_at: float


class Message(SQLModel, table=True):
    """A message between agents and people. `recipient`: an agent (`A`: A and its sessions; `A:s`: that
    session), `*` (every agent, each acknowledging for itself in `message_acks`) or `operators`. A message
    to one addressee is acknowledged on its own row (`acked_at`), once."""

    __tablename__ = "messages"
    __table_args__ = (
        Index(
            "ix_message_inbox",
            "workspace",
            "recipient",
            "created_at",
            sqlite_where=text("acked_at IS NULL"),
            postgresql_where=text("acked_at IS NULL"),
        ),
        Index("ix_message_to", "workspace", "recipient", "acked_at", "id"),
        Index("ix_message_task", "workspace", "task_key", "id"),
    )
    id: int | None = Field(default=None, primary_key=True, sa_type=BigId)
    message_id: str = Field(unique=True)
    workspace: str
    sender: str
    recipient: str
    subject: str | None = Field(default=None, sa_type=Text)
    body: str = Field(sa_type=Text)
    task_key: str | None = None
    reply_to: str | None = None  #: the message_id this answers
    created_at: float
    acked_at: float | None = None
    acked_by: str | None = None


class MessageAck(SQLModel, table=True):
    """One reader's acknowledgement of a message sent to every agent (`*`)."""

    __tablename__ = "message_acks"
    workspace: str = Field(primary_key=True)
    message_id: str = Field(primary_key=True)
    agent: str = Field(primary_key=True)
    acked_at: float


def _declare_triggers() -> None:
    """The triggers, functions and search tables of `tasks/store/task_counts.sql` and `sql/search.sql`, and the
    view of `messages/message_views.sql`, created after the tables (per dialect)."""
    for source in ("task_counts", "search", "message_views"):
        ddl = named.load(source)
        for name in ddl:
            for dialect in ddl.written_for(name):
                statement = getattr(ddl[name], dialect)
                event.listen(metadata, "after_create", DDL(statement).execute_if(dialect=dialect))


_declare_triggers()


class AgentContact(SQLModel, table=True):
    """When an agent last made a call in a workspace (any tool), and what its last claim answered
    (`claimed`, or the reason it got nothing) or, after it, what it did with the task it held
    (`completed:KEY`, `released:KEY`, `failed:KEY`): the console's liveness. Written at most every few
    seconds per agent and process."""

    __tablename__ = "agent_contacts"
    workspace: str = Field(primary_key=True)
    agent: str = Field(primary_key=True)
    seen_at: float
    tool: str
    claim_outcome: str | None = None
    claim_at: float | None = None


class Runner(SQLModel, table=True):
    """A `mcp-harness run` process: where it runs, when it was last seen (it renews `seen_at` while it
    lives) and what it waits on when nothing is claimable."""

    __tablename__ = "runners"
    __table_args__ = (Index("ix_runner_workspace", "workspace", "started_at"),)
    id: str = Field(primary_key=True)
    workspace: str
    host: str
    pid: int
    started_at: float
    seen_at: float
    ended_at: float | None = None
    waiting: str | None = None  #: what it waits on (a claim's reason), or None while it works


class AgentSession(SQLModel, table=True):
    """One headless agent session a runner started for one task: written before the agent starts, kept
    up to date while it runs (turns, cost, last tool call), closed with its outcome. A person may ask
    for it to stop (`stop_requested_at`); its runner sees the request and stops it."""

    __tablename__ = "agent_sessions"
    __table_args__ = (
        Index("ix_agent_session_started", "workspace", "started_at"),
        Index("ix_agent_session_task", "workspace", "task_key"),
    )
    id: str = Field(primary_key=True)  #: the session's UUID (Claude Code's --session-id)
    workspace: str
    runner: str
    slot: int
    agent: str
    task_key: str | None = None
    kind: str  #: `work` (one task) or `initializer` (plans the work from a spec)
    started_at: float
    seen_at: float
    ended_at: float | None = None
    outcome: str | None = None
    exit_code: int | None = None
    turns: int | None = None
    cost_usd: float | None = None
    last_tool: str | None = None
    last_words: str | None = Field(default=None, sa_type=Text)
    transcript: str | None = None  #: the stream's file, under the data folder
    stop_requested_at: float | None = None
    stop_requested_by: str | None = None

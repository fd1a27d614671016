"""What the store's reads return: typed rows (`Record`s: tuples read by field name). Each is the row
type of the queries that select it (`-- row:` in `sql/*.sql`, or a builder's), whose columns must
carry exactly these names, in this order: `Query` checks that on the first rows, so a query and its
record cannot drift apart. Times are float seconds since the epoch (UTC); JSON columns are still text."""

from __future__ import annotations

from mcp_harness.store.connection import Record
from mcp_harness.tasks.rules import Status


class ThreadHead(Record):
    """What a save reads under the thread's lock, in one statement."""

    __slots__ = ()

    version: int  #: the latest version, 0 before the first checkpoint
    checkpoint_id: str | None  #: the latest checkpoint
    manifest: str | None  #: the latest checkpoint's manifest (JSON)
    schema_version: int | None  #: the thread's newest JSON Schema, if it has one
    schema_document: str | None

    @property
    def schema(self) -> tuple[int, str] | None:
        """(version, document) of the thread's newest JSON Schema."""
        return None if self.schema_version is None else (self.schema_version, self.schema_document or "")


class CheckpointRow(Record):
    """A checkpoint's metadata: what a listing reads (no manifest, no state)."""

    __slots__ = ()

    id: str
    thread: str
    version: int
    parent_id: str | None
    label: str | None
    metadata_json: str | None
    created_at: float
    size_bytes: int
    agent: str
    schema_version: int | None


class CheckpointWithManifest(CheckpointRow):
    """A checkpoint's metadata and its manifest (JSON): what a restore reads."""

    __slots__ = ()

    manifest: str


class ThreadRow(Record):
    """A thread with its latest version and the size of its latest state."""

    __slots__ = ()

    name: str
    latest_version: int
    latest_id: str | None
    updated_at: float
    size_bytes: int


class SegmentRow(Record):
    __slots__ = ()

    prev: int | None  #: the segment before this one on its chain
    data: bytes  #: a run of array elements' canonical JSON, joined by commas


class ProgressRow(Record):
    __slots__ = ()

    entry_id: str
    seq: int
    created_at: float
    agent: str
    thread: str
    status: str
    summary: str
    details: str | None
    next_steps: str | None  #: JSON list
    task_key: str | None
    artifacts: str | None  #: JSON object


class MessageRow(Record):
    __slots__ = ()

    message_id: str
    sender: str
    recipient: str
    subject: str | None
    body: str
    task_key: str | None
    reply_to: str | None
    created_at: float
    read: bool


class TaskRecord(Record):
    """A task, every column (see `tables.Task` for what `ready`, `blocked` and `dependents` mean)."""

    __slots__ = ()

    id: int
    workspace: str
    key: str
    title: str
    description: str | None
    steps: str  #: JSON list
    priority: int
    depends_on: str  #: JSON list
    tags: str  #: JSON list
    max_attempts: int
    dependents: int
    content_hash: str
    status: Status
    ready: bool
    blocked: bool
    owner: str | None
    lease_token: str | None
    lease_expires_at: float | None
    lease_seconds: int | None
    attempts: int
    available_at: float
    last_error: str | None
    result: str | None  #: JSON value
    verification: str | None
    created_at: float
    updated_at: float
    completed_at: float | None
    review: bool
    kind: str  #: work or gate
    review_comment: str | None
    paths: str | None  #: JSON list of path patterns


class ReachedDependency(Record):
    """A task another depends on, directly (`depth` 1) or through others, as its context shows it."""

    __slots__ = ()

    id: int
    key: str
    status: Status
    blocked: bool
    result: str | None  #: JSON value
    verification: str | None
    review: bool
    kind: str
    review_comment: str | None
    depth: int  #: the fewest dependency steps from the task to it


class ClaimedTask(TaskRecord):
    """A claimed task, and whose expired lease the claim took over (None: the task was pending)."""

    __slots__ = ()

    taken_from: str | None


class ClaimedWithFacts(ClaimedTask):
    """A claimed task and its handoff facts, read by the claim statement itself: what the claim's answer
    needs to know first about the task it took: whether a note names it (a progress entry or a message
    about it: then its `context` is read), and how many messages wait for the claimer (`unread`)."""

    __slots__ = ()

    noted: bool
    unread: int


class ClaimEvent(Record):
    """The event a claim recorded on SQLite, with the key of the task it takes (`queries.claim_event`):
    its kind says whether it took over a lease that ran out, and its detail (JSON) whose."""

    __slots__ = ()

    task_key: str
    kind: str
    detail: str


class PathCandidate(Record):
    """A claimable task with paths, which the service judges against the live reservations."""

    __slots__ = ()

    id: int
    key: str
    paths: str  #: JSON list of path patterns


class ReservationRow(Record):
    """A live reservation: the holding task, its owner, the pattern, and when the lease ends."""

    __slots__ = ()

    key: str
    owner: str
    pattern: str
    shared: bool
    lease_expires_at: float


class TaskEventRow(Record):
    """One transition of a task (see `tables.TaskEvent`)."""

    __slots__ = ()

    id: int
    task_key: str
    kind: str
    actor: str
    attempt: int
    detail: str | None  #: JSON object
    created_at: float


class WaitRow(Record):
    """An unfinished task as the reasons for an empty claim see it, with its unfinished dependencies."""

    __slots__ = ()

    key: str
    status: Status
    owner: str | None
    ready: bool
    available_at: float
    lease_expires_at: float | None
    review_comment: str | None  #: the last reject's comment
    waits_for: str | None  #: JSON list of keys of dependencies that are not done


class LeaseProcessRow(Record):
    """A live lease taken or renewed through a stdio server, with the process it recorded."""

    __slots__ = ()

    key: str
    owner: str
    lease_token: str
    lease_process: str


class HolderFactsRow(Record):
    """What the reasons of an empty claim tell of a task's holder: its lease's process, its last call."""

    __slots__ = ()

    key: str
    lease_process: str | None
    seen_at: float | None


class RootRow(WaitRow):
    """A task at the root of a wait, read directly (its `waits_for` is None), with its id: roots are
    judged in creation order, as the walk finds them."""

    __slots__ = ()

    id: int


class DependencyRow(Record):
    """One dependency of a task, with that dependency's state."""

    __slots__ = ()

    task_key: str
    status: Status
    blocked: bool
    stale: bool  #: a done dependency whose own dependency was reopened and is not done again


class DependentRow(Record):
    """A task that depends on one of the tasks asked about."""

    __slots__ = ()

    task_key: str


class TagRow(Record):
    __slots__ = ()

    tag: str


class TaskCountRow(Record):
    __slots__ = ()

    status: Status
    blocked: bool
    n: int


class EmptyClaimFacts(Record):
    """Why a claim found nothing: how many tasks match its filters, and how many of those are finished."""

    __slots__ = ()

    total: int
    finished: int  #: done


class StoredResult(Record):
    """The remembered first result of a call made with an idempotency key."""

    __slots__ = ()

    request_hash: str
    result: str  #: the result model's JSON


class TokenRow(Record):
    __slots__ = ()

    token_id: str
    workspace: str
    agent: str
    role: str
    created_at: float
    revoked_at: float | None


# -- the console's and the metrics' reads (`oversight/store/console.sql`) --------------------------------------


class WorkspaceRow(Record):
    __slots__ = ()

    name: str


class OpenDependencyRow(Record):
    """A dependency of `task_key` that is not settled, and how many such dependencies it has (`n`)."""

    __slots__ = ()

    task_key: str
    key: str
    status: Status
    blocked: bool
    owner: str | None
    n: int


class CancelReasonRow(Record):
    __slots__ = ()

    task_key: str
    detail: str | None  #: JSON object, with the `reason`


class LinkedTaskRow(Record):
    """A task as another task's page shows it (a dependency, a dependent): what its link says."""

    __slots__ = ()

    key: str
    title: str
    status: Status
    blocked: bool
    owner: str | None
    kind: str
    review: bool


class GraphNodeRow(LinkedTaskRow):
    __slots__ = ()

    priority: int


class HoldingDependencyRow(LinkedTaskRow):
    """The dependency that holds a task back most directly, and whether it could be claimed."""

    __slots__ = ()

    ready: bool


class HoldingBackRow(LinkedTaskRow):
    """A task that others wait on, with what says how to unstick it."""

    __slots__ = ()

    dependents: int
    ready: bool
    lease_expires_at: float | None
    updated_at: float
    attempts: int
    max_attempts: int
    last_error: str | None


class TaskTableRow(Record):
    """A row of the console's task table."""

    __slots__ = ()

    key: str
    title: str
    status: Status
    blocked: bool
    owner: str | None
    priority: int
    tags: str  #: JSON list
    attempts: int
    max_attempts: int
    updated_at: float
    kind: str
    review: bool


class EdgeRow(Record):
    """A dependency edge: `task_key` depends on `dep_key`."""

    __slots__ = ()

    task_key: str
    dep_key: str


class SeenRow(Record):
    __slots__ = ()

    agent: str
    at: float  #: the agent's last trace in the database


class HeldRow(Record):
    """A task held under a lease (expired or not)."""

    __slots__ = ()

    key: str
    title: str
    owner: str
    attempts: int
    max_attempts: int
    lease_expires_at: float
    updated_at: float


class ContactRow(Record):
    """An agent's last call, and what its last claim answered (`store.console.record_contact`)."""

    __slots__ = ()

    agent: str
    seen_at: float
    tool: str
    claim_outcome: str | None
    claim_at: float | None


class SilentHolderRow(Record):
    """A running lease whose holder went quiet (`seen_at`: its last call, None if never recorded), or
    one taken or renewed through a stdio server (`lease_process`), silent if that process is gone."""

    __slots__ = ()

    key: str
    owner: str
    lease_expires_at: float
    seen_at: float | None
    lease_process: str | None
    quiet: int  #: 1: no call for more than half the lease


class EventTimeRow(Record):
    __slots__ = ()

    task_key: str
    kind: str
    created_at: float


class CreatedRow(Record):
    __slots__ = ()

    key: str
    created_at: float


class BucketRow(Record):
    """How many tasks fall in time bucket `b`."""

    __slots__ = ()

    b: int
    n: int


class WorkspaceCountRow(Record):
    __slots__ = ()

    workspace: str
    status: Status
    blocked: bool
    n: int


class WorkspaceTallyRow(Record):
    __slots__ = ()

    workspace: str
    n: int


class WorkspaceSinceRow(Record):
    __slots__ = ()

    workspace: str
    since: float


# -- the session runner (`runs/runs.sql`) ------------------------------------------------------------


class RunnerRow(Record):
    """A runner process: where it runs, when it was last seen, what it waits on."""

    __slots__ = ()

    id: str
    workspace: str
    host: str
    pid: int
    started_at: float
    seen_at: float
    ended_at: float | None
    waiting: str | None


class AgentSessionRow(Record):
    """One agent session a runner started (see `tables.AgentSession`)."""

    __slots__ = ()

    id: str
    workspace: str
    runner: str
    slot: int
    agent: str
    task_key: str | None
    kind: str
    started_at: float
    seen_at: float
    ended_at: float | None
    outcome: str | None
    exit_code: int | None
    turns: int | None
    cost_usd: float | None
    last_tool: str | None
    last_words: str | None
    transcript: str | None
    stop_requested_at: float | None
    stop_requested_by: str | None

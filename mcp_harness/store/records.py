"""What the store's reads return: typed rows. Each is the row type of the queries that select it
(`queries.py`), whose columns must carry exactly these names, in this order: `Query` checks that on
the first rows, so a query and its record cannot drift apart. Times are float seconds since the
epoch (UTC); JSON columns are still text."""

from __future__ import annotations

from typing import NamedTuple


class ThreadHead(NamedTuple):
    """What a save reads under the thread's lock, in one statement."""

    version: int  #: the latest version, 0 before the first checkpoint
    checkpoint_id: str | None  #: the latest checkpoint
    manifest: str | None  #: the latest checkpoint's manifest (JSON)
    schema_version: int | None  #: the thread's newest JSON Schema, if it has one
    schema_document: str | None

    @property
    def schema(self) -> tuple[int, str] | None:
        """(version, document) of the thread's newest JSON Schema."""
        return None if self.schema_version is None else (self.schema_version, self.schema_document or "")


class CheckpointRow(NamedTuple):
    """A checkpoint. Listings leave its manifest out (`manifest` is then None)."""

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
    manifest: str | None


class ThreadRow(NamedTuple):
    """A thread with its latest version and the size of its latest state."""

    name: str
    latest_version: int
    latest_id: str | None
    updated_at: float
    size_bytes: int


class SegmentRow(NamedTuple):
    prev: int | None  #: the segment before this one on its chain
    data: bytes  #: a run of array elements' canonical JSON, joined by commas


class ProgressRow(NamedTuple):
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


class TaskRecord(NamedTuple):
    """A task, every column (see `tables.Task` for what `ready`, `blocked` and `dependents` mean)."""

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
    status: str
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


#: a claimed task, and whose expired lease the claim took over (None: the task was pending)
ClaimedTask = NamedTuple("ClaimedTask", [*TaskRecord.__annotations__.items(), ("taken_from", "str | None")])  # noqa: UP014


class TaskEventRow(NamedTuple):
    """One transition of a task (see `tables.TaskEvent`)."""

    id: int
    task_key: str
    kind: str
    actor: str
    attempt: int
    detail: str | None  #: JSON object
    created_at: float


class WaitRow(NamedTuple):
    """An unfinished task as the reasons for an empty claim see it, with its unfinished dependencies."""

    key: str
    status: str
    owner: str | None
    ready: bool
    available_at: float
    lease_expires_at: float | None
    waits_for: str | None  #: JSON list of keys of dependencies that are not done


class DependencyRow(NamedTuple):
    """One dependency of a task, with that dependency's state."""

    task_key: str
    status: str
    blocked: bool


class TaskCountRow(NamedTuple):
    status: str
    blocked: bool
    n: int


class EmptyClaimFacts(NamedTuple):
    """Why a claim found nothing: how many tasks match its filters, and how many of those are finished."""

    total: int
    finished: int  #: done


class StoredResult(NamedTuple):
    """The remembered first result of a call made with an idempotency key."""

    request_hash: str
    result: str  #: the result model's JSON


class TokenRow(NamedTuple):
    token_id: str
    workspace: str
    agent: str
    role: str
    created_at: float
    revoked_at: float | None

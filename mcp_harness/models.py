"""Typed results of every tool (their JSON schemas are the published `outputSchema`s) and task input."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    FieldSerializationInfo,
    SerializerFunctionWrapHandler,
    WithJsonSchema,
    WrapSerializer,
    field_serializer,
    field_validator,
    model_serializer,
)

from mcp_harness.config import NAME_PATTERN, STEP_CHARS, TAG_CHARS
from mcp_harness.identity import Role
from mcp_harness.tasks.patterns import normalize_all
from mcp_harness.tasks.rules import ShownStatus, Status

Name = Annotated[str, Field(pattern=NAME_PATTERN)]  # the pattern caps the length at 128
#: a name that refers to one made before (a task's key, a thread, a tag): checked against the same
#: pattern but published as a plain string, since the pattern costs an agent's context ~50 bytes a use
#: and a wrong name is refused anyway, with the pattern in the message. Names being made keep it.
NameRef = Annotated[str, Field(pattern=NAME_PATTERN), WithJsonSchema({"type": "string"})]
ProgressStatus = Literal["done", "in_progress", "blocked", "note"]
#: a progress entry's statuses, as people pick them
PROGRESS_STATUSES: tuple[str, ...] = get_args(ProgressStatus)
TaskStatus = ShownStatus  #: the statuses are spelled once, in `tasks.rules`
TaskKind = Literal["work", "gate"]
ClaimReason = Literal[
    "none_pending",
    "all_done",
    "all_claimed",
    "waiting_on_other_work",
    "backoff",
    "waiting_on_review",
    "blocked_by_failure",
    "paths_reserved",
]


def _absent(value: Any) -> bool:
    """Left out of a result when not set (fields that only some answers carry)."""
    return value is None


#: a list of task keys, published as such even where the field may be absent
KEYS = WithJsonSchema({"type": "array", "items": {"type": "string"}})
#: Bounds are checked, and an argument over one is refused naming it; these publish a plain type without
#: them, since every published byte is a model's context and a bound tells it nothing it needs.
TEXT = WithJsonSchema({"type": "string"})
TEXTS = WithJsonSchema({"type": "array", "items": {"type": "string"}})


class Result(BaseModel):
    # Each model's validator and serializer are built when first used, not at import: a hook or a
    # command that uses a few of these models does not pay for them all.
    model_config = ConfigDict(extra="forbid", defer_build=True)


#: serialization context of people's views (the CLI's --json): every field, defaults included
EVERY_FIELD = {"every_field": True}


class Lean(Result):
    """A task object in a result: a field left at its default (unset, an empty list, `review: false`,
    `kind: "work"`, priority 0, no owner...) is left out, since it tells a model nothing. People's views
    dump with `context=EVERY_FIELD` and keep every field (scripts read them)."""

    @model_serializer(mode="wrap")
    def _lean(self, handler: SerializerFunctionWrapHandler, info: Any) -> Any:
        out = handler(self)
        if info.context and info.context.get("every_field"):
            return out
        defaults = _defaults(type(self))
        return {k: v for k, v in out.items() if k not in defaults or v != defaults[k]}


def _defaults(model: type[BaseModel]) -> dict[str, Any]:
    """Each field's default, as JSON would show it (fields without one are always shown)."""
    found = _DEFAULTS.get(model)
    if found is None:
        found = _DEFAULTS[model] = {
            name: field.get_default(call_default_factory=True)
            for name, field in model.model_fields.items()
            if not field.is_required()
        }
    return found


_DEFAULTS: dict[type[BaseModel], dict[str, Any]] = {}


class Replayable(Result):
    """The result of a mutating tool: one answered again for a repeated idempotency_key says so."""

    #: only `true`, on a result returned for a repeated idempotency_key (the call changed nothing)
    replayed: bool | None = Field(default=None, exclude_if=lambda v: not v)


#: A checkpoint's metadata, without its state. A slotted dataclass, not a model: a listing makes one
#: per row from columns the store has typed already (a fraction of what validating a model from a dict
#: costs); pydantic-core still publishes its JSON schema and serialises it.
@dataclass(slots=True)
class CheckpointMeta:
    __pydantic_config__ = ConfigDict(extra="forbid")

    checkpoint_id: str
    thread: str
    version: int
    parent_id: str | None
    label: str | None
    metadata: dict[str, Any] | None
    created_at: str
    size_bytes: int
    agent: str
    schema_version: int | None = None


class Behind(Result):
    """What the log holds that a checkpoint does not: written since it was saved (each counted up to 100)."""

    progress: int  #: progress entries
    task_changes: int  #: task events (claims, completions, reviews, reopens...)


@dataclass(slots=True)
class RestoredCheckpoint(CheckpointMeta):
    """A restored checkpoint; `behind`: what the log holds since it was saved (the log wins over it)."""

    behind: Behind | None = None


class SaveCheckpointResult(Replayable):
    checkpoint_id: str
    thread: str
    version: int
    parent_id: str | None
    created_at: str
    size_bytes: int
    #: replace mode: top-level keys of the state it follows that this one no longer has (at most 20)
    dropped_keys: Annotated[list[str] | None, KEYS] = Field(default=None, exclude_if=_absent)


class ListCheckpointsResult(Result):
    checkpoints: list[CheckpointMeta]
    next_before_version: int | None  #: pass as before_version for the next page


class ThreadInfo(Result):
    thread: str
    latest_version: int
    checkpoint_id: str  #: of the latest checkpoint
    size_bytes: int  #: of the latest state
    updated_at: str


#: A progress entry as results show it: unset fields, the default thread `main` and the default status
#: `note` left out. (Per field, not `Lean`: a model-level serializer cost 4x to dump a restore's entries;
#: people's views that keep every field dump them with `every_field`.)
class ProgressEntry(Result):
    entry_id: str
    seq: int
    created_at: str
    agent: str
    thread: str = Field(default="main", exclude_if=lambda v: v == "main")
    status: ProgressStatus = Field(default="note", exclude_if=lambda v: v == "note")
    summary: str
    details: str | None = Field(default=None, exclude_if=_absent)
    next_steps: list[str] | None = Field(default=None, exclude_if=_absent)
    task_key: str | None = Field(default=None, exclude_if=_absent)
    artifacts: dict[str, Any] | None = Field(default=None, exclude_if=_absent)


def every_field(entries: list[ProgressEntry]) -> list[dict[str, Any]]:
    """Progress entries as people's views show them (the CLI's --json): every field, defaults included."""
    return [{name: getattr(e, name) for name in ProgressEntry.model_fields} for e in entries]


class RecordProgressResult(Replayable):
    entry_id: str
    seq: int
    created_at: str
    #: what the entry leaves undone (status done about a task the caller still holds)
    warning: str | None = Field(default=None, exclude_if=_absent)


class Lease(Result):
    token: str
    attempt: int
    expires_at: str
    #: whole seconds left when the answer was made (never more than there are); negative once expired
    expires_in_seconds: int
    expired: bool | None = Field(default=None, exclude_if=lambda v: not v)  #: only `true`, once expired
    #: only `false`: on a replayed answer whose lease no longer holds the task, or has expired
    live: bool | None = Field(default=None, exclude_if=lambda v: v is not False)
    #: only `true`: this attempt is the task's last (failing, or a lease that runs out, fails the task)
    last_attempt: bool | None = Field(default=None, exclude_if=lambda v: not v)


class TaskCounts(Result):
    pending: int = 0
    claimed: int = 0
    in_review: int = 0
    done: int = 0
    failed: int = 0
    cancelled: int = 0
    blocked: int = 0


#: `counts` in a tool's result: the buckets above 0 only (people's views keep every bucket)
LeanCounts = Annotated[TaskCounts, WrapSerializer(lambda counts, dump: {k: n for k, n in dump(counts).items() if n})]


#: A note about a task: the harness's (why it came back), an agent's progress entry about it, or a message
#: naming it (a question to the people, a person's answer). (No docstrings on the context's models: they
#: would be published in three output schemas.)
class ContextNote(Result):
    seq: int | None = Field(default=None, exclude_if=_absent)  #: the progress entry's seq (a message has none)
    #: a message naming the task: its id (to answer it, `reply_to`); its `by` is the sender
    message: str | None = Field(default=None, exclude_if=_absent)
    at: str
    by: str  #: whoever caused it (for a take-over: the agent that took it)
    text: str  #: cut to 300 characters (ending in …)
    next: str | None = Field(default=None, exclude_if=_absent)  #: the entry's next_steps, cut to 300 characters


#: A dependency as the task's holder needs it: its status and what it left behind.
class ContextDependency(Result):
    key: str
    status: TaskStatus
    #: the JSON value complete gave, or (past 300 characters of compact JSON) a string of its start, cut
    result: Any = Field(default=None, exclude_if=_absent)
    verification: str | None = Field(default=None, exclude_if=_absent)
    #: `result`, `verification` or `comment` was cut
    cut: bool | None = Field(default=None, exclude_if=lambda v: not v)
    reason: str | None = Field(default=None, exclude_if=_absent)  #: why it was cancelled
    #: the person's comment on approving or rejecting it (a gate or a review task), cut to 300 characters
    comment: str | None = Field(default=None, exclude_if=_absent)


#: What the next holder of a task must know (at most 2,000 bytes of compact JSON): its notes (5, reasons
#: and messages first, shown newest first) and its dependencies.
class TaskContext(Result):
    notes: list[ContextNote] | None = Field(default=None, exclude_if=_absent)
    #: what the task depends on, directly or through others, nearest first, each once
    dependencies: list[ContextDependency] | None = Field(default=None, exclude_if=_absent)
    #: dependencies left out to keep within the bound (list_tasks(task_key=K) shows them all)
    more_dependencies: int | None = Field(default=None, exclude_if=_absent)
    #: a reopened task: the result it had before the reopen (cut as a dependency's result is)
    previous_result: Any = Field(default=None, exclude_if=_absent)


class TaskView(Lean):
    """A task as results show it; fields at their defaults are left out (see `Lean`)."""

    key: str
    title: str
    description: str | None = None
    steps: list[str] = Field(default_factory=list)
    priority: int = 0
    depends_on: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    status: TaskStatus
    owner: str | None = None
    attempts: int = 0
    max_attempts: int  #: always shown: with `attempts` it says whether this is the last try
    available_at: str | None = None  #: not claimable before this time (retry backoff)
    result: Any = None
    verification: str | None = None
    last_error: str | None = None
    created_at: str
    updated_at: str | None = None  #: always set; left out of a claim's task (its lease says when)
    completed_at: str | None = None
    review: bool = False
    kind: TaskKind = "work"
    #: the last reject's comment, for whoever claims the task next
    review_comment: str | None = None
    paths: list[str] | None = None  #: the patterns a claim reserves


class HandedTask(TaskView):
    # A task handed to an agent (a claim's): with the task's newest notes and its dependencies' results.

    context: TaskContext | None = Field(default=None, exclude_if=_absent)


class TaskDetail(TaskView):
    """A task with its lease, for people (the CLI's board and `tasks show`)."""

    lease: Lease | None = None
    #: the patterns its live lease holds, exclusively and shared
    held_paths: list[str] | None = Field(default=None, exclude_if=_absent)
    shared_paths: list[str] | None = Field(default=None, exclude_if=_absent)


class FullTaskRow(TaskView):
    """`list_tasks(task_key=K)`: one task's every field, whatever its status."""

    ready: bool  #: claimable now
    context: TaskContext | None = Field(default=None, exclude_if=_absent)  #: whole: notes, dependencies uncut
    added_by: str | None = None  #: who added the task (absent for tasks added before it was recorded)


class _TaskChanged(Replayable):
    # What an update_task answer may say changed: the fields both `UpdateTaskResult` and the published
    # `UpdateTaskAnswer` carry, in their order (a subclass that narrows `key` and `status` keeps it).
    # (No docstring: a model's docstring is its published description.)

    key: str | None = None
    status: TaskStatus | None = None
    attempts: int | None = None  #: when the action changed it
    available_at: str | None = None  #: not claimable before this time (a retry backoff began)
    result: Any = None
    verification: str | None = None
    last_error: str | None = None
    review_comment: str | None = None
    #: keys that just became claimable (complete, approve, cancel) / whose leases were revoked (reopen);
    #: absent otherwise, so published as arrays
    unblocked: Annotated[list[str] | None, KEYS] = None
    revoked: Annotated[list[str] | None, KEYS] = None
    #: reserve, unreserve: the patterns the lease holds now, exclusively and shared
    held_paths: list[str] | None = None
    shared_paths: list[str] | None = None

    @model_serializer(mode="wrap")
    def _changed(self, handler: SerializerFunctionWrapHandler) -> Any:
        """Only what was given: a null is shown where the action cleared a field (given as None)."""
        given = self.model_fields_set
        return {k: v for k, v in handler(self).items() if v is not None or k in given}


class UpdateTaskResult(_TaskChanged):
    """update_task, every action but heartbeat: the task's key and status now, plus what changed
    (`attempts`, `available_at` of a backoff, `unblocked`, `revoked`); a field the action cleared is
    shown as null. (A heartbeat answers `HeartbeatResult`; the published schema describes both.)"""

    key: str
    status: TaskStatus


class HeartbeatResult(Replayable):
    lease: Lease
    inbox: Unread | None = Field(default=None, exclude_if=_absent)  #: when above 0


class UpdateTaskAnswer(_TaskChanged):
    # What update_task publishes as its outputSchema: both shapes of its answer, said in its description.
    # (No docstring: the description below is the published one.)

    model_config = ConfigDict(
        json_schema_extra={
            "description": "heartbeat: {lease} only. Other actions: {key, status} plus what changed (attempts, "
            "available_at, unblocked, revoked); a field the action cleared is null."
        }
    )

    lease: Lease | None = None
    inbox: Unread | None = Field(default=None, exclude_if=_absent)  #: heartbeat, when above 0


# A message as its addressee reads it. (No docstrings on these models: they would be published.)
class Message(Result):
    model_config = ConfigDict(extra="forbid", serialize_by_alias=True, validate_by_name=True, validate_by_alias=True)

    id: str
    from_: str = Field(alias="from")
    to: str  #: an agent (`A` or `A:session`), `*` (every agent) or `operators`
    subject: str | None = Field(default=None, exclude_if=_absent)
    body: str
    task_key: str | None = Field(default=None, exclude_if=_absent)
    reply_to: str | None = Field(default=None, exclude_if=_absent)
    at: str
    read: bool  #: acknowledged (by this reader, for a message to every agent)


# Unread messages for the caller: how many, and in restore_state the newest few.
class Inbox(Result):
    unread: int
    messages: list[Message] | None = Field(default=None, exclude_if=_absent)


# What claim and heartbeat answers carry when messages wait: how many.
class Unread(Result):
    unread: int


class TaskEvent(Result):
    """One transition of a task (see tasks/events.py for the kinds)."""

    kind: str
    actor: str
    attempt: int
    detail: dict[str, Any] | None
    created_at: str


class TaskStory(Result):
    """Everything about one task, for people (`mcp-harness tasks show KEY`)."""

    task: TaskDetail
    events: list[TaskEvent]
    progress: list[ProgressEntry]  #: entries about the task, oldest first
    messages: list[Message] = Field(default_factory=list)  #: messages naming the task, oldest first

    @field_serializer("progress", mode="wrap")
    def _progress(self, value: Any, handler: SerializerFunctionWrapHandler, info: FieldSerializationInfo) -> Any:
        """With `EVERY_FIELD` (the CLI's --json) the entries keep every field, as the task does."""
        if info.context and info.context.get("every_field"):
            return every_field(value)
        return handler(value)


class HeldTask(Lean):
    """A task the caller holds (or has waiting in review); fields at their defaults are left out."""

    key: str
    title: str
    description: str | None = None
    steps: list[str] = Field(default_factory=list)
    lease: Lease | None = None  #: none while the task waits in review
    status: TaskStatus = "claimed"
    review_comment: str | None = Field(default=None, exclude_if=_absent)
    last_error: str | None = Field(default=None, exclude_if=_absent)
    #: the task's newest notes and its dependencies' results
    context: TaskContext | None = Field(default=None, exclude_if=_absent)
    #: the path patterns its lease holds, exclusively and shared
    paths: list[str] | None = None
    shared_paths: list[str] | None = None


class You(Result):
    """Who the connection says the caller is."""

    agent: str
    role: Role


# What `message` answers: send {id, at}; read {messages, unread}; ack {acked}.
class MessageResult(Replayable):
    id: str | None = Field(default=None, exclude_if=_absent)
    at: str | None = Field(default=None, exclude_if=_absent)
    #: send: the addressee may not be who was meant (never seen here; a name several sessions share;
    #: the task is held by another session), and how to reach the right one
    warning: str | None = Field(default=None, exclude_if=_absent)
    messages: list[Message] | None = Field(default=None, exclude_if=_absent)
    unread: int | None = Field(default=None, exclude_if=_absent)
    acked: int | None = Field(default=None, exclude_if=_absent)


class RestoreStateResult(Result):
    you: You
    found: bool
    checkpoint: RestoredCheckpoint | None
    state: dict[str, Any] | None
    missing_paths: list[str] | None = Field(default=None, exclude_if=_absent)  #: only with `paths`
    recent_progress: list[ProgressEntry]
    my_tasks: list[HeldTask]
    task_counts: LeanCounts
    #: unread messages for the caller (the newest 5, and the count); absent when none
    inbox: Inbox | None = Field(default=None, exclude_if=_absent)

    @field_serializer("checkpoint", "recent_progress", mode="wrap")
    def _lean(self, value: Any, handler: SerializerFunctionWrapHandler, info: FieldSerializationInfo) -> Any:
        """The brief is read at the start of every session, so it leaves out what says nothing: unset
        fields of the checkpoint, and entries' `entry_id` (`seq` names an entry as well, and no tool
        takes either)."""
        out = handler(value)
        if info.field_name == "recent_progress":
            return [{k: v for k, v in e.items() if k != "entry_id"} for e in out]
        return out if out is None else {k: v for k, v in out.items() if v is not None}


class TaskSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    key: Name
    title: Annotated[str, Field(min_length=1, max_length=500), TEXT]
    description: str | None = None  #: limited by MAX_TEXT_CHARS
    steps: Annotated[list[Annotated[str, Field(max_length=STEP_CHARS)]], Field(max_length=100), TEXTS] = Field(
        default_factory=list, description="acceptance steps"
    )
    priority: Annotated[int, Field(ge=-1_000_000, le=1_000_000), WithJsonSchema({"type": "integer"})] = 0
    depends_on: Annotated[list[NameRef], Field(max_length=100), TEXTS] = Field(default_factory=list)
    tags: Annotated[list[Annotated[str, Field(min_length=1, max_length=TAG_CHARS)]], Field(max_length=32), TEXTS] = (
        Field(default_factory=list)
    )
    max_attempts: Annotated[int, Field(ge=1, le=100)] = 3
    review: bool = Field(default=False, description="complete waits for a person's approve")
    kind: TaskKind = Field(default="work", description="gate: a person's decision, never claimed")
    #: at most 50 patterns of at most 300 characters (checked by `paths.normalize_all`, not published)
    paths: list[str] = Field(default_factory=list, description="gitignore patterns a claim reserves")

    @field_validator("paths")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        return normalize_all(value)


class AddTasksResult(Replayable):
    created: list[str]
    unchanged: list[str]


class WaitingOn(Result):
    """A task at the root of what an empty claim waits on."""

    key: str
    status: TaskStatus
    owner: str | None
    retry_after: float | None  #: seconds until it may change by itself (a lease ends, a backoff ends)
    mine: bool | None = Field(default=None, exclude_if=lambda v: not v)  #: only `true`: the caller holds it
    #: a rejected gate's or task's review comment (what a person asked for)
    comment: str | None = Field(default=None, exclude_if=_absent)

    #: paths_reserved: the holder's patterns that clash
    paths: list[str] | None = Field(default=None, exclude_if=_absent)
    #: held by an agent: whole seconds since that agent's last call (when known)
    silent_seconds: int | None = Field(default=None, exclude_if=_absent)
    #: held by an agent: whether the process that took or renewed its lease still runs (null: unknown)
    alive: bool | None = None

    @model_serializer(mode="wrap")
    def _held(self, handler: SerializerFunctionWrapHandler) -> Any:
        """`alive` (null included) only on an entry an agent holds."""
        out = handler(self)
        if self.owner is None or self.status != Status.CLAIMED.value:
            out.pop("alive", None)
        return out


#: what the task in a claim leaves out: its lease says it (the holder is the caller, the attempt, when)
SAID_BY_THE_LEASE = frozenset({"owner", "attempts", "updated_at"})


class ClaimTaskResult(Replayable):
    #: the task claimed; it carries no copy of its lease, nor what the lease says (`SAID_BY_THE_LEASE`)
    task: HandedTask | None
    lease: Lease | None
    reason: ClaimReason | None = None
    waiting_on: list[WaitingOn] | None = None
    retry_after: float | None = None  #: seconds until what it waits on may change by itself
    #: none_pending for tags that match no task: the tags tasks have (at most 20)
    inbox: Unread | None = Field(default=None, exclude_if=_absent)  #: when above 0
    known_tags: Annotated[list[str] | None, KEYS] = Field(default=None, exclude_if=_absent)

    @field_serializer("task", mode="wrap")
    def _without_the_lease(self, value: Any, handler: SerializerFunctionWrapHandler) -> Any:
        out = handler(value)
        return out if out is None else {k: v for k, v in out.items() if k not in SAID_BY_THE_LEASE}


class TaskRow(Lean):
    """A row of list_tasks; fields at their defaults are left out (see `Lean`)."""

    key: str
    title: str
    status: TaskStatus
    ready: bool  #: claimable now
    owner: str | None = None
    priority: int = 0
    attempts: int = 0
    depends_on: list[str] = Field(default_factory=list)
    review: bool = False
    kind: TaskKind = "work"
    paths: list[str] | None = None


class ListTasksResult(Result):
    tasks: list[TaskRow | FullTaskRow]  #: rows; with task_key, that task's every field
    counts: LeanCounts
    next_cursor: str | None


# -- the session runner (people's views: the CLI and the console) -----------------------------------

#: how a runner's session ended (`mcp_harness/runner/outcomes.py` decides which)
SessionOutcome = Literal[
    "completed",
    "in_review",
    "released",
    "failed",
    "no_progress",
    "max_turns",
    "stalled",
    "timed_out",
    "crashed",
    "rate_limited",
    "setup_error",
    "stopped",
]


class SessionRecord(Result):
    """One agent session a runner started: its task, identity, how it went and how it ended."""

    id: str  #: the session's UUID
    runner: str
    slot: int  #: counts from 1
    agent: str
    task_key: str | None
    kind: Literal["work", "initializer"]
    started_at: str
    ended_at: str | None = None
    outcome: SessionOutcome | None = None  #: None while it runs
    exit_code: int | None = None
    turns: int | None = None
    cost_usd: float | None = None  #: as the agent reported it; None when unknown
    last_tool: str | None = None
    last_words: str | None = None
    transcript: str | None = None  #: the stream's file
    stop_requested_by: str | None = None
    #: only `true`: still open, but its runner is gone (died without a word; a live runner settles it)
    runner_gone: bool | None = Field(default=None, exclude_if=lambda v: not v)


class RunnerRecord(Result):
    """A live `mcp-harness run` process."""

    id: str
    host: str
    pid: int
    started_at: str
    seen_at: str
    waiting: str | None = None  #: what it waits on, when nothing is claimable

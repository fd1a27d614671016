"""One argument model per tool: the only place a tool's parameters are written.

The MCP adapter publishes each model's fields as the tool's flat input schema and validates calls with
it, the service takes the model (built in code, it refuses bad fields as the tool does), and the
idempotency fingerprint is the model's fields but the key. Limits that depend on settings (text and
value sizes, nesting depth) stay with the service, which knows them.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal, Self, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema, field_validator, model_validator
from pydantic_core import PydanticCustomError

from mcp_harness.config import (
    LABEL_CHARS,
    LEASE_SECONDS,
    MAX_INT,
    MESSAGE_BODY_BYTES,
    NAME_PATTERN,
    NEXT_STEPS,
    STEP_CHARS,
    TAG_CHARS,
    check_no_nul,
)
from mcp_harness.errors import InvalidArgument
from mcp_harness.models import NameRef, ProgressStatus, TaskSpec, TaskStatus
from mcp_harness.tasks.rules import ToolAction

Name = Annotated[str, Field(pattern=NAME_PATTERN)]
Label = Annotated[str | None, Field(max_length=LABEL_CHARS), WithJsonSchema({"type": ["string", "null"]})]
#: a list of strings, its bounds checked and not published (see models.TEXT)
Texts = WithJsonSchema({"type": ["array", "null"], "items": {"type": "string"}})
#: a version number: checked up to MAX_INT, published without that maximum (2**53 - 1 tells nobody anything)
Version = Annotated[int, Field(ge=1, le=MAX_INT), WithJsonSchema({"minimum": 1, "type": "integer"})]
#: length checked by the service (1-200 characters); published as a string (null means "no key")
IdemKey = Annotated[
    str | None,
    WithJsonSchema({"type": "string"}),
    Field(description="a fresh unique id per request (e.g. a UUID), reused only to retry that same request"),
]
#: list_tasks `status`: one status or a list of them
STATUS_SCHEMA = WithJsonSchema({"type": ["string", "array"], "items": {"enum": list(get_args(TaskStatus))}})
#: the arguments that are JSON values, stored as JSON text, where any string may be (U+0000 included),
#: and `paths`, JSON Pointers into such a value
JSON_VALUE_ARGUMENTS = frozenset({"state", "metadata", "artifacts", "result", "paths"})


def described(text: str) -> Any:
    """A one-line description, published on the argument: every byte is an agent's context."""
    return Field(description=text)


def _published(schema: dict[str, Any]) -> None:
    """Publish the parameters alone, as they were before these models: the tool has its own description,
    and unknown arguments get a message naming the allowed ones (see `HarnessServer.call_tool`)."""
    schema.pop("description", None)
    schema.pop("additionalProperties", None)


class ToolArgs(BaseModel):
    """The arguments of the tool named `tool`. Unknown fields are refused (the MCP adapter names them)."""

    # built when first used, not at import (as `models.Result`)
    model_config = ConfigDict(extra="forbid", json_schema_extra=_published, defer_build=True)

    tool: ClassVar[str]

    @model_validator(mode="after")
    def _no_nul(self) -> Self:
        """Refuse U+0000 in every argument but the JSON values (see `config.check_no_nul`): one rule
        for both backends, wherever the call comes from."""
        for name in type(self).model_fields:
            if name not in JSON_VALUE_ARGUMENTS:
                check_no_nul(name, getattr(self, name))
        return self

    def __init__(self, **data: Any) -> None:
        """A model built in code (the CLI, the console, the runner) refuses bad fields as the tool does:
        `invalid_argument`, one line naming them (a tool call's arguments are validated by `model_validate`)."""
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise invalid_argument(exc) from None

    def fingerprint(self) -> dict[str, Any]:
        """Every argument but idempotency_key: what a retry with the same key must repeat exactly."""
        return {name: getattr(self, name) for name in type(self).model_fields if name != "idempotency_key"}


class SaveCheckpointArgs(ToolArgs):
    tool = "save_checkpoint"

    state: dict[str, Any]
    thread: Name = "main"
    mode: Annotated[
        Literal["replace", "merge"],
        described("replace keeps only what state holds; merge: RFC 7396 patch (arrays whole, null deletes)"),
    ] = "replace"
    label: Label = None
    metadata: dict[str, Any] | None = None
    expected_version: Annotated[
        int | None,
        Field(ge=0, le=MAX_INT),
        WithJsonSchema({"minimum": 0, "type": ["integer", "null"]}),
        described("refuse unless the thread is at it; 0: new"),
    ] = None
    fork_from: Annotated[
        str | None,
        Field(max_length=200),
        WithJsonSchema({"type": ["string", "null"]}),
        described(
            "checkpoint_id to fork (a new thread): merge patches a copy of its state, replace starts from `state`"
        ),
    ] = None
    idempotency_key: IdemKey = None

    def fingerprint(self) -> dict[str, Any]:
        # Without fork_from when not given: keys stored before it existed still match their retries.
        out = super().fingerprint()
        if out["fork_from"] is None:
            del out["fork_from"]
        return out


class RestoreStateArgs(ToolArgs):
    tool = "restore_state"

    thread: NameRef = "main"
    version: Version | None = None
    checkpoint_id: str | None = None
    label: Label = None
    paths: Annotated[
        list[Annotated[str, Field(max_length=1000)]] | None,
        Field(max_length=100),
        Texts,
        described("JSON Pointers: only these parts, answered as state {pointer: value}"),
    ] = None
    progress_limit: Annotated[
        int, Field(ge=0, le=100), WithJsonSchema({"type": "integer"}), described("newest progress entries, all threads")
    ] = 5
    query: Annotated[str | None, text_arg(500, "full-text search: best matches, not newest")] = None


class ListCheckpointsArgs(ToolArgs):
    tool = "list_checkpoints"

    thread: NameRef = "main"
    limit: Annotated[int, Field(ge=1, le=200), WithJsonSchema({"type": "integer"})] = 20
    before_version: Version | None = None


class RecordProgressArgs(ToolArgs):
    tool = "record_progress"

    summary: Annotated[str, Field(min_length=1), WithJsonSchema({"type": "string"})]
    thread: Annotated[NameRef, described("a tag: one log per workspace")] = "main"
    status: ProgressStatus = "note"
    details: str | None = None
    next_steps: Annotated[
        list[Annotated[str, Field(max_length=STEP_CHARS)]] | None, Field(max_length=NEXT_STEPS), Texts
    ] = None
    task_key: Annotated[NameRef | None, described("the task this is about")] = None
    artifacts: dict[str, Any] | None = None
    idempotency_key: IdemKey = None


class AddTasksArgs(ToolArgs):
    tool = "add_tasks"

    tasks: Annotated[list[TaskSpec], Field(min_length=1)]
    idempotency_key: IdemKey = None

    def fingerprint(self) -> dict[str, Any]:
        return {"tasks": [spec.model_dump(mode="json") for spec in self.tasks]}


class ClaimTaskArgs(ToolArgs):
    tool = "claim_task"

    lease_seconds: Annotated[
        int, Field(ge=LEASE_SECONDS[0], le=LEASE_SECONDS[1]), described("heartbeat before it ends")
    ] = 900
    tags: Annotated[
        list[Annotated[str, Field(max_length=TAG_CHARS)]] | None,
        Field(max_length=32),
        Texts,
        described("only tasks with one of these"),
    ] = None
    task_key: Annotated[NameRef | None, described("this task only")] = None
    wait_seconds: Annotated[float, Field(ge=0, le=60), described("wait this long for a claimable task")] = 0
    idempotency_key: IdemKey = None


class UpdateTaskArgs(ToolArgs):
    tool = "update_task"

    task_key: NameRef
    action: ToolAction
    lease_token: Annotated[str | None, described("claim's lease.token")] = None
    lease_seconds: Annotated[
        int | None,
        Field(ge=LEASE_SECONDS[0], le=LEASE_SECONDS[1]),
        described("heartbeat: new length"),
    ] = None
    result: Annotated[Any, described("complete: any JSON the next tasks may need")] = None
    verification: Annotated[str | None, described("complete (required): how each step was verified")] = None
    error: Annotated[str | None, described("fail: what went wrong")] = None
    retry: Annotated[bool, described("fail: false fails now, no retry")] = True
    reason: Annotated[str | None, described("reopen, cancel, release: why (the next claimer reads it)")] = None
    comment: Annotated[str | None, described("approve (optional), reject (required): the reviewer's note")] = None
    #: at most 50 patterns of at most 300 characters (checked by `paths.normalize_all`, not published)
    paths: Annotated[list[str] | None, described("reserve/unreserve: gitignore patterns")] = None
    shared: Annotated[bool, described("reserve: shared, not exclusive")] = False
    idempotency_key: IdemKey = None

    def fingerprint(self) -> dict[str, Any]:
        # Without paths and shared when not given: keys stored before they existed still match their retries.
        out = super().fingerprint()
        if out["paths"] is None:
            del out["paths"]
        if not out["shared"]:
            del out["shared"]
        return out


class ListTasksArgs(ToolArgs):
    tool = "list_tasks"

    #: one status or a list; published with the statuses once (a single one is checked against the same list)
    status: Annotated[
        TaskStatus | list[TaskStatus] | None, STATUS_SCHEMA, described("default: all but done, cancelled")
    ] = None
    ready: Annotated[bool | None, WithJsonSchema({"type": "boolean"}), described("true: only tasks claimable now")] = (
        None
    )
    tag: Annotated[str | None, Field(max_length=TAG_CHARS), WithJsonSchema({"type": ["string", "null"]})] = None
    task_key: Annotated[NameRef | None, described("one task in full, any status")] = None
    limit: Annotated[int, Field(ge=1, le=500)] = 50
    cursor: Annotated[str | None, described("next_cursor of the last page")] = None
    query: Annotated[str | None, text_arg(500, "full-text search")] = None

    @field_validator("status", mode="before")
    @classmethod
    def _known_status(cls, value: Any) -> Any:
        """One line naming the statuses, where pydantic would explain both arms of the union (300+ bytes)."""
        given = value if isinstance(value, list) else [value]
        if value is not None and not all(isinstance(v, str) and v in get_args(TaskStatus) for v in given):
            statuses = ", ".join(get_args(TaskStatus))
            raise PydanticCustomError("status", f"one status or a list of them, each one of: {statuses}")
        return value


#: a string argument published as a plain string (its length limit and null are checked, not published: every
#: byte of the schema is an agent's context)
def text_arg(max_length: int, description: str) -> Any:
    return Field(max_length=max_length, description=description, json_schema_extra=_plain_string)


def _plain_string(schema: dict[str, Any]) -> None:
    schema.pop("maxLength", None)
    schema.pop("anyOf", None)
    schema["type"] = "string"


class MessageArgs(ToolArgs):
    tool = "message"

    action: Literal["send", "read", "ack"]
    to: Annotated[str | None, text_arg(200, "send: agent, * (every agent) or operators (people)")] = None
    body: Annotated[str | None, text_arg(MESSAGE_BODY_BYTES * 4, "send")] = None  #: bytes: checked by the service
    subject: Annotated[str | None, text_arg(LABEL_CHARS, "send")] = None
    task_key: Annotated[str | None, text_arg(128, "send: its task")] = None
    reply_to: Annotated[str | None, text_arg(200, "send: id answered")] = None
    unread_only: Annotated[bool, described("read")] = True
    limit: Annotated[int, Field(ge=1, le=200), WithJsonSchema({"type": "integer", "default": 20})] = 20
    ids: Annotated[
        list[Annotated[str, Field(max_length=200)]] | None,
        Field(max_length=200),
        WithJsonSchema({"type": "array", "items": {"type": "string"}, "description": "ack"}),
    ] = None
    idempotency_key: IdemKey = None


#: what stands for an argument that held an unpaired surrogate escape (`"\\ud8ac"`: valid JSON text, not
#: valid Unicode); the transports put it there (`mark_unpaired_surrogates`), the MCP adapter refuses it
UNPAIRED_SURROGATE = "\x00mcp-harness: an unpaired surrogate\x00"
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _holds_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return _LONE_SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(_holds_lone_surrogate(k) or _holds_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_lone_surrogate(v) for v in value)
    return False


def mark_unpaired_surrogates(message: Any) -> bool:
    """In a parsed `tools/call` request, replace each argument that holds an unpaired surrogate with
    `UNPAIRED_SURROGATE`, so that the call is answered `[invalid_argument]` naming the argument rather
    than refused whole. True when something was marked and the message is valid Unicode now."""
    params = message.get("params") if isinstance(message, dict) and message.get("method") == "tools/call" else None
    arguments = params.get("arguments") if isinstance(params, dict) else None
    if not isinstance(arguments, dict):
        return False
    try:
        bad = [name for name, value in arguments.items() if _holds_lone_surrogate(value)]
        for name in bad:
            arguments[name] = UNPAIRED_SURROGATE
        return bool(bad) and not _holds_lone_surrogate(message)
    except RecursionError:
        return False


def validation_message(exc: ValidationError) -> str:
    """The first few failures as `field: what is wrong`, without the values given (they are the caller's data)."""
    parts = []
    for err in exc.errors()[:5]:
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".")
        parts.append(f"{loc or 'arguments'}: {err['msg']}")
    more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
    return "; ".join(parts) + more


def invalid_argument(exc: ValidationError) -> InvalidArgument:
    return InvalidArgument(validation_message(exc))

"""One argument model per tool: the only place a tool's parameters are written.

The MCP adapter publishes each model's fields as the tool's flat input schema and validates calls with
it, the service takes the model (or its fields as keywords, validated by the same model), and the
idempotency fingerprint is the model's fields but the key. Limits that depend on settings (text and
value sizes, nesting depth) stay with the service, which knows them.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Self, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema, model_validator

from .config import LEASE_SECONDS, MAX_INT, NAME_PATTERN, check_no_nul
from .errors import InvalidArgument
from .models import ProgressStatus, TaskSpec, TaskStatus

Name = Annotated[str, Field(pattern=NAME_PATTERN)]
Label = Annotated[str | None, Field(max_length=200)]
IdemKey = str | None  # length checked by the service (1-200 characters)
Action = Literal["heartbeat", "complete", "fail", "release", "reopen", "approve", "reject", "retry_now", "cancel"]
#: list_tasks `status`: one status or a list of them
STATUS_SCHEMA = WithJsonSchema({"type": ["string", "array"], "items": {"enum": list(get_args(TaskStatus))}})
#: the arguments that are JSON values, stored as JSON text, where any string may be (U+0000 included),
#: and `paths`, JSON Pointers into such a value
JSON_VALUE_ARGUMENTS = frozenset({"state", "metadata", "artifacts", "result", "paths"})


def _published(schema: dict[str, Any]) -> None:
    """Publish the parameters alone, as they were before these models: the tool has its own description,
    and unknown arguments get a message naming the allowed ones (see `HarnessServer.call_tool`)."""
    schema.pop("description", None)
    schema.pop("additionalProperties", None)


class ToolArgs(BaseModel):
    """The arguments of the tool named `tool`. Unknown fields are refused (the MCP adapter names them)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_published)

    tool: ClassVar[str]

    @model_validator(mode="after")
    def _no_nul(self) -> Self:
        """Refuse U+0000 in every argument but the JSON values (see `config.check_no_nul`): one rule
        for both backends, wherever the call comes from."""
        for name in type(self).model_fields:
            if name not in JSON_VALUE_ARGUMENTS:
                check_no_nul(name, getattr(self, name))
        return self

    @classmethod
    def of(cls, args: Self | None, fields: dict[str, Any]) -> Self:
        """`args` itself, or the model of `fields` given as keywords instead."""
        if args is None:
            try:
                return cls(**fields)
            except ValidationError as exc:
                raise invalid_argument(exc) from None
        if fields:
            raise TypeError(f"pass {cls.__name__} or its fields as keywords, not both")
        return args

    def fingerprint(self) -> dict[str, Any]:
        """Every argument but idempotency_key: what a retry with the same key must repeat exactly."""
        return {name: getattr(self, name) for name in type(self).model_fields if name != "idempotency_key"}


class SaveCheckpointArgs(ToolArgs):
    tool = "save_checkpoint"

    state: dict[str, Any]
    thread: Name = "main"
    mode: Literal["replace", "merge"] = "replace"
    label: Label = None
    metadata: dict[str, Any] | None = None
    expected_version: Annotated[int | None, Field(ge=0, le=MAX_INT)] = None  #: 0 = no checkpoint yet
    idempotency_key: IdemKey = None


class RestoreStateArgs(ToolArgs):
    tool = "restore_state"

    thread: Name = "main"
    version: Annotated[int | None, Field(ge=1, le=MAX_INT)] = None
    checkpoint_id: str | None = None
    label: Label = None
    paths: Annotated[list[Annotated[str, Field(max_length=1000)]] | None, Field(max_length=100)] = None
    progress_limit: Annotated[int, Field(ge=0, le=100)] = 5


class ListCheckpointsArgs(ToolArgs):
    tool = "list_checkpoints"

    thread: Name = "main"
    limit: Annotated[int, Field(ge=1, le=200)] = 20
    before_version: Annotated[int | None, Field(ge=1, le=MAX_INT)] = None


class RecordProgressArgs(ToolArgs):
    tool = "record_progress"

    summary: Annotated[str, Field(min_length=1)]
    thread: Name = "main"
    status: ProgressStatus = "note"
    details: str | None = None
    next_steps: Annotated[list[Annotated[str, Field(max_length=4000)]] | None, Field(max_length=50)] = None
    task_key: Name | None = None
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

    lease_seconds: Annotated[int, Field(ge=LEASE_SECONDS[0], le=LEASE_SECONDS[1])] = 900
    tags: Annotated[list[Annotated[str, Field(max_length=64)]] | None, Field(max_length=32)] = None
    task_key: Name | None = None
    wait_seconds: Annotated[float, Field(ge=0, le=60)] = 0  #: long-poll this long for a claimable task
    idempotency_key: IdemKey = None


class UpdateTaskArgs(ToolArgs):
    tool = "update_task"

    task_key: Name
    action: Action
    lease_token: str | None = None
    lease_seconds: Annotated[int | None, Field(ge=LEASE_SECONDS[0], le=LEASE_SECONDS[1])] = None
    result: Any = None
    verification: str | None = None
    error: str | None = None
    retry: bool = True
    reason: str | None = None
    comment: str | None = Field(default=None, description="approve, reject (required): the reviewer's note")
    idempotency_key: IdemKey = None


class ListTasksArgs(ToolArgs):
    tool = "list_tasks"

    #: one status or a list; published with the statuses once (a single one is checked against the same list)
    status: Annotated[TaskStatus | list[TaskStatus] | None, STATUS_SCHEMA] = None
    ready: Annotated[bool | None, WithJsonSchema({"type": "boolean"})] = None  #: true: only tasks claimable now
    tag: Annotated[str | None, Field(max_length=64)] = None
    limit: Annotated[int, Field(ge=1, le=500)] = 50
    cursor: str | None = None


#: every tool's argument model, in the order tools are listed
ALL_ARGS: tuple[type[ToolArgs], ...] = (
    SaveCheckpointArgs,
    RestoreStateArgs,
    ListCheckpointsArgs,
    RecordProgressArgs,
    AddTasksArgs,
    ClaimTaskArgs,
    UpdateTaskArgs,
    ListTasksArgs,
)


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

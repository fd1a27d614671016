"""The MCP tools: for each, its argument and result models, the description an agent reads, its hints, and
the one service call it makes. What a model reads of these is its context: every byte must earn its place.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

from mcp.types import Tool, ToolAnnotations
from pydantic import BaseModel

from mcp_harness.arguments import (
    AddTasksArgs,
    ClaimTaskArgs,
    ListCheckpointsArgs,
    ListTasksArgs,
    MessageArgs,
    RecordProgressArgs,
    RestoreStateArgs,
    SaveCheckpointArgs,
    ToolArgs,
    UpdateTaskArgs,
)
from mcp_harness.identity import Identity
from mcp_harness.mcp.schema_text import compact_schema
from mcp_harness.models import (
    AddTasksResult,
    ClaimTaskResult,
    ListCheckpointsResult,
    ListTasksResult,
    MessageResult,
    RecordProgressResult,
    RestoreStateResult,
    SaveCheckpointResult,
    UpdateTaskAnswer,
)

R = TypeVar("R", bound=BaseModel)

if TYPE_CHECKING:  # the service (SQLAlchemy and all) is imported when the database is opened
    from mcp_harness.service import Harness


async def with_inbox(h: Harness, who: Identity, result: R) -> R:
    """`result` with `inbox: {unread}` when its model has the field and messages wait for the caller."""
    if "inbox" not in type(result).model_fields:
        return result
    found = await h.inbox(who)
    return result.model_copy(update={"inbox": found}) if found is not None else result


#: a tool's body: the open harness, the caller, the validated arguments -> the result model
Call = Callable[["Harness", Identity, Any], Awaitable[BaseModel]]


@dataclass(frozen=True)
class HarnessTool:
    """One tool, and what its calls do besides their service call (the server applies these)."""

    args: type[ToolArgs]
    result: type[BaseModel]
    description: str
    call: Call
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    #: its answer carries the caller's unread messages where the answer's model has `inbox` (a heartbeat's)
    inbox: bool = False
    #: its answer is the caller's outcome on its contact row: what a claim got, or the task an action let go
    outcome: bool = False
    #: its answer's `lease`, or its `lease_token`, is a lease the connection took or used (stdio ends them)
    leases: bool = False

    @property
    def name(self) -> str:
        return self.args.tool

    @cached_property
    def published(self) -> Tool:
        """The tools/list entry: flat parameters and the result's whole schema (nested types in `$defs`), both
        without pydantic's titles. A model reads the input side; clients validate results with the output."""
        output = self.result.model_json_schema()
        return Tool(
            name=self.name,
            description=self.description,
            input_schema=compact_schema(self.args.model_json_schema(by_alias=True)),
            output_schema=compact_schema(output, output=True),
            # Only the hints that differ from the protocol's defaults: every byte is an agent's context.
            annotations=ToolAnnotations(read_only_hint=True)
            if self.read_only
            else ToolAnnotations(destructive_hint=self.destructive, idempotent_hint=self.idempotent or None),
        )

    def parse(self, arguments: dict[str, Any]) -> ToolArgs:
        """Validate a call's arguments into the model. As the SDK does, a string holding a JSON array or
        object is parsed for a parameter that is not a plain string (some clients send lists that way)."""
        data = dict(arguments)
        for name, value in arguments.items():
            field = self.args.model_fields.get(name)
            if field is None or not isinstance(value, str) or field.annotation is str:
                continue
            try:
                parsed = json.loads(value)
            except (ValueError, RecursionError):
                continue  # not JSON: validation accepts or refuses the string itself
            if not isinstance(parsed, str | int | float):
                data[name] = parsed
        return self.args.model_validate(data)


TOOLS: tuple[HarnessTool, ...] = (
    HarnessTool(
        SaveCheckpointArgs,
        SaveCheckpointResult,
        "Save state as the thread's next version.",
        lambda h, who, a: h.checkpoints.save(who, a),
    ),
    HarnessTool(
        RestoreStateArgs,
        RestoreStateResult,
        "Resume brief: the thread's latest state (or version/checkpoint_id/label), recent progress, tasks "
        "you hold, inbox, task counts.",
        lambda h, who, a: h.restore(who, a),
        read_only=True,
    ),
    HarnessTool(
        ListCheckpointsArgs,
        ListCheckpointsResult,
        "Checkpoint metadata, newest first; page with before_version=next_before_version.",
        lambda h, who, a: h.checkpoints.list(who, a),
        read_only=True,
    ),
    HarnessTool(
        RecordProgressArgs,
        RecordProgressResult,
        "Append to the progress log: what was done and how verified, next_steps, artifacts (files, commit).",
        lambda h, who, a: h.progress.record(who, a),
    ),
    HarnessTool(
        AddTasksArgs,
        AddTasksResult,
        "Add tasks: higher priority first, depends_on = keys done first. Identical "
        "re-adds are no-ops; a used key with other content is refused.",
        lambda h, who, a: h.tasks.add(who, a),
        idempotent=True,
    ),
    HarnessTool(
        ClaimTaskArgs,
        ClaimTaskResult,
        "Claim the best claimable task, under a lease; task.context: notes, dependencies' results. "
        "task null: reason says why.",
        lambda h, who, a: h.tasks.claim(who, a),  # its answer carries the inbox (read with the claim)
        outcome=True,
        leases=True,
    ),
    HarnessTool(
        UpdateTaskArgs,
        UpdateTaskAnswer,
        "heartbeat, complete, fail (backs off, retries), release, reserve, unreserve: need lease_token. reopen "
        "revives a done/failed task. Operator only: approve, reject, retry_now, cancel, reopen cancelled.",
        lambda h, who, a: h.tasks.update(who, a),
        inbox=True,
        outcome=True,
        leases=True,
    ),
    HarnessTool(
        ListTasksArgs,
        ListTasksResult,
        "Compact task rows (creation order) and workspace-wide counts.",
        lambda h, who, a: h.tasks.list(who, a),
        read_only=True,
    ),
    HarnessTool(
        MessageArgs,
        MessageResult,
        "Messages for agents and people. read: newest first, acknowledges nothing; ack ids so they stop coming back.",
        lambda h, who, a: h.messages.act(who, a),
    ),
)

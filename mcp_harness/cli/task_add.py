"""`mcp-harness tasks add`: a person plans without an agent, from a file (a JSON list of tasks in
`add_tasks`' shape, or JSON Lines) or one task from flags. All or nothing, answered as `add_tasks` is."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from mcp_harness.cli.common import person, with_harness
from mcp_harness.errors import InvalidArgument

#: the flags that describe one task (refused beside --file)
TASK_FLAGS = ("title", "description", "step", "depends_on", "paths", "tag", "priority", "review", "gate")


def read_tasks(path: str) -> list[Any]:
    """The tasks of a file: a JSON list (or `{"tasks": [...]}`), or one JSON object a line."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidArgument(f"--file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InvalidArgument(f"--file {path}: not UTF-8 text") from None
    try:
        value = json.loads(text)
    except ValueError:
        value = None
        lines = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InvalidArgument(
                    f"--file {path}: line {number} is not JSON ({exc.msg}); give a JSON list of tasks or one "
                    "JSON object per line"
                ) from None
        value = lines
    if isinstance(value, dict) and isinstance(value.get("tasks"), list):
        value = value["tasks"]
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list) or not value:
        raise InvalidArgument(f"--file {path}: no tasks: give a JSON list of tasks (each with key and title)")
    return value


def from_flags(args: argparse.Namespace, key: str) -> dict[str, Any]:
    if not args.title:
        raise InvalidArgument("tasks add KEY needs --title (or --file FILE for many tasks)")
    task: dict[str, Any] = {"key": key, "title": args.title}
    if args.description is not None:
        task["description"] = args.description
    for flag, field in (("step", "steps"), ("depends_on", "depends_on"), ("paths", "paths"), ("tag", "tags")):
        if getattr(args, flag):
            task[field] = list(getattr(args, flag))
    if args.priority is not None:
        task["priority"] = args.priority
    if args.review:
        task["review"] = True
    if args.gate:
        task["kind"] = "gate"
    return task


def add(args: argparse.Namespace, key: str | None) -> int:
    """`tasks add KEY --title T ...` or `tasks add --file FILE`."""
    if args.file is not None:
        if key is not None:
            raise InvalidArgument("tasks add --file FILE takes no KEY: the file names each task's key")
        given = [f"--{f.replace('_', '-')}" for f in TASK_FLAGS if getattr(args, f) not in (None, False, [])]
        if given:
            raise InvalidArgument(f"{', '.join(given)}: flags of one task; with --file, put them in the file")
        tasks = read_tasks(args.file)
    elif key is not None:
        tasks = [from_flags(args, key)]
    else:
        raise InvalidArgument("use `tasks add KEY --title T [...]` or `tasks add --file FILE`")
    from mcp_harness.arguments import AddTasksArgs

    who = person(args)
    try:
        checked = AddTasksArgs.model_validate({"tasks": tasks})
    except ValueError as exc:
        raise InvalidArgument(_named(exc, tasks)) from None

    async def run(h: Any) -> int:
        result = await h.tasks.add(who, checked)
        if args.json:
            print(json.dumps(result.model_dump(mode="json"), indent=2))
            return 0
        if result.created:
            print(f"added {len(result.created)} task(s): {', '.join(result.created)}")
        if result.unchanged:
            print(f"unchanged (already there, the same): {', '.join(result.unchanged)}")
        return 0

    return with_harness(args, run)


def _named(exc: Exception, tasks: list[Any]) -> str:
    """A validation failure naming the task (by key where it has one) and the field."""
    from pydantic import ValidationError

    from mcp_harness.arguments import validation_message

    if not isinstance(exc, ValidationError):
        return str(exc)
    parts = []
    for err in exc.errors()[:5]:
        loc = list(err["loc"])
        where = "tasks"
        if len(loc) >= 2 and loc[0] == "tasks" and isinstance(loc[1], int):
            index = loc[1]
            key = tasks[index].get("key") if index < len(tasks) and isinstance(tasks[index], dict) else None
            where = f"task {key!r}" if isinstance(key, str) else f"task #{index + 1}"
            loc = loc[2:]
        field = ".".join(str(p) for p in loc) or "task"
        parts.append(f"{where}: {field}: {err['msg']}")
    return "; ".join(parts) or validation_message(exc)

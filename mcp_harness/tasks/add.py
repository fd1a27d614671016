"""Adding tasks: checks, dependency flags, fan-in counts, and the exactly-once insert."""

from __future__ import annotations

from typing import Any

from mcp_harness.arguments import AddTasksArgs
from mcp_harness.base import Identity, ServiceBase
from mcp_harness.config import Settings
from mcp_harness.errors import InvalidArgument, TaskConflict, TooLarge
from mcp_harness.jsonvalue import canonical, dumps, value_hash
from mcp_harness.models import AddTasksResult, TaskSpec
from mcp_harness.store import Connection, Database
from mcp_harness.store.common import now
from mcp_harness.store.records import TaskRecord
from mcp_harness.tasks.events import event, logged
from mcp_harness.tasks.graph import topological_order
from mcp_harness.tasks.rules import Status, dependency_flags
from mcp_harness.tasks.store import tasks as store
from mcp_harness.tasks.wait import Wakeup

#: adding this many tasks (through this process, since the last time) refreshes planner statistics
STATISTICS_BATCH = 50


class TaskAdder(ServiceBase):
    """Adds tasks (the add_tasks tool), waking waiting claims when any were created."""

    def __init__(self, db: Database, settings: Settings, wakeup: Wakeup) -> None:
        super().__init__(db, settings)
        self.wakeup = wakeup
        self._added_since_statistics = 0

    async def add(self, ident: Identity, args: AddTasksArgs) -> AddTasksResult:
        """Add tasks; identical re-adds are no-ops."""
        specs = self._check_specs(args.tasks)
        hashes = {k: value_hash(canonical(content(s), what=f"task {k!r}")) for k, s in specs.items()}

        async def body(conn: Connection) -> AddTasksResult:
            return await self._insert(conn, ident, specs, hashes)

        result = await self.exactly_once(ident, args, AddTasksResult, body)
        if result.created:
            self.wakeup.notify(ident.workspace)
        self._added_since_statistics += len(result.created)
        if self._added_since_statistics >= STATISTICS_BATCH:
            # many new tasks change what the planner should expect of a claim (see refresh_statistics)
            self._added_since_statistics = 0
            async with self.db.single() as conn:
                await store.refresh_statistics(conn)
        return result

    def _check_specs(self, tasks: list[TaskSpec]) -> dict[str, TaskSpec]:
        """The tasks by key, refusing an empty or over-long list, a key given twice, an over-long description."""
        if not tasks:
            raise InvalidArgument("tasks must hold at least one task")
        if len(tasks) > self.limits.max_tasks_per_call:
            raise InvalidArgument(f"at most {self.limits.max_tasks_per_call} tasks per call, got {len(tasks)}")
        specs = {}
        for spec in tasks:
            if spec.key in specs:
                raise InvalidArgument(f"task key {spec.key!r} appears twice in this call")
            if spec.kind == "gate" and spec.review:
                raise InvalidArgument(f"task {spec.key!r}: a gate is a person's decision already; review is for work")
            if spec.description is not None and len(spec.description) > self.limits.max_text_chars:
                raise TooLarge(
                    f"task {spec.key!r}: description is {len(spec.description)} characters, "
                    f"over the limit of {self.limits.max_text_chars}"
                )
            specs[spec.key] = spec
        return specs

    async def _insert(
        self, conn: Connection, ident: Identity, specs: dict[str, TaskSpec], hashes: dict[str, str]
    ) -> AddTasksResult:
        """Insert the tasks not there yet; identical re-adds are no-ops, changed ones are refused."""
        wanted = list(specs) + [d for s in specs.values() for d in s.depends_on]
        existing = await store.get_many(conn, ident.workspace, wanted)
        unchanged, new = [], {}
        for key, spec in specs.items():
            if key in existing:
                if existing[key].content_hash != hashes[key]:
                    raise TaskConflict(
                        f"task {key!r} already exists with different content; tasks are never edited: "
                        "add the changed work under a new key"
                    )
                unchanged.append(key)
            else:
                new[key] = spec
        done = [k for k, row in existing.items() if row.status == Status.DONE and k not in specs]
        stale = await store.stale_among(conn, ident.workspace, done) if new else set()
        rows = _new_rows(ident, new, existing, hashes, stale)
        fan_in: dict[str, int] = {}
        for row in rows:
            for dep in row["_deps"]:
                fan_in[dep] = fan_in.get(dep, 0) + 1
        for row in rows:
            row["dependents"] = fan_in.pop(row["key"], 0)
        await store.add_dependents(conn, ident.workspace, fan_in)  # what is left names existing tasks
        # Insert in the caller's order so creation order (and claim age) follows the list given.
        position = {k: i for i, k in enumerate(specs)}
        rows.sort(key=lambda r: position[r["key"]])
        await store.insert(conn, ident.workspace, rows)
        at = rows[0]["created_at"] if rows else 0.0
        for row in rows:
            if row["status"] == Status.IN_REVIEW:  # a gate with nothing (left) to wait for: a person decides now
                await logged(conn, ident.workspace, row["key"], 0, event("submit", ident.agent), at)
        return AddTasksResult(created=[k for k in specs if k in new], unchanged=unchanged)


def content(spec: TaskSpec) -> dict[str, Any]:
    """What a task's content hash covers: the spec, without `review` and `kind` at their defaults (so
    tasks added before they existed hash as they did)."""
    fields = spec.model_dump(mode="json")
    if not fields["review"]:
        del fields["review"]
    if fields["kind"] == "work":
        del fields["kind"]
    if not fields["paths"]:
        del fields["paths"]
    return fields


def _new_rows(
    ident: Identity,
    new: dict[str, TaskSpec],
    existing: dict[str, TaskRecord],
    hashes: dict[str, str],
    stale: set[str],
) -> list[dict[str, Any]]:
    """The rows of the new tasks, dependencies first, each with its ready and blocked flags (`stale`: the
    existing done tasks behind a reopened dependency, which a new task waits on as on unfinished ones)."""
    order = topological_order(new, existing)
    at = now()
    flags: dict[str, tuple[bool, bool]] = {}
    rows = []
    for key in order:
        spec = new[key]
        deps = [
            (Status.PENDING, flags[dep][1], False)
            if dep in new
            else (existing[dep].status, existing[dep].blocked, existing[dep].key in stale)
            for dep in spec.depends_on
        ]
        flags[key] = ready, blocked = dependency_flags(deps)
        gate_open = spec.kind == "gate" and ready
        rows.append(
            {
                "workspace": ident.workspace,
                "key": key,
                "title": spec.title,
                "description": spec.description,
                "steps": dumps(spec.steps),
                "priority": spec.priority,
                "depends_on": dumps(spec.depends_on),
                "tags": dumps(spec.tags),
                "max_attempts": spec.max_attempts,
                "content_hash": hashes[key],
                "status": (Status.IN_REVIEW if gate_open else Status.PENDING).value,
                "ready": ready and spec.kind == "work",
                "blocked": blocked,
                "available_at": 0.0,
                "review": spec.review,
                "kind": spec.kind,
                "paths": dumps(spec.paths) if spec.paths else None,
                "added_by": ident.agent,
                "created_at": at,
                "updated_at": at,
                "_deps": list(dict.fromkeys(spec.depends_on)),
                "_tags": list(dict.fromkeys(spec.tags)),
            }
        )
    return rows

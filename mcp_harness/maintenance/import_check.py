"""Checks an export before `import` writes anything: each record with the rules and limits of the tools
that make such rows (names, enums, types, JSON columns, text and value limits), no duplicates, and the
references between records (the values a checkpoint names, a thread's latest checkpoint, the
dependencies and tags of tasks). Only keys, ids and sizes are kept, never the values themselves.

Every problem is an `InvalidArgument` that names the line. A task's `ready`, `blocked` and `dependents`
are derived from the statuses and dependencies, as the tools maintain them (`task_flags`); a status the
tools could never leave a task in, given its dependencies, is refused (a task claimed or in review
while a dependency is not done; a gate pending while every dependency is)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import ValidationError

from mcp_harness.checkpoints import manifest as manifests
from mcp_harness.checkpoints.manifest import Blob, Chain, Entry
from mcp_harness.config import NEXT_STEPS, STEP_CHARS, Limits
from mcp_harness.errors import DependencyError, InvalidArgument
from mcp_harness.jsonvalue import check_depth, value_hash
from mcp_harness.maintenance.import_records import HASH, LATER_FIELDS, fields, parse_json
from mcp_harness.messages.service import MAX_BODY_BYTES
from mcp_harness.models import TaskSpec
from mcp_harness.tasks.events import HARNESS
from mcp_harness.tasks.graph import topological_order
from mcp_harness.tasks.rules import Status, dependency_flags, may_be_ready


@dataclass
class TaskFacts:
    line: int
    status: Status
    depends_on: list[str]
    tags: set[str]
    kind: str = "work"
    deps_seen: set[str] = field(default_factory=set)  #: from task_dep records
    tags_seen: set[str] = field(default_factory=set)  #: from task_tag records


class ImportChecker:
    """Feed it every record in order (`record`), then call `finish`."""

    def __init__(self, limits: Limits, workspaces: list[str]) -> None:
        self.limits = limits
        self.fields = fields(limits)
        self.listed = set(workspaces)  #: the header's list
        self.workspaces: dict[str, int] = {}  #: name -> line
        self.progress_seq: dict[str, int] = {}  #: the counter each workspace record gives
        self.max_seq: dict[str, int] = {}
        self.threads: dict[tuple[str, str], tuple[int, int, str | None]] = {}  #: -> (line, latest version, id)
        self.newest: dict[tuple[str, str], tuple[int, str]] = {}  #: thread -> (version, id) of its newest
        self.blobs: dict[tuple[str, str], int] = {}  #: -> bytes
        self.segments: dict[tuple[str, int], tuple[int | None, int]] = {}  #: -> (prev, elements)
        self.seen: set[tuple[Any, ...]] = set()  #: unique keys of every kind
        self.tasks: dict[tuple[str, str], TaskFacts] = {}
        self.task_flags: dict[tuple[str, str], dict[str, Any]] = {}  #: filled by `finish`
        self.messages: dict[tuple[str, str], str] = {}  #: -> recipient
        self._chain_lengths: dict[tuple[str, int], int] = {}
        self._number = 0
        #: the check of each kind of record but `workspace` (which `_record` checks itself)
        self._checks: dict[str, Callable[[str, dict[str, Any]], None]] = {
            "runner": self._runner,
            "agent_session": self._agent_session,
            "thread": self._thread,
            "blob": self._blob,
            "segment": self._segment,
            "checkpoint": self._checkpoint,
            "progress": self._progress,
            "task": self._task,
            "task_dep": self._task_dep,
            "task_tag": self._task_tag,
            "task_event": self._task_event,
            "state_schema": self._state_schema,
            "message": self._message,
            "message_ack": self._message_ack,
        }

    # -- one record ------------------------------------------------------------------------------

    def record(self, number: int, kind: str, record: dict[str, Any]) -> str:
        """Check one record (without its `type`); returns its workspace."""
        self._number = number
        try:
            return self._record(kind, record)
        except InvalidArgument as exc:
            raise InvalidArgument(f"line {number}: {exc.message}") from None

    def _record(self, kind: str, record: dict[str, Any]) -> str:
        spec = self.fields.get(kind)
        if spec is None:
            raise InvalidArgument(f"unknown record type {kind!r}")
        for column, value in LATER_FIELDS.get(kind, {}).items():  # exports made before they existed
            record.setdefault(column, value)
        missing = [f for f in spec if f not in record]
        unknown = [f for f in record if f not in spec]
        if missing or unknown:
            what = f"has no {', '.join(missing)}" if missing else f"has unknown fields {', '.join(unknown)}"
            raise InvalidArgument(f"a {kind} record {what}")
        for column, (ok, must) in spec.items():
            if isinstance(record[column], str) and "\x00" in record[column]:  # the tools' NUL rule
                raise InvalidArgument(f"a {kind} record's {column} must not contain the NUL character (U+0000)")
            if not ok(record[column]):
                shown = repr(record[column])
                shown = shown if len(shown) <= 60 else shown[:57] + "..."
                raise InvalidArgument(f"a {kind} record's {column} must be {must}, not {shown}")
        ws = record["name"] if kind == "workspace" else record["workspace"]
        if kind == "workspace":
            if ws not in self.listed:
                raise InvalidArgument(f"workspace {ws!r} is not in the header's list of workspaces")
            self._unique(("workspace", ws), f"workspace {ws!r}")
            self.workspaces[ws] = self._number
            self.progress_seq[ws] = record["progress_seq"]
        elif ws not in self.workspaces:
            raise InvalidArgument(f"a {kind} record of workspace {ws!r} comes before that workspace's record")
        else:
            self._checks[kind](ws, record)
        return ws

    def _unique(self, key: tuple[Any, ...], what: str) -> None:
        if key in self.seen:
            raise InvalidArgument(f"{what} appears twice")
        self.seen.add(key)

    def _json(self, text: str, what: str, shape: type | None, max_bytes: int, depth: int | None = None) -> Any:
        size = len(text.encode())
        if size > max_bytes:
            raise InvalidArgument(f"{what} is {size} bytes, over the limit of {max_bytes}")
        value = parse_json(text, what)
        if shape is not None and not isinstance(value, shape):
            raise InvalidArgument(f"{what} must be a JSON {'object' if shape is dict else 'array'}")
        check_depth(value, depth or self.limits.max_depth, what=what)
        return value

    # -- each kind -------------------------------------------------------------------------------

    def _runner(self, ws: str, r: dict[str, Any]) -> None:
        self._unique(("runner", r["id"]), f"runner {r['id']!r}")

    def _agent_session(self, ws: str, r: dict[str, Any]) -> None:
        self._unique(("agent_session", r["id"]), f"session {r['id']!r}")

    def _thread(self, ws: str, r: dict[str, Any]) -> None:
        self._unique(("thread", ws, r["name"]), f"thread {r['name']!r}")
        self.threads[(ws, r["name"])] = (self._number, r["latest_version"], r["latest_id"])

    def _blob(self, ws: str, r: dict[str, Any]) -> None:
        self._unique(("blob", ws, r["hash"]), f"value {r['hash']}")
        data = r["data"].encode()
        self._json(r["data"], f"value {r['hash']}", None, self.limits.max_state_bytes, self.limits.max_depth - 1)
        if value_hash(data) != r["hash"]:
            raise InvalidArgument(f"value {r['hash']} does not match its hash (it was changed or damaged)")
        self.blobs[(ws, r["hash"])] = len(data)

    def _segment(self, ws: str, r: dict[str, Any]) -> None:
        seg, prev = r["id"], r["prev"]
        self._unique(("segment", ws, seg), f"segment {seg}")
        if prev is not None and (prev >= seg or (ws, prev) not in self.segments):
            raise InvalidArgument(f"segment {seg} follows segment {prev}, which is not an earlier segment here")
        elements = self._json(
            f"[{r['data']}]", f"segment {seg}", list, self.limits.max_state_bytes + 2, self.limits.max_depth - 1
        )
        if not elements:
            raise InvalidArgument(f"segment {seg} holds no elements")
        self.segments[(ws, seg)] = (prev, len(elements))

    def _checkpoint(self, ws: str, r: dict[str, Any]) -> None:
        thread, version = (ws, r["thread"]), r["version"]
        self._unique(("checkpoint", r["id"]), f"checkpoint {r['id']!r}")
        self._unique(("version", *thread, version), f"version {version} of thread {r['thread']!r}")
        if thread not in self.threads:
            raise InvalidArgument(f"checkpoint {r['id']!r} is on thread {r['thread']!r}, which has no record before it")
        if r["metadata_json"] is not None:
            self._json(r["metadata_json"], "metadata", dict, self.limits.max_value_bytes)
        raw = self._json(r["manifest"], "the manifest", list, 4 * self.limits.max_state_bytes + 1024, 3)
        entries = [self._entry(ws, item) for item in raw]
        if len({e.key for e in entries}) != len(entries):
            raise InvalidArgument(f"checkpoint {r['id']!r} names a key twice")
        size = manifests.state_size(entries)
        if r["size_bytes"] != size:
            raise InvalidArgument(f"checkpoint {r['id']!r} says its state is {r['size_bytes']} bytes; it is {size}")
        if size > self.limits.max_state_bytes:
            raise InvalidArgument(
                f"checkpoint {r['id']!r} holds a state of {size} bytes, over the limit of "
                f"{self.limits.max_state_bytes} (MCP_HARNESS_MAX_STATE_BYTES)"
            )
        if thread not in self.newest or version > self.newest[thread][0]:
            self.newest[thread] = (version, r["id"])

    def _entry(self, ws: str, item: Any) -> Entry:
        """One manifest entry (`checkpoints/manifest.py`): a stored value, an inline value or an array chain."""
        if not (
            isinstance(item, list)
            and len(item) in (3, 4, 6)
            and isinstance(item[0], str)
            and type(item[2]) is int
            and item[2] >= 0
        ):
            raise InvalidArgument(f"the manifest entry {str(item)[:60]} is not one mcp-harness writes")
        entry = manifests.from_json(item)
        if isinstance(entry, Blob):
            if self.blobs.get((ws, entry.hash)) != entry.size:
                raise InvalidArgument(
                    f"key {entry.key!r} names value {entry.hash!r}, which no earlier value record holds"
                )
        elif isinstance(entry, Chain):
            if not HASH[0](entry.hash) or not all(
                type(n) is int and n >= 0 for n in (entry.tail, entry.skip, entry.count)
            ):
                raise InvalidArgument(f"the array entry of key {entry.key!r} is not one mcp-harness writes")
            if (ws, entry.tail) not in self.segments:
                raise InvalidArgument(
                    f"key {entry.key!r} names segment {entry.tail}, which no earlier segment record holds"
                )
            if self._chain_length(ws, entry.tail) - entry.skip != entry.count:
                raise InvalidArgument(
                    f"the array of key {entry.key!r} does not have the {entry.count} elements it records"
                )
        else:  # Inline
            if item[1] is not None or not isinstance(entry.json, str) or len(entry.json.encode()) != entry.size:
                raise InvalidArgument(f"the inline value of key {entry.key!r} is not one mcp-harness writes")
            self._json(entry.json, f"the value of key {entry.key!r}", None, entry.size, self.limits.max_depth - 1)
        return entry

    def _chain_length(self, ws: str, tail: int) -> int:
        """Elements on the chain of segments that ends at `tail` (memoised: chains share segments)."""
        path: list[int] = []
        node: int | None = tail
        while node is not None and (ws, node) not in self._chain_lengths:
            path.append(node)
            node = self.segments[(ws, node)][0]
        total = self._chain_lengths[(ws, node)] if node is not None else 0
        for seg in reversed(path):
            total += self.segments[(ws, seg)][1]
            self._chain_lengths[(ws, seg)] = total
        return total

    def _progress(self, ws: str, r: dict[str, Any]) -> None:
        self._unique(("entry", r["entry_id"]), f"progress entry {r['entry_id']!r}")
        self._unique(("seq", ws, r["seq"]), f"progress number {r['seq']}")
        self.max_seq[ws] = max(self.max_seq.get(ws, 0), r["seq"])
        if not r["summary"].strip():
            raise InvalidArgument("a progress summary must not be empty")
        limit = self.limits.max_text_chars
        if r["agent"] != HARNESS and len(r["summary"]) > limit:  # the harness's own may wrap a person's text
            raise InvalidArgument(f"a progress summary is {len(r['summary'])} characters, over the limit of {limit}")
        if r["next_steps"] is not None:
            steps = self._json(r["next_steps"], "next_steps", list, NEXT_STEPS * STEP_CHARS * 6 + 1024)
            if len(steps) > NEXT_STEPS or not all(isinstance(s, str) and len(s) <= STEP_CHARS for s in steps):
                raise InvalidArgument(
                    f"next_steps must be at most {NEXT_STEPS} strings of at most {STEP_CHARS} characters"
                )
        if r["artifacts"] is not None:
            self._json(r["artifacts"], "artifacts", dict, self.limits.max_value_bytes)

    def _task(self, ws: str, r: dict[str, Any]) -> None:
        lists_limit = 100 * 4000 * 6 + 1024
        parts = {c: self._json(r[c], c, list, lists_limit) for c in ("steps", "depends_on", "tags")}
        if r.get("paths") is not None:
            parts["paths"] = self._json(r["paths"], "paths", list, 50 * 300 * 6 + 1024)
        try:
            spec = TaskSpec.model_validate(
                {
                    **{c: r[c] for c in ("key", "title", "description", "priority", "max_attempts", "review", "kind")},
                    **parts,
                },
                strict=True,
            )
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise InvalidArgument(f"task {str(r['key'])[:60]!r}: {where}: {first['msg']}") from None
        if spec.description is not None and len(spec.description) > self.limits.max_text_chars:
            raise InvalidArgument(
                f"task {spec.key!r}: description is over the limit of {self.limits.max_text_chars} characters"
            )
        self._unique(("task", ws, spec.key), f"task {spec.key!r}")
        if r["result"] is not None:
            self._json(r["result"], f"the result of task {spec.key!r}", None, self.limits.max_value_bytes)
        if r["status"] == Status.CLAIMED and None in (r["owner"], r["lease_token"], r["lease_expires_at"]):
            raise InvalidArgument(f"task {spec.key!r} is claimed but has no owner, lease token or lease expiry")
        if r["status"] == Status.IN_REVIEW and not spec.review and spec.kind != "gate":
            raise InvalidArgument(f"task {spec.key!r} is in review but is neither a review task nor a gate")
        if spec.kind == "gate" and r["status"] == Status.CLAIMED:
            raise InvalidArgument(f"task {spec.key!r} is a gate but claimed: gates are never claimed")
        self.tasks[(ws, spec.key)] = TaskFacts(self._number, r["status"], spec.depends_on, set(spec.tags), spec.kind)

    def _task_dep(self, ws: str, r: dict[str, Any]) -> None:
        task, dep = r["task_key"], r["dep_key"]
        self._unique(("dep", ws, task, dep), f"the dependency of {task!r} on {dep!r}")
        for key in (task, dep):
            if (ws, key) not in self.tasks:
                raise InvalidArgument(f"a dependency names task {key!r}, which no earlier task record has")
        self.tasks[(ws, task)].deps_seen.add(dep)

    def _task_tag(self, ws: str, r: dict[str, Any]) -> None:
        self._unique(("tag", ws, r["task_key"], r["tag"]), f"tag {r['tag']!r} of task {r['task_key']!r}")
        if (ws, r["task_key"]) not in self.tasks:
            raise InvalidArgument(f"a tag names task {r['task_key']!r}, which no earlier task record has")
        self.tasks[(ws, r["task_key"])].tags_seen.add(r["tag"])

    def _task_event(self, ws: str, r: dict[str, Any]) -> None:
        if (ws, r["task_key"]) not in self.tasks:
            raise InvalidArgument(f"a task event names task {r['task_key']!r}, which no earlier task record has")
        if r["detail"] is not None:
            limit = self.limits.max_value_bytes + 4 * self.limits.max_text_chars  # a cleared result and texts
            self._json(r["detail"], f"an event's detail of task {r['task_key']!r}", dict, limit)

    def _state_schema(self, ws: str, r: dict[str, Any]) -> None:
        self._unique(("schema", ws, r["thread"], r["version"]), f"schema version {r['version']} of {r['thread']!r}")
        document = self._json(r["document"], "the schema", dict, len(r["document"].encode()))
        try:
            Draft202012Validator.check_schema(document)
        except SchemaError as exc:
            raise InvalidArgument(f"not a valid Draft 2020-12 JSON Schema: {exc.message[:200]}") from None

    def _message(self, ws: str, r: dict[str, Any]) -> None:
        self._unique(("message", r["message_id"]), f"message {r['message_id']!r}")
        self.messages[(ws, r["message_id"])] = r["recipient"]
        if len(r["body"].encode("utf-8", "surrogatepass")) > MAX_BODY_BYTES:
            raise InvalidArgument(f"message {r['message_id']!r}: body is over the limit of {MAX_BODY_BYTES} bytes")
        if not r["body"].strip():
            raise InvalidArgument(f"message {r['message_id']!r} has an empty body")
        if r["task_key"] is not None and (ws, r["task_key"]) not in self.tasks:
            raise InvalidArgument(f"message {r['message_id']!r} names task {r['task_key']!r}, which no task record has")
        if r["reply_to"] is not None and (ws, r["reply_to"]) not in self.messages:
            raise InvalidArgument(f"message {r['message_id']!r} answers {r['reply_to']!r}, which no earlier message is")
        if r["recipient"] == "*" and r["acked_at"] is not None:
            raise InvalidArgument(f"message {r['message_id']!r} to every agent is acknowledged per reader, not once")

    def _message_ack(self, ws: str, r: dict[str, Any]) -> None:
        self._unique(("message_ack", ws, r["message_id"], r["agent"]), f"the acknowledgement of {r['message_id']!r}")
        if self.messages.get((ws, r["message_id"])) != "*":
            raise InvalidArgument(
                f"an acknowledgement names message {r['message_id']!r}, which no earlier message to every agent is"
            )

    # -- references between records -----------------------------------------------------------

    def finish(self) -> None:
        """Check what only the whole file shows; fills `task_flags`."""
        for (_ws, thread), (line, latest, latest_id) in self.threads.items():
            newest = self.newest.get((_ws, thread))
            if (newest is None and latest_id is not None) or (newest is not None and newest != (latest, latest_id)):
                shown = f"version {newest[0]} ({newest[1]!r})" if newest else "none"
                raise InvalidArgument(
                    f"line {line}: thread {thread!r} says its latest checkpoint is version {latest} "
                    f"({latest_id!r}); its newest is {shown}"
                )
        for ws, top in self.max_seq.items():
            if self.progress_seq[ws] < top:
                given = self.progress_seq[ws]
                raise InvalidArgument(
                    f"line {self.workspaces[ws]}: workspace {ws!r} has handed out {given} "
                    f"progress numbers, but an entry has number {top}"
                )
        for (_ws, key), facts in self.tasks.items():
            if set(facts.depends_on) != facts.deps_seen or facts.tags != facts.tags_seen:
                raise InvalidArgument(
                    f"line {facts.line}: the dependency or tag records of task {key!r} do not "
                    "match its depends_on and tags"
                )
        for ws in self.workspaces:
            self._task_flags(ws)

    def _task_flags(self, ws: str) -> None:
        """`ready`, `blocked`, `stale` and `dependents` of each task of `ws`, as the tools keep them."""
        graph = {key: facts for (w, key), facts in self.tasks.items() if w == ws}
        try:
            order = topological_order(graph, ())
        except DependencyError as exc:
            first = exc.message.rsplit(": ", 1)[-1].split(" -> ")[0]
            raise InvalidArgument(f"line {graph[first].line}: {exc.message}") from None
        dependents = {key: 0 for key in graph}
        for facts in graph.values():
            for dep in set(facts.depends_on):
                dependents[dep] += 1
        for key in order:
            facts = graph[key]
            done, blocked = dependency_flags(
                (graph[d].status, self.task_flags[(ws, d)]["blocked"], self.task_flags[(ws, d)]["stale"])
                for d in set(facts.depends_on)
            )
            if facts.status == Status.CLAIMED and not done:
                raise InvalidArgument(f"line {facts.line}: task {key!r} is claimed while a dependency is not done")
            if facts.status == Status.IN_REVIEW and not done:  # the tools take it out of review then
                raise InvalidArgument(
                    f"line {facts.line}: task {key!r} is in review while a dependency is not done "
                    "(approving it would skip that dependency)"
                )
            if facts.kind == "gate" and facts.status == Status.PENDING and done:  # the tools open it for review then
                raise InvalidArgument(
                    f"line {facts.line}: gate {key!r} is pending while every dependency is done "
                    "(it would never enter review; its status must be in_review)"
                )
            ready = may_be_ready(facts.status, facts.kind, done)
            stale = facts.status == Status.DONE and not done  # a dependency was reopened since it was done
            self.task_flags[(ws, key)] = {
                "ready": ready,
                "blocked": blocked,
                "stale": stale,
                "dependents": dependents[key],
            }

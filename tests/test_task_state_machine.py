"""A Hypothesis state machine over add/claim/heartbeat/complete/fail/release/reopen/clock-advance, with
review tasks and gates decided by an operator (approve/reject/cancel).

A model tracks who holds the current lease of each task and predicts which lease operations must
succeed (a list or a restore settles a lease that ran out on its last attempt: the task fails); after
every step the invariants are checked against the database: at most one live lease per task, a
claimed task's dependencies are all done, done is terminal except by reopen, attempts never exceed
max_attempts, and the maintained ready/blocked flags equal a full recomputation. Every empty claim
(of any task, or of one named task) gives the reason the contract's table names for the state it
left, and `waiting_on` names real tasks of that reason. A task in review (and only there) has every
dependency settled (done or cancelled), and so has every gate, which is never claimed.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from mcp_harness import clock
from mcp_harness.arguments import AddTasksArgs, ClaimTaskArgs, ListTasksArgs, RestoreStateArgs, UpdateTaskArgs
from mcp_harness.config import Settings
from mcp_harness.errors import Forbidden, InvalidArgument, LeaseLost, NotFound
from mcp_harness.models import TaskSpec
from mcp_harness.service import Harness, Identity
from mcp_harness.tasks.rules import OPEN, SETTLED
from mcp_harness.tasks.store import tasks as task_store

AGENTS = ["a", "b", "c"]
WS = "sm"
OPERATOR = Identity(WS, "olga", "operator")


class TaskMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        clock.reset()
        self.loop = asyncio.new_event_loop()
        self.dir = tempfile.TemporaryDirectory()
        url = f"sqlite+aiosqlite:///{Path(self.dir.name) / 'sm.db'}"
        base = Settings.from_env(url)
        self.settings = Settings(**{**base.__dict__, "backoff_base_seconds": 2.0, "backoff_cap_seconds": 8.0})
        self.cm = Harness.open(self.settings)
        self.h: Harness = self.run(self.cm.__aenter__())
        self.keys: list[str] = []
        self.holder: dict[str, tuple[str, str] | None] = {}  # key -> (agent, token) of the current lease
        self.tokens: dict[tuple[str, str], str] = {}  # (agent, key) -> the last token that agent got
        self.done_before: set[str] = set()
        self.reopened: set[str] = set()
        self.completed_by: dict[str, str] = {}  # key -> the token that completed it (a retry is a no-op)

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        self.run(self.cm.__aexit__(None, None, None))
        self.loop.close()
        self.dir.cleanup()
        clock.reset()

    @initialize(
        specs=st.lists(
            st.tuples(
                st.integers(0, 3),
                st.integers(1, 3),
                st.sets(st.integers(0, 7), max_size=2),
                st.sampled_from(["work", "work", "review", "gate"]),
            ),
            min_size=3,
            max_size=8,
        )
    )
    def add(self, specs) -> None:
        tasks = []
        for i, (priority, attempts, deps, kind) in enumerate(specs):
            depends = sorted(f"k{d}" for d in deps if d < i)  # a DAG: only earlier tasks
            tasks.append(
                TaskSpec(
                    key=f"k{i}",
                    title=f"t{i}",
                    priority=priority,
                    max_attempts=attempts,
                    depends_on=depends,
                    review=kind == "review",
                    kind="gate" if kind == "gate" else "work",
                )
            )
        self.run(self.h.tasks.add(Identity(WS, "planner"), AddTasksArgs(tasks=tasks)))
        self.keys = [t.key for t in tasks]
        self.holder = {k: None for k in self.keys}

    @rule(agent=st.sampled_from(AGENTS), named=st.none() | st.integers(0, 7))
    def claim(self, agent: str, named: int | None) -> None:
        key = None if named is None or not self.keys else self.keys[named % len(self.keys)]
        try:
            got = self.run(self.h.tasks.claim(Identity(WS, agent), ClaimTaskArgs(lease_seconds=10, task_key=key)))
        except InvalidArgument:
            assert key is not None and self._rows()[0][key].kind == "gate", f"claim of {key} refused"
            return
        if got.task is None:
            # A claim that finds no work fails the leases that ran out on their last attempt.
            rows, _flags = self._rows()
            for k, row in rows.items():
                if row.status == "failed":
                    self.holder[k] = None
            self._check_reason(got, rows, [key] if key else self.keys)
            return
        key = got.task.key
        self.holder[key] = (agent, got.lease.token)
        self.tokens[(agent, key)] = got.lease.token

    def _check_reason(self, got, rows, wanted: list[str]) -> None:
        """The contract's table, stated over the state the empty claim left: the roots of what the
        wanted unfinished tasks wait on, each a reason; the first of the precedence order wins."""
        now = clock.now()
        unfinished = [k for k in wanted if rows[k].status not in SETTLED]
        if not unfinished:
            assert got.reason == "all_done" and got.waiting_on is None, got
            return
        roots: set[str] = set()
        stack = list(unfinished)
        while stack:
            k = stack.pop()
            row = rows[k]
            waits = [d for d in json.loads(row.depends_on) if _holds(rows, d)]
            if row.status == "failed" or not waits:
                roots.add(k)
            else:
                stack.extend(waits)

        def reason_of(k: str) -> str:
            row = rows[k]
            if row.status == "failed":
                return "blocked_by_failure"
            if row.status == "in_review":
                return "waiting_on_review"
            assert row.kind == "work", f"gate {k} waits on nothing yet is {row.status}"
            if row.status == "pending" and row.available_at > now:
                return "backoff"
            if row.status == "claimed" and row.lease_expires_at > now:
                return "all_claimed"  # held by a live lease
            # pending, or an expired lease with attempts left: only a claim of other tasks may wait on it,
            # and waiting will not change it (nobody holds it): other work will
            assert k not in wanted, f"{k} was claimable: {row}"
            return "waiting_on_other_work"

        reasons = {reason_of(k) for k in roots}
        expected = next(
            r
            for r in ("backoff", "all_claimed", "waiting_on_other_work", "waiting_on_review", "blocked_by_failure")
            if r in reasons
        )
        assert got.reason == expected, (got, {k: rows[k].status for k in roots})
        assert got.waiting_on, got
        for w in got.waiting_on:
            assert w.key in roots, (w, roots)
            assert w.status == rows[w.key].status and w.owner == rows[w.key].owner
        # the roots of every wait, the winning reason's first, each other wait named while there is room
        said = [reason_of(w.key) for w in got.waiting_on]
        assert said[0] == expected and said == sorted(said, key=lambda r: r != expected), (said, expected)
        if len(reasons) <= len(got.waiting_on):
            assert set(said) == reasons, (said, reasons)
        if expected in ("backoff", "all_claimed"):
            assert got.retry_after is not None and got.retry_after >= 0
        else:
            assert got.retry_after is None

    def _leased(self, agent: str, index: int, action: str, **kw) -> None:
        if not self.keys:
            return
        key = self.keys[index % len(self.keys)]
        token = self.tokens.get((agent, key))
        if token is None:
            return
        expect_ok = self.holder[key] == (agent, token)
        repeat = action == "complete" and self.completed_by.get(key) == token  # a retried complete: a no-op
        try:
            self.run(
                self.h.tasks.update(
                    Identity(WS, agent), UpdateTaskArgs(task_key=key, action=action, lease_token=token, **kw)
                )
            )
        except LeaseLost:
            assert not expect_ok and not repeat, f"{action} by {agent} on {key} with the current token was refused"
            return
        except InvalidArgument as exc:  # a task in review has no lease to act on: a person decides it
            assert not expect_ok and not repeat and "is in review" in exc.message, exc
            return
        assert expect_ok or repeat, f"{action} by {agent} on {key} with a superseded token was accepted"
        if action == "complete":
            self.completed_by[key] = token
        if action != "heartbeat":
            self.holder[key] = None

    @rule(agent=st.sampled_from(AGENTS), index=st.integers(0, 7))
    def heartbeat(self, agent, index):
        self._leased(agent, index, "heartbeat")

    @rule(agent=st.sampled_from(AGENTS), index=st.integers(0, 7))
    def complete(self, agent, index):
        self._leased(agent, index, "complete", verification="checked")

    @rule(agent=st.sampled_from(AGENTS), index=st.integers(0, 7), retry=st.booleans())
    def fail(self, agent, index, retry):
        self._leased(agent, index, "fail", error="boom", retry=retry)

    @rule(agent=st.sampled_from(AGENTS), index=st.integers(0, 7))
    def release(self, agent, index):
        self._leased(agent, index, "release")

    @precondition(lambda self: bool(self.keys))
    @rule(index=st.integers(0, 7))
    def reopen(self, index):
        key = self.keys[index % len(self.keys)]
        reopen = {"task_key": key, "action": "reopen", "reason": "regression"}
        try:
            try:
                self.run(self.h.tasks.update(Identity(WS, "human"), UpdateTaskArgs(**reopen)))
            except Forbidden:  # an agent may not revive a cancelled task: a person's decision
                assert self._rows()[0][key].status == "cancelled", key
                self.run(self.h.tasks.update(Identity(WS, "human", "operator"), UpdateTaskArgs(**reopen)))
        except InvalidArgument:
            return  # not done, failed or cancelled: nothing to reopen
        self.reopened.add(key)
        self._sync()  # claims downstream of a reopened task are revoked, reviews downstream sent back

    def _sync(self) -> None:
        """After a change that may end leases (reopen, cancel, reject): forget the leases that ended, and
        the completing tokens whose retry is no longer a no-op."""
        rows, _flags = self._rows()
        for key, row in rows.items():
            if row.status != "claimed":
                self.holder[key] = None
            if row.status not in ("done", "in_review") or row.lease_token != self.completed_by.get(key):
                self.completed_by.pop(key, None)

    def _operator(self, index: int, action: str, **kw) -> str | None:
        """The operator's `action` on a task; the task's status before, or None if it was refused as
        not applying to that status (the refusal must name the status)."""
        key = self.keys[index % len(self.keys)]
        before = self._rows()[0][key]
        try:
            self.run(self.h.tasks.update(OPERATOR, UpdateTaskArgs(task_key=key, action=action, **kw)))
        except (InvalidArgument, NotFound) as exc:
            assert "is " in exc.message, exc.message
            return None
        return before.status

    @precondition(lambda self: bool(self.keys))
    @rule(index=st.integers(0, 7))
    def approve(self, index):
        before = self._operator(index, "approve", comment="fine")
        assert before in (None, "in_review")

    @precondition(lambda self: bool(self.keys))
    @rule(index=st.integers(0, 7))
    def reject(self, index):
        before = self._operator(index, "reject", comment="redo")
        assert before in (None, "in_review")
        self._sync()

    @precondition(lambda self: bool(self.keys))
    @rule(index=st.integers(0, 7))
    def cancel(self, index):
        before = self._operator(index, "cancel", reason="not needed")
        assert before in (None, "pending", "claimed", "in_review", "failed")
        self._sync()

    @precondition(lambda self: bool(self.keys))
    @rule(agent=st.sampled_from(AGENTS), restore=st.booleans())
    def look(self, agent, restore):
        """A list or a restore settles every lease that ran out on its last attempt: those tasks fail (and
        their holders' next calls are refused); nothing else changes."""
        before = self._rows()[0]
        now = clock.now()
        ran_out = {
            k
            for k, r in before.items()
            if r.status == "claimed" and r.lease_expires_at <= now and r.attempts >= r.max_attempts
        }
        if restore:
            self.run(self.h.restore(Identity(WS, agent), RestoreStateArgs()))
        else:
            self.run(self.h.tasks.list(Identity(WS, agent), ListTasksArgs(status=["claimed", "failed"])))
        after = self._rows()[0]
        assert {k for k in ran_out if after[k].status != "failed"} == set(), "a look left a run-out lease held"
        changed = {k for k in before if k not in ran_out and after[k].status != before[k].status}
        assert changed == set(), f"a look changed the status of {changed}"
        self._sync()

    @rule(seconds=st.sampled_from([1, 5, 11, 30]))
    def advance(self, seconds):
        clock.advance(seconds)

    def _rows(self):
        async def read():
            async with self.h.db.read() as conn:
                rows = await task_store.get_many(conn, WS, self.keys)
                flags = await task_store.compute_flags(conn, WS, self.keys)
            return rows, flags

        return self.run(read())

    @invariant()
    def invariants(self) -> None:
        if not self.keys:
            return
        rows, flags = self._rows()
        now = clock.now()
        for key, row in rows.items():
            assert row.attempts <= row.max_attempts, f"{key} used {row.attempts} attempts"
            assert not (row.kind == "gate" and row.status == "claimed"), f"gate {key} was claimed"
            if row.status in ("claimed", "in_review"):
                for dep in json.loads(row.depends_on):
                    assert not _holds(rows, dep), f"{key} {row.status} while {dep} is {rows[dep].status}"
            if row.kind == "gate" and row.status == "pending":
                assert not flags[key][0], f"gate {key} has every dependency settled but is not in review"
            if row.status == "claimed":
                assert row.lease_token is not None
                holder = self.holder[key]
                if row.lease_expires_at > now:
                    assert holder is not None and holder[1] == row.lease_token, "a live lease nobody holds"
            deps_done, blocked = flags[key]
            # recomputed from the statuses alone: no dependency holds the task back, however far down
            assert deps_done == (not any(_holds(rows, d) for d in json.loads(row.depends_on))), key
            assert bool(row.ready) == (deps_done and row.status in OPEN and row.kind == "work"), key
            assert bool(row.blocked) == blocked, key
        now_done = {k for k, r in rows.items() if r.status == "done"}
        lost = (self.done_before - now_done) - self.reopened
        assert not lost, f"done tasks changed without reopen: {lost}"
        self.done_before = now_done
        self.reopened = set()


def _holds(rows, key: str) -> bool:
    """The task holds its dependents back: unfinished, or done with a dependency that holds it back (one was
    reopened since and is not done again); a cancelled task never does."""
    row = rows[key]
    if row.status == "done":
        return any(_holds(rows, d) for d in json.loads(row.depends_on))
    return row.status not in SETTLED


TaskMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_task_state_machine = pytest.mark.slow(TaskMachine.TestCase)  # 60 runs of 30 steps

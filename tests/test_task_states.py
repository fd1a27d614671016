"""The task state machine's table, without a database: every action from every status is allowed or
refused with a precise message, and what an allowed action leaves is one of the table's statuses."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import get_args

from hypothesis import given
from hypothesis import strategies as st

from mcp_harness import arguments
from mcp_harness.store.records import TaskRecord
from mcp_harness.tasks.events import KINDS
from mcp_harness.tasks.rules import (
    BLOCKED,
    LET_GO,
    OPEN,
    PERSON_ACTIONS,
    RULES,
    SETTLED,
    SHOWN,
    TOOL_ACTIONS,
    Action,
    ActionInput,
    Effect,
    ShownStatus,
    Status,
    TaskChange,
    Who,
    claim_would_take,
    dependency_flags,
    settle,
    shown,
)
from mcp_harness.tasks.store.queries import UNREAD_TASK_COLUMNS

AT = 1_000.0


@dataclass(frozen=True)
class FakeTask:
    status: str
    kind: str
    review: bool
    ready: bool
    blocked: bool
    owner: str | None
    lease_token: str | None
    lease_expires_at: float | None
    lease_seconds: int | None
    attempts: int
    max_attempts: int
    available_at: float
    result: str | None
    verification: str | None
    last_error: str | None


tasks = st.builds(
    FakeTask,
    status=st.sampled_from(list(Status)),
    kind=st.sampled_from(["work", "gate"]),
    review=st.booleans(),
    ready=st.booleans(),
    blocked=st.booleans(),
    owner=st.sampled_from([None, "ann"]),
    lease_token=st.sampled_from([None, "tok", "other"]),
    lease_expires_at=st.sampled_from([None, AT - 1, AT + 1]),
    lease_seconds=st.sampled_from([None, 60]),
    attempts=st.integers(0, 4),
    max_attempts=st.integers(1, 4),
    available_at=st.sampled_from([0.0, AT, AT + 30]),
    result=st.sampled_from([None, '{"x":1}']),
    verification=st.sampled_from([None, "tests pass"]),
    last_error=st.sampled_from([None, "boom"]),
)
givens = st.builds(
    ActionInput,
    at=st.just(AT),
    lease_token=st.sampled_from([None, "tok"]),
    lease_seconds=st.sampled_from([None, 120]),
    result=st.sampled_from([None, "[]"]),
    verification=st.just("checked"),
    error=st.sampled_from([None, "it broke"]),
    retry=st.booleans(),
    reason=st.just("why"),
    comment=st.sampled_from([None, "change it"]),
    deps_done=st.booleans(),
)


def test_the_statuses_and_actions_are_spelled_once():
    """The published types are the table's: models' statuses and the tool's actions."""
    assert tuple(get_args(ShownStatus)) == SHOWN == (*Status, BLOCKED)
    assert get_args(arguments.UpdateTaskArgs.model_fields["action"].annotation) == TOOL_ACTIONS
    assert set(RULES) == set(Action)
    assert OPEN | SETTLED < set(Status) and not OPEN & SETTLED


def test_every_action_a_person_takes_says_what_it_did_and_what_it_needs():
    """The console's forms and the CLI's commands read these from the rows: a row must carry them."""
    assert set(PERSON_ACTIONS) == {"reopen", "approve", "reject", "retry_now", "cancel", "release"}
    for name, action in PERSON_ACTIONS.items():
        rule = RULES[action]
        assert rule.done and action.public == name
        assert not rule.required or rule.argument in arguments.UpdateTaskArgs.model_fields
    assert RULES[Action.CANCEL].blank_refusal("cancel").startswith("cancel needs a reason: ")
    assert LET_GO == {"complete": "completed", "fail": "failed", "release": "released"}


def test_every_change_names_columns_of_the_task_table():
    assert {f.name for f in fields(TaskChange)} <= set(TaskRecord._fields) | UNREAD_TASK_COLUMNS
    assert TaskChange().columns() == {}
    assert TaskChange(status=Status.DONE, owner=None).columns() == {"status": "done", "owner": None}


@given(task=tasks, g=givens, action=st.sampled_from(list(Action)))
def test_every_action_from_every_status_is_allowed_or_a_precise_error(task: FakeTask, g: ActionInput, action: Action):
    rule = RULES[action]
    if rule.who is Who.HOLDER:
        # fenced by the lease token: only a claimed task has a lease; the service explains a lost one
        assert rule.allowed == {Status.CLAIMED} and not rule.refusal
    elif not rule.allows(task, AT):
        message = rule.refusal.format(key="k", status=shown(task.status, task.blocked))
        assert message.startswith(action.public) and f"task 'k' is {shown(task.status, task.blocked)}" in message
        return
    if not rule.allows(task, AT):
        return
    outcome = rule.change(task, g)
    after = outcome.status or task.status
    assert after in rule.to, f"{action} from {task.status} left {after}, the table says {sorted(rule.to)}"
    if outcome.event is not None:
        assert outcome.event in KINDS
    columns = outcome.change.columns()
    assert "updated_at" in columns
    if task.status == Status.CLAIMED and after != Status.CLAIMED:
        assert columns["lease_expires_at"] is None, "a lease outlived its task's claim"
    # what its answer shows as cleared (null) is what the change empties (revision 3)
    assert all(name in columns and columns[name] is None for name in outcome.cleared), outcome.cleared


@given(task=tasks, g=givens)
def test_complete_goes_to_a_person_only_for_a_review_task(task: FakeTask, g: ActionInput):
    outcome = RULES[Action.COMPLETE].change(task, g)
    assert outcome.status == (Status.IN_REVIEW if task.review else Status.DONE)
    assert outcome.event == ("submit" if task.review else "complete")


@given(task=tasks, g=givens)
def test_fail_retries_only_while_attempts_remain(task: FakeTask, g: ActionInput):
    outcome = RULES[Action.FAIL].change(task, g)
    retried = g.retry and task.attempts < task.max_attempts
    assert outcome.status == (Status.PENDING if retried else Status.FAILED)
    assert ("retry_in" in (outcome.detail or {})) == retried


@given(task=tasks, deps_done=st.booleans(), blocked=st.booleans())
def test_settling_never_leaves_a_task_held_or_in_review_behind_an_unsettled_dependency(
    task: FakeTask, deps_done: bool, blocked: bool
):
    decided = settle(task, deps_done, blocked, AT)
    columns = decided[1].columns() if decided else {}
    status = columns.get("status", task.status)
    ready = columns.get("ready", task.ready)
    if not deps_done:
        assert status not in (Status.CLAIMED, Status.IN_REVIEW)
    if task.kind == "gate":
        assert not ready
        assert not (status == Status.PENDING and deps_done)
    assert columns.get("blocked", task.blocked) == blocked
    if decided is not None:
        effect, _change = decided
        assert (effect is Effect.REVOKE) == (task.status == Status.CLAIMED and not deps_done)
        if effect is Effect.UNBLOCK:
            assert task.status == Status.PENDING and ready and not task.ready


@given(st.lists(st.tuples(st.sampled_from(list(Status)), st.booleans(), st.booleans()), max_size=5))
def test_dependency_flags(deps: list[tuple[Status, bool, bool]]):
    done, blocked = dependency_flags(deps)
    # a done dependency behind a reopened task of its own (stale) holds its dependents back
    assert done == all(s in SETTLED and not (stale and s == Status.DONE) for s, _, stale in deps)
    assert blocked == any(s == Status.FAILED or (b and s != Status.CANCELLED) for s, b, _ in deps)


@given(task=tasks, deps_done=st.booleans(), blocked=st.booleans(), stale=st.booleans())
def test_a_done_task_stays_done_and_is_stale_while_a_dependency_is_not_settled(
    task: FakeTask, deps_done: bool, blocked: bool, stale: bool
):
    task = replace(task, status=Status.DONE, ready=False)
    decided = settle(task, deps_done, blocked, AT, stale)
    columns = decided[1].columns() if decided else {}
    assert "status" not in columns and columns.get("ready", False) is False
    assert columns.get("stale", stale) == (not deps_done)
    assert columns.get("blocked", task.blocked) == blocked
    assert (decided is None) == (stale == (not deps_done) and task.blocked == blocked)


def test_a_reopened_task_is_not_stale():
    """Only a done task is stale: the reopen that takes it out of done clears the flag."""
    task = FakeTask(Status.DONE, "work", False, False, False, None, None, None, None, 1, 3, 0.0, "1", "v", None)
    assert RULES[Action.REOPEN].change(task, ActionInput(at=AT, reason="r")).change.stale is False


@given(task=tasks)
def test_claimable_needs_a_ready_open_task(task: FakeTask):
    if claim_would_take(task, AT):
        assert task.ready and task.status in OPEN

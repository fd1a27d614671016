r"""The task state machine, in one place: the statuses, the actions, and a table of pure transition rules.

```
                 .------ retry_now ------.
                 v                       |
  add_tasks --> pending -----------------'
                 |  ^
          claim  |  |  fail (attempts left), release, operator release,
                 |  |  revoke (a dependency was reopened)
                 v  |
               claimed ------------ complete --------------------------> done
                 |   \                                                   ^
                 |    `-- complete (review) --> in_review --- approve ---'
                 |                               |     |
                 |                 reject (work) |     | reject (gate)
                 |                               v     v
                 |                          pending   failed
                 |                                     ^
                 `------ fail (no retry, or the last attempt's lease expired)

  reopen:  done | failed | cancelled             --> pending (a gate whose dependencies are settled: in_review)
  cancel:  pending | claimed | in_review | failed --> cancelled
  reserve, unreserve: claimed --> claimed (the lease's path reservations change; see `tasks/patterns.py`)
  settle:  (what a change does to the dependents)
           done            --(a dependency is reopened)-----> done, stale: its dependents wait on it
           a gate, pending --(its last dependency settles)--> in_review
           in_review       --(a dependency is reopened)-----> pending
           claimed         --(a dependency is reopened)-----> pending (revoke)
```

`blocked` is not a status of its own: a pending task behind a failed dependency is *shown* blocked.

Every action is one row of `RULES`: the statuses it is allowed from (else a precise error), who may take
it, the argument it records (and whether it must be given), the word for what it did, and a pure `change`
that says the columns it sets (a `TaskChange`) and the event it records (the progress entries an event
kind writes are in `tasks/events.py`'s `KINDS`). What a change does to the task's dependents is
`settle`: it revokes a lease whose dependency is no longer settled, sends a gate whose dependencies are
settled into review (and one whose dependency was reopened back out of it) and unblocks what became
claimable. The service applies a row; the store writes its `TaskChange`. Nothing here touches a database.
Two transitions are not actions: a claim (one atomic statement built in `tasks/store/queries.py`) and the
failing of a lease that expired on its last attempt (when a claim, a list or a restore looks:
`tasks/events.fail_exhausted`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast


class Status(enum.StrEnum):
    """A task's stored status."""

    PENDING = "pending"  #: waiting to be claimed (its dependencies, its backoff or a free worker)
    CLAIMED = "claimed"  #: held under a lease by one agent
    IN_REVIEW = "in_review"  #: waiting for a person: a completed review task, or a gate whose dependencies settled
    DONE = "done"  #: finished (completed, or approved); its dependents may run
    FAILED = "failed"  #: given up: no attempts left, failed without retry, or a rejected gate
    CANCELLED = "cancelled"  #: no longer needed (a person said why); its dependents stop waiting on it


#: shown, not stored: a pending task with a failed (or blocked) dependency
BLOCKED = "blocked"
#: a status as results show it (`Status` or `blocked`): the published type of every `status` field
ShownStatus = Literal["pending", "claimed", "in_review", "done", "failed", "cancelled", "blocked"]
#: every status a result may show, in the order people read them (plain strings)
SHOWN: tuple[str, ...] = (*(s.value for s in Status), BLOCKED)
#: statuses in which a task may be `ready` (a claim may take it)
OPEN = frozenset({Status.PENDING, Status.CLAIMED})
#: statuses in which a task no longer holds its dependents back
SETTLED = frozenset({Status.DONE, Status.CANCELLED})
#: the statuses a task passes through on its way to an end, in that order (the console's pace page times each)
UNDER_WAY: tuple[str, ...] = tuple(s.value for s in (Status.PENDING, Status.CLAIMED, Status.IN_REVIEW))


@dataclass(frozen=True)
class Look:
    """How people see a status."""

    label: str  #: the console's name for it
    style: str  #: its colour on a terminal (a `rich` style; empty: plain)


#: every shown status as people see it, in the board's order (its columns, left to right)
LOOKS: dict[str, Look] = {
    Status.PENDING.value: Look("Pending", ""),
    Status.CLAIMED.value: Look("Claimed", "yellow"),
    Status.IN_REVIEW.value: Look("In review", "cyan"),
    BLOCKED: Look("Blocked", "magenta"),
    Status.FAILED.value: Look("Failed", "red"),
    Status.DONE.value: Look("Done", "green"),
    Status.CANCELLED.value: Look("Cancelled", "dim"),
}
#: the console board's columns, left to right
BOARD_ORDER: tuple[str, ...] = tuple(LOOKS)
#: the stored status a task is in after an event of each kind (a failure may also end it: `failed`), as the
#: console's pace page replays a task's events
STATUS_AFTER: dict[str, Status] = {
    "claim": Status.CLAIMED,
    "take_over": Status.CLAIMED,
    "complete": Status.DONE,
    "submit": Status.IN_REVIEW,
    "approve": Status.DONE,
    "reject": Status.PENDING,
    "fail": Status.PENDING,
    "expire": Status.PENDING,
    "release": Status.PENDING,
    "revoke": Status.PENDING,
    "operator_release": Status.PENDING,
    "returned": Status.PENDING,
    "retry_now": Status.PENDING,
    "reopen": Status.PENDING,
    "cancel": Status.CANCELLED,
}


class Action(enum.StrEnum):
    """What `update_task` (and the CLI and the console, through the same entry point) does to a task."""

    HEARTBEAT = "heartbeat"  #: the holder extends its lease
    COMPLETE = "complete"  #: the holder finishes the task (a review task goes to a person instead)
    FAIL = "fail"  #: the holder gives up: retried after a backoff while attempts remain, else failed
    RELEASE = "release"  #: the holder hands the task back unfinished, attempt given back
    REOPEN = "reopen"  #: anyone revives a finished task (done, failed or cancelled)
    APPROVE = "approve"  #: a person accepts a task in review
    REJECT = "reject"  #: a person sends a task in review back (a gate fails)
    RETRY_NOW = "retry_now"  #: a person ends a pending task's retry backoff
    CANCEL = "cancel"  #: a person ends a task the plan no longer needs
    RESERVE = "reserve"  #: the holder reserves more paths under its lease (exclusive or shared)
    UNRESERVE = "unreserve"  #: the holder drops some of the paths its lease holds
    #: a person releases a claimed task without its lease token (the tool's `release` from an operator)
    OPERATOR_RELEASE = "operator_release"

    @property
    def public(self) -> str:
        """The name callers use: `update_task`'s action, the console's and the CLI's (an operator's
        token-less `release` is `OPERATOR_RELEASE` inside)."""
        return Action.RELEASE.value if self is Action.OPERATOR_RELEASE else self.value


#: the actions `update_task` names, in the table's order: the tool's `action` type is made of them
TOOL_ACTIONS: tuple[str, ...] = tuple(a.value for a in Action if a is not Action.OPERATOR_RELEASE)
if TYPE_CHECKING:
    ToolAction = str
else:
    #: `update_task`'s `action`: a Literal of `TOOL_ACTIONS`, published as their enum
    ToolAction = Literal[TOOL_ACTIONS]


class Who(enum.Enum):
    HOLDER = "holder"  #: the lease's holder, fenced by its lease token
    OPERATOR = "operator"  #: a person (the `operator` role)
    ANYONE = "anyone"  #: any caller


class Effect(enum.Enum):
    """What settling a dependent did (see `settle`)."""

    REVOKE = "revoke"  #: a claimed task's dependency is no longer settled: its lease is revoked
    ENTER_REVIEW = "enter_review"  #: a gate's last dependency settled: a person decides
    LEAVE_REVIEW = "leave_review"  #: a dependency of a task in review is no longer settled: pending again
    UNBLOCK = "unblock"  #: a pending task became ready
    FLAGS = "flags"  #: only its ready/blocked flags changed


#: the task event kinds that change a task's stored status: a message about a task stops reaching readers
#: that have not acknowledged it after one of them (the store's `live_messages` view names the same kinds)
STATUS_EVENTS = frozenset(
    "claim complete submit fail expire release operator_release revoke reopen approve reject returned cancel".split()
)

#: how a `not_found` for a task key ends: where the keys are
UNKNOWN = "; list_tasks shows the keys"

REVOKED_BY_REOPEN = "a dependency was reopened; the lease was revoked"
EXPIRED_ON_LAST_ATTEMPT = "the lease expired on the last allowed attempt"
#: a connection's end ended the lease on the last attempt (followed by ": " and why)
ENDED_ON_LAST_ATTEMPT = "the lease ended on the last allowed attempt"


def ran_out_on_last_attempt(last_error: str | None) -> bool:
    """Whether a failed task's `last_error` says its lease expired, or ended, on the last attempt."""
    return last_error == EXPIRED_ON_LAST_ATTEMPT or (last_error or "").startswith(ENDED_ON_LAST_ATTEMPT + ":")


def taken_from(events: Iterable[tuple[str, str, str | None]], agent: str) -> bool:
    """Whether `agent`'s lease on a task was taken over by another claim and `agent` has not claimed the
    task since, from the task's events in order, each (kind, actor, previous owner of a take-over). Such
    an agent no longer writes about the task (`lease_lost`): its successor works on it now."""
    lost = False
    for kind, actor, previous in events:
        if kind in ("claim", "take_over") and actor == agent:
            lost = False
        elif kind == "take_over" and previous == agent:
            lost = True
    return lost


def after_take_over(key: str, holder: str) -> str:
    """What the old holder of a lease taken over does with its work (`lease_lost`'s way out), once the
    message has named `holder` as the one who works on the task now."""
    return (
        "commit your uncommitted work to a branch of your own, or message them (message(action='send', "
        f"to={holder!r}, task_key={key!r}, body=...)); then claim other work"
    )


class _Keep(enum.Enum):
    KEEP = "keep"


#: a column a change leaves as it is
KEEP = _Keep.KEEP


@dataclass(frozen=True, slots=True)
class TaskChange:
    """The columns one transition sets (`KEEP`: left as they are; None: set to NULL). The store writes
    it; its field names are the task table's columns."""

    status: Status | _Keep = KEEP
    ready: bool | _Keep = KEEP
    blocked: bool | _Keep = KEEP
    owner: str | None | _Keep = KEEP
    lease_token: str | None | _Keep = KEEP
    lease_expires_at: float | None | _Keep = KEEP
    lease_seconds: int | None | _Keep = KEEP
    attempts: int | _Keep = KEEP
    available_at: float | _Keep = KEEP
    result: str | None | _Keep = KEEP  #: JSON text
    verification: str | None | _Keep = KEEP
    last_error: str | None | _Keep = KEEP
    completed_at: float | None | _Keep = KEEP
    review_comment: str | None | _Keep = KEEP
    updated_at: float | _Keep = KEEP
    lease_process: str | None | _Keep = KEEP  #: the stdio server process that took or renewed the lease
    stale: bool | _Keep = KEEP  #: a done task with a dependency that is not done (see `dependency_flags`)

    def columns(self) -> dict[str, Any]:
        """The columns it sets, by name (for the store)."""
        out = {}
        for name in _CHANGE_COLUMNS:
            value = getattr(self, name)
            if value is not KEEP:
                out[name] = value.value if isinstance(value, Status) else value
        return out


_CHANGE_COLUMNS = tuple(f.name for f in fields(TaskChange))


class TaskFacts(Protocol):
    """What the rules read of a task (the store's `TaskRecord` has it)."""

    @property
    def status(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def review(self) -> bool: ...
    @property
    def ready(self) -> bool: ...
    @property
    def blocked(self) -> bool: ...
    @property
    def owner(self) -> str | None: ...
    @property
    def lease_token(self) -> str | None: ...
    @property
    def lease_expires_at(self) -> float | None: ...
    @property
    def lease_seconds(self) -> int | None: ...
    @property
    def attempts(self) -> int: ...
    @property
    def max_attempts(self) -> int: ...
    @property
    def available_at(self) -> float: ...
    @property
    def result(self) -> str | None: ...
    @property
    def verification(self) -> str | None: ...
    @property
    def last_error(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class ActionInput:
    """What the caller and the moment bring to a transition."""

    at: float
    lease_token: str | None = None
    lease_seconds: int | None = None
    result: str | None = None  #: JSON text
    verification: str | None = None
    error: str | None = None
    retry: bool = True
    reason: str | None = None
    comment: str | None = None
    paths: tuple[str, ...] = ()  #: path patterns (reserve, unreserve), normalized
    shared: bool = False  #: reserve: held back only by exclusive reservations
    deps_done: bool = True  #: every dependency settled (read for the rows that say `reads_dependencies`)
    process: str | None = None  #: the caller's stdio server process (None: over HTTP), for a renewal
    backoff_base: float = 1.0
    backoff_cap: float = 300.0


@dataclass(frozen=True, slots=True)
class Outcome:
    """A transition's result: the columns it sets, the task event it records (kind, detail), and the
    fields results show that it empties (its answer shows them as null)."""

    change: TaskChange
    event: str | None = None
    detail: dict[str, Any] | None = None
    cleared: tuple[str, ...] = ()

    @property
    def status(self) -> Status | None:
        """The status it sets, None when it keeps the task's."""
        return None if self.change.status is KEEP else self.change.status


@dataclass(frozen=True)
class Rule:
    """One action: who takes it, from which statuses, to which, and the change it makes."""

    allowed: frozenset[Status]  #: the statuses it is allowed from
    to: frozenset[Status]  #: the statuses it may leave the task in
    who: Who
    change: Callable[[TaskFacts, ActionInput], Outcome]
    #: why it cannot run from the task's status (`{key}`, `{status}`); for the holder's actions the
    #: service says how the lease ended instead (`lease_lost`)
    refusal: str = ""
    #: the text the caller gives with it, recorded in its event (reason, comment, verification, error)
    argument: str | None = None
    #: why `argument` must be given ("": it may be left out); `blank_refusal` says so
    required: str = ""
    #: what a person reads it did: "Task K was {done}." (the console), "{done} task K" (the CLI)
    done: str = ""
    also: Callable[[TaskFacts, float], bool] | None = None  #: a condition besides the status
    reads_dependencies: bool = False  #: `ActionInput.deps_done` must be read first
    #: the same call again (a retry of the same lease) answers the task unchanged
    repeat: Callable[[TaskFacts, ActionInput], bool] | None = None
    reports: Literal["unblocked", "revoked"] | None = None  #: what its answer lists about the dependents
    instead: str = ""  #: what an agent refused this action (not its holder, not a person) does instead
    #: the statuses from which only a person (the `operator` role) takes it, and what an agent does instead
    operator_from: frozenset[Status] = frozenset()
    operator_instead: str = ""

    def allows(self, task: TaskFacts, at: float) -> bool:
        return task.status in self.allowed and (self.also is None or self.also(task, at))

    def blank_refusal(self, action: str, given_as: str = "") -> str:
        """The refusal of `action` without its required argument (`given_as`: how the caller gives it,
        e.g. a command-line flag; default: the argument's name)."""
        what = given_as or (self.argument if self.argument == "verification" else f"a {self.argument}")
        return f"{action} needs {what}: {self.required}"


# -- the changes ------------------------------------------------------------------------------------
def _heartbeat(t: TaskFacts, g: ActionInput) -> Outcome:
    seconds = g.lease_seconds or t.lease_seconds
    change = TaskChange(
        lease_expires_at=g.at + (seconds or 900), lease_seconds=seconds, updated_at=g.at, lease_process=g.process
    )
    return Outcome(change)


def completed(g: ActionInput) -> Outcome:
    """Complete, for a task not for review (the one-statement path needs no row read first)."""
    change = TaskChange(
        status=Status.DONE,
        ready=False,
        result=g.result,
        verification=g.verification,
        last_error=None,
        completed_at=g.at,
        lease_expires_at=None,
        updated_at=g.at,
    )
    return Outcome(change, "complete", {"verification": g.verification}, cleared=("last_error",))


def _complete(t: TaskFacts, g: ActionInput) -> Outcome:
    if not t.review:
        return completed(g)
    # a person approves it: it waits in review, its lease ended (its token kept)
    change = TaskChange(
        status=Status.IN_REVIEW,
        ready=False,
        result=g.result,
        verification=g.verification,
        last_error=None,
        completed_at=None,
        lease_expires_at=None,
        updated_at=g.at,
    )
    return Outcome(change, "submit", {"verification": g.verification}, cleared=("last_error",))


def _fail(t: TaskFacts, g: ActionInput) -> Outcome:
    if g.retry and t.attempts < t.max_attempts:
        delay = min(g.backoff_cap, g.backoff_base * 2 ** max(0, t.attempts - 1))
        change = TaskChange(
            status=Status.PENDING,
            owner=None,
            lease_token=None,
            lease_expires_at=None,
            last_error=g.error,
            available_at=g.at + delay,
            updated_at=g.at,
        )
        return Outcome(change, "fail", {"error": g.error, "retry_in": delay})
    change = TaskChange(
        status=Status.FAILED, ready=False, lease_token=None, lease_expires_at=None, last_error=g.error, updated_at=g.at
    )
    return Outcome(change, "fail", {"error": g.error})


def _handed_back(t: TaskFacts, g: ActionInput) -> TaskChange:
    """Pending again at once, the attempt given back."""
    return TaskChange(
        status=Status.PENDING,
        owner=None,
        lease_token=None,
        lease_expires_at=None,
        attempts=max(0, t.attempts - 1),
        available_at=g.at,
        updated_at=g.at,
    )


def _release(t: TaskFacts, g: ActionInput) -> Outcome:
    return Outcome(_handed_back(t, g), "release", {"reason": g.reason} if g.reason else None)


def _operator_release(t: TaskFacts, g: ActionInput) -> Outcome:
    detail = {"owner": t.owner} | ({"reason": g.reason} if g.reason else {})
    return Outcome(_handed_back(t, g), "operator_release", detail)


def _reopen(t: TaskFacts, g: ActionInput) -> Outcome:
    gate = t.kind == "gate"
    change = TaskChange(
        # a gate whose dependencies are settled goes straight back to a person
        status=Status.IN_REVIEW if gate and g.deps_done else Status.PENDING,
        ready=g.deps_done and not gate,
        attempts=0,
        owner=None,
        lease_token=None,
        lease_expires_at=None,
        available_at=0.0,
        completed_at=None,
        result=None,
        verification=None,
        stale=False,
        updated_at=g.at,  # last_error is kept: the reason is in the event and the log, not an error
    )
    old = {"status": t.status, "result": t.result, "verification": t.verification, "last_error": t.last_error}
    detail = {"reason": g.reason, **{k: v for k, v in old.items() if v is not None}}
    return Outcome(change, "reopen", detail, cleared=("result", "verification"))


def _approve(t: TaskFacts, g: ActionInput) -> Outcome:
    change = TaskChange(status=Status.DONE, ready=False, completed_at=g.at, review_comment=None, updated_at=g.at)
    return Outcome(change, "approve", {"comment": g.comment} if g.comment else None, cleared=("review_comment",))


def _reject(t: TaskFacts, g: ActionInput) -> Outcome:
    if t.kind == "gate":
        change = TaskChange(
            status=Status.FAILED,
            ready=False,
            last_error=f"rejected: {g.comment}",
            review_comment=g.comment,
            updated_at=g.at,
        )
        return Outcome(change, "reject", {"comment": g.comment, "gate": True})
    change = TaskChange(
        status=Status.PENDING,
        ready=g.deps_done,
        owner=None,
        lease_token=None,
        lease_expires_at=None,
        attempts=max(0, t.attempts - 1),
        available_at=g.at,
        result=None,
        verification=None,
        completed_at=None,
        review_comment=g.comment,
        updated_at=g.at,
    )
    kept = {"result": t.result, "verification": t.verification}
    detail = {"comment": g.comment, **{k: v for k, v in kept.items() if v}}
    return Outcome(change, "reject", detail, cleared=("result", "verification"))


def _cancel(t: TaskFacts, g: ActionInput) -> Outcome:
    change = TaskChange(
        status=Status.CANCELLED, ready=False, owner=None, lease_token=None, lease_expires_at=None, updated_at=g.at
    )
    return Outcome(change, "cancel", {"reason": g.reason} | ({"owner": t.owner} if t.status == Status.CLAIMED else {}))


def _reserve(t: TaskFacts, g: ActionInput) -> Outcome:
    """The reservations themselves are rows of their own (`tasks/store/reservations.py`), written by the
    service under the reservations' lock; the task records the event."""
    return Outcome(TaskChange(updated_at=g.at), "reserve", {"paths": list(g.paths), "shared": g.shared})


def _unreserve(t: TaskFacts, g: ActionInput) -> Outcome:
    return Outcome(TaskChange(updated_at=g.at), "unreserve", {"paths": list(g.paths)})


def _retry_now(t: TaskFacts, g: ActionInput) -> Outcome:
    return Outcome(TaskChange(available_at=g.at, updated_at=g.at), "retry_now")


_HOLDER = frozenset({Status.CLAIMED})
_IN_REVIEW = frozenset({Status.IN_REVIEW})
_REVIEW_INSTEAD = (
    "message(action='send', to='operators', task_key=..., body=...) asking a person to decide, then claim other "
    "work (claim_task says waiting_on_review while a person decides)"
)
_RELEASE_INSTEAD = "only the lease's holder (with its lease_token) or a person releases it; claim other work"

#: every action's row (see `Rule`)
RULES: dict[Action, Rule] = {
    Action.HEARTBEAT: Rule(_HOLDER, _HOLDER, Who.HOLDER, _heartbeat),
    Action.COMPLETE: Rule(
        _HOLDER,
        frozenset({Status.DONE, Status.IN_REVIEW}),
        Who.HOLDER,
        _complete,
        argument="verification",
        required="say how the result was verified",
        done="completed",
        repeat=lambda t, g: t.status in (Status.DONE, Status.IN_REVIEW) and t.lease_token == g.lease_token,
        reports="unblocked",
    ),
    Action.FAIL: Rule(
        _HOLDER, frozenset({Status.PENDING, Status.FAILED}), Who.HOLDER, _fail, argument="error", done="failed"
    ),
    Action.RELEASE: Rule(
        _HOLDER,
        frozenset({Status.PENDING}),
        Who.HOLDER,
        _release,
        argument="reason",
        done="released",
        instead=_RELEASE_INSTEAD,
    ),
    Action.REOPEN: Rule(
        frozenset({Status.DONE, Status.FAILED, Status.CANCELLED}),
        frozenset({Status.PENDING, Status.IN_REVIEW}),
        Who.ANYONE,
        _reopen,
        refusal="reopen works on done, failed or cancelled tasks; task {key!r} is {status}",
        argument="reason",
        required="it is recorded in the progress log",
        done="reopened",
        reads_dependencies=True,
        reports="revoked",
        # a person cancelled it: only a person revives it
        operator_from=frozenset({Status.CANCELLED}),
        operator_instead=(
            "message(action='send', to='operators', task_key={key!r}, body=...) asking a person (the operators' "
            "inbox) to reopen it, and why"
        ),
    ),
    Action.APPROVE: Rule(
        _IN_REVIEW,
        frozenset({Status.DONE}),
        Who.OPERATOR,
        _approve,
        refusal="approve works on tasks in review; task {key!r} is {status}",
        argument="comment",
        done="approved",
        reports="unblocked",
        instead=_REVIEW_INSTEAD,
    ),
    Action.REJECT: Rule(
        _IN_REVIEW,
        frozenset({Status.PENDING, Status.FAILED}),
        Who.OPERATOR,
        _reject,
        refusal="reject works on tasks in review; task {key!r} is {status}",
        argument="comment",
        required="what to change (the next claimer reads it)",
        done="rejected",
        reads_dependencies=True,
        instead=_REVIEW_INSTEAD,
    ),
    Action.RETRY_NOW: Rule(
        frozenset({Status.PENDING}),
        frozenset({Status.PENDING}),
        Who.OPERATOR,
        _retry_now,
        refusal="retry_now ends a retry backoff; task {key!r} is {status} and not waiting out a backoff",
        done="retried",
        also=lambda t, at: t.available_at > at,
        instead="wait out the backoff (claim_task's retry_after) or claim other work",
    ),
    Action.CANCEL: Rule(
        frozenset({Status.PENDING, Status.CLAIMED, Status.IN_REVIEW, Status.FAILED}),
        frozenset({Status.CANCELLED}),
        Who.OPERATOR,
        _cancel,
        refusal="cancel works on tasks not done or cancelled; task {key!r} is {status}",
        argument="reason",
        required="it is recorded in the progress log",
        done="cancelled",
        reports="unblocked",
        instead="record_progress saying why the task is not needed; a person decides",
    ),
    Action.RESERVE: Rule(_HOLDER, _HOLDER, Who.HOLDER, _reserve),
    Action.UNRESERVE: Rule(_HOLDER, _HOLDER, Who.HOLDER, _unreserve),
    Action.OPERATOR_RELEASE: Rule(
        _HOLDER,
        frozenset({Status.PENDING}),
        Who.OPERATOR,
        _operator_release,
        refusal="release works on claimed tasks; task {key!r} is {status}",
        argument="reason",
        required="the next claimer reads it in the task's context",
        done="released",
        instead=_RELEASE_INSTEAD,
    ),
}

#: the actions a person takes by name (the console's buttons, the CLI's commands): every action but the
#: lease holder's, by its public name
PERSON_ACTIONS: dict[str, Action] = {a.public: a for a, rule in RULES.items() if rule.who is not Who.HOLDER}
#: the holder's actions that end its hold on the task, and the word for each (`completed`)
LET_GO: dict[str, str] = {
    a.value: rule.done for a, rule in RULES.items() if rule.who is Who.HOLDER and Status.CLAIMED not in rule.to
}


# -- dependents ---------------------------------------------------------------------------------------
def shown(status: str, blocked: bool) -> ShownStatus:
    """The status a result shows: `blocked` for a pending task behind a failed dependency."""
    return cast(ShownStatus, BLOCKED if status == Status.PENDING and blocked else str(status))


def dependency_flags(dependencies: Iterable[tuple[str, bool, bool]]) -> tuple[bool, bool]:
    """(every dependency settled, a dependency failed or is blocked) from each dependency's
    (status, blocked, stale). A done dependency that is `stale` (one of its own dependencies, directly or
    through done tasks, was reopened and is not done again) does not count as settled: what depends on
    a reopened task waits until it is done again, however far down, while done tasks stay done."""
    settled, blocked = True, False
    for status, dep_blocked, dep_stale in dependencies:
        settled = settled and status in SETTLED and not (dep_stale and status == Status.DONE)
        blocked = blocked or status == Status.FAILED or (dep_blocked and status != Status.CANCELLED)
    return settled, blocked


def may_be_ready(status: str, kind: str, deps_done: bool) -> bool:
    """Whether a task with these flags is `ready` (a gate never is: a person decides it)."""
    return deps_done and status in OPEN and kind != "gate"


def settle(
    t: TaskFacts, deps_done: bool, blocked: bool, at: float, stale: bool = False
) -> tuple[Effect, TaskChange] | None:
    """What a dependent becomes once its dependencies' flags are (`deps_done`, `blocked`); None when
    nothing changes. No task is ever held, or in review, while a dependency is not settled. `stale`: the
    task's own flag as stored (a done task is stale while a dependency is not settled; it stays done)."""
    if t.status == Status.DONE and (stale == deps_done or t.blocked != blocked or t.ready):
        return Effect.FLAGS, TaskChange(ready=False, blocked=blocked, stale=not deps_done)
    ready = may_be_ready(t.status, t.kind, deps_done)
    if t.status == Status.CLAIMED and not deps_done:  # its holder's next call gets lease_lost
        return Effect.REVOKE, TaskChange(
            ready=ready,
            blocked=blocked,
            status=Status.PENDING,
            owner=None,
            lease_token=None,
            lease_expires_at=None,
            attempts=max(0, t.attempts - 1),
            last_error=REVOKED_BY_REOPEN,
        )
    if t.kind == "gate" and t.status == Status.PENDING and deps_done:
        return Effect.ENTER_REVIEW, TaskChange(ready=False, blocked=blocked, status=Status.IN_REVIEW, updated_at=at)
    if t.status == Status.IN_REVIEW and not deps_done:  # a work task gets its attempt back
        attempts = t.attempts if t.kind == "gate" else max(0, t.attempts - 1)
        return Effect.LEAVE_REVIEW, TaskChange(
            ready=ready,
            blocked=blocked,
            status=Status.PENDING,
            owner=None,
            lease_token=None,
            attempts=attempts,
            updated_at=at,
        )
    if t.ready != ready or t.blocked != blocked:
        effect = Effect.UNBLOCK if ready and not t.ready and t.status == Status.PENDING else Effect.FLAGS
        return effect, TaskChange(ready=ready, blocked=blocked)
    return None


def claim_would_take(t: TaskFacts, at: float) -> bool:
    """Whether a claim could take the task now (the condition of `CLAIMABLE` in `tasks/store/queries.py`)."""
    if not t.ready:
        return False
    if t.status == Status.PENDING:
        return t.available_at <= at
    return (
        t.status == Status.CLAIMED
        and t.lease_expires_at is not None
        and t.lease_expires_at <= at
        and t.attempts < t.max_attempts
    )

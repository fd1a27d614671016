"""The one word each session ends with, decided from the harness first and the process second.

The task's state says what the agent did with it (completed, in_review, released, failed: an action
its identity took during the session). Only when it did none of these does the way the process
ended decide: the runner's own stop (stalled, timed_out, stopped), a setup error (the harness server
not connected, the model API unreachable or refusing the credentials), a rate limit, the turn limit,
a process that died without a final result (crashed), or one that just exited (no_progress). The exit
code alone decides nothing: `claude -p` exits 0 on some rate limits and 1 on everything else."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mcp_harness.models import SessionOutcome
from mcp_harness.runner.agents import Observed
from mcp_harness.tasks.rules import Status

Stop = Literal["stalled", "timed_out", "stopped", "setup_error"]

#: the task actions that settle a session's outcome, by the status the task is in after them
ACTED: dict[str, SessionOutcome] = {"complete": "completed", "release": "released", "fail": "failed"}
#: outcomes that give the attempt back (the task was never really tried)
GIVE_BACK: frozenset[SessionOutcome] = frozenset({"rate_limited", "setup_error"})
#: outcomes that count towards the no-progress breaker: the task is where the session found it. A release
#: too: it gives the task back claimable at once, so a model that always releases would otherwise be given
#: the same task by one session after another, without end.
NO_PROGRESS: frozenset[SessionOutcome] = frozenset(
    {"no_progress", "max_turns", "stalled", "timed_out", "crashed", "released"}
)


@dataclass
class Ending:
    """How the process ended and what the agent did with its task."""

    stop: Stop | None  #: why the runner stopped it, if it did
    seen: Observed
    exit_code: int | None
    action: str | None  #: the last of complete/release/fail its identity took on the task this session
    status: str | None  #: the task's status after the session


def outcome(end: Ending) -> SessionOutcome:
    if end.stop == "setup_error" or end.seen.connected is False:  # also when it ended before it was stopped
        return "setup_error"
    if end.action == "complete":
        return "in_review" if end.status == Status.IN_REVIEW else "completed"
    if end.action in ACTED:
        return ACTED[end.action]
    if end.stop is not None:
        return end.stop
    if end.seen.setup_cause is not None:  # the environment's fault, not the task's
        return "setup_error"
    if end.seen.limited:
        return "rate_limited"
    result = end.seen.result
    if result is not None and result.get("subtype") == "error_max_turns":
        return "max_turns"
    if result is None and end.seen.connected is not None:  # a stream that never gave its final result
        return "crashed"
    if result is None and end.exit_code is not None and end.exit_code < 0:  # killed by a signal
        return "crashed"
    return "no_progress"

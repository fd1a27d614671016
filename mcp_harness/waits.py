"""How long the current call spent waiting for work (a `claim_task` with `wait_seconds`): the metrics
time a claim without its wait, and the wait apart. A context variable, so the service sets it without
knowing the metrics and the metrics read it without loading the service."""

from __future__ import annotations

from contextvars import ContextVar

#: set by the metrics around a call to a one-item list; the claim's waits add their seconds to it
claim_waited: ContextVar[list[float] | None] = ContextVar("claim_waited", default=None)

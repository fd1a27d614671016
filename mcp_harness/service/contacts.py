"""Liveness: when each agent last made a call (any tool: a claim poll, a heartbeat, a read) and what
its last claim answered (or what it did with the task it got: completed, released, failed), for the
console's "who is alive", why each idle one is idle, and its silent-holder flags.

Cheap on the hot path: a server remembers per agent when it last wrote the agent's row and writes it
again only after `WRITE_EVERY` seconds (or when a claim's answer changes), in a transaction of its
own. The row can lag the agent's latest call by `WRITE_EVERY` seconds, far below the silence that
gets a holder flagged (more than half its lease, or `MCP_HARNESS_SILENT_AFTER`). A failed write never fails the
agent's call."""

from __future__ import annotations

import logging
from typing import Any

from ..models import ClaimTaskResult, UpdateTaskResult
from ..store import console as store
from ..store.common import now
from .base import Identity, ServiceBase

log = logging.getLogger(__name__)

WRITE_EVERY = 5.0  #: seconds between two writes of one agent's row by one process
CLAIMED = "claimed"  #: the claim outcome when a claim got a task (else the reason it got none)
#: what an agent last did with the task it held, recorded as its outcome `verb:key` (it holds it no more)
LET_GO = {"complete": "completed", "release": "released", "fail": "failed"}


class ContactService(ServiceBase):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._written: dict[tuple[str, str], tuple[float, str | None]] = {}

    async def touch(self, ident: Identity, tool: str, result: Any = None, action: str | None = None) -> None:
        """`ident` made a call to `tool` (and, for a claim, got `result`; for an `update_task` `action` that
        lets its task go, such as complete, the answer naming the task)."""
        outcome = None
        if isinstance(result, ClaimTaskResult):
            outcome = CLAIMED if result.task is not None else str(result.reason or "nothing")
        elif isinstance(result, UpdateTaskResult) and action in LET_GO:
            outcome = f"{LET_GO[action]}:{result.key}"
        key = (ident.workspace, ident.agent)
        at = now()
        last = self._written.get(key)
        if last is not None and at - last[0] < WRITE_EVERY and (outcome is None or outcome == last[1]):
            return
        self._written[key] = (at, outcome if outcome is not None else (last[1] if last else None))
        try:
            async with self.db.write() as conn:
                await store.record_contact(conn, ident.workspace, ident.agent, at, tool, outcome)
        except Exception as exc:  # noqa: BLE001 - liveness is a courtesy: the agent's call goes on
            self._written.pop(key, None)
            log.debug("could not record the contact of %s/%s: %s", ident.workspace, ident.agent, exc)

"""Liveness: when each agent last made a call (any tool: a claim poll, a heartbeat, a read) and what
its last claim answered (or what it did with the task it got: completed, released, failed), for the
console's "who is alive", why each idle one is idle, and its silent-holder flags.

Cheap on the hot path: a server remembers per agent when it last wrote the agent's row and writes it
again only after `WRITE_EVERY` seconds (or when a claim's answer changes), in a transaction of its
own. The row can lag the agent's latest call by `WRITE_EVERY` seconds, far below the silence that
gets a holder flagged (more than half its lease, or `MCP_HARNESS_SILENT_AFTER`). A failed write never fails the
agent's call.

A claim that takes a task and a complete (the calls whose outcome changes every time) write the row
with their own change instead, in its statement or transaction (`riding`), so the call commits once:
the adapter marks the tool call it serves (`ContactService.serving`), and the service asks `riding`
for the row to write. Calls of one agent that overlap in one process (one connection with several
requests in flight) write it once between them: while one call's change writes the row, the others
count as written with it (overlapping calls have no last one to tell)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from mcp_harness.base import Identity, ServiceBase
from mcp_harness.models import ClaimTaskResult, UpdateTaskResult
from mcp_harness.oversight.store import reads as store
from mcp_harness.store.common import now
from mcp_harness.tasks.rules import LET_GO
from mcp_harness.tasks.store.tasks import Contact

log = logging.getLogger(__name__)

WRITE_EVERY = 5.0  #: seconds between two writes of one agent's row by one process
CLAIMED = "claimed"  #: the claim outcome when a claim got a task (else the reason it got none)


def let_go(action: str, key: str) -> str:
    """The outcome recorded when an agent's `action` (complete, release, fail) lets its task `key` go:
    `verb:key` (it holds it no more)."""
    return f"{LET_GO[action]}:{key}"


class Ride:
    """The contact row a change writes with it (`contact`, None: none to write), and whether the change
    happened (`done`, which the service sets)."""

    __slots__ = ("contact", "done")

    def __init__(self, contact: Contact | None = None) -> None:
        self.contact = contact
        self.done = False


class Serving:
    """The tool call being served (`ContactService.serving`): the contacts' service, the caller, the
    tool, and whether a change of the call wrote (or shared) the caller's contact row (`settled`)."""

    __slots__ = ("service", "ident", "tool", "settled")

    def __init__(self, service: ContactService, ident: Identity, tool: str) -> None:
        self.service, self.ident, self.tool = service, ident, tool
        self.settled = False


_SERVING: ContextVar[Serving | None] = ContextVar("harness_serving", default=None)


@contextmanager
def riding(ident: Identity, outcome: str) -> Iterator[Ride]:
    """Inside a tool call (`ContactService.serving`): the caller's contact row for the change about to
    be made, whose outcome is `outcome` (as `touch` names it), when a write is due; the service passes
    `ride.contact` to the store with the change and sets `ride.done` once the change happened. Then the
    row counts as written, and the adapter's `touch` after the call writes nothing. Outside a tool call,
    or for another identity, nothing rides."""
    serving = _SERVING.get()
    ride = Ride()
    if serving is None or serving.ident != ident:
        yield ride
        return
    service, tool = serving.service, serving.tool
    key = (ident.workspace, ident.agent)
    at = now()
    if not service.due(key, at, outcome):
        yield ride
        return
    writing = key not in service.writing
    if writing:  # else another call of this process writes the row now: this one is written with it
        service.writing.add(key)
        ride.contact = Contact(ident.agent, at, tool, outcome)
    try:
        yield ride
    finally:
        if writing:
            service.writing.discard(key)
    if ride.done:
        service.wrote(key, at, outcome)
        serving.settled = True


class ContactService(ServiceBase):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._written: dict[tuple[str, str], tuple[float, str | None]] = {}
        #: agents whose row a change in flight writes now (`riding`)
        self.writing: set[tuple[str, str]] = set()

    @contextmanager
    def serving(self, ident: Identity, tool: str) -> Iterator[None]:
        """Mark the tool call `ident` makes to `tool` for the length of the block: a change it makes
        may write the caller's contact row with it (`riding`)."""
        token = _SERVING.set(Serving(self, ident, tool))
        try:
            yield
        finally:
            _SERVING.reset(token)

    def due(self, key: tuple[str, str], at: float, outcome: str | None) -> bool:
        """Whether the row of `key` (workspace, agent) is to be written for a call at `at` with `outcome`."""
        last = self._written.get(key)
        return not (last is not None and at - last[0] < WRITE_EVERY and (outcome is None or outcome == last[1]))

    def wrote(self, key: tuple[str, str], at: float, outcome: str | None) -> None:
        last = self._written.get(key)
        self._written[key] = (at, outcome if outcome is not None else (last[1] if last else None))

    async def touch(self, ident: Identity, tool: str, result: Any = None, action: str | None = None) -> None:
        """`ident` made a call to `tool` (and, for a claim, got `result`; for an `update_task` `action` that
        lets its task go, such as complete, the answer naming the task)."""
        serving = _SERVING.get()
        if result is not None and serving is not None and serving.settled and serving.ident == ident:
            return  # the call's change wrote the row (other calls of this agent in flight may have since)
        outcome = None
        if isinstance(result, ClaimTaskResult):
            outcome = CLAIMED if result.task is not None else str(result.reason or "nothing")
        elif isinstance(result, UpdateTaskResult) and action in LET_GO:
            outcome = let_go(action, result.key)
        key = (ident.workspace, ident.agent)
        at = now()
        if not self.due(key, at, outcome):
            return
        self.wrote(key, at, outcome)
        try:
            async with self.db.write() as conn:
                await store.record_contact(conn, ident.workspace, ident.agent, at, tool, outcome)
        except Exception as exc:  # noqa: BLE001 - liveness is a courtesy: the agent's call goes on
            self._written.pop(key, None)
            log.debug("could not record the contact of %s/%s: %s", ident.workspace, ident.agent, exc)

"""How waiting claims learn that work may be there: this process's own changes in their workspace wake
them at once, other processes' commits in their workspace through the change feed (`store/changes.py`),
the clock by a cheap read-only poll."""

from __future__ import annotations

from collections.abc import Callable

import anyio

from mcp_harness.base import Identity
from mcp_harness.config import Settings
from mcp_harness.identity import caller_gone
from mcp_harness.sessions import alive
from mcp_harness.store import Connection, Database, changes
from mcp_harness.store.common import now
from mcp_harness.store.records import LeaseProcessRow
from mcp_harness.tasks import reservations as task_paths
from mcp_harness.tasks.store import tasks as store
from mcp_harness.waits import claim_waited

#: how often a waiting claim looks for leases whose stdio server process is gone (killed without a word:
#: nothing commits, so no change wakes the wait)
DEAD_LOOK_SECONDS = 1.0


async def dead_leases(conn: Connection, workspace: str, at: float) -> list[LeaseProcessRow]:
    """The live leases of `workspace` taken or renewed through a stdio server whose process is gone from
    this machine (its pid no longer runs with the start time recorded)."""
    return [row for row in await store.leases_with_process(conn, workspace, at) if alive(row.lease_process) is False]


class Wakeup:
    """The wake-up signal the task service's parts share: adds and actions `notify`, claims wait."""

    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings
        self._changed: dict[str, anyio.Event] = {}  # per workspace: wakes this process's waiting claims at once

    def notify(self, workspace: str) -> None:
        """A change by this process in `workspace`: its waiting claims (and no other's) look again."""
        event = self._changed.pop(workspace, None)
        if event is not None:
            event.set()

    async def wait_for_work(
        self, ident: Identity, tags: list[str] | None, task_key: str | None, remaining: float
    ) -> bool:
        """Sleep until a claim may succeed: woken at once by this process's own changes; by the change
        feed (a commit by any process) once a cheap read-only check finds a claimable task; and by that
        check every poll interval (the clock alone makes work claimable: a lease running out, a backoff
        ending). No shared counter is written for this, so completes never contend on a hot row.
        False when the caller's connection ended meanwhile (`caller_gone`): then nothing may be claimed."""

        looked = anyio.current_time()

        async def work_to_take() -> bool:
            """Work a claim may take now, or a holder whose process died (the claim then ends its lease)."""
            nonlocal looked
            async with self.db.read() as conn:
                if await task_paths.claim_would_succeed(conn, ident.workspace, ident.agent, now(), tags, task_key):
                    return True
                if anyio.current_time() - looked < DEAD_LOOK_SECONDS:
                    return False
                looked = anyio.current_time()
                return bool(await dead_leases(conn, ident.workspace, now()))

        gone = caller_gone.get()  # set only where the transport can tell (stdio)
        if gone is not None and gone.is_set():
            return False
        wake = anyio.Event()  # this process's changes, or the caller leaving
        started = anyio.current_time()
        async with anyio.create_task_group() as relays:
            relays.start_soon(_relay, self._changed.setdefault(ident.workspace, anyio.Event()), wake)
            if gone is not None:
                relays.start_soon(_relay, gone, wake)
            await changes.feed(self.db).wait_until(
                work_to_take,
                remaining,
                workspace=ident.workspace,
                recheck=self.settings.poll_interval_seconds,
                local=wake,
            )
            relays.cancel_scope.cancel()
        waited = claim_waited.get()
        if waited is not None:  # the metrics time the claim without its wait
            waited[0] += anyio.current_time() - started
        return gone is None or not gone.is_set()

    async def watch_changes(self, workspace: str, changed: Callable[[], None], *, within: float = 0.5) -> None:
        """Call `changed()` after every change in `workspace` (a task, the log, a checkpoint: this process's
        own at once, another process's commit through the change feed within `within` seconds), until
        cancelled. Watching all along, no change between two looks of the caller goes unseen."""
        feed = changes.feed(self.db)
        seen = feed.version_of(workspace)
        while True:
            local = self._changed.setdefault(workspace, anyio.Event())
            version = await feed.wait(seen, 3600.0, workspace=workspace, also=local, interval=within)
            if version != seen or local.is_set():
                seen = version
                changed()


async def _relay(source: anyio.Event, target: anyio.Event) -> None:
    await source.wait()
    target.set()

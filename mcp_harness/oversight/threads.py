"""The saved states: each thread's latest version, one version's state, and what changed between two."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp_harness.arguments import RestoreStateArgs
from mcp_harness.base import Identity, ServiceBase, iso
from mcp_harness.checkpoints.jsondiff import Change, diff
from mcp_harness.checkpoints.service import CheckpointService
from mcp_harness.checkpoints.store import checkpoints as checkpoint_store
from mcp_harness.config import check_name
from mcp_harness.errors import NotFound
from mcp_harness.models import CheckpointMeta
from mcp_harness.oversight.store import reads as store


@dataclass(frozen=True)
class ThreadSummary:
    name: str
    latest_version: int
    size_bytes: int
    updated_at: str


@dataclass(frozen=True)
class StateDiff:
    old: CheckpointMeta
    new: CheckpointMeta
    changes: list[Change]
    more: int


class ThreadReads(ServiceBase):
    """The saved states (a part of `ConsoleService`)."""

    def __init__(self, *args: Any, checkpoints: CheckpointService, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._checkpoints = checkpoints

    async def thread_names(self, ident: Identity, limit: int = 200) -> list[str]:
        """The first `limit` threads by name (for the timeline's filter as choices): bounded at any size."""
        async with self.db.page_read() as conn:
            return await store.thread_names(conn, ident.workspace, limit)

    async def threads(self, ident: Identity) -> list[ThreadSummary]:
        async with self.db.page_read() as conn:
            rows = await checkpoint_store.list_threads(conn, ident.workspace)
        return [ThreadSummary(r.name, r.latest_version, r.size_bytes, iso(r.updated_at)) for r in rows]

    async def state(self, ident: Identity, thread: str, version: int | None) -> tuple[CheckpointMeta, dict[str, Any]]:
        """One version of a thread (the latest without `version`): its metadata and state."""
        check_name("thread", thread)
        async with self.db.page_read() as conn:
            meta, state, _missing = await self._checkpoints.load(
                conn, ident, RestoreStateArgs(thread=thread, version=version)
            )
        if meta is None or state is None:
            raise NotFound(f"thread {thread!r} has no checkpoint")
        return meta, state

    async def diff(self, ident: Identity, thread: str, old: int, new: int) -> StateDiff:
        """What changed in a thread's state from version `old` to version `new`."""
        old_meta, old_state = await self.state(ident, thread, old)
        new_meta, new_state = await self.state(ident, thread, new)
        found, more = diff(old_state, new_state)
        return StateDiff(old_meta, new_meta, found, more)

"""What the operator console and the metrics read, one service over this package's modules: the task
views (`tasks.py`), what needs a person (`attention.py`), the figures (`pace.py`), the timeline and the
agents (`activity.py`) and the saved states (`threads.py`). Read-only; every method that reads a workspace
takes the viewer's `Identity`."""

from __future__ import annotations

from mcp_harness.oversight.activity import ActivityReads
from mcp_harness.oversight.attention import AttentionReads
from mcp_harness.oversight.pace import PaceReads
from mcp_harness.oversight.store import reads as store
from mcp_harness.oversight.tasks import TaskReads
from mcp_harness.oversight.threads import ThreadReads
from mcp_harness.store import changes


class ConsoleService(TaskReads, AttentionReads, PaceReads, ActivityReads, ThreadReads):
    """The console's reads (`Harness.console`): each concept's in its module, with the change feed."""

    @property
    def changes(self) -> changes.ChangeFeed:
        """The process's change feed: pages wait on it to follow changes made by any process."""
        return changes.feed(self.db)

    async def workspaces(self) -> list[str]:
        async with self.db.read() as conn:
            return await store.workspace_names(conn)

"""What the operator console and the metrics read, one service over the concepts' modules: the task views
(`console_tasks`), what needs a person (`console_attention`), the figures (`console_pace`), the timeline and
the agents (`console_activity`) and the saved states (`console_threads`). Read-only; every method that
reads a workspace takes the viewer's `Identity`."""

from __future__ import annotations

from ..store import changes
from ..store import console as store
from .console_activity import ActivityReads
from .console_attention import AttentionReads
from .console_pace import PaceReads
from .console_tasks import TaskReads
from .console_threads import ThreadReads


class ConsoleService(TaskReads, AttentionReads, PaceReads, ActivityReads, ThreadReads):
    """The console's reads (`Harness.console`): each concept's in its module, with the change feed."""

    @property
    def changes(self) -> changes.ChangeFeed:
        """The process's change feed: pages wait on it to follow changes made by any process."""
        return changes.feed(self.db)

    async def workspaces(self) -> list[str]:
        async with self.db.read() as conn:
            return await store.workspace_names(conn)

"""What a runner shows: on a terminal a live line per slot (rich) above the events, piped a plain line per
event; a summary at the end. Agent-written text (a title, last words) is shown on one line, escaped."""

from __future__ import annotations

import sys
import time
from typing import Any

from mcp_harness.cli.output import clean


class Display:
    def __init__(self, parallel: int, *, live: bool | None = None) -> None:
        self.live_on = sys.stdout.isatty() if live is None else live
        self.slots: dict[int, str] = {}
        self.parallel = parallel
        self._live: Any = None
        if self.live_on:
            from rich.console import Console
            from rich.live import Live

            self._console = Console()
            self._live = Live(self._render(), console=self._console, refresh_per_second=2, transient=True)
            self._live.start()

    def _render(self) -> Any:
        from rich.table import Table

        table = Table.grid(padding=(0, 2))
        for slot in range(1, self.parallel + 1):
            table.add_row(f"slot {slot}", self.slots.get(slot, "idle"))
        return table

    def slot(self, slot: int, text: str) -> None:
        """The slot's live line (a terminal only)."""
        self.slots[slot] = clean(text, multiline=False)
        if self._live is not None:
            self._live.update(self._render())

    def idle(self, slot: int) -> None:
        self.slot(slot, "idle")

    def say(self, text: str) -> None:
        """One event, as one line."""
        line = f"{time.strftime('%H:%M:%S')} {clean(text, multiline=False)}"
        if self._live is not None:
            self._live.console.print(line, markup=False, highlight=False)
        else:
            print(line, flush=True)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

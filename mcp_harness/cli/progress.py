"""Progress bars for long operations (export, import, prune): on stderr, and only when it is a
terminal (stdout may be the data itself). Each shows done/total, the rate and the time left."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from mcp_harness.cli.output import console


class Bar:
    """A `progress(what, done, total)` callback for the service that draws a bar (or nothing)."""

    def __init__(self, progress: Any | None, unit: str = "rows") -> None:
        self._progress = progress
        self._unit = unit
        self._task: Any = None

    def __call__(self, what: str, done: int, total: int | None) -> None:
        if self._progress is None:
            return
        if self._task is None:
            self._task = self._progress.add_task(what, total=total)
        self._progress.update(self._task, description=what, completed=done, total=total)

    def lines(self, stream: IO[bytes], total_bytes: int | None, what: str) -> Iterator[bytes]:
        """Yield the lines of `stream`, advancing the bar by the bytes read (an import's input)."""
        if self._progress is None:
            yield from stream
            return
        done = 0
        for line in stream:
            done += len(line)
            self(what, done, total_bytes)
            yield line


@contextmanager
def bar(unit: str = "rows") -> Iterator[Bar]:
    if not sys.stderr.isatty():
        yield Bar(None, unit)
        return
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    if unit == "bytes":
        amount: list[Any] = [DownloadColumn(), TransferSpeedColumn()]
    else:
        amount = [MofNCompleteColumn(), _RateColumn(unit)]
    columns = [TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), *amount, TimeRemainingColumn()]
    with Progress(*columns, console=console(sys.stderr), transient=False) as progress:
        yield Bar(progress, unit)


def _RateColumn(unit: str) -> Any:  # noqa: N802 - a column class made on demand (rich is imported lazily)
    from rich.progress import ProgressColumn
    from rich.text import Text

    class RateColumn(ProgressColumn):
        def render(self, task: Any) -> Text:
            speed = task.finished_speed or task.speed
            return Text(f"{speed:,.0f} {unit}/s" if speed else f"? {unit}/s", style="progress.data.speed")

    return RateColumn()


def sized(stream: IO[bytes]) -> int | None:
    """The size of a regular file behind `stream` (None for a pipe or a terminal)."""
    import os
    import stat

    try:
        info = os.fstat(stream.fileno())
    except (OSError, ValueError):
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None

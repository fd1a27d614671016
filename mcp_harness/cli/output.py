"""Where people's output goes: a `rich` console on stdout (tables) or stderr (progress, notes).

Colour only on a terminal, and never when `NO_COLOR` is set (https://no-color.org). On a terminal
tables fit its width; piped or redirected, nothing is wrapped or cut, so `grep` sees whole rows.
`--json` output never passes through here: it is printed as it always was.
"""

from __future__ import annotations

import os
import sys
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

#: width used when the output is not a terminal: wide enough that no row is wrapped
UNBOUNDED = 100_000


def console(file: IO[str] | None = None) -> Console:
    from rich.console import Console

    file = file or sys.stdout
    terminal = file.isatty()
    return Console(
        file=file,
        width=None if terminal else UNBOUNDED,
        no_color=bool(os.environ.get("NO_COLOR")) or not terminal,
        highlight=False,
        emoji=False,
        markup=False,
        soft_wrap=not terminal,
    )


def table(*columns: str, wide: str | None = None) -> Table:
    """An aligned table without borders: rows start at the left edge, columns two spaces apart.
    `wide` names the column that gets the room left (titles, summaries); on a narrow terminal every
    column wraps at spaces and a word too long for its column is cut with an ellipsis."""
    from rich.table import Table

    t = Table(box=None, pad_edge=False, show_edge=False, padding=(0, 1), header_style="bold", expand=False)
    for name in columns:
        right = name in ("PRI", "TRY", "SIZE", "VERSION", "#", "ATTEMPT")
        if name == wide:
            t.add_column(name, overflow="fold", min_width=16)
        else:
            t.add_column(name, overflow="ellipsis", justify="right" if right else "left")
    return t


def show(*renderables: Any, file: IO[str] | None = None) -> None:
    """Print renderables (tables, text) with trailing spaces removed from every line."""
    out = console(file)
    with out.capture() as captured:
        for renderable in renderables:
            out.print(renderable)
    text = "\n".join(line.rstrip() for line in captured.get().splitlines())
    (file or sys.stdout).write(text + "\n")


def note(message: str) -> None:
    """A remark for the person at the terminal, on stderr (stdout may be data)."""
    print(message, file=sys.stderr)

r"""Where people's output goes: a `rich` console on stdout (tables) or stderr (progress, notes).

Colour only on a terminal, and never when `NO_COLOR` is set (https://no-color.org). On a terminal
tables fit its width; piped or redirected, nothing is wrapped or cut, so `grep` sees whole rows.
`--json` output never passes through here: it is printed as it always was.

Agents write the text people read here (titles, summaries, verifications), and a terminal obeys the
control sequences in it: `ESC[2K` erases a line, `ESC[8m` hides text, OSC 0 sets the window title,
OSC 52 writes the clipboard. So every human-facing output passes through `clean()`: control
characters (C0, DEL, C1, and the Unicode controls that reorder or break lines) are shown escaped as
`\u001b`; a tab becomes a space; a newline stays only where a field is multi-line text. Applied to
JSON text for people (`show`), the escapes keep it valid JSON with the same values.
"""

from __future__ import annotations

import os
import re
import sys
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

#: what a terminal would obey: C0 but tab and newline, DEL, C1; bidirectional overrides and isolates
#: (they reorder what is shown), the Arabic letter mark, line and paragraph separators
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def clean(text: str, *, multiline: bool = True) -> str:
    r"""`text` safe for a terminal: control characters escaped visibly (`\u001b`), tabs as spaces,
    CR LF as a newline; newlines kept where the field is multi-line text, else spaces."""
    text = text.replace("\r\n", "\n").replace("\t", " ")
    if not multiline:
        text = text.replace("\n", " ")
    return _CONTROL.sub(_escaped, text)


def say(text: str, file: IO[str] | None = None) -> None:
    """Print a line (or lines) for a person, cleaned (see `clean`)."""
    print(clean(text), file=file or sys.stdout)


def _clean_cell(cell: Any, multiline: bool) -> Any:
    from rich.text import Text

    if isinstance(cell, str):
        return clean(cell, multiline=multiline)
    if isinstance(cell, Text):
        safe = cell.copy()
        safe.plain = clean(cell.plain, multiline=multiline)  # every Text here is styled as a whole
        return safe
    return cell


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


def table(*columns: str, wide: str | None = None, multiline: bool = False) -> Table:
    """An aligned table without borders: rows start at the left edge, columns two spaces apart.
    `wide` names the column that gets the room left (titles, summaries); on a narrow terminal every
    column wraps at spaces and a word too long for its column is cut with an ellipsis. A row is one
    line of text per cell (an agent's newline in a title would otherwise pass for a line of its own),
    except in the wide column of a `multiline` table, whose caller cleans each part it joins."""
    from rich.table import Table

    class CleanTable(Table):
        """A table whose cells are cleaned as they are added."""

        def add_row(self, *cells: Any, **kwargs: Any) -> None:
            safe = [_clean_cell(c, multiline=multiline and self.columns[i].header == wide) for i, c in enumerate(cells)]
            super().add_row(*safe, **kwargs)

    t = CleanTable(box=None, pad_edge=False, show_edge=False, padding=(0, 1), header_style="bold", expand=False)
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
            out.print(_clean_cell(renderable, multiline=True))
    text = "\n".join(line.rstrip() for line in captured.get().splitlines())
    (file or sys.stdout).write(text + "\n")


def note(message: str) -> None:
    """A remark for the person at the terminal, on stderr (stdout may be data)."""
    say(message, file=sys.stderr)

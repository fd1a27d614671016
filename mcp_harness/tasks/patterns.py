"""Path patterns: what a task's `paths` may hold, whether two patterns may name one file, and which
files a pattern names.

A pattern is gitignore-style, relative to the repository root (`src/api/`, `docs/*.md`, `**/*.sql`),
and anchored there, as if it began with `/` (`src/` is the top folder `src`, `*.py` the Python files at
the top; to match at any depth, write `**/`). A pattern names what it matches and everything below it:
`src/api`, `src/api/` and `src/api/**` all name the file, folder, submodule or symlink `src/api` and
what is under it. Two patterns overlap when some path is named by both; that is decided on the
patterns alone, exactly, in time polynomial in their length (no regular expression that backtracks):
`src/*/x.py` and `src/a/*.py` overlap (`src/a/x.py`), `src/*/x.py` and `src/*/y.py` do not. Only a
comparison that would run past `WORK_LIMIT` is not decided: when unsure, they overlap.

A pattern's *anchor* (its leading segments without a wildcard: `*`, `?`, `[`; a backslash is refused)
finds the reservations that may overlap it (`store.reservations.near`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

#: at most this many patterns on a task, or held under one lease
MAX_PATHS = 50
#: at most this many characters per pattern
MAX_PATTERN_CHARS = 300
_WILD = frozenset("*?[\\")


class PatternError(ValueError):
    """A pattern that cannot be a task's path (the message says why, naming it)."""


_RELATIVE = "patterns are relative to the repository root, with forward slashes (src/api/, docs/*.md)"


def normalize(pattern: str) -> str:
    """A pattern as it is stored: surrounding blanks and a leading `./` dropped, a trailing `/` kept (a
    folder). Raises `PatternError`, also for what would be accepted and never match: an absolute path,
    a drive letter, a home folder, a backslash (a Windows separator, or an escape no one needs here)."""
    text = pattern.strip()
    while text.startswith("./"):
        text = text[2:]
    if "\\" in text:
        raise PatternError(
            f"{pattern!r} has a backslash: {_RELATIVE}; for a literal *, ? or [ in a name write [*], [?], [[]"
        )
    if text.startswith("/"):
        raise PatternError(f"{pattern!r} starts with '/' (an absolute path?): {_RELATIVE}")
    if len(text) >= 2 and text[1] == ":" and text[0].isascii() and text[0].isalpha() and text[2:3] in ("", "/"):
        raise PatternError(f"{pattern!r} starts with a drive letter: {_RELATIVE}")
    if text == "~" or text.startswith("~/"):
        raise PatternError(f"{pattern!r} starts with '~' (a home folder): {_RELATIVE}")
    if not text:
        raise PatternError(f"{pattern!r} is empty: name a file, a folder or a pattern under the repository root")
    if len(text) > MAX_PATTERN_CHARS:
        raise PatternError(f"a path pattern is {len(text)} characters, over the limit of {MAX_PATTERN_CHARS}")
    if text.startswith("!"):
        raise PatternError(f"{pattern!r}: negated patterns are not allowed in paths; list what to reserve")
    if text.startswith("#"):
        raise PatternError(
            f"{pattern!r}: a pattern cannot start with '#' (gitignore reads it as a comment); for a name "
            f"that starts with '#', write [#]: {'[#]' + text[1:]!r}"
        )
    parts = text.rstrip("/").split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise PatternError(f"{pattern!r}: use a path under the repository root without '.', '..' or '//'")
    if any(ord(ch) < 32 for ch in text):
        raise PatternError(f"{pattern!r}: control characters are not allowed in a path")
    if any(_unclosed(part) for part in parts):
        raise PatternError(
            f"{pattern!r} has a '[' with no ']' after it in its name (git matches no file with it): close the "
            "set, as in [abc] or [a-z], or write [[] for a literal ["
        )
    return text


def _unclosed(segment: str) -> bool:
    """Whether a '[' of `segment` opens a set that no ']' closes (git's wildmatch: such a pattern matches
    nothing). A ']' right after '[' (or after '[!' or '[^') belongs to the set."""
    i = 0
    while i < len(segment):
        if segment[i] == "[":
            j = i + 1
            if j < len(segment) and segment[j] in "!^":
                j += 1
            if j < len(segment) and segment[j] == "]":
                j += 1
            close = segment.find("]", j)
            if close < 0:
                return True
            i = close
        i += 1
    return False


def normalize_all(patterns: Iterable[str]) -> list[str]:
    """Each pattern normalized, duplicates dropped (first kept); at most `MAX_PATHS`."""
    out = list(dict.fromkeys(normalize(p) for p in patterns))
    if len(out) > MAX_PATHS:
        raise PatternError(f"{len(out)} path patterns, over the limit of {MAX_PATHS}")
    return out


def _segments(pattern: str) -> list[str]:
    return pattern.rstrip("/").split("/")


@lru_cache(maxsize=8192)
def anchor(pattern: str) -> tuple[str, ...]:
    """The leading segments without a wildcard (empty: the pattern may match anywhere)."""
    out = []
    for part in _segments(pattern):
        if _WILD & set(part):
            break
        out.append(part)
    return tuple(out)


def _prefix(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    return a == b[: len(a)]


# -- the patterns' language, decided without backtracking ------------------------------------------
# A pattern is a list of segments; a segment is `**` (any number of segments, none included) or a glob
# of one name: a sequence of *elements*, each `*` (any run of characters) or a character class (a
# literal, `?`, a set `[...]`), never `/`. What a pattern names is what it matches followed by anything
# below: the pattern with one more `**` at its end (so `src/api/`, `src/api` and `src/api/**` all name
# the folder, the file or the submodule `src/api`, and what is under it).
#
# Two sequences over such an alphabet (stars, and symbols that may or may not meet) share a word
# exactly when the end of both is reachable in their product: `_meet` walks it row by row, each row a
# bit set, so the cost is linear in one sequence's length times a few integer operations, never a
# search that retries. It decides two globs (symbols: character classes) and two patterns (symbols:
# globs) alike. Matching a file against a pattern places each fixed-length piece between stars at its
# leftmost fit (regular expressions without a quantifier, so they cannot backtrack either).

Interval = tuple[int, int]
CharClass = tuple[Interval, ...]  #: sorted disjoint code point ranges, never '/'
_SLASH = ord("/")
_ANY: CharClass = ((0, _SLASH - 1), (_SLASH + 1, 0x10FFFF))
#: how many symbol pairs one `overlap` may compare before it answers "overlap" (a pair of hostile
#: patterns, wildcards on both sides; real ones compare a few hundred at most)
WORK_LIMIT = 2_000


class _Budget(Exception):
    """The comparison ran past `WORK_LIMIT` (the answer is then "overlap")."""


def _normal(ranges: Iterable[Interval]) -> CharClass:
    """Ranges sorted and merged, with '/' taken out."""
    out: list[list[int]] = []
    for lo, hi in sorted(r for r in ranges if r[0] <= r[1]):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    cut: list[Interval] = []
    for lo, hi in out:
        if lo <= _SLASH <= hi:
            cut += [r for r in ((lo, _SLASH - 1), (_SLASH + 1, hi)) if r[0] <= r[1]]
        else:
            cut.append((lo, hi))
    return tuple(cut)


def _bracket(segment: str, i: int) -> tuple[CharClass, int] | None:
    """The set opening at `segment[i]` (`[`) and the index past its `]`; None when no `]` closes it. A
    `]` first (after `!` or `^`) belongs to the set; `a-z` is a range, `-` first or last a character."""
    j = i + 1
    negate = j < len(segment) and segment[j] in "!^"
    j += negate
    start = j
    if j < len(segment) and segment[j] == "]":
        j += 1
    close = segment.find("]", j)
    if close < 0:
        return None
    body, ranges, k = segment[start:close], [], 0
    while k < len(body):
        if k + 2 < len(body) and body[k + 1] == "-":
            ranges.append((ord(body[k]), ord(body[k + 2])))  # a reversed range holds nothing
            k += 3
        else:
            ranges.append((ord(body[k]), ord(body[k])))
            k += 1
    chosen = _normal(ranges)
    if negate:
        gaps, at = [], 0
        for lo, hi in chosen:
            gaps.append((at, lo - 1))
            at = hi + 1
        chosen = _normal([*gaps, (at, 0x10FFFF)])
    return chosen, close + 1


class _Glob:
    """One segment's glob: its elements (None for `*`, consecutive stars as one), and what matching a
    name needs: the fixed-length pieces between the stars as expressions without a quantifier."""

    __slots__ = ("text", "literal", "word", "elements", "_pieces", "_compiled", "_starred")

    def __init__(self, text: str) -> None:
        elements: list[CharClass | None] = []
        i = 0
        while i < len(text):
            ch = text[i]
            if ch == "*":
                if not elements or elements[-1] is not None:
                    elements.append(None)
                i += 1
                continue
            if ch == "?":
                elements.append(_ANY)
            elif ch == "[" and (found := _bracket(text, i)) is not None:
                elements.append(found[0])
                i = found[1]
                continue
            else:  # a character, also a '[' no ']' closes (`normalize` refuses those)
                elements.append(((ord(ch), ord(ch)),))
            i += 1
        self.text = text
        self.elements = tuple(elements)
        self.literal = all(e is not None and len(e) == 1 and e[0][0] == e[0][1] for e in elements)
        self.word = "".join(chr(e[0][0]) for e in elements if e is not None) if self.literal else ""  #: `[#]a`: #a
        self._starred = None in elements
        pieces: list[list[CharClass]] = [[]]
        for e in elements:
            if e is None:
                pieces.append([])
            else:
                pieces[-1].append(e)
        self._pieces = [(len(p), "".join(map(_regex, p))) for p in pieces]
        self._compiled: list[tuple[int, re.Pattern[str]]] | None = None

    def __repr__(self) -> str:
        return f"_Glob({self.text!r})"

    def match(self, name: str) -> bool:
        """Whether the glob matches the whole of `name` (each piece at its leftmost fit)."""
        if self.literal:
            return name == self.word
        if self._compiled is None:  # compiled when first needed (`overlap` mostly compares elements)
            self._compiled = [(n, re.compile(expr, re.DOTALL)) for n, expr in self._pieces]
        (first_len, first), *middle = self._compiled
        if not self._starred:
            return len(name) == first_len and first.fullmatch(name) is not None
        *middle, (last_len, last) = middle
        end = len(name) - last_len
        if end < first_len or first.match(name, 0, first_len) is None or last.fullmatch(name, end) is None:
            return False
        at = first_len
        for _, piece in middle:
            found = piece.search(name, at, end)
            if found is None:
                return False
            at = found.end()
        return True

    def live(self) -> bool:
        """Whether some name matches it (a set such as `[z-a]` matches none)."""
        return all(e is None or e for e in self.elements)


def _regex(cls: CharClass) -> str:
    """A character class as an expression: a wide one (`?`, `[!a]`) as the negation of what it lacks."""
    if len(cls) == 1 and cls[0][0] == cls[0][1]:
        return re.escape(chr(cls[0][0]))
    if not cls:
        return "(?!)"

    def ranges(rs: Iterable[Interval]) -> str:
        return "".join(f"\\U{lo:08x}" if lo == hi else f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in rs)

    if cls[-1][1] == 0x10FFFF:  # what it lacks (always '/', which no class holds) is the shorter list
        gaps, at = [], 0
        for lo, hi in cls:
            if lo > at:
                gaps.append((at, lo - 1))
            at = hi + 1
        return "[^" + ranges(gaps) + "]"
    return "[" + ranges(cls) + "]"


@lru_cache(maxsize=8192)
def _glob(text: str) -> _Glob:
    return _Glob(text)


@lru_cache(maxsize=4096)
def _tokens(pattern: str) -> tuple[_Glob | None, ...]:
    """The pattern's segments, `**` as None (consecutive ones as one; a segment of stars only is `**`,
    as git reads it), with the `**` every pattern ends in (it names what is below what it matches)."""
    out: list[_Glob | None] = []
    for part in [*_segments(pattern), "**"]:
        if len(part) >= 2 and part.strip("*") == "":
            if not out or out[-1] is not None:
                out.append(None)
        else:
            out.append(_glob(part))
    return tuple(out)


def _classes_meet(a: CharClass, b: CharClass) -> bool:
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i][1] < b[j][0]:
            i += 1
        elif b[j][1] < a[i][0]:
            j += 1
        else:
            return True
    return False


def _spread(row: int, moves: int) -> int:
    """`row` with every state reachable from it by steps j -> j+1 allowed at the positions in `moves`
    (a run of allowed positions fills up from the first state in it: one addition carries through)."""
    return row | ((moves + (row & moves)) ^ moves)


def _meet(
    xs: tuple[Any, ...],
    ys: tuple[Any, ...],
    meets: Callable[[Any, Any], bool],
    live: Callable[[Any], bool],
    work: list[int],
) -> bool:
    """Whether some word is matched by both sequences (None: a star, any run of symbols, none included;
    else a symbol set: `meets` says whether two share a symbol, `live` whether one holds any). Bit j of
    the row of x-position i is set when the first i items of `xs` and the first j of `ys` can match one
    prefix. `work` counts the symbol pairs compared; past `WORK_LIMIT` it raises `_Budget`."""
    stars = lively = 0
    for j, y in enumerate(ys):
        if y is None:
            stars |= 1 << j
        elif live(y):
            lively |= 1 << j
    masks: dict[Any, int] = {}
    row = 1
    for x in xs:
        if x is None:  # x's star also takes what each of ys' items takes, and may stop: the next row
            row = _spread(row, stars | lively)
            continue
        row = _spread(row, stars)
        mask = masks.get(x)
        if mask is None:
            work[0] += len(ys)
            if work[0] > WORK_LIMIT:
                raise _Budget
            mask = masks[x] = sum(1 << j for j, y in enumerate(ys) if y is not None and meets(x, y))
        row = ((row & mask) << 1) | (row & stars if live(x) else 0)
        if not row:
            return False
    return bool(_spread(row, stars) >> len(ys) & 1)


def _globs_meet(work: list[int]) -> Callable[[_Glob, _Glob], bool]:
    def meets(a: _Glob, b: _Glob) -> bool:
        if a.literal:
            return b.match(a.word)
        if b.literal:
            return a.match(b.word)
        return _meet(a.elements, b.elements, _classes_meet, bool, work)

    return meets


def matches(pattern: str, path: str) -> bool:
    """Whether `pattern` names the file `path` (relative to the repository root), or a folder above it."""
    return matcher(pattern)(path)


@lru_cache(maxsize=4096)
def matcher(pattern: str) -> Callable[[str], bool]:
    """`matches` for one pattern and many paths (the commit guard): a path outside the pattern's anchor
    is passed over by a string compare; each run of segments between `**` is then placed at its
    leftmost fit."""
    tokens = _tokens(pattern)
    runs: list[list[_Glob]] = [[]]
    for token in tokens:
        if token is None:
            runs.append([])
        else:
            runs[-1].append(token)
    first, rest = runs[0], [r for r in runs[1:] if r]
    head = "/".join(anchor(pattern))
    below = head + "/"

    def fits(run: list[_Glob], parts: list[str], at: int) -> bool:
        return all(glob.match(parts[at + k]) for k, glob in enumerate(run))

    def match(path: str) -> bool:
        if head and path != head and not path.startswith(below):
            return False
        parts = path.strip("/").split("/")
        if len(parts) < len(first) or not fits(first, parts, 0):
            return False
        at = len(first)
        for run in rest:
            while at + len(run) <= len(parts) and not fits(run, parts, at):
                at += 1
            if at + len(run) > len(parts):
                return False
            at += len(run)
        return True

    return match


@lru_cache(maxsize=16384)
def overlap(a: str, b: str) -> bool:
    """Whether some path is named by both patterns. Exact (decided on the patterns, no file is read),
    except that a comparison past `WORK_LIMIT` answers True: when unsure, they overlap."""
    if a == b:
        return True
    anchor_a, anchor_b = anchor(a), anchor(b)
    if not (_prefix(anchor_a, anchor_b) or _prefix(anchor_b, anchor_a)):
        return False  # a segment without a wildcard differs
    work = [0]
    try:
        return _meet(_tokens(a), _tokens(b), _globs_meet(work), _Glob.live, work)
    except _Budget:
        return True


def clashes(mine: Iterable[str], theirs: Iterable[str]) -> list[str]:
    """The patterns of `theirs` that overlap any of `mine`."""
    mine = list(mine)
    return [p for p in theirs if any(overlap(m, p) for m in mine)]

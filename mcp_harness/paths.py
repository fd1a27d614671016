"""Path patterns: what a task's `paths` may hold, whether two patterns may name one file, and which
files a pattern names.

A pattern is gitignore-style, relative to the repository root (`src/api/`, `docs/*.md`, `**/*.sql`).
Patterns are compared without touching a file system, so the rule is conservative: two patterns are
disjoint only when that is certain, and otherwise they overlap. The rule (README, "Path reservations"):

0. Every pattern is anchored at the repository root, as if it began with `/` (`src/` is the top
   folder `src`, `*.py` the Python files at the top); to match at any depth, write `**/` (`**/*.py`).
1. A pattern's *anchor* is its leading segments without a wildcard (`*`, `?`, `[`; a backslash is refused).
2. Two patterns whose anchors diverge (neither is the other or a folder above it) are disjoint.
3. When one pattern is a plain path (no wildcard) and the other has no `**` and no more segments
   than it, they overlap exactly when the other pattern matches that path (or a folder above it).
4. Anything else overlaps.

A pattern names a file and everything under a folder it names (`src/api` reserves `src/api/x.py`).
Kept lean (no pathspec import until a match is needed): the commit guard runs on every commit.
"""

from __future__ import annotations

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


def _literal(pattern: str) -> bool:
    return not (_WILD & set(pattern))


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


@lru_cache(maxsize=4096)
def _spec(pattern: str) -> Any:
    import warnings

    import pathspec  # deferred: only a match needs it

    with warnings.catch_warnings():  # `[[]`, the documented literal '[', is a "possible nested set" to `re`
        warnings.simplefilter("ignore", FutureWarning)
        return pathspec.GitIgnoreSpec.from_lines(["/" + pattern])  # anchored at the root (rule 0)


def matches(pattern: str, path: str) -> bool:
    """Whether `pattern` names the file `path` (relative to the repository root), or a folder above it."""
    return bool(_spec(pattern).match_file(path))


def matcher(pattern: str) -> Callable[[str], bool]:
    """`matches` for one pattern and many paths (the commit guard): a path outside the pattern's anchor
    is passed over by a string compare; the others meet the pattern's one compiled expression."""
    spec = _spec(pattern)
    regex = getattr(spec.patterns[0], "regex", None) if len(spec.patterns) == 1 else None
    if regex is None or not spec.patterns[0].include:
        return lambda path: bool(spec.match_file(path))
    head = "/".join(anchor(pattern))
    below = head + "/"

    def match(path: str) -> bool:
        if head and path != head and not path.startswith(below):
            return False
        return regex.match(path) is not None

    return match


def overlap(a: str, b: str) -> bool:
    """Whether two patterns may name one file (conservative: True unless they are surely disjoint)."""
    if a == b:
        return True
    anchor_a, anchor_b = anchor(a), anchor(b)
    if not (_prefix(anchor_a, anchor_b) or _prefix(anchor_b, anchor_a)):
        return False  # rule 2
    for plain, other in ((a, b), (b, a)):
        if _literal(plain) and "**" not in other:
            if len(_segments(other)) <= len(_segments(plain)):  # rule 3
                return matches(other, plain.rstrip("/")) or matches(other, plain.rstrip("/") + "/")
    return True


def clashes(mine: Iterable[str], theirs: Iterable[str]) -> list[str]:
    """The patterns of `theirs` that overlap any of `mine`."""
    mine = list(mine)
    return [p for p in theirs if any(overlap(m, p) for m in mine)]

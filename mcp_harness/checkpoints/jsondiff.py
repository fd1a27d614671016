"""What changed between two JSON documents, as a list of JSON Pointers with their old and new values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

#: more changes than this are cut (the last entry then says how many more there were)
MAX_CHANGES = 500


@dataclass(frozen=True)
class Change:
    pointer: str  #: JSON Pointer of the value that changed ("" is the whole document)
    kind: Literal["added", "removed", "changed"]
    old: Any = None
    new: Any = None


def escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def diff(old: Any, new: Any) -> tuple[list[Change], int]:
    """Changes from `old` to `new`, in document order, and how many more there were past
    `MAX_CHANGES`. Objects are compared key by key; an array that only grew (or only shrank) at its
    end shows the elements added (or removed); any other change to an array or a value is shown whole."""
    out: list[Change] = []
    more = _walk("", old, new, out)
    return out, more


def _walk(pointer: str, old: Any, new: Any, out: list[Change]) -> int:
    if _same(old, new):
        return 0
    if isinstance(old, dict) and isinstance(new, dict):
        more = 0
        for key in list(old) + [k for k in new if k not in old]:
            child = f"{pointer}/{escape(key)}"
            if key not in new:
                more += _add(out, Change(child, "removed", old=old[key]))
            elif key not in old:
                more += _add(out, Change(child, "added", new=new[key]))
            else:
                more += _walk(child, old[key], new[key], out)
        return more
    if isinstance(old, list) and isinstance(new, list):
        shorter, longer = (old, new) if len(old) <= len(new) else (new, old)
        if all(_same(a, b) for a, b in zip(shorter, longer, strict=False)):
            more = 0
            for index in range(len(shorter), len(longer)):
                kind: Literal["added", "removed"] = "added" if longer is new else "removed"
                value = longer[index]
                more += _add(out, Change(f"{pointer}/{index}", kind, **{"new" if kind == "added" else "old": value}))
            return more
    return _add(out, Change(pointer, "changed", old=old, new=new))


def _add(out: list[Change], change: Change) -> int:
    if len(out) >= MAX_CHANGES:
        return 1
    out.append(change)
    return 0


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values: `true` is not `1`, `1` is `1.0`, and containers compare member by member."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b

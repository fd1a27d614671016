"""JSON values: canonical bytes and their hash, depth checks, RFC 7396 merge patch, RFC 6901 pointers."""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections import OrderedDict
from functools import lru_cache
from typing import Any, overload

from mcp_harness.errors import InvalidArgument, TooLarge

_MISSING = object()


@overload
def iso(ts: float) -> str: ...
@overload
def iso(ts: None) -> None: ...
@overload
def iso(ts: float | None) -> str | None: ...
def iso(ts: float | None) -> str | None:
    """A timestamp as every result shows it: ISO 8601 UTC to the second, `2026-12-01T16:09:26Z` (the
    fraction is cut, as `datetime.isoformat(timespec="seconds")` does). The one formatter of the
    package, so that every answer spells time alike."""
    if ts is None:
        return None
    return _iso_second(math.floor(ts))


@lru_cache(maxsize=4096)  # listings format a timestamp per row, many in the same second
def _iso_second(second: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))


class _Memo:
    """A small LRU map bounded by the bytes its entries hold."""

    def __init__(self, limit_bytes: int) -> None:
        self._items: OrderedDict[Any, Any] = OrderedDict()
        self._sizes: dict[Any, int] = {}
        self._limit = limit_bytes
        self._total = 0

    def get(self, key: Any) -> Any:
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
        return found

    def put(self, key: Any, value: Any, size: int) -> None:
        if size > self._limit // 4:
            return
        if key in self._items:  # replaced (a fingerprint shared by two strings)
            del self._items[key]
            self._total -= self._sizes.pop(key)
        self._items[key] = value
        self._sizes[key] = size
        self._total += size
        while self._total > self._limit:
            old, _ = self._items.popitem(last=False)
            self._total -= self._sizes.pop(old)


#: Values at least this long are remembered, so an unchanged long text or value saved again (a
#: full-state save) is neither re-encoded nor re-hashed: a dictionary lookup instead of encoding and
#: hashing it all. Bounded per process; a miss costs only a fingerprint.
MEMO_MIN_BYTES = 4096
_ENCODED = _Memo(16 << 20)  #: fingerprint of a long str -> (the str, its canonical JSON)
_HASHED = _Memo(16 << 20)  #: long canonical JSON -> its hash


def _fingerprint(text: str) -> tuple[int, str, str, str]:
    """A cheap key for a long string: a string parsed from a request is a new object whose hash
    Python must compute over all of it; comparing it with the remembered one is a memory compare."""
    middle = len(text) // 2
    return len(text), text[:32], text[middle : middle + 32], text[-32:]


def canonical(value: Any, *, what: str = "value") -> bytes:
    """The canonical UTF-8 JSON of `value` (sorted keys, no spaces). Rejects NaN, Infinity and
    strings that are not valid Unicode (lone surrogates), which no JSON consumer can read back."""
    if type(value) is str and len(value) >= MEMO_MIN_BYTES:
        key = _fingerprint(value)
        found = _ENCODED.get(key)
        if found is not None and found[0] == value:
            return found[1]
        encoded = _canonical(value, what)
        _ENCODED.put(key, (value, encoded), len(value) + len(encoded))  # the string and its encoding
        return encoded
    return _canonical(value, what)


def _canonical(value: Any, what: str) -> bytes:
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    except UnicodeEncodeError as exc:  # a ValueError too: it must be caught first
        raise InvalidArgument(f"{what} contains a string that is not valid Unicode (a lone surrogate)") from exc
    except ValueError as exc:
        raise InvalidArgument(f"{what} contains NaN or Infinity, which JSON does not allow") from exc
    except TypeError as exc:
        raise InvalidArgument(f"{what} is not a JSON value: {exc}") from exc


def dumps(value: Any) -> str:
    """Compact JSON text for storage (keys in the order given)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def value_hash(data: bytes) -> str:
    """Content address of canonical bytes: 128-bit BLAKE2b, hex."""
    if len(data) < MEMO_MIN_BYTES:
        return hashlib.blake2b(data, digest_size=16).hexdigest()
    found = _HASHED.get(data)
    if found is None:
        found = hashlib.blake2b(data, digest_size=16).hexdigest()
        _HASHED.put(data, found, len(data))
    return found


def key_bytes(key: str) -> int:
    """Bytes a top-level key takes in the stored state's JSON, with its quotes."""
    if key.isascii() and key.isprintable() and '"' not in key and "\\" not in key:
        return len(key) + 2  # nothing to escape: most keys, counted without encoding them
    return len(json.dumps(key, ensure_ascii=False).encode())


def check_depth(value: Any, limit: int, *, what: str) -> None:
    """Refuse values nested deeper than `limit` (iteratively: a hostile value cannot blow the stack)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            if depth > limit:
                raise InvalidArgument(f"{what} is nested deeper than {limit} levels")
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            if depth > limit:
                raise InvalidArgument(f"{what} is nested deeper than {limit} levels")
            stack.extend((v, depth + 1) for v in item)


def check_size(value: Any, limit: int, *, what: str) -> bytes:
    """Canonical bytes of `value`, refusing it with `too_large` when over `limit` bytes."""
    data = canonical(value, what=what)
    if len(data) > limit:
        raise TooLarge(f"{what} is {len(data)} bytes, over the limit of {limit} bytes")
    return data


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396 JSON Merge Patch: objects merge key by key, `null` removes, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def parse_pointer(pointer: str) -> list[str]:
    """Split an RFC 6901 JSON Pointer into unescaped tokens. The contract asks for pointers into the
    state, so each must start with `/` (omit `paths` for the whole state)."""
    if not pointer.startswith("/"):
        raise InvalidArgument(f"JSON Pointer {pointer!r} must start with '/' (omit paths for the whole state)")
    tokens = pointer[1:].split("/")
    for token in tokens:
        rest = token.replace("~0", "").replace("~1", "")
        if "~" in rest:
            raise InvalidArgument(f"JSON Pointer {pointer!r} has a '~' not followed by 0 or 1")
    return [t.replace("~1", "/").replace("~0", "~") for t in tokens]


def resolve_pointer(document: Any, tokens: list[str]) -> Any:
    """The value at `tokens`, or `_MISSING`."""
    node = document
    for token in tokens:
        if isinstance(node, dict):
            if token not in node:
                return _MISSING
            node = node[token]
        elif isinstance(node, list):
            if not token.isdigit() or (len(token) > 1 and token[0] == "0"):
                return _MISSING
            index = int(token)
            if index >= len(node):
                return _MISSING
            node = node[index]
        else:
            return _MISSING
    return node


def is_missing(value: Any) -> bool:
    return value is _MISSING

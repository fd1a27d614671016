"""JSON values: canonical bytes and their hash, depth checks, RFC 7396 merge patch, RFC 6901 pointers."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .errors import InvalidArgument, TooLarge

_MISSING = object()


def canonical(value: Any, *, what: str = "value") -> bytes:
    """The canonical UTF-8 JSON of `value` (sorted keys, no spaces). Rejects NaN, Infinity and
    strings that are not valid Unicode (lone surrogates), which no JSON consumer can read back."""
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    except ValueError as exc:
        raise InvalidArgument(f"{what} contains NaN or Infinity, which JSON does not allow") from exc
    except UnicodeEncodeError as exc:
        raise InvalidArgument(f"{what} contains a string that is not valid Unicode (a lone surrogate)") from exc
    except TypeError as exc:
        raise InvalidArgument(f"{what} is not a JSON value: {exc}") from exc


def dumps(value: Any) -> str:
    """Compact JSON text for storage (keys in the order given)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def value_hash(data: bytes) -> str:
    """Content address of canonical bytes: 128-bit BLAKE2b, hex."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def key_bytes(key: str) -> int:
    """Bytes a top-level key takes in the stored state's JSON, with its quotes."""
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

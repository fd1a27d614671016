"""Long arrays stored as append chains, so a save that appends to a list stores only the new elements.

A top-level array value of at least `CHAIN_MIN_BYTES` is kept as a chain of segments (checkpoints/store/segments.py):
each segment holds a run of elements (their canonical JSON joined by commas) and names the segment
before it. Its manifest entry is a `Chain` (`checkpoints/manifest.py`): the value is the chain that ends at
segment `tail`, minus its first `skip` elements, `count` elements in all; `hash` and `size` are those
of the value's canonical JSON, as for any other value.

A save compares the new array with the parent checkpoint's value under the same key:
- appended to (the old value is a prefix of the new one, checked by hashing the new bytes up to the
  old size: nothing is read): one new segment holding the new elements, after the old tail;
- rolled (elements dropped from the front, others maybe appended): the old chain is read once and
  `skip` grows by what was dropped, plus a segment for what was appended;
- anything else: a new chain of one segment.
Bounds that keep a restore proportional to the value and never to the history: a chain is rewritten
when it would skip more elements than it keeps, and an appended run under `SEGMENT_MIN_BYTES` is folded
into a small tail segment (copying less than that), so a chain has at most about
2 * size / SEGMENT_MIN_BYTES + 1 segments.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from mcp_harness.checkpoints.manifest import Chain, Entry, missing_value
from mcp_harness.checkpoints.store import segments as store
from mcp_harness.jsonvalue import value_hash
from mcp_harness.store import Connection

#: arrays whose canonical JSON is shorter than this are stored as one value
CHAIN_MIN_BYTES = 2048
#: an appended run shorter than this joins the tail segment when that one is short too
SEGMENT_MIN_BYTES = 256
#: how many leading bytes of the new array are searched for in the old chain to find a roll
_PROBE = 32


async def store_array(
    conn: Connection, workspace: str, key: str, data: bytes, count: int, parent: Entry | None
) -> Chain:
    """The manifest entry for array `data` (canonical JSON, `count` elements), storing the segments
    it needs. `parent` is the previous checkpoint's entry for the same key, if any."""
    digest = value_hash(data)
    if isinstance(parent, Chain):
        if parent.hash == digest:
            return Chain(key, digest, len(data), parent.tail, parent.skip, count)
        if _extends(data, parent.hash, parent.size):
            tail = await _append(conn, workspace, parent.tail, data[parent.size : -1])
            return Chain(key, digest, len(data), tail, parent.skip, count)
        rolled = await _roll(conn, workspace, parent.tail, data, count)
        if rolled is not None:
            new_tail, new_skip = rolled
            return Chain(key, digest, len(data), new_tail, new_skip, count)
    return Chain(key, digest, len(data), await store.add(conn, workspace, None, data[1:-1]), 0, count)


def _extends(data: bytes, old_hash: str, old_size: int) -> bool:
    """Whether `data` is the old array with elements appended: its bytes up to the old array's
    closing bracket are the old array's, and a comma (a new element) stands where that bracket was."""
    if len(data) <= old_size or data[old_size - 1 : old_size] != b",":
        return False
    h = hashlib.blake2b(memoryview(data)[: old_size - 1], digest_size=16)
    h.update(b"]")
    return h.hexdigest() == old_hash


async def _append(conn: Connection, workspace: str, tail: int, run: bytes) -> int:
    if len(run) < SEGMENT_MIN_BYTES:
        last = await store.get(conn, workspace, tail)
        if len(last.data) < SEGMENT_MIN_BYTES:
            return await store.add(conn, workspace, last.prev, last.data + b"," + run)
    return await store.add(conn, workspace, tail, run)


async def _roll(conn: Connection, workspace: str, tail: int, data: bytes, count: int) -> tuple[int, int] | None:
    """(tail, skip) when `data` is the old chain minus some leading elements, plus maybe appended
    ones; None when it is not, or when the chain would then hold more dropped elements than kept."""
    old = await _chain_json(conn, workspace, tail)
    body_end = len(old) - 1
    # a candidate is where the kept part of the old chain starts: right after "[" or a comma, with
    # the rest of the old chain a prefix of the new array, followed there by a comma or the end (a
    # kept part shorter than the probe is not found: that array is then stored as a new chain)
    for start in _find_all(old, data[1 : 1 + _PROBE], 1):
        if old[start - 1 : start] not in (b"[", b","):
            continue
        kept = body_end - start
        if kept <= 0 or data[1 + kept : 2 + kept] not in (b",", b"]") or data[1 : 1 + kept] != old[start:body_end]:
            continue
        try:  # the dropped part must be whole elements (a comma inside a string or object is not a boundary)
            skip = 0 if start == 1 else len(json.loads(old[: start - 1] + b"]"))
        except ValueError:
            continue
        if skip > count:
            return None
        run = data[2 + kept : -1]
        return (await _append(conn, workspace, tail, run) if run else tail), skip
    return None


def _find_all(haystack: bytes, needle: bytes, start: int) -> Iterator[int]:
    at = haystack.find(needle, start)
    while at != -1:
        yield at
        at = haystack.find(needle, at + 1)


async def _chain_json(conn: Connection, workspace: str, tail: int) -> bytes:
    """The JSON array of every element on the chain that ends at `tail` (skipped ones included)."""
    return b"[" + b",".join(await store.chain(conn, workspace, tail)) + b"]"


async def load(conn: Connection, workspace: str, entry: Chain, checkpoint: str | None = None) -> list[Any]:
    """The array a chain entry of `checkpoint` stands for."""
    value = json.loads(await _chain_json(conn, workspace, entry.tail))[entry.skip :]
    if len(value) != entry.count:
        raise missing_value(
            checkpoint,
            f"the segment chain ending at segment {entry.tail} (value {entry.hash}): "
            f"{len(value)} elements stored where {entry.count} were saved",
        )
    return value


def reachable(tails: set[int], links: dict[int, int | None]) -> set[int]:
    """Every segment on a chain that ends at one of `tails` (for prune)."""
    seen: set[int] = set()
    for tail in tails:
        node: int | None = tail
        while node is not None and node not in seen:
            seen.add(node)
            node = links.get(node)
    return seen


def remap(entries: list[Entry], ids: dict[int, int]) -> list[Entry]:
    """A manifest with its segment ids renumbered (import into another database)."""
    return [replace(e, tail=ids[e.tail]) if isinstance(e, Chain) else e for e in entries]

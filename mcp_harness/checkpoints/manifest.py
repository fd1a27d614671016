"""Checkpoint manifests: a state stored as one entry per top-level key, each saying where its value is.

On disk (the `manifest` column) a manifest is a JSON list of lists, told apart by their length:
- `Blob`   `[key, hash, size]`: the value is stored whole, once per workspace, under its hash;
- `Inline` `[key, null, size, json]`: a small value kept in the manifest itself (a counter, a status:
  a blob row and its index entry would cost more than the value);
- `Chain`  `[key, hash, size, tail, skip, count]`: a long array stored as a chain of segments
  (`checkpoints/chains.py`).
`size` is the bytes of the value's canonical JSON, so the state's size is known from the manifest
alone. This module is the only one that reads or writes that layout.
"""

from __future__ import annotations

import json
import logging
import secrets
from dataclasses import dataclass
from typing import Any

from mcp_harness.errors import Internal
from mcp_harness.jsonvalue import dumps as dump_json
from mcp_harness.jsonvalue import key_bytes

#: values whose canonical JSON is at most this long are kept inline in the manifest
INLINE_MAX_BYTES = 64

log = logging.getLogger(__name__)


def missing_value(checkpoint: str | None, what: str) -> Internal:
    """The error for a stored value a checkpoint names but the store no longer holds (`what`: the
    value's hash or segment ids, never its key or data), logged with the checkpoint and the value."""
    incident = secrets.token_hex(6)
    log.error("incident %s: checkpoint %s names %s, which is missing from the store", incident, checkpoint, what)
    return Internal(
        f"checkpoint {checkpoint} cannot be read: a stored value it needs is missing (incident {incident}); "
        "the server log names the value"
    )


@dataclass(frozen=True, slots=True)
class Blob:
    key: str
    hash: str
    size: int

    def to_json(self) -> list[Any]:
        return [self.key, self.hash, self.size]


@dataclass(frozen=True, slots=True)
class Inline:
    key: str
    size: int
    json: str  #: the value's canonical JSON

    def to_json(self) -> list[Any]:
        return [self.key, None, self.size, self.json]


@dataclass(frozen=True, slots=True)
class Chain:
    key: str
    hash: str  #: of the whole array's canonical JSON, as for a blob
    size: int
    tail: int  #: the last segment of the chain
    skip: int  #: elements at the start of the chain that are not part of the value
    count: int  #: elements in the value

    def to_json(self) -> list[Any]:
        return [self.key, self.hash, self.size, self.tail, self.skip, self.count]


Entry = Blob | Inline | Chain


def from_json(item: list[Any]) -> Entry:
    """One entry from its on-disk list."""
    if len(item) == 3:
        return Blob(*item)
    if len(item) == 4:
        return Inline(item[0], item[2], item[3])
    if len(item) == 6:
        return Chain(*item)
    raise ValueError(f"not a manifest entry: a list of {len(item)} items")


def loads(text: str) -> list[Entry]:
    """A manifest from its JSON text."""
    return [from_json(item) for item in json.loads(text)]


def dumps(entries: list[Entry]) -> str:
    return dump_json([e.to_json() for e in entries])


def state_size(entries: list[Entry]) -> int:
    """Bytes of the stored state's compact JSON, from the manifest alone."""
    if not entries:
        return 2
    return 2 + sum(key_bytes(e.key) + 1 + e.size for e in entries) + len(entries) - 1

"""Checkpoint rules: versions, merge patches, optimistic concurrency, size limits, pointers.

A state is stored as a manifest of its top-level keys, each pointing at a content-addressed value,
so a checkpoint that changes one key stores only that key's value. A merge touches only the keys the
patch names: the others keep their hashes without being read.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from sqlalchemy.ext.asyncio import AsyncConnection

from ..config import check_int, check_name, check_no_nul
from ..errors import InvalidArgument, NotFound, TooLarge, VersionConflict
from ..jsonvalue import (
    canonical,
    check_depth,
    dumps,
    is_missing,
    key_bytes,
    merge_patch,
    parse_pointer,
    resolve_pointer,
    value_hash,
)
from ..models import CheckpointMeta, ListCheckpointsResult, SaveCheckpointResult
from ..store import checkpoints as store
from ..store.common import now
from . import lists
from .base import Identity, ServiceBase, check_arguments, iso, new_id
from .schemas import validate_state

#: manifest entries: [top-level key, value hash, value bytes] for a value stored whole (a blob);
#: [key, null, bytes, canonical JSON] for a small value kept in the manifest itself (a counter, a
#: status: a blob row and its index entry would cost more than the value); or
#: [key, hash, bytes, tail segment, skip, count] for a long array stored as a chain (see lists.py)
Manifest = list[list[Any]]
#: values whose canonical JSON is at most this long are kept inline in the manifest
INLINE_MAX_BYTES = 64


def blob_of(entry: list[Any]) -> str | None:
    """The hash of the blob a manifest entry points at; None for an inline value or a chain."""
    return entry[1] if len(entry) == 3 else None


def is_inline(entry: list[Any]) -> bool:
    return len(entry) == 4


def state_size(manifest: Manifest) -> int:
    """Bytes of the stored state's compact JSON, from the manifest alone."""
    if not manifest:
        return 2
    return 2 + sum(key_bytes(e[0]) + 1 + e[2] for e in manifest) + len(manifest) - 1


def checkpoint_meta(row: Sequence[Any]) -> CheckpointMeta:
    """A checkpoint's metadata from a row that starts with the store's `META_COLUMNS`."""
    metadata = json.loads(row[5]) if row[5] else None
    return CheckpointMeta(row[0], row[1], row[2], row[3], row[4], metadata, iso(row[6]), row[7], row[8], row[9])


class CheckpointService(ServiceBase):
    async def save(
        self,
        ident: Identity,
        *,
        state: dict[str, Any],
        thread: str = "main",
        mode: Literal["replace", "merge"] = "replace",
        label: str | None = None,
        metadata: dict[str, Any] | None = None,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
    ) -> SaveCheckpointResult:
        check_name("thread", thread)
        check_int("expected_version", expected_version, 0)
        if not isinstance(state, dict):
            raise InvalidArgument("state must be a JSON object")
        check_depth(state, self.limits.max_depth, what="state")
        metadata_json = None
        if metadata is not None:
            check_depth(metadata, self.limits.max_depth, what="metadata")
            raw = canonical(metadata, what="metadata")
            if len(raw) > self.limits.max_value_bytes:
                raise TooLarge(f"metadata is {len(raw)} bytes, over the limit of {self.limits.max_value_bytes}")
            metadata_json = dumps(metadata)
        # Encode, before any lock is taken, the values stored as given (a merge's object patches are
        # encoded after merging, null patches delete).
        encoded = {
            k: canonical(v, what=f"state[{k!r}]")
            for k, v in state.items()
            if mode == "replace" or not (v is None or isinstance(v, dict))
        }
        args = {
            "state": state,
            "thread": thread,
            "mode": mode,
            "label": label,
            "metadata": metadata,
            "expected_version": expected_version,
        }
        check_arguments(args)

        async def body(conn: AsyncConnection) -> SaveCheckpointResult:
            latest, latest_id, latest_manifest, schema = await store.lock_thread(conn, ident.workspace, thread)
            if expected_version is not None and expected_version != latest:
                raise VersionConflict(
                    f"thread {thread!r} is at version {latest}, you expected {expected_version}"
                    + ("" if latest else " (it has no checkpoint yet: expected_version 0 means that)")
                )
            parent_manifest: Manifest = json.loads(latest_manifest) if latest_manifest else []
            manifest, new_blobs, fresh = await self._build_manifest(
                conn, ident.workspace, parent_manifest, state, encoded, mode
            )
            size = state_size(manifest)
            if size > self.limits.max_state_bytes:
                raise TooLarge(
                    f"the state would be {size} bytes, over the limit of {self.limits.max_state_bytes} bytes"
                    + (" (measured after the merge)" if mode == "merge" else "")
                )
            schema_version = await validate_state(
                schema, thread, lambda: self._materialise(conn, ident.workspace, manifest, fresh)
            )
            created = now()
            row = {
                "id": new_id("ck"),
                "workspace": ident.workspace,
                "thread": thread,
                "version": latest + 1,
                "parent_id": latest_id,
                "label": label,
                "metadata_json": metadata_json,
                "manifest": dumps(manifest),
                "size_bytes": size,
                "agent": ident.agent,
                "schema_version": schema_version,
                "created_at": created,
            }
            known = {blob_of(e) for e in parent_manifest}
            await store.insert_checkpoint(conn, row, {h: d for h, d in new_blobs.items() if h not in known})
            return SaveCheckpointResult(
                checkpoint_id=row["id"],
                thread=thread,
                version=row["version"],
                parent_id=latest_id,
                created_at=iso(created),
                size_bytes=size,
            )

        return await self.exactly_once(ident, "save_checkpoint", idempotency_key, args, SaveCheckpointResult, body)

    async def _build_manifest(
        self,
        conn: AsyncConnection,
        workspace: str,
        parent: Manifest,
        state: dict[str, Any],
        encoded: dict[str, bytes],
        mode: str,
    ) -> tuple[Manifest, dict[str, bytes], dict[str, bytes]]:
        """(manifest, values to store as blobs, every new value's bytes by hash)."""
        new_blobs: dict[str, bytes] = {}
        fresh: dict[str, bytes] = {}
        by_key = {e[0]: e for e in parent}

        async def entry(key: str, data: bytes, value: Any) -> list[Any]:
            if isinstance(value, list) and len(data) >= lists.CHAIN_MIN_BYTES:
                made = await lists.store_array(conn, workspace, key, data, len(value), by_key.get(key))
                fresh[made[1]] = data
                return made
            if len(data) <= INLINE_MAX_BYTES:
                return [key, None, len(data), data.decode()]
            h = value_hash(data)
            new_blobs[h] = fresh[h] = data
            return [key, h, len(data)]

        if mode == "replace":
            return [await entry(k, encoded[k], v) for k, v in state.items()], new_blobs, fresh
        # Only keys whose patch is an object merge into an old value: read just those.
        merging = [by_key[k] for k, v in state.items() if isinstance(v, dict) and k in by_key]
        old_values = await self._materialise(conn, workspace, merging) if merging else {}
        out = dict(by_key)
        for key, patch in state.items():
            if patch is None:
                out.pop(key, None)
            elif isinstance(patch, dict):
                merged = merge_patch(old_values.get(key), patch)
                out[key] = await entry(key, canonical(merged, what=f"state[{key!r}]"), merged)
            else:
                out[key] = await entry(key, encoded[key], patch)
        return list(out.values()), new_blobs, fresh

    async def _materialise(
        self, conn: AsyncConnection, workspace: str, manifest: Manifest, fresh: dict[str, bytes] | None = None
    ) -> dict[str, Any]:
        """The values of these manifest entries, by key (`fresh`: bytes of values not stored yet)."""
        fresh = fresh or {}
        wanted = [h for h in map(blob_of, manifest) if h is not None and h not in fresh]
        values = {**(await store.load_values(conn, workspace, wanted) if wanted else {}), **fresh}
        out: dict[str, Any] = {}
        for e in manifest:
            if is_inline(e):
                out[e[0]] = json.loads(e[3])
            elif e[1] in values:
                out[e[0]] = json.loads(values[e[1]])
            else:
                out[e[0]] = await lists.load(conn, workspace, e)
        return out

    async def load(
        self,
        conn: AsyncConnection,
        ident: Identity,
        *,
        thread: str,
        version: int | None,
        checkpoint_id: str | None,
        label: str | None,
        paths: list[str] | None,
    ) -> tuple[CheckpointMeta | None, dict[str, Any] | None, list[str] | None]:
        """(metadata, state or the requested paths, missing paths) of one checkpoint, or Nones."""
        chosen = [
            name
            for name, v in (("version", version), ("checkpoint_id", checkpoint_id), ("label", label))
            if v is not None
        ]
        if len(chosen) > 1:
            raise InvalidArgument(f"give at most one of version, checkpoint_id, label (got {', '.join(chosen)})")
        check_int("version", version, 1)
        check_no_nul("checkpoint_id", checkpoint_id)
        check_no_nul("label", label)
        pointers = [(p, parse_pointer(p)) for p in paths] if paths is not None else None
        row = await store.get_checkpoint(
            conn, ident.workspace, thread, version=version, checkpoint_id=checkpoint_id, label=label
        )
        if row is None:
            if chosen:
                what = {
                    "version": f"version {version}",
                    "checkpoint_id": f"checkpoint_id {checkpoint_id!r}",
                    "label": f"label {label!r}",
                }[chosen[0]]
                where = "in this workspace" if checkpoint_id is not None else f"on thread {thread!r}"
                raise NotFound(f"no checkpoint with {what} {where}")
            return None, None, None
        manifest: Manifest = json.loads(row[10])
        if pointers is None:
            return checkpoint_meta(row), await self._materialise(conn, ident.workspace, manifest), None
        wanted_keys = {tokens[0] for _p, tokens in pointers}
        part = [e for e in manifest if e[0] in wanted_keys]  # only the top-level values asked for
        document = await self._materialise(conn, ident.workspace, part)
        out: dict[str, Any] = {}
        missing: list[str] = []
        for pointer, tokens in pointers:
            value = resolve_pointer(document, tokens)
            if is_missing(value):
                missing.append(pointer)
            else:
                out[pointer] = value
        return checkpoint_meta(row), out, missing

    async def list(
        self, ident: Identity, *, thread: str = "main", limit: int = 20, before_version: int | None = None
    ) -> ListCheckpointsResult:
        check_name("thread", thread)
        check_int("before_version", before_version, 1)
        check_int("limit", limit, 1, 200)
        async with self.db.read() as conn:
            rows = await store.list_checkpoints(
                conn, ident.workspace, thread, limit=limit + 1, before_version=before_version
            )
        more = len(rows) > limit
        # No per-row validation: the columns are typed by the store, and a listing is thousands of rows.
        return ListCheckpointsResult.model_construct(
            checkpoints=[checkpoint_meta(row) for row in rows[:limit]],
            next_before_version=rows[limit - 1][2] if more else None,
        )

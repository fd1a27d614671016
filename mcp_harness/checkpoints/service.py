"""Checkpoint rules: versions, merge patches, optimistic concurrency, size limits, pointers.

A state is stored as a manifest of its top-level keys, each pointing at a content-addressed value,
so a checkpoint that changes one key stores only that key's value. A merge touches only the keys the
patch names: the others keep their hashes without being read.
"""

from __future__ import annotations

import json
from typing import Any, cast

from mcp_harness.arguments import ListCheckpointsArgs, RestoreStateArgs, SaveCheckpointArgs
from mcp_harness.base import Identity, ServiceBase, iso, new_id
from mcp_harness.checkpoints import chains as lists
from mcp_harness.checkpoints import manifest
from mcp_harness.checkpoints.manifest import INLINE_MAX_BYTES, Blob, Chain, Entry, Inline, missing_value
from mcp_harness.checkpoints.schemas import validate_state
from mcp_harness.checkpoints.store import checkpoints as store
from mcp_harness.config import check_int
from mcp_harness.errors import InvalidArgument, NotFound, TooLarge, VersionConflict
from mcp_harness.jsonvalue import (
    canonical,
    check_depth,
    dumps,
    is_missing,
    merge_patch,
    parse_pointer,
    resolve_pointer,
    value_hash,
)
from mcp_harness.models import (
    Behind,
    CheckpointMeta,
    ListCheckpointsResult,
    RestoredCheckpoint,
    SaveCheckpointResult,
    ThreadInfo,
)
from mcp_harness.store import Connection
from mcp_harness.store.common import now
from mcp_harness.store.records import CheckpointRow, CheckpointWithManifest, ThreadHead


def checkpoint_meta(row: CheckpointRow | CheckpointWithManifest) -> CheckpointMeta:
    """A checkpoint's metadata, as tools show it."""
    metadata = json.loads(row.metadata_json) if row.metadata_json else None
    return CheckpointMeta(
        row.id,
        row.thread,
        row.version,
        row.parent_id,
        row.label,
        metadata,
        iso(row.created_at),
        row.size_bytes,
        row.agent,
        row.schema_version,
    )


#: what was written since a restored checkpoint is counted up to this many of each (entries, task events)
BEHIND_CAP = 100


async def restored_checkpoint(conn: Connection, workspace: str, meta: CheckpointMeta) -> RestoredCheckpoint:
    """`meta` with `behind`: the progress entries and task events written since it was saved (absent
    when neither): two bounded index reads in one statement."""
    progress, task_changes = await store.behind(conn, workspace, meta.checkpoint_id, BEHIND_CAP)
    behind = Behind(progress=progress, task_changes=task_changes) if progress or task_changes else None
    fields = {name: getattr(meta, name) for name in CheckpointMeta.__dataclass_fields__}
    return RestoredCheckpoint(**fields, behind=behind)


#: at most this many `dropped_keys` in an answer
MAX_DROPPED_KEYS = 20


def dropped_keys(parent: list[Entry], state: dict[str, Any]) -> list[str] | None:
    """What a replace loses: the top-level keys of the state it follows (the thread's latest, or the
    checkpoint forked) that `state` lacks, in their order there, at most 20; None when it loses none.
    Read from the parent's manifest, which lists its keys: no value is loaded."""
    gone = [e.key for e in parent if e.key not in state][:MAX_DROPPED_KEYS]
    return gone or None


class CheckpointService(ServiceBase):
    async def save(self, ident: Identity, args: SaveCheckpointArgs) -> SaveCheckpointResult:
        """Save a state as its thread's next version."""
        state, thread, mode, label, metadata = args.state, args.thread, args.mode, args.label, args.metadata
        check_depth(state, self.limits.max_depth, what="state")
        metadata_json = self._metadata_json(metadata)
        # Encode, before any lock is taken, the values stored as given (a merge's object patches are
        # encoded after merging, null patches delete).
        encoded = {
            k: canonical(v, what=f"state[{k!r}]")
            for k, v in state.items()
            if mode == "replace" or not (v is None or isinstance(v, dict))
        }

        async def body(conn: Connection) -> SaveCheckpointResult:
            head = await store.lock_thread(conn, ident.workspace, thread)
            latest, parent_id, parent = await self._base(conn, ident, args, head)
            entries, new_blobs, fresh = await self._build_manifest(
                conn, ident.workspace, parent, state, encoded, mode, parent_id=parent_id
            )
            size = manifest.state_size(entries)
            if size > self.limits.max_state_bytes:
                raise TooLarge(
                    f"the state would be {size} bytes, over the limit of {self.limits.max_state_bytes} bytes"
                    + (" (measured after the merge)" if mode == "merge" else "")
                )
            schema_version = await validate_state(
                head.schema,
                thread,
                lambda: self._materialise(conn, ident.workspace, entries, fresh, checkpoint=parent_id),
            )
            created = now()
            row: dict[str, Any] = {
                "id": new_id("ck"),
                "workspace": ident.workspace,
                "thread": thread,
                "version": latest + 1,
                "parent_id": parent_id,
                "label": label,
                "metadata_json": metadata_json,
                "manifest": manifest.dumps(entries),
                "size_bytes": size,
                "agent": ident.agent,
                "schema_version": schema_version,
                "created_at": created,
            }
            known = {e.hash for e in parent if isinstance(e, Blob)}
            await store.insert_checkpoint(conn, row, {h: d for h, d in new_blobs.items() if h not in known})
            return SaveCheckpointResult(
                checkpoint_id=row["id"],
                thread=thread,
                version=row["version"],
                parent_id=parent_id,
                created_at=iso(created),
                size_bytes=size,
                dropped_keys=dropped_keys(parent, state) if mode == "replace" else None,
            )

        return await self.exactly_once(ident, args, SaveCheckpointResult, body)

    async def _base(
        self, conn: Connection, ident: Identity, args: SaveCheckpointArgs, head: ThreadHead
    ) -> tuple[int, str | None, list[Entry]]:
        """What a save builds on: (the thread's latest version, the parent checkpoint's id, its manifest).
        The parent is the thread's latest checkpoint, or for a fork (`fork_from`) the checkpoint named."""
        thread, expected = args.thread, args.expected_version
        if args.fork_from is not None:
            if expected not in (None, 0):
                raise InvalidArgument(
                    f"fork_from starts a new thread: expected_version must be 0 or omitted, not {expected}"
                )
            if head.version:
                raise InvalidArgument(
                    f"thread {thread!r} already has {head.version} checkpoint(s); fork_from starts a new "
                    "thread: choose a thread name with no checkpoint"
                )
            source = await store.get_checkpoint(conn, ident.workspace, thread, checkpoint_id=args.fork_from)
            if source is None:
                raise NotFound(f"no checkpoint with checkpoint_id {args.fork_from!r} in this workspace")
            return 0, source.id, manifest.loads(source.manifest)
        if expected is not None and expected != head.version:
            raise VersionConflict(
                f"thread {thread!r} is at version {head.version}, you expected {expected}"
                + ("" if head.version else " (it has no checkpoint yet: expected_version 0 means that)")
                + f"; call restore_state(thread={thread!r}) to see what changed, then retry with "
                f"expected_version={head.version}"
            )
        return head.version, head.checkpoint_id, manifest.loads(head.manifest) if head.manifest else []

    def _metadata_json(self, metadata: dict[str, Any] | None) -> str | None:
        """A checkpoint's metadata as stored, once checked against the limits."""
        if metadata is None:
            return None
        check_depth(metadata, self.limits.max_depth, what="metadata")
        raw = canonical(metadata, what="metadata")
        if len(raw) > self.limits.max_value_bytes:
            raise TooLarge(f"metadata is {len(raw)} bytes, over the limit of {self.limits.max_value_bytes}")
        return dumps(metadata)

    async def _build_manifest(
        self,
        conn: Connection,
        workspace: str,
        parent: list[Entry],
        state: dict[str, Any],
        encoded: dict[str, bytes],
        mode: str,
        *,
        parent_id: str | None,
    ) -> tuple[list[Entry], dict[str, bytes], dict[str, bytes]]:
        """(manifest, values to store as blobs, every new value's bytes by hash)."""
        new_blobs: dict[str, bytes] = {}
        fresh: dict[str, bytes] = {}
        by_key = {e.key: e for e in parent}

        async def entry(key: str, data: bytes, value: Any) -> Entry:
            if isinstance(value, list) and len(data) >= lists.CHAIN_MIN_BYTES:
                made = await lists.store_array(conn, workspace, key, data, len(value), by_key.get(key))
                fresh[made.hash] = data
                return made
            if len(data) <= INLINE_MAX_BYTES:
                return Inline(key, len(data), data.decode())
            h = value_hash(data)
            new_blobs[h] = fresh[h] = data
            return Blob(key, h, len(data))

        if mode == "replace":
            return [await entry(k, encoded[k], v) for k, v in state.items()], new_blobs, fresh
        # Only keys whose patch is an object merge into an old value: read just those.
        merging = [by_key[k] for k, v in state.items() if isinstance(v, dict) and k in by_key]
        old_values = await self._materialise(conn, workspace, merging, checkpoint=parent_id) if merging else {}
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
        self,
        conn: Connection,
        workspace: str,
        entries: list[Entry],
        fresh: dict[str, bytes] | None = None,
        *,
        checkpoint: str | None = None,
    ) -> dict[str, Any]:
        """The values of these manifest entries (of `checkpoint`, named if one is missing), by key
        (`fresh`: bytes of values not stored yet)."""
        fresh = fresh or {}
        wanted = [e.hash for e in entries if isinstance(e, Blob) and e.hash not in fresh]
        values = {**(await store.load_values(conn, workspace, wanted) if wanted else {}), **fresh}
        out: dict[str, Any] = {}
        for e in entries:
            if isinstance(e, Inline):
                out[e.key] = json.loads(e.json)
            elif e.hash in values:
                out[e.key] = json.loads(values[e.hash])
            elif isinstance(e, Chain):
                out[e.key] = await lists.load(conn, workspace, e, checkpoint)
            else:
                raise missing_value(checkpoint, f"value {e.hash}")
        return out

    async def load(
        self,
        conn: Connection,
        ident: Identity,
        args: RestoreStateArgs,
    ) -> tuple[CheckpointMeta | None, dict[str, Any] | None, list[str] | None]:
        """(metadata, state or the requested paths, missing paths) of one checkpoint, or Nones."""
        thread, version, checkpoint_id, label, paths = (
            args.thread,
            args.version,
            args.checkpoint_id,
            args.label,
            args.paths,
        )
        chosen = [
            name
            for name, v in (("version", version), ("checkpoint_id", checkpoint_id), ("label", label))
            if v is not None
        ]
        if len(chosen) > 1:
            raise InvalidArgument(f"give at most one of version, checkpoint_id, label (got {', '.join(chosen)})")
        check_int("version", version, 1)
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
        entries = manifest.loads(row.manifest)
        if pointers is None:
            state = await self._materialise(conn, ident.workspace, entries, checkpoint=row.id)
            return checkpoint_meta(row), state, None
        wanted_keys = {tokens[0] for _p, tokens in pointers}
        part = [e for e in entries if e.key in wanted_keys]  # only the top-level values asked for
        document = await self._materialise(conn, ident.workspace, part, checkpoint=row.id)
        out: dict[str, Any] = {}
        missing: list[str] = []
        for pointer, tokens in pointers:
            value = resolve_pointer(document, tokens)
            if is_missing(value):
                missing.append(pointer)
            else:
                out[pointer] = value
        return checkpoint_meta(row), out, missing

    async def threads(self, ident: Identity) -> list[ThreadInfo]:
        """The workspace's threads with their latest checkpoint, by name."""
        async with self.db.read() as conn:
            rows = await store.list_threads(conn, ident.workspace)
        return [
            ThreadInfo(
                thread=r.name,
                latest_version=r.latest_version,
                checkpoint_id=cast(str, r.latest_id),  # a thread is inserted with its first checkpoint
                size_bytes=r.size_bytes,
                updated_at=iso(r.updated_at),
            )
            for r in rows
        ]

    async def list(self, ident: Identity, args: ListCheckpointsArgs) -> ListCheckpointsResult:
        """Checkpoint metadata, newest first."""
        thread, limit, before_version = args.thread, args.limit, args.before_version
        async with self.db.read() as conn:
            rows = await store.list_checkpoints(
                conn, ident.workspace, thread, limit=limit + 1, before_version=before_version
            )
        more = len(rows) > limit
        # No per-row validation: the columns are typed by the store, and a listing is thousands of rows.
        return ListCheckpointsResult.model_construct(
            checkpoints=[checkpoint_meta(row) for row in rows[:limit]],
            next_before_version=rows[limit - 1].version if more else None,
        )

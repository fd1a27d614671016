"""Backup and retention: JSON Lines export/import that round-trips exactly, and prune."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..config import check_name
from ..errors import InvalidArgument
from ..jsonvalue import dumps
from ..store import backup as store
from ..store import segments
from ..store import tasks as tasks_store
from ..store.common import list_workspaces, now
from ..store.migrations import SCHEMA_VERSION
from . import lists
from .base import ServiceBase
from .checkpoints import blob_of

FORMAT = "mcp-harness-export"
FORMAT_VERSION = 2  #: 2 added segment records (long arrays); version 1 files import unchanged

#: progress(what, done, total): total is None when it is not known beforehand
Progress = Callable[[str, int, int | None], None]


def _quiet(_what: str, _count: int, _total: int | None) -> None:
    return None


@dataclass(frozen=True)
class PruneReport:
    workspaces: int
    checkpoints_deleted: int
    values_deleted: int


class MaintenanceService(ServiceBase):
    async def workspaces(self) -> list[str]:
        """The workspaces this database holds, by name."""
        async with self.db.read() as conn:
            return await list_workspaces(conn)

    async def export(self, workspace: str | None = None, progress: Progress = _quiet) -> AsyncIterator[str]:
        """JSON Lines: a header, then every row of the workspace (or of all workspaces)."""
        async with self.db.read_long() as conn:
            names = [check_name("workspace", workspace)] if workspace else await list_workspaces(conn)
            yield json.dumps({"type": "header", "format": FORMAT, "format_version": FORMAT_VERSION,
                              "schema_version": SCHEMA_VERSION, "workspaces": names, "exported_at": now()})  # fmt: skip
            total = 0
            for name in names:
                total += await store.count_rows(conn, name)
            count = 0
            for name in names:
                async for kind, row in store.export_rows(conn, name):
                    yield json.dumps({"type": kind, **row}, ensure_ascii=False, separators=(",", ":"))
                    count += 1
                    if count % 1000 == 0:
                        progress("exported rows", count, total)
            progress("exported rows", count, total)

    async def import_lines(self, lines: Iterable[str], progress: Progress = _quiet) -> dict[str, int]:
        """Read an export back in one transaction: all of it lands, or (on any error) none of it.
        A workspace that already holds data in this database is refused, never merged."""
        rows = iter(enumerate(lines, start=1))
        header = _parse(next(rows, (1, ""))[1], 1)
        if header.get("type") != "header" or header.get("format") != FORMAT:
            raise InvalidArgument("line 1 is not an mcp-harness export header")
        if header.get("format_version", 0) > FORMAT_VERSION:
            raise InvalidArgument(f"this export uses format version {header['format_version']}; upgrade mcp-harness")
        counts: dict[str, int] = {}
        checked: set[str] = set()
        ids = store.ImportIds()
        async with self.db.write() as conn:
            for number, line in rows:
                if not line.strip():
                    continue
                record = _parse(line, number)
                kind = record.pop("type", None)
                if kind not in store.KINDS and kind != "task_tag":
                    raise InvalidArgument(f"line {number}: unknown record type {kind!r}")
                ws = record.get("name") if kind == "workspace" else record.get("workspace")
                if not isinstance(ws, str):
                    raise InvalidArgument(f"line {number}: the record names no workspace")
                if ws not in checked:
                    check_name("workspace", ws)
                    if await store.workspace_has_data(conn, ws):
                        raise InvalidArgument(
                            f"workspace {ws!r} already has data in this database: import into a fresh database "
                            "(imports never merge into existing data)"
                        )
                    checked.add(ws)
                try:
                    if kind == "checkpoint":
                        record["manifest"] = dumps(lists.remap(json.loads(record["manifest"]), ids.segments))
                    await store.import_row(conn, kind, record, ids)
                except (KeyError, TypeError, ValueError) as exc:
                    raise InvalidArgument(f"line {number}: a {kind} record is incomplete ({exc})") from exc
                counts[kind] = counts.get(kind, 0) + 1
                if number % 1000 == 0:
                    progress("imported rows", number, None)
        progress("imported rows", sum(counts.values()), None)
        if counts.get("task", 0):
            async with self.db.single() as conn:
                await tasks_store.refresh_statistics(conn)
        return counts

    async def prune(
        self, *, keep_last: int, older_than_days: float | None = None, workspace: str | None = None,
        progress: Progress = _quiet,
    ) -> PruneReport:  # fmt: skip
        """Delete old checkpoints (never the last `keep_last` of a thread, never a labelled one) and the
        values only they used, then return the space to the file system."""
        if keep_last < 1:
            raise InvalidArgument(
                f"--keep-last must be at least 1 (the latest checkpoint is always kept), got {keep_last}"
            )
        if older_than_days is not None and older_than_days < 0:
            raise InvalidArgument(f"--older-than must be zero or more days, got {older_than_days}")
        cutoff = now() - older_than_days * 86400 if older_than_days is not None else None
        deleted = values = 0
        async with self.db.read() as conn:
            names = [check_name("workspace", workspace)] if workspace else await list_workspaces(conn)
        for done, name in enumerate(names):
            progress("pruned workspaces", done, len(names))
            async with self.db.write() as conn:
                ids = await store.prunable(conn, name, keep_last=keep_last, older_than=cutoff)
                await store.delete_checkpoints(conn, ids)
                referenced: set[str] = set()
                tails: set[int] = set()
                async for manifest in store.manifests(conn, name):
                    for entry in json.loads(manifest):
                        if lists.is_chain(entry):
                            tails.add(entry[3])
                        elif (blob := blob_of(entry)) is not None:
                            referenced.add(blob)
                values += await store.delete_unreferenced_blobs(conn, name, referenced)
                links = await segments.links(conn, name)
                live = lists.reachable(tails, links)
                dead = [i for i in links if i not in live]
                await segments.delete_ids(conn, name, dead)
                values += len(dead)
            deleted += len(ids)
        progress("pruned workspaces", len(names), len(names))
        await self.db.vacuum()
        return PruneReport(workspaces=len(names), checkpoints_deleted=deleted, values_deleted=values)


def _parse(line: str, number: int) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InvalidArgument(f"line {number} is not JSON: {exc.msg}") from None
    if not isinstance(record, dict):
        raise InvalidArgument(f"line {number} is not a JSON object")
    return record

"""Backup and retention: JSON Lines export/import that round-trips exactly, and prune."""

from __future__ import annotations

import json
import tempfile
from collections.abc import AsyncGenerator, Callable, Iterable
from dataclasses import dataclass
from typing import IO, Any

from mcp_harness.base import ServiceBase
from mcp_harness.checkpoints import chains as lists
from mcp_harness.checkpoints import manifest
from mcp_harness.checkpoints.manifest import Blob, Chain
from mcp_harness.config import NAME_RE, check_name
from mcp_harness.errors import InvalidArgument
from mcp_harness.maintenance.import_check import ImportChecker
from mcp_harness.maintenance.import_records import parse_line
from mcp_harness.maintenance.store import backup as store
from mcp_harness.store import SCHEMA_VERSION
from mcp_harness.store.common import now
from mcp_harness.tasks.store import tasks as tasks_store

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
        async with self.db.cold_read() as conn:
            return await store.list_workspaces(conn)

    async def export(self, workspace: str | None = None, progress: Progress = _quiet) -> AsyncGenerator[str, None]:
        """JSON Lines: a header, then every row of the workspace (or of all workspaces)."""
        async with self.db.cold_read() as conn:
            names = [check_name("workspace", workspace)] if workspace else await store.list_workspaces(conn)
            yield json.dumps(
                {
                    "type": "header",
                    "format": FORMAT,
                    "format_version": FORMAT_VERSION,
                    "schema_version": SCHEMA_VERSION,
                    "workspaces": names,
                    "exported_at": now(),
                }
            )
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

    async def import_lines(self, lines: Iterable[str | bytes], progress: Progress = _quiet) -> dict[str, int]:
        """Read an export back. Every record is checked first (`import_check`: the tools' rules and
        limits, duplicates, references), so a bad file stores nothing; then it is written in one
        transaction. A workspace that already holds data in this database is refused, never merged.
        The lines are kept in a temporary file between the two passes (any size, read once)."""
        rows = iter(enumerate(lines, start=1))
        header = parse_line(1, next(rows, (1, ""))[1]) or {}
        checker = ImportChecker(self.limits, _check_header(header))
        total = 0
        with tempfile.TemporaryFile() as spool:
            for number, raw in rows:
                record = parse_line(number, raw)
                if record is not None:
                    checker.record(number, str(record.pop("type", None)), record)
                    total += 1
                    spool.write(f"{number} ".encode() + (raw if isinstance(raw, bytes) else raw.encode()).rstrip())
                    spool.write(b"\n")
                if number % 1000 == 0:
                    progress("checked rows", number, None)
            checker.finish()
            spool.seek(0)
            counts = await self._write(spool, checker, progress, total)
        if counts.get("task", 0):
            async with self.db.single() as conn:
                await tasks_store.refresh_statistics(conn)
        return counts

    async def _write(self, spool: IO[bytes], checker: ImportChecker, progress: Progress, total: int) -> dict[str, int]:
        """The checked records, inserted in one transaction (ids renumbered where the target decides)."""
        counts: dict[str, int] = {}
        ids = store.ImportIds()
        async with self.db.cold_write() as conn:
            for ws in checker.workspaces:
                if await store.workspace_has_data(conn, ws):
                    raise InvalidArgument(
                        f"workspace {ws!r} already has data in this database: import into a fresh database "
                        "(imports never merge into existing data)"
                    )
            for line in spool:
                number, _, raw = line.partition(b" ")
                record = json.loads(raw)
                kind = record.pop("type")
                if kind == "checkpoint":
                    record["manifest"] = manifest.dumps(lists.remap(manifest.loads(record["manifest"]), ids.segments))
                if kind == "task":
                    record.update(checker.task_flags[(record["workspace"], record["key"])])
                try:
                    await store.import_row(conn, kind, record, ids)
                except InvalidArgument as exc:
                    raise InvalidArgument(f"line {int(number)}: {exc.message}") from None
                counts[kind] = counts.get(kind, 0) + 1
                if sum(counts.values()) % 1000 == 0:
                    progress("imported rows", sum(counts.values()), total)
        progress("imported rows", sum(counts.values()), total)
        return counts

    async def prune(
        self,
        *,
        keep_last: int,
        older_than_days: float | None = None,
        workspace: str | None = None,
        progress: Progress = _quiet,
    ) -> PruneReport:
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
        async with self.db.cold_read() as conn:
            names = [check_name("workspace", workspace)] if workspace else await store.list_workspaces(conn)
        for done, name in enumerate(names):
            progress("pruned workspaces", done, len(names))
            async with self.db.cold_write() as conn:  # one transaction: the scan and the deletes
                await store.lock_values(conn, name)
                ids = await store.prunable(conn, name, keep_last=keep_last, older_than=cutoff)
                await store.delete_checkpoints(conn, ids)
                referenced: set[str] = set()
                tails: set[int] = set()
                async for text in store.manifests(conn, name):
                    for entry in manifest.loads(text):
                        if isinstance(entry, Chain):
                            tails.add(entry.tail)
                        elif isinstance(entry, Blob):
                            referenced.add(entry.hash)
                values += await store.delete_unreferenced_blobs(conn, name, referenced)
                links = await store.segment_links(conn, name)
                live = lists.reachable(tails, links)
                dead = [i for i in links if i not in live]
                await store.delete_segments(conn, name, dead)
                values += len(dead)
            deleted += len(ids)
        progress("pruned workspaces", len(names), len(names))
        await self.db.vacuum()
        return PruneReport(workspaces=len(names), checkpoints_deleted=deleted, values_deleted=values)


def _check_header(header: dict[str, Any]) -> list[str]:
    """The workspaces an export header lists; anything but a header this version can read is refused."""
    if header.get("type") != "header" or header.get("format") != FORMAT:
        raise InvalidArgument("line 1 is not an mcp-harness export header")
    version = header.get("format_version")
    if type(version) is not int or not 1 <= version <= FORMAT_VERSION:
        if type(version) is int and version > FORMAT_VERSION:
            raise InvalidArgument(f"this export uses format version {version}; upgrade mcp-harness")
        raise InvalidArgument(
            f"line 1: format_version must be a whole number from 1 to {FORMAT_VERSION}, not {str(version)[:40]!r}"
        )
    names = header.get("workspaces")
    if not isinstance(names, list) or not all(isinstance(n, str) and NAME_RE.fullmatch(n) for n in names):
        raise InvalidArgument("line 1: the header's workspaces must be a list of workspace names")
    return names

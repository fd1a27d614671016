"""Manifest entries: one type per kind, the same bytes on disk as the lists they were before."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from mcp_harness.arguments import SaveCheckpointArgs
from mcp_harness.checkpoints import manifest
from mcp_harness.checkpoints.manifest import Blob, Chain, Inline
from mcp_harness.jsonvalue import canonical, value_hash
from mcp_harness.maintenance.store.backup import checkpoints
from mcp_harness.service import Identity

#: a manifest as the previous layout wrote it: a blob, an inline value and a chain
ON_DISK = '[["docs","00112233445566778899aabbccddeeff",502],["n",null,1,"7"],["log","ffee",4096,12,3,40]]'


def test_entries_read_and_write_the_stored_layout():
    entries = manifest.loads(ON_DISK)
    assert entries == [
        Blob("docs", "00112233445566778899aabbccddeeff", 502),
        Inline("n", 1, "7"),
        Chain("log", "ffee", 4096, 12, 3, 40),
    ]
    assert manifest.dumps(entries) == ON_DISK
    assert all(manifest.from_json(e.to_json()) == e for e in entries)
    assert manifest.state_size(entries) == len('{"docs":,"n":,"log":}') + 502 + 1 + 4096


def test_an_entry_of_another_shape_is_refused():
    with pytest.raises(ValueError, match="not a manifest entry"):
        manifest.from_json(["k", "h"])


@pytest.mark.anyio
async def test_a_save_stores_the_same_manifest_bytes_as_before(harness, workspace):
    long_text, numbers = "x" * 500, list(range(1000))  # a blob, an inline value, a chain
    await harness.checkpoints.save(
        Identity(workspace, "a"), SaveCheckpointArgs(state={"docs": long_text, "n": 7, "log": numbers})
    )
    async with harness.db.cold_read() as conn:
        stmt = select(checkpoints.c.manifest).where(checkpoints.c.workspace == workspace)
        stored = (await conn.execute(stmt)).scalar_one()
    docs, log = canonical(long_text), canonical(numbers)
    tail = manifest.loads(stored)[2].tail
    assert stored == (
        f'[["docs","{value_hash(docs)}",{len(docs)}],["n",null,1,"7"],'
        f'["log","{value_hash(log)}",{len(log)},{tail},0,1000]]'
    )

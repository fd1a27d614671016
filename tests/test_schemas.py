"""State schemas: `mcp-harness schema set` and [schema_violation] naming each failing path."""

from __future__ import annotations

import json

import pytest
from support import call, fail, mcp_client, run_cli

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # both tests run the CLI as a process

SCHEMA = {
    "type": "object",
    "properties": {"phase": {"type": "integer", "minimum": 1}, "notes": {"type": "array", "items": {"type": "string"}}},
    "required": ["phase"],
}


async def test_schema_set_and_violations(sqlite_url, workspace, tmp_path):
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(SCHEMA))
    db = sqlite_url.split("///", 1)[1]
    out = run_cli("schema", "set", "--thread", "main", str(path), "--db", db, "--workspace", workspace)
    assert out.returncode == 0 and "schema version 1" in out.stdout
    async with mcp_client(sqlite_url, workspace) as client:
        ok = await call(client, "save_checkpoint", state={"phase": 1, "notes": ["a"]})
        err = await fail(client, "save_checkpoint", state={"phase": 0, "notes": ["a", 2]})
        assert err.code == "schema_violation"
        assert (
            "/phase: 0 is less than the minimum of 1" in err.text and "/notes/1: 2 is not of type 'string'" in err.text
        )
        err = await fail(client, "save_checkpoint", mode="merge", state={"phase": None})
        assert err.code == "schema_violation" and "'phase' is a required property" in err.text
        brief = await call(client, "restore_state")
        assert brief["checkpoint"]["version"] == ok["version"] == 1 and brief["checkpoint"]["schema_version"] == 1
        other = await call(client, "save_checkpoint", state={"anything": True}, thread="free")
        assert other["version"] == 1  # schemas are per thread


async def test_invalid_schema_is_refused(sqlite_url, workspace, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"type": "no-such-type"}))
    db = sqlite_url.split("///", 1)[1]
    out = run_cli("schema", "set", "--thread", "main", str(bad), "--db", db, "--workspace", workspace)
    assert out.returncode != 0 and "not a valid Draft 2020-12 JSON Schema" in out.stderr
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    out = run_cli("schema", "set", "--thread", "main", str(broken), "--db", db, "--workspace", workspace)
    assert out.returncode != 0 and "is not valid JSON" in out.stderr

"""Every error a client can meet: `[code] message`, no SDK prefix, no stack trace, nothing stored."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import call, fail, mcp_client

from mcp_harness.errors import ALL_CODES, HarnessError

pytestmark = pytest.mark.anyio


async def assert_nothing_stored(client):
    assert (await call(client, "list_checkpoints"))["checkpoints"] == []


async def test_validation_failures_name_the_field(client):
    cases = [
        ({"state": {"a": 1}, "thread": "bad name"}, "thread"),
        ({"state": {"a": 1}, "thread": ""}, "thread"),
        ({"state": {"a": 1}, "thread": "x" * 129}, "thread"),
        ({"state": {"a": 1}, "mode": "upsert"}, "mode"),
        ({"state": "not an object"}, "state"),
        ({"state": {"a": 1}, "expected_version": -1}, "expected_version"),
        ({"state": {"a": 1}, "metadata": [1]}, "metadata"),
        ({}, "state"),
    ]
    for arguments, field in cases:
        err = await fail(client, "save_checkpoint", **arguments)
        assert err.code == "invalid_argument", err.text
        assert err.text.startswith(f"[invalid_argument] {field}"), err.text
        assert "Error executing tool" not in err.text and "Traceback" not in err.text
    await assert_nothing_stored(client)


async def test_limits_over_the_maximum_are_refused_not_clamped(client):
    err = await fail(client, "list_checkpoints", limit=201)
    assert err.code == "invalid_argument" and "limit" in err.text and "200" in err.text
    err = await fail(client, "restore_state", progress_limit=101)
    assert err.code == "invalid_argument" and "progress_limit" in err.text


async def test_unknown_tool_is_not_found(client):
    err = await fail(client, "delete_everything")
    assert err.code == "not_found" and "delete_everything" in err.text and "save_checkpoint" in err.text


async def test_unknown_argument_is_named(client):
    err = await fail(client, "save_checkpoint", state={"a": 1}, expected_versoin=0)
    assert err.code == "invalid_argument" and "'expected_versoin'" in err.text and "expected_version" in err.text
    await assert_nothing_stored(client)


async def test_more_than_one_selector_is_refused(client):
    err = await fail(client, "restore_state", version=1, label="x")
    assert err.code == "invalid_argument" and "at most one of version, checkpoint_id, label" in err.text


async def test_hostile_values(db_url, workspace):
    from mcp_harness.config import Limits

    async with mcp_client(db_url, workspace, limits=Limits(max_depth=16)) as client:
        deep: dict = {}
        node = deep
        for _ in range(40):
            node["x"] = {}
            node = node["x"]
        err = await fail(client, "save_checkpoint", state={"deep": deep})
        assert err.code == "invalid_argument" and "nested deeper than 16" in err.text
        err = await fail(client, "save_checkpoint", state={"bad": "\ud800"})
        assert err.code == "invalid_argument", err.text
        await assert_nothing_stored(client)
        odd = {"emoji": "🧭", "rtl": "\u202eabc", "nul": "a\u0000b", "k\u00e9y": ["\u2028"]}
        await call(client, "save_checkpoint", state=odd)
        assert (await call(client, "restore_state"))["state"] == odd


async def test_nan_and_infinity_are_refused(harness, workspace):
    """JSON has no NaN/Infinity; a client that sends them (Python's json does) is refused, nothing stored.
    (The SDK's in-memory transport turns them into null before the server sees them, so this calls the
    service directly; tests/test_stdio.py sends the raw bytes over a real pipe.)"""
    from mcp_harness.errors import InvalidArgument
    from mcp_harness.service import Identity

    ident = Identity(workspace=workspace, agent="a")
    for value in (float("nan"), float("inf"), float("-inf")):
        with pytest.raises(InvalidArgument, match="NaN or Infinity"):
            await harness.checkpoints.save(ident, state={"x": [1, {"y": value}]})
        with pytest.raises(InvalidArgument, match="NaN or Infinity"):
            await harness.progress.record(ident, summary="s", artifacts={"v": value})
    assert (await harness.checkpoints.list(ident)).checkpoints == []


async def test_too_large_is_its_own_code(db_url, workspace):
    from mcp_harness.config import Limits

    async with mcp_client(db_url, workspace, limits=Limits(max_state_bytes=1000)) as client:
        err = await fail(client, "save_checkpoint", state={"x": "y" * 2000})
        assert err.code == "too_large" and "over the limit of 1000 bytes" in err.text
        await assert_nothing_stored(client)


async def test_unexpected_errors_are_internal_with_an_incident_id(client, monkeypatch, caplog):
    from mcp_harness.service.checkpoints import CheckpointService

    async def boom(*_a, **_k):
        raise RuntimeError("secret SQL: SELECT * FROM passwords")

    monkeypatch.setattr(CheckpointService, "list", boom)
    err = await fail(client, "list_checkpoints")
    assert err.code == "internal" and "incident" in err.text
    assert "secret" not in err.text and "SELECT" not in err.text and "Traceback" not in err.text
    incident = err.text.split("incident ", 1)[1].split(")", 1)[0]
    assert any(incident in r.getMessage() for r in caplog.records), "the incident id must be in the server log"


#: CONTRACT.md, "Errors": the codes a failed call may start with (the contract lives outside this
#: repository; README.md repeats the list, and this test checks the copy too)
CONTRACT_CODES = {
    "invalid_argument", "not_found", "version_conflict", "lease_lost", "task_conflict", "dependency_error",
    "too_large", "forbidden", "schema_violation", "unavailable", "internal",
}  # fmt: skip


def error_classes() -> list[type[HarnessError]]:
    """Every exception class a client can meet: HarnessError's subclasses, at any depth."""
    found, todo = [], list(HarnessError.__subclasses__())
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def test_every_contract_code_has_a_class():
    classes = error_classes()
    codes = {cls.code for cls in classes}
    assert len(codes) == len(classes), f"two classes share a code: {sorted(c.__name__ for c in classes)}"
    assert codes == CONTRACT_CODES
    assert sorted(ALL_CODES) == sorted(codes), "errors.ALL_CODES must list every class's code once"
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    listed = readme.split("\n### Errors\n", 1)[1].split("Codes:", 1)[1].split(".", 1)[0]
    assert set(re.findall(r"`([a-z_]+)`", listed)) == CONTRACT_CODES, "README's list of codes"

"""Every error a client can meet: `[code] message`, no SDK prefix, no stack trace, nothing stored."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError
from support import call, fail, mcp_client

from mcp_harness.arguments import ListCheckpointsArgs, RecordProgressArgs, SaveCheckpointArgs
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
            await harness.checkpoints.save(ident, SaveCheckpointArgs(state={"x": [1, {"y": value}]}))
        with pytest.raises(InvalidArgument, match="NaN or Infinity"):
            await harness.progress.record(ident, RecordProgressArgs(summary="s", artifacts={"v": value}))
    assert (await harness.checkpoints.list(ident, ListCheckpointsArgs())).checkpoints == []


async def test_too_large_is_its_own_code(db_url, workspace):
    from mcp_harness.config import Limits

    async with mcp_client(db_url, workspace, limits=Limits(max_state_bytes=1000)) as client:
        err = await fail(client, "save_checkpoint", state={"x": "y" * 2000})
        assert err.code == "too_large" and "over the limit of 1000 bytes" in err.text
        await assert_nothing_stored(client)


async def test_unexpected_errors_are_internal_with_an_incident_id(client, monkeypatch, caplog):
    from mcp_harness.checkpoints.service import CheckpointService

    async def boom(*_a, **_k):
        raise RuntimeError("secret SQL: SELECT * FROM passwords")

    monkeypatch.setattr(CheckpointService, "list", boom)
    err = await fail(client, "list_checkpoints")
    assert err.code == "internal" and "incident" in err.text
    assert "secret" not in err.text and "SELECT" not in err.text and "Traceback" not in err.text
    incident = err.text.split("incident ", 1)[1].split(")", 1)[0]
    assert any(incident in r.getMessage() for r in caplog.records), "the incident id must be in the server log"


#: CONTRACT.md, "Errors": the codes a failed call may start with (the contract lives outside this
#: repository; docs/reference/tools.md repeats the list, and this test checks the copy too)
CONTRACT_CODES = {
    "invalid_argument",
    "not_found",
    "version_conflict",
    "lease_lost",
    "task_conflict",
    "dependency_error",
    "too_large",
    "forbidden",
    "schema_violation",
    "unavailable",
    "internal",
}


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
    reference = (Path(__file__).resolve().parents[1] / "docs" / "reference" / "tools.md").read_text()
    listed = reference.split("\n## Errors\n", 1)[1].split("Codes:", 1)[1].split(".", 1)[0]
    assert set(re.findall(r"`([a-z_]+)`", listed)) == CONTRACT_CODES, "the reference's list of codes"


def task_cursor(number: int) -> str:
    """A cursor in list_tasks' format (base64 of "t:<last id>") holding any number."""
    return base64.urlsafe_b64encode(f"t:{number}".encode()).decode().rstrip("=")


async def test_a_cursor_past_64_bits_is_invalid_not_internal(client):
    await call(client, "add_tasks", tasks=[{"key": "k", "title": "K"}])
    assert (await call(client, "list_tasks", cursor=task_cursor(2**63 - 1)))["tasks"] == []
    for number in (2**63, 2**64, 10**40, -(2**63) - 1):
        err = await fail(client, "list_tasks", cursor=task_cursor(number))
        assert err.code == "invalid_argument" and "cursor is not one that list_tasks returned" in err.text, err.text


async def test_versions_up_to_2_53_minus_1_are_valid_arguments(client):
    """The tools accept versions up to 2**53 - 1 (the input schema says so): past PostgreSQL's int4
    range they must find nothing, not fail."""
    await call(client, "save_checkpoint", state={"a": 1})
    for version in (2**31, 2**32, 2**53 - 1):
        err = await fail(client, "restore_state", version=version)
        assert err.code == "not_found" and f"version {version}" in err.text, err.text
        page = await call(client, "list_checkpoints", before_version=version)
        assert [c["version"] for c in page["checkpoints"]] == [1]
        err = await fail(client, "save_checkpoint", state={"b": 1}, expected_version=version)
        assert err.code == "version_conflict", err.text
        with pytest.raises(MCPError, match="not_found"):
            await client.read_resource(f"harness://threads/main/checkpoints/{version}")
    for argument in ("version", "before_version"):
        tool = "restore_state" if argument == "version" else "list_checkpoints"
        err = await fail(client, tool, **{argument: 2**53})
        assert err.code == "invalid_argument" and argument in err.text and "9007199254740991" in err.text


async def test_nul_is_refused_in_every_text_argument_and_kept_in_json_values(client):
    """PostgreSQL cannot store U+0000 in text, SQLite can: both refuse it in names, keys, ids, labels,
    tags and text with `[invalid_argument]` naming the field; inside JSON values it is just a character."""
    nul = "a\u0000b"
    await call(client, "add_tasks", tasks=[{"key": "held", "title": "held"}])
    lease = (await call(client, "claim_task", task_key="held"))["lease"]["token"]
    held = {"task_key": "held", "lease_token": lease}
    cases = [
        ("record_progress", {"summary": nul}, "summary"),
        ("record_progress", {"summary": "s", "details": nul}, "details"),
        ("record_progress", {"summary": "s", "next_steps": ["ok", nul]}, "next_steps[1]"),
        ("record_progress", {"summary": "s", "idempotency_key": nul}, "idempotency_key"),
        ("save_checkpoint", {"state": {"a": 1}, "label": nul}, "label"),
        ("save_checkpoint", {"state": {"a": 1}, "idempotency_key": nul}, "idempotency_key"),
        ("save_checkpoint", {"state": {"a": 1}, "thread": nul}, "thread"),
        ("restore_state", {"label": nul}, "label"),
        ("restore_state", {"checkpoint_id": nul}, "checkpoint_id"),
        ("add_tasks", {"tasks": [{"key": "k", "title": nul}]}, "tasks[0].title"),
        ("add_tasks", {"tasks": [{"key": "k", "title": "t", "description": nul}]}, "tasks[0].description"),
        ("add_tasks", {"tasks": [{"key": "k", "title": "t", "steps": [nul]}]}, "tasks[0].steps[0]"),
        ("add_tasks", {"tasks": [{"key": "k", "title": "t", "tags": ["x", nul]}]}, "tasks[0].tags[1]"),
        ("add_tasks", {"tasks": [{"key": nul, "title": "t"}]}, "tasks[0].key"),
        ("claim_task", {"tags": [nul]}, "tags[0]"),
        ("claim_task", {"task_key": nul}, "task_key"),
        ("list_tasks", {"tag": nul}, "tag"),
        ("update_task", {"task_key": "held", "action": "heartbeat", "lease_token": nul}, "lease_token"),
        ("update_task", {**held, "action": "complete", "verification": nul}, "verification"),
        ("update_task", {**held, "action": "fail", "error": nul}, "error"),
        ("update_task", {"task_key": "held", "action": "reopen", "reason": nul}, "reason"),
    ]
    for tool, arguments, field in cases:
        err = await fail(client, tool, **arguments)
        assert err.code == "invalid_argument", (tool, field, err.text)
        assert err.text.startswith(f"[invalid_argument] {field}") or f"'{field}'" in err.text, err.text
    await assert_nothing_stored(client)
    assert (await call(client, "restore_state"))["recent_progress"] == []
    assert [t["key"] for t in (await call(client, "list_tasks"))["tasks"]] == ["held"]

    state = {"k\u0000": nul, "nested": {"list": [nul, {"x\u0000y": 1}]}}
    saved = await call(client, "save_checkpoint", state=state, metadata={"m": nul})
    brief = await call(client, "restore_state")
    assert brief["state"] == state and brief["checkpoint"]["metadata"] == {"m": nul}
    assert (await call(client, "restore_state", paths=["/k\u0000"]))["state"] == {"/k\u0000": nul}
    await call(client, "record_progress", summary="s", artifacts={"file": nul})
    assert (await call(client, "restore_state"))["recent_progress"][0]["artifacts"] == {"file": nul}
    done = await call(
        client,
        "update_task",
        task_key="held",
        action="complete",
        lease_token=lease,
        verification="ok",
        result={"r": nul},
    )
    assert done["status"] == "done" and saved["version"] == 1
    assert (await call(client, "list_tasks", task_key="held"))["tasks"][0]["result"] == {"r": nul}


async def test_an_unknown_argument_of_a_tool_without_arguments_says_it_takes_none(sqlite_url, workspace):
    from dataclasses import replace

    from mcp import Client
    from support import settings_for

    from mcp_harness.arguments import ToolArgs
    from mcp_harness.identity import Identity
    from mcp_harness.mcp.server import create_server

    class NoArgs(ToolArgs):
        tool = "list_tasks"

    server = create_server(settings_for(sqlite_url), Identity(workspace=workspace, agent="a"))
    server.tools["list_tasks"] = replace(server.tools["list_tasks"], args=NoArgs)
    async with Client(server, raise_exceptions=False) as client:
        err = await fail(client, "list_tasks", x=1)
    assert err.text == "[invalid_argument] unknown argument 'x' for list_tasks; it takes no arguments"

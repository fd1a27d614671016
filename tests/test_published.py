"""What clients see of the server before calling anything: tools/list (input and output schemas,
descriptions, hints), resource templates, resources and prompts, pinned byte for byte.

A change here changes every agent's context: make it on purpose. To accept one, run
`MCP_HARNESS_UPDATE_PINS=1 python -m pytest tests/test_published.py` and review the diff of
tests/data/published.json.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support import mcp_client

pytestmark = pytest.mark.anyio

PINNED = Path(__file__).parent / "data" / "published.json"


async def test_published_listings_are_pinned(sqlite_url, workspace):
    async with mcp_client(sqlite_url, workspace) as client:
        listings = {
            "tools": (await client.list_tools()).tools,
            "resources": (await client.list_resources()).resources,
            "resource_templates": (await client.list_resource_templates()).resource_templates,
            "prompts": (await client.list_prompts()).prompts,
        }
    published = {
        kind: [item.model_dump(mode="json", by_alias=True, exclude_none=True) for item in items]
        for kind, items in listings.items()
    }
    text = json.dumps(published, indent=1, ensure_ascii=False) + "\n"  # key order is pinned too
    if os.environ.get("MCP_HARNESS_UPDATE_PINS"):
        PINNED.write_text(text)
    assert text == PINNED.read_text(), "the published listings changed; see this module's docstring"


#: What a model reads of the tools must stay under this (CONTRACT.md, revision 3: 7,500 before the
#: `message` tool, 8,500 with it; issue 28's path reservations and messages share the difference).
MODEL_VISIBLE_LIMIT = 8_500
#: Arguments whose meaning is not plain from their name and type: each carries a one-line description.
DESCRIBED = {
    "save_checkpoint": {"mode", "expected_version", "fork_from", "idempotency_key"},
    "restore_state": {"paths", "progress_limit", "query"},
    "record_progress": {"thread", "task_key", "idempotency_key"},
    "add_tasks": {"idempotency_key"},
    "claim_task": {"lease_seconds", "tags", "task_key", "wait_seconds", "idempotency_key"},
    "update_task": {"lease_token", "lease_seconds", "result", "verification", "error", "retry", "reason"}
    | {"idempotency_key", "paths", "shared"},
    "list_tasks": {"status", "ready", "cursor", "query", "task_key"},
    "message": {"to", "body", "subject", "task_key", "reply_to", "unread_only", "ids", "idempotency_key"},
}


def model_visible(tools: list) -> bytes:
    """Each tool's name, description, input schema and annotations, all tools together, as compact JSON."""
    seen = [
        {
            k: v
            for k, v in t.model_dump(mode="json", by_alias=True, exclude_none=True).items()
            if k in ("name", "description", "inputSchema", "annotations")
        }
        for t in tools
    ]
    return json.dumps(seen, separators=(",", ":"), ensure_ascii=False).encode()


async def test_what_a_model_reads_of_the_tools_fits_its_budget(sqlite_url, workspace):
    async with mcp_client(sqlite_url, workspace) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    size = len(model_visible(list(tools.values())))
    print(f"tools/list, model-visible: {size} bytes")  # shown with -s; the README quotes it
    for name, tool in tools.items():  # where the bytes go, for a contributor looking for some (CONTRIBUTING)
        print(f"  {name}: {len(model_visible([tool])) - 2} bytes")
    assert size < MODEL_VISIBLE_LIMIT, f"{size} bytes"
    for name, wanted in DESCRIBED.items():
        props = tools[name].input_schema["properties"]
        missing = sorted(arg for arg in wanted if "description" not in props[arg])
        assert not missing, f"{name}: no description on {missing}"
        long = [arg for arg, p in props.items() if len(p.get("description", "")) > 100]
        assert not long, f"{name}: descriptions over one short line on {long}"
    assert tools["update_task"].input_schema["properties"]["result"] != {}  # says it takes any JSON
    # a fork with mode replace keeps only the given state (a model passing {} got {}): say so
    fork = tools["save_checkpoint"].input_schema["properties"]["fork_from"]["description"]
    assert "merge patches a copy of its state" in fork and "replace starts from `state`" in fork
    assert "{pointer: value}" in tools["restore_state"].input_schema["properties"]["paths"]["description"]
    assert tools["add_tasks"].input_schema["$defs"]["TaskSpec"]["properties"]["steps"]["description"]


def resolve(schema: dict, node: dict) -> dict:
    """`node` with its `$ref` (or the non-null option of an anyOf) followed, inside `schema`."""
    options = [o for o in node.get("anyOf", []) if o.get("type") != "null"]
    node = options[0] if options else node
    ref = node.get("$ref")
    return schema["$defs"][ref.rsplit("/", 1)[-1]] if ref else node


async def test_output_schemas_describe_nested_results(sqlite_url, workspace):
    async with mcp_client(sqlite_url, workspace) as client:
        out = {t.name: t.output_schema for t in (await client.list_tools()).tools}
    claim = out["claim_task"]
    lease = resolve(claim, claim["properties"]["lease"])["properties"]
    assert lease["token"]["type"] == "string" and lease["expires_in_seconds"]["type"] == "integer"  # whole seconds
    assert "pending" in resolve(claim, claim["properties"]["task"])["properties"]["status"]["enum"]
    assert set(resolve(claim, claim["properties"]["waiting_on"]["items"])["properties"]) >= {"key", "retry_after"}
    rows = out["list_tasks"]
    row = resolve(rows, rows["properties"]["tasks"]["items"])["properties"]
    assert row["ready"]["type"] == "boolean" and row["depends_on"]["items"] == {"type": "string"}
    update = out["update_task"]
    assert (
        "heartbeat: {lease} only" in update["description"]
        and "token" in resolve(update, update["properties"]["lease"])["properties"]
    )
    assert update["properties"]["unblocked"]["items"] == {"type": "string"}
    brief = out["restore_state"]
    entry = resolve(brief, brief["properties"]["recent_progress"]["items"])["properties"]
    assert {"thread", "task_key", "summary"} <= set(entry)
    held = resolve(brief, brief["properties"]["my_tasks"]["items"])["properties"]
    assert "token" in resolve(brief, held["lease"])["properties"]

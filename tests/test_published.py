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
from conftest import mcp_client

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

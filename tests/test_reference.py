"""The generated reference pages (docs/reference/schemas.md and commands.md) are what the code publishes
now: a tool's arguments or a command's options cannot change without the docs showing it in review."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def generator():
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "tools" / "gen_reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_tool_schemas_page_is_what_the_server_publishes():
    gen = generator()
    assert gen.SCHEMAS.read_text() == gen.schemas_page(), "run .venv/bin/python tools/gen_reference.py"


def test_the_commands_page_is_what_the_parser_defines(monkeypatch):
    monkeypatch.setenv("MCP_HARNESS_PORT", "9999")  # the page shows a fresh shell's defaults whatever is set
    gen = generator()
    page = gen.commands_page()
    assert gen.COMMANDS.read_text() == page, "run .venv/bin/python tools/gen_reference.py"
    assert "`8765`" in page and "9999" not in page


def test_every_tool_and_command_is_on_its_page():
    from mcp_harness.cli.parser import build_parser
    from mcp_harness.mcp.tools import TOOLS

    schemas = (ROOT / "docs" / "reference" / "schemas.md").read_text()
    assert all(f"## `{tool.name}`" in schemas for tool in TOOLS)
    commands = (ROOT / "docs" / "reference" / "commands.md").read_text()
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert all(f"## `{name}`" in commands for name in sub.choices)


def test_every_setting_the_code_reads_is_documented():
    """Each `MCP_HARNESS_*` variable the package names or reads (directly, or through the settings'
    helpers by its suffix) is in docs/reference/settings.md under its full name."""
    import re

    code = "\n".join(p.read_text() for p in (ROOT / "mcp_harness").rglob("*.py"))
    names = set(re.findall(r"MCP_HARNESS_([A-Z_]+)", code))
    for helper in (r"_env_int", r"_env_float", r"_positive", r"\benv", r"ENV_PREFIX \+"):
        names |= set(re.findall(helper + r'\(?\s*"([A-Z_]+)"', code))
    assert len(names) > 20, "the extraction broke"
    page = (ROOT / "docs" / "reference" / "settings.md").read_text()
    assert sorted(n for n in names if f"`MCP_HARNESS_{n}`" not in page) == []

"""The formatter formats everything: no line or block of the project's Python opts out of it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_no_code_opts_out_of_the_formatter():
    files = [p for part in ("mcp_harness", "tests", "tools", "examples") for p in (ROOT / part).rglob("*.py")]
    assert len(files) > 100, "the file list broke"
    marker = re.compile(r"#\s*fmt:\s*(skip|off)\b")
    found = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in files
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if marker.search(line) and p.name != "test_style.py"
    ]
    assert found == [], f"let ruff format these (make an aligned table data instead): {found[:10]}"

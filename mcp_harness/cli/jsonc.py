"""JSON with comments and trailing commas (JSONC), as VS Code reads its `.vscode/mcp.json`.

`init` never rewrites such a file (its comments would be lost); it reads it to see what is there."""

from __future__ import annotations

import json
import re
from typing import Any

#: a string (kept), a // or /* */ comment (dropped), or a comma before a closing bracket (dropped)
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|//[^\n]*|/\*.*?\*/|,(?=\s*(?://[^\n]*\s*|/\*.*?\*/\s*)*[}\]])', re.DOTALL)


def strip(text: str) -> str:
    """`text` without comments and trailing commas (strings are left as they are)."""
    return _TOKEN.sub(lambda m: m.group(0) if m.group(0).startswith('"') else "", text)


def is_plain_json(text: str) -> bool:
    """Whether `text` parses as JSON as it is (no comments, no trailing commas)."""
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return False
    return True


def loads(text: str) -> Any:
    """Parse JSONC; raises `json.JSONDecodeError` when it is not JSON even without its comments."""
    return json.loads(strip(text))

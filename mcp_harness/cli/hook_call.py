"""What a lifecycle hook call carries (the event, where the database is, who the session is, the
client's JSON), how it answers, and the mark of what each session has been told (`hook.py`)."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_AGENT = "claude-code"


class HookError(Exception):
    """What went wrong, in one line for stderr."""


@dataclass
class HookCall:
    event: str
    db: str | None = None
    workspace: str = "default"
    agent: str = DEFAULT_AGENT  #: the session's identity once `resolve` ran
    no_session: bool = False
    url: str | None = None
    token_env: str = "MCP_HARNESS_TOKEN"
    data: dict[str, Any] = field(default_factory=dict)  #: the client's JSON


#: what may not reach the model inside agent-written text: whitespace of every kind (line and paragraph
#: separators too), control characters, and the invisible format characters that reorder or hide text
_BREAKS = re.compile(r"[\s\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]+")


def one_line(text: object, limit: int | None = None, more: str = "…") -> str:
    """Agent-written text as the hooks print it: on one line (every run of whitespace or control
    characters one space), so nothing an agent wrote can start a line of its own and pose as the
    harness's; cut to `limit` characters, `more` marking the cut."""
    flat = _BREAKS.sub(" ", str(text)).strip()
    if limit is not None and len(flat) > limit:
        flat = flat[: max(limit - len(more), 0)] + more
    return flat


def answer(event: str, text: str) -> str:
    """What a SessionStart or UserPromptSubmit hook prints: the text for the model's context, as ASCII JSON
    (agents' text may hold control characters; a person running the hook by hand sees them escaped)."""
    return json.dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}})


# -- what this session has seen (a mark per session: the newest task event it was told about) ---------


def mark_path(call: HookCall, kind: str = "") -> Path:
    """The mark file of a session (`kind` "messages": the newest message it was told of)."""
    from mcp_harness.sessions import runtime_dir

    key = hashlib.sha256(f"{call.db or ''}\n{call.workspace}\n{call.agent}".encode()).hexdigest()[:24]
    return runtime_dir() / "marks" / (f"{key}.{kind}" if kind else key)


def read_mark(call: HookCall, kind: str = "") -> int | None:
    from mcp_harness.sessions import read_private

    try:
        return int(read_private(mark_path(call, kind)) or "")
    except ValueError:
        return None


def write_mark(call: HookCall, seen: int, kind: str = "") -> None:
    """Keep what the session was told (as session records are kept: `sessions.write_private`, in a
    folder of this user's own only). Without a mark the next turn starts from the newest event again:
    quiet, not wrong."""
    from mcp_harness.sessions import write_private

    write_private(mark_path(call, kind), str(seen))


def start_mark(call: HookCall) -> None:
    """A session starts (or its context restarts) from the newest event: what came before is in the brief."""
    from mcp_harness import quick_read

    if call.url is None:
        write_mark(call, quick_read.read(call.db, call.workspace, call.agent, None)[1])
        # the brief lists the unread messages: the per-prompt hook tells of those that come after
        write_mark(call, quick_read.read_messages(call.db, call.workspace, call.agent, None)[1], "messages")

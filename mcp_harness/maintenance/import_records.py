"""How the lines of an export are read (UTF-8, JSON without NaN or lone surrogates, nesting the parser
survives) and what each column of each record type must hold: the same names, enums, types and text
limits as the tools that write such rows. `import_check` uses both."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any, get_args

from mcp_harness.config import LABEL_CHARS, LEASE_SECONDS, MAX_INT, MESSAGE_BODY_BYTES, NAME_RE, TAG_CHARS, Limits
from mcp_harness.errors import InvalidArgument
from mcp_harness.models import PROGRESS_STATUSES, SessionOutcome
from mcp_harness.tasks.events import KINDS as EVENT_KINDS
from mcp_harness.tasks.rules import Status

#: text the harness itself writes around a person's text (a reopen's summary, a rejected gate's last_error,
#: and a reopen's last_error in older exports) may exceed the text limit by this much; an agent's own
#: summary may not (`import_check`)
HARNESS_TEXT = 256

Check = tuple[Callable[[Any], bool], str]


def name() -> Check:
    return (
        lambda v: isinstance(v, str) and NAME_RE.fullmatch(v) is not None,
        "a name (1-128 characters from A-Z a-z 0-9 . _ : / -, starting with a letter or digit)",
    )


def addressee() -> Check:
    """A message's `to`: an agent's name (`operators` is one), or `*`."""
    is_name = name()[0]
    return (lambda v: v == "*" or is_name(v), "an agent's name, * or operators")


def integer(low: int, high: int = MAX_INT) -> Check:
    return lambda v: type(v) is int and low <= v <= high, f"a whole number from {low} to {high}"


def text(high: int, low: int = 0) -> Check:
    return lambda v: isinstance(v, str) and low <= len(v) <= high, f"a string of {low} to {high} characters"


def optional(check: Check) -> Check:
    return lambda v: v is None or check[0](v), f"{check[1]}, or null"


def one_of(*values: str) -> Check:
    return lambda v: isinstance(v, str) and v in values, "one of " + ", ".join(values)


ANY: Check = (lambda _v: True, "")  # checked with the tool's own model (tasks: TaskSpec)
STRING: Check = (lambda v: isinstance(v, str), "a string")
COST: Check = (lambda v: type(v) in (int, float) and math.isfinite(v) and v >= 0, "a cost (dollars, 0 or more)")
#: the outcome words a session record may hold
OUTCOMES = get_args(SessionOutcome)
TIME: Check = (lambda v: type(v) in (int, float) and math.isfinite(v), "a time (seconds, a number)")
FLAG: Check = (lambda v: type(v) is bool, "true or false")
HASH: Check = (lambda v: isinstance(v, str) and re.fullmatch(r"[0-9a-f]{32}", v) is not None, "a value hash")


def fields(limits: Limits) -> dict[str, dict[str, Check]]:
    """The columns of each record type and what each must hold."""
    ws, text_limit = name(), limits.max_text_chars
    return {
        "workspace": {"name": ws, "progress_seq": integer(0), "created_at": TIME},
        "thread": {
            "workspace": ws,
            "name": name(),
            "latest_version": integer(0),
            "latest_id": optional(name()),
            "updated_at": TIME,
        },
        "blob": {"workspace": ws, "hash": HASH, "data": STRING},
        "segment": {"workspace": ws, "id": integer(1), "prev": optional(integer(1)), "data": STRING},
        "checkpoint": {
            "id": name(),
            "workspace": ws,
            "thread": name(),
            "version": integer(1),
            "parent_id": optional(name()),
            "label": optional(text(LABEL_CHARS)),
            "metadata_json": optional(STRING),
            "manifest": STRING,
            "size_bytes": integer(0),
            "agent": name(),
            "schema_version": optional(integer(1)),
            "created_at": TIME,
        },
        "progress": {
            "entry_id": name(),
            "workspace": ws,
            "seq": integer(1),
            "thread": name(),
            "agent": name(),
            "status": one_of(*PROGRESS_STATUSES),
            "summary": text(text_limit + HARNESS_TEXT, 1),
            "details": optional(text(text_limit)),
            "next_steps": optional(STRING),
            "task_key": optional(name()),
            "artifacts": optional(STRING),
            "created_at": TIME,
        },
        "task": {
            "workspace": ws,
            "key": ANY,
            "title": ANY,
            "description": ANY,
            "steps": STRING,
            "priority": ANY,
            "depends_on": STRING,
            "tags": STRING,
            "max_attempts": ANY,
            "dependents": integer(0),
            "content_hash": text(64, 1),
            "status": one_of(*Status),
            "ready": FLAG,
            "blocked": FLAG,
            "owner": optional(name()),
            "lease_token": optional(text(200, 1)),
            "lease_expires_at": optional(TIME),
            "lease_seconds": optional(integer(*LEASE_SECONDS)),
            "attempts": integer(0),
            "available_at": TIME,
            "last_error": optional(text(text_limit + HARNESS_TEXT)),
            "result": optional(STRING),
            "verification": optional(text(text_limit)),
            "created_at": TIME,
            "updated_at": TIME,
            "completed_at": optional(TIME),
            "review": FLAG,
            "kind": one_of("work", "gate"),
            "review_comment": optional(text(text_limit)),
            "paths": optional(STRING),
            "added_by": optional(name()),
        },
        "task_dep": {"workspace": ws, "task_key": name(), "dep_key": name()},
        "task_tag": {"workspace": ws, "tag": text(TAG_CHARS, 1), "task_key": name()},
        "task_event": {
            "workspace": ws,
            "task_key": name(),
            "kind": one_of(*EVENT_KINDS),
            "actor": name(),
            "attempt": integer(0),
            "detail": optional(STRING),
            "created_at": TIME,
        },
        "state_schema": {
            "workspace": ws,
            "thread": name(),
            "version": integer(1),
            "document": STRING,
            "created_at": TIME,
        },
        "message": {
            "message_id": name(),
            "workspace": ws,
            "sender": name(),
            "recipient": addressee(),
            "subject": optional(text(LABEL_CHARS)),
            "body": text(MESSAGE_BODY_BYTES, 1),
            "task_key": optional(name()),
            "reply_to": optional(name()),
            "created_at": TIME,
            "acked_at": optional(TIME),
            "acked_by": optional(name()),
        },
        "message_ack": {"workspace": ws, "message_id": name(), "agent": name(), "acked_at": TIME},
        "runner": {
            "id": name(),
            "workspace": ws,
            "host": text(255, 1),
            "pid": integer(0),
            "started_at": TIME,
            "seen_at": TIME,
            "ended_at": optional(TIME),
            "waiting": optional(text(text_limit)),
        },
        "agent_session": {
            "id": name(),
            "workspace": ws,
            "runner": name(),
            "slot": integer(1),
            "agent": name(),
            "task_key": optional(name()),
            "kind": one_of("work", "initializer"),
            "started_at": TIME,
            "seen_at": TIME,
            "ended_at": optional(TIME),
            "outcome": optional(one_of(*OUTCOMES)),
            "exit_code": optional(integer(-255, 255)),
            "turns": optional(integer(0)),
            "cost_usd": optional(COST),
            "last_tool": optional(text(200)),
            "last_words": optional(text(1000)),
            "transcript": optional(text(4096)),
            "stop_requested_at": optional(TIME),
            "stop_requested_by": optional(name()),
        },
    }


#: columns added after the first export format, and what an export made before them means
LATER_FIELDS: dict[str, dict[str, Any]] = {
    "task": {"review": False, "kind": "work", "review_comment": None, "paths": None, "added_by": None}
}

_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


def _loads(text: str) -> Any:
    """JSON text, refusing NaN and Infinity and strings that are not valid Unicode (lone surrogates):
    no JSON consumer can read them back, and the database cannot store them."""
    value = json.loads(text, parse_constant=_refuse_constant)
    if _ESCAPED_SURROGATE.search(text):  # only an escape can make a surrogate: check the rare text with one
        try:
            json.dumps(value, ensure_ascii=False).encode()
        except UnicodeEncodeError:
            raise ValueError("a string is not valid Unicode (a lone surrogate)") from None
    return value


def _refuse_constant(constant: str) -> None:
    raise ValueError(f"{constant} is not allowed")


def parse_json(text: str, what: str) -> Any:
    """A JSON column's value (nesting deep enough to exhaust the parser is refused; the depth limit is
    checked on what it returns)."""
    try:
        return _loads(text)
    except RecursionError:
        raise InvalidArgument(f"{what} is nested too deeply") from None
    except ValueError as exc:
        raise InvalidArgument(f"{what} is not valid JSON ({getattr(exc, 'msg', exc)})") from None


def parse_line(number: int, raw: str | bytes) -> dict[str, Any] | None:
    """The record on line `number` of an export (None for a blank line)."""
    try:
        raw = raw.decode("utf-8") if isinstance(raw, bytes) else raw.encode("utf-8").decode("utf-8")
    except UnicodeError:  # bytes that are not UTF-8, or text with a lone surrogate
        raise InvalidArgument(f"line {number} is not valid UTF-8") from None
    if not raw.strip():
        return None
    try:
        record = _loads(raw)
    except RecursionError:
        raise InvalidArgument(f"line {number} is nested too deeply") from None
    except ValueError as exc:
        raise InvalidArgument(f"line {number} is not JSON: {getattr(exc, 'msg', exc)}") from None
    if not isinstance(record, dict):
        raise InvalidArgument(f"line {number} is not a JSON object")
    return record

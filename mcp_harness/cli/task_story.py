"""`mcp-harness tasks show KEY`: one task's whole story (the task, its lease, its events and the
progress entries about it), for a person or as JSON."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from mcp_harness import clock
from mcp_harness.cli.output import clean, say
from mcp_harness.cli.tables import time_left
from mcp_harness.models import EVERY_FIELD
from mcp_harness.service import Harness, Identity


async def show_task(h: Harness, ident: Identity, key: str, *, as_json: bool) -> int:
    """`tasks show KEY`: the task, its lease, its events and the progress entries about it."""
    story = await h.tasks.story(ident, key)
    if as_json:
        out = story.model_dump(mode="json", context=EVERY_FIELD, exclude={"task": {"lease": {"token"}}})
        print(json.dumps(out, indent=2))
        return 0
    t = story.task
    say(f"{t.key}: {clean(t.title, multiline=False)}")
    say(f"  status {t.status}, attempts {t.attempts}/{t.max_attempts}, owner {t.owner or '-'}")
    if t.lease:
        shown_at = datetime.fromtimestamp(clock.now(), UTC)
        why = await h.lease_end_reason(ident, t)  # its holder's connection or session ended it: `status`'s ENDED
        left = time_left(t.lease.expires_at, at=shown_at, ended=why is not None)
        said = f" ({clean(why, multiline=False)}; the next claim takes the task)" if why else ""
        say(f"  lease: attempt {t.lease.attempt}, {left}{said}")
    if t.kind == "gate" or t.review:
        say("  a gate: a person approves or rejects it" if t.kind == "gate" else "  review: a person approves it")
    for name in (
        "depends_on",
        "paths",
        "held_paths",
        "shared_paths",
        "last_error",
        "verification",
        "result",
        "review_comment",
    ):
        if getattr(t, name) not in (None, []):
            say(f"  {name}: {json.dumps(getattr(t, name), ensure_ascii=False)}")
    say("events:" if story.events else "events: none")
    for e in story.events:
        if t.kind == "gate" and e.kind == "submit":  # nobody submitted it: its last dependency was done
            after = f": the last, {e.detail['after']}, by {e.actor}" if e.detail and e.detail.get("after") else ""
            at = e.created_at[:19].replace("T", " ")
            say(f"  {at} entered review by itself (its dependencies were done{after})")
            continue
        detail = f" {json.dumps(_with_units(e.detail), ensure_ascii=False)}" if e.detail else ""
        say(f"  {e.created_at[:19].replace('T', ' ')} {e.kind} by {e.actor} (attempt {e.attempt}){detail}")
    say("progress:" if story.progress else "progress: none")
    for p in story.progress:
        summary = clean(p.summary, multiline=False)
        say(f"  #{p.seq} {p.created_at[:19].replace('T', ' ')} {p.agent} {p.status.upper()}: {summary}")
    if story.messages:
        say("messages:")
    for m in story.messages:
        state = "read" if m.read else "unread"
        say(f"  {m.at[:19].replace('T', ' ')} {m.from_} -> {m.to} ({state}, {m.id}): {clean(m.body, multiline=False)}")
    return 0


def _with_units(detail: dict) -> dict:
    """An event's detail for a person: a delay in seconds says so (`retry_in: 5.0` reads as "5s")."""
    return {k: f"{v:g}s" if k == "retry_in" and isinstance(v, int | float) else v for k, v in detail.items()}

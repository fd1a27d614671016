"""The lifecycle hooks that may take their time (they run once per session, or at a compaction):
the SessionStart brief, and the notes and lease endings of PreCompact, SessionEnd and StopFailure.
They use the service like every other command (see `hook.py` for the per-prompt one, which must not)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp_harness.cli.hook_call import HookCall, one_line, start_mark
from mcp_harness.identity import leases_kept
from mcp_harness.tasks.rules import Status

if TYPE_CHECKING:
    from mcp_harness.models import ProgressStatus
    from mcp_harness.service import Harness, Identity

NOTES = 5  #: notes about a held task restored after a compaction


def handle(call: HookCall) -> str | None:
    """Run `call`'s event; the text for the model's context (SessionStart only), or None."""
    if call.event == "SessionStart":
        return session_start(call)
    if call.url is not None:
        _remote_note(call)
        return None
    from mcp_harness.config import missing_db_file

    if missing_db_file(call.db) is not None:
        return None  # no database yet: nothing is held, nothing to note
    bodies = {"PreCompact": _pre_compact, "SessionEnd": _session_end, "StopFailure": _stop_failure}
    return _run(call, bodies[call.event])


def _run(call: HookCall, body: Any) -> Any:
    import anyio

    from mcp_harness.config import Settings
    from mcp_harness.service import Harness, Identity

    ident = Identity(workspace=call.workspace, agent=call.agent)

    async def go() -> Any:
        async with Harness.open(Settings.from_env(call.db)) as harness:
            return await body(harness, ident, call)

    return anyio.run(go)


def who(call: HookCall) -> str:
    if call.url is not None:
        return f"mcp-harness: this session acts as the agent of the token in {call.token_env} on {call.url}."
    return (
        f"mcp-harness: this session is agent {call.agent} in workspace {call.workspace}: the leases it "
        "takes are its own; other sessions are other agents."
    )


def session_start(call: HookCall) -> str:
    """The resume brief, with the session's identity first; after a compaction, what was just lost."""
    from mcp_harness.cli.brief import _empty, fetch_remote, render
    from mcp_harness.config import missing_db_file

    source = call.data.get("source")
    if call.url is not None:
        restored, rows = fetch_remote(call.url, call.token_env, "main")
        return who(call) + "\n" + render(restored, rows, where=f"shared server {call.url}", thread="main")
    if (missing := missing_db_file(call.db)) is not None:
        return who(call) + "\n" + _empty(f"workspace {call.workspace}", f"no database exists at {missing} yet")
    text = _run(call, _brief)
    start_mark(call)
    if source == "compact":
        text = "Your context was just compacted: this restores what you were doing.\n" + text
    return who(call) + "\n" + text


async def _brief(harness: Harness, ident: Identity, call: HookCall) -> str:
    from mcp_harness.arguments import RestoreStateArgs
    from mcp_harness.cli.brief import other_workspaces, render, waiting_rows

    restored = await harness.restore(ident, RestoreStateArgs(thread="main"))
    rows = await waiting_rows(harness, ident)
    others = await other_workspaces(harness, ident)
    text = render(
        restored.model_dump(mode="json"),
        rows,
        where=f"workspace {ident.workspace}",
        thread="main",
        agent=ident.agent,
        others=others,
    )
    if call.data.get("source") != "compact":
        return text
    lost = []
    for held in restored.my_tasks:
        lost.append(f'Task you hold: {held.key} "{one_line(held.title, 200)}"')
        if held.description:
            lost.append(f"  description: {one_line(held.description, 600)}")
        lost += [f"  step: {one_line(step, 200)}" for step in held.steps[:10]]
        for note in await harness.progress.recent(ident, task_key=held.key, limit=NOTES):
            lost.append(f"  note #{note.seq} by {note.agent}: {one_line(note.summary, 300)}")
    return "\n".join([*lost, text])


async def _held(harness: Harness, ident: Identity) -> list[str]:
    from mcp_harness.arguments import RestoreStateArgs

    restored = await harness.restore(ident, RestoreStateArgs(thread="main", progress_limit=1))
    return [t.key for t in restored.my_tasks if t.status == Status.CLAIMED.value]


async def _note(
    harness: Harness, ident: Identity, summary: str, key: str | None, status: ProgressStatus = "note"
) -> None:
    from mcp_harness.arguments import RecordProgressArgs
    from mcp_harness.service import Identity as Who
    from mcp_harness.tasks.events import HARNESS

    await harness.progress.record(
        Who(ident.workspace, HARNESS, own=True), RecordProgressArgs(summary=summary, task_key=key, status=status)
    )


async def _pre_compact(harness: Harness, ident: Identity, call: HookCall) -> None:
    trigger = call.data.get("trigger") if call.data.get("trigger") in ("manual", "auto") else "auto"
    for key in await _held(harness, ident):
        await _note(
            harness, ident, f"the context of {ident.agent} was compacted ({trigger}) while it held task {key}", key
        )


async def _session_end(harness: Harness, ident: Identity, call: HookCall) -> None:
    reason = _word(call.data.get("reason"), "other")
    if reason == "clear":
        return  # /clear: the session's server goes on (and keeps its identity): its leases stay
    if leases_kept():
        return  # its leases outlive it (a runner's session: the runner ends them, saying how it went)
    await harness.tasks.end_leases(ident, f"its session ended ({reason})")


async def _stop_failure(harness: Harness, ident: Identity, call: HookCall) -> None:
    error = _word(call.data.get("error"), "an API error")
    held = await _held(harness, ident)
    if leases_kept():  # a runner's session: the runner settles its task and says how the session went
        summary = f"the session of {ident.agent} stopped on {error}"
    else:
        summary = f"the session of {ident.agent} stopped on {error}; it may go on: its leases stay"
    if len(held) == 1:
        await _note(harness, ident, summary + f" (it holds task {held[0]})", held[0])
    else:
        await _note(harness, ident, summary + (f" (it holds {', '.join(held)})" if held else ""), None)


def _word(value: Any, default: str) -> str:
    return one_line(value, 100) if isinstance(value, str) and value.strip() else default


def _remote_note(call: HookCall) -> None:
    """Over HTTP the token is the identity and its leases end by time: a hook only writes a note."""
    import anyio

    what = {
        "PreCompact": "its context was compacted",
        "SessionEnd": f"its session ended ({_word(call.data.get('reason'), 'other')})",
        "StopFailure": f"it stopped on {_word(call.data.get('error'), 'an API error')}; it may go on",
    }[call.event]
    if call.event == "SessionEnd" and _word(call.data.get("reason"), "") == "clear":
        return None
    from mcp_harness.cli.brief import remote_call

    assert call.url is not None  # the caller checked it
    anyio.run(remote_call, call.url, call.token_env, "record_progress", {"summary": f"hook: {what}"})
    return None

"""`mcp-harness brief`: the resume brief as plain text (under 4 KB) for a person or a session-start hook.

From this machine's database, or from a shared HTTP server (`--url`, with the bearer token read from
the environment variable `--token-env`) through the official MCP client. Either way it is what
`restore_state` answers (the latest state, the newest progress of every thread, the tasks this agent
holds, the task counts) plus the first tasks waiting to be claimed (those whose paths another agent's
live lease holds last, marked: their claim would answer `paths_reserved`), rendered for a model's context.
"""

from __future__ import annotations

import argparse
import json
import os
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from mcp_harness.cli.common import db_setting, env, with_harness
from mcp_harness.cli.hook_call import one_line
from mcp_harness.cli.output import say
from mcp_harness.config import missing_db_file
from mcp_harness.errors import HarnessError, InvalidArgument, Unavailable
from mcp_harness.tasks.rules import Status

if TYPE_CHECKING:
    from mcp_harness.service import Harness, Identity

LIMIT = 4000  #: bytes of text, at most
STATE_BYTES = 1500  #: of the state's compact JSON, before it is cut
WAITING = 5  #: pending tasks named


def cmd_brief(args: argparse.Namespace) -> int:
    from mcp_harness.arguments import RestoreStateArgs

    if args.url:
        restored, rows = fetch_remote(args.url, args.token_env, args.thread)
        say(render(restored, rows, where=f"shared server {args.url}", thread=args.thread))
        return 0
    from mcp_harness.cli.common import session_caller
    from mcp_harness.service import Identity

    workspace = args.workspace or env("WORKSPACE", "default")
    # as `msg`: run in an agent's session, that session's agent (whose held tasks the brief shows)
    ident = Identity(workspace=workspace, agent=args.agent or session_caller(workspace) or "default")
    missing = missing_db_file(db_setting(args))
    if missing is not None:  # a hook's brief must not create a database where none was meant to be
        print(
            _empty(
                f"workspace {ident.workspace}", f"no database exists at {missing} (a server creates it on first use)"
            )
        )
        return 0

    async def run(h: Harness) -> int:
        restored = await h.restore(ident, RestoreStateArgs(thread=args.thread))
        rows = await waiting_rows(h, ident)
        others = await other_workspaces(h, ident)
        text = render(
            restored.model_dump(mode="json"),
            rows,
            where=f"workspace {ident.workspace}",
            thread=args.thread,
            agent=ident.agent,
            others=others,
        )
        say(text)
        return 0

    return with_harness(args, run)


async def other_workspaces(h: Harness, ident: Identity) -> str | None:
    """'workspace X has no data; this database holds: a, b' when X is empty and others are not."""
    names = await h.workspaces()
    if ident.workspace in names or not names:
        return None
    return (
        f"workspace {ident.workspace!r} has no data; this database holds: {', '.join(names)} "
        "(choose one with --workspace or MCP_HARNESS_WORKSPACE)"
    )


async def waiting_rows(h: Harness, ident: Identity) -> list[dict[str, Any]]:
    """The pending tasks (list_tasks rows), then one row per claimed task past its lease's time (a claim
    takes it as it takes a pending one: `lapsed`, with why its lease ended when its holder's connection
    or session ended it), then one row per live lease with the paths it holds (a claim reserves
    exclusively, so shared ones stop it too: `render` marks a ready task whose paths another agent's
    lease holds)."""
    from mcp_harness.arguments import ListTasksArgs

    listed = await h.tasks.list(ident, ListTasksArgs.model_validate({"status": [Status.PENDING], "limit": 20}))
    claimed, _counts = await h.tasks.board(ident, statuses=[Status.CLAIMED])
    lapsed = [
        {
            "key": t.key,
            "title": t.title,
            "status": Status.CLAIMED.value,
            "ready": False,
            "owner": t.owner,
            "lapsed": True,
            "ended": await h.lease_end_reason(ident, t),
        }
        for t in claimed
        if t.lease is not None and t.lease.expired
    ]
    held = [
        {
            "key": t.key,
            "status": Status.CLAIMED.value,
            "ready": False,
            "owner": t.owner,
            "paths": [*(t.held_paths or []), *(t.shared_paths or [])],
        }
        for t in claimed
        if t.held_paths or t.shared_paths
    ]
    return [r.model_dump(mode="json") for r in listed.tasks] + lapsed + held


def fetch_remote(url: str, token_env: str, thread: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """restore_state and list_tasks from a shared server, as the token's agent: the pending tasks, then
    the claimed ones under a live lease (their declared paths stand for what the lease holds)."""
    token = os.environ.get(token_env)
    if not token:
        raise InvalidArgument(f"environment variable {token_env} is not set: it must hold the bearer token for {url}")
    import anyio

    refused: list[int] = []  # the SDK reports an HTTP error without its status: note it on the way in

    async def ask() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        async def note_status(response: Any) -> None:
            if response.status_code >= 400:
                refused.append(response.status_code)

        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30, event_hooks={"response": [note_status]}) as http,
            Client(streamable_http_client(url, http_client=http), read_timeout_seconds=30) as client,
        ):
            restored = await _call(client, "restore_state", {"thread": thread})
            listed = await _call(client, "list_tasks", {"status": [Status.PENDING], "limit": 20})
            held = await _call(client, "list_tasks", {"status": [Status.CLAIMED], "ready": False, "limit": 50})
        return restored, listed["tasks"] + [r for r in held["tasks"] if r.get("paths")]

    try:
        return anyio.run(ask)
    except HarnessError:
        raise
    except Exception as exc:  # noqa: BLE001 - connection failures arrive as (nested) exception groups
        raise Unavailable(f"cannot get the brief from {url}: {_reason(exc, token_env, refused)}") from None


async def remote_call(url: str, token_env: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One tool call on a shared server as the token's agent (a hook's note over HTTP)."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    token = os.environ.get(token_env)
    if not token:
        raise InvalidArgument(f"environment variable {token_env} is not set: it must hold the bearer token for {url}")
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), read_timeout_seconds=30) as client,
    ):
        return await _call(client, tool, arguments)


async def _call(client: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        text = result.content[0].text if result.content else "an error"
        raise Unavailable(f"the server answered {tool} with {text}")
    return result.structured_content


def _reason(exc: BaseException, token_env: str, statuses: list[int]) -> str:
    """The innermost cause of a connection failure, in one line."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    status = statuses[0] if statuses else None
    if status == 401:
        return f"the token in {token_env} was refused (HTTP 401: missing, mistyped or revoked)"
    if status is not None:
        return f"HTTP {status}"
    return str(exc) or type(exc).__name__


def render(
    restored: dict[str, Any],
    waiting: list[dict[str, Any]],
    *,
    where: str,
    thread: str,
    agent: str | None = None,
    others: str | None = None,
) -> str:
    """The brief as text: a heading, the state, the tasks, the recent progress and what to do first."""
    counts = restored["task_counts"]
    if not restored["found"] and not restored["recent_progress"] and not any(counts.values()):
        if not restored.get("inbox"):
            return _empty(where, others)
    head = f"mcp-harness brief: {where}, thread {thread} ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC)"
    tasks = _tasks(restored, waiting, counts, agent)
    progress = [_entry(e) for e in restored["recent_progress"]]
    first = (
        "First: continue a task you hold (heartbeat it; a task in review waits for a person); otherwise "
        "claim_task ONE task. Verify before complete; record_progress (with task_key) and save_checkpoint "
        "before you stop."
    )
    state = STATE_BYTES
    while True:
        parts = [head, _state(restored, state), *tasks, *_inbox(restored)]
        if progress:
            parts += ["Recent progress (newest first, every thread):", *progress]
        text = "\n".join([*parts, first])
        if len(text.encode()) <= LIMIT:
            return text
        if progress:
            progress.pop()
        elif state > 200:
            state //= 2
        else:
            return text.encode()[: LIMIT - 4].decode(errors="ignore") + " ..."


def _inbox(restored: dict[str, Any]) -> list[str]:
    """The unread messages (the newest few), or nothing."""
    inbox = restored.get("inbox")
    if not inbox:
        return []
    lines = [f"Messages for you ({inbox['unread']} unread; read them with message(action=read), ack their ids):"]
    for m in inbox.get("messages") or []:
        about = f" about task {m['task_key']}" if m.get("task_key") else ""
        lines.append(f"- {m['id']} from {m['from']}{about}: {_cut(m['body'], 200)}")
    return lines


def _empty(where: str, others: str | None) -> str:
    lines = [
        f"mcp-harness brief: {where} has nothing yet (no checkpoint, no progress, no task).",
        "First: plan the work as tasks (the initialize_project prompt, or add_tasks with acceptance steps),",
        "then claim ONE task at a time; record_progress and save_checkpoint before you stop.",
    ]
    return "\n".join(lines + ([f"Note: {others}."] if others else []))


def _state(restored: dict[str, Any], budget: int) -> str:
    meta = restored["checkpoint"]
    if meta is None:
        return "State: no checkpoint on this thread yet."
    label = f', label "{_cut(meta["label"], 200)}"' if meta.get("label") else ""
    text = one_line(json.dumps(restored["state"], ensure_ascii=False, separators=(",", ":")))
    if len(text.encode()) > budget:
        cut = text.encode()[:budget].decode(errors="ignore")
        text = f"{cut} ... ({meta['size_bytes']} bytes in all: restore_state returns it whole, paths= returns parts)"
    behind, since = meta.get("behind"), ""
    if behind:  # the log holds what the state does not
        since = f"; since then {behind['progress']} progress entries and {behind['task_changes']} task changes"
        since += " (where they differ, the log wins)"
    return (
        f"State: v{meta['version']} saved {_when(meta['created_at'])} by {meta['agent']}{label}, "
        f"{meta['size_bytes']} B{since}:\n  {text}"
    )


def _tasks(
    restored: dict[str, Any], waiting: list[dict[str, Any]], counts: dict[str, int], agent: str | None
) -> list[str]:
    lines = ["Tasks: " + ", ".join(f"{n} {name}" for name, n in counts.items())]
    who = f" (agent {agent})" if agent else ""
    me = agent or (restored.get("you") or {}).get("agent")  # its own reservations never stop it
    lapsed = {r["key"]: r for r in waiting if r.get("lapsed")}
    for held in restored["my_tasks"]:
        if held.get("status") == Status.IN_REVIEW:
            lines.append(
                f'Yours, in review: {held["key"]} "{_cut(held["title"], 120)}" (a person decides; do not work on it)'
            )
            continue
        lease = held.get("lease") or {}
        lines.append(
            f'You hold{who}: {held["key"]} "{_cut(held["title"], 120)}", attempt {lease.get("attempt")}, '
            f"lease {_left(lease, lapsed.get(held['key']))}"
        )
    others = [r for r in lapsed.values() if r.get("owner") != me]
    ready = others + [r for r in waiting if r["status"] == Status.PENDING and r.get("ready", True)]
    if ready:
        title = "Ready to claim" if waiting and "ready" in waiting[0] else "Pending (in creation order)"
        held = [
            (r.get("owner") or "?", r["paths"])
            for r in waiting
            if r["status"] == Status.CLAIMED and r.get("paths") and r.get("owner") != me
        ]
        holder = {r["key"]: _holder(r, held) for r in ready}
        ready.sort(key=lambda r: holder[r["key"]] is not None)  # what a claim can take first (a stable sort)
        names = "; ".join(
            f'{r["key"]} "{_cut(r["title"], 80)}"{_after(r)}{_lapsed(r)}'
            + (f" (paths held by {holder[r['key']]})" if holder[r["key"]] else "")
            for r in ready[:WAITING]
        )
        more = f" (+{len(ready) - WAITING} more)" if len(ready) > WAITING else ""
        lines.append(f"{title}: {names}{more}")
    return lines


def _holder(row: dict[str, Any], held: list[tuple[str, list[str]]]) -> str | None:
    """Who holds paths that `row`'s overlap (its claim would answer `paths_reserved`), if anyone."""
    from mcp_harness.tasks.patterns import clashes

    mine = row.get("paths") or []
    return next((owner for owner, theirs in held if mine and clashes(mine, theirs)), None)


def _after(row: dict[str, Any]) -> str:
    """For a pending row without `ready`: the tasks it waits for (it may not be claimable yet)."""
    deps = row.get("depends_on") or []
    return f" (after {', '.join(deps)})" if deps and "ready" not in row else ""


def _entry(e: dict[str, Any]) -> str:
    task = f" [{e['task_key']}]" if e.get("task_key") else ""
    thread = e.get("thread", "main")  # results leave the default thread out
    status = e.get("status", "note")  # and the default status
    line = f"  #{e['seq']} {_when(e['created_at'])} {e['agent']} {status.upper()}{task} ({thread}): "
    line += _cut(e["summary"], 300)
    for step in (e.get("next_steps") or [])[:3]:
        line += f"\n     next: {_cut(step, 150)}"
    return line


def _lapsed(row: dict[str, Any]) -> str:
    """For another agent's task past its lease: what happened to the lease (a claim takes the task)."""
    if not row.get("lapsed"):
        return ""
    how = f"ended: {_cut(row['ended'], 80)}" if row.get("ended") else "ran out"
    return f" (the lease of {row.get('owner') or '?'} {how}; claimable)"


def _left(lease: dict[str, Any], lapsed: dict[str, Any] | None = None) -> str:
    """What is left of a lease the session holds; once past its time, what happened to it and what the
    session may do (`lapsed`: its row from `waiting_rows`, saying whether a session's end ended it)."""
    seconds = lease.get("expires_in_seconds")
    if seconds is None and lease.get("expires_at"):
        expires = datetime.fromisoformat(lease["expires_at"])
        seconds = (expires - datetime.now(UTC)).total_seconds()
    if seconds is None:
        return "unknown"
    if seconds >= 0:
        return f"{int(seconds)} s left"
    ago = int(-seconds)
    if lapsed is not None and lapsed.get("ended"):
        how = f"ended {ago} s ago ({_cut(lapsed['ended'], 80)})"
    else:
        how = f"ran out {ago} s ago"
    return f"{how}: any claim takes the task now; a heartbeat with its token revives it until one does"


def _when(iso: str) -> str:
    return iso[:16].replace("T", " ")


def _cut(text: str, n: int) -> str:
    """Agent-written text on one line (`one_line`: nothing it holds can start a line), cut to `n`."""
    return one_line(text, n, "...")

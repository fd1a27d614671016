"""The console's pages: workspace picker, board, task, dependency graph, timeline, threads, agents.
Each reads through the service layer and renders a template; each has a `live` block that htmx
re-fetches when the change feed says something changed."""

from __future__ import annotations

import secrets
from typing import Any, TypedDict

from starlette.requests import Request
from starlette.responses import Response

from mcp_harness.arguments import ListCheckpointsArgs
from mcp_harness.console import charts
from mcp_harness.console.actions import ACTIONS
from mcp_harness.console.app import Console, Redirect, page
from mcp_harness.console.shared import shared
from mcp_harness.errors import InvalidArgument
from mcp_harness.identity import Identity
from mcp_harness.oversight.attention import span
from mcp_harness.oversight.tasks import GRAPH_EDGES
from mcp_harness.tasks.events import KINDS as EVENT_KINDS
from mcp_harness.tasks.rules import BLOCKED, BOARD_ORDER, Status

DONE_WORDS = frozenset(a.done for a in ACTIONS.values())  #: what the banner after an action may say
PER_COLUMN = 50  #: cards per board column; "more" pages one column at a time
COLUMN_PAGE = 200  #: cards on one page of a single column
PICKER_NEEDS = 200  #: workspaces the picker shows "needs you" counts for
HIGHEST = 2**63 - 1  #: the largest number a page parameter may be (a 64-bit column holds it)
LONGEST = 1000  #: characters a text parameter may have
FINISHED_SHOWN = 100  #: ended sessions on the Sessions page, the newest first


def _int(request: Request, name: str, low: int = 1) -> int | None:
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return None
    if len(raw) > 20 or not raw.isascii() or not raw.lstrip("-").isdigit():
        raise InvalidArgument(f"{name} must be a whole number")
    value = int(raw)
    if not low <= value <= HIGHEST:
        raise InvalidArgument(f"{name} must be a whole number from {low} to {HIGHEST}")
    return value


class _TimelineFilters(TypedDict):
    """The timeline's filters, as `ConsoleService.timeline` takes them."""

    agent: str | None
    task_key: str | None
    thread: str | None
    status: str | None
    text: str | None


def _text(request: Request, name: str) -> str | None:
    value = (request.query_params.get(name) or "").strip()
    if len(value) > LONGEST:
        raise InvalidArgument(f"{name} must be at most {LONGEST} characters")
    if any(c < " " or "\x7f" <= c <= "\x9f" for c in value):  # PostgreSQL refuses NUL in text
        raise InvalidArgument(f"{name} must not contain control characters")
    return value or None


@page
async def home(console: Console, request: Request) -> Response:
    """The workspace picker; straight to the board when there is only one choice."""
    session = await console.session(request)
    if session.workspace is not None:
        raise Redirect(console.url("/board", w=session.workspace))
    names = await console.harness.console.workspaces()
    chosen = console.default_workspace
    if chosen and request.query_params.get("pick") is None:
        raise Redirect(console.url("/board", w=chosen))
    if len(names) == 1 and request.query_params.get("pick") is None:
        raise Redirect(console.url("/board", w=names[0]))
    picker_needs = {name: await console.needs(name) for name in names[:PICKER_NEEDS]}
    return console.render(
        request,
        "workspaces.html",
        session=session,
        workspace=None,
        names=names,
        picker_needs=picker_needs,
        title="Workspaces",
    )


@page
@shared
async def needs(console: Console, request: Request) -> Response:
    """The "needs you" bar alone: what a page's bar re-fetches when something changes."""
    session, ident = await console.viewer(request)
    return console.render(
        request, "_needs.html", session=session, workspace=ident.workspace, needs=await console.needs(ident.workspace)
    )


@page
@shared
async def board(console: Console, request: Request) -> Response:
    session, ident = await console.viewer(request)
    only = _text(request, "col")
    offset = _int(request, "offset", low=0) or 0
    per_column = COLUMN_PAGE if only else PER_COLUMN
    data = await console.harness.console.board(ident, per_column=per_column, only=only, offset=offset)
    return console.render(
        request,
        "board.html",
        session=session,
        workspace=ident.workspace,
        board=data,
        title="Board",
        tab="board",
        only=only,
        per_column=per_column,
    )


@page
async def task(console: Console, request: Request) -> Response:
    session, ident = await console.viewer(request)
    key = _text(request, "key")
    if key is None:
        raise Redirect(console.url("/board", w=ident.workspace))
    data = await console.harness.console.task(
        ident,
        key,
        before_seq=_int(request, "before"),
        before_event=_int(request, "events_before"),
        deps_offset=_int(request, "deps", low=0) or 0,
        needed_offset=_int(request, "needed", low=0) or 0,
    )
    waits = data.task.status in (Status.PENDING, BLOCKED) and data.depends_on_total > 0
    root = await console.harness.console.root_of_wait(ident, key) if waits else []
    held = root[-1].key if root and root[-1].status == Status.CLAIMED else None
    holder = await console.harness.console.holder(ident, held) if held else None
    task_messages = await console.harness.messages.about_task(ident, key)
    saves = await console.harness.console_links.for_task(ident, key, data.progress, data.events)
    return console.render(
        request,
        "task.html",
        session=session,
        workspace=ident.workspace,
        page=data,
        root=root,
        holder=holder,
        span=span,
        title=key,
        tab="board",
        nonce=secrets.token_urlsafe(12),
        saves=saves,
        saved=saves.by_entry,
        done=_done(request),
        task_messages=task_messages,
    )


def _done(request: Request) -> str | None:
    """The word of the action just taken (the banner says "approved", ...); any other text is ignored,
    so a link cannot put its own sentence on the page."""
    done = request.query_params.get("done")
    return done if done in DONE_WORDS else None


@page
async def graph(console: Console, request: Request) -> Response:
    session, ident = await console.viewer(request)
    data = await console.harness.console.graph(ident)
    drawn = {  # what the browser lays out (dagre) and draws; a data block, never run
        "nodes": [
            {
                "key": n.key,
                "title": n.title or "",
                "status": n.status,
                "owner": n.owner,
                "kind": n.kind,
                "review": n.review,
            }
            for n in data.nodes
        ],
        "edges": data.edges,
    }
    return console.render(
        request,
        "graph.html",
        session=session,
        workspace=ident.workspace,
        graph=data,
        data=drawn,
        edge_cap=GRAPH_EDGES,
        title="Dependencies",
        tab="graph",
    )


@page
async def timeline(console: Console, request: Request) -> Response:
    session, ident = await console.viewer(request)
    filters: _TimelineFilters = {
        "agent": _text(request, "agent"),
        "task_key": _text(request, "task"),
        "thread": _text(request, "thread"),
        "status": _text(request, "status"),
        "text": _text(request, "q"),
    }
    show = _text(request, "show") or "both"
    if show not in SHOWS:
        raise InvalidArgument(f"show must be one of {', '.join(SHOWS)}, got {show!r}")
    kind = _text(request, "kind")
    if kind:
        show = "events"  # a kind of event: those events alone
    data = await console.harness.console.timeline(
        ident, **filters, before_seq=_int(request, "before"), with_events=show != "progress", kind=kind
    )
    items: list[tuple[str, str, Any]] = [] if show == "events" else [(e.created_at, "entry", e) for e in data.entries]
    items += [(e.event.created_at, "event", e) for e in data.events]
    items.sort(key=lambda item: item[0], reverse=True)  # task events beside the progress, newest first
    threads = await console.harness.console.thread_names(ident)
    saved = await console.harness.console_links.for_entries(ident, data.entries) if show != "events" else {}
    return console.render(
        request,
        "log.html",
        session=session,
        workspace=ident.workspace,
        timeline=data,
        filters=filters,
        title="Timeline",
        tab="log",
        before=_int(request, "before"),
        items=items,
        show=show,
        agents=await console.harness.console.agent_names(ident),
        threads=threads,
        saved=saved,
        kind=kind,
        kinds=sorted(EVENT_KINDS),
        task_keys=await console.harness.console.task_keys(ident),
    )


@page
async def stuck(console: Console, request: Request) -> Response:
    """The tasks everything else waits on, most waited on first, each with what unsticks it."""
    session, ident = await console.viewer(request)
    data = await console.harness.console.stuck(ident)
    return console.render(
        request,
        "stuck.html",
        session=session,
        workspace=ident.workspace,
        stuck=data,
        nonce=secrets.token_urlsafe(12),
        title="Stuck",
        tab="stuck",
    )


@page
async def pace(console: Console, request: Request) -> Response:
    """How fast the work goes: time in each status, review waiting time, throughput, the burn-up."""
    session, ident = await console.viewer(request)
    data = await console.harness.console.pace(ident)
    return console.render(
        request,
        "pace.html",
        session=session,
        workspace=ident.workspace,
        pace=data,
        burn=charts.burn_up(data.scope, data.done),
        hours=charts.bars(data.per_hour),
        title="Pace",
        tab="pace",
    )


GROUPS = ("status", "owner", "tag")
SHOWS = ("both", "progress", "events")  #: what the timeline shows: progress entries, task events, or both


@page
async def table(console: Console, request: Request) -> Response:
    """Every task as a table: filtered by status, owner and tag, sorted by a column, grouped."""
    session, ident = await console.viewer(request)
    sort = _text(request, "sort") or "created"
    descending = request.query_params.get("desc") == "1"
    group = _text(request, "group")
    if group is not None and group not in GROUPS:
        raise InvalidArgument(f"group must be one of {', '.join(GROUPS)}, got {group!r}")
    filters = {"status": _text(request, "status"), "owner": _text(request, "owner"), "tag": _text(request, "tag")}
    offset = _int(request, "offset", low=0) or 0
    data = await console.harness.console.table(
        ident,
        status=filters["status"],
        owner=filters["owner"],
        tag=filters["tag"],
        sort=sort,
        descending=descending,
        offset=offset,
    )
    groups: dict[str, list] = {}
    for row in data.rows:
        names = (row.tags or ["(no tag)"]) if group == "tag" else [getattr(row, group) or "(nobody)"] if group else [""]
        for name in names:
            groups.setdefault(name, []).append(row)
    # groups in a stable order: statuses as the board's columns, owners and tags by name, "(no tag)" last
    place = {status: i for i, status in enumerate(BOARD_ORDER)}
    groups = dict(
        sorted(
            groups.items(), key=lambda g: (g[0].startswith("("), place.get(g[0], 99) if group == "status" else 0, g[0])
        )
    )
    return console.render(
        request,
        "tasks.html",
        session=session,
        workspace=ident.workspace,
        table=data,
        groups=groups,
        group=group,
        sort=sort,
        desc=descending,
        filters=filters,
        agents=await console.harness.console.agent_names(ident),
        title="Tasks",
        tab="tasks",
    )


@page
async def threads(console: Console, request: Request) -> Response:
    session, ident = await console.viewer(request)
    data = await console.harness.console.threads(ident)
    return console.render(
        request,
        "threads.html",
        session=session,
        workspace=ident.workspace,
        threads=data,
        title="Threads",
        tab="threads",
    )


@page
async def thread(console: Console, request: Request) -> Response:
    """A thread's history; one version's state (`v`); or what changed from version `a` to `b`."""
    session, ident = await console.viewer(request)
    name = _text(request, "t")
    if name is None:
        raise Redirect(console.url("/threads", w=ident.workspace))
    before = _int(request, "before")
    history = await console.harness.checkpoints.list(
        ident, ListCheckpointsArgs(thread=name, limit=50, before_version=before)
    )
    old, new = _int(request, "a"), _int(request, "b")
    changes = await console.harness.console.diff(ident, name, old, new) if old and new else None
    shown = None
    if changes is None and history.checkpoints:
        shown = await console.harness.console.state(ident, name, _int(request, "v"))
    links = console.harness.console_links
    ids = [c.checkpoint_id for c in history.checkpoints] + ([shown[0].checkpoint_id] if shown else [])
    saved_with = await links.versions(ident, ids)  # the entry and task each version went with
    origin = await links.forked_from(ident, shown[0]) if shown else None
    return console.render(
        request,
        "thread.html",
        session=session,
        workspace=ident.workspace,
        thread=name,
        history=history,
        shown=shown,
        diff=changes,
        title=f"Thread {name}",
        tab="threads",
        before=before,
        saved_with=saved_with,
        origin=origin,
        nonce=secrets.token_urlsafe(12),
        forked=request.query_params.get("forked") == "1",
    )


@page
async def agents(console: Console, request: Request) -> Response:
    session, ident = await console.viewer(request)
    data = await console.harness.console.agents(ident)
    return console.render(
        request, "agents.html", session=session, workspace=ident.workspace, agents=data, title="Agents", tab="agents"
    )


@page
async def inbox(console: Console, request: Request) -> Response:
    """The operators' inbox: messages to the operators (and to the signed-in person), unread first."""
    session, ident = await console.viewer(request)
    person = Identity(workspace=ident.workspace, agent=session.agent, role="operator")
    show_all = bool(request.query_params.get("all"))
    data = await console.harness.messages.read(person, unread_only=not show_all, limit=200)
    return console.render(
        request,
        "inbox.html",
        session=session,
        workspace=ident.workspace,
        inbox=data,
        title="Inbox",
        tab="inbox",
        show_all=show_all,
        nonce=secrets.token_urlsafe(12),
        sent=request.query_params.get("sent") == "1",
    )


@page
async def sessions(console: Console, request: Request) -> Response:
    """The runner's sessions: those running now (with a stop button for an operator), the newest ended
    ones with their outcome, the live runners and what each waits on, and the outcomes so far."""
    session, ident = await console.viewer(request)
    runs = console.harness.runs
    listed = await runs.list(ident)
    running = await runs.list(ident, live=True)
    ended = [s for s in listed if s.ended_at is not None][:FINISHED_SHOWN]
    outcomes = await runs.outcomes(ident)
    return console.render(
        request,
        "sessions.html",
        session=session,
        workspace=ident.workspace,
        running=running,
        ended=ended,
        runners=await runs.live_runners(ident),
        outcomes=outcomes,
        stopped=request.query_params.get("stopped") == "1",
        title="Sessions",
        tab="sessions",
    )

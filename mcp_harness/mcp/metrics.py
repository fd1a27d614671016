"""Prometheus metrics at `GET /metrics`: tool calls by tool and result code, latency per tool, tasks
by status per workspace, leases past their time and leases taken over, claims that waited.

Counters live in this process (each server process is its own scrape target); task figures are read
from the database when scraped.

Who sees what: a request with a bearer token of the harness (any role, any bind) sees its own
workspace's figures only (no process-wide counters: those add up every workspace's calls). Every
workspace, with the process's counters, is shown to a scrape with no token on a loopback bind (made to
a loopback name, not relayed by a proxy: no `Forwarded`/`X-Forwarded-*`/`X-Real-IP`), or with
the dedicated metrics credential (`MCP_HARNESS_METRICS_TOKEN`, a secret set on the server) on any bind.
The Host header is checked as for `/mcp` and `/ui` (DNS rebinding)."""

from __future__ import annotations

import hmac
import time
from collections.abc import Awaitable, Callable, Container
from typing import TYPE_CHECKING, Any, TypeVar, get_args

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from mcp_harness import __version__
from mcp_harness.errors import ALL_CODES, HarnessError
from mcp_harness.models import SessionOutcome
from mcp_harness.tasks.rules import SHOWN, Status
from mcp_harness.waits import claim_waited

OUTCOMES = get_args(SessionOutcome)  #: every series of `mcp_harness_sessions`, at 0 until one ends so

if TYPE_CHECKING:  # the service (SQLAlchemy and all) loads after the handshake, not at a server's start
    from mcp_harness.service import Harness

REGISTRY = CollectorRegistry(auto_describe=True)
TOOL_CALLS = Counter(
    "mcp_harness_tool_calls",
    "MCP tool calls by tool and result code (ok, or the error code)",
    ["tool", "code"],
    registry=REGISTRY,
)
TOOL_SECONDS = Histogram(
    "mcp_harness_tool_call_seconds",
    "Time to answer an MCP tool call (a claim's wait for work is not included)",
    ["tool"],
    registry=REGISTRY,
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
CLAIM_WAIT_SECONDS = Histogram(
    "mcp_harness_claim_wait_seconds",
    "Time a claim_task call spent waiting for work (wait_seconds), apart",
    registry=REGISTRY,
    buckets=(0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60),
)
TASKS_ENDED = Counter(
    "mcp_harness_tasks_ended",
    "Tasks this process's update_task calls completed, failed for good or sent to retry",
    ["outcome"],
    registry=REGISTRY,
)
CONSOLE_ACTIONS = Counter(
    "mcp_harness_console_actions", "Operator actions taken in the console, by action", ["action"], registry=REGISTRY
)
BUILD_INFO = Gauge(
    "mcp_harness_build_info", "The mcp-harness version this process runs (always 1)", ["version"], registry=REGISTRY
)
BUILD_INFO.labels(__version__).set(1)
ProcessCollector(registry=REGISTRY)  # process_cpu_seconds_total, process_resident_memory_bytes, ...
PlatformCollector(registry=REGISTRY)  # python_info
ENDED = {outcome: TASKS_ENDED.labels(outcome) for outcome in ("completed", "failed", "retried")}  # zero from the start
KNOWN_CODES = frozenset(ALL_CODES)  #: the codes a call may end with (`ok` aside)


#: (tool, code) -> its counter and histogram: resolving labels on every call cost more than counting
_series: dict[tuple[str, str], tuple[Any, Any]] = {}
R = TypeVar("R")


async def observe_tool_call(tools: Container[str], name: str, arguments: dict[str, Any], call: Awaitable[R]) -> R:
    """Await `call`, the answer to one call of tool `name` (`HarnessServer.call_tool`): count it by its
    result code and time it."""
    started = time.perf_counter()
    waited = [0.0]
    reset = claim_waited.set(waited)  # a claim's wait for work is timed apart
    try:
        result = await call
    finally:
        claim_waited.reset(reset)
    tool = name if name in tools else "unknown"  # names are not ours to multiply
    key = (tool, result_code(result))
    series = _series.get(key) or _series.setdefault(key, (TOOL_CALLS.labels(*key), TOOL_SECONDS.labels(tool)))
    series[0].inc()
    series[1].observe(time.perf_counter() - started - waited[0])
    if waited[0]:
        CLAIM_WAIT_SECONDS.observe(waited[0])
    if tool == "update_task" and key[1] == "ok":
        _count_ended(arguments.get("action"), result)
    return result


def start_series(tools: list[str]) -> None:
    """Every tool's `ok` series at 0 from the start (an alert on a rate needs the series before the first call)."""
    for tool in tools:
        key = (tool, "ok")
        if key not in _series:
            _series[key] = (TOOL_CALLS.labels(*key), TOOL_SECONDS.labels(tool))


def count_console_action(action: str) -> None:
    CONSOLE_ACTIONS.labels(action).inc()


def _count_ended(action: Any, result: Any) -> None:
    """A completed task, or a failed one: for good (no attempt left, or no retry) or sent back to retry."""
    if action == "complete":
        ENDED["completed"].inc()
    elif action == "fail":
        status = (getattr(result, "structured_content", None) or {}).get("status")
        ENDED["failed" if status == Status.FAILED else "retried"].inc()


def result_code(result: Any) -> str:
    """`ok`, or the contract's code at the start of an error result's text (`[lease_lost] ...`)."""
    if not getattr(result, "is_error", False):
        return "ok"
    text = result.content[0].text if result.content else ""
    code = text[1 : text.find("]")] if text.startswith("[") else ""
    return code if code in KNOWN_CODES else "internal"


class _DatabaseFigures:
    """Figures read from the database at scrape time (set just before `generate_latest`)."""

    def __init__(self) -> None:
        self.counts: list[tuple[str, str, int]] = []
        self.expired: list[tuple[str, int]] = []
        self.claim_waits: int | None = 0  #: None: not shown (a view of one workspace)
        self.taken_over: dict[str, int] = {}
        self.oldest_review: list[tuple[str, float]] = []
        self.oldest_ready: list[tuple[str, float]] = []
        self.sessions: list[tuple[str, str, int, float | None]] = []  #: workspace, outcome, count, cost

    def fill(self, workspaces: list[str]) -> None:
        """Every series of each of `workspaces` at 0 where the database has no figure: an alert on a
        status, an expired lease or an age works before the first such task (a gauge with no series
        reads as absent, not as 0)."""
        counts = {(w, s): n for w, s, n in self.counts}
        self.counts = [(w, s, counts.get((w, s), 0)) for w in workspaces for s in SHOWN]
        for name in ("expired", "oldest_review", "oldest_ready"):
            have = dict(getattr(self, name))
            setattr(self, name, [(w, have.get(w, 0)) for w in workspaces])
        self.taken_over = {w: self.taken_over.get(w, 0) for w in workspaces}
        ended = {(w, o): (n, c) for w, o, n, c in self.sessions}
        self.sessions = [(w, o, *ended.get((w, o), (0, None))) for w in workspaces for o in OUTCOMES]

    def collect(self) -> Any:
        for name, what, rows in (
            (
                "mcp_harness_oldest_in_review_seconds",
                "Age of the task longest in review (waiting for a person)",
                self.oldest_review,
            ),
            (
                "mcp_harness_oldest_ready_seconds",
                "Age of the task longest ready to claim and not claimed",
                self.oldest_ready,
            ),
        ):
            gauge = GaugeMetricFamily(name, what + ", per workspace", labels=["workspace"])
            for workspace, age in rows:
                gauge.add_metric([workspace], age)
            yield gauge
        tasks = GaugeMetricFamily("mcp_harness_tasks", "Tasks by status, per workspace", labels=["workspace", "status"])
        for workspace, status, n in self.counts:
            tasks.add_metric([workspace, status], n)
        yield tasks
        expired = GaugeMetricFamily(
            "mcp_harness_leases_expired",
            "Leases past their time that no claim has taken over yet, per workspace",
            labels=["workspace"],
        )
        for workspace, n in self.expired:
            expired.add_metric([workspace], n)
        yield expired
        taken = CounterMetricFamily(
            "mcp_harness_leases_taken_over",
            "Expired leases a claim of this process took over (the task went to another agent), per workspace",
            labels=["workspace"],
        )
        for workspace, n in sorted(self.taken_over.items()):
            taken.add_metric([workspace], n)
        yield taken
        sessions = GaugeMetricFamily(
            "mcp_harness_sessions",
            "The runner's ended agent sessions by outcome, per workspace",
            labels=["workspace", "outcome"],
        )
        cost = GaugeMetricFamily(
            "mcp_harness_sessions_cost_usd",
            "The costs the runner's ended sessions reported (one that reported none adds nothing), per workspace",
            labels=["workspace"],
        )
        spent: dict[str, float] = {}
        for workspace, outcome, n, dollars in self.sessions:
            sessions.add_metric([workspace, outcome], n)
            spent[workspace] = spent.get(workspace, 0.0) + (dollars or 0.0)
        for workspace, dollars in sorted(spent.items()):
            cost.add_metric([workspace], dollars)
        yield sessions
        yield cost
        if self.claim_waits is None:
            return
        yield CounterMetricFamily(
            "mcp_harness_claim_waits",
            "Times a claim_task call found no task and waited for one (wait_seconds)",
            value=self.claim_waits,
        )


async def render(harness: Harness, workspace: str | None = None) -> bytes:
    """The exposition text: this process's counters, then the database's figures; with `workspace`,
    that workspace's figures only. Every workspace with data (or the one asked about) has each status,
    expired leases and both ages, at 0 when there is nothing."""
    figures = _DatabaseFigures()
    figures.counts, figures.expired = await harness.console.metrics()
    figures.oldest_review, figures.oldest_ready = await harness.console.ages()
    figures.claim_waits = harness.console.changes.claim_waits
    figures.taken_over = dict(harness.tasks.taken_over)
    figures.sessions = [row for row in await harness.runs.every_outcome() if workspace in (None, row[0])]
    scrape = CollectorRegistry(auto_describe=False)
    scrape.register(figures)
    if workspace is None:
        figures.fill(sorted({*await harness.console.workspaces(), *(c[0] for c in figures.counts)}))
        return generate_latest(REGISTRY) + generate_latest(scrape)
    figures.fill([workspace])
    figures.claim_waits = None
    return generate_latest(scrape)


_EVERY = object()  #: the view of every workspace
_LOOPBACK_NAMES = {"127.0.0.1", "localhost", "[::1]", "::1"}
_PROXY_HEADERS = ("forwarded", "x-forwarded-for", "x-forwarded-host", "x-real-ip")


def direct(request: Request) -> bool:
    """A request made on this machine to a loopback name, not one relayed by a proxy: a loopback bind
    behind a reverse proxy (the README's way to expose the server) would otherwise show every workspace
    to whoever reaches the proxy."""
    host = request.headers.get("host", "").lower()
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    if name not in _LOOPBACK_NAMES or any(h in request.headers for h in _PROXY_HEADERS):
        return False
    client = request.client.host if request.client is not None else ""
    return client in ("127.0.0.1", "::1", "localhost") or client.startswith("127.")


def metrics_endpoint(harness: Harness, *, open_access: bool) -> Callable[[Request], Awaitable[Response]]:
    """`GET /metrics` (see the module docstring for who sees what); `open_access`: a loopback bind."""
    metrics_token = harness.settings.metrics_token

    async def scope_of(request: Request) -> object | str | None:
        """_EVERY, a workspace name, or None (not allowed)."""
        header = request.headers.get("authorization", "")
        token = header[7:].strip() if header[:7].lower() == "bearer " else ""
        if not token:
            return _EVERY if open_access and direct(request) else None
        if metrics_token and hmac.compare_digest(token.encode(), metrics_token.encode()):
            return _EVERY
        ident = await harness.tokens.verify(token)
        return ident.workspace if ident is not None else None

    async def endpoint(request: Request) -> Response:
        try:
            scope = await scope_of(request)
            if scope is None:
                return PlainTextResponse(
                    "metrics need a bearer token: a harness token shows its own workspace, the server's "
                    "MCP_HARNESS_METRICS_TOKEN every workspace (Authorization: Bearer <token>)",
                    status_code=401,
                    headers={"www-authenticate": "Bearer"},
                )
            body = await render(harness, None if scope is _EVERY else str(scope))
        except HarnessError:
            return PlainTextResponse("the database is not available right now", status_code=503)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    return endpoint

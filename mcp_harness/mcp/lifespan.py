"""How a server holds its harness open: given one (HTTP), or opening its own in the background for
the life of a stdio connection, so that the client's handshake is answered before the database is
open (importing the service and SQLAlchemy, then opening the database, is most of a start-up).
A database that is damaged or not ours ends the server (the command line prints one line and exits
non-zero), since no retry can help; one that cannot be reached now is named on every call instead."""

from __future__ import annotations

import importlib
import logging
import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from mcp_harness import clock
from mcp_harness.config import Settings
from mcp_harness.errors import HarnessError, Internal, Unavailable

if TYPE_CHECKING:
    from mcp_harness.identity import Identity
    from mcp_harness.service import Harness

log = logging.getLogger("mcp_harness")

#: the database is opened once the client has listed the tools or called one, or after this long
HANDSHAKE_SECONDS = 3.0
#: how long a server whose client left before the database was open still waits for the attempt to end
LAST_ATTEMPT_SECONDS = 10.0
#: how long ending a connection's leases may take on the way out
END_SECONDS = 10.0


@dataclass
class HarnessState:
    """A server's hold on its harness. HTTP: given an open one at construction. stdio: the lifespan opens
    it in the background (`opens_itself`), and the events below say how far that has got."""

    harness: Harness | None = None  #: the open harness, while it is open
    opens_itself: bool = False  #: stdio: the lifespan opens the harness
    opened: anyio.Event = field(default_factory=anyio.Event)  #: set when an attempt to open it has ended
    wanted: anyio.Event = field(default_factory=anyio.Event)  #: set once the handshake is over or a call needs it
    retry: anyio.Event = field(default_factory=anyio.Event)  #: set to make a failed opening try again
    open_error: HarnessError | None = None  #: why the last attempt failed
    #: stdio: the leases this connection took or renewed (token -> when), ended with it (`ConnectionLeases`)
    leases: ConnectionLeases | None = None

    def handshake_over(self) -> None:
        """The client has what it needs to start (it listed the tools, or calls one): open the database."""
        if self.opens_itself:
            self.wanted.set()

    async def ready(self) -> None:
        """Wait until the harness is open: a stdio server opens it in the background, so that the
        client's handshake (initialize, tools/list) is answered without waiting for the database.
        After a failed attempt, the next call starts another; the calls that waited for the failed one
        get its error."""
        if self.harness is not None or not self.opens_itself:
            return
        self.wanted.set()
        if self.opened.is_set() and self.open_error is not None:
            self.opened = anyio.Event()
            self.retry.set()
        await self.opened.wait()
        if self.harness is None and self.open_error is not None:
            raise self.open_error


class ConnectionLeases:
    """The leases one stdio connection took or renewed: when the connection ends (stdin closed, SIGTERM,
    SIGINT, SIGHUP) they end as if they had expired then, unless another connection renewed one since
    (`TaskService.end_leases`)."""

    def __init__(self, identity: Identity) -> None:
        self.identity = identity
        self.tokens: dict[str, float] = {}  #: token -> when this connection last took or renewed it
        self.why = "its connection ended (stdin closed)"

    def saw(self, result: Any, used: str | None = None) -> None:
        """Note the lease a tool result carries (a claim's, a heartbeat's), and the time of a call that
        used one of this connection's leases (`used`: its `lease_token`): a `reserve` changes the task
        too, and a change after the time noted reads as another connection's renewal, which the end
        leaves alone (`store.end_leases`)."""
        lease = getattr(result, "lease", None)
        token = getattr(lease, "token", None)
        if isinstance(token, str) and not getattr(result, "replayed", None):
            self.tokens[token] = clock.now()
        if used is not None and used in self.tokens:
            self.tokens[used] = clock.now()

    async def end(self, harness: Harness) -> None:
        """End them (at most `END_SECONDS`; on failure they run to their time)."""
        if not self.tokens:
            return
        tokens, self.tokens = self.tokens, {}
        with anyio.CancelScope(shield=True), anyio.move_on_after(END_SECONDS):
            try:
                ended = await harness.tasks.end_leases(self.identity, self.why, tokens=tokens)
            except Exception as exc:  # noqa: BLE001 - leases end by time instead; say so
                log.warning("the connection's leases were not ended (they run to their time): %s", exc)
                return
            if ended:
                log.info("ended the leases of this connection on %s", ", ".join(ended))


def harness_lifespan(
    settings: Settings, harness: Harness | None, state: HarnessState
) -> Callable[[Any], AbstractAsyncContextManager[None]]:
    """The server's lifespan (the SDK passes it the server, which it does not need). With `harness` (HTTP:
    one harness for every request) it is just used; without, one is opened in the background
    (`hold_open`) and closed when the connection ends."""

    @asynccontextmanager
    async def lifespan(_server: Any) -> AsyncIterator[None]:
        if harness is not None:
            state.harness = harness
            yield None
            return
        state.opens_itself, state.opened, state.wanted, stop = True, anyio.Event(), anyio.Event(), anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(hold_open, settings, state, stop)
            try:
                yield None
            finally:
                if state.leases is not None and state.harness is not None:
                    await state.leases.end(state.harness)
                stop.set()
                if state.harness is None:  # the client left before the database was open
                    opened = False
                    try:
                        opened = await last_attempt(state)
                    finally:
                        if not opened:
                            tg.cancel_scope.cancel()  # stop waiting for a retry (an open one closes itself)

    return lifespan


async def last_attempt(state: HarnessState) -> bool:
    """The client left before the database was open: let the attempt run and end (within
    LAST_ATTEMPT_SECONDS), so that a damaged database is still reported (one line, a non-zero exit)
    rather than the session ending silently. True when the database was opened (it closes itself)."""
    if state.opened.is_set():
        return False
    state.wanted.set()
    with anyio.move_on_after(LAST_ATTEMPT_SECONDS):
        await state.opened.wait()
    return state.opened.is_set() and state.open_error is None


async def hold_open(settings: Settings, state: HarnessState, stop: anyio.Event) -> None:
    """Open the harness for a stdio server's life, once the handshake is over (the client has listed
    the tools) or a call needs it: the service is imported on a worker thread and the database opened;
    tool calls wait for it (`HarnessState.ready`). If it cannot be opened, each call says why, and the
    next call tries again; a damaged database is raised, which ends the server."""
    with anyio.move_on_after(HANDSHAKE_SECONDS):
        await state.wanted.wait()  # the handshake first: importing would take turns with it on the GIL
    while True:
        state.retry = anyio.Event()
        try:
            service = await anyio.to_thread.run_sync(
                importlib.import_module, "mcp_harness.service", abandon_on_cancel=True
            )
            async with service.Harness.open(settings) as opened:
                try:
                    await opened.checkpoints.purge_idempotency_keys()
                except Unavailable as exc:  # e.g. a read-only database still serves reads
                    log.warning("old idempotency keys not purged: %s", exc.message)
                state.harness, state.open_error = opened, None
                state.opened.set()
                await stop.wait()
                return
        except HarnessError as exc:
            if isinstance(exc, Unavailable) and exc.damaged:
                state.open_error = exc
                raise  # ends the lifespan's task group, and with it the server
            log.error("cannot open the database: %s", exc.message)
            state.open_error = exc
        except OSError as exc:  # e.g. the database file's folder does not exist (yet)
            log.error("cannot open the database: %s", exc.strerror or exc)
            state.open_error = Unavailable(f"the database cannot be opened: {exc.strerror or exc}")
        except Exception as exc:  # noqa: BLE001 - every tool call will say so; the log has the cause
            incident = secrets.token_hex(6)
            log.error("internal error %s opening the database", incident, exc_info=exc)
            state.open_error = Internal(f"the server could not open its database (incident {incident})")
        finally:
            state.harness = None
            state.opened.set()
        await state.retry.wait()

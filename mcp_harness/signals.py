"""The one home of signal handling for long-running commands (the stdio server, the runner): while the
block runs, SIGTERM, SIGINT and SIGHUP call a handler on the event loop instead of raising in whatever
code happens to run."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager

STOPPING = (signal.SIGTERM, signal.SIGINT, getattr(signal, "SIGHUP", None))


@contextmanager
def handled(on_signal: Callable[[signal.Signals], None], signals: tuple = STOPPING) -> Iterator[None]:
    """Call `on_signal(sig)` on the running loop for each of `signals` (those this platform and thread
    can handle) until the block ends; the previous handling comes back after it."""
    loop = asyncio.get_running_loop()
    installed = []
    for sig in signals:
        if sig is None:
            continue
        try:
            loop.add_signal_handler(sig, on_signal, sig)
        except (NotImplementedError, RuntimeError, ValueError):  # not on this platform or thread
            continue
        installed.append(sig)
    try:
        yield
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)

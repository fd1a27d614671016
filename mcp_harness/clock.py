"""Wall-clock time for leases, backoff and timestamps, with an offset tests can advance."""

from __future__ import annotations

import time

_offset = 0.0


def now() -> float:
    """Seconds since the epoch (UTC), plus the test offset."""
    return time.time() + _offset


def advance(seconds: float) -> None:
    """Move this process's clock forward: tests use it to expire leases and end backoffs at once."""
    global _offset
    _offset += seconds


def reset() -> None:
    global _offset
    _offset = 0.0

"""`iso()` formats timestamps exactly as `datetime` does (it is a faster path for listings)."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from mcp_harness.service.base import iso


def reference(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="microseconds")[:-6] + "Z"


def test_iso_matches_datetime_including_half_microsecond_rounding():
    rng = random.Random(7)
    samples = [0.0, 0.5e-6, 1.5e-6, 59.9999995, 1_764_460_800.0, 1_764_460_799.9999996, 4_102_444_800.25]
    samples += [-0.3, -0.5e-6, -0.9999996, -1.0000004, -86_400.75]  # before 1970 the fraction is negative
    for _ in range(50_000):
        ts = rng.uniform(-1e9, 4.1e9)
        samples.append(ts)
        samples.append(round(ts, 6) + rng.choice((5e-7, -5e-7)))  # on a rounding boundary
    for ts in samples:
        assert iso(ts) == reference(ts), ts
    assert iso(None) is None

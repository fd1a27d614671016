"""`iso()` formats every timestamp a result carries: ISO 8601 UTC to the second (contract revision 3)."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime

from mcp_harness.base import iso as service_iso
from mcp_harness.jsonvalue import iso


def reference(ts: float) -> str:
    return datetime.fromtimestamp(math.floor(ts), UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def test_iso_is_to_the_second_with_the_fraction_cut():
    assert iso(1_764_605_366.999_9) == "2025-12-01T16:09:26Z"
    rng = random.Random(7)
    samples = [0.0, 0.5e-6, 59.9999995, 1_764_460_800.0, 1_764_460_799.9999996, 4_102_444_800.25]
    samples += [-0.3, -0.9999996, -1.0, -86_400.75]  # before 1970 the fraction is negative: floor, not truncate
    samples += [rng.uniform(-1e9, 4.1e9) for _ in range(20_000)]
    for ts in samples:
        assert iso(ts) == reference(ts), ts
        assert datetime.fromisoformat(iso(ts)).timestamp() <= ts  # the CLI and console read it back
    assert iso(None) is None
    assert service_iso is iso  # one formatter for every layer

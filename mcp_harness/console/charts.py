"""Charts drawn on the server as SVG (no script, so nothing for the Content-Security-Policy to
allow): the burn-up of a plan and tasks done per hour. Each function turns numbers into the
coordinates a template draws."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

WIDTH, HEIGHT = 720, 240  #: the chart's own units (the SVG scales to the page)
LEFT, RIGHT, TOP, BOTTOM = 44, 12, 12, 28


@dataclass(frozen=True)
class Line:
    points: str  #: an SVG polyline's points
    last: tuple[float, float, int]  #: where the line ends, and its value there


@dataclass(frozen=True)
class BurnUp:
    scope: Line
    done: Line
    y_ticks: list[tuple[float, int]]  #: (y, value)
    x_ticks: list[tuple[float, str]]  #: (x, time label)
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    bottom: float = HEIGHT - BOTTOM
    right: float = WIDTH - RIGHT


def burn_up(scope: list[tuple[float, int]], done: list[tuple[float, int]]) -> BurnUp | None:
    """Scope and done over time as two stepped lines on shared axes; None without data."""
    if not scope:
        return None
    t0 = scope[0][0] - (scope[1][0] - scope[0][0] if len(scope) > 1 else 1.0)
    t1 = scope[-1][0]
    top = max(1, max(n for _, n in scope), max(n for _, n in done))
    span = max(t1 - t0, 1.0)

    def x(t: float) -> float:
        return round(LEFT + (t - t0) / span * (WIDTH - LEFT - RIGHT), 1)

    def y(n: int) -> float:
        return round(HEIGHT - BOTTOM - n / top * (HEIGHT - TOP - BOTTOM), 1)

    def line(series: list[tuple[float, int]]) -> Line:
        points = [f"{x(t0)},{y(0)}"]
        previous = 0
        for t, n in series:
            points += [f"{x(t)},{y(previous)}", f"{x(t)},{y(n)}"]
            previous = n
        return Line(" ".join(points), (x(series[-1][0]), y(series[-1][1]), series[-1][1]))

    step = max(1, -(-top // 4))
    y_ticks = [(y(v), v) for v in range(0, top + 1, step)]
    x_ticks = [(x(t), datetime.fromtimestamp(t, UTC).strftime("%d %b %H:%M")) for t in (t0, (t0 + t1) / 2, t1)]
    return BurnUp(line(scope), line(done), y_ticks, x_ticks)


def bars(values: list[int], width: int = WIDTH, height: int = 120) -> list[tuple[float, float, float, float, int]]:
    """Bars for `values` (x, y, w, h, value), filling `width` by `height` with a baseline at the bottom."""
    top = max(values, default=0) or 1
    slot = width / max(len(values), 1)
    return [
        (
            round(i * slot + 2, 1),
            round(height - v / top * (height - 16), 1),
            round(slot - 4, 1),
            round(v / top * (height - 16), 1),
            v,
        )
        for i, v in enumerate(values)
    ]

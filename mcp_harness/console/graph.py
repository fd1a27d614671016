"""The dependency graph as a picture: a layered layout computed here, drawn as SVG by a template.

Tasks are placed in columns by depth (a task sits one column right of its deepest dependency), and
ordered within a column by the average row of their dependencies, so edges mostly run straight; a
task with no dependencies sits just left of the first task that waits for it."""

from __future__ import annotations

from dataclasses import dataclass

from ..service.console import Dependency

NODE_W, NODE_H = 230, 56  #: a task's box
GAP_X, GAP_Y = 70, 18
PAD = 16
TITLE_CHARS = 30  #: title characters that fit a box (the full title is the box's tooltip)


@dataclass(frozen=True)
class Node:
    key: str
    title: str
    short_title: str
    status: str
    owner: str | None
    x: int
    y: int
    kind: str = "work"  #: `gate`: drawn dashed, with a diamond and "gate" above the box
    review: bool = False  #: drawn with "review" above the box


@dataclass(frozen=True)
class Edge:
    path: str  #: SVG path data, from the dependency's right side to the dependent's left side
    status: str  #: the dependency's status (a done dependency's edge is drawn quieter)


@dataclass(frozen=True)
class Picture:
    nodes: list[Node]
    edges: list[Edge]
    width: int
    height: int


def layout(tasks: list[Dependency], edges: list[tuple[str, str]]) -> Picture:
    deps: dict[str, list[str]] = {t.key: [] for t in tasks}
    for task, dep in edges:
        deps[task].append(dep)
    depth: dict[str, int] = {}
    for t in tasks:  # iterative: plans can be deep chains
        stack = [t.key]
        while stack:
            key = stack[-1]
            missing = [d for d in deps[key] if d not in depth]
            if missing:
                stack.extend(missing)
                continue
            depth[key] = 1 + max((depth[d] for d in deps[key]), default=-1)
            stack.pop()
    # A task nothing waits on before it sits just left of its first dependent, not in column 0:
    # its edges stay short instead of running behind the boxes in between.
    dependents: dict[str, list[str]] = {}
    for task, dep in edges:
        dependents.setdefault(dep, []).append(task)
    for t in tasks:
        if not deps[t.key] and t.key in dependents:
            depth[t.key] = min(depth[d] for d in dependents[t.key]) - 1
    columns: dict[int, list[str]] = {}
    for t in tasks:
        columns.setdefault(depth[t.key], []).append(t.key)
    row: dict[str, float] = {}
    for level in sorted(columns):
        keys = columns[level]
        if level > 0:  # order by where the dependencies sit; creation order breaks ties (sort is stable)
            keys.sort(key=lambda k: sum(row[d] for d in deps[k]) / len(deps[k]) if deps[k] else len(keys))
        for index, key in enumerate(keys):
            row[key] = index
    by_key = {t.key: t for t in tasks}
    nodes = []
    for level, keys in columns.items():
        for index, key in enumerate(keys):
            t = by_key[key]
            title = t.title or ""
            short = title if len(title) <= TITLE_CHARS else title[: TITLE_CHARS - 1] + "…"
            x, y = PAD + level * (NODE_W + GAP_X), PAD + index * (NODE_H + GAP_Y)
            nodes.append(Node(key, title, short, t.status, t.owner, x, y, t.kind, t.review))
    at = {n.key: n for n in nodes}
    lines = []
    for task, dep in edges:
        a, b = at[dep], at[task]
        x1, y1, x2, y2 = a.x + NODE_W, a.y + NODE_H // 2, b.x, b.y + NODE_H // 2
        bend = max(30, (x2 - x1) // 2)
        lines.append(Edge(f"M{x1},{y1} C{x1 + bend},{y1} {x2 - bend},{y2} {x2 - 6},{y2}", a.status))
    width = PAD * 2 + (max(columns, default=0) + 1) * (NODE_W + GAP_X) - GAP_X
    height = PAD * 2 + max((len(k) for k in columns.values()), default=1) * (NODE_H + GAP_Y) - GAP_Y
    return Picture(nodes, lines, width, height)

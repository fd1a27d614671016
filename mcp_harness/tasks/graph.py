"""The order new tasks must be inserted in, refusing unknown dependencies and cycles."""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from typing import Protocol

from mcp_harness.errors import DependencyError


class Dependent(Protocol):
    """What the order reads of a task: the keys it depends on (a new task's spec, an import's record)."""

    @property
    def depends_on(self) -> Sequence[str]: ...


def topological_order(new: Mapping[str, Dependent], existing: Container[str]) -> list[str]:
    """New task keys ordered dependencies first; unknown dependencies and cycles are refused."""
    for key, spec in new.items():
        for dep in spec.depends_on:
            if dep not in new and dep not in existing:
                raise DependencyError(
                    f"task {key!r} depends on {dep!r}, which does not exist (add it first or in the same call)"
                )
    order: list[str] = []
    state: dict[str, int] = {}  # 1 = visiting, 2 = done
    for root in new:
        if state.get(root) == 2:
            continue
        stack: list[tuple[str, int]] = [(root, 0)]
        path: list[str] = []
        while stack:
            key, index = stack.pop()
            if index == 0:
                if state.get(key) == 1:
                    cycle = path[path.index(key) :] + [key]
                    raise DependencyError(f"dependencies form a cycle: {' -> '.join(cycle)}")
                if state.get(key) == 2:
                    continue
                state[key] = 1
                path.append(key)
            deps = [d for d in new[key].depends_on if d in new]
            if index < len(deps):
                stack.append((key, index + 1))
                dep = deps[index]
                if state.get(dep) == 1:
                    cycle = path[path.index(dep) :] + [dep]
                    raise DependencyError(f"dependencies form a cycle: {' -> '.join(cycle)}")
                if state.get(dep) != 2:
                    stack.append((dep, 0))
            else:
                state[key] = 2
                path.pop()
                order.append(key)
    return order

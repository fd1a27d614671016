"""What the console shows of path reservations (issue 28), on both backends: a claimed card and the
task page carry what the lease holds now (the claim's paths, then `reserve` and `unreserve`, shared
ones marked), not only the paths the task declares; nothing once the lease has run out."""

from __future__ import annotations

import pytest

from mcp_harness import clock
from mcp_harness.arguments import AddTasksArgs, ClaimTaskArgs, UpdateTaskArgs
from mcp_harness.models import TaskSpec
from mcp_harness.service import Harness, Identity

pytestmark = pytest.mark.anyio


async def test_cards_tasks_and_agents_show_what_a_lease_holds_now(harness: Harness, workspace: str):
    h, bob = harness, Identity(workspace, "bob")
    await h.tasks.add(
        bob,
        AddTasksArgs(
            tasks=[
                TaskSpec(key="api", title="API", paths=["src/api/**", "tests/api/**"]),
                TaskSpec(key="docs", title="Docs", paths=["docs/**"]),
            ]
        ),
    )
    got = await h.tasks.claim(bob, ClaimTaskArgs(task_key="api", lease_seconds=60))
    token = got.lease.token
    await h.tasks.update(
        bob, UpdateTaskArgs(task_key="api", action="reserve", lease_token=token, paths=["docs/api/**"], shared=True)
    )
    await h.tasks.update(
        bob, UpdateTaskArgs(task_key="api", action="unreserve", lease_token=token, paths=["tests/api/**"])
    )
    await h.tasks.update(
        bob, UpdateTaskArgs(task_key="api", action="reserve", lease_token=token, paths=["migrations/**"])
    )

    cards = {c.key: c for col in (await h.console.board(bob)).columns for c in col.cards}
    assert cards["api"].held == (("migrations/**", False), ("src/api/**", False), ("docs/api/**", True))
    assert cards["api"].paths == ("src/api/**", "tests/api/**")  # declared, as added
    assert cards["docs"].held == () and cards["docs"].paths == ("docs/**",)  # pending: declared only
    page = await h.console.task(bob, "api")
    assert page.task.held_paths == ["migrations/**", "src/api/**"] and page.task.shared_paths == ["docs/api/**"]
    assert page.task.lease is not None and page.task.paths == ["src/api/**", "tests/api/**"]
    [row] = [a for a in (await h.console.agents(bob)).agents if a.agent == "bob"]
    assert [c.held for c in row.holds] == [cards["api"].held]

    clock.advance(120)  # the lease ran out: nothing is held any more, the declared paths stay
    cards = {c.key: c for col in (await h.console.board(bob)).columns for c in col.cards}
    assert cards["api"].held == () and cards["api"].paths == ("src/api/**", "tests/api/**")
    page = await h.console.task(bob, "api")
    assert page.task.held_paths is None and page.task.shared_paths is None

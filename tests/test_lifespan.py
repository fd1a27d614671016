"""How a stdio server's calls wait for the database it opens in the background (`mcp.lifespan`)."""

from __future__ import annotations

from typing import Any, cast

import anyio
import pytest

from mcp_harness.errors import HarnessError, Unavailable
from mcp_harness.mcp.lifespan import HarnessState

pytestmark = pytest.mark.anyio


async def test_calls_that_waited_for_a_failed_opening_get_its_error_while_the_next_call_tries_again():
    """Calls waiting while the database was being opened get that attempt's error when it fails, even
    when a call arriving at that moment has already started the next attempt."""
    state = HarnessState(opens_itself=True)
    said: list[str] = []
    failure = Unavailable("the database cannot be opened: No such file or directory")

    async def call() -> None:
        try:
            await state.ready()
            said.append("ready")
        except HarnessError as exc:
            said.append(exc.message)

    async def attempt_again() -> None:
        await state.retry.wait()
        state.harness, state.open_error = cast(Any, "an open harness"), None
        state.opened.set()

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(call)
        tg.start_soon(attempt_again)
        await anyio.wait_all_tasks_blocked()
        state.open_error = failure  # the attempt fails ...
        state.opened.set()
        await state.ready()  # ... as another call arrives: it starts the next attempt and gets its result
    assert said == [failure.message] * 3
    assert state.harness == "an open harness"

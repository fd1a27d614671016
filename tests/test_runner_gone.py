"""A runner that died without a word (kill -9) is known at once on its machine: its open sessions say
`runner_gone` in listings and are orphans for the next runner, without waiting for its renewals to lapse."""

from __future__ import annotations

import os
import socket
import time

import pytest
from support import settings_for

from mcp_harness.service import Harness, Identity
from mcp_harness.sessions import pid_alive

pytestmark = pytest.mark.anyio

GONE = 2**22 + 7  # above the default pid_max: never a running process


def test_a_pid_is_alive_only_as_the_process_that_recorded_it():
    host = socket.gethostname()
    assert pid_alive(host, os.getpid(), time.time()) is True
    assert pid_alive(host, GONE, time.time()) is False
    assert pid_alive(host, os.getpid(), 1_000_000.0) is False  # a process started after the record: reused
    assert pid_alive(host + "-elsewhere", GONE, time.time()) is None  # another machine: unknown


async def test_the_sessions_of_a_runner_whose_process_is_gone_say_so_at_once(db_url, workspace):
    async with Harness.open(settings_for(db_url)) as h:
        host = socket.gethostname()
        await h.runs.register(workspace, "dead-runner", host, GONE)
        await h.runs.register(workspace, "live-runner", host, os.getpid())
        for session, runner in (("s-dead", "dead-runner"), ("s-live", "live-runner")):
            await h.runs.start_session(
                workspace,
                session,
                runner=runner,
                slot=1,
                agent=f"claude-code:{session}",
                task_key=None,
                kind="work",
                transcript=None,
            )
        ident = Identity(workspace, "olga")
        listed = {r.id: r for r in await h.runs.list(ident, live=True)}
        assert listed["s-dead"].runner_gone is True and listed["s-live"].runner_gone is None, listed
        assert "runner_gone" not in listed["s-live"].model_dump(mode="json")
        assert [r.id for r in await h.runs.live_runners(ident)] == ["live-runner"]
        assert [r.id for r in await h.runs.orphans(workspace)] == ["s-dead"]
        report = await h.status(ident)
        assert [s["runner_gone"] for s in report["running_sessions"] if s["id"] == "s-dead"] == [True], report

"""One agent process: started in its own process group, its output read line by line into the session's
transcript and observer, watched for a stall, a time-out, a setup error or a stop request, and stopped
by a fixed ladder (SIGINT, then SIGTERM, then SIGKILL to the whole group, a few seconds apart)."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import Process

from mcp_harness.runner.agents import Launch, Observed
from mcp_harness.runner.outcomes import Stop

LADDER = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)
#: seconds between the ladder's steps (MCP_HARNESS_RUNNER_STOP_GRACE)
GRACE = float(os.environ.get("MCP_HARNESS_RUNNER_STOP_GRACE") or 5)
TRANSCRIPT_BYTES = 4 * 1024 * 1024  #: a transcript keeps the stream's first 4 MiB, then says it was cut
LINE_BYTES = 8 * 1024 * 1024  #: a longer line is cut (the stream's events are far smaller)
TICK = 0.25  #: how often the watchdog looks
#: On Linux an agent is started through this, so it gets SIGTERM when the runner dies (kill -9, a lost
#: machine) instead of working on as an orphan beside the session a surviving runner starts on its
#: task: the parent-death signal is set, then the agent replaces this process (and keeps it).
DIE_WITH_RUNNER = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)\n"  # PR_SET_PDEATHSIG
    "os.getppid() == int(sys.argv[1]) or sys.exit(143)\n"  # the runner died before that: stop here
    "try:\n"
    "    os.execvp(sys.argv[2], sys.argv[2:])\n"
    "except OSError as exc:\n"
    "    sys.exit(f'the agent could not start: {sys.argv[2]}: {exc.strerror}')\n"
)


def tied_to_this_process(argv: list[str]) -> list[str]:
    """`argv` started so that it ends with this process (Linux), else as it is."""
    if not sys.platform.startswith("linux"):
        return argv
    return [sys.executable, "-S", "-c", DIE_WITH_RUNNER, str(os.getpid()), *argv]


class Transcript:
    """The session's stream as a file, bounded in size."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.written = 0
        self.cut = False
        self._file = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._file = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed by close()

    def write(self, line: str) -> None:
        if self._file is None or self.cut:
            return
        size = len(line.encode("utf-8", "replace")) + 1
        if self.written + size > TRANSCRIPT_BYTES:
            self.cut = True
            self._file.write(json.dumps({"type": "transcript_cut", "after_bytes": self.written}) + "\n")
            return
        self._file.write(line + "\n")
        self.written += size

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


@dataclass
class Control:
    """What the runner can ask of a running session."""

    stop: Stop | None = None
    kill_now: bool = False
    changed: anyio.Event = field(default_factory=anyio.Event)

    def request(self, why: Stop, *, at_once: bool = False) -> None:
        if self.stop is None:
            self.stop = why
        self.kill_now = self.kill_now or at_once
        self.changed.set()


@dataclass
class Ended:
    exit_code: int | None
    stop: Stop | None
    stderr: str  #: the last lines the agent wrote to stderr


def _signal_group(pid: int, sig: signal.Signals) -> bool:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


async def run(
    launch: Launch,
    observe: Callable[[str], None],
    seen: Observed,
    transcript: Transcript,
    control: Control,
    *,
    stall_seconds: float,
    session_seconds: float,
    on_output: Callable[[], None] = lambda: None,
) -> Ended:
    """Run the agent until it exits or is stopped; returns how it ended. Stalls count from the agent's
    start (`seen.started`, Claude Code's init event), so a slow start is not a stall."""
    started = time.monotonic()
    last_output = started
    errors: collections.deque[str] = collections.deque(maxlen=20)
    try:
        process = await anyio.open_process(
            tied_to_this_process(launch.argv),
            stdin=subprocess.DEVNULL,
            cwd=launch.cwd,
            env=launch.env,
            start_new_session=True,
        )
    except OSError as exc:
        return Ended(None, "setup_error", f"the agent could not start: {exc.strerror or exc}")

    drained = (anyio.Event(), anyio.Event())  # stdout, stderr at their end

    async def read_out(proc: Process) -> None:
        nonlocal last_output
        assert proc.stdout is not None
        buffer = b""
        async for chunk in proc.stdout:
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            if len(buffer) > LINE_BYTES:
                lines.append(buffer[:LINE_BYTES])
                buffer = b""
            for raw in lines:
                line = raw.decode("utf-8", "replace").rstrip("\r")
                last_output = time.monotonic()
                transcript.write(line)
                observe(line)
                on_output()
        if buffer:
            line = buffer.decode("utf-8", "replace")
            transcript.write(line)
            observe(line)
        drained[0].set()

    async def read_err(proc: Process) -> None:
        assert proc.stderr is not None
        async for chunk in proc.stderr:
            for line in chunk.decode("utf-8", "replace").splitlines():
                if line.strip():
                    errors.append(line[:500])
        drained[1].set()

    async def watch() -> None:
        while control.stop is None:
            at = time.monotonic()
            if seen.connected is False:
                control.request("setup_error")
            elif at - started > session_seconds:
                control.request("timed_out")
            elif seen.started and at - max(last_output, started) > stall_seconds:
                control.request("stalled")
            else:
                with anyio.move_on_after(TICK):
                    await control.changed.wait()

    async def stop_ladder() -> None:
        await control.changed.wait()
        while control.stop is None:  # woken for nothing: wait again
            control.changed = anyio.Event()
            await control.changed.wait()
        for sig in LADDER:
            if control.kill_now and sig != signal.SIGKILL:
                continue
            if not _signal_group(process.pid, sig):
                return
            with anyio.move_on_after(GRACE):
                while process.returncode is None:
                    if control.kill_now and sig != signal.SIGKILL:
                        break
                    await anyio.sleep(0.05)
            if process.returncode is not None:
                return

    async with process:
        async with anyio.create_task_group() as group:
            group.start_soon(watch)
            group.start_soon(stop_ladder)
            async with anyio.create_task_group() as readers:
                readers.start_soon(read_out, process)
                readers.start_soon(read_err, process)
                await process.wait()
                with anyio.move_on_after(3):  # what is left in the pipes; a child holding them is not waited on
                    for done in drained:
                        await done.wait()
                readers.cancel_scope.cancel()
            group.cancel_scope.cancel()
        code = process.returncode
    if not seen.started and not seen.lines and any("the agent could not start" in e for e in errors):
        control.request("setup_error")
    if _signal_group(process.pid, signal.SIGTERM):  # children left behind (a server, a shell) end too
        await anyio.sleep(0)
    return Ended(code, control.stop, "\n".join(errors))

"""The client's side of a server process's stdin and stdout, for every kind of stream the server serves.

A `Wire` starts `mcp-harness serve` (or any command) with stdin and stdout of one `MODES` kind, writes
raw lines, reads back what the server answers (every line it writes must be a JSON-RPC message), and
can close either direction or stop reading, as real clients do.
"""

from __future__ import annotations

import json
import os
import pty
import socket
import subprocess
import termios
import threading
import time
from pathlib import Path
from typing import Any

import pytest

#: mode -> (stdin, stdout); "same": stdout is stdin's stream (one socket, one terminal).
MODES = {
    "pipes": ("pipe", "pipe"),  # Python clients (the MCP SDK's stdio client)
    "socketpairs": ("socket", "socket"),  # Node clients (libuv): one socket pair per stream
    "one-socket": ("socket", "same"),  # socat EXEC:, inetd: one socket for both
    "terminal": ("pty", "same"),  # a person at a terminal
    "file-in": ("file", "pipe"),  # mcp-harness serve < requests.jsonl
    "file-out": ("pipe", "file"),  # mcp-harness serve > answers.jsonl
    "null-out": ("pipe", "null"),  # mcp-harness serve > /dev/null
}

#: what a client on a mode's streams cannot do, and why
CANNOT = {
    "terminal": {
        "long lines": "a terminal's line discipline cuts lines at 4 KiB",
        "closing stdout": "a terminal's output closes only with its input",
    },
    "file-out": {"a full stdout": "a file never fills", "closing stdout": "a client cannot close a file"},
    "null-out": {
        "a full stdout": "/dev/null never fills",
        "closing stdout": "/dev/null takes every answer",
        "reading": "what goes to /dev/null cannot be read",
    },
}


class Wire:
    def __init__(self, mode: str, command: list[str], env: dict[str, str], tmp_path: Path) -> None:
        self.mode = mode
        self.stdin_kind, self.stdout_kind = MODES[mode]
        self._command, self._env = command, env
        self.messages: list[dict[str, Any]] = []
        self.violations: list[bytes] = []  # stdout lines that are not JSON-RPC messages
        self._seen = threading.Condition()
        self._reader: threading.Thread | None = None
        self.proc: subprocess.Popen | None = None
        child_in, child_out = self._make_stdin(tmp_path), None
        if self.stdout_kind == "pipe":
            self._out_fd, child_out = os.pipe()
        elif self.stdout_kind == "socket":
            ours, theirs = socket.socketpair()
            self._out_fd, child_out = ours.detach(), theirs.detach()
        elif self.stdout_kind == "same":
            self._out_fd, child_out = self._in_fd, child_in
        elif self.stdout_kind == "file":
            self.answers_path = tmp_path / "answers.jsonl"
            child_out = os.open(self.answers_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        else:
            child_out = os.open(os.devnull, os.O_WRONLY)
        self._child_fds = [child_in, child_out]
        if self.stdin_kind != "file":
            self._start()

    # -- capabilities: what the client on this kind of stream can do ---------------------------------

    @property
    def readable(self) -> bool:
        return self.stdout_kind != "null"

    @property
    def live_input(self) -> bool:
        """The server reads while the client writes (not a file written before it starts)."""
        return self.stdin_kind != "file"

    def require(self, what: str) -> None:
        if why := CANNOT.get(self.mode, {}).get(what):
            pytest.skip(f"{self.mode}: {why}")

    # -- set-up ---------------------------------------------------------------------------------------

    def _make_stdin(self, tmp_path: Path) -> int:
        if self.stdin_kind == "pipe":
            child, self._in_fd = os.pipe()
            return child
        if self.stdin_kind == "socket":
            ours, child = socket.socketpair()
            self._in_fd = ours.detach()
            return child.detach()
        if self.stdin_kind == "pty":
            self._in_fd, child = pty.openpty()
            attrs = termios.tcgetattr(child)
            attrs[1] &= ~termios.OPOST  # answers cross unchanged (no \n -> \r\n)
            attrs[3] &= ~termios.ECHO  # our own requests are not echoed into the answers
            termios.tcsetattr(child, termios.TCSANOW, attrs)
            return child
        self.requests_path = tmp_path / "requests.jsonl"
        self._in_fd = os.open(self.requests_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        return os.open(self.requests_path, os.O_RDONLY)

    def _start(self) -> None:
        child_in, child_out = self._child_fds
        self.proc = subprocess.Popen(
            self._command, stdin=child_in, stdout=child_out, stderr=subprocess.PIPE, env=self._env
        )
        for fd in {child_in, child_out}:
            os.close(fd)  # the server's ends are its own now: their end reaches it as EOF

    # -- the client's moves ---------------------------------------------------------------------------

    def send(self, *lines: str | bytes | dict) -> None:
        for line in lines:
            data = json.dumps(line) if isinstance(line, dict) else line
            view = memoryview((data.encode() if isinstance(data, str) else data) + b"\n")
            while view:
                view = view[os.write(self._in_fd, view) :]

    def close_input(self) -> None:
        if self.stdin_kind == "pty":
            os.write(self._in_fd, b"\x04")  # end of input at the start of a line (VEOF)
        elif self.stdout_kind == "same":
            _shutdown(self._in_fd, socket.SHUT_WR)
        else:
            self._close_fd("_in_fd")
        if self.proc is None:
            self._start()

    def close_output(self) -> None:
        self.require("closing stdout")
        if self.stdout_kind == "same":
            _shutdown(self._out_fd, socket.SHUT_RD)
        else:
            self._close_fd("_out_fd")

    def read_in_background(self) -> None:
        """Read every answer as it comes (a client that keeps up)."""
        self.require("reading")
        self._reader = threading.Thread(target=self._read_all, daemon=True)
        self._reader.start()

    def _read_all(self) -> None:
        partial = b""
        while chunk := self._chunk():
            *lines, partial = (partial + chunk).split(b"\n")
            for line in lines:
                self._take(line)
        if partial.strip():
            self._take(partial)
        with self._seen:
            self._seen.notify_all()

    def _chunk(self) -> bytes:
        if self.stdout_kind == "file":
            with open(self.answers_path, "rb") as answers:
                answers.seek(self._file_offset)
                while True:
                    if data := answers.read(1 << 16):
                        self._file_offset += len(data)
                        return data
                    if self.proc is not None and self.proc.poll() is not None and not answers.read(1):
                        return b""
                    time.sleep(0.02)
        try:
            return os.read(self._out_fd, 1 << 16)
        except OSError:  # EIO: the terminal's other side has gone
            return b""

    _file_offset = 0

    def unread(self) -> bytes:
        """What stdout still holds that the client never read (after the server ended; no reader)."""
        assert self._reader is None and self.stdout_kind not in ("file", "null")
        os.set_blocking(self._out_fd, False)
        held = bytearray()
        while True:
            try:
                chunk = os.read(self._out_fd, 1 << 16)
            except OSError:  # EAGAIN: nothing more; EIO: the terminal's other side has gone
                return bytes(held)
            if not chunk:
                return bytes(held)
            held += chunk

    def _take(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        with self._seen:
            if isinstance(message, dict) and message.get("jsonrpc") == "2.0":
                self.messages.append(message)
            else:
                self.violations.append(line)
            self._seen.notify_all()

    def answers(self, *ids: Any, timeout: float = 60) -> dict[Any, dict]:
        """The answers by id, once every one of `ids` has come (exactly one answer each)."""
        with self._seen:
            done = self._seen.wait_for(lambda: set(ids) <= {m.get("id") for m in self.messages}, timeout)
        assert done, f"no answer to {set(ids) - {m.get('id') for m in self.messages}} in {timeout} s"
        return self.by_id()

    def by_id(self) -> dict[Any, dict]:
        with self._seen:
            ids = [m["id"] for m in self.messages if m.get("id") is not None]
            assert len(ids) == len(set(ids)), "a request was answered twice"
            return {m["id"]: m for m in self.messages if m.get("id") is not None}

    def finish(self, timeout: float = 60) -> tuple[int, str]:
        """Wait for the server to end; its exit status and stderr. Every stdout line was JSON-RPC."""
        assert self.proc is not None
        try:
            _, stderr = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, stderr = self.proc.communicate()
            raise AssertionError(f"{self.mode}: the server did not end within {timeout} s; {stderr.decode()}") from None
        if self._reader is not None:
            self._reader.join(timeout=10)
        assert not self.violations, f"stdout carried something else than JSON-RPC: {self.violations[:3]}"
        return self.proc.returncode, stderr.decode()

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc is not None and self.proc.stderr is not None:
            self.proc.stderr.close()
        self._close_fd("_in_fd")
        self._close_fd("_out_fd")

    def _close_fd(self, name: str) -> None:
        fd = getattr(self, name, -1)
        if fd < 0:
            return
        for other in ("_in_fd", "_out_fd"):  # one socket or terminal may be both
            if getattr(self, other, -1) == fd:
                setattr(self, other, -1)
        os.close(fd)


def _shutdown(fd: int, how: int) -> None:
    with socket.socket(fileno=os.dup(fd)) as sock:  # shutdown acts on the socket, whichever fd names it
        sock.shutdown(how)

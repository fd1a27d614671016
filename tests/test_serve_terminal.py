"""`mcp-harness serve` typed by a person (stdin a terminal) says what it is doing; under a client, nothing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from support import subprocess_env


@pytest.mark.slow
def test_serve_on_a_terminal_says_what_it_is_and_a_client_sees_nothing(tmp_path):
    """A person who types `mcp-harness serve` is told what is happening; a client (stdin a pipe) is not."""
    import pty
    import select

    db = str(tmp_path / "h.db")
    command = [sys.executable, "-m", "mcp_harness", "serve", "--db", db, "--workspace", "shop"]
    piped = subprocess.run(
        command, capture_output=True, text=True, env=subprocess_env(), stdin=subprocess.DEVNULL, timeout=60
    )
    assert piped.returncode == 0 and piped.stderr == "", piped.stderr
    controller, terminal = pty.openpty()
    proc = subprocess.Popen(
        command, stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=subprocess_env()
    )
    try:
        ready, _, _ = select.select([proc.stderr], [], [], 30)
        assert ready, "nothing said on stderr within 30 s"
        line = proc.stderr.readline().decode()
        assert line.startswith("mcp-harness: serving MCP on stdio for workspace 'shop'"), line
        assert '(docs/setup.md, "Connect a client")' in line and "Ctrl-C stops" in line
    finally:
        proc.kill()
        proc.wait(timeout=30)
        os.close(controller)
        os.close(terminal)

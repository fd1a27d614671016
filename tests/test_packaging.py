"""Packaging: the README's test command is what CI runs, and a wheel built from this checkout
installs into a fresh virtual environment and serves."""

from __future__ import annotations

import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from support import subprocess_env

ROOT = Path(__file__).resolve().parent.parent


def readme_command(after: str) -> str:
    """The first fenced shell command that follows the line starting with `after` in the README."""
    text = (ROOT / "README.md").read_text()
    start = text.index(after)
    return re.search(r"```sh\n(.+?)\n```", text[start:], re.S).group(1).strip()


def test_ci_runs_exactly_the_readme_test_command():
    command = readme_command("Run the tests")
    assert command.startswith(".venv/bin/")  # pasted into a fresh shell: no activated venv needed
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert command in ci, "keep .ci/run and the README's test command in sync"
    assert readme_command("Install and run the server").startswith("python3 -m venv .venv && ")


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_wheel_built_from_the_checkout_installs_and_serves(tmp_path):
    dist = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)], capture_output=True, text=True, timeout=600
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    [wheel] = dist.glob("*.whl")
    assert len(list(dist.glob("*.tar.gz"))) == 1
    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, dist.iterdir())],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    installed = subprocess.run(
        [str(env_dir / "bin" / "pip"), "install", "-q", str(wheel)], capture_output=True, text=True, timeout=900
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    server = StdioServerParameters(
        command=str(env_dir / "bin" / "mcp-harness"),
        args=["serve", "--db", str(tmp_path / "h.db"), "--workspace", "wheel"],
        env=subprocess_env(),
        cwd=str(tmp_path),
    )
    async with Client(server, read_timeout_seconds=60) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"save_checkpoint", "restore_state", "claim_task"} <= tools
        result = await client.call_tool("save_checkpoint", {"state": {"from": "wheel"}})
        assert not result.is_error and result.structured_content["version"] == 1

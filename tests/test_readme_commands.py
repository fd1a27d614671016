"""Every command README.md and CONTRIBUTING.md show runs as written in a fresh shell on a fresh clone:
no activated virtual environment (the README says none is needed), so Python runs as `.venv/bin/python`
and `mcp-harness` is either on PATH (the quick start installs it with pipx or uv) or `.venv/bin/...`.
The safe ones (reading, no server left running, no install) are run."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ("README.md", "CONTRIBUTING.md")
#: commands that are safe to run here as written (with `.venv/bin/` meaning this test's environment)
SAFE = ("tools/bench_hooks.py",)


def commands(name: str) -> list[str]:
    """Shell lines of fenced `sh` blocks and inline code spans that start with a command."""
    text = (ROOT / name).read_text()
    found = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        found += [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]
    found += re.findall(r"`((?:[A-Z_]+=\S+ )?(?:\.venv/bin/)?python3? [^`]+)`", text)
    return found


@pytest.mark.parametrize("name", DOCS)
def test_python_commands_run_without_an_activated_environment(name):
    shown = commands(name)
    assert shown, f"no command found in {name}: the extraction broke"
    bare = [c for c in shown if re.match(r"^([A-Z_]+=\S+ )?python3? ", c) and not c.startswith("python3 -m venv")]
    assert bare == [], f"{name}: write these as they run without an activated venv (.venv/bin/python ...): {bare}"


@pytest.mark.slow
def test_the_safe_commands_run_as_written(tmp_path):
    shown = [c for name in DOCS for c in commands(name) if any(s in c for s in SAFE)]
    assert shown, "no safe command found in the README"
    for line in shown:
        words = shlex.split(line)
        words = [sys.executable if w == ".venv/bin/python" else w for w in words]
        if "bench_hooks.py" in line:
            words += ["--rounds", "3"]
        done = subprocess.run(words, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode in (0, 1) and "Traceback" not in done.stderr, (line, done.stderr)
        assert "median" in done.stdout, (line, done.stdout)

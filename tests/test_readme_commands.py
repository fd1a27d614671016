"""Every command README.md, CONTRIBUTING.md and the docs site's pages show runs as written in a fresh
shell on a fresh clone: no activated virtual environment (the README says none is needed), so Python
runs as `.venv/bin/python` and `mcp-harness` is either on PATH (pipx or uv install it) or
`.venv/bin/...`. The safe ones (reading, no server left running, no install) are run."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = tuple(sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md")))
DOCS = ("README.md", "CONTRIBUTING.md", *PAGES)
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
    if name in ("README.md", "CONTRIBUTING.md"):
        assert shown, f"no command found in {name}: the extraction broke"
    bare = [
        c
        for c in shown
        if re.match(r"^([A-Z_]+=\S+ )?python3? ", c)
        and not c.startswith(("python3 -m venv", "python3 -m pip install --user", "python3 -m pipx"))
    ]
    assert bare == [], f"{name}: write these as they run without an activated venv (.venv/bin/python ...): {bare}"


@pytest.mark.slow
def test_the_safe_commands_run_as_written(tmp_path):
    shown = [c for name in DOCS for c in commands(name) if any(s in c for s in SAFE)]
    assert shown, "no safe command found in the README"
    for line in shown:
        words = shlex.split(line)
        words = [sys.executable if w == ".venv/bin/python" else w for w in words]
        if "bench_hooks.py" in line:
            words += ["--rounds", "3", "--sessions", "1"]
        done = subprocess.run(words, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode in (0, 1) and "Traceback" not in done.stderr, (line, done.stderr)
        assert "median" in done.stdout, (line, done.stdout)


@pytest.mark.parametrize("name", ("README.md", "CONTRIBUTING.md", *PAGES))
def test_local_links_name_files_that_exist(name):
    """A link to a file of the repository (README to docs/, a page to another page or a picture) resolves;
    the docs site's strict build checks its own pages again in CI."""
    page = ROOT / name
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text())
    local = [t for t in targets if "://" not in t and not t.startswith("mailto:")]
    missing = [t for t in local if not (page.parent / t).exists()]
    assert missing == [], f"{name} links to files that do not exist: {missing}"


def test_every_page_is_in_the_site_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = [str(Path(p).relative_to("docs")) for p in PAGES]
    assert [p for p in pages if f" {p}" not in nav] == [], "add the page to mkdocs.yml's nav"

"""The real Claude Code CLI for the tests: the pinned release, installed once, run with a private HOME
against a `ScriptedModel`.

The npm package ships the native binary; npm skips its postinstall script, which is fine: the binary
is at `node_modules/@anthropic-ai/claude-code-linux-x64/claude`. `.ci/run` installs it with
`python tests/support/claude_code.py` (which prints the binary's path); tests find it through
`MCP_HARNESS_TEST_CLAUDE`, else install it themselves into the user's cache, else skip saying why.
"""

from __future__ import annotations

import json
import os
import platform
import queue
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

VERSION = "2.1.332"  #: the Claude Code release the tests drive (the README names it)
ENV = "MCP_HARNESS_TEST_CLAUDE"  #: the binary to use, when set


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mcp-harness-tests" / f"claude-code-{VERSION}"


def _platform_package() -> str:
    machine = {"x86_64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine(), platform.machine())
    return f"claude-code-{sys.platform}-{machine}"


def binary_in(prefix: Path) -> Path:
    return prefix / "node_modules" / "@anthropic-ai" / _platform_package() / "claude"


def install(prefix: Path | None = None) -> Path:
    """Install the pinned release under `prefix` (once) and return the binary; raises RuntimeError with
    the reason when it cannot."""
    prefix = prefix or cache_dir()
    found = binary_in(prefix)
    if found.is_file() and os.access(found, os.X_OK):
        return found
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not installed: the tests through the real Claude Code need it")
    prefix.mkdir(parents=True, exist_ok=True)
    run = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix), f"@anthropic-ai/claude-code@{VERSION}"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if run.returncode != 0 or not found.is_file():
        tail = (run.stderr or run.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"npm could not install @anthropic-ai/claude-code@{VERSION}: {' / '.join(tail)}")
    return found


def locate() -> Path:
    """The binary the tests use: `MCP_HARNESS_TEST_CLAUDE`, else the pinned release installed here."""
    given = os.environ.get(ENV)
    if given:
        return Path(given)
    return install()


def environment(home: Path, model_url: str, **extra: str) -> dict[str, str]:
    """What a Claude Code process gets: a private HOME, the scripted model, no retries, no telemetry,
    and the MCP servers connected before the first turn."""
    keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "MCP_HARNESS_TEST_POSTGRES_URL")
    env = {k: v for k, v in os.environ.items() if k in keep}
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = venv_bin + os.pathsep + env.get("PATH", "/usr/bin:/bin")
    env.update(
        HOME=str(home),
        ANTHROPIC_API_KEY="sk-ant-scripted",
        ANTHROPIC_BASE_URL=model_url,
        CLAUDE_CODE_MAX_RETRIES="0",
        DISABLE_TELEMETRY="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_ERROR_REPORTING="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        MCP_CONNECTION_NONBLOCKING="0",
        MCP_CONNECT_TIMEOUT_MS="30000",
    )
    env.update(extra)
    return env


def trust(home: Path, *projects: Path) -> None:
    """Mark `projects` as trusted in the private HOME, as a person's first interactive run does (its trust
    dialog): Claude Code ignores a project's `permissions.allow` until then."""
    path = home / ".claude.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    for project in projects:
        data.setdefault("projects", {}).setdefault(str(project.resolve()), {})["hasTrustDialogAccepted"] = True
    home.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


@dataclass
class Run:
    """One finished `claude -p` run: its exit code, its stream-json events and its stderr."""

    returncode: int
    events: list[dict[str, Any]]
    stderr: str

    def of(self, kind: str, subtype: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == kind and (subtype is None or e.get("subtype") == subtype)]

    @property
    def init(self) -> dict[str, Any]:
        found = self.of("system", "init")
        assert found, f"no init event; stderr: {self.stderr[-500:]}"
        return found[0]

    @property
    def result(self) -> dict[str, Any]:
        found = self.of("result")
        assert found, f"no result event (exit {self.returncode}); stderr: {self.stderr[-500:]}"
        return found[-1]

    @property
    def session(self) -> str:
        """The session id Claude Code reports for this run (a new one after `/clear`)."""
        return str(self.init["session_id"])

    def hook_context(self, hook_name: str) -> list[str]:
        """The context each run of a hook (`SessionStart:compact`, `UserPromptSubmit`...) gave the model."""
        found = []
        for event in self.of("system", "hook_response"):
            if event.get("hook_name") == hook_name:
                try:
                    answer = json.loads(event.get("output") or "{}")
                except ValueError:
                    answer = {}
                found.append(answer.get("hookSpecificOutput", {}).get("additionalContext", ""))
        return found

    def server_status(self, name: str = "harness") -> str | None:
        for server in self.init.get("mcp_servers", []):
            if server.get("name") == name:
                return server.get("status")
        return None

    def tool_results(self) -> list[tuple[str, bool]]:
        """(text, is_error) of every tool result Claude Code sent back to the model, in order."""
        found = []
        for event in self.of("user"):
            for block in event.get("message", {}).get("content", []):
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    content = block.get("content")
                    text = content if isinstance(content, str) else "".join(c.get("text", "") for c in content or [])
                    found.append((text, bool(block.get("is_error"))))
        return found


def parse_stream(text: str) -> list[dict[str, Any]]:
    events = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
    return events


def claude_command(binary: Path, prompt: str, *args: str) -> list[str]:
    return [str(binary), "-p", prompt, "--output-format", "stream-json", "--verbose", *args]


def run_claude(binary: Path, cwd: Path, env: dict[str, str], prompt: str, *args: str, timeout: float = 120) -> Run:
    done = subprocess.run(
        claude_command(binary, prompt, *args),
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    return Run(done.returncode, parse_stream(done.stdout), done.stderr)


class Conversation:
    """One `claude -p` process taking its prompts one at a time on stdin (`--input-format stream-json`),
    as an SDK or a person at the prompt does: the same session and the same MCP server for every turn,
    so a test can act between turns (send a message, release a lease) and `/clear` or `/compact`
    happen inside a live session. `turn(prompt)` sends one prompt and returns that turn's events (as a
    `Run` whose exit code is 0: the process goes on; `close()` gives the real one)."""

    def __init__(self, binary: Path, cwd: Path, env: dict[str, str], *args: str) -> None:
        command = [str(binary), "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose"]
        self.proc = subprocess.Popen(
            [*command, *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.events: list[dict[str, Any]] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._errors: list[str] = []  # drained as it comes, so a chatty stderr never blocks the process
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._errors.append(line)

    def turn(self, prompt: str, timeout: float = 120) -> Run:
        assert self.proc.stdin is not None
        message = {"type": "user", "message": {"role": "user", "content": prompt}}
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()
        got: list[dict[str, Any]] = []
        while True:
            try:
                line = self._lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no result within {timeout} s for {prompt!r}: {got[-3:]}") from None
            if line is None:
                raise AssertionError(f"claude exited during {prompt!r}: {self.stderr()[-500:]}")
            got += parse_stream(line)
            if got and got[-1].get("type") == "result":
                self.events += got
                return Run(0, got, "")

    def stderr(self) -> str:
        return "".join(self._errors)

    def close(self, timeout: float = 60) -> int:
        """Close stdin (the session's end) and wait for the process to exit."""
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> Conversation:
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.close()


if __name__ == "__main__":  # `.ci/run`: install the pinned release, print where its binary is
    try:
        print(install(Path(sys.argv[1]) if len(sys.argv) > 1 else None))
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        sys.exit(1)

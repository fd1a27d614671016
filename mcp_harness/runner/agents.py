"""The agents a runner can start: what one session runs (argv, environment, folder) and what its output
says. Claude Code is first-class; `CommandAgent` runs any other CLI agent from a template."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_harness.errors import InvalidArgument
from mcp_harness.identity import KEEP_LEASES_VARIABLE, reserved_agent

SERVER_NAME = "harness"  #: the MCP server's name in each session's config (tools `mcp__harness__*`)
LAST_WORDS = 300  #: characters of a session's last words kept in its record and notes
#: what Claude Code prints when a usage limit stops it ("... limit reached ... resets 3pm")
LIMIT_TEXT = re.compile(r"\blimit\b.*\bresets?\b", re.IGNORECASE | re.DOTALL)
#: the session's own server and hooks leave its leases to the runner, which ends them with its note
RUNNER_OWNS_THE_LEASE = {KEEP_LEASES_VARIABLE: "1"}
#: the system error code Claude Code names when it cannot reach the model API ("... (ECONNREFUSED)")
NET_CODE = re.compile(r"\b(E[A-Z]{3,})\b")
PLACEHOLDERS = ("prompt", "prompt_file", "session", "task_key", "mcp_config", "workdir")


@dataclass
class Plan:
    """One session to start: who it is, what it works on, where."""

    session: str  #: the session's UUID
    agent: str  #: the harness identity it acts as
    prompt: str
    workdir: Path
    mcp_config: Path  #: this session's MCP configuration file
    prompt_file: Path
    task_key: str | None
    lease_token: str | None


@dataclass
class Launch:
    argv: list[str]
    env: dict[str, str]
    cwd: Path


@dataclass
class Observed:
    """What a session's output said, as it arrives."""

    connected: bool | None = None  #: the harness server's status in the stream's init event
    server_status: str | None = None
    started: bool = False  #: the agent is up (the init event, or any output of an agent without one)
    turns: int = 0
    cost_usd: float | None = None
    last_words: str = ""
    last_tool: str | None = None
    result: dict[str, Any] | None = None  #: the final `result` event
    rate_limited: bool = False  #: the API refused the session for a limit (a final answer said so)
    retrying: bool = False  #: Claude Code is retrying a 429/529 and no answer came since
    reset_at: float | None = None  #: when a rate limit resets, if the API said
    harness_calls: int = 0
    lines: int = 0
    #: the session's surroundings ended it before it could work (the model API unreachable, or refusing
    #: the credentials): what to check, for the person who runs the runner
    setup_cause: str | None = None

    @property
    def limited(self) -> bool:
        """A usage or rate limit ended the session: said so, or a retry of one was never answered."""
        return self.rate_limited or (self.retrying and not (self.result and not self.result.get("is_error")))

    def words(self) -> str:
        text = " ".join(self.last_words.split())
        return text if len(text) <= LAST_WORDS else text[: LAST_WORDS - 1] + "…"


def api_setup_cause(event: dict[str, Any], text: str) -> str | None:
    """What to check when Claude Code's API error (an assistant message with `is_api_error_message`, or
    a final `result` with `is_error`) is the environment's fault, not the task's: the API unreachable
    (`api_error: "connection_failed"`) or the credentials refused (`error: "authentication_failed"`,
    `api_error_status` 401 or 403). None for any other error (a 429 or 529 is a rate limit)."""
    status = event.get("api_error_status")
    said = " ".join(text.split())[:120]
    if status in (401, 403) or event.get("error") == "authentication_failed":
        detail = f"HTTP {status}" if status in (401, 403) else said or "authentication failed"
        return (
            f"the model API refused the credentials ({detail}): check ANTHROPIC_API_KEY "
            "(or Claude Code's login: `claude /login`) and ANTHROPIC_BASE_URL"
        )
    if event.get("api_error") == "connection_failed":
        code = NET_CODE.search(text)
        if code is not None and code.group(1) == "ECONNREFUSED":
            return "the model API refused the connection (ECONNREFUSED): check ANTHROPIC_BASE_URL"
        detail = code.group(1) if code is not None else said or "connection failed"
        return f"the model API could not be reached ({detail}): check ANTHROPIC_BASE_URL, the network and any proxy"
    return None


def harness_command(db_url: str, workspace: str, agent_base: str) -> list[str]:
    """How a session's stdio server is started: this very installation of mcp-harness."""
    return [
        sys.executable,
        "-m",
        "mcp_harness",
        "serve",
        "--db",
        db_url,
        "--workspace",
        workspace,
        "--agent",
        agent_base,
    ]


def mcp_config(db_url: str, workspace: str, agent_base: str, session: str) -> dict[str, Any]:
    """The per-session MCP configuration: this harness's stdio server, as the session's own identity."""
    command = harness_command(db_url, workspace, agent_base)
    env = {"MCP_HARNESS_SESSION": session, **RUNNER_OWNS_THE_LEASE}
    server = {"type": "stdio", "command": command[0], "args": command[1:], "env": env}
    return {"mcpServers": {SERVER_NAME: server}}


class ClaudeCode:
    """`claude -p` with the stream on stdout; its identity is `claude-code:<first 8 of the session>`."""

    base = "claude-code"
    streams_json = True

    def __init__(self, binary: str, extra: list[str]) -> None:
        self.binary = binary
        self.extra = extra

    def launch(self, plan: Plan) -> Launch:
        argv = [
            self.binary,
            "-p",
            plan.prompt,
            "--output-format",
            "stream-json",
            "--verbose",
            "--session-id",
            plan.session,
            "--mcp-config",
            str(plan.mcp_config),
            "--strict-mcp-config",
            "--allowedTools",
            f"mcp__{SERVER_NAME}",
            *self.extra,
        ]
        env = dict(os.environ)
        env.update(MCP_CONNECTION_NONBLOCKING="0", MCP_CONNECT_TIMEOUT_MS="30000", **RUNNER_OWNS_THE_LEASE)
        env.setdefault("CLAUDE_CODE_MAX_RETRIES", "2")
        env.pop("CLAUDECODE", None)  # a runner started from inside a Claude Code session starts fresh ones
        return Launch(argv, env, plan.workdir)

    def observe(self, seen: Observed, line: str) -> None:
        """Read one line of the stream-json output into `seen`."""
        seen.lines += 1
        try:
            event = json.loads(line)
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        kind, subtype = event.get("type"), event.get("subtype")
        if kind == "system" and subtype == "init":
            seen.started = True
            status = next((s.get("status") for s in event.get("mcp_servers", []) if s.get("name") == SERVER_NAME), None)
            seen.server_status = status
            seen.connected = status == "connected"
        elif kind == "assistant":
            said = ""
            seen.retrying = False  # a retried request was answered after all
            seen.turns += 1
            for block in (event.get("message") or {}).get("content") or []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text" and str(block.get("text", "")).strip():
                    seen.last_words = said = str(block["text"])
                elif block.get("type") == "tool_use":
                    seen.last_tool = str(block.get("name"))
                    if seen.last_tool.startswith(f"mcp__{SERVER_NAME}__"):
                        seen.harness_calls += 1
            # Claude Code's own message standing for the answer an API error kept from coming
            seen.setup_cause = api_setup_cause(event, said) if event.get("is_api_error_message") else None
        elif kind == "system" and subtype == "api_retry":
            if event.get("error_status") in (429, 529):
                seen.retrying = True
        elif kind == "rate_limit_event":
            info = event.get("rate_limit_info") or event
            if info.get("status") == "rejected":
                seen.rate_limited = True
                reset = info.get("resetsAt") or info.get("resets_at")
                if isinstance(reset, int | float):
                    seen.reset_at = float(reset)
        elif kind == "result":
            seen.result = event
            if isinstance(event.get("total_cost_usd"), int | float):
                seen.cost_usd = float(event["total_cost_usd"])
            if isinstance(event.get("num_turns"), int):
                seen.turns = max(seen.turns, event["num_turns"])
            text = event.get("result")
            if isinstance(text, str) and text.strip():
                seen.last_words = text
            if event.get("is_error") and event.get("api_error_status") in (429, 529):
                seen.rate_limited = True
            if event.get("is_error") and isinstance(text, str) and LIMIT_TEXT.search(text):
                seen.rate_limited = True
            if not event.get("is_error"):
                seen.setup_cause = None
            else:
                seen.setup_cause = api_setup_cause(event, text if isinstance(text, str) else "") or seen.setup_cause


class CommandAgent:
    """Any CLI agent, from a template split into arguments before its placeholders are filled (each
    filling one argument) and run without a shell: no task text can become a command."""

    streams_json = False

    def __init__(self, template: str, extra: list[str]) -> None:
        try:
            self.words = shlex.split(template)
        except ValueError as exc:
            raise InvalidArgument(f"--command is not a valid command line: {exc}") from None
        if not self.words:
            raise InvalidArgument("--command is empty: give the agent's command, e.g. 'my-agent --prompt {prompt}'")
        unknown = {m for w in self.words for m in re.findall(r"\{([a-z_]+)\}", w)} - set(PLACEHOLDERS)
        if unknown:
            raise InvalidArgument(
                f"--command names unknown placeholders {sorted(unknown)}: use {', '.join(PLACEHOLDERS)}"
            )
        self.extra = extra
        name = re.sub(r"[^A-Za-z0-9._-]", "", Path(self.words[0]).name)[:40]
        self.base = name if name and not reserved_agent(name) else "agent"

    def launch(self, plan: Plan) -> Launch:
        values = {
            "prompt": plan.prompt,
            "prompt_file": str(plan.prompt_file),
            "session": plan.session,
            "task_key": plan.task_key or "",
            "mcp_config": str(plan.mcp_config),
            "workdir": str(plan.workdir),
        }
        argv = [re.sub(r"\{([a-z_]+)\}", lambda m: values[m.group(1)], word) for word in self.words]
        env = dict(os.environ)
        env.update(MCP_HARNESS_SESSION=plan.session, MCP_HARNESS_TASK=plan.task_key or "", **RUNNER_OWNS_THE_LEASE)
        env["MCP_HARNESS_LEASE_TOKEN"] = plan.lease_token or ""
        return Launch([*argv, *self.extra], env, plan.workdir)

    def observe(self, seen: Observed, line: str) -> None:
        seen.lines += 1
        seen.started = True
        if line.strip():
            seen.last_words = line
            low = line.lower()
            if "rate limit" in low or "usage limit" in low:
                seen.rate_limited = True


def choose(claude: str | None, command: str | None, extra: list[str]) -> ClaudeCode | CommandAgent:
    """The agent of a run: `--command`, else Claude Code (`--claude`, `MCP_HARNESS_CLAUDE`, `claude` on PATH)."""
    if command is not None:
        return CommandAgent(command, extra)
    import shutil

    binary = claude or os.environ.get("MCP_HARNESS_CLAUDE") or shutil.which("claude")
    if binary and not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        found = shutil.which(binary)
        if found is None:
            raise InvalidArgument(f"Claude Code's binary {binary!r} is not an executable file: check --claude")
        binary = found
    if not binary:
        raise InvalidArgument(
            "Claude Code's `claude` is not on PATH: install it (npm install -g @anthropic-ai/claude-code), "
            "give its path with --claude PATH (or MCP_HARNESS_CLAUDE), or run another agent with --command"
        )
    return ClaudeCode(binary, extra)

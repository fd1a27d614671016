"""The `mcp-harness` command line: `main` parses, dispatches and is the one error boundary.

`mcp-harness hook EVENT` is dispatched before anything else is imported: Claude Code runs it on every
prompt, so it must cost little more than starting Python (see `hook.py`); so is `mcp-harness guard`, which
git runs on every commit (`guard.py`)."""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    if words[:1] == ["hook"]:
        if (
            words[1:2] in (["PreCompact"], ["SessionEnd"], ["StopFailure"])
            and "MCP_HARNESS_HOOK_DETACHED" not in os.environ
        ):
            import signal

            # Claude Code stops waiting for such a hook with SIGTERM, and kills it only later: that
            # is time enough to hand the write to a process that outlives both (`hook.detach`)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        from mcp_harness.cli.hook import run

        return run(words[1:], detached=True)
    if words[:1] == ["guard"]:  # the git pre-commit check: as lean as the hooks
        from mcp_harness.cli.guard import run as guard

        return guard(words[1:])
    from mcp_harness.cli.main import main as command_line

    return command_line(argv)


__all__ = ["main"]

"""`mcp-harness run`: the session runner, which keeps the work going when nobody is at the keyboard.

It claims one task at a time for a session identity it chooses, starts a headless agent session on
it (Claude Code by default, any CLI agent through a command template), keeps the lease alive while
the process lives, watches the process (stalls, time-outs, rate limits), decides how the session
ended from the task's state in the harness, settles what is left, records the session and goes on
until the plan is done, a person must act, or a budget is spent.

- `agents.py`: what a session starts (argv, environment, the per-session MCP config) and what its
  output stream says (turns, cost, last words, rate limits, the harness server's status).
- `prompt.py`: the session's prompt (the discipline first, the task's fields as quoted data).
- `outcomes.py`: the one word each session ends with.
- `process.py`: one agent process in its own process group: its stream, watchdog and stop ladder.
- `worktrees.py`: a persistent linked worktree per slot; work left behind is committed, never lost.
- `loop.py`: the runner: slots, claims, budgets, pauses, breakers, signals.
- `display.py`: a live line per slot on a terminal, plain lines otherwise, and the summary.
- `command.py`: the `run` and `sessions` commands.
"""

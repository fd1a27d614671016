"""The operator console: a live web view of a workspace's board, tasks, dependencies, timeline,
threads and agents, with the operator's actions. Served by `mcp-harness ui` (one machine, a one-time
login code; `command.py`, `serve.py`) and by the shared HTTP server at `/ui` (sign-in with a bearer
token; `routes.py`). Importing the package loads nothing: the CLI starts as fast as before."""

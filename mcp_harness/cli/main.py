"""`mcp-harness` subcommands. One error boundary: a one-line reason on stderr and a non-zero exit."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from mcp_harness.cli.output import clean
from mcp_harness.cli.parser import build_parser
from mcp_harness.config import ENV_PREFIX
from mcp_harness.errors import HarnessError, harness_error_in

#: command -> "module:function" in this package, imported only when that command runs (a server start
#: must not pay for tables, progress bars or client configuration)
COMMANDS: dict[str, str] = {
    "serve": "serve:cmd_serve",
    "log": "reading:cmd_log",
    "tasks": "reading:cmd_tasks",
    "review": "review:cmd_review",
    "msg": "messages:cmd_msg",
    "history": "reading:cmd_history",
    "show": "reading:cmd_show",
    "status": "reading:cmd_status",
    "brief": "brief:cmd_brief",
    "schema": "admin:cmd_schema",
    "token": "admin:cmd_token",
    "export": "admin:cmd_export",
    "import": "admin:cmd_import",
    "prune": "admin:cmd_prune",
    "config": "clients:cmd_config",
    "init": "init:cmd_init",
    "hook": "hook:cmd_hook",  # normally dispatched before this parser (cli/__init__.py)
    "guard": "guard:cmd_guard",  # likewise
}


def run_command(args: argparse.Namespace) -> int:
    handler = getattr(args, "handler", None)  # a command defined beside its adapter (`ui`: console/command.py)
    if handler is not None:
        return handler(args)
    module, function = COMMANDS[args.command].split(":")
    return getattr(importlib.import_module(f"{__package__}.{module}"), function)(args)


def main(argv: list[str] | None = None) -> int:
    for word in sys.argv[1:] if argv is None else argv:  # bytes that are not UTF-8 arrive as lone surrogates
        try:
            word.encode("utf-8")
        except UnicodeEncodeError:
            shown = word.encode("utf-8", "surrogateescape").decode("ascii", "backslashreplace")
            print(f"mcp-harness: the argument '{shown}' is not valid UTF-8: names and texts are UTF-8", file=sys.stderr)
            return 2
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=os.environ.get(ENV_PREFIX + "LOG_LEVEL", "WARNING").upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        if getattr(args, "workspace", "") is None:  # inside a project set up with `init`: its workspace
            from mcp_harness.cli.locate import apply_project_defaults

            apply_project_defaults(args)
        status = run_command(args)
        sys.stdout.flush()  # a closed stdout shows here, inside the boundary
        return status
    except BrokenPipeError:
        return stdout_closed()
    except (HarnessError, BaseExceptionGroup) as exc:  # a server's task group wraps what stopped it
        reason = harness_error_in(exc)
        if reason is None:
            raise
        print(f"mcp-harness: {clean(reason.message, multiline=False)}", file=sys.stderr)  # may quote a server
        return 2
    except KeyboardInterrupt:
        return 130
    except OSError as exc:
        print(f"mcp-harness: {exc}", file=sys.stderr)
        return 1


def stdout_closed() -> int:
    """The reader of stdout went away (`| head`): not an error. Point stdout at /dev/null so the
    interpreter's last flush at exit does not complain either."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    finally:
        os.close(devnull)
    return 0

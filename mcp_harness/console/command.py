"""`mcp-harness ui`: its arguments and how it runs (the console's libraries load only when it runs)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from mcp_harness.config import ENV_PREFIX, Settings


def port_number(text: str) -> int:
    """A TCP port: a whole number from 0 (any free port) to 65535."""
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port: use a whole number from 0 to 65535")
    return int(text)


def add_parser(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("ui", parents=parents, help="the operator console in a browser (on 127.0.0.1)")
    default_port = int(os.environ.get(ENV_PREFIX + "UI_PORT") or "8766")
    p.add_argument("--port", type=port_number, default=default_port, help="0: any free port")
    p.add_argument("--agent", default=None, help="your name in what you do (default: your login name)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from mcp_harness.cli.common import check_db
    from mcp_harness.console.serve import serve_ui

    check_db(args, existing=False)  # as `run`: a first look may make the database, not a mistyped path's folder
    return serve_ui(Settings.from_env(args.db), args)

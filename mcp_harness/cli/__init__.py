"""The `mcp-harness` command line: `main` parses, dispatches and is the one error boundary."""

from .main import main

__all__ = ["main"]

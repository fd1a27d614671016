"""The command line's grammar: every subcommand and its flags (argparse, nothing imported to run them)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import NoReturn

from mcp_harness import __version__
from mcp_harness.cli.common import env
from mcp_harness.config import MAX_INT
from mcp_harness.console import command as ui_command
from mcp_harness.identity import ROLES
from mcp_harness.runner import command as runner_command
from mcp_harness.tasks.rules import PERSON_ACTIONS, RULES, SHOWN, Action, Status

CLIENTS = ("claude-code", "cursor", "vscode", "claude-desktop")
STATUSES = SHOWN  #: every status a task may show (`tasks.rules`)
#: `--agent` of the commands a person runs as an operator
PERSON = "who acts (default: your login name, else 'operator')"

#: `tasks WORD KEY`: a person's action on one task, and what it does (its argument, whether it is required
#: and the verb of its answer are in its rule)
TASK_COMMANDS: dict[str, tuple[Action, str]] = {
    "release": (PERSON_ACTIONS["release"], "end its lease"),
    "retry": (PERSON_ACTIONS["retry_now"], "end its backoff"),
    "cancel": (PERSON_ACTIONS["cancel"], "the plan no longer needs it"),
    "reopen": (PERSON_ACTIONS["reopen"], "revive a done, failed or cancelled task"),
}
#: `review WORD KEY`: the decisions on a task in review
REVIEW_COMMANDS = tuple(name for name, a in PERSON_ACTIONS.items() if RULES[a].allowed == {Status.IN_REVIEW})


DESCRIPTION = "Durable memory and safe coordination for MCP agents: the server and the tools for people."


def port_number(text: str) -> int:
    """A TCP port for `--port`: a whole number from 0 (any free port) to 65535."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port: use a whole number from 0 to 65535")
    return port


def positive(text: str) -> int:
    """A count for `--limit`: a whole number from 1 to 2**53 - 1 (what every backend stores)."""
    try:
        number = int(text)
    except ValueError:
        number = 0
    if not 1 <= number <= MAX_INT:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count: use a whole number from 1 to {MAX_INT}")
    return number


def http_url(text: str) -> str:
    """A server address for `--url`: http:// or https://, a host, and usually the /mcp path."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(f"{text!r} is not a server URL: use e.g. http://127.0.0.1:8765/mcp")
    return text


class OneLineParser(argparse.ArgumentParser):
    """Bad command-line words are one line on stderr (which command, what was wrong) and exit 2,
    as every other error of the CLI; `--help` still prints the whole usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _after_the_word(parents: list[argparse.ArgumentParser]) -> list[argparse.ArgumentParser]:
    """The shared flags (`--db`, `--workspace`) again for a command's words (`tasks show`): given after
    the word they count, and not given there they leave what was given before it (no default of their own)."""
    late = argparse.ArgumentParser(add_help=False)
    for parent in parents:
        for action in parent._actions:
            late.add_argument(*action.option_strings, default=argparse.SUPPRESS, help=action.help)
    return [late]


def _json(p: argparse.ArgumentParser) -> None:
    """`--json` on a command's word, keeping a `--json` given before the word."""
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS)


def _person(p: argparse.ArgumentParser) -> None:
    """The flags of a person's action (who acts, the answer as JSON), given after the word or before it."""
    p.add_argument("--agent", default=argparse.SUPPRESS, help=PERSON)
    _json(p)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="mcp-harness", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"mcp-harness {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", default=None, help="SQLAlchemy URL or file path (env MCP_HARNESS_DB)")
    ws = argparse.ArgumentParser(add_help=False)
    ws.add_argument(
        "--workspace",
        default=None,
        help="workspace (env MCP_HARNESS_WORKSPACE; default: the project's, else 'default')",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _serve(sub, [common, ws])
    _reading(sub, [common, ws])
    _maintenance(sub, common, ws)
    _clients(sub)
    _tokens_and_schemas(sub, common, ws)
    ui_command.add_parser(sub, [common, ws])  # `mcp-harness ui`, the operator console
    # `mcp-harness run` and `sessions`, the session runner
    runner_command.add_parser(sub, [common, ws], _after_the_word([common, ws]))
    return parser


def _serve(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("serve", parents=parents, help="run the MCP server (stdio by default)")
    p.add_argument("--transport", choices=["stdio", "http"], default=env("TRANSPORT", "stdio"))
    p.add_argument("--agent", default=None, help="agent name for stdio (env MCP_HARNESS_AGENT, default 'default')")
    p.add_argument(
        "--role", choices=ROLES, default=None, help="stdio: the connection's role (env MCP_HARNESS_ROLE, default agent)"
    )
    p.add_argument(
        "--no-session",
        action="store_true",
        help="stdio: act as --agent, not --agent:<session> (env MCP_HARNESS_NO_SESSION=1)",
    )
    p.add_argument(
        "--keep-leases",
        action="store_true",
        help="stdio: leases outlive the connection (env MCP_HARNESS_KEEP_LEASES=1)",
    )
    p.add_argument("--host", default=env("HOST", "127.0.0.1"))
    p.add_argument("--port", type=port_number, default=int(env("PORT", "8765")))
    p.add_argument("--allowed-host", action="append", default=None, help="extra Host header value allowed (http)")
    p.add_argument("--allowed-origin", action="append", default=None, help="extra Origin allowed (http)")


def _reading(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("log", parents=parents, help="the progress log, newest first")
    p.add_argument("--thread", default=None)
    p.add_argument("--task", default=None)
    p.add_argument("--limit", type=positive, default=20)
    p.add_argument("--query", default=None, help="full-text search: the best matching entries instead")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser(
        "tasks",
        parents=parents,
        help=f"the task board; `tasks show KEY`: one task's story; `tasks add`; `tasks {'|'.join(TASK_COMMANDS)} KEY`",
    )
    p.add_argument("--status", action="append", default=None, choices=STATUSES)
    p.add_argument("--query", default=None, help="full-text search over title, description, result, verification")
    p.add_argument("--agent", default=None, help=PERSON)
    p.add_argument("--json", action="store_true")
    verbs = p.add_subparsers(dest="verb", metavar=f"show|add|{'|'.join(TASK_COMMANDS)}")
    late = _after_the_word(parents)
    v = verbs.add_parser("show", parents=late, help="one task's lease, events and progress")
    v.add_argument("key", metavar="KEY")
    _json(v)
    v = verbs.add_parser(
        "add",
        parents=late,
        help="a new task from flags (tasks add KEY --title T), or many from a file (tasks add --file FILE)",
    )
    v.add_argument("key", nargs="?", default=None, metavar="KEY")
    v.add_argument(
        "--file", default=None, help="the tasks in add_tasks' shape, a JSON list or JSON Lines (- for stdin)"
    )
    v.add_argument("--title", default=None)
    v.add_argument("--description", default=None)
    v.add_argument("--step", action="append", default=None, help="an acceptance step (repeatable)")
    v.add_argument("--depends-on", action="append", default=None, metavar="KEY", help="repeatable")
    v.add_argument("--paths", action="append", default=None, metavar="P", help="a path pattern a claim reserves")
    v.add_argument("--tag", action="append", default=None, help="repeatable")
    v.add_argument("--priority", type=int, default=None, help="higher first (default 0)")
    v.add_argument("--review", action="store_true", help="completing it waits for a person's approval")
    v.add_argument("--gate", action="store_true", help="a person's decision, never claimed")
    _person(v)
    for word, (action, what) in TASK_COMMANDS.items():
        v = verbs.add_parser(word, parents=late, help=what)
        v.add_argument("key", metavar="KEY")
        rule = RULES[action]
        if rule.argument:
            needed = "required" if rule.required else "optional"
            v.add_argument(f"--{rule.argument}", default=None, help=f"why ({needed}; it goes into the progress log)")
        _person(v)

    p = sub.add_parser("msg", help="messages: send --to A BODY, list [--all], ack ID... (as --agent, with operators')")
    msub = p.add_subparsers(dest="msg_verb", required=True, metavar="send|list|ack")
    m = msub.add_parser("send", parents=parents, help="send a message")
    m.add_argument("body", metavar="BODY", help="the message (at most 8 KiB; quote it)")
    m.add_argument("--to", required=True, help="an agent's name, * (every agent) or operators")
    m.add_argument("--task", default=None, help="the task it is about")
    m.add_argument("--subject", default=None)
    m.add_argument("--reply-to", default=None, help="the id of the message it answers")
    m = msub.add_parser("list", parents=parents, help="messages for you (and the operators), newest first")
    m.add_argument("--all", action="store_true", help="acknowledged ones too")
    m.add_argument("--limit", type=positive, default=50)
    m = msub.add_parser("ack", parents=parents, help="acknowledge messages: they stop coming back")
    m.add_argument("ids", nargs="+", metavar="ID")
    for m in msub.choices.values():
        m.add_argument(
            "--agent",
            default=None,
            help="who acts (default: run from an agent's session, its agent, as "
            "the hooks resolve it; else your login name, else 'operator')",
        )
        m.add_argument("--json", action="store_true")

    decisions = [f"{word} KEY" for word in REVIEW_COMMANDS]
    p = sub.add_parser("review", parents=parents, help=f"tasks waiting for a person: list, {', '.join(decisions)}")
    p.add_argument("--agent", default=None, help=PERSON)
    p.add_argument("--json", action="store_true")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="|".join(["list", *REVIEW_COMMANDS]))
    late = _after_the_word(parents)
    _json(verbs.add_parser("list", parents=late, help="the tasks and gates waiting for a person's decision"))
    for word in REVIEW_COMMANDS:
        rule = RULES[PERSON_ACTIONS[word]]
        v = verbs.add_parser(word, parents=late, help=f"{word} a task or gate in review")
        v.add_argument("key", metavar="KEY")
        v.add_argument(
            "--comment",
            default=None,
            help="the reviewer's note" + (" (required)" if rule.required else " (optional)"),
        )
        _person(v)

    p = sub.add_parser("history", parents=parents, help="checkpoints of a thread, newest first")
    p.add_argument("thread")
    p.add_argument("--limit", type=positive, default=20)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("show", parents=parents, help="print a thread's state (latest or --version)")
    p.add_argument("thread")
    p.add_argument("--version", type=int, default=None)

    p = sub.add_parser("status", parents=parents, help="threads, task board and leases at a glance")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("brief", parents=parents, help="the resume brief as text (for a person or a session-start hook)")
    p.add_argument("--thread", default="main")
    p.add_argument(
        "--agent",
        default=None,
        help="whose held tasks to show (default: run in an agent's session, "
        "its agent, as `msg` resolves it; else MCP_HARNESS_AGENT, else 'default')",
    )
    p.add_argument(
        "--url", type=http_url, default=None, help="ask a shared HTTP server (its /mcp URL), not the database"
    )
    p.add_argument(
        "--token-env",
        default="MCP_HARNESS_TOKEN",
        metavar="VAR",
        help="with --url: the variable holding the bearer token (default MCP_HARNESS_TOKEN)",
    )


def _maintenance(sub: argparse._SubParsersAction, common: argparse.ArgumentParser, ws: argparse.ArgumentParser) -> None:
    p = sub.add_parser("export", parents=[common], help="write a workspace (or all) as JSON Lines to stdout")
    p.add_argument("--workspace", default=None, help="default: the project's, else every workspace")
    p.add_argument("--all-workspaces", action="store_true", help="every workspace, even inside a project")

    p = sub.add_parser("import", parents=[common], help="read an export back (into workspaces with no data)")
    p.add_argument("file", help="an export file, or - for stdin")

    p = sub.add_parser("prune", parents=[common, ws], help="delete old unlabelled checkpoints, return disk space")
    p.add_argument("--keep-last", type=int, required=True, help="checkpoints kept per thread (at least 1)")
    p.add_argument("--older-than", type=float, default=None, metavar="DAYS", help="only delete ones older than this")
    p.add_argument("--all-workspaces", action="store_true", help="prune every workspace")


def _clients(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="print a ready configuration for an MCP client")
    p.add_argument("client", choices=CLIENTS)
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    p.add_argument("--db", default=None, help="database the stdio server uses (default: this machine's)")
    p.add_argument("--workspace", default=None)
    p.add_argument("--agent", default=None)
    p.add_argument(
        "--url", type=http_url, default=None, help="http: the server's /mcp URL (default http://127.0.0.1:8765/mcp)"
    )
    p.add_argument("--token", default=None, help="http: the bearer token (default: a placeholder to replace)")

    p = sub.add_parser("hook", help="Claude Code's lifecycle hooks (init installs them; the event's JSON on stdin)")
    p.add_argument("event", choices=["SessionStart", "UserPromptSubmit", "PreCompact", "SessionEnd", "StopFailure"])
    p.add_argument("--db", default=None)
    p.add_argument("--workspace", default=None)
    p.add_argument("--agent", default=None, help="the agent before its session suffix (default claude-code)")
    p.add_argument("--no-session", action="store_true")
    p.add_argument("--url", type=http_url, default=None)
    p.add_argument("--token-env", default=None, metavar="VAR")

    p = sub.add_parser("guard", help="git pre-commit check: refuse staged paths another agent reserves")
    p.add_argument("--db", default=None)
    p.add_argument("--workspace", default=None)
    p.add_argument("--agent", default=None, help="the committer before its session suffix (default claude-code)")
    p.add_argument("--no-session", action="store_true")

    p = sub.add_parser("init", help="set this project up for MCP clients (config files, lifecycle hooks, instructions)")
    p.add_argument(
        "--client",
        action="append",
        choices=CLIENTS,
        default=None,
        help="repeatable; default claude-code, and cursor/vscode if .cursor/ or .vscode/ is there",
    )
    p.add_argument("--workspace", default=None, help="default: the project's folder name (its git top level)")
    p.add_argument("--transport", choices=["stdio", "http"], default=None, help="default stdio; http with --url")
    p.add_argument(
        "--url",
        type=http_url,
        default=None,
        help="http (implied): the shared server's /mcp URL (default http://127.0.0.1:8765/mcp)",
    )
    p.add_argument(
        "--token-env",
        default=None,
        metavar="VAR",
        help="http: the environment variable that holds the token (default MCP_HARNESS_TOKEN)",
    )
    p.add_argument(
        "--db", default=None, help="stdio: the server's database (default: each user's own); a path is made absolute"
    )
    p.add_argument("--agent", default=None, help="stdio: the agent name (default: the client's name)")
    p.add_argument("--force", action="store_true", help="replace an existing different harness entry or hook")
    p.add_argument("--dry-run", action="store_true", help="print what would be written; write nothing")
    p.add_argument("--no-hooks", action="store_true", help="no Claude Code lifecycle hooks")
    p.add_argument(
        "--remove",
        action="store_true",
        help="take out what init added (servers, hooks, instructions, the CLAUDE.md import)",
    )
    p.add_argument("--no-instructions", action="store_true", help="no section in AGENTS.md / CLAUDE.md")
    p.add_argument(
        "--guard", action="store_true", help="also install the commit guard as the repository's git pre-commit hook"
    )


def _tokens_and_schemas(
    sub: argparse._SubParsersAction, common: argparse.ArgumentParser, ws: argparse.ArgumentParser
) -> None:
    p = sub.add_parser("token", help="bearer tokens for the HTTP server")
    tsub = p.add_subparsers(dest="token_command", required=True, metavar="SUBCOMMAND")
    t = tsub.add_parser("create", parents=[common], help="create a token (printed once, on the last line)")
    t.add_argument("--workspace", required=True)
    t.add_argument("--agent", required=True)
    t.add_argument("--role", choices=ROLES, default="agent")
    t = tsub.add_parser("list", parents=[common], help="tokens (never their text)")
    t.add_argument("--workspace", default=None)
    t.add_argument("--json", action="store_true")
    t = tsub.add_parser("revoke", parents=[common], help="revoke a token, or all tokens of --workspace/--agent")
    t.add_argument("token", nargs="?", default=None, help="the token text or its id (tk_...)")
    t.add_argument("--workspace", default=None)
    t.add_argument("--agent", default=None)

    p = sub.add_parser("schema", help="state schemas")
    ssub = p.add_subparsers(dest="schema_command", required=True, metavar="SUBCOMMAND")
    s = ssub.add_parser("set", parents=[common, ws], help="register a JSON Schema (Draft 2020-12) for a thread")
    s.add_argument("--thread", required=True)
    s.add_argument("file", type=Path)

"""`mcp-harness guard`: the git pre-commit check. It refuses a commit that touches a path another
agent's live lease reserves exclusively, naming the holder, the task and the pattern, one line for
each with a count and a few of the paths (`--no-verify` is the escape, as with every hook). `init
--guard` installs it as the `pre-commit` and `pre-merge-commit` hooks (`guard_hook.py`).

Runs on every commit, so it is kept lean like the per-prompt hook: the standard library, one read-only
query (`quick_read.reserved`) and `paths.matcher` for the matching; never the service. The staged paths come
from `git diff --cached`, relative to the work tree's root (also in a linked worktree). The committer
is `MCP_HARNESS_AGENT` (default `claude-code`), resolved to its session's identity as the hooks do
(`identity.client_agent`); its own reservations never stop it. Without `--workspace` (or
MCP_HARNESS_WORKSPACE) the project's `harness` entry names the workspace and database, as for every
command (`locate.py`). When the database cannot be read, does not exist, or holds no task of the
workspace, the guard says so on stderr and lets the commit through: it must never make a repository
unusable, and never pass a commit unchecked without saying so."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field

from mcp_harness.cli.hook_call import DEFAULT_AGENT

USAGE = "usage: mcp-harness guard [--db DB] [--workspace W] [--agent A] [--no-session]"
HELP = (
    "Refuses a commit that touches a path another agent's live lease reserves exclusively, naming the holder, "
    "the task and the pattern (exit 1); git commit --no-verify skips it. `mcp-harness init --guard` installs it "
    "as the repository's pre-commit and pre-merge-commit hooks.\n"
    "  --db, --workspace  where agents reserve paths (default: MCP_HARNESS_DB / MCP_HARNESS_WORKSPACE, else "
    "the project's .mcp.json entry)\n"
    "  --agent            the committer (default: MCP_HARNESS_AGENT, else claude-code), as this session's "
    "identity unless --no-session"
)


class GuardError(Exception):
    """A usage or git error (exit 2)."""


def _parse(argv: list[str]) -> dict[str, str | bool | None]:
    opts: dict[str, str | bool | None] = {
        "db": os.environ.get("MCP_HARNESS_DB") or None,
        "workspace": os.environ.get("MCP_HARNESS_WORKSPACE") or None,  # else the project's, else `default`
        "agent": os.environ.get("MCP_HARNESS_AGENT") or DEFAULT_AGENT,
        "no_session": False,
    }
    words = iter(argv)
    for word in words:
        name, eq, value = word.partition("=")
        if name in ("--db", "--workspace", "--agent"):
            given = value if eq else next(words, None)
            if not given:
                raise GuardError(f"{name} needs a value; {USAGE}")
            opts[name[2:]] = given
        elif name == "--no-session":
            opts["no_session"] = True
        else:
            raise GuardError(f"unknown argument {word!r}; {USAGE}")
    return opts


def staged() -> list[str]:
    """The paths the commit touches (added, changed, deleted; a rename as both names), relative to the
    work tree's root."""
    try:
        out = subprocess.run(
            ["git", "diff", "--cached", "--name-only", "--no-renames", "-z"],
            capture_output=True,
            check=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise GuardError(f"cannot list the staged files with git: {exc}") from None
    return [p for p in out.stdout.decode("utf-8", "surrogateescape").split("\0") if p]


def _left(seconds: float) -> str:
    minutes = int(seconds // 60)
    return f"{minutes}m" if minutes else f"{int(seconds)}s"


EXAMPLES = 3  #: paths shown per holder, task and pattern; the rest are counted


def _shown(path: str) -> str:
    """A file name on one line: what a terminal would act on (a newline, an escape sequence) or cannot
    show (bytes that are not UTF-8) written as Python escapes (`nl\\nhere.js`, `\\udcff`)."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in path)


@dataclass
class Clash:
    """Staged paths one other agent's reservation (one task, one pattern) holds."""

    owner: str
    key: str
    pattern: str
    expires_at: float
    paths: list[str] = field(default_factory=list)

    def line(self, at: float) -> str:
        shown = ", ".join(_shown(p) for p in self.paths[:EXAMPLES])
        what = shown if len(self.paths) == 1 else f"{len(self.paths)} files, e.g. {shown}"
        return (
            f"  reserved by agent {self.owner!r} (task {self.key!r}, pattern {self.pattern!r}) for "
            f"{_left(self.expires_at - at)} more: {what}"
        )


def check(files: list[str], reservations: list, agent: str) -> list[Clash]:
    """The staged files other agents' live exclusive reservations hold, one `Clash` per (holder, task,
    pattern): a commit of 1,000 files under one pattern is one line, not 1,000."""
    from mcp_harness.tasks.patterns import matcher

    others = [(r, matcher(r.pattern)) for r in reservations if r.owner != agent]
    found: dict[tuple[str, str, str], Clash] = {}
    for path in files:
        for r, match in others:
            if match(path):
                clash = found.get((r.owner, r.key, r.pattern))
                if clash is None:
                    clash = found[r.owner, r.key, r.pattern] = Clash(r.owner, r.key, r.pattern, r.expires_at)
                clash.paths.append(path)
                break
    return list(found.values())


def advice(clashes: list[Clash]) -> str:
    """What to do, said once: leave the files out, ask the holder (an agent with the `message` tool, a
    person with `msg send`), or wait; `--no-verify` is the escape."""
    holders = list(dict.fromkeys(c.owner for c in clashes))
    who = holders[0] if len(holders) == 1 else "HOLDER"
    return (
        "Leave those files out (git restore --staged PATH; a merge: git merge --abort), ask the holder (an agent: "
        f'message(action="send", to="{who}", body=...); a person: mcp-harness msg send --to {who} BODY), or wait '
        "for the lease to end; --no-verify (git commit --no-verify, git merge --no-verify) skips this check."
    )


def run(argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        print(f"{USAGE}\n\n{HELP}")
        return 0
    try:
        opts = _parse(argv)
        files = staged()
        if not files:
            return 0
        from mcp_harness import quick_read
        from mcp_harness.identity import client_agent

        if opts["workspace"] is None:  # the project's entry, as for every command (the hook names both)
            from mcp_harness.cli.locate import project_defaults

            db = opts["db"]
            named, opts["db"] = project_defaults(db if isinstance(db, str) else None)
            opts["workspace"] = named or "default"
        workspace = str(opts["workspace"])
        agent = client_agent(str(opts["agent"]), workspace, no_session=bool(opts["no_session"]))
        at = time.time()
        try:
            db = opts["db"]
            found = quick_read.reserved(str(db) if db else None, workspace, at)
        except quick_read.Unreachable as exc:
            print(f"mcp-harness guard: {exc}; the commit is not checked", file=sys.stderr)
            return 0
        except quick_read.Unchecked as exc:  # a wrong --db or --workspace would let every commit through unsaid
            print(
                f"mcp-harness guard: {exc}, so nothing is reserved there; the commit is not checked (the "
                "hook's --db and --workspace, or the project's .mcp.json, name where agents reserve paths)",
                file=sys.stderr,
            )
            return 0
        clashes = check(files, found, agent)
    except GuardError as exc:
        print(f"mcp-harness guard: {exc}", file=sys.stderr)
        return 2
    if not clashes:
        return 0
    print(f"mcp-harness guard: this commit touches paths other agents hold (you are {agent!r}):", file=sys.stderr)
    print("\n".join(c.line(at) for c in clashes), file=sys.stderr)
    print(advice(clashes), file=sys.stderr)
    return 1


def cmd_guard(args: object) -> int:  # normally dispatched before the parser (cli/__init__.py)
    return run(sys.argv[2:])

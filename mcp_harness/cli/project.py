"""What `init` merges into a project's files: a server entry into a client's JSON configuration,
Claude Code's SessionStart hook, and the marked instructions section of AGENTS.md / CLAUDE.md.

Each function takes a file's current text (None when it does not exist) and returns a `Change`:
the new text (None when nothing changes) and one line saying what it did or why it did not."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_harness.cli import jsonc
from mcp_harness.cli.hook import WRITES
from mcp_harness.errors import InvalidArgument

BEGIN = "<!-- mcp-harness:begin -->"
END = "<!-- mcp-harness:end -->"
HOOK_MATCHER = "startup|resume|clear|compact"  #: every way a Claude Code session starts
HOOK_TIMEOUT = 30  #: seconds; the brief answers in well under one
OUR_HOOK = re.compile(r"(^|[\s/\\\"'])(mcp-harness|mcp_harness)[\"']?\s+(brief|hook)(\s|$)")
OUR_BRIEF = re.compile(r"(mcp-harness|mcp_harness)[\"']?\s+brief(\s|$)")  #: the single hook of earlier versions
#: a server entry init wrote: it starts mcp-harness, or reaches a shared server with a token reference
OUR_SERVER = re.compile(r"mcp-harness|mcp_harness|Bearer \$\{")
IMPORT = "@AGENTS.md"  #: Claude Code reads CLAUDE.md, which imports AGENTS.md with this line
IMPORT_NOTE = "<!-- mcp-harness: Claude Code reads AGENTS.md through the next line -->"


@dataclass
class Change:
    path: Path
    text: str | None  #: the file's new content; None: leave the file as it is
    what: str  #: one line for the person: what was (or would be) done, or why not
    backup: bool = False  #: copy the old file aside first (a user's own configuration)
    by_hand: bool = False  #: the file cannot be rewritten (JSONC): the person adds the entry


#: the verbs a change's line opens a clause with when it says what was done, and their plain forms
DONE = {
    "added": "add",
    "replaced": "replace",
    "rewrote": "rewrite",
    "updated": "update",
    "set": "set",
    "allowed": "allow",
    "removed": "remove",
}
_DONE_CLAUSE = re.compile(rf"(^|; )({'|'.join(DONE)}) ")


def would(what: str) -> str:
    """A change's line as a dry run says it: each clause that says what was done says what would be."""
    return _DONE_CLAUSE.sub(lambda m: f"{m[1]}would {DONE[m[2]]} ", what)


def load_json(path: Path, text: str | None) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgument(
            f"{path} is not valid JSON ({exc.msg}, line {exc.lineno}): fix or move it, then "
            "run init again (nothing was written)"
        ) from None
    if not isinstance(data, dict):
        raise InvalidArgument(f"{path} does not hold a JSON object: fix or move it (nothing was written)")
    return data


def dump_json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def merge_server(
    path: Path,
    text: str | None,
    key: str,
    name: str,
    entry: dict[str, Any],
    *,
    force: bool,
    runs: str,
    jsonc_ok: bool = False,
) -> Change:
    """Add `entry` as server `name` under `key`, keeping every other server; an existing different
    entry of that name is kept unless `force`. With `jsonc_ok` (VS Code's file) a file with comments
    or trailing commas is read but never rewritten: the person is shown the entry to add."""
    if jsonc_ok and text is not None and not jsonc.is_plain_json(text):
        return _by_hand(path, text, key, name, entry)
    data = load_json(path, text)
    servers = data.setdefault(key, {})
    if not isinstance(servers, dict):
        raise InvalidArgument(f"{path}: {key!r} is not a JSON object: fix it (nothing was written)")
    current = servers.get(name)
    if current == entry:
        return Change(path, None, f"server {name!r} already set up (unchanged)")
    if current is not None and not force:
        return Change(
            path,
            None,
            f"server {name!r} exists with other settings: kept; `mcp-harness init --force` "
            f"replaces it\n{_differs(current, entry)}",
        )
    servers[name] = entry
    verb = "replaced" if current is not None else "added"
    return Change(path, dump_json(data), f"{verb} server {name!r}, which runs: {runs}")


def _differs(old: Any, new: Any) -> str:
    """The kept entry and the one init would write, a line each."""
    return f"      old: {_compact(old)}\n      new: {_compact(new)}"


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _by_hand(path: Path, text: str, key: str, name: str, entry: dict[str, Any]) -> Change:
    """A JSONC file (comments, trailing commas) is not rewritten: its comments would be lost."""
    try:
        data = jsonc.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgument(
            f"{path} is not valid JSON, even allowing comments ({exc.msg}, line {exc.lineno}): "
            "fix or move it, then run init again (nothing was written)"
        ) from None
    servers = data.get(key) if isinstance(data, dict) else None
    current = servers.get(name) if isinstance(servers, dict) else None
    if current == entry:
        return Change(path, None, f"server {name!r} already set up (unchanged)")
    why = "has other settings for it" if current is not None else "has no entry for it"
    what = (
        f"has comments or trailing commas, so init does not rewrite it (they would be lost), and it {why}: "
        f"add this under {key!r} by hand:\n      {json.dumps(name)}: {_compact(entry)}"
    )
    if current is not None:
        what += "\n" + _differs(current, entry)
    return Change(path, None, what, by_hand=True)


#: what a writing hook's command starts with: the client sends SIGTERM to a hook it stops waiting for before
#: Python could start and hand its write over (`hook.detach`), so the shell makes the hook immune to it
#: from its first instruction (an ignored signal stays ignored through exec)
IMMUNE = "trap '' TERM; exec "


def hook_command(event: str, command: str) -> str:
    """The command line Claude Code runs for `event`: the hook itself, made immune to SIGTERM where it
    hands a write over to a process of its own."""
    return IMMUNE + command if event in WRITES else command


#: the lifecycle pack: event -> matcher (None: every occurrence); SessionStart covers every source
HOOK_EVENTS = {
    "SessionStart": HOOK_MATCHER,
    "UserPromptSubmit": None,
    "PreCompact": None,
    "SessionEnd": None,
    "StopFailure": None,
}


def merge_hooks(path: Path, text: str | None, commands: dict[str, str], *, force: bool) -> Change:
    """Add the lifecycle pack (`commands`: event -> command) to Claude Code's settings, keeping every other
    hook. Our earlier SessionStart `brief` hook, and an earlier writing hook that was not yet immune to
    SIGTERM, are replaced; one of ours with another command is kept
    unless `force`."""
    data = load_json(path, text)
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise InvalidArgument(f"{path}: 'hooks' is not a JSON object: fix it (nothing was written)")
    done, kept = [], []
    for event, command in commands.items():
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise InvalidArgument(f"{path}: 'hooks.{event}' is not a list: fix it (nothing was written)")
        ours = [h for g in groups if isinstance(g, dict) for h in g.get("hooks", []) if _is_ours(h)]
        if any(h.get("command") == command for h in ours):
            continue
        earlier = str(ours[0].get("command")) if ours else ""
        upgrade = OUR_BRIEF.search(earlier) or earlier.removeprefix(IMMUNE) == command.removeprefix(IMMUNE)
        if ours and not force and not upgrade:
            kept.append(f"a {event} hook runs {ours[0].get('command')!r}: kept (--force replaces it)")
            continue
        if ours:
            ours[0]["command"] = command
            ours[0].setdefault("timeout", HOOK_TIMEOUT)
        else:
            group: dict[str, Any] = {"matcher": HOOK_EVENTS[event]} if HOOK_EVENTS[event] else {}
            groups.append({**group, "hooks": [{"type": "command", "command": command, "timeout": HOOK_TIMEOUT}]})
        done.append(event)
    if not done:
        return Change(path, None, "; ".join(kept) or "the lifecycle hooks are already set up (unchanged)")
    said = f"set the lifecycle hooks ({', '.join(done)}), e.g.: {commands[done[0]]}"
    return Change(path, dump_json(data), "; ".join([said, *kept]))


def _is_ours(hook: Any) -> bool:
    return isinstance(hook, dict) and bool(OUR_HOOK.search(str(hook.get("command", ""))))


def remove_hooks(path: Path, text: str | None) -> Change:
    """Take out every hook of ours (the pack, or an earlier brief hook) and what only held them."""
    if text is None:
        return Change(path, None, "no such file (nothing to remove)")
    data = load_json(path, text)
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return Change(path, None, "no mcp-harness hook (unchanged)")
    removed = 0
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                before = len(group["hooks"])
                group["hooks"] = [h for h in group["hooks"] if not _is_ours(h)]
                removed += before - len(group["hooks"])
        hooks[event] = [g for g in groups if not (isinstance(g, dict) and g.get("hooks") == [])]
        if not hooks[event]:
            del hooks[event]
    if not removed:
        return Change(path, None, "no mcp-harness hook (unchanged)")
    if not hooks:
        del data["hooks"]
    return Change(path, dump_json(data) if data else "", f"removed {removed} mcp-harness hooks")


def in_turn(path: Path, text: str | None, steps: Iterable[Callable[[str | None], Change]]) -> Change:
    """Several changes to one file as one: each step works on the text the one before left, and the
    person reads every step's line."""
    said, changed = [], False
    for step in steps:
        change = step(text)
        said.append(change.what)
        if change.text is not None:
            text, changed = change.text, True
    return Change(path, text if changed else None, "; ".join(said))


def permission(server: str) -> str:
    """Claude Code's permission rule that allows every tool of one MCP server."""
    return f"mcp__{server}"


def merge_permission(path: Path, text: str | None, server: str) -> Change:
    """Allow the server's tools in Claude Code's settings (`permissions.allow`), keeping every other rule:
    without it a headless session (`claude -p`) is refused each call, since nobody is there to approve it."""
    data = load_json(path, text)
    rules = data.setdefault("permissions", {})
    if not isinstance(rules, dict):
        raise InvalidArgument(f"{path}: 'permissions' is not a JSON object: fix it (nothing was written)")
    allow = rules.setdefault("allow", [])
    if not isinstance(allow, list):
        raise InvalidArgument(f"{path}: 'permissions.allow' is not a list: fix it (nothing was written)")
    rule = permission(server)
    denied = isinstance(rules.get("deny"), list) and rule in rules["deny"]
    note = f" (but 'permissions.deny' also lists {rule}, and a deny wins: remove it there to use the tools)"
    if rule in allow:
        return Change(path, None, f"the {server!r} tools are already allowed ({rule}) (unchanged)" + (note * denied))
    allow.append(rule)
    said = (
        f"allowed the {server!r} tools (permissions.allow: {rule}), so headless sessions may call them "
        f"once Claude Code trusts the project (one interactive `claude` here, or `--allowedTools {rule}`)"
    )
    return Change(path, dump_json(data), said + (note * denied))


def remove_permission(path: Path, text: str | None, server: str) -> Change:
    """Take the server's rule out of `permissions.allow` (and what only held it)."""
    if text is None:
        return Change(path, None, "no such file (nothing to remove)")
    data = load_json(path, text)
    rules, rule = data.get("permissions"), permission(server)
    allow = rules.get("allow") if isinstance(rules, dict) else None
    if not isinstance(allow, list) or rule not in allow:
        return Change(path, None, f"no {rule} permission (unchanged)")
    assert isinstance(rules, dict)  # `allow` came from it
    allow[:] = [r for r in allow if r != rule]
    if not allow:
        del rules["allow"]
    if not rules:
        del data["permissions"]
    return Change(path, dump_json(data) if data else "", f"removed the permission {rule}")


def remove_server(path: Path, text: str | None, key: str, name: str) -> Change:
    """Take out the harness server entry (one that runs mcp-harness, or reaches a server with a token)."""
    if text is None:
        return Change(path, None, "no such file (nothing to remove)")
    data = load_json(path, text) if jsonc.is_plain_json(text) else None
    if data is None:
        return Change(path, None, f"has comments or trailing commas: remove the {name!r} server by hand", by_hand=True)
    servers = data.get(key)
    entry = servers.get(name) if isinstance(servers, dict) else None
    if not isinstance(entry, dict) or not OUR_SERVER.search(json.dumps(entry)):
        return Change(path, None, f"no {name!r} server of mcp-harness (unchanged)")
    assert isinstance(servers, dict)  # `entry` came from it
    del servers[name]
    if not servers:
        del data[key]
    return Change(path, dump_json(data) if data else "", f"removed server {name!r}")


STEP_5 = (
    "5. Before you stop: `record_progress` (`task_key`, `summary`, `details`: what was verified, `next_steps`), "
    'then `save_checkpoint(state={...}, mode="merge")` with what the next session needs.'
)
#: step 5 as earlier releases wrote it: a section holding it is init's own, brought up to date without --force
EARLIER_STEP_5 = (
    "5. Before you stop: `record_progress` (with `task_key`, what was verified, `next_steps`), then "
    '`save_checkpoint(mode="merge")`.',
)


def instructions(workspace: str) -> str:
    """The marked section: the session loop in five lines. One text whichever clients and hooks a run
    sets up, so running `init` again with other flags never finds it "edited"."""
    opening = "Start with `restore_state` (where the SessionStart hook is set up, its brief came first)"
    return "\n".join(
        [
            BEGIN,
            f"## Working memory: mcp-harness (workspace `{workspace}`, MCP server `harness`)",
            "",
            f"1. {opening}: the latest state, recent progress of every thread, the tasks you hold.",
            "2. Continue the task you hold, or `claim_task` ONE task; no task? its `reason` says why.",
            '3. Work on that one task; `update_task(action="heartbeat")` during long work.',
            '4. Verify end to end, then `update_task(action="complete", verification=...)`; stopping before it is '
            "done? `release` it.",
            STEP_5,
            END,
        ]
    )


def merge_instructions(path: Path, text: str | None, section: str, *, force: bool) -> Change:
    """Append the marked section once; an edited section is kept unless `force`."""
    text = text or ""
    start, end = text.find(BEGIN), text.find(END)
    if start == -1 or end < start:
        joined = (text.rstrip("\n") + "\n\n" if text.strip() else "") + section + "\n"
        return Change(path, joined, "added the mcp-harness section (the session loop in five lines)")
    current = text[start : end + len(END)]
    if current == section:
        return Change(path, None, "the mcp-harness section is already there (unchanged)")
    if any(current == section.replace(STEP_5, earlier) for earlier in EARLIER_STEP_5):
        return Change(path, text[:start] + section + text[end + len(END) :], "updated the mcp-harness section")
    if not force:
        return Change(path, None, "the mcp-harness section differs (edited?): kept (--force rewrites it)")
    return Change(path, text[:start] + section + text[end + len(END) :], "rewrote the mcp-harness section")


def remove_instructions(path: Path, text: str | None) -> Change:
    """Take out the marked section (and the blank line init put before it); a file left empty goes."""
    start, end = (text or "").find(BEGIN), (text or "").find(END)
    if text is None or start == -1 or end < start:
        return Change(path, None, "no mcp-harness section (unchanged)")
    rest = text[:start].rstrip("\n") + "\n" + text[end + len(END) :].lstrip("\n")
    rest = rest.lstrip("\n") if not text[:start].strip() else rest
    return Change(path, rest if rest.strip() else "", "removed the mcp-harness section")


def merge_import(path: Path, text: str | None) -> Change:
    """Make CLAUDE.md import AGENTS.md (`@AGENTS.md`, as Claude Code's docs suggest), once; other lines stay."""
    lines = (text or "").splitlines()
    if any(line.strip() == IMPORT for line in lines):
        return Change(path, None, f"already imports AGENTS.md ({IMPORT}) (unchanged)")
    body = (text or "").rstrip("\n")
    joined = (body + "\n\n" if body else "") + f"{IMPORT_NOTE}\n{IMPORT}\n"
    return Change(path, joined, f"added the line {IMPORT} (Claude Code reads CLAUDE.md, which then reads AGENTS.md)")


def remove_import(path: Path, text: str | None) -> Change:
    """Take out the import line init added (after its note), and nothing else; a file left empty goes."""
    lines = (text or "").splitlines()
    for i in range(len(lines) - 1):
        if lines[i] == IMPORT_NOTE and lines[i + 1].strip() == IMPORT:
            rest = lines[:i] + lines[i + 2 :]
            while rest and not rest[-1].strip():
                rest.pop()
            out = "\n".join(rest) + "\n" if rest else ""
            return Change(path, out if out.strip() else "", f"removed the line {IMPORT} that init added")
    return Change(path, None, f"no {IMPORT} line added by init (unchanged)")

"""`mcp-harness hook EVENT`: Claude Code's lifecycle hooks, reading the client's JSON on stdin and
answering in its JSON form.

- `SessionStart` (every source): the resume brief as `additionalContext`, naming the session's identity.
- `UserPromptSubmit`: nothing, unless something changed for this session since its last turn that it
  must know (its lease taken over, revoked or released by a person; its task rejected, approved,
  cancelled or reopened); then it says so, once. This one runs on every prompt: it is kept to the
  standard library and one read-only query (`quick_read.py`), and never imports the service.
- `PreCompact`, `StopFailure`: a harness note; `SessionEnd`: the session's leases end (`hook_events.py`).
  These write and answer nothing, so the hook leaves the write to a process of its own and returns at
  once (`detach`): Claude Code waits for a SessionEnd hook before it exits, and kills a StopFailure
  hook's process group moments after a headless run ends on the failure. When the session holds
  nothing that SessionEnd would end or PreCompact note (one read-only look, `holds_nothing`), no
  process is started.

A hook never blocks the session and never speaks to the model about its own failures: a malformed
input, an unreachable database or anything else prints nothing to stdout, logs one line to stderr and
exits 0, within `HOOK_SECONDS`."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from mcp_harness.cli.hook_call import DEFAULT_AGENT, HookCall, HookError, answer, one_line, read_mark, write_mark

EVENTS = ("SessionStart", "UserPromptSubmit", "PreCompact", "SessionEnd", "StopFailure")
WRITES = ("PreCompact", "SessionEnd", "StopFailure")  #: events that only write: done by a detached process
#: set in the environment of that process: it does the write itself
DETACHED_VARIABLE = "MCP_HARNESS_HOOK_DETACHED"
#: the fields of the client's JSON the writing events read (all the detached process is given)
WRITE_FIELDS = ("session_id", "hook_event_name", "reason", "error", "trigger")
HOOK_SECONDS = 20  #: the whole hook, at most (Claude Code's own timeout for it is longer)
MAX_INPUT = 1 << 20  #: bytes of stdin read, at most
USAGE = (
    f"usage: mcp-harness hook {{{'|'.join(EVENTS)}}} [--db DB] [--workspace W] [--agent A] [--no-session] "
    "[--url URL --token-env VAR] (reads the client's hook JSON on stdin)"
)


def parse(argv: list[str]) -> HookCall:
    if not argv or argv[0] not in EVENTS:
        raise HookError(f"unknown hook event {argv[0] if argv else ''!r}; {USAGE}")
    call = HookCall(
        argv[0],
        db=os.environ.get("MCP_HARNESS_DB") or None,
        workspace=os.environ.get("MCP_HARNESS_WORKSPACE") or "default",
        agent=os.environ.get("MCP_HARNESS_AGENT") or DEFAULT_AGENT,
    )
    options = {"--db": "db", "--workspace": "workspace", "--agent": "agent", "--url": "url", "--token-env": "token_env"}
    words = iter(argv[1:])
    for word in words:
        name, eq, value = word.partition("=")
        if name == "--no-session":
            call.no_session = True
        elif name in options:
            given = value if eq else next(words, None)
            if not given:
                raise HookError(f"{name} needs a value; {USAGE}")
            setattr(call, options[name], given)
        else:
            raise HookError(f"unknown argument {word!r}; {USAGE}")
    return call


def read_input(stream: Any) -> dict[str, Any]:
    """The client's JSON object from stdin (a terminal is not a client: nothing is read)."""
    if stream is None or stream.isatty():
        raise HookError("no hook input: Claude Code passes the event's JSON on stdin")
    text = stream.buffer.read(MAX_INPUT + 1) if hasattr(stream, "buffer") else stream.read(MAX_INPUT + 1)
    if len(text) > MAX_INPUT:
        raise HookError(f"the hook input is over {MAX_INPUT} bytes")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise HookError(f"the hook input is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise HookError("the hook input is not a JSON object")
    return data


def resolve(call: HookCall) -> None:
    """The session's identity: its client's stdio server's, also after /clear (see `identity.client_agent`)."""
    from mcp_harness.config import NAME_RE
    from mcp_harness.identity import client_agent

    for what, name in (("workspace", call.workspace), ("agent", call.agent)):
        if not NAME_RE.fullmatch(name):
            raise HookError(f"--{what} {name!r} is not a valid name")
    session = call.data.get("session_id")
    session = session if isinstance(session, str) else None
    if call.url is None:  # over HTTP the token is the identity
        call.agent = client_agent(call.agent, call.workspace, hook_session=session, no_session=call.no_session)


def prompt_news(call: HookCall) -> str | None:
    """UserPromptSubmit: what changed for this session since its last turn, or None."""
    if call.url is not None:
        return None  # over HTTP a hook has no database to look at: the session's calls tell it
    from mcp_harness import quick_read

    seen = read_mark(call)
    news, last = quick_read.read(call.db, call.workspace, call.agent, seen)
    if seen is None or last != seen:
        write_mark(call, max(last, news[-1].id) if news else last)
    lines = [line for item in news if (line := tell(item, call.agent))]
    lines += new_messages(call)
    if not lines:
        return None
    return "\n".join([f"mcp-harness: since your last turn (you are {call.agent}):", *lines])


def new_messages(call: HookCall) -> list[str]:
    """A line per unread message that came since the session was last told (each is told once; the
    session reads it with the message tool and acknowledges it there)."""
    from mcp_harness import quick_read

    seen = read_mark(call, "messages")
    notes, last = quick_read.read_messages(call.db, call.workspace, call.agent, seen if seen is not None else 0)
    if seen is None or last != seen:
        write_mark(call, last, "messages")
    out = []
    for n in notes:
        about = f" about task {n.task_key}" if n.task_key else ""
        subject = f" ({one_line(n.subject, 80)})" if n.subject else ""
        out.append(f"- message {n.message_id} from {n.sender}{about}{subject}: {one_line(n.body, 300)}")
    if out:
        out.append("  (message(action=read) shows them whole; ack their ids when dealt with)")
    return out


def tell(item: Any, me: str) -> str | None:
    """One line about one event on a task this session held, or None when it is not news to it."""
    k, who, d = item.task_key, item.actor, item.detail
    if who == me and item.kind != "expire":
        return None  # its own doing
    if item.kind == "take_over":
        if d.get("previous_owner") != me:
            return None
        return f"- task {k}: your lease ended and {who} took the task over; stop working on it."
    if item.kind in ("revoke", "operator_release") and d.get("owner") not in (None, me):
        return None
    if item.kind == "revoke":
        return f"- task {k}: your lease was revoked (its dependency {d.get('dependency')} was reopened by {who}); stop."
    if item.kind == "operator_release":
        why = f" ({one_line(d['reason'], 300)})" if d.get("reason") else ""
        return f"- task {k}: {who} released your lease{why}; it is pending again: claim it again or leave it."
    if item.kind == "expire":
        return f"- task {k} failed: your lease ran out on its last attempt."
    said = {"approve": "approved it", "reject": "rejected it", "cancel": "cancelled it", "reopen": "reopened it"}
    why = d.get("comment") or d.get("reason")
    then = {
        "reject": " It is pending again for its next claimer." if not d.get("gate") else " The gate failed.",
        "cancel": " Stop working on it.",
    }.get(item.kind, "")
    why = one_line(why or "", 300)
    told = f": {why}" + ("" if why.endswith((".", "?", "!")) else ".") if why else "."  # one sentence end, not two
    return f"- task {k}: {who} {said[item.kind]}{told}{then}"


def cmd_hook(args: Any) -> int:
    """`mcp-harness [--db D] hook EVENT ...` reached through the full parser: the same hook."""
    argv = [args.event, *(["--db", args.db] if args.db else []), *(["--no-session"] if args.no_session else [])]
    for name in ("workspace", "agent", "url", "token_env"):
        if getattr(args, name):
            argv += [f"--{name.replace('_', '-')}", getattr(args, name)]
    return run(argv, detached=True)


def detach(call: HookCall) -> None:
    """Leave `call`'s write to a new process in a session of its own, and return at once.

    The client runs each hook in a process group of its own and kills that group when it stops waiting
    (at its exit, for a headless run): the writer must be in none of the hook's groups, and hold none of
    the hook's pipes (the client's end of them closes at its exit, and a write to one would kill the
    writer with SIGPIPE). It is given what `resolve` found (the identity looked up from this process's
    ancestors, which it does not share) and the few fields of the client's JSON the events read."""
    import subprocess

    if call.event == "SessionEnd" and call.data.get("reason") == "clear":
        return  # nothing to do (see `hook_events._session_end`): no process for it
    if holds_nothing(call):
        return  # no lease to end, no held task to note: no process for it
    argv = [
        sys.executable,
        "-m",
        "mcp_harness",
        "hook",
        call.event,
        "--workspace",
        call.workspace,
        "--agent",
        call.agent,
        "--no-session",
        *(["--db", call.db] if call.db else []),
        *(["--url", call.url, "--token-env", call.token_env] if call.url else []),
    ]
    data = {k: call.data[k] for k in WRITE_FIELDS if isinstance(call.data.get(k), str)}
    writer = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, DETACHED_VARIABLE: "1"},
        start_new_session=True,
        close_fds=True,
    )
    assert writer.stdin is not None
    writer.stdin.write(json.dumps(data)[:4096].encode())  # well under a pipe's buffer: never waits
    writer.stdin.close()
    writer.returncode = 0  # not waited for, on purpose: tell `Popen.__del__` so


def holds_nothing(call: HookCall) -> bool:
    """Whether SessionEnd or PreCompact would surely write nothing: the session's agent holds no claimed
    task (for SessionEnd, none under a live lease) in a SQLite database (`quick_read.holds`: one read, far
    less than starting the writer). False for StopFailure (its note is written whatever is held), over
    HTTP (the note goes to the server), for PostgreSQL, and when the read fails: the writer looks."""
    if call.event not in ("SessionEnd", "PreCompact") or call.url is not None:
        return False
    from mcp_harness import quick_read
    from mcp_harness.clock import now

    try:
        held = quick_read.holds(
            call.db, call.workspace, call.agent, live_at=now() if call.event == "SessionEnd" else None
        )
    except quick_read.Unreachable:
        return False
    return held is False


def run(argv: list[str], *, detached: bool = False) -> int:
    """The hook: its answer (if any) on stdout; on any failure one line on stderr; always exit 0.
    `detached` (the command line's hook): a writing event's write is left to a process of its own."""
    event = argv[0] if argv else "?"
    if event in ("-h", "--help"):
        print(USAGE)
        return 0
    _bound_time()
    try:
        call = parse(argv)
        call.data = read_input(sys.stdin)
        resolve(call)
        if detached and call.event in WRITES and not os.environ.get(DETACHED_VARIABLE):
            detach(call)
        elif call.event == "UserPromptSubmit":
            text = prompt_news(call)
            if text:
                print(answer(call.event, text))
        else:
            from mcp_harness.cli.hook_events import handle

            text = handle(call)
            if text:
                print(answer(call.event, text))
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    except BaseException as exc:  # noqa: BLE001 - a hook never stops the session, whatever went wrong
        if isinstance(exc, KeyboardInterrupt):
            return 0
        reason = str(exc) if isinstance(exc, HookError) else _one_line(exc)
        print(f"mcp-harness hook {event}: {reason}", file=sys.stderr)
    finally:
        _bound_time(0)
    return 0


def _one_line(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return " ".join(str(message).split())[:300]


def _bound_time(seconds: int = HOOK_SECONDS) -> None:
    """Give up after `seconds` (where the system has SIGALRM): a hook must never hold a session up.
    0: the hook is over, the alarm is taken back."""
    import signal

    if not hasattr(signal, "SIGALRM"):
        return
    if seconds == 0:
        signal.alarm(0)
    else:

        def stop(_signum: int, _frame: Any) -> None:
            raise TimeoutError(f"gave up after {seconds} s")

        signal.signal(signal.SIGALRM, stop)
        signal.alarm(seconds)

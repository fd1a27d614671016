"""The runner: claims one task per session for an identity it chooses, starts the agent, keeps the lease
alive, decides the outcome from the harness, settles what is left, records the session, and goes on
until the plan is done, a person must act, a budget is spent or it is told to stop.

Waiting is event-driven: when nothing is claimable the runner sleeps on the task service's wake-up
(this process's own changes and the database's change feed), a session's end, a signal or a pause's
end; never a polling loop of its own."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from mcp_harness import signals
from mcp_harness.arguments import ClaimTaskArgs, ListTasksArgs, RecordProgressArgs, UpdateTaskArgs
from mcp_harness.errors import HarnessError
from mcp_harness.identity import Identity, session_agent
from mcp_harness.models import ClaimTaskResult, SessionOutcome
from mcp_harness.runner import outcomes, process, prompt, worktrees
from mcp_harness.runner.agents import ClaudeCode, CommandAgent, Observed, Plan, mcp_config
from mcp_harness.runner.display import Display
from mcp_harness.service import Harness
from mcp_harness.tasks.rules import Status

LEASE_SECONDS = 120  #: the lease a runner claims with; renewed every third of it while the agent lives
RUNNER_AGENT = "runner"  #: the agent name of the runner's own progress entries
WAIT_SECONDS = 60.0  #: one wait for claimable work (the wake-up cuts it short)
SETUP_ERRORS_IN_A_ROW = 3
NO_PROGRESS_IN_A_ROW = 5
BACKOFF_FIRST = float(os.environ.get("MCP_HARNESS_RUNNER_BACKOFF_SECONDS") or 30)  #: after a rate limit
BACKOFF_MOST = 30 * 60.0

#: Claude Code's notice on stderr that an untrusted project's `permissions.allow` is ignored: the runner
#: grants the harness's tools itself, so it says nothing of how a session ended
NOTICE = re.compile(r"^Ignoring \d+ permissions\.allow entr")


def last_said(stderr: str) -> str:
    """The agent's last line on stderr that says something of the session (not Claude Code's notice)."""
    said = [line for line in stderr.splitlines() if line.strip() and not NOTICE.search(line)]
    return said[-1] if said else ""


def no_task_has(tags: list[str], known: list[str]) -> str:
    """What a claim filtered by `tags` that match no task at all says (a mistyped tag, not an idle plan),
    naming the tags the workspace's tasks have (`known`, the claim's `known_tags`)."""
    wanted = f"the tag {tags[0]}" if len(tags) == 1 else f"any of the tags {', '.join(tags)}"
    in_use = f"tags in use: {', '.join(known)}" if known else "no task has a tag"
    return f"no task has {wanted} ({in_use})"


def signal_words(sig: signal.Signals) -> str:
    """A stopping signal as a person sends it again: Ctrl-C for SIGINT, else its name (`kill -TERM`)."""
    return "Ctrl-C" if sig == signal.SIGINT else sig.name


#: claim reasons that end by themselves (a backoff's end): `--exit-when-idle` waits for them
RESOLVES_BY_ITSELF = frozenset({"backoff"})
EXIT_DONE, EXIT_NO_TASKS, EXIT_IDLE, EXIT_BUDGET, EXIT_BREAKER = 0, 2, 3, 4, 5
EXIT_SIGNAL = {signal.SIGINT: 130, signal.SIGTERM: 143}


@dataclass
class Options:
    parallel: int = 1
    max_sessions: int | None = None
    max_cost: float | None = None
    max_hours: float | None = None
    session_timeout: float = 60 * 60.0  #: seconds
    stall_timeout: float = 10 * 60.0  #: seconds
    tags: list[str] | None = None
    spec: Path | None = None
    worktrees: bool = False
    exit_when_idle: bool = False


@dataclass
class Tally:
    """What the run has done so far: the budgets and the summary read it."""

    started: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    cost: float = 0.0
    unknown_cost: int = 0  #: sessions that reported no cost
    setup_errors: int = 0  #: in a row
    setup_cause: str = ""  #: what the last setup error says to check
    no_progress: int = 0  #: in a row

    def add(self, outcome: SessionOutcome, cost: float | None) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        if cost is None:
            self.unknown_cost += 1
        else:
            self.cost += cost
        self.setup_errors = self.setup_errors + 1 if outcome == "setup_error" else 0
        if outcome in outcomes.NO_PROGRESS:
            self.no_progress += 1
        elif outcome not in outcomes.GIVE_BACK:
            self.no_progress = 0

    def cost_text(self) -> str:
        known = f"${self.cost:.4f}"
        if self.unknown_cost:
            return f"{known} + unknown ({self.unknown_cost} session{'s' if self.unknown_cost > 1 else ''} said no cost)"
        return known


def data_folder(db_url: str) -> Path:
    """Where a runner keeps transcripts and per-session files: beside a SQLite database, else the user's
    data folder."""
    if db_url.startswith("sqlite") and ":///" in db_url:
        path = db_url.split(":///", 1)[1].split("?", 1)[0]
        if path and path != ":memory:":
            return Path(path).parent
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "mcp-harness"


class Runner:
    def __init__(
        self,
        harness: Harness,
        workspace: str,
        agent: ClaudeCode | CommandAgent,
        options: Options,
        display: Display,
        *,
        root: Path,
    ) -> None:
        self.h = harness
        self.workspace = workspace
        self.agent = agent
        self.options = options
        self.display = display
        self.root = root
        self.id = f"run_{uuid.uuid4().hex[:12]}"
        self.data = data_folder(harness.settings.db_url)
        self.tally = Tally()
        self.began = time.monotonic()
        self.controls: dict[str, process.Control] = {}  #: running sessions by id
        self.free_slots = list(range(options.parallel, 0, -1))
        self.ended = anyio.Event()  #: set (and replaced) whenever a session ends
        self.changes = 0  #: changes seen in the workspace so far (`_watch`)
        self.changed = anyio.Event()  #: set (and replaced) at each
        self.stopping: signal.Signals | None = None
        self.paused_until = 0.0  #: monotonic: no session starts before (a rate limit)
        self.backoff = BACKOFF_FIRST
        self.waiting: str | None = None  #: what the runner waits on, said once
        self.budget: str | None = None  #: the budget spent, said as the run's ending unless the plan got done
        self.stop_event = anyio.Event()
        self.report_now = anyio.Event()  #: the runner's row should say something new (what it waits on)

    # -- the whole run ----------------------------------------------------------------------------

    async def run(self) -> int:
        await self.h.runs.register(self.workspace, self.id, socket.gethostname(), os.getpid())
        self.display.say(f"runner {self.id} on workspace {self.workspace!r}: {self.options.parallel} slot(s)")
        code = EXIT_DONE
        try:
            with signals.handled(self._on_signal, (signal.SIGINT, signal.SIGTERM)):
                async with anyio.create_task_group() as group:
                    group.start_soon(self._keep_alive)
                    group.start_soon(self.h.tasks.wakeup.watch_changes, self.workspace, self._on_change)
                    code = await self._dispatch(group)
                    while self._busy():  # let running sessions finish (a budget, a breaker) or stop them
                        await self._session_end()
                    if code == EXIT_BUDGET and self.stopping is None:  # one ending is said, once it is known
                        if await self._all_done():  # the last sessions finished the plan
                            self.display.say(self._all_done_words())
                            code = EXIT_DONE
                        else:
                            self.display.say(f"budget reached ({self.budget}): starting no more sessions")
                    group.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await self.h.runs.end_runner(self.id)
            self.display.close()
        if self.stopping is not None:
            code = EXIT_SIGNAL.get(self.stopping, 130)
        self._summary(code)
        return code

    def _on_signal(self, sig: signal.Signals) -> None:
        again = self.stopping is not None
        self.stopping = self.stopping or sig
        self.stop_event.set()
        said = signal_words(sig)
        if again:
            self.display.say(f"second {said}: stopping every session now")
        else:
            self.display.say(f"{sig.name}: starting nothing more, stopping the sessions (a second {said}: at once)")
        for control in self.controls.values():
            control.request("stopped", at_once=again)
        self._wake()

    def _wake(self) -> None:
        self.ended.set()
        self.ended = anyio.Event()

    def _on_change(self) -> None:
        self.changes += 1
        self.changed.set()
        self.changed = anyio.Event()

    def _busy(self) -> bool:
        """Whether a session runs (or is starting: its slot is taken before its process starts)."""
        return len(self.free_slots) < self.options.parallel

    async def _session_end(self) -> None:
        ended = self.ended
        await ended.wait()

    async def _keep_alive(self) -> None:
        """Renew the runner's row; stop the sessions a person asked to stop; settle dead runners' sessions."""
        from mcp_harness.runs.service import RUNNER_SEEN_SECONDS

        while True:
            try:
                for session in await self.h.runs.runner_seen(self.id, self.waiting):
                    control = self.controls.get(session)
                    if control is not None and control.stop is None:
                        self.display.say(f"session {session[:8]}: a person asked it to stop")
                        control.request("stopped")
                await self._settle_orphans()
            except HarnessError as exc:
                self.display.say(f"could not renew the runner's record: {exc.message}")
            await self._first_of(self.report_now, timeout=RUNNER_SEEN_SECONDS / 2)
            self.report_now = anyio.Event()

    async def _settle_orphans(self) -> None:
        """Sessions of runners that died: their records close as `crashed`, their leases end."""
        for orphan in await self.h.runs.orphans(self.workspace):
            if orphan.runner == self.id:
                continue
            words = "its runner stopped answering (the runner process died)"
            if await self.h.runs.end_session(
                orphan.id,
                "crashed",
                exit_code=None,
                turns=orphan.turns or 0,
                cost=orphan.cost_usd,
                last_tool=orphan.last_tool,
                last_words=words,
            ):
                ident = Identity(self.workspace, orphan.agent)
                await self.h.tasks.end_leases(ident, f"runner: session {orphan.id[:8]} crashed: {words}")
                summary = f"session {orphan.id[:8]}: crashed, {orphan.turns or 0} turns"
                summary += f", ${orphan.cost_usd:.4f}" if orphan.cost_usd is not None else ", cost unknown"
                details = f"runner {orphan.runner} stopped answering; settled by runner {self.id}"
                try:
                    runner = Identity(self.workspace, RUNNER_AGENT, own=True)
                    await self.h.progress.record(
                        runner, RecordProgressArgs(summary=summary, details=details, task_key=orphan.task_key)
                    )
                except HarnessError as exc:
                    self.display.say(f"could not write the progress entry of session {orphan.id[:8]}: {exc.message}")
                self.display.say(f"session {orphan.id[:8]} of a dead runner settled (crashed)")

    # -- deciding what to start -------------------------------------------------------------------

    async def _dispatch(self, group: anyio.abc.TaskGroup) -> int:
        await self._settle_orphans()
        if await self._no_tasks():
            if self.options.spec is None:
                self.display.say(
                    "the workspace has no tasks: add some (`mcp-harness tasks add KEY --title ...` or "
                    "`tasks add --file FILE`), or give a spec for an initializer session: --spec FILE"
                )
                return EXIT_NO_TASKS
            initializer = await self._initialize()
            if self.stopping is not None:
                return EXIT_DONE
            if await self._no_tasks():
                self.display.say(
                    f"the initializer session added no tasks: read its transcript (`mcp-harness sessions show "
                    f"{initializer[:8]}`)"
                )
                return EXIT_NO_TASKS
        while self.stopping is None:
            self.budget = self._budget_spent()
            if self.budget is not None:
                if self._busy():  # whether the run ends all done or at its budget, they decide
                    self.display.say(f"starting no more sessions ({self.budget}); the running ones finish first")
                return EXIT_BUDGET
            if self.tally.setup_errors >= SETUP_ERRORS_IN_A_ROW:
                self.display.say(f"{SETUP_ERRORS_IN_A_ROW} setup errors in a row: stopping ({self.tally.setup_cause})")
                return EXIT_BREAKER
            if self.tally.no_progress >= NO_PROGRESS_IN_A_ROW:
                if await self._breaker_wait():
                    return EXIT_IDLE
                continue
            pause = self.paused_until - time.monotonic()
            if pause > 0:
                self._say_waiting(f"paused for a rate limit ({pause:.0f} s)")
                with anyio.move_on_after(pause):
                    await self.stop_event.wait()
                continue
            if not self.free_slots:
                await self._session_end()
                continue
            mark = self.changes
            claim, ident, session = await self._claim()
            if claim.task is not None and claim.lease is not None:
                self.waiting = None
                group.start_soon(self._run_session, self.free_slots.pop(), session, ident, claim)
                continue
            reason = claim.reason or "none_pending"
            if not self._busy():
                if reason == "all_done":
                    self.display.say(self._all_done_words())
                    return EXIT_DONE
                self._say_waiting(self._waits_on(claim))
                if self.options.exit_when_idle and reason not in RESOLVES_BY_ITSELF:
                    return EXIT_IDLE
            await self._wait_for_change(claim, mark)
        return EXIT_DONE

    async def _no_tasks(self) -> bool:
        listed = await self.h.tasks.list(
            Identity(self.workspace, RUNNER_AGENT, own=True), ListTasksArgs(status=None, limit=1)
        )
        return not any(listed.counts.model_dump().values())

    def _all_done_words(self) -> str:
        """The run's happy ending: every task, or every task with the run's `--tags`."""
        if not self.options.tags:
            return "all tasks are done"
        return (
            f"all tasks with the tag{'s' if len(self.options.tags) > 1 else ''} {', '.join(self.options.tags)} are done"
        )

    async def _all_done(self) -> bool:
        """Nothing open is left among the run's tasks (every one done or cancelled)."""
        ident = Identity(self.workspace, RUNNER_AGENT, own=True)
        tags: list[str | None] = [*self.options.tags] if self.options.tags else [None]
        for tag in tags:
            if (await self.h.tasks.list(ident, ListTasksArgs(tag=tag, limit=1))).tasks:
                return False
        return True

    def _budget_spent(self) -> str | None:
        o = self.options
        if o.max_sessions is not None and self.tally.started >= o.max_sessions:
            return f"--max-sessions {o.max_sessions}"
        if o.max_cost is not None and self.tally.cost >= o.max_cost:
            return f"--max-cost {o.max_cost} (spent {self.tally.cost_text()})"
        if o.max_hours is not None and time.monotonic() - self.began >= o.max_hours * 3600:
            return f"--max-hours {o.max_hours}"
        return None

    async def _claim(self) -> tuple[ClaimTaskResult, Identity, str]:
        session = str(uuid.uuid4())
        ident = Identity(self.workspace, session_agent(self.agent.base, session))
        claim = await self.h.tasks.claim(ident, ClaimTaskArgs(lease_seconds=LEASE_SECONDS, tags=self.options.tags))
        return claim, ident, session

    def _waits_on(self, claim: ClaimTaskResult) -> str:
        if claim.reason == "none_pending" and claim.known_tags is not None and self.options.tags:
            return f"waiting: {no_task_has(self.options.tags, claim.known_tags)}"
        what = claim.reason or "nothing claimable"
        roots = [w.model_dump(mode="json", exclude_none=True) for w in claim.waiting_on or []]
        named = ", ".join(f"{r.get('key')} ({r.get('status') or r.get('why') or ''})".replace(" ()", "") for r in roots)
        return f"waiting: {what}" + (f" on {named}" if named else "") + f" ({self._what_helps(what, roots)})"

    @staticmethod
    def _what_helps(reason: str, roots: list[dict[str, Any]]) -> str:
        """The command a person runs to move the wait on, where one does."""
        wanted = {"waiting_on_review": Status.IN_REVIEW, "blocked_by_failure": Status.FAILED}.get(reason)
        keys = [str(r["key"]) for r in roots if r.get("status") == wanted] or [str(r["key"]) for r in roots]
        if reason == "waiting_on_review" and keys:
            return (
                f"a person decides: `mcp-harness review approve {keys[0]}` or "
                f"`mcp-harness review reject {keys[0]} --comment ...`"
            )
        if reason == "blocked_by_failure" and keys:
            return (
                f"a person reopens it after reading `mcp-harness tasks show {keys[0]}`: "
                f"`mcp-harness tasks reopen {keys[0]} --reason ...`"
            )
        return "a person's action or a change wakes it"

    def _say_waiting(self, text: str) -> None:
        if text != self.waiting:
            self.waiting = text
            self.display.say(text)
            self.report_now.set()

    async def _wait_for_change(self, claim: ClaimTaskResult, mark: int) -> None:
        """Sleep until the workspace changed since `mark` (taken before the claim, so a change between the
        claim and this wait is not missed), the clock may have made work claimable (the claim's
        `retry_after`), a session ends, or the runner is told to stop."""
        if self.changes != mark:
            return
        remaining = min(WAIT_SECONDS, claim.retry_after + 0.5) if claim.retry_after else WAIT_SECONDS
        await self._first_of(self.ended, self.changed, self.stop_event, timeout=remaining)

    @staticmethod
    async def _first_of(*events: anyio.Event, timeout: float) -> None:
        with anyio.move_on_after(timeout):
            async with anyio.create_task_group() as race:

                async def first(event: anyio.Event) -> None:
                    await event.wait()
                    race.cancel_scope.cancel()

                for event in events:
                    race.start_soon(first, event)

    async def _breaker_wait(self) -> bool:
        """Sessions in a row made no progress: start nothing until a person acts (any change to the
        workspace's tasks, log or checkpoints: a cancel, a review, a task added). True: exit instead."""
        self._say_waiting(
            f"{NO_PROGRESS_IN_A_ROW} sessions in a row ended without progress: starting no more until a person "
            "acts (read `mcp-harness sessions` and `mcp-harness log`; then leave a note the next session reads, "
            "`mcp-harness msg send --to '*' --task KEY BODY`, and start the run again, or drop the task: "
            "`mcp-harness tasks cancel KEY --reason R`)"
        )
        while self._busy():
            await self._session_end()
        if self.options.exit_when_idle:
            return True
        await anyio.sleep(1)  # the feed hears of the sessions' own last writes within a second: not a person's
        mark = self.changes
        while self.stopping is None and self.changes == mark:
            await self._first_of(self.changed, self.stop_event, timeout=WAIT_SECONDS)
        if self.stopping is None:
            self.tally.no_progress = 0
            self.display.say("the workspace changed: starting sessions again")
        return False

    # -- one session ------------------------------------------------------------------------------

    async def _initialize(self) -> str:
        """One initializer session plans the work from the spec; its session id."""
        assert self.options.spec is not None
        session = str(uuid.uuid4())
        ident = Identity(self.workspace, session_agent(self.agent.base, session))
        self.display.say(f"no tasks yet: an initializer session plans the work from {self.options.spec}")
        text = prompt.initializer_prompt(self.options.spec.resolve())
        await self._session(1, session, ident, None, text, kind="initializer")
        return session

    async def _run_session(self, slot: int, session: str, ident: Identity, claim: ClaimTaskResult) -> None:
        try:
            assert claim.task is not None and claim.lease is not None
            key, lease = claim.task.key, claim.lease
            full = await self.h.tasks.list(ident, ListTasksArgs(task_key=key))
            added_by = getattr(full.tasks[0], "added_by", None) if full.tasks else None
            task = claim.task.model_dump(mode="json")
            last = lease.attempt >= claim.task.max_attempts
            text = prompt.task_prompt(task, lease.token, added_by, attempt=lease.attempt, last=last)
            try:
                await self._session(slot, session, ident, claim, text, kind="work")
            except (HarnessError, OSError) as exc:  # the session could not be set up: the task goes back
                why = exc.message if isinstance(exc, HarnessError) else (exc.strerror or str(exc))
                self.display.say(f"slot {slot}: could not start a session on {key}: {why}")
                self.tally.add("setup_error", None)
                self.tally.setup_cause = f"could not start a session: {why}"
                await self._settle(ident, key, lease.token, "setup_error", f"runner: could not start a session: {why}")
        finally:
            self.free_slots.append(slot)
            self._wake()

    async def _session(
        self, slot: int, session: str, ident: Identity, claim: ClaimTaskResult | None, text: str, *, kind: str
    ) -> None:
        key = claim.task.key if claim is not None and claim.task is not None else None
        token = claim.lease.token if claim is not None and claim.lease is not None else None
        workdir = worktrees.slot_worktree(self.root, slot) if self.options.worktrees else self.root
        files = self.data / "sessions" / session
        files.mkdir(parents=True, exist_ok=True, mode=0o700)
        config, prompt_file = files / "mcp.json", files / "prompt.txt"
        config.write_text(json.dumps(mcp_config(self.h.settings.db_url, self.workspace, self.agent.base, session)))
        config.chmod(0o600)
        prompt_file.write_text(text)
        transcript_path = self.data / "transcripts" / self.workspace / f"{session}.jsonl"
        plan = Plan(session, ident.agent, text, workdir, config, prompt_file, key, token)
        await self.h.runs.start_session(
            self.workspace,
            session,
            runner=self.id,
            slot=slot,
            agent=ident.agent,
            task_key=key,
            kind=kind,
            transcript=str(transcript_path),
        )
        self.tally.started += 1
        control = self.controls[session] = process.Control()
        if self.stopping is not None:
            control.request("stopped")
        seen = Observed()
        label = f"{key or 'initializer'} (session {session[:8]})"
        self.display.say(f"slot {slot}: started {label}")
        began = time.monotonic()
        transcript = process.Transcript(transcript_path)

        def shown() -> None:
            spent = f" ${seen.cost_usd:.4f}" if seen.cost_usd is not None else ""
            last = f" last: {seen.last_tool}" if seen.last_tool else ""
            self.display.slot(slot, f"{label} {time.monotonic() - began:.0f}s {seen.turns} turns{spent}{last}")

        try:
            async with anyio.create_task_group() as side:
                if key is not None and token is not None:
                    side.start_soon(self._heartbeat, ident, key, token)
                side.start_soon(self._report, session, seen, shown)
                ended = await process.run(
                    self.agent.launch(plan),
                    lambda line: self.agent.observe(seen, line),
                    seen,
                    transcript,
                    control,
                    stall_seconds=self.options.stall_timeout,
                    session_seconds=self.options.session_timeout,
                    on_output=shown,
                )
                side.cancel_scope.cancel()
        finally:
            transcript.close()
            del self.controls[session]
            self.display.idle(slot)
        with anyio.CancelScope(shield=True):
            await self._finish(slot, session, ident, key, token, kind, seen, ended, time.monotonic() - began, workdir)
        for leftover in (config, prompt_file):
            leftover.unlink(missing_ok=True)
        try:
            files.rmdir()
        except OSError:
            pass

    async def _heartbeat(self, ident: Identity, key: str, token: str) -> None:
        while True:
            await anyio.sleep(LEASE_SECONDS / 4)
            try:
                await self.h.tasks.update(ident, UpdateTaskArgs(task_key=key, action="heartbeat", lease_token=token))
            except HarnessError:
                return  # the task left this lease (completed, released, revoked): nothing left to keep

    async def _report(self, session: str, seen: Observed, shown: Any) -> None:
        """Keep the slot's line current (every second) and the session's record (turns, cost, last tool)
        up to date (every 5 s) while it runs."""
        ticks = 0
        while True:
            await anyio.sleep(1)
            shown()
            ticks += 1
            if ticks % 5:
                continue
            try:
                await self.h.runs.session_seen(session, seen.turns, seen.cost_usd, seen.last_tool)
            except HarnessError:
                pass

    async def _finish(
        self,
        slot: int,
        session: str,
        ident: Identity,
        key: str | None,
        token: str | None,
        kind: str,
        seen: Observed,
        ended: process.Ended,
        seconds: float,
        workdir: Path,
    ) -> None:
        """Decide the outcome, settle a task still held, save work left behind, record the session."""
        action, status = await self._what_it_did(ident, key)
        if kind == "initializer":
            action = "complete" if not await self._no_tasks() and ended.stop is None else action
        if not seen.last_words and ended.stderr:
            seen.last_words = last_said(ended.stderr)
        outcome = outcomes.outcome(outcomes.Ending(ended.stop, seen, ended.exit_code, action, status))
        words = seen.words()
        note = f"runner: session {session[:8]} ended {outcome} after {seconds:.0f} s"
        if seen.server_status not in (None, "connected"):
            note += f" (the harness server was {seen.server_status})"
        elif outcome == "setup_error" and seen.setup_cause:
            note += f" ({seen.setup_cause})"
        if words:
            note += f"; its last words: {words}"
        if key is not None and token is not None and status == Status.CLAIMED:
            await self._settle(ident, key, token, outcome, note, workdir)
        await self._give_back_others(ident, key, session)
        saved = None
        if self.options.worktrees:
            try:
                saved = worktrees.save_work(workdir, session, outcome)
            except HarnessError as exc:
                self.display.say(f"slot {slot}: could not commit the work left in {workdir}: {exc.message}")
        summary = f"session {session[:8]}: {outcome}, {seen.turns} turns, {seconds:.0f} s"
        summary += f", ${seen.cost_usd:.4f}" if seen.cost_usd is not None else ", cost unknown"
        details = note
        if saved is not None:
            commit, changed = saved
            shown_files = ", ".join(changed[: worktrees.LISTED]) + (" ..." if len(changed) > worktrees.LISTED else "")
            details += f"; uncommitted work committed as {commit} on harness/slot-{slot}: {shown_files}"
        try:
            await self.h.progress.record(
                Identity(self.workspace, RUNNER_AGENT, own=True),
                RecordProgressArgs(summary=summary, details=details, task_key=key, thread="main"),
            )
        except HarnessError as exc:
            self.display.say(f"slot {slot}: could not write the progress entry: {exc.message}")
        await self.h.runs.end_session(
            session,
            outcome,
            exit_code=ended.exit_code,
            turns=seen.turns,
            cost=seen.cost_usd,
            last_tool=seen.last_tool,
            last_words=words or None,
        )
        self.tally.add(outcome, seen.cost_usd)
        if outcome == "setup_error":
            self.tally.setup_cause = seen.setup_cause or self._setup_hint(seen, session)
        if outcome == "rate_limited":
            wait = max(0.0, seen.reset_at - time.time()) if seen.reset_at else self.backoff
            self.backoff = min(self.backoff * 2, BACKOFF_MOST)
            self.paused_until = max(self.paused_until, time.monotonic() + wait)
            self.display.say(f"slot {slot}: rate limited: every slot pauses {wait:.0f} s")
        elif outcome != "setup_error":
            self.backoff = BACKOFF_FIRST
        self.display.say(f"slot {slot}: {key or 'initializer'} {summary}" + (f" ({words})" if words else ""))

    @staticmethod
    def _setup_hint(seen: Observed, session: str) -> str:
        """What to check after a setup error that was not the model API's: the harness server in the
        session, or the agent's start."""
        look = f"check the agent command and `mcp-harness sessions show {session[:8]}`"
        if seen.connected is False:
            status = seen.server_status or "absent"
            return f"the harness server did not connect in the agent's session ({status}): {look}"
        return f"the agent did not start ({seen.words() or 'no output'}): {look}"

    async def _what_it_did(self, ident: Identity, key: str | None) -> tuple[str | None, str | None]:
        """The last complete/release/fail the session's identity took on its task, and the status now."""
        if key is None:
            return None, None
        story = await self.h.tasks.story(Identity(self.workspace, RUNNER_AGENT, own=True), key)
        action = None
        for ev in story.events:
            if ev.actor == ident.agent and ev.kind in outcomes.ACTED:
                action = ev.kind
            elif ev.actor == ident.agent and ev.kind == "submit":  # a review task's complete
                action = "complete"
        status: str | None = story.task.status
        held = status == Status.CLAIMED and story.task.owner == ident.agent and story.task.lease is not None
        if status == Status.CLAIMED and not held:
            status = "taken"  # another agent holds it now (a lease that ran out was taken over)
        return action, status

    async def _give_back_others(self, ident: Identity, key: str | None, session: str) -> None:
        """Tasks the session claimed besides its own (against its rules) go back, no attempt counted."""
        listed = await self.h.tasks.list(ident, ListTasksArgs.model_validate({"status": Status.CLAIMED, "limit": 200}))
        operator = Identity(self.workspace, RUNNER_AGENT, role="operator", own=True)
        for row in listed.tasks:
            if row.owner == ident.agent and row.key != key:
                why = f"runner: session {session[:8]} claimed {row.key} besides its own task {key}; given back"
                try:
                    await self.h.tasks.update(operator, UpdateTaskArgs(task_key=row.key, action="release", reason=why))
                except HarnessError:
                    continue  # ended meanwhile
                self.display.say(f"session {session[:8]} had claimed {row.key} too: given back")

    async def _settle(
        self, ident: Identity, key: str, token: str, outcome: SessionOutcome, note: str, workdir: Path | None = None
    ) -> None:
        """End the lease of a task still held: given back (no attempt counted) after a rate limit or a
        setup error, else as a connection's end does (the attempt stays counted), with the note (which
        names what the session left uncommitted in `workdir`, the folder it worked in)."""
        try:
            if outcome in outcomes.GIVE_BACK:
                await self.h.tasks.update(
                    ident, UpdateTaskArgs(task_key=key, action="release", lease_token=token, reason=note)
                )
            else:
                await self.h.tasks.end_leases(ident, note, tokens=[token], cwd=workdir)
        except HarnessError as exc:
            self.display.say(f"could not settle {key}: {exc.message}")

    # -- the end ----------------------------------------------------------------------------------

    def _summary(self, code: int) -> None:
        minutes = (time.monotonic() - self.began) / 60
        ended = ", ".join(f"{n} {word}" for word, n in sorted(self.tally.outcomes.items())) or "none"
        started = f"{self.tally.started} session{'' if self.tally.started == 1 else 's'}"
        line = f"run {self.id} ended (exit {code}) after {minutes:.1f} min: {started} ({ended}); "
        print(line + f"cost {self.tally.cost_text()}", flush=True)

"""`import` trusts nothing: every record is checked with the tools' rules and limits, and the references
between records, before anything is written. A bad file stores nothing and says which line is wrong,
in one line (the CLI never prints a traceback)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import call, mcp_client, run_cli, settings_for
from test_maintenance import export_text, populate

from mcp_harness.arguments import AddTasksArgs, RecordProgressArgs, UpdateTaskArgs
from mcp_harness.errors import InvalidArgument, TooLarge
from mcp_harness.service import Harness, Identity

pytestmark = pytest.mark.anyio


@pytest.fixture
async def export(sqlite_url: str, workspace: str) -> list[str]:
    """A real export of a workspace with checkpoints (a long array included), progress, tasks, tags,
    dependencies and a state schema."""
    await populate(sqlite_url, workspace)
    async with mcp_client(sqlite_url, workspace) as c:
        await call(c, "save_checkpoint", state={"log": [f"entry {i:04d}" for i in range(300)]}, thread="long")
        await call(
            c, "save_checkpoint", mode="merge", state={"log": [f"entry {i:04d}" for i in range(310)]}, thread="long"
        )
    async with Harness.open(settings_for(sqlite_url)) as h:
        await h.schemas.set_schema(Identity(workspace, "a"), "main", {"type": "object"})
    return await export_text(sqlite_url, workspace)


def edit(lines: list[str], kind: str, change: Callable[[dict[str, Any]], Any], nth: int = 0) -> tuple[list[str], int]:
    """The export with the `nth` record of `kind` changed by `change`, and that record's line number."""
    seen = 0
    for index, line in enumerate(lines):
        record = json.loads(line)
        if record.get("type") == kind:
            if seen == nth:
                change(record)
                out = list(lines)
                out[index] = json.dumps(record, ensure_ascii=False)
                return out, index + 1
            seen += 1
    raise AssertionError(f"no {kind} record number {nth}")


def duplicate(
    lines: list[str], kind: str, change: Callable[[dict[str, Any]], Any] = lambda r: None
) -> tuple[list[str], int]:
    """The export with a (changed) copy of the first `kind` record right after it; the copy's line."""
    index = next(i for i, line in enumerate(lines) if json.loads(line).get("type") == kind)
    record = json.loads(lines[index])
    change(record)
    return lines[: index + 1] + [json.dumps(record)] + lines[index + 1 :], index + 2


def setter(**values: Any) -> Callable[[dict[str, Any]], None]:
    return lambda record: record.update(values)


async def refused(tmp_path: Path, lines: list[str], line: int, *needles: str) -> str:
    """Import into a fresh database must fail naming `line`, and leave that database empty."""
    url = f"sqlite+aiosqlite:///{tmp_path / f'target-{secrets.token_hex(3)}.db'}"
    async with Harness.open(settings_for(url)) as h:
        with pytest.raises(InvalidArgument) as caught:
            await h.maintenance.import_lines(lines)
        message = caught.value.message
        assert message.startswith(f"line {line}:") or message.startswith(f"line {line} "), message
        for needle in needles:
            assert needle in message, message
        assert [x async for x in h.maintenance.export()][1:] == []  # nothing but the header
    return message


# -- item 2: records the tools would never store ----------------------------------------------------


async def test_a_task_status_outside_the_enum(tmp_path, export):
    await refused(tmp_path, *edit(export, "task", setter(status="pwned")), "status")


async def test_task_steps_that_are_not_json(tmp_path, export):
    await refused(tmp_path, *edit(export, "task", setter(steps="not json")), "steps")


async def test_a_checkpoint_version_that_is_not_a_number(tmp_path, export):
    await refused(tmp_path, *edit(export, "checkpoint", setter(version="abc")), "version")


async def test_a_progress_summary_over_the_text_limit(tmp_path, export):
    await refused(tmp_path, *edit(export, "progress", setter(summary="x" * 1_000_000)), "summary")


async def test_an_agents_summary_is_held_to_the_tools_own_limit(tmp_path, export, workspace):
    """record_progress refuses a summary over 65,536 characters; an export may not bring one in (the
    harness's own entries, which wrap a person's text, may run a little over)."""
    limit = settings_for("x").limits.max_text_chars
    over = setter(agent="coder", summary="x" * (limit + 1))
    await refused(tmp_path, *edit(export, "progress", over), "summary", f"{limit}")
    fits = [setter(agent="coder", summary="x" * limit), setter(agent="harness", summary="x" * (limit + 100))]
    for number, change in enumerate(fits):
        async with Harness.open(settings_for(f"sqlite+aiosqlite:///{tmp_path / f'fits-{number}.db'}")) as h:
            await h.maintenance.import_lines(edit(export, "progress", change)[0])
            with pytest.raises(TooLarge, match="summary"):  # the tool's limit, the same number
                await h.progress.record(Identity(workspace, "coder"), RecordProgressArgs(summary="x" * (limit + 1)))


@pytest.mark.parametrize(
    ("kind", "change", "needle"),
    [
        ("workspace", setter(name="bad name!"), "name"),
        ("thread", setter(latest_id="ck_nowhere"), "latest"),
        ("blob", setter(data='"changed"'), "hash"),
        ("checkpoint", setter(metadata_json='{"a": ' + "[" * 70 + "]" * 70 + "}"), "nested"),
        ("checkpoint", setter(manifest='[["k", "00000000000000000000000000000000", 5]]'), "value"),
        ("checkpoint", setter(size_bytes=1), "bytes"),
        ("checkpoint", setter(label="L" * 201), "label"),
        ("checkpoint", setter(agent=None), "agent"),
        ("progress", setter(status="maybe"), "status"),
        ("progress", setter(artifacts="[1, 2]"), "artifacts"),
        ("progress", setter(created_at=None), "created_at"),
        ("task", setter(priority=[1]), "priority"),
        ("task", setter(priority="5"), "priority"),
        ("task", setter(max_attempts=0), "max_attempts"),
        ("task", setter(result='{"a": NaN}'), "JSON"),
        ("task", setter(tags='["a", 5]'), "tags"),
        ("task", setter(extra=1), "unknown"),
        ("task", lambda r: r.pop("owner"), "owner"),
        ("task_dep", setter(dep_key="nowhere"), "nowhere"),
        ("task_tag", setter(task_key="nowhere"), "nowhere"),
        ("state_schema", setter(document='{"type": 5}'), "Schema"),
        ("segment", setter(data=""), "segment"),
        ("progress", setter(summary="a NUL: \u0000"), "NUL"),  # the tools' rule: text never holds U+0000
        ("task", setter(title="t\u0000"), "NUL"),
        ("task", setter(status="in_review", review=False, kind="work"), "neither a review task nor a gate"),
        ("progress", setter(summary="half a pair: \ud800"), "UTF-8"),
        ("checkpoint", setter(manifest='[["k", null, 8, "\\"\\\\ud800\\""]]'), "Unicode"),
    ],
)
async def test_records_are_checked_like_tool_arguments(tmp_path, export, kind, change, needle):
    await refused(tmp_path, *edit(export, kind, change), needle)


async def test_references_between_records(tmp_path, export):
    # a task whose own dependency list disagrees with its dependency records
    lines, line = edit(export, "task", setter(depends_on='["t1"]'), nth=0)  # t1 would depend on itself
    await refused(tmp_path, lines, line)
    # a record of a workspace the header does not list
    lines, line = edit(export, "thread", setter(workspace="elsewhere"))
    await refused(tmp_path, lines, line, "elsewhere")
    # a claimed task whose dependency is not done (claim_task never leaves one so)
    lines, line = edit(
        export,
        "task",
        setter(status="claimed", owner="x", lease_token="tok", lease_expires_at=1e10, lease_seconds=60),
        nth=1,
    )
    await refused(tmp_path, lines, line, "claimed")


async def test_flags_are_derived_not_trusted(tmp_path, export, workspace):
    """`ready` says whether a task may be claimed: a file cannot make a blocked task claimable."""
    lines, _ = edit(export, "task", setter(ready=True), nth=1)  # t2 depends on t1, which is not done
    url = f"sqlite+aiosqlite:///{tmp_path / 'flags.db'}"
    async with Harness.open(settings_for(url)) as h:
        await h.maintenance.import_lines(lines)
    async with mcp_client(url, workspace, agent="other") as c:
        got = await call(c, "claim_task")
        assert got["task"] is None  # t1 is held by a live lease, and t2 waits for it


# -- item 3: each of these printed a traceback; now one line naming the line ----------------------


def cli_import(tmp_path: Path, content: bytes) -> tuple[int, str]:
    dump = tmp_path / f"dump-{secrets.token_hex(3)}.jsonl"
    dump.write_bytes(content)
    out = run_cli("import", str(dump), "--db", str(tmp_path / f"cli-{secrets.token_hex(3)}.db"))
    assert "Traceback" not in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    return out.returncode, out.stderr.strip()


def text(lines: list[str]) -> bytes:
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.slow  # starts a process
@pytest.mark.parametrize("kind", ["checkpoint", "task", "version", "blob", "progress", "task_tag"])
async def test_duplicates_are_one_line_errors(tmp_path, export, kind):
    if kind == "version":  # another checkpoint id, same thread and version
        lines, line = duplicate(export, "checkpoint", setter(id="ck_another"))
    else:
        lines, line = duplicate(export, kind)
    code, err = cli_import(tmp_path, text(lines))
    assert code != 0 and f"line {line}" in err and "twice" in err, err


@pytest.mark.slow  # starts a process
@pytest.mark.parametrize(
    ("kind", "change"),
    [
        ("task", setter(priority=[1])),
        ("blob", setter(data=5)),
        ("header", setter(format_version="3")),
        ("header", setter(format_version=None)),
        ("checkpoint", setter(version=2**63)),
    ],
)
async def test_wrong_types_are_one_line_errors(tmp_path, export, kind, change):
    lines, line = edit(export, kind, change)
    code, err = cli_import(tmp_path, text(lines))
    assert code != 0 and f"line {line}" in err, err


@pytest.mark.slow  # starts a process
async def test_invalid_utf8_and_deep_nesting_are_one_line_errors(tmp_path, export):
    content = text(export[:3]) + b'{"type": "progress", "summary": "\xff\xfe"}\n' + text(export[3:])
    code, err = cli_import(tmp_path, content)
    assert code != 0 and "line 4" in err and "UTF-8" in err, err
    deep = "[" * 100_000 + "]" * 100_000
    code, err = cli_import(tmp_path, text(export[:2] + [deep] + export[2:]))
    assert code != 0 and "line 3" in err and "nested" in err, err


@pytest.mark.slow  # starts a process
async def test_a_valid_export_still_imports_from_the_cli(tmp_path, export, workspace):
    dump = tmp_path / "ok.jsonl"
    dump.write_bytes(text(export))
    target = tmp_path / "ok.db"
    out = run_cli("import", str(dump), "--db", str(target))
    assert out.returncode == 0, out.stderr
    async with mcp_client(f"sqlite+aiosqlite:///{target}", workspace) as c:
        assert len((await call(c, "restore_state", thread="long"))["state"]["log"]) == 310


async def test_ids_another_workspace_holds_are_refused_on_both_backends(db_url, workspace):
    """Checkpoint and progress ids are unique in the whole database: a copy of a workspace under
    another name collides with the original. One line, and nothing of the copy is stored."""
    await populate(db_url, workspace)
    copy = f"{workspace}-copy"
    renamed = []
    for line in await export_text(db_url, workspace):
        record = json.loads(line)
        if record["type"] == "header":
            record["workspaces"] = [copy]
        else:
            record["name" if record["type"] == "workspace" else "workspace"] = copy
        renamed.append(json.dumps(record))
    async with Harness.open(settings_for(db_url)) as h:
        with pytest.raises(InvalidArgument, match=r"^line \d+: this (checkpoint|progress) has an id"):
            await h.maintenance.import_lines(renamed)
        assert [x async for x in h.maintenance.export(copy)][1:] == []


# -- issue 26: statuses the tools could never leave a task in, given its dependencies ------------------


def edit_task(lines: list[str], key: str, **values: Any) -> tuple[list[str], int]:
    keys = [json.loads(line)["key"] for line in lines if json.loads(line).get("type") == "task"]
    return edit(lines, "task", setter(**values), nth=keys.index(key))


async def test_statuses_that_do_not_fit_the_graph_are_refused(tmp_path, sqlite_url, workspace):
    from mcp_harness.models import TaskSpec

    async with Harness.open(settings_for(sqlite_url)) as h:
        await h.tasks.add(
            Identity(workspace, "a"),
            AddTasksArgs(
                tasks=[
                    TaskSpec(key="build", title="Build"),
                    TaskSpec(key="gate", title="Sign-off", kind="gate", depends_on=["build"]),
                    TaskSpec(key="ship", title="Ship", review=True, depends_on=["gate"]),
                ]
            ),
        )
    lines = await export_text(sqlite_url, workspace)
    done = {"status": "done", "completed_at": 1.0, "verification": "ok"}
    # a gate left pending with every dependency done: it would never enter review
    edited, _ = edit_task(lines, "build", **done)
    edited, line = edit_task(edited, "gate", status="pending")
    await refused(tmp_path, edited, line, "gate 'gate' is pending while every dependency is done")
    # a review task in review while the gate it depends on is pending: approving it would skip the gate
    edited, line = edit_task(lines, "ship", status="in_review", attempts=1, verification="ok")
    await refused(tmp_path, edited, line, "task 'ship' is in review while a dependency is not done")
    # a gate in review before its dependency is done
    edited, line = edit_task(lines, "gate", status="in_review")
    await refused(tmp_path, edited, line, "task 'gate' is in review while a dependency is not done")
    # what the tools do reach imports: the build done, the gate in review
    edited, _ = edit_task(lines, "build", **done)
    edited, _ = edit_task(edited, "gate", status="in_review")
    async with Harness.open(settings_for(f"sqlite+aiosqlite:///{tmp_path / 'fits.db'}")) as h:
        await h.maintenance.import_lines(edited)
        assert (
            await h.tasks.update(
                Identity(workspace, "olga", "operator"), UpdateTaskArgs(task_key="gate", action="approve")
            )
        ).status == "done"


def test_every_record_kind_has_its_check() -> None:
    """The checker's table names a check for every kind an export may hold (the workspace record is
    checked by the dispatch itself), and nothing else: a new kind of record cannot go unchecked."""
    from mcp_harness.config import Limits
    from mcp_harness.maintenance.import_check import ImportChecker
    from mcp_harness.maintenance.import_records import fields

    checker = ImportChecker(Limits(), ["ws"])
    assert set(checker._checks) == set(fields(Limits())) - {"workspace"}

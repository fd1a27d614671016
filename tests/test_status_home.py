"""A task's statuses have one home, `tasks/rules.py`: every other module names them through it (`Status`,
`BLOCKED`, `SHOWN`, `LOOKS`, ...), never by spelling a status as a string of its own.

The scan reads the package's Python code (not its SQL or templates) and finds a status spelled where a
status is meant: compared with a task's status (`row.status == "claimed"`, `r["status"] in (...)`,
`d.get("status")`), given as a status (`status=["pending"]`, `{"status": "claimed"}`), or listed (a
tuple, list, set, dict keys or dict values whose every item is a status). A word that is a status
elsewhere (a session outcome `failed`, a progress entry's `done`) is left alone."""

from __future__ import annotations

import ast
from pathlib import Path

from mcp_harness.models import TaskCounts
from mcp_harness.tasks import rules as task_states
from mcp_harness.tasks.rules import BOARD_ORDER, LOOKS, SHOWN, STATUS_AFTER, UNDER_WAY, Status

PACKAGE = Path(task_states.__file__).parent
HOME = Path(task_states.__file__)
STATUS_NAMES = frozenset(SHOWN)
#: what is called a status beside a task's
STATUS_HOLDERS = frozenset({"status", "was_status"})
#: comparisons of another status with a word a task status shares: (module, the compared expression)
OTHER_STATUSES = {("progress/service.py", "args.status")}  # a progress entry's (`ProgressStatus`)


def _holds_status(node: ast.expr) -> bool:
    """`x.status`, `status`, `x["status"]`, `x.get("status")`."""
    if isinstance(node, ast.Attribute):
        return node.attr in STATUS_HOLDERS
    if isinstance(node, ast.Name):
        return node.id in STATUS_HOLDERS
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value in STATUS_HOLDERS
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value in STATUS_HOLDERS
    return False


def _words(node: ast.expr | None) -> list[str]:
    """The strings `node` spells: itself, or the items of a tuple, list or set."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [w for item in node.elts for w in _words(item)]
    return []


def _listed(items: list[ast.expr | None]) -> list[str]:
    """The items when there are two or more and every one is a status spelled out, else none."""
    words = [w for item in items for w in _words(item)]
    whole = len(words) == len(items) >= 2 and all(isinstance(item, ast.Constant) for item in items)
    return words if whole and set(words) <= STATUS_NAMES else []


def spelled(module: str, tree: ast.AST) -> list[tuple[int, list[str]]]:
    """(line, statuses) of every status `tree` spells where a status is meant."""
    found = []
    for node in ast.walk(tree):
        words: list[str] = []
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            held = [s for s in sides if _holds_status(s)]
            if held and not any((module, ast.unparse(s)) in OTHER_STATUSES for s in held):
                words = [w for side in sides for w in _words(side) if w in STATUS_NAMES]
        elif isinstance(node, ast.keyword) and node.arg in ("status", "statuses"):
            words = [w for w in _words(node.value) if w in STATUS_NAMES]
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value in STATUS_HOLDERS:
                    words += [w for w in _words(value) if w in STATUS_NAMES]
            words += _listed(list(node.keys)) + _listed(list(node.values))
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            words = _listed(list(node.elts))
        if words:
            found.append((node.lineno, words))
    return found


def test_statuses_are_spelled_only_in_task_states():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == HOME:
            continue
        module = path.relative_to(PACKAGE).as_posix()
        found += [f"{module}:{line}: {words}" for line, words in spelled(module, ast.parse(path.read_text()))]
    assert not found, "statuses spelled outside task_states.py (name them through it):\n" + "\n".join(found)


def test_the_scan_finds_what_it_looks_for():
    """The scan's own check: each form it refuses is found, and the look-alikes are not."""
    refused = [
        'row.status == "claimed"',
        'r["status"] in ("pending", "blocked")',
        'd.get("status") != "done"',
        'tasks.list(ident, status=["pending"])',
        'tasks.board(ident, statuses=["in_review"])',
        'row = {"key": k, "status": "claimed"}',
        'COLUMNS = ("pending", "claimed", "done")',
        'AFTER = {"claim": "claimed", "cancel": "cancelled"}',
        'SPELLS = {"pending": [], "claimed": []}',
    ]
    allowed = [
        'outcome = "failed"',  # one word, not compared with a status
        'ENDED = ("completed", "failed", "retried")',  # not all statuses
        'PROGRESS = ("done", "in_progress", "blocked", "note")',
        "row.status == Status.CLAIMED",
        'request.query_params.get("done")',
        'args.status == "done"',  # in progress/service.py: a progress entry's status
    ]
    for source in refused:
        assert spelled("any.py", ast.parse(source)), source
    for source in allowed:
        assert not spelled("progress/service.py", ast.parse(source)), source


def test_what_people_see_covers_every_status():
    """The board's columns, the console's labels, the terminal's colours and the counts a result shows
    name every shown status, once; the pace page's statuses and the replay of events name stored ones."""
    assert sorted(BOARD_ORDER) == sorted(LOOKS) == sorted(SHOWN)
    assert tuple(TaskCounts.model_fields) == SHOWN
    assert set(UNDER_WAY) < set(Status) and set(STATUS_AFTER.values()) <= set(Status)

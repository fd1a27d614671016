"""The layers hold: adapters -> service -> store, nothing calls upward, no two modules import each other.
Read from the source with `ast`. (Module size is no rule here: cut modules by concept, never by a count.)"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "mcp_harness"
#: the modules that face people and clients: they reach data only through the service
ADAPTERS = ("server", "mcp_tools", "resources", "lifespan", "http", "stdio", "sdk", "cli", "console")
#: what adapters call the open harness (`args.db` is the --db option, not a database)
HARNESS_NAMES = ("h", "harness", "opened", "self.harness", "server.harness")
DATABASE_LIBRARIES = ("sqlalchemy", "sqlmodel", "asyncpg", "sqlite3", "aiosqlite")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(name: str) -> set[str]:
    """Every module `name` imports (anywhere in it: top level, functions, TYPE_CHECKING blocks), as
    names inside the package ("store.tasks") or the top-level name of an outside one ("sqlalchemy")."""
    path = MODULES[name]
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add(_inside(alias.name) or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                base = _inside(node.module or "")
                if base is None:
                    found.add((node.module or "").split(".")[0])
                    continue
            else:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            for alias in node.names:  # `from . import lists` imports a module, `from .x import y` a name
                sub = f"{base}.{alias.name}" if base else alias.name
                found.add(sub if sub in MODULES else base)
    found.discard(name)
    return found


def _inside(dotted: str) -> str | None:
    if dotted == "mcp_harness" or dotted.startswith("mcp_harness."):
        return dotted.removeprefix("mcp_harness").lstrip(".")
    return None


def layer(name: str) -> str:
    return name.split(".")[0]


def test_the_import_graph_is_read_from_the_source():
    """Guards the checks below against passing because the parser found nothing."""
    assert "store.tasks" in imports("service.tasks") and "sqlalchemy" in imports("store.backup")
    assert "service" in imports("server") and "service.lists" in imports("service.checkpoints")


def test_adapters_reach_data_only_through_the_service():
    offenders = {}
    for name in MODULES:
        if layer(name) not in ADAPTERS:
            continue
        bad = {m for m in imports(name) if layer(m) == "store" or m in DATABASE_LIBRARIES}
        tree = ast.parse(MODULES[name].read_text())
        # `harness.db` / `h.db`: the database object itself, past the service
        bad |= {
            f"{ast.unparse(node.value)}.db"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr == "db" and ast.unparse(node.value) in HARNESS_NAMES
        }
        if bad:
            offenders[name] = sorted(bad)
    assert offenders == {}


def test_nothing_calls_upward():
    upward = {
        "store": {"service", *ADAPTERS},
        "service": set(ADAPTERS),
        "arguments": {"service", "store", *ADAPTERS},
        "models": {"service", "store", *ADAPTERS},
        "errors": {"service", "store", *ADAPTERS},
        "task_states": {"service", "store", *ADAPTERS},  # shared by the service and the store
    }
    offenders = {
        name: sorted(m for m in imports(name) if layer(m) in upward[layer(name)])
        for name in MODULES
        if layer(name) in upward
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_no_two_modules_import_each_other():
    graph = {name: {m for m in imports(name) if m in MODULES} for name in MODULES}
    pairs = sorted({tuple(sorted((a, b))) for a, deps in graph.items() for b in deps if a in graph.get(b, ())})
    assert pairs == []


def test_server_and_resources_are_separate_adapters():
    assert "server" not in imports("resources") and "resources" in imports("server")


def test_the_service_imports_no_database_library():
    offenders = {
        name: sorted(m for m in imports(name) if m in DATABASE_LIBRARIES)
        for name in MODULES
        if layer(name) == "service"
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_task_state_machine_is_pure():
    """`task_states` holds the rules only: the standard library, no database, no other layer."""
    assert "task_states" in imports("store.tasks") and "task_states" in imports("service.task_actions")
    assert imports("task_states") <= {"__future__", "enum", "collections", "dataclasses", "typing"}


@pytest.mark.slow
def test_a_server_starts_without_loading_the_database_layers():
    """Clients start the server for every session: until the handshake is answered, nothing of the
    service, the store or SQLAlchemy is imported (they load with the database, after it). One module
    importing them at its top made the start 1.9x the no-op server's (tools/bench_startup.py)."""
    import subprocess
    import sys

    code = (
        "import sys; import mcp_harness.cli.main, mcp_harness.server, mcp_harness.stdio; "
        "print(sorted(m for m in sys.modules if m.startswith(('mcp_harness.service', 'mcp_harness.store', "
        "'sqlalchemy', 'sqlmodel', 'asyncpg'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout

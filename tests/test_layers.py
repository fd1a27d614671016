"""The layers hold: adapters -> the harness service -> the concepts -> the database -> the shared vocabulary.

The layers themselves are stated once, as import contracts in `pyproject.toml` (`[tool.importlinter]`),
and checked here by import-linter. What a contract cannot say is checked from the source with `ast`,
by rules that name no module: a concept's store reads and writes only through the database layer, no
two modules import each other, the task rules are pure, and a server starts without the data layers.
(Module size is no rule here: cut modules by concept, never by a count.)"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest
from importlinter import configuration
from importlinter.application.use_cases import lint_imports

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "mcp_harness"
#: a concept's modules of pure rules (the standard library and the shared vocabulary only): any layer may use them
PURE = ("rules", "patterns")
CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(name: str) -> set[str]:
    """Every module `name` imports (anywhere in it: top level, functions, TYPE_CHECKING blocks), as
    names inside the package ("tasks.store.tasks") or the top-level name of an outside one ("sqlalchemy")."""
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
            for alias in node.names:  # `from mcp_harness.tasks import rules` imports a module
                sub = f"{base}.{alias.name}" if base else alias.name
                found.add(sub if sub in MODULES else base)
    found.discard(name)
    return found


def _inside(dotted: str) -> str | None:
    if dotted == "mcp_harness" or dotted.startswith("mcp_harness."):
        return dotted.removeprefix("mcp_harness").lstrip(".")
    return None


def layers() -> list[list[str]]:
    """The layers of the contract that states them, top first, each as its packages."""
    (contract,) = [c for c in CONTRACTS if c["type"] == "layers"]
    return [[m.strip().removeprefix("mcp_harness.") for m in re.split(r"[|:]", layer)] for layer in contract["layers"]]


def concepts() -> list[str]:
    """The concept packages: the layer below the harness service."""
    return layers()[2]


def is_store(name: str) -> bool:
    """The database layer and every concept's store (`tasks.store.tasks`, `messages.store`)."""
    parts = name.split(".")
    return parts[0] == "store" or "store" in parts[1:]


def test_the_import_contracts_hold():
    """import-linter checks every contract of `pyproject.toml` against the package's real imports."""
    configuration.configure()  # what its command line does first
    assert lint_imports(config_filename=str(ROOT / "pyproject.toml"), cache_dir=None, no_logo=True) is True


def test_the_contracts_name_every_package_and_the_import_graph_is_read():
    """Guards the checks against passing because a package was left out of the contracts or the parser
    found nothing: every package and top-level module of mcp_harness is in a layer."""
    named = {m for layer in layers() for m in layer}
    top = {name.split(".")[0] for name in MODULES if name}
    assert top - named == set(), f"packages in no layer of pyproject.toml: {sorted(top - named)}"
    assert "tasks.store.tasks" in imports("tasks.service") and "sqlalchemy" in imports("maintenance.store.backup")
    assert {"tasks", "checkpoints", "messages"} <= set(concepts())


def test_a_concepts_store_reaches_only_the_database_and_the_shared_vocabulary():
    """A store module imports other stores, the database layer, the bottom layer (errors, models...)
    and the concepts' pure rules, never a concept's service or an adapter."""
    bottom = set(layers()[-1])
    allowed_rules = {f"{c}.{m}" for c in concepts() for m in PURE}
    offenders = {}
    for name in MODULES:
        if not is_store(name):
            continue
        bad = {
            m
            for m in imports(name)
            if m in MODULES and m and not is_store(m) and m.split(".")[0] not in bottom and m not in allowed_rules
        }
        if bad:
            offenders[name] = sorted(bad)
    assert offenders == {}


#: what adapters call the open harness (`args.db` is the --db option, not a database)
HARNESS_NAMES = ("h", "harness", "opened", "self.harness", "server.harness")


def test_adapters_do_not_reach_past_the_harness_to_its_database():
    """`h.db` / `harness.db`: the database object itself, which only the harness's services use."""
    adapters = tuple(m.removeprefix("mcp_harness.") for m in layers()[0])
    offenders = {}
    for name, path in MODULES.items():
        if name.split(".")[0] not in adapters:
            continue
        found = {
            f"{ast.unparse(node.value)}.db"
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Attribute) and node.attr == "db" and ast.unparse(node.value) in HARNESS_NAMES
        }
        if found:
            offenders[name] = sorted(found)
    assert offenders == {}


def test_server_and_resources_are_separate_adapters():
    assert "mcp.server" not in imports("mcp.resources") and "mcp.resources" in imports("mcp.server")


def test_no_two_modules_import_each_other():
    graph = {name: {m for m in imports(name) if m in MODULES} for name in MODULES}
    pairs = sorted({tuple(sorted((a, b))) for a, deps in graph.items() for b in deps if a in graph.get(b, ())})
    assert pairs == []


def test_the_task_state_machine_is_pure():
    """`tasks.rules` holds the rules only: the standard library, no database, no other layer."""
    assert "tasks.rules" in imports("tasks.store.tasks") and "tasks.rules" in imports("tasks.actions")
    assert imports("tasks.rules") <= {"__future__", "enum", "collections", "dataclasses", "typing"}


@pytest.mark.slow
def test_a_server_starts_without_loading_the_database_layers():
    """Clients start the server for every session: until the handshake is answered, nothing of the
    service, the concepts, the store or SQLAlchemy is imported (they load with the database, after it).
    One module importing them at its top made the start far slower than a no-op server's."""
    import subprocess
    import sys

    data = tuple(f"mcp_harness.{p}." for p in ["service", *concepts(), "store"])
    pure = tuple(f"mcp_harness.{c}{m}" for c in concepts() for m in ("", *(f".{p}" for p in PURE)))
    code = (
        "import sys; import mcp_harness.cli.main, mcp_harness.mcp.server, mcp_harness.mcp.stdio; "
        f"print(sorted(m for m in sys.modules if (m + '.').startswith({data!r} + ('sqlalchemy.', 'sqlmodel.', "
        f"'asyncpg.')) and m not in {pure!r}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout

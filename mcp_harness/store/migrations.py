"""Numbered schema migrations, applied on start inside one write transaction.

Each migration is two files under `store/sql/migrations/`, one per dialect:
`NNNN_name.sqlite.sql` and `NNNN_name.postgresql.sql` (NNNN: its number, from 0001 without gaps;
the same name in both; a dialect with nothing to do has a file of comments only). A file is the
literal SQL the migration runs: statements, each ended by a line holding only `/` (one separator
for every statement, since trigger and function bodies hold `;`), with `--` comments anywhere; its
first comment line says what it does. Released files are never edited (`tests/test_migrations.py`
pins their hashes): a database is exactly what its migrations made it, whatever `tables.py` says
today. `tables.py` declares the same schema for the code; the tests build a database from these
files and compare it with those declarations (columns, keys, indexes, triggers and functions), so a
table changed without a new migration fails them. To change the schema: change `tables.py`, add the
next number's two files. Nothing else (this module finds them).

The runner needs no SQLAlchemy: it runs on the hot path's `Connection` (sqlite3, or the asyncpg
pool), so a session's first call never imports it. SQLite: the transaction opens with BEGIN
IMMEDIATE, so a second server starting at the same moment waits for the first. PostgreSQL: a
transaction-scoped advisory lock does the same. A database whose schema is newer than this code is
refused: an old server must not write a layout it does not know.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path

from mcp_harness.errors import Unavailable
from mcp_harness.store import named
from mcp_harness.store.connection import Connection

log = logging.getLogger(__name__)

MIGRATIONS_DIR = named.SQL_DIR / "migrations"
#: a migration file's name: NNNN_name.dialect.sql
_FILE = re.compile(r"(\d{4})_([a-z0-9_]+)\.(sqlite|postgresql)\.sql")
#: the one statement separator: a line holding only `/`
_SEPARATOR = re.compile(r"^/[ \t]*$", re.MULTILINE)

#: any fixed 64-bit number; it names the lock every mcp-harness server takes while migrating
ADVISORY_LOCK_ID = 0x6D63_7068_6172_6E73

Q = named.load("meta")


class MigrationFileError(Exception):
    """The migration files do not follow the layout (a programming error: fails at import)."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    what: str  #: the first comment line of its SQLite file
    files: dict[str, Path]  #: dialect -> its file
    sql: dict[str, tuple[str, ...]]  #: dialect -> its statements

    def statements(self, dialect: str) -> list[str]:
        return list(self.sql[dialect])


def _has_sql(chunk: str) -> bool:
    return any(line.strip() and not line.strip().startswith("--") for line in chunk.splitlines())


def split(text: str, *, source: str = "a migration file") -> tuple[str, ...]:
    """The statements of a migration file (a chunk of comments only is no statement)."""
    chunks = _SEPARATOR.split(text)
    if _has_sql(chunks[-1]):
        raise MigrationFileError(f"{source}: its last statement is not ended by a line holding only '/'")
    return tuple(chunk.strip() for chunk in chunks[:-1] if _has_sql(chunk))


def _what(text: str, default: str) -> str:
    for line in text.splitlines():
        if line.startswith("--"):
            return line.lstrip("- ").split(": ", 1)[-1]
    return default


def load(folder: Path = MIGRATIONS_DIR) -> list[Migration]:
    """Every migration in `folder`, checked: each number has both dialects' files under one name, and
    the numbers run from 1 without gaps."""
    found: dict[int, dict[str, Path]] = {}
    names: dict[int, str] = {}
    for path in sorted(folder.iterdir()):
        if path.name.startswith((".", "__")):
            continue
        match = _FILE.fullmatch(path.name)
        if match is None:
            raise MigrationFileError(
                f"{path.name}: not a migration file's name (NNNN_name.sqlite.sql or .postgresql.sql)"
            )
        version, name, dialect = int(match.group(1)), match.group(2), match.group(3)
        if names.setdefault(version, name) != name:
            raise MigrationFileError(f"migration {version} has two names: {names[version]!r} and {name!r}")
        found.setdefault(version, {})[dialect] = path
    for version, files in found.items():
        if set(files) != {"sqlite", "postgresql"}:
            raise MigrationFileError(f"migration {version} has no {({'sqlite', 'postgresql'} - set(files)).pop()} file")
    if sorted(found) != list(range(1, len(found) + 1)):
        raise MigrationFileError(f"migration numbers must run from 1 without gaps: {sorted(found)}")
    out = []
    for version in sorted(found):
        texts = {dialect: path.read_text(encoding="utf-8") for dialect, path in found[version].items()}
        sql = {dialect: split(text, source=found[version][dialect].name) for dialect, text in texts.items()}
        what = _what(texts["sqlite"], names[version])
        out.append(Migration(version, names[version], what, found[version], sql))
    return out


MIGRATIONS: list[Migration] = load()
SCHEMA_VERSION = MIGRATIONS[-1].version


async def current_version(conn: Connection) -> int:
    """The schema version recorded in the database, 0 for an empty database."""
    if not await conn.fetch_value(Q.meta_exists):
        return 0
    value = await conn.fetch_value(Q.get_meta, {"key": "schema_version"})
    return int(value) if value is not None else 0


async def _set_meta(conn: Connection, key: str, value: str) -> None:
    await conn.execute(Q.delete_meta, {"key": key})
    await conn.execute(Q.insert_meta, {"key": key, "value": value})


async def migrate(conn: Connection) -> int:
    """Bring the schema up to `SCHEMA_VERSION` inside the caller's write transaction; returns the
    version found before."""
    if conn.dialect == "postgresql":
        await conn.execute(Q.migration_lock, {"id": ADVISORY_LOCK_ID})
    found = await current_version(conn)
    if found > SCHEMA_VERSION:
        raise Unavailable(
            f"this database was written by a newer mcp-harness (schema version {found}; this version "
            f"understands up to {SCHEMA_VERSION}): upgrade mcp-harness to use it"
        )
    if found == SCHEMA_VERSION:
        return found
    for migration in MIGRATIONS:
        if migration.version > found:
            for statement in migration.statements(conn.dialect):
                await conn.execute_script(statement)
    await _set_meta(conn, "schema_version", str(SCHEMA_VERSION))
    await _set_meta(conn, "migrated_at", repr(time.time()))
    log.info("database schema migrated from version %d to %d", found, SCHEMA_VERSION)
    return found

"""Named queries: the SQL lives in `.sql` files beside the store modules of its concept
(`tasks/store/tasks.sql`; the database's own in `store/sql/`), one file per subject (procrastinate-style),
each file name once in the package, and is loaded once, when the store module that runs it is imported.

A file is a series of statements, each under a header naming it::

    -- name: lock_thread
    -- row: ThreadHead
    -- The thread's head, locked until commit (comment lines after the headers are kept out of the SQL).
    SELECT t.latest_version AS version, ... WHERE t.workspace = :ws AND t.name = :thread

    -- name: lock_thread [postgresql]
    -- row: ThreadHead
    SELECT ... FOR UPDATE OF t

- `-- name: NAME` starts a statement (NAME: lower_case identifier). Parameters are `:name`.
- `-- name: NAME [postgresql]` (or `[sqlite]`): that dialect's text where the two differ; the plain
  block serves the other dialect. A name with only a `[postgresql]` block is PostgreSQL-only.
- `-- row: RecordType`: the `records.py` type its rows become (fields = the columns it selects,
  checked on the first rows); without it, rows are a record type named after the columns.
  `{columns}` in the SQL stands for that type's fields in order (`{t.columns}`: each as `t.field`), so a
  table's column list is written once, as its record.
- Comment lines between the headers and the SQL describe the statement; comment lines after it (a
  heading for the statements that follow) belong to no statement.

Checked at load, failing loudly: a statement before any header, an unknown dialect, a duplicate name
(or dialect variant), an empty statement, an unknown row type. Looking up a name the file does not
hold raises `LookupError` naming the file. Usage, in the store module of the concept::

    Q = named.load("checkpoints")            # checkpoints/store/checkpoints.sql
    await conn.fetch_one(Q.lock_thread, {"ws": ws, "thread": thread})

Each statement is one `Query` (see `connection.py`): its asyncpg text is derived once; asyncpg
prepares it once per connection and sqlite3 caches it, so a named query costs what a literal did.
Python builds SQL only for the few statements that come in shapes chosen at run time (`tasks/store/queries.py`).
"""

from __future__ import annotations

import re
from pathlib import Path

from mcp_harness.store.connection import Query, Record, columns

PACKAGE = Path(__file__).resolve().parent.parent
SQL_DIR = Path(__file__).resolve().parent / "sql"  # the database's own statements, and the migrations
DIALECTS = ("sqlite", "postgresql")

_NAME = re.compile(r"--\s*name:\s*([a-z_][a-z0-9_]*)\s*(?:\[(\w+)\])?\s*$")
_ROW = re.compile(r"--\s*row:\s*(\w+)\s*$")


class QueryFileError(Exception):
    """A `.sql` file of the store does not follow the format (a programming error: fails at import)."""


class Queries:
    """The statements of one `.sql` file, as attributes (`Q.lock_thread`) or by `Q["lock_thread"]`."""

    def __init__(self, source: str, queries: dict[str, Query], dialects: dict[str, tuple[str, ...]]) -> None:
        self._source = source
        self._queries = queries
        self._dialects = dialects
        self.__dict__.update(queries)  # plain attribute lookups: no __getattr__ on the hot path

    def written_for(self, name: str) -> tuple[str, ...]:
        """The dialects a statement was written for (both, unless it has only `[dialect]` blocks)."""
        self[name]
        return self._dialects[name]

    def __getattr__(self, name: str) -> Query:  # only for names not found
        if name.startswith("__"):
            raise AttributeError(name)
        raise LookupError(f"{self._source} has no query named {name!r} (it has: {', '.join(sorted(self._queries))})")

    def __getitem__(self, name: str) -> Query:
        try:
            return self._queries[name]
        except KeyError:
            return self.__getattr__(name)

    def __iter__(self):  # noqa: ANN204 - an iterator of names
        return iter(self._queries)

    def __repr__(self) -> str:
        return f"<Queries {self._source}: {len(self._queries)}>"


_loaded: dict[str, Queries] = {}
_files: dict[str, Path] = {}


def sql_files() -> dict[str, Path]:
    """Every named-query file of the package by its name (`tasks` -> `tasks/store/tasks.sql`), the
    migrations aside. Two files of one name fail loudly: `load` could not tell them apart."""
    if not _files:
        for path in sorted(PACKAGE.rglob("*.sql")):
            if path.parent.name == "migrations":
                continue
            if path.stem in _files:
                raise QueryFileError(f"two query files named {path.name}: {_files[path.stem]} and {path}")
            _files[path.stem] = path
    return _files


def load(name: str) -> Queries:
    """The named queries of the package's `<name>.sql` (parsed and checked once per process)."""
    found = _loaded.get(name)
    if found is None:
        path = sql_files()[name]
        source = path.relative_to(PACKAGE).as_posix()
        found = _loaded[name] = parse(path.read_text(encoding="utf-8"), source=source)
    return found


def parse(text: str, *, source: str) -> Queries:
    """Named queries from the text of a `.sql` file (see the module's docstring for the format)."""
    blocks: dict[tuple[str, str | None], tuple[str, str | None, int]] = {}  # (name, dialect) -> (sql, row, line)
    current: tuple[str, str | None] | None = None
    row: str | None = None
    body: list[str] = []
    start = 0

    def finish() -> None:
        if current is None:
            return
        while body and (not body[-1].strip() or body[-1].strip().startswith("--")):
            body.pop()  # a comment after a statement (a section's heading) belongs to none
        sql = "\n".join(body).strip()
        if not sql:
            raise QueryFileError(f"{source}:{start}: query {current[0]!r} has no SQL")
        blocks[current] = (sql, row, start)

    for number, line in enumerate(text.splitlines(), 1):
        header = _NAME.match(line.strip())
        if header is not None:
            finish()
            name, dialect = header.group(1), header.group(2)
            if dialect is not None and dialect not in DIALECTS:
                raise QueryFileError(f"{source}:{number}: unknown dialect [{dialect}] (use one of {DIALECTS})")
            if (name, dialect) in blocks or current == (name, dialect):
                raise QueryFileError(
                    f"{source}:{number}: a second query named {name!r}{f' [{dialect}]' * bool(dialect)}"
                )
            current, row, body, start = (name, dialect), None, [], number
            continue
        stripped = line.strip()
        if current is None:
            if stripped and not stripped.startswith("--"):
                raise QueryFileError(f"{source}:{number}: SQL before the first '-- name:' header")
            continue
        found_row = _ROW.match(stripped)
        if found_row is not None and not body:
            row = found_row.group(1)
        elif stripped.startswith("--") and not body:
            continue  # the statement's description
        else:
            body.append(line.rstrip())
    finish()
    dialects = {
        name: DIALECTS if (name, None) in blocks else tuple(d for d in DIALECTS if (name, d) in blocks)
        for name, _d in blocks
    }
    return Queries(source, _queries(blocks, source), dialects)


def _queries(blocks: dict[tuple[str, str | None], tuple[str, str | None, int]], source: str) -> dict[str, Query]:
    from mcp_harness.store import records

    out: dict[str, Query] = {}
    for name in dict.fromkeys(n for n, _d in blocks):
        plain, sqlite, pg = blocks.get((name, None)), blocks.get((name, "sqlite")), blocks.get((name, "postgresql"))
        if plain is not None and sqlite is not None and pg is not None:
            raise QueryFileError(f"{source}:{plain[2]}: query {name!r} has a plain text that no dialect uses")
        lite = sqlite or plain or pg
        post = pg or plain or sqlite
        assert lite is not None and post is not None
        rows = {b[1] for b in (plain, sqlite, pg) if b is not None}
        if len(rows) > 1:
            raise QueryFileError(f"{source}:{lite[2]}: the variants of {name!r} name different row types {rows}")
        row_name = rows.pop()
        row_type = None
        if row_name is not None:
            row_type = getattr(records, row_name, None)
            if not isinstance(row_type, type):
                raise QueryFileError(f"{source}:{lite[2]}: query {name!r} names an unknown row type {row_name!r}")
        sqls = [_with_columns(b[0], row_type, source, b[2], name) for b in (lite, post)]
        out[name] = Query(sqls[0], postgresql=sqls[1], row=row_type, name=f"{source.rsplit('/', 1)[-1][:-4]}.{name}")
    return out


_COLUMNS = re.compile(r"\{(?:(\w+)\.)?columns\}")


def _with_columns(sql: str, row: type[Record] | None, source: str, line: int, name: str) -> str:
    """`{columns}` (or `{t.columns}`, each prefixed with `t.`) stands for the row type's fields, in its
    order: a table's column list is written once, as its record's fields."""
    if _COLUMNS.search(sql) is None:
        return sql
    if row is None:
        raise QueryFileError(f"{source}:{line}: query {name!r} says {{columns}} but names no row type")
    return _COLUMNS.sub(lambda m: columns(row, prefix=f"{m.group(1)}." if m.group(1) else ""), sql)

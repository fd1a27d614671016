"""The one small interface the store's queries run on, and the statements they run.

A `Query` is literal SQL with `:name` parameters (written once, or once per dialect where SQLite and
PostgreSQL differ); asyncpg's `$1, $2 ...` form is derived from it once, when the query is made.
`Connection` runs queries and hands rows back as `Record`s, tuples whose fields are read by name:
the query's own record type (whose field names must equal the columns the query selects, checked on
the first rows) or, without one, a record type named after the columns. Implementations: `sqlite.py`
(sqlite3) and `postgres.py` (asyncpg). SQLAlchemy never runs here; it serves the cold paths (see
`Database.cold_read()` and `cold_write()`). Statements are named queries from `.sql` files (`named.py`).
"""

from __future__ import annotations

import json
import keyword
import re
import typing
from collections import namedtuple
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache, partial
from typing import Any, ClassVar, Literal, Protocol

Dialect = Literal["sqlite", "postgresql"]
Params = Mapping[str, Any]
NO_PARAMS: Params = {}

#: a quoted string (skipped), a `::` cast (skipped) or a `:name` parameter
_PARAMETER = re.compile(r"'(?:[^']|'')*'|::|:([A-Za-z_][A-Za-z0-9_]*)")


class StorageError(Exception):
    """A database error that is not the caller's doing (not a `HarnessError`: the server logs it
    and answers `internal` with an incident id, as for any unexpected error)."""


class UniqueViolation(StorageError):
    """A write collided with a row another transaction committed first (a unique constraint);
    the transaction was rolled back."""


#: positions that `_getters` makes at once (a record with more fields makes its own)
GETTERS = 64


@cache
def _getters(count: int) -> tuple[Any, ...]:
    """The C getters of positions 0 .. count - 1, taken from a namedtuple (the public way to make them).
    A getter reads its position whatever the field is named, so one per position serves every record
    type: declaring one costs no namedtuple at import."""
    fields = [f"f{i}" for i in range(count)]
    # The class stays referenced (in a list, as a type checker sees no class declared) while its
    # getters are read: the garbage collector may empty the namespace of an unreferenced class under
    # the mapping proxy that reads it.
    kept = [namedtuple("Fields", fields)]  # noqa: PYI024 - only its field getters
    return tuple(kept[0].__dict__[f] for f in fields)


class Record(tuple):
    """A row: a tuple of column values whose fields, declared as annotations, read them by name.

    `Record(values)` makes one from a sequence at tuple's own speed, in C; its fields are the C
    getters a namedtuple's are (`_getters`), as fast as `row[i]`. A NamedTuple is built through its
    generated Python constructor or `tuple.__new__`, which costs a long listing noticeably more per
    row. A subclass declares `__slots__ = ()` and its fields; a subclass of a record appends fields to
    its parent's."""

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__slots__" not in cls.__dict__:
            raise TypeError(f"record {cls.__name__} must declare __slots__ = ()")
        own = list(cls.__dict__.get("__annotations__", {}))
        first = len(cls._fields)
        cls._fields = (*cls._fields, *own)
        getters = _getters(max(GETTERS, len(cls._fields)))
        for position, name in enumerate(own, first):
            setattr(cls, name, getters[position])

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{n}={v!r}' for n, v in zip(self._fields, self, strict=True))})"

    def _asdict(self) -> dict[str, Any]:
        return dict(zip(self._fields, self, strict=True))


def columns(record: type[Record], *, prefix: str = "") -> str:
    """A record's fields as a select list (`key` is quoted: it is a keyword in SQL)."""
    return ", ".join(prefix + ('"key"' if f == "key" else f) for f in record._fields)


class Query:
    """One SQL statement. `row`: the record type its rows become; `name`: `file.query` (see `named.py`)."""

    __slots__ = ("name", "sqlite", "postgresql", "pg_names", "row", "_makers")

    def __init__(
        self, sql: str, *, postgresql: str | None = None, row: type[Record] | None = None, name: str = ""
    ) -> None:
        self.name = name
        self.sqlite = sql.strip()
        self.postgresql, self.pg_names = numbered((postgresql or sql).strip())
        self.row = row
        self._makers: dict[str, Callable[[Sequence[Any]], Any]] = {}

    def __repr__(self) -> str:
        return f"<Query {self.name or self.sqlite[:40]!r}>"

    def maker(self, dialect: str, columns: Callable[[], Sequence[str]]) -> Callable[[Sequence[Any]], Any]:
        """How a driver row (a tuple of this query's columns) becomes a named row, made on the
        first rows: `columns()` names what the driver returned."""
        try:
            return self._makers[dialect]
        except KeyError:
            pass
        names = tuple(columns())
        if self.row is None:
            make: Callable[[Sequence[Any]], Any] = row_type(names)
        else:
            if names != self.row._fields:
                raise StorageError(f"query {self.name} returns columns {names}, its row type {self.row._fields}")
            make = self.row
            bools = bool_fields(self.row) if dialect == "sqlite" else ()
            if bools:  # SQLite has no boolean type: it returns 0 and 1
                make = partial(_with_bools, make, bools)
        self._makers[dialect] = make
        return make


def numbered(sql: str) -> tuple[str, tuple[str, ...]]:
    """`sql` with `:name` parameters written as asyncpg's `$1, $2 ...`, and the names in order."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return match.group(0)
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}"

    return _PARAMETER.sub(number, sql), tuple(names)


@cache
def row_type(names: tuple[str, ...]) -> type[Record]:
    """A record type for rows of these columns (a column whose name is not an identifier, such as
    `count(*)`, or repeats one, is `column<position>`)."""
    fields: list[str] = []
    for i, name in enumerate(names):
        ok = name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("_") and name not in fields
        fields.append(name if ok else f"column{i}")
    return type("Row", (Record,), {"__slots__": (), "__annotations__": dict.fromkeys(fields, "Any")})


@cache
def bool_fields(record: type[Record]) -> tuple[int, ...]:
    """Positions of the fields a record declares `bool`."""
    hints = typing.get_type_hints(record)
    return tuple(i for i, name in enumerate(record._fields) if hints.get(name) is bool)


def _with_bools(make: Callable[[Sequence[Any]], Any], bools: tuple[int, ...], values: Sequence[Any]) -> Any:
    fixed = list(values)
    for i in bools:
        if fixed[i] is not None:
            fixed[i] = bool(fixed[i])
    return make(fixed)


def array(dialect: str, values: Iterable[Any]) -> Any:
    """A list as one parameter: what `queries.in_array()` reads (JSON text on SQLite, where
    `json_each` unpacks it; a list on PostgreSQL, for `= ANY(...)`)."""
    return json.dumps(list(values)) if dialect == "sqlite" else list(values)


class Connection(Protocol):
    """A transaction (or, from `Database.single()` on PostgreSQL, one autocommit statement)."""

    dialect: Dialect

    async def execute(self, query: Query, params: Params = NO_PARAMS) -> int:
        """Run a statement; returns how many rows it changed."""
        ...

    async def execute_many(self, query: Query, rows: Sequence[Params]) -> None:
        """Run a statement once per parameter set."""
        ...

    async def execute_script(self, sql: str) -> None:
        """Run one statement of literal SQL that takes no parameters and returns nothing (a
        migration's DDL), as it is written."""
        ...

    async def fetch_all(self, query: Query, params: Params = NO_PARAMS) -> list[Any]:
        """Every row, as named tuples."""
        ...

    async def fetch_one(self, query: Query, params: Params = NO_PARAMS) -> Any | None:
        """The first row, or None."""
        ...

    async def fetch_value(self, query: Query, params: Params = NO_PARAMS) -> Any:
        """The first column of the first row, or None."""
        ...


async def fetch_row(conn: Connection, query: Query, params: Params = NO_PARAMS) -> Any:
    """The row a query always returns (an aggregate, or a row this transaction has just locked or
    written): `fetch_one` without the None, which is a `StorageError` naming the query here."""
    row = await conn.fetch_one(query, params)
    if row is None:
        raise StorageError(f"query {query.name or query.sqlite[:40]!r} returned no row")
    return row

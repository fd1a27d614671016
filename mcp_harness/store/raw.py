"""Prebuilt statements run on the driver directly (sqlite3 or asyncpg), with SQL compiled once.

A statement built once at import (or by a cached builder) is registered with `prebuilt()`. On the
SQLite write and short-read connections, and in PostgreSQL transactions, it is compiled the first
time it runs and afterwards executed straight on the driver: SQLAlchemy's per-execution work (cache
key, parameter and result set-up, events) costs ~15 us, several times the SQL of a small statement.
Anything this module is not sure to reproduce exactly (IN lists expanded per call, a parameter it
was not given, a column type whose values need converting other than booleans) runs through
SQLAlchemy as before.
"""

from __future__ import annotations

import sqlite3
from collections import namedtuple
from collections.abc import Iterator
from typing import Any

from sqlalchemy import Boolean, Float, Integer, LargeBinary, String
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.types import NullType, TypeDecorator

#: id -> statement; holding the statement keeps its id from being reused by another object
_PREBUILT: dict[int, Any] = {}
_COMPILED: dict[tuple[int, str], RawStatement | None] = {}
_PLAIN_TYPES = (Boolean, Float, Integer, LargeBinary, String)


def prebuilt(statement: Any) -> Any:
    """Mark a statement that lives for the whole process as safe to compile once."""
    _PREBUILT[id(statement)] = statement
    return statement


def raw_sql(statement: Any, dialect: Dialect) -> RawStatement | None:
    if id(statement) not in _PREBUILT:
        return None
    key = (id(statement), dialect.name)
    try:
        return _COMPILED[key]
    except KeyError:
        compiled = _COMPILED[key] = _compile(statement, dialect)
        return compiled


def runnable(statement: Any, parameters: Any, dialect: Dialect) -> RawStatement | None:
    """The compiled form of a prebuilt statement when it can run on the driver with `parameters`
    (one dict, holding every parameter it names), else None: run it through SQLAlchemy."""
    if not isinstance(parameters, dict):
        return None
    compiled = raw_sql(statement, dialect)
    return compiled if compiled is not None and compiled.accepts(parameters) else None


def _compile(statement: Any, dialect: Dialect) -> RawStatement | None:
    compiled = statement.compile(dialect=dialect)
    if "POSTCOMPILE" in compiled.string or compiled.positiontup is None:
        return None
    constants: dict[str, Any] = {}
    for name in compiled.positiontup:
        bind = compiled.binds[name]
        if not isinstance(bind.type, NullType) and not _plain(bind.type):
            return None
        if bind.callable is None and not bind.required and bind.value is not None:
            constants[name] = bind.value  # a literal written into the statement, e.g. status == "done"
    bools: list[int] = []
    keys: list[str] = []
    for index, column in enumerate(compiled._result_columns):
        keys.append(column[0])
        column_type = column[3]
        if not _plain(column_type):
            return None
        if isinstance(column_type, Boolean):
            bools.append(index)
    return RawStatement(compiled.string, tuple(compiled.positiontup), constants, keys, bools)


def _plain(column_type: Any) -> bool:
    """A type whose values the driver passes through unchanged (booleans aside), such as SQLModel's
    `AutoString`: a decorator that converts nothing."""
    if isinstance(column_type, TypeDecorator):
        kind = type(column_type)
        if kind.process_bind_param is not TypeDecorator.process_bind_param:
            return False
        if kind.process_result_value is not TypeDecorator.process_result_value:
            return False
        column_type = column_type.impl_instance
    return isinstance(column_type, _PLAIN_TYPES)


class RawStatement:
    def __init__(self, sql: str, names: tuple[str, ...], constants: dict[str, Any], keys: list[str],
                 bools: list[int]) -> None:  # fmt: skip
        self.sql = sql
        self.names = names
        self.constants = constants
        self._required = frozenset(names) - constants.keys()  #: what `parameters` must hold
        self.keys = keys
        self.bools = bools
        self.row_type = namedtuple("Row", keys, rename=True) if keys else None  # type: ignore[misc]  # noqa: PYI024

    def accepts(self, parameters: dict[str, Any]) -> bool:
        return self._required <= parameters.keys()

    def run(self, raw: Any, parameters: dict[str, Any]) -> RawResult:
        args = [parameters[n] if n in parameters else self.constants[n] for n in self.names]
        try:
            cursor = raw.execute(self.sql, args)
        except sqlite3.Error as exc:  # the same exception types SQLAlchemy would have raised
            raise DBAPIError.instance(self.sql, args, exc, sqlite3.Error, hide_parameters=True) from exc
        rows = cursor.fetchall() if self.keys else []
        if self.bools and rows:
            rows = [_fix_bools(r, self.bools) for r in rows]
        return RawResult(self, rows, cursor.rowcount)

    async def run_async(self, driver: Any, parameters: dict[str, Any]) -> RawResult:
        """The same on an asyncpg connection (which prepares and caches the statement itself)."""
        args = [parameters[n] if n in parameters else self.constants[n] for n in self.names]
        try:
            if self.keys:
                rows = [tuple(r) for r in await driver.fetch(self.sql, *args)]
                return RawResult(self, rows, len(rows))
            status = await driver.execute(self.sql, *args)
        except Exception as exc:
            raise pg_error(exc, self.sql, args) from exc
        count = status.rsplit(" ", 1)[-1]
        return RawResult(self, [], int(count) if count.isdigit() else -1)


def asyncpg_errors() -> type[Exception]:
    import asyncpg

    return asyncpg.PostgresError


def pg_error(exc: Exception, sql: str | None = None, args: Any = None) -> Exception:
    """An asyncpg (or socket) error as the SQLAlchemy exception the same failure raises there (its
    parameters hidden: they hold users' data, and the message reaches the log)."""
    import asyncpg

    if isinstance(exc, asyncpg.IntegrityConstraintViolationError):
        return IntegrityError(sql, args, exc, hide_parameters=True)
    if isinstance(exc, (OSError, asyncpg.InterfaceError, asyncpg.PostgresConnectionError)):
        return OperationalError(sql, args, exc, hide_parameters=True)
    if isinstance(exc, asyncpg.PostgresError):
        return DBAPIError(sql, args, exc, hide_parameters=True)
    return exc


def _fix_bools(row: tuple, indexes: list[int]) -> tuple:
    values = list(row)
    for i in indexes:
        if values[i] is not None:
            values[i] = bool(values[i])
    return tuple(values)


class RawResult:
    """The part of SQLAlchemy's `Result` the store uses."""

    def __init__(self, statement: RawStatement, rows: list[tuple], rowcount: int) -> None:
        self._statement = statement
        self._rows = rows
        self.rowcount = rowcount

    def __iter__(self) -> Iterator[Any]:
        make = self._statement.row_type
        return (make(*r) for r in self._rows) if make else iter(())

    def all(self) -> list[Any]:
        return list(self)

    def first(self) -> Any:
        return next(iter(self), None)

    def one(self) -> Any:
        if len(self._rows) != 1:
            raise LookupError(f"expected one row, got {len(self._rows)}")
        return self.first()

    def scalar(self) -> Any:
        return self._rows[0][0] if self._rows else None

    def scalar_one(self) -> Any:
        return self.one()[0]

    def scalars(self) -> list[Any]:
        return [r[0] for r in self._rows]

    def mappings(self) -> _Rows:
        return _Rows([dict(zip(self._statement.keys, r, strict=True)) for r in self._rows])

    def tuples(self) -> _Rows:
        """The rows as plain tuples: the cheapest form, for reads of many rows."""
        return _Rows(self._rows)


class _Rows(list):
    """Rows (dicts or tuples) with the accessors of SQLAlchemy's `MappingResult` / `TupleResult`."""

    def first(self) -> Any:
        return self[0] if self else None

    def one(self) -> Any:
        if len(self) != 1:
            raise LookupError(f"expected one row, got {len(self)}")
        return self[0]

    def all(self) -> list[Any]:
        return self

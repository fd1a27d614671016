"""The one exception hierarchy of mcp-harness.

Every error a client or a person can see is a `HarnessError`; its `code` is the stable machine code
from the public contract and its message says what was wrong and what is allowed::

    HarnessError
     +-- InvalidArgument     invalid_argument
     +-- NotFound            not_found
     +-- VersionConflict     version_conflict
     +-- LeaseLost           lease_lost
     +-- TaskConflict        task_conflict
     +-- DependencyError     dependency_error
     +-- TooLarge            too_large
     +-- Forbidden           forbidden
     +-- SchemaViolation     schema_violation
     +-- Unavailable         unavailable
     +-- Internal            internal

The docstring of each class is its default message.
"""

from __future__ import annotations


class HarnessError(Exception):
    """Something went wrong."""

    code = "internal"

    def __init__(self, message: str | None = None) -> None:
        self.message = message or (self.__doc__ or "").strip()
        super().__init__(self.message)

    def to_text(self) -> str:
        """The client-facing text: `[code] message`."""
        return f"[{self.code}] {self.message}"


class InvalidArgument(HarnessError):
    """An argument is not valid."""

    code = "invalid_argument"


class NotFound(HarnessError):
    """Nothing matches what was asked for."""

    code = "not_found"


class VersionConflict(HarnessError):
    """The thread moved on since the version you expected."""

    code = "version_conflict"


class LeaseLost(HarnessError):
    """Your lease on this task is no longer current: another claim superseded it."""

    code = "lease_lost"


class TaskConflict(HarnessError):
    """A task with this key already exists with different content."""

    code = "task_conflict"


class DependencyError(HarnessError):
    """The task dependencies are not valid."""

    code = "dependency_error"


class TooLarge(HarnessError):
    """The value is over the configured size limit."""

    code = "too_large"


class Forbidden(HarnessError):
    """This identity may not do that."""

    code = "forbidden"


class SchemaViolation(HarnessError):
    """The state does not conform to the thread's registered JSON Schema."""

    code = "schema_violation"


class Unavailable(HarnessError):
    """The database is not available right now; retry shortly."""

    code = "unavailable"

    def __init__(self, message: str | None = None, *, damaged: bool = False) -> None:
        super().__init__(message)
        #: the database file is damaged or not an mcp-harness database: no retry will help
        self.damaged = damaged


class Internal(HarnessError):
    """An unexpected error happened; the server log has the details."""

    code = "internal"


def harness_error_in(exc: BaseException) -> HarnessError | None:
    """`exc` if it is a `HarnessError`, else the first one inside (nested) exception groups."""
    if isinstance(exc, BaseExceptionGroup):
        found = (harness_error_in(inner) for inner in exc.exceptions)
        return next((e for e in found if e is not None), None)
    return exc if isinstance(exc, HarnessError) else None


ALL_CODES = tuple(
    cls.code
    for cls in (
        InvalidArgument,
        NotFound,
        VersionConflict,
        LeaseLost,
        TaskConflict,
        DependencyError,
        TooLarge,
        Forbidden,
        SchemaViolation,
        Unavailable,
        Internal,
    )
)

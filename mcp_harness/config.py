"""Settings: command-line flags and `MCP_HARNESS_*` variables, their defaults and the limits."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from mcp_harness.errors import InvalidArgument

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$"
NAME_RE = re.compile(NAME_PATTERN)

ENV_PREFIX = "MCP_HARNESS_"

#: the largest integer every JSON client represents exactly; larger versions are refused, not stored
MAX_INT = 2**53 - 1
LEASE_SECONDS = (10, 86400)  #: allowed lease lengths, for claims and heartbeats

# The fixed limits of what the tools take, in one place: the tools' argument models and `import` read the
# same numbers, so an import holds nothing a tool would refuse. (The configurable ones are `Limits`.)
LABEL_CHARS = 200  #: a checkpoint's label, a message's subject
STEP_CHARS = 4000  #: one of a task's steps, one of a progress entry's next_steps
NEXT_STEPS = 50  #: next_steps of one progress entry
TAG_CHARS = 64  #: one tag of a task
MESSAGE_BODY_BYTES = 8 * 1024  #: a message's body, UTF-8


def check_int(name: str, value: float | None, low: float, high: float = MAX_INT) -> float | None:
    """Refuse an optional number outside low..high: over a maximum is an error, never clamped."""
    if value is not None and not low <= value <= high:
        raise InvalidArgument(f"{name} must be between {low} and {high}, got {value}")
    return value


def check_no_nul(name: str, value: object) -> None:
    """Refuse U+0000 in a string argument, or in a string inside a list or object of them: PostgreSQL
    cannot store it in text, and the rule is the same on SQLite. JSON values (state, metadata,
    artifacts, result) are not checked: stored as JSON text, they hold it as the escape \\u0000."""
    if isinstance(value, str):
        if "\x00" in value:
            raise InvalidArgument(f"{name} must not contain the NUL character (U+0000)")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            check_no_nul(f"{name}[{index}]", item)
    elif isinstance(value, dict):
        for key, item in value.items():
            check_no_nul(f"{name}.{key}", item)
    elif (fields := getattr(type(value), "model_fields", None)) is not None:  # a task's fields (a pydantic model)
        for key in fields:
            check_no_nul(f"{name}.{key}", getattr(value, key))


def check_name(kind: str, value: str) -> str:
    """Validate a workspace, agent or thread name against the contract's pattern."""
    if not isinstance(value, str) or not NAME_RE.fullmatch(value):
        raise InvalidArgument(
            f"{kind} {value!r} is not a valid name: use 1-128 characters from A-Z a-z 0-9 . _ : / -, "
            "starting with a letter or digit"
        )
    return value


def default_db_path() -> Path:
    """The zero-configuration database file under `$XDG_DATA_HOME/mcp-harness/`."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "mcp-harness" / "harness.db"


def missing_db_file(value: str | None) -> Path | None:
    """The SQLite file `--db` names when it does not exist, without creating anything; None when it
    exists, when `value` is not a SQLite file (PostgreSQL, in memory) or when it is the default
    database (created on first use by any command)."""
    path = _db_file(value)
    return None if path is None or path.exists() else path


def missing_db_folder(value: str | None) -> Path | None:
    """The folder of the SQLite file `--db` names when that folder does not exist (a mistyped path),
    without creating anything; None as for `missing_db_file`, or when the folder is there."""
    path = _db_file(value)
    return None if path is None or path.expanduser().absolute().parent.exists() else path.parent


def _db_file(value: str | None) -> Path | None:
    """The SQLite file `--db` names; None for the default database, PostgreSQL or a database in memory."""
    if not value:
        return None
    if "://" not in value:
        return Path(value).expanduser()
    if value.split("://", 1)[0] in ("sqlite", "sqlite+pysqlite", "sqlite+aiosqlite"):
        rest = value.split("://", 1)[1]
        if not rest.startswith("/") or rest in ("/", "/:memory:") or rest.startswith("/file:"):
            return None
        return Path(rest[1:].split("?", 1)[0])
    return None


def resolve_db_url(value: str | None, *, make_folder: bool = True) -> str:
    """Turn `--db` (a SQLAlchemy URL or a plain file path, or nothing) into an async SQLAlchemy URL;
    `make_folder`: create the folder of a plain path (the server's first start), else leave it."""
    if not value:
        path = default_db_path()
        if not path.parent.exists():
            # private: every workspace's state is in there (chmod: the umask may have narrowed mkdir's mode)
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            path.parent.chmod(0o700)
        return f"sqlite+aiosqlite:///{path}"
    if "://" not in value:
        path = not_a_directory(Path(value).expanduser().resolve())
        if make_folder:
            path.parent.mkdir(parents=True, exist_ok=True)
        return f"sqlite+aiosqlite:///{path}"
    scheme = value.split("://", 1)[0]
    if scheme in ("sqlite", "sqlite+pysqlite", "sqlite+aiosqlite"):
        rest = value.split("://", 1)[1]
        if rest.startswith("/") and rest not in ("/", "/:memory:") and not rest.startswith("/file:"):
            not_a_directory(Path(rest[1:].split("?", 1)[0]))
        return "sqlite+aiosqlite://" + rest
    if scheme in ("postgres", "postgresql", "postgresql+psycopg", "postgresql+psycopg2", "postgresql+asyncpg"):
        return _checked_postgres("postgresql+asyncpg://" + value.split("://", 1)[1])
    raise InvalidArgument(
        f"database URL scheme {scheme!r} is not supported: use sqlite+aiosqlite:///PATH, "
        "postgresql+asyncpg://USER@HOST/DB or a plain file path"
    )


def _checked_postgres(url: str) -> str:
    """A PostgreSQL URL whose parts can be read (said without the URL: it may hold a password)."""
    try:
        urlsplit(url).port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        raise InvalidArgument(
            "the PostgreSQL URL in --db (or MCP_HARNESS_DB) has a port that is not a number from 0 to 65535: "
            "use postgresql+asyncpg://USER@HOST:PORT/DB"
        ) from None
    return url


def not_a_directory(path: Path) -> Path:
    """`path`, unless it is a folder (SQLite would only say it cannot open it)."""
    if path.is_dir():
        raise InvalidArgument(f"the database {path} is a directory: give a file path (e.g. {path / 'harness.db'})")
    return path


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(ENV_PREFIX + name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise InvalidArgument(f"{ENV_PREFIX}{name} must be a whole number, got {raw!r}") from None


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(ENV_PREFIX + name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise InvalidArgument(f"{ENV_PREFIX}{name} must be a number, got {raw!r}") from None


def _positive(name: str, default: float) -> float:
    value = _env_float(name, default)
    if not value > 0:
        raise InvalidArgument(f"{ENV_PREFIX}{name} must be more than 0, got {value}")
    return value


@dataclass(frozen=True)
class Limits:
    """Input limits; each is configurable with the `MCP_HARNESS_` variable named in docs/reference/settings.md."""

    max_state_bytes: int = 1024 * 1024  #: stored state size, after a merge (MAX_STATE_BYTES)
    max_depth: int = 64  #: nesting depth of any JSON value (MAX_DEPTH)
    max_text_chars: int = 65536  #: summary, details, description, result text (MAX_TEXT_CHARS)
    max_value_bytes: int = 256 * 1024  #: metadata, artifacts, task result (MAX_VALUE_BYTES)
    max_tasks_per_call: int = 1000  #: tasks in one add_tasks call (MAX_TASKS_PER_CALL)

    @classmethod
    def from_env(cls) -> Limits:
        return cls(
            max_state_bytes=_env_int("MAX_STATE_BYTES", cls.max_state_bytes),
            max_depth=_env_int("MAX_DEPTH", cls.max_depth),
            max_text_chars=_env_int("MAX_TEXT_CHARS", cls.max_text_chars),
            max_value_bytes=_env_int("MAX_VALUE_BYTES", cls.max_value_bytes),
            max_tasks_per_call=_env_int("MAX_TASKS_PER_CALL", cls.max_tasks_per_call),
        )


def _metrics_token() -> str | None:
    raw = os.environ.get(ENV_PREFIX + "METRICS_TOKEN") or None
    if raw is not None and len(raw) < 24:
        raise InvalidArgument(f"{ENV_PREFIX}METRICS_TOKEN must be at least 24 characters (a random secret)")
    return raw


@dataclass(frozen=True)
class Settings:
    """Everything the service needs to know; built once per process."""

    db_url: str
    limits: Limits = field(default_factory=Limits)
    backoff_base_seconds: float = 5.0  #: first retry delay after `fail` (BACKOFF_BASE_SECONDS)
    backoff_cap_seconds: float = 600.0  #: longest retry delay (BACKOFF_CAP_SECONDS)
    idempotency_ttl_seconds: float = 48 * 3600.0  #: how long idempotency keys live (IDEMPOTENCY_TTL_SECONDS)
    pool_size: int = 5  #: PostgreSQL connections per server process (DB_POOL_SIZE)
    poll_interval_seconds: float = 0.2  #: how often a waiting claim looks for new work (POLL_INTERVAL_SECONDS)
    header_timeout_seconds: float = 10.0  #: HTTP: seconds to send a request's headers (HEADER_TIMEOUT_SECONDS)
    #: console: a holder with no call this long is silent (SILENT_AFTER; unset: more than half its lease)
    silent_after_seconds: float | None = None
    max_streams_per_token: int = 100  #: console event streams one sign-in may hold open (MAX_STREAMS_PER_TOKEN)
    #: the bearer credential of a scraper that sees every workspace on /metrics (METRICS_TOKEN)
    metrics_token: str | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, db: str | None = None) -> Settings:
        return cls(
            db_url=resolve_db_url(db if db is not None else os.environ.get(ENV_PREFIX + "DB")),
            limits=Limits.from_env(),
            backoff_base_seconds=_env_float("BACKOFF_BASE_SECONDS", cls.backoff_base_seconds),
            backoff_cap_seconds=_env_float("BACKOFF_CAP_SECONDS", cls.backoff_cap_seconds),
            idempotency_ttl_seconds=_env_float("IDEMPOTENCY_TTL_SECONDS", cls.idempotency_ttl_seconds),
            pool_size=_env_int("DB_POOL_SIZE", cls.pool_size),
            poll_interval_seconds=_env_float("POLL_INTERVAL_SECONDS", cls.poll_interval_seconds),
            header_timeout_seconds=_positive("HEADER_TIMEOUT_SECONDS", cls.header_timeout_seconds),
            silent_after_seconds=_positive("SILENT_AFTER", 1.0)
            if os.environ.get(ENV_PREFIX + "SILENT_AFTER")
            else None,
            max_streams_per_token=_env_int("MAX_STREAMS_PER_TOKEN", cls.max_streams_per_token),
            metrics_token=_metrics_token(),
        )

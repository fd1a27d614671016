"""State schemas (JSON Schema, Draft 2020-12): registration and validation of saved states."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from mcp_harness.base import Identity, ServiceBase
from mcp_harness.checkpoints.store import schemas as store
from mcp_harness.config import check_name
from mcp_harness.errors import InvalidArgument, SchemaViolation
from mcp_harness.jsonvalue import dumps
from mcp_harness.store.common import now

MAX_REPORTED = 10


def _pointer(path: Any) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path) or "/"


async def validate_state(
    schema: tuple[int, str] | None, thread: str, load: Callable[[], Awaitable[dict[str, Any]]]
) -> int | None:
    """Validate the state `load()` gives against the thread's newest schema, (version, document), if it
    has one. Returns the schema version validated against (None without a schema)."""
    if schema is None:
        return None
    version, document = schema
    from jsonschema import Draft202012Validator  # here: a session that never meets a schema never loads it

    validator = Draft202012Validator(json.loads(document))
    errors = sorted(validator.iter_errors(await load()), key=lambda e: list(e.absolute_path))
    if errors:
        shown = "; ".join(f"{_pointer(e.absolute_path)}: {e.message}" for e in errors[:MAX_REPORTED])
        more = f" (and {len(errors) - MAX_REPORTED} more)" if len(errors) > MAX_REPORTED else ""
        raise SchemaViolation(f"state does not match schema version {version} of thread {thread!r}: {shown}{more}")
    return version


class SchemaService(ServiceBase):
    async def set_schema(self, ident: Identity, thread: str, schema: Any) -> int:
        """Register a new schema version for a thread; later saves are validated against it."""
        check_name("thread", thread)
        if not isinstance(schema, dict):
            raise InvalidArgument("a JSON Schema must be a JSON object")
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            raise InvalidArgument(f"not a valid Draft 2020-12 JSON Schema: {exc.message}") from exc
        async with self.db.write() as conn:
            return await store.add(conn, ident.workspace, thread, dumps(schema), now())

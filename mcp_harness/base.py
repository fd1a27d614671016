"""What every service shares: the caller's identity, time formatting, ids and exactly-once writes."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel

from mcp_harness.arguments import ToolArgs
from mcp_harness.config import Settings
from mcp_harness.errors import InvalidArgument
from mcp_harness.identity import Identity, Role  # noqa: F401 - re-exported: services take the caller's Identity
from mcp_harness.jsonvalue import canonical, iso, value_hash  # noqa: F401 - iso re-exported for the services
from mcp_harness.store import Connection, Database, UniqueViolation, idempotency
from mcp_harness.store.common import now

M = TypeVar("M", bound=BaseModel)


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(10)}"


def replayed(result: M) -> M:
    """A stored result answered again: `replayed: true` where the model carries the mark."""
    return result.model_copy(update={"replayed": True}) if "replayed" in type(result).model_fields else result


class ServiceBase:
    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings
        self.limits = settings.limits

    async def exactly_once(
        self,
        ident: Identity,
        args: ToolArgs,
        model: type[M],
        body: Callable[[Connection], Awaitable[Any]],
        *,
        finish: Callable[[Any], M] | None = None,
        remember: Callable[[M], bool] = lambda _result: True,
        replay: Callable[[Connection, M], Awaitable[M]] | None = None,
    ) -> M:
        """Run `body` in one write transaction. With an idempotency key, a retry with the same arguments
        returns the first result, marked `replayed: true`, and changes nothing; the same key with other
        arguments is refused. The key is stored in the same transaction as the effect, so a failed call
        is never remembered.

        `finish` turns what `body` returned into the result model; without a key it runs after the
        commit, so building the result does not lengthen the time the write lock is held. `replay`
        brings a stored result up to date where a stale copy would mislead (a lease no longer live),
        inside the same transaction."""
        finish = finish or (lambda raw: raw)
        tool, key = args.tool, getattr(args, "idempotency_key", None)  # read-only tools take no key
        if key is None:
            async with self.db.write() as conn:
                raw = await body(conn)
            return finish(raw)
        if not 1 <= len(key) <= 200:
            raise InvalidArgument(f"idempotency_key must be 1 to 200 characters, got {len(key)}")
        request_hash = value_hash(canonical(args.fingerprint(), what="arguments"))
        for _ in range(3):
            try:
                async with self.db.write() as conn:
                    found = await idempotency.get(conn, ident.workspace, ident.agent, tool, key)
                    if found is not None:
                        if found.request_hash != request_hash:
                            raise InvalidArgument(
                                f"idempotency_key {key!r} was already used for {tool} with different "
                                "arguments: use a new key for a new request"
                            )
                        stored = model.model_validate_json(found.result)
                        if replay is not None:
                            stored = await replay(conn, stored)
                        return replayed(stored)
                    result = finish(await body(conn))
                    if remember(result):
                        await idempotency.put(
                            conn, ident.workspace, ident.agent, tool, key, request_hash, result.model_dump_json(), now()
                        )
                    return result
            except UniqueViolation:
                # Two calls with one key raced (PostgreSQL): the loser's transaction rolled back;
                # the next round finds the winner's stored result.
                continue
        raise InvalidArgument(f"idempotency_key {key!r} is being used by concurrent calls; retry the call")

    async def purge_idempotency_keys(self) -> int:
        async with self.db.write() as conn:
            return await idempotency.purge(conn, now() - self.settings.idempotency_ttl_seconds)

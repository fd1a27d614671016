"""Who is calling: a small module of its own, so that a server can know its identity before the
service (and SQLAlchemy with it) is imported."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Literal

import anyio

from .config import check_name

Role = Literal["agent", "reader", "operator"]


@dataclass(frozen=True)
class Identity:
    """Who is calling: fixed by the connection (command line or bearer token), never by tool arguments."""

    workspace: str
    agent: str
    role: Role = "agent"

    def __post_init__(self) -> None:
        check_name("workspace", self.workspace)
        check_name("agent", self.agent)


#: Set once the caller's connection has ended (stdio: stdin closed): a claim still waiting for work
#: stops waiting at once and claims nothing, since nobody is left to work on what it would take.
caller_gone: ContextVar[anyio.Event | None] = ContextVar("caller_gone", default=None)

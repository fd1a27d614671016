"""What a `--host` really listens on. "0", "::0", "0.0.0.0" and "" all mean every interface; "127.1"
and "localhost" mean loopback: the addresses are resolved as the server's own bind resolves them
(`getaddrinfo` with `AI_PASSIVE`), then judged with `ipaddress`."""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass

from mcp_harness.errors import InvalidArgument

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Bind:
    host: str  #: as given
    addresses: frozenset[Address]  #: what the server will listen on

    @property
    def loopback(self) -> bool:
        """Only this machine can connect."""
        return all(a.is_loopback for a in self.addresses)

    @property
    def unspecified(self) -> bool:
        """Every interface: no address of its own to check a Host header against."""
        return any(a.is_unspecified for a in self.addresses)

    @property
    def url_host(self) -> str:
        """The host as it is written in a URL or a Host header (an IPv6 address in brackets)."""
        host = self.host.strip("[]")
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return host
        return f"[{address.compressed}]" if address.version == 6 else address.compressed


def resolve_bind(host: str) -> Bind:
    """The addresses `host` binds to; a host this machine cannot listen on is `invalid_argument`."""
    name = host.strip("[]") or None  # empty: every interface, as asyncio's create_server takes it
    try:
        infos = socket.getaddrinfo(name, 0, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise InvalidArgument(f"--host {host!r} is not an address this machine can listen on ({exc})") from None
    # a scoped IPv6 address (fe80::1%eth0) carries its zone after a %
    addresses = frozenset(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos)
    return Bind(host=host, addresses=addresses)

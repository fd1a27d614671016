"""An HTTP server others can reach: what every spelling of "all interfaces" must require, what the
OAuth metadata advertises, and what a client hears when its token cannot be checked."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest
from support import run_cli, settings_for, subprocess_env

from mcp_harness.mcp.binds import resolve_bind
from mcp_harness.mcp.http import build_app
from mcp_harness.service import Harness

METADATA = "/.well-known/oauth-protected-resource/mcp"


def free_port(family: socket.AddressFamily = socket.AF_INET) -> int:
    with socket.socket(family) as s:
        s.bind(("::1" if family == socket.AF_INET6 else "127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("host", ["0", "0.0.0.0", "::", "::0", "0:0:0:0:0:0:0:0", ""])
def test_every_spelling_of_all_interfaces_is_unspecified(host):
    bind = resolve_bind(host)
    assert bind.unspecified and not bind.loopback


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1", "localhost", "::1", "[::1]"])
def test_every_spelling_of_loopback_is_loopback(host):
    bind = resolve_bind(host)
    assert bind.loopback and not bind.unspecified


def test_a_specific_address_is_neither():
    bind = resolve_bind("192.0.2.7")
    assert not bind.loopback and not bind.unspecified and bind.url_host == "192.0.2.7"
    assert resolve_bind("2001:db8::7").url_host == "[2001:db8::7]"


def serve(db: Path, *args: str, wait: float = 30) -> subprocess.CompletedProcess:
    """Run `serve --transport http`; one that is still serving after `wait` seconds is stopped and
    reported as such (exit status None)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcp_harness", "serve", "--transport", "http", "--db", str(db), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
    )
    try:
        out, err = proc.communicate(timeout=wait)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        return subprocess.CompletedProcess(proc.args, None, out, err)


def one_line_refusal(out: subprocess.CompletedProcess, needle: str) -> None:
    assert out.returncode not in (0, None), f"the server started: {out.stderr}"
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert needle in out.stderr, out.stderr


@pytest.mark.slow  # starts a process
@pytest.mark.parametrize("host", ["0", "::0"])
def test_all_interfaces_need_a_token_and_an_allowed_host(tmp_path, host):
    db = tmp_path / "h.db"
    port = str(free_port())
    one_line_refusal(serve(db, "--host", host, "--port", port), "no token exists")
    assert run_cli("token", "create", "--db", str(db), "--workspace", "w", "--agent", "a").returncode == 0
    one_line_refusal(serve(db, "--host", host, "--port", port), "--allowed-host")


@pytest.mark.slow  # starts a process
def test_ipv6_all_interfaces_serves_with_an_allowed_host(tmp_path):
    db = tmp_path / "h.db"
    assert run_cli("token", "create", "--db", str(db), "--workspace", "w", "--agent", "a").returncode == 0
    port = free_port(socket.AF_INET6)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mcp_harness",
            "serve",
            "--transport",
            "http",
            "--db",
            str(db),
            "--host",
            "::0",
            "--port",
            str(port),
            "--allowed-host",
            "harness.example",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                response = httpx2.get(f"http://[::1]:{port}{METADATA}", timeout=2)
                break
            except httpx2.HTTPError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1]
                time.sleep(0.1)
        assert response.status_code == 200
        assert response.json()["resource"] == f"http://harness.example:{port}/mcp"
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert "Traceback" not in err, err
    start = (
        f"INFO mcp_harness.mcp.http: mcp-harness serving MCP on http://[::]:{port}/mcp; console http://[::]:{port}/ui"
    )
    assert start in err and "WARNING" not in err, err  # news, not a warning, and it says where the console is


@pytest.mark.anyio
async def test_metadata_of_an_all_interfaces_bind_names_the_allowed_host(sqlite_url):
    settings = settings_for(sqlite_url)
    async with Harness.open(settings) as h:
        app = build_app(h, settings, "0.0.0.0", 8765, ["harness.example"])
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app), base_url="http://harness.example") as http:
            metadata = (await http.get(METADATA)).json()
            refused = await http.post("/mcp", json={})
    assert metadata["resource"] == "http://harness.example:8765/mcp"
    assert "0.0.0.0" not in str(metadata)
    assert refused.status_code == 401
    assert "http://harness.example:8765/" in refused.headers["www-authenticate"]


@contextlib.asynccontextmanager
async def tcp_proxy(target_port: int) -> AsyncIterator[tuple[int, asyncio.Event]]:
    """A TCP proxy to 127.0.0.1:`target_port`; setting the event closes it and every connection
    through it: the database becomes unreachable."""
    cut = asyncio.Event()
    writers: list[asyncio.StreamWriter] = []

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target_port)
        writers.extend([writer, up_writer])
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]

    async def cutter() -> None:
        await cut.wait()
        server.close()
        for w in writers:
            w.transport.abort()

    task = asyncio.create_task(cutter())
    try:
        yield port, cut
    finally:
        cut.set()
        await task


@pytest.mark.anyio
async def test_a_valid_token_gets_503_not_401_while_the_database_is_unreachable(postgres_url, workspace):
    from sqlalchemy import make_url

    url = make_url(postgres_url)
    async with tcp_proxy(url.port or 5432) as (port, cut):
        settings = settings_for(url.set(port=port).render_as_string(hide_password=False))
        async with Harness.open(settings) as h:
            token = await h.tokens.create(workspace, "agent", "agent")
            app = build_app(h, settings, "127.0.0.1", 8765)
            async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app), base_url="http://127.0.0.1") as http:
                headers = {"authorization": f"Bearer {token}", "accept": "application/json, text/event-stream"}
                cut.set()
                await asyncio.sleep(0)
                response = await http.post("/mcp", json={}, headers=headers)
                health = await http.get("/healthz")
    assert response.status_code == 503, response.text
    assert int(response.headers["retry-after"]) > 0
    assert response.json()["error"] == "temporarily_unavailable"
    assert health.status_code == 503

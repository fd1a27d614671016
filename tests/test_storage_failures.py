"""When the database cannot do its job: damaged or foreign files, a full disk, a read-only file; what
the logs may hold; and the modes new database files are created with."""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from support import call, fail, mcp_client, run_cli, settings_for, subprocess_env

from mcp_harness import clock
from mcp_harness.arguments import RecordProgressArgs, SaveCheckpointArgs
from mcp_harness.config import Settings
from mcp_harness.errors import Unavailable
from mcp_harness.mcp.http import build_app
from mcp_harness.service import Harness, Identity
from mcp_harness.store.conditions import DISK_FULL

DAMAGED = "not an mcp-harness database, or damaged"


def damaged_file(tmp_path: Path) -> Path:
    path = tmp_path / "damaged.db"
    path.write_bytes(secrets.token_bytes(10_000))
    return path


def assert_one_line(out: subprocess.CompletedProcess, *needles: str) -> None:
    assert out.returncode != 0
    assert "Traceback" not in out.stderr, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, out.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.slow  # starts a process
def test_status_on_a_damaged_file_says_so_in_one_line(tmp_path):
    path = damaged_file(tmp_path)
    assert_one_line(run_cli("status", "--db", str(path)), DAMAGED, str(path))


@pytest.mark.slow  # starts a process
def test_serve_stdio_on_a_damaged_file_exits_with_one_line(tmp_path):
    """stdin stays open, as a client keeps it: the server must not sit there silently."""
    path = damaged_file(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcp_harness", "serve", "--db", str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
    )
    try:
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert_one_line(subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr), DAMAGED, str(path))


@pytest.mark.slow  # starts a process
def test_serve_http_on_a_damaged_file_exits_with_one_line(tmp_path):
    path = damaged_file(tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = run_cli("serve", "--transport", "http", "--port", str(port), "--db", str(path))
    assert_one_line(out, DAMAGED, str(path))


@pytest.fixture
def umask_zero() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.anyio
async def test_new_database_files_are_private_whatever_the_umask(tmp_path, monkeypatch, umask_zero):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("MCP_HARNESS_DB", raising=False)
    settings = Settings.from_env(None)  # the default location, created on first use
    folder = tmp_path / "data" / "mcp-harness"
    async with Harness.open(settings) as h:
        await h.checkpoints.save(Identity("w", "a"), SaveCheckpointArgs(state={"secret": "x" * 100}))
        files = sorted(folder.iterdir())
        assert {p.name for p in files} == {"harness.db", "harness.db-wal", "harness.db-shm"}
        assert {p.name: mode(p) for p in files} == {p.name: 0o600 for p in files}
    assert mode(folder) == 0o700
    # a database at a path of the user's choosing gets private files too (its folder is theirs)
    chosen = tmp_path / "mine" / "h.db"
    async with Harness.open(Settings.from_env(str(chosen))) as h:
        await h.checkpoints.save(Identity("w", "a"), SaveCheckpointArgs(state={"v": 1}))
        assert {p.name: mode(p) for p in chosen.parent.iterdir()} == {
            "h.db": 0o600,
            "h.db-wal": 0o600,
            "h.db-shm": 0o600,
        }


@contextlib.contextmanager
def page_limit(path: Path, spare_pages: int) -> Iterator[None]:
    """Every new SQLite connection to `path` may grow the file by `spare_pages` pages at most (the
    same SQLITE_FULL a full disk gives, on a real file): set up where the store sets up each of its
    connections (`store.sqlite.apply_pragmas`, for the hot sqlite3 connections and the cold engine)."""
    from mcp_harness.store import sqlite as store_sqlite

    original = store_sqlite.apply_pragmas

    def limited(dbapi_conn) -> None:  # noqa: ANN001
        original(dbapi_conn)
        if str(path) in str(dbapi_conn.execute("PRAGMA database_list").fetchone()[2]):
            pages = dbapi_conn.execute("PRAGMA page_count").fetchone()[0]
            dbapi_conn.execute(f"PRAGMA max_page_count = {pages + spare_pages}")

    store_sqlite.apply_pragmas = limited
    try:
        yield
    finally:
        store_sqlite.apply_pragmas = original


@pytest.mark.anyio
async def test_a_full_disk_is_unavailable_saying_so(tmp_path, workspace):
    path = tmp_path / "full.db"
    url = f"sqlite+aiosqlite:///{path}"
    async with mcp_client(url, workspace) as c:
        await call(c, "save_checkpoint", state={"v": 1})
    with page_limit(path, spare_pages=4):
        async with mcp_client(url, workspace) as c:
            failed = await fail(c, "save_checkpoint", state={"big": secrets.token_hex(200_000)})
            assert failed.code == "unavailable" and "disk is full" in failed.text, failed.text
            assert (await call(c, "restore_state"))["state"] == {"v": 1}  # reads still work


@contextlib.contextmanager
def small_file_system(where: Path, size: str = "3m") -> Iterator[Path]:
    """A tmpfs of `size` mounted at `where` for the test (root only; skipped elsewhere)."""
    where.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small file system needs root")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode(errors='replace').strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(path: Path) -> None:
    """Write `path` until the file system has no room left."""
    with open(path, "wb") as out:
        try:
            while True:
                out.write(b"\0" * 65536)
                out.flush()
        except OSError:
            pass


@pytest.mark.slow  # mounts a file system (a process)
@pytest.mark.anyio
async def test_healthz_says_a_full_disk_is_full(tmp_path, workspace):
    """/healthz answers 503 while the database's disk is full, and 200 again once there is room."""
    with small_file_system(tmp_path / "disk") as disk:
        settings = settings_for(f"sqlite+aiosqlite:///{disk / 'h.db'}")
        async with Harness.open(settings) as h:  # a server that runs on while the disk fills
            await h.checkpoints.save(Identity(workspace, "a"), SaveCheckpointArgs(state={"v": 1}))
            app = build_app(h, settings, "127.0.0.1", 8765)
            async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app), base_url="http://127.0.0.1") as http:
                assert (await http.get("/healthz")).status_code == 200
                fill(disk / "filler")
                with pytest.raises(Unavailable, match="disk is full"):  # what /healthz says, a write meets
                    await h.checkpoints.save(
                        Identity(workspace, "a"), SaveCheckpointArgs(state={"v": secrets.token_hex(100_000)})
                    )
                response = await http.get("/healthz")
                assert response.status_code == 503, response.text
                assert response.json() == {"status": "unavailable", "reason": DISK_FULL}
                (disk / "filler").unlink()
                await h.progress.record(
                    Identity(workspace, "a"), RecordProgressArgs(summary="room again")
                )  # a write commits
                assert (await http.get("/healthz")).status_code == 200


@pytest.mark.anyio
async def test_ping_reads_the_free_space_of_the_databases_file_system(tmp_path, monkeypatch):
    """The check is one statvfs of the database's folder (here told it has 4 KiB left)."""
    from mcp_harness.store import conditions

    url = f"sqlite+aiosqlite:///{tmp_path / 'h.db'}"
    async with Harness.open(settings_for(url)) as h:
        await h.ping()
        real = os.statvfs

        def nearly_full(folder: str) -> os.statvfs_result:
            fs = real(folder)
            assert os.path.samefile(folder, tmp_path)
            return os.statvfs_result((fs.f_bsize, 4096, fs.f_blocks, 1, 1, *tuple(fs)[5:]))

        monkeypatch.setattr(conditions.os, "statvfs", nearly_full)
        with pytest.raises(Unavailable, match="disk is full"):
            await h.ping()


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """Make a file read-only to this process: its mode for an ordinary user; for root (whom modes do
    not stop) the immutable attribute."""
    if os.geteuid() != 0:
        path.chmod(0o444)
        try:
            yield
        finally:
            path.chmod(0o600)
        return
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(path)]).returncode != 0:
        pytest.skip("as root, a read-only file needs chattr +i")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


@pytest.mark.slow  # starts a process
@pytest.mark.anyio
async def test_a_read_only_database_says_so_and_healthz_reports_it(tmp_path, workspace):
    path = tmp_path / "ro.db"
    url = f"sqlite+aiosqlite:///{path}"
    async with mcp_client(url, workspace) as c:
        await call(c, "save_checkpoint", state={"v": 1})
        await call(c, "add_tasks", tasks=[{"key": "once", "title": "One try", "max_attempts": 1}])
        await call(c, "claim_task", lease_seconds=10)
    clock.advance(11)  # the lease ran out on its last attempt: a look would settle it, with a write
    with read_only(path):
        async with mcp_client(url, workspace) as c:
            failed = await fail(c, "save_checkpoint", state={"v": 2})
            assert failed.code == "unavailable" and "read-only" in failed.text, failed.text
            assert "retry shortly" not in failed.text  # waiting will not help
            assert (await call(c, "restore_state"))["state"] == {"v": 1}
            # reads still work: the settling write is left for a later look
            assert [row["status"] for row in (await call(c, "list_tasks"))["tasks"]] == ["claimed"]
        settings = settings_for(url)
        async with Harness.open(settings) as h:
            app = build_app(h, settings, "127.0.0.1", 8765)
            async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app), base_url="http://127.0.0.1") as http:
                response = await http.get("/healthz")
        assert response.status_code == 503
        assert response.json()["status"] == "unavailable" and "read-only" in response.json()["reason"]
        with pytest.raises(Unavailable, match="read-only"):
            async with Harness.open(settings) as h:
                await h.checkpoints.save(Identity(workspace, "a"), SaveCheckpointArgs(state={"v": 3}))


@pytest.fixture
def refuse_blob_inserts(db_url: str, workspace: str) -> Iterator[str]:
    """A trigger that makes the database refuse this workspace's value inserts."""
    if db_url.startswith("sqlite"):
        import sqlite3

        path = db_url.split("///", 1)[1]
        anyio_run_open(db_url)
        with sqlite3.connect(path) as raw:
            raw.execute(
                f"CREATE TRIGGER refuse_{workspace.replace('-', '_')} BEFORE INSERT ON blobs "
                f"WHEN NEW.workspace = '{workspace}' BEGIN SELECT RAISE(ABORT, 'refused by a test trigger'); END"
            )
        yield db_url
        return
    import asyncio

    import asyncpg

    name = f"refuse_{workspace.replace('-', '_')}"
    anyio_run_open(db_url)

    async def admin(sql: str) -> None:
        conn = await asyncpg.connect(db_url.replace("postgresql+asyncpg://", "postgresql://", 1))
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(
        admin(
            f"CREATE FUNCTION {name}() RETURNS trigger AS $$ BEGIN IF NEW.workspace = '{workspace}' THEN "
            f"RAISE EXCEPTION 'refused by a test trigger'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql; "
            f"CREATE TRIGGER {name} BEFORE INSERT ON blobs FOR EACH ROW EXECUTE FUNCTION {name}()"
        )
    )
    try:
        yield db_url
    finally:
        asyncio.run(admin(f"DROP TRIGGER {name} ON blobs; DROP FUNCTION {name}()"))


def anyio_run_open(url: str) -> None:
    """Create (or upgrade) the schema, so a test can add to it."""
    import anyio

    async def run() -> None:
        async with Harness.open(settings_for(url)):
            pass

    anyio.run(run)


@pytest.mark.anyio
async def test_sql_parameters_never_reach_the_log(refuse_blob_inserts, workspace, caplog):
    secret = f"SECRET-{secrets.token_hex(8)}"
    caplog.set_level(logging.DEBUG)
    async with mcp_client(refuse_blob_inserts, workspace) as c:
        failed = await fail(c, "save_checkpoint", state={"key": f"{secret} " * 20})
    assert failed.code == "internal" and secret not in failed.text
    assert "refused by a test trigger" in caplog.text, "the failure itself must be logged"
    assert secret not in caplog.text


@pytest.mark.anyio
async def test_a_read_only_postgresql_says_so(postgres_url, workspace):
    """A role whose transactions are read-only (as on a standby): saves and /healthz say so."""
    import asyncpg
    from sqlalchemy import make_url

    async with Harness.open(settings_for(postgres_url)):
        pass  # the schema exists
    role = f"ro_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(postgres_url.replace("postgresql+asyncpg://", "postgresql://", 1))
    try:
        await admin.execute(
            f"CREATE ROLE {role} LOGIN; GRANT ALL ON ALL TABLES IN SCHEMA public TO {role}; "
            f"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {role}; "
            f"ALTER ROLE {role} SET default_transaction_read_only = on"
        )
        url = make_url(postgres_url).set(username=role).render_as_string(hide_password=False)
        async with mcp_client(url, workspace) as c:
            failed = await fail(c, "save_checkpoint", state={"v": 1})
            assert failed.code == "unavailable" and "read-only" in failed.text, failed.text
            assert "retry shortly" not in failed.text
        async with Harness.open(settings_for(url)) as h:
            with pytest.raises(Unavailable, match="read-only"):
                await h.db.ping()
    finally:
        await admin.execute(f"DROP OWNED BY {role}; DROP ROLE {role}")
        await admin.close()


@pytest.mark.anyio
async def test_after_a_write_met_a_full_disk_healthz_says_so_until_one_commits(db_url, workspace, monkeypatch):
    """A disk the server cannot look at (PostgreSQL's; a SQLite file at its size limit) shows in the
    writes: /healthz repeats what the last write that met it said, until a write commits or a while
    has passed. PostgreSQL's full disk is a trigger raising its SQLSTATE (disk_full) here."""
    import asyncpg

    from mcp_harness.store import engine

    me = Identity(workspace, "a")
    big = {"big": secrets.token_hex(100_000)}
    async with Harness.open(settings_for(db_url)):
        pass  # the schema, before a test adds to it
    if db_url.startswith("sqlite"):
        limited: contextlib.AbstractContextManager[None] = page_limit(Path(db_url.split("///", 1)[1]), 4)
        reason = DISK_FULL
    else:
        name = f"full_{workspace.replace('-', '_')}"
        raw = await asyncpg.connect(db_url.replace("postgresql+asyncpg://", "postgresql://", 1))
        await raw.execute(
            f"CREATE FUNCTION {name}() RETURNS trigger AS $$ BEGIN IF NEW.workspace = '{workspace}' THEN "
            f"RAISE EXCEPTION 'no room' USING ERRCODE = 'disk_full'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql; "
            f"CREATE TRIGGER {name} BEFORE INSERT ON blobs FOR EACH ROW EXECUTE FUNCTION {name}()"
        )
        limited = contextlib.nullcontext()
        reason = "the database server's disk is full: free space, then retry"
    try:
        with limited:
            async with Harness.open(settings_for(db_url)) as h:
                await h.ping()
                with pytest.raises(Unavailable, match="disk is full"):
                    await h.checkpoints.save(me, SaveCheckpointArgs(state=big))
                with pytest.raises(Unavailable) as said:
                    await h.ping()
                assert said.value.message == reason
                monkeypatch.setattr(engine, "FULL_HELD_SECONDS", 0.0)  # a while has passed
                await h.ping()
                monkeypatch.undo()
                with pytest.raises(Unavailable, match="disk is full"):
                    await h.checkpoints.save(me, SaveCheckpointArgs(state=big))
                await h.progress.record(me, RecordProgressArgs(summary="a small write still fits"))  # it commits
                await h.ping()
    finally:
        if not db_url.startswith("sqlite"):
            await raw.execute(f"DROP TRIGGER {name} ON blobs; DROP FUNCTION {name}()")
            await raw.close()

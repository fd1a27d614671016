"""Which identity a client process's stdio server acts as, for the hooks and the guard of that client.

A stdio server records its agent in a small per-user runtime file keyed by its client process (the
process id plus that process's start time from /proc, so a reused pid never matches) and the
workspace; the file goes when the server ends. A hook or the commit guard walks up its own ancestors
to the first record: that is the identity of the server of the same client, which stays the same
after `/clear` (where hooks and the shell get a new session id while the server keeps its own). With
no record (a `SessionStart` hook runs before the client starts its servers; no /proc on this system)
the caller derives the identity from the session id as the server will (`identity.stdio_agent`).

Standard library only: the per-prompt hook imports this."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from stat import S_ISDIR

#: processes that stand between a client and the command it starts (`sh -c ...`): a server started
#: through one records itself under the first ancestor that is none of these
WRAPPERS = frozenset({"sh", "bash", "dash", "zsh", "fish", "ksh", "env", "timeout", "nohup"})
MAX_DEPTH = 16  #: ancestors looked at, at most


def runtime_dir() -> Path:
    """Per-user and private: `$XDG_RUNTIME_DIR/mcp-harness`, else a folder of the temporary directory."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and Path(base).is_dir():
        return Path(base) / "mcp-harness"
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    return Path(tempfile.gettempdir()) / f"mcp-harness-{uid}"


def private(folder: Path) -> bool:
    """Whether `folder` is this user's own and closed to others (0700): a record in a folder someone
    else made, or could write into, might name another agent, so none is written or trusted there."""
    try:
        st = folder.lstat()  # a symlink is no folder of ours, wherever it points
    except OSError:
        return False
    owner = os.getuid() if hasattr(os, "getuid") else st.st_uid
    return st.st_uid == owner and (st.st_mode & 0o077) == 0


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name: [state, ppid, ..., starttime at 19]."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    fields = text[text.rfind(")") + 2 :].split()
    return fields if len(fields) > 19 else None


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except (OSError, ValueError):
        return ""


def process_key(pid: int) -> str | None:
    """`PID-STARTTIME`: names one process for its whole life, never a later one with the same pid."""
    fields = _stat(pid)
    return f"{pid}-{fields[19]}" if fields else None


def machine() -> str | None:
    """This machine as its processes see it: host name, boot and pid namespace (two containers of one
    host share the boot but not the namespace, so a pid is only compared where it means the same
    process). None where /proc cannot be read."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        space = os.readlink("/proc/self/ns/pid").strip("pid:[]")
    except (OSError, ValueError):
        return None
    import socket  # only here: the hooks' quick path imports this module

    return f"{socket.gethostname()}~{boot[:8]}~{space}"


def this_process() -> str | None:
    """`MACHINE/PID-STARTTIME` for this process: what a stdio server records with the leases it takes or
    renews (`alive` reads it back). None where /proc cannot be read."""
    where, key = machine(), process_key(os.getpid())
    return f"{where}/{key}" if where and key else None


def alive(recorded: str | None) -> bool | None:
    """Whether the process `this_process` recorded still runs: None when it cannot be known (nothing
    recorded, another machine, no /proc here)."""
    if not recorded or "/" not in recorded:
        return None
    where, _, key = recorded.rpartition("/")
    if where != machine():
        return None
    pid, _, _start = key.partition("-")
    return pid.isdigit() and process_key(int(pid)) == key


def _boot_time() -> float | None:
    try:
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def pid_alive(host: str, pid: int, registered: float) -> bool | None:
    """Whether the process that recorded (`host`, `pid`) at `registered` (seconds since the epoch) still
    runs: None on another host or where /proc cannot say; False once the pid runs no process, or one that
    started after `registered` (a later process given the same pid)."""
    import socket  # only here: the hooks' quick path imports this module

    boot = _boot_time()
    if host != socket.gethostname() or boot is None:
        return None
    fields = _stat(pid)
    if fields is None:
        return False
    try:
        started = boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError):
        return None
    return started <= registered + 2.0  # /proc's boot time is whole seconds


def recorded_pid(recorded: str) -> str:
    """The pid part of a recorded process (for a note)."""
    return recorded.rpartition("/")[2].partition("-")[0]


def parent_of(pid: int) -> int | None:
    fields = _stat(pid)
    return int(fields[1]) if fields and fields[1].isdigit() and int(fields[1]) > 0 else None


def ancestors(pid: int | None = None) -> list[int]:
    """The parent of `pid` (default: this process), its parent, and so on (at most `MAX_DEPTH`; none
    where /proc cannot be read)."""
    found: list[int] = []
    current = os.getpid() if pid is None else pid
    while len(found) < MAX_DEPTH:
        parent = parent_of(current)
        if parent is None or parent <= 1 or parent in found:
            break
        found.append(parent)
        current = parent
    return found


def record_path(client_key: str, workspace: str) -> Path:
    digest = hashlib.sha256(workspace.encode()).hexdigest()[:16]
    return runtime_dir() / f"{client_key}.{digest}.json"


def client_of_server() -> str | None:
    """The key of the client that started this process: its parent, past any shell in between."""
    for pid in ancestors():
        if _comm(pid) not in WRAPPERS:
            return process_key(pid)
    return None


def record(workspace: str, agent: str) -> Path | None:
    """Note that this stdio server acts as `agent` in `workspace` for its client; the path to remove
    at exit, or None where it cannot be recorded (no /proc, an unwritable or untrusted runtime folder)."""
    key = client_of_server()
    if key is None:
        return None
    path = record_path(key, workspace)
    if not own_folder(path.parent):
        import logging  # only here: the hooks' quick path imports this module

        logging.getLogger("mcp_harness.sessions").warning(
            "session records: %s is not private to this user (0700); not recording", path.parent
        )
        return None
    _prune(path.parent)
    data = json.dumps({"workspace": workspace, "agent": agent, "server_pid": os.getpid()})
    return path if write_private(path, data) else None


def own_folder(folder: Path) -> bool:
    """Make `folder` (and the runtime folder it is in) if missing, closed to others (0700), and say
    whether it is this user's own and private: what is written or read in a folder someone else made,
    or could write into, might be their doing (a symlink to a file of ours, a record naming another
    agent), so nothing is written or trusted there."""
    base = runtime_dir()
    for each in [base] + ([folder] if folder != base else []):
        try:
            each.mkdir(mode=0o700, parents=each is base, exist_ok=True)
            st = each.lstat()
            # ours and only readable by others (an older version, a umask): closed; one that others
            # could write into (or another user's, or a symlink) may hold what they planted: refused
            if st.st_uid == os.getuid() and S_ISDIR(st.st_mode) and st.st_mode & 0o077 and not st.st_mode & 0o022:
                each.chmod(0o700)
        except OSError:
            return False
        if not private(each):
            return False
    return True


def write_private(path: Path, text: str) -> bool:
    """Write `text` to `path` in a folder of this user's own (`own_folder`), atomically: a new file of
    this process's (created exclusively, never through a symlink, mode 0600) renamed over `path`."""
    if not own_folder(path.parent):
        return False
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        tmp.unlink(missing_ok=True)  # one left by a process killed with this pid
        fd = os.open(tmp, flags, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        return False
    return True


def read_private(path: Path) -> str | None:
    """What `write_private` wrote at `path`, or None (missing, not a plain file, or in a folder that is
    not this user's own and private)."""
    if not (private(runtime_dir()) and private(path.parent)):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd) as found:
            return found.read(4096) if os.fstat(fd).st_uid == os.getuid() else None
    except (OSError, ValueError):
        return None


def _prune(folder: Path) -> None:
    """Drop the records of clients that have ended (a server killed before it could remove its own)."""
    for old in folder.glob("*.json"):
        pid, _, _ = old.name.partition("-")
        if pid.isdigit() and process_key(int(pid)) != old.name.split(".", 1)[0]:
            old.unlink(missing_ok=True)


def forget(path: Path | None) -> None:
    """Remove this server's record (only while it is still this server's)."""
    if path is None:
        return
    try:
        if json.loads(path.read_text()).get("server_pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError):
        pass


def recorded_agent(workspace: str) -> str | None:
    """The agent the stdio server of this process's client records for `workspace`, or None."""
    if not private(runtime_dir()):
        return None
    for pid in ancestors():
        key = process_key(pid)
        if key is None:
            return None
        try:
            data = json.loads(read_private(record_path(key, workspace)) or "")
        except ValueError:
            continue
        agent = data.get("agent") if isinstance(data, dict) else None
        if isinstance(agent, str) and agent:
            return agent
    return None

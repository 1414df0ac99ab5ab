"""Local mode's embedded Postgres (pgserver), kept under the data directory and shared by the
processes that use the same one: it stops when the last of them leaves.

pgserver takes any live process named by ``postmaster.pid`` for the server, and stops it when it
is done: after a crash or a reboot that PID may belong to an unrelated process by now. A PID is
only trusted here once it is seen to be a ``postgres`` whose command line names this data
directory; a file naming any other process is stale, and is removed before pgserver reads it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


class EmbeddedPostgres:
    """A pgserver Postgres kept under ``data_dir/pgdata`` (shared by processes on the same folder)."""

    def __init__(self, data_dir: Path):
        import pgserver

        pgdata = data_dir / "pgdata"
        pgdata.mkdir(parents=True, exist_ok=True)
        self.pgdata = pgdata.resolve()
        with _pgserver_lock():
            forget_dead_users(self.pgdata)
            remove_stale_lock_files(self.pgdata)
        self.server = pgserver.get_server(str(self.pgdata), cleanup_mode="stop")
        self.url = self.server.get_uri()

    def stop(self) -> None:
        """Stop the server (pgserver keeps it up while another process still uses it). Only a
        process seen to be this data directory's postgres is ever signalled."""
        info = getattr(self.server, "_postmaster_info", None)
        if info is not None and not is_this_postgres(info.pid, self.pgdata):
            self.server._postmaster_info = None  # pgserver would stop (signal) whatever has that PID now
        self.server.cleanup()


def _pgserver_lock() -> Any:
    """pgserver's lock between processes, held while it starts (or stops) a server: the files
    it reads then are not changed under it."""
    from pgserver import PostgresServer

    return PostgresServer._lock


def is_this_postgres(pid: int, pgdata: Path) -> bool:
    """Whether ``pid`` is a running ``postgres`` started on ``pgdata`` (its command line names
    the folder: ``postgres -D <pgdata> ...``); not merely a process that has that PID."""
    import psutil

    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        command = process.cmdline()
        name = process.name()
    except (psutil.Error, OSError):
        return False
    if not command or "postgres" not in (name, os.path.basename(command[0])):
        return False
    folders = {str(pgdata), os.path.realpath(pgdata)}
    return any(argument in folders for argument in command[1:])


def remove_stale_lock_files(pgdata: Path) -> None:
    """Remove ``postmaster.pid`` (and the socket's lock file it names) when the process it names
    is not this folder's postgres: left by a crash, its PID may be another process's now, which
    pgserver would take for the server (and stop), and Postgres would refuse to start over."""
    pid_file = pgdata / "postmaster.pid"
    try:
        lines = pid_file.read_text().splitlines()
    except FileNotFoundError:
        return
    pid = _first_int(lines)
    if pid is not None and is_this_postgres(pid, pgdata):
        return  # the server is up: pgserver uses it
    if len(lines) >= 5 and lines[4].strip():  # the socket's folder (line 5) and port (line 4)
        port = lines[3].strip() or "5432"
        socket_lock = Path(lines[4].strip()) / f".s.PGSQL.{port}.lock"
        try:
            locked_by = _first_int(socket_lock.read_text().splitlines())
        except OSError:
            locked_by = None
        if locked_by is None or not is_this_postgres(locked_by, pgdata):
            socket_lock.unlink(missing_ok=True)
    pid_file.unlink(missing_ok=True)


def _first_int(lines: list[str]) -> int | None:
    """The PID a lock file's first line holds, or None."""
    try:
        return int(lines[0].strip())
    except (IndexError, ValueError):
        return None


def forget_dead_users(pgdata: Path) -> None:
    """Take the processes that died without stopping (SIGKILL) off pgserver's list of the
    server's users (``.handle_pids.json``): it stops the server when its last user leaves, and a
    dead one on the list would keep it running for good after every other has left."""
    handles = pgdata / ".handle_pids.json"
    try:
        pids = json.loads(handles.read_text())
    except (OSError, ValueError):
        return  # no list yet (or not one pgserver wrote): nothing to forget
    alive = [pid for pid in pids if isinstance(pid, int) and _alive(pid)]
    if alive != pids:
        handles.write_text(json.dumps(alive))


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

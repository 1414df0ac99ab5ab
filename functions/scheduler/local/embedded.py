"""Local mode's embedded Postgres (pgserver), kept under the data directory and shared by the
processes that use the same one: it stops when the last of them leaves.

pgserver takes any live process named by ``postmaster.pid`` for the server, and stops it when it
is done: after a crash or a reboot that PID may belong to an unrelated process by now. A PID is
only trusted here once it is seen to be a ``postgres`` whose command line names this data
directory; a file naming any other process is stale, and is removed before pgserver reads it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from scheduler.local.errors import LocalError


class EmbeddedPostgres:
    """A pgserver Postgres kept under ``data_dir/pgdata`` (shared by processes on the same folder)."""

    def __init__(self, data_dir: Path):
        """Start (or join) the server; ``LocalError`` of one line when it cannot be."""
        pgdata = data_dir / "pgdata"
        try:
            pgdata.mkdir(parents=True, exist_ok=True)
            self.pgdata = pgdata.resolve()
            with _pgserver_lock():
                forget_dead_users(self.pgdata)
                remove_stale_lock_files(self.pgdata)
            self.server = _start(self.pgdata)
        except OSError as exc:
            raise LocalError(data_dir_error(data_dir, exc)) from None
        self.url = self.server.get_uri()

    def stop(self) -> None:
        """Stop the server (pgserver keeps it up while another process still uses it). Only a
        process seen to be this data directory's postgres is ever signalled. A user that died
        without stopping (SIGKILL) since this one started does not keep it running."""
        with _pgserver_lock():
            forget_dead_users(self.pgdata)
        info = getattr(self.server, "_postmaster_info", None)
        if info is not None and not is_this_postgres(info.pid, self.pgdata):
            self.server._postmaster_info = None  # pgserver would stop (signal) whatever has that PID now
        self.server.cleanup()


def prepare_data_dir(data_dir: Path) -> Path:
    """``data_dir`` made (if need be) and resolved; ``LocalError`` of one line when it cannot be."""
    try:
        data_dir = data_dir.resolve()
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LocalError(data_dir_error(data_dir, exc)) from None
    return data_dir


def data_dir_error(data_dir: Path, exc: OSError) -> str:
    """The line for a data directory that cannot be used (a file, a read-only file system...)."""
    where = exc.filename or data_dir
    if isinstance(exc, (FileExistsError, NotADirectoryError)):
        file = next((part for part in [Path(where), *Path(where).parents] if part.is_file()), Path(where))
        reason = f"{file} is a file, not a folder"
    else:
        reason = f"{where}: {exc.strerror or exc}"
    return f"cannot use --data-dir {data_dir}: {reason} (give another --data-dir)"


def _start(pgdata: Path) -> Any:
    """pgserver's server on ``pgdata``, started if need be; ``LocalError`` quoting what initdb or
    Postgres said when it cannot be (pgserver's transcripts of the failure held back)."""
    import pgserver

    log = pgdata / "log"
    seen = _size(log)
    with _held_back(logging.getLogger("pgserver")) as said:
        try:
            return pgserver.get_server(str(pgdata), cleanup_mode="stop")
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            transcripts = [text for text in said if "contents of postgres server log" not in text]  # (the whole log)
            raise LocalError(start_failure(pgdata, exc, [*transcripts, _read_from(log, seen)])) from None


def start_failure(pgdata: Path, exc: subprocess.SubprocessError, texts: list[str]) -> str:
    """The line for an embedded Postgres that did not start: what initdb or Postgres said (from
    ``texts``: pgserver's transcripts, the server's new log lines), and what to do."""
    command = getattr(exc, "cmd", None) or ["postgres"]
    program = os.path.basename(str(command[0] if isinstance(command, list) else command).split()[0])
    reasons = useful_lines(texts)
    if isinstance(exc, subprocess.TimeoutExpired):
        reasons.insert(0, f"{program} did not finish within {exc.timeout:g} s")
    reason = "; ".join(reasons) or f"{program} failed (exit code {getattr(exc, 'returncode', '?')})"
    version = re.search(r"initialized by PostgreSQL version (\d+)", reason)
    if version:
        hint = (
            f"its data needs PostgreSQL {version.group(1)}: give another --data-dir, or --database-url "
            f"of a PostgreSQL {version.group(1)} server with that data"
        )
    elif "exists but is not empty" in reason:
        hint = "it holds files but no database: give another --data-dir, or empty that folder"
    else:
        hint = f"see {pgdata / 'log'}; give another --data-dir, or --database-url"
    return f"cannot start the embedded Postgres under {pgdata}: {reason} ({hint})"


# The lines worth quoting of initdb's and pg_ctl's output and of the server's log (its errors and
# their details); not their advice (it is about running initdb by hand) nor pg_ctl's "see the log".
_SERVER_LINE = re.compile(r"\b(?:FATAL|PANIC|ERROR|DETAIL):\s+(.*)")
_PROGRAM_LINE = re.compile(r"^(?:initdb|pg_ctl|postgres): (?!hint:)(?:error: )?(.*)")
_NOT_WORTH_QUOTING = ("could not start server", "Examine the log output")


def useful_lines(texts: list[str], most: int = 3) -> list[str]:
    """The first ``most`` distinct lines of ``texts`` that say why a start failed."""
    found: list[str] = []
    for text in texts:
        for line in text.splitlines():
            match = _SERVER_LINE.search(line) or _PROGRAM_LINE.match(line.strip())
            quoted = " ".join(match.group(1).split()) if match else ""
            if quoted and quoted not in found and not any(words in quoted for words in _NOT_WORTH_QUOTING):
                found.append(quoted)
    return found[:most]


@contextmanager
def _held_back(logger: logging.Logger) -> Iterator[list[str]]:
    """The error records of ``logger`` kept in a list, not printed: a failure is said in one line."""
    said: list[str] = []

    class Hold(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record.getMessage())

    hold, propagate = Hold(logging.ERROR), logger.propagate
    logger.addHandler(hold)
    logger.propagate = False
    try:
        yield said
    finally:
        logger.removeHandler(hold)
        logger.propagate = propagate


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read_from(path: Path, offset: int) -> str:
    """What was written to ``path`` after ``offset`` (all of it, if it was shorter since)."""
    try:
        with path.open("rb") as file:
            if _size(path) >= offset:
                file.seek(offset)
            return file.read().decode(errors="replace")
    except OSError:
        return ""


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
    """Whether a process ``pid`` exists (another user's counts); a zombie (dead, not yet reaped
    by its parent) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True  # no /proc (macOS): it exists

"""Benchmark plumbing: a Postgres server (DATABASE_URL or embedded) and fresh migrated databases."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import sys
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "functions"), str(ROOT)]

from scheduler.sql import strip_sql_comments  # noqa: E402,F401 - re-exported for the benchmarks
from scheduler.store.migrations import migrate  # noqa: E402
from tests.support import postgres_server, temporary_database  # noqa: E402,F401 - postgres_server re-exported


@contextlib.contextmanager
def fresh_database(server_url: str, label: str = "bench"):
    """A new migrated database, dropped at the end."""
    with temporary_database(server_url, label=label) as url:
        migrate(url)
        yield url


# -- shared by the benchmarks of issue 7 (throughput_vs_peers, lateness_local, dispatch_rate,
# cold_start, run_all) ---------------------------------------------------------------------------

import json  # noqa: E402
import math  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections.abc import Iterable  # noqa: E402
from typing import Any  # noqa: E402

BENCH = ROOT / "bench"
PYTHON = sys.executable


def percentile(values: Iterable[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation; NaN for no data."""
    data = sorted(values)
    if not data:
        return math.nan
    k = (len(data) - 1) * q / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return data[lo] + (data[hi] - data[lo]) * (k - lo)


def progress(total: int | None, desc: str, unit: str = "job", **kwargs: Any):
    """A tqdm progress bar on stderr (a no-op stand-in when tqdm is missing)."""
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover

        class _Null:
            n = 0

            def update(self, n: int = 1) -> None:
                self.n += n

            def close(self) -> None:
                pass

            def set_postfix_str(self, *_: Any, **__: Any) -> None:
                pass

            def __enter__(self):
                return self

            def __exit__(self, *exc: Any) -> None:
                pass

        return _Null()
    # disable=None: no bar when stderr is not a terminal (logs stay readable).
    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        file=sys.stderr,
        leave=False,
        dynamic_ncols=True,
        mininterval=0.5,
        disable=None,
        **kwargs,
    )


def write_json(path: str | os.PathLike | None, data: dict[str, Any]) -> None:
    """Write a benchmark's results (``--json PATH``) for ``run_all.py``."""
    if path:
        Path(path).write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")


def libpq_env(url: str) -> dict[str, str]:
    """The environment that points libpq tools (pgbench, psql) at ``url``."""
    from psycopg.conninfo import conninfo_to_dict

    params = conninfo_to_dict(url)
    env = dict(os.environ)
    mapping = {
        "host": "PGHOST",
        "port": "PGPORT",
        "user": "PGUSER",
        "password": "PGPASSWORD",
        "dbname": "PGDATABASE",
        "sslmode": "PGSSLMODE",
    }
    for key, var in mapping.items():
        if params.get(key) not in (None, ""):
            env[var] = str(params[key])
    return env


def find_pgbench() -> str:
    """pgbench on PATH, else the newest /usr/lib/postgresql/*/bin/pgbench."""
    found = shutil.which("pgbench")
    if found:
        return found
    candidates = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/pgbench"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    if candidates:
        return str(candidates[-1])
    raise SystemExit("pgbench not found: install postgresql-client (or put pgbench on PATH)")


def server_version(url: str) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SHOW server_version").fetchone()[0]


def checkpoint(url: str) -> None:
    """CHECKPOINT so that every measured run starts with the same WAL state (skipped when the
    role may not)."""
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CHECKPOINT")
    except psycopg.Error:
        pass


def _cpu_busy_and_total() -> tuple[int, int]:
    """The machine's CPU ticks from /proc/stat: (busy, total), every core together."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    total = sum(values[:8])  # guest time is counted in user already
    return total - idle, total


def wait_until_quiet(max_wait: float = 60.0, busy_below: float = 0.15, window: float = 1.0) -> dict[str, float]:
    """Wait until the machine's CPU was less than ``busy_below`` busy over a whole ``window``
    (what an earlier benchmark left running, autovacuum or a checkpoint, would otherwise share
    the cores with the measured run), at most ``max_wait`` seconds. Returns the seconds waited
    and the last window's busy fraction, for the results. Linux only (else returns at once)."""
    began = time.monotonic()
    busy_fraction = 0.0
    try:
        while True:
            busy0, total0 = _cpu_busy_and_total()
            time.sleep(window)
            busy1, total1 = _cpu_busy_and_total()
            busy_fraction = (busy1 - busy0) / max(total1 - total0, 1)
            if busy_fraction < busy_below or time.monotonic() - began >= max_wait:
                break
    except (OSError, ValueError, IndexError):
        pass
    return {"quiet_wait_s": round(time.monotonic() - began, 1), "busy_before": round(busy_fraction, 3)}


def machine_summary() -> dict[str, Any]:
    """What the figures were measured on."""
    import platform

    info: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        info["memory_gib"] = round(pages / 2**30, 1)
    except (ValueError, OSError):
        pass
    try:
        info["loadavg"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    return info


_REASONS = {200: b"OK", 202: b"Accepted", 400: b"Bad Request"}


class MinimalHttpProtocol(asyncio.Protocol):
    """A minimal HTTP/1.1 server connection (keep-alive, Content-Length bodies only): the stand-ins
    for AWS and for the user's endpoint answer from a few lines of parsing, so that what they cost
    this machine's two cores is small beside the code under test (``http.server`` parses headers
    with the e-mail package, about 0.2 ms of CPU per request). ``handle(method, path, headers,
    body)`` returns the status; header names are lower-cased."""

    def __init__(self, handle) -> None:
        self.handle = handle
        self.buffer = b""

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            lines = self.buffer[:end].decode("latin-1").split("\r\n")
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length") or 0)
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4 : end + 4 + length]
            self.buffer = self.buffer[end + 4 + length :]
            method, path = lines[0].split(" ", 2)[:2]
            status = self.handle(method, path, headers, body)
            self.transport.write(
                b"HTTP/1.1 %d %s\r\nContent-Length: 0\r\n"
                b"x-amzn-RequestId: 00000000-0000-0000-0000-000000000000\r\n\r\n" % (status, _REASONS[status])
            )


class LoopbackServer:
    """A small HTTP/1.1 server on 127.0.0.1, in this process.

    Every request is answered ``status`` with an empty body; when ``record`` is true, the arrival
    time (``time.time()``) and the headers named in ``keep_headers`` are appended to
    ``self.received``. ``kind`` "asyncio" (the default) serves from an event loop in one thread
    with ``MinimalHttpProtocol``, as a target elsewhere would cost this machine nothing; "threaded"
    is ``http.server`` (a thread per connection, about 0.2 ms of CPU per request taken from the
    cores the code under test runs on, and its own queueing counted as lateness).
    """

    def __init__(
        self,
        status: int = 200,
        *,
        record: bool = True,
        keep_headers: tuple[str, ...] = ("X-Scheduler-Scheduled-At", "Idempotency-Key"),
        kind: str = "asyncio",
    ) -> None:
        import http.server

        self.received: list[tuple[float, dict[str, str]]] = []
        self.count = 0
        self.kind = kind
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        owner = self
        if kind == "asyncio":
            self._serve_asyncio(status, record, keep_headers)
            return
        if kind != "threaded":
            raise ValueError(f"unknown server kind {kind!r}")

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                arrived = time.time()
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                owner._arrived(arrived, {h: self.headers.get(h, "") for h in keep_headers} if record else None)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = do_PUT = _handle

            def log_message(self, *args: Any) -> None:
                pass

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 512

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True, name="loopback-server"
        )
        self.thread.start()

    def _arrived(self, arrived: float, kept: dict[str, str] | None) -> None:
        with self._cond:
            self.count += 1
            if kept is not None:
                self.received.append((arrived, kept))
            self._cond.notify_all()

    def _serve_asyncio(self, status: int, record: bool, keep_headers: tuple[str, ...]) -> None:
        def handle(method: str, path: str, headers: dict[str, str], body: bytes) -> int:
            arrived = time.time()
            self._arrived(arrived, {h: headers.get(h.lower(), "") for h in keep_headers} if record else None)
            return status

        self._loop = asyncio.new_event_loop()
        self._server = self._loop.run_until_complete(
            self._loop.create_server(lambda: MinimalHttpProtocol(handle), "127.0.0.1", 0, backlog=1024)
        )
        self._port = self._server.sockets[0].getsockname()[1]
        self.thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="loopback-server")
        self.thread.start()

    @property
    def port(self) -> int:
        return self._port if self.kind == "asyncio" else self.httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_for(self, count: int, timeout: float, on_progress=None) -> int:
        """Block until ``count`` requests arrived or ``timeout`` passed; returns how many did."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.count < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(min(left, 0.5))
                if on_progress is not None:
                    on_progress(self.count)
            return self.count

    def close(self) -> None:
        if self.kind == "asyncio":
            self._loop.call_soon_threadsafe(self._loop.stop)
            self.thread.join(timeout=5)
            self._server.close()
            self._loop.close()
            return
        self.httpd.shutdown()
        self.httpd.server_close()


def run_bench_script(script: str, args: list[str], json_path: str, *, timeout: float) -> dict[str, Any]:
    """Run ``bench/<script>`` as a child process with ``--json json_path``; its results."""
    cmd = [PYTHON, str(BENCH / script), *args, "--json", json_path]
    print(f"$ {' '.join(['python', 'bench/' + script, *args])}", flush=True)
    began = time.monotonic()
    subprocess.run(cmd, check=True, timeout=timeout, cwd=str(ROOT))
    data = json.loads(Path(json_path).read_text(encoding="utf-8"))
    data.setdefault("elapsed_seconds", round(time.monotonic() - began, 1))
    return data


def _proc_cpu_ticks(pid: int, children: bool = False) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # fields[0] is field 3 (state): utime, stime, cutime, cstime are fields 14-17.
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks


class ServerCpu:
    """CPU seconds the Postgres server spent, read from /proc when the server runs on this host
    (the postmaster's own time, its reaped children's, and its live children's). ``None`` when
    it cannot be read (a remote server, another user's processes hidden). Includes whatever
    else the server did meanwhile (autovacuum, other clients)."""

    def __init__(self, url: str) -> None:
        self.pid: int | None = None
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                datadir = conn.execute("SHOW data_directory").fetchone()[0]
            pid = int(Path(datadir, "postmaster.pid").read_text().split()[0])
            _proc_cpu_ticks(pid)
            self.pid = pid
        except Exception:
            self.pid = None

    def seconds(self) -> float | None:
        if self.pid is None:
            return None
        try:
            total = _proc_cpu_ticks(self.pid, children=True)
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit():
                    continue
                try:
                    stat = (entry / "stat").read_text()
                except OSError:
                    continue
                if int(stat.rsplit(")", 1)[1].split()[1]) == self.pid:
                    total += _proc_cpu_ticks(int(entry.name))
            return total / os.sysconf("SC_CLK_TCK")
        except Exception:
            return None


# -- pgbench scripts from the store's named queries ----------------------------------------------


def split_with(sql: str) -> tuple[str | None, str]:
    """``WITH a AS (...), b AS (...) MAIN`` -> ("a AS (...), b AS (...)", "MAIN"); no WITH -> (None, sql)."""
    text = sql.strip()
    if not re.match(r"(?is)^with\s", text):
        return None, text
    depth, i, quoted = 0, 4, False
    while i < len(text):
        ch = text[i]
        if ch == "'":
            quoted = not quoted
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth -= 1
            if depth == 0:
                rest = text[i + 1 :].lstrip()
                if not rest.startswith(","):
                    return text[4 : i + 1].strip(), rest
        i += 1
    raise ValueError("cannot find the main statement of the WITH query")


def substitute(sql: str, values: dict[str, str]) -> str:
    """Replace psycopg's ``%(name)s`` parameters by pgbench expressions; every one must be given."""

    def repl(match: re.Match) -> str:
        name = match.group(1)
        if name not in values:
            raise KeyError(f"no pgbench value for the parameter {name!r}")
        return values[name]

    return re.sub(r"%\((\w+)\)[sb]", repl, sql)

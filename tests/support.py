"""Helpers shared by tests and benchmarks: job specs and bulk inserts."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import requests
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import ConnectionPool

from scheduler import service
from scheduler.core.domain import Completion, Outcome
from scheduler.store.migrations import database_roles


@contextlib.contextmanager
def postgres_server(prefix: str = "sched-pg-") -> Iterator[str]:
    """Conninfo of a Postgres server we may create databases on: ``DATABASE_URL`` when set (its
    maintenance database), else an embedded Postgres (pgserver) for as long as the block runs."""
    url = os.environ.get("DATABASE_URL")
    if url:
        yield make_conninfo(url, dbname=conninfo_to_dict(url).get("dbname") or "postgres")
        return
    import pgserver

    datadir = tempfile.mkdtemp(prefix=prefix)
    server = pgserver.get_server(datadir, cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(datadir, ignore_errors=True)


@contextlib.contextmanager
def temporary_database(server_url: str, *, label: str = "t", template: str | None = None) -> Iterator[str]:
    """A new database on the server (a copy of ``template`` when given), dropped afterwards.
    Yields its conninfo; its name is ``conninfo_to_dict(url)["dbname"]``."""
    name = f"sched_{label}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
    try:
        yield make_conninfo(server_url, dbname=name)
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            # Roles outlive databases: the application role migration 0011 made for this one
            # goes too (a copy made with TEMPLATE shares its template's role, dropped with it).
            for role in database_roles(conn, name):
                conn.execute(psycopg.sql.SQL("DROP ROLE {}").format(psycopg.sql.Identifier(role)))


def privileges_snapshot(url: str) -> list[tuple]:
    """Every privilege granted on the database, on its public schema and on the objects in it, and
    the default privileges, as (kind, object, grantee, privilege, grantable, grantor); the
    database's application role (``scheduler_data_role()``, migration 0011) reads ``<app>``, so
    that two databases compare."""
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("""
            WITH grants AS (
                SELECT 'database' AS kind, '' AS object, a.*
                FROM pg_database d, aclexplode(d.datacl) a WHERE d.datname = current_database()
                UNION ALL
                SELECT 'schema', n.nspname, a.* FROM pg_namespace n, aclexplode(n.nspacl) a WHERE n.nspname = 'public'
                UNION ALL
                SELECT 'relation', c.relname, a.*
                FROM pg_class c, aclexplode(c.relacl) a WHERE c.relnamespace = 'public'::regnamespace
                UNION ALL
                SELECT 'function', p.oid::regprocedure::text, a.*
                FROM pg_proc p, aclexplode(p.proacl) a WHERE p.pronamespace = 'public'::regnamespace
                UNION ALL
                SELECT 'default ' || d.defaclobjtype::text,
                       d.defaclrole::regrole::text || ' in ' || coalesce(d.defaclnamespace::regnamespace::text, '*'), a.*
                FROM pg_default_acl d, aclexplode(d.defaclacl) a
            ), app AS (SELECT oid FROM pg_roles WHERE rolname = scheduler_data_role())
            SELECT kind, object,
                   CASE WHEN grantee = 0 THEN 'PUBLIC' WHEN grantee = (SELECT oid FROM app) THEN '<app>'
                        ELSE grantee::regrole::text END AS grantee,
                   privilege_type, is_grantable, grantor::regrole::text
            FROM grants ORDER BY 1, 2, 3, 4""").fetchall()


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class LocalScheduler:
    """One `scheduler local` process on a database; ``url`` is its API's base URL (without
    ``/v1``), read from its banner."""

    def __init__(self, database_url: str, data_dir: str, *extra: str):
        env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "functions")}
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "scheduler.cli",
                "local",
                "--port",
                "0",
                "--database-url",
                database_url,
                "--data-dir",
                data_dir,
                *extra,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        self.lines: list[str] = []
        self.url = ""
        ready = threading.Event()

        def read() -> None:
            for line in self.process.stdout:
                self.lines.append(line)
                if "scheduler local: API " in line and not self.url:
                    self.url = line.split("API ", 1)[1].split()[0].removesuffix("/v1")
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(60) or not self.url:
            self.process.kill()
            raise RuntimeError("scheduler local did not start:\n" + "".join(self.lines))

    def stop(self) -> int:
        """Ctrl-C, and the exit code (raises if it does not stop within 30 s)."""
        if self.process.poll() is not None:
            return self.process.returncode
        self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)
            raise

    def post(self, path: str, body: dict) -> dict:
        """POST JSON; the answer's JSON (asserts a 2xx)."""
        answer = requests.post(self.url + path, json=body, headers={"Content-Type": "application/json"}, timeout=10)
        assert answer.status_code in (200, 201, 202), answer.text
        return answer.json()

    def get(self, path: str) -> dict:
        """GET; the answer's JSON (asserts a 200)."""
        answer = requests.get(self.url + path, timeout=10)
        assert answer.status_code == 200, answer.text
        return answer.json()


def http_spec(
    name: str, schedule: str | None = "* * * * *", url: str = "https://example.com/hook", **extra: Any
) -> dict[str, Any]:
    """A valid job spec (as the API hands it to the store) with an HTTP target."""
    spec: dict[str, Any] = {
        "name": name,
        "schedule": schedule,
        "timezone": "UTC",
        "target": {
            "type": "http",
            "url": url,
            "method": "POST",
            "headers": {},
            "body": None,
            "auth": None,
            "timeout_seconds": 5,
            "success_codes": None,
            "follow_redirects": False,
        },
        "retry": {"max_attempts": 3, "min_backoff_seconds": 1, "max_backoff_seconds": 60, "max_age_seconds": None},
        "missed_runs": "run_once",
    }
    spec.update(extra)
    return spec


def poll(condition: Callable[[], Any], timeout: float = 20.0, interval: float = 0.05, what: str = "condition"):
    """The first truthy value of ``condition()``; AssertionError after the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} not met within {timeout:g}s")
        time.sleep(interval)


# The columns of the view jobs that live in job_runs (migration 0010); the others are job_specs'.
# state is in both: job_runs' is the job's, job_specs' the copy its job list index reads.
RUN_COLUMNS = frozenset(
    {
        "state",
        "version",
        "scheduled_at",
        "attempt",
        "next_run_at",
        "manual_run_at",
        "locked_until",
        "lock_token",
        "lease_kind",
        "running_execution_id",
        "last_run_at",
        "run_count",
        "failure_count",
        "last_status",
        "last_error",
    }
)


def insert_jobs_sql(columns: str, rows: str) -> str:
    """An INSERT of rows into the view jobs, which takes none itself: ``rows``, a query (a SELECT
    or VALUES) giving ``columns`` (comma-separated names of the view's columns, ``id`` among them),
    split into a job_specs row and a job_runs row each. The statement returns the ids inserted."""
    names = [name.strip() for name in columns.split(",")]
    if "id" not in names:
        raise ValueError("the rows need an id")
    spec = [name for name in names if name not in RUN_COLUMNS or name == "state"]
    run = [name for name in names if name in RUN_COLUMNS]
    return f"""
        WITH src ({", ".join(names)}) AS MATERIALIZED ({rows}),
        spec AS (INSERT INTO job_specs ({", ".join(spec)}) SELECT {", ".join(spec)} FROM src),
        run AS (INSERT INTO job_runs (job_id{"".join(", " + n for n in run)})
                SELECT id{"".join(", " + n for n in run)} FROM src)
        SELECT id FROM src"""


def insert_due_jobs(
    pool: ConnectionPool,
    count: int,
    *,
    owner: str = "bulk",
    prefix: str = "job",
    due_offset_seconds: float = -1.0,
    state: str = "active",
    schedule: str = "0 0 1 1 *",
) -> None:
    """Insert ``count`` jobs due ``due_offset_seconds`` from now (negative: already due), in one
    statement. The default schedule (yearly) does not make them due again after a run."""
    with pool.connection() as conn:
        conn.execute(
            insert_jobs_sql(
                "id, owner, name, schedule, target, retry, state, scheduled_at, next_run_at",
                """
                SELECT gen_random_uuid(), %(owner)s, %(prefix)s || '-' || g, %(schedule)s,
                       '{"type": "http", "url": "https://example.com/hook"}'::jsonb,
                       '{"max_attempts": 3, "min_backoff_seconds": 1, "max_backoff_seconds": 60}'::jsonb,
                       %(state)s, date_trunc('second', now() + make_interval(secs => %(offset)s)),
                       date_trunc('second', now() + make_interval(secs => %(offset)s))
                FROM generate_series(1, %(count)s) AS g""",
            ),
            {
                "owner": owner,
                "prefix": prefix,
                "count": count,
                "offset": due_offset_seconds,
                "state": state,
                "schedule": schedule,
            },
        )


def succeeded(claim, *, response_excerpt: str | None = None, **extra: Any) -> Completion:
    """The completion of a claim that ``claim_and_start`` started, as a success with HTTP 200
    (and ``response_excerpt``), planned from its started row (as local mode's recorder writes
    it); ``extra``: the other fields of ``Completion``."""
    return Completion(
        claim.job_id,
        claim.lock_token,
        claim.started.execution_id,
        Outcome("succeeded", http_status=200, response_excerpt=response_excerpt),
        started=claim.started,
        **extra,
    )


def run_once(store, outcome: Outcome, *, planned: bool) -> bool:
    """Claim and start the due job, and record its outcome: planned from the started row (the
    runner's batch path) or through the locking path. Whether the outcome was written."""
    [claim] = store.claim_and_start(10)
    extra = {"started": claim.started, "elapsed_seconds": 0.01} if planned else {}
    return service.complete_executions(
        store, [Completion(claim.job_id, claim.lock_token, claim.started.execution_id, outcome, **extra)]
    )[0]


def expire_lease(pool: ConnectionPool, job_id: str) -> None:
    """Make a held lease look expired (as if the runner had stalled past it)."""
    with pool.connection() as conn:
        conn.execute("UPDATE job_runs SET locked_until = now() - interval '1 second' WHERE job_id = %s", (job_id,))


def make_due(pool: ConnectionPool, job_id: str) -> None:
    """Move a job's next attempt to now, as if its time had come (the occurrence too, when no
    attempt was made at it yet)."""
    with pool.connection() as conn:
        conn.execute(
            """
            UPDATE job_runs SET next_run_at = date_trunc('second', now()) - interval '1 second',
                                scheduled_at = CASE WHEN attempt = 0 THEN date_trunc('second', now()) - interval '1 second'
                                                    ELSE scheduled_at END
            WHERE job_id = %s""",
            (job_id,),
        )


class RecordingServer:
    """A real HTTP server on loopback that records requests and answers from a script.

    ``responses`` maps a path to a list of ``(status, headers, body)`` consumed in order (the last
    one repeats). ``gates`` maps a path to an event its answers wait for (a slow target).
    ``wait_for(n)`` blocks until n requests arrived (or the deadline passes).
    """

    def __init__(self) -> None:
        import http.server
        import threading

        self.requests: list[dict] = []
        self.responses: dict[str, list[tuple[int, dict, bytes]]] = {}
        self.gates: dict[str, threading.Event] = {}
        self._cond = threading.Condition()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Buffered: the status line, headers and body leave in one write (unbuffered, the body
            # waits for the client's delayed ACK of the headers: 40 ms a request).
            wbufsize = -1

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with server._cond:
                    server.requests.append(
                        {"method": self.command, "path": self.path, "headers": dict(self.headers.items()), "body": body}
                    )
                    script = server.responses.get(self.path.split("?")[0]) or [(200, {}, b"ok")]
                    status, headers, payload = script.pop(0) if len(script) > 1 else script[0]
                    server._cond.notify_all()
                    gate = server.gates.get(self.path.split("?")[0])
                if gate is not None:
                    gate.wait(30)
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

            def log_message(self, *args) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def wait_for(self, count: int, timeout: float = 10.0) -> list[dict]:
        """The requests, once at least ``count`` arrived; raises on timeout."""
        import time

        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.requests) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{len(self.requests)} of {count} requests arrived")
                self._cond.wait(left)
            return list(self.requests)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    """moto's server (every AWS service it mocks) on a free loopback port, for as long as the
    block runs; yields its URL (give it as ``AWS_ENDPOINT_URL``)."""
    import socket
    import time

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                requests.get(url + "/moto-api/", timeout=1)
                break
            except requests.ConnectionError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("moto server did not start") from None
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def run_at_once(call: Callable[[], Any], count: int, timeout: float = 60.0) -> tuple[list[Any], list[BaseException]]:
    """``call`` from ``count`` threads released together (a barrier); what they returned and what
    they raised, once all have ended."""
    results: list[Any] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(count)

    def run() -> None:
        barrier.wait()
        try:
            results.append(call())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    return results, errors

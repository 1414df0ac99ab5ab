"""`scheduler local` as a black box: started as a subprocess, used over HTTP only."""

from __future__ import annotations

import os
import re
import signal
from datetime import UTC, datetime, timedelta

import pytest

from tests.support import LocalScheduler, RecordingServer, poll


@pytest.fixture
def local(db_url, tmp_path):
    started: list[LocalScheduler] = []

    def start(*extra: str) -> LocalScheduler:
        scheduler = LocalScheduler(db_url, str(tmp_path / f"data{len(started)}"), *extra)
        started.append(scheduler)
        return scheduler

    yield start
    for scheduler in started:
        if scheduler.process.poll() is None:
            assert scheduler.stop() == 0, "".join(scheduler.lines)
            assert any("scheduler local: stopped" in line for line in scheduler.lines)


@pytest.fixture
def target():
    server = RecordingServer()
    yield server
    server.close()


def in_seconds(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat()


def http_target(url: str, **extra) -> dict:
    return {"type": "http", "url": url, "method": "POST", "timeout_seconds": 5, **extra}


def test_one_off_job_fires_and_is_recorded(local, target):
    api = local()
    job = api.post(
        "/v1/jobs",
        {"name": "once", "run_at": in_seconds(1), "target": http_target(target.url + "/once", body="{{job_id}}")},
    )
    [request] = target.wait_for(1)
    assert request["body"].decode() == job["id"]
    executions = poll(
        lambda: [e for e in api.get(f"/v1/jobs/{job['id']}/executions")["executions"] if e["status"] != "running"]
    )
    assert executions[0]["status"] == "succeeded" and executions[0]["http_status"] == 200
    assert poll(lambda: api.get(f"/v1/jobs/{job['id']}")["state"] == "completed")


def test_recurring_job_fires_every_second(local, target):
    api = local()
    api.post("/v1/jobs", {"name": "tick", "schedule": "@every 1s", "target": http_target(target.url + "/tick")})
    requests_seen = target.wait_for(3)
    keys = [r["headers"]["Idempotency-Key"] for r in requests_seen]
    assert len(set(keys)) == len(keys)
    times = [
        datetime.fromisoformat(r["headers"]["X-Scheduler-Scheduled-At"].replace("Z", "+00:00"))
        for r in requests_seen[:3]
    ]
    assert [(b - a).total_seconds() for a, b in zip(times, times[1:])] == [1.0, 1.0]


def test_failed_deliveries_are_retried(local, target):
    target.responses["/flaky"] = [(500, {}, b"no"), (503, {}, b"no"), (200, {}, b"yes")]
    api = local()
    job = api.post(
        "/v1/jobs",
        {
            "name": "flaky",
            "run_at": in_seconds(0.5),
            "retry": {"max_attempts": 5, "min_backoff_seconds": 0.2, "max_backoff_seconds": 0.5},
            "target": http_target(target.url + "/flaky"),
        },
    )
    attempts = target.wait_for(3)
    assert [r["headers"]["X-Scheduler-Attempt"] for r in attempts] == ["1", "2", "3"]
    assert len({r["headers"]["Idempotency-Key"] for r in attempts}) == 1
    executions = poll(
        lambda: (lambda es: es if len(es) == 3 and es[0]["status"] == "succeeded" else None)(
            api.get(f"/v1/jobs/{job['id']}/executions")["executions"]
        )
    )
    assert [e["status"] for e in executions] == ["succeeded", "failed", "failed"]
    assert [e["trigger"] for e in executions] == ["retry", "retry", "schedule"]


def test_ctrl_c_lets_an_alert_being_sent_finish_and_be_recorded(local, target):
    """Stopped while an alert's hook has not answered yet: the stop waits for the answer and
    records it (the alert went out: it must not go out again), without a traceback."""
    import threading

    target.responses["/fail"] = [(500, {}, b"no")]
    target.gates["/hook"] = gate = threading.Event()
    scheduler = local()
    job = scheduler.post(
        "/v1/jobs",
        {
            "name": "alerting",
            "run_at": in_seconds(0.5),
            "retry": {"max_attempts": 1},
            "target": http_target(target.url + "/fail"),
            "alerts": [{"on": "failure", "target": http_target(target.url + "/hook", timeout_seconds=20)}],
        },
    )
    poll(lambda: any(r["path"] == "/hook" for r in target.requests) or None, timeout=30)
    scheduler.process.send_signal(signal.SIGINT)
    poll(lambda: any("scheduler local: stopping" in line for line in scheduler.lines) or None)
    gate.set()  # the hook answers while the stop is under way
    assert scheduler.process.wait(timeout=30) == 0  # (a second Ctrl-C would quit at once)
    assert not any("Traceback" in line or "not recorded" in line for line in scheduler.lines), "".join(scheduler.lines)
    again = local()
    [alert] = again.get(f"/v1/alerts?job_id={job['id']}")["alerts"]
    assert (alert["status"], alert["attempts"]) == ("delivered", 1)
    assert [r["path"] for r in target.requests].count("/hook") == 1


def test_amqp_job_is_published(local, amqp_url, amqp_admin, amqp_queue):
    exchange, queue, routing_key = amqp_queue
    api = local()
    job = api.post(
        "/v1/jobs",
        {
            "name": "amqp",
            "run_at": in_seconds(0.5),
            "target": {
                "type": "amqp",
                "url": amqp_url,
                "exchange": exchange,
                "routing_key": routing_key,
                "body": "hello {{job_id}}",
            },
        },
    )

    def fetch():
        method, properties, body = amqp_admin.basic_get(queue, auto_ack=True)
        return (properties, body) if method else None

    properties, body = poll(fetch)
    assert body.decode() == f"hello {job['id']}"
    assert properties.headers["X-Scheduler-Job-Id"] == job["id"]
    executions = api.get(f"/v1/jobs/{job['id']}/executions")["executions"]
    assert executions and executions[0]["status"] in ("running", "succeeded")


def test_two_runners_deliver_each_job_exactly_once(local, target):
    first, second = local(), local()
    count = 300
    for i in range(count):
        api = first if i % 2 else second
        api.post(
            "/v1/jobs",
            {
                "name": f"bulk-{i:03d}",
                "run_at": in_seconds(2 + (i % 10) / 10),
                "target": http_target(target.url + "/bulk"),
            },
        )
    target.wait_for(count, timeout=60)

    def all_done():
        jobs, cursor = [], None
        while True:
            page = first.get("/v1/jobs?limit=200" + (f"&cursor={cursor}" if cursor else ""))
            jobs += page["jobs"]
            cursor = page["next_cursor"]
            if not cursor:
                return jobs if all(j["state"] == "completed" for j in jobs) else None

    jobs = poll(all_done, timeout=60)
    assert len(jobs) == count and all(j["stats"]["run_count"] == 1 for j in jobs)
    keys = [r["headers"]["Idempotency-Key"] for r in target.requests]
    assert len(keys) == count and len(set(keys)) == count
    # Both processes did some of the work.
    # (one line per finished execution: name, id, status, HTTP status, duration, lateness, the
    # execution's id, the owner, the time)
    finished = re.compile(
        r"scheduler\.runner\.executor: bulk-\d{3} [0-9a-f-]{36} succeeded http=200 took=\d+ms late=-?\d+ms "
        r"execution=[0-9a-f-]{36} owner=\S+ at=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"
    )
    assert all(any(finished.search(line.rstrip()) for line in p.lines) for p in (first, second))


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def runner_children(pid: int) -> list[int]:
    """The live runner processes ``pid`` started (multiprocessing's spawned children, not its
    resource tracker), from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                command = f.read()
        except OSError:
            continue
        if parent == pid and b"spawn_main" in command and alive(int(entry)):
            found.append(int(entry))
    return found


def test_more_runner_processes_share_a_burst_and_stop_with_it(local, target):
    scheduler = local("--runners", "2")
    assert any("2 runner processes" in line for line in scheduler.lines)
    [runner] = poll(lambda: runner_children(scheduler.process.pid) or None)
    count = 200
    run_at = in_seconds(3)
    for i in range(count):
        scheduler.post(
            "/v1/jobs", {"name": f"burst-{i:03d}", "run_at": run_at, "target": http_target(target.url + "/burst")}
        )
    target.wait_for(count, timeout=60)
    keys = [r["headers"]["Idempotency-Key"] for r in target.requests]
    assert len(keys) == count and len(set(keys)) == count
    # The extra runner delivered part of the burst (its log lines carry its name).
    poll(
        lambda: any(
            "[scheduler-runner-2]" in line and "scheduler.runner.executor: " in line and " succeeded " in line
            for line in scheduler.lines
        )
    )
    assert scheduler.stop() == 0
    assert not alive(runner)


def test_a_killed_runner_process_is_reported_and_started_again(local, target):
    scheduler = local("--runners", "2")
    [runner] = poll(lambda: runner_children(scheduler.process.pid) or None)
    os.kill(runner, signal.SIGKILL)
    poll(lambda: any("runner process ended; starting it again" in line for line in scheduler.lines), timeout=15)
    [again] = poll(lambda: [pid for pid in runner_children(scheduler.process.pid) if pid != runner] or None, timeout=30)
    assert again != runner and alive(again)
    # the new one delivers: jobs due are shared between this process and it
    for i in range(40):
        scheduler.post(
            "/v1/jobs", {"name": f"after-{i:02d}", "run_at": in_seconds(2), "target": http_target(target.url)}
        )
    target.wait_for(40, timeout=60)
    assert scheduler.stop() == 0
    assert not alive(again)


def test_an_extra_runner_does_not_outlive_a_killed_parent(local):
    scheduler = local("--runners", "2")
    [runner] = poll(lambda: runner_children(scheduler.process.pid) or None)
    scheduler.process.send_signal(signal.SIGKILL)
    scheduler.process.wait(timeout=10)
    # Orphaned, it notices within a second, finishes what it was doing and exits.
    poll(lambda: not alive(runner), timeout=15)


def test_a_request_held_up_holds_up_no_other(local, db_url):
    """Requests are served at once: while one waits (a calendar's delete, held here by a row lock
    the test takes on it), the health check and other requests answer. They were served one at a
    time: a slow preview (12 s of calendar planning) held up even ``GET /v1/health``."""
    import threading

    import psycopg
    import requests

    api = local()
    api.post("/v1/calendars", {"name": "held", "dates": ["2030-01-01"]})
    answers: list[requests.Response] = []

    def delete() -> None:
        answers.append(requests.delete(api.url + "/v1/calendars/held", timeout=60))

    deleting = threading.Thread(target=delete, daemon=True)
    with psycopg.connect(db_url) as holder, psycopg.connect(db_url, autocommit=True) as watcher:
        holder.execute("SELECT 1 FROM calendars WHERE name = 'held' FOR UPDATE")
        deleting.start()
        waiting = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%FOR UPDATE%'"
        poll(lambda: watcher.execute(waiting).fetchone()[0], what="the delete waiting for the calendar's row")
        health = requests.get(api.url + "/v1/health", timeout=10)
        assert health.status_code == 200 and health.json() == {"status": "ok"}
        assert [c["name"] for c in api.get("/v1/calendars")["calendars"]] == ["held"]
        assert deleting.is_alive() and not answers  # still held
        holder.rollback()  # the row free: the delete goes on
        deleting.join(timeout=30)
    assert [answer.status_code for answer in answers] == [204]
    assert api.get("/v1/calendars")["calendars"] == []


class HeldTarget:
    """An HTTP target that holds the requests of one process (``hold_from``, a PID) until
    ``release`` (at most ``hold_at_most`` seconds), and answers the others at once: deliveries
    held under way in that process alone."""

    def __init__(self, hold_at_most: float = 300.0):
        import http.server
        import threading

        import psutil

        self.release = threading.Event()
        self.hold_from: int | None = None
        self.held = self.answered = 0
        lock = threading.Lock()
        target = self

        def sent_by(pid: int | None, port: int) -> bool:
            try:
                return pid is not None and any(
                    c.laddr and c.laddr.port == port for c in psutil.Process(pid).net_connections("tcp")
                )
            except psutil.Error:
                return False

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                held = sent_by(target.hold_from, self.client_address[1])
                with lock:
                    target.held += held
                if held:
                    target.release.wait(hold_at_most)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
                with lock:
                    target.answered += 1

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/held"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.slow
def test_a_stop_waits_past_a_minute_for_the_deliveries_of_an_extra_runner(local, db_url):
    """Ctrl-C lets the deliveries under way finish and be recorded, in the extra runner processes
    too: a delivery of an extra runner still going a minute into the stop (its target's timeout
    allows it) is waited for. That runner was killed after 60 s, its deliveries lost (delivered
    again after their leases)."""
    import time

    import psycopg

    target = HeldTarget()
    try:
        scheduler = local("--runners", "2")
        [runner] = poll(lambda: runner_children(scheduler.process.pid) or None)
        target.hold_from = runner
        count = 60  # due over 3 s: the extra runner claims some of them (held), this process others
        for i in range(count):
            scheduler.post(
                "/v1/jobs",
                {
                    "name": f"held-{i:03d}",
                    "run_at": in_seconds(2 + i / 20),
                    "target": http_target(target.url, timeout_seconds=300),
                },
            )
        poll(lambda: target.held + target.answered >= count, timeout=60, what="every delivery made")
        assert target.held, "the extra runner delivered none of them"
        scheduler.process.send_signal(signal.SIGINT)
        poll(lambda: any("scheduler local: stopping" in line for line in scheduler.lines))
        time.sleep(65)  # the scenario itself: past the minute after which the extra runner was killed
        assert alive(runner), "".join(scheduler.lines)
        target.release.set()
        assert scheduler.process.wait(timeout=60) == 0
        assert not any("killed" in line for line in scheduler.lines), "".join(scheduler.lines)
        with psycopg.connect(db_url) as connection:
            statuses = dict(connection.execute("SELECT status, count(*) FROM executions GROUP BY status").fetchall())
        assert statuses == {"succeeded": count}, statuses
    finally:
        target.close()


def test_a_port_taken_after_the_check_is_one_line_not_a_traceback(db_url):
    """Two started at once on one port: the loser's check finds it free, then its bind fails.
    It says so in the line of a busy port (and stops what it started), not in a traceback."""
    import socket
    import subprocess
    import sys

    import psycopg

    from scheduler.store.migrations import MIGRATION_LOCK_KEY
    from tests.support import ROOT

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with psycopg.connect(db_url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))  # holds it in its migrations
        process = subprocess.Popen(
            [sys.executable, "-m", "scheduler.cli", "local", "--port", str(port), "--database-url", db_url],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONPATH": os.path.join(ROOT, "functions")},
        )
        try:
            waiting = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            poll(lambda: holder.execute(waiting).fetchone()[0], timeout=30, what="the start past its port check")
            with socket.socket() as other:  # the other one, bound meanwhile
                other.bind(("127.0.0.1", port))
                other.listen()
                holder.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
                output, _ = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 1, output
    assert output.splitlines()[-1] == (
        f"scheduler local: error: port {port} on 127.0.0.1 is in use (another scheduler local?); give --port"
    )
    assert "Traceback" not in output, output


def test_a_stop_says_what_it_waits_for_and_a_second_ctrl_c_quits_at_once(local, target):
    """The stop says how many deliveries it waits for, for how long at most, and that Ctrl-C
    again quits at once; the second Ctrl-C does (it was ignored: the stop waited in silence)."""
    import threading

    target.gates["/held"] = gate = threading.Event()
    scheduler = local()
    try:
        scheduler.post(
            "/v1/jobs",
            {
                "name": "held",
                "run_at": in_seconds(0.5),
                "target": http_target(target.url + "/held", timeout_seconds=60),
            },
        )
        poll(lambda: any(r["path"] == "/held" for r in target.requests), timeout=30)
        scheduler.process.send_signal(signal.SIGINT)
        [line] = poll(lambda: [line for line in scheduler.lines if "scheduler local: stopping" in line])
        assert re.search(r"stopping: waiting for 1 delivery under way \(up to \d+ s\); Ctrl-C again to quit now", line)
        assert "delivered again when their leases expire" in line, line
        scheduler.process.send_signal(signal.SIGINT)
        assert scheduler.process.wait(timeout=15) == 128 + signal.SIGINT
        assert any("scheduler local: quitting now" in line for line in scheduler.lines), "".join(scheduler.lines)
        assert not any("Traceback" in line for line in scheduler.lines), "".join(scheduler.lines)
    finally:
        gate.set()


def test_a_stop_while_clients_poll_closes_the_api_without_a_traceback(local):
    """Ctrl-C while clients keep polling the API: the requests being answered are answered and
    the connections closed, without a traceback (waitress' sockets were closed under the requests
    still being answered: an ``OSError: [Errno 9] Bad file descriptor`` traceback each)."""
    import threading

    import requests

    scheduler = local()
    done = threading.Event()
    answered = [0]

    def client() -> None:
        with requests.Session() as session:  # keep-alive connections, as a console's
            while not done.is_set():
                try:
                    session.get(scheduler.url + "/v1/jobs", timeout=5)
                    answered[0] += 1
                except requests.RequestException:
                    if scheduler.process.poll() is not None:
                        return

    clients = [threading.Thread(target=client, daemon=True) for _ in range(8)]
    for thread in clients:
        thread.start()
    try:
        poll(lambda: answered[0] > 50, what="clients being answered")
        assert scheduler.stop() == 0
    finally:
        done.set()
    output = "".join(scheduler.lines)
    assert "Traceback" not in output and "Bad file descriptor" not in output, output
    assert "scheduler local: stopped" in output


@pytest.mark.slow
def test_minute_precision_fans_out_on_the_minute(local, target):
    """With ``--precision minute`` a job due on the minute starts on it: the fan-out ran once a
    minute from the process's start, so a ``* * * * *`` job started as late as the start was
    into its minute."""
    # Started 10 to 40 s into a minute: ticking from the start would be at least 10 s late.
    poll(lambda: 10 <= datetime.now(UTC).second <= 40, timeout=60, interval=0.2, what="10 s into a minute")
    scheduler = local("--precision", "minute")
    assert any("precision minute" in line for line in scheduler.lines)
    scheduler.post(
        "/v1/jobs", {"name": "every-minute", "schedule": "* * * * *", "target": http_target(target.url + "/minute")}
    )
    [request] = target.wait_for(1, timeout=90)
    scheduled = datetime.fromisoformat(request["headers"]["X-Scheduler-Scheduled-At"].replace("Z", "+00:00"))
    assert scheduled.second == 0
    assert (datetime.now(UTC) - scheduled).total_seconds() < 5

"""Per-target limits through the real server: 1,000 jobs due at once, delivered by two runner
processes, never more than 5 at once at the target (a real HTTP server counting the requests in
flight), every one delivered, and the executions that waited say why."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from tests.support import LocalScheduler, poll

JOBS = 1000
MAX_IN_FLIGHT = 5


class CountingTarget:
    """A loopback HTTP target that counts the requests in flight (the highest count seen) and
    the jobs delivered; each answer takes a few milliseconds, as an API's would."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.in_flight = self.highest = 0
        self.jobs: set[str] = set()
        target = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with target.lock:
                    target.in_flight += 1
                    target.highest = max(target.highest, target.in_flight)
                try:
                    threading.Event().wait(0.005)  # the target's own work
                finally:
                    with target.lock:
                        target.in_flight -= 1
                        target.jobs.add(self.headers["X-Scheduler-Job-Id"])
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/bill"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def counting():
    target = CountingTarget()
    yield target
    target.close()


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


def test_a_limit_of_5_in_flight_holds_at_the_target_under_1000_due_jobs(local, counting):
    api = local("--runners", "0")  # jobs made while no runner runs: all due when the runners start
    now = datetime.now(UTC).isoformat()
    session = requests.Session()

    def create(i: int) -> str:
        body = {
            "name": f"bill-{i:04d}",
            "run_at": now,
            "target": {"type": "http", "url": counting.url, "method": "POST", "timeout_seconds": 10},
            "limits": {"key": "billing-api", "max_in_flight": MAX_IN_FLIGHT},
        }
        answer = session.post(api.url + "/v1/jobs", json=body, timeout=30)
        assert answer.status_code == 201, answer.text
        return answer.json()["id"]

    with ThreadPoolExecutor(4) as pool:
        ids = set(pool.map(create, range(JOBS)))
    assert len(ids) == JOBS
    local("--runners", "2")  # two runner processes (and this one's runner thread: three in all)
    poll(lambda: len(counting.jobs) >= JOBS, timeout=240, interval=0.5, what="every job delivered")
    assert counting.jobs == ids
    assert counting.highest <= MAX_IN_FLIGHT
    assert counting.highest >= 2  # deliveries did overlap: the limit, not a single file, held them
    waited = poll(
        lambda: [e for e in api.get("/v1/executions?limit=200&status=succeeded")["executions"] if e["waited_ms"]],
        what="executions that waited",
    )
    # a delivery handed back for want of room in the waiting room says so after the limit's name
    assert all(e["waited_for"].startswith("limits of billing-api (max_in_flight 5)") for e in waited)
    completed = poll(lambda: api.get("/v1/jobs?state=completed&limit=200")["jobs"], what="completed jobs listed")
    assert completed

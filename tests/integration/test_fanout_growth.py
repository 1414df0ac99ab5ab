"""Several fan-outs at once on real Postgres: every due job dispatched, none held by two live
claims, each occurrence dispatched once; and a primary that starts helpers through a loopback
Lambda Invoke endpoint, the helpers and the executors run from the invokes it receives."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import boto3
import pytest

from scheduler.runner.dispatch import CLAIM_DUE
from scheduler.runner.executor import execute_invoke, invoke_claims
from scheduler.runner.fanout import run_fanout, run_lambda_invocation
from scheduler.store.db import make_pool
from scheduler.store.postgres import Store
from scheduler.targets.results import TargetPolicy
from scheduler.wiring import lambda_client_config
from tests.support import insert_due_jobs, insert_jobs_sql

LOCAL = TargetPolicy(allow_private=True)


class Ledger:
    """Claims dispatched by all fan-outs: a claim of a job whose lease is still live elsewhere is
    a violation (two live claims of one job)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.live: dict[str, str] = {}
        self.dispatched: list[tuple[str, str]] = []
        self.violations: list[str] = []
        self.by_fanout: Counter[str] = Counter()

    def take(self, fanout: str, job_id: str, lock_token: str) -> None:
        with self.lock:
            if job_id in self.live:
                self.violations.append(job_id)
            self.live[job_id] = lock_token
            self.dispatched.append((job_id, lock_token))
            self.by_fanout[fanout] += 1


class RecordingDispatch:
    """Leases only, like LambdaDispatch; each claim written to the shared ledger, with a pause a
    real invoke would take, so the fan-outs interleave."""

    claim_mode = CLAIM_DUE

    def __init__(self, ledger: Ledger, name: str) -> None:
        self.ledger, self.name = ledger, name

    def capacity(self) -> int:
        return 1_000_000

    def dispatch(self, claims):
        for claim in claims:
            self.ledger.take(self.name, claim.job_id, claim.lock_token)
        time.sleep(0.001 * len(claims))
        return []

    def close(self) -> None:
        pass


def test_fanouts_at_once_dispatch_every_due_job_once_with_one_live_claim_each(db_url, pool, store):
    count = 3000
    insert_due_jobs(pool, count)
    ledger, errors, reports = Ledger(), [], []
    start = threading.Barrier(4)

    def fanout(name: str) -> None:
        own = make_pool(db_url, min_size=1, max_size=2)
        try:
            start.wait()
            reports.append(
                run_fanout(
                    Store(own), RecordingDispatch(ledger, name), budget_seconds=0, batch_size=50, until_empty=True
                )
            )
        except Exception as exc:
            errors.append(exc)
        finally:
            own.close()

    threads = [threading.Thread(target=fanout, args=(f"f{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors
    assert ledger.violations == []
    jobs = [job_id for job_id, _ in ledger.dispatched]
    assert len(jobs) == count and len(set(jobs)) == count
    assert sum(r.claimed for r in reports) == count and sum(r.released for r in reports) == 0
    assert len(ledger.by_fanout) >= 2, ledger.by_fanout  # they did claim side by side
    with pool.connection() as conn:
        held = {r["id"]: r["lock_token"] for r in conn.execute("SELECT id::text, lock_token::text FROM jobs")}
    assert held == ledger.live  # each job's one live lease is the claim that was dispatched
    assert store.claim_due(10, 60) == []  # nothing due left behind


class LoopbackLambda:
    """The Lambda Invoke API on loopback for asynchronous invokes: 202 at once, then the payload
    handed to ``on_invoke(function_name, event)`` in a pool of threads (Lambda's async queue)."""

    def __init__(self, on_invoke: Callable[[str, dict], None], workers: int = 12) -> None:
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="lambda")
        self.received: Counter[str] = Counter()
        self.events: dict[str, list[dict]] = defaultdict(list)
        self.pending = 0
        self.errors: list[BaseException] = []
        self._cond = threading.Condition()
        outer = self

        def run(function: str, event: dict) -> None:
            try:
                on_invoke(function, event)
            except BaseException as exc:
                outer.errors.append(exc)
            finally:
                with outer._cond:
                    outer.pending -= 1
                    outer._cond.notify_all()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            wbufsize = -1

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                parts = self.path.split("/")  # /2015-03-31/functions/{name}/invocations
                ok = (
                    len(parts) == 5
                    and parts[4] == "invocations"
                    and self.headers.get("X-Amz-Invocation-Type") == "Event"
                )
                if ok:
                    event = json.loads(body or b"{}")
                    with outer._cond:
                        outer.received[parts[3]] += 1
                        outer.events[parts[3]].append(event)
                        outer.pending += 1
                    outer.pool.submit(run, parts[3], event)
                self.send_response(202 if ok else 400)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def wait_idle(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{self.pending} invocations still running")
                self._cond.wait(left)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.pool.shutdown(wait=True)


def insert_jobs(pool, count: int, url: str, *, prefix: str, schedule: str | None) -> None:
    """``count`` jobs with a loopback HTTP target, due now: one-off or recurring."""
    target = json.dumps({"type": "http", "url": url, "method": "POST", "timeout_seconds": 10})
    with pool.connection() as conn:
        conn.execute(
            insert_jobs_sql(
                "id, owner, name, schedule, run_at, target, retry, scheduled_at, next_run_at",
                """
                SELECT gen_random_uuid(), 'growth', %(prefix)s || '-' || g, %(schedule)s,
                       CASE WHEN %(schedule)s::text IS NULL THEN date_trunc('second', now()) END, %(target)s::jsonb,
                       '{"max_attempts": 1, "min_backoff_seconds": 1, "max_backoff_seconds": 60}'::jsonb,
                       date_trunc('second', now()), date_trunc('second', now())
                FROM generate_series(1, %(count)s) AS g
                """,
            ),
            {"prefix": prefix, "schedule": schedule, "target": target, "count": count},
        )


@pytest.mark.parametrize("claims_per_invoke", [1, 10], ids=["a-claim-per-invoke", "groups-of-claims"])
def test_a_primary_starts_helpers_through_lambda_and_every_job_runs_once(
    db_url, pool, store, target_server, claims_per_invoke
):
    """Several fan-outs at once over real Postgres, each invoke carrying one claim, or (as under a
    backlog in AWS) a group of them that one executor starts, delivers and records together."""
    one_offs, recurring = 1500, 40
    # Four invoking threads: a claim of 25 goes out in groups of 7 (at most claims_per_invoke).
    dispatch_options = {"claims_per_invoke": claims_per_invoke, "max_workers": 4}
    insert_jobs(pool, one_offs, target_server.url + "/once", prefix="once", schedule=None)
    insert_jobs(pool, recurring, target_server.url + "/every", prefix="every", schedule="@every 1s")
    lambda_pool = make_pool(db_url, min_size=1, max_size=16)
    shared = Store(lambda_pool)
    helpers: list[tuple] = []
    client_box: list = []

    def on_invoke(function: str, event: dict) -> None:
        if function == "executor":
            execute_invoke(event, store=shared, decrypt_target=lambda t: t, policy=LOCAL)
        else:  # the fan-out invoking itself: a helper runs the same invocation code
            helpers.append(
                run_lambda_invocation(
                    event,
                    shared,
                    client_box[0],
                    remaining_seconds=90,
                    executor_function="executor",
                    fanout_function="fanout",
                    max_fanouts=3,
                    batch_size=25,
                    dispatch_options=dispatch_options,
                )
            )

    fake = LoopbackLambda(on_invoke)
    client = boto3.client(
        "lambda",
        endpoint_url=fake.url,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
        config=lambda_client_config(),
    )
    client_box.append(client)
    try:
        # The primary: minute precision (it drains what is due, then returns) with 30 s left, so
        # 20 s to drain; growth as the handler wires it, a low rate so the backlog of 1,540 calls
        # for the maximum (3 fan-outs: 2 helpers). Helpers are given time up to that drain limit.
        report, was_helper = run_lambda_invocation(
            {"source": "aws.events"},
            shared,
            client,
            remaining_seconds=30,
            precision="minute",
            executor_function="executor",
            fanout_function="fanout",
            max_fanouts=3,
            batch_size=25,
            dispatch_rate=50.0,
            dispatch_options=dispatch_options,
        )
        fake.wait_idle(60)
    finally:
        fake.close()
        lambda_pool.close()
    assert not fake.errors, fake.errors
    assert not was_helper and report.helpers == 2
    assert fake.received["fanout"] == 2
    # Each helper is given time up to its primary's end at most, and an epoch instant to stop at.
    assert all(e["helper"] is True and 0 < e["seconds"] <= 20 and "until" in e for e in fake.events["fanout"])
    assert all(was for _, was in helpers) and all(r.helpers == 0 for r, _ in helpers)  # helpers never grow
    assert sum(r.claimed for r, _ in helpers) > 0  # the helpers did claim beside the primary
    with pool.connection() as conn:
        rows = conn.execute(
            # The deliveries; the occurrences a busy runner moved past are skipped rows (issue 33).
            """SELECT e.job_id::text, j.name, e.scheduled_at, e.started_at, e.finished_at, e.status
               FROM executions e JOIN jobs j ON j.id = e.job_id WHERE e.status <> 'skipped'
               ORDER BY e.job_id, e.started_at"""
        ).fetchall()
    # Every one-off delivered once; every recurring occurrence once (no (job, time) twice).
    assert Counter(r["status"] for r in rows) == {"succeeded": len(rows)}
    once = [r for r in rows if r["name"].startswith("once-")]
    assert len(once) == one_offs and len({r["job_id"] for r in once}) == one_offs
    occurrences = [(r["job_id"], r["scheduled_at"]) for r in rows]
    assert len(occurrences) == len(set(occurrences))
    every = defaultdict(list)
    for r in rows:
        if r["name"].startswith("every-"):
            every[r["job_id"]].append(r)
    assert len(every) == recurring
    for runs in every.values():  # never two executions of one job at once
        for earlier, later in zip(runs, runs[1:]):
            assert earlier["finished_at"] <= later["started_at"]
    keys = [r["headers"]["Idempotency-Key"] for r in target_server.requests]
    assert len(keys) == len(rows) == len(set(keys))
    carried = [len(invoke_claims(event)) for event in fake.events["executor"]]
    assert sum(carried) == len(rows)
    assert max(carried) == min(claims_per_invoke, 7)  # groups only when asked for


def test_the_primary_reads_the_backlog_at_its_start_and_while_it_runs(pool, store):
    insert_due_jobs(pool, 120)
    insert_due_jobs(pool, 30, prefix="later", due_offset_seconds=1.0)
    seen: list[int] = []

    def on_backlog(backlog: int) -> int:
        seen.append(backlog)
        return 1 if len(seen) == 1 else 0

    report = run_fanout(
        store,
        RecordingDispatch(Ledger(), "p"),
        budget_seconds=2.5,
        batch_size=200,
        on_backlog=on_backlog,
        backlog_check_seconds=0.5,
    )
    assert seen[0] == 120 and len(seen) >= 3  # at the start, then every half second
    assert max(seen[1:]) <= 30  # what fell due later, before it was claimed
    assert report.helpers == 1 and report.claimed == 150
    assert report.as_dict()["helpers"] == 1


def test_while_claims_come_back_full_the_primary_reads_the_backlog_every_second(pool, store):
    import itertools

    insert_due_jobs(pool, 300)
    seen: list[int] = []
    ticks = itertools.count(0.0, 0.25)  # a clock that moves a quarter second per reading
    report = run_fanout(
        store,
        RecordingDispatch(Ledger(), "p"),
        budget_seconds=0,
        drain_limit_seconds=1000,
        batch_size=10,
        on_backlog=lambda backlog: seen.append(backlog) or 0,
        backlog_check_seconds=1000,
        clock=lambda: next(ticks),
    )
    assert report.claimed == 300
    assert len(seen) >= 5 and seen == sorted(seen, reverse=True)  # a shrinking backlog, read again and again


class SaturatedDispatch(RecordingDispatch):
    """Executors full (no room) for the first ``full_readings`` capacity readings, then room."""

    def __init__(self, ledger: Ledger, name: str, full_readings: int) -> None:
        super().__init__(ledger, name)
        self.readings = 0
        self.full_readings = full_readings

    def capacity(self) -> int:
        self.readings += 1
        return 0 if self.readings <= self.full_readings else 1_000_000


def test_no_helper_is_asked_for_while_the_executors_are_what_holds_the_backlog(pool, store):
    insert_due_jobs(pool, 300)
    seen: list[int] = []
    dispatch = SaturatedDispatch(Ledger(), "p", full_readings=25)  # about half a second full
    report = run_fanout(
        store,
        dispatch,
        budget_seconds=1.5,
        batch_size=10,  # then 30 rounds of about 10 ms: the backlog is read while it drains
        on_backlog=lambda backlog: seen.append(backlog) or 0,
        backlog_check_seconds=0.1,
    )
    assert report.claimed == 300
    assert seen[:3] == [0, 0, 0]  # saturated: a helper would only wait for room
    assert max(seen) > 0  # room again: the backlog is read as it is


class AcceptingClient:
    """A Lambda client that accepts every asynchronous invoke."""

    def __init__(self) -> None:
        self.calls = 0

    def invoke(self, **kwargs):
        self.calls += 1
        return {"StatusCode": 202, "Payload": __import__("io").BytesIO(b"")}


def test_a_helper_stops_when_its_time_is_up_though_claims_still_come_back_full(pool, store):
    import itertools

    insert_due_jobs(pool, 1000)
    ticks = itertools.count(0.0, 0.25)  # a quarter second per reading
    client = AcceptingClient()
    report, helper = run_lambda_invocation(
        {"helper": True, "seconds": 2.0},
        store,
        client,
        remaining_seconds=90,
        executor_function="executor",
        batch_size=10,
        clock=lambda: next(ticks),
    )
    assert helper and 0 < report.claimed < 1000 and report.helpers == 0
    assert client.calls == report.dispatched  # executor invokes only: a helper starts no helpers

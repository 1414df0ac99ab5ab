"""Alert rules through the API's handler and the sweep on real Postgres: validation (400 naming
the field), secrets sealed and masked, the decisions (one alert per incident, the recovery),
owner scoping of GET /v1/alerts, and a delivery retried then recorded."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scheduler.core.domain import Delivery, ExecutionStatus, Outcome
from scheduler.runner.alerts import Alerts
from scheduler.runner.telemetry import MemoryMetrics
from scheduler.secrets import decrypt_target_secrets, is_token
from tests.integration.test_api import ALICE, BOB, Client, api, box, job_body  # noqa: F401 (fixtures below)  # noqa: F401 (pytest fixtures)

SLACK = {"type": "http", "url": "https://hooks.example.com/services/T0/B0/x", "method": "POST"}


def rule(on: str, threshold: float | None = None, **target: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"on": on, "target": {**SLACK, **target}}
    if threshold is not None:
        found["threshold"] = threshold
    return found


def create_with(api: Client, alerts: list[dict[str, Any]], name: str = "alerting", principal: str = ALICE):
    return api("POST", "/v1/jobs", job_body(name, alerts=alerts), principal=principal)


@pytest.mark.parametrize(
    ("alerts", "field"),
    [
        ([{"on": "late", "target": SLACK}], "alerts.0.threshold"),
        ([{"on": "missing_run", "target": SLACK}], "alerts.0.threshold"),
        ([{"on": "failure", "threshold": 2, "target": SLACK}], "alerts.0.threshold"),
        ([{"on": "failures_in_a_row", "threshold": 2.5, "target": SLACK}], "alerts.0.threshold"),
        ([{"on": "failures_in_a_row", "threshold": True, "target": SLACK}], "alerts.0.threshold"),
        ([{"on": "late", "threshold": -1, "target": SLACK}], "alerts.0.threshold"),
        ([{"on": "sometimes", "target": SLACK}], "alerts.0.on"),
        ([rule("failure"), {"on": "failure", "target": {"type": "http", "url": "ftp://x"}}], "alerts.1.target.url"),
        ([{"on": "failure", "target": {"type": "pigeon"}}], "alerts.0.target.type"),
        ([{"on": "failure"}], "alerts.0.target"),
        ([rule("failure")] * 11, "alerts"),
    ],
)
def test_bad_rules_are_a_400_naming_the_field(api, alerts, field):
    answer = create_with(api, alerts)
    assert answer.status == 400, answer.body
    assert field in answer.fields, answer.body


def test_rules_are_answered_with_secrets_masked_and_stored_sealed(api, pool, box):
    auth = {"type": "bearer", "token": "alert-token-Kq9"}
    answer = create_with(api, [rule("failures_in_a_row"), rule("recovery", auth=auth)])
    assert answer.status == 201, answer.body
    job = answer.body
    assert [a["on"] for a in job["alerts"]] == ["failures_in_a_row", "recovery"]
    assert job["alerts"][0]["threshold"] == 3  # the default count
    assert job["alerts"][1]["target"]["auth"]["token"] == "***"
    assert "alert-token-Kq9" not in api.all_text()
    with pool.connection() as conn:
        stored = conn.execute("SELECT alerts FROM job_specs WHERE id = %s", (job["id"],)).fetchone()["alerts"]
    assert is_token(stored[1]["target"]["auth"]["token"])
    assert decrypt_target_secrets(stored[1]["target"], box)["auth"]["token"] == "alert-token-Kq9"
    # A PATCH that leaves the rules alone keeps the secret; "***" sent back keeps it too.
    patched = api("PATCH", f"/v1/jobs/{job['id']}", {"description": "x"})
    assert patched.status == 200 and patched.body["alerts"] == job["alerts"]
    replaced = api("PUT", f"/v1/jobs/{job['id']}", job_body("alerting", alerts=job["alerts"]))
    assert replaced.status == 200, replaced.body
    with pool.connection() as conn:
        again = conn.execute("SELECT alerts FROM job_specs WHERE id = %s", (job["id"],)).fetchone()["alerts"]
    assert decrypt_target_secrets(again[1]["target"], box)["auth"]["token"] == "alert-token-Kq9"
    # Rules removed: the job has none.
    cleared = api("PATCH", f"/v1/jobs/{job['id']}", {"alerts": []})
    assert cleared.status == 200 and cleared.body["alerts"] == []


def test_masked_broker_passwords_stay_with_their_rules_when_the_rules_are_reordered(api, pool, box):
    """A rule's "***" keeps the password of the stored rule with the same URL as answered: the
    user name counts, so two rules on one broker as different users each keep their own."""
    amqp = {"type": "amqp", "exchange": "alerts", "routing_key": "ops"}
    alice = {"on": "failure", "target": {**amqp, "url": "amqp://alice:pw-alice@127.0.0.1:5672/%2F"}}
    bob = {"on": "failure", "target": {**amqp, "url": "amqp://bob:pw-bob@127.0.0.1:5672/%2F"}}
    job = create_with(api, [alice, bob], name="brokers").body
    assert [rule["target"]["url"] for rule in job["alerts"]] == [
        "amqp://alice:***@127.0.0.1:5672/%2F",
        "amqp://bob:***@127.0.0.1:5672/%2F",
    ]
    answer = api("PUT", f"/v1/jobs/{job['id']}", job_body("brokers", alerts=job["alerts"][::-1]))
    assert answer.status == 200, answer.body
    with pool.connection() as conn:
        stored = conn.execute("SELECT alerts FROM job_specs WHERE id = %s", (job["id"],)).fetchone()["alerts"]
    urls = [decrypt_target_secrets(rule["target"], box)["url"] for rule in stored]
    assert urls == ["amqp://bob:pw-bob@127.0.0.1:5672/%2F", "amqp://alice:pw-alice@127.0.0.1:5672/%2F"]


def add_execution(pool, job_id: str, status: str, *, late_seconds: float = 0.0, trigger: str = "schedule") -> None:
    with pool.connection() as conn:
        conn.execute(
            """INSERT INTO executions (id, job_id, scheduled_at, due_at, started_at, finished_at, attempt, trigger,
                                       status, http_status, error, duration_ms)
               VALUES (gen_random_uuid(), %s, now() - make_interval(secs => %s), now() - make_interval(secs => %s),
                       clock_timestamp(), clock_timestamp(), 1, %s, %s, 500, %s, 5)""",
            (job_id, late_seconds, late_seconds, trigger, status, None if status == "succeeded" else 'said "no"'),
        )


class Recorder:
    """A send that records what it was given and answers from a script."""

    def __init__(self, *outcomes: Outcome):
        self.sent: list[tuple[dict[str, Any], Delivery]] = []
        self.outcomes = list(outcomes) or [Outcome(ExecutionStatus.SUCCEEDED, http_status=200)]

    def __call__(self, target, delivery):
        self.sent.append((dict(target), delivery))
        return self.outcomes.pop(0) if len(self.outcomes) > 1 else self.outcomes[0]


def test_one_alert_per_incident_then_the_recovery(api, store, pool):
    job = create_with(
        api, [rule("failure"), rule("failures_in_a_row", 3), rule("recovery", body='{"t": "{{message}}"}')]
    ).body
    recorder = Recorder()
    metrics = MemoryMetrics()
    alerts = Alerts(store, recorder, console_url="http://console.example/console/", metrics=metrics)
    alerts.run_once()  # the state starts at the rules' writing: nothing to read yet
    for _ in range(5):
        add_execution(pool, job["id"], "failed")
    add_execution(pool, job["id"], "lost")
    assert alerts.run_once() == (2, 2)
    add_execution(pool, job["id"], "failed")
    assert alerts.run_once() == (0, 0)  # the same incident: nothing again
    add_execution(pool, job["id"], "succeeded")
    add_execution(pool, job["id"], "succeeded")
    assert alerts.run_once() == (1, 1)
    kinds = [(t["body"], d.job_id) for t, d in recorder.sent]
    assert all(job_id == job["id"] for _, job_id in kinds)
    first, in_a_row, recovered = (json.loads(t["body"]) for t, _ in recorder.sent)
    assert first["text"].startswith('job alerting failed (failed): said "no"')
    assert "http://console.example/console/#/jobs/" + job["id"] in first["text"]
    assert "failed 3 times in a row" in in_a_row["text"]
    assert recovered == {"t": f"job alerting recovered: execution {recorder.sent[2][1].execution_id} succeeded"}
    # A new incident fires again.
    add_execution(pool, job["id"], "timed_out")
    assert alerts.run_once() == (1, 1)
    assert metrics.values == {("AlertDeliveries", (("status", "delivered"),)): [1.0] * 4}
    listed = api("GET", "/v1/alerts", query={"job_id": job["id"]})
    assert listed.status == 200
    assert [(a["on"], a["event"], a["status"]) for a in listed.body["alerts"]] == [
        ("failure", "fired", "delivered"),
        ("recovery", "recovered", "delivered"),
        ("failures_in_a_row", "fired", "delivered"),
        ("failure", "fired", "delivered"),
    ]
    assert api("GET", "/v1/alerts", principal=BOB).body == {"alerts": [], "next_cursor": None}
    page = api("GET", "/v1/alerts", query={"limit": 3})
    rest = api("GET", "/v1/alerts", query={"limit": 3, "cursor": page.body["next_cursor"]})
    assert len(page.body["alerts"]) == 3 and len(rest.body["alerts"]) == 1


def test_late_and_missing_run(api, store, pool):
    job = create_with(api, [rule("late", 30), rule("missing_run", 60), rule("recovery")], name="slow").body
    recorder = Recorder()
    alerts = Alerts(store, recorder)
    alerts.run_once()
    add_execution(pool, job["id"], "succeeded", late_seconds=45)
    add_execution(pool, job["id"], "succeeded", late_seconds=40)
    assert alerts.run_once() == (1, 1)  # late, once
    add_execution(pool, job["id"], "succeeded", late_seconds=90, trigger="manual")
    assert alerts.run_once() == (0, 0)  # a manual run is never a missing run; late is open already
    add_execution(pool, job["id"], "succeeded")
    assert alerts.run_once() == (1, 1)  # on time: recovered
    # The job due for longer than the threshold (its runner stopped): missing_run, once.
    with pool.connection() as conn:
        conn.execute("UPDATE job_runs SET next_run_at = now() - interval '61 seconds' WHERE job_id = %s", (job["id"],))
    assert alerts.run_once() == (1, 1)
    assert alerts.run_once() == (0, 0)
    assert [t["body"] for t, _ in recorder.sent][-1].count("no successful run within 60s") == 1


def test_a_paused_job_never_has_a_missing_run(api, store, pool):
    job = create_with(api, [rule("missing_run", 5)], name="held").body
    assert api("POST", f"/v1/jobs/{job['id']}/pause").status == 200
    with pool.connection() as conn:
        conn.execute("UPDATE job_runs SET next_run_at = now() - interval '1 hour' WHERE job_id = %s", (job["id"],))
    recorder = Recorder()
    assert Alerts(store, recorder).run_once() == (0, 0)


def test_a_failed_delivery_is_retried_then_given_up_and_recorded(api, store, pool):
    job = create_with(api, [rule("failure")], name="noisy").body
    failing = Outcome(ExecutionStatus.FAILED, retryable=True, error="HTTP 503", http_status=503)
    recorder = Recorder(failing, Outcome(ExecutionStatus.FAILED, retryable=False, error="HTTP 404", http_status=404))
    metrics = MemoryMetrics()
    alerts = Alerts(store, recorder, metrics=metrics)
    alerts.run_once()
    add_execution(pool, job["id"], "failed")
    assert alerts.run_once() == (1, 0)
    assert metrics.values == {("AlertDeliveries", (("status", "pending"),)): [1.0]}  # each attempt, as recorded
    [alert] = api("GET", "/v1/alerts").body["alerts"]
    assert (alert["status"], alert["attempts"], alert["last_error"], alert["http_status"]) == (
        "pending",
        1,
        "HTTP 503",
        503,
    )
    with pool.connection() as conn:  # its backoff over
        conn.execute("UPDATE alert_deliveries SET next_attempt_at = now() - interval '1 second'")
    assert alerts.run_once() == (0, 0)
    [alert] = api("GET", "/v1/alerts").body["alerts"]
    assert (alert["status"], alert["attempts"], alert["http_status"]) == ("failed", 2, 404)
    assert [d.attempt for _, d in recorder.sent] == [1, 2]
    assert metrics.total("AlertDeliveries", status="failed") == 1  # given up: the alarm's
    assert metrics.total("AlertDeliveries", status="delivered") == 0
    assert api("GET", "/v1/alerts", query={"status": "bogus"}).status == 400
    assert api("GET", "/v1/alerts", query={"job_id": "nope"}).fields == ["job_id"]


def test_a_hooks_retry_after_holds_the_next_attempt_back(api, store, pool):
    """A rate-limited hook (429 with Retry-After 120) is tried again after 120 s, not after the
    2 s backoff: five quick attempts would give the alert up within its rate limit."""
    job = create_with(api, [rule("failure")], name="limited").body
    limited = Outcome(
        ExecutionStatus.FAILED, retryable=True, error="HTTP 429", http_status=429, retry_after_seconds=120
    )
    alerts = Alerts(store, Recorder(limited))
    alerts.run_once()
    add_execution(pool, job["id"], "failed")
    assert alerts.run_once() == (1, 0)
    with pool.connection() as conn:
        wait = conn.execute("SELECT extract(epoch FROM next_attempt_at - now()) AS s FROM alert_deliveries").fetchone()[
            "s"
        ]
    assert 110 < wait <= 120
    [alert] = api("GET", "/v1/alerts").body["alerts"]
    assert (alert["status"], alert["attempts"]) == ("pending", 1)


def test_two_sweeps_at_once_queue_one_alert(api, store, pool):
    job = create_with(api, [rule("failure")], name="raced").body
    Alerts(store, Recorder()).run_once()
    add_execution(pool, job["id"], "failed")
    from scheduler import service
    from tests.support import run_at_once

    results, errors = run_at_once(lambda: service.sweep_alerts(store), 4)
    assert not errors and sum(results) == 1
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM alert_deliveries").fetchone()["n"] == 1


def test_jobs_without_rules_are_not_read(api, store):
    create_with(api, [], name="quiet")
    assert store.alert_jobs() == []


def test_alerts_past_the_retention_are_purged_pending_ones_kept(api, store, pool):
    job = create_with(api, [rule("failure")], name="old").body
    Alerts(store, Recorder()).run_once()
    add_execution(pool, job["id"], "failed")
    Alerts(store, Recorder(Outcome(ExecutionStatus.FAILED, retryable=True, error="HTTP 503"))).run_once()
    with pool.connection() as conn:
        conn.execute("UPDATE alert_deliveries SET created_at = now() - interval '31 days'")
    assert store.purge_alerts(30) == 0  # still pending: kept
    with pool.connection() as conn:
        conn.execute("UPDATE alert_deliveries SET status = 'failed'")
    assert store.purge_alerts(30) == 1
    assert api("GET", "/v1/alerts").body["alerts"] == []


def test_an_alerts_lease_covers_its_targets_timeout_and_a_late_attempt_records_nothing(api, store, pool):
    """A hook slower than a fixed lease was sent the alert twice (a second runner took it over
    while the first still sent it); the lease now covers the target's timeout, and an attempt
    whose lease was taken over writes no outcome over the new one's."""
    job = create_with(api, [rule("failure", timeout_seconds=300)], name="slow-hook").body
    Alerts(store, Recorder()).run_once()
    add_execution(pool, job["id"], "failed")
    from scheduler import service

    service.sweep_alerts(store)
    [first] = store.claim_alert_deliveries(8, 60)
    with pool.connection() as conn:
        left = conn.execute("SELECT locked_until - now() AS left FROM alert_deliveries").fetchone()["left"]
    assert 355 <= left.total_seconds() <= 361
    assert store.claim_alert_deliveries(8, 60) == []  # held while it is sent
    with pool.connection() as conn:  # as if its lease had ended: another runner takes it over
        conn.execute("UPDATE alert_deliveries SET locked_until = now() - interval '1 second'")
    [second] = store.claim_alert_deliveries(8, 60)
    assert (first.attempts, second.attempts) == (1, 2)
    late = Alerts(store, Recorder(Outcome(ExecutionStatus.FAILED, retryable=True, error="late", http_status=500)))
    assert late.deliver(first) is False  # sent, but its lease is not its own: nothing recorded
    assert Alerts(store, Recorder()).deliver(second) is True
    [alert] = api("GET", "/v1/alerts").body["alerts"]
    assert (alert["status"], alert["attempts"], alert["last_error"]) == ("delivered", 2, None)


class _SendingThroughASleep:
    """An alert handed to a sender that holds it (its first attempt under way) until
    ``released``, and an alert loop whose guard's wall clock moves ``ahead`` on demand: a sleep
    staged as in tests/faults/test_fault_laptop_sleep.py (the lease expired in the database, the
    guard's wall clock moved ahead)."""

    def __init__(self, api, store, pool, name: str) -> None:
        import threading
        import time

        from scheduler import service
        from scheduler.runner.wakes import WakeGuard

        self.pool, self.api = pool, api
        self.released, self.sent, self.ahead = threading.Event(), [], 0.0
        self.stop = threading.Event()

        def send(target, delivery):
            self.sent.append(delivery.attempt)
            if len(self.sent) == 1:
                self.released.wait(30)  # the first attempt is under way through the sleep
            return Outcome(ExecutionStatus.SUCCEEDED, http_status=200)

        job = create_with(api, [rule("failure", timeout_seconds=5)], name=name).body
        self.alerts = Alerts(
            store,
            send,
            wakes=lambda keep: WakeGuard(keep, grace_seconds=0.05, wall_clock=lambda: time.time() + self.ahead),
        )
        self.alerts.run_once()
        add_execution(pool, job["id"], "failed")
        assert service.sweep_alerts(store) == 1
        assert self.alerts.dispatch() == 1  # handed to a sender, which holds it
        self.deadline = time.monotonic() + 20
        while not self.sent and time.monotonic() < self.deadline:
            time.sleep(0.02)
        assert self.sent == [1]
        self.runner = threading.Thread(target=self.alerts.loop, args=(self.stop, 0.05), daemon=True)

    def sleep(self) -> None:
        """Ten minutes asleep: the alert's lease has run out when the machine wakes."""
        with self.pool.connection() as conn:
            conn.execute("UPDATE alert_deliveries SET locked_until = now() - interval '1 second'")
        self.ahead = 600.0

    def lease_left(self) -> float:
        with self.pool.connection() as conn:
            return conn.execute(
                "SELECT extract(epoch FROM locked_until - now()) AS s FROM alert_deliveries"
            ).fetchone()["s"]

    def end(self) -> dict:
        """Release the first send, wait for its record, stop the loop: the alert as listed."""
        import time

        self.released.set()
        while (
            time.monotonic() < self.deadline
            and self.api("GET", "/v1/alerts").body["alerts"][0]["status"] != "delivered"
        ):
            time.sleep(0.02)
        self.stop.set()
        if self.runner.is_alive():
            self.runner.join(30)
        [alert] = self.api("GET", "/v1/alerts").body["alerts"]
        return alert


def test_an_alert_being_sent_when_the_laptop_slept_is_not_sent_again(api, store, pool, caplog):
    """While a laptop sleeps, the wall clock (and the database's now()) runs on: an alert being
    sent had its lease run out on waking, and the next dispatch (this runner's or another's) took
    it over and sent it a second time. The loop's ``WakeGuard`` now keeps the leases of the
    alerts being sent before it claims again."""
    import logging
    import time

    caplog.set_level(logging.INFO, logger="scheduler.runner")
    staged = _SendingThroughASleep(api, store, pool, "asleep-mid-alert")
    try:
        # The loop starts after the sleep (a round between the expiry and the clock's jump, which
        # a real sleep makes one, would take the alert over as any expired lease).
        staged.sleep()
        staged.runner.start()
        while staged.lease_left() < 20 and time.monotonic() < staged.deadline:
            time.sleep(0.02)
        assert staged.lease_left() > 20  # its send's timeout (5 s) and the 60 s lease beyond it
        assert store.claim_alert_deliveries(8, 60) == []  # another runner finds nothing to take over
        for _ in range(5):  # several rounds of the loop after the wake's grace: nothing sent again
            time.sleep(0.06)
        assert staged.sent == [1]
    finally:
        alert = staged.end()
    assert (alert["status"], alert["attempts"]) == ("delivered", 1)
    assert staged.sent == [1]
    assert "kept 1 of 1 alerts being sent" in caplog.text


def test_an_alert_being_sent_when_the_laptop_slept_during_a_sweep_is_not_sent_again(api, store, pool):
    """A sleep that began while the loop swept (its sweep grows with the jobs that have alert
    rules) is noticed before the claim that follows the sweep: the guard is checked after the
    sweep, just before the claim (checked before the sweep only, the claim took the alert over)."""
    import time

    staged = _SendingThroughASleep(api, store, pool, "asleep-mid-sweep")
    sweep, sweeps = staged.alerts._sweep, []

    def sweep_then_sleep() -> int:
        queued = sweep()
        sweeps.append(1)
        if len(sweeps) == 2:  # the lid closed during the loop's second sweep
            staged.sleep()
        return queued

    staged.alerts._sweep = sweep_then_sleep  # type: ignore[method-assign]
    try:
        staged.runner.start()
        while len(sweeps) < 8 and time.monotonic() < staged.deadline:  # rounds after the wake's grace
            time.sleep(0.02)
        assert len(sweeps) >= 8
        assert staged.sent == [1]
        assert staged.lease_left() > 20
    finally:
        alert = staged.end()
    assert (alert["status"], alert["attempts"]) == ("delivered", 1)


def test_a_kept_alert_lease_is_the_attempts_own(api, store, pool):
    """``extend_alert_leases`` keeps an alert only while the attempt given is its last and under
    way: one taken over by another runner (a later attempt), or recorded (even as a retry to come,
    which keeps its status and its count), is not kept."""
    from scheduler import service

    job = create_with(api, [rule("failure")], name="kept-lease").body
    Alerts(store, Recorder()).run_once()
    add_execution(pool, job["id"], "failed")
    service.sweep_alerts(store)
    [first] = store.claim_alert_deliveries(8, 60)
    assert store.extend_alert_leases([(first.id, first.attempts, 600)]) == {first.id}
    with pool.connection() as conn:
        left = conn.execute("SELECT locked_until - now() AS left FROM alert_deliveries").fetchone()["left"]
        assert 595 <= left.total_seconds() <= 601
        conn.execute("UPDATE alert_deliveries SET locked_until = now() - interval '1 second'")
    [second] = store.claim_alert_deliveries(8, 60)
    assert store.extend_alert_leases([(first.id, first.attempts, 600)]) == set()  # taken over
    retry = Recorder(Outcome(ExecutionStatus.FAILED, retryable=True, error="HTTP 503", http_status=503))
    assert Alerts(store, retry).deliver(second) is False  # recorded: pending again, its lease released
    assert store.extend_alert_leases([(second.id, second.attempts, 600)]) == set()
    with pool.connection() as conn:
        assert conn.execute("SELECT status, locked_until FROM alert_deliveries").fetchone() == {
            "status": "pending",
            "locked_until": None,
        }
    assert store.extend_alert_leases([]) == set()


def test_a_slow_hook_holds_one_sender_not_the_other_alerts(api, store, pool):
    """Alerts are sent at once, each on a sender of its own: one hook that does not answer keeps
    neither the sweep nor another job's alert waiting (they waited for it, in turn)."""
    import threading
    import time

    slow_url = "https://slow.example.com/hook"
    released = threading.Event()

    def send(target, delivery):
        if target["url"] == slow_url:
            released.wait(30)
        return Outcome(ExecutionStatus.SUCCEEDED, http_status=200)

    slow = create_with(api, [rule("failure", url=slow_url)], name="slow").body
    fast = create_with(api, [rule("failure")], name="fast").body
    alerts = Alerts(store, send)
    alerts.run_once()
    add_execution(pool, slow["id"], "failed")
    add_execution(pool, fast["id"], "failed")
    stop = threading.Event()
    runner = threading.Thread(target=alerts.loop, args=(stop, 0.05), daemon=True)
    runner.start()
    try:
        deadline = time.monotonic() + 20
        statuses: dict[str, str] = {}
        while time.monotonic() < deadline and statuses.get("fast") != "delivered":
            statuses = {a["job_name"]: a["status"] for a in api("GET", "/v1/alerts").body["alerts"]}
            time.sleep(0.05)
        assert statuses == {"fast": "delivered", "slow": "pending"}
    finally:
        released.set()
        stop.set()
        runner.join(30)
    assert {a["status"] for a in api("GET", "/v1/alerts").body["alerts"]} == {"delivered"}


def test_an_alert_is_rendered_once_a_value_quoting_a_placeholder_is_sent_as_it_is(api, store, pool):
    """A target's error quoting ``{{attempt}}`` was rendered a second time by the delivery."""
    job = create_with(api, [rule("failure", body='{"e": "{{error}}", "a": {{attempt}}, "j": "{{job_id}}"}')]).body
    recorder = Recorder()
    alerts = Alerts(store, recorder)
    alerts.run_once()
    with pool.connection() as conn:
        conn.execute(
            """INSERT INTO executions (id, job_id, scheduled_at, due_at, started_at, finished_at, attempt, trigger,
                                       status, http_status, error, duration_ms)
               VALUES (gen_random_uuid(), %s, now(), now(), clock_timestamp(), clock_timestamp(), 1, 'schedule',
                       'failed', 500, 'HTTP 500 x {{attempt}} {{ job_id }}', 5)""",
            (job["id"],),
        )
    assert alerts.run_once() == (1, 1)
    [(target, _)] = recorder.sent
    assert json.loads(target["body"]) == {"e": "HTTP 500 x {{attempt}} {{ job_id }}", "a": 1, "j": job["id"]}


def test_an_alerts_placeholders_about_the_execution_are_the_executions(api, store, pool):
    """``{{execution_id}}`` and ``{{scheduled_at}}`` name the execution the alert is about (they
    were the alert's own id and creation time); a missing run has no execution (empty) and its
    ``{{scheduled_at}}`` is the occurrence that did not run. The delivery's identity (its
    headers, its idempotency key) stays the alert's."""
    body = '{"e": "{{execution_id}}", "s": "{{scheduled_at}}", "st": "{{started_at}}", "a": "{{attempt}}"}'
    job = create_with(api, [rule("failure", body=body), rule("missing_run", 60, body=body)], name="placed").body
    recorder = Recorder()
    alerts = Alerts(store, recorder)
    alerts.run_once()
    add_execution(pool, job["id"], "failed", late_seconds=5)
    assert alerts.run_once() == (1, 1)
    [execution] = api("GET", f"/v1/jobs/{job['id']}/executions").body["executions"]
    sent = json.loads(recorder.sent[0][0]["body"])
    assert sent == {
        "e": execution["id"],
        "s": execution["scheduled_at"],
        "st": execution["started_at"],
        "a": "1",
    }
    assert recorder.sent[0][1].execution_id == execution["id"]
    with pool.connection() as conn:
        conn.execute("UPDATE job_runs SET next_run_at = now() - interval '61 seconds' WHERE job_id = %s", (job["id"],))
    assert alerts.run_once() == (1, 1)
    missing = json.loads(recorder.sent[1][0]["body"])  # the occurrence that did not run, no execution
    due = api("GET", f"/v1/jobs/{job['id']}").body["next_run_at"]
    assert missing == {"e": "", "s": due, "st": "", "a": "1"}, missing


def test_whole_thresholds_are_answered_as_integers(api, store, pool):
    """A threshold given as a whole number is answered as one, on the job and on its alerts (a
    float column made them ``2.0`` and ``3.0``)."""
    job = create_with(api, [rule("late", 2), rule("failures_in_a_row", 3), rule("missing_run", 2.5)], name="whole").body
    assert [type(r["threshold"]) for r in job["alerts"]] == [int, int, float], job["alerts"]
    assert [r["threshold"] for r in api("GET", f"/v1/jobs/{job['id']}").body["alerts"]] == [2, 3, 2.5]
    alerts = Alerts(store, Recorder())
    alerts.run_once()
    for _ in range(3):
        add_execution(pool, job["id"], "failed")
    alerts.run_once()
    [fired] = api("GET", "/v1/alerts", query={"job_id": job["id"]}).body["alerts"]
    assert fired["on"] == "failures_in_a_row" and type(fired["threshold"]) is int, fired

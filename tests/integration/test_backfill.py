"""Backfill (issue 33, item 4): a past range's occurrences, a dry run that writes nothing, at most
10,000 a request, each delivered as itself (its own scheduled time and key, trigger
``backfill``) one at a time through the job's lease, at a bounded rate. Real Postgres, a real
HTTP target on loopback, the runner's own steps."""

from __future__ import annotations

from datetime import timedelta

from scheduler.core.timeutil import format_time
from scheduler.runner.executor import Executor
from scheduler.secrets import decrypt_target_secrets
from scheduler.targets.results import TargetPolicy
from tests.integration.test_api import BOB, api, box, create, job_body  # noqa: F401 - fixtures
from tests.support import make_due


def _hourly(api, target_server, name="hourly"):
    body = job_body(name, schedule="0 * * * *")
    body["target"] = {"type": "http", "url": f"{target_server.url}/b", "method": "POST", "body": "{{scheduled_at}}"}
    return create(api, body)


def _deliver_due(store, box):
    executor = Executor(store, lambda target: decrypt_target_secrets(target, box), TargetPolicy(allow_private=True))
    claims = store.claim_and_start(10)
    return executor.record([executor.deliver(claim.started, claim.lock_token) for claim in claims])


def test_a_dry_run_answers_the_occurrences_and_writes_nothing(api, store, pool, target_server):
    job = _hourly(api, target_server)
    now = store.now().replace(minute=0, second=0, microsecond=0)
    start, end = now - timedelta(hours=5), now - timedelta(hours=2)
    path = f"/v1/jobs/{job['id']}/backfill"
    answer = api("POST", path, {"start": format_time(start), "end": format_time(end), "dry_run": True})
    assert answer.status == 200, answer.body
    assert answer.body == {"occurrences": [format_time(start + timedelta(hours=h)) for h in range(4)], "count": 4}
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM backfills").fetchone()["n"] == 0


def test_a_backfill_is_in_the_change_log_with_its_range_and_count_a_dry_run_is_not(api, store, target_server):
    job = _hourly(api, target_server)
    now = store.now().replace(minute=0, second=0, microsecond=0)
    body = {"start": format_time(now - timedelta(hours=3)), "end": format_time(now - timedelta(hours=1))}
    path = f"/v1/jobs/{job['id']}"
    assert api("POST", f"{path}/backfill", {**body, "dry_run": True}).status == 200
    assert api("POST", f"{path}/backfill", body).status == 202
    entry, created = api("GET", f"{path}/changes").body["changes"]
    assert (entry["action"], entry["by"], entry["version"]) == ("backfill", created["by"], job["version"])
    assert entry["diff"] == {
        "backfill.count": {"from": None, "to": 3},
        "backfill.end": {"from": None, "to": body["end"]},
        "backfill.start": {"from": None, "to": body["start"]},
    }
    # Another owner's backfill is refused and leaves no entry.
    assert api("POST", f"{path}/backfill", body, principal=BOB).status == 404
    assert len(api("GET", f"{path}/changes").body["changes"]) == 2


def test_each_occurrence_is_delivered_as_itself_one_at_a_time_at_a_bounded_rate(api, store, box, pool, target_server):
    job = _hourly(api, target_server)
    now = store.now().replace(minute=0, second=0, microsecond=0)
    start = now - timedelta(hours=3)
    answer = api(
        "POST",
        f"/v1/jobs/{job['id']}/backfill",
        {"start": format_time(start), "end": format_time(now - timedelta(hours=1))},
    )
    assert answer.status == 202 and answer.body == {"count": 3}
    delivered = []
    for i in range(3):
        assert store.pump_backfills() == 1
        assert store.pump_backfills() == 0  # one at a time: the job has its request pending
        [report] = _deliver_due(store, box)
        assert report.status == "succeeded"
        delivered.append(target_server.wait_for(i + 1)[-1])
        assert store.pump_backfills() == 0  # the rate: the next one is a second away
        with pool.connection() as conn:
            conn.execute("UPDATE backfills SET next_at = now()")
    assert store.pump_backfills() == 0  # all handed over
    expected = [format_time(start + timedelta(hours=h)) for h in range(3)]
    assert [r["headers"]["X-Scheduler-Scheduled-At"] for r in delivered] == expected
    assert [r["body"].decode() for r in delivered] == expected
    assert [r["headers"]["Idempotency-Key"] for r in delivered] == [f"{job['id']}:{at}" for at in expected]
    rows = api("GET", f"/v1/jobs/{job['id']}/executions").body["executions"]
    assert [(e["trigger"], e["scheduled_at"]) for e in rows] == [("backfill", at) for at in reversed(expected)]
    live = api("GET", f"/v1/jobs/{job['id']}").body
    assert live["next_run_at"] == job["next_run_at"]  # the live schedule is left alone


def test_a_backfill_waits_for_a_running_execution(api, store, box, pool, target_server):
    job = _hourly(api, target_server)
    api("POST", f"/v1/jobs/{job['id']}/run")
    [running] = store.claim_and_start(10)  # a manual run under way
    now = store.now()
    api(
        "POST",
        f"/v1/jobs/{job['id']}/backfill",
        {"start": format_time(now - timedelta(hours=2)), "end": format_time(now)},
    )
    assert store.pump_backfills() == 0  # the job's manual request is still the running one
    assert store.claim_and_start(10) == []  # and nothing else is claimed beside it
    executor = Executor(store, lambda target: target, TargetPolicy(allow_private=True))
    executor.record([executor.deliver(running.started, running.lock_token)])
    assert store.pump_backfills() == 1
    [report] = _deliver_due(store, box)
    assert report.status == "succeeded"


def test_bad_backfills_are_400_naming_the_field(api, store, target_server):
    job = _hourly(api, target_server)
    path = f"/v1/jobs/{job['id']}/backfill"
    now = store.now()
    every_second = create(
        api, job_body("every-second", schedule="@every 1s", start_at=format_time(now - timedelta(days=1)))
    )
    cases = [
        (path, {"start": format_time(now), "end": format_time(now - timedelta(hours=1))}, "end"),
        (path, {"start": "yesterday", "end": format_time(now)}, "start"),
        (path, {"end": format_time(now)}, "start"),
        (path, {"start": format_time(now), "end": format_time(now), "dry_run": 1}, "dry_run"),
        (
            f"/v1/jobs/{every_second['id']}/backfill",
            {"start": format_time(now - timedelta(hours=3)), "end": format_time(now), "dry_run": True},
            "end",
        ),
    ]
    for where, body, field in cases:
        answer = api("POST", where, body)
        assert answer.status == 400 and answer.fields == [field], (body, answer.body)
    assert "10,000" in api("POST", cases[-1][0], cases[-1][1]).error["message"]
    ok = {"start": format_time(now - timedelta(hours=1)), "end": format_time(now), "dry_run": True}
    assert api("POST", path, ok, principal=BOB).status == 404


def test_a_backfill_delivery_is_not_counted_as_lateness(api, store, box, target_server):
    from scheduler.runner.telemetry import MemoryMetrics

    job = _hourly(api, target_server)
    now = store.now()
    api(
        "POST",
        f"/v1/jobs/{job['id']}/backfill",
        {"start": format_time(now - timedelta(hours=1)), "end": format_time(now)},
    )
    assert store.pump_backfills() == 1
    metrics = MemoryMetrics()
    executor = Executor(store, lambda target: target, TargetPolicy(allow_private=True), metrics)
    [claim] = store.claim_and_start(10)
    executor.count_lateness([claim.started])
    executor.record([executor.deliver(claim.started, claim.lock_token)])
    assert claim.started.trigger == "backfill"
    assert not any(name == "LatenessMs" for name, _ in metrics.values)
    assert metrics.total("Executions", status="succeeded") == 1


def _retry_now(pool) -> None:
    """The waiting retry's backoff over (the test does not wait it out)."""
    with pool.connection() as conn:
        conn.execute("UPDATE backfills SET retry_at = now() WHERE retry_at IS NOT NULL")


def test_a_failed_backfill_delivery_is_retried_under_the_jobs_policy(api, store, box, pool, target_server):
    job = _hourly(api, target_server, "flaky")
    api("PATCH", f"/v1/jobs/{job['id']}", {"retry": {"max_attempts": 3, "min_backoff_seconds": 30}})
    target_server.responses["/b"] = [(500, {}, b"down"), (503, {}, b"down"), (200, {}, b"ok")]
    now = store.now().replace(minute=0, second=0, microsecond=0)
    first, second = now - timedelta(hours=2), now - timedelta(hours=1)
    span = {"start": format_time(first), "end": format_time(second)}
    assert api("POST", f"/v1/jobs/{job['id']}/backfill", span).body == {"count": 2}
    assert store.pump_backfills() == 1
    [report] = _deliver_due(store, box)
    assert report.status == "failed"
    # The retry waits for its backoff (30 s at least), and nothing else runs meanwhile: neither the
    # next occurrence nor a second delivery beside it (one run at a time, in order).
    assert store.pump_backfills() == 0 and store.claim_and_start(10) == []
    for attempt, status in ((2, "failed"), (3, "succeeded")):
        _retry_now(pool)
        assert store.pump_backfills() == 1
        assert store.pump_backfills() == 0
        [report] = _deliver_due(store, box)
        assert report.status == status, attempt
    with pool.connection() as conn:
        conn.execute("UPDATE backfills SET next_at = now()")
    assert store.pump_backfills() == 1  # the next occurrence, once the first one succeeded
    [report] = _deliver_due(store, box)
    assert report.status == "succeeded" and store.pump_backfills() == 0
    delivered = [r["headers"]["X-Scheduler-Scheduled-At"] for r in target_server.wait_for(4)]
    assert delivered == [format_time(first)] * 3 + [format_time(second)]
    keys = {r["headers"]["Idempotency-Key"] for r in target_server.requests[:3]}
    assert keys == {f"{job['id']}:{format_time(first)}"}  # every attempt carries the occurrence's key
    rows = api("GET", f"/v1/jobs/{job['id']}/executions").body["executions"]
    assert [(e["trigger"], e["scheduled_at"], e["attempt"], e["status"]) for e in reversed(rows)] == [
        ("backfill", format_time(first), 1, "failed"),
        ("backfill", format_time(first), 2, "failed"),
        ("backfill", format_time(first), 3, "succeeded"),
        ("backfill", format_time(second), 1, "succeeded"),
    ]
    assert api("GET", f"/v1/jobs/{job['id']}").body["next_run_at"] == job["next_run_at"]  # the live schedule


def test_a_backfill_delivery_stops_at_max_attempts_a_permanent_failure_and_max_age(
    api, store, box, pool, target_server
):
    job = _hourly(api, target_server, "broken")
    api("PATCH", f"/v1/jobs/{job['id']}", {"retry": {"max_attempts": 2, "min_backoff_seconds": 0}})
    target_server.responses["/b"] = [(500, {}, b"down"), (500, {}, b"down"), (404, {}, b"gone"), (500, {}, b"down")]
    now = store.now().replace(minute=0, second=0, microsecond=0)
    span = {"start": format_time(now - timedelta(hours=3)), "end": format_time(now - timedelta(hours=1))}
    assert api("POST", f"/v1/jobs/{job['id']}/backfill", span).body == {"count": 3}

    def deliver_next() -> str:
        _retry_now(pool)
        with pool.connection() as conn:
            conn.execute("UPDATE backfills SET next_at = now()")
        assert store.pump_backfills() == 1
        [report] = _deliver_due(store, box)
        return report.status

    assert [deliver_next(), deliver_next()] == ["failed", "failed"]  # the first occurrence: 2 attempts
    assert deliver_next() == "failed"  # the second: a 404 is permanent, no retry
    # The third: a retry would start after max_age_seconds (counted from its first attempt).
    api(
        "PATCH",
        f"/v1/jobs/{job['id']}",
        {"retry": {"max_attempts": 5, "min_backoff_seconds": 60, "max_age_seconds": 30}},
    )
    assert deliver_next() == "failed"
    _retry_now(pool)
    assert store.pump_backfills() == 0  # finished: nothing more to hand over
    rows = api("GET", f"/v1/jobs/{job['id']}/executions").body["executions"]
    assert [(e["attempt"], e["status"]) for e in reversed(rows)] == [
        (1, "failed"),
        (2, "failed"),
        (1, "failed"),
        (1, "failed"),
    ]


def test_a_backfill_is_handed_over_only_to_an_idle_job(api, store, box, pool, target_server):
    """Not while a scheduled run is under way: handed over then, it waited in the job's request
    slot, where a chained run asked for meanwhile joined it and never ran on its own."""
    job = _hourly(api, target_server)
    make_due(pool, job["id"])
    [running] = store.claim_and_start(10)  # a scheduled run under way: no request pending
    assert running.started.trigger == "schedule"
    now = store.now()
    window = {"start": format_time(now - timedelta(hours=2)), "end": format_time(now - timedelta(hours=1))}
    assert api("POST", f"/v1/jobs/{job['id']}/backfill", window).status == 202
    assert store.pump_backfills() == 0
    executor = Executor(store, lambda target: target, TargetPolicy(allow_private=True))
    executor.record([executor.deliver(running.started, running.lock_token)])
    assert store.pump_backfills() == 1

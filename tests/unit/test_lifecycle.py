"""Retry backoff and the completion plan, without a database."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from scheduler.core.domain import Job, RetryPolicy
from scheduler.planning.lifecycle import Outcome, backoff_seconds, plan_completion, schedule_of
from scheduler.schedules import interval_anchor, parse_schedule, parse_union
from scheduler.sql import QUERIES, parse_named_queries

UTC = UTC
NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def job(**overrides):
    row = {
        "state": "active",
        "schedule": "*/5 * * * *",
        "run_at": None,
        "timezone": "UTC",
        "start_at": None,
        "end_at": None,
        "created_at": NOW - timedelta(days=1),
        "scheduled_at": NOW,
        "attempt": 1,
        "next_run_at": NOW,
        "manual_run_at": None,
        "lease_kind": "schedule",
        "missed_runs": "run_once",
        "retry": {"max_attempts": 3, "min_backoff_seconds": 2, "max_backoff_seconds": 10},
    }
    row.update(overrides)
    return Job.from_row(row)


def test_backoff_grows_with_jitter_within_bounds():
    rng = random.Random(7)
    retry = RetryPolicy(min_backoff_seconds=2, max_backoff_seconds=10)
    for attempt, ceiling in ((1, 2), (2, 4), (3, 8), (4, 10), (9, 10)):
        values = [backoff_seconds(retry, attempt, rng) for _ in range(200)]
        assert all(2 <= v <= ceiling for v in values)
        if ceiling > 2:
            assert max(values) - min(values) > (ceiling - 2) / 2  # really jittered


def test_success_moves_to_the_next_occurrence():
    plan = plan_completion(job(), Outcome("succeeded"), NOW + timedelta(seconds=1))
    assert plan.scheduled_at == NOW + timedelta(minutes=5) and plan.attempt == 0


def test_retryable_failure_keeps_the_occurrence():
    plan = plan_completion(job(), Outcome("failed", retryable=True), NOW, random.Random(1))
    assert plan.scheduled_at == NOW and plan.attempt == 1 and NOW < plan.next_run_at <= NOW + timedelta(seconds=2)


def test_missed_occurrences_follow_the_policy():
    late = NOW + timedelta(minutes=22)
    assert plan_completion(job(missed_runs="skip"), Outcome("succeeded"), late).scheduled_at == NOW + timedelta(
        minutes=25
    )
    assert plan_completion(job(missed_runs="run_once"), Outcome("succeeded"), late).scheduled_at == NOW + timedelta(
        minutes=20
    )
    assert plan_completion(job(missed_runs="run_all"), Outcome("succeeded"), late).scheduled_at == NOW + timedelta(
        minutes=5
    )


def test_a_missed_occurrence_run_late_is_due_now_not_at_its_old_time():
    # its execution's due_at, and so its lateness and the late alert, leave out the time missed
    late = NOW + timedelta(minutes=22)
    for policy, occurrence in (("run_all", 5), ("run_once", 20)):
        plan = plan_completion(job(missed_runs=policy), Outcome("succeeded"), late)
        assert (plan.scheduled_at, plan.next_run_at) == (NOW + timedelta(minutes=occurrence), late), policy
    on_time = plan_completion(job(missed_runs="run_all"), Outcome("succeeded"), NOW + timedelta(seconds=1))
    assert on_time.next_run_at == on_time.scheduled_at == NOW + timedelta(minutes=5)


def test_named_queries_loader():
    assert parse_named_queries("-- name: a\nSELECT 1;\n-- name: b\nSELECT 2;") == {"a": "SELECT 1", "b": "SELECT 2"}
    assert "claim_due" in QUERIES and "FOR UPDATE SKIP LOCKED" in QUERIES["claim_due"]
    # Fragments are included where named, and are not queries of their own.
    text = "-- fragment: cols\na, b\n-- name: q\nSELECT {{ cols }} FROM t;\n-- name: r\nSELECT {{cols}}, c FROM t;"
    assert parse_named_queries(text) == {"q": "SELECT a, b FROM t", "r": "SELECT a, b, c FROM t"}
    with pytest.raises(ValueError, match="no fragment 'nope'"):
        parse_named_queries("-- name: q\nSELECT {{ nope }};")
    with pytest.raises(ValueError, match="defined twice"):
        parse_named_queries("-- fragment: x\n1\n-- name: x\nSELECT 1;")
    assert "FOR UPDATE SKIP LOCKED" in QUERIES["claim_and_start"] and "{{" not in "".join(QUERIES.values())


def test_fragments_may_include_fragments_and_the_lost_cte_is_written_once():
    text = "-- fragment: inner\nx\n-- fragment: outer\n({{ inner }})\n-- name: q\nSELECT {{ outer }};"
    assert parse_named_queries(text) == {"q": "SELECT (x)"}
    with pytest.raises(ValueError, match="includes itself"):
        parse_named_queries("-- fragment: a\n{{ a }}\n-- name: q\nSELECT {{ a }};")
    # Both the claim and an edit mark an orphaned execution lost, through the one fragment.
    for name in ("mark_executions_lost", "claim_and_start", "update_job"):
        assert QUERIES[name].count("SET status = 'lost'") == 1, name
    from importlib import resources

    assert resources.files("scheduler.sql").joinpath("queries.sql").read_text().count("SET status = 'lost'") == 1


def test_named_queries_are_loaded_without_comments_and_fit_psycopgs_conversion_cache():
    from psycopg._queries import MAX_CACHED_STATEMENT_LENGTH

    from scheduler.sql import strip_sql_comments

    # A comment goes, a "--" inside a string literal stays, blank lines go.
    assert strip_sql_comments("SELECT 1, -- one\n\n  '--x' AS y -- why\nFROM t") == "SELECT 1,\n  '--x' AS y\nFROM t"
    for name, sql in QUERIES.items():
        assert "--" not in sql.replace("'--", ""), name
        assert all(line.count("'") % 2 == 0 for line in sql.splitlines()), f"{name}: a literal spans lines"
        # Longer, psycopg converts the query at every call instead of once (the claim was 5.6 KiB).
        assert len(sql.encode()) <= MAX_CACHED_STATEMENT_LENGTH, name


def test_outcomes_encode_alike_with_orjson_and_without():
    """complete_jobs' outcomes: instants with their offset and microseconds, the standard
    library's encoding (the Lambda layer has no orjson) reading the same as orjson's."""
    import json
    from zoneinfo import ZoneInfo

    from scheduler.store import completions

    instant = datetime(2026, 12, 2, 17, 54, 52, 123456, tzinfo=ZoneInfo("Europe/Paris"))
    rows = [
        [
            "id",
            "token",
            "x",
            3,
            "active",
            instant,
            0,
            None,
            datetime(2026, 1, 1, tzinfo=UTC),
            "ok",
            'a "q" \u2603',
            200,
            None,
            instant,
        ]
    ]
    fast = completions.encode_outcomes(rows)
    orjson, completions.orjson = completions.orjson, None
    try:
        slow = completions.encode_outcomes(rows)
    finally:
        completions.orjson = orjson
    assert json.loads(fast) == json.loads(slow)
    decoded = json.loads(slow)[0]
    assert datetime.fromisoformat(decoded[5]) == instant and decoded[5].endswith(".123456+01:00")
    assert decoded[8] == "2026-01-01T00:00:00+00:00" and decoded[10] == 'a "q" \u2603'


def test_a_failed_backfill_delivery_plans_its_retry_and_leaves_the_job_alone():
    from scheduler.core.domain import JobState, LeaseKind, Trigger

    retry = {"max_attempts": 3, "min_backoff_seconds": 10, "max_backoff_seconds": 10, "max_age_seconds": 600}
    job = Job(
        id="j",
        schedule="0 * * * *",
        created_at=NOW - timedelta(days=1),
        state=JobState.ACTIVE,
        scheduled_at=NOW + timedelta(hours=1),
        next_run_at=NOW + timedelta(hours=1),
        lease_kind=LeaseKind.MANUAL,
        retry=retry,
    )
    occurrence, started = NOW - timedelta(days=3), NOW - timedelta(seconds=2)
    args = (NOW, random.Random(1), occurrence, (), started)
    failed = Outcome("failed", retryable=True, http_status=500)
    plan = plan_completion(job, failed, *args, (Trigger.BACKFILL, 1))
    assert (plan.scheduled_at, plan.next_run_at, plan.attempt) == (job.scheduled_at, job.next_run_at, job.attempt)
    again = plan.backfill_retry
    assert again is not None and (again.occurrence, again.attempt, again.at) == (
        occurrence,
        2,
        NOW + timedelta(seconds=10),
    )
    assert again.started_at == started and again.max_age_seconds == 600
    # None after the last attempt, on success, on a permanent failure, or for a manual run.
    assert plan_completion(job, failed, *args, (Trigger.BACKFILL, 3)).backfill_retry is None
    assert plan_completion(job, Outcome("succeeded"), *args, (Trigger.BACKFILL, 1)).backfill_retry is None
    permanent = Outcome("failed", http_status=404, retryable=False)
    assert plan_completion(job, permanent, *args, (Trigger.BACKFILL, 1)).backfill_retry is None
    assert plan_completion(job, failed, *args, (Trigger.MANUAL, 1)).backfill_retry is None


def test_jobs_on_one_cron_expression_share_its_schedule_whenever_they_were_created():
    """The anchor counts for intervals only: cron jobs created at different seconds share one
    parsed schedule (and its memoized searches), so 10,000 of them do not each parse their own."""
    first = job(created_at=NOW - timedelta(days=1, seconds=7))
    second = job(created_at=NOW - timedelta(hours=3, seconds=41), start_at=NOW - timedelta(hours=1))
    assert schedule_of(first) is schedule_of(second)
    assert plan_completion(first, Outcome("succeeded"), NOW).next_run_at == NOW + timedelta(minutes=5)


@pytest.mark.parametrize(
    "fields",
    [
        {"schedule": "@every 90s"},
        {"schedule": "rate(7 minutes)", "timezone": "Europe/Paris"},
        {"schedule": None, "schedules": ("@every 90s", "0 12 * * *")},
    ],
    ids=["every", "rate", "union"],
)
def test_intervals_still_count_from_their_own_jobs_anchor(fields):
    """Each job's interval counts from its start_at, else its creation (rounded as
    interval_anchor says): the same answers as parsing with that anchor."""
    for created, start in [
        (NOW - timedelta(days=1, seconds=7), None),
        (NOW - timedelta(hours=3, microseconds=41), None),
        (NOW - timedelta(days=2), NOW - timedelta(hours=1, microseconds=5)),
    ]:
        one = job(created_at=created, start_at=start, **fields)
        anchor = interval_anchor(start, created)
        if one.schedule is not None:
            reference = parse_schedule(one.schedule, one.timezone, anchor)
        else:
            reference = parse_union(one.schedules, one.timezone, anchor)
        ours = schedule_of(one)
        probe = NOW - timedelta(hours=5)
        for _ in range(20):
            assert ours.next_after(probe) == reference.next_after(probe)
            assert ours.last_at_or_before(probe) == reference.last_at_or_before(probe)
            probe = reference.next_after(probe)


def test_an_occurrence_held_by_a_manual_run_stays_due_from_the_runs_start_within_a_bound():
    """Due before the manual run began: due from its start (ahead of a request made during it),
    but no earlier than a minute before the run's end, so that the runner that starts it next
    never takes it for missed (MISSED_AFTER_SECONDS)."""
    from scheduler.core.domain import LeaseKind
    from scheduler.planning.attempts import MISSED_AFTER_SECONDS
    from scheduler.planning.lifecycle import HELD_DUE_BOUND

    assert HELD_DUE_BOUND.total_seconds() <= MISSED_AFTER_SECONDS / 2
    held = job(lease_kind=LeaseKind.MANUAL, attempt=0, scheduled_at=NOW, next_run_at=NOW)
    for took, due in [(5, NOW + timedelta(seconds=1)), (600, NOW + timedelta(seconds=541))]:
        began = NOW + timedelta(seconds=1)
        plan = plan_completion(held, Outcome("succeeded"), began + timedelta(seconds=took), None, NOW, (), began)
        assert plan.next_run_at == due and plan.scheduled_at == NOW, took
    later = job(lease_kind=LeaseKind.MANUAL, attempt=0, scheduled_at=NOW, next_run_at=NOW + timedelta(seconds=3))
    plan = plan_completion(later, Outcome("succeeded"), NOW + timedelta(seconds=5), None, NOW, (), NOW)
    assert plan.next_run_at == NOW + timedelta(seconds=5)  # came due during the run: due at its end

"""The occurrences a calendar leaves out (``on_excluded: skip``), on record as skipped rows with
``skip_reason: calendar`` and their count (real Postgres, through the API and the runner's
completion): written when a plan moves past them (a creation, a completion, a calendar's
replacement), each once, filterable with ``status=skipped`` and counted in the
``SkippedOccurrences`` metric by the runner. A job under ``shift`` or without calendars records
none."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

from scheduler.core.domain import Outcome
from scheduler.core.timeutil import format_time
from scheduler.runner.executor import Executor, Finished
from scheduler.runner.telemetry import MemoryMetrics
from scheduler.targets.results import TargetPolicy
from tests.integration.test_api import api, box, create, job_body  # noqa: F401 - fixtures


def _skipped(api, job_id: str) -> list[dict]:
    answer = api("GET", f"/v1/jobs/{job_id}/executions", query={"status": "skipped"})
    assert answer.status == 200, answer.body
    return answer.body["executions"]


def test_a_job_every_minute_and_every_second_under_a_calendar_excluding_today(api, store):
    today = store.now().astimezone(UTC).date()
    days = [today.isoformat(), (today + timedelta(days=1)).isoformat()]
    assert api("POST", "/v1/calendars", {"name": "off", "timezone": "UTC", "dates": days}).status == 201
    after = today + timedelta(days=2)
    minutely = create(api, job_body("minutely", schedule="* * * * *", timezone="UTC", exclude_calendars=["off"]))
    assert minutely["next_run_at"] == f"{after}T00:00:00Z"
    [row] = _skipped(api, minutely["id"])
    assert (row["status"], row["skip_reason"], row["trigger"]) == ("skipped", "calendar", "schedule")
    now = store.now()
    first = now.astimezone(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
    assert row["scheduled_at"] in (format_time(first - timedelta(minutes=1)), format_time(first))
    left = (after - today).days * 1440 - (first - first.replace(hour=0, minute=0)).total_seconds() // 60
    assert left <= row["skipped_count"] <= left + 1  # the minutes from now to the end of tomorrow

    ticking = create(api, job_body("ticking", schedule="@every 1s", timezone="UTC", exclude_calendars=["off"]))
    [tick] = _skipped(api, ticking["id"])
    # Every second from its creation to the end of tomorrow, counted exactly.
    created = datetime.fromisoformat(ticking["created_at"]).replace(microsecond=0)
    assert tick["skip_reason"] == "calendar" and tick["scheduled_at"] == format_time(created + timedelta(seconds=1))
    assert tick["skipped_count"] == (datetime.combine(after, time(), UTC) - created).total_seconds() - 1
    # Across jobs, status=skipped lists both; shift and no calendar record nothing.
    everywhere = api("GET", "/v1/executions", query={"status": "skipped"}).body["executions"]
    assert {e["job_id"] for e in everywhere} == {minutely["id"], ticking["id"]}
    shifted = create(api, job_body("shifted", schedule="* * * * *", exclude_calendars=["off"], on_excluded="shift"))
    plain = create(api, job_body("plain", schedule="* * * * *"))
    assert _skipped(api, shifted["id"]) == [] and _skipped(api, plain["id"]) == []


def test_a_completion_records_the_excluded_occurrences_it_plans_past_and_counts_them(api, store, pool):
    now = store.now().astimezone(UTC).replace(microsecond=0)
    blackout = {"start": format_time(now + timedelta(minutes=30)), "end": format_time(now + timedelta(minutes=150))}
    api("POST", "/v1/calendars", {"name": "blackout", "timezone": "UTC", "ranges": [blackout]})
    start = now + timedelta(minutes=10)  # occurrences at +10m, +70m, +130m, +190m: two in the blackout
    body = job_body("hourly", schedule="@every 1h", start_at=format_time(start), exclude_calendars=["blackout"])
    job = create(api, body)
    assert job["next_run_at"] == format_time(start) and _skipped(api, job["id"]) == []
    with pool.connection() as conn:  # the occurrence in hand is due now (its own time stays)
        conn.execute("UPDATE job_runs SET next_run_at = now() - interval '1 second' WHERE job_id = %s", (job["id"],))
    [claim] = store.claim_and_start(10)
    metrics = MemoryMetrics()
    executor = Executor(store, lambda t: t, TargetPolicy(), metrics)
    ok = Outcome("succeeded", http_status=200)
    executor.record([Finished(claim.job_id, claim.lock_token, claim.started, ok, 0.05)])
    assert api("GET", f"/v1/jobs/{job['id']}").body["next_run_at"] == format_time(start + timedelta(hours=3))
    [row] = _skipped(api, job["id"])
    assert (row["skip_reason"], row["skipped_count"]) == ("calendar", 2)
    assert row["scheduled_at"] == format_time(start + timedelta(hours=1))
    assert metrics.total("SkippedOccurrences", reason="calendar") == 2


def test_a_calendar_replacement_records_what_it_newly_excludes_once(api, store):
    api("POST", "/v1/calendars", {"name": "closures", "timezone": "UTC", "dates": ["2031-01-01"]})
    job = create(api, job_body("daily", schedule="0 9 * * *", timezone="UTC", exclude_calendars=["closures"]))
    assert _skipped(api, job["id"]) == []
    first = job["next_run_at"][:10]  # the date of the occurrence in hand
    day = date.fromisoformat(first)
    dates = [(day + timedelta(days=i)).isoformat() for i in range(2)]
    assert api("PUT", "/v1/calendars/closures", {"timezone": "UTC", "dates": dates}).status == 200
    assert api("GET", f"/v1/jobs/{job['id']}").body["next_run_at"] == f"{day + timedelta(days=2)}T09:00:00Z"
    [row] = _skipped(api, job["id"])
    assert (row["skip_reason"], row["skipped_count"], row["scheduled_at"]) == ("calendar", 2, f"{first}T09:00:00Z")
    # One more day: only that one is new (the two before are on record already).
    dates.append((day + timedelta(days=2)).isoformat())
    assert api("PUT", "/v1/calendars/closures", {"timezone": "UTC", "dates": dates}).status == 200
    rows = sorted(_skipped(api, job["id"]), key=lambda r: r["scheduled_at"])
    assert [(r["skipped_count"], r["scheduled_at"]) for r in rows] == [
        (2, f"{first}T09:00:00Z"),
        (1, f"{day + timedelta(days=2)}T09:00:00Z"),
    ]

"""``occurrences``: a schedule's next instants, as the job planning code computes them."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from scheduler.lifecycle import plan_first
from scheduler.preview import occurrences


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


def test_dst_gap_fires_when_the_clocks_jump_and_a_repeated_hour_fires_once():
    spring = occurrences("30 2 * * *", timezone="Europe/Berlin", after=utc("2027-03-27T12:00:00Z"), count=2)
    assert spring == [utc("2027-03-28T01:00:00Z"), utc("2027-03-29T00:30:00Z")]
    autumn = occurrences("30 2 * * *", timezone="Europe/Berlin", after=utc("2027-10-30T12:00:00Z"), count=2)
    assert autumn == [utc("2027-10-31T00:30:00Z"), utc("2027-11-01T01:30:00Z")]


def test_strictly_after_and_the_window():
    after = utc("2027-01-01T00:00:00Z")
    assert occurrences("@hourly", after=after, count=1) == [utc("2027-01-01T01:00:00Z")]
    assert occurrences("@daily", after=after, end_at=utc("2027-01-02T12:00:00Z")) == [utc("2027-01-02T00:00:00Z")]
    assert occurrences("@daily", after=after, start_at=utc("2027-03-01T00:00:00Z"), count=1) == [
        utc("2027-03-01T00:00:00Z")]


def test_one_offs():
    run_at = utc("2027-05-01T08:00:00Z")
    assert occurrences(run_at, after=utc("2027-01-01T00:00:00Z")) == [run_at]
    assert occurrences(run_at, after=run_at) == []
    assert occurrences("at(2027-05-01T10:00:00)", timezone="Europe/Berlin", after=utc("2027-01-01T00:00:00Z")) == [
        run_at]


def test_rate_counts_from_start_at_else_from_after():
    start = utc("2027-01-01T00:10:00Z")
    assert occurrences("rate(90 minutes)", start_at=start, after=utc("2027-01-01T01:00:00Z"), count=2) == [
        utc("2027-01-01T01:40:00Z"), utc("2027-01-01T03:10:00Z")]
    assert occurrences("@every 90s", after=utc("2027-01-01T00:00:00Z"), count=2) == [
        utc("2027-01-01T00:01:30Z"), utc("2027-01-01T00:03:00Z")]


@pytest.mark.parametrize("schedule,tz", [("*/7 * * * *", "Asia/Kolkata"), ("cron(0 3 ? * 1 *)", "America/New_York"),
                                         ("rate(5 minutes)", "UTC"), ("0 0 29 2 *", "Australia/Sydney")])
def test_the_first_occurrence_is_the_one_a_new_job_gets(schedule, tz):
    now = utc("2027-02-03T04:05:06Z")
    planned = plan_first({"schedule": schedule, "run_at": None, "timezone": tz, "created_at": now}, now)
    assert occurrences(schedule, timezone=tz, after=now, count=1) == [planned["next_run_at"]]


def test_count_and_order():
    found = occurrences("*/5 * * * *", after=utc("2027-01-01T00:00:00Z"), count=100)
    assert len(found) == 100 and found == sorted(set(found))

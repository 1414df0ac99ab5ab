"""Microseconds per next-time planning of a job with a calendar, two expressions and a spread.

    .venv/bin/python bench/planning_next.py [--plans 20000] [--repeats 5] [--quick] [--json PATH]

Times what a runner does when a run ends: ``lifecycle.plan_completion`` of the job as its started
row gives it (parsing memoized, as in a runner), which finds the occurrence after the one that
ran and its fire time. Each case plans ``--plans`` runs in a row, every plan from the previous
one (so every search is a new one: no answer comes from the per-instant memo), ``--repeats``
times (the cases taking turns), and reports the best repeat's mean in microseconds per plan. No database: the planning is
pure. ``--quick``: 5,000 plans, 3 repeats.

The benchmarked job is ``JOB`` below: two expressions (one wall-time cron in a zone with DST,
one ``rate()``), a stable spread, and a calendar of UK bank holidays (``UK_HOLIDAYS``, compiled
once as a runner does) whose excluded occurrences are shifted: the target's case. The same job
without its calendar, and the single-expression job without a spread (the hot path of most
jobs), are timed beside it; and a burst: 10,000 jobs on that one expression, each created at its
own second, planning the run they all just made.
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from msgspec import structs

from common import machine_summary, write_json
from scheduler.core.domain import ExecutionStatus, Job, Outcome
from scheduler.planning import lifecycle
from scheduler.schedules.calendars import Calendar, build_calendar

JOB_ID = "3b1f7c52-8e0a-4d6b-9f2e-5a4c1d7e9b30"
CREATED = datetime(2026, 1, 1, tzinfo=UTC)
#: England and Wales bank holidays, every year (the moving ones for 2026-2028 as dates).
UK_HOLIDAYS: dict[str, Any] = {
    "timezone": "Europe/London",
    "yearly": ["01-01", "12-25", "12-26"],
    "dates": [
        "2026-04-03",
        "2026-04-06",
        "2026-05-04",
        "2026-05-25",
        "2026-08-31",
        "2026-12-28",
        "2027-03-26",
        "2027-03-29",
        "2027-05-03",
        "2027-05-31",
        "2027-08-30",
        "2027-12-27",
        "2027-12-28",
        "2028-04-14",
        "2028-04-17",
        "2028-05-01",
        "2028-05-29",
        "2028-08-28",
    ],
}
#: The benchmarked job's scheduling fields.
JOB: dict[str, Any] = {
    "schedules": ("0 9 * * 1-5", "rate(6 hours)"),
    "spread": {"window_seconds": 900, "mode": "stable"},
    "timezone": "Europe/London",
}
WITH_CALENDAR: dict[str, Any] = {**JOB, "exclude_calendars": ("uk-holidays",), "on_excluded": "shift"}
#: name -> the job's scheduling fields; the target is 50 us for the first.
CASES: dict[str, dict[str, Any]] = {
    "calendar_two_expressions_and_spread": WITH_CALENDAR,
    "two_expressions_and_spread": JOB,
    "two_expressions_random_spread": {**JOB, "spread": {"window_seconds": 900, "mode": "random"}},
    "one_expression": {"schedule": "0 9 * * 1-5", "timezone": "Europe/London"},
}
#: A burst: this many jobs on the "one_expression" schedule, each created at its own second, all
#: ending the same occurrence (what a runner plans when 10,000 jobs due at 09:00 have run).
BURST_JOBS = 10_000
BURST_CASE = "burst_one_expression_many_creations"
TARGET_US = 50.0
_SUCCEEDED = Outcome(status=ExecutionStatus.SUCCEEDED)
_LATER = timedelta(seconds=1)


def plan_runs(fields: dict[str, Any], plans: int) -> float:
    """Seconds spent in ``plan_completion`` to plan ``plans`` runs of a job with ``fields``, each
    from the previous one (the job's record of each run is made outside the timing)."""
    job = Job(id=JOB_ID, created_at=CREATED, **fields)
    calendars: tuple[Calendar, ...] = (build_calendar("uk-holidays", UK_HOLIDAYS),) if job.exclude_calendars else ()
    plan = lifecycle.plan_first(job, CREATED, calendars=calendars)
    clock, spent = time.perf_counter, 0.0
    for _ in range(plans):
        assert plan.scheduled_at is not None and plan.next_run_at is not None
        job = structs.replace(job, scheduled_at=plan.scheduled_at, next_run_at=plan.next_run_at, attempt=1)
        now = plan.next_run_at + _LATER
        began = clock()
        plan = lifecycle.plan_completion(job, _SUCCEEDED, now, calendars=calendars)
        spent += clock() - began
    return spent


def plan_burst(fields: dict[str, Any], jobs: int) -> float:
    """Seconds spent in ``plan_completion`` to plan one run each of ``jobs`` jobs with ``fields``,
    created 8 s apart, that all ran the same occurrence: a burst's completions. Jobs on one cron
    expression share its parsed schedule whenever they were created (the anchor counts for
    intervals only), so the search for the next occurrence is made once for the burst."""
    first = Job(id=JOB_ID, created_at=CREATED, **fields)
    plan = lifecycle.plan_first(first, CREATED)
    assert plan.scheduled_at is not None and plan.next_run_at is not None
    now = plan.next_run_at + _LATER
    batch = [
        Job(
            id=f"{i:08d}-0000-4000-8000-000000000000",
            created_at=CREATED - timedelta(seconds=8 * i),
            scheduled_at=plan.scheduled_at,
            next_run_at=plan.next_run_at,
            attempt=1,
            **fields,
        )
        for i in range(jobs)
    ]
    clock = time.perf_counter
    began = clock()
    for job in batch:
        lifecycle.plan_completion(job, _SUCCEEDED, now)
    return clock() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plans", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a small run: 5,000 plans, 3 repeats")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    if args.quick:
        args.plans, args.repeats = min(args.plans, 5_000), min(args.repeats, 3)
    results: dict[str, Any] = {
        "benchmark": "planning_next",
        "plans": args.plans,
        "repeats": args.repeats,
        "target_us": TARGET_US,
        "machine": machine_summary(),
        "cases": {},
    }
    # The cases take turns within each repeat, so that a noisy neighbour slows them alike.
    best = dict.fromkeys(CASES, float("inf"))
    for _ in range(args.repeats):
        for name, fields in CASES.items():
            best[name] = min(best[name], plan_runs(fields, args.plans))
    burst_jobs = min(BURST_JOBS, args.plans)
    burst = min(plan_burst(CASES["one_expression"], burst_jobs) for _ in range(args.repeats))
    for name, fields in CASES.items():
        us = best[name] / args.plans * 1e6
        results["cases"][name] = {"fields": fields, "us_per_plan": round(us, 2)}
        print(f"{name}: {us:.1f} us per next-time planning", flush=True)
    us = burst / burst_jobs * 1e6
    results["cases"][BURST_CASE] = {"fields": CASES["one_expression"], "jobs": burst_jobs, "us_per_plan": round(us, 2)}
    print(f"{BURST_CASE} ({burst_jobs:,} jobs): {us:.1f} us per next-time planning", flush=True)
    write_json(args.json, results)


if __name__ == "__main__":
    main()

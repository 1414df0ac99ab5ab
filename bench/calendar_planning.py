"""The next-time planning of a job with calendars, against the same job without: the cost of one
``lifecycle.plan_completion`` (what the executor computes after each run) in microseconds.

    .venv/bin/python bench/calendar_planning.py [--runs 20000]

No database: the calendars are compiled once (as the runner does per calendar version) and the
job is planned after each of ``--runs`` occurrences in turn, so the searches walk a year and more
of weekdays, holidays included (the schedule's own per-instant cache does not help: every plan is
from a new instant). Jobs without calendars take the unchanged path (``schedule_of`` returns the
parsed schedule itself).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent.parent / "functions")]

from msgspec import structs  # noqa: E402
from planning_next import UK_HOLIDAYS  # noqa: E402

from scheduler.core.domain import ExecutionStatus, Job, JobState, Outcome  # noqa: E402
from scheduler.planning import lifecycle  # noqa: E402
from scheduler.schedules.calendars import build_calendar  # noqa: E402

# The bank holidays of planning_next's benchmark, with a summer shutdown besides.
UK = {**UK_HOLIDAYS, "ranges": [{"start": "2026-08-10", "end": "2026-08-21"}]}


def plan_each(job: Job, calendars: list, runs: int) -> list[float]:
    """Plan ``runs`` completions in a row; the microseconds of each."""
    done = Outcome(ExecutionStatus.SUCCEEDED)
    took = []
    at = job.scheduled_at
    for _ in range(runs):
        current = structs.replace(job, scheduled_at=at)
        start = time.perf_counter()
        plan = lifecycle.plan_completion(current, done, at, calendars=calendars)
        took.append((time.perf_counter() - start) * 1e6)
        if plan.scheduled_at is None:
            break
        at = plan.scheduled_at
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20000)
    args = parser.parse_args()
    calendar = build_calendar("uk", UK)
    created = datetime(2026, 1, 1, tzinfo=UTC)
    for schedule in ("0 9 * * 1-5", "*/30 8-18 * * *", "rate(7 hours)"):
        for label, names, mode in (
            ("no calendar", (), "skip"),
            ("calendar, skip", ("uk",), "skip"),
            ("calendar, shift", ("uk",), "shift"),
        ):
            job = Job(
                id="j",
                owner="o",
                schedule=schedule,
                timezone="Europe/London",
                created_at=created,
                state=JobState.ACTIVE,
                scheduled_at=created,
                missed_runs="skip",
                exclude_calendars=names,
                on_excluded=mode,
            )
            took = plan_each(job, [calendar] if names else [], args.runs)
            print(
                f"{schedule:18} {label:16} median {statistics.median(took):6.1f} us  "
                f"p99 {sorted(took)[int(len(took) * 0.99)]:6.1f} us  ({len(took)} plans)"
            )


if __name__ == "__main__":
    main()

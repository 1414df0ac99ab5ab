"""The fan-out loop: claim due jobs and hand each claim to an executor, through a ``Dispatch``
(``scheduler.runner.dispatch``: its claim mode says which statement takes the claims).

With second precision (the default), one invocation keeps claiming through its minute, sleeping
until the next due time, so a job fires within about a second of its time although EventBridge
ticks once a minute. It runs a little past its minute so consecutive invocations overlap and no
second goes uncovered (overlap is safe: claims skip locked rows), and it stops before the Lambda
deadline. With minute precision it drains what is due and returns.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scheduler import service
from scheduler.core import constants as c
from scheduler.core.errors import StoreUnavailable
from scheduler.ports import FanoutStore, PauseStore
from scheduler.runner.dispatch import Dispatch, LambdaDispatch, NoticesWakes, WaitsForRoom
from scheduler.runner.growth import (
    BACKLOG_CHECK_SECONDS,
    BACKLOG_RECHECK_FULL_SECONDS,
    FANOUT_DISPATCH_RATE,
    helper_seconds,
    is_helper,
    lambda_growth,
)
from scheduler.runner.telemetry import Metrics, NullMetrics, count_skips

# How far past its minute a second-precision fan-out keeps claiming (the overlap).
OVERLAP_SECONDS = 5.0
# Time kept back from the Lambda deadline.
DEADLINE_RESERVE_SECONDS = 10.0
# The longest sleep between two claims: bounds the delay for a job created while we sleep.
MAX_IDLE_SECONDS = 1.0
MIN_IDLE_SECONDS = 0.02
# Seconds into a run by which the partitions' upkeep runs even if every claim came back full.
MAINTENANCE_DUE_SECONDS = 20.0
# How often the primary fan-out resumes the jobs whose pause reached its end (``pause_until``).
PAUSE_CHECK_SECONDS = 1.0

logger = logging.getLogger(__name__)


@dataclass
class FanoutReport:
    """What one fan-out run did."""

    claimed: int = 0
    dispatched: int = 0
    released: int = 0
    rounds: int = 0
    # Retention (scheduler_maintain_partitions): day partitions created and dropped, rows deleted
    # from the DEFAULT partition, and steps left to the next run (a lock was not free at once).
    partitions_created: int = 0
    partitions_dropped: int = 0
    purged: int = 0
    partitions_skipped: int = 0
    helpers: int = 0
    duration_ms: float = 0.0
    job_ids: list[str] = field(default_factory=list, repr=False)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (without the job ids)."""
        return {
            "claimed": self.claimed,
            "dispatched": self.dispatched,
            "released": self.released,
            "rounds": self.rounds,
            "partitions_created": self.partitions_created,
            "partitions_dropped": self.partitions_dropped,
            "purged": self.purged,
            "partitions_skipped": self.partitions_skipped,
            "helpers": self.helpers,
            "duration_ms": round(self.duration_ms),
        }


def fanout_deadline(precision: str, remaining_seconds: float | None, *, period: float = 60.0) -> float:
    """Seconds this invocation may keep claiming: past its minute by the overlap at second
    precision, bounded by the Lambda deadline less a reserve; 0 means "drain once"."""
    budget = period + OVERLAP_SECONDS if precision == "second" else 0.0
    if remaining_seconds is not None:
        budget = min(budget, drain_limit(remaining_seconds))
    return budget


def drain_limit(remaining_seconds: float) -> float:
    """Seconds a Lambda invocation may keep draining: its remaining time less a reserve."""
    return max(remaining_seconds - DEADLINE_RESERVE_SECONDS, 0.0)


def _maintain_partitions(store: FanoutStore, retention_days: int, report: FanoutReport, metrics: Metrics) -> None:
    """The day partitions' upkeep (``FanoutStore.maintain_partitions``), its steps left to the next
    run counted (``PartitionsSkipped``, 0 when none: a count above zero run after run is a lock
    that never comes free). A failure is logged, never raised: retention must not stop the
    dispatch of due jobs (the next run tries again)."""
    try:
        done = store.maintain_partitions(retention_days)
    except Exception:
        logger.exception("partition maintenance failed; the next fan-out run tries again")
        return
    report.partitions_created, report.partitions_dropped = done.created, done.dropped
    report.purged, report.partitions_skipped = done.default_purged, done.skipped
    metrics.count(c.METRIC_PARTITIONS_SKIPPED, done.skipped)


def run_fanout(
    store: FanoutStore,
    dispatch: Dispatch,
    *,
    budget_seconds: float,
    batch_size: int = 100,
    lease_seconds: float = 120,
    metrics: Metrics | None = None,
    stop: threading.Event | None = None,
    retention_days: int | None = None,
    drain_limit_seconds: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    until_empty: bool = False,
    on_backlog: Callable[[int], int] | None = None,
    backlog_check_seconds: float = BACKLOG_CHECK_SECONDS,
    pauses: PauseStore | None = None,
) -> FanoutReport:
    """Claim and dispatch until ``budget_seconds`` have passed, sleeping until the next due time
    between rounds. A full batch is followed by another claim at once, past the budget if need
    be (what is due now is drained), but never past ``drain_limit_seconds`` (the Lambda
    deadline less a reserve), so a backlog cannot hold the function until it is killed.

    ``lease_seconds`` must cover the wait in the invoke queue: an executor arriving later finds
    its lease taken over and does nothing.

    ``until_empty`` (a helper fan-out, ``scheduler.runner.growth``): any claim that took jobs is followed
    by another at once, so it stops at the first empty claim (or its drain limit), not at a claim
    short of a batch (rows another fan-out holds are skipped). ``on_backlog`` (the primary) is
    called with the due backlog at the start and every ``backlog_check_seconds`` (every
    ``BACKLOG_RECHECK_FULL_SECONDS`` while claims come back full: a backlog is building); it
    returns the number of helpers it started. ``pauses`` (the primary's store): every
    ``PAUSE_CHECK_SECONDS`` the jobs whose pause reached its ``until`` are resumed
    (``service.resume_expired_pauses``), so an automatic resume needs no API call, and each
    backfill due hands its next occurrence to its job (``pump_backfills``).
    """
    run = _FanoutRun(
        store,
        dispatch,
        metrics=metrics or NullMetrics(),
        stop=stop or threading.Event(),
        clock=clock,
        budget_seconds=budget_seconds,
        drain_limit_seconds=drain_limit_seconds,
        retention_days=retention_days,
        on_backlog=on_backlog,
        backlog_check_seconds=backlog_check_seconds,
    )
    run.pauses = pauses
    more_due = False  # the last claim was full: more may be due right now
    while not run.stop.is_set():
        run.keep_up()
        room = dispatch.claim_mode.sized(min(batch_size, dispatch.capacity()))
        if more_due and 0 < room < min(batch_size, run.worth_a_claim) and run.room is not None:
            more_due = False  # a burst: a moment (at most) for a batch's room, then whatever room there is
            run.room.wait_for_room(MIN_IDLE_SECONDS)
            continue
        if room <= 0:  # executors saturated: claim nothing we would have to give back
            if run.wait_for_room():
                break
            continue
        more_due = run.claim_round(room, lease_seconds, until_empty=until_empty)
        if more_due:
            continue
        if run.idle():
            break
    return run.finish()


class _FanoutRun:
    """The state of one ``run_fanout``: its clock, deadlines, report, the backlog's checks and
    the partitions' upkeep, with a method per step of its loop."""

    def __init__(
        self,
        store: FanoutStore,
        dispatch: Dispatch,
        *,
        metrics: Metrics,
        stop: threading.Event,
        clock: Callable[[], float],
        budget_seconds: float,
        drain_limit_seconds: float | None,
        retention_days: int | None,
        on_backlog: Callable[[int], int] | None,
        backlog_check_seconds: float,
    ) -> None:
        self.store, self.dispatch, self.metrics, self.stop, self.clock = store, dispatch, metrics, stop, clock
        self.began = clock()
        self.deadline = self.began + budget_seconds
        self.drain_deadline = self.began + drain_limit_seconds if drain_limit_seconds is not None else float("inf")
        self.report = FanoutReport()
        self.retention_days = retention_days
        self.on_backlog = on_backlog
        self.backlog_check_seconds = backlog_check_seconds
        backlog = store.due_backlog()
        metrics.gauge(c.METRIC_DUE_BACKLOG, backlog.due)
        metrics.gauge(c.METRIC_OLDEST_DUE_AGE_S, backlog.oldest_age_seconds, unit="Seconds")
        # Helpers add dispatch, not executors: while the executors' reserved concurrency is what
        # holds the backlog back (no room for a claim within the last check), none is started for it.
        saturated = dispatch.capacity() <= 0
        self.saturated_at = self.began if saturated else float("-inf")
        if on_backlog is not None:
            self.report.helpers += on_backlog(0 if saturated else backlog.claimable)
        self.checked, self.next_check = self.began, self.began + backlog_check_seconds
        # Retention: the day partitions are kept (created ahead, dropped past the retention) once
        # per run, at its first round without a full claim, so it never delays due jobs; under a
        # backlog that keeps every claim full, once MAINTENANCE_DUE_SECONDS into the run all the
        # same (else tomorrow's partition would never be created).
        self.maintain = bool(retention_days)
        self.maintain_by = self.began + MAINTENANCE_DUE_SECONDS
        self.pauses: PauseStore | None = None
        self.next_pause_check = self.began
        # Local mode's threads say when they have room: a wait for it ends as soon as it comes.
        self.room = dispatch if isinstance(dispatch, WaitsForRoom) else None
        self.worth_a_claim = self.room.room_worth_a_claim() if self.room is not None else 1

    def keep_up(self) -> None:
        """The partitions' upkeep when it is overdue, the backlog's check when it is due, and the
        resume of the pauses that ended."""
        if self.maintain and self.clock() >= self.maintain_by:
            self._maintain()
        if self.pauses is not None and self.clock() >= self.next_pause_check:
            # A wake first (local mode): the deliveries of jobs paused meanwhile, whose leases
            # ran out while the machine slept, are kept before they could be marked lost.
            if isinstance(self.dispatch, NoticesWakes):
                self.dispatch.settle()
            self.next_pause_check = self.clock() + PAUSE_CHECK_SECONDS
            self._resume_pauses(self.pauses)
        if self.on_backlog is not None and self.clock() >= self.next_check:
            saturated = self.clock() - self.saturated_at < self.backlog_check_seconds
            self.report.helpers += self.on_backlog(0 if saturated else self.store.due_backlog().claimable)
            self.checked, self.next_check = self.clock(), self.clock() + self.backlog_check_seconds

    def _resume_pauses(self, store: PauseStore) -> None:
        """Resume the jobs whose pause ended, hand the backfills' next deliveries to their jobs,
        and mark lost the executions whose runner died while their job had nothing due (paused, or
        edited to a later time); a failure is logged (the next check tries again)."""
        try:
            resumed = service.resume_expired_pauses(store, on_skips=lambda skips: count_skips(self.metrics, skips))
            store.pump_backfills()
            lost = store.mark_lost_while_not_due()
        except StoreUnavailable as exc:  # the database away or refusing (a deadlock...): a line, no traceback
            logger.warning(
                "resuming pauses, handing over backfills or marking lost failed (%s); the next check tries again", exc
            )
            return
        except Exception:
            logger.exception(
                "resuming pauses, handing over backfills or marking lost failed; the next check tries again"
            )
            return
        if lost:  # runners died during deliveries of jobs paused or edited meanwhile (queries.sql)
            for job_id, execution_id in lost:
                logger.warning(
                    "execution lost with its runner while its job had nothing due (paused or edited meanwhile)",
                    extra={"job_id": job_id, "execution_id": execution_id},
                )
            self.metrics.count(c.METRIC_EXECUTIONS, len(lost), status="lost")
        if resumed:
            logger.info("pauses ended: jobs resumed", extra={"job_ids": [str(job.id) for job in resumed]})
            self.metrics.count(c.METRIC_RESUMED, len(resumed))

    def _maintain(self) -> None:
        self.maintain = False
        assert self.retention_days is not None
        _maintain_partitions(self.store, self.retention_days, self.report, self.metrics)

    def wait_for_room(self) -> bool:
        """A short pause while the executors are saturated (until they have room for a claim
        worth its statement, when the dispatch can tell); True when the run is over."""
        self.saturated_at = self.clock()
        if self.room is not None:
            self.room.wait_for_room(MIN_IDLE_SECONDS)
        else:
            self.stop.wait(MIN_IDLE_SECONDS)
        return self.clock() >= min(self.deadline, self.drain_deadline)

    def claim_round(self, room: int, lease_seconds: float, *, until_empty: bool) -> bool:
        """Claim up to ``room`` jobs and dispatch them (giving back the refused); True when
        another claim should follow at once (a full claim, or a helper's claim that took jobs)."""
        claims = self.dispatch.claim_mode.claim(self.store, room, lease_seconds)
        report = self.report
        report.rounds += 1
        if not claims:
            return False
        report.claimed += len(claims)
        lost = [claim for claim in claims if claim.reclaimed]
        if lost:  # their runners died: the claim marked the executions lost (queries.sql)
            for claim in lost:
                logger.warning(
                    "execution lost with its runner (its lease expired before it finished); the job runs again",
                    extra={"job_id": claim.job_id, "execution_id": claim.lost_execution_id},
                )
            self.metrics.count(c.METRIC_EXECUTIONS, len(lost), status="lost")
        report.job_ids.extend(claim.job_id for claim in claims)
        refused = self.dispatch.dispatch(claims)
        for claim in refused:
            try:
                if self.store.release(claim.job_id, claim.lock_token):
                    report.released += 1
            except Exception:  # its lease runs out instead, and the job is claimed again
                logger.exception("release failed", extra={"job_id": claim.job_id})
        report.dispatched += len(claims) - len(refused)
        self.metrics.count(c.METRIC_CLAIMED, len(claims))
        self.metrics.count(c.METRIC_DISPATCHED, len(claims) - len(refused))
        if len(claims) == room and self.on_backlog is not None:
            self.next_check = min(self.next_check, self.checked + BACKLOG_RECHECK_FULL_SECONDS)
        if len(refused) < len(claims) and (len(claims) == room or until_empty) and self.clock() < self.drain_deadline:
            return True
        if refused:
            self.stop.wait(0.05)  # executors saturated: let them drain a little
        return False

    def idle(self) -> bool:
        """The upkeep if still pending, then sleep until the next due time (at most a second);
        True when the run is over."""
        if self.maintain:
            self._maintain()
        now = self.clock()
        if now >= self.deadline:
            return True
        wait = self.store.next_due_in()
        # Due but not claimable (rows held by a concurrent claim): a short pause, not a spin.
        wait = MAX_IDLE_SECONDS if wait is None else min(max(wait, MIN_IDLE_SECONDS), MAX_IDLE_SECONDS)
        self.stop.wait(min(wait, self.deadline - now))
        return False

    def finish(self) -> FanoutReport:
        """The report, with the run's duration counted."""
        report = self.report
        report.duration_ms = (self.clock() - self.began) * 1000
        self.metrics.milliseconds(c.METRIC_FANOUT_DURATION_MS, report.duration_ms)
        if report.helpers:
            self.metrics.count(c.METRIC_FANOUT_HELPERS, report.helpers)
        return report


def run_lambda_invocation(
    event: Any,
    store: FanoutStore,
    client: Any,
    *,
    remaining_seconds: float,
    executor_function: str | None,
    fanout_function: str | None = None,
    max_fanouts: int = 1,
    precision: str = "second",
    batch_size: int = 100,
    lease_seconds: float = 120,
    retention_days: int | None = None,
    metrics: Metrics | None = None,
    clock: Callable[[], float] = time.monotonic,
    dispatch_options: dict[str, Any] | None = None,
    dispatch_rate: float = FANOUT_DISPATCH_RATE,
    pauses: PauseStore | None = None,
) -> tuple[FanoutReport, bool]:
    """One invocation of the fan-out function, with ``LambdaDispatch`` over ``client``: the tick's
    (the primary: through its minute, starting helpers as the backlog calls for them, purging old
    executions) or a helper's (``{"helper": true, "seconds": s}``: until a claim comes back empty,
    its ``s`` seconds or its drain limit, no helpers of its own). ``dispatch_options`` go to
    ``LambdaDispatch``; ``dispatch_rate`` is what one fan-out is counted to dispatch a second
    (``scheduler.runner.growth``). ``pauses``: the store the primary resumes ended pauses
    from (``run_fanout``). Returns the report and whether this was a helper."""
    helper = is_helper(event)
    limit = drain_limit(remaining_seconds)
    budget = 0.0 if helper else fanout_deadline(precision, remaining_seconds)
    if helper:
        allowed = helper_seconds(event)
        if allowed is not None and allowed <= 0:  # started after its primary counted it done
            return FanoutReport(), helper
        limit = min(limit, allowed if allowed is not None else limit)
    # No helper outlives its primary (which drains at most until ``limit``): the fan-outs of two
    # overlapping ticks stay within 2 x max_fanouts, under the fan-out's reserved concurrency.
    growth = (
        None
        if helper
        else lambda_growth(client, fanout_function, max_fanouts, clock, rate=dispatch_rate, deadline=clock() + limit)
    )
    if not executor_function:
        raise ValueError("the fan-out needs the executor function's name")
    dispatch = LambdaDispatch(client, executor_function, **(dispatch_options or {}))
    try:
        report = run_fanout(
            store,
            dispatch,
            budget_seconds=budget,
            drain_limit_seconds=limit,
            batch_size=batch_size,
            lease_seconds=lease_seconds,
            metrics=metrics,
            retention_days=None if helper else retention_days,
            clock=clock,
            until_empty=helper,
            on_backlog=growth.observe if growth else None,
            pauses=None if helper else pauses,
        )
    finally:
        dispatch.close()
    return report, helper

"""The executor: take a claim, deliver it, record the outcome (an executor Lambda runs the claim
or the group of claims its invoke carries; local mode a fan-out batch at a time, through the
same three steps).

Phase two of the lease: the executor first confirms its claim (the token still holds the job and
the lease has not expired) and extends the lease over the delivery; an invocation that arrives
after its lease was taken over does nothing. A failing target never raises: its failure is
recorded and the job moves on (durable retry, next occurrence or final failure). Only an
infrastructure fault (the database unreachable) raises, so that Lambda's async retry and the
dead-letter queue take over.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from msgspec import structs

from scheduler import service
from scheduler.calendar_service import job_calendars
from scheduler.core import constants as c
from scheduler.core.domain import Claim, Completion, ExecutionStatus, Outcome, Skip, StartedExecution, Trigger
from scheduler.core.limits import SlotHandBack, TargetLimit
from scheduler.core.records import SkipReason
from scheduler.planning.attempts import given_up, not_to_make
from scheduler.ports import ExecutionStore
from scheduler.runner.delivering import (
    DEADLINE_RESERVE_SECONDS,
    LEASE_MARGIN_SECONDS,
    deliver_started,
    lease_too_short,
    log_fields,
    target_timeout,
)
from scheduler.runner.telemetry import Metrics, NullMetrics, count_lateness, count_skips, count_slot_wait
from scheduler.runner.waiting_room import SLOT_FIRST_PAUSE, SLOT_MAX_PAUSE
from scheduler.targets.results import FAILED, TargetPolicy

logger = logging.getLogger(__name__)

# A delivery waiting for its target's slot (per-target limits): the lease it keeps while it waits
# (extended by that much each half of it). Its pauses between tries: the waiting room's.
SLOT_LEASE_SECONDS = 30.0
# A deployed executor's delivery that finds its key full tries again for this long at most (a
# slot given back meanwhile is taken at once), then hands the job back: no Lambda sleeps through a
# wait for a slot, as none sleeps through a retry's backoff. A fan-out claims it again after a
# pause of half its wait so far, within these bounds.
SLOT_WAIT_IN_EXECUTOR_SECONDS = 2.0
HAND_BACK_MIN_PAUSE_SECONDS = 1.0
HAND_BACK_MAX_PAUSE_SECONDS = 30.0
# A group's deliveries that end within this long of one another are recorded in one statement.
RECORD_GATHER_SECONDS = 0.02

_pool_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _delivery_pool() -> ThreadPoolExecutor:
    """The threads delivering a group's claims, one each (kept across a warm Lambda's invocations)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=c.MAX_CLAIMS_PER_INVOKE, thread_name_prefix="deliver")
        return _pool


def invoke_claims(event: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The claims an executor invoke carries: its ``claims`` (a group, ``dispatch.invoke_payload``)
    or the event itself (one claim). More than ``MAX_CLAIMS_PER_INVOKE`` is refused (ValueError):
    their leases run out and the jobs are claimed again."""
    claims = event.get("claims")
    if claims is None:
        return [event]
    if not isinstance(claims, list) or not claims or len(claims) > c.MAX_CLAIMS_PER_INVOKE:
        raise ValueError(f"an executor invoke carries 1 to {c.MAX_CLAIMS_PER_INVOKE} claims")
    return claims


@dataclass(frozen=True)
class ExecutionReport:
    """What one executor invocation did (the handler's answer)."""

    job_id: str
    # "lease_lost", "completed", "fenced" (finished after losing the lease) or "handed_back" (its
    # key stayed full: the job is claimed again later, its start undone)
    outcome: str
    execution_id: str | None = None
    status: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "job_id": self.job_id,
            "outcome": self.outcome,
            "execution_id": self.execution_id,
            "status": self.status,
        }


@dataclass(eq=False)  # each wait is itself: the waiting room finds it by identity
class SlotWait:
    """A limited delivery waiting for a slot of its target's key: what it waits for, since when,
    how long its lease is kept and how often it was refused."""

    started: StartedExecution
    lock_token: str
    limit: TargetLimit
    timeout: float  # the target's, in seconds
    began: float  # time.monotonic()
    kept_until: float  # its lease is extended at this time.monotonic()
    refused: int = 0  # how often its key refused a slot while it waited (to it, or to a wait ahead)

    @property
    def job_id(self) -> str:
        return str(self.started.job.id)

    @property
    def key(self) -> str:
        """The limits' key (of the job's owner): the waits of one key take turns."""
        return self.limit.slot_key


@dataclass(frozen=True)
class Finished:
    """A delivery that ended, waiting to be recorded."""

    job_id: str
    lock_token: str
    started: StartedExecution
    result: Outcome
    elapsed_seconds: float


class Executor:
    """Runs claims in three steps: start (confirm the lease, record the execution as running),
    deliver, record the outcome. An executor Lambda runs one claim through all three
    (``run``); local mode claims and starts a batch in one statement (``dispatch.InProcessDispatch``),
    delivers from a thread pool and records outcomes in batches."""

    lease_margin_seconds = LEASE_MARGIN_SECONDS

    def __init__(
        self,
        store: ExecutionStore,
        decrypt_target: Callable[[dict], dict],
        policy: TargetPolicy,
        metrics: Metrics | None = None,
        remaining_seconds: Callable[[], float] | None = None,
    ):
        self.store = store
        self.decrypt_target = decrypt_target
        self.policy = policy
        self.metrics = metrics or NullMetrics()
        self.remaining_seconds = remaining_seconds

    def run(self, claim: Claim) -> ExecutionReport:
        """Run one claim (from the fan-out's invoke payload: ``Claim.from_event``)."""
        started = self.start(claim)
        if isinstance(started, ExecutionReport):
            return started
        return self.record([self.deliver(started, claim.lock_token)])[0]

    def run_group(self, claims: Sequence[Claim]) -> list[ExecutionReport]:
        """Run a group of claims (one invoke carrying several): started in one statement
        (``start_executions``), delivered at once, one thread each, and each outcome recorded as
        soon as its delivery ends, with those that ended within ``RECORD_GATHER_SECONDS`` of it
        (a slow target holds back no other job's completion)."""
        tokens = {claim.job_id: claim.lock_token for claim in claims}
        reclaimed = {claim.job_id for claim in claims if claim.reclaimed}
        started = [
            self.with_losses(execution) if str(execution.job.id) in reclaimed else execution
            for execution in self.store.start_executions(list(tokens.items()), LEASE_MARGIN_SECONDS)
        ]
        begun = {str(execution.job.id) for execution in started}
        reports = [ExecutionReport(job_id, "lease_lost") for job_id in tokens if job_id not in begun]
        for report in reports:
            logger.info("claim no longer holds the job; nothing to do", extra={"job_id": report.job_id})
        self.count_lateness(execution for execution in started if not self.waits_for_slot(execution))
        pool = _delivery_pool()
        pending = {pool.submit(self.deliver, execution, tokens[str(execution.job.id)]) for execution in started}
        while pending:
            ended, pending = wait(pending, return_when=FIRST_COMPLETED)
            if pending:
                more, pending = wait(pending, timeout=RECORD_GATHER_SECONDS)
                ended |= more
            reports.extend(self.record([future.result() for future in ended]))
        return reports

    def _still_stored(self, job_ids: Sequence[str]) -> set[str]:
        """The jobs of refused outcomes still stored (a lease lost), the others deleted; all
        taken as stored when the database cannot say (the warning as before)."""
        try:
            return self.store.jobs_still_stored(job_ids)
        except Exception:
            return set(job_ids)

    def start(self, claim: Claim) -> StartedExecution | ExecutionReport:
        """Start a claim: its execution, or a report when the lease was lost (nothing to do)."""
        job_id = claim.job_id
        started = self.store.start_execution(job_id, claim.lock_token, LEASE_MARGIN_SECONDS)
        if started is None:
            logger.info("claim no longer holds the job; nothing to do", extra={"job_id": job_id})
            return ExecutionReport(job_id, "lease_lost")
        if claim.reclaimed:
            started = self.with_losses(started)
        if not self.waits_for_slot(started):  # counted once it has its slot (it may be handed back)
            self.count_lateness([started])
        return started

    def with_losses(self, started: StartedExecution) -> StartedExecution:
        """``started``, whose lease was reclaimed (its last runner died or stalled), with how often
        it was lost with its runners when it is a manual or chained run (one statement, on that
        rare path only): ``given_up`` bounds such a run by the job's ``max_attempts`` (a target
        that kills its runner every time), and it is numbered after its losses (attempt 2 after
        one: its row, written by the same statement, and its ``X-Scheduler-Attempt``)."""
        if started.trigger not in (Trigger.MANUAL, Trigger.CHAIN):
            return started
        lost = self.store.lost_runs(started)
        return structs.replace(started, lost_before=lost, attempt=1 + lost) if lost else started

    def count_lateness(self, executions: Iterable[StartedExecution]) -> None:
        """Count how late each started execution began (``telemetry.count_lateness``)."""
        count_lateness(self.metrics, executions)

    def count_skips(self, skips: Sequence[Skip]) -> None:
        """Count the occurrences recorded as skipped (the metric, by reason)."""
        count_skips(self.metrics, skips)

    def deliver(self, started: StartedExecution, lock_token: str) -> Finished | SlotHandBack:
        """Deliver a started execution (never raises for the target's sake); a limited one whose
        key stayed full is handed back instead (``deliver_within_limits``)."""
        began = time.monotonic()
        job_id = str(started.job.id)
        refused = not_to_make(started, lambda: job_calendars(self.store, started.job))
        if refused is not None:
            result = refused
        elif started.job.limits:
            return self.deliver_within_limits(started, lock_token)
        else:
            renewed = self._renewed_lease(started, lock_token)
            if not isinstance(renewed, StartedExecution):
                return renewed
            started = renewed
            result = deliver_started(
                started, job_id, self.decrypt_target, self.policy, self.remaining_seconds, log_fields(started)
            )
        return Finished(job_id, lock_token, started, result, time.monotonic() - began)

    def _renewed_lease(self, started: StartedExecution, lock_token: str) -> StartedExecution | Finished | SlotHandBack:
        """The started execution, its lease renewed (fenced by its token) when the one it was
        claimed or kept with no longer leaves room for the delivery (``lease_too_short``: the
        database's answer reached this runner late). What to record instead when the lease was
        taken over meanwhile (nothing is delivered: the job is another runner's), or when the
        renewal's own answer came late too (handed back, claimed again after a pause)."""
        if lease_too_short(started) is None:
            return started
        job_id = str(started.job.id)
        timeout = target_timeout(started)
        sent_at = time.monotonic()
        if job_id not in self.store.extend_leases([(job_id, lock_token, timeout + self.lease_margin_seconds)]):
            error = "the lease was taken over before the delivery began (the database's answer reached the runner late)"
            return Finished(job_id, lock_token, started, Outcome(FAILED, True, error=error), 0.0)
        renewed = structs.replace(started, deliver_by=sent_at + timeout + self.lease_margin_seconds / 2)
        too_late = lease_too_short(renewed)
        return renewed if too_late is None else self.hand_back_unwaited(renewed, lock_token, too_late)

    def waits_for_slot(self, started: StartedExecution) -> bool:
        """Whether delivering a started execution first takes a slot of its target's key (the
        job has ``limits``, and the occurrence is not given up)."""
        return bool(started.job.limits) and given_up(started) is None

    def slot_wait(self, started: StartedExecution, lock_token: str) -> SlotWait:
        """A limited delivery's wait for its slot, starting now."""
        limit = _limit_of(started)
        timeout = target_timeout(started)
        began = time.monotonic()
        return SlotWait(started, lock_token, limit, timeout, began, began + SLOT_LEASE_SECONDS / 2)

    def take_slot(self, wait: SlotWait) -> str | None:
        """A slot of the wait's key (its token), held over the target's timeout and the lease
        margin; None while the key is full."""
        return self.store.take_target_slot(wait.limit, wait.job_id, wait.timeout + self.lease_margin_seconds)

    def keep_waiting(self, waits: Sequence[SlotWait], now: float) -> list[tuple[SlotWait, Outcome]]:
        """Keep the waits going: the leases of those whose wait outlasts half of it kept, in one
        statement. Answers the waits that must end, each with its retryable failure: the
        executor's time ran out, or the lease was taken over."""
        ended: list[tuple[SlotWait, Outcome]] = []
        due: list[SlotWait] = []
        for one in waits:
            if self._short_of_time(one):
                error = f"no slot before the executor's time ran out: {one.limit.describe()}"
                ended.append((one, Outcome(FAILED, True, error=error)))
            elif now >= one.kept_until:
                due.append(one)
        sent_at = time.monotonic()
        kept = self.store.extend_leases([(w.job_id, w.lock_token, SLOT_LEASE_SECONDS + w.timeout) for w in due])
        for one in due:
            if one.job_id in kept:
                one.kept_until = now + SLOT_LEASE_SECONDS / 2
                deliver_by = sent_at + SLOT_LEASE_SECONDS + one.timeout - self.lease_margin_seconds / 2
                one.started = structs.replace(one.started, deliver_by=deliver_by)
            else:
                error = f"the lease was taken over while waiting: {one.limit.describe()}"
                ended.append((one, Outcome(FAILED, True, error=error)))
        return ended

    def deliver_in_slot(self, wait: SlotWait, token: str) -> Finished | SlotHandBack:
        """Deliver a limited job holding its slot, then give the slot back; a wait that was
        refused is recorded on the execution (late, and why). A job that changed while it waited
        (an edit, a pause) is handed back instead, to be claimed again as it is now; one whose
        lease was lost (or that was deleted) is not delivered."""
        started, began = wait.started, wait.began
        if wait.refused:
            stale = self._stale_after_waiting(wait, token)
            if stale is not None:
                return stale
        try:
            if wait.refused:  # its start moves to now: the wait is lateness, not the target's time
                waited_ms = int((time.monotonic() - wait.began) * 1000)
                moved = self.store.record_wait(
                    wait.job_id,
                    wait.lock_token,
                    started.started_at,
                    started.execution_id,
                    waited_ms,
                    wait.limit.describe(),
                )
                if moved is None:
                    outcome = Outcome(FAILED, True, error=f"the lease was lost while waiting: {wait.limit.describe()}")
                    return self.ended_wait(wait, outcome)
                waited_ms += started.waited_ms  # with its wait before a hand-back, as record_wait adds them
                started = structs.replace(started, started_at=moved, waited_ms=waited_ms)
                wait.started, began = started, time.monotonic()
            renewed = self._renewed_lease(started, wait.lock_token)
            if not isinstance(renewed, StartedExecution):
                return renewed
            started = wait.started = renewed
            # A limited delivery's, once it has its slot: its lateness without the wait, and the wait.
            self.count_lateness([started])
            count_slot_wait(self.metrics, started)
            result = deliver_started(
                started, wait.job_id, self.decrypt_target, self.policy, self.remaining_seconds, log_fields(started)
            )
        finally:
            self.store.release_target_slot(token)
        return Finished(wait.job_id, wait.lock_token, started, result, time.monotonic() - began)

    def _stale_after_waiting(self, wait: SlotWait, token: str) -> Finished | SlotHandBack | None:
        """None when the job is as it was claimed and its lease stands; else, the slot given
        back, what to record in place of the delivery."""
        started = wait.started
        version = self.store.running_version(wait.job_id, wait.lock_token, started.execution_id)
        if version == started.job.version:
            return None
        self.store.release_target_slot(token)
        if version is None:
            outcome = Outcome(FAILED, True, error=f"the lease was lost while waiting: {wait.limit.describe()}")
            return self.ended_wait(wait, outcome)
        waited = time.monotonic() - wait.began
        why = f"{wait.limit.describe()}; the job changed while it waited"
        return SlotHandBack(wait.job_id, wait.lock_token, started.execution_id, started.started_at, waited, why)

    def ended_wait(self, wait: SlotWait, result: Outcome) -> Finished:
        """A wait's delivery as ended, with ``result``."""
        return Finished(wait.job_id, wait.lock_token, wait.started, result, time.monotonic() - wait.began)

    def deliver_within_limits(self, started: StartedExecution, lock_token: str) -> Finished | SlotHandBack:
        """Deliver a job with ``limits`` in this thread (a deployed executor's): take a slot of
        its key first (across every runner). While the key is full it tries again, backing off,
        for at most ``SLOT_WAIT_IN_EXECUTOR_SECONDS``; past that, or when the executor's time is
        too short for the delivery, the job is handed back (``SlotHandBack``, which ``record``
        writes): its start undone, claimed again after a pause, never lost, its attempt not
        counted. (Local mode waits in ``SlotWaitingRoom`` instead, without a thread each.)"""
        wait, pause = self.slot_wait(started, lock_token), SLOT_FIRST_PAUSE
        while (token := self.take_slot(wait)) is None:
            wait.refused += 1
            waited = time.monotonic() - wait.began
            if waited + pause > SLOT_WAIT_IN_EXECUTOR_SECONDS or self._short_of_time(wait):
                return SlotHandBack(
                    wait.job_id, lock_token, started.execution_id, started.started_at, waited, wait.limit.describe()
                )
            time.sleep(pause * (0.5 + random.random()))
            pause = min(pause * 2, SLOT_MAX_PAUSE)
        return self.deliver_in_slot(wait, token)

    def hand_back_unwaited(self, started: StartedExecution, lock_token: str, why: str) -> SlotHandBack:
        """A delivery handed back without waiting, ``why`` (local mode: no room for it to wait
        for its slot, or its owner's slow deliveries hold their share of the threads): claimed
        again after a pause, as a deployed executor's that waited too long."""
        return SlotHandBack(str(started.job.id), lock_token, started.execution_id, started.started_at, 0.0, why)

    def _short_of_time(self, wait: SlotWait) -> bool:
        """Whether the executor's time left is too short for the wait's delivery and its record."""
        return self.remaining_seconds is not None and self.remaining_seconds() < wait.timeout + DEADLINE_RESERVE_SECONDS

    def hand_back(self, hand_back: SlotHandBack) -> ExecutionReport:
        """Write a hand-back (``deliver_within_limits``): the job is claimed again after a pause."""
        log = {"job_id": hand_back.job_id, "execution_id": hand_back.execution_id}
        if not self.store.hand_back_for_slot(hand_back, HAND_BACK_MIN_PAUSE_SECONDS, HAND_BACK_MAX_PAUSE_SECONDS):
            logger.warning("lease lost while waiting for a slot; nothing to hand back", extra=log)
            return ExecutionReport(hand_back.job_id, "fenced", hand_back.execution_id)
        logger.info(
            "handed back, to be claimed again",
            extra={**log, "waited_for": hand_back.waited_for, "waited_ms": round(hand_back.waited_seconds * 1000)},
        )
        self.metrics.count(c.METRIC_HANDED_BACK, 1)
        return ExecutionReport(hand_back.job_id, "handed_back", hand_back.execution_id)

    def record(self, ended: Sequence[Finished | SlotHandBack]) -> list[ExecutionReport]:
        """Record the outcomes (one statement for all that can take the fast path), and write the
        hand-backs among them."""
        reports = [self.hand_back(one) for one in ended if isinstance(one, SlotHandBack)]
        finished = [one for one in ended if isinstance(one, Finished)]
        if not finished:
            return reports
        completions = [
            Completion(
                done.job_id,
                done.lock_token,
                done.started.execution_id,
                done.result,
                started=done.started,
                elapsed_seconds=done.elapsed_seconds,
            )
            for done in finished
        ]
        recorded = service.complete_executions(self.store, completions, on_skips=self.count_skips)
        # The outcomes written only: one refused (the lease taken over) was counted lost by the claim.
        for status, count in Counter(done.result.status for done, ok in zip(finished, recorded) if ok).items():
            self.metrics.count(c.METRIC_EXECUTIONS, count, status=status)
        refused = [done.job_id for done, written in zip(finished, recorded) if not written]
        kept = self._still_stored(refused) if refused else set()
        for done, written in zip(finished, recorded):
            result, log = done.result, log_fields(done.started)
            if not written:
                extra = {**log, "status": result.status, "error": result.error}
                if done.job_id in kept:
                    logger.warning("lease lost; outcome not recorded", extra=extra)
                else:  # deleted meanwhile, with its executions: nothing taken over
                    logger.info("job deleted during its delivery; outcome not recorded", extra=extra)
                reports.append(ExecutionReport(done.job_id, "fenced", done.started.execution_id, result.status))
                continue
            if result.status == ExecutionStatus.SKIPPED:  # missed (``attempts.missed``): on record as a skip too
                self.count_skips([Skip(SkipReason.MISSED, 1, done.started.scheduled_at)])
            logger.info(
                "execution finished",
                extra={
                    **log,
                    "status": result.status,
                    "http_status": result.http_status,
                    "lateness_ms": round(done.started.lateness_ms),
                    "job_name": done.started.job.name,
                    "owner": done.started.job.owner,
                    "duration_ms": round(done.elapsed_seconds * 1000),
                    "error": result.error,
                },
            )
            reports.append(ExecutionReport(done.job_id, "completed", done.started.execution_id, result.status))
        return reports


def execute_invoke(
    event: Mapping[str, Any],
    *,
    store: ExecutionStore,
    decrypt_target: Callable[[dict], dict],
    policy: TargetPolicy,
    metrics: Metrics | None = None,
    remaining_seconds: Callable[[], float] | None = None,
) -> dict[str, Any]:
    """Run what an executor invoke carries (``invoke_claims``): one claim's report, or for a group
    ``{"executions": [report, ...]}``."""
    return run_invoke(Executor(store, decrypt_target, policy, metrics, remaining_seconds), event)


def run_invoke(executor: Executor, event: Mapping[str, Any]) -> dict[str, Any]:
    """What ``executor`` does with an executor invoke's ``event`` (``invoke_claims``): one claim's
    report, or for a group ``{"executions": [report, ...]}``."""
    claims = [Claim.from_event(claim) for claim in invoke_claims(event)]
    if "claims" not in event:
        return executor.run(claims[0]).as_dict()
    return {"executions": [report.as_dict() for report in executor.run_group(claims)]}


def _limit_of(started: StartedExecution) -> TargetLimit:
    """The limits of a started execution's job (one that has some), its owner's key."""
    limit = TargetLimit.of(started.job.limits, started.job.target, started.job.owner or "")
    assert limit is not None, "a job with limits"
    return limit

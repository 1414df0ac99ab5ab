"""The fan-out: claim due jobs and dispatch each claim to an executor, through an ``Invoker``.

With second precision (the default), one invocation keeps claiming through its minute, sleeping
until the next due time, so a job fires within about a second of its time although EventBridge
ticks once a minute. It runs a little past its minute so consecutive invocations overlap and no
second goes uncovered (overlap is safe: claims skip locked rows), and it stops before the Lambda
deadline. With minute precision it drains what is due and returns.
"""

from __future__ import annotations

import json
import logging
import queue
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Protocol

from scheduler import constants as c
from scheduler.store import Claim, StartedExecution, Store
from scheduler.telemetry import Metrics, NullMetrics

if TYPE_CHECKING:  # the fan-out Lambda does not load the delivery code
    from scheduler.executor import Executor, Finished

logger = logging.getLogger(__name__)

# How far past its minute a second-precision fan-out keeps claiming (the overlap).
OVERLAP_SECONDS = 5.0
# Time kept back from the Lambda deadline.
DEADLINE_RESERVE_SECONDS = 10.0
# The longest sleep between two claims: bounds the delay for a job created while we sleep.
MAX_IDLE_SECONDS = 1.0
MIN_IDLE_SECONDS = 0.02
# How long a fan-out whose executors are all busy waits before counting the live leases again.
FULL_RECHECK_SECONDS = 0.5
# Executions deleted per purge statement (each its own short transaction).
PURGE_BATCH = 500
MAX_PURGED_PER_RUN = 50_000


class Invoker(Protocol):
    """Hands claims to executors."""

    def claim(self, store: Store, limit: int, lease_seconds: float) -> list[Claim]:
        """Take up to ``limit`` due jobs, the way this invoker's executors expect them."""

    def capacity(self) -> int:
        """How many claims ``dispatch`` can take now (the fan-out claims no more than that)."""

    def dispatch(self, claims: list[Claim]) -> list[Claim]:
        """Start an executor for each claim; return the claims that could NOT be dispatched (the
        caller releases their leases so no job is lost)."""

    def close(self) -> None:
        """Wait for in-flight dispatches and free resources."""


class LambdaInvoker:
    """Asynchronous Lambda invokes (``InvocationType="Event"``) of the executor, from a bounded
    thread pool, with backoff on throttling."""

    RETRYABLE = {"TooManyRequestsException", "ThrottlingException", "ServiceException",
                 "EC2ThrottledException", "ResourceConflictException"}

    def __init__(self, client: Any, function_name: str, *, max_workers: int = 16, max_tries: int = 5,
                 base_delay: float = 0.05, sleep: Callable[[float], None] = time.sleep,
                 max_in_flight: int | None = None, in_flight: Callable[[], int] | None = None):
        self.client = client
        # The executor's reserved concurrency and the live leases (``Store.live_leases``).
        self.max_in_flight = max_in_flight
        self.in_flight = in_flight
        self._full_until = 0.0
        self.function_name = function_name
        self.max_tries = max_tries
        self.base_delay = base_delay
        self.sleep = sleep
        self.pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="invoke")

    def claim(self, store: Store, limit: int, lease_seconds: float) -> list[Claim]:
        """Leases only: each executor starts its own claim when its invoke arrives."""
        return store.claim_due(limit, lease_seconds)

    def capacity(self) -> int:
        """Unbounded without ``max_in_flight`` (the async invoke queues); else what the executor's
        reserved concurrency leaves beside the live leases."""
        if self.max_in_flight is None or self.in_flight is None:
            return 1_000_000
        now = time.monotonic()
        if now < self._full_until:  # saturated a moment ago: do not count the leases every round
            return 0
        room = max(self.max_in_flight - self.in_flight(), 0)
        if room == 0:
            self._full_until = now + FULL_RECHECK_SECONDS
        return room

    def _invoke(self, claim: Claim) -> bool:
        payload = json.dumps(claim.to_event()).encode()
        for attempt in range(1, self.max_tries + 1):
            try:
                self.client.invoke(FunctionName=self.function_name, InvocationType="Event", Payload=payload)
                return True
            except Exception as exc:  # botocore ClientError, connection errors
                code = getattr(exc, "response", {}).get("Error", {}).get("Code", type(exc).__name__)
                if attempt == self.max_tries or (code not in self.RETRYABLE and hasattr(exc, "response")):
                    logger.error("executor invoke failed", extra={"job_id": claim.job_id, "error": code})
                    return False
                self.sleep(random.uniform(0, self.base_delay * 2 ** attempt))
        return False

    def dispatch(self, claims: list[Claim]) -> list[Claim]:
        results = list(self.pool.map(self._invoke, claims))
        return [claim for claim, ok in zip(claims, results) if not ok]

    def close(self) -> None:
        self.pool.shutdown(wait=True)


class LocalInvoker:
    """Local mode's stand-in for the async invoke, batched: due jobs are claimed and started in
    one statement, delivered by a pool of threads, and their outcomes recorded in batches by
    one recorder thread (whatever finished within ``flush_seconds``, up to ``max_batch``).

    It takes no more claims than it has idle threads, so a started execution is delivered at
    once and never waits in a queue while its lease runs down. If an outcome cannot be
    recorded (the database is away for longer than the lease), the lease expires and the job is
    delivered again: at least once, never lost.
    """

    def __init__(self, executor: Executor, *, max_workers: int = 64, flush_seconds: float = 0.005,
                 max_batch: int = 200, record_retry_seconds: float = 60.0):
        self.executor = executor
        self.max_workers = max_workers
        self.flush_seconds = flush_seconds
        self.max_batch = max_batch
        self.record_retry_seconds = record_retry_seconds
        self.pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="executor")
        self._running = 0
        self._lock = threading.Lock()
        self._finished: queue.Queue[Finished | None] = queue.Queue()
        self._recorder = threading.Thread(target=self._record_loop, name="recorder", daemon=True)
        self._recorder.start()

    def claim(self, store: Store, limit: int, lease_seconds: float) -> list[Claim]:
        """Claimed and started at once (the lease covers the delivery, not ``lease_seconds``)."""
        return self.executor.claim_and_start(limit)

    def capacity(self) -> int:
        with self._lock:
            return self.max_workers - self._running

    def dispatch(self, claims: list[Claim]) -> list[Claim]:
        """Deliver claims taken by ``claim`` (each already started), one thread each."""
        for claim in claims:
            with self._lock:
                self._running += 1
            try:
                self.pool.submit(self._deliver, claim.started, claim.lock_token)
            except RuntimeError:  # shut down: the lease expires and the job is delivered again
                with self._lock:
                    self._running -= 1
        return []

    def _deliver(self, execution: StartedExecution, lock_token: str) -> None:
        try:
            self._finished.put(self.executor.deliver(execution, lock_token))
        except Exception:  # a bug, not the target's failure: the lease expires and the job is reclaimed
            logger.exception("delivery failed", extra={"job_id": str(execution.job["id"])})
        finally:
            with self._lock:
                self._running -= 1

    def _record_loop(self) -> None:
        closing = False
        while not closing:
            first = self._finished.get()
            if first is None:
                break
            batch = [first]
            flush_at = time.monotonic() + self.flush_seconds
            while len(batch) < self.max_batch:
                try:
                    item = self._finished.get(timeout=max(flush_at - time.monotonic(), 0))
                except queue.Empty:
                    break
                if item is None:
                    closing = True
                    break
                batch.append(item)
            self._record(batch)

    def _record(self, batch: list[Finished]) -> None:
        give_up = time.monotonic() + self.record_retry_seconds
        while True:
            try:
                self.executor.record(batch)
                return
            except Exception:  # the database is away: try again until the leases would be gone
                if time.monotonic() >= give_up:
                    logger.exception("outcomes not recorded; their jobs run again when the leases expire",
                                     extra={"jobs": len(batch)})
                    return
                logger.warning("recording outcomes failed; retrying", exc_info=True)
                time.sleep(0.5)

    def close(self) -> None:
        """Wait for the deliveries under way and record their outcomes."""
        self.pool.shutdown(wait=True)
        self._finished.put(None)
        self._recorder.join()


@dataclass
class FanoutReport:
    """What one fan-out run did."""

    claimed: int = 0
    dispatched: int = 0
    released: int = 0
    rounds: int = 0
    purged: int = 0
    duration_ms: float = 0.0
    job_ids: list[str] = field(default_factory=list, repr=False)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (without the job ids)."""
        return {"claimed": self.claimed, "dispatched": self.dispatched, "released": self.released,
                "rounds": self.rounds, "purged": self.purged, "duration_ms": round(self.duration_ms)}


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


def run_fanout(store: Store, invoker: Invoker, *, budget_seconds: float, batch_size: int = 100,
               lease_seconds: float = 120, metrics: Metrics | None = None, stop: threading.Event | None = None,
               retention_days: int | None = None, drain_limit_seconds: float | None = None,
               clock: Callable[[], float] = time.monotonic) -> FanoutReport:
    """Claim and dispatch until ``budget_seconds`` have passed, sleeping until the next due time
    between rounds. A full batch is followed by another claim at once, past the budget if need
    be (what is due now is drained), but never past ``drain_limit_seconds`` (the Lambda
    deadline less a reserve), so a backlog cannot hold the function until it is killed.

    ``lease_seconds`` must cover the wait in the invoke queue: an executor arriving later finds
    its lease taken over and does nothing.
    """
    metrics = metrics or NullMetrics()
    stop = stop or threading.Event()
    began = clock()
    deadline = began + budget_seconds
    drain_deadline = began + drain_limit_seconds if drain_limit_seconds is not None else float("inf")
    report = FanoutReport()
    backlog, oldest = store.due_backlog()
    metrics.gauge(c.METRIC_DUE_BACKLOG, backlog)
    metrics.gauge(c.METRIC_OLDEST_DUE_AGE_S, oldest, unit="Seconds")
    # Retention: a batch in each round without a full claim, while batches come back full and up
    # to a cap per run, so the purge keeps up with the execution rate without delaying due jobs.
    purge_more = bool(retention_days)
    while not stop.is_set():
        room = min(batch_size, invoker.capacity())
        if room <= 0:  # executors saturated: claim nothing we would have to give back
            stop.wait(MIN_IDLE_SECONDS)
            if clock() >= min(deadline, drain_deadline):
                break
            continue
        claims = invoker.claim(store, room, lease_seconds)
        report.rounds += 1
        if claims:
            report.claimed += len(claims)
            lost = sum(1 for claim in claims if claim.reclaimed)
            if lost:  # their runners died: the claim marked the executions lost (queries.sql)
                metrics.count(c.METRIC_EXECUTIONS, lost, status="lost")
            report.job_ids.extend(claim.job_id for claim in claims)
            refused = invoker.dispatch(claims)
            for claim in refused:
                if store.release(claim.job_id, claim.lock_token):
                    report.released += 1
            report.dispatched += len(claims) - len(refused)
            metrics.count(c.METRIC_CLAIMED, len(claims))
            metrics.count(c.METRIC_DISPATCHED, len(claims) - len(refused))
            if len(refused) < len(claims) and len(claims) == room and clock() < drain_deadline:
                continue  # more may be due right now
            if refused:
                stop.wait(0.05)  # executors saturated: let them drain a little
        if purge_more:
            purged = store.purge_executions(retention_days, batch=PURGE_BATCH, max_batches=1)
            report.purged += purged
            purge_more = purged == PURGE_BATCH and report.purged < MAX_PURGED_PER_RUN
            if purge_more and clock() < deadline:
                continue
        now = clock()
        if now >= deadline:
            break
        wait = store.next_due_in()
        # Due but not claimable (rows held by a concurrent claim): a short pause, not a spin.
        wait = MAX_IDLE_SECONDS if wait is None else min(max(wait, MIN_IDLE_SECONDS), MAX_IDLE_SECONDS)
        stop.wait(min(wait, deadline - now))
    report.duration_ms = (clock() - began) * 1000
    metrics.milliseconds(c.METRIC_FANOUT_DURATION_MS, report.duration_ms)
    return report

"""The dispatch pipelines: how claims the fan-out took reach an executor.

Two pipelines, each named with the statement its claims are taken by (``ClaimMode``):

- ``LambdaDispatch`` (the deployment): leases only (``claim_due``); claims are handed to executor
  Lambdas by asynchronous invokes, one claim each while few are claimed at once, a group of up
  to ``claims_per_invoke`` each under a backlog (``group_claims``); the executor starts its
  claims (``start_execution``, ``start_executions``), delivers them and records the outcomes.
- ``InProcessDispatch`` (local mode): claimed and started in one statement
  (``claim_and_start``), delivered by a pool of threads, and the outcomes recorded in batches
  through a ``TimedBatchBuffer``.
"""

from __future__ import annotations

import json
import logging
import math
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from scheduler.core.domain import Claim, Outcome, StartedExecution
from scheduler.runner.threads import CallThreads, TimedBatchBuffer
from scheduler.runner.waiting_room import SlotWaitingRoom

if TYPE_CHECKING:  # the fan-out Lambda does not load the delivery code
    from scheduler.core.limits import SlotHandBack
    from scheduler.ports import FanoutStore
    from scheduler.runner.executor import Executor, Finished, SlotWait

logger = logging.getLogger(__name__)

# Fairness between owners in local mode (InProcessDispatch): the share of the delivery threads
# that one owner's slow deliveries (going on past SLOW_DELIVERY_SECONDS) may hold, and the shares
# of the waiting room that one key's and one owner's waits may take.
SLOW_DELIVERY_SECONDS = 1.0
OWNER_THREAD_SHARE = 0.75
KEY_WAITING_SHARE = 0.25
OWNER_WAITING_SHARE = 0.5
OWNER, KEY = "owner", "key"

# How long a dispatch whose executors are all busy waits before counting the live leases again: a
# reserved concurrency of C turns over at most C / FULL_RECHECK_SECONDS invokes a second while full
# (at 0.5 s, 50 executors capped a burst near 100 jobs/s), and each count reads the due rows.
FULL_RECHECK_SECONDS = 0.1
#: Threads of a ``LambdaDispatch`` invoking at once (and connections of its client's pool).
INVOKE_THREADS = 16


@dataclass(frozen=True)
class ClaimMode:
    """Which statement a dispatch's claims are taken by (its ``name``, a query of queries.sql).

    ``claim_due`` leases due jobs for ``lease_seconds`` (the executor starts each later);
    ``claim_and_start`` leases and starts them at once, each lease over its target's timeout
    plus ``lease_margin_seconds``.
    """

    name: str
    lease_margin_seconds: float = 30.0

    def claim(self, store: FanoutStore, limit: int, lease_seconds: float) -> list[Claim]:
        """Take up to ``limit`` due jobs with this mode's statement."""
        if self.name == "claim_due":
            return store.claim_due(limit, lease_seconds)
        if self.name == "claim_and_start":
            return store.claim_and_start(limit, self.lease_margin_seconds)
        raise ValueError(f"unknown claim mode {self.name!r}")


#: Leases only: the executor starts each claim when its invoke arrives.
CLAIM_DUE = ClaimMode("claim_due")
#: Leased and started in one statement (a runner that delivers at once what it claims).
CLAIM_AND_START = ClaimMode("claim_and_start")


class Dispatch(Protocol):
    """Hands claims to executors."""

    claim_mode: ClaimMode

    def capacity(self) -> int:
        """How many claims ``dispatch`` can take now (the fan-out claims no more than that)."""

    def dispatch(self, claims: list[Claim]) -> list[Claim]:
        """Start an executor for each claim; return the claims that could NOT be dispatched (the
        caller releases their leases so no job is lost)."""

    def close(self) -> None:
        """Wait for in-flight dispatches and free resources."""


@runtime_checkable
class WaitsForRoom(Protocol):
    """A dispatch that can tell when its executors have room again (local mode's threads): the
    fan-out waits for that instead of sleeping a fixed pause, and claims a batch worth a statement."""

    def room_worth_a_claim(self) -> int:
        """The room the fan-out waits for (a moment at most) before it claims after a full claim."""

    def wait_for_room(self, timeout: float) -> None:
        """Return once ``room_worth_a_claim`` executors are free, or after ``timeout`` seconds."""


def release_connection(answer: dict[str, Any]) -> None:
    """Read an accepted invoke's (empty) body to its end, which gives the connection back to the
    client's pool; left unread, every invoke would open a new one (a TLS handshake on AWS). The
    invoke was accepted: a failure here is not a failed dispatch."""
    try:
        answer["Payload"].read()
    except Exception:
        logger.debug("invoke answer not read", exc_info=True)


def group_claims(claims: Sequence[Claim], most: int, threads: int, *, busy: bool = False) -> list[list[Claim]]:
    """The claims of one dispatch, grouped for the invokes that carry them. Quiet (no more claims
    than invoking threads, and not ``busy``): one claim per invoke, each job its own executor.
    Under a backlog: more claims than threads are spread over the threads, up to ``most`` an
    invoke; ``busy`` (the executors already hold many leases: the backlog sits in Lambda's queue,
    out of the claim's sight) groups ``most`` an invoke. A group costs one invoke, one start and
    one completion statement (or a few), not one each per job."""
    size = most if busy else math.ceil(len(claims) / max(threads, 1))
    size = max(1, min(most, size))
    return [list(claims[i : i + size]) for i in range(0, len(claims), size)]


def invoke_payload(group: Sequence[Claim]) -> dict[str, Any]:
    """The executor's invoke payload for a group: one claim's event (``Claim.to_event``), or
    ``{"claims": [event, ...]}`` for several."""
    if len(group) == 1:
        return group[0].to_event()
    return {"claims": [claim.to_event() for claim in group]}


class LambdaDispatch:
    """Asynchronous Lambda invokes (``InvocationType="Event"``) of the executor, from a bounded
    thread pool, with backoff on throttling; under a backlog each carries a group of claims
    (``group_claims``, up to ``claims_per_invoke``)."""

    claim_mode = CLAIM_DUE
    RETRYABLE = {
        "TooManyRequestsException",
        "ThrottlingException",
        "ServiceException",
        "EC2ThrottledException",
        "ResourceConflictException",
    }

    def __init__(
        self,
        client: Any,
        function_name: str,
        *,
        max_workers: int = INVOKE_THREADS,
        max_tries: int = 5,
        base_delay: float = 0.05,
        sleep: Callable[[float], None] = time.sleep,
        max_in_flight: int | None = None,
        in_flight: Callable[[], int] | None = None,
        claims_per_invoke: int = 1,
    ):
        self.client = client
        self.claims_per_invoke = claims_per_invoke
        self.threads = max_workers
        self.function_name = function_name
        # What every invoke sends alike, built once; the client's pool should hold max_workers
        # connections (scheduler.wiring.lambda_client_config), else threads open new ones.
        self._invoke_args = {"FunctionName": function_name, "InvocationType": "Event"}
        self.max_tries = max_tries
        self.base_delay = base_delay
        self.sleep = sleep
        # The executor's reserved concurrency and the live leases (``FanoutStore.live_leases``).
        self.max_in_flight = max_in_flight
        self.in_flight = in_flight
        self._full_until = 0.0
        # Live leases at the last count: as many as the invoking threads or more, the executors
        # are busy and claims go out in full groups (``group_claims``).
        self._leases_seen = 0
        self.pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="invoke")

    def capacity(self) -> int:
        """Unbounded without ``max_in_flight`` (the async invoke queues; throttles are retried in
        ``_invoke``); else what the executor's reserved concurrency leaves beside the live leases."""
        if self.max_in_flight is None or self.in_flight is None:
            return 1_000_000
        now = time.monotonic()
        if now < self._full_until:  # saturated a moment ago: do not count the leases every round
            return 0
        self._leases_seen = self.in_flight()
        room = max(self.max_in_flight - self._leases_seen, 0)
        if room == 0:
            self._full_until = now + FULL_RECHECK_SECONDS
        return room

    def _invoke(self, group: list[Claim]) -> bool:
        job_ids = [claim.job_id for claim in group]
        try:
            payload = json.dumps(invoke_payload(group)).encode()
        except Exception:  # never raise out of the pool: the caller releases what was not sent
            logger.exception("executor payload not built", extra={"job_ids": job_ids})
            return False
        for attempt in range(1, self.max_tries + 1):
            try:
                answer = self.client.invoke(**self._invoke_args, Payload=payload)
            except Exception as exc:  # botocore ClientError, connection errors
                code = getattr(exc, "response", {}).get("Error", {}).get("Code", type(exc).__name__)
                if attempt == self.max_tries or (code not in self.RETRYABLE and hasattr(exc, "response")):
                    logger.error("executor invoke failed", extra={"job_ids": job_ids, "error": code})
                    return False
                self.sleep(random.uniform(0, self.base_delay * 2**attempt))
                continue
            release_connection(answer)
            return True
        return False

    def dispatch(self, claims: list[Claim]) -> list[Claim]:
        busy = self._leases_seen >= self.threads
        groups = group_claims(claims, self.claims_per_invoke, self.threads, busy=busy)
        results = list(self.pool.map(self._invoke, groups))
        return [claim for group, ok in zip(groups, results) if not ok for claim in group]

    def close(self) -> None:
        self.pool.shutdown(wait=True)


class InProcessDispatch:
    """Local mode's stand-in for the async invoke, batched: due jobs are claimed and started in
    one statement, delivered by a pool of threads, and their outcomes recorded in batches (a
    ``TimedBatchBuffer``: whatever finished within ``flush_seconds``, up to ``max_batch``).

    It takes no more claims than it has idle threads, so a started execution is delivered at
    once and never waits in a queue while its lease runs down. If an outcome cannot be
    recorded (the database is away for longer than the lease), the lease expires and the job is
    delivered again: at least once, never lost.

    A job with ``limits`` whose key is full waits for its slot in a ``SlotWaitingRoom`` (one
    thread for all of them), not in a delivery thread: a burst on one limited target leaves the
    threads to the other jobs. Up to ``max_waiting`` claims wait there (default 1,000: their
    leases are kept in one statement, and only the first wait of a full key asks for a slot);
    a limited claim beyond that is handed back, claimed again after a pause, and the claims go
    on for the other jobs.

    Between owners: one key's waits take at most a quarter of the waiting room, one owner's at
    most half (``KEY_WAITING_SHARE``, ``OWNER_WAITING_SHARE``), and an owner's slow deliveries
    (going on past ``SLOW_DELIVERY_SECONDS``) at most three quarters of the threads
    (``OWNER_THREAD_SHARE``): a claim beyond its share is handed back the same way, so that one
    owner's hanging targets or full keys leave room to the others. Quick deliveries never count:
    a burst of one owner's jobs uses every thread.
    """

    claim_mode = CLAIM_AND_START

    def __init__(
        self,
        executor: Executor,
        *,
        max_workers: int = 64,
        flush_seconds: float = 0.005,
        max_batch: int = 200,
        record_retry_seconds: float = 60.0,
        max_waiting: int = 1000,
    ):
        self.claim_mode = ClaimMode("claim_and_start", executor.lease_margin_seconds)
        self.executor = executor
        self.max_workers = max_workers
        self.max_waiting = max_waiting
        self.record_retry_seconds = record_retry_seconds
        self.pool = CallThreads(max_workers, "executor")
        self.waits: SlotWaitingRoom[SlotWait] = SlotWaitingRoom(
            executor.take_slot, executor.keep_waiting, self._start_in_slot, self._end_wait
        )
        self._running = 0
        self._waiting = 0
        # The waits by owner and by key (their shares of the room), and each owner's deliveries
        # under way by execution id, with when they began (its slow ones' share of the threads).
        self._waits_of: Counter[tuple[str, str]] = Counter()
        self._delivering: dict[str, dict[str, float]] = {}
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)  # notified when room_worth_a_claim is free
        self._worth_a_claim = max(1, max_workers // 2)
        # Finished deliveries (a hand-back only in a deployed executor: none here, in practice).
        self.outcomes: TimedBatchBuffer[Finished | SlotHandBack] = TimedBatchBuffer(
            self._record, max_size=max_batch, flush_seconds=flush_seconds, name="recorder"
        )

    def capacity(self) -> int:
        with self._lock:
            return self._room_now()

    def _room_now(self) -> int:
        """Claims it can take now (under the lock): idle threads. A full waiting room does not
        stop the claims (one owner's waits would hold back every job): a limited claim that
        finds it full is handed back (``dispatch``)."""
        return self.max_workers - self._running

    def _freed(self) -> None:
        """Under the lock, after a thread or a wait's place was freed: wake the fan-out waiting
        for room."""
        if self._room_now() >= self._worth_a_claim:
            self._room.notify_all()

    def room_worth_a_claim(self) -> int:
        """Half the threads: a claim taken while the other half still delivers overlaps them, and
        a burst is claimed in batches worth their statement, not a few jobs at a time."""
        return self._worth_a_claim

    def wait_for_room(self, timeout: float) -> None:
        with self._room:
            self._room.wait_for(lambda: self._room_now() >= self._worth_a_claim, timeout)

    def dispatch(self, claims: list[Claim]) -> list[Claim]:
        """Deliver claims taken by ``claim_and_start`` (each already started), one thread each;
        hand back those beyond their owner's (or key's) share."""
        unlimited: list[StartedExecution] = []
        now = time.monotonic()
        for claim in claims:
            started = claim.started
            assert started is not None, "claim_and_start starts what it claims"
            owner = str(started.job.owner)
            if self.executor.waits_for_slot(started):
                wait = self.executor.slot_wait(started, claim.lock_token)
                with self._lock:
                    refused = self._no_room_to_wait(owner, wait.limit.slot_key)
                    if refused is None:
                        self._waiting += 1
                        self._waits_of.update(((OWNER, owner), (KEY, wait.limit.slot_key)))
                if refused is None:
                    self.waits.add(wait)
                else:  # claimed again after a pause, its start undone
                    why = f"{wait.limit.describe()}; {refused}"
                    self.outcomes.put(self.executor.hand_back_unwaited(started, claim.lock_token, why))
                continue
            with self._lock:
                busy = self._slow_deliveries(owner, now) >= self._owner_threads
                if not busy:
                    self._running += 1
                    self._delivering.setdefault(owner, {})[started.execution_id] = now
            if busy:
                why = (
                    f"its owner's slow deliveries hold {self._owner_threads} of the {self.max_workers} delivery threads"
                )
                self.outcomes.put(self.executor.hand_back_unwaited(started, claim.lock_token, why))
                continue
            unlimited.append(started)
            try:
                self.pool.submit(self._deliver, started, claim.lock_token)
            except RuntimeError:  # shut down: the lease expires and the job is delivered again
                with self._lock:
                    self._running -= 1
                    self._delivered(owner, started.execution_id)
        # A limited delivery's lateness is counted when it takes its slot (the wait is part of it).
        self.executor.count_lateness(unlimited)
        return []

    @property
    def _owner_threads(self) -> int:
        return max(1, int(self.max_workers * OWNER_THREAD_SHARE))

    def _no_room_to_wait(self, owner: str, key: str) -> str | None:
        """Under the lock: why a limited claim of ``owner`` on ``key`` cannot wait (the room, the
        key's share of it or the owner's is full), None when it can."""
        if self._waiting >= self.max_waiting:
            return "the waiting room is full"
        if self._waits_of[(KEY, key)] >= max(1, int(self.max_waiting * KEY_WAITING_SHARE)):
            return "the key's share of the waiting room is full"
        if self._waits_of[(OWNER, owner)] >= max(1, int(self.max_waiting * OWNER_WAITING_SHARE)):
            return "its owner's share of the waiting room is full"
        return None

    def _slow_deliveries(self, owner: str, now: float) -> int:
        """Under the lock: the owner's deliveries under way for more than SLOW_DELIVERY_SECONDS."""
        under_way = self._delivering.get(owner)
        if not under_way or len(under_way) < self._owner_threads:
            return 0
        return sum(1 for began in under_way.values() if now - began > SLOW_DELIVERY_SECONDS)

    def _delivered(self, owner: str, execution_id: str) -> None:
        """Under the lock: a delivery of ``owner`` is over (or never began)."""
        under_way = self._delivering.get(owner)
        if under_way is not None:
            under_way.pop(execution_id, None)
            if not under_way:
                del self._delivering[owner]

    def _left_the_room(self, wait: SlotWait) -> None:
        """Under the lock: a wait left the waiting room (it has its slot, or it ended)."""
        self._waiting -= 1
        for counted in ((OWNER, str(wait.started.job.owner)), (KEY, wait.limit.slot_key)):
            left = self._waits_of[counted] - 1
            if left > 0:
                self._waits_of[counted] = left
            else:
                del self._waits_of[counted]

    def _deliver(self, execution: StartedExecution, lock_token: str) -> None:
        try:
            self.outcomes.put(self.executor.deliver(execution, lock_token))
        except Exception:  # a bug, not the target's failure: the lease expires and the job is reclaimed
            logger.exception("delivery failed", extra={"job_id": str(execution.job.id)})
        finally:
            with self._lock:
                self._running -= 1
                self._delivered(str(execution.job.owner), execution.execution_id)
                self._freed()

    def _start_in_slot(self, wait: SlotWait, token: str) -> None:
        """A wait that got its slot: delivered by a thread (the waiting room's call)."""
        owner, execution_id = str(wait.started.job.owner), wait.started.execution_id
        with self._lock:
            self._left_the_room(wait)
            self._running += 1
            self._delivering.setdefault(owner, {})[execution_id] = time.monotonic()
            self._freed()
        try:
            self.pool.submit(self._deliver_in_slot, wait, token)
        except RuntimeError:  # shut down: the slot's lease and the job's expire; delivered again
            with self._lock:
                self._running -= 1
                self._delivered(owner, execution_id)

    def _deliver_in_slot(self, wait: SlotWait, token: str) -> None:
        try:
            self.outcomes.put(self.executor.deliver_in_slot(wait, token))
        except Exception:  # a bug, not the target's failure: the lease expires and the job is reclaimed
            logger.exception("delivery failed", extra={"job_id": wait.job_id})
        finally:
            self.waits.nudge(wait.key)  # its slot is free: the next wait of the key need not back off
            with self._lock:
                self._running -= 1
                self._delivered(str(wait.started.job.owner), wait.started.execution_id)
                self._freed()

    def _end_wait(self, wait: SlotWait, outcome: Outcome) -> None:
        """A wait that cannot go on (its lease taken over): its outcome recorded as a delivery's."""
        with self._lock:
            self._left_the_room(wait)
            self._freed()
        self.outcomes.put(self.executor.ended_wait(wait, outcome))

    def _record(self, batch: Sequence[Finished | SlotHandBack]) -> None:
        give_up = time.monotonic() + self.record_retry_seconds
        while True:
            try:
                self.executor.record(batch)
                return
            except Exception:  # the database is away: try again until the leases would be gone
                if time.monotonic() >= give_up:
                    logger.exception(
                        "outcomes not recorded; their jobs run again when the leases expire", extra={"jobs": len(batch)}
                    )
                    return
                logger.warning("recording outcomes failed; retrying", exc_info=True)
                time.sleep(0.5)

    def close(self) -> None:
        """Wait for the waits to have their slots and the deliveries under way to end, and
        record their outcomes."""
        self.waits.close()
        self.pool.shutdown()
        self.outcomes.close()

"""Local mode's dispatch pipeline (``InProcessDispatch``): due jobs claimed and started in one
statement (``claim_and_start``), delivered by a pool of threads, limited ones waiting for their
slot in a waiting room, and the outcomes recorded in batches through a ``TimedBatchBuffer``; with
fair shares of the threads and of the waiting room between owners."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

from scheduler.core.domain import Claim, Outcome, StartedExecution
from scheduler.core.errors import StoreUnavailable
from scheduler.runner.delivering import target_timeout
from scheduler.runner.dispatch import CLAIM_AND_START, ClaimMode
from scheduler.runner.threads import CallThreads, TimedBatchBuffer
from scheduler.runner.waiting_room import SlotWaitingRoom
from scheduler.runner.wakes import WakeGuard

if TYPE_CHECKING:
    from scheduler.core.limits import SlotHandBack
    from scheduler.runner.executor import Executor, Finished, SlotWait

logger = logging.getLogger(__name__)

# Fairness between owners in local mode (InProcessDispatch): the share of the delivery threads
# that one owner's slow deliveries (going on past SLOW_DELIVERY_SECONDS) may hold, and the shares
# of the waiting room that one key's and one owner's waits may take.
SLOW_DELIVERY_SECONDS = 1.0
OWNER_THREAD_SHARE = 0.75
KEY_WAITING_SHARE = 0.25
OWNER_WAITING_SHARE = 0.5
# How often each process checks for a sleep besides its claims (runner.wakes: within the grace).
WAKE_CHECK_SECONDS = 1.0
OWNER, KEY = "owner", "key"


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

    A laptop that slept: before each claim a ``WakeGuard`` checks whether the machine slept; if
    it did, the leases (and target slots) of every delivery this process holds are kept first,
    so that no claim takes them as lost while they go on (``keep_held_leases``).

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
        record_logging: Callable[[], AbstractContextManager[None]] = nullcontext,
        wakes: Callable[[Callable[[], None]], WakeGuard] = WakeGuard,
        wake_check_seconds: float = WAKE_CHECK_SECONDS,
    ):
        """``record_logging`` is entered around each recording of a batch (local mode's
        ``lines_held``: the batch's log lines written at once); ``wakes`` makes the guard checked
        before each claim and each slot taken, and every ``wake_check_seconds`` besides, from the
        call that keeps the leases held (a test's has its own clock)."""
        self.record_logging = record_logging
        self.claim_mode = ClaimMode("claim_and_start", executor.lease_margin_seconds)
        self.executor = executor
        self.max_workers = max_workers
        self.max_waiting = max_waiting
        self.record_retry_seconds = record_retry_seconds
        self.pool = CallThreads(max_workers, "executor")
        self._wakes = wakes(self.keep_held_leases)
        self.waits: SlotWaitingRoom[SlotWait] = SlotWaitingRoom(
            self._take_slot_awake, executor.keep_waiting, self._start_in_slot, self._end_wait
        )
        self._running = 0
        self._waiting = 0
        self.unrecorded = 0  # outcomes given up on (the database away past their leases)
        # The waits by owner and by key (their shares of the room), and each owner's deliveries
        # under way by execution id, with when they began (its slow ones' share of the threads).
        self._waits_of: Counter[tuple[str, str]] = Counter()
        self._delivering: dict[str, dict[str, float]] = {}
        self._ends: dict[str, float] = {}  # by execution id: by when each delivery ends (its lease)
        # The leases this process holds until their outcomes are recorded, by token: the job and by
        # when the delivery ends (time.monotonic()); and the target slots its deliveries hold, by
        # token: until when. Kept after the machine slept (keep_held_leases). A delivery's end as
        # known at its claim moves later when it waits for its slot (the waiting room renews its
        # lease), so its target's timeout is kept beside it: a kept lease covers a whole delivery.
        self._held: dict[str, tuple[str, float | None, float]] = {}
        self._slots: dict[str, float] = {}
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)  # notified when room_worth_a_claim is free
        self._worth_a_claim = max(1, max_workers // 2)
        # Finished deliveries (a hand-back only in a deployed executor: none here, in practice).
        self.outcomes: TimedBatchBuffer[Finished | SlotHandBack] = TimedBatchBuffer(
            self._record, max_size=max_batch, flush_seconds=flush_seconds, name="recorder"
        )
        threading.Thread(target=self._watch_wakes, args=(wake_check_seconds,), name="wake-watch", daemon=True).start()

    def capacity(self) -> int:
        """Claims it can take now; called before each claim, so a wake from a sleep is noticed
        (and this process's leases kept) before the claim that would take them."""
        self.settle()
        with self._lock:
            return self._room_now()

    def settle(self) -> None:
        """A wake noticed (this process's leases kept) and its grace waited out: before each
        claim, and before the fan-out marks lost the executions of jobs paused meanwhile."""
        hold = self._wakes.check()
        if hold:
            self._closing.wait(hold)

    def _watch_wakes(self, every: float) -> None:
        """The guard checked every ``every`` seconds beside the claims, until the close: this
        process keeps its leases and slots within that long of a wake whatever its fan-out does
        (at minute precision it sleeps to the next minute), before the other processes' grace ends
        and their claims or slot takes could find them expired."""
        while not self._closing.wait(every):
            try:
                self._wakes.check()
            except Exception:  # the database away: the next check keeps them
                logger.warning("keeping the leases held after a sleep failed; trying again", exc_info=True)

    def _take_slot_awake(self, wait: SlotWait) -> str | None:
        """``Executor.take_slot``, but no slot in a wake's grace (the waiting room tries again
        after its backoff): a slot taken in the instant after a wake would delete another
        process's slot, expired while the machine slept, before that process could keep it."""
        if self._wakes.check():
            return None
        return self.executor.take_slot(wait)

    def keep_held_leases(self) -> None:
        """Keep the leases of the deliveries this process holds (under way, waiting for their
        slot, or waiting to be recorded) and their target slots, each to the end of its delivery
        plus the lease margin: after a sleep, in one statement each. A delivery's end is at most
        its target's timeout away (a wait for a slot renewed its lease since its claim)."""
        now, margin = time.monotonic(), self.executor.lease_margin_seconds
        with self._lock:
            held, slots = list(self._held.items()), list(self._slots.items())
        store = self.executor.store
        kept = store.extend_leases(
            [(job, token, max((by or now) - now, timeout) + margin) for token, (job, by, timeout) in held]
        )
        kept_slots = store.extend_target_slots([(token, max(0.0, until - now) + margin) for token, until in slots])
        logger.log(
            logging.INFO if held or slots else logging.DEBUG,  # a process that held nothing says nothing more
            "after the sleep: kept %d of %d leases held and %d of %d target slots",
            len(kept),
            len(held),
            len(kept_slots),
            len(slots),
        )

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
        with self._lock:  # held until recorded (_record)
            self._held.update(
                (claim.lock_token, (claim.job_id, claim.started.deliver_by, target_timeout(claim.started)))
                for claim in claims
                if claim.started is not None
            )
        for claim in claims:
            assert claim.started is not None, "claim_and_start starts what it claims"
            started = self.executor.with_losses(claim.started) if claim.reclaimed else claim.started
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
                    self._began(owner, started.execution_id, now, started.deliver_by)
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
                    self._delivered(owner, started.execution_id)
                    self._held.pop(claim.lock_token, None)
        # A limited delivery's lateness is counted when it takes its slot (its wait left out, counted apart).
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

    def _began(self, owner: str, execution_id: str, now: float, deliver_by: float | None) -> None:
        """Under the lock: a delivery of ``owner`` takes a thread (to end by ``deliver_by``)."""
        self._running += 1
        self._delivering.setdefault(owner, {})[execution_id] = now
        if deliver_by is not None:
            self._ends[execution_id] = deliver_by

    def _delivered(self, owner: str, execution_id: str) -> None:
        """Under the lock: a delivery of ``owner`` gave its thread back (it is over, or never began)."""
        self._running -= 1
        self._ends.pop(execution_id, None)
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
            with self._lock:
                self._held.pop(lock_token, None)
        finally:
            with self._lock:
                self._delivered(str(execution.job.owner), execution.execution_id)
                self._freed()

    def _start_in_slot(self, wait: SlotWait, token: str) -> None:
        """A wait that got its slot: delivered by a thread (the waiting room's call)."""
        owner, execution_id = str(wait.started.job.owner), wait.started.execution_id
        now = time.monotonic()
        with self._lock:
            self._left_the_room(wait)
            self._began(owner, execution_id, now, wait.started.deliver_by)
            self._slots[token] = now + wait.timeout + self.executor.lease_margin_seconds  # as take_slot leased it
            self._freed()
        try:
            self.pool.submit(self._deliver_in_slot, wait, token)
        except RuntimeError:  # shut down: the slot's lease and the job's expire; delivered again
            with self._lock:
                self._delivered(owner, execution_id)
                self._slots.pop(token, None)
                self._held.pop(wait.lock_token, None)

    def _deliver_in_slot(self, wait: SlotWait, token: str) -> None:
        try:
            self.outcomes.put(self.executor.deliver_in_slot(wait, token))
        except Exception:  # a bug, not the target's failure: the lease expires and the job is reclaimed
            logger.exception("delivery failed", extra={"job_id": wait.job_id})
            with self._lock:
                self._held.pop(wait.lock_token, None)
        finally:
            self.waits.nudge(wait.key)  # its slot is free: the next wait of the key need not back off
            with self._lock:
                self._delivered(str(wait.started.job.owner), wait.started.execution_id)
                self._slots.pop(token, None)
                self._freed()

    def _end_wait(self, wait: SlotWait, outcome: Outcome) -> None:
        """A wait that cannot go on (its lease taken over): its outcome recorded as a delivery's."""
        with self._lock:
            self._left_the_room(wait)
            self._freed()
        self.outcomes.put(self.executor.ended_wait(wait, outcome))

    def _record(self, batch: Sequence[Finished | SlotHandBack]) -> None:
        try:
            self._record_or_give_up(batch)
        finally:  # recorded (or given up on: their leases left to expire)
            with self._lock:
                for done in batch:
                    self._held.pop(done.lock_token, None)

    def _record_or_give_up(self, batch: Sequence[Finished | SlotHandBack]) -> None:
        """Record the batch's outcomes, again while the database is away, until the leases would
        be gone. An outage is said in a line when the retries begin and one when they end
        unrecorded; another failure (a fault, not an outage) with its traceback."""
        give_up = time.monotonic() + self.record_retry_seconds
        tries = 0
        while True:
            try:
                with self.record_logging():
                    self.executor.record(batch)
                return
            except Exception as exc:  # the database is away: try again until the leases would be gone
                outage = isinstance(exc, StoreUnavailable)
                if time.monotonic() >= give_up:
                    self.unrecorded += len(batch)
                    logger.error(
                        "outcomes not recorded%s; their jobs run again when the leases expire",
                        f" ({exc})" if outage else "",
                        extra={"jobs": len(batch)},
                        exc_info=not outage,
                    )
                    return
                if tries == 0 or not outage:
                    logger.warning(
                        "recording outcomes failed%s; retrying until the leases would expire",
                        f" ({exc})" if outage else "",
                        exc_info=not outage,
                    )
                tries += 1
                time.sleep(0.5)

    def under_way(self) -> tuple[int, float | None]:
        """The deliveries under way (and waiting for their slot), and the seconds until the last
        of them must end (its lease), None when that is not known (a wait's)."""
        with self._lock:
            count, ends = self._running + self._waiting, list(self._ends.values())
        return count, (max(0.0, max(ends) - time.monotonic()) if ends else None)

    def close(self) -> None:
        """Wait for the waits to have their slots and the deliveries under way to end, and
        record their outcomes."""
        self._closing.set()
        self.waits.close()
        self.pool.shutdown()
        self.outcomes.close()

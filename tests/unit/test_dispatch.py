"""The dispatch pipelines' parts that need no database: the batching buffer and the claim modes."""

from __future__ import annotations

import inspect
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from scheduler import ports
from scheduler.core.domain import Claim
from scheduler.runner.dispatch import CLAIM_AND_START, CLAIM_DUE, ClaimMode
from scheduler.runner.in_process import InProcessDispatch
from scheduler.runner.threads import CallThreads, TimedBatchBuffer
from scheduler.store.postgres import Store


class Batches:
    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.changed = threading.Condition()

    def flush(self, batch: list[int]) -> None:
        with self.changed:
            self.batches.append(list(batch))
            self.changed.notify_all()

    def wait_for(self, count: int, timeout: float = 5.0) -> list[list[int]]:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.batches) >= count, timeout), self.batches
            return list(self.batches)


def test_a_full_batch_is_flushed_at_once_and_close_flushes_the_rest():
    seen = Batches()
    buffer = TimedBatchBuffer(seen.flush, max_size=2, flush_seconds=30.0)
    began = time.monotonic()
    for item in range(5):
        buffer.put(item)
    assert seen.wait_for(2) == [[0, 1], [2, 3]]
    assert time.monotonic() - began < 5  # not held for the 30 s interval
    buffer.close()
    assert seen.batches == [[0, 1], [2, 3], [4]]


def test_what_arrives_within_the_interval_is_one_batch():
    seen = Batches()
    buffer = TimedBatchBuffer(seen.flush, max_size=100, flush_seconds=0.2)
    for item in range(3):
        buffer.put(item)
    assert seen.wait_for(1) == [[0, 1, 2]]
    buffer.close()
    assert seen.batches == [[0, 1, 2]]


def test_call_threads_run_every_call_at_once_up_to_their_size_and_shutdown_waits_for_them():
    threads = CallThreads(3, "test-calls")
    release, started, done = threading.Event(), threading.Semaphore(0), []

    def call(n: int) -> None:
        started.release()
        assert release.wait(10)
        done.append(n)

    for n in range(3):  # three at once: none waits for another
        threads.submit(call, n)
    for _ in range(3):
        assert started.acquire(timeout=10)
    threads.submit(call, 3)  # a fourth waits for a free thread
    release.set()
    threads.shutdown()
    assert sorted(done) == [0, 1, 2, 3]
    with pytest.raises(RuntimeError):
        threads.submit(call, 4)


def test_a_failing_call_leaves_its_thread_running_the_next():
    threads = CallThreads(1, "test-calls")
    done: list[int] = []

    def fail() -> None:
        raise ValueError("a bug")

    threads.submit(fail)
    threads.submit(done.append, 1)
    threads.shutdown()
    assert done == [1]


def test_claim_modes_name_the_statement_they_run():
    calls = []

    class FakeStore:
        def claim_due(self, limit, lease_seconds):
            calls.append(("claim_due", limit, lease_seconds))
            return []

        def claim_and_start(self, limit, lease_margin_seconds=30):
            calls.append(("claim_and_start", limit, lease_margin_seconds))
            return []

    CLAIM_DUE.claim(FakeStore(), 10, 120)
    ClaimMode("claim_and_start", 45).claim(FakeStore(), 5, 120)
    assert calls == [("claim_due", 10, 120), ("claim_and_start", 5, 45)]
    assert (CLAIM_DUE.name, CLAIM_AND_START.name) == ("claim_due", "claim_and_start")
    with pytest.raises(ValueError, match="unknown claim mode"):
        ClaimMode("claim_everything").claim(FakeStore(), 1, 1)


@pytest.mark.parametrize("port", [ports.JobStore, ports.FanoutStore, ports.ExecutionStore, ports.CompletionStore])
def test_the_store_provides_every_port(port):
    for name, member in inspect.getmembers(port, inspect.isfunction):
        if name.startswith("_"):
            continue
        ours = getattr(Store, name, None)
        assert ours is not None, f"Store has no {name}"
        wanted = list(inspect.signature(member).parameters)
        assert list(inspect.signature(ours).parameters) == wanted, name


def test_local_mode_loads_the_http_delivery_before_its_first_burst():
    """A runner imports the HTTP delivery when its dispatch is built, not on the first delivery
    (where every delivery of a burst would wait on the import)."""
    import subprocess
    import sys

    check = (
        "import sys\n"
        "from scheduler.settings import Settings\n"
        "from scheduler.targets.results import TargetPolicy\n"
        "from scheduler.wiring import Dependencies\n"
        "assert 'scheduler.targets.http' not in sys.modules\n"
        "deps = Dependencies(Settings())\n"
        "deps.__dict__.update(store=None, target_policy=TargetPolicy())  # no database here\n"
        "dispatch = deps.in_process_dispatch()\n"
        "dispatch.close()\n"
        "from scheduler.targets import router\n"
        "assert 'scheduler.targets.http' in sys.modules\n"
        "assert 'http' in router._DELIVERERS\n"
        "assert 'scheduler.targets.amqp' not in sys.modules  # other types still load on first use\n"
    )
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


class Done(str):
    """A gated delivery's outcome: its execution id (or why it was handed back), with the
    claim's lock token that the dispatch lets go once it is recorded."""

    lock_token = "token"


class GatedExecutor:
    """An executor whose deliveries end when the test opens their gate."""

    lease_margin_seconds = 30.0

    def __init__(self) -> None:
        self.gates: dict[str, threading.Event] = {}
        self.recorded: list[str] = []

    def count_lateness(self, executions) -> None:
        list(executions)

    def waits_for_slot(self, started) -> bool:
        return False  # no limits: never in the waiting room

    def take_slot(self, wait):  # the waiting room's calls, never made here
        raise AssertionError("no job has limits")

    keep_waiting = take_slot

    def deliver(self, started, lock_token):
        assert self.gates[started.execution_id].wait(10)
        return Done(started.execution_id)

    def hand_back_unwaited(self, started, lock_token, why):
        return Done(f"{started.execution_id} handed back: {why}")

    def record(self, batch) -> None:
        self.recorded.extend(batch)


@dataclass(frozen=True)
class GatedStart:
    """What the gated executor delivers: its job's owner and an execution id (the job's id)."""

    execution_id: str
    job: Any
    deliver_by: float | None = None  # (a StartedExecution's lease end: unknown here)


def gated_claim(job_id: str, owner: str = "alice") -> Claim:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    return Claim(
        job_id=job_id,
        lock_token="token",
        lease_kind="schedule",
        scheduled_at=now,
        due_at=now,
        claimed_at=now,
        locked_until=now,
        started=GatedStart(job_id, SimpleNamespace(owner=owner, target={})),  # what the gated executor delivers
    )


def test_the_room_wait_ends_when_half_the_threads_are_free_not_before():
    executor = GatedExecutor()
    dispatch = InProcessDispatch(executor, max_workers=4)
    jobs = [f"job-{n}" for n in range(4)]
    executor.gates = {job: threading.Event() for job in jobs}
    dispatch.dispatch([gated_claim(job) for job in jobs])
    assert dispatch.capacity() == 0 and dispatch.room_worth_a_claim() == 2
    waited = threading.Event()
    waiter = threading.Thread(target=lambda: (dispatch.wait_for_room(30), waited.set()))
    waiter.start()
    executor.gates["job-0"].set()
    assert not waited.wait(0.3)  # one thread free: not yet worth a claim
    executor.gates["job-1"].set()
    assert waited.wait(10)  # two free: the wait ends at once, not at its timeout
    waiter.join()
    for gate in executor.gates.values():
        gate.set()
    dispatch.close()
    assert sorted(executor.recorded) == jobs


def test_the_room_wait_gives_up_at_its_timeout():
    executor = GatedExecutor()
    dispatch = InProcessDispatch(executor, max_workers=2)
    executor.gates = {"job-0": threading.Event(), "job-1": threading.Event()}
    dispatch.dispatch([gated_claim("job-0"), gated_claim("job-1")])
    began = time.monotonic()
    dispatch.wait_for_room(0.05)
    assert time.monotonic() - began < 5 and dispatch.capacity() == 0
    for gate in executor.gates.values():
        gate.set()
    dispatch.close()


def test_an_owners_slow_deliveries_hold_at_most_their_share_of_the_threads(monkeypatch):
    """Three quarters of the threads: a claim of an owner whose slow deliveries hold them is
    handed back (claimed again after a pause), and another owner's is delivered."""
    from scheduler.runner import in_process as module

    monkeypatch.setattr(module, "SLOW_DELIVERY_SECONDS", -1.0)  # every delivery under way is slow
    executor = GatedExecutor()
    dispatch = InProcessDispatch(executor, max_workers=4)
    executor.gates = {job: threading.Event() for job in ("a-0", "a-1", "a-2", "a-3", "b-0")}
    dispatch.dispatch([gated_claim(f"a-{n}", owner="alice") for n in range(4)] + [gated_claim("b-0", owner="bob")])
    assert dispatch.capacity() == 0  # a-0..a-2 and b-0 under way
    for gate in executor.gates.values():
        gate.set()
    dispatch.close()
    assert sorted(executor.recorded) == [
        "a-0",
        "a-1",
        "a-2",
        "a-3 handed back: its owner's slow deliveries hold 3 of the 4 delivery threads",
        "b-0",
    ]


def test_quick_deliveries_of_one_owner_use_every_thread():
    executor = GatedExecutor()
    dispatch = InProcessDispatch(executor, max_workers=4)
    executor.gates = {f"a-{n}": threading.Event() for n in range(4)}
    dispatch.dispatch([gated_claim(f"a-{n}") for n in range(4)])
    assert dispatch.capacity() == 0  # none has gone on past a second: not slow
    for gate in executor.gates.values():
        gate.set()
    dispatch.close()
    assert sorted(executor.recorded) == ["a-0", "a-1", "a-2", "a-3"]


def test_claim_and_start_claims_in_few_sizes_and_claim_due_as_asked():
    """A runner's room (its idle executors) is any number from half of them to all: each limit is
    a statement of its own for claim_and_start, so the room is rounded down to few sizes, never
    more than asked and at most a fifth less; claim_due's limit is a parameter, taken as asked."""
    mode = ClaimMode("claim_and_start")
    for room in range(0, 300):
        size = mode.sized(room)
        assert size <= room
        assert size >= 0.8 * room
        assert mode.sized(size) == size  # a size is its own rounding
    assert [mode.sized(n) for n in (1, 8, 9, 33, 39, 40, 47, 63, 64, 100)] == [1, 8, 8, 32, 32, 40, 40, 56, 64, 96]
    assert {mode.sized(room) for room in range(32, 65)} == {32, 40, 48, 56, 64}
    assert CLAIM_DUE.sized(39) == 39

"""The executor's delivery ends within its lease: the time the target's decryption took (KMS slow
or retried) comes off the margin, then off the target's timeout (a lease that ran out under a
delivery still going let another runner deliver it again)."""

from __future__ import annotations

from datetime import UTC, datetime

from scheduler.core.domain import ExecutionStatus, Job, JobState, Outcome, StartedExecution, Trigger
from scheduler.runner import executor
from scheduler.targets.results import TargetPolicy


class Clock:
    """``time.monotonic`` answering the instants given, then the last one."""

    def __init__(self, *instants: float):
        self.instants = list(instants)

    def monotonic(self) -> float:
        return self.instants.pop(0) if len(self.instants) > 1 else self.instants[0]


def _started(timeout: float) -> StartedExecution:
    now = datetime(2026, 12, 5, tzinfo=UTC)
    job = Job(
        id="j",
        owner="o",
        name="n",
        schedule="@daily",
        created_at=now,
        state=JobState.ACTIVE,
        target={"type": "http", "url": "https://e.com/", "timeout_seconds": timeout},
    )
    return StartedExecution(job, "e", now, 1, Trigger.SCHEDULE, now)


def test_a_slow_decryption_shortens_the_delivery_to_fit_the_lease(monkeypatch):
    caps = []
    monkeypatch.setattr(
        executor,
        "deliver",
        lambda target, delivery, policy, timeout_cap=None: (
            caps.append(timeout_cap) or Outcome(ExecutionStatus.SUCCEEDED)
        ),
    )
    monkeypatch.setattr(executor, "time", Clock(0.0, 40.0))  # the decryption took 40 s
    executor._deliver(_started(30), "j", lambda target: target, TargetPolicy(), None, {})
    monkeypatch.setattr(executor, "time", Clock(0.0, 0.2))  # a usual one: the target's whole timeout
    executor._deliver(_started(30), "j", lambda target: target, TargetPolicy(), None, {})
    assert caps[0] == 30 - (40 - executor.LEASE_MARGIN_SECONDS / 2) < 30  # past half the margin: off the timeout
    assert caps[1] == 30
    monkeypatch.setattr(executor, "LEASE_MARGIN_SECONDS", 3.0)  # a short margin leaves the timeout whole
    monkeypatch.setattr(executor, "time", Clock(0.0, 0.2))
    executor._deliver(_started(2), "j", lambda target: target, TargetPolicy(), None, {})
    assert caps[2] == 2

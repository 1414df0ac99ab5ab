"""The executor's delivery ends within its lease: the time the target's decryption took (KMS slow
or retried) comes off the margin, then off the target's timeout (a lease that ran out under a
delivery still going let another runner deliver it again)."""

from __future__ import annotations

from datetime import UTC, datetime

from scheduler.core.domain import ExecutionStatus, Job, JobState, Outcome, StartedExecution, Trigger
from scheduler.runner import delivering as executor
from scheduler.targets.results import TargetPolicy


class Clock:
    """``time.monotonic`` answering the instants given, then the last one."""

    def __init__(self, *instants: float):
        self.instants = list(instants)

    def monotonic(self) -> float:
        return self.instants.pop(0) if len(self.instants) > 1 else self.instants[0]


def _started(timeout: float, deliver_by: float | None = None) -> StartedExecution:
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
    return StartedExecution(job, "e", now, 1, Trigger.SCHEDULE, now, deliver_by=deliver_by)


def caps_of_deliveries(monkeypatch) -> list[float]:
    """The time caps the deliveries are made with (none sent anywhere)."""
    caps: list[float] = []

    def deliver(target, delivery, policy, timeout_cap=None):
        caps.append(timeout_cap)
        return Outcome(ExecutionStatus.SUCCEEDED)

    monkeypatch.setattr(executor, "deliver", deliver)
    return caps


def test_a_slow_decryption_shortens_the_delivery_to_fit_the_lease(monkeypatch):
    caps = caps_of_deliveries(monkeypatch)
    monkeypatch.setattr(executor, "time", Clock(0.0, 40.0))  # the decryption took 40 s
    executor.deliver_started(_started(30), "j", lambda target: target, TargetPolicy(), None, {})
    monkeypatch.setattr(executor, "time", Clock(0.0, 0.2))  # a usual one: the target's whole timeout
    executor.deliver_started(_started(30), "j", lambda target: target, TargetPolicy(), None, {})
    assert caps[0] == 30 - (40 - executor.LEASE_MARGIN_SECONDS / 2) < 30  # past half the margin: off the timeout
    assert caps[1] == 30
    monkeypatch.setattr(executor, "LEASE_MARGIN_SECONDS", 3.0)  # a short margin leaves the timeout whole
    monkeypatch.setattr(executor, "time", Clock(0.0, 0.2))
    executor.deliver_started(_started(2), "j", lambda target: target, TargetPolicy(), None, {})
    assert caps[2] == 2


def test_a_late_answer_shortens_the_delivery_to_end_before_the_lease(monkeypatch):
    """The lease as this process knows it (sent at 0 with a 30 s timeout and a 30 s margin: to be
    delivered by 45, half the margin kept for the record): the delivery ends by then, however
    late it begins."""
    caps = caps_of_deliveries(monkeypatch)
    monkeypatch.setattr(executor, "time", Clock(20.0))  # begins 20 s after the claim was sent
    executor.deliver_started(_started(30, deliver_by=45.0), "j", lambda target: target, TargetPolicy(), None, {})
    assert caps == [25.0]


def test_a_delivery_is_made_only_while_its_lease_leaves_room_for_the_whole_timeout(monkeypatch):
    monkeypatch.setattr(executor, "time", Clock(10.0))
    assert executor.lease_too_short(_started(30, deliver_by=45.0)) is None  # 35 s left
    assert executor.lease_too_short(_started(30)) is None  # not known
    monkeypatch.setattr(executor, "time", Clock(20.0))  # 25 s left, less than the timeout
    why = executor.lease_too_short(_started(30, deliver_by=45.0))
    assert why is not None and why.startswith("its lease left 25 s for a delivery when it could begin")
    monkeypatch.setattr(executor, "time", Clock(90.0))  # long gone
    assert executor.lease_too_short(_started(30, deliver_by=45.0)).startswith("its lease left 0 s")

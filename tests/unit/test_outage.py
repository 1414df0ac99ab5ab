"""What a loop says of a database outage (``runner.outage.Outage``): one error when it begins,
a reminder a minute while it lasts, one line once the database has answered for 30 s; a
database that answers and fails by turns (a full disk: reads pass, writes fail) is one outage;
nothing while the database answers."""

from __future__ import annotations

import logging

from scheduler.core.errors import StoreUnavailable
from scheduler.runner import outage as outage_module
from scheduler.runner.outage import Outage

ERROR = StoreUnavailable("the database gave no connection in time (it is down, unreachable or busy)")


def _said(caplog) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records]


def test_an_outage_is_said_once_then_each_minute_then_its_end(caplog, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(outage_module.time, "monotonic", lambda: clock[0])
    outage = Outage("deliveries")
    caplog.set_level(logging.INFO, logger="scheduler.runner.outage")
    outage.answers()  # the database answers: nothing to say
    for _ in range(60):  # a failure a second for a minute
        outage.goes_on(ERROR)
        clock[0] += 1.0
    outage.goes_on(ERROR)  # a minute on: reminded once
    clock[0] += 5.0
    outage.answers()  # it answers at 1065...
    clock[0] += 29.0
    outage.answers()  # ...not yet for 30 s
    clock[0] += 1.0
    outage.answers()  # now it has
    outage.answers()
    assert _said(caplog) == [
        ("ERROR", f"the database is unavailable ({ERROR}); deliveries wait for it, trying again every second"),
        ("ERROR", f"the database is still unavailable after 60 s ({ERROR}); deliveries wait"),
        ("WARNING", "the database is available again (deliveries waited 65 s for it); deliveries go on"),
    ]
    assert outage.began is None


def test_a_database_that_answers_and_fails_by_turns_is_one_outage(caplog, monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(outage_module.time, "monotonic", lambda: clock[0])
    outage = Outage("alert sweeps")
    caplog.set_level(logging.INFO, logger="scheduler.runner.outage")
    for _ in range(30):  # a read passes, the write after it fails, every second
        outage.goes_on(ERROR)
        outage.answers()
        clock[0] += 1.0
    assert [level for level, _ in _said(caplog)] == ["ERROR"] and outage.began == 0.0


class _RecordFails:
    """An executor whose recording fails the way it is told (an outage, or a fault)."""

    lease_margin_seconds = 30.0

    def __init__(self, error: Exception) -> None:
        self.error = error

    def record(self, batch) -> None:
        raise self.error

    def keep_waiting(self, waits) -> None:  # the waiting room's, never called here
        raise AssertionError("nothing waits")


def _recorded(caplog, error: Exception) -> list[tuple[str, str, bool]]:
    from scheduler.runner.in_process import InProcessDispatch

    dispatch = InProcessDispatch(_RecordFails(error), max_workers=1, record_retry_seconds=1.2)
    caplog.set_level(logging.WARNING, logger="scheduler.runner.in_process")
    try:
        dispatch._record_or_give_up([object(), object()])
    finally:
        dispatch.close()
    assert dispatch.unrecorded == 2  # what the stop then says (and its exit code 1)
    return [(r.levelname, r.getMessage(), bool(r.exc_info)) for r in caplog.records]


def test_outcomes_unrecorded_through_an_outage_say_so_twice_without_tracebacks(caplog):
    assert _recorded(caplog, ERROR) == [
        ("WARNING", f"recording outcomes failed ({ERROR}); retrying until the leases would expire", False),
        ("ERROR", f"outcomes not recorded ({ERROR}); their jobs run again when the leases expire", False),
    ]


def test_a_fault_while_recording_keeps_its_traceback(caplog):
    said = _recorded(caplog, RuntimeError("a bug"))
    assert said[0] == ("WARNING", "recording outcomes failed; retrying until the leases would expire", True)
    assert said[-1] == ("ERROR", "outcomes not recorded; their jobs run again when the leases expire", True)


def test_the_runner_says_the_outage_is_over_within_its_30_s_not_after_a_minute_long_fan_out(monkeypatch):
    """Local mode's runner: once the database answers again, its fan-outs run at most 30 s until
    the outage is said to be over (a fan-out of a minute put the line a minute late)."""
    import threading
    import types

    from scheduler.local import background
    from scheduler.runner import fanout

    clock = [0.0]
    monkeypatch.setattr(outage_module.time, "monotonic", lambda: clock[0])
    stop = threading.Event()
    budgets: list[float] = []

    def run_fanout(store, dispatch, *, budget_seconds, **kwargs):
        budgets.append(budget_seconds)
        if len(budgets) == 1:
            raise ERROR  # the database is away
        clock[0] += budget_seconds  # a fan-out lasts its budget
        if len(budgets) == 4:
            stop.set()

    monkeypatch.setattr(fanout, "run_fanout", run_fanout)
    store = types.SimpleNamespace(now=lambda: None)
    deps = types.SimpleNamespace(store=store, metrics=None)
    settings = types.SimpleNamespace(
        precision="second", claim_batch_size=10, claim_lease_seconds=60, execution_retention_days=30
    )
    monkeypatch.setattr(stop, "wait", lambda seconds=None: clock.__setitem__(0, clock[0] + (seconds or 0)))
    background.run_runner(deps, settings, dispatch=None, stop=stop)
    assert budgets == [60.0, 30.0, 60.0, 60.0]  # the one after the outage, 30 s: then it is over

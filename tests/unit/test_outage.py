"""What a loop says of a database outage (``runner.outage.Outage``): one error when it begins,
a reminder a minute while it lasts, one line when it ends; nothing while the database answers."""

from __future__ import annotations

import logging

from scheduler.core.errors import StoreUnavailable
from scheduler.runner import outage as outage_module
from scheduler.runner.outage import Outage


def test_an_outage_is_said_once_then_each_minute_then_its_end(caplog, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(outage_module.time, "monotonic", lambda: clock[0])
    outage = Outage("deliveries")
    caplog.set_level(logging.INFO, logger="scheduler.runner.outage")
    outage.ended()  # the database answers: nothing to say
    error = StoreUnavailable("the database gave no connection in time (it is down, unreachable or busy)")
    for _ in range(60):  # a failure a second for a minute
        outage.goes_on(error)
        clock[0] += 1.0
    outage.goes_on(error)  # a minute on: reminded once
    clock[0] += 30.0
    outage.ended()
    outage.ended()
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert lines == [
        ("ERROR", f"the database is unavailable ({error}); deliveries wait for it, trying again every second"),
        ("ERROR", f"the database is still unavailable after 60 s ({error}); deliveries wait"),
        ("WARNING", "the database is available again after 90 s; deliveries resume"),
    ]

"""Fan-outs that grow with the backlog.

The fan-out started by the tick (the primary) reads the due backlog when it starts and every
few seconds while it runs (every second while its claims come back full). When more is due than one fan-out dispatches within
``GROWTH_WINDOW_SECONDS``, it starts helper fan-outs (asynchronous invokes of its own function,
payload ``{"helper": true}``), up to ``max_fanouts`` fan-outs at once, itself included. A helper
claims beside it (claims skip locked rows, so no job is taken twice) until a claim comes back
empty or its deadline, and never starts helpers of its own.

The primary cannot see when a helper ends, so it tells each helper how long it may run: the
time its share of the backlog takes at ``FANOUT_DISPATCH_RATE`` (``helper_drain_seconds``, at
least ``MIN_HELPER_SECONDS``), in the payload (``{"helper": true, "seconds": s}``). It counts the
helper as running for that long plus ``HELPER_START_MARGIN_SECONDS`` (the invoke and the cold
start), so a helper never outlives its count and the fan-outs at once stay within the maximum,
even when the backlog never empties; a backlog still there when a helper's time is up starts
another.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable
from typing import Any

from scheduler.runner.dispatch import release_connection

logger = logging.getLogger(__name__)

#: Invokes per second one fan-out sustains, counted low: the 512 MB fan-out Lambda's share of a
#: vCPU is about a third of a core, at about 0.4 ms of CPU per invoke (bench/dispatch_rate.py).
FANOUT_DISPATCH_RATE = 500.0
#: The backlog one fan-out should dispatch within this many seconds; more starts helpers.
GROWTH_WINDOW_SECONDS = 5.0
#: How often the primary reads the backlog again while it runs ...
BACKLOG_CHECK_SECONDS = 5.0
#: ... and while its claims come back full (a backlog is building: one count a second is cheap).
BACKLOG_RECHECK_FULL_SECONDS = 1.0
#: The shortest run a helper is started for (a cold start is worth a few seconds of work).
MIN_HELPER_SECONDS = 10.0
#: Time counted for a helper's invoke and cold start, on top of its run.
HELPER_START_MARGIN_SECONDS = 5.0


def helpers_to_start(
    backlog: int,
    running: int,
    *,
    max_fanouts: int,
    rate: float = FANOUT_DISPATCH_RATE,
    window_seconds: float = GROWTH_WINDOW_SECONDS,
) -> int:
    """How many helper fan-outs to start now: the fan-outs that dispatch ``backlog`` due jobs
    within ``window_seconds`` at ``rate`` each, less the ``running`` ones (the primary
    included), never more than ``max_fanouts`` at once."""
    if backlog <= 0 or max_fanouts <= 1 or rate <= 0 or window_seconds <= 0:
        return 0
    needed = math.ceil(backlog / (rate * window_seconds))
    return max(min(needed, max_fanouts) - max(running, 1), 0)


def helper_drain_seconds(backlog: int, fanouts: int, *, rate: float = FANOUT_DISPATCH_RATE) -> float:
    """How long a helper is counted as running: its share of ``backlog`` over ``fanouts`` at ``rate``."""
    return backlog / (max(fanouts, 1) * rate) if rate > 0 else 0.0


def is_helper(event: Any) -> bool:
    """Whether this invocation of the fan-out is a helper (started by a primary, not the tick)."""
    return isinstance(event, dict) and event.get("helper") is True


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def helper_seconds(event: Any, now: Callable[[], float] = time.time) -> float | None:
    """How long a helper may still run: its payload's ``seconds``, and no later than its ``until``
    (an epoch instant: a helper whose invoke waited in Lambda's queue, throttled or retried, still
    stops when its primary counted it as done, so the fan-outs at once stay within the maximum).
    0 when that instant has passed; None when the payload gives neither."""
    if not isinstance(event, dict):
        return None
    seconds, until = _number(event.get("seconds")), _number(event.get("until"))
    left = [
        value
        for value in (
            seconds if seconds is not None and seconds > 0 else None,
            None if until is None else until - now(),
        )
        if value is not None
    ]
    return max(min(left), 0.0) if left else None


def helper_event(seconds: float, until: float | None = None) -> dict[str, Any]:
    """The payload of a helper's invoke: it may run ``seconds``, and stops at ``until`` (epoch) at
    the latest."""
    event: dict[str, Any] = {"helper": True, "seconds": round(seconds, 1)}
    if until is not None:
        event["until"] = round(until, 3)
    return event


class Growth:
    """The primary's helper starts. ``observe(backlog)`` is called with the due backlog at the
    start and while the primary runs; it starts what ``helpers_to_start`` says and returns how
    many it started."""

    def __init__(
        self,
        start_helper: Callable[[float], bool],
        *,
        max_fanouts: int,
        clock: Callable[[], float],
        rate: float = FANOUT_DISPATCH_RATE,
        window_seconds: float = GROWTH_WINDOW_SECONDS,
        deadline: float | None = None,
    ):
        self.start_helper = start_helper
        # The primary's own end (``clock`` time): no helper is given time past it, so helpers of
        # one tick's primary never overlap the next tick's beyond the primaries' own overlap.
        self.deadline = deadline
        self.max_fanouts = max_fanouts
        self.clock = clock
        self.rate = rate
        self.window_seconds = window_seconds
        self.started = 0
        self._running_until: list[float] = []  # when each helper is counted as done

    def running(self) -> int:
        """Fan-outs counted as running now: this one and its helpers."""
        now = self.clock()
        self._running_until = [end for end in self._running_until if end > now]
        return 1 + len(self._running_until)

    def observe(self, backlog: int) -> int:
        """Start the helpers this backlog calls for; the number started."""
        running = self.running()
        wanted = helpers_to_start(
            backlog, running, max_fanouts=self.max_fanouts, rate=self.rate, window_seconds=self.window_seconds
        )
        if not wanted:
            return 0
        seconds = max(helper_drain_seconds(backlog, running + wanted, rate=self.rate), MIN_HELPER_SECONDS)
        if self.deadline is not None:
            seconds = min(seconds, self.deadline - self.clock())
            if seconds <= 0:  # the primary's time is up: its successor starts what is needed
                return 0
        until = self.clock() + seconds + HELPER_START_MARGIN_SECONDS
        started = 0
        for _ in range(wanted):
            if not self.start_helper(seconds):
                break
            self._running_until.append(until)
            started += 1
        self.started += started
        logger.info("helper fan-outs started", extra={"backlog": backlog, "helpers": started, "running": running})
        return started


class LambdaHelperStarter:
    """Starts a helper, for ``seconds`` at most, by an asynchronous invoke of the fan-out function itself."""

    def __init__(self, client: Any, function_name: str, *, wall_clock: Callable[[], float] = time.time):
        self.client = client
        self.wall_clock = wall_clock
        self._invoke_args = {"FunctionName": function_name, "InvocationType": "Event"}

    def __call__(self, seconds: float) -> bool:
        # It stops when the primary counts it as done, however late its invoke starts.
        until = self.wall_clock() + seconds + HELPER_START_MARGIN_SECONDS
        try:
            answer = self.client.invoke(**self._invoke_args, Payload=json.dumps(helper_event(seconds, until)).encode())
        except Exception as exc:  # botocore ClientError, connection errors: the primary carries on
            code = getattr(exc, "response", {}).get("Error", {}).get("Code", type(exc).__name__)
            logger.warning("helper fan-out not started", extra={"error": code})
            return False
        release_connection(answer)
        return True


def lambda_growth(
    client: Any,
    fanout_function: str | None,
    max_fanouts: int,
    clock: Callable[[], float],
    *,
    rate: float = FANOUT_DISPATCH_RATE,
    deadline: float | None = None,
) -> Growth | None:
    """The primary's ``Growth`` through Lambda, or None when it may not grow (one fan-out at most,
    or its own function name unknown)."""
    if max_fanouts <= 1 or not fanout_function:
        return None
    return Growth(
        LambdaHelperStarter(client, fanout_function), max_fanouts=max_fanouts, clock=clock, rate=rate, deadline=deadline
    )

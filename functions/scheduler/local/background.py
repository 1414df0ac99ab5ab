"""What local mode's processes run besides the API, and close at their stop: the runner's loop,
the alert sweep and sender, and the delivery clients' connections."""

from __future__ import annotations

import logging
import threading
from datetime import datetime
from typing import Any

from scheduler.core import constants as c
from scheduler.core.errors import StoreUnavailable
from scheduler.settings import Settings

logger = logging.getLogger(__name__)


def run_runner(deps: Any, settings: Settings, dispatch: Any, stop: threading.Event) -> None:
    """The runner's loop: fan-out after fan-out until ``stop``, surviving database outages (the
    leases protect the jobs meanwhile)."""
    from scheduler.runner.fanout import run_fanout
    from scheduler.runner.outage import Outage

    outage = Outage("deliveries")
    while not stop.is_set():
        try:
            if outage.began is not None:
                deps.store.now()  # the database answers again: the fan-out resumes
                outage.answers()
            budget = 60.0 if settings.precision == "second" else 0.0
            # Its end is said once the database answered for 30 s, not after a fan-out of a minute
            # (at minute precision a fan-out is one claim, and the next waits for its minute).
            if outage.began is not None:
                budget = min(budget, Outage.CONFIRM_SECONDS)
            run_fanout(
                deps.store,
                dispatch,
                budget_seconds=budget,
                batch_size=settings.claim_batch_size,
                lease_seconds=settings.claim_lease_seconds,
                metrics=deps.metrics,
                stop=stop,
                retention_days=settings.execution_retention_days,
                pauses=deps.store,
            )
            outage.answers()  # a fan-out ended well (it ran a minute, or was the minute's claim)
            if settings.precision == "minute":  # the next fan-out on the next minute (the database's)
                stop.wait(until_next_minute(deps.store.now()))
        except StoreUnavailable as exc:  # one line when it begins, one a minute while it lasts
            outage.goes_on(exc)
            stop.wait(1.0)
        except Exception:  # a failure of another kind: keep trying
            logger.exception("fan-out failed; retrying in 1 s")
            stop.wait(1.0)


#: A fan-out of minute precision runs this long past each minute (by the database's clock), so
#: that what is due on the minute is due by then.
MINUTE_TICK_OFFSET = 0.05


def until_next_minute(now: datetime) -> float:
    """Seconds from ``now`` to ``MINUTE_TICK_OFFSET`` past the next minute. (A wait of 60 s
    after each fan-out ticked on the minute of the process's start: a job due on the minute
    started up to a minute late.)"""
    return 60.0 - (now.second + now.microsecond / 1e6) + MINUTE_TICK_OFFSET


def start_alerts(deps: Any, stop: threading.Event, console_url: str | None) -> threading.Thread:
    """The alert sweep and sender (``runner.alerts``), once a second beside the runner. Its
    thread ends after ``stop``, once the alerts being sent are sent and recorded: join it before
    the pool and the delivery clients close (an alert sent but not recorded is sent again)."""
    alerts = deps.alerts(console_url)
    thread = threading.Thread(target=alerts.loop, args=(stop,), name="alerts", daemon=True)
    thread.start()
    return thread


#: How long a stop waits for the alerts being sent (their targets' timeouts are at most 30 s).
ALERTS_STOP_SECONDS = 45.0


def close_delivery_clients() -> None:
    """Close the HTTP and AMQP targets' pooled connections (at a process's stop)."""
    from scheduler.targets import amqp as amqp_target
    from scheduler.targets import http as http_target

    http_target.close_connections()
    amqp_target.close_all()


def warn_if_the_key_does_not_open(store: Any, box: Any, key_file: str | None) -> None:
    """A warning line at start when the key file does not open the secrets the database holds
    (another ``--data-dir``, or local mode started from another folder, made a new key): every
    delivery of a job with a secret would fail, and this says why before the first one does."""
    from scheduler.secrets import SecretError

    token = store.a_stored_secret()
    if token is None:
        return
    try:
        box.decrypt(token)
    except SecretError:
        print(
            f"scheduler local: WARNING: the key file {key_file} does not open the secrets stored in this "
            "database: the deliveries of jobs with secrets will fail. Start with the key file that stored them "
            f"(--data-dir, or {c.ENV_LOCAL_KEY_FILE}), or send those jobs' secrets again.",
            flush=True,
        )

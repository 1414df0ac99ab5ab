"""The alerts of a runner: sweep the jobs with rules (``service.sweep_alerts``), then send the
alerts queued, each to its rule's target, retried with a backoff and recorded.

The delivery is handed in (``send``: the composition root's ``targets.router.deliver`` with the
secrets opened), so this module loads no target code. Local mode runs it beside its fan-out
loop, once a second in every runner process; two runners never send one alert twice (each is
leased for its target's timeout, and an attempt records its outcome only while the lease is its
own) nor decide one incident twice (the job's alert state is held). Up to ``SENDERS`` alerts are
sent at once, each on a thread of its own: a slow hook holds one sender, not the sweep or the
other alerts. After the machine slept (a laptop), the alerts being sent keep their leases before
the next claim (``WakeGuard``), as the jobs' deliveries do.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from scheduler import service
from scheduler.core import constants as c
from scheduler.core.alerts import AlertDelivery, render_alert_target
from scheduler.core.domain import Delivery, Outcome
from scheduler.core.errors import StoreUnavailable
from scheduler.ports import AlertStore
from scheduler.runner.outage import Outage
from scheduler.runner.telemetry import Metrics, NullMetrics
from scheduler.runner.wakes import WakeGuard

logger = logging.getLogger(__name__)

# Attempts at one alert before it is given up (recorded failed), and the backoff between them.
MAX_ALERT_ATTEMPTS = 5
MAX_BACKOFF_SECONDS = 300.0
# The longest a target's Retry-After holds an alert back (an alert a day late is no alert).
MAX_RETRY_AFTER_SECONDS = 3600.0
# The lease of an attempt beyond its target's own timeout (the claim adds that).
LEASE_SECONDS = 60.0
# Alerts sent at once; an attempt is claimed only when a sender is idle, so that it starts at once.
SENDERS = 8
PURGE_EVERY_SECONDS = 3600.0

Send = Callable[[Mapping[str, Any], Delivery], Outcome]


def console_link(console_url: str | None, job_id: str) -> str:
    """The console's page of the job (empty without a console URL)."""
    if not console_url:
        return ""
    return f"{console_url.rstrip('/')}/#/jobs/{job_id}"


# The alert loop's guard: its warning after a wake names the alerts (the dispatch's, the deliveries).
_ALERT_WAKES = functools.partial(WakeGuard, held="the alerts being sent")


class Alerts:
    """The sweep and the sending of alerts, on ``store``."""

    def __init__(
        self,
        store: AlertStore,
        send: Send,
        console_url: str | None = None,
        retention_days: int = 30,
        senders: int = SENDERS,
        metrics: Metrics | None = None,
        wakes: Callable[[Callable[[], None]], WakeGuard] = _ALERT_WAKES,
    ):
        """``wakes`` makes the guard that ``loop`` checks before each claim (a test's moves its
        wall clock)."""
        self.store, self.send, self.console_url = store, send, console_url
        self.metrics = metrics or NullMetrics()
        self.retention_days = retention_days
        self.purged_at: float | None = None
        self.senders = senders
        self._pool: ThreadPoolExecutor | None = None
        self._in_flight = 0
        # The alerts being sent, by id: the attempt held and by when its send ends
        # (time.monotonic()). Kept after the machine slept (keep_held_leases).
        self._held: dict[str, tuple[int, float]] = {}
        self._lock = threading.Lock()
        self._wakes = wakes(self.keep_held_leases)

    def _sweep(self) -> int:
        """The alerts the jobs' executions call for, queued (how many). Once an hour, the alerts
        past the retention are deleted first."""
        if self.purged_at is None or time.monotonic() - self.purged_at > PURGE_EVERY_SECONDS:
            self.purged_at = time.monotonic()
            self.store.purge_alerts(self.retention_days)
        return service.sweep_alerts(self.store)

    def _sending(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.senders, thread_name_prefix="alert-send")
        return self._pool

    def run_once(self) -> tuple[int, int]:
        """One sweep, then every alert due sent (``senders`` at once) before it answers: (queued,
        sent). The deployed executor's alert run; local mode's loop does not wait (``loop``)."""
        queued = self._sweep()
        sent = 0
        while True:
            batch = self.store.claim_alert_deliveries(self.senders, LEASE_SECONDS)
            sent += sum(self._sending().map(self.deliver, batch))
            if len(batch) < self.senders:
                return queued, sent

    def dispatch(self) -> int:
        """As many alerts due as there are idle senders claimed, each handed to one; no wait for
        them. How many were handed."""
        handed = 0
        while True:
            with self._lock:
                idle = self.senders - self._in_flight
            if idle <= 0:
                return handed
            batch = self.store.claim_alert_deliveries(idle, LEASE_SECONDS)
            for alert in batch:
                timeout = float(alert.target.get("timeout_seconds") or 30)
                with self._lock:
                    self._in_flight += 1
                    self._held[alert.id] = (alert.attempts, time.monotonic() + timeout)
                self._sending().submit(self._send_released, alert)
            handed += len(batch)
            if len(batch) < idle:
                return handed

    def _send_released(self, alert: AlertDelivery) -> None:
        try:
            self.deliver(alert)
        except Exception:  # the database away: the lease ends, another attempt comes
            logger.exception("alert %s not recorded; it is sent again when its lease ends", alert.id)
        finally:
            with self._lock:
                self._in_flight -= 1
                self._held.pop(alert.id, None)

    def keep_held_leases(self) -> None:
        """Keep the leases of the alerts being sent, each to the end of its send plus
        ``LEASE_SECONDS``: after a sleep, in one statement."""
        now = time.monotonic()
        with self._lock:
            held = list(self._held.items())
        kept = self.store.extend_alert_leases(
            [(alert_id, attempt, max(0.0, by - now) + LEASE_SECONDS) for alert_id, (attempt, by) in held]
        )
        if held:  # none being sent: nothing more to say than the guard's warning
            logger.info("after the sleep: kept %d of %d alerts being sent", len(kept), len(held))

    def deliver(self, alert: AlertDelivery) -> bool:
        """Send one alert and record the outcome (unless another runner took its lease over
        meanwhile), counted as ``AlertDeliveries`` by the alert's status after it (``delivered``,
        ``pending``: to be tried again, ``failed``: given up); True when delivered."""
        delivery = Delivery(
            job_id=alert.job_id,
            execution_id=alert.execution_id or alert.id,
            scheduled_at=alert.created_at,
            attempt=alert.attempts,
            owner=alert.owner,
        )
        # The delivery's identity (its headers, its idempotency key) is the alert's; the
        # placeholders about the execution are the execution's (none for a run that did not
        # happen: a missing_run alert), and {{attempt}} is the alert's delivery attempt.
        variables = {
            "execution_id": None,
            "scheduled_at": None,
            **alert.vars,
            "alert_id": alert.id,
            "console_url": console_link(self.console_url, alert.job_id),
            "job_id": delivery.job_id,
            "attempt": delivery.attempt,
        }
        target = render_alert_target(alert.target, variables)
        outcome = self.send(target, delivery)
        if outcome.succeeded:
            status, retry_in = "delivered", 0.0
        elif outcome.retryable and alert.attempts < MAX_ALERT_ATTEMPTS:
            # The target's Retry-After when longer than the backoff (a hook's rate limit), as
            # for a job's retries.
            retry_after = min(outcome.retry_after_seconds or 0.0, MAX_RETRY_AFTER_SECONDS)
            status, retry_in = "pending", max(min(2.0**alert.attempts, MAX_BACKOFF_SECONDS), retry_after)
        else:
            status, retry_in = "failed", 0.0
        written = self.store.record_alert_delivery(
            alert.id,
            status,
            error=outcome.error,
            http_status=outcome.http_status,
            retry_in=retry_in,
            attempt=alert.attempts,
        )
        if not written:
            logger.warning(
                "alert %s: attempt %d outlived its lease; its outcome (%s) is not recorded",
                alert.id,
                alert.attempts,
                status,
                extra={"job_id": alert.job_id, "alert_id": alert.id},
            )
            return False
        self.metrics.count(c.METRIC_ALERT_DELIVERIES, 1, status=status)
        logger.info(
            "alert %s %s of job %s: %s",
            alert.rule_on,
            alert.event,
            alert.job_name,
            status,
            extra={"job_id": alert.job_id, "alert_id": alert.id},
        )
        return outcome.succeeded

    def loop(self, stop: threading.Event, interval: float = 1.0) -> None:
        """A sweep and a ``dispatch`` every ``interval`` seconds until ``stop``, surviving
        database outages; the alerts being sent are not waited for (a slow hook holds its sender
        only). At the stop, the sends under way end first. After the machine slept, the alerts
        being sent keep their leases first, and nothing is claimed for the wake's grace."""
        outage = Outage("alert sweeps")
        while not stop.wait(interval):
            try:
                self._sweep()
                # Checked after the sweep, just before the claim: a sleep that began during the
                # sweep (it grows with the jobs that have alert rules) is noticed before the
                # claim that would take the alerts being sent as expired.
                if not self._wakes.check():
                    self.dispatch()
                outage.answers()
            except StoreUnavailable as exc:
                outage.goes_on(exc)
            except Exception:
                logger.exception("alert sweep failed; trying again")
        if self._pool is not None:
            self._pool.shutdown(wait=True)

"""The alerts of a runner: sweep the jobs with rules (``service.sweep_alerts``), then send the
alerts queued, each to its rule's target, retried with a backoff and recorded.

The delivery is handed in (``send``: the composition root's ``targets.router.deliver`` with the
secrets opened), so this module loads no target code. Local mode runs it beside its fan-out
loop, once a second in every runner process; two runners never send one alert twice (each is
leased) nor decide one incident twice (the job's alert state is held).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from scheduler import service
from scheduler.core.alerts import AlertDelivery, render_alert_target
from scheduler.core.domain import Delivery, Outcome
from scheduler.ports import AlertStore

logger = logging.getLogger(__name__)

# Attempts at one alert before it is given up (recorded failed), and the backoff between them.
MAX_ALERT_ATTEMPTS = 5
MAX_BACKOFF_SECONDS = 300.0
LEASE_SECONDS = 60.0
BATCH = 20
PURGE_EVERY_SECONDS = 3600.0

Send = Callable[[Mapping[str, Any], Delivery], Outcome]


def console_link(console_url: str | None, job_id: str) -> str:
    """The console's page of the job (empty without a console URL)."""
    if not console_url:
        return ""
    return f"{console_url.rstrip('/')}/#/jobs/{job_id}"


class Alerts:
    """The sweep and the sending of alerts, on ``store``."""

    def __init__(self, store: AlertStore, send: Send, console_url: str | None = None, retention_days: int = 30):
        self.store, self.send, self.console_url = store, send, console_url
        self.retention_days = retention_days
        self.purged_at: float | None = None

    def run_once(self) -> tuple[int, int]:
        """One sweep, then the alerts due sent: (queued, sent). Once an hour, the alerts past
        the retention are deleted."""
        if self.purged_at is None or time.monotonic() - self.purged_at > PURGE_EVERY_SECONDS:
            self.purged_at = time.monotonic()
            self.store.purge_alerts(self.retention_days)
        queued = service.sweep_alerts(self.store)
        sent = 0
        while True:
            batch = self.store.claim_alert_deliveries(BATCH, LEASE_SECONDS)
            for alert in batch:
                sent += self.deliver(alert)
            if len(batch) < BATCH:
                return queued, sent

    def deliver(self, alert: AlertDelivery) -> bool:
        """Send one alert and record the outcome; True when delivered."""
        variables = {
            **alert.vars,
            "alert_id": alert.id,
            "console_url": console_link(self.console_url, alert.job_id),
        }
        target = render_alert_target(alert.target, variables)
        delivery = Delivery(
            job_id=alert.job_id,
            execution_id=alert.execution_id or alert.id,
            scheduled_at=alert.created_at,
            attempt=alert.attempts,
            owner=alert.owner,
        )
        outcome = self.send(target, delivery)
        if outcome.succeeded:
            status, retry_in = "delivered", 0.0
        elif outcome.retryable and alert.attempts < MAX_ALERT_ATTEMPTS:
            status, retry_in = "pending", min(2.0**alert.attempts, MAX_BACKOFF_SECONDS)
        else:
            status, retry_in = "failed", 0.0
        self.store.record_alert_delivery(
            alert.id, status, error=outcome.error, http_status=outcome.http_status, retry_in=retry_in
        )
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
        """``run_once`` every ``interval`` seconds until ``stop``, surviving database outages."""
        while not stop.wait(interval):
            try:
                self.run_once()
            except Exception:
                logger.exception("alert sweep failed; trying again")

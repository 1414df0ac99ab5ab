"""What local mode's processes run beside their runner and close at their stop: the alert
sweep and sender, and the delivery clients' connections."""

from __future__ import annotations

import threading
from typing import Any


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

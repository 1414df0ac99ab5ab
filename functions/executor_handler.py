"""Lambda: the executor, invoked asynchronously with one claim or a group of them (under a
backlog). Delivers them and records the outcomes (see scheduler.runner.executor). Raises only on an infrastructure fault, so Lambda's retry
and the dead-letter queue take over."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger

from scheduler.runner.executor import run_invoke
from scheduler.runner.telemetry import EmfMetrics
from scheduler.runner.tracing import handler_tracer
from scheduler.settings import get_settings
from scheduler.wiring import Dependencies, route_domain_logs_to

logger = Logger(service=get_settings().service_name)
tracer = handler_tracer(get_settings().service_name)
route_domain_logs_to(logger)
settings = get_settings()
deps = Dependencies(
    settings,
    through_proxy=True,
    pool_max_size=1,
    metrics=EmfMetrics(settings.metrics_namespace, settings.service_name),
)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict, context: Any) -> dict:
    """Run the claim of ``event`` (``job_id``, ``lock_token``), or its ``claims``; or, for
    ``{"alerts": true}`` (the fan-out's, once a tick), sweep the alerts and send those due."""
    if event.get("alerts") is True:
        queued, sent = deps.alerts().run_once()
        return {"alerts_queued": queued, "alerts_sent": sent}
    logger.append_keys(job_id=event.get("job_id"))
    return run_invoke(deps.executor(lambda: context.get_remaining_time_in_millis() / 1000), event)

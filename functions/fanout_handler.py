"""Lambda: the fan-out, ticked once a minute by EventBridge. Claims due jobs and invokes an
executor per claim (per group of claims under a backlog), through its minute at second
precision (see scheduler.runner.fanout). The tick's invocation (the primary) starts helper fan-outs
when the backlog calls for them; a helper (``{"helper": true}``) drains until a claim comes
back empty (see scheduler.runner.growth)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger

from scheduler.runner.telemetry import EmfMetrics
from scheduler.runner.tracing import handler_tracer
from scheduler.settings import get_settings
from scheduler.wiring import Dependencies, route_domain_logs_to

logger = Logger(service=get_settings().service_name)
tracer = handler_tracer(get_settings().service_name)
route_domain_logs_to(logger)
settings = get_settings()
deps = Dependencies(settings, through_proxy=True, metrics=EmfMetrics(settings.metrics_namespace, settings.service_name))


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict, context: Any) -> dict:
    """Claim and dispatch until this invocation's budget ends (a helper: until a claim is empty).
    The tick's invocation first has an executor sweep the alerts, when there are any."""
    if not event.get("helper"):
        try:
            deps.start_alert_sweep()
        except Exception:  # alerting never stops the claims
            logger.exception("could not start the alert sweep")
    report, helper = deps.run_fanout_invocation(event, context.get_remaining_time_in_millis() / 1000)
    logger.info("fan-out finished", extra={**report.as_dict(), "helper": helper})
    return report.as_dict()

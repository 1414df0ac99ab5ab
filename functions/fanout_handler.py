"""Lambda: the fan-out, ticked once a minute by EventBridge. Claims due jobs and invokes an
executor per claim (per group of claims under a backlog), through its minute at second
precision (see scheduler.fanout). The tick's invocation (the primary) starts helper fan-outs
when the backlog calls for them; a helper (``{"helper": true}``) drains until a claim comes
back empty (see scheduler.growth)."""

from __future__ import annotations

from aws_lambda_powertools import Logger, Tracer

from scheduler.fanout import run_lambda_invocation
from scheduler.settings import get_settings
from scheduler.telemetry import EmfMetrics
from scheduler.wiring import Dependencies, route_domain_logs_to

logger = Logger(service=get_settings().service_name)
tracer = Tracer(service=get_settings().service_name)
route_domain_logs_to(logger)
settings = get_settings()
deps = Dependencies(settings, through_proxy=True, metrics=EmfMetrics(settings.metrics_namespace, settings.service_name))


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict, context) -> dict:
    """Claim and dispatch until this invocation's budget ends (a helper: until a claim is empty)."""
    settings = deps.settings
    report, helper = run_lambda_invocation(
        event,
        deps.store,
        deps.lambda_client,
        remaining_seconds=context.get_remaining_time_in_millis() / 1000,
        executor_function=settings.executor_function,
        fanout_function=settings.fanout_function,
        max_fanouts=settings.max_fanouts,
        precision=settings.precision,
        batch_size=settings.claim_batch_size,
        lease_seconds=settings.claim_lease_seconds,
        retention_days=settings.execution_retention_days,
        metrics=deps.metrics,
        # The executor's reserved concurrency bounds the dispatch; the live leases are what is taken.
        # Under a backlog an invoke carries a group of claims.
        dispatch_options={
            "max_in_flight": settings.executor_concurrency,
            "in_flight": deps.store.live_leases,
            "claims_per_invoke": settings.claims_per_invoke,
        },
    )
    logger.info("fan-out finished", extra={**report.as_dict(), "helper": helper})
    return report.as_dict()

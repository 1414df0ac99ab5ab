"""Lambda: the fan-out, ticked once a minute by EventBridge. Claims due jobs and invokes one
executor per claim, through its minute at second precision (see scheduler.fanout)."""

from __future__ import annotations

from aws_lambda_powertools import Logger, Tracer

from scheduler.dispatch import LambdaDispatch
from scheduler.fanout import drain_limit, fanout_deadline, run_fanout
from scheduler.settings import get_settings
from scheduler.telemetry import PowertoolsMetrics
from scheduler.wiring import Dependencies, route_domain_logs_to

logger = Logger(service=get_settings().service_name)
tracer = Tracer(service=get_settings().service_name)
route_domain_logs_to(logger)
settings = get_settings()
deps = Dependencies(settings, through_proxy=True,
                    metrics=PowertoolsMetrics(settings.metrics_namespace, settings.service_name))


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict, context) -> dict:
    """Claim and dispatch until this invocation's budget ends."""
    settings = deps.settings
    remaining = context.get_remaining_time_in_millis() / 1000
    # The executor's reserved concurrency bounds the dispatch; the live leases are what is taken.
    dispatch = LambdaDispatch(deps.lambda_client, settings.executor_function,
                              max_in_flight=settings.executor_concurrency, in_flight=deps.store.live_leases)
    try:
        report = run_fanout(deps.store, dispatch, budget_seconds=fanout_deadline(settings.precision, remaining),
                            drain_limit_seconds=drain_limit(remaining), batch_size=settings.claim_batch_size,
                            lease_seconds=settings.claim_lease_seconds, metrics=deps.metrics,
                            retention_days=settings.execution_retention_days)
    finally:
        dispatch.close()
    logger.info("fan-out finished", extra=report.as_dict())
    return report.as_dict()

"""Lambda: the management API behind API Gateway (REST, IAM auth)."""

from __future__ import annotations

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging import correlation_paths

from scheduler.api.app import make_app
from scheduler.api.gateway_auth import identifier_for
from scheduler.runner.tracing import handler_tracer
from scheduler.settings import get_settings, with_fetched_secrets
from scheduler.wiring import Dependencies, route_domain_logs_to

logger = Logger(service=get_settings().service_name)
tracer = handler_tracer(get_settings().service_name)
route_domain_logs_to(logger)
# One pool and one secret box per container, built on the first request that needs them (the
# box caches its KMS data key).
# The cursor key is fetched here, at cold start (Powertools parameters, cached), never from the environment.
deps = Dependencies(with_fetched_secrets(get_settings()), through_proxy=True)
# Where the gateway authenticates nobody (the LocalStack variant), the function checks signatures itself.
app = make_app(lambda: deps.store, lambda: deps.secret_box, deps.settings, identify=identifier_for(deps.settings))


# Never log the event (its body may hold secrets), whatever POWERTOOLS_LOGGER_LOG_EVENT says; answers
# can be large pages, so they stay out of the trace.
@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, log_event=False)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict, context: object) -> dict:
    """Route the API Gateway event to the job and execution routers."""
    return app.resolve(event, context)

"""The handlers' tracing: Powertools' ``Tracer`` (the X-Ray SDK) when the deployment asks for it
(``SCHEDULER_XRAY_SDK=true``, the ``xray_sdk`` deploy option), else a decorator that does nothing.

The X-Ray SDK costs each cold start about 140 ms to load (it patches the libraries and builds a
botocore client for its sampler), so it is loaded only when enabled. Without it Lambda's active
tracing still records every invocation (its initialization, invocation and overhead segments)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from scheduler.core import constants as c

Handler = TypeVar("Handler", bound=Callable[..., Any])


class HandlerTracer(Protocol):
    """What a handler module does with its tracer: decorate its entry point."""

    def capture_lambda_handler(self, lambda_handler: Any = None, capture_response: bool | None = None) -> Any:
        """Used as ``@tracer.capture_lambda_handler`` or ``@tracer.capture_lambda_handler(...)``."""


class NoTracer:
    """Tracing left to Lambda: the handler runs as it is."""

    def capture_lambda_handler(self, lambda_handler: Any = None, capture_response: bool | None = None) -> Any:
        """The handler itself (or, called with options only, a decorator returning it)."""
        if lambda_handler is None:
            return lambda handler: handler
        return lambda_handler


def sdk_enabled(env: Mapping[str, str] | None = None) -> bool:
    """Whether the deployment asked for the X-Ray SDK's subsegments."""
    return (os.environ if env is None else env).get(c.ENV_XRAY_SDK, "").strip().lower() in ("1", "true", "yes")


def handler_tracer(service: str, env: Mapping[str, str] | None = None) -> HandlerTracer:
    """Powertools' ``Tracer`` for ``service`` when the SDK is enabled, else a ``NoTracer``."""
    if not sdk_enabled(env):
        return NoTracer()
    from aws_lambda_powertools import Tracer

    tracer: HandlerTracer = Tracer(service=service)
    return tracer

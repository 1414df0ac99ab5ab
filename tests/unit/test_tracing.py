"""The handlers' tracer: Powertools' Tracer (the X-Ray SDK) only when the deployment asks for it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from scheduler.runner.tracing import NoTracer, handler_tracer, sdk_enabled

FUNCTIONS = Path(__file__).parents[2] / "functions"


def test_the_sdk_is_off_unless_enabled():
    assert not sdk_enabled({})
    assert not sdk_enabled({"SCHEDULER_XRAY_SDK": "false"})
    assert sdk_enabled({"SCHEDULER_XRAY_SDK": "true"})
    assert sdk_enabled({"SCHEDULER_XRAY_SDK": " TRUE "})


def test_without_the_sdk_the_decorators_return_the_handler_itself():
    tracer = handler_tracer("svc", {})
    assert isinstance(tracer, NoTracer)

    def handler(event, context):
        return {"event": event}

    assert tracer.capture_lambda_handler(handler) is handler
    assert tracer.capture_lambda_handler(capture_response=False)(handler) is handler


def test_with_the_sdk_it_is_powertools_tracer():
    from aws_lambda_powertools import Tracer

    assert isinstance(handler_tracer("svc", {"SCHEDULER_XRAY_SDK": "true"}), Tracer)


def test_a_handler_imported_without_the_sdk_does_not_load_it():
    """The point of the option: the executor's cold start loads neither the X-Ray SDK nor pydantic."""
    code = (
        "import sys, executor_handler, fanout_handler; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'aws_xray_sdk', 'pydantic', 'cryptography'}))"
    )
    env = {"PYTHONPATH": str(FUNCTIONS), "AWS_REGION": "us-east-1", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]"

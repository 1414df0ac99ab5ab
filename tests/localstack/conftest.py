"""LocalStack for the tests of this folder: started once per session on a free port of 127.0.0.1
(its state under ``.localstack/test``, apart from ``make localstack``'s), the stack deployed on
it once, destroyed and stopped at the end.

Without a Python >= 3.12 (or when LocalStack cannot start) the tests are skipped, loudly; under
``CI=true`` they fail instead.
"""

from __future__ import annotations

import os
import time
import warnings

import boto3
import pytest
from psycopg.conninfo import conninfo_to_dict

from tests.localstack.environment import (
    ACCESS_KEY,
    DEFAULT_HOME,
    REGION,
    SECRET_KEY,
    TIMINGS,
    Deployment,
    LocalStack,
    LocalStackError,
    _as_url,
    free_port,
)
from tests.support import temporary_database

_unavailable: list[str] = []


def unavailable(message: str) -> None:
    """Skip (fail under CI=true): LocalStack or what it needs is missing."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and the LocalStack tests need LocalStack: {message}", pytrace=False)
    _unavailable.append(message)
    warnings.warn(f"LocalStack tests SKIPPED: {message}", stacklevel=1)
    pytest.skip(f"LOCALSTACK TESTS SKIPPED: {message}")


@pytest.fixture(scope="session")
def localstack():
    """LocalStack running on a free port, with the host executor and the custom-resource provider."""
    instance = LocalStack(DEFAULT_HOME, instance="test", port=free_port(), stack_name="SchedulerTest")
    started = time.monotonic()
    try:
        instance.start()
    except LocalStackError as error:
        instance.stop()
        unavailable(str(error))
    TIMINGS["LocalStack installed and started"] = time.monotonic() - started
    yield instance
    instance.stop()


@pytest.fixture(scope="session")
def aws(localstack):
    """``aws("sqs")``: a boto3 client of LocalStack's (key test / test)."""

    def client(service: str):
        return boto3.client(
            service,
            endpoint_url=localstack.endpoint,
            region_name=REGION,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
        )

    return client


@pytest.fixture(scope="session")
def deployment(localstack, pg_server_url, amqp_url) -> Deployment:
    """The stack deployed on LocalStack (a database of its own, the host's broker), then destroyed."""
    with temporary_database(pg_server_url, label="ls") as conninfo:
        started = time.monotonic()
        try:
            localstack.bootstrap()
            TIMINGS["cdk bootstrap"] = time.monotonic() - started
            deployed = localstack.deploy(_as_url(conninfo_to_dict(conninfo)), amqp_url)
        except LocalStackError as error:
            pytest.fail(str(error), pytrace=False)
        TIMINGS["cdk deploy"] = deployed.deploy_seconds
        yield deployed
        started = time.monotonic()
        localstack.destroy()
        TIMINGS["cdk destroy"] = time.monotonic() - started


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # pragma: no cover - output only
    """The deployment's timings, or why the LocalStack tests did not run."""
    if _unavailable:
        terminalreporter.section("LOCALSTACK TESTS SKIPPED", sep="!", red=True, bold=True)
        terminalreporter.write_line(_unavailable[0], red=True, bold=True)
    if TIMINGS:
        terminalreporter.section("LocalStack")
        for what, seconds in TIMINGS.items():
            terminalreporter.write_line(f"{what}: {seconds:.1f} s")

"""Pytest plugin: a real RabbitMQ broker for the AMQP integration tests.

Register it (``pytest_plugins = ["tests.integration.conftest_amqp"]`` in the root conftest),
or import its fixtures into a test module. Fixtures:

- ``amqp_url``: the broker URL (env ``SCHEDULER_TEST_AMQP_URL``, default
  ``amqp://guest:guest@127.0.0.1:5672/%2F``), after checking that a connection opens.
  Without a broker the test is SKIPPED with a loud reason, and a banner is printed at the end
  of the run; with env ``CI=true`` a missing broker FAILS the test instead.
- ``amqp_admin``: a BlockingConnection channel for the test's own declarations and reads.
- ``amqp_queue``: a fresh exchange and queue with unique names, bound with the routing key
  ``rk``, deleted afterwards: ``(exchange, queue, routing_key)``.
"""

from __future__ import annotations

import os
import uuid
import warnings

import pytest

DEFAULT_AMQP_URL = "amqp://guest:guest@127.0.0.1:5672/%2F"

_unavailable: list[str] = []


def broker_url() -> str:
    """The URL of the test broker."""
    return os.environ.get("SCHEDULER_TEST_AMQP_URL") or DEFAULT_AMQP_URL


def _probe(url: str) -> str | None:
    """None when a connection to ``url`` opens, else why not."""
    try:
        import pika
    except ImportError as exc:  # pragma: no cover - pika is a runtime dependency
        return f"pika is not installed ({exc})"
    try:
        params = pika.URLParameters(url)
        params.connection_attempts = 1
        params.socket_timeout = 3
        params.stack_timeout = 5
        connection = pika.BlockingConnection(params)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc!r}"[:300]
    connection.close()
    return None


@pytest.fixture(scope="session")
def amqp_url() -> str:
    """The URL of a reachable RabbitMQ (skip loudly, or fail when CI=true, if there is none)."""
    url = broker_url()
    problem = _probe(url)
    if problem is None:
        return url
    where = url.split("@")[-1]
    message = (
        f"RABBITMQ NOT AVAILABLE at {where} ({problem}). "
        "Start one (`rabbitmq-server -detached`) or set SCHEDULER_TEST_AMQP_URL."
    )
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and the AMQP integration tests need a broker: {message}", pytrace=False)
    _unavailable.append(message)
    warnings.warn(f"AMQP integration tests SKIPPED: {message}", stacklevel=1)
    pytest.skip(f"AMQP INTEGRATION TESTS SKIPPED: {message}")


@pytest.fixture
def amqp_admin(amqp_url: str):
    """A channel on the test broker, for the test's own declarations and basic_get."""
    import pika

    connection = pika.BlockingConnection(pika.URLParameters(amqp_url))
    try:
        yield connection.channel()
    finally:
        if connection.is_open:
            connection.close()


@pytest.fixture
def amqp_queue(amqp_url: str):
    """A fresh direct exchange and a queue bound to it with routing key ``rk``."""
    import pika

    suffix = uuid.uuid4().hex[:12]
    exchange, queue, routing_key = f"test-x-{suffix}", f"test-q-{suffix}", "rk"
    connection = pika.BlockingConnection(pika.URLParameters(amqp_url))
    channel = connection.channel()
    channel.exchange_declare(exchange, exchange_type="direct", durable=False, auto_delete=False)
    channel.queue_declare(queue, durable=True, auto_delete=False)
    channel.queue_bind(queue, exchange, routing_key=routing_key)
    try:
        yield exchange, queue, routing_key
    finally:
        try:
            if not channel.is_open:
                channel = connection.channel()
            channel.queue_delete(queue)
            channel.exchange_delete(exchange)
        finally:
            if connection.is_open:
                connection.close()


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # pragma: no cover - output only
    """Repeat, at the end of the run, that the AMQP tests did not run."""
    if _unavailable:
        terminalreporter.section("AMQP INTEGRATION TESTS SKIPPED", sep="!", red=True, bold=True)
        terminalreporter.write_line(_unavailable[0], red=True, bold=True)

"""Placeholder rendering, and the delivery identity it draws from."""

from __future__ import annotations

import datetime as dt

import pytest

from scheduler.targets import templates
from scheduler.targets.results import Delivery, Outcome, TargetPolicy
from scheduler.targets.router import deliver

BERLIN = dt.timezone(dt.timedelta(hours=1))
DELIVERY = Delivery(
    job_id="0b6f3c2e-1111-4a5b-9c8d-000000000001",
    execution_id="7d2c9e10-2222-4f6a-8b7c-000000000002",
    scheduled_at=dt.datetime(2026, 12, 1, 3, 0, tzinfo=BERLIN),  # 02:00Z
    attempt=3,
)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("{{job_id}}", DELIVERY.job_id),
        ("{{execution_id}}", DELIVERY.execution_id),
        ("{{scheduled_at}}", "2026-12-01T02:00:00Z"),
        ("{{attempt}}", "3"),
        ("{{ job_id }}", DELIVERY.job_id),
        ("{{job_id }}|{{  attempt}}|{{\tattempt\n}}", f"{DELIVERY.job_id}|3|3"),
        ('{"at": "{{scheduled_at}}", "try": {{attempt}}}', '{"at": "2026-12-01T02:00:00Z", "try": 3}'),
        ("{{attempt}}{{attempt}}", "33"),
    ],
)
def test_known_placeholders_are_replaced(text, expected):
    assert templates.render(text, DELIVERY) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "no placeholders at all",
        "{{unknown}} {{ name }} {{jobid}} {{JOB_ID}}",
        "{job_id} {{{job_id}}",  # single braces: not ours (the triple one keeps its outer brace)
        "{{job_id",
        "job_id}}",
        "{{ job_id attempt }}",
        "${{ secrets.TOKEN }} {% if x %}{{ item.name }}{% endif %}",
    ],
)
def test_other_text_is_left_as_it_is(text):
    rendered = templates.render(text, DELIVERY)
    if "{{{job_id}}" in text:
        assert rendered == "{job_id} {" + DELIVERY.job_id
    else:
        assert rendered == text


def test_rendering_is_a_single_pass():
    tricky = Delivery(job_id="{{attempt}}", execution_id="e", scheduled_at=DELIVERY.scheduled_at, attempt=9)
    assert templates.render("{{job_id}}/{{attempt}}", tricky) == "{{attempt}}/9"


def test_scheduled_at_keeps_microseconds_when_present():
    precise = Delivery("j", "e", dt.datetime(2026, 1, 1, 0, 0, 0, 250000, tzinfo=dt.UTC), 1)
    assert templates.render("{{scheduled_at}}", precise) == "2026-01-01T00:00:00.250000Z"


def test_values_table():
    assert templates.values(DELIVERY) == {
        "job_id": DELIVERY.job_id,
        "execution_id": DELIVERY.execution_id,
        "scheduled_at": "2026-12-01T02:00:00Z",
        "attempt": "3",
    }


def test_delivery_identity_and_headers():
    assert DELIVERY.idempotency_key == f"{DELIVERY.job_id}:2026-12-01T02:00:00Z"
    retry = Delivery(DELIVERY.job_id, "another-execution", DELIVERY.scheduled_at, 4)
    assert retry.idempotency_key == DELIVERY.idempotency_key  # the same occurrence, another try
    assert DELIVERY.headers() == {
        "Idempotency-Key": DELIVERY.idempotency_key,
        "X-Scheduler-Job-Id": DELIVERY.job_id,
        "X-Scheduler-Execution-Id": DELIVERY.execution_id,
        "X-Scheduler-Scheduled-At": "2026-12-01T02:00:00Z",
        "X-Scheduler-Attempt": "3",
    }


def test_types_are_frozen_and_have_documented_defaults():
    result = Outcome(status="succeeded", retryable=False)
    assert (result.http_status, result.response_excerpt, result.error, result.retry_after_seconds) == (None,) * 4
    assert result.succeeded
    with pytest.raises(AttributeError):
        result.status = "failed"  # type: ignore[misc]
    policy = TargetPolicy()
    assert (policy.allow_private, policy.allow_list, policy.default_broker_url) == (False, (), None)
    hash(TargetPolicy(allow_list=("a", "b")))  # usable as a cache key


def test_deliver_never_raises_on_garbage():
    for target in (None, 42, [], {}, {"type": None}, {"type": "http", "url": 7}, {"type": "amqp", "exchange": 3}):
        result = deliver(target, DELIVERY, TargetPolicy())  # type: ignore[arg-type]
        assert (result.status, result.retryable) == ("failed", False), (target, result)

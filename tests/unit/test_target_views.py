"""The delivery's typed views of a target hold to the one schema, the pydantic models: the same
fields and defaults, and every target the API would store is read with the model's values."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from scheduler.schema.aws_models import EventBridgeTarget, LambdaTarget, SigV4Auth, SnsTarget, SqsTarget
from scheduler.schema.models import AmqpTarget, HttpTarget, Target
from scheduler.targets.aws_views import EventBridgeView, LambdaView, SigV4View, SnsView, SqsView
from scheduler.targets.views import AmqpView, HttpView, InvalidTarget, view_of
from tests.fuzz.strategies import _amqp_target, _http_target

PAIRS = [
    (HttpView, HttpTarget),
    (AmqpView, AmqpTarget),
    (LambdaView, LambdaTarget),
    (SqsView, SqsTarget),
    (SnsView, SnsTarget),
    (EventBridgeView, EventBridgeTarget),
    (SigV4View, SigV4Auth),
]
TARGET = TypeAdapter(Target)


@pytest.mark.parametrize("view,model", PAIRS)
def test_views_have_the_fields_and_defaults_of_the_models(view, model):
    # secret_headers: a delivery's, set by a manual run's overrides (no field of a stored target)
    fields = {f.name: f for f in dataclasses.fields(view) if f.name != "secret_headers"}
    assert set(fields) == set(model.model_fields)
    for name, info in model.model_fields.items():
        if info.is_required():
            continue
        default = info.get_default(call_default_factory=True)
        f = fields[name]
        ours = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        assert ours == default, name


def _same(view, model) -> None:
    dumped = model.model_dump()
    for name, value in dumped.items():
        ours = getattr(view, name)
        if name == "success_codes" and value is not None:
            value = frozenset(value)
        if name == "content_type" and value == "":
            value = None  # an empty content type is none (no property sent)
        assert ours == value, (name, ours, value)


_text = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=0x2FF), max_size=12)
_valid_http = st.fixed_dictionaries(
    {"type": st.just("http"), "url": st.sampled_from(["https://example.com/hook", "http://10.0.0.1:8080/x?y=1"])},
    optional={
        "method": st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]),
        "headers": st.dictionaries(st.sampled_from(["X-A", "Content-Type", "accept"]), _text, max_size=3),
        "body": st.one_of(st.none(), _text),
        "auth": st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {"type": st.just("basic"), "username": _text.filter(lambda t: t and ":" not in t), "password": _text}
            ),
            st.fixed_dictionaries({"type": st.just("bearer"), "token": _text.filter(bool)}),
            st.fixed_dictionaries({"type": st.just("header"), "name": st.just("X-Key"), "value": _text.filter(bool)}),
            st.fixed_dictionaries(
                {
                    "type": st.just("sigv4"),
                    "service": st.sampled_from(["execute-api", "lambda", "s3"]),
                    "region": st.sampled_from(["eu-west-1", "us-gov-west-1", "EU", ""]),
                    "role_arn": st.sampled_from(["arn:aws:iam::123456789012:role/r", "arn:aws:iam::1234:role/r"]),
                }
            ),
        ),
        "timeout_seconds": st.integers(1, 900),
        "success_codes": st.one_of(st.none(), st.lists(st.integers(100, 599), max_size=5)),
        "follow_redirects": st.booleans(),
    },
)
_valid_amqp = st.fixed_dictionaries(
    {"type": st.just("amqp")},
    optional={
        "url": st.one_of(st.none(), st.sampled_from(["amqp://u:p@broker:5672/v", "amqps://h"])),
        "exchange": _text,
        "routing_key": _text,
        "body": _text,
        "body_encoding": st.just("utf-8"),
        "headers": st.dictionaries(_text.filter(bool), _text, max_size=3),
        "content_type": st.one_of(st.none(), _text),
        "timeout_seconds": st.integers(1, 300),
    },
)


def _mostly(good: list, bad: list):
    """One of ``good`` nine times in ten, else one of ``bad`` (what the models refuse)."""
    return st.sampled_from(good * (9 * len(bad)) + bad * len(good))


_ROLE = _mostly(
    ["arn:aws:iam::123456789012:role/sender", "arn:aws:iam::123456789012:role/p/x"],
    ["arn:aws-cn:iam::123456789012:role/r", "arn:aws:iam::123456789012:user/u", "role"],
)
_GROUP = st.one_of(st.none(), st.sampled_from(["g", "{{ job_id }}", "with blank", ""]))
_JSON = _mostly(['{"job": "{{ job_id }}"}', "{}"], ["[1]", "not json", ""])
_aws = {"timeout_seconds": st.integers(0, 900)}
_FUNCTION = "arn:aws:lambda:eu-west-1:123456789012:function:f"
_QUEUE = "https://sqs.eu-west-1.amazonaws.com/123456789012/q"
_TOPIC = "arn:aws:sns:eu-west-1:123456789012:t"
_BUS = "arn:aws:events:eu-west-1:123456789012:event-bus/default"
_valid_aws = st.one_of(
    st.fixed_dictionaries(
        {
            "type": st.just("lambda"),
            "role_arn": _ROLE,
            "function_arn": _mostly(
                [_FUNCTION, _FUNCTION + ":live"],
                [_FUNCTION.replace("arn:aws:", "arn:aws-cn:"), _FUNCTION.replace("123456789012", "1")],
            ),
        },
        optional={**_aws, "payload": _JSON, "invocation_type": _mostly(["Event", "RequestResponse"], ["Dry"])},
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("sqs"),
            "role_arn": _ROLE,
            "body": st.one_of(_text, st.just("{{ scheduled_at }}")),
            "queue_url": _mostly(
                [_QUEUE, _QUEUE + ".fifo", "https://eu-west-1.queue.amazonaws.com/123456789012/q"],
                [_QUEUE.replace("https:", "http:"), "https://example.com/123456789012/q"],
            ),
        },
        optional={**_aws, "message_group_id": _GROUP},
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("sns"),
            "role_arn": _ROLE,
            "message": _text,
            "topic_arn": _mostly([_TOPIC, _TOPIC + ".fifo"], ["arn:aws:sns:x"]),
        },
        optional={**_aws, "subject": st.one_of(st.none(), _text), "message_group_id": _GROUP},
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("eventbridge"),
            "role_arn": _ROLE,
            "detail_type": _text,
            "source": _mostly(["app.jobs", "{{ job_id }}"], ["aws.x", ""]),
            "event_bus_arn": _mostly([_BUS], [_BUS.replace("event-bus/default", "rule/r")]),
        },
        optional={**_aws, "detail": _JSON},
    ),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_valid_http, _valid_amqp, _http_target, _amqp_target, _valid_aws))
def test_a_target_the_api_stores_is_read_with_the_models_values(target):
    try:
        model = TARGET.validate_python(target)
    except ValidationError:
        return
    # The API stores model_dump(); the executor reads that back.
    view = view_of(model.model_dump())
    _same(view, model)
    if isinstance(model, HttpTarget) and isinstance(model.auth, SigV4Auth):
        _same(view.sigv4, model.auth)


@settings(max_examples=200, deadline=None)
@given(_valid_aws)
def test_the_aws_targets_are_read_with_the_models_values(target):
    try:
        model = TARGET.validate_python(target)
    except ValidationError:
        return
    _same(view_of(model.model_dump()), model)


def test_what_no_model_would_store_is_refused():
    for target, message in [
        ("x", "not an object"),
        ({"type": "smtp"}, "unknown type"),
        ({}, "missing type"),
        ({"type": "http", "url": "https://h/", "timeout_seconds": True}, "timeout_seconds"),
        ({"type": "http", "url": "https://h/", "method": "GET", "body": "x"}, "body: a GET request carries no body"),
        ({"type": "http", "url": "https://h/", "method": "head", "body": "x"}, "body: a HEAD request carries no body"),
        ({"type": "amqp", "body_encoding": "latin-1"}, "body_encoding"),
        (
            {
                "type": "sqs",
                "role_arn": "arn:aws:iam::123456789012:role/r",
                "body": "x",
                "queue_url": "https://example.com/q",
            },
            "queue_url",
        ),
        ({"type": "lambda", "function_arn": "arn:aws:lambda:eu-west-1:123456789012:function:f"}, "role_arn"),
        (
            {"type": "http", "url": "https://h/", "auth": {"type": "sigv4", "service": "s3", "region": "eu-west-1"}},
            "sigv4",
        ),
    ]:
        with pytest.raises(InvalidTarget, match=message):
            view_of(target)


def test_an_empty_body_on_a_get_is_no_body_for_the_models_and_the_views():
    target = {"type": "http", "url": "https://h/", "method": "GET", "body": ""}
    assert TARGET.validate_python(target).body is None
    assert view_of(target).body is None


@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
def test_the_models_and_the_views_refuse_a_body_on_the_same_methods(method):
    target = {"type": "http", "url": "https://h/", "method": method, "body": "{}"}
    try:
        TARGET.validate_python(target)
        model_refuses = False
    except ValidationError:
        model_refuses = True
    try:
        view_of(target)
        view_refuses = False
    except InvalidTarget:
        view_refuses = True
    assert model_refuses == view_refuses == (method in ("GET", "HEAD"))

"""The change log's diff (secrets masked wherever they are) and the chains' cycle search."""

from __future__ import annotations

from datetime import UTC, datetime

from scheduler.core.changes import find_cycle, spec_diff
from scheduler.core.domain import Delivery
from scheduler.targets.templates import render

TOKEN = "enc:v1:TG9jYWwta2V5LXRva2Vu_-="


def test_a_diff_names_each_changed_leaf_by_its_path():
    before = {"name": "a", "tags": ("x",), "retry": {"max_attempts": 3}, "target": {"url": "https://a"}}
    after = {"name": "a", "tags": ["x", "y"], "retry": {"max_attempts": 5}, "target": {"url": "https://a"}}
    assert spec_diff(before, after) == {
        "retry.max_attempts": {"from": 3, "to": 5},
        "tags": {"from": ["x"], "to": ["x", "y"]},
    }
    assert spec_diff(before, before) == {}


def test_a_created_job_is_a_diff_from_nothing_with_times_as_text():
    diff = spec_diff(None, {"run_at": datetime(2027, 1, 1, tzinfo=UTC), "description": None, "tags": []})
    assert diff == {"run_at": {"from": None, "to": "2027-01-01T00:00:00Z"}}


def test_secrets_are_masked_wherever_they_are_and_marked():
    before = {"target": {"auth": {"password": TOKEN}, "url": f"amqps://u:{TOKEN.replace(':', '%3A')}@h/v"}}
    after = {"target": {"auth": {"password": TOKEN + "x"}, "url": "amqps://u:enc%3Av1%3Aother@h/v"}}
    diff = spec_diff(before, after)
    assert diff["target.auth.password"] == {"from": "***", "to": "***", "secret": True}
    assert diff["target.url"] == {"from": "amqps://u:***@h/v", "to": "amqps://u:***@h/v", "secret": True}
    assert "enc" not in str(diff)


def test_a_cycle_through_the_start_is_found_with_its_path():
    links = {"a": ("b",), "b": ("c", "d"), "c": ("a",), "d": ()}
    assert find_cycle("a", links) == ["a", "b", "c", "a"]
    assert find_cycle("d", links) is None
    assert find_cycle("x", {"x": ("x",)}) == ["x", "x"]
    assert find_cycle("a", {"a": ("b",), "b": ("c",), "c": ("b",)}) is None  # a cycle, not through a


def test_cause_placeholders_render_escaped_for_json_only_for_a_chained_run():
    delivery = Delivery("j", "e", datetime(2027, 1, 1, tzinfo=UTC), 1)
    text = (
        '{"s": "{{cause.status}}", "x": "{{ cause.response_excerpt }}", "h": "{{cause.http_status}}", "a": {{attempt}}}'
    )
    assert render(text, delivery) == text.replace("{{attempt}}", "1")
    cause = {"status": "failed", "response_excerpt": 'he said "no"\n', "http_status": None}
    chained = Delivery("j", "e", datetime(2027, 1, 1, tzinfo=UTC), 1, cause=cause)
    assert render(text, chained) == '{"s": "failed", "x": "he said \\"no\\"\\n", "h": "", "a": 1}'

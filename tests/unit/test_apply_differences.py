"""The lines of an apply's change: a field by its dotted path, an alert rule's by its index (the
rule whose field moved, not the whole list again); lists of values (tags, dates) whole."""

from __future__ import annotations

from scheduler.cli.comparing import differences

HOOK = {"type": "http", "url": "https://hooks.example.com/a"}


def test_a_rule_sets_change_names_the_rule_and_the_field():
    stored = {"tag": "plant", "alerts": [{"on": "failures_in_a_row", "threshold": 3, "target": HOOK}]}
    wanted = {
        "tag": "plant",
        "alerts": [
            {"on": "failures_in_a_row", "threshold": 5, "target": HOOK},
            {"on": "recovery", "threshold": None, "target": HOOK},
        ],
    }
    assert differences(wanted, stored) == [
        "alerts.0.threshold: 3 -> 5",
        'alerts.1.on: null -> "recovery"',
        'alerts.1.target.type: null -> "http"',
        'alerts.1.target.url: null -> "https://hooks.example.com/a"',
    ]


def test_lists_of_values_are_compared_whole():
    assert differences({"tags": ["a", "b"]}, {"tags": ["a"]}) == ['tags: ["a"] -> ["a", "b"]']
    assert differences({"dates": ["2026-12-24"]}, {"dates": ["2026-12-24"]}) == []


def test_a_first_alert_rule_reads_as_its_fields_not_as_the_list_taken_away():
    added = differences({"alerts": [{"on": "failure", "target": {"url": "x"}}]}, {"alerts": []})
    assert added == ['alerts.0.on: null -> "failure"', 'alerts.0.target.url: null -> "x"']
    assert differences({"alerts": []}, {"alerts": [{"on": "failure"}]}) == ['alerts: [{"on": "failure"}] -> []']
    assert differences({"tags": []}, {"tags": ["x"]}) == ['tags: ["x"] -> []']

"""The CLI's output and reading at their edges: YAML that reads back as it was written (a NEL),
a rule set's tag escaped on export, a listing that never ends said so, a job's nested fields
shown as JSON."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.cli.export_documents import exported_alert_rules
from scheduler.cli.output import format_job_details
from scheduler.cli.reading import yaml_dumper, yaml_loader, yaml_text
from scheduler.client import SchedulerClient
from scheduler.transport.api_wire import ApiCallFailed


@pytest.mark.parametrize("text", ["a\x85b", "x\x85", "a\u2028b", "é and ü", "plain"])
def test_yaml_output_reads_back_as_it_was(text):
    """``-o yaml`` and ``export`` wrote a NEL raw, which YAML reads back as a space: a job sent
    back from its YAML changed its body."""
    assert yaml.load(yaml_text({"body": text}), Loader=yaml_loader())["body"] == text


def test_a_rule_sets_tag_is_escaped_on_export():
    document, _ = exported_alert_rules({"name": "rs", "tag": "t-${X}", "alerts": []})
    assert document["tag"] == "t-$${X}"


def test_a_listing_that_repeats_a_cursor_is_an_error_not_a_short_listing():
    pages = iter([{"jobs": [1], "next_cursor": "c1"}, {"jobs": [2], "next_cursor": "c1"}])
    with pytest.raises(ApiCallFailed) as raised:
        list(SchedulerClient._pages(lambda **_: next(pages), {}))
    assert raised.value.code == "invalid_response" and "cursor it had answered before" in raised.value.message


def test_a_jobs_nested_fields_are_shown_as_json():
    shown = format_job_details(
        {
            "id": "x",
            "name": "n",
            "alerts": [{"on": "failure", "auth": None}],
            "limits": {"max_in_flight": 2},
            "on_success": [],
        }
    )
    assert "alerts:" in shown and '[{"on": "failure", "auth": null}]' in shown
    assert '{"max_in_flight": 2}' in shown and "on success:        -" in shown


_JSON_TEXT = (
    st.text(st.characters(), max_size=40)
    | st.text(st.sampled_from("ab é\n\t-:#\x85"), max_size=300)
    | st.sampled_from(["null", "yes", "0o17", "1e3", "~", "- x", "a: b"])
)
_KEYS = st.text(st.characters(), max_size=130)
_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _JSON_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=1000, deadline=None)
@given(st.dictionaries(_KEYS, _JSON_VALUES, max_size=4) | st.lists(_JSON_VALUES, max_size=4) | _JSON_VALUES)
def test_yaml_output_is_pyyamls_own_text_whichever_emitter_writes_it(value):
    """``yaml_text`` writes with libyaml's emitter where it can (five times faster) and with
    PyYAML's where libyaml would write otherwise (characters beyond the BMP, lone surrogates,
    odd keys, a lone scalar's end marker): the text is PyYAML's own either way, any text in any
    key or value."""
    pure = yaml.dump(
        value, Dumper=yaml_dumper(pure=True), sort_keys=False, allow_unicode=True, default_flow_style=False
    )
    assert yaml_text(value) == pure


def test_yaml_output_uses_libyaml_when_pyyaml_has_it():
    """The fast path is taken: this machine's PyYAML has libyaml (its wheels do)."""
    assert yaml.__with_libyaml__
    assert issubclass(yaml_dumper(), yaml.CSafeDumper)
    assert not issubclass(yaml_dumper(pure=True), yaml.CSafeDumper)


def test_a_missing_field_hints_at_its_flag_in_jobs_create_but_not_in_apply(capsys, monkeypatch):
    """apply reads files: a hint of a flag (give --url URL) it does not have would mislead."""
    import argparse

    import scheduler.cli.api as cli_api
    from scheduler.client import ApiCallFailed

    refusal = ApiCallFailed(400, "invalid_request", "bad", [{"field": "target.url", "message": "is required"}])
    monkeypatch.setattr(cli_api, "make_client", lambda args: None)

    @cli_api.client_command
    def refused(args, client):
        raise refusal

    refused(argparse.Namespace())
    assert "hint: target.url: give --url" in capsys.readouterr().err
    refused(argparse.Namespace(flag_hints=False))
    assert "hint:" not in capsys.readouterr().err

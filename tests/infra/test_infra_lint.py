"""cfn-lint and checkov on the synthesized template: no cfn-lint error, no finding the committed
baseline (infra/lint_baseline.json) does not accept, and a new finding fails.

The linters live in their own virtualenv (``make lint-templates`` builds ``.venv-lint``), never in
the project's: the baseline and the parsing of their output are tested here on canned findings;
the runs on the real templates need that virtualenv, and are skipped (with the reason) without it
except under ``CI=true``, where its absence fails.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("aws_cdk")

from infra.lint import (
    VARIANTS,
    Finding,
    cfn_lint,
    checkov,
    load_baseline,
    new_findings,
    parse_cfn_lint,
    parse_checkov,
    tools_python,
)


@pytest.fixture(scope="module")
def linters() -> Path:
    """The linters' Python (``.venv-lint``); skipped loudly without it, a failure under CI."""
    python = tools_python()
    if not python.exists():
        message = f"the template linters' virtualenv is missing ({python}): run `make lint-templates`"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return python


def template_path(synth) -> Path:
    from aws_cdk import Stage

    return Path(Stage.of(synth.stack).outdir) / synth.stack.template_file


def test_every_baseline_entry_gives_its_reason():
    for tool, rules in load_baseline().items():
        for rule, entries in rules.items():
            for entry in entries if isinstance(entries, list) else [entries]:
                assert entry["resources"] and len(entry["reason"]) > 40, (tool, rule)
                assert set(entry.get("variants", [])) <= set(VARIANTS), (tool, rule)


def test_an_entry_for_some_variants_accepts_nothing_in_the_others():
    baseline = load_baseline()
    outside_a_vpc = Finding("checkov", "CKV_AWS_117", "AWS::Lambda::Function.ApiHandler8AD6A8DF")
    assert new_findings([outside_a_vpc], baseline, "localstack") == []
    assert new_findings([outside_a_vpc], baseline, "aws") == [outside_a_vpc]


def test_the_baseline_accepts_only_what_it_names():
    baseline = load_baseline()
    known = Finding("checkov", "CKV_AWS_158", "AWS::Logs::LogGroup.ApiHandlerLogs1234")
    other_resource = Finding("checkov", "CKV_AWS_115", "AWS::Lambda::Function.RunnerExecutorFEF8F791")
    new_rule = Finding("checkov", "CKV_AWS_999", "AWS::Lambda::Function.ApiHandler1")
    error = Finding("cfn-lint", "E3002", "ApiHandler1")
    assert new_findings([known, other_resource, new_rule, error], baseline) == sorted([other_resource, new_rule, error])


def test_the_linters_output_is_read_into_findings():
    cfn = json.dumps(
        [
            {
                "Rule": {"Id": "W3005"},
                "Message": "Obsolete DependsOn",
                "Location": {"Path": ["Resources", "RunnerExecutor1", "DependsOn"]},
            },
            {"Rule": {"Id": "E0000"}, "Message": "bad", "Location": {"Path": ["Outputs", "Url", "Value"]}},
        ]
    )
    assert parse_cfn_lint(cfn) == [
        Finding("cfn-lint", "W3005", "RunnerExecutor1", "Obsolete DependsOn"),
        Finding("cfn-lint", "E0000", "Outputs/Url", "bad"),
    ]
    report = {
        "check_type": "cloudformation",
        "results": {
            "failed_checks": [
                {
                    "check_id": "CKV_AWS_115",
                    "resource": "AWS::Lambda::Function.RunnerExecutor1",
                    "check_name": "Ensure that AWS Lambda function is configured for function-level concurrent execution limit",
                }
            ]
        },
    }
    assert [(f.rule, f.resource) for f in parse_checkov(json.dumps(report))] == [
        ("CKV_AWS_115", "AWS::Lambda::Function.RunnerExecutor1")
    ]
    assert parse_checkov(json.dumps([report, report]))[1].rule == "CKV_AWS_115"
    # A canned regression: the finding the executor without its reserved concurrency brings is new.
    assert new_findings(parse_checkov(json.dumps(report)), load_baseline()) == parse_checkov(json.dumps(report))


def test_the_templates_have_no_cfn_lint_error_and_no_new_finding(aws, lean, aurora, localstack, linters):
    baseline = load_baseline()
    for variant, synth in {"aws": aws, "lean": lean, "aurora": aurora, "localstack": localstack}.items():
        findings = cfn_lint(template_path(synth), linters) + checkov(template_path(synth), linters)
        assert [f for f in findings if f.tool == "cfn-lint" and f.rule.startswith("E")] == []
        assert new_findings(findings, baseline, variant) == [], variant


def test_a_regression_is_a_new_finding(aws, tmp_path, linters):
    """The executor without its reserved concurrency (the old template) fails the lint."""
    template = json.loads(template_path(aws).read_text())
    (executor_id,) = [
        k
        for k, v in template["Resources"].items()
        if v["Type"] == "AWS::Lambda::Function" and k.startswith("RunnerExecutor")
    ]
    del template["Resources"][executor_id]["Properties"]["ReservedConcurrentExecutions"]
    broken = tmp_path / "broken.template.json"
    broken.write_text(json.dumps(template))
    new = new_findings(checkov(broken, linters), load_baseline())
    assert [(f.rule, f.resource) for f in new] == [("CKV_AWS_115", f"AWS::Lambda::Function.{executor_id}")]

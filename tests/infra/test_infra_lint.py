"""cfn-lint and checkov on the synthesized template: no cfn-lint error, no finding the committed
baseline (infra/lint_baseline.json) does not accept, and a new finding fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("aws_cdk")
pytest.importorskip("cfnlint", reason="cfn-lint is not installed (the infra extra)")
pytest.importorskip("checkov", reason="checkov is not installed (the infra extra)")

from infra.lint import Finding, cfn_lint, checkov, load_baseline, new_findings  # noqa: E402


def template_path(synth) -> Path:
    from aws_cdk import Stage

    return Path(Stage.of(synth.stack).outdir) / synth.stack.template_file


def test_every_baseline_entry_gives_its_reason():
    for tool, rules in load_baseline().items():
        for rule, entry in rules.items():
            assert entry["resources"] and len(entry["reason"]) > 40, (tool, rule)


def test_the_baseline_accepts_only_what_it_names():
    baseline = load_baseline()
    known = Finding("checkov", "CKV_AWS_158", "AWS::Logs::LogGroup.ApiHandlerLogs1234")
    other_resource = Finding("checkov", "CKV_AWS_115", "AWS::Lambda::Function.RunnerExecutorFEF8F791")
    new_rule = Finding("checkov", "CKV_AWS_999", "AWS::Lambda::Function.ApiHandler1")
    error = Finding("cfn-lint", "E3002", "ApiHandler1")
    assert new_findings([known, other_resource, new_rule, error], baseline) == sorted(
        [other_resource, new_rule, error])


def test_the_templates_have_no_cfn_lint_error_and_no_new_finding(aws, lean):
    baseline = load_baseline()
    for synth in (aws, lean):
        findings = cfn_lint(template_path(synth)) + checkov(template_path(synth))
        assert [f for f in findings if f.tool == "cfn-lint" and f.rule.startswith("E")] == []
        assert new_findings(findings, baseline) == []


def test_a_regression_is_a_new_finding(aws, tmp_path):
    """The executor without its reserved concurrency (the old template) fails the lint."""
    template = json.loads(template_path(aws).read_text())
    (executor_id,) = [k for k, v in template["Resources"].items()
                      if v["Type"] == "AWS::Lambda::Function" and k.startswith("RunnerExecutor")]
    del template["Resources"][executor_id]["Properties"]["ReservedConcurrentExecutions"]
    broken = tmp_path / "broken.template.json"
    broken.write_text(json.dumps(template))
    new = new_findings(checkov(broken), load_baseline())
    assert [(f.rule, f.resource) for f in new] == [("CKV_AWS_115", f"AWS::Lambda::Function.{executor_id}")]

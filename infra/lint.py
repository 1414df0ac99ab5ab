"""Outside linters on the synthesized templates: cfn-lint and checkov, against a baseline.

``python -m infra.lint`` synthesizes the stack in its shapes (``cdk.json`` as it is, the other
side of every option, and the database as an Aurora Serverless v2 cluster), runs both linters on each template and fails when

- cfn-lint reports an error (``E...``): never accepted, or
- either linter reports a finding the baseline (``infra/lint_baseline.json``) does not accept.

The baseline accepts a finding by rule and resource pattern (``fnmatch``), each with the reason;
so a new resource that trips an accepted rule in the same way is covered, and anything else is new.

The linters run in a virtualenv of their own (``make lint-templates`` builds ``.venv-lint`` from
``infra/lint-requirements.txt``): checkov pins boto3 and packaging, which would drag the project's
environment back. This module runs with the project's Python (it synthesizes with aws-cdk) and
calls the linters through the tools' Python: ``--tools-python``, else ``$SCHEDULER_LINT_PYTHON``,
else ``.venv-lint/bin/python``.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.shared import ROOT

BASELINE = Path(__file__).resolve().parent / "lint_baseline.json"
# The Python of the linters' own virtualenv (``make lint-templates``), and the variable naming another.
ENV_TOOLS_PYTHON = "SCHEDULER_LINT_PYTHON"
DEFAULT_TOOLS_PYTHON = ROOT / ".venv-lint" / "bin" / "python"

# The shapes of the stack the tests also synthesize ("aws", "lean", "aurora" and "localstack" in
# tests/infra/conftest.py; the last is what `make localstack` deploys, for arm64 here as there).
VARIANTS: dict[str, dict[str, Any]] = {
    "aws": {},
    "lean": {
        "broker": "none",
        "nat_gateways": "0",
        "endpoint_azs": "1",
        "precision": "minute",
        "deletion_protection": "false",
        "db_multi_az": "true",
        "removal_policy": "destroy",
        "alarm_email": "ops@example.com",
    },
    # The database as an Aurora Serverless v2 cluster, with every Aurora option on, and the broker
    # as a three-node cluster.
    "aurora": {
        "database": "aurora-serverless",
        "db_reader": "true",
        "db_io_optimized": "true",
        "db_max_acu": "32",
        "broker_deployment": "cluster",
    },
    "localstack": {
        "localstack": "true",
        "architecture": "arm64",
        "deletion_protection": "false",
        "removal_policy": "destroy",
    },
}


@dataclass(frozen=True, order=True)
class Finding:
    """One linter finding: ``tool``, ``rule`` and the resource it is about (checkov: ``Type.LogicalId``,
    cfn-lint: the logical id)."""

    tool: str
    rule: str
    resource: str
    message: str = ""

    def __str__(self) -> str:
        return f"{self.tool} {self.rule} {self.resource}: {self.message}"


def synthesize(outdir: Path) -> dict[str, Path]:
    """The template of each variant, synthesized under ``outdir``."""
    from infra import build_app

    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    templates = {}
    for name, extra in VARIANTS.items():
        app, stack = build_app(context={**context, **extra}, outdir=str(outdir / name))
        app.synth()
        templates[name] = outdir / name / f"{stack.stack_name}.template.json"
    return templates


def tools_python(option: str | None = None) -> Path:
    """The Python the linters are installed in: ``option``, else ``$SCHEDULER_LINT_PYTHON``, else
    ``.venv-lint/bin/python``."""
    return Path(option or os.environ.get(ENV_TOOLS_PYTHON) or DEFAULT_TOOLS_PYTHON)


def cfn_lint(template: Path, python: Path | None = None) -> list[Finding]:
    """cfn-lint's findings (errors and warnings), run by ``python`` (default: ``tools_python()``)."""
    run = subprocess.run(
        [
            str(python or tools_python()),
            "-c",
            "import sys; from cfnlint.runner import main; sys.exit(main())",
            "--format",
            "json",
            str(template),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if run.returncode not in (0, 2, 4, 6, 8, 10, 12, 14) or not run.stdout.strip():
        if run.returncode == 0:
            return []
        raise RuntimeError(f"cfn-lint failed ({run.returncode}): {run.stderr[-2000:]}")
    return parse_cfn_lint(run.stdout)


def parse_cfn_lint(output: str) -> list[Finding]:
    """The findings of cfn-lint's JSON output."""
    findings = []
    for item in json.loads(output):
        path = item.get("Location", {}).get("Path") or []
        resource = str(path[1]) if len(path) > 1 and path[0] == "Resources" else "/".join(map(str, path[:2]))
        findings.append(Finding("cfn-lint", item["Rule"]["Id"], resource, item.get("Message", "")))
    return findings


def checkov(template: Path, python: Path | None = None) -> list[Finding]:
    """checkov's failed checks (CloudFormation framework), run by ``python`` (default: ``tools_python()``)."""
    run = subprocess.run(
        [
            str(python or tools_python()),
            "-m",
            "checkov.main",
            "--file",
            str(template),
            "--framework",
            "cloudformation",
            "--output",
            "json",
            "--quiet",
            "--compact",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if run.returncode not in (0, 1) or not run.stdout.strip():
        raise RuntimeError(f"checkov failed ({run.returncode}): {run.stderr[-2000:]}")
    return parse_checkov(run.stdout)


def parse_checkov(output: str) -> list[Finding]:
    """The failed checks of checkov's JSON output (one report, or a list of them)."""
    report = json.loads(output)
    reports = report if isinstance(report, list) else [report]
    findings = []
    for part in reports:
        for check in part.get("results", {}).get("failed_checks", []):
            findings.append(Finding("checkov", check["check_id"], check["resource"], check.get("check_name", "")))
    return findings


def load_baseline(path: Path = BASELINE) -> dict[str, dict[str, Any]]:
    """``{tool: {rule: entry or [entry, ...]}}``, an entry ``{"resources": [patterns], "reason": text}``
    and optionally ``"variants": [names]``, the only variants it accepts the finding in."""
    return json.loads(path.read_text())


def _entries(baseline: dict[str, dict[str, Any]], finding: Finding) -> list[dict[str, Any]]:
    entry = baseline.get(finding.tool, {}).get(finding.rule)
    if not entry:
        return []
    return entry if isinstance(entry, list) else [entry]


def accepted(finding: Finding, baseline: dict[str, dict[str, Any]], variant: str | None = None) -> bool:
    """Whether the baseline accepts ``finding`` in ``variant`` (cfn-lint errors never are)."""
    if finding.tool == "cfn-lint" and finding.rule.startswith("E"):
        return False
    return any(
        (variant is None or "variants" not in entry or variant in entry["variants"])
        and any(fnmatch.fnmatchcase(finding.resource, pattern) for pattern in entry["resources"])
        for entry in _entries(baseline, finding)
    )


def new_findings(
    findings: list[Finding], baseline: dict[str, dict[str, Any]], variant: str | None = None
) -> list[Finding]:
    """The findings the baseline does not accept (in ``variant``)."""
    return sorted(f for f in findings if not accepted(f, baseline, variant))


def lint(outdir: Path, python: Path | None = None) -> tuple[dict[str, list[Finding]], list[tuple[str, Finding]]]:
    """Every finding by variant, and the new ones with their variant (the linters run by ``python``)."""
    baseline = load_baseline()
    found: dict[str, list[Finding]] = {}
    for variant, template in synthesize(outdir).items():
        found[variant] = cfn_lint(template, python) + checkov(template, python)
    new = sorted(
        {(variant, f) for variant, findings in found.items() for f in new_findings(findings, baseline, variant)}
    )
    return found, new


def main(argv: list[str] | None = None) -> int:
    """Lint every shape of the stack; 1 when a finding is new (printed), else 0."""
    parser = argparse.ArgumentParser(prog="python -m infra.lint", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tools-python",
        help=f"the linters' Python (default: ${ENV_TOOLS_PYTHON}, "
        "else .venv-lint/bin/python; `make lint-templates` builds it)",
    )
    python = tools_python(parser.parse_args(argv).tools_python)
    if not python.exists():
        print(f"no linters' Python at {python}: run `make lint-templates` (it builds .venv-lint)")
        return 2
    with tempfile.TemporaryDirectory(prefix="scheduler-lint-") as outdir:
        found, new = lint(Path(outdir), python)
    for variant, findings in found.items():
        errors = sum(1 for f in findings if f.tool == "cfn-lint" and f.rule.startswith("E"))
        warnings = sum(1 for f in findings if f.tool == "cfn-lint") - errors
        failed = sum(1 for f in findings if f.tool == "checkov")
        print(
            f"{variant}: cfn-lint {errors} errors, {warnings} warnings; checkov {failed} failed checks "
            "(all accepted by the baseline unless listed below)"
        )
    for variant, finding in new:
        print(f"NEW ({variant}) {finding}")
    return 1 if new else 0


if __name__ == "__main__":
    raise SystemExit(main())

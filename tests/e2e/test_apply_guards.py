"""``scheduler apply``'s guards, from an audit of jobs as code: a secret's variable set but empty
is refused, a malformed reference is refused, a run the API's model would refuse writes nothing,
a dry run sees a ``***`` that an alert rule has nothing to keep for, ``--prune`` deletes only the
version it listed; and the smaller ones (a YAML list of jobs, a file named twice, read-only fields
said, ``--selector`` alone, no hint of a flag apply does not have). Against a live
``scheduler local``, as test_apply.py."""

from __future__ import annotations

import pytest
import requests

from tests.e2e.test_apply import _cli, api  # noqa: F401 (the live scheduler fixture)

pytestmark = pytest.mark.slow

HOOK = "http://127.0.0.1:9/hook"
JOB = f"""\
name: guarded
schedule: "@daily"
tags: [guard]
target:
  url: {HOOK}
  headers: {{X-Api-Key: "${{API_KEY}}"}}
  auth: {{type: bearer, token: "${{API_TOKEN}}"}}
"""
SECRETS = {"API_KEY": "k3y", "API_TOKEN": "t0ken"}


def _job(api, name: str) -> dict:
    [job] = [j for j in api.get("/v1/jobs?limit=200")["jobs"] if j["name"] == name]
    return job


def test_a_secrets_variable_set_but_empty_is_refused_and_the_stored_secret_kept(api, tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text(JOB)
    assert _cli(api, "apply", "-f", str(spec), env=SECRETS).returncode == 0
    before = _job(api, "guarded")
    # Another change, with the secret "set" to nothing (a CI system's missing secret).
    spec.write_text(JOB.replace('"@daily"', '"@hourly"'))
    for empty in ({"API_KEY": ""}, {"API_TOKEN": "  "}):
        answer = _cli(api, "apply", "-f", str(spec), env={**SECRETS, **empty})
        assert answer.returncode == 2, answer.stdout + answer.stderr
        [name] = empty
        assert f"${{{name}}} is set but empty" in answer.stderr
    answer = _cli(api, "apply", "-f", str(spec), "--resend-secrets", env={**SECRETS, "API_KEY": ""})
    assert answer.returncode == 2 and "is set but empty" in answer.stderr
    assert _job(api, "guarded")["version"] == before["version"]
    # jobs create -f reads references the same way.
    create = _cli(api, "jobs", "create", "-f", str(spec), env={**SECRETS, "API_TOKEN": ""})
    assert create.returncode == 2 and "${API_TOKEN} is set but empty" in create.stderr


def test_a_malformed_reference_is_refused_not_sent_as_written(api, tmp_path):
    for written, shown in (
        ("${DEPLOY_ENV:-prod}", "${DEPLOY_ENV:-prod}"),
        ("${ DEPLOY_ENV }", "${ DEPLOY_ENV }"),
        ("${deploy-env}", "${deploy-env}"),
    ):
        spec = tmp_path / "job.yaml"
        spec.write_text(f'name: refs\nschedule: "@daily"\ndescription: "{written}"\ntarget: {{url: "{HOOK}"}}\n')
        answer = _cli(api, "apply", "-f", str(spec), env={"DEPLOY_ENV": "prod"})
        assert answer.returncode == 2, answer.stdout + answer.stderr
        assert f"description: {shown} is not a reference" in answer.stderr
    # $${ is still a literal ${.
    spec.write_text(f'name: refs\nschedule: "@daily"\ndescription: "$${{x:-y}}"\ntarget: {{url: "{HOOK}"}}\n')
    assert _cli(api, "apply", "-f", str(spec)).returncode == 0
    assert _job(api, "refs")["description"] == "${x:-y}"
    # Two references in a secret's place: said as such, not as a literal secret.
    spec.write_text(
        f'name: two\nschedule: "@daily"\ntarget: {{url: "{HOOK}", auth: {{type: basic, username: u, '
        'password: "${PW_A}${PW_B}"}}\n'
    )
    answer = _cli(api, "apply", "-f", str(spec), env={"PW_A": "a", "PW_B": "b"})
    assert answer.returncode == 2 and "holds one reference" in answer.stderr, answer.stderr


def test_a_dry_run_sees_a_masked_alert_secret_with_nothing_to_keep(api, tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text(JOB)
    assert _cli(api, "apply", "-f", str(spec), env=SECRETS).returncode == 0
    # The job gains an alert rule whose token's variable is not set: "***", nothing stored for it.
    alert = '\nalerts:\n  - on: failure\n    target: {url: "http://127.0.0.1:9/alert", auth: {type: bearer, token: "${ALERT_TOKEN}"}}\n'
    spec.write_text(JOB + alert)
    dry = _cli(api, "apply", "-f", str(spec), "--dry-run", env=SECRETS)
    assert dry.returncode == 1, dry.stdout + dry.stderr
    assert "! guarded (would be refused" in dry.stdout and "alerts.0.target.auth.token" in dry.stdout
    # A rule set's new rule the same way; its rule kept as stored is not a problem.
    rules = tmp_path / "rules.yaml"
    rule = '  - on: failure\n    target: {{url: "{url}", auth: {{type: bearer, token: "${{{var}}}"}}}}\n'
    rules.write_text("kind: alert_rules\nname: team\ntag: guard\nalerts:\n" + rule.format(url=HOOK, var="HOOK_TOKEN"))
    assert _cli(api, "apply", "-f", str(rules), env={"HOOK_TOKEN": "h00k"}).returncode == 0
    rules.write_text(rules.read_text() + rule.format(url="http://127.0.0.1:9/other", var="OTHER_TOKEN"))
    dry = _cli(api, "apply", "-f", str(rules), "--dry-run")
    assert dry.returncode == 1 and "alerts.1.target.auth.token" in dry.stdout, dry.stdout + dry.stderr
    assert "alerts.0" not in dry.stdout
    real = _cli(api, "apply", "-f", str(rules))
    assert real.returncode == 1 and "nothing was changed" in real.stderr
    assert len(api.get("/v1/alert-rules/team")["alerts"]) == 1


def test_prune_deletes_only_the_version_it_listed(api, tmp_path):
    from scheduler.cli.apply import carry_out, prune_steps
    from scheduler.client import ApiCallFailed, SchedulerClient

    hook = {"type": "http", "url": HOOK}
    gone = api.post("/v1/jobs", {"name": "old", "schedule": "@daily", "tags": ["guard"], "target": hook})
    client = SchedulerClient(api.url)
    steps = prune_steps(client, "tag=guard", keep=set())
    assert [(s.action, s.name, s.version) for s in steps] == [("delete", "old", 1)]
    retagged = {"name": "old", "schedule": "@daily", "tags": ["kept"], "target": hook}
    assert requests.put(f"{api.url}/v1/jobs/{gone['id']}", json=retagged, timeout=10).status_code == 200
    with pytest.raises(ApiCallFailed) as refused:
        carry_out(client, steps, dry_run=False, say=lambda line: None)
    assert refused.value.status == 412
    assert _job(api, "old")["tags"] == ["kept"]


def test_the_smaller_guards(api, tmp_path):
    # A YAML list of jobs, as a JSON file may hold one.
    listed = tmp_path / "jobs" / "list.yaml"
    listed.parent.mkdir()
    listed.write_text(
        f'- {{name: a, schedule: "@daily", target: {{url: "{HOOK}"}}}}\n'
        f'- {{name: b, schedule: "@daily", state: paused, target: {{url: "{HOOK}"}}}}\n'
    )
    # The same file through its folder and by its name: read once.
    answer = _cli(api, "apply", "-f", str(listed.parent), "-f", str(listed))
    assert answer.returncode == 0, answer.stdout + answer.stderr
    assert "2 changed (2 created)" in answer.stdout
    # A field the scheduler sets (state) is said to be left out.
    assert "state: set by the scheduler, not by a file: left out" in answer.stderr
    assert "jobs pause" in answer.stderr
    # --selector without --prune does nothing: refused rather than ignored.
    alone = _cli(api, "apply", "-f", str(listed), "--selector", "tag=x")
    assert alone.returncode == 2 and "--selector picks the jobs --prune may delete" in alone.stderr


def test_an_exported_document_is_taken_by_the_command_of_its_kind(api, tmp_path):
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        f'kind: alert_rules\nname: team\ntag: guard\nalerts:\n  - on: failure\n    target: {{url: "{HOOK}"}}\n'
    )
    made = _cli(api, "alert-rules", "apply", "-f", str(rules))
    assert made.returncode == 0, made.stderr
    assert api.get("/v1/alert-rules/team")["alerts"][0]["target"]["type"] == "http"
    calendar = tmp_path / "calendar.yaml"
    calendar.write_text('kind: calendar\nname: closures\ndates: ["2030-12-24"]\n')
    assert _cli(api, "calendars", "apply", "-f", str(calendar)).returncode == 0
    job = tmp_path / "job.yaml"
    job.write_text(f'kind: job\nname: k\nschedule: "@daily"\ntarget: {{url: "{HOOK}"}}\n')
    assert _cli(api, "jobs", "create", "-f", str(job)).returncode == 0
    wrong = _cli(api, "jobs", "create", "-f", str(calendar))
    assert wrong.returncode == 2 and "kind: 'calendar' is not a job" in wrong.stderr


def test_a_renamed_job_leaves_the_old_one_said_not_deleted(api, tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text(f'name: report-v1\nschedule: "@daily"\ntags: [reports]\ntarget: {{url: "{HOOK}"}}\n')
    assert _cli(api, "apply", "-f", str(spec)).returncode == 0
    spec.write_text(spec.read_text().replace("report-v1", "report-v2"))
    renamed = _cli(api, "apply", "-f", str(spec))
    assert renamed.returncode == 0, renamed.stderr
    assert "stored jobs tagged reports that no file defines: report-v1" in renamed.stderr
    assert "--prune --selector tag=reports" in renamed.stderr
    assert {j["name"] for j in api.get("/v1/jobs")["jobs"]} == {"report-v1", "report-v2"}
    pruned = _cli(api, "apply", "-f", str(spec), "--prune", "--selector", "tag=reports")
    assert pruned.returncode == 0 and "- report-v1 (deleted)" in pruned.stdout
    assert "no file defines" not in pruned.stderr

"""``scheduler apply`` holding to what it plans, against a live ``scheduler local``: a calendar
and a job that names it changed in one apply (the calendar's replan of the job is no conflict);
``export``'s chains by name against stored ids (no change); ``--prune`` refused where it would
delete a job a chain names, or every job of a file holding none; a rule set made meanwhile not
overwritten; a rule set's missing tag and an alert target without a type said as the API says."""

from __future__ import annotations

import json
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from tests.e2e.test_apply import PLANT_YAML, _cli, api  # noqa: F401 (the live scheduler fixture)

pytestmark = pytest.mark.slow

TOKEN = {"PLANT_ALERT_TOKEN": "al3rt"}


def _job(api, name: str) -> dict:
    [job] = [j for j in api.get("/v1/jobs?limit=200")["jobs"] if j["name"] == name]
    return job


def test_a_calendar_and_a_job_naming_it_change_in_one_apply(api, tmp_path):
    path = tmp_path / "plant.yaml"
    path.write_text(PLANT_YAML)
    assert _cli(api, "apply", "-f", str(path), env=TOKEN).returncode == 0
    job = _job(api, "plant-report")
    # The calendar now closes the day of the job's next run (its replan moves the job's version),
    # and the job's retries change in the same files.
    closed = datetime.fromisoformat(job["next_run_at"]).astimezone(ZoneInfo("Europe/Berlin")).date().isoformat()
    path.write_text(
        PLANT_YAML.replace('"2026-12-31"]', f'"2026-12-31", "{closed}"]').replace(
            "tags: [plant]\n", "tags: [plant]\nretry: {max_attempts: 5}\n"
        )
    )
    done = _cli(api, "apply", "-f", str(path), env=TOKEN)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "~ calendar/plant-closures (updated)" in done.stdout and "~ plant-report (updated)" in done.stdout
    after = api.get(f"/v1/jobs/{job['id']}")
    assert after["retry"]["max_attempts"] == 5 and after["next_run_at"] != job["next_run_at"]
    actions = [c["action"] for c in api.get(f"/v1/jobs/{job['id']}/changes")["changes"]]
    assert actions[:2] == ["update", "replan"]

    # Someone else's edit in between is still a conflict (exit 4), and is kept.
    path.write_text(path.read_text().replace("max_attempts: 5", "max_attempts: 6"))
    planned = _cli(api, "apply", "-f", str(path), "--dry-run", env=TOKEN)
    assert "~ plant-report (would be updated)" in planned.stdout
    from scheduler.cli.apply import carry_out, plan
    from scheduler.cli.manifests import read_documents, resolve
    from scheduler.client import ApiCallFailed, SchedulerClient

    client = SchedulerClient(api.url)
    steps = plan([resolve(d) for d in read_documents([str(path)])], client, resend_secrets=False)
    api.post(f"/v1/jobs/{job['id']}/pause", {})  # not a replan: a change of someone else's
    with pytest.raises(ApiCallFailed) as refused:
        carry_out(client, steps, dry_run=False, say=lambda line: None)
    assert refused.value.status == 412
    assert api.get(f"/v1/jobs/{job['id']}")["retry"]["max_attempts"] == 5


def test_apply_of_an_export_whose_chain_names_a_job_by_id_changes_nothing(api):
    hook = {"type": "http", "url": "http://127.0.0.1:9/t"}
    followed = api.post("/v1/jobs", {"name": "t", "schedule": "@daily", "target": hook})
    api.post("/v1/jobs", {"name": "s", "schedule": "@daily", "on_success": [followed["id"]], "target": hook})
    exported = _cli(api, "export")
    assert "on_success:\n- t\n" in exported.stdout
    again = _cli(api, "apply", "-f", "-", stdin=exported.stdout)
    assert again.returncode == 0 and again.stdout.strip() == "0 changed, 2 unchanged", again.stdout + again.stderr
    assert _job(api, "s")["on_success"] == [followed["id"]]
    # Another change still goes through, and writes the chain as the file says it.
    changed = _cli(api, "apply", "-f", "-", stdin=exported.stdout.replace("name: s\n", "name: s\ndescription: d\n"))
    assert changed.returncode == 0 and "1 changed (1 updated)" in changed.stdout, changed.stdout + changed.stderr
    assert _job(api, "s")["on_success"] == ["t"]


CHAINED = """\
name: ch-a
schedule: "@daily"
tags: [ch]
on_success: [ch-b]
target: {url: "http://127.0.0.1:9/a"}
---
name: ch-b
schedule: "@daily"
tags: [ch]
target: {url: "http://127.0.0.1:9/b"}
"""


def test_prune_refuses_to_delete_a_job_that_a_chain_names(api, tmp_path):
    both = tmp_path / "both.yaml"
    both.write_text(CHAINED)
    assert _cli(api, "apply", "-f", str(both)).returncode == 0
    only_a = tmp_path / "a.yaml"
    only_a.write_text(CHAINED.split("---\n")[0])
    refused = _cli(api, "apply", "-f", str(only_a), "--prune", "--selector", "tag=ch")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "ch-b (named by ch-a)" in refused.stderr and refused.stdout == ""
    # A job no file defines, outside the selector, naming it by id: refused too.
    b_id = _job(api, "ch-b")["id"]
    api.post(
        "/v1/jobs",
        {
            "name": "outside",
            "schedule": "@daily",
            "on_failure": [b_id],
            "target": {"type": "http", "url": "http://127.0.0.1:9/o"},
        },
    )
    unchained = tmp_path / "a2.yaml"
    unchained.write_text(CHAINED.split("---\n")[0].replace("on_success: [ch-b]\n", ""))
    again = _cli(api, "apply", "-f", str(unchained), "--prune", "--selector", "tag=ch")
    assert again.returncode == 2 and "ch-b (named by outside)" in again.stderr, again.stdout + again.stderr
    assert {j["name"] for j in api.get("/v1/jobs")["jobs"]} == {"ch-a", "ch-b", "outside"}
    # Both jobs go when no chain names them any more.
    assert _cli(api, "jobs", "delete", "outside").returncode == 0
    pruned = _cli(api, "apply", "-f", str(unchained), "--prune", "--selector", "tag=ch")
    assert pruned.returncode == 0 and "- ch-b (deleted)" in pruned.stdout, pruned.stdout + pruned.stderr


def test_prune_with_files_holding_no_job_is_refused(api, tmp_path):
    path = tmp_path / "plant.yaml"
    path.write_text(PLANT_YAML)
    assert _cli(api, "apply", "-f", str(path), env=TOKEN).returncode == 0
    calendars = tmp_path / "calendars.yaml"
    calendars.write_text(_cli(api, "export", "--kind", "calendar").stdout)
    refused = _cli(api, "apply", "-f", str(calendars), "--prune", "--selector", "tag=plant")
    assert refused.returncode == 2 and "no job document" in refused.stderr, refused.stderr
    assert [j["name"] for j in api.get("/v1/jobs")["jobs"]] == ["plant-report"]


RULES = """\
kind: alert_rules
name: ops
tag: ops
alerts:
  - on: failure
    target: {url: "http://127.0.0.1:9/alert"}
"""


def test_a_rule_set_made_meanwhile_is_not_overwritten_and_a_missing_tag_reads_alike(api, tmp_path):
    from scheduler.cli.apply import carry_out, plan
    from scheduler.cli.manifests import read_documents, resolve
    from scheduler.client import ApiCallFailed, SchedulerClient

    path = tmp_path / "rules.yaml"
    path.write_text(RULES)  # its target has no type: http, as a job's
    client = SchedulerClient(api.url)
    steps = plan([resolve(d) for d in read_documents([str(path)])], client, resend_secrets=False)
    assert [s.action for s in steps] == ["create"]
    hook = {"type": "http", "url": "http://127.0.0.1:9/theirs"}
    client.put_alert_rule("ops", "ops", [{"on": "recovery", "target": hook}])  # a teammate's, meanwhile
    with pytest.raises(ApiCallFailed) as refused:
        carry_out(client, steps, dry_run=False, say=lambda line: None)
    assert refused.value.status == 412
    assert (
        client.get_alert_rule("ops")["alerts"][0]["on"] == "recovery" and client.get_alert_rule("ops")["version"] == 1
    )
    client.delete_alert_rule("ops")
    made = _cli(api, "apply", "-f", str(path))
    assert made.returncode == 0 and "+ alert_rules/ops (created)" in made.stdout, made.stdout + made.stderr

    untagged = tmp_path / "untagged.yaml"
    untagged.write_text(RULES.replace("name: ops\ntag: ops\n", "name: nameless\n"))
    dry = _cli(api, "apply", "-f", str(untagged), "--dry-run")
    real = _cli(api, "apply", "-f", str(untagged))
    assert "tag: is required" in dry.stdout, dry.stdout
    assert real.returncode == 1 and "tag: is required" in real.stderr, real.stderr
    never = _cli(api, "alert-rules", "apply", "--name", "never-made", "--tag", "ops", "--alert", "failure",
                 "--webhook", "http://127.0.0.1:9/x", "--if-match", "1")  # fmt: skip
    assert never.returncode == 4 and "there is no alert rule set of that name" in never.stderr, never.stderr
    assert json.loads(_cli(api, "alert-rules", "list", "-o", "json").stdout)["alert_rules"][0]["name"] == "ops"


def test_a_dry_run_refuses_the_secrets_the_api_would_refuse(api, tmp_path):
    path = tmp_path / "job.yaml"
    masked = 'name: m\nschedule: "@daily"\ntarget: {url: "http://127.0.0.1:9/m", auth: {type: bearer, token: "***"}}\n'
    path.write_text(masked)
    dry = _cli(api, "apply", "-f", str(path), "--dry-run")
    assert dry.returncode == 1 and 'target.auth.token: is masked ("***")' in dry.stdout, dry.stdout + dry.stderr
    path.write_text(
        'name: k\nschedule: "@daily"\ntarget: {url: "http://127.0.0.1:9/k", headers: {X-Api-Key: "${KEY}"}}\n'
    )
    dry = _cli(api, "apply", "-f", str(path), "--dry-run", env={"KEY": "kk\u20ac"})
    assert dry.returncode == 1 and "target.headers.X-Api-Key: must be Latin-1" in dry.stdout, dry.stdout
    assert "kk\u20ac" not in dry.stdout + dry.stderr
    # A stored secret kept (its reference unset) while the url moves to another host.
    path.write_text(
        'name: b\nschedule: "@daily"\ntarget: {url: "http://127.0.0.1:9/b", auth: {type: bearer, token: "${TOK}"}}\n'
    )
    assert _cli(api, "apply", "-f", str(path), env={"TOK": "t0k"}).returncode == 0
    path.write_text(path.read_text().replace("127.0.0.1:9", "localhost:9"))
    dry = _cli(api, "apply", "-f", str(path), "--dry-run")
    assert dry.returncode == 1 and "moved to another scheme, host or port" in dry.stdout, dry.stdout + dry.stderr


def test_export_says_which_jobs_lose_their_state_and_apply_which_run_at_once(api, tmp_path):
    hook = {"type": "http", "url": "http://127.0.0.1:9/p"}
    paused = api.post("/v1/jobs", {"name": "held", "schedule": "@daily", "target": hook})
    api.post(f"/v1/jobs/{paused['id']}/pause", {})
    exported = _cli(api, "export")
    assert "export: 1 paused job written without their state" in exported.stderr, exported.stderr
    path = tmp_path / "late.yaml"
    path.write_text('name: late\nrun_at: "2020-01-01T00:00:00Z"\ntarget: {url: "http://127.0.0.1:9/late"}\n')
    dry = _cli(api, "apply", "-f", str(path), "--dry-run")
    assert dry.returncode == 0 and "(a one-off whose run_at has passed: created, it runs at once)" in dry.stdout

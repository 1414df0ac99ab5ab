"""``scheduler apply`` and ``scheduler export`` against a live ``scheduler local``: job files
applied by name (created, replaced, pruned), a second apply changes nothing, and ``apply`` of
``export``'s output gives ``0 changed``. Secrets travel as ``${ENV}`` references only."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import requests

from tests.support import ROOT, LocalScheduler

pytestmark = pytest.mark.slow

JOBS_YAML = """\
name: nightly-report
schedule: "0 3 * * *"
timezone: Europe/Berlin
tags: [billing, managed]
target:
  url: http://127.0.0.1:9/report
  body: '{"at": "{{scheduled_at}}"}'
  auth: {type: bearer, token: "${REPORT_TOKEN}"}
retry: {max_attempts: 4}
---
name: hourly-sync
schedule: "@every 1h"
start_at: 2026-01-01T00:30:00+01:00
tags: [managed]
target: {type: http, url: "http://127.0.0.1:9/sync", method: GET}
---
"""

QUEUE_JSON = {
    "name": "to-queue",
    "tags": ["managed"],
    "run_at": "2030-01-01T00:00:00Z",
    "target": {
        "type": "amqp",
        "url": "amqp://guest:${BROKER_PASSWORD}@127.0.0.1:5672/%2F",
        "exchange": "jobs",
        "routing_key": "due",
    },
}


@pytest.fixture
def api(db_url, tmp_path):
    scheduler = LocalScheduler(db_url, str(tmp_path / "data"))
    yield scheduler
    assert scheduler.stop() == 0, "".join(scheduler.lines)


def _cli(api, *arguments, env=None, stdin=None):
    environment = {**os.environ, "SCHEDULER_ENDPOINT": api.url, **(env or {})}
    environment.pop("REPORT_TOKEN", None) if env is None or "REPORT_TOKEN" not in env else None
    return subprocess.run(
        [sys.executable, "-m", "scheduler.cli", *arguments],
        env=environment,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


SECRETS = {"REPORT_TOKEN": "r3port", "BROKER_PASSWORD": "br0ker"}


def test_apply_creates_then_changes_nothing_then_prunes(api, tmp_path):
    folder = tmp_path / "jobs"
    folder.mkdir()
    (folder / "jobs.yaml").write_text(JOBS_YAML)
    (folder / "queue.json").write_text(json.dumps(QUEUE_JSON))
    api.post(
        "/v1/jobs",
        {
            "name": "handmade",
            "tags": ["managed"],
            "schedule": "@daily",
            "target": {"type": "http", "url": "http://127.0.0.1:9/h"},
        },
    )
    api.post(
        "/v1/jobs",
        {"name": "other-team", "schedule": "@daily", "target": {"type": "http", "url": "http://127.0.0.1:9/o"}},
    )

    dry = _cli(api, "apply", "-f", str(folder), "--dry-run", env=SECRETS)
    assert dry.returncode == 0, dry.stderr
    assert "+ nightly-report (would be created)" in dry.stdout
    assert dry.stdout.splitlines()[-1] == "3 would change (3 created), 0 unchanged (dry run: nothing was changed)"
    assert [j["name"] for j in api.get("/v1/jobs")["jobs"]] == ["handmade", "other-team"]

    first = _cli(api, "apply", "-f", str(folder), env=SECRETS)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[-1] == "3 changed (3 created), 0 unchanged"
    jobs = {j["name"]: j for j in api.get("/v1/jobs")["jobs"]}
    assert jobs["nightly-report"]["retry"]["max_attempts"] == 4
    assert jobs["nightly-report"]["target"]["auth"]["token"] == "***"
    assert jobs["to-queue"]["target"]["url"] == "amqp://guest:***@127.0.0.1:5672/%2F"
    assert "r3port" not in first.stdout + first.stderr

    again = _cli(api, "apply", "-f", str(folder), env=SECRETS)
    assert again.returncode == 0 and again.stdout.strip() == "0 changed, 3 unchanged", again.stdout

    # --resend-secrets sends the two jobs with secrets: the API compares each with the one stored
    # and keeps it, so nothing changed; a rotated token is one update.
    resent = _cli(api, "apply", "-f", str(folder), "--resend-secrets", env=SECRETS)
    assert resent.returncode == 0 and resent.stdout.strip() == "0 changed, 3 unchanged", resent.stdout
    assert api.get("/v1/jobs?name_prefix=nightly")["jobs"][0]["version"] == 1
    rotated = _cli(api, "apply", "-f", str(folder), "--resend-secrets", env={**SECRETS, "REPORT_TOKEN": "r3port-2"})
    assert rotated.returncode == 0, rotated.stderr
    assert rotated.stdout.splitlines() == [
        "~ nightly-report (updated)",
        "    (secrets sent again: --resend-secrets)",
        "1 changed (1 updated), 2 unchanged",
    ]
    _cli(api, "apply", "-f", str(folder), "--resend-secrets", env=SECRETS)  # the first token back

    # A change to one file is one update, field by field; the prune deletes the managed job no
    # file defines (handmade), not the one outside the selector (other-team).
    (folder / "jobs.yaml").write_text(JOBS_YAML.replace('"0 3 * * *"', '"30 3 * * *"'))
    changed = _cli(api, "apply", "-f", str(folder), "--prune", "--selector", "tag=managed", env=SECRETS)
    assert changed.returncode == 0, changed.stderr
    lines = changed.stdout.splitlines()
    assert "~ nightly-report (updated)" in lines and '    schedule: "0 3 * * *" -> "30 3 * * *"' in lines
    assert "- handmade (deleted)" in lines
    assert lines[-1] == "2 changed (1 updated, 1 deleted), 2 unchanged"
    assert sorted(j["name"] for j in api.get("/v1/jobs")["jobs"]) == [
        "hourly-sync",
        "nightly-report",
        "other-team",
        "to-queue",
    ]
    # the token stayed the one sent last (sent again with the update)
    assert api.get("/v1/jobs?name_prefix=nightly")["jobs"][0]["version"] == 4


def test_export_round_trips_through_apply(api, tmp_path):
    for body in (
        {
            "name": "a-bearer",
            "schedule": "0 3 * * *",
            "timezone": "Europe/Berlin",
            "tags": ["x", "b"],
            "description": "d",
            "target": {
                "type": "http",
                "url": "http://127.0.0.1:9/a",
                "auth": {"type": "bearer", "token": "s3cret"},
                "headers": {"X-A": "1", "X-Api-Key": "hk3y-secret"},
            },
            "retry": {"max_attempts": 5, "max_age_seconds": 600},
            "missed_runs": "run_all",
        },
        {
            "name": "b-basic",
            "run_at": "2030-01-01T10:00:00+01:00",
            "after_completion": "delete",
            "target": {
                "type": "http",
                "url": "http://127.0.0.1:9/b",
                "auth": {"type": "basic", "username": "u", "password": "p4ss"},
            },
        },
        {
            "name": "c-amqp",
            "schedule": "rate(5 minutes)",
            "start_at": "2026-01-01T00:00:00Z",
            "target": {
                "type": "amqp",
                "url": "amqp://guest:br0ker@127.0.0.1:5672/%2F",
                "exchange": "x",
                "body": "{{job_id}}",
            },
        },
        {
            "name": "d-sqs",
            "schedule": "@hourly",
            "target": {
                "type": "sqs",
                "queue_url": "https://sqs.eu-west-1.amazonaws.com/123456789012/q",
                "body": "b",
                "role_arn": "arn:aws:iam::123456789012:role/r",
            },
        },
    ):
        api.post("/v1/jobs", body)
    api.post(f"/v1/jobs/{api.get('/v1/jobs?name_prefix=d-sqs')['jobs'][0]['id']}/pause", {})

    exported = _cli(api, "export")
    assert exported.returncode == 0, exported.stderr
    text = exported.stdout
    assert text.startswith("---\nname: a-bearer\n") and text.count("\n---\n") == 3
    for secret in ("s3cret", "p4ss", "br0ker", "hk3y-secret"):
        assert secret not in text
    assert "token: ${A_BEARER_TOKEN}" in text and "password: ${B_BASIC_PASSWORD}" in text
    assert "X-Api-Key: ${A_BEARER_HEADER_X_API_KEY}" in text  # a credential header is a secret too
    assert "amqp://guest:${C_AMQP_BROKER_PASSWORD}@127.0.0.1:5672/%2F" in text
    assert "A_BEARER_TOKEN" in exported.stderr
    assert "stats" not in text and "version" not in text and "owner" not in text

    # Back through apply, from stdin: nothing changes (unset references keep the stored secrets).
    back = _cli(api, "apply", "-f", "-", stdin=text)
    assert back.returncode == 0, back.stderr
    assert back.stdout.strip() == "0 changed, 4 unchanged", back.stdout
    assert "A_BEARER_TOKEN" in back.stderr and "sent as ***, which keeps a stored secret" in back.stderr
    # the export of a tag only, as JSON that apply takes too
    tagged = _cli(api, "export", "--tag", "x", "-o", "json")
    assert [d["name"] for d in json.loads(tagged.stdout)] == ["a-bearer"]
    (tmp_path / "x.json").write_text(tagged.stdout)
    assert _cli(api, "apply", "-f", str(tmp_path / "x.json")).stdout.strip() == "0 changed, 1 unchanged"
    assert requests.get(f"{api.url}/v1/jobs", timeout=10).json()["jobs"][3]["state"] == "paused"  # state left alone


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (
            'name: j\nschedule: "@daily"\ntarget: {url: "http://127.0.0.1:9/", auth: {type: bearer, token: plain}}\n',
            "target.auth.token: a literal secret",
        ),
        ("schedule: '@daily'\n", "needs its name"),
        (
            'name: j\nschedule: "@daily"\ntarget: {url: "http://127.0.0.1:9/", headers: {Authorization: "Bearer x"}}\n',
            "target.headers.Authorization: a literal secret",
        ),
        (
            'name: j\nschedule: "@daily"\ntarget: {url: "http://${NO_SUCH_HOST_VAR}/"}\n',
            "${NO_SUCH_HOST_VAR} is not set",
        ),
        (
            'name: j\nschedule: "@daily"\ntarget: {url: "http://127.0.0.1:9/", auth: {type: bearer, token: "${UNSET_TOKEN_VAR}"}}\n',
            "a new job needs its secrets: set target.auth.token",
        ),
        ("name: j\n---\nname: j\n", "is also defined in"),
        ("kind: cronjob\nname: j\n", "kind must be one of job, calendar, alert_rules"),
        ("kind: calendar\ndates: ['2026-12-24']\n", "a calendar needs its name"),
        ("name: 5\nschedule: '@daily'\n", 'name: must be a string (quote it: name: "5")'),
        ("name: j\ntags: [ops, on]\n", "tags.1: YAML reads a bare on, off, yes, no, true or false as a boolean"),
        (
            "kind: alert_rules\nname: team\ntag: t\nalerts:\n  - on: failure\n"
            "    target: {type: http, url: 'http://127.0.0.1:9/', auth: {type: bearer, token: plain}}\n",
            "alerts.0.target.auth.token: a literal secret",
        ),
        ("kind: calendar\nname: c\n---\nkind: calendar\nname: c\n", "the calendar 'c' is also defined in"),
        ("kind: [job]\nname: x\n", "kind must be one of job, calendar, alert_rules"),
        ("kind: alert_rules\nname: r\ntag: t\nalerts: []\nalertz: oops\n", "alertz: is not a field of an alert"),
        # A key named twice: PyYAML lets the last one win, which silently drops the first.
        ('name: j\nschedule: "@daily"\nschedule: "@hourly"\n', "found duplicate key 'schedule'"),
        ('name: j\ntarget: {url: "http://127.0.0.1:9/", url: "http://127.0.0.1:8/"}\n', "found duplicate key 'url'"),
        ("name: j\nschedule: @daily\n", "quote a schedule that starts with '@', as in schedule: \"@daily\""),
        ("name: j\nschedules:\n  - @hourly\n", "quote a schedule that starts with '@'"),
    ],
)
def test_apply_refuses_bad_files_before_sending_anything(api, tmp_path, document, message):
    path = tmp_path / "j.yaml"
    path.write_text(document)
    done = _cli(api, "apply", "-f", str(path))
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert api.get("/v1/jobs")["jobs"] == []
    assert api.get("/v1/calendars")["calendars"] == [] and api.get("/v1/alert-rules")["alert_rules"] == []


def test_apply_refuses_a_json_object_naming_a_key_twice(api, tmp_path):
    path = tmp_path / "j.json"
    path.write_text('{"name": "j", "schedule": "@daily", "schedule": "@hourly"}')
    done = _cli(api, "apply", "-f", str(path))
    assert done.returncode == 2 and "not valid JSON: duplicate key 'schedule'" in done.stderr, done.stderr
    assert api.get("/v1/jobs")["jobs"] == []


def test_prune_needs_a_selector(api, tmp_path):
    (tmp_path / "j.yaml").write_text("name: j\n")
    done = _cli(api, "apply", "-f", str(tmp_path / "j.yaml"), "--prune")
    assert done.returncode == 2 and "--prune needs --selector" in done.stderr
    assert ROOT  # the project root is where the CLI runs from


# A job first, the calendar it names after it: apply writes calendars and rule sets before jobs.
PLANT_YAML = """\
name: plant-report
schedule: "0 6 * * *"
timezone: Europe/Berlin
tags: [plant]
exclude_calendars: [plant-closures]
target: {url: "http://127.0.0.1:9/report"}
alerts:
  - on: failure
    target: {type: http, url: "http://127.0.0.1:9/job-alert", auth: {type: bearer, token: "${PLANT_ALERT_TOKEN}"}}
---
kind: calendar
name: plant-closures
timezone: Europe/Berlin
dates: ["2026-12-24", "2026-12-31"]
yearly: ["01-01"]
---
kind: alert_rules
name: plant-team
tag: plant
alerts:
  - on: failures_in_a_row
    threshold: 3
    target: {type: http, url: "http://127.0.0.1:9/alert", auth: {type: bearer, token: "${PLANT_ALERT_TOKEN}"}}
"""


def test_apply_and_export_carry_calendars_and_alert_rule_sets(api, tmp_path):
    path = tmp_path / "plant.yaml"
    path.write_text(PLANT_YAML)
    token = {"PLANT_ALERT_TOKEN": "al3rt"}
    first = _cli(api, "apply", "-f", str(path), env=token)
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert lines == [
        "+ calendar/plant-closures (created)",
        "+ alert_rules/plant-team (created)",
        "+ plant-report (created)",
        "3 changed (3 created), 0 unchanged",
    ], first.stdout
    assert api.get("/v1/jobs")["jobs"][0]["exclude_calendars"] == ["plant-closures"]
    assert api.get("/v1/alert-rules/plant-team")["alerts"][0]["target"]["auth"]["token"] == "***"
    again = _cli(api, "apply", "-f", str(path), env=token)
    assert again.returncode == 0 and again.stdout.strip() == "0 changed, 3 unchanged", again.stdout

    # A change to a calendar and a rule set: each replaced at the version read, field by field.
    path.write_text(
        PLANT_YAML.replace('"2026-12-31"]', '"2026-12-31", "2026-12-28"]').replace("threshold: 3", "threshold: 5")
    )
    changed = _cli(api, "apply", "-f", str(path), "-o", "json", env=token)
    assert changed.returncode == 0, changed.stderr
    assert json.loads(changed.stdout) == {
        "dry_run": False,
        "created": [],
        "updated": ["calendar/plant-closures", "alert_rules/plant-team"],
        "deleted": [],
        "skipped": [],
        "unchanged": ["plant-report"],
    }
    calendar = api.get("/v1/calendars/plant-closures")
    assert calendar["version"] == 2 and calendar["dates"] == ["2026-12-24", "2026-12-31", "2026-12-28"]
    assert api.get("/v1/alert-rules/plant-team")["alerts"][0]["threshold"] == 5

    # export writes them back in apply's order, secrets as references; apply of it changes nothing.
    exported = _cli(api, "export")
    assert exported.returncode == 0, exported.stderr
    text = exported.stdout
    assert text.index("kind: calendar") < text.index("kind: alert_rules") < text.index("name: plant-report")
    assert "token: ${PLANT_TEAM_RULES_ALERT1_TOKEN}" in text and "token: ${PLANT_REPORT_ALERT1_TOKEN}" in text
    assert "al3rt" not in text and "version" not in text
    back = _cli(api, "apply", "-f", "-", stdin=text)
    assert back.returncode == 0 and back.stdout.strip() == "0 changed, 3 unchanged", (back.stdout, back.stderr)
    assert "alerts.0.target.auth.token (${PLANT_TEAM_RULES_ALERT1_TOKEN}) is not set: sent as ***, which keeps" in (
        back.stderr
    )

    # A job filter keeps the calendars its jobs name and, with --tag, the rule sets of that tag.
    tagged = json.loads(_cli(api, "export", "--tag", "plant", "-o", "json").stdout)
    assert [(d.get("kind", "job"), d["name"]) for d in tagged] == [
        ("calendar", "plant-closures"),
        ("alert_rules", "plant-team"),
        ("job", "plant-report"),
    ]
    assert json.loads(_cli(api, "export", "--tag", "other", "-o", "json").stdout) == []
    only = json.loads(_cli(api, "export", "--kind", "calendar", "-o", "json").stdout)
    assert [d["name"] for d in only] == ["plant-closures"]


def test_prune_with_no_document_deletes_nothing(api, tmp_path):
    # an empty file (the output of an export that failed) must not read as "no job wanted"
    (tmp_path / "j.yaml").write_text(
        "name: keep-me\nschedule: '@daily'\ntags: [bulk]\ntarget: {url: 'http://127.0.0.1:9/'}\n"
    )
    assert _cli(api, "apply", "-f", str(tmp_path / "j.yaml")).returncode == 0
    for empty in ("", "---\n"):
        (tmp_path / "empty.yaml").write_text(empty)
        done = _cli(api, "apply", "-f", str(tmp_path / "empty.yaml"), "--prune", "--selector", "tag=bulk")
        assert done.returncode == 2 and "--prune with no job document read" in done.stderr, done.stderr
    assert [job["name"] for job in api.get("/v1/jobs")["jobs"]] == ["keep-me"]


def test_export_keeps_a_jobs_own_dollar_braces_and_names_each_secret_once(api, tmp_path):
    jobs = (
        "name: dollar-job\nschedule: '@daily'\ntags: [x]\ndescription: 'uses $${HOME} literally'\n"
        "target: {url: 'http://127.0.0.1:9/', body: 'echo $${PATH} $$${X}'}\n"
        "---\nname: svc-a\nschedule: '@daily'\ntags: [x]\n"
        "target: {url: 'http://127.0.0.1:9/a', auth: {type: bearer, token: '${TOK_A}'}}\n"
        "---\nname: Svc.A\nschedule: '@daily'\ntags: [x]\n"
        "target: {url: 'http://127.0.0.1:9/b', auth: {type: bearer, token: '${TOK_B}'}}\n"
    )
    (tmp_path / "j.yaml").write_text(jobs)
    assert (
        _cli(api, "apply", "-f", str(tmp_path / "j.yaml"), env={"TOK_A": "token-a", "TOK_B": "token-b"}).returncode == 0
    )
    [stored] = [job for job in api.get("/v1/jobs")["jobs"] if job["name"] == "dollar-job"]
    assert stored["description"] == "uses ${HOME} literally" and stored["target"]["body"] == "echo ${PATH} $${X}"
    exported = _cli(api, "export", "--tag", "x")
    assert exported.returncode == 0, exported.stderr
    assert "SVC_A_TOKEN, SVC_A_TOKEN_2" in exported.stderr  # one variable per secret
    (tmp_path / "exported.yaml").write_text(exported.stdout)
    again = _cli(api, "apply", "-f", str(tmp_path / "exported.yaml"), "--dry-run")
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip().splitlines()[-1].startswith("0 changed"), again.stdout


CHAINED_YAML = """name: chain-a-extract
schedule: "@daily"
tags: [chain]
on_success: [chain-z-report]
target: {url: "http://127.0.0.1:9/extract"}
---
name: chain-z-report
schedule: "@daily"
tags: [chain]
target: {url: "http://127.0.0.1:9/report"}
"""


def test_a_bundle_whose_jobs_chain_to_each_other_applies_on_its_own(api, tmp_path):
    # the job a chain names comes first, whatever the order of the files
    (tmp_path / "chain.yaml").write_text(CHAINED_YAML)
    done = _cli(api, "apply", "-f", str(tmp_path / "chain.yaml"))
    assert done.returncode == 0, done.stderr
    names = {job["name"]: job for job in api.get("/v1/jobs")["jobs"]}
    assert names["chain-a-extract"]["on_success"] == ["chain-z-report"]

"""Alerts through the real server (`scheduler local` as a black box): one alert for N failures
in a row and one for the recovery under two runners; missing_run when no runner runs the job
past the threshold, and never for a paused job."""

from __future__ import annotations

import json

import pytest

from tests.support import LocalScheduler, RecordingServer, poll


@pytest.fixture
def local(db_url, tmp_path):
    started: list[LocalScheduler] = []

    def start(*extra: str) -> LocalScheduler:
        scheduler = LocalScheduler(db_url, str(tmp_path / f"data{len(started)}"), *extra)
        started.append(scheduler)
        return scheduler

    yield start
    for scheduler in started:
        if scheduler.process.poll() is None:
            assert scheduler.stop() == 0, "".join(scheduler.lines)


@pytest.fixture
def target():
    server = RecordingServer()
    yield server
    server.close()


def hook(url: str, **extra) -> dict:
    return {"type": "http", "url": url, "method": "POST", "timeout_seconds": 5, **extra}


def alert_bodies(target: RecordingServer, path: str) -> list[dict]:
    return [json.loads(r["body"]) for r in target.requests if r["path"] == path]


def test_failures_in_a_row_alert_once_and_the_recovery_once_under_two_runners(local, target):
    target.responses["/job"] = [(500, {}, b"down")] * 6 + [(200, {}, b"ok")]
    api = local("--runners", "2")
    job = api.post(
        "/v1/jobs",
        {
            "name": "flaky-billing",
            "schedule": "@every 1s",
            "retry": {"max_attempts": 1},
            "target": hook(target.url + "/job"),
            "alerts": [
                {"on": "failures_in_a_row", "threshold": 3, "target": hook(target.url + "/slack")},
                {"on": "recovery", "target": hook(target.url + "/slack")},
            ],
        },
    )
    # The recovery alert, then three more successes: nothing else is sent.
    poll(lambda: len(alert_bodies(target, "/slack")) >= 2, timeout=40, what="two alerts")
    ran = len([r for r in target.requests if r["path"] == "/job"])
    poll(lambda: len([r for r in target.requests if r["path"] == "/job"]) >= ran + 3, timeout=20, what="3 more runs")
    alerts = poll(
        lambda: (lambda page: page if all(a["status"] == "delivered" for a in page) else None)(
            api.get(f"/v1/alerts?job_id={job['id']}")["alerts"]
        ),
        what="alerts recorded delivered",
    )
    bodies = alert_bodies(target, "/slack")
    assert len(bodies) == 2, bodies
    assert "failed 3 times in a row: HTTP 500" in bodies[0]["text"]
    assert bodies[0]["text"].endswith(f"/console/#/jobs/{job['id']}")
    assert bodies[1]["text"].startswith("job flaky-billing recovered")
    assert [(a["on"], a["event"]) for a in alerts] == [("recovery", "recovered"), ("failures_in_a_row", "fired")]
    assert alerts[0]["incident_id"] == alerts[1]["incident_id"]


def test_missing_run_fires_with_the_runner_stopped_and_never_for_a_paused_job(local, target):
    api = local("--runners", "0")  # the API and the alerts: no runner claims the jobs
    assert "no runner: the API and the alerts only" in "".join(api.lines)
    slack = hook(target.url + "/slack", body='{"text": "{{message}}", "job": "{{job_name}}", "event": "{{event}}"}')
    rules = [{"on": "missing_run", "threshold": 2, "target": slack}, {"on": "recovery", "target": slack}]
    paused = api.post(
        "/v1/jobs", {"name": "held", "schedule": "@every 1s", "target": hook(target.url + "/held"), "alerts": rules}
    )
    api.post(f"/v1/jobs/{paused['id']}/pause", {})
    job = api.post(
        "/v1/jobs", {"name": "watched", "schedule": "@every 1s", "target": hook(target.url + "/run"), "alerts": rules}
    )
    [fired] = poll(lambda: alert_bodies(target, "/slack"), timeout=30, what="the missing_run alert")
    assert fired["job"] == "watched" and fired["event"] == "fired"
    assert "no successful run within 2s" in fired["text"]
    # The paused job, created first, was past the same threshold at that sweep: nothing for it.
    assert not [a for a in api.get("/v1/alerts")["alerts"] if a["job_id"] == paused["id"]]
    # A runner starts: the job runs again on time and the incident closes.
    local()
    poll(lambda: len(alert_bodies(target, "/slack")) >= 2, timeout=30, what="the recovery")
    bodies = alert_bodies(target, "/slack")
    assert [b["job"] for b in bodies] == ["watched", "watched"] and bodies[1]["event"] == "recovered"
    assert not [a for a in api.get("/v1/alerts")["alerts"] if a["job_id"] == paused["id"]]
    assert not [r for r in target.requests if r["path"] == "/held"]
    assert job["alerts"][0]["threshold"] == 2


def test_a_rule_set_by_tag_from_the_command_line_alerts_for_a_job_tagged_later(local, target):
    from tests.e2e.test_cli_local import cli

    target.responses["/job"] = [(500, {}, b"down")] * 10 + [(200, {}, b"ok")]  # some may fail before the tag
    api = local()
    applied = cli(
        api.url,
        "alert-rules",
        "apply",
        "--name",
        "billing-team",
        "--tag",
        "billing",
        "--alert",
        "failures_in_a_row=2",
        "--alert",
        "recovery",
        "--webhook",
        target.url + "/slack",
    )
    assert applied.returncode == 0, applied.stderr
    assert "billing-team" in applied.stdout and "failures_in_a_row>=2, recovery" in applied.stdout
    listed = cli(api.url, "alert-rules", "list")
    assert [line.split()[:2] for line in listed.stdout.splitlines()[1:]] == [["billing-team", "billing"]]
    assert json.loads(cli(api.url, "alert-rules", "get", "billing-team").stdout)["tag"] == "billing"
    bad = cli(api.url, "alert-rules", "apply", "--name", "x", "--tag", "t", "--alert", "late", "--webhook", target.url)
    assert bad.returncode != 0 and "alerts.0.threshold" in bad.stderr
    # Created untagged, then tagged: the set covers it from then on.
    job = api.post(
        "/v1/jobs",
        {"name": "ledger", "schedule": "@every 1s", "retry": {"max_attempts": 1}, "target": hook(target.url + "/job")},
    )
    tagged = cli(api.url, "jobs", "update", job["id"], "--tag", "billing")
    assert tagged.returncode == 0, tagged.stderr
    poll(lambda: len(alert_bodies(target, "/slack")) >= 2, timeout=40, what="the alert and the recovery")
    bodies = alert_bodies(target, "/slack")
    assert "job ledger failed 2 times in a row: HTTP 500" in bodies[0]["text"]
    assert bodies[1]["text"].startswith("job ledger recovered")
    alerts = poll(
        lambda: (lambda page: page if all(a["status"] == "delivered" for a in page) else None)(
            api.get("/v1/alerts")["alerts"]
        ),
        what="alerts recorded delivered",
    )
    assert [(a["on"], a["event"], a["rule"]) for a in alerts] == [
        ("recovery", "recovered", "billing-team"),
        ("failures_in_a_row", "fired", "billing-team"),
    ]
    shown = cli(api.url, "alerts")
    assert "billing-team/failures_in_a_row>=2" in shown.stdout, shown.stdout
    assert cli(api.url, "alert-rules", "delete", "billing-team").returncode == 0
    assert cli(api.url, "alert-rules", "get", "billing-team").returncode != 0

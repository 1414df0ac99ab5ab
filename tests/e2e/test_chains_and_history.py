"""Chained jobs and the change log through the real server (`scheduler local` as a black box,
used over HTTP and through the CLI): a chain A -> B -> C delivers in order, with A's outcome in
B's body and each execution naming its cause; a cycle is refused at write time; the change log
of a job is read with `scheduler jobs history`, after its delete too."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import requests

from tests.e2e.test_local_mode import http_target, in_seconds
from tests.support import ROOT, LocalScheduler, RecordingServer, poll

YEARLY = "0 0 1 1 *"  # never due while the test runs: these jobs run only when chained


@pytest.fixture
def local(db_url, tmp_path):
    scheduler = LocalScheduler(db_url, str(tmp_path / "data"))
    yield scheduler
    if scheduler.process.poll() is None:
        assert scheduler.stop() == 0, "".join(scheduler.lines)


@pytest.fixture
def target():
    server = RecordingServer()
    yield server
    server.close()


def cli(local: LocalScheduler, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "functions")}
    return subprocess.run(
        [sys.executable, "-m", "scheduler.cli", *argv, "--endpoint", local.url],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def finished(local: LocalScheduler, job_id: str) -> list[dict]:
    executions = local.get(f"/v1/jobs/{job_id}/executions")["executions"]
    return [e for e in executions if e["status"] != "running"]


def test_a_chain_delivers_in_order_with_the_outcome_of_its_cause(local, target):
    target.responses["/a"] = [(201, {}, b'A said "done"\nline two')]
    target.responses["/b"] = [(500, {}, b"B broke")]
    c = local.post("/v1/jobs", {"name": "c", "schedule": YEARLY, "target": http_target(target.url + "/c", body="c")})
    b_body = (
        '{"cause": "{{cause.execution_id}}", "job": "{{cause.job_name}}", "status": "{{cause.status}}", '
        '"http": "{{cause.http_status}}", "excerpt": "{{cause.response_excerpt}}", "error": "{{cause.error}}"}'
    )
    b = local.post(
        "/v1/jobs",
        {
            "name": "b",
            "schedule": YEARLY,
            "on_failure": ["c"],
            "target": http_target(target.url + "/b", body=b_body, headers={"Content-Type": "application/json"}),
            "retry": {"max_attempts": 1},
        },
    )
    a = local.post(
        "/v1/jobs",
        {"name": "a", "run_at": in_seconds(1), "on_success": [b["id"]], "target": http_target(target.url + "/a")},
    )
    assert a["on_success"] == [b["id"]] and b["on_failure"] == ["c"]

    delivered = target.wait_for(3, timeout=30)
    assert [r["path"] for r in delivered] == ["/a", "/b", "/c"]
    [a_run] = poll(lambda: finished(local, a["id"]))
    [b_run] = poll(lambda: finished(local, b["id"]))
    [c_run] = poll(lambda: finished(local, c["id"]))
    # B's body holds A's outcome (valid JSON: the excerpt's quote and newline escaped).
    assert json.loads(delivered[1]["body"]) == {
        "cause": a_run["id"],
        "job": "a",
        "status": "succeeded",
        "http": "201",
        "excerpt": 'A said "done"\nline two',
        "error": "",
    }
    assert (a_run["trigger"], a_run["caused_by"]) == ("schedule", None)
    assert (b_run["trigger"], b_run["caused_by"], b_run["status"]) == ("chain", a_run["id"], "failed")
    assert b_run["caused_by_job_id"] == a["id"] and c_run["caused_by_job_id"] == b["id"]
    assert (c_run["trigger"], c_run["caused_by"], c_run["status"]) == ("chain", b_run["id"], "succeeded")
    # B failed, so on_failure ran C; nothing else runs (C chains to nothing).
    assert poll(lambda: local.get(f"/v1/jobs/{c['id']}")["stats"]["run_count"] == 1)
    assert len(target.requests) == 3


def test_a_cycle_is_refused_at_write_time_naming_it(local, target):
    c = local.post("/v1/jobs", {"name": "c", "schedule": YEARLY, "target": http_target(target.url)})
    local.post("/v1/jobs", {"name": "b", "schedule": YEARLY, "on_complete": ["c"], "target": http_target(target.url)})
    local.post("/v1/jobs", {"name": "a", "schedule": YEARLY, "on_success": ["b"], "target": http_target(target.url)})
    answer = requests.patch(f"{local.url}/v1/jobs/{c['id']}", json={"on_failure": ["a"]}, timeout=10)
    assert answer.status_code == 400, answer.text
    [detail] = answer.json()["error"]["details"]
    assert detail == {"field": "on_failure", "message": "would make a cycle: c -> a -> b -> c"}
    itself = requests.post(
        f"{local.url}/v1/jobs",
        json={"name": "loop", "schedule": YEARLY, "on_success": ["loop"], "target": http_target(target.url)},
        timeout=10,
    )
    assert itself.status_code == 400 and "loop -> loop" in itself.text
    unknown = requests.post(
        f"{local.url}/v1/jobs",
        json={"name": "d", "schedule": YEARLY, "on_complete": ["c", "nope"], "target": http_target(target.url)},
        timeout=10,
    )
    assert unknown.status_code == 400 and unknown.json()["error"]["details"][0]["field"] == "on_complete.1"
    assert local.get(f"/v1/jobs/{c['id']}")["on_failure"] == []


def test_the_change_log_through_the_cli(local, target):
    created = cli(local, "jobs", "create", "--name", "logged", "--schedule", YEARLY, "--url", target.url, "-o", "json")
    assert created.returncode == 0, created.stderr
    job_id = json.loads(created.stdout)["id"]
    assert cli(local, "jobs", "update", "logged", "--description", "now described").returncode == 0
    assert cli(local, "jobs", "pause", "logged").returncode == 0
    table = cli(local, "jobs", "history", "logged")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split()[:4] == ["AT", "ACTION", "VERSION", "BY"]
    assert [line.split()[1] for line in lines[1:]] == ["pause", "update", "create"]
    assert 'description: null -> "now described"' in lines[2]
    assert cli(local, "jobs", "delete", "logged").returncode == 0
    after = cli(local, "jobs", "history", job_id, "-o", "json")
    assert after.returncode == 0, after.stderr
    assert [c["action"] for c in json.loads(after.stdout)["changes"]] == ["delete", "pause", "update", "create"]


def test_a_calendars_and_a_rule_sets_change_logs_through_the_cli(local):
    made = cli(local, "calendars", "create", "--name", "closures", "--date", "2026-12-24", "-o", "json")
    assert made.returncode == 0, made.stderr
    again = cli(local, "calendars", "apply", "--name", "closures", "--date", "2026-12-24", "--date", "2026-12-31")
    assert again.returncode == 0, again.stderr
    table = cli(local, "calendars", "history", "closures")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split()[:4] == ["AT", "ACTION", "VERSION", "BY"]
    assert [line.split()[1:3] for line in lines[1:]] == [["update", "2"], ["create", "1"]]
    assert 'dates: ["2026-12-24"] -> ["2026-12-24", "2026-12-31"]' in lines[1]
    assert cli(local, "calendars", "delete", "closures").returncode == 0
    after = cli(local, "calendars", "history", "closures", "-o", "json")
    assert [c["action"] for c in json.loads(after.stdout)["changes"]] == ["delete", "update", "create"]

    rules = ["--name", "team", "--tag", "billing", "--webhook", "https://hooks.example.com/T0"]
    assert cli(local, "alert-rules", "apply", *rules, "--alert", "failures_in_a_row=3").returncode == 0
    assert cli(local, "alert-rules", "apply", *rules, "--alert", "failures_in_a_row=5").returncode == 0
    shown = cli(local, "alert-rules", "history", "team", "--all")
    assert shown.returncode == 0, shown.stderr
    assert "alerts.0.threshold: 3 -> 5" in shown.stdout.splitlines()[1]
    missing = cli(local, "alert-rules", "history", "nobody")
    assert missing.returncode == 3 and "no such alert rule set" in missing.stderr  # exit 3: not found

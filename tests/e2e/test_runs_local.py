"""Issue 33's run controls through the CLI against `scheduler local` (a black box: a subprocess,
the CLI as another): a pause with a note that local mode's runner ends by itself at its
``--until``, a bulk pause and resume, a run with overrides delivered to a real target, and the
skipped occurrences on record."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support import ROOT, LocalScheduler, RecordingServer, poll


@pytest.fixture
def local(db_url, tmp_path):
    scheduler = LocalScheduler(db_url, str(tmp_path / "data"))
    yield scheduler
    assert scheduler.stop() == 0, "".join(scheduler.lines)


@pytest.fixture
def target():
    server = RecordingServer()
    yield server
    server.close()


def cli(local: LocalScheduler, *argv: str) -> subprocess.CompletedProcess:
    """The CLI against local mode's API."""
    env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "functions")}
    done = subprocess.run(
        [sys.executable, "-m", "scheduler.cli", "--endpoint", local.url, *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def job(local: LocalScheduler, name: str, url: str, schedule: str = "0 0 1 1 *", **extra) -> dict:
    target = {"type": "http", "url": url, "headers": {"X-Env": "test"}, "body": '{"v": "{{vars.v}}"}'}
    return local.post("/v1/jobs", {"name": name, "schedule": schedule, "target": target, **extra})


def test_a_pause_with_a_note_ends_by_itself_at_its_until_and_leaves_its_skipped_row(local, target):
    ticking = job(local, "ticking", f"{target.url}/tick", schedule="@every 1s", missed_runs="skip")
    paused = json.loads(
        cli(local, "jobs", "pause", "ticking", "--note", "deploying", "--until", "3s", "-o", "json").stdout
    )
    assert paused["state"] == "paused" and paused["pause"]["note"] == "deploying" and paused["pause"]["until"]
    shown = cli(local, "jobs", "get", "ticking").stdout
    assert "deploying" in shown and "pause note" in shown
    # Local mode's runner resumes it at its until: no API call.
    poll(lambda: local.get(f"/v1/jobs/{ticking['id']}")["state"] == "active", timeout=20, what="the automatic resume")
    rows = poll(
        lambda: json.loads(cli(local, "executions", "ticking", "--status", "skipped", "-o", "json").stdout)[
            "executions"
        ],
        timeout=20,
        what="the skipped row",
    )
    assert rows[0]["skip_reason"] == "paused" and rows[0]["skipped_count"] >= 1
    assert "skipped: paused" in cli(local, "executions", "ticking", "--status", "skipped").stdout


def test_bulk_pause_and_resume_by_tag_and_name_prefix(local, target):
    ids = {job(local, f"nightly-{i}", f"{target.url}/n", tags=["nightly"])["id"] for i in range(2)}
    job(local, "hourly", f"{target.url}/h", tags=["hourly"])
    out = cli(local, "jobs", "pause", "--tag", "nightly", "--note", "freeze").stdout
    assert out.startswith("paused 2 job(s)") and all(job_id in out for job_id in ids)
    states = {j["name"]: j["state"] for j in local.get("/v1/jobs")["jobs"]}
    assert states == {"nightly-0": "paused", "nightly-1": "paused", "hourly": "active"}
    resumed = json.loads(cli(local, "jobs", "resume", "--name-prefix", "nightly-", "-o", "json").stdout)
    assert resumed["count"] == 2 and set(resumed["jobs"]) == ids
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "scheduler.cli",
            "--endpoint",
            local.url,
            "jobs",
            "pause",
            "--tag",
            "a",
            "--name-prefix",
            "b",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.path.join(ROOT, "functions")},
        timeout=60,
    )
    assert bad.returncode != 0 and "--tag or --name-prefix" in bad.stderr


def test_a_run_with_overrides_reaches_the_target_and_is_recorded_masked(local, target):
    created = job(local, "overridden", f"{target.url}/o")
    cli(
        local,
        "jobs",
        "run",
        "overridden",
        "--header",
        "X-Env=prod",
        "--header",
        "Authorization=Bearer s3cr3t-Tk",
        "--var",
        "v=42",
    )
    [request] = target.wait_for(1, timeout=20)
    assert json.loads(request["body"]) == {"v": "42"}
    headers = {k.lower(): v for k, v in request["headers"].items()}
    assert headers["x-env"] == "prod" and headers["authorization"] == "Bearer s3cr3t-Tk"
    execution = poll(
        lambda: [
            e for e in local.get(f"/v1/jobs/{created['id']}/executions")["executions"] if e["status"] != "running"
        ],
        what="the finished run",
    )[0]
    assert execution["overrides"] == {"headers": {"X-Env": "prod", "Authorization": "***"}, "vars": {"v": "42"}}
    assert "s3cr3t-Tk" not in "".join(local.lines)


def test_a_backfill_from_the_cli_is_delivered_by_local_modes_runner(local, target):
    job(local, "hourly", f"{target.url}/hourly", schedule="0 * * * *")
    dry = cli(local, "jobs", "backfill", "hourly", "--start", "3h", "--end", "1h", "--dry-run")
    planned = dry.stdout.split()
    assert len(planned) == 2 and all(at.endswith(":00:00Z") for at in planned), dry.stdout
    assert "2 occurrence(s) would run" in dry.stderr
    queued = cli(local, "jobs", "backfill", "hourly", "--start", "3h", "--end", "1h").stdout
    assert queued.startswith("queued a backfill of 2 occurrence(s)")
    requests = target.wait_for(2, timeout=30)
    assert [r["headers"]["X-Scheduler-Scheduled-At"] for r in requests] == planned
    runs = json.loads(cli(local, "executions", "hourly", "-o", "json").stdout)["executions"]
    assert {e["trigger"] for e in runs} == {"backfill"}

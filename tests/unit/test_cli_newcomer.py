"""What a newcomer found in the CLI (issue 35 item 4), against the real HTTP fake of test_cli:
``--version``, relative ``--since``, ``executions get``, ``--columns``, a paused job's next run,
lateness against the due time with the backoff apart, hints for a missing target, and ``-o``
completion."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta

import pytest

from scheduler import cli
from tests.unit.test_cli import JOB_ID, api, clean_env, envelope, execution, job, run  # noqa: F401 (fixtures)


def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("scheduler ")


@pytest.mark.parametrize(("given", "seconds"), [("10m", 600), ("2h", 7200), ("1d", 86400), ("1h30m", 5400)])
def test_since_takes_a_time_ago(api, given, seconds):
    api.on("GET", "/v1/executions", {"executions": [], "next_cursor": None})
    before = datetime.now(UTC)
    assert run(api, "executions", "--since", given) == 0
    sent = datetime.fromisoformat(api.requests[0].query["since"].replace("Z", "+00:00"))
    assert abs((before - timedelta(seconds=seconds)) - sent) < timedelta(seconds=5)


def test_since_passes_rfc_3339_and_refuses_an_unknown_unit(api, capsys):
    api.on("GET", "/v1/executions", {"executions": [], "next_cursor": None})
    assert run(api, "executions", "--since", "2026-11-01T00:00:00Z") == 0
    assert api.requests[0].query["since"] == "2026-11-01T00:00:00Z"
    with pytest.raises(SystemExit) as done:
        run(api, "executions", "--since", "10y")
    assert done.value.code == 2 and "a time ago is a number and a unit" in capsys.readouterr().err


def test_executions_get_shows_one_execution_whole(api, capsys):
    newest = [execution(n, id=f"e{n}") for n in (5, 4)]
    wanted = execution(
        3,
        response_excerpt='{"report": "done"}\nsecond line',
        error=None,
        started_at="2026-11-03T02:00:09.5Z",
        due_at="2026-11-03T02:00:09Z",
        attempt=2,
        trigger="retry",
        job_name="nightly-report",
    )
    pages = {None: {"executions": newest, "next_cursor": "c2"}, "c2": {"executions": [wanted], "next_cursor": None}}
    api.on("GET", "/v1/executions", lambda req: (200, pages[req.query.get("cursor")]))
    assert run(api, "executions", "get", "e3") == 0
    out = capsys.readouterr().out
    assert 'response excerpt:\n  {"report": "done"}\n  second line' in out
    assert "late:" in out and "500ms" in out and "backoff:" in out and "9.0s" in out
    assert "nightly-report" in out
    assert run(api, "executions", "get", "e3", "-o", "json") == 0
    assert '"response_excerpt": "{\\"report\\": \\"done\\"}\\nsecond line"' in capsys.readouterr().out
    assert run(api, "executions", "get", "nope") == 3
    assert "no execution nope" in capsys.readouterr().err
    assert run(api, "executions", "get") == 2


def test_columns_of_jobs_and_executions(api, capsys):
    api.on(
        "GET",
        "/v1/jobs",
        {"jobs": [job(), job(JOB_ID.replace("1", "2"), "paused-one", state="paused")], "next_cursor": None},
    )
    assert run(api, "jobs", "list", "--columns", "name,next_run,failures") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["NAME", "NEXT", "RUN", "FAILURES"]
    assert lines[1].split() == ["nightly-report", "2026-12-01T02:00:00Z", "1"]
    assert lines[2].split() == ["paused-one", "paused", "1"]  # not a next run in the past
    assert run(api, "jobs", "list", "--columns", "name,colour") == 2
    assert "unknown column colour; the columns are id, name" in capsys.readouterr().err
    api.on(
        "GET",
        f"/v1/jobs/{JOB_ID}/executions",
        {"executions": [execution(1, response_excerpt="ok")], "next_cursor": None},
    )
    assert run(api, "executions", JOB_ID, "--columns", "id,status,response") == 0
    assert capsys.readouterr().out.splitlines()[1].split() == ["e1", "succeeded", "ok"]


def test_the_default_jobs_table_shows_a_paused_job_as_paused(api, capsys):
    api.on("GET", "/v1/jobs", {"jobs": [job(state="paused", next_run_at="2020-01-01T00:00:00Z")], "next_cursor": None})
    assert run(api, "jobs", "list") == 0
    row = capsys.readouterr().out.splitlines()[1]
    assert "paused  paused" not in row or "2020-01-01" not in row
    assert "2020-01-01" not in row and row.split()[-2] == "paused"


def test_lateness_counts_from_the_due_time_and_the_backoff_stands_apart(api, capsys):
    retry = execution(
        2,
        attempt=2,
        trigger="retry",
        scheduled_at="2026-11-02T02:00:00Z",
        due_at="2026-11-02T02:00:08Z",
        started_at="2026-11-02T02:00:08.040Z",
    )
    api.on("GET", f"/v1/jobs/{JOB_ID}/executions", {"executions": [retry], "next_cursor": None})
    assert run(api, "executions", JOB_ID, "--columns", "late,backoff,trigger") == 0
    assert capsys.readouterr().out.splitlines()[1].split() == ["40ms", "8.0s", "retry"]


def test_a_job_without_a_target_names_the_url_flag(api, capsys):
    assert run(api, "jobs", "create", "--name", "x", "--schedule", "@daily") == 2
    err = capsys.readouterr().err
    assert "target: give --url URL" in err and "Field required" not in err
    assert api.requests == []  # nothing sent
    assert run(api, "jobs", "create", "--schedule", "@daily", "--url", "http://h/") == 2
    assert "name: give --name NAME" in capsys.readouterr().err


def test_a_missing_field_the_api_names_gets_its_flag(api, capsys):
    api.on(
        "PATCH",
        f"/v1/jobs/{JOB_ID}",
        envelope("invalid_request", "target.url: is required", [{"field": "target.url", "message": "is required"}]),
        400,
    )
    assert run(api, "jobs", "update", JOB_ID, "--method", "GET") == 1
    assert "  hint: target.url: give --url URL" in capsys.readouterr().err.splitlines()


def test_output_formats_complete_after_o(tmp_path, capsys):
    assert cli.main(["completion", "bash"]) == 0
    path = tmp_path / "c.bash"
    path.write_text(capsys.readouterr().out)
    done = subprocess.run(
        [
            "bash",
            "-c",
            f"source {path}; COMP_WORDS=(scheduler jobs list -o ''); COMP_CWORD=4; "
            '_scheduler_complete; echo "${COMPREPLY[@]}"',
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == ["table", "json", "yaml"]


def test_a_type_alone_patches_the_type_and_clears_the_old_type_s_fields(api, capsys):
    sqs = {
        "type": "sqs",
        "queue_url": "https://sqs.eu-west-1.amazonaws.com/1/q",
        "body": "b",
        "role_arn": "arn:aws:iam::1:role/r",
    }
    api.on("GET", f"/v1/jobs/{JOB_ID}", job(target=sqs))
    api.on("PATCH", f"/v1/jobs/{JOB_ID}", job())
    assert run(api, "jobs", "update", JOB_ID, "--type", "http") == 0  # was a KeyError traceback
    patch = api.requests[-1].json["target"]
    assert patch["type"] == "http" and patch["queue_url"] is None and patch["role_arn"] is None

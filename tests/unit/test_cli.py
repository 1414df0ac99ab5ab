"""The ``scheduler`` CLI against a real HTTP server on loopback that answers canned contract JSON
and records every request (no mocks of requests)."""

from __future__ import annotations

import argparse
import io
import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from scheduler import cli
from scheduler.client import SchedulerClient, encode_query, is_aws_endpoint, is_job_id, region_of_endpoint

JOB_ID = "0b6f6c5e-3c1a-4e8e-9d55-0f0f0f0f0f01"
JOB_ID2 = "0b6f6c5e-3c1a-4e8e-9d55-0f0f0f0f0f02"


def job(id_: str = JOB_ID, name: str = "nightly-report", **extra: Any) -> dict[str, Any]:
    data = {
        "id": id_,
        "owner": "arn:aws:iam::000000000000:user/local",
        "name": name,
        "description": None,
        "tags": ["billing"],
        "schedule": "0 3 * * *",
        "run_at": None,
        "timezone": "Europe/Berlin",
        "start_at": None,
        "end_at": None,
        "target": {
            "type": "http",
            "url": "https://example.com/hook",
            "method": "POST",
            "headers": {},
            "body": None,
            "auth": None,
            "timeout_seconds": 30,
            "success_codes": None,
        },
        "retry": {"max_attempts": 4, "min_backoff_seconds": 1, "max_backoff_seconds": 300, "max_age_seconds": None},
        "missed_runs": "run_once",
        "state": "active",
        "version": 3,
        "next_run_at": "2026-12-01T02:00:00Z",
        "last_run_at": None,
        "created_at": "2026-11-01T00:00:00Z",
        "updated_at": "2026-11-01T00:00:00Z",
        "stats": {"run_count": 2, "failure_count": 1, "last_status": "failed", "last_error": "boom"},
    }
    data.update(extra)
    return data


def execution(n: int, **extra: Any) -> dict[str, Any]:
    data = {
        "id": f"e{n}",
        "job_id": JOB_ID,
        "scheduled_at": f"2026-11-0{n}T02:00:00Z",
        "started_at": None,
        "finished_at": None,
        "attempt": 1,
        "trigger": "schedule",
        "status": "succeeded",
        "http_status": 200,
        "response_excerpt": "ok",
        "error": None,
        "duration_ms": 42,
    }
    data.update(extra)
    return data


def envelope(code: str, message: str, details: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details or []}}


class Recorded:
    """One request as the server saw it."""

    def __init__(self, method: str, raw_path: str, headers: dict[str, str], body: bytes):
        self.method = method
        self.path, _, self.query_string = raw_path.partition("?")
        self.headers = headers
        self.body = body

    @property
    def query(self) -> dict[str, str]:
        from urllib.parse import parse_qsl

        return dict(parse_qsl(self.query_string, keep_blank_values=True))

    @property
    def json(self) -> Any:
        return json.loads(self.body)


Responder = Callable[[Recorded], "tuple[int, Any]"]


class FakeApi:
    """Routes ``(METHOD, path regex)`` to canned answers; records the requests."""

    def __init__(self) -> None:
        self.routes: list[tuple[str, re.Pattern[str], Responder]] = []
        self.requests: list[Recorded] = []

    def on(self, method: str, path: str, answer: Any = None, status: int = 200) -> None:
        responder = answer if callable(answer) else (lambda _req: (status, answer))
        self.routes.insert(0, (method, re.compile(path + r"$"), responder))

    def answer(self, req: Recorded) -> tuple[int, Any]:
        for method, pattern, responder in self.routes:
            if method == req.method and pattern.match(req.path):
                return responder(req)
        return 404, envelope("not_found", f"no route {req.method} {req.path}")


class _Handler(BaseHTTPRequestHandler):
    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        api: FakeApi = self.server.api  # type: ignore[attr-defined]
        req = Recorded(self.command, self.path, dict(self.headers.items()), body)
        api.requests.append(req)
        status, answer = api.answer(req)
        data = b"" if answer is None else (answer if isinstance(answer, bytes) else json.dumps(answer).encode())
        self.send_response(status)
        if data:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    """No proxies, no endpoint, and an AWS credential chain that finds nothing unless a test says so."""
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "SCHEDULER_ENDPOINT",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def api():
    fake = FakeApi()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.api = fake  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    yield fake
    server.shutdown()
    server.server_close()


def run(api: FakeApi, *argv: str) -> int:
    return cli.main(["--endpoint", api.url, *argv])  # type: ignore[attr-defined]


# -- create ------------------------------------------------------------------------------------


def test_create_from_flags(api, capsys):
    api.on("POST", "/v1/jobs", job(), 201)
    code = run(
        api,
        "jobs",
        "create",
        "--name",
        "nightly-report",
        "--schedule",
        "0 3 * * *",
        "--timezone",
        "Europe/Berlin",
        "--url",
        "https://example.com/hook",
        "--method",
        "put",
        "--header",
        "Content-Type=application/json",
        "--header",
        "X-A=b=c",
        "--body",
        '{"at": "{{scheduled_at}}"}',
        "--tag",
        "billing",
        "--tag",
        "nightly",
        "--max-attempts",
        "4",
        "--description",
        "d",
    )
    assert code == 0
    [req] = api.requests
    assert (req.method, req.path) == ("POST", "/v1/jobs")
    assert req.headers["Content-Type"] == "application/json"
    assert "Authorization" not in req.headers  # local endpoint: unsigned
    assert req.json == {
        "name": "nightly-report",
        "description": "d",
        "schedule": "0 3 * * *",
        "timezone": "Europe/Berlin",
        "tags": ["billing", "nightly"],
        "retry": {"max_attempts": 4},
        "target": {
            "type": "http",
            "url": "https://example.com/hook",
            "method": "PUT",
            "headers": {"Content-Type": "application/json", "X-A": "b=c"},
            "body": '{"at": "{{scheduled_at}}"}',
        },
    }
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["ID", "NAME", "STATE", "SCHEDULE", "TARGET", "NEXT", "RUN", "LAST", "STATUS"]
    assert out[1].startswith(JOB_ID) and "nightly-report" in out[1] and "0 3 * * *" in out[1]
    assert "POST https://example.com/hook" in out[1]
    assert "2026-12-01T02:00:00Z" in out[1] and out[1].endswith("failed")


def test_create_amqp_from_flags(api):
    api.on("POST", "/v1/jobs", job(), 201)
    assert (
        run(
            api,
            "jobs",
            "create",
            "--name",
            "m",
            "--run-at",
            "2026-12-01T10:00:00+01:00",
            "--amqp-exchange",
            "events",
            "--routing-key",
            "a.b",
            "--body",
            "hi",
        )
        == 0
    )
    assert api.requests[0].json == {
        "name": "m",
        "run_at": "2026-12-01T10:00:00+01:00",
        "target": {"type": "amqp", "exchange": "events", "routing_key": "a.b", "body": "hi"},
    }


def test_create_from_yaml_file_with_flags_over_it(api, tmp_path):
    api.on("POST", "/v1/jobs", job(), 201)
    path = tmp_path / "job.yaml"
    path.write_text(
        "name: from-file\n"
        "run_at: 2026-12-01T10:00:00Z\n"  # stays a string (no YAML timestamp)
        "start_at: 2026-11-01\n"
        "tags: [a, b]\n"
        "target:\n  url: https://example.com/a\n  headers: {X-One: '1'}\n"
        "retry: {max_attempts: 2, max_backoff_seconds: 60}\n"
        "# read-only fields, as `jobs get --json` prints them, are left out\n"
        "id: whatever\nversion: 7\nstats: {run_count: 1}\n"
    )
    assert (
        run(
            api,
            "jobs",
            "create",
            "-f",
            str(path),
            "--schedule",
            "@hourly",
            "--header",
            "X-Two=2",
            "--max-attempts",
            "5",
            "--tag",
            "c",
        )
        == 0
    )
    assert api.requests[0].json == {
        "name": "from-file",
        "start_at": "2026-11-01",
        "tags": ["c"],
        "schedule": "@hourly",
        "target": {"type": "http", "url": "https://example.com/a", "headers": {"X-One": "1", "X-Two": "2"}},
        "retry": {"max_attempts": 5, "max_backoff_seconds": 60},
    }


def test_create_from_json_on_stdin(api, monkeypatch, capsys):
    api.on("POST", "/v1/jobs", job(), 201)
    spec = {"name": "s", "schedule": "rate(5 minutes)", "target": {"type": "amqp", "exchange": "x"}}
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(spec)))
    assert run(api, "jobs", "create", "-f", "-", "--json") == 0
    assert api.requests[0].json == spec
    assert json.loads(capsys.readouterr().out) == job()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["jobs", "create"], "give a job definition"),
        (["jobs", "create", "-f", "/nonexistent/job.yaml"], "cannot read /nonexistent/job.yaml"),
        (["jobs", "create", "--name", "x", "--header", "novalue"], "--header takes NAME=VALUE"),
        (["jobs", "update", JOB_ID], "nothing to change"),
        (["jobs", "list", "--endpoint", "ftp://x"], "--endpoint: not an http(s) URL"),
    ],
)
def test_usage_errors_exit_2(api, capsys, argv, message):
    assert run(api, *argv) == 2
    assert message in capsys.readouterr().err
    assert api.requests == []


@pytest.mark.parametrize(
    "text, message", [("- a\n- b\n", "must be a mapping"), ("a: [1\n", "not valid YAML"), ("", "empty job definition")]
)
def test_bad_job_files_exit_2(api, capsys, tmp_path, text, message):
    path = tmp_path / "job.yaml"
    path.write_text(text)
    assert run(api, "jobs", "create", "-f", str(path)) == 2
    assert message in capsys.readouterr().err


def test_argparse_usage_errors_exit_2(api, capsys):
    for argv in (
        ["jobs"],
        ["jobs", "create", "--schedule", "x", "--run-at", "y"],
        ["jobs", "list", "--limit", "0"],
        ["jobs", "list", "--state", "sleeping"],
    ):
        with pytest.raises(SystemExit) as info:
            run(api, *argv)
        assert info.value.code == 2
    capsys.readouterr()


def test_a_usage_error_is_two_short_lines_not_the_whole_usage_block(api, capsys):
    """The command's usage in brief and the error; the 30 lines of its options are for ``-h``."""
    with pytest.raises(SystemExit) as info:
        run(api, "jobs", "create", "--timeout", "abc")
    assert info.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "usage: scheduler jobs create [options] (see scheduler jobs create -h)",
        "scheduler jobs create: error: argument --timeout: not a whole number: 'abc'",
    ]
    with pytest.raises(SystemExit):
        run(api, "jobs", "get")
    assert (
        capsys.readouterr().err.splitlines()[0] == "usage: scheduler jobs get [options] JOB (see scheduler jobs get -h)"
    )


def test_an_empty_calendar_file_is_said_to_be_a_calendar_s(api, capsys, tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert run(api, "calendars", "apply", "-f", str(empty)) == 2
    assert capsys.readouterr().err == f"scheduler calendars apply: error: {empty}: empty calendar definition\n"
    assert run(api, "alert-rules", "apply", "-f", str(empty)) == 2
    assert "empty alert rule set definition" in capsys.readouterr().err


def test_calendars_and_alert_rules_apply_with_if_match_replace_that_version_only(api, capsys):
    calendar = {"name": "holidays", "timezone": "UTC", "dates": ["2026-12-25"], "version": 4}
    api.on("PUT", "/v1/calendars/holidays", calendar)
    assert run(api, "calendars", "apply", "--name", "holidays", "--date", "2026-12-25", "--if-match", "3") == 0
    assert api.requests[-1].headers["If-Match"] == '"3"'
    # stale: 412, exit 4; missing: nothing is created, whatever the version named
    api.on("PUT", "/v1/calendars/holidays", envelope("precondition_failed", "the calendar is at version 5"), 412)
    assert run(api, "calendars", "apply", "--name", "holidays", "--date", "2026-12-25", "--if-match", "3") == 4
    api.on("PUT", "/v1/calendars/holidays", envelope("not_found", "no such calendar"), 404)
    assert run(api, "calendars", "apply", "--name", "holidays", "--date", "2026-12-25", "--if-match", "3") == 3
    assert [r.method for r in api.requests].count("POST") == 0
    rules = {"name": "team", "tag": "billing", "alerts": [{"on": "failure"}], "version": 2}
    api.on("PUT", "/v1/alert-rules/team", rules)
    argv = ["alert-rules", "apply", "--name", "team", "--tag", "billing", "--alert", "failure"]
    assert run(api, *argv, "--webhook", "https://hooks.example.com/x", "--if-match", "1") == 0
    assert api.requests[-1].headers["If-Match"] == '"1"'
    assert run(api, *argv, "--webhook", "https://hooks.example.com/x") == 0
    assert "If-Match" not in api.requests[-1].headers


def test_deletes_pauses_and_resumes_send_if_match(api, capsys):
    """``--if-match`` on ``jobs delete|pause|resume``, ``calendars delete`` and ``alert-rules
    delete``: sent as ``If-Match``; a stale version is the API's 412 (exit 4); not with a bulk
    pause or resume (a version is one job's)."""
    job = {"id": JOB_ID, "name": "n", "version": 3, "state": "paused"}
    api.on("DELETE", f"/v1/jobs/{JOB_ID}", None, 204)
    api.on("POST", f"/v1/jobs/{JOB_ID}/pause", job)
    api.on("POST", f"/v1/jobs/{JOB_ID}/resume", {**job, "state": "active"})
    api.on("DELETE", "/v1/calendars/holidays", None, 204)
    api.on("DELETE", "/v1/alert-rules/team", None, 204)
    for argv in (
        ("jobs", "delete", JOB_ID),
        ("jobs", "pause", JOB_ID),
        ("jobs", "resume", JOB_ID),
        ("calendars", "delete", "holidays"),
        ("alert-rules", "delete", "team"),
    ):
        assert run(api, *argv, "--if-match", "2") == 0, argv
        assert api.requests[-1].headers["If-Match"] == '"2"', argv
        assert run(api, *argv) == 0 and "If-Match" not in api.requests[-1].headers, argv
    api.on("DELETE", f"/v1/jobs/{JOB_ID}", envelope("version_mismatch", "the job changed: it is at version 3"), 412)
    assert run(api, "jobs", "delete", JOB_ID, "--if-match", "2") == 4
    capsys.readouterr()
    assert run(api, "jobs", "pause", "--tag", "billing", "--if-match", "2") == 2
    assert "--if-match is for one JOB" in capsys.readouterr().err


# -- list, get -----------------------------------------------------------------------------------


def test_list_one_page_with_filters(api, capsys):
    api.on(
        "GET",
        "/v1/jobs",
        {
            "jobs": [
                job(),
                job(JOB_ID2, "other", schedule=None, run_at="2026-12-24T18:00:00Z", stats={"last_status": None}),
            ],
            "next_cursor": "c1",
        },
    )
    assert (
        run(api, "jobs", "list", "--state", "active", "--tag", "billing", "--name-prefix", "night ly", "--limit", "2")
        == 0
    )
    [req] = api.requests
    assert req.query == {"state": "active", "tag": "billing", "name_prefix": "night ly", "limit": "2"}
    assert "name_prefix=night%20ly" in req.query_string
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert len(lines) == 3
    assert "other" in lines[2] and "2026-12-24T18:00:00Z" in lines[2] and lines[2].endswith("-")
    assert "--cursor c1" in captured.err


def test_list_all_follows_cursors_and_prints_one_json_object(api, capsys):
    def pages(req: Recorded):
        cursor = req.query.get("cursor")
        if cursor is None:
            return 200, {"jobs": [job(name="a")], "next_cursor": "p2"}
        if cursor == "p2":
            return 200, {"jobs": [job(JOB_ID2, name="b")], "next_cursor": "p3"}
        return 200, {"jobs": [], "next_cursor": None}

    api.on("GET", "/v1/jobs", pages)
    assert cli.main(["jobs", "list", "--all", "--json", "--endpoint", api.url]) == 0  # options after the command
    assert [r.query.get("cursor") for r in api.requests] == [None, "p2", "p3"]
    out = json.loads(capsys.readouterr().out)
    assert [j["name"] for j in out["jobs"]] == ["a", "b"] and out["next_cursor"] is None


def test_list_empty(api, capsys):
    api.on("GET", "/v1/jobs", {"jobs": [], "next_cursor": None})
    assert run(api, "jobs", "list") == 0
    assert capsys.readouterr().out.strip() == "no jobs"


def test_get_by_id(api, capsys):
    api.on("GET", f"/v1/jobs/{JOB_ID}", job())
    assert run(api, "jobs", "get", JOB_ID) == 0
    out = capsys.readouterr().out
    assert re.search(r"^name:\s+nightly-report$", out, re.M)
    assert re.search(r"^schedule:\s+0 3 \* \* \* \(Europe/Berlin\)$", out, re.M)
    assert re.search(r"^target:\s+POST https://example.com/hook$", out, re.M)
    assert re.search(r"^runs:\s+2 \(1 failed\)$", out, re.M)


def test_get_by_name_looks_it_up_with_exact_match(api, capsys):
    def by_prefix(req: Recorded):
        assert req.query["name_prefix"] == "nightly"
        if "cursor" not in req.query:
            return 200, {"jobs": [job(JOB_ID2, "nightly-report")], "next_cursor": "n2"}
        return 200, {"jobs": [job(JOB_ID, "nightly")], "next_cursor": None}

    api.on("GET", "/v1/jobs", by_prefix)
    assert run(api, "--json", "jobs", "get", "nightly") == 0
    assert json.loads(capsys.readouterr().out)["id"] == JOB_ID


def test_unknown_name_exits_3(api, capsys):
    api.on("GET", "/v1/jobs", {"jobs": [job(name="nightly-report")], "next_cursor": None})
    for action in ("get", "delete", "pause", "resume", "run"):
        assert run(api, "jobs", action, "nightly") == 3
        assert capsys.readouterr().err.strip() == "error: no job named 'nightly'"
    assert run(api, "executions", "nightly") == 3
    assert all(r.method == "GET" and r.path == "/v1/jobs" for r in api.requests)


# -- update --------------------------------------------------------------------------------------


def test_update_patches_the_given_fields(api, capsys):
    api.on("PATCH", f"/v1/jobs/{JOB_ID}", job(version=4))
    assert run(api, "jobs", "update", JOB_ID, "--schedule", "*/5 * * * *", "--header", "X-A=1", "--if-match", "3") == 0
    [req] = api.requests
    assert req.method == "PATCH"
    assert req.headers["If-Match"] == '"3"'
    assert req.json == {
        "schedule": "*/5 * * * *",
        "schedules": None,
        "run_at": None,
        "target": {"headers": {"X-A": "1"}},
    }
    assert JOB_ID in capsys.readouterr().out


def test_update_by_name_with_a_patch_file(api, tmp_path):
    api.on("GET", "/v1/jobs", {"jobs": [job()], "next_cursor": None})
    api.on("PATCH", f"/v1/jobs/{JOB_ID}", job())
    path = tmp_path / "patch.json"
    path.write_text(json.dumps({"description": None, "retry": {"max_attempts": 9}}))
    assert (
        run(
            api,
            "jobs",
            "update",
            "nightly-report",
            "-f",
            str(path),
            "--run-at",
            "2027-01-01T00:00:00Z",
            "--amqp-exchange",
            "x",
        )
        == 0
    )
    assert api.requests[-1].json == {
        "description": None,
        "retry": {"max_attempts": 9},
        "run_at": "2027-01-01T00:00:00Z",
        "schedule": None,
        "schedules": None,
        "spread": None,  # a one-off has none: the job's goes
        "target": {"exchange": "x", "type": "amqp"},
    }
    assert "If-Match" not in api.requests[-1].headers


def test_update_replace_with_file_puts_it(api, tmp_path):
    api.on("PUT", f"/v1/jobs/{JOB_ID}", job())
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job(name="old")))  # a `jobs get --json` output, edited
    assert run(api, "jobs", "update", JOB_ID, "--replace", "-f", str(path), "--name", "new", "--if-match", '"3"') == 0
    [req] = api.requests
    assert req.method == "PUT" and req.headers["If-Match"] == '"3"'
    sent = req.json
    assert sent["name"] == "new" and sent["schedule"] == "0 3 * * *" and sent["target"]["type"] == "http"
    assert not set(cli.READ_ONLY_FIELDS) & set(sent)


def test_update_replace_without_file_starts_from_the_stored_job(api):
    api.on("GET", f"/v1/jobs/{JOB_ID}", job())
    api.on("PUT", f"/v1/jobs/{JOB_ID}", job())
    assert run(api, "jobs", "update", JOB_ID, "--replace", "--url", "https://example.com/b") == 0
    get, put = api.requests
    assert (get.method, put.method) == ("GET", "PUT")
    expected = {k: v for k, v in job().items() if k not in cli.READ_ONLY_FIELDS}
    expected["target"] = {**expected["target"], "url": "https://example.com/b"}
    assert put.json == expected
    assert put.headers["If-Match"] == '"3"'  # the version read: a change in between gives 412


def test_update_replace_of_a_job_changed_meanwhile_exits_4(api, capsys):
    api.on("GET", f"/v1/jobs/{JOB_ID}", job())
    api.on("PUT", f"/v1/jobs/{JOB_ID}", envelope("precondition_failed", "the job changed: version 4"), 412)
    assert run(api, "jobs", "update", JOB_ID, "--replace", "--name", "n") == 4
    assert capsys.readouterr().err.strip() == "error: 412 precondition_failed: the job changed: version 4"


# -- delete, pause, resume, run ------------------------------------------------------------------


def test_delete_pause_resume_run(api, capsys):
    api.on("DELETE", f"/v1/jobs/{JOB_ID}", None, 204)
    api.on("POST", f"/v1/jobs/{JOB_ID}/pause", job(state="paused"))
    api.on("POST", f"/v1/jobs/{JOB_ID}/resume", job())
    api.on(
        "POST",
        f"/v1/jobs/{JOB_ID}/run",
        {"job_id": JOB_ID, "status": "queued", "requested_at": "2026-11-02T10:00:00Z", "job": job()},
        202,
    )
    assert run(api, "jobs", "delete", JOB_ID) == 0
    assert capsys.readouterr().out.strip() == f"deleted job {JOB_ID}"
    assert run(api, "jobs", "pause", JOB_ID) == 0
    assert " paused " in capsys.readouterr().out
    assert run(api, "jobs", "resume", JOB_ID.upper()) == 0
    capsys.readouterr()
    assert run(api, "jobs", "run", JOB_ID) == 0
    assert capsys.readouterr().out.strip() == f"queued a run of job {JOB_ID} (requested at 2026-11-02T10:00:00Z)"
    assert run(api, "--json", "jobs", "run", JOB_ID) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "queued"
    assert [(r.method, r.path) for r in api.requests] == [
        ("DELETE", f"/v1/jobs/{JOB_ID}"),
        ("POST", f"/v1/jobs/{JOB_ID}/pause"),
        ("POST", f"/v1/jobs/{JOB_ID}/resume"),
        ("POST", f"/v1/jobs/{JOB_ID}/run"),
        ("POST", f"/v1/jobs/{JOB_ID}/run"),
    ]


def test_delete_by_name(api, capsys):
    api.on("GET", "/v1/jobs", {"jobs": [job()], "next_cursor": None})
    api.on("DELETE", f"/v1/jobs/{JOB_ID}", None, 204)
    assert run(api, "jobs", "delete", "nightly-report") == 0
    assert capsys.readouterr().out.strip() == f"deleted job {JOB_ID} (nightly-report)"


# -- executions ----------------------------------------------------------------------------------


def test_executions_table(api, capsys):
    long_error = "connect timeout\nto https://example.com/hook after 30 s; " + "x" * 100
    api.on(
        "GET",
        f"/v1/jobs/{JOB_ID}/executions",
        {
            "executions": [
                execution(1, started_at="2026-11-01T02:00:00.012Z"),
                execution(2, status="failed", http_status=None, error=long_error, trigger="retry", attempt=2),
            ],
            "next_cursor": None,
        },
    )
    assert run(api, "executions", JOB_ID, "--status", "failed", "--limit", "2") == 0
    assert api.requests[0].query == {"status": "failed", "limit": "2"}
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "ID",
        "SCHEDULED",
        "AT",
        "STARTED",
        "LATE",
        "BACKOFF",
        "ATTEMPT",
        "TRIGGER",
        "STATUS",
        "HTTP",
        "DURATION",
        "MS",
        "ERROR",
    ]
    assert lines[1].split() == [
        "e1",
        "2026-11-01T02:00:00Z",
        "2026-11-01T02:00:00.012Z",
        "12ms",
        "-",
        "1",
        "schedule",
        "succeeded",
        "200",
        "42",
        "-",
    ]
    assert "retry" in lines[2] and "failed" in lines[2]
    error_cell = lines[2][lines[0].index("ERROR") :]
    assert error_cell.startswith("connect timeout to https://") and error_cell.endswith("...")
    assert len(error_cell) == cli.ERROR_WIDTH


def test_executions_all_by_name_json(api, capsys):
    api.on("GET", "/v1/jobs", {"jobs": [job()], "next_cursor": None})

    def pages(req: Recorded):
        if req.query.get("cursor") == "x2":
            return 200, {"executions": [execution(2)], "next_cursor": None}
        return 200, {"executions": [execution(1)], "next_cursor": "x2"}

    api.on("GET", f"/v1/jobs/{JOB_ID}/executions", pages)
    assert run(api, "--json", "executions", "nightly-report", "--all") == 0
    assert json.loads(capsys.readouterr().out) == {"executions": [execution(1), execution(2)], "next_cursor": None}


# -- errors and exit codes -----------------------------------------------------------------------


def test_error_envelope_on_stderr_exit_1(api, capsys):
    api.on(
        "POST",
        "/v1/jobs",
        envelope(
            "bad_request",
            "the job is not valid",
            [
                {"field": "schedule", "message": "minute field: 61 is out of range 0-59"},
                {"field": "target.url", "message": "must be an http(s) URL"},
            ],
        ),
        400,
    )
    assert run(api, "jobs", "create", "--name", "x", "--schedule", "61 * * * *", "--url", "ftp://x") == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        "error: 400 bad_request: the job is not valid",
        "  schedule: minute field: 61 is out of range 0-59",
        "  target.url: must be an http(s) URL",
    ]


@pytest.mark.parametrize("status, code", [(404, 3), (409, 4), (412, 4), (413, 1), (403, 1), (500, 5), (503, 5)])
def test_exit_codes_of_api_errors(api, capsys, monkeypatch, status, code):
    monkeypatch.setattr("scheduler.client.time.sleep", lambda seconds: None)  # a 503 is sent again first
    api.on("PATCH", f"/v1/jobs/{JOB_ID}", envelope("some_code", "some message"), status)
    assert run(api, "jobs", "update", JOB_ID, "--name", "n") == code
    err = capsys.readouterr().err.splitlines()
    waits = 3 if status == 503 else 0  # each retry said as it waits, then the error
    assert (
        err[:waits]
        == [  # no Retry-After: 0.5 s doubled
            f"waiting: 503 some_code: some message; sending again in {wait:g} s (retry {n} of 3)"
            for n, wait in ((1, 0.5), (2, 1), (3, 2))
        ][:waits]
    )
    assert err[waits].startswith(f"error: {status} some_code: some message")


def test_api_gateway_style_and_non_json_errors(api, capsys, monkeypatch):
    monkeypatch.setattr("scheduler.client.time.sleep", lambda seconds: None)  # a GET's 502 is sent again first
    api.on("GET", f"/v1/jobs/{JOB_ID}", {"message": "Missing Authentication Token"}, 403)
    assert run(api, "jobs", "get", JOB_ID) == 1
    assert capsys.readouterr().err.strip() == "error: 403 forbidden: Missing Authentication Token"
    api.on("GET", f"/v1/jobs/{JOB_ID}", b"<html>Bad Gateway</html>", 502)
    assert run(api, "jobs", "get", JOB_ID) == 5
    assert capsys.readouterr().err.splitlines()[-1] == "error: 502 bad_gateway: <html>Bad Gateway</html>"


def test_cannot_connect_exits_5(capsys):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert cli.main(["--endpoint", f"http://127.0.0.1:{port}", "jobs", "list"]) == 5
    assert capsys.readouterr().err.startswith(f"error: cannot connect to http://127.0.0.1:{port}")


# -- endpoint, signing ---------------------------------------------------------------------------


def test_endpoint_from_environment_and_stage_path(api, monkeypatch):
    api.on("GET", "/prod/v1/jobs", {"jobs": [], "next_cursor": None})
    monkeypatch.setenv("SCHEDULER_ENDPOINT", api.url.replace("127.0.0.1", "LocalHost") + "/prod/")
    assert cli.main(["jobs", "list"]) == 0
    assert api.requests[0].path == "/prod/v1/jobs"


def test_sigv4_flag_signs_with_the_credential_chain(api, monkeypatch):
    from scheduler.transport.sigv4 import verify_request

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-test")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "token-test")
    monkeypatch.setenv("AWS_REGION", "eu-central-1")
    api.on("POST", "/v1/jobs", job(), 201)
    assert run(api, "--sigv4", "jobs", "create", "--name", "n", "--schedule", "@daily", "--url", "https://e.com") == 0
    [req] = api.requests
    assert req.headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDTEST/")
    assert "/eu-central-1/execute-api/aws4_request" in req.headers["Authorization"]
    assert req.headers["X-Amz-Security-Token"] == "token-test"
    principal = verify_request(
        req.method,
        req.path,
        req.query_string,
        req.headers,
        req.body,
        {"AKIDTEST": ("secret-test", "arn:aws:iam::1:user/t")},
        region="eu-central-1",
    )
    assert principal == "arn:aws:iam::1:user/t"


def test_sigv4_with_profile_and_region_flags(api, tmp_path, monkeypatch):
    from scheduler.transport.sigv4 import verify_request

    (tmp_path / "aws-credentials").write_text("[dev]\naws_access_key_id = AKIDDEV\naws_secret_access_key = s3cr3t\n")
    api.on("GET", "/v1/jobs", {"jobs": [], "next_cursor": None})
    assert (
        cli.main(
            [
                "jobs",
                "list",
                "--endpoint",
                api.url,
                "--sigv4",
                "--profile",
                "dev",
                "--region",
                "ap-south-1",
                "--tag",
                "a b",
            ]
        )
        == 0
    )
    [req] = api.requests
    assert (
        verify_request(
            req.method,
            req.path,
            req.query_string,
            req.headers,
            req.body,
            {"AKIDDEV": ("s3cr3t", "dev")},
            region="ap-south-1",
        )
        == "dev"
    )


def test_sigv4_without_credentials_exits_1(api, capsys):
    assert run(api, "--sigv4", "jobs", "list") == 1
    assert "no AWS credentials found" in capsys.readouterr().err
    assert api.requests == []


def test_aws_endpoints_are_recognised():
    aws = "https://abc123.execute-api.eu-west-1.amazonaws.com/prod"
    assert is_aws_endpoint(aws) and region_of_endpoint(aws) == "eu-west-1"
    assert SchedulerClient(aws).sigv4 is True
    assert SchedulerClient(aws, sigv4=False).sigv4 is False
    assert SchedulerClient(aws).region == "eu-west-1"
    assert SchedulerClient(aws, region="us-west-2").region == "us-west-2"
    assert region_of_endpoint("https://abc-vpce-1.execute-api.us-east-2.vpce.amazonaws.com") == "us-east-2"
    assert not is_aws_endpoint("http://127.0.0.1:8080") and SchedulerClient("http://127.0.0.1:8080").sigv4 is False
    assert not is_aws_endpoint("https://amazonaws.com.evil.example")
    assert region_of_endpoint("https://api.example.com") is None


def test_helpers():
    assert is_job_id(JOB_ID) and is_job_id(JOB_ID.upper()) and not is_job_id("nightly") and not is_job_id(JOB_ID[1:])
    assert encode_query({"b": "x y/z+é~", "a": None, "c": 5, "d": True}) == "b=x%20y%2Fz%2B%C3%A9~&c=5&d=true"
    assert cli.truncate("a\n b", 10) == "a b" and cli.truncate("x" * 20, 10) == "xxxxxxx..."


# -- local and migrate ---------------------------------------------------------------------------


def test_local_parses_its_options():
    args = cli.build_parser().parse_args(
        [
            "local",
            "--host",
            "0.0.0.0",
            "--port",
            "9000",
            "--database-url",
            "postgresql://x",
            "--data-dir",
            "/tmp/d",
            "--auth",
            "sigv4",
            "--credentials",
            "c.json",
            "--precision",
            "minute",
            "--runners",
            "3",
        ]
    )
    assert (
        args.host,
        args.port,
        args.database_url,
        args.data_dir,
        args.auth,
        args.credentials,
        args.precision,
        args.runners,
    ) == ("0.0.0.0", 9000, "postgresql://x", "/tmp/d", "sigv4", "c.json", "minute", 3)
    assert args.func is cli.server.run_local
    defaults = cli.build_parser().parse_args(["local"])
    assert (
        defaults.host,
        defaults.port,
        defaults.database_url,
        defaults.data_dir,
        defaults.auth,
        defaults.credentials,
        defaults.runners,
    ) == ("127.0.0.1", 8080, None, ".scheduler", None, None, 1)  # --auth: sigv4 with --credentials, else none
    for bad in (["--auth", "basic"], ["--runners", "-1"], ["--runners", "two"]):
        with pytest.raises(SystemExit):
            cli.build_parser().parse_args(["local", *bad])


def test_migrate_still_works(monkeypatch, capsys):
    args = cli.build_parser().parse_args(["migrate", "--database-url", "postgresql://x"])
    assert args.func is cli.server.run_migrate and args.database_url == "postgresql://x"
    monkeypatch.delenv("DATABASE_URL", raising=False)
    assert cli.main(["migrate"]) == 2
    assert "give --database-url" in capsys.readouterr().err


# -- issue 12: executions across jobs, --follow, preview, console ---------------------------------


def test_executions_across_jobs_with_filters(api, capsys):
    api.on("GET", "/v1/jobs", {"jobs": [job()], "next_cursor": None})
    long_error = "refused " + "y" * 200
    api.on(
        "GET",
        "/v1/executions",
        {
            "executions": [
                execution(
                    1, job_name="nightly-report", started_at="2026-11-01T02:00:01Z", status="failed", error=long_error
                )
            ],
            "next_cursor": None,
        },
    )
    assert (
        run(
            api,
            "executions",
            "--status",
            "failed",
            "--since",
            "2026-11-01T00:00:00+01:00",
            "--job",
            "nightly-report",
            "--wide",
        )
        == 0
    )
    listing = api.requests[-1]
    assert listing.path == "/v1/executions"
    assert listing.query == {"status": "failed", "since": "2026-11-01T00:00:00+01:00", "job_id": JOB_ID}
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:5] == ["JOB", "ID", "SCHEDULED", "AT", "STARTED"]
    assert lines[1].startswith("nightly-report") and "1.0s" in lines[1]
    assert lines[1].endswith(long_error)  # --wide: the whole error


def test_executions_across_jobs_bad_status_is_the_apis_400(api, capsys):
    api.on(
        "GET",
        "/v1/executions",
        envelope("bad_request", "invalid query", [{"field": "since", "message": "not an RFC 3339 instant"}]),
        400,
    )
    assert run(api, "executions", "--since", "yesterday") == 1
    assert capsys.readouterr().err.splitlines() == [
        "error: 400 bad_request: invalid query",
        "  since: not an RFC 3339 instant",
    ]


def _follow(api, pages, **options):
    """Run ``follow`` against pages answered in turn (the last repeats) until ``until`` shows."""
    from scheduler.cli.executions import follow

    calls: list[dict[str, str]] = []

    def answer(req: Recorded) -> tuple[int, Any]:
        calls.append(req.query)
        return 200, {"executions": pages[min(len(calls), len(pages)) - 1], "next_cursor": None}

    api.on("GET", "/v1/executions", answer)
    client = SchedulerClient(api.url)  # type: ignore[attr-defined]
    out, stop = io.StringIO(), threading.Event()
    kwargs = {"interval": 0.01, "stop": stop, "out": out, **options}
    until_shown("boom", out, stop, lambda: follow(client.list_all_executions, {"status": None}, **kwargs))
    return out.getvalue().splitlines(), calls


def until_shown(text: str, out: io.StringIO, stop: threading.Event, following: Callable[[], Any]) -> None:
    """Run ``following`` (a --follow) in a thread until ``text`` shows in ``out`` (10 s at most),
    then stop it."""
    thread = threading.Thread(target=following)
    thread.start()
    deadline = time.monotonic() + 10
    while text not in out.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    thread.join(5)


FOLLOWED = [
    [execution(1, status="succeeded", job_name="a")],
    [execution(2, status="running", job_name="b"), execution(1, status="succeeded", job_name="a")],
    [execution(2, status="failed", job_name="b", error="boom"), execution(1, job_name="a")],
]


def test_follow_starts_now_in_aligned_columns(api):
    lines, calls = _follow(api, FOLLOWED)
    assert lines[0].split()[:6] == ["JOB", "ID", "SCHEDULED", "AT", "STARTED", "LATE"]
    assert [line.split()[:2] for line in lines[1:]] == [["b", "e2"]]  # e1 finished before: not shown
    assert lines[1].endswith("boom") and calls[0]["limit"] == "100"
    # every column starts where its header does, whatever the cells' lengths
    for header in ("ID", "STATUS", "ERROR"):
        at = lines[0].index(header)
        assert lines[1][at - 2 : at] == "  " and lines[1][at] != " "


def test_follow_from_start_replays_the_newest_page_first(api):
    lines, _ = _follow(api, FOLLOWED, from_start=True)
    assert [line.split()[:2] for line in lines[1:]] == [["a", "e1"], ["b", "e2"]]  # each once, running skipped


def test_follow_from_start_with_a_limit_replays_only_the_newest_n(api):
    """``--from-start --limit N``: the newest N of those finished before, then what finishes."""
    before = [
        execution(5, status="succeeded", job_name="c"),
        execution(4, status="succeeded", job_name="c"),
        execution(3, status="succeeded", job_name="c"),
    ]
    pages = [before, [execution(2, status="failed", job_name="b", error="boom"), *before]]
    lines, calls = _follow(api, pages, from_start=True, backlog=2)
    assert [line.split()[:2] for line in lines[1:]] == [["c", "e4"], ["c", "e5"], ["b", "e2"]]
    assert calls[0]["limit"] == "100"


def test_preview_sends_the_schedule_and_prints_local_times(api, capsys):
    api.on("POST", "/v1/schedules/preview", {"occurrences": ["2027-03-28T01:00:00Z", "2027-03-29T01:00:00Z"]})
    assert (
        run(
            api,
            "preview",
            "30 2 * * *",
            "--timezone",
            "Europe/Berlin",
            "--count",
            "2",
            "--start-at",
            "2027-03-01T00:00:00Z",
        )
        == 0
    )
    assert api.requests[0].json == {
        "schedule": "30 2 * * *",
        "timezone": "Europe/Berlin",
        "count": 2,
        "start_at": "2027-03-01T00:00:00Z",
    }
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["UTC", "LOCAL", "TIME"]
    assert out[1].split() == ["2027-03-28T01:00:00Z", "2027-03-28", "03:00:00", "CEST"]
    api.on(
        "POST",
        "/v1/schedules/preview",
        envelope("bad_request", "invalid job", [{"field": "schedule", "message": "bad cron"}]),
        400,
    )
    assert run(api, "preview", "61 * * * *") == 1
    assert "  schedule: bad cron" in capsys.readouterr().err
    api.on("POST", "/v1/schedules/preview", {"occurrences": ["2027-01-01T00:00:00Z"]})
    assert run(api, "-o", "yaml", "preview", "@yearly") == 0
    assert capsys.readouterr().out == "occurrences:\n- '2027-01-01T00:00:00Z'\n"


def test_console_parses_its_options_and_explains_a_missing_console(capsys, monkeypatch):
    args = cli.build_parser().parse_args(
        [
            "console",
            "--endpoint",
            "https://x.execute-api.eu-west-1.amazonaws.com/prod",
            "--port",
            "9999",
            "--region",
            "eu-west-1",
        ]
    )
    assert (args.endpoint, args.port, args.console_region, args.host) == (
        "https://x.execute-api.eu-west-1.amazonaws.com/prod",
        9999,
        "eu-west-1",
        "127.0.0.1",
    )
    assert cli.build_parser().parse_args(["console", "--endpoint", "http://h"]).port == 8081
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["console"])  # --endpoint is required
    capsys.readouterr()
    monkeypatch.setitem(sys.modules, "scheduler.console.proxy", None)  # as if absent
    assert cli.main(["console", "--endpoint", "http://h"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "web console is not part of this installation" in err


# -- issue 15: clear failures ---------------------------------------------------------------------


def test_a_200_json_answer_that_is_not_the_api_exits_5(api, capsys):
    api.on("GET", "/v1/jobs", {"hello": "world"})
    assert run(api, "jobs", "list") == 5
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not answer as the scheduler API" in err
    api.on("GET", f"/v1/jobs/{JOB_ID}", [1, 2])
    assert run(api, "jobs", "get", JOB_ID) == 5


@pytest.mark.parametrize(
    ("method", "path", "argv"),
    [
        ("POST", "/v1/jobs", ("jobs", "create", "--name", "x", "--schedule", "@daily", "--url", "http://a.b/")),
        ("POST", f"/v1/jobs/{JOB_ID}/run", ("jobs", "run", JOB_ID)),
        ("DELETE", f"/v1/jobs/{JOB_ID}", ("jobs", "delete", JOB_ID)),
        ("POST", f"/v1/jobs/{JOB_ID}/pause", ("jobs", "pause", JOB_ID)),
        ("POST", f"/v1/jobs/{JOB_ID}/resume", ("jobs", "resume", JOB_ID)),
        ("POST", "/v1/jobs/pause", ("jobs", "pause", "--tag", "x")),
        ("POST", "/v1/calendars", ("calendars", "create", "--name", "x", "--date", "2026-12-31")),
        ("GET", "/v1/calendars/x", ("calendars", "get", "x")),
        ("GET", "/v1/alert-rules/x", ("alert-rules", "get", "x")),
    ],
)
def test_a_write_or_read_answered_by_another_service_exits_5(api, capsys, method, path, argv):
    # another service on the endpoint answers 200 with JSON of its own: never taken for a success
    api.on(method, path, {"echoed": True})
    assert run(api, *argv) == 5
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not answer as the scheduler API" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "argv",
    [
        ("executions", "--since", "99999999w"),
        ("executions", "--since", "999999999999999999999d"),
        ("jobs", "pause", "hello", "--until", "10000000000000000000000000s"),
        ("jobs", "backfill", "hello", "--start", "99999999w", "--end", "1h", "--dry-run"),
        ("--http-timeout", "nan", "jobs", "list"),
        ("--http-timeout", "inf", "jobs", "list"),
        ("executions", "--follow", "--interval", "nan"),
        ("jobs", "create", "--name", "x", "--schedule", "@daily", "--url", "http://a.b/", "--per-second", "nan"),
    ],
)
def test_out_of_range_times_and_numbers_are_usage_errors(api, capsys, argv):
    with pytest.raises(SystemExit) as stopped:  # argparse's usage error
        run(api, *argv)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and ("past the years a date can have" in err or "positive number" in err)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (("jobs", "get", ""), "must not be empty"),
        (("jobs", "update", "hello", "--description", "x", "--if-match", ""), "must not be empty"),
        (("echo", "--status", "0"), "an HTTP status is 100 to 599"),
        (("echo", "--status", "999"), "an HTTP status is 100 to 599"),
    ],
)
def test_empty_names_versions_and_impossible_statuses_are_usage_errors(api, capsys, argv, said):
    with pytest.raises(SystemExit) as stopped:
        run(api, *argv)
    assert stopped.value.code == 2 and said in capsys.readouterr().err


def test_answers_of_the_right_shape_with_wrong_fields_exit_5_without_a_traceback(api, capsys):
    api.on("GET", "/v1/jobs", {"jobs": [{"id": JOB_ID, "name": "x", "stats": 5}], "next_cursor": None})
    assert run(api, "jobs", "list") == 5
    api.on("GET", f"/v1/jobs/{JOB_ID}", {"id": JOB_ID, "name": "x", "schedule": 7, "target": {"method": 5}})
    assert run(api, "jobs", "get", JOB_ID) == 5
    api.on("GET", "/v1/calendars", b"[" * 100_000 + b"]" * 100_000)  # nested past what can be read
    assert run(api, "calendars", "list") == 5
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("invalid_response") == 3


def test_empty_columns_and_an_impossible_endpoint_port_are_usage_errors(api, capsys):
    assert run(api, "jobs", "list", "--columns", "") == 2
    assert "--columns: unknown column (none given)" in capsys.readouterr().err
    assert cli.main(["--endpoint", "http://127.0.0.1:99999", "jobs", "list"]) == 2
    assert "the port is not a number from 0 to 65535" in capsys.readouterr().err


def test_an_endpoint_that_is_not_the_apis_base_url_gets_a_hint(api, capsys):
    """The API's own 404 of a path no route answers (``no such resource``): a path after the
    host, or a /v1 too many, in --endpoint: exit 5 (not the API), not 3 (absent). A missing
    job's 404 gets no such hint and exit 3."""
    api.on("GET", r"/wrong/v1/jobs.*", envelope("not_found", "no such resource"), status=404)
    assert cli.main(["--endpoint", api.url + "/wrong", "jobs", "list"]) == 5
    err = capsys.readouterr().err
    assert "error: 404 not_found: no such resource" in err
    assert f"hint: no route of the API answers this path: is --endpoint ({api.url}/wrong) the API's base URL" in err
    api.on("GET", r"/v1/jobs/" + "0" * 8 + "-0000-4000-8000-" + "0" * 12, envelope("not_found", "no such job"), 404)
    assert run(api, "jobs", "get", "00000000-0000-4000-8000-000000000000") == 3
    assert "hint" not in capsys.readouterr().err


def test_unquoted_star_in_yaml_gets_a_hint(tmp_path, api, capsys):
    path = tmp_path / "job.yaml"
    path.write_text("name: x\nschedule: */5 * * * *\ntarget:\n  url: http://h\n")
    assert run(api, "jobs", "create", "-f", str(path)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "quote a schedule that starts with '*'" in err and "Traceback" not in err


def test_a_definition_naming_a_key_twice_is_a_usage_error(tmp_path, api, capsys):
    for name, text in (
        ("job.yaml", "name: x\nname: y\nschedule: '@daily'\ntarget:\n  url: http://h\n"),
        ("job.json", '{"name": "x", "name": "y", "schedule": "@daily", "target": {"url": "http://h"}}'),
    ):
        path = tmp_path / name
        path.write_text(text)
        assert run(api, "jobs", "create", "-f", str(path)) == 2
        err = capsys.readouterr().err
        assert "duplicate key 'name'" in err and "Traceback" not in err


def test_local_busy_port_is_one_line_before_any_migration(capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        # an unreachable database too: the port is checked first
        assert cli.main(["local", "--port", str(port), "--database-url", "postgresql://u:pw@127.0.0.1:1/x"]) == 1
    err = capsys.readouterr().err
    assert (
        err == f"scheduler local: error: port {port} on 127.0.0.1 is in use (another scheduler local?); give --port\n"
    )


def test_unreachable_database_is_one_line_without_the_password(capsys):
    assert cli.main(["local", "--port", "0", "--database-url", "postgresql://u:s3cret@127.0.0.1:1/x"]) == 1
    assert cli.main(["migrate", "--database-url", "postgresql://u:s3cret@127.0.0.1:1/x"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert [line.split(": error: ")[0] for line in err] == ["scheduler local", "scheduler migrate"]
    assert all("cannot reach the database at 127.0.0.1:1" in line and "s3cret" not in line for line in err)


def test_local_without_the_local_extra_says_how_to_install_it(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "waitress", None)
    assert cli.main(["local", "--port", "0"]) == 1
    assert capsys.readouterr().err == (
        "scheduler local: error: scheduler local needs the 'local' extra: pip install -e '.[local]' (or make dev)\n"
    )


def test_bad_precision_in_the_environment_is_one_line(monkeypatch, capsys):
    monkeypatch.setenv("SCHEDULER_PRECISION", "hour")
    assert cli.main(["local", "--port", "0", "--database-url", "postgresql://u@127.0.0.1:1/x"]) == 1
    assert "SCHEDULER_PRECISION must be 'second' or 'minute'" in capsys.readouterr().err


# -- issue 15: environment variables ----------------------------------------------------------------


def test_local_settings_read_the_environment_and_the_options_win(tmp_path):
    from scheduler.local.runtime import LocalOptions, local_settings

    env = {
        "SCHEDULER_PRECISION": "minute",
        "SCHEDULER_LOCAL_KEY_FILE": str(tmp_path / "k.key"),
        "SCHEDULER_TARGET_ALLOW_LIST": "a.example, b.example",
        "SCHEDULER_EXECUTION_RETENTION_DAYS": "7",
        "SCHEDULER_DEFAULT_BROKER_URL": "amqp://guest:guest@127.0.0.1:5672/",
        "SCHEDULER_CURSOR_SECRET": "c",
    }
    settings = local_settings(LocalOptions(), tmp_path, "postgresql://db", env)
    assert (
        settings.precision,
        settings.local_key_file,
        settings.target_allow_list,
        settings.execution_retention_days,
        settings.default_broker_url,
        settings.cursor_secret,
        settings.allow_private_targets,
        settings.database_url,
    ) == (
        "minute",
        str(tmp_path / "k.key"),
        ("a.example", "b.example"),
        7,
        "amqp://guest:guest@127.0.0.1:5672/",
        "c",
        True,
        "postgresql://db",
    )
    over = local_settings(LocalOptions(precision="second", guard_targets=True), tmp_path, "postgresql://db", {})
    assert (over.precision, over.allow_private_targets, over.local_key_file) == (
        "second",
        False,
        str(tmp_path / "secret.key"),
    )


def test_migrate_reads_scheduler_database_url(empty_db_url, monkeypatch, capsys):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("SCHEDULER_DATABASE_URL", empty_db_url)
    assert cli.main(["migrate"]) == 0
    assert capsys.readouterr().out.startswith("applied ")
    assert cli.main(["migrate"]) == 0
    assert "applied 0 migration(s)" in capsys.readouterr().out


def test_migrate_refusing_a_changed_migration_is_one_line(db_url, capsys):
    import psycopg

    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("UPDATE schema_migrations SET checksum = 'changed' WHERE version = 1")
    assert cli.main(["migrate", "--database-url", db_url]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot migrate the database: migration 0001_" in err and "Traceback" not in err


# -- issue 15: target flags, whole jobs, output formats, completion -------------------------------


def test_create_with_every_target_flag(api, tmp_path, monkeypatch):
    api.on("POST", "/v1/jobs", job(), 201)
    body = tmp_path / "body.json"
    body.write_text('{"at": "{{scheduled_at}}"}')
    monkeypatch.setenv("SCHEDULER_AUTH_SECRET", "s3cret")
    argv = [
        "jobs",
        "create",
        "--name",
        "n",
        "--schedule",
        "@hourly",
        "--url",
        "https://example.com/h",
        "--timeout",
        "12",
        "--content-type",
        "application/json",
        "--success-codes",
        "200,202",
        "--auth",
        "basic",
        "--auth-username",
        "me",
        "--min-backoff",
        "2",
        "--max-backoff",
        "60.5",
        "--max-age",
        "3600",
        "--max-attempts",
        "5",
        "--body",
        f"@{body}",
        "--after-completion",
        "delete",
    ]
    assert run(api, *argv) == 0
    sent = api.requests[-1].json
    assert sent["target"] == {
        "type": "http",
        "url": "https://example.com/h",
        "timeout_seconds": 12,
        "success_codes": [200, 202],
        "body": '{"at": "{{scheduled_at}}"}',
        "headers": {"Content-Type": "application/json"},
        "auth": {"type": "basic", "username": "me", "password": "s3cret"},
    }
    assert sent["retry"] == {
        "max_attempts": 5,
        "min_backoff_seconds": 2,
        "max_backoff_seconds": 60.5,
        "max_age_seconds": 3600,
    }
    assert sent["after_completion"] == "delete"
    assert (
        run(
            api,
            "jobs",
            "create",
            "--name",
            "m",
            "--run-at",
            "2026-12-01T10:00:00Z",
            "--routing-key",
            "q",
            "--content-type",
            "text/plain",
            "--auth",
            "bearer",
        )
        == 0
    )
    assert api.requests[-1].json["target"]["content_type"] == "text/plain"
    assert api.requests[-1].json["target"]["auth"] == {"type": "bearer", "token": "s3cret"}


def test_auth_secret_from_stdin_never_from_argv(api, monkeypatch):
    api.on("PATCH", f"/v1/jobs/{JOB_ID}", job())
    monkeypatch.setattr(sys, "stdin", io.StringIO("tok-from-stdin\n"))
    assert run(api, "jobs", "update", JOB_ID, "--auth", "header", "--auth-header", "X-Key") == 0
    assert api.requests[-1].json["target"]["auth"] == {"type": "header", "name": "X-Key", "value": "tok-from-stdin"}
    # no flag takes a secret on the command line
    options = {
        o
        for a in cli.build_parser()
        ._subparsers._group_actions[0]
        .choices["jobs"]
        ._subparsers._group_actions[0]
        .choices["create"]
        ._actions
        for o in a.option_strings
    }
    assert not {"--password", "--token", "--auth-value", "--auth-secret"} & options


def test_auth_needs_its_name_and_a_secret(api, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert (
        run(api, "jobs", "create", "--name", "n", "--schedule", "@daily", "--url", "http://h", "--auth", "basic") == 2
    )
    assert (
        run(api, "jobs", "create", "--name", "n", "--schedule", "@daily", "--url", "http://h", "--auth", "bearer") == 2
    )
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "scheduler jobs create: error: --auth basic needs --auth-username",
        "scheduler jobs create: error: --auth bearer: empty secret (set $SCHEDULER_AUTH_SECRET or give it on stdin)",
    ]
    assert not api.requests


def test_jobs_get_shows_the_whole_job_and_yaml(api, capsys):
    whole = job(
        after_completion="keep",
        target={
            "type": "http",
            "url": "https://example.com/hook",
            "method": "POST",
            "headers": {"X-A": "1"},
            "body": "hi",
            "auth": {"type": "bearer", "token": "***"},
            "timeout_seconds": 10,
            "success_codes": [200],
        },
    )
    api.on("GET", f"/v1/jobs/{JOB_ID}", whole)
    assert run(api, "jobs", "get", JOB_ID) == 0
    out = capsys.readouterr().out
    for text in (
        "owner:",
        "after completion:",
        "keep",
        '{"X-A": "1"}',
        '"token": "***"',
        "timeout_seconds:",
        "min_backoff_seconds=1",
        "max_backoff_seconds=300",
        "Europe/Berlin",
        "run_once",
    ):
        assert text in out, text
    assert run(api, "jobs", "get", JOB_ID, "-o", "yaml") == 0
    import yaml

    assert yaml.safe_load(capsys.readouterr().out) == whole


def test_every_flag_has_help():
    parser = cli.build_parser()

    def walk(p: Any, path: str):
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    yield from walk(child, f"{path} {name}")
            elif action.option_strings and action.dest != "help":
                yield path, action

    missing = [f"{path} {action.option_strings[0]}" for path, action in walk(parser, "scheduler") if not action.help]
    assert missing == []


def test_completion_scripts_complete_commands_and_options(tmp_path, capsys):
    assert cli.main(["completion", "bash"]) == 0
    script = capsys.readouterr().out
    path = tmp_path / "c.bash"
    path.write_text(script)

    def complete(*words: str) -> list[str]:
        cword = len(words) - 1
        quoted = " ".join(f"'{w}'" for w in words)
        result = subprocess.run(
            [
                "bash",
                "-c",
                f"source {path}; COMP_WORDS=({quoted}); COMP_CWORD={cword}; "
                '_scheduler_complete; echo "${COMPREPLY[@]}"',
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        return result.stdout.split()

    assert complete("scheduler", "jo") == ["jobs"]
    assert complete("scheduler", "jobs", "cr") == ["create"]
    assert "--success-codes" in complete("scheduler", "jobs", "create", "--su")
    assert complete("scheduler", "executions", "--fo") == ["--follow"]
    assert cli.main(["completion", "zsh"]) == 0
    assert capsys.readouterr().out.startswith("autoload -U +X bashcompinit && bashcompinit\n")


# -- issue 15: scheduler echo ----------------------------------------------------------------------


def test_echo_prints_each_request():
    from scheduler.cli.echo import make_http_server

    out = io.StringIO()
    server = make_http_server("127.0.0.1", 0, out=out)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        import requests

        answer = requests.post(
            f"http://127.0.0.1:{server.server_address[1]}/hook?a=1",
            data=b'{"x": 1}',
            headers={"X-Scheduler-Attempt": "1"},
            timeout=5,
        )
        assert answer.status_code == 200
    finally:
        server.shutdown()
        server.server_close()
    text = out.getvalue()
    assert text.startswith("--> POST /hook?a=1\n") and "X-Scheduler-Attempt: 1\n" in text
    assert text.endswith('\n\n{"x": 1}\n\n')


def test_echo_busy_port_is_one_line(capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        assert cli.main(["echo", "--port", str(busy.getsockname()[1])]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("scheduler echo: error: cannot listen on 127.0.0.1:")


def test_local_region_is_the_region_sigv4_signatures_must_name(tmp_path):
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    from botocore.credentials import Credentials

    from scheduler.local.runtime import principal_resolver
    from scheduler.transport.http_adapter import RequestRefused

    creds = tmp_path / "creds.json"
    creds.write_text(json.dumps({"AKIDLOCAL": {"secret_access_key": "s", "principal": "arn:aws:iam::1:user/a"}}))
    resolve = principal_resolver("sigv4", str(creds), region="eu-west-1")

    def app(environ, start_response):
        environ["scheduler.body"] = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        try:
            principal = resolve(environ)
        except RequestRefused:  # the signature names another region
            principal = None
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps({"principal": principal}).encode()]

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    server = make_server("127.0.0.1", 0, app, handler_class=Quiet)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        for region, principal in (("eu-west-1", "arn:aws:iam::1:user/a"), ("us-east-1", None)):
            client = SchedulerClient(url, sigv4=True, region=region, credentials=Credentials("AKIDLOCAL", "s"))
            assert client.request("GET", "/v1/health")["principal"] == principal
    finally:
        server.shutdown()
        server.server_close()
    args = cli.build_parser().parse_args(["local", "--region", "eu-west-1", "--guard-targets"])
    options = cli.server.local_options(args)
    assert (options.region, options.guard_targets) == ("eu-west-1", True)
    defaults = cli.server.local_options(cli.build_parser().parse_args(["local"]))
    assert (defaults.region, defaults.guard_targets, defaults.precision) == ("us-east-1", False, None)


def test_local_does_not_import_the_cli_and_options_are_frozen():
    import dataclasses

    code = (
        "import sys, scheduler.local.runtime, scheduler.local.logs; "
        "assert not [m for m in sys.modules if m.startswith('scheduler.cli')], sorted(sys.modules)"
    )
    subprocess.run(
        [sys.executable, "-c", code], check=True, env={**__import__("os").environ, "PYTHONPATH": "functions"}
    )
    from scheduler.local.runtime import LocalOptions

    with pytest.raises(dataclasses.FrozenInstanceError):
        LocalOptions().port = 1  # type: ignore[misc]


def test_python_m_scheduler_cli_runs():
    result = subprocess.run(
        [sys.executable, "-m", "scheduler.cli", "--help"],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "PYTHONPATH": "functions"},
    )
    assert result.returncode == 0 and "preview" in result.stdout and "echo" in result.stdout


@pytest.mark.amqp
def test_echo_prints_amqp_messages():
    import os
    import uuid

    pika = pytest.importorskip("pika")
    from scheduler.cli.echo import consume_amqp

    url = os.environ.get("SCHEDULER_TEST_AMQP_URL") or "amqp://guest:guest@127.0.0.1:5672/%2F"
    queue = f"echo-test-{uuid.uuid4().hex[:8]}"
    out, stop, ready = io.StringIO(), threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def consume() -> None:
        try:
            consume_amqp(url, queue, None, None, stop, out=out, ready=ready)
        except BaseException as exc:
            errors.append(exc)
            ready.set()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    assert ready.wait(10) and not errors, errors
    connection = pika.BlockingConnection(pika.URLParameters(url))
    try:
        connection.channel().basic_publish(
            "",
            queue,
            b"hello",
            pika.BasicProperties(message_id="job:1", content_type="text/plain", headers={"X-Scheduler-Attempt": 1}),
        )
        deadline = time.monotonic() + 10
        while "hello" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        stop.set()
        thread.join(5)
        channel = connection.channel()
        channel.queue_delete(queue)
        connection.close()
    text = out.getvalue()
    assert text.startswith(f"--> amqp exchange=(default) routing_key={queue}\n")
    assert "message_id: job:1\n" in text and "header X-Scheduler-Attempt: 1\n" in text and text.endswith("\nhello\n\n")


@pytest.mark.amqp
def test_echo_says_in_one_line_that_the_broker_refused_its_queue():
    import os
    import uuid

    pika = pytest.importorskip("pika")
    from scheduler.cli.common import CommandFailed
    from scheduler.cli.echo import consume_amqp

    url = os.environ.get("SCHEDULER_TEST_AMQP_URL") or "amqp://guest:guest@127.0.0.1:5672/%2F"
    queue, exchange = f"echo-test-{uuid.uuid4().hex[:8]}", f"no-such-exchange-{uuid.uuid4().hex[:8]}"
    try:
        with pytest.raises(CommandFailed) as refused:
            consume_amqp(url, queue, exchange, None, threading.Event())
    finally:  # the queue was declared before the bind was refused
        connection = pika.BlockingConnection(pika.URLParameters(url))
        connection.channel().queue_delete(queue)
        connection.close()
    assert str(refused.value).startswith(f"the broker refused the queue {queue!r}: 404 NOT_FOUND - no exchange"), (
        refused.value
    )


def test_an_error_the_message_already_says_is_printed_once(api, capsys):
    message = "schedule: minute field: 61 is out of range 0-59"
    api.on(
        "POST",
        "/v1/jobs",
        envelope(
            "invalid_request", message, [{"field": "schedule", "message": "minute field: 61 is out of range 0-59"}]
        ),
        400,
    )
    assert run(api, "jobs", "create", "--name", "x", "--schedule", "61 * * * *", "--url", "http://h") == 1
    assert capsys.readouterr().err == f"error: 400 invalid_request: {message}\n"


def test_the_log_line_of_a_finished_execution():
    import logging

    from scheduler.local.logs import LocalFormatter

    at = 1796549400.085  # 2026-12-06T09:30:00.085Z

    def line(**extra: Any) -> str:
        record = logging.LogRecord(
            "scheduler.runner.executor", logging.INFO, __file__, 1, "execution finished", None, None
        )
        record.__dict__.update(extra, created=at)
        return LocalFormatter().format(record)

    assert (
        line(
            job_name="nightly",
            job_id="3f2a",
            execution_id="7d0c",
            owner="alice",
            status="succeeded",
            http_status=200,
            duration_ms=85,
            lateness_ms=12,
            attempt=1,
        )
        == "INFO scheduler.runner.executor: nightly 3f2a succeeded http=200 took=85ms late=12ms execution=7d0c "
        "owner=alice at=2026-12-06T09:30:00.085Z"
    )
    assert line(
        job_name="amqp-job",
        job_id="9",
        execution_id="8e1d",
        owner="bob",
        status="failed",
        http_status=None,
        duration_ms=3,
        lateness_ms=-1,
        attempt=2,
        error="broker said:\n  no route",
    ) == (
        "INFO scheduler.runner.executor: amqp-job 9 failed took=3ms late=-1ms attempt=2 execution=8e1d owner=bob "
        "at=2026-12-06T09:30:00.085Z error=broker said: no route"
    )
    other = logging.LogRecord("x", logging.WARNING, __file__, 1, "something %s", ("else",), None)
    other.created = 1796549400.085
    assert (
        LocalFormatter("runner-2").format(other) == "WARNING [runner-2] x: something else at=2026-12-06T09:30:00.085Z"
    )


def test_a_local_log_line_carries_the_fields_attached_to_its_record():
    """An API record (``job created`` and its job id), a runner's warning: the message, then each
    field attached to it, ``key=value``, None left out, each on the one line."""
    import logging

    from scheduler.local.logs import LocalFormatter

    created = logging.LogRecord("scheduler.api.jobs", logging.INFO, __file__, 1, "job created", None, None)
    created.job_id = "3f2a"
    assert LocalFormatter().format(created) == "INFO scheduler.api.jobs: job created job_id=3f2a"
    handed = logging.LogRecord("scheduler.runner.executor", logging.INFO, __file__, 1, "handed back", None, None)
    handed.__dict__.update(job_id="9", execution_id=None, waited_for="limits of k\n(max_in_flight 1)", ids=["a", "b"])
    assert (
        LocalFormatter("runner-2").format(handed)
        == "INFO [runner-2] scheduler.runner.executor: handed back job_id=9 waited_for=limits of k (max_in_flight 1) ids=a,b"
    )


def test_a_server_without_the_new_routes_is_named_as_such(api, capsys):
    assert run(api, "executions") == 3
    assert run(api, "preview", "@daily") == 3
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"error: 404 not_found: the API at {api.url} has no GET /v1/executions (a server older than this client?)",
        f"error: 404 not_found: the API at {api.url} has no POST /v1/schedules/preview (a server older "
        "than this client?)",
    ]


def test_follow_as_json_lines_and_body_from_stdin(api, monkeypatch):
    from scheduler.cli.executions import follow

    api.on("GET", "/v1/executions", {"executions": [execution(1, job_name="a")], "next_cursor": None})
    client = SchedulerClient(api.url)  # type: ignore[attr-defined]
    out, stop = io.StringIO(), threading.Event()
    stop.set()  # one poll, then stop
    assert follow(client.list_all_executions, {}, output="json", stop=stop, out=out, from_start=True) == 0
    assert [json.loads(line)["id"] for line in out.getvalue().splitlines()] == ["e1"]
    api.on("POST", "/v1/jobs", job(), 201)
    monkeypatch.setattr(sys, "stdin", io.StringIO("line 1\nline 2\n"))
    assert run(api, "jobs", "create", "--name", "n", "--schedule", "@daily", "--url", "http://h", "--body", "@-") == 0
    assert api.requests[-1].json["target"]["body"] == "line 1\nline 2\n"


# -- issue 16: AWS targets and sigv4 auth ----------------------------------------------------------

ROLE = "arn:aws:iam::123456789012:role/scheduler-target"


def create_target(api: FakeApi, *flags: str) -> dict[str, Any]:
    """The target the CLI sends for ``jobs create --name n --schedule @hourly FLAGS``."""
    api.on("POST", "/v1/jobs", job(), 201)
    before = len(api.requests)
    assert run(api, "jobs", "create", "--name", "n", "--schedule", "@hourly", *flags) == 0
    assert len(api.requests) == before + 1
    return api.requests[-1].json["target"]


def test_create_each_aws_target_type_from_flags(api, tmp_path):
    payload = tmp_path / "payload.json"
    payload.write_text('{"job": "{{job_id}}"}')
    fn = "arn:aws:lambda:eu-west-1:123456789012:function:report:live"
    assert create_target(
        api,
        "--function-arn",
        fn,
        "--payload",
        f"@{payload}",
        "--invocation-type",
        "RequestResponse",
        "--role-arn",
        ROLE,
        "--timeout",
        "60",
    ) == {
        "type": "lambda",
        "function_arn": fn,
        "payload": '{"job": "{{job_id}}"}',
        "invocation_type": "RequestResponse",
        "role_arn": ROLE,
        "timeout_seconds": 60,
    }
    queue = "https://sqs.eu-west-1.amazonaws.com/123456789012/jobs.fifo"
    assert create_target(
        api, "--queue-url", queue, "--body", "{{scheduled_at}}", "--message-group-id", "g1", "--role-arn", ROLE
    ) == {"type": "sqs", "queue_url": queue, "body": "{{scheduled_at}}", "message_group_id": "g1", "role_arn": ROLE}
    topic = "arn:aws:sns:eu-west-1:123456789012:alerts"
    assert create_target(api, "--topic-arn", topic, "--body", "due", "--subject", "Report due", "--role-arn", ROLE) == {
        "type": "sns",
        "topic_arn": topic,
        "message": "due",
        "subject": "Report due",
        "role_arn": ROLE,
    }
    detail = tmp_path / "detail.json"
    detail.write_text('{"at": "{{scheduled_at}}"}')
    bus = "arn:aws:events:eu-west-1:123456789012:event-bus/default"
    assert create_target(
        api,
        "--type",
        "eventbridge",
        "--event-bus-arn",
        bus,
        "--source",
        "com.example.reports",
        "--detail-type",
        "ReportDue",
        "--detail",
        f"@{detail}",
        "--role-arn",
        ROLE,
    ) == {
        "type": "eventbridge",
        "event_bus_arn": bus,
        "source": "com.example.reports",
        "detail_type": "ReportDue",
        "detail": '{"at": "{{scheduled_at}}"}',
        "role_arn": ROLE,
    }


def test_aws_flags_over_a_file_of_another_type_replace_its_target(api, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("name: f\nschedule: '@daily'\ntarget: {url: 'https://example.com/a', method: GET}\n")
    api.on("POST", "/v1/jobs", job(), 201)
    assert (
        run(
            api,
            "jobs",
            "create",
            "-f",
            str(path),
            "--topic-arn",
            "arn:aws:sns:us-east-1:123456789012:t.fifo",
            "--message-group-id",
            "{{job_id}}",
            "--body",
            "hi",
            "--role-arn",
            ROLE,
        )
        == 0
    )
    assert api.requests[-1].json["target"] == {
        "type": "sns",
        "topic_arn": "arn:aws:sns:us-east-1:123456789012:t.fifo",
        "message_group_id": "{{job_id}}",
        "message": "hi",
        "role_arn": ROLE,
    }
    # a file's sqs target takes the flags over it
    path.write_text(
        f"name: f\nschedule: '@daily'\ntarget: {{type: sqs, queue_url: 'https://sqs.us-east-1."
        f"amazonaws.com/123456789012/q', body: old, role_arn: '{ROLE}'}}\n"
    )
    assert run(api, "jobs", "create", "-f", str(path), "--body", "new") == 0
    assert api.requests[-1].json["target"] == {
        "type": "sqs",
        "queue_url": "https://sqs.us-east-1.amazonaws.com/123456789012/q",
        "body": "new",
        "role_arn": ROLE,
    }


def test_http_target_with_sigv4_auth(api, monkeypatch):
    monkeypatch.delenv("SCHEDULER_AUTH_SECRET", raising=False)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # sigv4 reads no secret
    url = "https://abc123.execute-api.eu-central-1.amazonaws.com/prod/reports"
    assert create_target(api, "--url", url, "--auth", "sigv4", "--role-arn", ROLE) == {
        "type": "http",
        "url": url,
        "auth": {"type": "sigv4", "service": "execute-api", "region": "eu-central-1", "role_arn": ROLE},
    }
    fn_url = "https://xyz.lambda-url.us-west-2.on.aws/"
    assert create_target(api, "--url", fn_url, "--auth", "sigv4", "--role-arn", ROLE)["auth"] == {
        "type": "sigv4",
        "service": "lambda",
        "region": "us-west-2",
        "role_arn": ROLE,
    }
    assert create_target(
        api,
        "--url",
        "https://internal.example.com/x",
        "--auth",
        "sigv4",
        "--sigv4-service",
        "execute-api",
        "--sigv4-region",
        "eu-west-1",
        "--role-arn",
        ROLE,
    )["auth"] == {"type": "sigv4", "service": "execute-api", "region": "eu-west-1", "role_arn": ROLE}


@pytest.mark.parametrize(
    "flags,message",
    [
        (
            ["--queue-url", "https://sqs.us-east-1.amazonaws.com/1/q", "--function-arn", "arn:x"],
            "--function-arn and --queue-url are flags of different target types (lambda, sqs)",
        ),
        (
            ["--type", "sqs", "--queue-url", "u", "--url", "https://example.com"],
            "--url is a flag of http or amqp targets, not of sqs",
        ),
        (
            ["--type", "lambda", "--function-arn", "a", "--body", "x"],
            "--body is a flag of http or amqp or sqs or sns targets, not of lambda",
        ),
        (["--url", "https://example.com", "--payload", "{}"], "--url is a flag of http or amqp targets, not of lambda"),
        (["--url", "https://example.com", "--role-arn", ROLE], "--role-arn on an http target needs --auth sigv4"),
        (["--url", "https://example.com", "--sigv4-region", "eu-west-1"], "--sigv4-region needs --auth sigv4"),
        (
            ["--url", "https://example.com", "--auth", "sigv4", "--role-arn", ROLE],
            "--auth sigv4 needs --sigv4-service execute-api|lambda (or an execute-api or lambda-url --url)",
        ),
        (
            ["--url", "https://x.execute-api.eu-west-1.amazonaws.com/p", "--auth", "sigv4"],
            "--auth sigv4 needs --role-arn ARN (the role the scheduler signs as)",
        ),
        (
            ["-f", "-", "--event-bus-arn", "a", "--detail", "@-"],
            "-f - and --detail @-: standard input can be read once",
        ),
        (
            ["--function-arn", "a", "--payload", "@/nonexistent/p.json"],
            "--payload: cannot read /nonexistent/p.json: No such file or directory",
        ),
    ],
)
def test_aws_flag_mistakes_are_one_line_usage_errors(api, capsys, flags, message):
    assert run(api, "jobs", "create", "--name", "n", "--schedule", "@daily", *flags) == 2
    assert capsys.readouterr().err.splitlines() == [f"scheduler jobs create: error: {message}"]
    assert not api.requests


def test_update_to_another_type_clears_the_stored_fields(api):
    api.on("GET", f"/v1/jobs/{JOB_ID}", job())
    api.on("PATCH", f"/v1/jobs/{JOB_ID}", job())
    queue = "https://sqs.us-east-1.amazonaws.com/123456789012/q"
    assert run(api, "jobs", "update", JOB_ID, "--queue-url", queue, "--body", "b", "--role-arn", ROLE) == 0
    assert api.requests[-1].method == "PATCH"
    assert api.requests[-1].json == {
        "target": {
            "type": "sqs",
            "queue_url": queue,
            "body": "b",
            "role_arn": ROLE,
            "url": None,
            "method": None,
            "headers": None,
            "auth": None,
            "success_codes": None,
        }
    }  # timeout_seconds and body: sqs has them too
    # --body of a stored sns job is its message; --role-arn alone stays in the stored type
    api.on(
        "GET",
        f"/v1/jobs/{JOB_ID}",
        job(target={"type": "sns", "topic_arn": "arn:aws:sns:us-east-1:1:t", "message": "m", "role_arn": ROLE}),
    )
    assert run(api, "jobs", "update", JOB_ID, "--body", "new message") == 0
    assert api.requests[-1].json == {"target": {"message": "new message"}}
    topic = "arn:aws:sns:us-east-1:123456789012:t2"
    assert run(api, "jobs", "update", JOB_ID, "--type", "sqs", "--queue-url", queue) == 0  # sns -> sqs
    assert api.requests[-1].json == {
        "target": {"type": "sqs", "queue_url": queue, "topic_arn": None, "message": None}
    }  # role_arn kept
    assert run(api, "jobs", "update", JOB_ID, "--topic-arn", topic) == 0  # same type: nothing cleared
    assert api.requests[-1].json == {"target": {"type": "sns", "topic_arn": topic}}
    before = len(api.requests)
    assert run(api, "jobs", "update", JOB_ID, "--role-arn", ROLE + "2", "--message-group-id", "g") == 0
    assert len(api.requests) == before + 1  # no GET needed
    assert api.requests[-1].json == {"target": {"role_arn": ROLE + "2", "message_group_id": "g"}}


def test_tables_and_get_show_aws_targets_by_name(api, capsys):
    jobs = [
        job(
            JOB_ID,
            "to-sqs",
            target={
                "type": "sqs",
                "role_arn": ROLE,
                "body": "b",
                "queue_url": "https://sqs.us-east-1.amazonaws.com/123456789012/work-queue",
            },
        ),
        job(
            JOB_ID2,
            "to-lambda",
            target={
                "type": "lambda",
                "role_arn": ROLE,
                "payload": "{}",
                "function_arn": "arn:aws:lambda:us-east-1:123456789012:function:fn",
                "invocation_type": "RequestResponse",
            },
        ),
        job(
            JOB_ID2,
            "to-sns",
            target={
                "type": "sns",
                "role_arn": ROLE,
                "message": "m",
                "topic_arn": "arn:aws:sns:us-east-1:123456789012:alerts",
            },
        ),
        job(
            JOB_ID2,
            "to-bus",
            target={
                "type": "eventbridge",
                "role_arn": ROLE,
                "source": "s",
                "detail": "{}",
                "event_bus_arn": "arn:aws:events:us-east-1:123456789012:event-bus/ops",
                "detail_type": "Tick",
            },
        ),
        job(
            JOB_ID2,
            "signed",
            target={
                "type": "http",
                "url": "https://a.execute-api.us-east-1.amazonaws.com/p",
                "auth": {"type": "sigv4", "service": "execute-api", "region": "us-east-1", "role_arn": ROLE},
            },
        ),
    ]
    api.on("GET", "/v1/jobs", {"jobs": jobs, "next_cursor": None})
    assert run(api, "jobs", "list") == 0
    out = capsys.readouterr().out.splitlines()
    for line, summary in zip(
        out[1:],
        (
            "sqs work-queue",
            "lambda fn (sync)",
            "sns alerts",
            "eventbridge ops Tick",
            "POST https://a.execute-ap... (sigv4 execute-api)",
        ),
    ):
        assert summary in line, (summary, line)
    api.on("GET", f"/v1/jobs/{JOB_ID}", jobs[0])
    assert run(api, "jobs", "get", JOB_ID) == 0
    lines = capsys.readouterr().out.splitlines()
    target_at = next(i for i, line in enumerate(lines) if line.startswith("target:"))
    assert lines[target_at].split()[1:] == ["sqs", "work-queue"]
    below = " ".join(lines[target_at + 1 : target_at + 5])
    for text in ("queue_url:", "https://sqs.us-east-1.amazonaws.com/123456789012/work-queue", "role_arn:", ROLE):
        assert text in below, text


def test_completion_completes_the_values_of_aws_flags(tmp_path, capsys):
    assert cli.main(["completion", "bash"]) == 0
    path = tmp_path / "c.bash"
    path.write_text(capsys.readouterr().out)

    def complete(*words: str) -> list[str]:
        quoted = " ".join(f"'{w}'" for w in words)
        result = subprocess.run(
            [
                "bash",
                "-c",
                f"source {path}; COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; "
                '_scheduler_complete; echo "${COMPREPLY[@]}"',
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        return result.stdout.split()

    assert complete("scheduler", "jobs", "create", "--type", "s") == ["sqs", "sns"]
    assert complete("scheduler", "jobs", "update", "j", "--auth", "s") == ["sigv4"]
    assert complete("scheduler", "jobs", "create", "--invocation-type", "") == ["Event", "RequestResponse"]
    assert complete("scheduler", "jobs", "create", "--sigv4-service", "") == ["execute-api", "lambda"]
    assert complete("scheduler", "jobs", "create", "--queue") == ["--queue-url"]
    assert complete("scheduler", "jobs", "create", "--event-bus-arn", "") == []  # free text: nothing to offer


# -- issue 33: several expressions, spread, the preview explained ---------------------------------


def test_create_with_several_expressions_and_a_spread(api):
    api.on("POST", "/v1/jobs", job(), 201)
    argv = ["jobs", "create", "--name", "u", "--url", "https://example.com/hook"]
    argv += ["--schedule", "0 9 * * 1-5", "--schedule", "rate(6 hours)", "--spread", "900", "--spread-mode", "random"]
    assert run(api, *argv) == 0
    body = api.requests[0].json
    assert body["schedules"] == ["0 9 * * 1-5", "rate(6 hours)"] and "schedule" not in body
    assert body["spread"] == {"window_seconds": 900, "mode": "random"}


def test_update_to_several_expressions_clears_the_others(api):
    api.on("PATCH", f"/v1/jobs/{JOB_ID}", job(version=4))
    assert run(api, "jobs", "update", JOB_ID, "--schedule", "@hourly", "--schedule", "@daily", "--spread", "60") == 0
    assert api.requests[0].json == {
        "schedules": ["@hourly", "@daily"],
        "schedule": None,
        "run_at": None,
        "spread": {"window_seconds": 60},
    }


def test_jobs_get_shows_the_expressions_and_the_spread(api, capsys):
    answer = job(
        schedule=None, schedules=["0 9 * * 1-5", "rate(6 hours)"], spread={"window_seconds": 900, "mode": "stable"}
    )
    api.on("GET", f"/v1/jobs/{JOB_ID}", answer)
    assert run(api, "jobs", "get", JOB_ID) == 0
    out = capsys.readouterr().out
    assert "0 9 * * 1-5 | rate(6 hours)" in out and "900 s, stable" in out


def test_preview_of_several_expressions_explained(api, capsys):
    items = [
        {"at": "2027-01-04T06:03:20Z", "expression": "rate(6 hours)", "spread_seconds": 200},
        {"at": "2027-01-04T09:03:20Z", "expression": "0 9 * * 1-5", "spread_seconds": 200},
    ]
    api.on("POST", "/v1/schedules/preview", {"occurrences": items})
    api.on("GET", f"/v1/jobs/{JOB_ID}", job(created_at="2026-12-04T02:39:08Z"))
    argv = ["preview", "0 9 * * 1-5", "rate(6 hours)", "--spread", "300", "--job", JOB_ID, "--explain"]
    assert run(api, *argv) == 0
    # No start_at of the job's own: the API counts its rate() from its creation, as its runs are
    # (its creation sent as a start_at would count as an occurrence itself, a run that never comes).
    assert api.requests[-1].json == {
        "schedules": ["0 9 * * 1-5", "rate(6 hours)"],
        "spread": {"window_seconds": 300, "mode": "stable"},
        "job_id": JOB_ID,
        "explain": True,
    }
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["UTC", "EXPRESSION", "SPREAD", "CALENDAR"]
    assert out[1].split() == ["2027-01-04T06:03:20Z", "rate(6", "hours)", "+200s", "-"]
    assert out[2].split() == ["2027-01-04T09:03:20Z", "0", "9", "*", "*", "1-5", "+200s", "-"]


def test_preview_takes_the_job_by_name_as_every_job_argument_does(api, capsys):
    api.on("GET", "/v1/jobs", {"jobs": [job()], "next_cursor": None})
    api.on("GET", f"/v1/jobs/{JOB_ID}", job(start_at="2026-12-01T00:00:00Z", created_at="2026-12-04T02:39:08Z"))
    api.on("POST", "/v1/schedules/preview", {"occurrences": ["2027-01-04T09:03:20Z"]})
    assert run(api, "preview", "0 9 * * 1-5", "--spread", "300", "--job", "nightly-report") == 0
    assert api.requests[-1].json["job_id"] == JOB_ID
    assert api.requests[-1].json["start_at"] == "2026-12-01T00:00:00Z"  # its start_at before its creation
    assert capsys.readouterr().out.strip() == "2027-01-04T09:03:20Z"
    given = ["preview", "0 9 * * 1-5", "--job", "nightly-report", "--start-at", "2027-01-01T00:00:00Z"]
    assert run(api, *given) == 0 and api.requests[-1].json["start_at"] == "2027-01-01T00:00:00Z"


# -- alerts ------------------------------------------------------------------------------------


def test_alerts_table_with_filters(api, capsys):
    api.on("GET", "/v1/jobs", {"jobs": [job()], "next_cursor": None})
    alert = {
        "id": "a1",
        "job_id": JOB_ID,
        "job_name": "nightly-report",
        "on": "failures_in_a_row",
        "threshold": 3,
        "event": "fired",
        "incident_id": "i1",
        "execution_id": "e1",
        "message": "job nightly-report failed 3 times in a row: HTTP 500",
        "target": {"type": "http", "url": "https://hooks.example.com/x"},
        "status": "pending",
        "attempts": 2,
        "created_at": "2026-12-04T18:31:02Z",
        "delivered_at": None,
        "next_attempt_at": "2026-12-04T18:31:10Z",
        "last_error": "HTTP 503",
        "http_status": 503,
    }
    api.on("GET", "/v1/alerts", {"alerts": [alert], "next_cursor": "c2"})
    assert run(api, "alerts", "--job", "nightly-report", "--status", "pending") == 0
    assert api.requests[-1].query == {"job_id": JOB_ID, "status": "pending"}
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].split() == ["CREATED", "JOB", "ON", "EVENT", "STATUS", "ATTEMPTS", "MESSAGE"]
    assert "failures_in_a_row>=3  fired  pending (HTTP 503)  2" in lines[1]
    assert "--cursor c2" in captured.err
    assert run(api, "alerts", "-o", "json") == 0
    assert json.loads(capsys.readouterr().out)["alerts"][0]["id"] == "a1"
    with pytest.raises(SystemExit) as refused:
        run(api, "alerts", "--status", "lost")
    assert refused.value.code == 2


def test_an_alert_rules_on_key_in_yaml_stays_a_word(tmp_path):
    from scheduler.cli.reading import read_definition

    path = tmp_path / "job.yaml"
    path.write_text("name: x\nalerts:\n  - on: failure\n    target: {type: http, url: https://e.com}\nflag: on\n")
    found = read_definition(str(path))
    assert found["alerts"][0]["on"] == "failure" and found["flag"] is True


def test_limits_flags_on_create_and_update(api):
    api.on("POST", "/v1/jobs", job(), 201)
    api.on("GET", "/v1/jobs/" + JOB_ID, job())
    api.on("PATCH", "/v1/jobs/" + JOB_ID, job())
    code = run(
        api,
        "jobs",
        "create",
        "--name",
        "invoice",
        "--schedule",
        "@hourly",
        "--url",
        "https://billing.example.com/i",
        "--max-in-flight",
        "5",
        "--per-second",
        "20",
        "--limit-key",
        "billing-api",
    )
    assert code == 0
    assert api.requests[-1].json["limits"] == {"key": "billing-api", "max_in_flight": 5, "per_second": 20}
    assert run(api, "jobs", "update", JOB_ID, "--max-in-flight", "2") == 0
    patch = [r for r in api.requests if r.method == "PATCH"][-1]
    assert patch.json == {"limits": {"max_in_flight": 2}}


def test_backoff_flags_take_what_the_api_takes(api, capsys):
    """``--min-backoff 0`` (retry at once) was refused as not positive, and ``--max-backoff
    100000`` passed the CLI to be refused by the API: the flags take 0 to a day, as the API does."""
    from scheduler.cli.common import MAX_BACKOFF_SECONDS
    from scheduler.schema.models import MAX_BACKOFF_SECONDS as API_MAX_BACKOFF_SECONDS

    assert MAX_BACKOFF_SECONDS == API_MAX_BACKOFF_SECONDS
    api.on("POST", "/v1/jobs", {"id": JOB_ID, "name": "b", "version": 1}, 201)
    argv = ["jobs", "create", "--name", "b", "--schedule", "@hourly", "--url", "https://example.com/h"]
    assert run(api, *argv, "--min-backoff", "0", "--max-backoff", "86400") == 0
    retry = api.requests[-1].json["retry"]
    assert (retry["min_backoff_seconds"], retry["max_backoff_seconds"]) == (0, 86400)
    with pytest.raises(SystemExit):
        run(api, *argv, "--max-backoff", "100000")
    assert "must be 0 to 86,400 seconds" in capsys.readouterr().err


def test_a_credential_header_comes_from_the_environment(api, capsys, monkeypatch):
    """``--header-env NAME=VARIABLE``: the header's value is the variable's, never on the
    command line (which any user of the machine can read); an unset variable is a usage error
    naming it, before anything is sent."""
    monkeypatch.setenv("RUN_TOKEN", "Bearer s3cr3t=tail")
    api.on("POST", f"/v1/jobs/{JOB_ID}/run", {"job_id": JOB_ID, "status": "queued"}, 202)
    argv = ["jobs", "run", JOB_ID, "--header", "X-Env=staging", "--header-env", "Authorization=RUN_TOKEN"]
    assert run(api, *argv) == 0
    assert api.requests[-1].json["headers"] == {"X-Env": "staging", "Authorization": "Bearer s3cr3t=tail"}
    api.on("POST", "/v1/jobs", {"id": JOB_ID, "name": "h", "version": 1}, 201)
    create = ["jobs", "create", "--name", "h", "--schedule", "@hourly", "--url", "https://example.com/h"]
    assert run(api, *create, "--header-env", "X-Api-Key=RUN_TOKEN") == 0
    assert api.requests[-1].json["target"]["headers"] == {"X-Api-Key": "Bearer s3cr3t=tail"}
    sent = len(api.requests)
    with pytest.raises(SystemExit):
        run(api, *create, "--header-env", "X-Api-Key=NOT_SET_ANYWHERE")
    assert "the environment variable NOT_SET_ANYWHERE is not set" in capsys.readouterr().err
    assert len(api.requests) == sent

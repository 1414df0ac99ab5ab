"""`scheduler local` started as a user would, configured by the environment variables the docs
name and by its flags: each one is seen to take effect over HTTP or on disk."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta

import requests

from tests.support import ROOT, RecordingServer


class Local:
    """A `scheduler local` subprocess; ``url`` read from its banner."""

    def __init__(self, *argv: str, env: dict[str, str]):
        full_env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "functions"), **env}
        for name in ("DATABASE_URL", "SCHEDULER_PRECISION", "SCHEDULER_LOCAL_KEY_FILE"):
            if name not in env:
                full_env.pop(name, None)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "scheduler.cli", "local", "--port", "0", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=full_env,
        )
        self.lines: list[str] = []
        self.url = ""
        ready = threading.Event()

        def read() -> None:
            for line in self.process.stdout:
                self.lines.append(line)
                if "scheduler local: API " in line and not self.url:
                    self.url = line.split("API ", 1)[1].split()[0]
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(60) or not self.url:
            self.process.kill()
            raise AssertionError("scheduler local did not start:\n" + "".join(self.lines))

    def stop(self) -> int:
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout=30)


def test_environment_variables_configure_local_mode(db_url, tmp_path):
    key_file = tmp_path / "keys" / "local.key"
    key_file.parent.mkdir()
    local = Local(
        "--data-dir",
        str(tmp_path / "data"),
        env={
            "SCHEDULER_DATABASE_URL": db_url,
            "SCHEDULER_PRECISION": "minute",
            "SCHEDULER_LOCAL_KEY_FILE": str(key_file),
        },
    )
    try:
        banner = next(line for line in local.lines if "scheduler local: API" in line)
        assert "the given database" in banner  # SCHEDULER_DATABASE_URL: no embedded Postgres
        assert "precision minute" in banner  # SCHEDULER_PRECISION
        answer = requests.post(
            local.url + "/jobs",
            json={
                "name": "with-secret",
                "schedule": "@daily",
                "target": {"type": "http", "url": "https://example.com/h", "auth": {"type": "bearer", "token": "t0k"}},
            },
            timeout=10,
        )
        assert answer.status_code == 201, answer.text
        deadline = time.monotonic() + 10
        while not key_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert key_file.exists()  # SCHEDULER_LOCAL_KEY_FILE: the secret key is kept there
        assert not (tmp_path / "data" / "secret.key").exists()
        # waitress refuses a body over the API's 1 MiB before buffering it
        big = requests.post(
            local.url + "/jobs",
            data=b"{" + b" " * (1024 * 1024) + b"}",
            headers={"Content-Type": "application/json"},
            timeout=10,
        )
        assert big.status_code == 413
        # every answer, the server's own refusals included, is neither cached nor sniffed
        unsupported = requests.post(local.url + "/jobs", data="x", headers={"Content-Type": "text/plain"}, timeout=10)
        foreign = requests.get(local.url + "/jobs", headers={"Host": "elsewhere.example"}, timeout=10)
        huge = requests.post(  # past waitress' own limit: refused by waitress, before the app
            local.url + "/jobs", data=b" " * (2 * 1024 * 1024), headers={"Content-Type": "application/json"}, timeout=10
        )
        assert (unsupported.status_code, foreign.status_code, huge.status_code) == (415, 403, 413)
        for answer in (big, unsupported, foreign, huge):
            assert answer.headers["Cache-Control"] == "no-store", answer.status_code
            assert answer.headers["X-Content-Type-Options"] == "nosniff", answer.status_code
        # the console's own answers (its redirect, its refusal of a write) are not sniffed either
        base = local.url.removesuffix("/v1")
        redirect = requests.get(base + "/", allow_redirects=False, timeout=10)
        write = requests.post(base + "/console/app.js", timeout=10)
        assert (redirect.status_code, write.status_code) == (302, 405)
        assert redirect.headers["X-Content-Type-Options"] == write.headers["X-Content-Type-Options"] == "nosniff"
    finally:
        assert local.stop() == 0


def test_a_start_with_a_key_file_that_does_not_open_the_stored_secrets_says_so(db_url, tmp_path):
    """Local mode started from another folder (or with another --data-dir) makes a key of its
    own: the jobs' secrets stored with the first key would fail every delivery. The start says so,
    naming the key file; with the right key it says nothing."""
    first = Local("--database-url", db_url, "--data-dir", str(tmp_path / "a"), env={})
    try:
        job = {"type": "http", "url": "https://example.com/h", "auth": {"type": "bearer", "token": "t0k"}}
        answer = requests.post(first.url + "/jobs", json={"name": "s", "schedule": "@daily", "target": job}, timeout=10)
        assert answer.status_code == 201, answer.text
        assert not any("WARNING" in line for line in first.lines)  # no secret stored yet at its start
    finally:
        assert first.stop() == 0
    for data_dir, warned in (("b", True), ("a", False)):
        local = Local("--database-url", db_url, "--data-dir", str(tmp_path / data_dir), env={})
        try:
            warnings = [line for line in local.lines if "WARNING" in line]
            assert bool(warnings) == warned, local.lines
            if warned:
                assert str(tmp_path / "b" / "secret.key") in warnings[0] and "does not open" in warnings[0]
        finally:
            assert local.stop() == 0


def test_guard_targets_refuses_loopback_targets(db_url, tmp_path):
    target = RecordingServer()
    local = Local("--database-url", db_url, "--data-dir", str(tmp_path / "d"), "--guard-targets", env={})
    try:
        assert any("SSRF guard on" in line for line in local.lines)
        run_at = (datetime.now(UTC) + timedelta(seconds=1)).isoformat()
        answer = requests.post(
            local.url + "/jobs",
            json={
                "name": "loop",
                "run_at": run_at,
                "retry": {"max_attempts": 1},
                "target": {"type": "http", "url": target.url + "/x"},
            },
            timeout=10,
        )
        assert answer.status_code == 201, answer.text
        job_id = answer.json()["id"]
        deadline, finished = time.monotonic() + 20, []
        while not finished and time.monotonic() < deadline:
            executions = requests.get(f"{local.url}/jobs/{job_id}/executions", timeout=10).json()["executions"]
            finished = [e for e in executions if e["status"] != "running"]
            time.sleep(0.1)
        assert finished and finished[0]["status"] == "failed", finished
        assert target.requests == []  # the loopback target was never called
    finally:
        assert local.stop() == 0
        target.close()


def cli(url: str, *argv: str) -> subprocess.CompletedProcess:
    """``scheduler --endpoint URL ...`` as a user runs it."""
    env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "functions")}
    return subprocess.run(
        [sys.executable, "-m", "scheduler.cli", *argv, "--endpoint", url],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_executions_across_jobs_and_after_completion_against_the_real_routes(db_url, tmp_path):
    target = RecordingServer()
    local = Local("--database-url", db_url, "--data-dir", str(tmp_path / "d"), env={})
    endpoint = local.url.removesuffix("/v1")
    try:
        since = datetime.now(UTC).isoformat()
        run_at = (datetime.now(UTC) + timedelta(seconds=1)).isoformat()
        for name, after in (("kept", "keep"), ("gone", "delete")):
            made = cli(
                endpoint,
                "jobs",
                "create",
                "--name",
                name,
                "--run-at",
                run_at,
                "--url",
                target.url + "/" + name,
                "--after-completion",
                after,
                "-o",
                "json",
            )
            assert made.returncode == 0, made.stderr
            assert json.loads(made.stdout)["after_completion"] == after
        target.wait_for(2, timeout=30)
        deadline, rows = time.monotonic() + 20, []
        while time.monotonic() < deadline:
            listed = cli(endpoint, "executions", "--since", since, "--status", "succeeded", "-o", "json")
            assert listed.returncode == 0, listed.stderr
            rows = json.loads(listed.stdout)["executions"]
            if rows and cli(endpoint, "jobs", "get", "gone").returncode == 3:
                break
            time.sleep(0.2)
        # GET /v1/executions across jobs: the kept job's execution, named; the deleted job took its own along
        assert [(row["job_name"], row["status"], row["http_status"]) for row in rows] == [("kept", "succeeded", 200)]
        assert cli(endpoint, "jobs", "get", "gone").returncode == 3  # no job named gone: deleted
        by_job = cli(endpoint, "executions", "--job", "kept", "-o", "json")
        assert by_job.returncode == 0 and [row["job_name"] for row in json.loads(by_job.stdout)["executions"]] == [
            "kept"
        ]
    finally:
        assert local.stop() == 0
        target.close()


def test_cli_creates_an_sqs_job_that_local_mode_delivers_to_moto(db_url, tmp_path, monkeypatch):
    """`scheduler jobs create --queue-url ...` against `scheduler local`, which delivers through
    moto's server (AWS_ENDPOINT_URL); a field the API refuses is one clear line."""
    import boto3

    from tests.support import LocalScheduler, moto_server

    account, role = "123456789012", "arn:aws:iam::123456789012:role/local-target"
    with moto_server() as moto:
        for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN"):
            monkeypatch.delenv(name, raising=False)
        for name, value in (
            ("AWS_ENDPOINT_URL", moto),
            ("AWS_ACCESS_KEY_ID", "testing"),
            ("AWS_SECRET_ACCESS_KEY", "testing"),
            ("AWS_REGION", "us-east-1"),
        ):
            monkeypatch.setenv(name, value)
        sqs = boto3.client("sqs", region_name="us-east-1")
        queue = sqs.create_queue(QueueName="cli-jobs")["QueueUrl"]
        local = LocalScheduler(db_url, str(tmp_path / "data"))
        try:
            queue_url = f"https://sqs.us-east-1.amazonaws.com/{account}/cli-jobs"
            refused = cli(
                local.url,
                "jobs",
                "create",
                "--name",
                "bad",
                "--schedule",
                "@daily",
                "--queue-url",
                "https://example.com/not-a-queue",
                "--body",
                "x",
                "--role-arn",
                role,
            )
            assert refused.returncode == 1 and refused.stdout == ""
            lines = refused.stderr.splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: 400 ") and "queue_url" in lines[0], lines
            assert "SQS queue URL" in lines[0] and "Traceback" not in refused.stderr

            run_at = (datetime.now(UTC) + timedelta(seconds=1)).isoformat()
            made = cli(
                local.url,
                "jobs",
                "create",
                "--name",
                "to-sqs",
                "--run-at",
                run_at,
                "--queue-url",
                queue_url,
                "--body",
                "{{job_id}}",
                "--role-arn",
                role,
                "-o",
                "json",
            )
            assert made.returncode == 0, made.stderr
            job = json.loads(made.stdout)
            assert job["target"]["type"] == "sqs" and job["target"]["queue_url"] == queue_url
            deadline, messages = time.monotonic() + 30, []
            while not messages and time.monotonic() < deadline:
                messages = sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=1, MessageAttributeNames=["All"]).get(
                    "Messages", []
                )
            assert messages and messages[0]["Body"] == job["id"], "".join(local.lines)
            assert messages[0]["MessageAttributes"]["X-Scheduler-Job-Id"]["StringValue"] == job["id"]

            table = cli(local.url, "jobs", "list")
            assert table.returncode == 0, table.stderr
            row = next(line for line in table.stdout.splitlines() if "to-sqs" in line)
            assert "sqs cli-jobs" in row
            shown = cli(local.url, "jobs", "get", "to-sqs")
            assert shown.returncode == 0 and queue_url in shown.stdout and role in shown.stdout
        finally:
            assert local.stop() == 0


def test_the_embedded_postgres_stops_with_the_last_local_even_after_one_was_killed(tmp_path):
    """A `scheduler local` killed with SIGKILL leaves its embedded Postgres running (nothing ran
    its exit); the next start reuses it, and once that one stops with Ctrl-C, so does Postgres:
    the killed process no longer counts as one of its users."""
    data_dir = tmp_path / "d"
    first = Local("--data-dir", str(data_dir), env={})
    postmaster = int((data_dir / "pgdata" / "postmaster.pid").read_text().split()[0])
    try:
        first.process.kill()
        first.process.wait(timeout=10)
        os.kill(postmaster, 0)  # still running: reused by the next start
        second = Local("--data-dir", str(data_dir), env={})
        assert int((data_dir / "pgdata" / "postmaster.pid").read_text().split()[0]) == postmaster
        assert second.stop() == 0
        _assert_stops(postmaster)
    finally:
        if _running(postmaster):
            os.kill(postmaster, signal.SIGTERM)


def _assert_stops(postmaster: int) -> None:
    """The embedded Postgres of PID ``postmaster`` ends within 30 s (its last user stopped)."""
    deadline = time.monotonic() + 30
    while _running(postmaster) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(postmaster), "the embedded Postgres outlived its last user"


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is not running
        return stat.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_a_stale_postmaster_pid_naming_another_process_is_neither_used_nor_stopped(tmp_path):
    """After a crash (or a reboot), ``postmaster.pid`` may name a PID another process has by
    now: the next start neither takes that process for the server nor signals it; it starts a
    Postgres of its own, and stops it at Ctrl-C."""
    import psutil

    data_dir = tmp_path / "d"
    pid_file = data_dir / "pgdata" / "postmaster.pid"
    first = Local("--data-dir", str(data_dir), env={})
    postmaster = int(pid_file.read_text().split()[0])
    children = psutil.Process(postmaster).children()
    first.process.kill()
    first.process.wait(timeout=10)
    os.kill(postmaster, signal.SIGKILL)  # the crash: the file stays behind
    psutil.wait_procs([psutil.Process(postmaster), *children], timeout=30)
    bystander = subprocess.Popen(["sleep", "300"])
    try:
        lines = pid_file.read_text().splitlines()
        pid_file.write_text("\n".join([str(bystander.pid), *lines[1:]]) + "\n")
        second = Local("--data-dir", str(data_dir), env={})
        server = int(pid_file.read_text().split()[0])
        assert server != bystander.pid and _running(server)
        assert second.stop() == 0, "".join(second.lines)
        deadline = time.monotonic() + 30
        while _running(server) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _running(server), "the embedded Postgres outlived its last user"
        assert bystander.poll() is None, "the process named by the stale postmaster.pid was signalled"
    finally:
        bystander.kill()
        bystander.wait()


def test_a_closed_terminal_stops_local_mode_cleanly(tmp_path):
    """The terminal that runs `scheduler local` goes away (closed, an SSH session dropped): the
    hangup (SIGHUP) stops it as Ctrl-C does, with its embedded Postgres; it did not die at once,
    losing its deliveries under way and orphaning the Postgres."""
    import fcntl
    import pty
    import termios

    data_dir = tmp_path / "d"
    terminal, its_end = pty.openpty()

    def on_the_terminal() -> None:  # a session of its own, whose controlling terminal this is
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    env = {key: value for key, value in os.environ.items() if key not in ("DATABASE_URL", "SCHEDULER_DATABASE_URL")}
    process = subprocess.Popen(
        [sys.executable, "-m", "scheduler.cli", "local", "--port", "0", "--data-dir", str(data_dir)],
        stdin=its_end,
        stdout=its_end,
        stderr=its_end,
        preexec_fn=on_the_terminal,
        env={**env, "PYTHONPATH": os.path.join(ROOT, "functions")},
    )
    os.close(its_end)
    postmaster = None
    try:
        shown, deadline = b"", time.monotonic() + 60
        while b"Ctrl-C to stop" not in shown and time.monotonic() < deadline:
            shown += os.read(terminal, 4096)
        assert b"Ctrl-C to stop" in shown, shown.decode(errors="replace")
        postmaster = int((data_dir / "pgdata" / "postmaster.pid").read_text().split()[0])
        os.close(terminal)  # the hangup
        terminal = -1
        assert process.wait(timeout=30) == 0
        deadline = time.monotonic() + 30
        while _running(postmaster) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _running(postmaster), "the embedded Postgres outlived the closed terminal"
    finally:
        if terminal >= 0:
            os.close(terminal)
        if process.poll() is None:
            process.kill()
        if postmaster is not None and _running(postmaster):
            os.kill(postmaster, signal.SIGTERM)


def _start_fails(*argv: str) -> str:
    """Start `scheduler local` (embedded Postgres) expecting it to fail: its whole output."""
    env = {key: value for key, value in os.environ.items() if key not in ("DATABASE_URL", "SCHEDULER_DATABASE_URL")}
    done = subprocess.run(
        [sys.executable, "-m", "scheduler.cli", "local", "--port", "0", *argv],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": os.path.join(ROOT, "functions")},
        timeout=120,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    return done.stdout + done.stderr


def test_a_data_dir_of_another_postgres_version_is_one_line_naming_the_version(tmp_path):
    pgdata = tmp_path / "d" / "pgdata"
    pgdata.mkdir(parents=True)
    (pgdata / "PG_VERSION").write_text("15\n")  # what Postgres checks first of a data folder
    (pgdata / "postgresql.conf").write_text("")
    pgdata.chmod(0o700)
    [line] = _start_fails("--data-dir", str(tmp_path / "d")).splitlines()
    assert line.startswith("scheduler local: error: cannot start the embedded Postgres under "), line
    assert "initialized by PostgreSQL version 15" in line and "needs PostgreSQL 15" in line, line


def test_a_pgdata_holding_other_files_is_one_line(tmp_path):
    pgdata = tmp_path / "d" / "pgdata"
    pgdata.mkdir(parents=True)
    (pgdata / "notes.txt").write_text("not a database")
    [line] = _start_fails("--data-dir", str(tmp_path / "d")).splitlines()
    assert "exists but is not empty" in line and "--data-dir" in line, line


def test_a_data_dir_that_is_a_file_is_one_line(tmp_path):
    (tmp_path / "file").write_text("")
    [line] = _start_fails("--data-dir", str(tmp_path / "file")).splitlines()
    assert line == (
        f"scheduler local: error: cannot use --data-dir {tmp_path / 'file'}: {tmp_path / 'file'} is a file, "
        "not a folder (give another --data-dir)"
    )
    [line] = _start_fails("--data-dir", str(tmp_path / "file" / "d")).splitlines()
    assert f"{tmp_path / 'file'} is a file, not a folder" in line, line


def test_the_embedded_postgres_stops_with_the_last_local_when_another_was_killed_meanwhile(tmp_path):
    """Two `scheduler local` share an embedded Postgres; one is killed with SIGKILL while the
    other runs: once the other stops with Ctrl-C, so does Postgres (the killed one was still on
    pgserver's list of its users, and kept it running for good)."""
    data_dir = tmp_path / "d"
    first = Local("--data-dir", str(data_dir), env={})
    second = Local("--data-dir", str(data_dir), env={})
    postmaster = int((data_dir / "pgdata" / "postmaster.pid").read_text().split()[0])
    try:
        first.process.kill()
        first.process.wait(timeout=10)
        assert second.stop() == 0
        _assert_stops(postmaster)
    finally:
        if _running(postmaster):
            os.kill(postmaster, signal.SIGTERM)

"""`scheduler local` as it starts: a SIGTERM during the start (the embedded Postgres starting, the
migrations under way) stops what was started; a key file it cannot use, a default broker URL or
an allow-list entry that is wrong, each one line before the database is touched; an API without
auth is not opened beyond loopback unless asked; the client option --region before the command
reaches local mode."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import psycopg

from tests.e2e.test_cli_local import _running
from tests.support import ROOT

UNREACHABLE = "postgresql://postgres@127.0.0.1:1/nowhere"  # would be a database error, if reached


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "SCHEDULER_DATABASE_URL")}
    return {**env, "PYTHONPATH": os.path.join(ROOT, "functions"), **extra}


def _local(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "scheduler.cli", *argv],
        capture_output=True,
        text=True,
        env=env or _env(),
        timeout=120,
    )


def test_a_sigterm_while_it_starts_stops_the_embedded_postgres_it_started(tmp_path):
    data_dir = tmp_path / "d"
    process = subprocess.Popen(
        [sys.executable, "-m", "scheduler.cli", "local", "--port", "0", "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(),
    )
    lines: list[str] = []
    migrating = threading.Event()

    def read() -> None:
        for line in process.stdout:
            lines.append(line)
            if "applying migration 0003" in line:
                migrating.set()

    threading.Thread(target=read, daemon=True).start()
    postmaster = None
    try:
        assert migrating.wait(90), "".join(lines)
        postmaster = int((data_dir / "pgdata" / "postmaster.pid").read_text().split()[0])
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 130, "".join(lines)  # interrupted, as by Ctrl-C
        deadline = time.monotonic() + 30
        while _running(postmaster) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _running(postmaster), "the embedded Postgres outlived the interrupted start"
        assert "interrupted" in "".join(lines) and "Traceback" not in "".join(lines), "".join(lines)
    finally:
        if process.poll() is None:
            process.kill()
        if postmaster is not None and _running(postmaster):
            os.kill(postmaster, signal.SIGTERM)


def test_a_key_file_it_cannot_use_is_one_line_before_the_database(tmp_path):
    short = tmp_path / "short.key"
    short.write_bytes(b"garbage")
    cases = {
        str(short): "must hold exactly 32 bytes",
        str(tmp_path): "Is a directory",
        "/proc/none/k": "No such file or directory",
    }
    for key_file, reason in cases.items():
        done = _local(
            "local", "--port", "0", "--database-url", UNREACHABLE, env=_env(SCHEDULER_LOCAL_KEY_FILE=key_file)
        )
        assert done.returncode == 1, done.stderr
        [line] = done.stderr.splitlines()
        assert line.startswith(f"scheduler local: error: cannot use the key file {key_file}: "), line
        assert reason in line and "SCHEDULER_LOCAL_KEY_FILE" in line, line


def test_a_wrong_default_broker_or_allow_list_entry_is_one_line(tmp_path):
    broker = _env(SCHEDULER_DEFAULT_BROKER_URL="http://guest:s3cret@127.0.0.1:5672/")
    done = _local("local", "--port", "0", "--data-dir", str(tmp_path), "--database-url", UNREACHABLE, env=broker)
    assert done.returncode == 1 and "s3cret" not in done.stderr, done.stderr
    assert done.stderr.splitlines() == [
        "scheduler local: error: SCHEDULER_DEFAULT_BROKER_URL: url scheme must be amqp or amqps"
    ]
    allow = _env(SCHEDULER_TARGET_ALLOW_LIST="10.0.0.0/8, 10.0.0.0/33,api.internal")
    done = _local("local", "--port", "0", "--data-dir", str(tmp_path), "--database-url", UNREACHABLE, env=allow)
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [
        "scheduler local: error: SCHEDULER_TARGET_ALLOW_LIST: "
        "'10.0.0.0/33' is neither an address, a network (CIDR) nor a host name"
    ]


def test_an_api_without_auth_is_not_opened_beyond_loopback_unless_asked(tmp_path):
    for host in ("0.0.0.0", "::"):
        done = _local("local", "--host", host, "--port", "0", "--database-url", UNREACHABLE)
        assert done.returncode == 2, done.stderr
        assert f"--host {host} is not a loopback address and --auth is none" in done.stderr, done.stderr
        assert "--allow-unauthenticated" in done.stderr
    # Loopback by name or address: no refusal (the unreachable database is what stops it).
    for host in ("localhost", "::1"):
        done = _local(
            "local", "--host", host, "--port", "0", "--data-dir", str(tmp_path), "--database-url", UNREACHABLE
        )
        assert done.returncode == 1 and "loopback" not in done.stderr, done.stderr


def test_the_client_region_before_the_command_reaches_local_mode(db_url, tmp_path):
    credentials = tmp_path / "creds.json"
    credentials.write_text('{"AKIDLOCAL": {"secret_access_key": "s", "principal": "arn:aws:iam::1:user/a"}}')
    process = subprocess.Popen(
        [sys.executable, "-m", "scheduler.cli", "--region", "eu-west-1", "local", "--port", "0",
         "--database-url", db_url, "--data-dir", str(tmp_path / "d"), "--credentials", str(credentials)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(),
    )  # fmt: skip
    try:
        line = ""
        deadline = time.monotonic() + 60
        while "scheduler local: API" not in line and time.monotonic() < deadline:
            line = process.stdout.readline()
        assert "signed for eu-west-1 by the access key of" in line, line
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
    with psycopg.connect(db_url) as conn:
        assert conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0] > 0

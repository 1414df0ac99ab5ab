"""`scheduler local` started as a user would, configured by the environment variables the docs
name and by its flags: each one is seen to take effect over HTTP or on disk."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone

import requests

from tests.support import ROOT, RecordingServer


class Local:
    """A `scheduler local` subprocess; ``url`` read from its banner."""

    def __init__(self, *argv: str, env: dict[str, str]):
        full_env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "functions"), **env}
        for name in ("DATABASE_URL", "SCHEDULER_PRECISION", "SCHEDULER_LOCAL_KEY_FILE"):
            if name not in env:
                full_env.pop(name, None)
        self.process = subprocess.Popen([sys.executable, "-m", "scheduler.cli", "local", "--port", "0", *argv],
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=full_env)
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
    local = Local("--data-dir", str(tmp_path / "data"), env={
        "SCHEDULER_DATABASE_URL": db_url, "SCHEDULER_PRECISION": "minute", "SCHEDULER_LOCAL_KEY_FILE": str(key_file)})
    try:
        banner = next(line for line in local.lines if "scheduler local: API" in line)
        assert "the given database" in banner  # SCHEDULER_DATABASE_URL: no embedded Postgres
        assert "precision minute" in banner  # SCHEDULER_PRECISION
        answer = requests.post(local.url + "/jobs", json={
            "name": "with-secret", "schedule": "@daily",
            "target": {"type": "http", "url": "https://example.com/h", "auth": {"type": "bearer", "token": "t0k"}}},
            timeout=10)
        assert answer.status_code == 201, answer.text
        deadline = time.monotonic() + 10
        while not key_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert key_file.exists()  # SCHEDULER_LOCAL_KEY_FILE: the secret key is kept there
        assert not (tmp_path / "data" / "secret.key").exists()
        # waitress refuses a body over the API's 1 MiB before buffering it
        big = requests.post(local.url + "/jobs", data=b"{" + b" " * (1024 * 1024) + b"}",
                            headers={"Content-Type": "application/json"}, timeout=10)
        assert big.status_code == 413
    finally:
        assert local.stop() == 0


def test_guard_targets_refuses_loopback_targets(db_url, tmp_path):
    target = RecordingServer()
    local = Local("--database-url", db_url, "--data-dir", str(tmp_path / "d"), "--guard-targets", env={})
    try:
        assert any("SSRF guard on" in line for line in local.lines)
        run_at = (datetime.now(timezone.utc) + timedelta(seconds=1)).isoformat()
        answer = requests.post(local.url + "/jobs", json={
            "name": "loop", "run_at": run_at, "retry": {"max_attempts": 1},
            "target": {"type": "http", "url": target.url + "/x"}}, timeout=10)
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

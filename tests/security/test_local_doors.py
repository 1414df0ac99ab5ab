"""Issue 31, items 2, 3 and 4: the doors of `scheduler local` itself.

2. ``--credentials`` never serves an unauthenticated API: alone it turns ``--auth sigv4`` on,
   with ``--auth none`` it is a usage error; the start-up lines say the auth mode and the
   console's URL.
3. ``GET /v1/health`` answers unsigned under ``--auth sigv4`` (probes do not sign), and
   nothing else does.
4. A malformed database URL is one line naming what is wrong with it, and exit code 2, never
   a traceback.

Each through the real thing: `scheduler local` / `scheduler migrate` processes, or the security
suite's `scheduler local --auth sigv4` on loopback. Each failed before the fix.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.security.conftest import KEYS, REGION
from tests.support import ROOT, LocalScheduler, poll

EXIT_USAGE = 2


def scheduler(*argv: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """One `scheduler ...` process run to its end (killed, and the test failed, past ``timeout``)."""
    full_env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "functions"), **(env or {})}
    for name in ("DATABASE_URL", "SCHEDULER_DATABASE_URL"):
        if name not in (env or {}):
            full_env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "scheduler.cli", *argv],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        check=False,
    )


def one_error_line(result: subprocess.CompletedProcess, command: str) -> str:
    """The single line ``scheduler COMMAND: error: ...`` the process printed (asserts exit 2)."""
    assert result.returncode == EXIT_USAGE, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"scheduler {command}: error: "), result.stderr
    return lines[0]


# -- 2. --credentials and the auth mode ---------------------------------------------------------


@pytest.fixture
def credentials_file(tmp_path) -> str:
    path = tmp_path / "credentials.json"
    path.write_text(
        json.dumps(
            {
                key: {"secret_access_key": secret, "principal": f"arn:aws:iam::000000000000:user/{name}"}
                for name, (key, secret) in KEYS.items()
            }
        )
    )
    return str(path)


def signed_get(url: str, key: str, secret: str) -> requests.Response:
    """GET ``url`` signed with the key, as ``scheduler --sigv4`` signs."""
    request = AWSRequest(method="GET", url=url, data=b"")
    SigV4Auth(Credentials(key, secret), "execute-api", REGION).add_auth(request)
    return requests.get(url, headers=dict(request.headers.items()), timeout=10)


def banner(local: LocalScheduler) -> str:
    """The start-up lines, once the console's (the last) is in."""
    poll(lambda: any(line.startswith("scheduler local: console ") for line in local.lines), 10, what="start-up lines")
    return "".join(line for line in local.lines if line.startswith("scheduler local: "))


def test_2_credentials_alone_turn_sigv4_on_and_the_start_up_line_says_so(db_url, tmp_path, credentials_file):
    local = LocalScheduler(db_url, str(tmp_path / "data"), "--credentials", credentials_file)
    try:
        assert requests.get(local.url + "/v1/jobs", timeout=10).status_code == 403  # not an open API
        assert signed_get(local.url + "/v1/jobs", *KEYS["alice"]).status_code == 200
        text = banner(local)
        assert "auth sigv4" in text and "2 access keys" in text and REGION in text, text
        assert f"console {local.url}/console/" in text, text
        assert "scheduler console --endpoint" in text, text  # how a browser reaches a signed API
        assert KEYS["alice"][1] not in "".join(local.lines)  # no secret in the output
    finally:
        assert local.stop() == 0, "".join(local.lines)


def test_2_the_start_up_line_of_an_open_server_says_auth_none(db_url, tmp_path):
    local = LocalScheduler(db_url, str(tmp_path / "data"))
    try:
        text = banner(local)
        assert "auth none" in text and f"console {local.url}/console/" in text, text
        assert requests.get(local.url + "/v1/health", timeout=10).json() == {"status": "ok"}  # 3. in this mode too
    finally:
        assert local.stop() == 0, "".join(local.lines)


def test_2_auth_none_with_credentials_is_a_usage_error(db_url, tmp_path, credentials_file):
    result = scheduler(
        "local",
        "--port",
        "0",
        "--data-dir",
        str(tmp_path / "data"),
        "--database-url",
        db_url,
        "--auth",
        "none",
        "--credentials",
        credentials_file,
    )
    line = one_error_line(result, "local")
    assert "--credentials" in line and "--auth none" in line, line
    assert "scheduler local: API" not in result.stdout  # nothing was served


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--auth", "sigv4"], "--auth sigv4 needs --credentials FILE"),
        (["--credentials", "/nonexistent/credentials.json"], "cannot read /nonexistent/credentials.json"),
    ],
)
def test_2_a_missing_credentials_file_is_a_usage_error(db_url, tmp_path, argv, words):
    result = scheduler("local", "--port", "0", "--data-dir", str(tmp_path / "d"), "--database-url", db_url, *argv)
    assert words in one_error_line(result, "local")


# -- 3. health, unsigned ------------------------------------------------------------------------


def test_3_health_answers_unsigned_under_sigv4(local_server):
    api = local_server.api
    answer = api.raw("GET", "/v1/health", [("Host", f"127.0.0.1:{api.port}")])
    assert answer.status == 200 and answer.json == {"status": "ok"}, answer.text
    probe = requests.get(api.base + "/v1/health", timeout=10)  # as a load balancer's probe sends it
    assert probe.status_code == 200 and probe.json() == {"status": "ok"}


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/jobs"),
        ("GET", "/v1/executions"),
        ("POST", "/v1/health"),
        ("HEAD", "/v1/health"),
        ("GET", "/v1/health/"),
        ("GET", "/v1//health"),
        ("GET", "/v1/health/../jobs"),
        ("GET", "/v1/health%2f..%2fjobs"),
        ("GET", "/v1/Health"),
        ("POST", "/v1/schedules/preview"),
    ],
)
def test_3_nothing_else_answers_unsigned(local_server, method, path):
    api = local_server.api
    body = b"{}" if method == "POST" else None
    answer = api.raw(method, path, [("Host", f"127.0.0.1:{api.port}"), ("Content-Type", "application/json")], body)
    assert answer.status == 403, (method, path, answer.status, answer.text)


# -- 4. malformed database URLs -----------------------------------------------------------------

MALFORMED = {
    "no-scheme": ("localhost:5432", "neither a postgresql:// URL nor key=value"),
    "mysql": ("mysql://app:pw-1234@db.example/app", "'mysql'"),
    "open-bracket": ("postgresql://app:pw-1234@[::1/app", "cannot be read"),
    "bad-port": ("postgresql://app:pw-1234@db.example:54x2/app", "port"),
}


@pytest.mark.parametrize("command", ["local", "migrate"])
@pytest.mark.parametrize(("url", "words"), MALFORMED.values(), ids=MALFORMED.keys())
def test_4_a_malformed_database_url_is_one_line_and_a_usage_error(tmp_path, command, url, words):
    extra = ["--port", "0", "--data-dir", str(tmp_path / "data")] if command == "local" else []
    result = scheduler(command, *extra, "--database-url", url)
    line = one_error_line(result, command)
    assert line.startswith(f"scheduler {command}: error: --database-url ") and words in line, line
    assert "pw-1234" not in result.stderr + result.stdout  # the password is never repeated
    assert not (tmp_path / "data" / "pgdata").exists()  # no embedded Postgres started instead


def test_4_the_environment_variable_at_fault_is_named(tmp_path):
    result = scheduler("migrate", env={"DATABASE_URL": "localhost:5432"})
    assert one_error_line(result, "migrate").startswith("scheduler migrate: error: $DATABASE_URL ")
    result = scheduler(
        "local", "--port", "0", "--data-dir", str(tmp_path / "d"), env={"SCHEDULER_DATABASE_URL": "mysql://h/db"}
    )
    assert one_error_line(result, "local").startswith("scheduler local: error: $SCHEDULER_DATABASE_URL ")


def test_4_an_empty_database_url_does_not_fall_back_to_the_environment(tmp_path):
    # `--database-url "$UNSET"` must not migrate whatever $DATABASE_URL names.
    result = scheduler("migrate", "--database-url", "", env={"DATABASE_URL": "postgresql://u@127.0.0.1:1/x"})
    assert "--database-url is empty" in one_error_line(result, "migrate")

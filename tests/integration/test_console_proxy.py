"""`scheduler console` in front of an API that demands SigV4: a `scheduler local --auth sigv4`
process stands in for the deployed stack; the console's calls go through the proxy, signed with
the credentials of the usual chain (here, fixed test credentials in the environment)."""

from __future__ import annotations

import json
import threading

import pytest
import requests

from scheduler.console.proxy import run_console
from tests.support import LocalScheduler

ALICE = "arn:aws:iam::000000000000:user/alice"


@pytest.fixture
def signed_api(db_url, tmp_path):
    creds = tmp_path / "credentials.json"
    creds.write_text(json.dumps({"AKIDALICE": {"secret_access_key": "alice-secret", "principal": ALICE}}))
    api = LocalScheduler(
        db_url, str(tmp_path / "data"), "--auth", "sigv4", "--credentials", str(creds), "--region", "eu-west-1"
    )  # the region the console signs for
    yield api
    assert api.stop() == 0, "".join(api.lines)


def _aws_env(monkeypatch, tmp_path, key: str | None, secret: str | None) -> None:
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for name in (
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_SESSION_TOKEN",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in (("AWS_ACCESS_KEY_ID", key), ("AWS_SECRET_ACCESS_KEY", secret)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)


@pytest.fixture
def console(signed_api, monkeypatch, tmp_path):
    started: list[tuple[threading.Event, threading.Thread, list[int]]] = []

    def start(key: str = "AKIDALICE", secret: str = "alice-secret") -> str:
        _aws_env(monkeypatch, tmp_path, key, secret)
        urls: list[str] = []
        ready, stop, code = threading.Event(), threading.Event(), []
        thread = threading.Thread(
            target=lambda: code.append(
                run_console(
                    endpoint=signed_api.url,
                    port=0,
                    region="eu-west-1",
                    ready=lambda u: (urls.append(u), ready.set()),
                    stop=stop,
                )
            ),
            daemon=True,
        )
        thread.start()
        assert ready.wait(10), "the console did not start"
        started.append((stop, thread, code))
        return urls[0].removesuffix("/console/")

    yield start
    for stop, thread, code in started:
        stop.set()
        thread.join(10)
        assert code == [0]


def test_console_calls_pass_through_signed(console, signed_api):
    base = console()
    page = requests.get(base + "/", timeout=10)
    assert page.status_code == 200 and page.url == base + "/console/" and 'src="app.js"' in page.text
    # The deployed API refuses what is not signed...
    assert requests.get(signed_api.url + "/v1/jobs", timeout=10).status_code == 403
    # ...and the console's calls reach it signed, as the principal of the credentials.
    body = {
        "name": "via-console",
        "tags": ["a b"],
        "schedule": "0 3 * * *",
        "target": {"type": "http", "url": "https://example.com/hook", "auth": {"type": "bearer", "token": "t0k"}},
    }
    created = requests.post(base + "/v1/jobs", json=body, timeout=10)
    assert created.status_code == 201, created.text
    job = created.json()
    assert job["owner"] == ALICE and job["target"]["auth"]["token"] == "***"
    # A tenant's answer is kept by no cache and read as nothing but JSON.
    assert created.headers["Cache-Control"] == "no-store" and created.headers["X-Content-Type-Options"] == "nosniff"
    listed = requests.get(base + "/v1/jobs", params={"tag": "a b", "name_prefix": "via-c", "limit": 5}, timeout=10)
    assert listed.status_code == 200 and [j["id"] for j in listed.json()["jobs"]] == [job["id"]]
    # headers the API cares about go through (a stale If-Match: 412), and errors come back as they are
    stale = requests.patch(
        f"{base}/v1/jobs/{job['id']}", json={"description": "x"}, timeout=10, headers={"If-Match": '"99"'}
    )
    assert stale.status_code == 412
    # If-None-Match too: the console's "New rule set" creates only (412 over one of that name).
    rules = {
        "tag": "a b",
        "alerts": [{"on": "failure", "target": {"type": "http", "url": "https://hooks.example.com/x"}}],
    }
    for status in (201, 412):
        made = requests.put(base + "/v1/alert-rules/via-c", json=rules, timeout=10, headers={"If-None-Match": "*"})
        assert made.status_code == status, made.text
    bad = requests.post(base + "/v1/jobs", json={**body, "name": "other", "schedule": "61 * * * *"}, timeout=10)
    assert bad.status_code == 400 and bad.json()["error"]["details"][0]["field"] == "schedule"
    paused = requests.post(f"{base}/v1/jobs/{job['id']}/pause", timeout=10)
    assert paused.status_code == 200 and paused.json()["state"] == "paused"
    assert requests.delete(f"{base}/v1/jobs/{job['id']}", timeout=10).status_code == 204
    assert requests.get(f"{base}/v1/jobs/{job['id']}", timeout=10).status_code == 404


def test_the_proxy_is_guarded_like_a_local_server(console, signed_api):
    base = console()
    port = base.rsplit(":", 1)[1]
    forged = requests.post(
        base + "/v1/jobs", data="name=x", timeout=10, headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    assert forged.status_code == 415
    cross = requests.post(base + "/v1/jobs", json={"name": "x"}, headers={"Origin": "https://evil.example"}, timeout=10)
    assert cross.status_code == 403 and cross.json()["error"]["details"][0]["field"] == "Origin"
    rebound = requests.get(base + "/v1/jobs", headers={"Host": f"evil.example:{port}"}, timeout=10)
    assert rebound.status_code == 403
    assert requests.get(base + "/elsewhere", timeout=10).status_code == 404
    assert requests.get(base + "/v1/jobs", timeout=10).json()["jobs"] == []  # nothing was forwarded


def test_wrong_credentials_are_refused_by_the_api(console):
    base = console(secret="not-the-secret")
    answer = requests.get(base + "/v1/jobs", timeout=10)
    assert answer.status_code == 403 and answer.json()["error"]["code"] == "forbidden"


def test_without_credentials_the_console_does_not_start(monkeypatch, tmp_path, capsys):
    _aws_env(monkeypatch, tmp_path, None, None)
    assert run_console(endpoint="http://127.0.0.1:9", port=0, region="eu-west-1") == 1
    assert "no AWS credentials found" in capsys.readouterr().out
    _aws_env(monkeypatch, tmp_path, "AKID", "secret")
    assert run_console(endpoint="ftp://example.com", port=0, region=None) == 1
    assert "--endpoint" in capsys.readouterr().out


def test_an_unreachable_api_is_a_502_and_a_large_body_a_413(monkeypatch, tmp_path):
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    _aws_env(monkeypatch, tmp_path, "AKID", "secret")
    urls: list[str] = []
    ready, stop = threading.Event(), threading.Event()
    thread = threading.Thread(
        target=run_console,
        kwargs={
            "endpoint": f"http://127.0.0.1:{closed}/prod",
            "port": 0,
            "region": "eu-west-1",
            "stop": stop,
            "ready": lambda u: (urls.append(u), ready.set()),
        },
        daemon=True,
    )
    thread.start()
    assert ready.wait(10)
    base = urls[0].removesuffix("/console/")
    try:
        answer = requests.get(base + "/v1/jobs", timeout=10)
        assert answer.status_code == 502 and answer.json()["error"]["code"] == "bad_gateway"
        assert "secret" not in answer.text
        big = requests.post(
            base + "/v1/jobs", data=b"x" * (1024 * 1024 + 1), timeout=10, headers={"Content-Type": "application/json"}
        )
        assert big.status_code == 413
        # the proxy's own answers are never cached nor sniffed, as the API's are
        for own in (answer, big, requests.get(base + "/v1/no-such-route", timeout=10)):
            assert own.headers["Cache-Control"] == "no-store", own.status_code
            assert own.headers["X-Content-Type-Options"] == "nosniff", own.status_code
    finally:
        stop.set()
        thread.join(10)


def test_dot_segments_and_clear_text_endpoints_are_refused(console):
    """The HTTP client would resolve ``..`` and sign the request for another stage of the API; and
    signed requests carry the session token, so an http endpoint is only allowed on loopback."""
    import http.client

    from scheduler.console.proxy import make_server

    host, port = console().removeprefix("http://").rsplit(":", 1)
    for path in ("/v1/../../dev/v1/jobs", "/v1/%2e%2e/dev/v1/jobs", "/v1/./jobs"):
        connection = http.client.HTTPConnection(host, int(port), timeout=10)
        connection.request("GET", path)
        answer = connection.getresponse()
        assert answer.status == 400, path
        assert json.loads(answer.read())["error"]["code"] == "invalid_request"
        connection.close()
    with pytest.raises(ValueError, match="https"):
        make_server(endpoint="http://abc123.execute-api.eu-west-1.amazonaws.com/prod", port=0, region="eu-west-1")


def test_a_busy_port_is_said_in_words(monkeypatch, tmp_path, capsys):
    """Not the bind's raw ``[Errno 98] Address already in use``."""
    import socket

    _aws_env(monkeypatch, tmp_path, "AKID", "secret")
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        assert run_console(endpoint="http://127.0.0.1:9", port=port, region="eu-west-1") == 1
    assert capsys.readouterr().out == (
        f"scheduler console: port {port} on 127.0.0.1 is in use (another scheduler console?); give --port\n"
    )

"""The client's retries (``SchedulerClient(retries=...)``, ``api_wire.retry_delay``), against a
real HTTP server answering from a script: a throttle (429) is sent again whatever the method;
the database away (503) for requests that do no more when sent twice (GET, PUT, PATCH, DELETE),
never a POST; a gateway's 502/504 for reads only; after ``Retry-After`` (seconds), else a backoff
from 0.5 s, at most 30 s; at most ``retries`` times, then the error as answered. Each retry is
signed anew (its own ``X-Amz-Date``)."""

from __future__ import annotations

import json

import pytest
from botocore.credentials import Credentials

from scheduler.client import SchedulerClient
from scheduler.transport import api_wire
from scheduler.transport.api_wire import ServerError, retry_delay
from tests.support import RecordingServer

JOB = {"id": "8d2f5c1e-8a3b-4d51-9f0e-3c1f0b7a2e61", "name": "j", "version": 1}
THROTTLED = (429, {"Retry-After": "0"}, b'{"error": {"code": "throttled", "message": "slow down"}}')
AWAY = (503, {"Retry-After": "0"}, b'{"error": {"code": "database_unavailable", "message": "later"}}')


@pytest.fixture
def server():
    server = RecordingServer()
    yield server
    server.close()


def test_throttled_and_unavailable_answers_are_sent_again_where_that_is_safe(server, monkeypatch):
    waits: list[float] = []
    monkeypatch.setattr("scheduler.client.time.sleep", waits.append)
    client = SchedulerClient(server.url)
    path = f"/v1/jobs/{JOB['id']}"
    server.responses[path] = [THROTTLED, AWAY, (200, {}, json.dumps(JOB).encode())]
    assert client.get_job(JOB["id"])["version"] == 1
    assert [r["method"] for r in server.requests] == ["GET"] * 3 and waits == [0.0, 0.0]

    server.requests.clear()
    server.responses["/v1/jobs"] = [AWAY]  # a creation is not sent again after a 503...
    with pytest.raises(ServerError) as refused:
        client.create_job({"name": "j"})
    assert refused.value.code == "database_unavailable" and len(server.requests) == 1
    server.requests.clear()
    server.responses["/v1/jobs"] = [THROTTLED, (201, {}, json.dumps(JOB).encode())]  # ...but after a 429
    assert client.create_job({"name": "j"})["id"] == JOB["id"] and len(server.requests) == 2

    server.requests.clear()
    server.responses[path] = [AWAY]  # at most `retries` times, then the answer's error
    with pytest.raises(ServerError):
        SchedulerClient(server.url, retries=2).patch_job(JOB["id"], {"description": "x"})
    assert [r["method"] for r in server.requests] == ["PATCH"] * 3
    server.requests.clear()
    with pytest.raises(ServerError):
        SchedulerClient(server.url, retries=0).get_job(JOB["id"])
    assert len(server.requests) == 1


def test_each_retry_is_signed_anew(server, monkeypatch):
    monkeypatch.setattr("scheduler.client.time.sleep", lambda seconds: None)
    client = SchedulerClient(server.url, sigv4=True, region="eu-west-1", credentials=Credentials("AKIDEXAMPLE", "s"))
    signed: list[str] = []
    sign = client._sign
    monkeypatch.setattr(client, "_sign", lambda *args: signed.append(args[0]) or sign(*args))
    server.responses[f"/v1/jobs/{JOB['id']}"] = [THROTTLED, (200, {}, json.dumps(JOB).encode())]
    client.get_job(JOB["id"])
    assert signed == ["GET", "GET"]
    assert all(
        r["headers"]["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") for r in server.requests
    )


@pytest.mark.parametrize(
    "method,status,retry_after,attempt,expected",
    [
        ("GET", 429, "2", 0, 2.0),
        ("POST", 429, None, 0, 0.5),
        ("POST", 503, "1", 0, None),
        ("PUT", 503, None, 2, 2.0),
        ("DELETE", 503, "Wed, 21 Oct 2015 07:28:00 GMT", 1, 1.0),  # a date: the backoff
        ("GET", 504, "-3", 0, 0.5),
        ("PATCH", 504, None, 0, None),
        ("GET", 500, None, 0, None),
        ("GET", 429, "3600", 0, api_wire.RETRY_WAIT_CAP_SECONDS),
        ("GET", 429, "nan", 0, 0.5),
    ],
)
def test_retry_delay(method, status, retry_after, attempt, expected):
    assert retry_delay(method, status, retry_after, attempt) == expected


def test_each_retry_is_told_before_its_wait(server, monkeypatch):
    """``on_retry`` hears of each retry before its wait: the answer's error, the wait, the retry's
    number and how many there may be; never of the last answer, which is raised."""
    monkeypatch.setattr("scheduler.client.time.sleep", lambda seconds: None)
    heard: list[tuple[int, str, float, int, int]] = []
    client = SchedulerClient(
        server.url,
        retries=2,
        on_retry=lambda error, wait, retry, of: heard.append((error.status, error.code, wait, retry, of)),
    )
    server.responses[f"/v1/jobs/{JOB['id']}"] = [AWAY]
    with pytest.raises(ServerError):
        client.get_job(JOB["id"])
    assert heard == [(503, "database_unavailable", 0.0, 1, 2), (503, "database_unavailable", 0.0, 2, 2)]


def test_the_cli_says_why_it_waits(server, monkeypatch, capsys):
    """A command waiting through the API's retries says so on stderr, a line a retry, before it
    says the last answer's error."""
    from scheduler import cli

    monkeypatch.setattr("scheduler.client.time.sleep", lambda seconds: None)
    server.responses["/v1/jobs"] = [AWAY]
    assert cli.main(["--endpoint", server.url, "jobs", "list"]) != 0
    err = capsys.readouterr().err.splitlines()
    assert err[:3] == [
        f"waiting: 503 database_unavailable: later; sending again in 0 s (retry {n} of 3)" for n in (1, 2, 3)
    ]
    assert "database_unavailable" in err[3] and len(server.requests) == 4

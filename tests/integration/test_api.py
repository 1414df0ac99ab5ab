"""The management API through its handler, with canned API Gateway events, on real Postgres.

Every route of the contract, every bad-input case (400/404/409/412/413, never a 5xx), owner
scoping (another principal gets 404 on every job route and changes nothing), and secrets that
can never be read back: neither in any answer nor in any log line.
"""

from __future__ import annotations

import base64
import copy
import importlib
import io
import json
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from scheduler.api.app import make_app
from scheduler.api.cursors import CursorCodec, cursor_key, scope_of
from scheduler.schema.models import parse_time
from scheduler.secrets import LocalSecretBox, decrypt_target_secrets, is_token
from scheduler.settings import Settings, get_settings
from scheduler.transport.http_adapter import LocalLambdaContext, make_event, make_wsgi_app

ALICE = "arn:aws:iam::111111111111:user/alice"
BOB = "arn:aws:iam::222222222222:user/bob"
EVENT = json.loads((Path(__file__).parents[1] / "events" / "apiGatewayProxyEvent.json").read_text())

BASIC_PW = "basic-pw-Zq1x8"
BEARER = "bearer-tok-Xy2k7"
HEADER_KEY = "header-val-Wv3j6"
AMQP_PW = "amqp-pw-Uu4h5"
SECRETS = (BASIC_PW, BEARER, HEADER_KEY, AMQP_PW, "canned-secret")


def job_body(name: str = "nightly-report", **extra: Any) -> dict[str, Any]:
    body = {
        "name": name,
        "description": "optional text",
        "tags": ["billing"],
        "schedule": "0 3 * * *",
        "timezone": "Europe/Berlin",
        "target": {
            "type": "http",
            "url": "https://example.com/hook",
            "method": "POST",
            "headers": {"Content-Type": "application/json"},
            "body": '{"at": "{{scheduled_at}}"}',
            "auth": {"type": "basic", "username": "u", "password": BASIC_PW},
            "timeout_seconds": 30,
            "success_codes": [200, 201, 202, 204],
        },
        "retry": {"max_attempts": 4, "min_backoff_seconds": 1, "max_backoff_seconds": 300, "max_age_seconds": 3600},
        "missed_runs": "run_once",
    }
    body.update(extra)
    return body


def amqp_body(name: str = "amqp-job") -> dict[str, Any]:
    return job_body(
        name,
        target={
            "type": "amqp",
            "url": f"amqps://user:{AMQP_PW}@broker.example.com:5671/vhost",
            "exchange": "events",
            "routing_key": "k",
            "body": "hi",
        },
    )


@dataclass
class Answer:
    status: int
    body: Any
    headers: dict[str, str]
    raw: dict[str, Any]

    @property
    def error(self) -> dict[str, Any]:
        assert set(self.body) == {"error"}, self.body
        assert set(self.body["error"]) == {"code", "message", "details"}, self.body
        return self.body["error"]

    @property
    def fields(self) -> list[str]:
        return [d["field"] for d in self.error["details"]]


def make_api_event(
    method: str,
    path: str,
    body: Any = None,
    *,
    principal: str | None = ALICE,
    query: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    raw_body: str | None = None,
    base64_body: bytes | None = None,
) -> dict[str, Any]:
    """The canned event, made into this request."""
    event = copy.deepcopy(EVENT)
    event["httpMethod"] = method
    event["path"] = path
    event["pathParameters"] = {"proxy": path.lstrip("/")}
    event["requestContext"]["httpMethod"] = method
    event["requestContext"]["path"] = "/prod" + path
    identity = event["requestContext"]["identity"]
    if principal is None:
        for key in ("userArn", "caller", "user", "accountId", "accessKey"):
            identity[key] = None
    elif principal.startswith("arn:"):
        identity.update(
            userArn=principal,
            caller=principal.rsplit("/", 1)[-1],
            user=principal.rsplit("/", 1)[-1],
            accountId=principal.split(":")[4],
        )
    elif principal.isdigit():  # only the account
        identity.update(userArn=None, caller=None, user=None, accountId=principal)
    else:  # only the caller id
        identity.update(userArn=None, caller=principal, user=principal, accountId=None)
    all_headers = {k: v for k, v in event["headers"].items()}
    all_headers.update(headers or {})
    event["headers"] = all_headers
    event["multiValueHeaders"] = {k: [v] for k, v in all_headers.items()}
    if query:
        multi = {k: (v if isinstance(v, list) else [str(v)]) for k, v in query.items()}
        event["queryStringParameters"] = {k: v[-1] for k, v in multi.items()}
        event["multiValueQueryStringParameters"] = multi
    if base64_body is not None:
        event["body"], event["isBase64Encoded"] = base64.b64encode(base64_body).decode(), True
    elif raw_body is not None:
        event["body"] = raw_body
    else:
        event["body"] = None if body is None else json.dumps(body)
    return event


class Client:
    """Calls a handler with canned events; keeps every raw answer for the secret scan."""

    def __init__(self, handler):
        self.handler = handler
        self.answers: list[dict[str, Any]] = []

    def __call__(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Answer:
        raw = self.handler(make_api_event(method, path, body, **kwargs), LocalLambdaContext())
        self.answers.append(raw)
        headers = {k: v[-1] for k, v in (raw.get("multiValueHeaders") or {}).items()}
        headers.update(raw.get("headers") or {})
        text = raw.get("body")
        parsed = json.loads(text) if text else None
        return Answer(raw["statusCode"], parsed, headers, raw)

    def all_text(self) -> str:
        return json.dumps(self.answers, default=str)


@pytest.fixture
def box(tmp_path):
    return LocalSecretBox(tmp_path / "secret.key")


@pytest.fixture
def api(store, box):
    return Client(make_app(lambda: store, lambda: box, Settings()).resolve)


def create(api: Client, body: dict[str, Any] | None = None, principal: str = ALICE) -> dict[str, Any]:
    answer = api("POST", "/v1/jobs", body or job_body(), principal=principal)
    assert answer.status == 201, answer.body
    return answer.body


def add_executions(pool, job_id: str, statuses: list[str]) -> None:
    with pool.connection() as conn:
        for i, status in enumerate(statuses):
            conn.execute(
                """INSERT INTO executions (id, job_id, scheduled_at, started_at, finished_at, attempt, trigger,
                                           status, http_status, response_excerpt, error, duration_ms)
                   VALUES (gen_random_uuid(), %s, now() - make_interval(mins => %s), now(), now(), 1, 'schedule',
                           %s, 200, 'ok', NULL, 42)""",
                (job_id, 100 - i, status),
            )


def stored_target(pool, job_id: str) -> dict[str, Any]:
    with pool.connection() as conn:
        return conn.execute("SELECT target FROM jobs WHERE id = %s", (job_id,)).fetchone()["target"]


# -- the routes ------------------------------------------------------------------------------------


def test_health_needs_no_identity(api):
    answer = api("GET", "/v1/health", principal=None)
    assert answer.status == 200 and answer.body == {"status": "ok"}


def test_create_and_get(api, pool, box):
    answer = api("POST", "/v1/jobs", job_body())
    assert answer.status == 201
    job = answer.body
    assert answer.headers["ETag"] == '"1"' and answer.headers["Location"] == f"/prod/v1/jobs/{job['id']}"
    assert set(job) == {
        "id",
        "name",
        "schedules",
        "spread",
        "description",
        "tags",
        "schedule",
        "run_at",
        "timezone",
        "start_at",
        "end_at",
        "target",
        "retry",
        "missed_runs",
        "owner",
        "state",
        "version",
        "next_run_at",
        "last_run_at",
        "created_at",
        "updated_at",
        "stats",
        "after_completion",
        "exclude_calendars",
        "on_excluded",
        "alerts",
        "limits",
        "on_success",
        "on_failure",
        "on_complete",
    }
    assert job["after_completion"] == "keep"
    assert job["exclude_calendars"] == [] and job["on_excluded"] == "skip"
    assert job["on_success"] == job["on_failure"] == job["on_complete"] == []
    assert job["owner"] == ALICE and job["state"] == "active" and job["version"] == 1
    assert job["stats"] == {"run_count": 0, "failure_count": 0, "last_status": None, "last_error": None}
    assert job["next_run_at"].endswith("Z") and job["next_run_at"][11:16] in ("01:00", "02:00")  # 03:00 Berlin
    assert job["last_run_at"] is None and job["created_at"].endswith("Z")
    assert job["target"]["auth"] == {"type": "basic", "username": "u", "password": "***"}
    assert job["retry"]["max_age_seconds"] == 3600 and job["tags"] == ["billing"]

    stored = stored_target(pool, job["id"])
    assert is_token(stored["auth"]["password"])
    assert decrypt_target_secrets(stored, box)["auth"]["password"] == BASIC_PW

    got = api("GET", f"/v1/jobs/{job['id']}")
    assert got.status == 200 and got.body == job and got.headers["ETag"] == '"1"'


def test_create_one_off_and_amqp(api):
    one_off = create(api, job_body("once", schedule=None, run_at="2099-12-01T10:00:00+01:00"))
    assert one_off["run_at"] == "2099-12-01T09:00:00Z" and one_off["next_run_at"] == "2099-12-01T09:00:00Z"
    amqp = create(api, amqp_body())
    assert amqp["target"]["url"] == "amqps://user:***@broker.example.com:5671/vhost"


def test_list_filters_and_cursors(api):
    for i in range(7):
        create(api, job_body(f"job-{i}", tags=["even" if i % 2 == 0 else "odd", "all"]))
    create(api, job_body("other-x", tags=[]))
    paused = create(api, job_body("paused-job"))
    assert api("POST", f"/v1/jobs/{paused['id']}/pause").status == 200
    create(api, job_body("bobs", tags=["all"]), principal=BOB)

    names, cursor = [], None
    while True:
        answer = api("GET", "/v1/jobs", query={"limit": 3, **({"cursor": cursor} if cursor else {})})
        assert answer.status == 200 and len(answer.body["jobs"]) <= 3
        names += [j["name"] for j in answer.body["jobs"]]
        cursor = answer.body["next_cursor"]
        if cursor is None:
            break
    assert names == sorted(["job-0", "job-1", "job-2", "job-3", "job-4", "job-5", "job-6", "other-x", "paused-job"])

    def listed(**query: Any) -> list[str]:
        answer = api("GET", "/v1/jobs", query=query)
        assert answer.status == 200, answer.body
        return [j["name"] for j in answer.body["jobs"]]

    assert listed(state="paused") == ["paused-job"]
    assert listed(tag="even") == ["job-0", "job-2", "job-4", "job-6"]
    assert listed(name_prefix="job-", tag="odd") == ["job-1", "job-3", "job-5"]
    assert listed(state="active", name_prefix="o") == ["other-x"]
    assert listed(state="completed") == []
    first = api("GET", "/v1/jobs", query={"tag": "all", "limit": 2})
    assert [j["name"] for j in first.body["jobs"]] == ["job-0", "job-1"]
    second = api("GET", "/v1/jobs", query={"tag": "all", "limit": 2, "cursor": first.body["next_cursor"]})
    assert [j["name"] for j in second.body["jobs"]] == ["job-2", "job-3"]
    full = api("GET", "/v1/jobs", query={"limit": 200})
    assert full.body["next_cursor"] is None and len(full.body["jobs"]) == 9

    # A cursor is tamper-safe and bound to its query and its caller.
    cursor = first.body["next_cursor"]
    # A character of the signature changed (not its last two: their spare bits, which base64
    # ignores, would leave it the same signature once in about a thousand cursors).
    edited = cursor[:-10] + ("B" if cursor[-10] == "A" else "A") + cursor[-9:]
    for query, principal in (
        ({"tag": "all", "cursor": edited}, ALICE),
        ({"tag": "odd", "cursor": cursor}, ALICE),
        ({"tag": "all", "cursor": cursor}, BOB),
        ({"cursor": "not-a-cursor"}, ALICE),
    ):
        answer = api("GET", "/v1/jobs", query=query, principal=principal)
        assert answer.status == 400 and answer.fields == ["cursor"], answer.body


def test_replace_with_if_match(api, pool, box):
    job = create(api)
    path = f"/v1/jobs/{job['id']}"
    replaced = api(
        "PUT",
        path,
        job_body(
            description="v2",
            schedule="30 4 * * *",
            target={**job_body()["target"], "auth": {"type": "basic", "username": "u", "password": "***"}},
        ),
        headers={"If-Match": "1"},
    )
    assert replaced.status == 200 and replaced.body["version"] == 2 and replaced.headers["ETag"] == '"2"'
    assert replaced.body["description"] == "v2" and replaced.body["next_run_at"] != job["next_run_at"]
    assert decrypt_target_secrets(stored_target(pool, job["id"]), box)["auth"]["password"] == BASIC_PW  # kept

    for if_match, version in (('"2"', 3), ('W/"3"', 4), ("*", 5)):
        answer = api("PUT", path, job_body(description=f"v{version}"), headers={"If-Match": if_match})
        assert answer.status == 200 and answer.body["version"] == version, answer.body

    stale = api("PUT", path, job_body(description="late"), headers={"If-Match": '"2"'})
    assert stale.status == 412 and stale.error["code"] == "version_mismatch" and stale.headers["ETag"] == '"5"'
    for bad in ("abc", '"1', "1, 2", "-1", "9999999999"):
        answer = api("PUT", path, job_body(), headers={"If-Match": bad})
        assert answer.status == 400 and answer.fields == ["If-Match"], (bad, answer.body)

    changed = api(
        "PUT",
        path,
        {
            "name": "nightly-report",
            "schedule": "@hourly",
            "target": {"type": "http", "url": "https://example.com/h2", "auth": {"type": "bearer", "token": BEARER}},
        },
    )
    assert changed.status == 200 and changed.body["target"]["auth"] == {"type": "bearer", "token": "***"}
    assert decrypt_target_secrets(stored_target(pool, job["id"]), box)["auth"] == {"type": "bearer", "token": BEARER}
    # Replace drops what the body leaves out (the full spec is replaced).
    assert changed.body["description"] is None and changed.body["tags"] == []


def test_an_edit_keeps_whole_backoff_seconds_integers(api):
    """A whole number of seconds is answered as given, before and after an edit of anything
    (an edit once answered ``300.0`` where the job had ``300``); a fraction stays one."""
    job = create(
        api, job_body("backoffs", retry={"max_attempts": 2, "min_backoff_seconds": 2, "max_backoff_seconds": 7.5})
    )
    path = f"/v1/jobs/{job['id']}"
    for answer in (job, api("PATCH", path, {"description": "x"}).body, api("GET", path).body):
        retry = answer["retry"]
        assert type(retry["min_backoff_seconds"]) is int and retry["min_backoff_seconds"] == 2, retry
        assert retry["max_backoff_seconds"] == 7.5, retry
    defaults = create(api, job_body("default-backoffs"))
    edited = api("PATCH", f"/v1/jobs/{defaults['id']}", {"retry": {"max_attempts": 5}}).body["retry"]
    assert type(edited["min_backoff_seconds"]) is int and type(edited["max_backoff_seconds"]) is int, edited


def test_merge_patch(api, pool, box):
    job = create(api)
    path = f"/v1/jobs/{job['id']}"
    answer = api(
        "PATCH",
        path,
        {"description": "patched", "tags": None, "retry": {"max_attempts": 9}},
        headers={"If-Match": '"1"'},
    )
    assert answer.status == 200, answer.body
    patched = answer.body
    assert patched["description"] == "patched" and patched["tags"] == [] and patched["version"] == 2
    assert patched["retry"] == {**job["retry"], "max_attempts": 9}
    assert patched["schedule"] == job["schedule"] and patched["next_run_at"] == job["next_run_at"]
    assert decrypt_target_secrets(stored_target(pool, job["id"]), box)["auth"]["password"] == BASIC_PW

    # The merge-patch media type, a new secret, and a schedule switch to a one-off.
    answer = api(
        "PATCH",
        path,
        {"schedule": None, "run_at": "2099-01-01T00:00:00Z", "target": {"auth": {"password": "rotated-pw-1"}}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert answer.status == 200, answer.body
    assert answer.body["run_at"] == "2099-01-01T00:00:00Z" and answer.body["next_run_at"] == "2099-01-01T00:00:00Z"
    assert answer.body["target"]["auth"]["password"] == "***"
    assert decrypt_target_secrets(stored_target(pool, job["id"]), box)["auth"]["password"] == "rotated-pw-1"

    stale = api("PATCH", path, {"description": "x"}, headers={"If-Match": "1"})
    assert stale.status == 412
    invalid = api("PATCH", path, {"schedule": "0 3 * * *"})  # both schedule and run_at
    assert invalid.status == 400 and invalid.fields == ["schedule"]
    invalid = api("PATCH", path, {"target": {"url": "ftp://nope"}})
    assert invalid.status == 400 and invalid.fields == ["target.url"]
    invalid = api("PATCH", path, {"unknown": 1})
    assert invalid.status == 400 and invalid.fields == ["unknown"]
    not_object = api("PATCH", path, raw_body="[1, 2]")
    assert not_object.status == 400 and not_object.fields == ["body"]
    deep = {"target": {"headers": {}}}
    node = deep["target"]["headers"]
    for _ in range(40):
        node["x"] = {}
        node = node["x"]
    assert api("PATCH", path, deep).status == 400
    assert api("GET", path).body["version"] == 3  # nothing of the failed patches was written


def test_pause_resume_run_delete(api, store, pool):
    job = create(api)
    path = f"/v1/jobs/{job['id']}"
    paused = api("POST", f"{path}/pause")
    assert paused.status == 200 and paused.body["state"] == "paused" and paused.headers["ETag"] == '"2"'
    run = api("POST", f"{path}/run")
    assert run.status == 202
    assert run.body["job_id"] == job["id"] and run.body["status"] == "queued"
    assert run.body["requested_at"].endswith("Z") and run.body["job"]["state"] == "paused"
    # A manual run is served even though the job is paused: the next claim takes it.
    claims = store.claim_due(10, 60)
    assert [(c.job_id, c.lease_kind) for c in claims] == [(job["id"], "manual")]
    resumed = api("POST", f"{path}/resume")
    assert resumed.status == 200 and resumed.body["state"] == "active"

    add_executions(pool, job["id"], ["succeeded", "failed"])
    deleted = api("DELETE", path)
    assert deleted.status == 204 and deleted.body is None
    assert api("GET", path).status == 404
    assert api("DELETE", path).status == 404
    with pool.connection() as conn:  # the executions went with the job
        assert conn.execute("SELECT count(*) AS n FROM executions").fetchone()["n"] == 0


def test_executions_newest_first_with_status_and_cursor(api, pool):
    job = create(api)
    statuses = ["succeeded", "failed", "succeeded", "timed_out", "succeeded", "lost", "succeeded"]
    add_executions(pool, job["id"], statuses)
    path = f"/v1/jobs/{job['id']}/executions"
    everything = api("GET", path)
    assert everything.status == 200 and everything.body["next_cursor"] is None
    got = everything.body["executions"]
    assert [e["status"] for e in got] == statuses[::-1]
    assert set(got[0]) == {
        "id",
        "job_id",
        "scheduled_at",
        "due_at",
        "started_at",
        "finished_at",
        "attempt",
        "trigger",
        "status",
        "http_status",
        "response_excerpt",
        "error",
        "duration_ms",
        "waited_ms",
        "waited_for",
        "caused_by",
        "caused_by_job_id",
        "shifted_from",
        "excluded_by",
    }
    assert got[0]["job_id"] == job["id"] and got[0]["scheduled_at"].endswith("Z") and got[0]["duration_ms"] == 42

    seen, cursor = [], None
    while True:
        answer = api("GET", path, query={"status": "succeeded", "limit": 3, **({"cursor": cursor} if cursor else {})})
        assert answer.status == 200
        seen += answer.body["executions"]
        cursor = answer.body["next_cursor"]
        if not cursor:
            break
    assert [e["id"] for e in seen] == [e["id"] for e in got if e["status"] == "succeeded"]

    first = api("GET", path, query={"limit": 2})
    for query in (
        {"limit": 2, "cursor": first.body["next_cursor"], "status": "failed"},
        {"cursor": first.body["next_cursor"] + "x"},
    ):
        answer = api("GET", path, query=query)
        assert answer.status == 400 and answer.fields == ["cursor"]
    assert api("GET", path, query={"status": "exploded"}).fields == ["status"]
    assert api("GET", path, query={"limit": 0}).fields == ["limit"]
    assert api("GET", "/v1/jobs/00000000-0000-0000-0000-000000000000/executions").status == 404


def test_a_jobs_execution_cursor_holds_its_rows_instant_and_an_older_cursor_still_pages(store, box, pool):
    """The cursor carries the last row's started_at (for the store to read only the days up to
    it), opaque to clients; a cursor issued before it did (a seq alone) pages the same rows."""
    settings = Settings(cursor_secret="a job's executions")
    api = Client(make_app(lambda: store, lambda: box, settings).resolve)
    codec = CursorCodec(cursor_key(settings))
    job = create(api)
    path = f"/v1/jobs/{job['id']}/executions"
    with pool.connection() as conn:
        for hours in range(80, -1, -7):  # 12 over 3 days and more, oldest first
            conn.execute(
                """INSERT INTO executions (id, job_id, scheduled_at, started_at, attempt, trigger, status)
                   VALUES (gen_random_uuid(), %s, now(), now() - make_interval(hours => %s), 1, 'schedule',
                           'succeeded')""",
                (job["id"], hours),
            )
        # Its rate (3 a day) has a page's first try read the last few days only.
        conn.execute("UPDATE job_runs SET run_count = 12")
        conn.execute("UPDATE job_specs SET created_at = now() - interval '4 days'")
        seq_of = {r["id"]: r["seq"] for r in conn.execute("SELECT id::text AS id, seq FROM executions")}
    everything = api("GET", path).body["executions"]
    assert len(everything) == 12
    scope = scope_of("executions", ALICE, job_id=job["id"], status=None)

    seen, cursor = [], None
    while True:
        answer = api("GET", path, query={"limit": 5, **({"cursor": cursor} if cursor else {})})
        assert answer.status == 200, answer.body
        seen += answer.body["executions"]
        cursor = answer.body["next_cursor"]
        if not cursor:
            break
        last = answer.body["executions"][-1]
        position = codec.decode(cursor, scope)
        assert position["before_seq"] == seq_of[last["id"]]
        assert parse_time(position["started_at"]) == parse_time(last["started_at"])
    assert [e["id"] for e in seen] == [e["id"] for e in everything]

    for first in (2, 5, 11):
        older = codec.encode(scope, {"before_seq": seq_of[everything[first - 1]["id"]]})
        answer = api("GET", path, query={"limit": 20, "cursor": older})
        assert answer.status == 200 and answer.body["next_cursor"] is None
        assert [e["id"] for e in answer.body["executions"]] == [e["id"] for e in everything[first:]]

    # A signed position with a started_at that is not an instant is refused like any malformed one.
    for instant in ("yesterday", "2026-01-01T00:00:00", 1767225600, ["2026-01-01T00:00:00Z"]):
        bad = codec.encode(scope, {"before_seq": 1, "started_at": instant})
        answer = api("GET", path, query={"cursor": bad})
        assert answer.status == 400 and answer.fields == ["cursor"], instant


# -- owners ----------------------------------------------------------------------------------------


def test_another_principal_sees_404_on_every_job_route(api, store, pool):
    job = create(api)
    add_executions(pool, job["id"], ["succeeded"])
    path = f"/v1/jobs/{job['id']}"
    attempts = [
        ("GET", path, None),
        ("PUT", path, job_body()),
        ("PATCH", path, {"description": "mine"}),
        ("DELETE", path, None),
        ("POST", f"{path}/pause", None),
        ("POST", f"{path}/resume", None),
        ("POST", f"{path}/run", None),
        ("GET", f"{path}/executions", None),
    ]
    for method, route, body in attempts:
        answer = api(method, route, body, principal=BOB)
        assert answer.status == 404 and answer.error["code"] == "not_found", (method, route, answer.body)
    # An assumed role of another account, the caller field only, the account only: still 404.
    for identity in ("arn:aws:sts::111111111111:assumed-role/Ops/alice", "AIDAOTHER", "111111111111"):
        assert api("GET", path, principal=identity).status == 404
    assert api("GET", "/v1/jobs", principal=BOB).body["jobs"] == []
    unchanged = api("GET", path).body
    assert unchanged == job
    assert store.claim_due(10, 60) == []  # Bob's "run" requested nothing
    # Names are unique per owner only.
    assert create(api, job_body(), principal=BOB)["owner"] == BOB


def test_assumed_role_sessions_share_their_role(api):
    job = create(api, principal="arn:aws:sts::111111111111:assumed-role/Worker/task-1")
    assert job["owner"] == "arn:aws:sts::111111111111:assumed-role/Worker"
    again = api("GET", f"/v1/jobs/{job['id']}", principal="arn:aws:sts::111111111111:assumed-role/Worker/task-2")
    assert again.status == 200


def test_no_identity_is_forbidden(api):
    for method, path in (("GET", "/v1/jobs"), ("POST", "/v1/jobs"), ("GET", "/v1/jobs/x")):
        answer = api(method, path, job_body() if method == "POST" else None, principal=None)
        assert answer.status == 403 and answer.error["code"] == "forbidden"


# -- bad input -------------------------------------------------------------------------------------


def _target(**changes: Any) -> dict[str, Any]:
    return {**job_body()["target"], **changes}


BAD_CREATE = [
    ("unknown field", job_body(colour="blue"), "colour"),
    ("unknown target field", job_body(target=_target(verb="POST")), "target.verb"),
    ("name too long", job_body("n" * 129), "name"),
    ("name empty", job_body(""), "name"),
    ("name charset", job_body("has space"), "name"),
    ("wrong type", job_body(tags="billing"), "tags"),
    ("too many tags", job_body(tags=[f"t{i}" for i in range(21)]), "tags"),
    ("tag too long", job_body(tags=["t" * 65]), "tags.0"),
    ("too many headers", job_body(target=_target(headers={f"X-H{i}": "v" for i in range(51)})), "target.headers"),
    ("header value too long", job_body(target=_target(headers={"X-A": "v" * 8193})), "target.headers.X-A"),
    ("reserved header", job_body(target=_target(headers={"X-Scheduler-Job-Id": "1"})), "target.headers"),
    ("target body too long", job_body(target=_target(body="b" * (256 * 1024 + 1))), "target.body"),
    ("description too long", job_body(description="d" * 2049), "description"),
    ("bad url", job_body(target=_target(url="ftp://example.com")), "target.url"),
    ("credentials in url", job_body(target=_target(url="https://u:p@example.com")), "target.url"),
    ("bad target type", job_body(target={"type": "smtp"}), "target.type"),
    ("missing target", {k: v for k, v in job_body().items() if k != "target"}, "target"),
    ("bad schedule", job_body(schedule="every day at noon"), "schedule"),
    ("schedule and run_at", job_body(run_at="2099-01-01T00:00:00Z"), "schedule"),
    ("neither", job_body(schedule=None), "schedule"),
    ("naive run_at", job_body(schedule=None, run_at="2099-01-01T00:00:00"), "run_at"),
    ("bad timezone", job_body(timezone="Mars/Olympus"), "timezone"),
    ("end before start", job_body(start_at="2030-01-02T00:00:00Z", end_at="2030-01-01T00:00:00Z"), "end_at"),
    ("absurd timeout", job_body(target=_target(timeout_seconds=10**30)), "target.timeout_seconds"),
    ("negative attempts", job_body(retry={"max_attempts": -1}), "retry.max_attempts"),
    ("float attempts", job_body(retry={"max_attempts": 1.5}), "retry.max_attempts"),
    ("infinite backoff", job_body(retry={"max_backoff_seconds": 1e400}), "retry.max_backoff_seconds"),
    ("backoff order", job_body(retry={"min_backoff_seconds": 10, "max_backoff_seconds": 1}), "retry"),
    ("bad missed_runs", job_body(missed_runs="sometimes"), "missed_runs"),
    ("bad method", job_body(target=_target(method="BREW")), "target.method"),
    ("bad success code", job_body(target=_target(success_codes=[99])), "target.success_codes.0"),
    ("bad auth type", job_body(target=_target(auth={"type": "digest"})), "target.auth.type"),
    ("masked secret on create", job_body(target=_target(auth={"type": "bearer", "token": "***"})), "target.auth.token"),
    ("NUL in description", job_body(description="a\x00b"), "description"),
    ("NUL in a header", job_body(target=_target(headers={"X-A": "a\x00"})), "target.headers.X-A"),
    (
        "bad base64 amqp body",
        job_body(target={"type": "amqp", "body": "***", "body_encoding": "base64"}),
        "target.body",
    ),
    ("bad amqp url", job_body(target={"type": "amqp", "url": "amqp://h:99999/"}), "target.url"),
]


@pytest.mark.parametrize("case,body,field", BAD_CREATE, ids=[c[0] for c in BAD_CREATE])
def test_bad_job_body_answers_400_with_the_field(api, case, body, field):
    answer = api("POST", "/v1/jobs", body)
    assert answer.status == 400, answer.body
    assert answer.error["code"] == "invalid_request" and field in answer.fields, answer.body
    assert answer.error["message"]
    assert api("GET", "/v1/jobs").body["jobs"] == []


RAW_BAD = [
    ("malformed json", '{"name": ', "malformed_json"),
    ("trailing garbage", json.dumps(job_body()) + "x", "malformed_json"),
    ("not json at all", "name=x", "malformed_json"),
    ("empty body", "", "invalid_request"),
    ("json array", "[]", "invalid_request"),
    ("json string", '"job"', "invalid_request"),
    ("json null", "null", "invalid_request"),
    ("deep nesting", "[" * 100_000 + "]" * 100_000, "malformed_json"),
    ("huge integer", '{"name": "x", "retry": {"max_attempts": ' + "9" * 5000 + "}}", "malformed_json"),
    ("lone surrogate", json.dumps(job_body(description="\ud800")), "invalid_request"),
    ("NaN", json.dumps(job_body()).replace('"max_attempts": 4', '"max_attempts": NaN'), "invalid_request"),
]


@pytest.mark.parametrize("case,raw,code", RAW_BAD, ids=[c[0] for c in RAW_BAD])
def test_malformed_bodies_answer_400(api, case, raw, code):
    answer = api("POST", "/v1/jobs", raw_body=raw)
    assert answer.status == 400 and answer.error["code"] == code, answer.body
    assert answer.fields, answer.body


def test_body_limit_413_and_encodings(api):
    big = job_body(description="x", target=_target(body="b" * 200_000))
    big["padding"] = "p" * (1024 * 1024)
    answer = api("POST", "/v1/jobs", big)
    assert answer.status == 413 and answer.error["code"] == "payload_too_large"
    multibyte = "é" * (600 * 1024)  # 600 Ki characters, 1.2 MiB of UTF-8
    assert api("POST", "/v1/jobs", raw_body=json.dumps({"d": multibyte}, ensure_ascii=False)).status == 413
    assert api("POST", "/v1/jobs", base64_body=b"{" * (1024 * 1024 + 1)).status == 413
    # The limit is on the body: a 1 MiB body with a valid job inside is not refused for its size.
    fits = job_body(target=_target(body="b" * (250 * 1024)))
    assert api("POST", "/v1/jobs", fits).status == 201
    # Bodies API Gateway hands over in base64: UTF-8 JSON works, anything else is a 400.
    encoded = api("POST", "/v1/jobs", base64_body=json.dumps(job_body("b64")).encode())
    assert encoded.status == 201, encoded.body
    for raw in (b"\xff\xfe{}", b"\x80"):
        answer = api("POST", "/v1/jobs", base64_body=raw)
        assert answer.status == 400 and answer.error["code"] == "malformed_json"
    broken = make_api_event("POST", "/v1/jobs", None)
    broken.update(body="!!!not base64", isBase64Encoded=True)
    assert api.handler(broken, LocalLambdaContext())["statusCode"] == 400


def test_other_bad_requests(api):
    create(api)
    duplicate = api("POST", "/v1/jobs", job_body())
    assert duplicate.status == 409 and duplicate.error["code"] == "name_taken" and duplicate.fields == ["name"]
    other = create(api, job_body("other"))
    rename = api("PATCH", f"/v1/jobs/{other['id']}", {"name": "nightly-report"})
    assert rename.status == 409 and rename.error["code"] == "name_taken"
    assert api("PUT", f"/v1/jobs/{other['id']}", job_body()).status == 409

    for query, field in (
        ({"limit": "0"}, "limit"),
        ({"limit": "201"}, "limit"),
        ({"limit": "abc"}, "limit"),
        ({"limit": "1e3"}, "limit"),
        ({"limit": str(10**40)}, "limit"),
        ({"state": "sleeping"}, "state"),
        ({"tag": ""}, "tag"),
        ({"tag": "t" * 65}, "tag"),
        ({"tag": "a\x00"}, "tag"),
        ({"name_prefix": "p" * 129}, "name_prefix"),
        ({"name_prefix": "\x00"}, "name_prefix"),
        ({"cursor": "c" * 2000}, "cursor"),
    ):
        answer = api("GET", "/v1/jobs", query=query)
        assert answer.status == 400 and answer.fields == [field], (query, answer.body)

    for job_id in ("not-a-uuid", "00000000-0000-0000-0000-000000000000", "%00", "1' OR '1'='1"):
        answer = api("GET", f"/v1/jobs/{job_id}")
        assert answer.status == 404 and answer.error["code"] == "not_found"
    assert api("GET", "/v1/nothing-here").status == 404
    wrong_method = api("DELETE", "/v1/jobs")
    assert wrong_method.status == 405 and wrong_method.headers["Allow"] == "GET, POST"
    assert wrong_method.error["code"] == "method_not_allowed"
    assert (
        api("POST", "/v1/jobs", raw_body=json.dumps(job_body("x2")), headers={"Content-Type": "text/plain"}).status
        == 415
    )


def test_unexpected_error_is_a_generic_500_and_logged_without_the_body(box, caplog):
    class BrokenStore:
        def now(self):
            raise RuntimeError("database on fire")

    api = Client(make_app(lambda: BrokenStore(), lambda: box, Settings()).resolve)
    caplog.set_level(logging.DEBUG)
    answer = api("POST", "/v1/jobs", job_body())
    assert answer.status == 500
    assert answer.body == {"error": {"code": "internal_error", "message": "Internal Server Error", "details": []}}
    assert "RuntimeError" in caplog.text and "database on fire" in caplog.text
    assert BASIC_PW not in caplog.text and "nightly-report" not in caplog.text


# -- secrets ---------------------------------------------------------------------------------------


def test_secrets_are_never_readable_back(api, pool, box, caplog, capsys):
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="aws_lambda_powertools")
    jobs = [
        create(api, job_body("basic")),
        create(api, job_body("bearer", target=_target(auth={"type": "bearer", "token": BEARER}))),
        create(
            api, job_body("header", target=_target(auth={"type": "header", "name": "X-Api-Key", "value": HEADER_KEY}))
        ),
        create(api, amqp_body()),
    ]
    for job in jobs:
        path = f"/v1/jobs/{job['id']}"
        add_executions(pool, job["id"], ["succeeded", "failed"])
        api("GET", path)
        api("PATCH", path, {"description": "touched"})
        api(
            "PUT",
            path,
            {
                **api("GET", path).body,
                **{
                    k: None
                    for k in (
                        "id",
                        "owner",
                        "state",
                        "version",
                        "next_run_at",
                        "last_run_at",
                        "created_at",
                        "updated_at",
                        "stats",
                    )
                },
            },
        )
        api("POST", f"{path}/pause")
        api("POST", f"{path}/run")
        api("POST", f"{path}/resume")
        api("GET", f"{path}/executions")
        api("PATCH", path, {"target": {"nope": 1}})  # an error answer after a secret was stored
        api("POST", "/v1/jobs", job_body(job["name"]))  # 409 with a secret in the request
    api("GET", "/v1/jobs")
    api("POST", "/v1/jobs", job_body("bad", colour="x", target=_target(auth={"type": "bearer", "token": BEARER})))
    api("POST", "/v1/jobs", raw_body=json.dumps(job_body("trunc"))[:-3])
    api("PATCH", f"/v1/jobs/{jobs[0]['id']}", {"target": {"auth": {"password": BASIC_PW, "extra": BASIC_PW}}})

    assert all(a["statusCode"] < 500 for a in api.answers)
    everything = api.all_text() + caplog.text + capsys.readouterr().out + capsys.readouterr().err
    for secret in SECRETS:
        assert secret not in everything
    # The PUT round trip with "***" kept every secret.
    for job in jobs:
        plain = json.dumps(decrypt_target_secrets(stored_target(pool, job["id"]), box))
        assert any(secret in plain for secret in SECRETS)
        with pool.connection() as conn:
            row = json.dumps(conn.execute("SELECT * FROM jobs WHERE id = %s", (job["id"],)).fetchone(), default=str)
            executions = json.dumps(conn.execute("SELECT * FROM executions").fetchall(), default=str)
        assert not any(secret in row + executions for secret in SECRETS)


# -- the Lambda handler module and the HTTP adapter ------------------------------------------------


@pytest.fixture
def api_handler(db_url, tmp_path, monkeypatch):
    monkeypatch.setenv("SCHEDULER_DATABASE_URL", db_url)
    monkeypatch.setenv("SCHEDULER_LOCAL_KEY_FILE", str(tmp_path / "handler.key"))
    monkeypatch.delenv("SCHEDULER_KMS_KEY_ID", raising=False)
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_LOGGER_LOG_EVENT", "true")  # must not log the event anyway
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "DEBUG")
    get_settings.cache_clear()
    sys.modules.pop("api_handler", None)
    module = importlib.import_module("api_handler")
    yield module
    if "pool" in vars(module.deps):  # built by a request
        module.deps.pool.close()
    sys.modules.pop("api_handler", None)
    get_settings.cache_clear()


def test_the_apis_log_lines_name_their_module_and_local_mode_shows_their_fields(api, caplog):
    """The API's loggers are named after their modules (``scheduler.api.jobs``, not the doubled
    ``scheduler.scheduler.api.jobs`` of Powertools' child loggers), and local mode's line of a
    record shows the fields attached to it (the job's id)."""
    from scheduler.local.logs import LocalFormatter

    caplog.set_level(logging.INFO)
    job = create(api, job_body("logged"))
    [record] = [r for r in caplog.records if r.getMessage() == "job created"]
    assert record.name == "scheduler.api.jobs" and str(record.job_id) == job["id"]
    assert LocalFormatter().format(record) == f"INFO scheduler.api.jobs: job created job_id={job['id']}"


def test_lambda_handler_module(api_handler, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    api = Client(api_handler.handler)
    job = create(api, json.loads(EVENT["body"]))
    assert job["target"]["auth"]["password"] == "***"
    assert api("GET", f"/v1/jobs/{job['id']}").body == job
    assert api("GET", f"/v1/jobs/{job['id']}", principal=BOB).status == 404
    assert (tmp_path / "handler.key").exists()
    assert "job created" in caplog.text  # the logs were captured...
    assert "canned-secret" not in caplog.text + api.all_text()  # ...without the event or the secret


def _wsgi(
    app,
    method: str,
    path: str,
    body: bytes = b"",
    query: str = "",
    headers: dict[str, str] | None = None,
    stream: Any = None,
):
    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_HOST": "localhost:8080",
        "wsgi.input": stream or io.BytesIO(body),
        "CONTENT_LENGTH": str(len(body)) if body else "",
    }
    for name, value in (headers or {}).items():
        key = name.upper().replace("-", "_")
        environ[key if key in ("CONTENT_TYPE", "CONTENT_LENGTH") else f"HTTP_{key}"] = value
    result: dict[str, Any] = {}

    def start_response(status, response_headers):
        result["status"], result["headers"] = status, dict(response_headers)

    result["body"] = b"".join(app(environ, start_response))
    return result


def test_http_adapter_event_shape():
    seen = []

    def handler(event, context):
        seen.append(event)
        return {
            "statusCode": 200,
            "multiValueHeaders": {"Content-Type": ["application/json"], "X-A": ["1", "2"]},
            "body": "{}",
            "isBase64Encoded": False,
        }

    bodies = []
    app = make_wsgi_app(handler, lambda environ: bodies.append(environ["scheduler.body"]) or ALICE)
    result = _wsgi(
        app,
        "POST",
        "/v1/jobs/café".encode().decode("latin-1"),
        b'{"a": 1}',
        query="tag=a&tag=b&limit=2",
        headers={"Content-Type": "application/json", "If-Match": '"3"'},
    )
    assert result["status"] == "200 OK" and result["body"] == b"{}" and bodies == [b'{"a": 1}']
    event = seen[0]
    assert event["httpMethod"] == "POST" and event["path"] == "/v1/jobs/café"
    assert event["queryStringParameters"] == {"tag": "b", "limit": "2"}
    assert event["multiValueQueryStringParameters"] == {"tag": ["a", "b"], "limit": ["2"]}
    assert event["headers"]["Content-Type"] == "application/json" and event["headers"]["If-Match"] == '"3"'
    assert event["body"] == '{"a": 1}' and event["isBase64Encoded"] is False
    identity = event["requestContext"]["identity"]
    assert identity["userArn"] == ALICE and identity["accountId"] == "111111111111" and identity["sourceIp"]
    assert event["requestContext"]["stage"] == "local" and event["requestContext"]["requestId"]
    binary = make_event({"REQUEST_METHOD": "POST", "PATH_INFO": "/x"}, b"\xff\x00", None)
    assert binary["isBase64Encoded"] is True and base64.b64decode(binary["body"]) == b"\xff\x00"
    assert binary["requestContext"]["identity"]["userArn"] is None


def test_http_adapter_serves_the_api(store, box):
    handler = make_app(lambda: store, lambda: box, Settings()).resolve
    app = make_wsgi_app(handler, lambda environ: environ.get("HTTP_X_TEST_PRINCIPAL"))
    body = json.dumps(job_body()).encode()
    created = _wsgi(
        app, "POST", "/v1/jobs", body, headers={"Content-Type": "application/json", "X-Test-Principal": ALICE}
    )
    assert created["status"] == "201 Created" and created["headers"]["ETag"] == '"1"'
    assert created["headers"]["Cache-Control"] == "no-store"
    assert created["headers"]["X-Content-Type-Options"] == "nosniff"
    job = json.loads(created["body"])
    assert int(created["headers"]["Content-Length"]) == len(created["body"])
    got = _wsgi(app, "GET", f"/v1/jobs/{job['id']}", headers={"X-Test-Principal": ALICE})
    assert json.loads(got["body"]) == job
    assert _wsgi(app, "GET", f"/v1/jobs/{job['id']}", headers={"X-Test-Principal": BOB})["status"].startswith("404")
    refused = _wsgi(app, "GET", "/v1/jobs")
    assert refused["status"] == "403 Forbidden" and refused["headers"]["Cache-Control"] == "no-store"
    deleted = _wsgi(app, "DELETE", f"/v1/jobs/{job['id']}", headers={"X-Test-Principal": ALICE})
    assert deleted["status"] == "204 No Content" and deleted["body"] == b""
    bad = _wsgi(app, "POST", "/v1/jobs", b"\xff\xfe", headers={"X-Test-Principal": ALICE})
    assert bad["status"].startswith("400")


def test_http_adapter_refuses_big_bodies_without_reading_them():
    class Unreadable(io.RawIOBase):
        def read(self, *args):
            raise AssertionError("the body was read")

    def handler(event, context):
        raise AssertionError("the handler was called")

    app = make_wsgi_app(handler, lambda environ: ALICE)
    environ_body = b"x" * (1024 * 1024 + 1)
    result = _wsgi(app, "POST", "/v1/jobs", environ_body, stream=Unreadable())
    assert result["status"] == "413 Request Entity Too Large"
    assert json.loads(result["body"])["error"]["code"] == "payload_too_large"

    # Chunked (no Content-Length): read up to the limit, then refused.
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/v1/jobs",
        "wsgi.input_terminated": True,
        "wsgi.input": io.BytesIO(b"y" * (3 * 1024 * 1024)),
    }
    statuses = []
    app(environ, lambda status, headers: statuses.append(status))
    assert statuses == ["413 Request Entity Too Large"] and environ["wsgi.input"].tell() <= 1024 * 1024 + 64 * 1024


def test_the_default_broker_is_refused_to_owners_its_deployment_does_not_list(store, box):
    """broker_owners (SCHEDULER_DEFAULT_BROKER_OWNERS): an AMQP job or alert without a url of an
    owner the patterns do not match is a 400 on target.url (give your broker's url); a listed
    owner's is created, and a job that names its own broker is anyone's."""
    settings = Settings.from_env(
        {
            "SCHEDULER_DEFAULT_BROKER_URL": "amqps://broker.internal:5671",
            "SCHEDULER_DEFAULT_BROKER_OWNERS": "arn:*:*::111111111111:*",
        }
    )
    assert settings.default_broker_owners == ("arn:*:*::111111111111:*",)
    client = Client(make_app(lambda: store, lambda: box, settings).resolve)
    no_url = {"type": "amqp", "exchange": "events", "routing_key": "r", "body": "x"}
    assert create(client, job_body("alice-amqp", target=no_url), principal=ALICE)["target"]["type"] == "amqp"
    answer = client("POST", "/v1/jobs", job_body("bob-amqp", target=no_url), principal=BOB)
    assert answer.status == 400 and answer.fields == ["target.url"] and "not open to you" in str(answer.body)
    alert = [{"on": "failure", "target": no_url}]
    answer = client("POST", "/v1/jobs", job_body("bob-alerting", alerts=alert), principal=BOB)
    assert answer.status == 400 and answer.fields == ["alerts.0.target.url"], answer.body
    own = {**no_url, "url": "amqps://bob:pw@broker.example.com:5671/bob"}
    assert create(client, job_body("bob-own", target=own), principal=BOB)["target"]["type"] == "amqp"

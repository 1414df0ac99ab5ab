"""Edge inputs found while fuzzing the models, sent through the API (WSGI adapter, real store):
the contract says bad input is a 400, never a 5xx.

Timestamps at the edge of the calendar whose UTC instant does not exist in Python
(``0001-01-01T00:00:00+01:00`` is 31 Dec of year 0 in UTC; ``9999-12-31T23:59:59-01:00`` is in
year 10000) are accepted by the model's ``AwareDatetime`` fields, then overflow where they are
converted to UTC. The neighbouring inputs that work are checked too.
"""

from __future__ import annotations

import io
import json
from wsgiref.util import setup_testing_defaults

import pytest

from scheduler.api.app import make_app
from scheduler.secrets import LocalSecretBox
from scheduler.settings import Settings
from scheduler.transport.http_adapter import make_wsgi_app

OWNER = "arn:aws:iam::111111111111:user/edges"
VALID = {"name": "edge", "schedule": "0 3 * * *", "target": {"type": "http", "url": "https://example.com/hook"}}
YEAR_0 = "0001-01-01T00:00:00+01:00"
YEAR_10000 = "9999-12-31T23:59:59-01:00"


@pytest.fixture
def api(store, tmp_path):
    box = LocalSecretBox(tmp_path / "secret.key")
    app = make_app(lambda: store, lambda: box, Settings(cursor_secret="edges"))
    wsgi = make_wsgi_app(app.resolve, lambda environ: OWNER)

    def call(method: str, path: str, body=None) -> tuple[int, dict]:
        data = json.dumps(body).encode() if body is not None else b""
        environ: dict = {}
        setup_testing_defaults(environ)
        environ.update(
            {
                "REQUEST_METHOD": method,
                "PATH_INFO": path,
                "CONTENT_TYPE": "application/json",
                "CONTENT_LENGTH": str(len(data)),
                "wsgi.input": io.BytesIO(data),
            }
        )
        status: list[str] = []
        payload = b"".join(wsgi(environ, lambda s, headers, *exc: status.append(s)))
        return int(status[0].split()[0]), (json.loads(payload) if payload else {})

    return call


BUG = (
    "bug: the job model's AwareDatetime fields (start_at, end_at, run_at) accept instants whose "
    "UTC conversion overflows; POST/PATCH then answer 500 internal_error instead of 400: start_at "
    "overflows in JobSpec's validator (parse_schedule: anchor.astimezone(UTC)), end_at in "
    "lifecycle.plan_first -> schedules.first_run -> next_occurrence -> _require_aware "
    "(OverflowError), run_at in lifecycle.schedule_of -> schedules.one_off, whose "
    "ScheduleError('run_at is out of range') raised from the store is not mapped to a 400"
)


@pytest.mark.parametrize(
    "extra",
    [
        {"start_at": YEAR_0},
        {"start_at": YEAR_10000},
        {"end_at": YEAR_0},
        {"schedule": None, "run_at": YEAR_0},
        {"schedule": None, "run_at": YEAR_10000},
    ],
    ids=["start_at-year-0", "start_at-year-10000", "end_at-year-0", "run_at-year-0", "run_at-year-10000"],
)
def test_post_with_a_timestamp_beyond_the_calendar_is_a_400(api, extra):
    status, body = api("POST", "/v1/jobs", {**VALID, **extra})
    assert status == 400, body


@pytest.mark.parametrize(
    "extra",
    [{"start_at": YEAR_0}, {"end_at": YEAR_0}, {"schedule": None, "run_at": YEAR_0}],
    ids=["start_at", "end_at", "run_at"],
)
def test_patch_with_a_timestamp_beyond_the_calendar_is_a_400(api, extra):
    status, job = api("POST", "/v1/jobs", VALID)
    assert status == 201
    status, body = api("PATCH", f"/v1/jobs/{job['id']}", extra)
    assert status == 400, body


@pytest.mark.parametrize(
    "extra, status, state",
    [
        ({"start_at": "9999-12-31T23:59:59Z"}, 400, None),  # never fires: a clean 400 on schedule
        ({"end_at": "0001-01-01T00:00:00Z"}, 201, "completed"),  # already past its end
        ({"schedule": None, "run_at": "0001-01-01T00:00:00Z"}, 201, "active"),  # long past: fires at once
        # A window of 12 h given with the two most extreme offsets: 10:00Z .. 22:00:01Z.
        (
            {"schedule": "0 12 * * *", "start_at": "2099-01-01T00:00:00+14:00", "end_at": "2098-12-31T10:00:01-12:00"},
            201,
            "active",
        ),
    ],
    ids=["start_at-end-of-calendar", "end_at-start-of-calendar", "run_at-start-of-calendar", "extreme-offsets"],
)
def test_the_neighbours_are_answered_cleanly(api, extra, status, state):
    answered, body = api("POST", "/v1/jobs", {**VALID, **extra})
    assert answered == status, body
    if status == 400:
        assert body["error"]["details"][0]["field"] == "schedule"
    else:
        assert body["state"] == state
    if "end_at" in extra and state == "active":
        assert body["next_run_at"] == "2098-12-31T12:00:00Z"


@pytest.mark.parametrize("method", ["GET", "PATCH", "DELETE"])
def test_a_job_id_that_is_a_newline_is_no_such_job(api, method):
    status, body = api(method, "/v1/jobs/\n", {"description": "x"} if method == "PATCH" else None)
    assert status == 404, (status, body)

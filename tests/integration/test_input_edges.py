"""Inputs at the edges, through the API's handler on real Postgres: each was once accepted and
then lost, mangled or answered with a 500, and is now a 4xx naming its field (or works)."""

from __future__ import annotations

import json

import pytest

from tests.integration.test_alerts import rule
from tests.integration.test_api import api, box, job_body  # noqa: F401 (pytest fixtures)
from tests.integration.test_aws_api import AWS_TARGETS, QUEUE, ROLE

LAMBDA, SQS, SNS, EVENTBRIDGE = AWS_TARGETS
DEEP = "[" * 5000 + "]" * 5000  # past Python's recursion limit when read


def created(api, body) -> dict:
    answer = api("POST", "/v1/jobs", body)
    assert answer.status == 201, answer.body
    return answer.body


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (job_body("nl\n"), "name"),
        (job_body("h", target={"type": "http", "url": "https://example.com/", "headers": {"X-A\n": "v"}}), "headers"),
        (
            job_body(
                "h",
                target={
                    "type": "http",
                    "url": "https://example.com/",
                    "auth": {"type": "header", "name": "X-Key\n", "value": "v"},
                },
            ),
            "auth",
        ),
        (job_body("h", target={"type": "http", "url": "https://example.com/", "success_codes": []}), "success_codes"),
    ],
)
def test_a_name_or_header_with_a_final_line_break_is_refused(api, body, field):
    # Python's "$" matches before a final "\n": the checks end in "\Z" now
    answer = api("POST", "/v1/jobs", body)
    assert answer.status == 400, answer.body
    assert any(field in f for f in answer.fields), answer.body


def test_a_header_value_with_a_line_break_names_the_header(api):
    target = {"type": "http", "url": "https://example.com/", "headers": {"X-A": "a\r\nX-B: b"}}
    answer = api("POST", "/v1/jobs", job_body("h", target=target))
    assert answer.status == 400 and answer.fields == ["target.headers.X-A"], answer.body


def test_a_header_value_beginning_with_a_space_is_refused_where_it_would_fail_every_delivery(api):
    # http.client reads a value that begins with a space as a continuation line and will not send it
    target = {"type": "http", "url": "https://example.com/", "headers": {"X-Api-Key": " SPACESECRET01 "}}
    answer = api("POST", "/v1/jobs", job_body("h", target=target))
    assert answer.status == 400 and answer.fields == ["target.headers.X-Api-Key"], answer.body
    assert "SPACESECRET01" not in json.dumps(answer.body)
    auth = {"type": "header", "name": "X-Api-Key", "value": " SPACESECRET01"}
    answer = api("POST", "/v1/jobs", job_body("h", target={**target, "headers": {}, "auth": auth}))
    assert answer.status == 400 and answer.fields == ["target.auth.value"], answer.body
    job = created(api, job_body("spaced-run", target={**target, "headers": {"X-Ok": "a b "}}))  # inner, final: sent
    answer = api("POST", f"/v1/jobs/{job['id']}/run", {"headers": {"X-B": " b"}})
    assert answer.status == 400 and answer.fields == ["headers.X-B"], answer.body


def test_a_calendar_name_with_a_final_line_break_is_refused_and_not_stored(api):
    answer = api("POST", "/v1/calendars", {"name": "cal\n", "dates": ["2026-12-25"]})
    assert answer.status == 400 and answer.fields == ["name"], answer.body
    assert api("GET", "/v1/calendars").body["calendars"] == []


def test_run_variables_and_headers_with_a_final_line_break_are_refused(api):
    job = created(api, job_body("runs"))
    for overrides, field in (({"vars": {"a\n": "v"}}, "vars"), ({"headers": {"X-A\n": "v"}}, "headers")):
        answer = api("POST", f"/v1/jobs/{job['id']}/run", overrides)
        assert answer.status == 400 and any(field in f for f in answer.fields), answer.body


@pytest.mark.parametrize(
    ("target", "field"),
    [
        ({**LAMBDA, "payload": DEEP}, "target.payload"),
        ({**LAMBDA, "payload": '{"a": NaN}'}, "target.payload"),
        ({**EVENTBRIDGE, "detail": '{"a": ' + DEEP + "}"}, "target.detail"),
        ({**EVENTBRIDGE, "detail": '{"a": NaN, "b": Infinity}'}, "target.detail"),
        ({**EVENTBRIDGE, "source": "a\nb"}, "target.source"),
        ({**EVENTBRIDGE, "detail_type": "a\tb"}, "target.detail_type"),
        ({**SQS, "body": "\u0001"}, "target.body"),
        ({**SQS, "body": "ok \ufffe"}, "target.body"),
    ],
)
def test_aws_payloads_the_services_would_refuse_are_a_400(api, target, field):
    answer = api("POST", "/v1/jobs", job_body("aws", target=target))
    assert answer.status == 400, answer.body
    assert field in answer.fields, answer.body


def test_run_overrides_of_aws_bodies_are_checked_as_the_service_reads_them(api):
    bus = created(api, job_body("bus", target=EVENTBRIDGE))
    fn = created(api, job_body("fn", target=LAMBDA))
    queue = created(api, job_body("queue", target={"type": "sqs", "role_arn": ROLE, "queue_url": QUEUE, "body": "b"}))
    for job, body in ((fn, DEEP), (bus, DEEP), (bus, "[]"), (fn, "NaN"), (queue, "\u0001")):
        answer = api("POST", f"/v1/jobs/{job['id']}/run", {"body": body})
        assert answer.status == 400 and answer.fields == ["body"], (job["name"], body[:10], answer.body)
    assert api("POST", f"/v1/jobs/{bus['id']}/run", {"body": '{"ok": true}'}).status == 202


@pytest.mark.parametrize("duration", ["P999999999D", "P99999999W", "PT99999999999999H", "P9999999D"])
def test_an_ics_duration_past_the_year_9999_is_a_400(api, duration):
    ics = (
        "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20261225\r\n"
        f"DURATION:{duration}\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
    )
    answer = api("POST", "/v1/calendars", {"name": "far", "ics": ics})
    assert answer.status == 400 and answer.fields == ["ics"], answer.body
    timed = ics.replace("DTSTART;VALUE=DATE:20261225", "DTSTART:20261225T100000")
    answer = api("POST", "/v1/calendars", {"name": "far", "ics": timed})
    assert answer.status == 400 and answer.fields == ["ics"], answer.body


def test_a_backfill_from_the_first_instant_is_a_400(api):
    job = created(api, job_body("old"))
    path = f"/v1/jobs/{job['id']}/backfill"
    answer = api("POST", path, {"start": "0001-01-01T00:00:00Z", "end": "0001-01-02T00:00:00Z", "dry_run": True})
    assert answer.status == 400 and answer.fields == ["start"], answer.body
    answer = api("POST", path, {"start": "0001-01-01T00:00:01Z", "end": "0001-01-02T00:00:00Z", "dry_run": True})
    assert answer.status == 200, answer.body


@pytest.mark.parametrize("name", ["X-Scheduler-Job-Id", "x-scheduler-attempt", "Idempotency-Key"])
def test_an_amqp_target_cannot_set_the_delivery_s_own_headers(api, name):
    target = {"type": "amqp", "url": "amqp://guest:guest@127.0.0.1:5672/", "headers": {name: "forged"}}
    answer = api("POST", "/v1/jobs", job_body("amqp", target=target))
    assert answer.status == 400 and answer.fields == ["target.headers"], answer.body


@pytest.mark.parametrize("name", ["x" * 256, "\u00e9" * 130])
def test_an_amqp_header_name_over_255_bytes_is_a_400(api, name):
    """AMQP field names are short strings (255 bytes): such a name failed every delivery."""
    target = {"type": "amqp", "url": "amqp://guest:guest@127.0.0.1:5672/", "headers": {name: "v"}}
    answer = api("POST", "/v1/jobs", job_body("amqp", target=target))
    assert answer.status == 400 and answer.fields == ["target.headers"], answer.body


def test_if_match_star_replaces_a_rule_set_but_never_creates_one(api):
    body = {"tag": "t", "alerts": [rule("failure")]}
    answer = api("PUT", "/v1/alert-rules/team", body, headers={"If-Match": "*"})
    assert answer.status == 412 and answer.error["code"] == "version_mismatch", answer.body
    assert api("GET", "/v1/alert-rules/team").status == 404
    assert api("PUT", "/v1/alert-rules/team", body).status == 201
    assert api("PUT", "/v1/alert-rules/team", body, headers={"If-Match": "*"}).status == 200


@pytest.mark.parametrize(
    ("method", "content_type"),
    [
        ("POST", "application/merge-patch+json"),
        ("PATCH", "application/json-patch+json"),
        ("POST", "application/vnd.example+json"),
        ("POST", "application/json, text/plain"),
        ("POST", "application/json; charset=latin-1"),
    ],
)
def test_bodies_that_are_not_the_documented_json_are_a_415(api, method, content_type):
    path = "/v1/jobs"
    if method == "PATCH":
        path = f"/v1/jobs/{created(api, job_body('p'))['id']}"
    answer = api(method, path, raw_body=json.dumps({"description": "x"}), headers={"Content-Type": content_type})
    assert answer.status == 415 and answer.error["code"] == "unsupported_media_type", answer.body


def test_the_documented_json_types_are_read(api):
    answer = api(
        "POST",
        "/v1/jobs",
        raw_body=json.dumps(job_body("j")),
        headers={"Content-Type": "application/json; charset=UTF-8"},
    )
    assert answer.status == 201, answer.body
    patched = api(
        "PATCH",
        f"/v1/jobs/{answer.body['id']}",
        raw_body=json.dumps({"description": "merged"}),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert patched.status == 200 and patched.body["description"] == "merged"


def test_a_chain_names_a_job_by_its_id_in_either_case(api):
    first = created(api, job_body("first"))
    second = created(api, job_body("second", on_success=[first["id"].upper()]))
    assert second["on_success"] == [first["id"]]


@pytest.mark.parametrize("path", ["/v1/jobs/pause", "/v1/jobs/resume", "/v1/jobs/pause/"])
@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT", "PATCH"])
def test_the_bulk_paths_answer_other_methods_with_a_405(api, path, method):
    answer = api(method, path)
    assert answer.status == 405 and answer.headers["Allow"] == "POST", answer.body
    assert answer.error["code"] == "method_not_allowed"


# -- calendars, backfills (the second round of attacks) ------------------------------------------


def test_a_calendar_that_would_stop_its_jobs_for_good_is_refused(api):
    assert api("POST", "/v1/calendars", {"name": "freeze", "dates": ["2026-12-10"]}).status == 201
    job = created(api, job_body("daily-noon", schedule="0 12 * * *", exclude_calendars=["freeze"]))
    # 73 years without a noon: replanned, the job would complete at once, for good
    answer = api("PUT", "/v1/calendars/freeze", {"ranges": [{"start": "2026-12-01", "end": "2099-12-31"}]})
    assert answer.status == 400 and answer.fields == ["ranges"], answer.body
    assert "daily-noon" in answer.body["error"]["details"][0]["message"]
    assert api("GET", f"/v1/jobs/{job['id']}").body["state"] == "active"
    assert api("GET", "/v1/calendars/freeze").body["version"] == 1  # nothing written
    # a new job (or an edit) that its calendars leave without a run is refused too
    assert (
        api("POST", "/v1/calendars", {"name": "all", "ranges": [{"start": "1970-01-01", "end": "9998-12-31"}]}).status
        == 201
    )
    refused = api("POST", "/v1/jobs", job_body("never", schedule="0 12 * * *", exclude_calendars=["all"]))
    assert refused.status == 400 and refused.fields == ["exclude_calendars"], refused.body
    edit = api("PATCH", f"/v1/jobs/{job['id']}", {"exclude_calendars": ["freeze", "all"]})
    assert edit.status == 400 and edit.fields == ["exclude_calendars"], edit.body


def test_a_backfill_of_occurrences_to_come_is_refused(api):
    job = created(api, job_body("tomorrow", schedule="0 9 * * *"))
    path = f"/v1/jobs/{job['id']}/backfill"
    for dry_run in (True, False):
        answer = api("POST", path, {"start": "2026-12-01T00:00:00Z", "end": "2099-01-01T00:00:00Z", "dry_run": dry_run})
        assert answer.status == 400 and answer.fields == ["end"], answer.body


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "wk", "dates": ["2026-W53-5"]}, "dates.0"),
        ({"name": "wk", "ranges": [{"start": "2026-12-24T18", "end": "2026-12-26 06:00"}]}, "ranges.0.start"),
        ({"name": "wk", "ranges": [{"start": "2026-12-01", "end": "2026-12-01T10:00:00"}]}, "ranges.0.start"),
        (
            {
                "name": "open",
                "ics": "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20270115\r\nEND:VCALENDAR\r\n",
            },
            "ics",
        ),
        (
            {
                "name": "digits",
                "ics": "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nDTSTART:20270115T100000Z\r\n"
                f"DURATION:PT{'9' * 5000}H\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n",
            },
            "ics",
        ),
    ],
)
def test_calendar_dates_and_ics_in_other_forms_are_a_400(api, body, field):
    answer = api("POST", "/v1/calendars", body)
    assert answer.status == 400 and any(f.startswith(field) for f in answer.fields), answer.body


def test_a_yearly_ics_rule_counts_its_dtstart_and_keeps_its_bounds(api):
    # DTSTART is always the first instance and COUNT counts it (RFC 5545), as in the general rule
    ics = (
        "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20270115\r\n"
        "RRULE:FREQ=YEARLY;BYMONTH=3;BYMONTHDAY=1;COUNT=2\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
    )
    assert api("POST", "/v1/calendars", {"name": "y", "ics": ics}).status == 201
    preview = api(
        "POST",
        "/v1/schedules/preview",
        {"schedule": "0 12 * * *", "exclude_calendars": ["y"], "after": "2027-01-14T13:00:00Z", "count": 1},
    )
    assert preview.status == 200, preview.body
    assert preview.body["occurrences"] == ["2027-01-16T12:00:00Z"]  # the 15th (DTSTART) excluded
    for rrule in ("FREQ=YEARLY;COUNT=5000", "FREQ=YEARLY;COUNT=3;UNTIL=20400101", "FREQ=YEARLY;COUNT=0"):
        bad = ics.replace("FREQ=YEARLY;BYMONTH=3;BYMONTHDAY=1;COUNT=2", rrule)
        answer = api("POST", "/v1/calendars", {"name": "bad", "ics": bad})
        assert answer.status == 400 and answer.fields == ["ics"], (rrule, answer.body)


def test_a_spread_past_the_year_9999_fires_at_its_last_instant_not_a_500(api):
    """An occurrence whose spread offset would overflow the year 9999 fires at the last instant a
    time holds (it was an OverflowError: a 500 on create, PATCH and the preview)."""
    spread = {"window_seconds": 86400}
    late = {"schedule": "@every 1s", "start_at": "9999-12-31T23:59:00Z"}
    for mode in ("stable", "random"):
        job = created(api, job_body(f"late-{mode}", **late, spread={**spread, "mode": mode}, timezone="UTC"))
        assert job["next_run_at"].startswith("9999-12-31T23:59")
    plain = created(api, job_body("late-plain", **late, timezone="UTC"))
    patched = api("PATCH", f"/v1/jobs/{plain['id']}", {"spread": spread})
    assert patched.status == 200, patched.body
    body = {"schedule": "@every 1s", "spread": spread, "after": "9999-12-31T23:50:00Z", "count": 3}
    preview = api("POST", "/v1/schedules/preview", body)
    assert preview.status == 200, preview.body


def test_a_job_name_in_the_form_of_a_job_id_is_refused(api):
    """A chain, a route or the CLI reads such a name as an id: it would name two jobs at once."""
    other = created(api, job_body("plain"))
    for name in (other["id"], other["id"].upper()):
        answer = api("POST", "/v1/jobs", job_body(name))
        assert answer.status == 400 and answer.body["error"]["details"][0]["field"] == "name", answer.body
    renamed = api("PATCH", f"/v1/jobs/{other['id']}", {"name": "0f0f0f0f-0000-4000-8000-000000000000"})
    assert renamed.status == 400


def test_run_vars_that_would_render_a_body_past_the_targets_limit_are_refused(api):
    """A var used many times made a body of megabytes from a request of kilobytes (8 MB sent to
    an HTTP target, 320 KB to an SQS queue that takes 256 KiB)."""
    http = created(api, job_body("vars-http", target={"type": "http", "url": "https://example.com/"}))
    inflated = {"body": "{{vars.a}}" * 1000, "vars": {"a": "A" * 8192}}
    refused = api("POST", f"/v1/jobs/{http['id']}/run", inflated)
    assert refused.status == 400 and refused.body["error"]["details"][0]["field"] == "vars", refused.body
    assert "at most 262144" in refused.body["error"]["details"][0]["message"]
    fits = {"body": "{{vars.a}}" * 10, "vars": {"a": "A" * 8192}}
    assert api("POST", f"/v1/jobs/{http['id']}/run", fits).status == 202
    # Into the target's own body when the run gives none; an AWS target counted in bytes.
    queue = created(api, job_body("vars-sqs", target={**SQS, "body": "{{vars.a}}" * 40}))
    refused = api("POST", f"/v1/jobs/{queue['id']}/run", {"vars": {"a": "é" * 4096}})
    assert refused.status == 400 and refused.body["error"]["details"][0]["field"] == "vars", refused.body
    assert api("POST", f"/v1/jobs/{queue['id']}/run", {"vars": {"a": "x" * 100}}).status == 202


def test_a_runs_vars_are_held_to_the_limit_of_the_targets_own_body(api):
    """One rule (``body_limit``) for both: an SNS subject counts against a run's message, as it
    does against the job's; an event's detail has no identity attributes to leave room for."""
    many = "{{vars.a}}" * 40  # a var is at most 8,192 characters
    topic = created(api, job_body("vars-sns", target={**SNS, "subject": "s" * 99, "message": many}))
    room = 262144 - 400 - 99  # less the identity attributes and the subject
    refused = api("POST", f"/v1/jobs/{topic['id']}/run", {"vars": {"a": "m" * (room // 40 + 1)}})
    assert refused.status == 400 and refused.body["error"]["details"][0]["field"] == "vars", refused.body
    assert api("POST", f"/v1/jobs/{topic['id']}/run", {"vars": {"a": "m" * (room // 40)}}).status == 202
    bus = created(api, job_body("vars-bus", target={**EVENTBRIDGE, "detail": '{"k": "' + many + '"}'}))
    beside = len(EVENTBRIDGE["source"]) + len(EVENTBRIDGE["detail_type"]) + len(EVENTBRIDGE["event_bus_arn"])
    fits = (262144 - beside - 9) // 40  # past 262144 - 400, which the run's check alone held to
    assert 9 + 40 * fits > 262144 - 400
    assert api("POST", f"/v1/jobs/{bus['id']}/run", {"vars": {"a": "d" * fits}}).status == 202


def test_an_aws_body_is_sized_with_a_chained_runs_cause_at_its_longest(api):
    """The docs' "once rendered (placeholders at their longest)" now counts {{cause.*}}: a body
    that a cause's answer excerpt would take past the service's limit is refused."""
    body = "a" * (262144 - 2000) + "{{cause.response_excerpt}}"
    answer = api("POST", "/v1/jobs", job_body("cause-sqs", target={**SQS, "body": body}))
    assert answer.status == 400 and answer.body["error"]["details"][0]["field"] == "target.body", answer.body
    small = "a" * 1000 + "{{cause.response_excerpt}}"
    assert api("POST", "/v1/jobs", job_body("cause-sqs", target={**SQS, "body": small})).status == 201


@pytest.mark.parametrize(
    ("target", "field"),
    [
        ({"routing_key": "é" * 200}, "target.routing_key"),
        ({"exchange": "x" + "ü" * 130}, "target.exchange"),
        ({"content_type": "text/" + "é" * 126}, "target.content_type"),
        ({"headers": {f"h{i}": "v" * 8000 for i in range(20)}}, "target.headers"),
    ],
)
def test_amqp_fields_past_what_the_broker_takes_are_refused_when_written(api, target, field):
    """Accepted before, then every delivery failed: a routing key or exchange of 255 characters
    but more bytes; headers past the broker's frame (it closed the connection at each attempt)."""
    body = job_body("amqp-edge", target={"type": "amqp", "url": "amqp://guest:guest@127.0.0.1:5672/", **target})
    answer = api("POST", "/v1/jobs", body)
    assert answer.status == 400 and field in answer.fields, answer.body


def test_a_page_of_big_jobs_is_cut_to_what_a_lambda_can_answer(api):
    """14 jobs whose bodies are 256 KiB of quotes made a page of 7 MB (each quote escaped): past a
    Lambda's 6 MB. The page is cut by its size, and the next ones carry the rest."""
    body = '"' * 262_000
    for i in range(14):
        target = {"type": "http", "url": "https://example.com/", "body": body}
        assert api("POST", "/v1/jobs", job_body(f"big-{i:02}", tags=["big"], target=target)).status == 201
    names, cursor, pages = [], None, 0
    while True:
        answer = api("GET", "/v1/jobs", query={"tag": "big", **({"cursor": cursor} if cursor else {})})
        assert answer.status == 200, answer.body
        assert len(json.dumps(answer.raw)) < 6_000_000  # the Lambda's answer, its body escaped in it
        names += [job["name"] for job in answer.body["jobs"]]
        pages += 1
        cursor = answer.body["next_cursor"]
        if cursor is None:
            break
    assert names == [f"big-{i:02}" for i in range(14)] and pages > 1


def test_a_page_of_jobs_with_non_ascii_bodies_is_sized_as_answered(api):
    """Non-ASCII text is answered escaped (an emoji is 12 bytes of JSON, 4 of UTF-8): the page's
    budget counts it so, or 9 jobs of 65,000 emojis came to 7 MB."""
    body = "\U0001f600" * 65_000
    for i in range(12):
        target = {"type": "http", "url": "https://example.com/", "body": body}
        assert api("POST", "/v1/jobs", job_body(f"emoji-{i:02}", tags=["emoji"], target=target)).status == 201
    answer = api("GET", "/v1/jobs", query={"tag": "emoji", "limit": "50"})
    assert answer.status == 200 and answer.body["next_cursor"] is not None
    assert len(json.dumps(answer.raw)) < 6_000_000

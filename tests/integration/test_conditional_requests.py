"""Conditional requests on every route that changes a job, a calendar or a rule set (RFC 9110:
a condition the server does not evaluate must not be ignored): ``If-Match`` on a delete, a pause
and a resume (412 and nothing changed when stale, with the current version in ``ETag``), and
``If-None-Match: *`` on a replacement that never creates (412 when the resource exists, 404 as
without it when it does not). An outside audit found each of them ignored."""

from __future__ import annotations

import requests

from scheduler.client import SchedulerClient
from scheduler.core.errors import SchedulerError
from tests.integration.test_alerts import rule
from tests.integration.test_api import ALICE, BOB, Client, api, box, create, job_body  # noqa: F401 (pytest fixtures)
from tests.integration.test_concurrent_api import served  # noqa: F401 (pytest fixtures)

CALENDAR = {"timezone": "UTC", "dates": ["2030-01-01"]}


def _stale(answer, current: int) -> None:
    assert answer.status == 412 and answer.fields == ["If-Match"], answer.body
    assert answer.headers.get("ETag") == f'"{current}"'


def test_a_delete_with_a_stale_if_match_deletes_nothing(api: Client):
    job = create(api)
    assert api("PATCH", f"/v1/jobs/{job['id']}", {"description": "moved on"}).body["version"] == 2
    _stale(api("DELETE", f"/v1/jobs/{job['id']}", headers={"If-Match": '"1"'}), 2)
    assert api("GET", f"/v1/jobs/{job['id']}").status == 200
    bad = api("DELETE", f"/v1/jobs/{job['id']}", headers={"If-Match": "yesterday"})
    assert bad.status == 400 and bad.fields == ["If-Match"]
    assert api("DELETE", f"/v1/jobs/{job['id']}", headers={"If-Match": "1"}, principal=BOB).status == 404
    assert api("DELETE", f"/v1/jobs/{job['id']}", headers={"If-Match": '"2"'}).status == 204
    assert api("GET", f"/v1/jobs/{job['id']}").status == 404


def test_a_calendar_and_a_rule_set_deleted_only_at_the_version_named(api: Client):
    assert api("POST", "/v1/calendars", {"name": "closures", **CALENDAR}).status == 201
    assert api("PUT", "/v1/calendars/closures", {**CALENDAR, "dates": ["2030-01-02"]}).body["version"] == 2
    _stale(api("DELETE", "/v1/calendars/closures", headers={"If-Match": "1"}), 2)
    assert api("GET", "/v1/calendars/closures").status == 200
    assert api("DELETE", "/v1/calendars/closures", headers={"If-Match": "2"}).status == 204

    body = {"tag": "billing", "alerts": [rule("failure")]}
    assert api("PUT", "/v1/alert-rules/team", body).status == 201
    assert api("PUT", "/v1/alert-rules/team", {**body, "tag": "ops"}).body["version"] == 2
    _stale(api("DELETE", "/v1/alert-rules/team", headers={"If-Match": "1"}), 2)
    assert api("GET", "/v1/alert-rules/team").body["tag"] == "ops"
    assert api("DELETE", "/v1/alert-rules/team", headers={"If-Match": "2"}).status == 204
    assert api("GET", "/v1/alert-rules/team").status == 404


def test_a_pause_and_a_resume_with_a_stale_if_match_change_nothing(api: Client):
    job = create(api)
    path = f"/v1/jobs/{job['id']}"
    assert api("PATCH", path, {"description": "moved on"}).body["version"] == 2
    _stale(api("POST", f"{path}/pause", headers={"If-Match": "1"}), 2)
    assert api("GET", path).body["state"] == "active"
    paused = api("POST", f"{path}/pause", headers={"If-Match": "2"})
    assert paused.status == 200 and paused.body["state"] == "paused" and paused.body["version"] == 3
    _stale(api("POST", f"{path}/resume", headers={"If-Match": "2"}), 3)
    assert api("GET", path).body["state"] == "paused"
    assert api("POST", f"{path}/resume", headers={"If-Match": '"3"'}).body["state"] == "active"


def test_if_none_match_on_a_replacement_that_never_creates(api: Client):
    """A job's PUT and PATCH and a calendar's PUT only change what exists: ``If-None-Match: *``
    answers 412 (nothing written) over one that exists, 404 where there is none; another value,
    or both conditions, is a 400."""
    job = create(api)
    path = f"/v1/jobs/{job['id']}"
    for method, body in (("PUT", {**job_body(), "description": "x"}), ("PATCH", {"description": "x"})):
        refused = api(method, path, body, headers={"If-None-Match": "*"})
        assert refused.status == 412 and refused.fields == ["If-None-Match"], refused.body
    assert api("GET", path).body["version"] == 1
    gone = "/v1/jobs/8d2f5c1e-8a3b-4d51-9f0e-3c1f0b7a2e61"
    assert api("PATCH", gone, {"description": "x"}, headers={"If-None-Match": "*"}).status == 404
    for headers in ({"If-None-Match": '"1"'}, {"If-None-Match": "*", "If-Match": "1"}, {"If-None-Match": ""}):
        bad = api("PATCH", path, {"description": "x"}, headers=headers)
        assert bad.status == 400 and bad.fields == ["If-None-Match"], (headers, bad.body)

    assert api("POST", "/v1/calendars", {"name": "closures", **CALENDAR}).status == 201
    refused = api("PUT", "/v1/calendars/closures", CALENDAR, headers={"If-None-Match": "*"})
    assert refused.status == 412 and refused.fields == ["If-None-Match"], refused.body
    assert api("PUT", "/v1/calendars/nope", CALENDAR, headers={"If-None-Match": "*"}).status == 404
    assert api("GET", "/v1/calendars/closures").body["version"] == 1


def _history(api: Client, path: str) -> list[str]:
    return [entry["action"] for entry in api("GET", f"{path}/changes").body["changes"]]


def test_a_refused_delete_writes_no_change_log_entry(api: Client):
    """The delete and its entry are one transaction: a stale version refuses both."""
    job = create(api)
    api("PATCH", f"/v1/jobs/{job['id']}", {"description": "moved on"})
    assert api("DELETE", f"/v1/jobs/{job['id']}", headers={"If-Match": "1"}).status == 412
    assert _history(api, f"/v1/jobs/{job['id']}") == ["update", "create"]
    assert api("POST", "/v1/calendars", {"name": "closures", **CALENDAR}).status == 201
    api("PUT", "/v1/calendars/closures", {**CALENDAR, "dates": ["2030-01-02"]})
    assert api("DELETE", "/v1/calendars/closures", headers={"If-Match": "1"}).status == 412
    assert _history(api, "/v1/calendars/closures") == ["update", "create"]
    body = {"tag": "billing", "alerts": [rule("failure")]}
    api("PUT", "/v1/alert-rules/team", body)
    api("PUT", "/v1/alert-rules/team", {**body, "tag": "ops"})
    assert api("DELETE", "/v1/alert-rules/team", headers={"If-Match": "1"}).status == 412
    assert _history(api, "/v1/alert-rules/team") == ["update", "create"]


def test_a_malformed_if_match_on_a_pause_and_a_calendar_in_use_at_its_version(api: Client):
    job = create(api)
    for action in ("pause", "resume"):
        bad = api("POST", f"/v1/jobs/{job['id']}/{action}", headers={"If-Match": "soon"})
        assert bad.status == 400 and bad.fields == ["If-Match"], bad.body
    assert api("GET", f"/v1/jobs/{job['id']}").body["state"] == "active"
    assert api("POST", "/v1/calendars", {"name": "closures", **CALENDAR}).status == 201
    assert api("PATCH", f"/v1/jobs/{job['id']}", {"exclude_calendars": ["closures"]}).status == 200
    in_use = api("DELETE", "/v1/calendars/closures", headers={"If-Match": "1"})  # its version: still named
    assert in_use.status == 409 and in_use.body["error"]["code"] == "calendar_in_use", in_use.body


def test_an_empty_if_none_match_through_local_mode_leaves_a_rule_set_as_it_is(served):
    """The audit's case end to end, through waitress and local mode's adapter: an empty
    ``If-None-Match`` is refused (400), where it was dropped and the set replaced."""
    body = {"tag": "billing", "alerts": [rule("failure")]}
    assert requests.put(served.url + "/v1/alert-rules/team", json=body, timeout=10).status_code == 201
    refused = requests.put(
        served.url + "/v1/alert-rules/team", json={**body, "tag": "ops"}, headers={"If-None-Match": ""}, timeout=10
    )
    assert refused.status_code == 400, refused.text
    assert requests.get(served.url + "/v1/alert-rules/team", timeout=10).json()["tag"] == "billing"


def test_the_sdk_sends_if_match_on_a_delete_a_pause_and_a_resume(served):
    client = SchedulerClient(served.url)
    job = client.jobs.create(job_body("sdk-held"))
    client.jobs.update(job, {"description": "moved on"})
    for call in (
        lambda: client.jobs.pause(job, if_match=1),
        lambda: client.jobs.resume(job, if_match=1),
        lambda: client.jobs.delete(job, if_match=1),
    ):
        try:
            call()
        except SchedulerError as exc:
            assert getattr(exc, "status", None) == 412, exc
        else:
            raise AssertionError("a stale version was not refused")
    paused = client.jobs.pause(job, if_match=2)
    assert paused.paused and client.jobs.resume(job, if_match=paused.version).version == 4
    client.jobs.delete(job, if_match=4)
    assert [j.name for j in client.jobs.list()] == []


def test_a_stale_rule_set_edit_is_a_412_even_where_its_secret_is_gone(api: Client):
    """The console's case: a rule set edited with its bearer token kept (``***``), while elsewhere
    it was replaced by rules without one. The edit is stale: 412, said before the secrets are read
    (it was a 400 about a masked secret with nothing stored, which hid that the set had changed)."""
    hook = {"type": "http", "url": "https://hooks.example.com/x"}
    sealed = {**hook, "auth": {"type": "bearer", "token": "s3cret-token"}}
    assert (
        api("PUT", "/v1/alert-rules/team", {"tag": "ops", "alerts": [{"on": "failure", "target": sealed}]}).status
        == 201
    )
    replaced = api("PUT", "/v1/alert-rules/team", {"tag": "ops", "alerts": [{"on": "failure", "target": hook}]})
    assert replaced.status == 200 and replaced.body["version"] == 2
    kept = {**hook, "auth": {"type": "bearer", "token": "***"}}
    stale = api(
        "PUT",
        "/v1/alert-rules/team",
        {"tag": "ops", "alerts": [{"on": "failure", "target": kept}]},
        headers={"If-Match": "1"},
    )
    _stale(stale, 2)

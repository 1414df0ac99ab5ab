"""The change logs of calendars and alert rule sets through the API handler on real Postgres:
every create, update and delete recorded with who, when, the version and the diff (an alert
target's secrets masked), in the transaction of the change; kept after the delete, purged with the
executions' retention; each owner sees only its own."""

from __future__ import annotations

from typing import Any

from tests.integration.test_alert_rules import put
from tests.integration.test_alerts import rule
from tests.integration.test_api import ALICE, BOB, api, box, create, job_body  # noqa: F401 - fixtures


def changes(api, path: str, principal: str = ALICE, **query: Any) -> list[dict[str, Any]]:
    answer = api("GET", f"{path}/changes", principal=principal, query=query or None)
    assert answer.status == 200, answer.body
    return answer.body["changes"]


def test_a_calendars_create_replace_and_delete_are_recorded_with_their_diff(api):
    path = "/v1/calendars/plant"
    assert api("POST", "/v1/calendars", {"name": "plant", "dates": ["2026-12-24"]}).status == 201
    assert api("PUT", path, {"timezone": "Europe/Paris", "dates": ["2026-12-24", "2026-12-31"]}).status == 200
    assert api("PUT", path, {"timezone": "Europe/Paris", "yearly": ["12-25"]}, headers={"If-Match": "2"}).status == 200
    log = changes(api, path)
    assert [(c["action"], c["version"], c["by"]) for c in log] == [
        ("update", 3, ALICE),
        ("update", 2, ALICE),
        ("create", 1, ALICE),
    ]
    assert log[2]["diff"] == {"dates": {"from": None, "to": ["2026-12-24"]}, "timezone": {"from": None, "to": "UTC"}}
    assert log[1]["diff"] == {
        "dates": {"from": ["2026-12-24"], "to": ["2026-12-24", "2026-12-31"]},
        "timezone": {"from": "UTC", "to": "Europe/Paris"},
    }
    assert log[0]["diff"] == {
        "dates": {"from": ["2026-12-24", "2026-12-31"], "to": None},
        "yearly": {"from": None, "to": ["12-25"]},
    }
    assert api("DELETE", path).status == 204
    assert api("GET", path).status == 404
    deleted = changes(api, path)[0]  # kept after the delete: what it excluded, as "from"
    assert (deleted["action"], deleted["version"]) == ("delete", 3)
    assert deleted["diff"] == {
        "timezone": {"from": "Europe/Paris", "to": None},
        "yearly": {"from": ["12-25"], "to": None},
    }
    # A name made again reads on after its delete.
    assert api("POST", "/v1/calendars", {"name": "plant", "dates": ["2027-01-01"]}).status == 201
    assert [c["action"] for c in changes(api, path)] == ["create", "delete", "update", "update", "create"]


def test_a_refused_calendar_write_leaves_no_entry(api):
    assert api("POST", "/v1/calendars", {"name": "shop", "dates": ["2026-12-24"]}).status == 201
    assert api("PUT", "/v1/calendars/shop", {"dates": ["not-a-date"]}).status == 400
    assert api("PUT", "/v1/calendars/shop", {"dates": ["2026-12-25"]}, headers={"If-Match": "7"}).status == 412
    assert api("POST", "/v1/calendars", {"name": "shop", "dates": ["2026-12-25"]}).status == 409
    used = job_body("uses-shop", exclude_calendars=["shop"])
    assert api("POST", "/v1/jobs", used).status == 201
    assert api("DELETE", "/v1/calendars/shop").status == 409  # in use
    assert [c["action"] for c in changes(api, "/v1/calendars/shop")] == ["create"]


def test_a_calendar_without_a_log_or_a_calendar_is_404_and_each_owner_sees_its_own(api):
    assert api("GET", "/v1/calendars/nothing/changes").status == 404
    assert api("GET", "/v1/calendars/bad%20name/changes").status == 404
    assert api("POST", "/v1/calendars", {"name": "mine", "dates": ["2026-12-24"]}).status == 201
    assert api("GET", "/v1/calendars/mine/changes", principal=BOB).status == 404
    assert api("POST", "/v1/calendars", {"name": "mine", "yearly": ["01-01"]}, principal=BOB).status == 201
    assert [c["by"] for c in changes(api, "/v1/calendars/mine", principal=BOB)] == [BOB]
    assert [c["by"] for c in changes(api, "/v1/calendars/mine")] == [ALICE]


def test_a_rule_sets_log_names_the_field_of_the_rule_that_changed_and_masks_secrets(api):
    path = "/v1/alert-rules/billing-rules"
    auth = {"type": "bearer", "token": "rule-token-Zx81"}
    assert put(api, "billing-rules", "billing", [rule("failures_in_a_row", threshold=3, auth=auth)]).status == 201
    kept = {"type": "bearer", "token": "***"}  # sent back: the stored token is kept
    assert put(api, "billing-rules", "billing", [rule("failures_in_a_row", threshold=5, auth=kept)]).status == 200
    new = {"type": "bearer", "token": "rule-token-Nw22"}
    assert put(api, "billing-rules", "billing", [rule("failures_in_a_row", threshold=5, auth=new)]).status == 200
    answer = api("GET", f"{path}/changes")
    assert answer.status == 200
    for secret in ("rule-token-Zx81", "rule-token-Nw22", "enc:v1:"):
        assert secret not in str(answer.raw)
    token_change, threshold_change, created = answer.body["changes"]
    assert created["action"] == "create" and created["diff"]["tag"] == {"from": None, "to": "billing"}
    assert created["diff"]["alerts.0.target.auth.token"] == {"from": None, "to": "***", "secret": True}
    assert threshold_change["diff"] == {"alerts.0.threshold": {"from": 3, "to": 5}}
    assert token_change["diff"] == {"alerts.0.target.auth.token": {"from": "***", "to": "***", "secret": True}}
    assert api("DELETE", path).status == 204
    deleted = changes(api, path)[0]
    assert (deleted["action"], deleted["version"]) == ("delete", 3)
    assert deleted["diff"]["alerts.0.threshold"] == {"from": 5, "to": None}
    assert api("GET", f"{path}/changes", principal=BOB).status == 404
    assert api("GET", "/v1/alert-rules/never-made/changes").status == 404


def test_the_logs_outlive_their_delete_until_the_retention_purges_them(api, store, pool):
    assert api("POST", "/v1/calendars", {"name": "gone", "dates": ["2026-12-24"]}).status == 201
    assert api("DELETE", "/v1/calendars/gone").status == 204
    assert put(api, "gone-rules", "t", [rule("failure")]).status == 201
    assert api("DELETE", "/v1/alert-rules/gone-rules").status == 204
    assert api("POST", "/v1/calendars", {"name": "live", "dates": ["2026-12-24"]}).status == 201
    store.maintain_partitions(retention_days=30)
    assert len(changes(api, "/v1/calendars/gone")) == 2  # within the retention
    with pool.connection() as conn:
        conn.execute("UPDATE resource_changes SET at = at - interval '31 days'")
    assert store.maintain_partitions(retention_days=30).changes_purged == 4
    assert api("GET", "/v1/calendars/gone/changes").status == 404
    assert api("GET", "/v1/alert-rules/gone-rules/changes").status == 404
    assert [c["action"] for c in changes(api, "/v1/calendars/live")] == ["create"]  # a live one keeps its log


def test_calendar_changes_page_with_a_cursor(api):
    assert api("POST", "/v1/calendars", {"name": "paged", "dates": ["2026-01-01"]}).status == 201
    for day in range(2, 6):
        assert api("PUT", "/v1/calendars/paged", {"dates": [f"2026-01-0{day}"]}).status == 200
    seen, cursor = [], None
    while True:
        page = api("GET", "/v1/calendars/paged/changes", query={"limit": 2, **({"cursor": cursor} if cursor else {})})
        seen += [c["version"] for c in page.body["changes"]]
        if (cursor := page.body["next_cursor"]) is None:
            break
    assert seen == [5, 4, 3, 2, 1]
    assert api("POST", "/v1/calendars", {"name": "other", "dates": ["2026-01-01"]}).status == 201
    first = api("GET", "/v1/calendars/paged/changes", query={"limit": 2}).body["next_cursor"]
    bad = api("GET", "/v1/calendars/other/changes", query={"cursor": first})
    assert bad.status == 400 and bad.fields == ["cursor"]  # a cursor of another log


def test_a_calendar_replacement_that_moves_a_jobs_occurrence_leaves_a_replan_entry_in_its_log(api):
    """A replan moves the job's version on: its log says why (a client's If-Match then fails
    with the reason on record), by the caller who replaced the calendar."""
    assert api("POST", "/v1/calendars", {"name": "plant", "timezone": "UTC", "dates": ["2001-01-01"]}).status == 201
    body = job_body("daily-at-noon", schedule="0 12 * * *", timezone="UTC", exclude_calendars=["plant"])
    created = api("POST", "/v1/jobs", body)
    assert created.status == 201
    job = created.body
    path = f"/v1/jobs/{job['id']}"
    occurrence = job["next_run_at"]
    # The same dates again: nothing moves, no entry.
    assert api("PUT", "/v1/calendars/plant", {"timezone": "UTC", "dates": ["2001-01-01"]}, principal=BOB).status == 404
    assert api("PUT", "/v1/calendars/plant", {"timezone": "UTC", "dates": ["2001-01-02"]}).status == 200
    assert [c["action"] for c in changes(api, path)] == ["create"]
    # Excluding the day of the occurrence in hand moves it a day on.
    closed = {"timezone": "UTC", "dates": [occurrence[:10]]}
    assert api("PUT", "/v1/calendars/plant", closed, principal=ALICE).status == 200
    replanned = api("GET", path).body
    assert replanned["version"] == job["version"] + 1 and replanned["next_run_at"] > occurrence
    entry = changes(api, path)[0]
    assert (entry["action"], entry["by"], entry["version"]) == ("replan", ALICE, replanned["version"])
    assert entry["diff"] == {
        "calendars.plant.version": {"from": 2, "to": 3},
        "scheduled_at": {"from": occurrence, "to": replanned["next_run_at"]},
        "next_run_at": {"from": occurrence, "to": replanned["next_run_at"]},
    }
    # The If-Match made before it fails; made after it, it holds.
    stale = api("PATCH", path, {"description": "x"}, headers={"If-Match": str(job["version"])})
    assert stale.status == 412
    fresh = api("PATCH", path, {"description": "x"}, headers={"If-Match": str(replanned["version"])})
    assert fresh.status == 200

"""Alert rule sets by tag through the API's handler and the sweep on real Postgres: the resource
(PUT creates then replaces, list, get, delete; 400 naming the field; secrets sealed and masked),
each owner seeing only its own, and the sweep applying a set to every job of its owner with the
tag (tagged before or after), one alert per incident per rule, the recovery closing it, and
missing_run quiet while the job is paused."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from scheduler.core.domain import ChangedKind
from scheduler.core.errors import AlertRuleExists
from scheduler.runner.alerts import Alerts
from scheduler.secrets import decrypt_target_secrets, is_token
from tests.integration.test_alerts import SLACK, Recorder, add_execution, rule
from tests.integration.test_api import ALICE, BOB, Client, api, box, job_body  # noqa: F401 (pytest fixtures)


def put(api: Client, path_name: str, tag: str, alerts: list[dict[str, Any]], principal: str = ALICE, **extra: Any):
    return api("PUT", f"/v1/alert-rules/{path_name}", {"tag": tag, "alerts": alerts, **extra}, principal=principal)


def job(api: Client, name: str, tags: list[str], principal: str = ALICE, **extra: Any) -> dict[str, Any]:
    answer = api("POST", "/v1/jobs", job_body(name, tags=tags, **extra), principal=principal)
    assert answer.status == 201, answer.body
    return answer.body


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"tag": "billing", "alerts": [{"on": "late", "target": SLACK}]}, "alerts.0.threshold"),
        ({"tag": "billing", "alerts": [{"on": "failure", "target": {"type": "pigeon"}}]}, "alerts.0.target.type"),
        ({"tag": "billing", "alerts": []}, "alerts"),
        ({"tag": "billing", "alerts": [rule("failure")] * 11}, "alerts"),
        ({"tag": "", "alerts": [rule("failure")]}, "tag"),
        ({"alerts": [rule("failure")]}, "tag"),
        ({"tag": 3, "alerts": [rule("failure")]}, "tag"),
        ({"tag": "billing", "alerts": [rule("failure")], "name": "other"}, "name"),
        ({"tag": "billing", "alerts": [rule("failure")], "extra": 1}, "extra"),
    ],
)
def test_bad_rule_sets_are_a_400_naming_the_field(api, body, field):
    answer = api("PUT", "/v1/alert-rules/team", body)
    assert answer.status == 400, answer.body
    assert field in answer.fields, answer.body


def test_a_bad_name_is_a_400_on_put_and_absent_otherwise(api):
    assert api("PUT", "/v1/alert-rules/-x", {"tag": "t", "alerts": [rule("failure")]}).fields == ["name"]
    assert api("GET", "/v1/alert-rules/-x").status == 404
    assert api("DELETE", "/v1/alert-rules/-x").status == 404


def test_put_creates_then_replaces_with_secrets_sealed_and_masked(api, pool, box):
    auth = {"type": "bearer", "token": "rule-token-Zx81"}
    created = put(api, "billing-team", "billing", [rule("failures_in_a_row"), rule("recovery", auth=auth)])
    assert created.status == 201, created.body
    assert created.headers["Location"] == "/prod/v1/alert-rules/billing-team"  # under the stage
    body = created.body
    assert (body["name"], body["tag"], body["version"]) == ("billing-team", "billing", 1)
    assert body["alerts"][0]["threshold"] == 3 and body["alerts"][1]["target"]["auth"]["token"] == "***"
    assert "rule-token-Zx81" not in api.all_text()
    with pool.connection() as conn:
        stored = conn.execute("SELECT alerts FROM alert_rules WHERE name = 'billing-team'").fetchone()["alerts"]
    assert is_token(stored[1]["target"]["auth"]["token"])
    # Sent back as answered ("***"), with its name in the body: the secret kept, version 2.
    again = put(api, "billing-team", "payments", body["alerts"], name="billing-team")
    assert again.status == 200 and (again.body["version"], again.body["tag"]) == (2, "payments")
    with pool.connection() as conn:
        kept = conn.execute("SELECT alerts FROM alert_rules WHERE name = 'billing-team'").fetchone()["alerts"]
    assert decrypt_target_secrets(kept[1]["target"], box)["auth"]["token"] == "rule-token-Zx81"
    assert api("GET", "/v1/alert-rules/billing-team").body == again.body
    # A "***" with nothing stored at its place: refused, naming the field.
    refused = put(api, "fresh", "billing", [rule("failure", auth={"type": "bearer", "token": "***"})])
    assert refused.status == 400 and refused.fields == ["alerts.0.target.auth.token"], refused.body


def test_a_kept_secret_follows_its_rule_when_the_rules_are_reordered_or_removed(api, pool, box):
    # two hooks on one origin, each with its token: sent back reordered (or the first removed),
    # each "***" keeps its own hook's token, never the one that was at its place
    team_a = {"url": "https://hooks.example.com/team-a", "auth": {"type": "bearer", "token": "token-team-a"}}
    team_b = {"url": "https://hooks.example.com/team-b", "auth": {"type": "bearer", "token": "token-team-b"}}
    job = api("POST", "/v1/jobs", job_body("two-hooks", alerts=[rule("failure", **team_a), rule("recovery", **team_b)]))
    assert job.status == 201, job.body

    def tokens() -> dict[str, str]:
        with pool.connection() as conn:
            stored = conn.execute("SELECT alerts FROM job_specs WHERE id = %s", (job.body["id"],)).fetchone()["alerts"]
        return {a["target"]["url"]: decrypt_target_secrets(a["target"], box)["auth"]["token"] for a in stored}

    answered = api("GET", f"/v1/jobs/{job.body['id']}").body["alerts"]
    swapped = api("PATCH", f"/v1/jobs/{job.body['id']}", {"alerts": list(reversed(answered))})
    assert swapped.status == 200, swapped.body
    assert tokens() == {team_a["url"]: "token-team-a", team_b["url"]: "token-team-b"}
    shortened = api("PATCH", f"/v1/jobs/{job.body['id']}", {"alerts": [a for a in answered if a["on"] == "recovery"]})
    assert shortened.status == 200, shortened.body
    assert tokens() == {team_b["url"]: "token-team-b"}


def test_a_put_with_if_match_replaces_only_the_version_named_and_never_creates(api):
    assert put(api, "team", "billing", [rule("failure")]).status == 201
    replaced = api(
        "PUT", "/v1/alert-rules/team", {"tag": "payments", "alerts": [rule("failure")]}, headers={"If-Match": '"1"'}
    )
    assert replaced.status == 200 and replaced.body["version"] == 2 and replaced.headers["ETag"] == '"2"'
    stale = api("PUT", "/v1/alert-rules/team", {"tag": "ops", "alerts": [rule("failure")]}, headers={"If-Match": "1"})
    assert stale.status == 412 and stale.fields == ["If-Match"] and stale.headers["ETag"] == '"2"', stale.body
    assert "alert rule set" in stale.body["error"]["message"]
    assert api("GET", "/v1/alert-rules/team").body["tag"] == "payments"
    # With If-Match a PUT only replaces: a set deleted meanwhile is not created again.
    assert api("DELETE", "/v1/alert-rules/team").status == 204
    gone = api("PUT", "/v1/alert-rules/team", {"tag": "ops", "alerts": [rule("failure")]}, headers={"If-Match": "2"})
    assert gone.status == 412 and gone.fields == ["If-Match"] and "ETag" not in gone.headers, gone.body
    assert api("GET", "/v1/alert-rules/team").status == 404
    # Another owner's set of the same name is not the one matched.
    assert put(api, "team", "billing", [rule("failure")]).status == 201
    other = api(
        "PUT",
        "/v1/alert-rules/team",
        {"tag": "x", "alerts": [rule("failure")]},
        headers={"If-Match": "1"},
        principal=BOB,
    )
    assert other.status == 412 and api("GET", "/v1/alert-rules/team").body["tag"] == "billing"


def test_a_put_with_if_none_match_only_creates(api, store):
    """``If-None-Match: *`` (a console's "New rule set"): the set is created, and a set of that
    name is never replaced (412 naming the header), even by a create that lost a race to it."""
    body = {"tag": "billing", "alerts": [rule("failure")]}
    made = api("PUT", "/v1/alert-rules/team", body, headers={"If-None-Match": "*"})
    assert made.status == 201 and made.body["version"] == 1
    again = api("PUT", "/v1/alert-rules/team", {**body, "tag": "ops"}, headers={"If-None-Match": "*"})
    assert again.status == 412 and again.fields == ["If-None-Match"], again.body
    assert "an alert rule set named 'team' exists" in again.body["error"]["message"]
    assert api("GET", "/v1/alert-rules/team").body["tag"] == "billing"
    assert api("PUT", "/v1/alert-rules/mine", body, headers={"If-None-Match": "*"}, principal=BOB).status == 201
    for headers in ({"If-None-Match": '"1"'}, {"If-None-Match": "*", "If-Match": "1"}):
        refused = api("PUT", "/v1/alert-rules/team", body, headers=headers)
        assert refused.status == 400 and refused.fields == ["If-None-Match"], refused.body
    # Created meanwhile (after the API's read): the store's create-only statement writes nothing.
    with pytest.raises(AlertRuleExists):
        store.put_alert_rule(ALICE, "team", "ops", body["alerts"], by=ALICE, create_only=True)
    assert store.get_alert_rule(ALICE, "team").version == 1


def test_each_owner_sees_only_its_own_rule_sets(api):
    for name in ("a", "b", "c"):
        assert put(api, name, "billing", [rule("failure")]).status == 201
    assert put(api, "a", "ops", [rule("failure")], principal=BOB).status == 201  # Bob's own "a"
    page = api("GET", "/v1/alert-rules", query={"limit": 2})
    rest = api("GET", "/v1/alert-rules", query={"limit": 2, "cursor": page.body["next_cursor"]})
    assert [r["name"] for r in page.body["alert_rules"] + rest.body["alert_rules"]] == ["a", "b", "c"]
    assert rest.body["next_cursor"] is None
    assert [(r["name"], r["tag"]) for r in api("GET", "/v1/alert-rules", principal=BOB).body["alert_rules"]] == [
        ("a", "ops")
    ]
    assert api("GET", "/v1/alert-rules/b", principal=BOB).status == 404
    assert api("DELETE", "/v1/alert-rules/b", principal=BOB).status == 404
    assert api("GET", "/v1/alert-rules", query={"cursor": page.body["next_cursor"]}, principal=BOB).status == 400
    assert api("DELETE", "/v1/alert-rules/a").status == 204
    assert api("GET", "/v1/alert-rules/a").status == 404
    assert api("GET", "/v1/alert-rules/a", principal=BOB).body["tag"] == "ops"


def test_a_rule_set_alerts_for_every_job_with_its_tag_now_and_tagged_later(api, store, pool):
    before = job(api, "ledger", ["billing", "nightly"])
    other = job(api, "unrelated", ["ops"])
    assert put(api, "billing-team", "billing", [rule("failure"), rule("recovery")]).status == 201
    recorder = Recorder()
    alerts = Alerts(store, recorder)
    alerts.run_once()  # the states start at the set's writing: nothing to read yet
    add_execution(pool, before["id"], "failed")
    add_execution(pool, before["id"], "failed")
    add_execution(pool, other["id"], "failed")
    assert alerts.run_once() == (1, 1)  # one alert for the incident, none for the untagged job
    # A job tagged after the set was written: covered from its tagging on.
    later = job(api, "invoices", ["ops"])
    add_execution(pool, later["id"], "failed")  # before the tag: not its rules' business
    assert api("PATCH", f"/v1/jobs/{later['id']}", {"tags": ["ops", "billing"]}).status == 200
    alerts.run_once()
    add_execution(pool, later["id"], "failed")
    add_execution(pool, before["id"], "succeeded")
    assert alerts.run_once() == (2, 2)  # invoices' failure, ledger's recovery
    listed = api("GET", "/v1/alerts").body["alerts"]
    assert sorted((a["job_name"], a["on"], a["event"], a["rule"]) for a in listed) == [
        ("invoices", "failure", "fired", "billing-team"),
        ("ledger", "failure", "fired", "billing-team"),
        ("ledger", "recovery", "recovered", "billing-team"),
    ]
    assert listed[-1]["job_name"] == "ledger" and listed[-1]["event"] == "fired"  # the first, listed last
    assert "job ledger failed (failed)" in recorder.sent[0][0]["body"]
    # The set deleted: its jobs have no rules any more, and are no longer read.
    assert api("DELETE", "/v1/alert-rules/billing-team").status == 204
    add_execution(pool, before["id"], "failed")
    assert alerts.run_once() == (0, 0)
    assert store.alert_jobs() == []


def test_a_job_and_a_rule_set_each_alert_once_and_recover_their_own(api, store, pool):
    mine = job(api, "payroll", ["billing"], alerts=[rule("failures_in_a_row", 2, url="https://own.example.com/x")])
    put(api, "team", "billing", [rule("failure"), rule("recovery")])
    put(api, "quiet", "billing", [rule("late", 600), rule("recovery")])  # never alerts here: never recovers
    alerts = Alerts(store, Recorder())
    alerts.run_once()
    for _ in range(3):
        add_execution(pool, mine["id"], "failed")
    assert alerts.run_once() == (2, 2)  # the job's in a row, the team's failure: once each
    add_execution(pool, mine["id"], "failed")
    assert alerts.run_once() == (0, 0)
    add_execution(pool, mine["id"], "succeeded")
    assert alerts.run_once() == (1, 1)  # the team's recovery only (the job has none; quiet never fired)
    listed = api("GET", "/v1/alerts").body["alerts"]
    assert sorted((a["on"], a["event"], a["rule"]) for a in listed) == [
        ("failure", "fired", "team"),
        ("failures_in_a_row", "fired", None),
        ("recovery", "recovered", "team"),
    ]
    assert len({a["incident_id"] for a in listed}) == 1


def test_another_owners_rule_set_never_covers_my_jobs(api, store, pool):
    mine = job(api, "mine", ["billing"])
    put(api, "bobs", "billing", [rule("failure")], principal=BOB)
    alerts = Alerts(store, Recorder())
    alerts.run_once()
    add_execution(pool, mine["id"], "failed")
    assert alerts.run_once() == (0, 0)
    assert store.alert_jobs() == []
    assert api("GET", "/v1/alerts", principal=BOB).body["alerts"] == []


def test_missing_run_by_tag_stays_quiet_while_the_job_is_paused(api, store, pool):
    held = job(api, "held", ["watched"], schedule="@every 1s")
    running = job(api, "running", ["watched"], schedule="@every 1s")
    put(api, "watch", "watched", [rule("missing_run", 5)])
    assert api("POST", f"/v1/jobs/{held['id']}/pause").status == 200
    with pool.connection() as conn:
        conn.execute("UPDATE job_runs SET next_run_at = now() - interval '1 hour'")
    alerts = Alerts(store, Recorder())
    assert alerts.run_once() == (1, 1)
    assert alerts.run_once() == (0, 0)
    [alert] = api("GET", "/v1/alerts").body["alerts"]
    assert (alert["job_id"], alert["on"], alert["rule"]) == (running["id"], "missing_run", "watch")


def test_the_state_of_a_job_left_without_rules_is_purged(api, store, pool):
    tagged = job(api, "tagged", ["billing"])
    put(api, "team", "billing", [rule("failure")])
    Alerts(store, Recorder()).run_once()
    assert api("PATCH", f"/v1/jobs/{tagged['id']}", {"tags": []}).status == 200
    store.purge_alerts(30)
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM alert_states").fetchone()["n"] == 0


def test_concurrent_puts_creating_one_set_make_one_create_and_updates(store):
    """A PUT that lost the race to create a set updated the set the winner created without having
    read it (no prior set: a 500). It now runs again and logs an update of what it replaced."""
    writers, barrier, errors, created = 8, threading.Barrier(8), [], []
    alerts = [{"on": "failure", "target": {"type": "http", "url": "https://hooks.example.com/a", "method": "POST"}}]

    def put_one(i: int) -> None:
        barrier.wait()
        try:
            created.append(store.put_alert_rule(ALICE, "raced", f"tag-{i}", alerts, by=ALICE)[1])
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=put_one, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and sorted(created) == [False] * (writers - 1) + [True]
    assert store.get_alert_rule(ALICE, "raced").version == writers
    entries = store.list_resource_changes(ALICE, ChangedKind.ALERT_RULES, "raced")
    assert sorted(str(entry.action) for entry in entries) == ["create"] + ["update"] * (writers - 1)
    assert all(entry.diff for entry in entries if str(entry.action) == "update")


def test_a_rule_set_put_of_what_it_has_writes_nothing(api):
    first = put(api, "quiet", "billing", [rule("failure")])
    assert first.status == 201, first.body
    again = api(
        "PUT",
        "/v1/alert-rules/quiet",
        {"tag": "billing", "alerts": first.body["alerts"]},
        headers={"If-Match": f'"{first.body["version"]}"'},
    )
    assert again.status == 200 and again.body["version"] == first.body["version"], again.body
    assert put(api, "quiet", "billing", [rule("failure")]).body["version"] == first.body["version"]
    changes = api("GET", "/v1/alert-rules/quiet/changes").body["changes"]
    assert [entry["action"] for entry in changes] == ["create"]
    assert put(api, "quiet", "ops", [rule("failure")]).body["version"] == first.body["version"] + 1

"""A job's change log through the API handler on real Postgres: every create, update, pause,
resume, run and delete recorded with who, when (the database clock), the version and the diff,
secrets masked; kept after a delete, purged with the executions' retention; each owner sees
only its own jobs' changes."""

from __future__ import annotations

from typing import Any

from tests.integration.test_api import ALICE, BASIC_PW, BOB, api, box, create, job_body  # noqa: F401 - fixtures

ALICE_SESSION = "arn:aws:sts::111111111111:assumed-role/Deployer/alice-laptop"


def changes(api, job_id: str, principal: str = ALICE, **query: Any) -> list[dict[str, Any]]:
    answer = api("GET", f"/v1/jobs/{job_id}/changes", principal=principal, query=query or None)
    assert answer.status == 200, answer.body
    return answer.body["changes"]


def test_every_action_is_recorded_newest_first_with_its_version(api, pool):
    job = create(api)
    path = f"/v1/jobs/{job['id']}"
    assert api("PATCH", path, {"description": "new text"}).status == 200
    assert api("POST", f"{path}/pause").status == 200
    assert api("POST", f"{path}/resume").status == 200
    assert api("POST", f"{path}/run").status == 202
    log = changes(api, job["id"])
    assert [c["action"] for c in log] == ["run", "resume", "pause", "update", "create"]
    assert [c["version"] for c in log] == [4, 4, 3, 2, 1]
    assert all(set(c) == {"at", "by", "action", "version", "diff"} for c in log)
    assert all(c["by"] == ALICE and c["at"].endswith("Z") for c in log)
    assert log[3]["diff"] == {"description": {"from": "optional text", "to": "new text"}}
    assert log[2]["diff"] == {"state": {"from": "active", "to": "paused"}}
    assert log[1]["diff"] == {"state": {"from": "paused", "to": "active"}}
    assert log[4]["diff"]["schedule"] == {"from": None, "to": "0 3 * * *"}
    # The time is the database's: the transaction of the change.
    with pool.connection() as conn:
        [at] = conn.execute("SELECT at FROM job_changes WHERE action = 'create'").fetchone().values()
        created = conn.execute("SELECT created_at FROM job_specs").fetchone()["created_at"]
    assert at >= created


def test_a_secret_that_changed_shows_that_it_changed_never_its_value(api):
    job = create(api)
    target = dict(job["target"], auth={"type": "basic", "username": "u", "password": "a-new-secret-Qq9"})
    assert api("PATCH", f"/v1/jobs/{job['id']}", {"target": target}).status == 200
    header_auth = {
        "type": "header",
        "name": "X-Api-Key",
        "value": "header-secret-Kk8",
        "username": None,
        "password": None,
    }
    assert api("PATCH", f"/v1/jobs/{job['id']}", {"target": {"auth": header_auth}}).status == 200
    answer = api("GET", f"/v1/jobs/{job['id']}/changes")
    text = str(answer.raw)
    for secret in (BASIC_PW, "a-new-secret-Qq9", "header-secret-Kk8", "enc:v1:"):
        assert secret not in text
    header_change, password_change, created = answer.body["changes"]
    assert password_change["diff"] == {"target.auth.password": {"from": "***", "to": "***", "secret": True}}
    assert header_change["diff"]["target.auth.value"] == {"from": None, "to": "***", "secret": True}
    assert created["diff"]["target.auth.password"] == {"from": None, "to": "***", "secret": True}
    # An edit that keeps the secret ("***" sent back) shows no change of it.
    assert api("PATCH", f"/v1/jobs/{job['id']}", {"description": "x"}).status == 200
    assert set(changes(api, job["id"])[0]["diff"]) == {"description"}


def test_the_caller_is_the_session_of_an_assumed_role(api):
    job = create(api, principal=ALICE_SESSION)
    [entry] = changes(api, job["id"], principal="arn:aws:sts::111111111111:assumed-role/Deployer/other")
    assert entry["by"] == ALICE_SESSION and job["owner"] == "arn:aws:sts::111111111111:assumed-role/Deployer"


def test_the_log_outlives_the_delete_until_the_retention_purges_it(api, store, pool):
    job = create(api)
    assert api("DELETE", f"/v1/jobs/{job['id']}").status == 204
    assert api("GET", f"/v1/jobs/{job['id']}").status == 404
    assert [c["action"] for c in changes(api, job["id"])] == ["delete", "create"]
    assert changes(api, job["id"])[0]["version"] == 1
    store.maintain_partitions(retention_days=30)
    assert len(changes(api, job["id"])) == 2  # within the retention
    with pool.connection() as conn:
        conn.execute("UPDATE job_changes SET at = at - interval '31 days'")
    assert store.maintain_partitions(retention_days=30).changes_purged == 2
    assert api("GET", f"/v1/jobs/{job['id']}/changes").status == 404


def test_a_live_job_keeps_its_log_past_the_retention(api, store, pool):
    job = create(api)
    with pool.connection() as conn:
        conn.execute("UPDATE job_changes SET at = at - interval '90 days'")
    store.maintain_partitions(retention_days=30)
    assert [c["action"] for c in changes(api, job["id"])] == ["create"]


def test_each_owner_sees_only_its_own_jobs_changes(api):
    alices = create(api, job_body("same-name"), principal=ALICE)
    bobs = create(api, job_body("same-name"), principal=BOB)
    assert api("POST", f"/v1/jobs/{bobs['id']}/pause", principal=BOB).status == 200
    assert api("GET", f"/v1/jobs/{bobs['id']}/changes", principal=ALICE).status == 404
    assert api("GET", f"/v1/jobs/{alices['id']}/changes", principal=BOB).status == 404
    assert [c["by"] for c in changes(api, alices["id"])] == [ALICE]
    assert [c["action"] for c in changes(api, bobs["id"], principal=BOB)] == ["pause", "create"]
    # Another owner's attempts change nothing and leave no entry.
    assert api("POST", f"/v1/jobs/{alices['id']}/pause", principal=BOB).status == 404
    assert api("DELETE", f"/v1/jobs/{alices['id']}", principal=BOB).status == 404
    assert len(changes(api, alices["id"])) == 1
    # Deleted, Alice's log is still hers alone.
    assert api("DELETE", f"/v1/jobs/{alices['id']}").status == 204
    assert api("GET", f"/v1/jobs/{alices['id']}/changes", principal=BOB).status == 404


def test_changes_page_with_a_cursor(api):
    job = create(api)
    for i in range(4):
        assert api("PATCH", f"/v1/jobs/{job['id']}", {"description": f"d{i}"}).status == 200
    seen, cursor = [], None
    while True:
        query = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = api("GET", f"/v1/jobs/{job['id']}/changes", query=query).body
        seen += [c["version"] for c in page["changes"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [5, 4, 3, 2, 1]
    other = create(api, job_body("other"))
    bad = api("GET", f"/v1/jobs/{other['id']}/changes", query={"cursor": cursor or "x"})
    assert bad.status == 400 and bad.fields == ["cursor"]
    assert api("GET", "/v1/jobs/not-a-uuid/changes").status == 404
    assert api("GET", f"/v1/jobs/{job['id']}/changes", query={"limit": 0}).status == 400


def test_an_edit_that_fails_leaves_no_entry(api):
    job = create(api)
    create(api, job_body("taken"))
    assert api("PATCH", f"/v1/jobs/{job['id']}", {"name": "taken"}).status == 409
    stale = api("PATCH", f"/v1/jobs/{job['id']}", {"description": "x"}, headers={"If-Match": "7"})
    assert stale.status == 412
    assert [c["action"] for c in changes(api, job["id"])] == ["create"]


def test_an_update_that_changes_nothing_writes_nothing(api):
    """A PATCH of {} or of the values the job has, or a PUT of the job as it is, leaves the job
    at its version (a client's If-Match still holds) and records no empty entry."""
    job = create(api)
    path = f"/v1/jobs/{job['id']}"
    same_put = {k: v for k, v in job_body().items()}
    kept_secret = dict(job["target"], auth={"type": "basic", "username": "u", "password": "***"})
    for method, body in (
        ("PATCH", {}),
        ("PATCH", {"description": job["description"], "tags": job["tags"]}),
        ("PATCH", {"target": kept_secret}),
        ("PUT", {**same_put, "target": {**same_put["target"], "auth": kept_secret["auth"]}}),
    ):
        answer = api(method, path, body, headers={"If-Match": str(job["version"])})
        assert answer.status == 200, (method, body, answer.body)
        assert answer.body["version"] == job["version"], (method, body)
    assert [c["action"] for c in changes(api, job["id"])] == ["create"]
    assert api("PATCH", path, {"description": "moved"}).body["version"] == job["version"] + 1


def test_a_secret_sent_again_unchanged_writes_nothing(api, pool):
    """A job sent again with its secrets in plaintext, as they are stored (a PUT of the whole
    definition, a PATCH of its target, an AMQP URL's password, a credential header, an alert
    target's token), is no change: no new version, no entry, the stored encryption kept. A
    different value is a change; the same value for another host is sealed for it anew."""
    from tests.integration.test_api import AMQP_PW, amqp_body

    hook = {"type": "http", "url": "https://hooks.example.com/a", "auth": {"type": "bearer", "token": "tok-Zz81"}}
    body = job_body(alerts=[{"on": "failure", "target": hook}])
    body["target"]["headers"] = {"Content-Type": "application/json", "X-Api-Key": "key-Hh42"}
    job = create(api, body)
    amqp = create(api, amqp_body())
    path = f"/v1/jobs/{job['id']}"

    def stored() -> list[str]:
        with pool.connection() as conn:
            return [
                str(r["target"]) + str(r["alerts"])
                for r in conn.execute("SELECT target, alerts FROM job_specs ORDER BY id")
            ]

    before = stored()
    for method, where, sent in (
        ("PUT", path, body),
        ("PATCH", path, {"target": body["target"]}),
        ("PATCH", path, {"alerts": body["alerts"]}),
        ("PUT", f"/v1/jobs/{amqp['id']}", amqp_body()),
    ):
        answer = api(method, where, sent)
        assert answer.status == 200, (method, sent, answer.body)
        assert answer.body["version"] == 1, (method, sent)
    assert stored() == before
    assert [c["action"] for c in changes(api, job["id"])] == ["create"]
    assert AMQP_PW in amqp_body()["target"]["url"]

    changed = dict(body["target"], headers={"Content-Type": "application/json", "X-Api-Key": "key-Hh43"})
    answer = api("PATCH", path, {"target": changed})
    assert answer.body["version"] == 2
    assert changes(api, job["id"])[0]["diff"] == {
        "target.headers.X-Api-Key": {"from": "***", "to": "***", "secret": True}
    }
    moved = dict(changed, url="https://elsewhere.example.com/hook")
    assert api("PATCH", path, {"target": moved}).body["version"] == 3
    assert "target.headers.X-Api-Key" in changes(api, job["id"])[0]["diff"]  # sealed anew for the new host

"""A manual run with overrides (issue 33, item 5): ``POST /v1/jobs/{id}/run`` with ``{"body",
"headers", "vars"}`` delivers that run with them, and its execution records them as
``overrides``, credential-like header values as ``***`` (the delivery's copy is kept encrypted,
and cleared once the run is done). Real Postgres, a real HTTP target on loopback."""

from __future__ import annotations

import json

from scheduler.runner.executor import Executor
from scheduler.secrets import decrypt_target_secrets
from scheduler.targets.results import TargetPolicy
from tests.integration.test_api import ALICE, BOB, api, box, create, job_body  # noqa: F401 - fixtures

SECRET = "override-tok-Qp7r"


def _executor(store, box):
    return Executor(store, lambda target: decrypt_target_secrets(target, box), TargetPolicy(allow_private=True))


def _run_due(store, box):
    """Claim, deliver and record what is due, as local mode's runner does."""
    executor = _executor(store, box)
    claims = store.claim_and_start(10)
    return executor.record([executor.deliver(claim.started, claim.lock_token) for claim in claims])


def _local_job(api, target_server, name="override-me", **target):
    body = job_body(name, schedule="0 0 1 1 *")
    body["target"] = {
        "type": "http",
        "url": f"{target_server.url}/hook",
        "method": "POST",
        "headers": {"Content-Type": "application/json", "X-Team": "billing"},
        "body": '{"from": "job"}',
        **target,
    }
    return create(api, body)


def test_a_run_with_overrides_is_delivered_with_them_and_recorded_masked(api, store, box, pool, target_server):
    job = _local_job(api, target_server)
    answer = api(
        "POST",
        f"/v1/jobs/{job['id']}/run",
        {
            "body": '{"region": "{{vars.region}}", "at": "{{scheduled_at}}", "keep": "{{vars.unknown}}"}',
            "headers": {"x-team": "ops", "Authorization": f"Bearer {SECRET}"},
            "vars": {"region": "eu-west-1"},
        },
    )
    assert answer.status == 202, answer.body
    with pool.connection() as conn:  # at rest, the credential header is a secret-box token
        stored = conn.execute("SELECT manual_overrides::text AS o FROM job_runs WHERE job_id = %s", (job["id"],))
        assert SECRET not in stored.fetchone()["o"]
    [report] = _run_due(store, box)
    assert report.status == "succeeded"
    [request] = target_server.wait_for(1)
    sent = json.loads(request["body"])
    assert sent["region"] == "eu-west-1" and sent["keep"] == "{{vars.unknown}}" and sent["at"].endswith("Z")
    headers = {k.lower(): v for k, v in request["headers"].items()}
    assert headers["x-team"] == "ops" and headers["authorization"] == f"Bearer {SECRET}"
    assert headers["content-type"] == "application/json"  # the target's own, kept
    [execution] = api("GET", f"/v1/jobs/{job['id']}/executions").body["executions"]
    assert execution["trigger"] == "manual"
    assert execution["overrides"] == {
        "body": '{"region": "{{vars.region}}", "at": "{{scheduled_at}}", "keep": "{{vars.unknown}}"}',
        "headers": {"x-team": "ops", "Authorization": "***"},
        "vars": {"region": "eu-west-1"},
    }
    with pool.connection() as conn:  # the request is done: nothing of it kept on the job
        row = conn.execute("SELECT manual_overrides FROM job_runs WHERE job_id = %s", (job["id"],)).fetchone()
        assert row["manual_overrides"] is None
        assert SECRET not in conn.execute("SELECT overrides::text AS o FROM executions").fetchone()["o"]


def test_a_var_s_value_is_inserted_as_it_is_never_rendered_again(api, store, box, target_server):
    job = _local_job(api, target_server, name="vars-once", body="b={{vars.v}} a={{attempt}}")
    value = "{{job_id}} {{cause.error}} {{vars.v}}"
    assert api("POST", f"/v1/jobs/{job['id']}/run", {"vars": {"v": value}}).status == 202
    [report] = _run_due(store, box)
    assert report.status == "succeeded"
    [request] = target_server.wait_for(1)
    assert request["body"] == f"b={value} a=1".encode()


def test_a_run_without_overrides_is_the_job_as_it_is(api, store, box, target_server):
    job = _local_job(api, target_server, name="plain")
    assert api("POST", f"/v1/jobs/{job['id']}/run").status == 202
    assert api("POST", f"/v1/jobs/{job['id']}/run", {}).status == 202  # joins the pending request
    [report] = _run_due(store, box)
    assert report.status == "succeeded"
    [request] = target_server.wait_for(1)
    assert json.loads(request["body"]) == {"from": "job"}
    [execution] = api("GET", f"/v1/jobs/{job['id']}/executions").body["executions"]
    assert "overrides" not in execution


def test_the_next_run_after_an_overridden_one_has_none(api, store, box, target_server):
    job = _local_job(api, target_server, name="twice")
    api("POST", f"/v1/jobs/{job['id']}/run", {"body": "first"})
    _run_due(store, box)
    api("POST", f"/v1/jobs/{job['id']}/run")
    _run_due(store, box)
    bodies = [request["body"] for request in target_server.wait_for(2)]
    assert bodies == [b"first", b'{"from": "job"}']


def test_bad_overrides_are_400_naming_the_field(api, target_server):
    job = _local_job(api, target_server, name="bad")
    path = f"/v1/jobs/{job['id']}/run"
    cases = [
        ({"body": 3}, "body"),
        ({"headers": {"bad name": "x"}}, "headers"),
        ({"headers": {"X-Scheduler-Job-Id": "x"}}, "headers"),
        ({"headers": {"X-Line": "a\nb"}}, "headers"),
        ({"vars": {"1st": "x"}}, "vars"),
        ({"vars": {"ok": 1}}, "vars.ok"),
        ({"extra": True}, "extra"),
    ]
    for body, field in cases:
        answer = api("POST", path, body)
        assert answer.status == 400, (body, answer.body)
        assert any(f.startswith(field) for f in answer.fields), (body, answer.fields)
    get_job = _local_job(api, target_server, name="getter", method="GET", body=None)
    answer = api("POST", f"/v1/jobs/{get_job['id']}/run", {"body": "x"})
    assert answer.status == 400 and answer.fields == ["body"]


def test_another_callers_job_cannot_be_run_with_overrides(api, target_server):
    job = _local_job(api, target_server, name="mine")
    answer = api("POST", f"/v1/jobs/{job['id']}/run", {"body": "x"}, principal=BOB)
    assert answer.status == 404


def test_an_amqp_job_s_run_headers_must_fit_one_message_with_its_own(api):
    """A run's headers merged over an AMQP target's are held to the job's own rules: a name of
    at most 255 bytes (a short string), and at most 64 KiB in all (one frame of the broker's),
    else the broker closes the connection at every attempt: a 400 naming ``headers``."""
    from tests.integration.test_api import amqp_body

    job = create(api, amqp_body("amqp-run"))
    path = f"/v1/jobs/{job['id']}/run"
    for headers in ({f"X-Big-{i}": "v" * 8000 for i in range(20)}, {"n" * 256: "x"}):
        answer = api("POST", path, {"headers": headers})
        assert answer.status == 400 and answer.fields == ["headers"], answer.body
    assert api("POST", path, {"headers": {"X-Small": "x" * 1000}}).status == 202
    # Names compared without case, as the delivery merges them: an override replaces its header.
    body = amqp_body("amqp-big")
    body["target"]["headers"] = {f"X-Data-{i}": "v" * 8000 for i in range(6)}
    big = create(api, body)
    again = {f"x-data-{i}": "w" * 8000 for i in range(6)}
    assert api("POST", f"/v1/jobs/{big['id']}/run", {"headers": again}).status == 202

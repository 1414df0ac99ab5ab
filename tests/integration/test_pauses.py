"""A pause with a note and an end, resumed by the runner at its end, and the bulk pause and resume
(issue 33, item 6). Real Postgres: the API through its resolver, the fan-out as local mode and the
deployed fan-out run it."""

from __future__ import annotations

from datetime import timedelta

from scheduler import bulk_service, service
from scheduler.core.domain import Completion, Outcome, Pause
from scheduler.core.timeutil import format_time
from scheduler.runner.executor import Executor
from scheduler.runner.fanout import run_fanout
from scheduler.runner.in_process import InProcessDispatch
from scheduler.runner.telemetry import MemoryMetrics
from scheduler.targets.results import SUCCEEDED, TargetPolicy
from tests.integration.test_api import ALICE, BOB, api, box, create, job_body  # noqa: F401 - fixtures


def _db_now(store):
    return store.now()


def _pause_ended(pool, job_id):
    """Move a pause's end into the past, as if its time had come."""
    with pool.connection() as conn:
        conn.execute("UPDATE job_specs SET pause_until = now() - interval '1 second' WHERE id = %s", (job_id,))


def test_a_pause_with_a_note_and_an_end_shows_them_and_a_resume_clears_them(api, store):
    job = create(api)
    path = f"/v1/jobs/{job['id']}"
    assert "pause" not in job
    until = format_time(_db_now(store) + timedelta(hours=2))
    paused = api("POST", f"{path}/pause", {"note": "DB migration, ticket OPS-12", "until": until})
    assert paused.status == 200, paused.body
    pause = paused.body["pause"]
    assert pause["note"] == "DB migration, ticket OPS-12" and pause["until"] == until and pause["by"] == ALICE
    assert pause["at"].endswith("Z")
    assert api("GET", path).body["pause"] == pause
    # Paused again with another note: the note changes, the pause keeps its start.
    again = api("POST", f"{path}/pause", {"note": "still migrating"}).body["pause"]
    assert again["note"] == "still migrating" and again["until"] is None and again["at"] == pause["at"]
    # An edit keeps the pause.
    assert api("PATCH", path, {"description": "edited while paused"}).body["pause"] == again
    resumed = api("POST", f"{path}/resume")
    assert resumed.status == 200 and resumed.body["state"] == "active" and "pause" not in resumed.body
    plain = api("POST", f"{path}/pause")  # no body: a pause without a note or an end
    assert plain.body["pause"]["note"] is None and plain.body["pause"]["by"] == ALICE


def test_bad_pauses_are_400_naming_the_field(api, store):
    job = create(api)
    path = f"/v1/jobs/{job['id']}/pause"
    past = format_time(_db_now(store) - timedelta(minutes=1))
    for body, field in [
        ({"until": past}, "until"),
        ({"until": "tomorrow"}, "until"),
        ({"until": 1767225600}, "until"),
        ({"note": 3}, "note"),
        ({"note": "x" * 1025}, "note"),
        ({"reason": "x"}, "reason"),
    ]:
        answer = api("POST", path, body)
        assert answer.status == 400 and answer.fields == [field], (body, answer.body)
    assert api("GET", f"/v1/jobs/{job['id']}").body["state"] == "active"
    assert api("POST", path, {"note": "x"}, principal=BOB).status == 404


def test_the_runner_resumes_a_job_at_its_pauses_end_under_its_missed_run_policy(api, store, pool):
    job = create(api, job_body("every-minute", schedule="* * * * *", missed_runs="skip"))
    until = format_time(_db_now(store) + timedelta(hours=1))
    api("POST", f"/v1/jobs/{job['id']}/pause", {"note": "maintenance", "until": until})
    with pool.connection() as conn:  # paused ten minutes ago
        conn.execute(
            "UPDATE job_runs SET scheduled_at = date_trunc('minute', now()) - interval '10 minutes', "
            "next_run_at = date_trunc('minute', now()) - interval '10 minutes' WHERE job_id = %s",
            (job["id"],),
        )
    assert service.resume_expired_pauses(store) == []  # not yet
    _pause_ended(pool, job["id"])
    metrics = MemoryMetrics()
    invoker = InProcessDispatch(Executor(store, lambda t: t, TargetPolicy(), metrics), max_workers=2)
    run_fanout(store, invoker, budget_seconds=0, metrics=metrics, pauses=store)  # local mode's loop, one round
    invoker.close()
    resumed = api("GET", f"/v1/jobs/{job['id']}").body
    assert resumed["state"] == "active" and "pause" not in resumed
    assert resumed["next_run_at"] > format_time(_db_now(store))  # skip: nothing caught up
    [skipped] = api("GET", f"/v1/jobs/{job['id']}/executions", query={"status": "skipped"}).body["executions"]
    assert skipped["skip_reason"] == "paused" and skipped["skipped_count"] in (10, 11)
    assert metrics.total("PausesEnded") == 1
    assert metrics.total("SkippedOccurrences", reason="paused") == skipped["skipped_count"]
    # The resume is in the job's change log, made by the scheduler, at the version it left.
    resume, pause = api("GET", f"/v1/jobs/{job['id']}/changes").body["changes"][:2]
    assert (resume["action"], resume["by"], resume["version"]) == ("resume", "scheduler", resumed["version"])
    assert resume["diff"] == {"state": {"from": "paused", "to": "active"}} and pause["action"] == "pause"


def test_the_deployed_fan_outs_primary_resumes_ended_pauses_and_a_helper_does_not(api, store, pool):
    from scheduler.runner.fanout import run_lambda_invocation

    job = create(api, job_body("deployed"))
    api("POST", f"/v1/jobs/{job['id']}/pause", {"until": format_time(_db_now(store) + timedelta(hours=1))})
    _pause_ended(pool, job["id"])

    class NoLambda:
        def invoke(self, **_):  # pragma: no cover - nothing is due
            raise AssertionError("nothing is due")

    common = {"remaining_seconds": 30.0, "executor_function": "executor", "precision": "minute", "pauses": store}
    run_lambda_invocation({"helper": True, "seconds": 5}, store, NoLambda(), **common)
    assert api("GET", f"/v1/jobs/{job['id']}").body["state"] == "paused"
    run_lambda_invocation({}, store, NoLambda(), **common)
    assert api("GET", f"/v1/jobs/{job['id']}").body["state"] == "active"


def test_bulk_pause_and_resume_by_tag_or_name_prefix_touch_only_the_callers_jobs(api):
    ours = [create(api, job_body(f"etl-{i}", tags=["etl"])) for i in range(3)]
    other = create(api, job_body("report", tags=["billing"]))
    bobs = create(api, job_body("etl-bob", tags=["etl"]), principal=BOB)
    paused = api("POST", "/v1/jobs/pause", {"tag": "etl", "note": "warehouse down"})
    assert paused.status == 200, paused.body
    assert paused.body == {"jobs": [job["id"] for job in ours], "count": 3, "more": False}
    for job in ours:
        assert api("GET", f"/v1/jobs/{job['id']}").body["pause"]["note"] == "warehouse down"
    assert api("GET", f"/v1/jobs/{other['id']}").body["state"] == "active"
    assert api("GET", f"/v1/jobs/{bobs['id']}", principal=BOB).body["state"] == "active"
    # Only the jobs in the other state are changed: a second pause finds none to pause.
    assert api("POST", "/v1/jobs/pause", {"tag": "etl"}).body == {"jobs": [], "count": 0, "more": False}
    resumed = api("POST", "/v1/jobs/resume", {"name_prefix": "etl-"})
    assert resumed.body == {"jobs": [job["id"] for job in ours], "count": 3, "more": False}
    assert all(api("GET", f"/v1/jobs/{job['id']}").body["state"] == "active" for job in ours)


def test_a_bulk_change_plans_from_its_page_and_reads_again_only_a_job_changed_since(api, store, monkeypatch):
    """Each job is planned from the page that listed it (no second read of each: a round trip a
    job fewer); the write still checks its version, so a job edited after the page was read is
    read again and paused as it now is, and one deleted meanwhile is left out."""
    edited, deleted, plain = (create(api, job_body(f"etl-{i}", tags=["etl"])) for i in range(3))
    listed, pages, read_again = store.list_jobs, [], []

    def list_then_change(*args, **kwargs):
        page = listed(*args, **kwargs)
        pages.append(page)
        if len(pages) == 1:  # two of the first page's jobs change after it was read (the API shares the store)
            api("PATCH", f"/v1/jobs/{edited['id']}", {"description": "edited after the page was read"})
            api("DELETE", f"/v1/jobs/{deleted['id']}")
            read_again.clear()
        return page

    def get_job(owner, job_id):
        read_again.append(job_id)
        return type(store).get_job(store, owner, job_id)

    monkeypatch.setattr(store, "list_jobs", list_then_change)
    monkeypatch.setattr(store, "get_job", get_job)
    changed = bulk_service.pause_jobs(store, ALICE, tag="etl", pause=Pause(note="warehouse down"))
    assert [str(job.id) for job in changed.jobs] == [edited["id"], plain["id"]] and not changed.more
    assert sorted(read_again) == sorted([edited["id"], deleted["id"]])  # not the unchanged one
    now = api("GET", f"/v1/jobs/{edited['id']}").body
    assert now["state"] == "paused" and now["pause"]["note"] == "warehouse down"
    assert now["description"] == "edited after the page was read" and now["version"] == edited["version"] + 2
    assert api("GET", f"/v1/jobs/{plain['id']}").body["version"] == plain["version"] + 1


def test_bad_bulk_requests_are_400_naming_the_field(api, store):
    past = format_time(_db_now(store) - timedelta(minutes=1))
    for path, body, field in [
        ("/v1/jobs/pause", {}, "tag"),
        ("/v1/jobs/pause", {"tag": "a", "name_prefix": "b"}, "tag"),
        ("/v1/jobs/pause", {"tag": ""}, "tag"),
        ("/v1/jobs/pause", {"tag": "a", "until": past}, "until"),
        ("/v1/jobs/resume", {"name_prefix": 3}, "name_prefix"),
        ("/v1/jobs/resume", {"tag": "a", "note": "x"}, "note"),
    ]:
        answer = api("POST", path, body)
        assert answer.status == 400 and answer.fields == [field], (path, body, answer.body)
    assert api("GET", "/v1/jobs/pause").status in (404, 405)


def test_a_bulk_request_stops_at_its_limit_says_more_and_the_client_sends_it_again(api, store, box, monkeypatch):
    """1,000 a request (3 here): the answer says ``more`` while jobs it selects are left, and the
    client (CLI, SDK) sends it again until none are (the console's bulk buttons do the same)."""
    import threading
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    from scheduler.api.app import make_app
    from scheduler.client import SchedulerClient
    from scheduler.settings import Settings
    from scheduler.transport.http_adapter import make_wsgi_app

    monkeypatch.setattr(bulk_service, "BULK_LIMIT", 3)
    monkeypatch.setattr(bulk_service, "_BULK_PAGE", 2)
    ours = [create(api, job_body(f"etl-{i}", tags=["etl"])) for i in range(7)]
    first = api("POST", "/v1/jobs/pause", {"tag": "etl"}).body
    assert (first["count"], first["more"]) == (3, True)
    assert first["jobs"] == [job["id"] for job in ours[:3]]
    second = api("POST", "/v1/jobs/pause", {"tag": "etl"}).body
    assert (second["count"], second["more"]) == (3, True)
    last = api("POST", "/v1/jobs/pause", {"tag": "etl"}).body
    assert (last["count"], last["more"]) == (1, False)
    # Exactly the limit left: the answer knows none follow.
    for job in ours[:3]:
        assert api("POST", f"/v1/jobs/{job['id']}/resume").status == 200
    assert api("POST", "/v1/jobs/pause", {"tag": "etl"}).body["more"] is False

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args):
            pass

    app = make_wsgi_app(make_app(lambda: store, lambda: box, Settings()).resolve, lambda environ: ALICE)
    server = make_server("127.0.0.1", 0, app, handler_class=Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = SchedulerClient(f"http://127.0.0.1:{server.server_port}", sigv4=False)
        resumed = client.resume_jobs({"tag": "etl"})
    finally:
        server.shutdown()
    assert resumed == {"jobs": [job["id"] for job in ours], "count": 7}
    assert all(api("GET", f"/v1/jobs/{job['id']}").body["state"] == "active" for job in ours)


def test_a_pause_or_resume_that_changes_nothing_writes_nothing(api, store, pool):
    """No new version and no change-log entry (a client's If-Match stays good): a resume of an
    active job, a pause again with the same record, a pause of a completed job. The pause names
    the caller, a session of a role included, as the change log does."""
    session = "arn:aws:sts::111111111111:assumed-role/Worker/s2"
    job = create(api, principal=session)
    path = f"/v1/jobs/{job['id']}"
    assert api("POST", f"{path}/resume", principal=session).body["version"] == job["version"]
    paused = api("POST", f"{path}/pause", {"note": "n"}, principal=session).body
    assert paused["pause"]["by"] == session and paused["version"] == job["version"] + 1
    assert api("POST", f"{path}/pause", {"note": "n"}, principal=session).body["version"] == paused["version"]
    assert api("POST", f"{path}/pause", {"note": "m"}, principal=session).body["version"] == paused["version"] + 1
    with pool.connection() as conn:
        conn.execute("UPDATE job_runs SET state = 'completed', next_run_at = NULL WHERE job_id = %s", (job["id"],))
    completed = api("GET", path, principal=session).body
    assert api("POST", f"{path}/pause", principal=session).body["version"] == completed["version"]
    actions = [entry["action"] for entry in api("GET", f"{path}/changes", principal=session).body["changes"]]
    assert actions == ["pause", "pause", "create"]


def _lost_lines(caplog) -> list[tuple[str, str]]:
    """``(job_id, execution_id)`` of each warning that names an execution lost with its runner."""
    return [
        (record.job_id, record.execution_id)
        for record in caplog.records
        if record.levelname == "WARNING" and record.getMessage().startswith("execution lost with its runner")
    ]


def test_an_execution_lost_with_its_runner_while_its_job_was_paused_is_marked_lost_and_resumed(
    api, store, pool, caplog
):
    """A runner dies during a delivery, the job is paused meanwhile: nothing of the job is due, so
    no claim finds the orphan; the fan-out's pause check marks it lost once its lease expired,
    and a resume delivers the attempt again (at least once)."""
    from tests.support import expire_lease, make_due

    job = create(api, job_body("dies-paused", retry={"max_attempts": 3}))
    make_due(pool, job["id"])
    [claim] = store.claim_and_start(10)  # the runner took it, then died: nothing is recorded
    assert api("POST", f"/v1/jobs/{job['id']}/pause").status == 200
    metrics = MemoryMetrics()
    invoker = InProcessDispatch(Executor(store, lambda t: t, TargetPolicy(), metrics), max_workers=2)
    run_fanout(store, invoker, budget_seconds=0, metrics=metrics, pauses=store)
    [running] = api("GET", f"/v1/jobs/{job['id']}/executions").body["executions"]
    assert running["status"] == "running"  # its lease holds: its runner may still be delivering
    expire_lease(pool, job["id"])
    run_fanout(store, invoker, budget_seconds=0, metrics=metrics, pauses=store)
    invoker.close()
    [lost] = api("GET", f"/v1/jobs/{job['id']}/executions").body["executions"]
    assert lost["id"] == claim.started.execution_id and lost["status"] == "lost"
    assert "runner lost" in lost["error"] and lost["finished_at"] is not None
    assert metrics.total("Executions", status="lost") == 1
    assert _lost_lines(caplog) == [(job["id"], claim.started.execution_id)]  # named in the log
    paused = api("GET", f"/v1/jobs/{job['id']}").body
    assert paused["state"] == "paused" and paused["stats"]["last_status"] == "lost"
    # The stale runner cannot record anything now: its token is gone.
    done = service.complete_executions(
        store, [Completion(claim.job_id, claim.lock_token, claim.started.execution_id, Outcome(SUCCEEDED, False))]
    )
    assert done == [False]
    # The resume delivers the lost attempt again, as the next attempt.
    api("POST", f"/v1/jobs/{job['id']}/resume")
    [again] = store.claim_and_start(10)
    assert again.job_id == job["id"] and again.started.attempt == 2


def test_an_execution_lost_with_its_runner_after_its_job_was_edited_to_a_later_time_is_marked_lost(
    api, store, pool, caplog
):
    """An edit during a run moved the job's next attempt a year on: no claim would look at it
    before then. The edit noted the lease; once it ended, the fan-out's check marks the orphan
    lost, and the job keeps the time its edit planned."""
    from tests.support import expire_lease, make_due

    job = create(api, job_body("edited-during-run", schedule=None, run_at="2099-01-01T00:00:00Z"))
    make_due(pool, job["id"])
    [claim] = store.claim_and_start(10)  # the runner took it, then died
    edited = api("PATCH", f"/v1/jobs/{job['id']}", {"run_at": "2098-01-01T00:00:00Z"})
    assert edited.status == 200 and edited.body["next_run_at"] == "2098-01-01T00:00:00Z", edited.body
    metrics = MemoryMetrics()
    invoker = InProcessDispatch(Executor(store, lambda t: t, TargetPolicy(), metrics), max_workers=2)
    run_fanout(store, invoker, budget_seconds=0, metrics=metrics, pauses=store)
    assert api("GET", f"/v1/jobs/{job['id']}/executions").body["executions"][0]["status"] == "running"
    expire_lease(pool, job["id"])
    with pool.connection() as conn:  # the note's time has come with the lease's
        conn.execute("UPDATE lease_watch SET until = now() - interval '1 second' WHERE job_id = %s", (job["id"],))
    run_fanout(store, invoker, budget_seconds=0, metrics=metrics, pauses=store)
    invoker.close()
    [lost] = api("GET", f"/v1/jobs/{job['id']}/executions").body["executions"]
    assert lost["id"] == claim.started.execution_id and lost["status"] == "lost"
    assert _lost_lines(caplog) == [(job["id"], claim.started.execution_id)]
    after = api("GET", f"/v1/jobs/{job['id']}").body
    assert after["state"] == "active" and after["next_run_at"] == "2098-01-01T00:00:00Z"
    assert after["stats"]["last_status"] == "lost"
    with pool.connection() as conn:  # the note is gone with its lease
        assert (
            conn.execute("SELECT count(*) AS n FROM lease_watch WHERE job_id = %s", (job["id"],)).fetchone()["n"] == 0
        )


def test_a_noted_lease_kept_longer_is_noted_again_and_an_edit_of_an_idle_job_notes_nothing(api, store, pool):
    from tests.support import make_due

    idle = create(api, job_body("idle-edit"))
    api("PATCH", f"/v1/jobs/{idle['id']}", {"description": "no run under way"})
    job = create(api, job_body("kept-lease"))
    make_due(pool, job["id"])
    store.claim_and_start(10)  # running, its lease held well past now
    api("PATCH", f"/v1/jobs/{job['id']}", {"description": "edited during the run"})
    with pool.connection() as conn:
        rows = conn.execute("SELECT job_id::text AS job_id FROM lease_watch").fetchall()
        assert [row["job_id"] for row in rows] == [job["id"]]
        conn.execute("UPDATE lease_watch SET until = now() - interval '1 second'")  # noted too early
    assert store.mark_lost_while_not_due() == []  # the lease holds: nothing lost, the note moved on
    with pool.connection() as conn:
        [row] = conn.execute(
            "SELECT w.until, r.locked_until FROM lease_watch w JOIN job_runs r USING (job_id)"
        ).fetchall()
    assert row["until"] == row["locked_until"]

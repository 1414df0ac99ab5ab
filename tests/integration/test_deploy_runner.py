"""Deployment behaviour of the runner and the migrate function: the fan-out keeps the executor
within its reserved concurrency, and the migrate function ignores events of another version."""

from __future__ import annotations

import importlib
import io
import json
import logging
import sys
import threading
import uuid

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from scheduler.runner.dispatch import FULL_RECHECK_SECONDS, LambdaDispatch
from scheduler.runner.fanout import run_fanout
from scheduler.runner.telemetry import MemoryMetrics
from scheduler.settings import Settings
from scheduler.store.migrations import applied_versions, ensure_login, files_hash, migrate
from tests.support import expire_lease, insert_due_jobs


class RecordingLambda:
    """Stands in for the Lambda client: records async invokes; ``refuse`` makes them fail for good."""

    def __init__(self, refuse: bool = False) -> None:
        self.payloads: list[dict] = []
        self.refuse = refuse
        self._lock = threading.Lock()

    def invoke(self, FunctionName: str, InvocationType: str, Payload: bytes) -> dict:
        assert InvocationType == "Event"
        if self.refuse:
            error = RuntimeError("ResourceNotFoundException")
            error.response = {"Error": {"Code": "ResourceNotFoundException"}}  # type: ignore[attr-defined]
            raise error
        with self._lock:
            self.payloads.append(json.loads(Payload))
        return {"StatusCode": 202, "Payload": io.BytesIO(b"")}


def test_the_fanout_dispatches_no_more_than_the_executor_concurrency(store, pool):
    insert_due_jobs(pool, 10)
    client = RecordingLambda()
    counts = []

    def in_flight() -> int:
        counts.append(store.live_leases())
        return counts[-1]

    invoker = LambdaDispatch(client, "executor", max_in_flight=4, in_flight=in_flight)
    try:
        report = run_fanout(store, invoker, budget_seconds=1.2)
    finally:
        invoker.close()
    # The executors have not started (nothing completes here): the leases stay live, and a
    # second fan-out finds no room either.
    second = LambdaDispatch(client, "executor", max_in_flight=4, in_flight=store.live_leases)
    try:
        again = run_fanout(store, second, budget_seconds=0)
    finally:
        second.close()
    assert report.dispatched == len(client.payloads) == 4
    assert again.claimed == 0
    # Saturated, the fan-out counts the leases once per FULL_RECHECK_SECONDS, not on every idle
    # round (one every MIN_IDLE_SECONDS).
    assert 3 <= len(counts) <= 1.2 / FULL_RECHECK_SECONDS + 4, counts
    assert store.live_leases() == 4
    # The rest were never claimed: due and unleased, for when executors are free.
    assert store.due_backlog().claimable == 6


def fan_out_with_shares(store, max_in_flight: int) -> RecordingLambda:
    """One fan-out run keeping each owner to its share of ``max_in_flight`` leases, as deployed
    (``wiring.Dependencies.run_fanout_invocation``'s options); the invokes it sent."""
    client = RecordingLambda()
    invoker = LambdaDispatch(
        client,
        "executor",
        max_in_flight=max_in_flight,
        in_flight=store.live_leases,
        owners_over_share=store.owners_over_lease_share,
        defer=store.defer_claims,
    )
    try:
        run_fanout(store, invoker, budget_seconds=0)
    finally:
        invoker.close()
    return client


def test_no_owner_takes_more_than_its_share_of_the_executors(store, pool):
    """Three quarters of the reserved concurrency (6 of 8 leases): the claims that would take an
    owner past it are deferred (not leased, not claimable for a pause), and the others' jobs due
    later are dispatched (one owner's 1,000 slow jobs had held every executor)."""
    insert_due_jobs(pool, 10, owner="alice", prefix="a", due_offset_seconds=-2)
    insert_due_jobs(pool, 3, owner="bob", prefix="b", due_offset_seconds=-1)
    client = fan_out_with_shares(store, max_in_flight=8)
    with pool.connection() as conn:
        owners = {row["id"]: row["owner"] for row in conn.execute("SELECT id::text, owner FROM job_specs")}
        deferred = conn.execute(
            "SELECT count(*) AS n FROM job_runs WHERE lock_token IS NULL AND locked_until > now()"
        ).fetchone()["n"]
    sent = sorted(owners[payload["job_id"]] for payload in client.payloads)
    assert sent == ["alice"] * 6 + ["bob"] * 2
    assert deferred == 4 and store.live_leases() == 8
    assert store.owners_over_lease_share(6) == {}
    # The deferred claims are due and not under way: in the backlog and its age (alice's, due
    # first), though no claim can take them before their pause ends (no helper is started for them).
    backlog = store.due_backlog()
    assert (backlog.due, backlog.claimable) == (5, 1) and backlog.oldest_age_seconds >= 2.0


def test_a_single_owner_has_all_of_the_executors(store, pool):
    insert_due_jobs(pool, 10, owner="alice", prefix="a")
    client = fan_out_with_shares(store, max_in_flight=8)
    assert len(client.payloads) == 8 and store.live_leases() == 8  # no share while alone


def test_capacity_frees_as_leases_end(store, pool):
    insert_due_jobs(pool, 5)
    client = RecordingLambda()
    for _ in range(2):  # two fan-out invocations, each with its own invoker (as the handler makes)
        invoker = LambdaDispatch(client, "executor", max_in_flight=2, in_flight=store.live_leases)
        try:
            run_fanout(store, invoker, budget_seconds=0)
        finally:
            invoker.close()
        for payload in client.payloads:  # as if those executors had died: their leases expire
            expire_lease(pool, payload["job_id"])
    assert len(client.payloads) == 4


def test_what_cannot_be_dispatched_is_released_not_sent_to_the_dead_letter_queue(store, pool):
    insert_due_jobs(pool, 3)
    invoker = LambdaDispatch(
        RecordingLambda(refuse=True), "executor", max_in_flight=10, in_flight=store.live_leases, sleep=lambda s: None
    )
    try:
        report = run_fanout(store, invoker, budget_seconds=0, metrics=MemoryMetrics())
    finally:
        invoker.close()
    assert report.claimed == 3 and report.dispatched == 0 and report.released == 3
    assert store.live_leases() == 0 and store.due_backlog().claimable == 3


def test_unbounded_without_a_concurrency(store, pool):
    insert_due_jobs(pool, 6)
    client = RecordingLambda()
    invoker = LambdaDispatch(client, "executor")
    try:
        run_fanout(store, invoker, budget_seconds=0)
    finally:
        invoker.close()
    assert len(client.payloads) == 6


# -- the migrate function --------------------------------------------------------------------------


@pytest.fixture
def migrate_handler(monkeypatch):
    pytest.importorskip("aws_lambda_powertools")
    import migrate_handler

    return migrate_handler


def _event(request: str, digest: str | None) -> dict:
    event = {"RequestType": request, "PhysicalResourceId": "migrations", "ResourceProperties": {}}
    if digest is not None:
        event["ResourceProperties"]["MigrationsHash"] = digest
    return event


def test_the_hash_the_stack_gives_is_the_one_the_code_carries():
    infra_shared = pytest.importorskip("infra.shared")
    assert infra_shared.migrations_hash() == files_hash()


def test_an_event_of_another_version_migrates_nothing(migrate_handler, empty_db_url):
    settings = Settings(database_url=empty_db_url)
    called = []
    answer = migrate_handler.on_event(
        _event("Update", "0" * 64), settings, apply=lambda url, **_: called.append(url) or []
    )
    assert called == [] and answer["Data"]["Applied"] == 0
    assert applied_versions(empty_db_url) == []


def test_its_own_hash_migrates_and_sets_up_the_application_login(migrate_handler, empty_db_url, monkeypatch):
    username = f"app_{uuid.uuid4().hex[:8]}"

    class Secrets:
        def get_secret_value(self, SecretId):
            assert SecretId == "arn:app"
            return {"SecretString": json.dumps({"username": username, "password": "from-the-secret"})}

    settings = Settings(database_url=empty_db_url, database_app_secret_arn="arn:app")
    try:
        answer = migrate_handler.on_event(_event("Create", files_hash()), settings, secrets_client=Secrets())
        assert answer["Data"]["Applied"] >= 4 and answer["Data"]["AppLogin"] == "created"
        with psycopg.connect(empty_db_url) as conn:
            # The database's own role (0011), not the server-wide one of before.
            assert conn.execute("SELECT pg_has_role(%s, scheduler_data_role(), 'MEMBER')", (username,)).fetchone()[0]
            assert not conn.execute("SELECT pg_has_role(%s, 'scheduler_data', 'MEMBER')", (username,)).fetchone()[0]
        again = migrate_handler.on_event(_event("Update", files_hash()), settings, secrets_client=Secrets())
        assert again["Data"] == {**again["Data"], "Applied": 0, "AppLogin": "exists"}
        assert migrate_handler.on_event(_event("Delete", None), settings) == {"PhysicalResourceId": "migrations"}
    finally:
        with psycopg.connect(empty_db_url, autocommit=True) as conn:
            conn.execute(psycopg.sql.SQL("DROP ROLE IF EXISTS {}").format(psycopg.sql.Identifier(username)))


def test_the_migrate_functions_progress_lines_reach_its_log(empty_db_url, capsys, monkeypatch):
    """The migrations' lines (each migration applied, a wait for a lock) are written by the
    domain package's logger: the function routes them to its JSON log on stdout, as the other
    functions do (Lambda's root logger, at WARNING, would drop them)."""
    pytest.importorskip("aws_lambda_powertools")
    # A Powertools logger of its own, writing to this test's stdout (one made before keeps its stream).
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", f"migrate-{uuid.uuid4().hex[:8]}")
    domain = logging.getLogger("scheduler")
    kept = (domain.handlers[:], domain.propagate, domain.level)
    domain.handlers[:], domain.propagate = [], True  # as in a fresh process (another test may have routed it)
    domain.setLevel(logging.NOTSET)
    sys.modules.pop("migrate_handler", None)
    try:
        handler = importlib.import_module("migrate_handler")
        handler.on_event(_event("Create", files_hash()), Settings(database_url=empty_db_url))
    finally:
        domain.handlers[:], domain.propagate = kept[0], kept[1]
        domain.setLevel(kept[2])
        sys.modules.pop("migrate_handler", None)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    applied = [line for line in lines if line["message"].startswith("applying migration")]
    assert applied and applied[0]["message"] == "applying migration 0001_initial", lines
    assert {(line["level"], line["name"]) for line in applied} == {("INFO", "scheduler.store.migrations")}


def test_an_upgrade_through_the_migrate_function_never_refuses_its_login(migrate_handler, empty_db_url):
    """A deployment of 0010 migrated to 0011: the migrate function names the secret's login to
    the migrations, which move it to the database's own role in the transaction that takes the
    server-wide role's privileges away; a session of the login open across the upgrade (a warm
    function's) goes on reading and writing."""
    username = f"app_{uuid.uuid4().hex[:8]}"

    class Secrets:
        def get_secret_value(self, SecretId):
            return {"SecretString": json.dumps({"username": username, "password": "from-the-secret"})}

    migrate(empty_db_url, target=10)
    settings = Settings(database_url=empty_db_url, database_app_secret_arn="arn:app")
    held = None
    try:
        assert ensure_login(empty_db_url, username, "pw", role="scheduler_data") == "created"  # 0010's code
        held = psycopg.connect(make_conninfo(empty_db_url, user=username, password=""), autocommit=True)
        held.execute("UPDATE job_runs SET attempt = attempt")
        answer = migrate_handler.on_event(_event("Update", files_hash()), settings, secrets_client=Secrets())
        assert 11 in applied_versions(empty_db_url) and answer["Data"]["AppLogin"] == "exists"
        held.execute("UPDATE job_runs SET attempt = attempt")
        assert held.execute("SELECT count(*) FROM jobs").fetchone()[0] == 0
        assert held.execute("SELECT pg_has_role(current_user, scheduler_data_role(), 'MEMBER')").fetchone()[0]
    finally:
        if held is not None:
            held.close()
        with psycopg.connect(empty_db_url, autocommit=True) as conn:
            conn.execute(psycopg.sql.SQL("DROP ROLE IF EXISTS {}").format(psycopg.sql.Identifier(username)))

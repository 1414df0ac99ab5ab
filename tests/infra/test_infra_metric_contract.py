"""The metric contract: every scheduler metric the dashboard and the alarms read (namespace, name,
exact dimension set) is one the code emits.

The code paths that emit run for real (real Postgres, a real HTTP target on loopback): executor
success, failure, time-out, retry and manual runs, a lease reclaimed from a dead runner (``lost``),
and the fan-out. Their EMF documents are captured from stdout, as CloudWatch would read them from
the functions' logs. CloudWatch matches dimension sets exactly, so ``{service}`` does not match
``{service, trigger}``: the comparison does the same. The API emits no EMF of its own (its
widgets and alarms read API Gateway's metrics).
"""

from __future__ import annotations

import json
import re
import socket
import threading
from datetime import timedelta
from typing import Any

import pytest

pytest.importorskip("aws_cdk")

from scheduler import service
from scheduler.runner.executor import Executor
from scheduler.runner.fanout import run_fanout
from scheduler.runner.in_process import InProcessDispatch
from scheduler.runner.telemetry import EmfMetrics
from scheduler.targets.results import TargetPolicy
from tests.support import RecordingServer, expire_lease, http_spec, make_due

Metric = tuple[str, str, frozenset]  # namespace, name, {(dimension, value), ...}
OWNER = "arn:aws:iam::111111111111:user/metrics"


def _resolved(value: Any) -> str:
    """A template string with every token replaced by a placeholder (``Fn::Join`` flattened)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(_resolved(part) for part in parts)
    return "TOKEN"


def _alarm_metrics(props: dict) -> list[dict]:
    if "MetricName" in props:
        return [props]
    return [query["MetricStat"]["Metric"] for query in props.get("Metrics", []) if "MetricStat" in query]


def read_metrics(template: dict, namespace: str) -> set[Metric]:
    """The metrics of ``namespace`` that the template's alarms and dashboards read."""
    found: set[Metric] = set()
    for resource in template["Resources"].values():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::CloudWatch::Alarm":
            for metric in _alarm_metrics(props):
                dims = frozenset((d["Name"], _resolved(d["Value"])) for d in metric.get("Dimensions", []))
                found.add((metric["Namespace"], metric["MetricName"], dims))
        elif resource["Type"] == "AWS::CloudWatch::Dashboard":
            body = json.loads(_resolved(props["DashboardBody"]))
            for widget in body["widgets"]:
                for line in widget.get("properties", {}).get("metrics", []):
                    parts = [part for part in line if not isinstance(part, dict)]
                    if len(parts) < 2:
                        continue  # a math expression
                    ns, name, *pairs = parts
                    found.add((ns, name, frozenset(zip(pairs[::2], pairs[1::2]))))
    return {metric for metric in found if metric[0] == namespace}


# A dashboard's search expression: its namespace, dimension names and metric name (a search
# matches the metrics of exactly that dimension set, whatever their values).
_SEARCH = re.compile(r"SEARCH\('\{\"?([^\",]+)\"?,([^}]*)\} MetricName=\"([^\"]+)\"")


def searched_metrics(template: dict, namespace: str) -> set[tuple[str, str, frozenset]]:
    """(namespace, name, dimension names) of each search expression of the dashboard."""
    found = set()
    for resource in template["Resources"].values():
        if resource["Type"] != "AWS::CloudWatch::Dashboard":
            continue
        for widget in json.loads(_resolved(resource["Properties"]["DashboardBody"]))["widgets"]:
            for line in widget.get("properties", {}).get("metrics", []):
                expressions = [part["expression"] for part in line if isinstance(part, dict) and "expression" in part]
                for ns, names, metric in (match for e in expressions for match in _SEARCH.findall(e)):
                    found.add((ns, metric, frozenset(name.strip().strip('"') for name in names.split(","))))
    return {search for search in found if search[0] == namespace}


def emitted_metrics(lines: list[str]) -> set[Metric]:
    """The metrics of the EMF documents among ``lines`` (one per dimension set and name)."""
    found: set[Metric] = set()
    for line in lines:
        try:
            document = json.loads(line)
        except ValueError:
            continue
        if not isinstance(document, dict) or "_aws" not in document:
            continue
        for directive in document["_aws"]["CloudWatchMetrics"]:
            for dimension_set in directive["Dimensions"]:
                dims = frozenset((key, str(document[key])) for key in dimension_set)
                for metric in directive["Metrics"]:
                    found.add((directive["Namespace"], metric["Name"], dims))
    return found


def unmatched(read: set[Metric], emitted: set[Metric]) -> list[Metric]:
    """What the dashboard or an alarm reads that nothing emits (it would stay empty)."""
    return sorted(read - emitted, key=repr)


class _SilentServer:
    """Accepts connections and never answers: a target that times out."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/slow"

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


def _drain(store, metrics, **options: Any) -> None:
    invoker = InProcessDispatch(
        Executor(store, lambda target: target, TargetPolicy(allow_private=True), metrics), max_workers=8
    )
    try:
        run_fanout(store, invoker, budget_seconds=0, metrics=metrics, **options)
    finally:
        invoker.close()


@pytest.fixture(scope="module")
def aws_config(synthesize):
    return synthesize("aws")


def _run_every_emitting_path(store, pool, metrics) -> None:
    ok, failing, silent = RecordingServer(), RecordingServer(), _SilentServer()
    try:
        failing.responses["/fail"] = [(500, {}, b"no")]
        now = store.now()

        def one_off(name: str, url: str, **extra: Any) -> dict:
            target = {**http_spec("x")["target"], "url": url, "timeout_seconds": 1}
            spec = http_spec(name, None, url=url, run_at=now - timedelta(seconds=1), target=target, **extra)
            return service.create_job(store, OWNER, spec)

        one_off("ok", ok.url + "/ok")  # succeeded
        one_off(
            "fail",
            failing.url + "/fail",
            retry={"max_attempts": 1, "min_backoff_seconds": 1, "max_backoff_seconds": 1, "max_age_seconds": None},
        )
        one_off(
            "slow",
            silent.url,
            retry={"max_attempts": 1, "min_backoff_seconds": 1, "max_backoff_seconds": 1, "max_age_seconds": None},
        )  # timed out
        retried = one_off("retry", failing.url + "/fail")  # fails, then a retry
        manual = service.create_job(store, OWNER, http_spec("manual", "0 0 1 1 *", url=ok.url + "/manual"))
        store.request_run(OWNER, str(manual.id))
        _drain(store, metrics, retention_days=30)  # the partitions' upkeep too
        make_due(pool, str(retried.id))
        _drain(store, metrics)  # the retry (trigger=retry)

        # A limited job, its key free: its wait for the slot (none) is counted apart from its lateness.
        one_off("limited", ok.url + "/limited", limits={"key": "free", "max_in_flight": 1})
        _drain(store, metrics)
        # A limited delivery handed back (local mode's, with no room to wait): HandedBackForSlot.
        one_off("held", ok.url + "/held", limits={"key": "held", "max_in_flight": 1})
        [claim] = store.claim_and_start(1)
        executor = Executor(store, lambda target: target, TargetPolicy(allow_private=True), metrics)
        assert executor.record([executor.hand_back_unwaited(claim.started, claim.lock_token, "no room")])

        _run_the_rarer_paths(store, pool, metrics, ok.url)

        # A runner that died holding its lease: the next claim marks its execution lost.
        dead = one_off("dead", ok.url + "/dead")
        claims = store.claim_and_start(1)
        assert [claim.job_id for claim in claims] == [str(dead.id)]
        expire_lease(pool, str(dead.id))
        _drain(store, metrics)
    finally:
        ok.close()
        failing.close()
        silent.close()


def _run_the_rarer_paths(store, pool, metrics, url: str) -> None:
    """An occurrence missed (skipped), a pause ended, a helper fan-out started, a chained run, and
    alerts delivered, retried and given up."""
    from scheduler.core.domain import Outcome, Pause
    from scheduler.runner.alerts import Alerts

    missed = service.create_job(store, OWNER, http_spec("missed", "* * * * *", url=url + "/missed", missed_runs="skip"))
    held = service.create_job(store, OWNER, http_spec("held-paused", "0 0 1 1 *", url=url + "/paused"))
    service.pause_job(store, OWNER, str(held.id), Pause(until=store.now() + timedelta(hours=1)))
    service.create_job(store, OWNER, http_spec("then", "0 0 1 1 *", url=url + "/then"))
    first = service.create_job(store, OWNER, http_spec("first", "0 0 1 1 *", url=url + "/first", on_success=["then"]))
    target = {"type": "http", "url": url + "/alert", "method": "POST"}
    alerting = service.create_job(
        store,
        OWNER,
        http_spec("alerting", "0 0 1 1 *", url=url + "/alerting", alerts=[{"on": "failure", "target": target}] * 3),
    )
    with pool.connection() as conn:
        conn.execute(  # its runners were down for 5 minutes
            "UPDATE job_runs SET next_run_at = date_trunc('minute', now()) - interval '5 minutes',"
            " scheduled_at = date_trunc('minute', now()) - interval '5 minutes' WHERE job_id = %s",
            (str(missed.id),),
        )
        conn.execute("UPDATE job_specs SET pause_until = now() - interval '1 second' WHERE id = %s", (str(held.id),))
    make_due(pool, str(first.id))
    alerts = Alerts(store, lambda target, delivery: next(outcomes), metrics=metrics)
    alerts.run_once()  # the rules' state starts now
    _drain(store, metrics, pauses=store, on_backlog=lambda backlog: 1)  # missed, resumed, first; a helper
    _drain(store, metrics)  # the chained run
    with pool.connection() as conn:
        conn.execute(
            "INSERT INTO executions (id, job_id, scheduled_at, due_at, started_at, finished_at, attempt, trigger,"
            " status, error) VALUES (gen_random_uuid(), %s, now(), now(), now(), now(), 1, 'schedule', 'failed', 'x')",
            (str(alerting.id),),
        )
    outcomes = iter(
        [
            Outcome("succeeded", http_status=200),
            Outcome("failed", retryable=True, error="HTTP 503"),
            Outcome("failed", retryable=False, error="HTTP 404"),
        ]
    )
    assert alerts.run_once() == (3, 1)


@pytest.fixture
def emitted(aws_config, store, pool, capsys) -> set[Metric]:
    """What the code emits, under the namespace and service name the stack gives the functions."""
    config = aws_config.stack.config
    metrics = EmfMetrics(config.metrics_namespace, config.service_name)
    capsys.readouterr()
    _run_every_emitting_path(store, pool, metrics)
    return emitted_metrics(capsys.readouterr().out.splitlines())


def test_every_metric_the_dashboard_and_alarms_read_is_emitted(aws_config, emitted):
    config = aws_config.stack.config
    read = read_metrics(aws_config.json, config.metrics_namespace)
    # The contract covers the executions by status, lateness by trigger and the fan-out's figures.
    names = {name for _, name, _ in read}
    assert {
        "Executions",
        "LatenessMs",
        "Claimed",
        "Dispatched",
        "DueBacklog",
        "OldestDueAgeSeconds",
        "FanoutDurationMs",
        "PartitionsSkipped",
        "SlotWaitMs",
        "HandedBackForSlot",
    } <= names
    assert ("Executions" in names) and any(("status", "lost") in dims for _, _, dims in read)
    assert {
        "SlotWaitMs",
        "HandedBackForSlot",
        "PausesEnded",
        "FanoutHelpers",
        "AlertDeliveries",
    } <= names
    assert {("status", "skipped"), ("trigger", "chain"), ("status", "failed")} <= {pair for *_, d in read for pair in d}
    assert unmatched(read, emitted) == []
    # A search (the occurrences skipped, a line per reason) finds the metrics of its dimension set.
    searched = searched_metrics(aws_config.json, config.metrics_namespace)
    assert {name for _, name, _ in searched} == {"SkippedOccurrences"}
    assert searched <= {(ns, name, frozenset(key for key, _ in dims)) for ns, name, dims in emitted}


def test_a_wrong_dimension_name_or_service_is_caught(aws_config, emitted):
    """The mutations the old substring tests let through: the contract reports each."""
    config = aws_config.stack.config
    read = read_metrics(aws_config.json, config.metrics_namespace)
    ns, service = config.metrics_namespace, ("service", config.service_name)
    # A widget asking for lateness without its trigger (the empty-widget bug).
    assert unmatched(read | {(ns, "LatenessMs", frozenset({service}))}, emitted)
    # A wrong metric name.
    assert unmatched(read | {(ns, "Execution", frozenset({service, ("status", "lost")}))}, emitted)
    # A status the code never reports.
    assert unmatched(read | {(ns, "Executions", frozenset({service, ("status", "lost_lease")}))}, emitted)
    # Every metric pointed at another service (or the code emitting under another one).
    elsewhere = {
        (n, name, frozenset(("service", "other") if k == "service" else (k, v) for k, v in dims))
        for n, name, dims in emitted
    }
    assert len(unmatched(read, elsewhere)) == len(read)
    # The other namespace (a second stack's): nothing matches.
    assert len(unmatched(read, {("Scheduler/Other", name, dims) for _, name, dims in emitted})) == len(read)

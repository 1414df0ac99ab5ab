"""What a job's alert rules decide: pure functions of the rules, the job's alert state, the
executions finished since it was last read, and the database's now.

An incident opens when a rule's condition first holds (failures in a row, a late start, a run
missing past its threshold); each rule fires at most once in it ("one alert per incident, not
per attempt"). A succeeded execution for which no rule's condition holds closes it, and the
``recovery`` rules fire then: those of each rule set (the job's own, or an owner's rule set by
tag) that alerted in the incident. The store holds the job's alert state while this decides
(``AlertStore.sweep_alerts``), so two runners never both fire for one incident.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from scheduler.core.alerts import AlertDecision, AlertJobRow, HeldAlertState
from scheduler.core.domain import Execution, ExecutionStatus, JobState, Trigger
from scheduler.core.json_text import whole_if_integral
from scheduler.core.timeutil import format_time

FAILED = frozenset({ExecutionStatus.FAILED, ExecutionStatus.TIMED_OUT, ExecutionStatus.LOST})
OPENING = ("failure", "failures_in_a_row", "late", "missing_run")
DEFAULT_FAILURES_IN_A_ROW = 3


@dataclass(frozen=True)
class AlertRule:
    """One rule of a job's ``alerts`` (``source`` None) or of the owner's rule set by tag named
    ``source``: when (``on``, ``threshold``) and where (``target``). ``ordinal`` tells apart the
    rules of one list that fire on the same condition to the same address (one URL for several
    teams, told apart by a body or a header): the first is 0, the next 1, ..."""

    index: int
    on: str
    threshold: float | None
    target: Mapping[str, Any]
    source: str | None = None
    ordinal: int = 0

    @classmethod
    def of(cls, index: int, rule: Mapping[str, Any], source: str | None = None, ordinal: int = 0) -> AlertRule:
        """The rule at ``index`` of a stored ``alerts`` (of the rule set ``source``)."""
        threshold = rule.get("threshold")
        if rule["on"] == "failures_in_a_row" and threshold is None:
            threshold = DEFAULT_FAILURES_IN_A_ROW
        value = None if threshold is None else float(threshold)
        return cls(index, rule["on"], value, rule["target"], source, ordinal)

    @classmethod
    def all_of(cls, rules: Sequence[Mapping[str, Any]], source: str | None = None) -> list[AlertRule]:
        """The rules of one stored list, each with its ``ordinal`` among those of its condition
        and address before it."""
        made: list[AlertRule] = []
        seen: dict[str, int] = {}
        for i, rule in enumerate(rules):
            first = cls.of(i, rule, source)
            ordinal = seen.get(first.key, 0)
            seen[first.key] = ordinal + 1
            made.append(replace(first, ordinal=ordinal) if ordinal else first)
        return made

    @property
    def prefix(self) -> str:
        """What the keys of its rule set start with: ``name/`` (a rule set's names have no
        ``/``), nothing for the job's own."""
        return "" if self.source is None else f"{self.source}/"

    @property
    def key(self) -> str:
        """The rule's identity within an incident: what it fires on and where it sends
        (``[source/]on:threshold:destination``, and ``#ordinal`` for a second rule of both),
        not its place in the list, so that a rule added, removed or moved before it never makes
        it fire again in the same incident."""
        threshold = "" if self.threshold is None else f"{self.threshold:g}"
        again = f"#{self.ordinal}" if self.ordinal else ""
        return f"{self.prefix}{self.on}:{threshold}:{_destination(self.target)}{again}"

    @property
    def place_key(self) -> str:
        """The key by the rule's place (``[source/]index:on:threshold``) that incidents opened
        before ``key`` was the rule's content hold in their ``fired``."""
        return f"{self.prefix}{self.index}:{self.on}:{'' if self.threshold is None else f'{self.threshold:g}'}"

    def alerted(self, fired: Sequence[str]) -> bool:
        """Whether a rule of its rule set fired among ``fired`` (the keys of an incident)."""
        if self.source is None:
            return any("/" not in key for key in fired)
        return any(key.startswith(self.prefix) for key in fired)


# The fields of a target that say where it sends (not how: its headers, auth and texts, which an
# edit may change and a key rotation re-seals).
_DESTINATION_FIELDS = (
    "type",
    "url",
    "exchange",
    "routing_key",
    "function_arn",
    "queue_url",
    "topic_arn",
    "event_bus_arn",
)


def _destination(target: Mapping[str, Any]) -> str:
    """A short digest of where ``target`` sends: rules of one condition alerting two places are
    two rules. A URL's password is left out: a broker's is stored sealed, and sealed again (a
    new token) whenever it is sent again."""
    where = [
        [name, _without_password(target.get(name))] for name in _DESTINATION_FIELDS if target.get(name) is not None
    ]
    return hashlib.sha256(json.dumps(where, ensure_ascii=False).encode()).hexdigest()[:16]


def _without_password(value: Any) -> Any:
    """``value`` less the password of a URL's user information (``scheme://user:***@host``)."""
    if not isinstance(value, str) or "@" not in value or "://" not in value:
        return value
    scheme, _, rest = value.partition("://")
    authority, slash, path = rest.partition("/")
    userinfo, at, host = authority.rpartition("@")
    if not at or ":" not in userinfo:
        return value
    return f"{scheme}://{userinfo.partition(':')[0]}:***@{host}{slash}{path}"


@dataclass(frozen=True)
class AlertState:
    """A job's alert state: its executions read up to (``seen``: started_at and seq of the last
    finished one), the failures in a row, and the open incident with the rules fired in it."""

    seen_started_at: datetime | None = None
    seen_seq: int | None = None
    failures_in_row: int = 0
    incident_id: str | None = None
    incident_opened_at: datetime | None = None
    fired: tuple[str, ...] = ()


@dataclass(frozen=True)
class AlertJob:
    """What the rules read of a job: its identity, its rules and its run state."""

    id: str
    owner: str
    name: str
    rules: tuple[AlertRule, ...]
    state: JobState
    next_run_at: datetime | None

    @classmethod
    def of(cls, row: AlertJobRow) -> AlertJob:
        """The job of a sweep's row, its stored rules read, then those of its tags' rule sets."""
        rules = AlertRule.all_of(row.alerts)
        for rule_set in row.tag_rules:
            rules.extend(AlertRule.all_of(rule_set["alerts"], rule_set["name"]))
        return cls(row.id, row.owner, row.name, tuple(rules), row.state, row.next_run_at)


@dataclass(frozen=True)
class AlertEvent:
    """An alert to send: the rule, ``fired`` or ``recovered``, its incident and its variables."""

    rule: AlertRule
    event: str
    incident_id: str
    execution_id: str | None
    vars: dict[str, Any] = field(default_factory=dict)


def _seconds(later: datetime, earlier: datetime | None) -> float:
    return 0.0 if earlier is None else (later - earlier).total_seconds()


_SCHEDULED = frozenset({Trigger.SCHEDULE, Trigger.RETRY})


def holds(rule: AlertRule, execution: Execution, failures_in_row: int) -> bool:
    """Whether ``rule``'s condition holds after ``execution`` (``failures_in_row`` counted with it)."""
    threshold = rule.threshold or 0.0
    if rule.on == "failure":
        return execution.status in FAILED
    if rule.on == "failures_in_a_row":
        return failures_in_row >= threshold
    if rule.on == "late":
        return _seconds(execution.started_at, execution.due_at or execution.scheduled_at) > threshold
    if rule.on == "missing_run":  # a scheduled run that did not succeed within the threshold
        # Only the schedule's own runs (and their retries): a run now, a chained run (the job
        # may be paused to run only when chained) or a backfill of the past is not one missing.
        ended = execution.finished_at or execution.started_at
        return (
            execution.trigger in _SCHEDULED and _seconds(ended, execution.due_at or execution.scheduled_at) > threshold
        )
    return False


def execution_vars(job: AlertJob, execution: Execution | None, failures_in_row: int) -> dict[str, Any]:
    """The template variables of an alert about ``execution`` (None: a run that did not happen)."""
    found: dict[str, Any] = {"job_id": job.id, "job_name": job.name, "failures": failures_in_row}
    if execution is not None:
        found.update(
            execution_id=execution.id,
            status=str(execution.status),
            http_status=execution.http_status,
            error=execution.error,
            scheduled_at=format_time(execution.scheduled_at),
            started_at=format_time(execution.started_at),
            attempt=execution.attempt,
            lateness_seconds=round(_seconds(execution.started_at, execution.due_at or execution.scheduled_at), 3),
        )
    return found


def message(rule: AlertRule, event: str, found: Mapping[str, Any]) -> str:
    """One line for people (the ``{{message}}`` of a template, the default body's text)."""
    name, threshold = found["job_name"], f"{rule.threshold or 0:g}"
    if event == "recovered":
        return f"job {name} recovered: execution {found.get('execution_id')} succeeded"
    error = f": {found['error']}" if found.get("error") else ""
    if rule.on == "failure":
        return f"job {name} failed ({found.get('status')}){error}"
    if rule.on == "failures_in_a_row":
        return f"job {name} failed {found['failures']} times in a row{error}"
    if rule.on == "late":
        return f"job {name} started {found.get('lateness_seconds')}s late (threshold {threshold}s)"
    return f"job {name} has had no successful run within {threshold}s of its scheduled time {found.get('scheduled_at')}"


class _Incident:
    """The decision in progress: the state as it moves on, and the alerts it made."""

    def __init__(self, job: AlertJob, state: AlertState, new_id: Callable[[], str]):
        self.job, self.state, self.new_id = job, state, new_id
        self.events: list[AlertEvent] = []

    def fire(self, rule: AlertRule, found: dict[str, Any], now: datetime) -> None:
        if rule.key in self.state.fired or rule.place_key in self.state.fired:
            return
        if self.state.incident_id is None:
            self.state = replace(self.state, incident_id=self.new_id(), incident_opened_at=now, fired=())
        self.state = replace(self.state, fired=(*self.state.fired, rule.key))
        self._add(rule, "fired", found)

    def recover(self, found: dict[str, Any]) -> None:
        if self.state.incident_id is None:
            return
        for rule in self.job.rules:
            if rule.on == "recovery" and rule.alerted(self.state.fired):
                self._add(rule, "recovered", found)
        self.state = replace(self.state, incident_id=None, incident_opened_at=None, fired=())

    def _add(self, rule: AlertRule, event: str, found: dict[str, Any]) -> None:
        incident = str(self.state.incident_id)
        text = message(rule, event, found)
        variables = {
            **found,
            "alert": rule.on,
            "threshold": whole_if_integral(rule.threshold),
            "event": event,
            "incident_id": incident,
            "message": text,
            "rule": rule.source or "",
        }
        self.events.append(AlertEvent(rule, event, incident, found.get("execution_id"), variables))


def decide(
    job: AlertJob,
    state: AlertState,
    executions: Sequence[Execution],
    now: datetime,
    new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
) -> tuple[AlertState, list[AlertEvent]]:
    """The job's alert state after ``executions`` (finished, oldest first) and at ``now``, with
    the alerts to send. A ``missing_run`` rule also fires, with no execution, when an active job
    is due for longer than its threshold (its runner stopped, or every runner busy); a paused or
    completed job's never does."""
    incident = _Incident(job, state, new_id)
    opening = [rule for rule in job.rules if rule.on in OPENING]
    for execution in executions:
        if execution.status == ExecutionStatus.SKIPPED:  # occurrences that did not run: no outcome
            incident.state = replace(incident.state, seen_started_at=execution.started_at, seen_seq=execution.seq)
            continue
        failures = incident.state.failures_in_row + 1 if execution.status in FAILED else 0
        incident.state = replace(
            incident.state, failures_in_row=failures, seen_started_at=execution.started_at, seen_seq=execution.seq
        )
        found = execution_vars(job, execution, failures)
        firing = [rule for rule in opening if holds(rule, execution, failures)]
        if execution.status == ExecutionStatus.SUCCEEDED and not firing:
            incident.recover(found)
        for rule in firing:
            incident.fire(rule, found, now)
    if job.state == JobState.ACTIVE and job.next_run_at is not None:
        for rule in opening:
            if rule.on == "missing_run" and _seconds(now, job.next_run_at) > (rule.threshold or 0.0):
                found = {**execution_vars(job, None, incident.state.failures_in_row)}
                found["scheduled_at"] = format_time(job.next_run_at)
                incident.fire(rule, found, now)
    return incident.state, incident.events


def decision(held: HeldAlertState, executions: Sequence[Execution]) -> AlertDecision:
    """``decide`` for a held alert state and the executions read after it (oldest first; those
    from the first still running on are left for the next sweep): the store's columns."""
    finished: list[Execution] = []
    for execution in executions:
        if execution.status == ExecutionStatus.RUNNING:
            break
        finished.append(execution)
    state = AlertState(
        held.seen_started_at,
        held.seen_seq,
        held.failures_in_row,
        held.incident_id,
        held.incident_opened_at,
        held.fired,
    )
    new, events = decide(AlertJob.of(held.job), state, finished, held.now)
    columns = {
        "seen_started_at": new.seen_started_at,
        "seen_seq": new.seen_seq,
        "failures_in_row": new.failures_in_row,
        "incident_id": new.incident_id,
        "incident_opened_at": new.incident_opened_at,
        "fired": list(new.fired),
    }
    alerts = tuple(
        {
            "rule_key": event.rule.key,
            "rule_on": event.rule.on,
            "rule_name": event.rule.source,
            "threshold": whole_if_integral(event.rule.threshold),
            "event": event.event,
            "incident_id": event.incident_id,
            "execution_id": event.execution_id,
            "target": dict(event.rule.target),
            "vars": event.vars,
        }
        for event in events
    )
    return AlertDecision(columns, alerts)

"""The decision with an owner's rule sets by tag beside a job's own rules (pure): each set's
rules have keys of their own (one alert per incident per rule, whichever set), share the job's
incident, and a set's recovery fires only when a rule of that set alerted in the incident."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from scheduler.core.alerts import AlertJobRow
from scheduler.core.domain import ExecutionStatus, JobState
from scheduler.planning.alerts import AlertJob, AlertState, decide
from tests.unit.test_alerts_across_features import _execution

T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
HOOK = {"type": "http", "url": "https://hooks.example.com/x"}


def _job(own: list[dict], *sets: tuple[str, list[dict]]) -> AlertJob:
    row = AlertJobRow(
        "job",
        "alice",
        "ledger",
        tuple(own),
        JobState.ACTIVE,
        None,
        tag_rules=tuple({"name": name, "alerts": rules} for name, rules in sets),
    )
    return AlertJob.of(row)


def _rule(on: str, threshold: float | None = None) -> dict:
    return {"on": on, "target": HOOK, **({} if threshold is None else {"threshold": threshold})}


def test_the_rules_of_a_set_follow_the_jobs_own_with_keys_of_their_own():
    job = _job([_rule("failure")], ("team", [_rule("failure"), _rule("recovery")]))
    keys = [(r.source, r.key.rsplit(":", 1)[0]) for r in job.rules]
    assert keys == [(None, "failure:"), ("team", "team/failure:"), ("team", "team/recovery:")]
    assert len({r.key.rsplit(":", 1)[1] for r in job.rules}) == 1  # one destination, one digest


def test_a_rule_keeps_its_key_wherever_it_stands_in_the_list():
    """A rule added, removed or moved before another leaves the other's key (and so its "fired
    once in this incident") as it was; another destination or threshold is another rule."""
    rows = (
        _job([_rule("failures_in_a_row", 2)]).rules[0],
        _job([_rule("late", 5), _rule("failures_in_a_row", 2)]).rules[1],
    )
    assert rows[0].key == rows[1].key and rows[0].place_key != rows[1].place_key
    other = {"on": "failures_in_a_row", "threshold": 2, "target": {"type": "http", "url": "https://pager.example.com/"}}
    assert _job([other]).rules[0].key != rows[0].key
    assert _job([_rule("failures_in_a_row", 3)]).rules[0].key != rows[0].key
    # How it is sent (headers, auth, body) is not where: the same rule.
    sent_otherwise = {
        **_rule("failures_in_a_row", 2),
        "target": {**HOOK, "headers": {"X-Team": "a"}, "body": "{{message}}"},
    }
    assert _job([sent_otherwise]).rules[0].key == rows[0].key


def test_an_edit_of_the_rules_mid_incident_fires_no_rule_twice():
    """The audit's case: a job's rule fired; a rule put in front of it; the incident goes on and
    the rule (unchanged but for its place) does not fire again."""
    before = _job([_rule("failures_in_a_row", 2)])
    runs = [_execution(i, ExecutionStatus.FAILED) for i in range(1, 3)]
    state, events = decide(before, AlertState(), runs, T0 + timedelta(hours=1), new_id=lambda: "incident-1")
    assert [e.rule.on for e in events] == ["failures_in_a_row"]
    after = _job([_rule("late", 60), _rule("failures_in_a_row", 2)])
    more = [_execution(i, ExecutionStatus.FAILED) for i in range(3, 6)]
    state, events = decide(after, state, more, T0 + timedelta(hours=2))
    assert events == [] and state.incident_id == "incident-1"


def test_an_incident_opened_before_the_keys_were_the_rules_content_fires_nothing_again():
    """An incident opened by an earlier version holds keys by place (``0:failures_in_a_row:2``):
    its rules do not fire again after an upgrade."""
    job = _job([_rule("failures_in_a_row", 2)])
    held = AlertState(failures_in_row=2, incident_id="incident-0", fired=("0:failures_in_a_row:2",))
    state, events = decide(job, held, [_execution(3, ExecutionStatus.FAILED)], T0 + timedelta(hours=1))
    assert events == [] and state.incident_id == "incident-0"


def test_each_rule_fires_once_in_the_jobs_one_incident():
    job = _job([_rule("failure")], ("team", [_rule("failures_in_a_row", 2)]), ("ops", [_rule("failure")]))
    runs = [_execution(i, ExecutionStatus.FAILED) for i in range(1, 5)]
    state, events = decide(job, AlertState(), runs, T0 + timedelta(hours=1), new_id=lambda: "incident-1")
    assert [(e.rule.source, e.rule.on) for e in events] == [
        (None, "failure"),
        ("ops", "failure"),
        ("team", "failures_in_a_row"),
    ]
    assert {e.incident_id for e in events} == {"incident-1"} and len(state.fired) == 3
    assert [e.vars["rule"] for e in events] == ["", "ops", "team"]


def test_a_sets_recovery_fires_only_when_the_set_alerted():
    job = _job(
        [_rule("failure")], ("team", [_rule("failures_in_a_row", 3), _rule("recovery")]), ("quiet", [_rule("recovery")])
    )
    runs = [_execution(1, ExecutionStatus.FAILED), _execution(2, ExecutionStatus.SUCCEEDED)]
    _, events = decide(job, AlertState(), runs, T0 + timedelta(hours=1))
    assert [(e.rule.source, e.rule.on, e.event) for e in events] == [(None, "failure", "fired")]  # no recovery
    runs = [_execution(i, ExecutionStatus.FAILED) for i in range(1, 4)] + [_execution(4, ExecutionStatus.SUCCEEDED)]
    _, events = decide(job, AlertState(), runs, T0 + timedelta(hours=1))
    assert [(e.rule.source, e.rule.on, e.event) for e in events] == [
        (None, "failure", "fired"),
        ("team", "failures_in_a_row", "fired"),
        ("team", "recovery", "recovered"),
    ]


def test_a_jobs_own_recovery_keeps_firing_on_any_own_rule():
    job = _job([_rule("failure"), _rule("recovery")], ("team", [_rule("failure")]))
    runs = [_execution(1, ExecutionStatus.FAILED), _execution(2, ExecutionStatus.SUCCEEDED)]
    _, events = decide(job, AlertState(), runs, T0 + timedelta(hours=1))
    assert [(e.rule.source, e.rule.on, e.event) for e in events] == [
        (None, "failure", "fired"),
        ("team", "failure", "fired"),
        (None, "recovery", "recovered"),
    ]


def test_the_default_slack_body_escapes_the_message_and_a_body_of_ones_own_does_not():
    """A target's answer quoted in the message cannot ping a channel or disguise a link in the
    default (Slack) body."""
    import json

    from scheduler.core.alerts import render_alert_target

    variables = {
        "message": "HTTP 500 <!channel> <http://evil.example/login|Re-authenticate> & more",
        "console_url": "http://127.0.0.1:8080/console/#/jobs/x?a=1&b=2",
    }
    default = render_alert_target({"type": "http", "url": "https://hooks.example/"}, variables)
    text = json.loads(default["body"])["text"]
    assert text == (
        "HTTP 500 &lt;!channel&gt; &lt;http://evil.example/login|Re-authenticate&gt; &amp; more\n"
        "http://127.0.0.1:8080/console/#/jobs/x?a=1&b=2"
    )
    own = render_alert_target({"type": "http", "url": "https://hooks.example/", "body": "{{message}}"}, variables)
    assert own["body"] == variables["message"]


def test_an_aws_alert_target_s_short_fields_are_fitted_to_what_its_service_takes():
    """An alert renders its message and error, of any length and any characters, into an SNS
    subject, an event's source and detail-type, a FIFO group id: fitted (cut, unfit characters
    replaced) rather than refused by the service, so the alert still goes out."""
    from scheduler.core.alerts import render_alert_target

    message = "Job \u00e9t\u00e9 failed:\nHTTP 500 " + "x" * 400
    variables = {"message": message, "job_name": "nightly report"}
    sns = render_alert_target(
        {
            "type": "sns",
            "topic_arn": "arn:aws:sns:eu-west-1:1:t.fifo",
            "subject": "  {{message}}",
            "message": "{{message}}",
            "message_group_id": "{{job_name}}",
        },
        variables,
    )
    assert len(sns["subject"]) == 99 and sns["subject"].startswith("Job  t  failed: HTTP 500 x")
    assert sns["subject"].isascii() and sns["subject"].isprintable()
    assert sns["message_group_id"] == "nightly_report" and sns["message"] == message  # the body is whole
    events = render_alert_target(
        {
            "type": "eventbridge",
            "event_bus_arn": "arn:aws:events:eu-west-1:1:event-bus/b",
            "source": "acme.alerts",
            "detail_type": "{{message}}",
            "detail": "{}",
        },
        variables,
    )
    assert len(events["detail_type"]) == 128 and "\n" not in events["detail_type"]
    assert events["source"] == "acme.alerts"


def test_rules_to_one_address_told_apart_by_their_bodies_are_two_rules():
    """PagerDuty's one URL for every team (the routing key in the body), Opsgenie's (a team's key in
    a header): two rules of one condition to one address both fire, once each (the review's case:
    keyed by condition and address alone, the second team was never alerted)."""
    url = "https://events.pagerduty.com/v2/enqueue"
    rules = [{"on": "failure", "target": {"type": "http", "url": url, "body": team}} for team in ("TEAM_A", "TEAM_B")]
    job = _job(rules)
    assert len({rule.key for rule in job.rules}) == 2
    _, events = decide(job, AlertState(), [_execution(1, ExecutionStatus.FAILED)], T0 + timedelta(hours=1))
    assert [e.rule.target["body"] for e in events] == ["TEAM_A", "TEAM_B"]
    # A rule of another address put before them leaves both keys as they were.
    other = {"on": "failure", "target": {"type": "http", "url": "https://hooks.example.com/y"}}
    assert [r.key for r in _job([other, *rules]).rules[1:]] == [r.key for r in job.rules]


def test_a_broker_password_sealed_again_leaves_the_rule_as_it_was():
    """An AMQP alert target's URL holds its password sealed, a new token each time it is sealed
    (sent again): the rule stays the same rule (it does not fire again in the open incident)."""

    def amqp(token: str) -> dict:
        url = f"amqps://alerts:{token}@broker.example.com:5671/vhost"
        return {"on": "failure", "target": {"type": "amqp", "url": url, "exchange": "alerts"}}

    assert _job([amqp("enc%3Av1%3AAAAA")]).rules[0].key == _job([amqp("enc%3Av1%3ABBBB")]).rules[0].key
    other_broker = {**amqp("x"), "target": {**amqp("x")["target"], "url": "amqps://alerts:x@other.example.com/"}}
    assert _job([other_broker]).rules[0].key != _job([amqp("x")]).rules[0].key

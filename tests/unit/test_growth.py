"""Fan-outs that grow with the backlog: the decision, and the primary's count of its helpers."""

from __future__ import annotations

import io
import json

import boto3
import pytest
from botocore.stub import Stubber

from scheduler.core import constants as c
from scheduler.runner.growth import (
    FANOUT_DISPATCH_RATE,
    GROWTH_WINDOW_SECONDS,
    HELPER_START_MARGIN_SECONDS,
    MIN_HELPER_SECONDS,
    Growth,
    LambdaHelperStarter,
    helper_drain_seconds,
    helper_seconds,
    helpers_to_start,
    is_helper,
    lambda_growth,
)
from scheduler.settings import Settings

ONE = int(FANOUT_DISPATCH_RATE * GROWTH_WINDOW_SECONDS)  # what one fan-out dispatches in the window


@pytest.mark.parametrize(
    ("backlog", "running", "max_fanouts", "expected"),
    [
        (0, 1, 4, 0),  # nothing due
        (ONE, 1, 4, 0),  # one fan-out's worth: the primary alone
        (ONE + 1, 1, 4, 1),  # a little more: one helper
        (3 * ONE, 1, 4, 2),
        (10 * ONE, 1, 4, 3),  # never more than the maximum at once, the primary included
        (10 * ONE, 3, 4, 1),  # two helpers still running: one more
        (10 * ONE, 4, 4, 0),
        (10 * ONE, 6, 4, 0),  # over the maximum (counted high): none, never negative
        (10 * ONE, 1, 1, 0),  # growth off
        (10 * ONE, 0, 4, 3),  # the primary always counts itself
    ],
)
def test_helpers_to_start(backlog, running, max_fanouts, expected):
    assert helpers_to_start(backlog, running, max_fanouts=max_fanouts) == expected


def test_the_rate_and_window_set_the_threshold():
    assert helpers_to_start(1001, 1, max_fanouts=8, rate=100, window_seconds=10) == 1
    assert helpers_to_start(1000, 1, max_fanouts=8, rate=100, window_seconds=10) == 0
    assert helpers_to_start(5000, 1, max_fanouts=8, rate=0, window_seconds=10) == 0


def test_helper_drain_seconds_is_the_share_of_each_fanout():
    assert helper_drain_seconds(4000, 4, rate=100) == 10.0
    assert helper_drain_seconds(4000, 0, rate=100) == 40.0


def test_only_an_explicit_helper_event_is_a_helper():
    assert is_helper({"helper": True})
    for event in ({"helper": "true"}, {"source": "aws.events"}, {}, None, []):
        assert not is_helper(event)


def test_a_helper_reads_how_long_it_may_run():
    assert helper_seconds({"helper": True, "seconds": 12.5}) == 12.5
    for event in (
        {"helper": True},
        {"helper": True, "seconds": 0},
        {"helper": True, "seconds": "9"},
        {"helper": True, "seconds": True},
        None,
    ):
        assert helper_seconds(event) is None


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_growth_counts_its_helpers_for_the_time_it_gives_them_and_never_exceeds_the_maximum():
    clock, starts = Clock(), []
    growth = Growth(
        lambda seconds: starts.append(seconds) or True, max_fanouts=4, clock=clock, rate=100, window_seconds=5
    )
    assert growth.observe(300) == 0  # 3 s of one fan-out's work
    assert growth.observe(8000) == 3 and growth.running() == 4
    assert starts == [20.0] * 3  # each may run for its share: 2000 at 100/s
    clock.now = 20.0 + HELPER_START_MARGIN_SECONDS - 0.1
    assert growth.observe(8000) == 0  # still counted as running (their run, their start)
    clock.now = 20.0 + HELPER_START_MARGIN_SECONDS + 0.1
    assert growth.running() == 1  # their time is up: they have stopped
    assert growth.observe(1200) == 2  # the backlog still there: grows again
    assert starts[3:] == [MIN_HELPER_SECONDS] * 2  # a short share: the shortest run worth a start
    assert growth.started == 5


def test_growth_stops_at_a_failed_start():
    results = iter([True, False, True])
    growth = Growth(lambda seconds: next(results), max_fanouts=4, clock=Clock(), rate=100, window_seconds=5)
    assert growth.observe(10_000) == 1 and growth.running() == 2


def test_lambda_helper_starter_invokes_its_own_function_asynchronously_with_the_helper_event():
    client = boto3.client("lambda", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    stubber = Stubber(client)
    expected = {
        "FunctionName": "Stack-fanout",
        "InvocationType": "Event",
        "Payload": json.dumps({"helper": True, "seconds": 12.3, "until": 1_000_017.34}).encode(),
    }
    stubber.add_response("invoke", {"StatusCode": 202, "Payload": io.BytesIO(b"")}, expected)
    stubber.add_client_error("invoke", "TooManyRequestsException", http_status_code=429)
    with stubber:
        start = LambdaHelperStarter(client, "Stack-fanout", wall_clock=lambda: 1_000_000.0)
        assert start(12.34) is True
        assert start(12.34) is False
    stubber.assert_no_pending_responses()


def test_no_growth_without_a_maximum_above_one_or_the_function_name():
    assert lambda_growth(object(), "f", 1, Clock()) is None
    assert lambda_growth(object(), None, 4, Clock()) is None
    assert lambda_growth(object(), "f", 4, Clock()).max_fanouts == 4


def test_settings_read_the_maximum_and_the_function_name():
    settings = Settings.from_env({c.ENV_MAX_FANOUTS: "4", c.ENV_FANOUT_FUNCTION: "Stack-fanout"})
    assert settings.max_fanouts == 4 and settings.fanout_function == "Stack-fanout"
    assert Settings.from_env({}).max_fanouts == 1
    for bad in ("0", "-2", "four"):
        with pytest.raises(ValueError, match=c.ENV_MAX_FANOUTS):
            Settings.from_env({c.ENV_MAX_FANOUTS: bad})


def test_the_execution_retention_is_a_whole_number_of_days_from_one():
    """0 or less once switched the partitions' upkeep off (no day ahead made, none dropped) while
    the alerts' purge deleted every finished alert; a bad value is refused naming the variable."""
    assert Settings.from_env({}).execution_retention_days == 30
    assert Settings.from_env({c.ENV_EXECUTION_RETENTION_DAYS: "7"}).execution_retention_days == 7
    for bad in ("0", "-1", "abc", "1.5"):
        with pytest.raises(ValueError, match=c.ENV_EXECUTION_RETENTION_DAYS):
            Settings.from_env({c.ENV_EXECUTION_RETENTION_DAYS: bad})


def test_a_helper_stops_when_its_primary_counted_it_done_however_late_it_starts():
    """Its ``until`` (epoch) bounds it: an invoke that waited in Lambda's queue past it does nothing."""
    assert helper_seconds({"helper": True, "seconds": 30, "until": 1_000_010.0}, now=lambda: 1_000_000.0) == 10.0
    assert helper_seconds({"helper": True, "seconds": 5, "until": 1_000_010.0}, now=lambda: 1_000_000.0) == 5.0
    assert helper_seconds({"helper": True, "seconds": 30, "until": 999_990.0}, now=lambda: 1_000_000.0) == 0.0


def test_no_helper_is_given_time_past_its_primarys_end():
    """A primary's helpers end with it, so two ticks' fan-outs overlap no more than the primaries'
    own overlap, and the fan-outs at once stay within 2 x max (the reserved concurrency's bound)."""
    clock = Clock()
    given = []
    growth = Growth(
        lambda seconds: given.append(seconds) or True,
        max_fanouts=4,
        clock=clock,
        rate=100,
        window_seconds=5,
        deadline=clock() + 30,
    )
    assert growth.observe(100_000) == 3 and given and max(given) <= 30
    clock.now += 30  # the primary's time is up
    growth._running_until.clear()
    assert growth.observe(100_000) == 0

"""``scheduler executions --follow`` prints an execution it saw running when it ends, even after
a hundred newer ones pushed it off the newest page: it reads that one again, by its job and its
start, a bounded number of them a poll (against the real HTTP fake of test_cli)."""

from __future__ import annotations

import functools
import io
import threading
from typing import Any

from scheduler.cli import executions as executions_cli
from scheduler.cli.executions import FOLLOW_LOOKUPS, FOLLOW_TRACKED, _Running
from scheduler.transport.api_wire import InvalidRequest
from tests.unit.test_cli import JOB_ID, JOB_ID2, api, clean_env, execution, run, until_shown  # noqa: F401 (fixtures)

STARTED = "2026-11-01T02:00:00.123456Z"


def slow(status: str, **extra: Any) -> dict[str, Any]:
    return execution(1, job_id=JOB_ID2, job_name="slow", status=status, started_at=STARTED, **extra)


def quick(n: int) -> dict[str, Any]:
    return execution(2, id=f"q{n}", job_name="quick", started_at=f"2026-11-01T02:{n // 60:02d}:{n % 60:02d}Z")


def test_a_long_run_pushed_off_the_page_is_printed_when_it_ends(api, monkeypatch):
    """A run seen running, then 120 quick ones that finish while it runs (the page holds the
    newest 100): once it ends it is printed, read by its job since its start; the cursor of the
    page that held it is kept for the next read."""
    newest = [quick(n) for n in range(120, 20, -1)]  # the newest page: the slow one left it
    polls: list[dict[str, str]] = []
    lookups: list[dict[str, str]] = []

    def answer(req) -> tuple[int, Any]:
        if "since" not in req.query:  # the poll of the newest page
            polls.append(req.query)
            return 200, {"executions": [slow("running")] if len(polls) == 1 else newest, "next_cursor": None}
        lookups.append(req.query)
        if req.query.get("cursor") != "c2":  # a newer run of the slow job first
            return 200, {"executions": [execution(9, job_id=JOB_ID2, status="succeeded")], "next_cursor": "c2"}
        row = slow("running") if len(lookups) < 4 else slow("failed", error="boom", http_status=500)
        return 200, {"executions": [row], "next_cursor": None}

    api.on("GET", "/v1/executions", answer)
    out, stop = io.StringIO(), threading.Event()
    monkeypatch.setattr(executions_cli, "follow", functools.partial(executions_cli.follow, stop=stop, out=out))
    until_shown("boom", out, stop, lambda: run(api, "executions", "--follow", "--interval", "0.01"))
    printed = [line.split()[:2] for line in out.getvalue().splitlines()[1:]]
    assert printed[:100] == [["quick", f"q{n}"] for n in range(21, 121)]
    assert printed[100:] == [["slow", "e1"]]  # once, when it ended
    assert lookups[0] == {"job_id": JOB_ID2, "since": STARTED, "limit": "100"}
    assert [q.get("cursor") for q in lookups[:4]] == [None, "c2", "c2", "c2"]


class Listing:
    """A listing of ``GET /v1/executions`` that answers ``rows(query)`` and records its queries."""

    def __init__(self, rows):
        self.rows, self.queries = rows, []

    def __call__(self, **query: Any) -> dict[str, Any]:
        self.queries.append(query)
        return {"executions": self.rows(query), "next_cursor": None}


def running(n: int) -> dict[str, Any]:
    return execution(2, id=f"r{n}", job_id=JOB_ID, status="running", started_at=f"2026-11-01T02:00:{n:02d}Z")


def test_the_runs_read_again_are_bounded_a_poll_and_taken_in_turn():
    listing = Listing(lambda q: [running(int(q["since"][17:19]))])  # each still running
    tracker = _Running(listing)
    tracker.saw([running(n) for n in range(15)])
    assert tracker.ended(set()) == [] and len(listing.queries) == FOLLOW_LOOKUPS
    assert tracker.ended(set()) == []  # the five not read yet come first
    read = [q["since"][17:19] for q in listing.queries]
    assert read[FOLLOW_LOOKUPS : FOLLOW_LOOKUPS + 5] == [f"{n:02d}" for n in range(10, 15)]
    assert tracker.ended({f"r{n}" for n in range(15)}) == [] and len(listing.queries) == 2 * FOLLOW_LOOKUPS


def test_a_run_no_longer_listed_is_let_go_and_the_oldest_beyond_the_bound():
    listing = Listing(lambda q: [])  # its job deleted
    tracker = _Running(listing)
    tracker.saw([running(1)])
    assert tracker.ended(set()) == [] and tracker.rows == {}
    tracker.saw([running(n % 60) | {"id": f"x{n}"} for n in range(FOLLOW_TRACKED + 5)])
    assert len(tracker.rows) == FOLLOW_TRACKED and "x0" not in tracker.rows  # the oldest started
    assert "x3" in tracker.rows
    tracker.saw([running(3) | {"id": "x3", "status": "succeeded"}])  # ended on the page: printed there
    assert "x3" not in tracker.rows


def test_a_kept_cursor_refused_reads_from_the_start():
    def rows(query: dict[str, Any]) -> list[dict[str, Any]]:
        if query["cursor"] == "old":
            raise InvalidRequest(400, "invalid_request", "bad cursor", [{"field": "cursor", "message": "bad"}])
        return [running(1) | {"status": "failed"}]

    listing = Listing(rows)
    tracker = _Running(listing)
    tracker.saw([running(1)])
    tracker.cursors["r1"] = "old"
    assert [e["status"] for e in tracker.ended(set())] == ["failed"]
    assert [q["cursor"] for q in listing.queries] == ["old", None]
    assert executions_cli.FOLLOW_PAGE == listing.queries[-1]["limit"]


def test_under_a_status_filter_a_long_run_that_ends_with_it_is_printed(api, monkeypatch):
    """``--status failed``: the slow run is seen on the page of running executions, then 100
    newer failures push it past the filtered page's reach; when it fails it is read again and
    printed, once. A quick run that left the running page within the filtered page's reach is
    let go unread (it ended otherwise, else it would be on the page)."""
    newest = [quick(n) | {"status": "failed"} for n in range(120, 20, -1)]
    calls: list[dict[str, str]] = []
    lookups: list[dict[str, str]] = []

    def answer(req) -> tuple[int, Any]:
        if "since" in req.query and "job_id" in req.query:
            lookups.append(req.query)
            failed = len(lookups) >= 2
            return 200, {
                "executions": [slow("failed", error="boom") if failed else slow("running")],
                "next_cursor": None,
            }
        calls.append(req.query)
        polls = sum(1 for q in calls if q.get("status") == "running")
        if req.query.get("status") == "running":
            first = [slow("running"), quick(130) | {"status": "running", "started_at": "2026-11-01T03:00:00Z"}]
            return 200, {"executions": first if polls == 1 else [], "next_cursor": None}
        return 200, {"executions": [] if polls == 1 else newest, "next_cursor": None}

    api.on("GET", "/v1/executions", answer)
    out, stop = io.StringIO(), threading.Event()
    monkeypatch.setattr(executions_cli, "follow", functools.partial(executions_cli.follow, stop=stop, out=out))
    until_shown(
        "boom", out, stop, lambda: run(api, "executions", "--status", "failed", "--follow", "--interval", "0.01")
    )
    printed = [line.split()[:2] for line in out.getvalue().splitlines()[1:]]
    assert printed[-1] == ["slow", "e1"] and printed.count(["slow", "e1"]) == 1
    assert [q["status"] for q in calls[:2]] == ["running", "failed"]  # the running page first
    assert all(q["job_id"] == JOB_ID2 for q in lookups)  # the quick one was never read again

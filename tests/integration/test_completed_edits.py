"""A completed one-off edited: its zone, window or calendars changed leave it completed (its
occurrence ran at its time and is not delivered again); a new run_at runs it again; one completed
by its window before its time runs when the window is widened to take it."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler import service
from scheduler.core.domain import Outcome
from tests.integration.test_api import api, box, create, job_body  # noqa: F401 - fixtures
from tests.support import http_spec, run_once

OWNER = "arn:aws:iam::111111111111:user/alice"


def ran_one_off(store) -> str:
    job_id = str(service.create_job(store, OWNER, http_spec("payment", None, run_at=store.now())).id)
    assert run_once(store, Outcome("succeeded"), planned=True) is True
    assert store.get_job(OWNER, job_id).state == "completed"
    return job_id


@pytest.mark.parametrize(
    "change",
    [
        {"timezone": "Europe/Paris"},
        {"start_at": "2020-01-01T00:00:00Z"},
        {"end_at": "2099-01-01T00:00:00Z"},
        {"spread": {"window_seconds": 60}},
    ],
    ids=["timezone", "start_at", "end_at", "spread"],
)
def test_an_edit_that_keeps_its_run_at_leaves_a_completed_one_off_completed(store, change):
    job_id = ran_one_off(store)
    edited = service.update_job(store, OWNER, job_id, lambda j: {**j.spec(), **change}, by=OWNER)
    assert edited.state == "completed" and edited.next_run_at is None
    assert store.claim_and_start(10) == []  # nothing due: the payment is not sent again
    [entry, *_] = store.list_changes(OWNER, job_id)
    assert entry.action == "update" and "state" not in entry.diff


def test_a_new_run_at_runs_a_completed_one_off_again(store):
    job_id = ran_one_off(store)
    later = store.now() + timedelta(hours=1)
    edited = service.update_job(store, OWNER, job_id, lambda j: {**j.spec(), "run_at": later})
    assert edited.state == "active" and edited.next_run_at == later


def test_a_one_off_completed_by_its_window_runs_once_the_window_takes_its_time(store):
    at = store.now() + timedelta(hours=1)
    spec = http_spec("report", None, run_at=at, end_at=at - timedelta(minutes=1))
    job = service.create_job(store, OWNER, spec)
    assert job.state == "completed"  # its time is past its window's end: skipped (window)
    edited = service.update_job(store, OWNER, str(job.id), lambda j: {**j.spec(), "end_at": None})
    assert edited.state == "active" and edited.next_run_at == at

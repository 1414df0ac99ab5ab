"""The API served from several threads at once (local mode's waitress), on real Postgres: each
thread resolves with its own resolver, so concurrent requests get their own answers, and a cursor
issued on one thread pages on another."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from waitress import create_server

from scheduler.api.app import per_thread_handler
from scheduler.console.proxy import stop_server
from scheduler.secrets import SecretBox
from scheduler.settings import Settings
from scheduler.transport.http_adapter import make_wsgi_app
from tests.integration.test_api import ALICE, Client, box, job_body  # noqa: F401 (pytest fixtures)
from tests.support import run_at_once

THREADS = 8


class KeylessBox:
    """A secret box with no key to derive a cursor key from (as KMS's): without a cursor secret,
    the cursors' key is random, made once for all the threads."""

    def __init__(self, box: SecretBox):
        self.box = box

    def encrypt(self, plaintext: str) -> str:
        return self.box.encrypt(plaintext)

    def decrypt(self, token: str) -> str:
        return self.box.decrypt(token)


class Served:
    """The API behind waitress with ``THREADS`` threads. While ``together`` is set, each request
    waits in the handler until ``THREADS`` are there: they are handled at once, or not at all."""

    def __init__(self, store: Any, box: SecretBox):
        self.handler = per_thread_handler(lambda: store, lambda: KeylessBox(box), Settings(cursor_secret=None))
        self.together: threading.Barrier | None = None
        self.server = create_server(
            make_wsgi_app(self.handle, lambda environ: ALICE), host="127.0.0.1", port=0, threads=THREADS
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.effective_port}"

    def handle(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        if self.together is not None:
            self.together.wait()
        return self.handler(event, context)


@pytest.fixture
def served(store, box) -> Iterator[Served]:
    served = Served(store, box)
    yield served
    stop_server(served.server, served.thread)


def test_requests_are_handled_at_once_each_with_its_own_answer(served):
    """``THREADS`` requests for as many jobs wait for each other in the handler (they are in it
    at once: under the former lock the first waited alone until the barrier broke), then each
    thread's resolver answers its own request."""
    by_name = {}
    for i in range(THREADS):
        answer = requests.post(served.url + "/v1/jobs", json=job_body(f"job-{i:02}"), timeout=10)
        assert answer.status_code == 201, answer.text
        by_name[answer.json()["name"]] = answer.json()["id"]
    names = iter(sorted(by_name))
    pick = threading.Lock()

    def get_one() -> tuple[str, dict[str, Any]]:
        with pick:
            name = next(names)
        answer = requests.get(f"{served.url}/v1/jobs/{by_name[name]}", timeout=30)
        assert answer.status_code == 200, answer.text
        return name, answer.json()

    served.together = threading.Barrier(THREADS, timeout=20)
    results, errors = run_at_once(get_one, THREADS)
    served.together = None
    assert errors == []
    assert sorted(name for name, _ in results) == sorted(by_name)
    assert all(job["name"] == name and job["id"] == by_name[name] for name, job in results)


def test_a_cursor_issued_on_one_thread_pages_on_another(store, box):
    """Without a cursor secret or a key to derive one from, the cursors' key is random: one for
    all the threads' resolvers, or a page's cursor would be refused by the next thread's."""
    handler = per_thread_handler(lambda: store, lambda: KeylessBox(box), Settings(cursor_secret=None))
    api = Client(handler)
    for i in range(3):
        assert api("POST", "/v1/jobs", job_body(f"job-{i}")).status == 201

    def on_a_thread(query: dict[str, Any]) -> Any:
        answers: list[Any] = []
        thread = threading.Thread(target=lambda: answers.append(api("GET", "/v1/jobs", query=query)))
        thread.start()
        thread.join(30)
        return answers[0]

    first = on_a_thread({"limit": 2})
    assert [job["name"] for job in first.body["jobs"]] == ["job-0", "job-1"]
    second = on_a_thread({"limit": 2, "cursor": first.body["next_cursor"]})
    assert second.status == 200, second.body
    assert [job["name"] for job in second.body["jobs"]] == ["job-2"] and second.body["next_cursor"] is None


def test_threads_resolving_at_once_each_read_their_own_request(served, monkeypatch):
    """Powertools keeps the request in hand on its resolvers' base class: threads that had each
    set theirs, then read it, read the last one set (two creates made one job twice: a 409 and
    another request's job as the answer). All ``THREADS`` set their request, meet, then read."""
    from scheduler.api.app import SchedulerResolver

    met = threading.Barrier(THREADS, timeout=20)
    resolve = SchedulerResolver._resolve

    def after_all_have_set_theirs(self: SchedulerResolver) -> Any:
        met.wait()
        return resolve(self)

    monkeypatch.setattr(SchedulerResolver, "_resolve", after_all_have_set_theirs)
    names = iter(f"job-{i:02}" for i in range(THREADS))
    pick = threading.Lock()

    def create() -> tuple[str, requests.Response]:
        with pick:
            name = next(names)
        return name, requests.post(served.url + "/v1/jobs", json=job_body(name), timeout=30)

    results, errors = run_at_once(create, THREADS)
    assert errors == []
    assert all(answer.status_code == 201 and answer.json()["name"] == name for name, answer in results), [
        (name, answer.status_code, answer.text[:80]) for name, answer in results
    ]

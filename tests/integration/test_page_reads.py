"""A page of big jobs reads from Postgres the rows it answers (and the one after), not ``limit + 1``
of them: 200 jobs of 256 KiB bodies read 130 MB for each page of 3, and the process grew to 1.6 GB."""

from __future__ import annotations

import json

from scheduler.api.pages import FIRST_READ_ROWS
from tests.integration.test_api import api, box, job_body  # noqa: F401 (pytest fixtures)

BIG_BODY = "x" * 262_000  # 256 KiB of body: a page of 2.5 MB holds 9 such jobs


def count_rows_read(store, monkeypatch) -> list[int]:
    """The rows each ``list_jobs`` call of the store answers, as they are read."""
    reads: list[int] = []
    list_jobs = store.list_jobs

    def counted(*args, **kwargs):
        found = list_jobs(*args, **kwargs)
        reads.append(len(found))
        return found

    monkeypatch.setattr(store, "list_jobs", counted)
    return reads


def test_pages_of_big_jobs_read_only_their_rows_and_list_every_job_once(api, store, monkeypatch):
    small = [f"a-small-{i}" for i in range(5)]
    big = [f"b-big-{i:02}" for i in range(30)]
    for name in small:
        assert api("POST", "/v1/jobs", job_body(name, tags=["mix"])).status == 201
    for name in big:
        target = {"type": "http", "url": "https://example.com/", "body": BIG_BODY}
        assert api("POST", "/v1/jobs", job_body(name, tags=["mix"], target=target)).status == 201
    reads = count_rows_read(store, monkeypatch)
    names, cursor, pages = [], None, 0
    while True:
        reads.clear()
        query = {"tag": "mix", "limit": "200", **({"cursor": cursor} if cursor else {})}
        answer = api("GET", "/v1/jobs", query=query)
        assert answer.status == 200, answer.body
        jobs = answer.body["jobs"]
        assert jobs and len(json.dumps(answer.raw)) < 6_000_000
        # The page's rows and the one that shows another follows (or the first read's few):
        # before, all 35 rows for each page.
        assert sum(reads) <= max(len(jobs) + 1, FIRST_READ_ROWS), reads
        names += [job["name"] for job in jobs]
        pages += 1
        cursor = answer.body["next_cursor"]
        if cursor is None:
            break
    assert names == small + big and pages >= 4


def test_a_full_page_knows_whether_another_follows(api, store, monkeypatch):
    """``next_cursor`` is there exactly when more follow: a page that ends with the listing has
    none, one with exactly ``limit`` jobs left has none either."""
    for i in range(6):
        assert api("POST", "/v1/jobs", job_body(f"job-{i}")).status == 201
    reads = count_rows_read(store, monkeypatch)
    first = api("GET", "/v1/jobs", query={"limit": "3"}).body
    assert [job["name"] for job in first["jobs"]] == ["job-0", "job-1", "job-2"] and first["next_cursor"]
    assert sum(reads) == 4
    second = api("GET", "/v1/jobs", query={"limit": "3", "cursor": first["next_cursor"]}).body
    assert [job["name"] for job in second["jobs"]] == ["job-3", "job-4", "job-5"]
    assert second["next_cursor"] is None
    everything = api("GET", "/v1/jobs", query={"limit": "6"}).body
    assert len(everything["jobs"]) == 6 and everything["next_cursor"] is None


def test_calendars_and_alert_rule_sets_page_as_before(api):
    for i in range(5):
        assert api("POST", "/v1/calendars", {"name": f"cal-{i}", "dates": ["2030-01-01"]}).status == 201
    names, cursor = [], None
    while True:
        page = api("GET", "/v1/calendars", query={"limit": "2", **({"cursor": cursor} if cursor else {})}).body
        names += [calendar["name"] for calendar in page["calendars"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert names == [f"cal-{i}" for i in range(5)]
    listed = api("GET", "/v1/alert-rules", query={"limit": "2"})
    assert listed.status == 200 and listed.body == {"alert_rules": [], "next_cursor": None}

"""The console's page of one execution (#/executions/ID) and of a deleted job, in Chromium against
a real `scheduler local`: reached from an execution's row, an alert and a chained run's cause,
followed live while the execution runs; a job deleted shows who deleted it and its change log."""

from __future__ import annotations

import re
import threading
import uuid

import requests

from tests.browser.test_console import TIMEOUT_MS, _shoot, api, browser, target, watched_page  # noqa: F401 - fixtures
from tests.browser.test_console_edits import PARKED


def test_an_execution_has_a_page_followed_while_it_runs_and_reached_from_its_row_and_its_alert(browser, api, target):
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    target.responses["/slow"] = [(500, {}, b"export failed: disk full")]
    target.gates["/slow"] = gate = threading.Event()
    hook = {"type": "http", "url": target.url + "/hook"}
    job = api.post(
        "/v1/jobs",
        {
            "name": "slow-export",
            "schedule": PARKED,
            "retry": {"max_attempts": 1},
            "alerts": [{"on": "failure", "target": hook}],
            "target": {"type": "http", "method": "POST", "url": target.url + "/slow", "timeout_seconds": 60},
        },
    )
    api.post(f"/v1/jobs/{job['id']}/run", {})
    page, problems = watched_page(browser)
    try:
        page.goto(f"{api.url}/console/#/jobs/{job['id']}")
        row = page.locator("table.executions tr.exec").first
        expect(row).to_contain_text("running")
        row.click()
        page.locator(".execution-details a.execution-link").click()
        expect(page).to_have_url(re.compile(r"#/executions/[0-9a-f-]{36}$"))
        execution_url = page.url
        expect(page.get_by_role("heading", name="Execution of slow-export")).to_be_visible()
        expect(page.locator("h1 .badge")).to_have_text("running")
        expect(page.locator(".refreshed")).to_contain_text("until it ends")
        # The target answers: the page, read again while the execution runs, shows how it ended.
        gate.set()
        expect(page.locator("h1 .badge")).to_have_text("failed")
        expect(page.locator(".execution-summary .http")).to_have_text("500")
        expect(page.locator(".execution-details .excerpt")).to_contain_text("disk full")
        expect(page.locator(".refreshed")).to_have_count(0)
        expect(page.locator(".execution-details a.execution-link")).to_have_count(0)  # it is this page
        _shoot(page, "execution")
        # Its alert leads to it too.
        page.goto(f"{api.url}/console/#/alerts")
        alert = page.locator("tr.alert-row a.alert-execution")
        expect(alert).to_have_count(1)
        alert.click()
        expect(page).to_have_url(execution_url)
        expect(page.get_by_role("heading", name="Execution of slow-export")).to_be_visible()
        page.locator(".execution-summary a.job").click()
        expect(page.get_by_role("heading", name="slow-export")).to_be_visible()
    finally:
        gate.set()
    assert problems == []


def test_an_execution_that_is_no_more_says_why(browser, api):
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    page, problems = watched_page(browser, expected=(404,))
    page.goto(f"{api.url}/console/#/executions/{uuid.uuid4()}")
    expect(page.get_by_role("alert")).to_contain_text("execution")
    expect(page.locator(".gone")).to_contain_text("deleted with its job")
    assert problems == []


def test_a_deleted_jobs_page_says_who_deleted_it_and_keeps_its_change_log(browser, api, target):
    """A job deleted elsewhere while its page is open: the page stops reading it, and says when
    and by whom it was deleted, over its change log. A job that never was: the 404 alone."""
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    job = api.post("/v1/jobs", {"name": "retired", "schedule": PARKED, "target": {"type": "http", "url": target.url}})
    page, problems = watched_page(browser, expected=(404,))
    page.goto(f"{api.url}/console/#/jobs/{job['id']}")
    expect(page.get_by_role("heading", name="retired")).to_be_visible()
    assert requests.delete(f"{api.url}/v1/jobs/{job['id']}", timeout=10).status_code == 204
    expect(page.get_by_role("heading", name="Deleted job")).to_be_visible()
    expect(page.locator(".gone")).to_contain_text("Deleted ")
    rows = page.locator("table.changes tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0).locator(".action")).to_have_text("delete")
    expect(rows.nth(1).locator(".action")).to_have_text("create")
    # No more reads of it: a refresh would be another 404.
    reads: list[str] = []
    page.on("request", lambda r: reads.append(r.url) if f"/v1/jobs/{job['id']}" in r.url else None)
    page.wait_for_timeout(3500)  # longer than the job page's refresh: asserts that none was sent
    assert [r for r in reads if "/changes" not in r] == []

    page.goto(f"{api.url}/console/#/jobs/{uuid.uuid4()}")
    expect(page.get_by_role("alert")).to_contain_text("job")
    expect(page.get_by_role("heading", name="Deleted job")).to_have_count(0)
    assert problems == []

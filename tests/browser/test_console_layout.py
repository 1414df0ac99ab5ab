"""The console in a narrow window, its chart when a filter leaves nothing to draw or one start
only, and its bulk buttons when a filter selects no job. In Chromium against a real
``scheduler local`` (as test_console.py)."""

from __future__ import annotations

import psycopg
import pytest

from tests.browser.test_console import TIMEOUT_MS, api, browser, target, watched_page  # noqa: F401 - fixtures
from tests.browser.test_console_edits import PARKED, _add_executions

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# What a page's widest element asks of the window: more than its width, and the page scrolls sideways.
_OVERFLOW = "() => document.documentElement.scrollWidth - window.innerWidth"


def test_the_lists_fit_a_narrow_window(browser, api, target, db_url):
    """At 700 px wide (a split screen), the jobs list, the recent activity and a job's page fit
    the window: nothing to scroll sideways for, the error of an execution still shown."""
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    hook = {"type": "http", "url": target.url + "/x"}
    job = api.post(
        "/v1/jobs",
        {
            "name": "nightly-ledger-reconciliation-eu-west",
            "tags": ["billing", "ledger"],
            "schedule": PARKED,
            "timezone": "Europe/Berlin",
            "target": hook,
        },
    )
    _add_executions(db_url, job["id"], range(100, 130))
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(
            "UPDATE executions SET status = 'failed', http_status = 503, error = %s WHERE job_id = %s",
            ("HTTP 503 from the ledger service: upstream connect error or disconnect/reset before headers", job["id"]),
        )
    page = browser.new_page(viewport={"width": 700, "height": 900})
    for address, shown in (
        ("#/jobs", "table.jobs tbody tr"),
        ("#/activity", "table.executions tbody tr.exec"),
        (f"#/jobs/{job['id']}", "table.executions tbody tr.exec"),
    ):
        page.goto(f"{api.url}/console/{address}")
        expect(page.locator(shown).first).to_be_visible()
        assert page.evaluate(_OVERFLOW) <= 0, address
    expect(page.locator("table.executions td.error-text").first).to_be_visible()
    expect(page.locator("table.executions td.error-text").first).to_contain_text("upstream connect error")


def test_the_chart_says_what_its_filter_left_and_draws_one_start(browser, api, target, db_url):
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    job = api.post("/v1/jobs", {"name": "once-ran", "schedule": PARKED, "target": {"type": "http", "url": target.url}})
    _add_executions(db_url, job["id"], range(30, 31))  # one start only
    page, problems = watched_page(browser)
    page.goto(f"{api.url}/console/#/jobs/{job['id']}")
    expect(page.locator("table.executions tbody tr.exec")).to_have_count(1)
    expect(page.locator(".chart canvas")).to_have_count(1)
    # Its time axis spans a minute either side of the one start (uPlot stretched it over years).
    span = page.evaluate("() => { const x = document.querySelector('.chart').plot.scales.x; return x.max - x.min; }")
    assert span == 120
    page.select_option("select[name=execution_status]", "timed_out")
    expect(page.locator(".chart-empty")).to_have_text("No execution with status timed out has started.")
    page.select_option("select[name=execution_status]", "")
    expect(page.locator(".chart canvas")).to_have_count(1)
    assert problems == []


def test_the_bulk_buttons_need_a_job_to_change_and_their_note_goes_with_its_filter(browser, api, target):
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    hook = {"type": "http", "url": target.url + "/x"}
    for name in ("team-a-1", "team-a-2"):
        api.post("/v1/jobs", {"name": name, "tags": ["team-a"], "schedule": PARKED, "target": hook})
    page, problems = watched_page(browser)
    # A tag no job has: no button that would change nothing.
    page.goto(f"{api.url}/console/#/jobs?tag=nobody")
    expect(page.locator(".empty")).to_be_visible()
    expect(page.locator(".bulk")).to_have_count(0)
    # The active jobs of a tag, paused: the list is empty after it, and what was done is still said.
    page.goto(f"{api.url}/console/#/jobs?tag=team-a&state=active")
    rows = page.locator("table.jobs tbody tr")
    expect(rows).to_have_count(2)
    page.get_by_role("button", name="Pause all matching").click()
    expect(page.locator(".empty")).to_be_visible()
    expect(page.locator(".bulk .note")).to_have_text("Paused 2 jobs (tag team-a).")
    expect(page.get_by_role("button", name="Pause all matching")).to_have_count(0)
    # Another filter: the note, which spoke of the one before, goes.
    page.select_option("select[name=state]", "paused")
    expect(rows).to_have_count(2)
    expect(page.get_by_role("button", name="Resume all matching")).to_be_visible()
    expect(page.locator(".bulk .note")).to_have_count(0)
    assert problems == []

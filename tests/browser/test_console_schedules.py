"""Several expressions and a spread in the web console (issue 33 items 2, 3 and 8), in Debian's
Chromium against a real ``scheduler local``: the form takes more expressions (one a line) and a
spread, its live preview names the expression of each time, a refused expression is shown at
its field, and the job's page lists its own times with their expression and spread offset."""

from __future__ import annotations

import re

from tests.browser.test_console import TIMEOUT_MS, api, browser, target, watched_page  # noqa: F401 (fixtures)
from tests.browser.test_console_newcomer import _shown


def test_a_job_with_several_expressions_and_a_spread_in_the_console(browser, api, target):
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    page, problems = watched_page(browser, 1000, expected=(400,))
    page.goto(api.url + "/console/#/jobs/new")
    expect(page.get_by_role("heading", name="New job")).to_be_visible()
    page.fill("input[name=name]", "weekday-and-six-hourly")
    page.fill("input[name=schedule]", "0 9 * * 1-5")
    page.fill("input[name=timezone]", "Europe/London")
    page.fill("input[name=url]", target.url + "/union")

    # A refused second expression: the API's words at the expressions' field, and in the preview.
    page.fill("textarea[name=schedules_more]", "every six hours")
    expect(page.locator('[data-preview="error"]')).to_contain_text("schedules.1")
    page.get_by_role("button", name="Create").click()
    error = page.locator('.field-error[data-field="schedules"]')
    expect(error).to_be_visible()

    # Fixed: the preview names the expression of each time; a new job's spread is announced.
    page.fill("textarea[name=schedules_more]", "rate(6 hours)")
    expect(error).to_have_count(0)
    items = page.locator('[data-preview="ok"] li')
    expect(items).to_have_count(5)
    expect(items.locator("code.expression").filter(has_text="rate(6 hours)").first).to_be_visible()
    page.fill("input[name=spread_window]", "900")
    page.select_option("select[name=spread_mode]", "stable")
    expect(page.locator('[data-preview="spread"]')).to_contain_text("900 s")
    page.get_by_role("button", name="Create").click()

    # The job's page: its definition, and its own times, each explained.
    expect(page).to_have_url(re.compile(r"#/jobs/[0-9a-f-]{36}$"))
    job_id = page.url.rsplit("/", 1)[1]
    job = api.get(f"/v1/jobs/{job_id}")
    assert job["schedules"] == ["0 9 * * 1-5", "rate(6 hours)"]
    assert job["spread"] == {"window_seconds": 900, "mode": "stable"}
    definition = page.locator("pre.definition")
    expect(definition).to_contain_text('"rate(6 hours)"')
    expect(definition).to_contain_text('"window_seconds": 900')
    times = page.locator(".card ol.occurrences li")
    expect(times).to_have_count(5)
    expect(times.first.locator(".utc")).to_have_text(_shown(job["next_run_at"]))
    preview = api.post(
        "/v1/schedules/preview",
        {
            "schedules": job["schedules"],
            "timezone": "Europe/London",
            "spread": job["spread"],
            "job_id": job_id,
            # rate() counts from the job's creation (as a whole second), as the page asks too.
            "start_at": re.sub(r"\.\d+", "", job["created_at"]),
            "after": job["next_run_at"],
            "count": 4,
            "explain": True,
        },
    )["occurrences"]
    offset = preview[0]["spread_seconds"]
    assert all(item["spread_seconds"] == offset for item in preview)  # stable: the job's one offset
    for shown, item in zip(times.all()[1:], preview, strict=True):
        expect(shown.locator(".utc")).to_have_text(_shown(item["at"]))
        expect(shown.locator("code.expression")).to_have_text(item["expression"])
        if offset:
            expect(shown.locator(".spread")).to_have_text(f"+{offset}s spread")

    # The list shows both expressions; the edit form gives them back, previewed as the job's.
    page.goto(api.url + "/console/#/jobs")
    expect(page.locator("table.jobs tbody tr").filter(has_text="weekday-and-six-hourly")).to_contain_text(
        "0 9 * * 1-5 | rate(6 hours)"
    )
    page.goto(f"{api.url}/console/#/jobs/{job_id}/edit")
    expect(page.locator("input[name=schedule]")).to_have_value("0 9 * * 1-5")
    expect(page.locator("textarea[name=schedules_more]")).to_have_value("rate(6 hours)")
    expect(page.locator("input[name=spread_window]")).to_have_value("900")
    expect(page.locator('[data-preview="ok"] li')).to_have_count(5)
    if offset:
        expect(page.locator('[data-preview="ok"] li .spread').first).to_have_text(f"+{offset}s spread")
    page.fill("textarea[name=schedules_more]", "")
    page.fill("input[name=spread_window]", "")
    page.get_by_role("button", name="Save").click()
    expect(definition).to_contain_text('"schedule": "0 9 * * 1-5"')
    saved = api.get(f"/v1/jobs/{job_id}")
    assert saved["schedules"] is None and saved["spread"] is None
    assert problems == []

"""The console's calendars in a real browser (Debian's Chromium driven by Playwright) against a
real `scheduler local`: the calendars page (create from dates or iCalendar text, the API's errors
at their fields, replace, a refused delete naming the job), and the job form's calendar fields
with its preview explaining the excluded and shifted times."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
import requests

from tests.browser.test_console import TIMEOUT_MS, _shoot, api, browser, watched_page  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

UK_ICS = (
    "BEGIN:VCALENDAR\nVERSION:2.0\n"
    "BEGIN:VEVENT\nDTSTART;VALUE=DATE:20261225\nDTEND;VALUE=DATE:20261226\nSUMMARY:Christmas Day\nEND:VEVENT\n"
    "BEGIN:VEVENT\nDTSTART;VALUE=DATE:20261228\nDTEND;VALUE=DATE:20261229\nSUMMARY:Boxing Day\nEND:VEVENT\n"
    "END:VCALENDAR\n"
)


def test_calendars_page_and_the_job_forms_calendar_fields(browser, api):
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    page, problems = watched_page(browser, expected=(400, 409))

    page.goto(api.url + "/console/#/jobs")
    page.get_by_role("link", name="Calendars").click()
    expect(page.get_by_role("heading", name="Calendars")).to_be_visible()
    expect(page.locator(".empty")).to_have_text("No calendars yet.")

    # A bad date: the API's error shows at the dates field.
    page.fill("input[name=name]", "office")
    page.fill("textarea[name=dates]", "2026-12-31\n2026-02-30")
    page.get_by_role("button", name="Create").click()
    error = page.locator('.field-error[data-field="dates"]')
    expect(error).to_contain_text("dates.1")
    page.fill("textarea[name=dates]", "2026-12-31")
    page.fill("textarea[name=yearly]", "01-01")
    page.get_by_role("button", name="Create").click()
    expect(page).to_have_url(re.compile(r"#/calendars/office$"))
    expect(page.locator("table.calendars tbody tr")).to_have_count(1)

    # An iCalendar one, in its zone.
    page.get_by_role("link", name="New calendar").click()
    page.fill("input[name=name]", "uk")
    page.fill("input[name=timezone]", "Europe/London")
    page.get_by_label("iCalendar (.ics)").check()
    page.fill("textarea[name=ics]", UK_ICS)
    page.get_by_role("button", name="Create").click()
    rows = page.locator("table.calendars tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.filter(has_text="uk")).to_contain_text("iCalendar: 2 events")
    _shoot(page, "calendars")

    # The job form: its calendar fields, and the preview explaining the excluded times.
    page.get_by_role("link", name="Jobs", exact=True).click()
    page.get_by_role("link", name="New job").click()
    page.fill("input[name=name]", "daily-report")
    page.fill("input[name=schedule]", "0 9 * * *")
    page.fill("input[name=timezone]", "Europe/London")
    page.fill("input[name=start_at]", "2026-12-24T10:00:00Z")
    page.fill("input[name=exclude_calendars]", "uk")
    page.fill("input[name=url]", "https://example.com/hook")
    preview = page.locator('[data-preview="ok"] li')
    expect(preview.first).to_contain_text("2026-12-25 09:00:00 UTC")
    expect(preview.first).to_contain_text("excluded by uk")
    expect(preview.nth(1)).to_contain_text("2026-12-26 09:00:00 UTC")
    page.select_option("select[name=on_excluded]", "shift")
    expect(preview.first).to_contain_text("2026-12-26 00:00:00 UTC")
    expect(preview.first).to_contain_text("shifted from 2026-12-25 09:00:00 UTC (uk)")
    _shoot(page, "form-calendars")
    page.fill("input[name=exclude_calendars]", "uk, nope")
    page.get_by_role("button", name="Create").click()
    expect(page.locator('.field-error[data-field="exclude_calendars"]')).to_contain_text("nope")
    page.fill("input[name=exclude_calendars]", "uk")
    page.get_by_role("button", name="Create").click()
    expect(page).to_have_url(re.compile(r"#/jobs/[0-9a-f-]{36}$"))
    job_id = page.url.rsplit("/", 1)[1]
    expect(page.locator("dd.calendars")).to_contain_text("uk")
    expect(page.locator("dd.next-run")).to_contain_text("2026-12-26 00:00:00 UTC")
    assert requests.get(f"{api.url}/v1/jobs/{job_id}", timeout=10).json()["on_excluded"] == "shift"

    # Its calendar: a change replans the job; a delete is refused while the job names it.
    page.locator("dd.calendars").get_by_role("link", name="uk").click()
    expect(page.locator("textarea[name=ics]")).to_have_value(UK_ICS)
    page.get_by_label("dates, ranges, yearly days").check()
    page.fill("textarea[name=dates]", "2026-12-26")
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".note")).to_contain_text("replanned")
    assert requests.get(f"{api.url}/v1/jobs/{job_id}", timeout=10).json()["next_run_at"] == "2026-12-25T09:00:00Z"
    # Its change log below the form, read again after the save: the replacement, newest first.
    changes = page.locator(".calendar-changes table.changes tbody tr")
    expect(changes).to_have_count(2)
    expect(changes.first).to_contain_text("update")
    expect(changes.first).to_contain_text('dates: ∅ → ["2026-12-26"]')
    expect(changes.nth(1)).to_contain_text("create")
    _shoot(page, "calendar-changes")
    page.get_by_role("button", name="Delete").click()  # asks first
    page.locator(".calendar-form .confirm").get_by_role("button", name="Delete").click()
    expect(page.locator(".calendar-form .alert")).to_contain_text("daily-report")
    # A calendar no job names is deleted, and the list says so.
    api.post("/v1/calendars", {"name": "spare", "timezone": "UTC", "dates": ["2027-01-02"]})
    page.goto(f"{api.url}/console/#/calendars/spare")
    expect(page.locator(".calendar-form legend")).to_have_text("Calendar spare")
    page.get_by_role("button", name="Delete").click()
    page.locator(".calendar-form .confirm").get_by_role("button", name="Cancel").click()
    expect(page.locator(".calendar-form .confirm")).to_have_count(0)
    page.get_by_role("button", name="Delete").click()
    page.locator(".calendar-form .confirm").get_by_role("button", name="Delete").click()
    expect(page).to_have_url(re.compile(r"#/calendars$"))
    expect(page.locator(".note")).to_have_text("Deleted spare.")
    assert requests.get(f"{api.url}/v1/calendars/spare", timeout=10).status_code == 404

    # A job every minute under a calendar excluding today: its skipped row, reason calendar.
    today = datetime.now(UTC).date()
    closed = [today.isoformat(), (today + timedelta(days=1)).isoformat()]  # today and tomorrow (near midnight)
    api.post("/v1/calendars", {"name": "closed", "timezone": "UTC", "dates": closed})
    hook = {"type": "http", "method": "POST", "url": "https://example.com/hook"}
    minutely = api.post(
        "/v1/jobs", {"name": "minutely", "schedule": "* * * * *", "exclude_calendars": ["closed"], "target": hook}
    )
    page.goto(f"{api.url}/console/#/jobs/{minutely['id']}")
    skipped = page.locator("table.executions tbody tr.exec").filter(has=page.locator(".badge.b-skipped"))
    expect(skipped.first).to_contain_text(re.compile(r"\d+ occurrences? skipped: calendar"))
    _shoot(page, "job-skipped-calendar")
    assert problems == []


def test_a_calendar_changed_elsewhere_while_edited_is_not_overwritten(browser, api):
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    page, problems = watched_page(browser, expected=(412,))
    api.post("/v1/calendars", {"name": "shop", "timezone": "UTC", "dates": ["2026-12-24"]})
    page.goto(api.url + "/console/#/calendars/shop")
    expect(page.locator("textarea[name=dates]")).to_have_value("2026-12-24")
    # Someone else replaces it while the form is open (version 2).
    other = requests.put(f"{api.url}/v1/calendars/shop", json={"dates": ["2026-12-31"]}, timeout=10)
    assert other.status_code == 200 and other.json()["version"] == 2
    page.fill("textarea[name=dates]", "2026-12-25")
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".calendar-form .alert")).to_contain_text("changed since you opened it: it is now at version 2")
    # The list above the form reads again: it shows the version the calendar is at.
    expect(page.locator("table.calendars tbody tr").filter(has_text="shop").locator("td.num")).to_have_text("2")
    _shoot(page, "calendar-changed-elsewhere")
    assert requests.get(f"{api.url}/v1/calendars/shop", timeout=10).json()["dates"] == ["2026-12-31"]
    # Loaded again (the alert's button: its link in the list is the address already open, which
    # reads nothing), it shows the change and saves over version 2.
    page.locator(".calendar-form .alert").get_by_role("button", name="Load it again").click()
    expect(page.locator("textarea[name=dates]")).to_have_value("2026-12-31")
    expect(page.locator(".calendar-form .alert")).to_have_count(0)
    page.fill("textarea[name=dates]", "2026-12-25")
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".note")).to_contain_text("version 3")
    assert problems == []


def test_a_shifted_occurrences_execution_says_where_from(browser, api, db_url):
    """An execution of an occurrence a calendar moved is tagged ``shifted`` in the history, and
    its details name the occurrence it was moved from and the calendar."""
    import psycopg
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    requests.post(api.url + "/v1/calendars", json={"name": "xmas", "dates": ["2026-12-25"]}, timeout=10)
    job = requests.post(
        api.url + "/v1/jobs",
        json={
            "name": "shifted-one",
            "schedule": "0 9 * * *",
            "exclude_calendars": ["xmas"],
            "on_excluded": "shift",
            "target": {"type": "http", "url": "https://example.com/hook"},
        },
        timeout=10,
    ).json()
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(
            """INSERT INTO executions (id, job_id, owner, scheduled_at, due_at, started_at, finished_at, attempt,
                                       trigger, status, http_status, duration_ms, shifted_from, excluded_by)
               VALUES (gen_random_uuid(), %s, %s, '2026-12-26T00:00:00Z', '2026-12-26T00:00:00Z', now(), now(), 1,
                       'schedule', 'succeeded', 200, 5, '2026-12-25T09:00:00Z', 'xmas')""",
            (job["id"], job["owner"]),
        )
    page, problems = watched_page(browser)
    page.goto(f"{api.url}/console/#/jobs/{job['id']}")
    row = page.locator("table.executions tbody tr.exec").first
    expect(row.locator(".tag.shifted")).to_have_text("shifted")
    row.click()
    expect(page.locator(".execution-details .shifted")).to_contain_text("calendar xmas excluded it")
    assert not problems

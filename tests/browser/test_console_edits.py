"""The console keeps what it does not show, and its lists keep what they showed: an edit leaves a
job's chains and its tags as they are, every method the API takes is in the form, the calendars
past the first page are listed, a job's history has no hole after "Older executions", the jobs
list keeps every row loaded, the bulk buttons change every job a filter selects, past the
1,000 of one request, and a tab in the background refreshes nothing. In Chromium against a real
``scheduler local`` (as test_console.py)."""

from __future__ import annotations

import contextlib
import re
from urllib.parse import urlsplit

import psycopg
import pytest
import requests

from tests.browser.test_console import TIMEOUT_MS, api, browser, target, watched_page  # noqa: F401 - fixtures

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PARKED = "0 0 1 1 *"  # not due while a test runs


def test_an_edit_keeps_the_chains_the_tags_and_the_method_it_does_not_change(browser, api, target):
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    hook = {"type": "http", "timeout_seconds": 5, "url": target.url + "/x"}
    api.post("/v1/jobs", {"name": "next-step", "schedule": PARKED, "target": {**hook, "method": "POST"}})
    job = api.post(
        "/v1/jobs",
        {
            "name": "first-step",
            "schedule": PARKED,
            "tags": ["team,billing", " padded ", "x"],
            "on_success": ["next-step"],
            "on_failure": ["next-step"],
            "on_complete": ["next-step"],
            "target": {**hook, "method": "HEAD"},
        },
    )
    page, problems = watched_page(browser)
    page.goto(f"{api.url}/console/#/jobs/{job['id']}/edit")
    expect(page.locator("select[name=method]")).to_have_value("HEAD")
    page.fill("input[name=description]", "only this changes")
    page.get_by_role("button", name="Save").click()
    # The job's page once the answer came (its edit page has the same heading; the API now
    # serves requests at once, so a read made before the answer may see the job as it was).
    expect(page).to_have_url(re.compile(rf"#/jobs/{job['id']}$"))
    saved = api.get(f"/v1/jobs/{job['id']}")
    assert saved["description"] == "only this changes"
    assert saved["tags"] == job["tags"]
    assert (saved["on_success"], saved["on_failure"], saved["on_complete"]) == (["next-step"],) * 3
    assert saved["target"]["method"] == "HEAD"
    # Tags typed anew are split on commas, as the form says.
    page.get_by_role("link", name="Edit", exact=True).click()
    expect(page.locator("input[name=description]")).to_have_value("only this changes")
    page.fill("input[name=tags]", "a, b")
    page.select_option("select[name=method]", "OPTIONS")
    page.get_by_role("button", name="Save").click()
    # The job's page once the answer came (its edit page has the same heading; the API now
    # serves requests at once, so a read made before the answer may see the job as it was).
    expect(page).to_have_url(re.compile(rf"#/jobs/{job['id']}$"))
    saved = api.get(f"/v1/jobs/{job['id']}")
    assert saved["tags"] == ["a", "b"] and saved["target"]["method"] == "OPTIONS"
    assert saved["on_success"] == ["next-step"]
    assert problems == []


def test_the_form_sets_a_jobs_chains_and_what_becomes_of_it_once_it_completes(browser, api, target):
    """Chains (the jobs a job runs next) and after_completion are fields of the form: set on a new
    job, shown and changed on its edit, a reference to no job of yours refused at its field."""
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    hook = {"type": "http", "url": target.url + "/x"}
    for name in ("report", "cleanup"):
        api.post("/v1/jobs", {"name": name, "schedule": PARKED, "target": hook})
    page, problems = watched_page(browser, expected=(400,))  # the refused chain below
    page.goto(f"{api.url}/console/#/jobs/new")
    page.fill("input[name=name]", "extract")
    page.fill("input[name=schedule]", PARKED)
    page.fill("input[name=url]", target.url + "/x")
    page.fill("input[name=on_success]", "report, cleanup")
    page.select_option("select[name=after_completion]", "delete")
    page.get_by_role("button", name="Create").click()
    expect(page).to_have_url(re.compile(r"#/jobs/[0-9a-f-]{36}$"))
    job_id = page.url.rsplit("/", 1)[1]
    saved = api.get(f"/v1/jobs/{job_id}")
    assert (saved["on_success"], saved["on_failure"], saved["after_completion"]) == (
        ["report", "cleanup"],
        [],
        "delete",
    )

    page.get_by_role("link", name="Edit", exact=True).click()
    expect(page.locator("input[name=on_success]")).to_have_value("report, cleanup")
    expect(page.locator("select[name=after_completion]")).to_have_value("delete")
    page.fill("input[name=on_success]", "")
    page.fill("input[name=on_failure]", "nope")
    page.get_by_role("button", name="Save").click()
    expect(page.locator('.field-error[data-field="on_failure"]')).to_contain_text("names no job of yours")
    page.fill("input[name=on_failure]", "cleanup")
    page.select_option("select[name=after_completion]", "keep")
    page.get_by_role("button", name="Save").click()
    expect(page).to_have_url(re.compile(rf"#/jobs/{job_id}$"))
    saved = api.get(f"/v1/jobs/{job_id}")
    assert (saved["on_success"], saved["on_failure"], saved["after_completion"]) == ([], ["cleanup"], "keep")
    assert problems == []


def test_the_calendars_past_the_first_page_are_listed(browser, api):
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    with requests.Session() as session:
        for i in range(205):
            answer = session.post(f"{api.url}/v1/calendars", json={"name": f"cal-{i:03}", "dates": ["2030-01-01"]})
            assert answer.status_code == 201, answer.text
    page, problems = watched_page(browser)
    page.goto(f"{api.url}/console/#/calendars")
    expect(page.get_by_role("link", name="cal-204", exact=True)).to_be_visible()
    assert problems == []


def _add_executions(db_url: str, job_id: str, seconds_ago: range) -> None:
    """Finished executions of the job, one a second ago in ``seconds_ago``, recorded oldest first
    as the runner records them (their ``seq`` follows their ``started_at``: the pages' order)."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(
            """INSERT INTO executions (id, job_id, owner, scheduled_at, due_at, started_at, finished_at, attempt,
                                       trigger, status, http_status, duration_ms)
               SELECT gen_random_uuid(), %s, owner, at, at, at, at, 1, 'schedule', 'succeeded', 200, 1
               FROM job_specs, LATERAL (SELECT now() - make_interval(secs => s) AS at FROM unnest(%s::int[]) s) t
               WHERE id = %s ORDER BY at""",
            (job_id, list(seconds_ago), job_id),
        )


def test_a_jobs_history_keeps_no_hole_after_older_executions(browser, api, target, db_url):
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    job = api.post("/v1/jobs", {"name": "busy", "schedule": PARKED, "target": {"type": "http", "url": target.url}})
    _add_executions(db_url, job["id"], range(1000, 1120))  # 120, the newest 1,000 s ago
    page, problems = watched_page(browser)
    page.goto(f"{api.url}/console/#/jobs/{job['id']}")
    rows = page.locator("table.executions tbody tr.exec")
    expect(rows).to_have_count(50)
    page.get_by_role("button", name="Older executions").click()
    expect(rows).to_have_count(100)
    # Three more runs: the refresh (every 3 s) adds them above, and keeps the 100 below.
    _add_executions(db_url, job["id"], range(900, 903))
    expect(rows).to_have_count(103)
    # More runs than a page since: the list starts again from the newest page.
    _add_executions(db_url, job["id"], range(800, 860))
    expect(rows).to_have_count(50)
    page.get_by_role("button", name="Older executions").click()
    expect(rows).to_have_count(100)
    listed = api.get(f"/v1/jobs/{job['id']}/executions?limit=100")["executions"]
    shown = page.locator("table.executions tbody tr.exec").evaluate_all("rows => rows.map(r => r.textContent)")
    assert len(shown) == len(listed) == 100
    assert problems == []


def test_recent_activity_pages_back_and_filters_by_since_and_job(browser, api, target, db_url):
    """Recent activity lists the newest 50 executions across jobs, older ones a page at a time,
    keeps them through its refreshes, and narrows to those since an instant, or to one job."""
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    hook = {"type": "http", "url": target.url}
    busy = api.post("/v1/jobs", {"name": "busy", "schedule": PARKED, "target": hook})
    quiet = api.post("/v1/jobs", {"name": "quiet", "schedule": PARKED, "target": hook})
    _add_executions(db_url, busy["id"], range(1000, 1110))  # 110, the newest 1,000 s ago
    _add_executions(db_url, quiet["id"], range(5000, 5010))  # 10 older ones
    page, problems = watched_page(browser, expected=(400,))  # the refused "since" below
    page.goto(f"{api.url}/console/#/activity")
    rows = page.locator("table.executions tbody tr.exec")
    older = page.get_by_role("button", name="Older executions")
    expect(rows).to_have_count(50)
    older.click()
    expect(rows).to_have_count(100)
    _add_executions(db_url, busy["id"], range(900, 902))  # a refresh adds them above the 100
    expect(rows).to_have_count(102)
    older.click()
    expect(rows).to_have_count(122)
    expect(older).to_have_count(0)
    expect(rows.last).to_contain_text("quiet")

    # Since an instant: 1,001 s ago takes the two newest and the newest two of the 110.
    since = api.get("/v1/executions?limit=4")["executions"][-1]["started_at"]
    page.fill("input[name=since]", since)
    expect(rows).to_have_count(4)
    expect(page).to_have_url(re.compile(r"#/activity\?since="))
    page.fill("input[name=since]", "yesterday")
    expect(page.get_by_role("alert")).to_contain_text("since")
    expect(rows).to_have_count(0)  # the rows of the filters before are not left under the refused ones
    expect(older).to_have_count(0)
    page.fill("input[name=since]", "")
    expect(rows).to_have_count(50)

    # One job's, as a link can ask (#/activity?job_id=...), and back to all jobs.
    page.goto(f"{api.url}/console/#/activity?job_id={quiet['id']}")
    expect(rows).to_have_count(10)
    expect(page.locator(".job-filter")).to_contain_text("quiet")
    page.get_by_role("button", name="all jobs").click()
    expect(rows).to_have_count(50)
    assert problems == []


def test_the_jobs_list_keeps_its_rows_and_the_bulk_buttons_change_every_job(browser, api, target, db_url):
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    hook = {"type": "http", "url": target.url + "/x"}
    with requests.Session() as session:
        for i in range(1003):
            body = {"name": f"mass-{i:04}", "tags": ["mass"], "schedule": PARKED, "target": hook}
            assert session.post(f"{api.url}/v1/jobs", json=body).status_code == 201
    page, problems = watched_page(browser)
    page.goto(f"{api.url}/console/#/jobs?tag=mass")
    rows = page.locator("table.jobs tbody tr")
    expect(rows).to_have_count(50)
    for shown in (100, 150, 200, 250):
        page.get_by_role("button", name="More").click()
        expect(rows).to_have_count(shown)
    # Two refreshes (every 5 s) read every row shown again: the list stays at 250.
    updated = page.locator(".refreshed").text_content()
    expect(page.locator(".refreshed")).not_to_have_text(updated or "", timeout=12_000)
    updated = page.locator(".refreshed").text_content()
    expect(page.locator(".refreshed")).not_to_have_text(updated or "", timeout=12_000)
    expect(rows).to_have_count(250)
    # One request pauses at most 1,000: the button sends it again until every job is paused.
    page.get_by_role("button", name="Pause all matching").click()
    expect(page.locator(".bulk .note")).to_have_text("Paused 1003 jobs (tag mass).", timeout=60_000)
    with psycopg.connect(db_url) as conn:
        [(active,)] = conn.execute("SELECT count(*) FROM job_runs WHERE state = 'active'").fetchall()
    assert active == 0
    assert problems == []


# The page's visibility as the browser reports it when its tab goes to the background or comes back.
_SHOW = """(hidden) => {
  Object.defineProperty(document, 'hidden', { configurable: true, get: () => hidden });
  Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => (hidden ? 'hidden' : 'visible') });
  document.dispatchEvent(new Event('visibilitychange'));
}"""


def test_a_console_tab_in_the_background_reads_nothing_and_reads_at_once_when_shown_again(browser, api, target):
    """The lists refresh every 5 s while they are seen; a hidden tab makes no request however
    long it stays hidden (each is an API call, billed in a deployment), and a tab shown again
    reads at once rather than at its next 5 s. The page's timers run on Playwright's clock."""
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    hook = {"type": "http", "url": target.url + "/x"}
    api.post("/v1/jobs", {"name": "seen-first", "schedule": PARKED, "target": hook})
    page, problems = watched_page(browser)
    page.clock.install()
    page.goto(f"{api.url}/console/#/jobs")
    expect(page.get_by_role("link", name="seen-first", exact=True)).to_be_visible()
    reads: list[str] = []
    page.on("request", lambda request: reads.append(urlsplit(request.url).path))
    with page.expect_request(re.compile(r"/v1/jobs\?")):  # seen: read again at its 5 s
        page.clock.run_for(5_000)

    page.evaluate(_SHOW, True)
    reads.clear()
    page.clock.run_for(120_000)  # 24 refreshes' worth
    api.post("/v1/jobs", {"name": "made-while-hidden", "schedule": PARKED, "target": hook})
    # A request of the test's own after the clock ran: the browser reports requests in order, so
    # any read the refreshes made while the tab was hidden would be reported before it.
    with page.expect_request(re.compile(r"/v1/health$")):
        page.evaluate("() => fetch(new URL('../v1/health', location.href))")
    assert [path for path in reads if path.endswith("/v1/jobs")] == []
    expect(page.get_by_role("link", name="made-while-hidden", exact=True)).to_have_count(0)

    with page.expect_request(re.compile(r"/v1/jobs\?")):  # shown: read now, no timer fired
        page.evaluate(_SHOW, False)
    expect(page.get_by_role("link", name="made-while-hidden", exact=True)).to_be_visible()
    assert problems == []


def _delete_while_held(page, pattern, held: list) -> list[str]:
    """Confirm the job page's Delete while the requests of ``pattern`` are held (``held``): no
    DELETE is sent in the second after (the delete waits for them); once they go on, it follows.
    The requests seen from the click on, as "METHOD path", for the caller's own checks."""
    from playwright.sync_api import Error as PlaywrightError

    reads: list[str] = []
    page.on("request", lambda request: reads.append(f"{request.method} {urlsplit(request.url).path}"))
    page.get_by_role("button", name="Delete").click()
    page.locator(".confirm").get_by_role("button", name="Delete").click()
    with contextlib.suppress(PlaywrightError):  # a second for the delete to be sent (it must not be)
        page.wait_for_event("request", lambda request: request.method == "DELETE", timeout=1_000)
    assert [read for read in reads if read.startswith("DELETE")] == [], "deleted before the held reads ended"
    with page.expect_request(lambda request: request.method == "DELETE"):
        for route in held:
            route.continue_()
        page.unroute(pattern)
    return reads


def test_a_job_deleted_while_its_page_refreshes_reads_nothing_of_it_after(browser, api, target):
    """Delete confirmed while the job page's refresh is on its way: the delete waits for that
    refresh's answer, and nothing of the job is read after it (a read answered 404 is an error in
    the browser's console). The refresh's read of the executions is held by the test."""
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    job = api.post("/v1/jobs", {"name": "to-delete", "schedule": PARKED, "target": {"type": "http", "url": target.url}})
    page, problems = watched_page(browser)
    page.clock.install()
    page.goto(f"{api.url}/console/#/jobs/{job['id']}")
    expect(page.get_by_role("heading", name="to-delete")).to_be_visible()
    executions = re.compile(rf"/v1/jobs/{job['id']}/executions")
    held: list = []
    page.route(executions, lambda route: held.append(route))
    with page.expect_request(executions):
        page.clock.run_for(3_000)  # the page's refresh, its read of the executions held

    reads = _delete_while_held(page, executions, held)
    expect(page).to_have_url(re.compile(r"#/jobs$"))
    page.clock.run_for(10_000)  # the job page's timers, had they outlived it
    expect(page.get_by_role("heading", name="Jobs")).to_be_visible()
    assert requests.get(f"{api.url}/v1/jobs/{job['id']}", timeout=10).status_code == 404
    assert [read for read in reads if job["id"] in read] == [f"DELETE /v1/jobs/{job['id']}"]
    assert problems == []


def test_the_bulk_buttons_offer_only_what_changes_jobs_of_the_state_listed(browser, api, target):
    """A pause changes active jobs and a resume paused ones: with the list filtered by state, the
    button that would change jobs the list does not show is not offered."""
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    hook = {"type": "http", "url": target.url + "/x"}
    api.post("/v1/jobs", {"name": "fast-active", "tags": ["fast"], "schedule": PARKED, "target": hook})
    paused = api.post("/v1/jobs", {"name": "fast-paused", "tags": ["fast"], "schedule": PARKED, "target": hook})
    api.post(f"/v1/jobs/{paused['id']}/pause", {})
    page, problems = watched_page(browser)
    pause, resume = (page.get_by_role("button", name=f"{what} all matching") for what in ("Pause", "Resume"))

    page.goto(f"{api.url}/console/#/jobs?tag=fast&state=paused")
    expect(page.locator("table.jobs tbody tr")).to_have_count(1)
    expect(resume).to_be_visible()
    expect(pause).to_have_count(0)
    page.select_option("select[name=state]", "active")
    expect(page.locator("table.jobs tbody tr").first).to_contain_text("fast-active")
    expect(pause).to_be_visible()
    expect(resume).to_have_count(0)
    page.select_option("select[name=state]", "completed")
    expect(page.locator(".empty")).to_be_visible()
    expect(page.locator(".bulk")).to_have_count(0)
    page.select_option("select[name=state]", "")
    expect(pause).to_be_visible()
    expect(resume).to_be_visible()
    assert {j["name"]: j["state"] for j in api.get("/v1/jobs?tag=fast")["jobs"]} == {
        "fast-active": "active",
        "fast-paused": "paused",
    }
    # Another hash of filters on the same page (a link, an edited address) lists with them.
    page.goto(f"{api.url}/console/#/jobs?tag=nothing-here")
    expect(page.locator("input[name=tag]")).to_have_value("nothing-here")
    expect(page.locator(".empty")).to_be_visible()
    assert problems == []


def test_a_jobs_changes_tab_shows_a_run_made_elsewhere_without_a_reload(browser, api, target):
    """A run (or a backfill) is in the job's change log but moves no version: the open Changes
    tab reads its newest page again (every 5 s), as the executions do."""
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    job = api.post("/v1/jobs", {"name": "logged", "schedule": PARKED, "target": {"type": "http", "url": target.url}})
    page, problems = watched_page(browser)
    page.goto(f"{api.url}/console/#/jobs/{job['id']}")
    page.get_by_role("tab", name="Changes").click()
    changes = page.locator("table.changes tbody tr")
    expect(changes).to_have_count(1)
    api.post(f"/v1/jobs/{job['id']}/run", {})
    expect(changes).to_have_count(2)
    expect(changes.first.locator(".action")).to_have_text("run")
    assert problems == []


def test_the_run_options_say_their_errors_in_their_own_card_and_a_bulk_pause_takes_a_note(browser, api, target):
    """A refused backfill or run with overrides is said in its own card, by the form it came
    from, not at the top of the page; the bulk pause carries a note and an end, as one job's does."""
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    hook = {"type": "http", "url": target.url + "/x"}
    job = api.post("/v1/jobs", {"name": "nightly", "tags": ["night"], "schedule": PARKED, "target": hook})
    api.post("/v1/jobs", {"name": "nightly-2", "tags": ["night"], "schedule": PARKED, "target": hook})
    page, problems = watched_page(browser, expected=(400,))  # the refused backfill
    page.goto(f"{api.url}/console/#/jobs/{job['id']}")
    page.locator("details.run-options summary").click()
    page.fill("input[name=backfill_start]", "2026-01-01T00:00:00Z")
    page.fill("input[name=backfill_end]", "2999-01-01T00:00:00Z")
    page.get_by_role("button", name="Preview backfill", exact=True).click()
    expect(page.locator(".backfill-form [role=alert]")).to_contain_text("future")
    page.fill("textarea[name=run_headers]", "no colon here")
    page.get_by_role("button", name="Run with overrides", exact=True).click()
    expect(page.locator(".run-form [role=alert]")).to_contain_text("Name: value")
    expect(page.locator(".backfill-form [role=alert]")).to_contain_text("future")  # each card its own
    expect(page.locator("section > .alert")).to_have_count(0)

    page.goto(f"{api.url}/console/#/jobs?tag=night")
    expect(page.locator("table.jobs tbody tr")).to_have_count(2)
    page.fill("input[name=bulk_pause_note]", "db migration")
    page.fill("input[name=bulk_pause_minutes]", "30")
    page.get_by_role("button", name="Pause all matching").click()
    expect(page.locator(".bulk .note")).to_have_text("Paused 2 jobs (tag night).")
    paused = api.get("/v1/jobs?tag=night")["jobs"]
    assert {j["state"] for j in paused} == {"paused"}
    assert {j["pause"]["note"] for j in paused} == {"db migration"}
    assert all(j["pause"]["until"] for j in paused)
    assert problems == []


def _release(page, pattern, held: list) -> None:
    """Let the held requests of ``pattern`` go on, once their answers reached the page and it
    had its turn to read them."""
    with page.expect_response(pattern):
        for route in held:
            route.continue_()
    page.unroute(pattern)
    held.clear()
    page.evaluate("() => null")


def test_a_change_log_shows_only_its_own_and_keeps_older_pages_through_its_refreshes(browser, api, db_url):
    """Two calendars' logs: the answer for the first's older changes, held until the page shows
    the second, is dropped (it was listed under the second); and a refresh sent before "Older
    changes" was clicked does not replace the older rows it brought."""
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    api.post("/v1/calendars", {"name": "busy-cal", "timezone": "UTC", "dates": ["2027-01-01"]})
    for day in range(2, 62):  # 61 versions: two pages of its log
        body = {"timezone": "UTC", "dates": ["2027-01-01", f"2027-03-{day % 28 + 1:02}"]}
        assert requests.put(f"{api.url}/v1/calendars/busy-cal", json=body, timeout=10).ok
    api.post("/v1/calendars", {"name": "quiet-cal", "timezone": "UTC", "dates": ["2027-01-01"]})
    page, problems = watched_page(browser)
    page.clock.install()
    page.goto(f"{api.url}/console/#/calendars/busy-cal")
    changes = page.locator(".calendar-changes table.changes tbody tr")
    expect(changes).to_have_count(50)

    # A refresh on its way (held) when "Older changes" is clicked: the older rows stay.
    held: list = []
    newest = re.compile(r"/v1/calendars/busy-cal/changes\?limit=50$")
    page.route(newest, lambda route: held.append(route))
    with page.expect_request(newest):
        page.clock.run_for(5_000)
    page.get_by_role("button", name="Older changes").click()
    expect(changes).to_have_count(61)
    _release(page, newest, held)
    page.clock.run_for(10_000)  # and the refreshes after it leave them alone
    expect(changes).to_have_count(61)

    # The first page's log again, its older page held while the page moves to the second calendar.
    page.goto(f"{api.url}/console/#/calendars")
    page.goto(f"{api.url}/console/#/calendars/busy-cal")
    expect(changes).to_have_count(50)
    older = re.compile(r"/v1/calendars/busy-cal/changes\?limit=50&cursor=")
    page.route(older, lambda route: held.append(route))
    with page.expect_request(older):
        page.get_by_role("button", name="Older changes").click()
    page.get_by_role("link", name="quiet-cal").click()
    expect(changes).to_have_count(1)
    _release(page, older, held)
    page.clock.run_for(10_000)
    expect(changes).to_have_count(1)
    expect(changes.first.locator(".action")).to_have_text("create")
    assert problems == []


def test_a_list_opened_from_the_menu_or_an_address_lists_with_that_addresss_filters(browser, api, target):
    """A list's own filter edits write the address without a navigation; the menu's link, or an
    address of other filters, opens the list again with its own filters (none for the menu's)."""
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    hook = {"type": "http", "url": target.url}
    for name, tag in (("b-one", "billing"), ("b-two", "billing"), ("o-one", "other")):
        api.post("/v1/jobs", {"name": name, "tags": [tag], "schedule": PARKED, "target": hook})
    page, problems = watched_page(browser)
    rows = page.locator("table.jobs tbody tr")
    page.goto(f"{api.url}/console/#/jobs?tag=other")
    expect(rows).to_have_count(1)
    page.fill("input[name=tag]", "billing")
    expect(rows).to_have_count(2)
    expect(page).to_have_url(re.compile(r"#/jobs\?tag=billing$"))
    page.evaluate("() => { location.hash = '#/jobs?tag=other'; }")  # the address it was opened with
    expect(page.locator("input[name=tag]")).to_have_value("other")
    expect(rows).to_have_count(1)
    page.get_by_role("link", name="Jobs", exact=True).click()  # the menu: every job
    expect(page.locator("input[name=tag]")).to_have_value("")
    expect(rows).to_have_count(3)
    assert problems == []


def test_a_job_deleted_while_its_older_executions_are_read_reads_nothing_of_it_after(browser, api, target, db_url):
    """Delete confirmed while "Older executions" is on its way: the delete waits for that read,
    as for a refresh, and nothing of the job is read after it (no 404 in the browser's console)."""
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    job = api.post(
        "/v1/jobs", {"name": "long-history", "schedule": PARKED, "target": {"type": "http", "url": target.url}}
    )
    _add_executions(db_url, job["id"], range(1000, 1060))
    page, problems = watched_page(browser)
    page.goto(f"{api.url}/console/#/jobs/{job['id']}")
    expect(page.locator("table.executions tbody tr.exec")).to_have_count(50)
    held: list = []
    older = re.compile(rf"/v1/jobs/{job['id']}/executions\?limit=50&cursor=")
    page.route(older, lambda route: held.append(route))
    with page.expect_request(older):
        page.get_by_role("button", name="Older executions").click()
    _delete_while_held(page, older, held)
    expect(page).to_have_url(re.compile(r"#/jobs$"))
    assert requests.get(f"{api.url}/v1/jobs/{job['id']}", timeout=10).status_code == 404
    assert problems == []


def test_a_jobs_page_lists_its_executions_of_one_status(browser, api, target, db_url):
    """A job's executions filtered by status on its page (running, lost, failed...), paged back
    as the whole list is."""
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    job = api.post("/v1/jobs", {"name": "mixed", "schedule": PARKED, "target": {"type": "http", "url": target.url}})
    _add_executions(db_url, job["id"], range(1000, 1060))  # 60 succeeded
    with psycopg.connect(db_url, autocommit=True) as conn:  # 3 of them failed
        conn.execute(
            "UPDATE executions SET status = 'failed', error = 'HTTP 500' WHERE id IN "
            "(SELECT id FROM executions WHERE job_id = %s ORDER BY started_at LIMIT 3)",
            (job["id"],),
        )
    page, problems = watched_page(browser)
    page.goto(f"{api.url}/console/#/jobs/{job['id']}")
    rows = page.locator("table.executions tbody tr.exec")
    expect(rows).to_have_count(50)
    page.select_option("select[name=execution_status]", "failed")
    expect(rows).to_have_count(3)
    expect(rows.locator(".badge.b-failed")).to_have_count(3)
    page.select_option("select[name=execution_status]", "lost")
    expect(page.locator(".empty")).to_have_text("No executions with status lost.")
    page.select_option("select[name=execution_status]", "")
    expect(rows).to_have_count(50)
    page.get_by_role("button", name="Older executions").click()
    expect(rows).to_have_count(60)
    assert problems == []


def test_a_job_changed_since_its_page_was_read_is_not_deleted_unseen(browser, api, target):
    """The job page's Delete names the version it shows (If-Match): a job changed elsewhere since
    (before the page's next read) is not deleted; the page says so, and once it has read the job
    again a Delete deletes it. The page's timers run on Playwright's clock, so no refresh comes
    between the change and the click."""
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    job = api.post("/v1/jobs", {"name": "kept-seen", "schedule": PARKED, "target": {"type": "http", "url": target.url}})
    page, problems = watched_page(browser, expected=(412,))
    page.clock.install()
    page.goto(f"{api.url}/console/#/jobs/{job['id']}")
    expect(page.get_by_role("heading", name="kept-seen")).to_be_visible()
    changed = requests.patch(f"{api.url}/v1/jobs/{job['id']}", json={"description": "changed elsewhere"}, timeout=10)
    assert changed.status_code == 200 and changed.json()["version"] == 2

    page.get_by_role("button", name="Delete").click()
    page.locator(".confirm").get_by_role("button", name="Delete").click()
    expect(page.locator(".alert").first).to_contain_text("version 2")
    assert requests.get(f"{api.url}/v1/jobs/{job['id']}", timeout=10).status_code == 200
    expect(page).to_have_url(re.compile(rf"#/jobs/{job['id']}$"))

    with page.expect_response(re.compile(rf"/v1/jobs/{job['id']}$")):
        page.clock.run_for(3_000)  # the page's refresh: it shows version 2 now
    page.get_by_role("button", name="Delete").click()
    page.locator(".confirm").get_by_role("button", name="Delete").click()
    expect(page).to_have_url(re.compile(r"#/jobs$"))
    assert requests.get(f"{api.url}/v1/jobs/{job['id']}", timeout=10).status_code == 404
    assert problems == []


def test_a_job_changed_while_its_form_is_open_is_loaded_again_from_the_alert(browser, api, target):
    """A save refused because the job changed since the form read it (412) says so plainly and
    offers to load it again; loaded, the form shows the change, and a save then goes (an outside
    audit: the form kept its old version, and every save was refused until the page was reloaded)."""
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    job = api.post(
        "/v1/jobs", {"name": "edited-twice", "schedule": PARKED, "target": {"type": "http", "url": target.url}}
    )
    page, problems = watched_page(browser, expected=(412,))
    page.goto(f"{api.url}/console/#/jobs/{job['id']}/edit")
    expect(page.locator("input[name=description]")).to_have_value("")
    changed = requests.patch(f"{api.url}/v1/jobs/{job['id']}", json={"description": "from elsewhere"}, timeout=10)
    assert changed.status_code == 200 and changed.json()["version"] == 2
    page.fill("input[name=description]", "from the form")
    page.get_by_role("button", name="Save").click()
    alert = page.locator(".alert").first
    expect(alert).to_contain_text("This job changed since you opened it: it is now at version 2.")
    assert requests.get(f"{api.url}/v1/jobs/{job['id']}", timeout=10).json()["description"] == "from elsewhere"

    alert.get_by_role("button", name="Load it again").click()
    expect(page.locator("input[name=description]")).to_have_value("from elsewhere")
    page.fill("input[name=description]", "from the form, seen")
    page.get_by_role("button", name="Save").click()
    expect(page).to_have_url(re.compile(rf"#/jobs/{job['id']}$"))
    assert requests.get(f"{api.url}/v1/jobs/{job['id']}", timeout=10).json()["description"] == "from the form, seen"
    assert problems == []

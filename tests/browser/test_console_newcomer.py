"""What a newcomer found in the console (issue 35 item 5), each in Debian's Chromium against a real
``scheduler local`` and a loopback target: a job's next occurrences are its own planned times
(from its anchor, refreshed, in its zone too); a paused job has no next run; lateness is the
start against the due time, the backoff apart; the form makes AMQP targets, basic/bearer/header
auth (write-only secrets kept as ***) and the backoff policy; an execution opens with its
response excerpt; the job list refreshes itself; errors are the API's own words."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import requests

from tests.browser.test_console import TIMEOUT_MS, api, browser, target, watched_page  # noqa: F401 (fixtures)
from tests.support import poll


def _utc(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S UTC")


def _shown(iso: str) -> str:
    return re.sub(r"\.\d+", "", iso).replace("T", " ").replace("Z", " UTC")


def test_next_occurrences_are_the_job_s_own_refreshed_and_zoned(browser, api, target):
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    job = api.post(
        "/v1/jobs",
        {
            "name": "every-3s",
            "schedule": "@every 3s",
            "timezone": "Europe/Berlin",
            "target": {"type": "http", "url": target.url + "/e"},
        },
    )
    page, problems = watched_page(browser, 1000, expected=(400,))
    page.goto(f"{api.url}/console/#/jobs/{job['id']}")
    items = page.locator(".card ol.occurrences li")
    expect(items).to_have_count(5)
    first = items.first.locator(".utc").inner_text()
    # The first is the job's next run; the others follow it at the job's own interval, anchored
    # at its creation (not at the page load).
    current = requests.get(f"{api.url}/v1/jobs/{job['id']}", timeout=10).json()["next_run_at"]
    shown = page.locator(".card ol.occurrences li .utc").all_inner_texts()  # one reading of the list
    times = [_utc(text) for text in shown]
    assert abs(times[0] - _utc(_shown(current))) <= timedelta(seconds=3), (first, current)
    assert all(b - a == timedelta(seconds=3) for a, b in zip(times, times[1:])), shown
    anchor = datetime.fromisoformat(job["created_at"].replace("Z", "+00:00")).replace(tzinfo=None, microsecond=0)
    assert all((t - anchor).total_seconds() % 3 == 0 for t in times)  # on the job's grid, from its creation
    expect(items.first.locator(".local")).to_have_text(
        re.compile(r"^\(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (CET|CEST|GMT\+\d)\)$")
    )
    # It runs: the list follows the job's new next run (no reload).
    poll(
        lambda: requests.get(f"{api.url}/v1/jobs/{job['id']}", timeout=10).json()["next_run_at"] != current,
        timeout=15,
        what="the next run moving on",
    )
    expect(items.first.locator(".utc")).not_to_have_text(_shown(current))
    assert problems == []


def test_a_paused_job_shows_no_next_run(browser, api, target):
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    job = api.post(
        "/v1/jobs", {"name": "held", "schedule": "@every 2s", "target": {"type": "http", "url": target.url + "/h"}}
    )
    api.post(f"/v1/jobs/{job['id']}/pause", {})
    page, problems = watched_page(browser, 1000, expected=(400,))
    page.goto(f"{api.url}/console/#/jobs")
    cell = page.locator("table.jobs tbody tr").filter(has_text="held").locator("td.next-run")
    expect(cell).to_have_text("paused")
    page.goto(f"{api.url}/console/#/jobs/{job['id']}")
    summary = page.locator("dd.next-run")
    expect(summary).to_contain_text("paused")
    expect(summary).not_to_contain_text("ago")
    expect(page.get_by_role("heading", name="Next occurrences (once resumed)")).to_be_visible()
    assert problems == []


def test_lateness_leaves_the_backoff_apart_and_an_execution_opens_with_its_answer(browser, api, target):
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    target.responses["/flaky-once"] = [(503, {}, b"busy"), (200, {}, b'{"report": "done"}')]
    job = api.post(
        "/v1/jobs",
        {
            "name": "retried",
            "run_at": (datetime.now(UTC) + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "retry": {"max_attempts": 2, "min_backoff_seconds": 2, "max_backoff_seconds": 2},
            "target": {"type": "http", "url": target.url + "/flaky-once"},
        },
    )
    page, problems = watched_page(browser, 1000, expected=(400,))
    page.goto(f"{api.url}/console/#/jobs/{job['id']}")
    rows = page.locator("table.executions tbody tr.exec")
    expect(rows).to_have_count(2, timeout=30_000)
    retry = rows.filter(has_text="retry")
    expect(retry.locator(".badge")).to_have_text("succeeded")
    # started within a second of its due time, though 2 s after its occurrence: the backoff
    expect(retry.locator("td.late")).to_have_text(re.compile(r"^(\d+ ms|0\.\d s)$"))
    expect(retry.locator("td.backoff")).to_have_text(re.compile(r"^[23]\.\d s$"))
    expect(rows.filter(has_text="schedule").locator("td.backoff")).to_have_text("—")
    # Click: the execution opens, its answer's first bytes shown.
    retry.click()
    details = page.locator("tr.details")
    expect(details.locator("pre.excerpt")).to_have_text('{"report": "done"}')
    expect(details).to_contain_text("Due")
    rows.filter(has_text="schedule").click()
    expect(page.locator("tr.details pre.excerpt")).to_have_text("busy")
    assert problems == []


def test_the_form_makes_amqp_targets_auth_and_backoff(browser, api, target):
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    page, problems = watched_page(browser, 1000, expected=(400,))
    page.goto(api.url + "/console/#/jobs/new")
    expect(page.locator("input[name=attempts]")).to_have_attribute("placeholder", "3")  # the API's default
    # The API's own words, at the field (not pydantic's "String should have at least 1 character").
    page.fill("input[name=schedule]", "@daily")
    page.fill("input[name=url]", target.url + "/x")
    page.get_by_role("button", name="Create").click()
    expect(page.locator('.field-error[data-field="name"]')).to_have_text("must not be empty")
    # A zoned preview shows the local time beside UTC.
    page.fill("input[name=timezone]", "Europe/Berlin")
    expect(page.locator('[data-preview="ok"] li .local').first).to_contain_text(re.compile(r"CES?T"))
    page.fill("input[name=timezone]", "Europe/Berln")
    expect(page.locator('[data-preview="error"]')).to_contain_text("did you mean Europe/Berlin")
    page.fill("input[name=timezone]", "UTC")

    # AMQP, field by field.
    page.fill("input[name=name]", "to-rabbit")
    page.get_by_label("AMQP").check()
    page.fill("input[name=url]", "amqp://guest:guest@127.0.0.1:5672/%2F")
    page.fill("input[name=exchange]", "jobs")
    page.fill("input[name=routing_key]", "reports.due")
    page.fill("textarea[name=body]", '{"job": "{{job_id}}"}')
    page.fill("input[name=headers]", '{"tenant": "acme"}')
    page.fill("input[name=min_backoff]", "5")
    page.fill("input[name=max_backoff]", "60")
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_role("heading", name="to-rabbit")).to_be_visible()
    expect(page.locator("dl.target")).to_contain_text("AMQP")
    stored = requests.get(f"{api.url}/v1/jobs?name_prefix=to-rabbit", timeout=10).json()["jobs"][0]
    assert stored["target"]["url"] == "amqp://guest:***@127.0.0.1:5672/%2F"
    assert (stored["target"]["exchange"], stored["target"]["routing_key"], stored["target"]["headers"]) == (
        "jobs",
        "reports.due",
        {"tenant": "acme"},
    )
    assert (stored["retry"]["min_backoff_seconds"], stored["retry"]["max_backoff_seconds"]) == (5, 60)
    page.get_by_role("link", name="Edit").click()
    expect(page.get_by_label("AMQP")).to_be_checked()
    expect(page.locator("input[name=routing_key]")).to_have_value("reports.due")
    expect(page.locator("input[name=min_backoff]")).to_have_value("5")

    # Basic auth: the password is write-only; an edit that leaves it empty keeps it.
    page.goto(api.url + "/console/#/jobs/new")
    page.fill("input[name=name]", "with-basic")
    page.fill("input[name=schedule]", "@daily")
    page.fill("input[name=url]", target.url + "/basic")
    page.select_option("select[name=auth]", "basic")
    page.fill("input[name=auth_username]", "reporter")
    page.fill("input[name=auth_password]", "pa55word")
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_role("heading", name="with-basic")).to_be_visible()
    expect(page.locator("pre.definition")).to_contain_text('"password": "***"')
    assert "pa55word" not in page.content()
    page.get_by_role("link", name="Edit").click()
    password = page.locator("input[name=auth_password]")
    expect(password).to_have_value("")
    expect(password).to_have_attribute("placeholder", "***")
    page.fill("input[name=description]", "kept secret")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("pre.definition")).to_contain_text("kept secret")
    page.get_by_role("button", name="Run now").click()
    expect(page.locator("table.executions tbody tr.exec .badge")).to_have_text("succeeded")
    [call] = [r for r in target.requests if r["path"] == "/basic"]
    assert call["headers"]["Authorization"] == "Basic cmVwb3J0ZXI6cGE1NXdvcmQ="  # reporter:pa55word
    assert problems == []


def test_the_job_list_refreshes_itself(browser, api, target):
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    page, problems = watched_page(browser, 1000, expected=(400,))
    page.goto(api.url + "/console/#/jobs")
    expect(page.locator(".empty")).to_have_text("No jobs match.")
    api.post(
        "/v1/jobs",
        {"name": "arrives-later", "schedule": "@daily", "target": {"type": "http", "url": target.url + "/l"}},
    )
    expect(page.locator("table.jobs tbody tr").filter(has_text="arrives-later")).to_have_count(1, timeout=12_000)
    expect(page.locator(".refreshed")).to_contain_text("updated")
    assert problems == []

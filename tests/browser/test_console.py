"""The web console in a real browser: Debian's Chromium driven by Playwright, against a real
`scheduler local` process and a loopback target.

Without Chromium (or Playwright) the test is skipped, with a warning, except under ``CI=true``,
where it fails. ``SCHEDULER_SCREENSHOTS=docs/img`` saves a screenshot of each page there
(``console-jobs.png``, ``console-job.png``, ``console-form.png``, ``console-activity.png``,
``console-form-aws.png``, ``console-job-aws.png``, ``console-job-changes.png``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support import ROOT, LocalScheduler, RecordingServer

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
TIMEOUT_MS = 20_000


def _unavailable(why: str) -> None:
    message = f"browser test not run: {why} (apt-get install -y chromium; pip install playwright)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    warnings.warn(message, stacklevel=2)
    pytest.skip(message)


@pytest.fixture
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is not installed")
    if not os.path.exists(CHROMIUM):
        _unavailable(f"no Chromium at {CHROMIUM}")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def target():
    server = RecordingServer()
    server.responses["/flaky"] = [(503, {}, b"try later")]
    yield server
    server.close()


@pytest.fixture
def api(db_url, tmp_path):
    scheduler = LocalScheduler(db_url, str(tmp_path / "data"))
    yield scheduler
    assert scheduler.stop() == 0, "".join(scheduler.lines)


def _shoot(page, name: str) -> None:
    folder = os.environ.get("SCHEDULER_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"console-{name}.png"), full_page=True)


def watched_page(browser, height: int = 900, *, expected: tuple[int, ...] = ()) -> tuple[Any, list[str]]:
    """A new page and the problems seen on it: script errors, and console errors but for the
    answers of the ``expected`` statuses (the refusals a test provokes, a 400 of a bad field...)."""
    page = browser.new_page(viewport={"width": 1280, "height": height})
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))

    def console(msg) -> None:
        if msg.type == "error" and not any(f"status of {status}" in msg.text for status in expected):
            problems.append(f"console: {msg.text}")

    page.on("console", console)
    return page, problems


def manual_runs(page):
    """The execution rows of the page's table that a person started (trigger ``manual``): a test
    that counts runs must not count the ones its job's schedule adds meanwhile."""
    return page.locator("table.executions tbody tr.exec").filter(has_text="manual")


def _seed(api: LocalScheduler, target: RecordingServer) -> None:
    """Other jobs, so that the lists have something besides the one the test makes."""
    hook = {"type": "http", "method": "POST", "timeout_seconds": 5}
    flaky = api.post(
        "/v1/jobs",
        {
            "name": "inventory-sync",
            "tags": ["warehouse"],
            "schedule": "*/15 * * * *",
            "retry": {"max_attempts": 1},
            "target": {**hook, "url": target.url + "/flaky"},
        },
    )
    api.post(f"/v1/jobs/{flaky['id']}/run", {})
    api.post(
        "/v1/jobs",
        {
            "name": "weekly-digest",
            "tags": ["mail"],
            "schedule": "cron(0 8 ? * MON *)",
            "timezone": "Europe/Berlin",
            "target": {**hook, "url": target.url + "/digest", "auth": {"type": "bearer", "token": "digest-secret"}},
        },
    )
    paused = api.post(
        "/v1/jobs", {"name": "legacy-export", "schedule": "@daily", "target": {**hook, "url": target.url + "/export"}}
    )
    api.post(f"/v1/jobs/{paused['id']}/pause", {})


def test_create_run_and_pause_a_job_in_the_console(browser, api, target):
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    _seed(api, target)
    # Script errors and refusals (CSP...) are problems; the 400 answers of the bad cron are not.
    page, problems = watched_page(browser, 860, expected=(400,))

    # GET / leads to the console's job list.
    page.goto(api.url + "/")
    expect(page).to_have_url(re.compile(r"/console/#/jobs$"))
    expect(page.get_by_role("heading", name="Jobs")).to_be_visible()
    expect(page.locator("table.jobs tbody tr")).to_have_count(3)

    # A bad cron: the API's error shows at the schedule field.
    page.get_by_role("link", name="New job").click()
    expect(page.get_by_role("heading", name="New job")).to_be_visible()
    page.fill("input[name=name]", "nightly-report")
    page.fill("input[name=tags]", "billing, reports")
    page.fill("input[name=schedule]", "61 * * * *")
    page.fill("input[name=url]", target.url + "/hook")
    page.fill("textarea[name=body]", '{"at": "{{scheduled_at}}"}')
    page.get_by_role("button", name="Create").click()
    error = page.locator('.field-error[data-field="schedule"]')
    expect(error).to_be_visible()
    expect(error).to_contain_text("61")
    expect(page.locator('[data-preview="error"]')).to_be_visible()
    assert page.url.endswith("#/jobs/new")
    _shoot(page, "form")

    # Fixed: the error goes, the preview shows the next occurrences as typed.
    page.fill("input[name=schedule]", "*/5 * * * *")
    expect(error).to_have_count(0)
    occurrences = page.locator('[data-preview="ok"] li')
    expect(occurrences).to_have_count(5)
    expect(occurrences.first).to_have_text(re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d[05]:00 UTC$"))
    page.get_by_role("button", name="Create").click()

    # The job's page: its definition, next occurrences, and no executions yet.
    expect(page).to_have_url(re.compile(r"#/jobs/[0-9a-f-]{36}$"))
    job_id = page.url.rsplit("/", 1)[1]
    expect(page.get_by_role("heading", name="nightly-report")).to_be_visible()
    expect(page.locator(".card ol.occurrences li")).to_have_count(5)
    expect(page.locator("pre.definition")).to_contain_text('"url": "' + target.url + '/hook"')

    # Run now, three times: each execution appears with its status and HTTP status. The manual
    # runs are counted: the test may cross a five-minute boundary, where the schedule adds its own.
    rows = manual_runs(page)
    for count in (1, 2, 3):
        page.get_by_role("button", name="Run now").click()
        expect(rows).to_have_count(count)
        expect(rows.first.locator(".badge")).to_have_text("succeeded")
        expect(rows.first.locator("td.http")).to_have_text("200")
    assert sum(r["path"] == "/hook" for r in target.requests) >= 3
    expect(page.locator(".chart canvas").first).to_be_visible()

    # Pause: the state shows, and the API agrees.
    page.get_by_role("button", name="Pause").click()
    expect(page.locator("h1 .badge")).to_have_text("paused")
    expect(page.get_by_role("button", name="Resume")).to_be_visible()
    assert requests.get(f"{api.url}/v1/jobs/{job_id}", timeout=10).json()["state"] == "paused"
    _shoot(page, "job")

    # Another job's page shows its secret as ***; an edit keeps the stored secret.
    digest = next(j for j in api.get("/v1/jobs?name_prefix=weekly")["jobs"])
    page.goto(f"{api.url}/console/#/jobs/{digest['id']}")
    definition = page.locator("pre.definition")
    expect(definition).to_contain_text('"token": "***"')
    assert "digest-secret" not in page.content()
    page.get_by_role("link", name="Edit").click()
    expect(page.get_by_role("heading", name="Edit weekly-digest")).to_be_visible()
    expect(page.locator("input[name=schedule]")).to_have_value("cron(0 8 ? * MON *)")
    page.fill("input[name=description]", "Monday digest")
    page.get_by_role("button", name="Save").click()
    expect(definition).to_contain_text('"description": "Monday digest"')
    page.get_by_role("button", name="Run now").click()
    expect(manual_runs(page).locator(".badge")).to_have_text("succeeded")
    digest_calls = [r for r in target.requests if r["path"] == "/digest"]
    assert digest_calls and all(r["headers"]["Authorization"] == "Bearer digest-secret" for r in digest_calls)

    # Recent activity across jobs, and its failures filter.
    page.get_by_role("link", name="Recent activity").click()
    activity = page.locator("table.executions tbody tr")
    manual = manual_runs(page)
    expect(manual.filter(has_text="nightly-report")).to_have_count(3)
    expect(manual.filter(has_text="inventory-sync")).to_have_count(1)
    expect(manual.filter(has_text="weekly-digest")).to_have_count(1)
    _shoot(page, "activity")
    page.get_by_label("failures only").check()
    expect(manual).to_have_count(1)
    expect(activity.filter(has_not_text="inventory-sync")).to_have_count(0)
    expect(activity.first).to_contain_text("inventory-sync")
    expect(activity.first.locator(".badge")).to_have_text("failed")

    # The job list: the new job with its state, schedule and last status; filters by state and tag.
    page.get_by_role("link", name="Jobs", exact=True).click()
    jobs = page.locator("table.jobs tbody tr")
    expect(jobs).to_have_count(4)
    row = jobs.filter(has_text="nightly-report")
    expect(row).to_contain_text("*/5 * * * *")
    expect(row.locator(".badge").first).to_have_text("paused")
    expect(row.locator(".badge").nth(1)).to_have_text("succeeded")
    _shoot(page, "jobs")
    page.select_option("select[name=state]", "paused")
    expect(jobs).to_have_count(2)
    page.select_option("select[name=state]", "")
    page.fill("input[name=tag]", "billing")
    expect(jobs).to_have_count(1)
    expect(jobs.first).to_contain_text("nightly-report")

    # Resume and delete from the job's page.
    jobs.first.get_by_role("link", name="nightly-report").click()
    page.get_by_role("button", name="Resume").click()
    expect(page.locator("h1 .badge")).to_have_text("active")
    page.get_by_role("button", name="Delete").click()
    page.locator(".confirm").get_by_role("button", name="Delete").click()
    expect(page).to_have_url(re.compile(r"#/jobs$"))  # the list, once the delete was answered
    assert requests.get(f"{api.url}/v1/jobs/{job_id}", timeout=10).status_code == 404
    assert problems == []


ROLE = "arn:aws:iam::123456789012:role/scheduler-target"
QUEUE = "https://sqs.eu-west-1.amazonaws.com/123456789012/orders"


def test_aws_targets_in_the_form(browser, api):
    """An SQS job made in the form (nothing delivered: the queue is never called): a bad role ARN
    shows at its field; the job's page shows the target field by field; the edit form comes back
    with the same values. An HTTP target's SigV4 auth: a bad region shows at its field."""
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    page, problems = watched_page(browser, 1000, expected=(400,))

    page.goto(api.url + "/console/#/jobs/new")
    page.fill("input[name=name]", "orders-queue")
    page.fill("input[name=schedule]", "@hourly")
    page.get_by_label("SQS").check()
    page.fill("input[name=queue_url]", QUEUE)
    page.fill("textarea[name=body]", '{"job": "{{job_id}}"}')
    page.fill("input[name=role_arn]", "arn:aws:iam::123456789012:root")
    page.get_by_role("button", name="Create").click()
    error = page.locator('.field-error[data-field="target.role_arn"]')
    expect(error).to_contain_text("IAM role ARN")
    expect(page.locator(".field-error")).to_have_count(1)
    assert page.url.endswith("#/jobs/new")
    _shoot(page, "form-aws")

    # A FIFO group id on a standard queue: the API's model-level check, at its field too.
    page.fill("input[name=role_arn]", ROLE)
    expect(error).to_have_count(0)
    page.fill("input[name=message_group_id]", "g1")
    page.get_by_role("button", name="Create").click()
    expect(page.locator('.field-error[data-field="target.message_group_id"]')).to_contain_text("FIFO")
    page.fill("input[name=message_group_id]", "")
    page.get_by_role("button", name="Create").click()

    # The job's page: the target field by field (the region read from the queue URL).
    expect(page).to_have_url(re.compile(r"#/jobs/[0-9a-f-]{36}$"))
    job_id = page.url.rsplit("/", 1)[1]
    summary = page.locator("dl.target")
    expect(summary).to_contain_text("SQS")
    expect(summary).to_contain_text(QUEUE)
    expect(summary).to_contain_text("eu-west-1")
    expect(summary).to_contain_text(ROLE)
    _shoot(page, "job-aws")
    stored = requests.get(f"{api.url}/v1/jobs/{job_id}", timeout=10).json()["target"]
    assert {k: stored[k] for k in ("type", "queue_url", "body", "role_arn")} == {
        "type": "sqs",
        "queue_url": QUEUE,
        "body": '{"job": "{{job_id}}"}',
        "role_arn": ROLE,
    }
    assert stored.get("message_group_id") is None

    # Edit: the form comes back as SQS with the stored values; a change is saved.
    page.get_by_role("link", name="Edit").click()
    expect(page.get_by_label("SQS")).to_be_checked()
    expect(page.locator("input[name=queue_url]")).to_have_value(QUEUE)
    expect(page.locator("input[name=role_arn]")).to_have_value(ROLE)
    page.fill("input[name=timeout_seconds]", "12")
    page.get_by_role("button", name="Save").click()
    expect(summary).to_contain_text("12.0 s")
    assert requests.get(f"{api.url}/v1/jobs/{job_id}", timeout=10).json()["target"]["timeout_seconds"] == 12

    # An HTTP target signed with SigV4: a bad region at its field, then saved and shown.
    page.goto(api.url + "/console/#/jobs/new")
    page.fill("input[name=name]", "signed-hook")
    page.fill("input[name=schedule]", "@daily")
    page.fill("input[name=url]", "https://abc.execute-api.eu-west-1.amazonaws.com/prod/hook")
    page.select_option("select[name=auth]", "sigv4")
    page.select_option("select[name=auth_service]", "execute-api")
    page.fill("input[name=auth_region]", "Ireland")
    page.fill("input[name=auth_role_arn]", ROLE)
    page.get_by_role("button", name="Create").click()
    expect(page.locator('.field-error[data-field="target.auth.region"]')).to_contain_text("region")
    page.fill("input[name=auth_region]", "eu-west-1")
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_role("heading", name="signed-hook")).to_be_visible()
    expect(summary).to_contain_text("SigV4 (execute-api, eu-west-1)")
    expect(summary).to_contain_text(ROLE)
    page.get_by_role("link", name="Edit").click()
    expect(page.locator("select[name=auth]")).to_have_value("sigv4")
    expect(page.locator("input[name=auth_region]")).to_have_value("eu-west-1")
    assert problems == []


def test_the_console_of_a_signed_api_through_scheduler_console(browser, db_url, tmp_path, monkeypatch):
    """`scheduler local --auth sigv4` answers the browser's unsigned calls 403 (the page says how
    to reach it); through `scheduler console`, which signs, the same pages work."""
    import json
    import threading

    from playwright.sync_api import expect

    from scheduler.console.proxy import run_console

    expect.set_options(timeout=TIMEOUT_MS)
    creds = tmp_path / "credentials.json"
    creds.write_text(
        json.dumps(
            {"AKIDALICE": {"secret_access_key": "alice-secret", "principal": "arn:aws:iam::000000000000:user/alice"}}
        )
    )
    signed = LocalScheduler(db_url, str(tmp_path / "data"), "--auth", "sigv4", "--credentials", str(creds))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDALICE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "alice-secret")
    urls: list[str] = []
    ready, stop = threading.Event(), threading.Event()
    console = threading.Thread(
        target=run_console,
        kwargs={
            "endpoint": signed.url,
            "port": 0,
            "region": "us-east-1",
            "stop": stop,
            "ready": lambda url: (urls.append(url), ready.set()),
        },
        daemon=True,
    )
    console.start()
    try:
        assert ready.wait(10)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(signed.url + "/console/")
        expect(page.locator(".alert")).to_contain_text("scheduler console --endpoint")

        page.goto(urls[0])
        expect(page.get_by_role("heading", name="Jobs")).to_be_visible()
        expect(page.locator(".alert")).to_have_count(0)
        page.get_by_role("link", name="New job").click()
        page.fill("input[name=name]", "signed-job")
        page.fill("input[name=schedule]", "@hourly")
        expect(page.locator('[data-preview="ok"] li')).to_have_count(5)
        page.fill("input[name=url]", "https://example.com/hook")
        page.get_by_role("button", name="Create").click()
        expect(page.get_by_role("heading", name="signed-job")).to_be_visible()
        expect(page.locator("pre.definition")).to_contain_text('"schedule": "@hourly"')
        page.get_by_role("link", name="Jobs", exact=True).click()
        expect(page.locator("table.jobs tbody tr")).to_have_count(1)
    finally:
        stop.set()
        console.join(10)
        assert signed.stop() == 0, "".join(signed.lines)


@pytest.mark.parametrize(("ci", "code", "outcome"), [("true", 1, "1 error"), ("", 0, "1 skipped")])
def test_without_chromium_it_skips_with_a_warning_but_fails_under_ci(tmp_path, ci, code, outcome):
    env = {**os.environ, "CHROMIUM": str(tmp_path / "no-chromium"), "CI": ci}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-rs",
            f"{__file__}::test_create_run_and_pause_a_job_in_the_console",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == code and outcome in result.stdout, result.stdout
    assert "browser test not run: no Chromium at" in result.stdout


def test_alert_rules_in_the_form_the_job_page_and_the_alerts_page(browser, api, target):
    """Alert rules and per-target limits written in the form (bad ones at their fields), shown on
    the job's page with the alerts they fired, and every alert on the Alerts page."""
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    page, problems = watched_page(browser, 1000, expected=(400,))
    page.goto(api.url + "/console/#/jobs/new")
    page.fill("input[name=name]", "always-failing")
    page.fill("input[name=schedule]", "@every 1s")
    page.fill("input[name=url]", target.url + "/flaky")
    page.fill("input[name=attempts]", "1")
    slack = {"type": "http", "url": target.url + "/slack"}
    page.fill("textarea[name=alerts]", json.dumps([{"on": "late", "target": slack}]))
    page.fill("input[name=max_in_flight]", "0")
    page.get_by_role("button", name="Create").click()
    expect(page.locator('.field-error[data-field="alerts"]')).to_contain_text("alerts.0.threshold: is required")
    expect(page.locator('.field-error[data-field="limits.max_in_flight"]')).to_contain_text("must be at least 1")
    page.fill("textarea[name=alerts]", json.dumps([{"on": "failures_in_a_row", "threshold": 2, "target": slack}]))
    page.fill("input[name=max_in_flight]", "2")
    page.fill("input[name=limit_key]", "flaky-api")
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_role("heading", name="always-failing")).to_be_visible()
    expect(page.locator("dd.limits")).to_contain_text("2 in flight")
    expect(page.locator("dd.limits")).to_contain_text("key flaky-api")
    expect(page.locator(".alert-rules")).to_contain_text("failures_in_a_row >= 2")
    # The rule fires once (the job keeps failing: one incident); the job's page lists it.
    expect(page.locator(".job-alerts tr.alert-row")).to_have_count(1)
    expect(page.locator(".job-alerts tr.alert-row")).to_contain_text("delivered")
    expect(page.locator(".job-alerts tr.alert-row")).to_contain_text("failed 2 times in a row")
    page.get_by_role("link", name="Alerts", exact=True).click()
    expect(page.locator("tr.alert-row")).to_have_count(1)
    expect(page.locator("tr.alert-row")).to_contain_text("always-failing")
    _shoot(page, "alerts")
    page.select_option("select[name=status]", "failed")
    expect(page.locator("p.empty")).to_contain_text("No alerts failed")
    assert len([r for r in target.requests if r["path"] == "/slack"]) == 1


def test_pause_notes_bulk_actions_overrides_and_skipped_rows_in_the_console(browser, api, target, db_url):
    """Issue 33 in the console: the bulk pause and resume of the jobs a filter selects, a pause
    with a note and an end (the runner ends it: its skipped row shows), a run with overrides."""
    import psycopg
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    hook = {"type": "http", "method": "POST", "timeout_seconds": 5, "url": target.url + "/etl"}
    for name in ("etl-orders", "etl-stock"):
        api.post("/v1/jobs", {"name": name, "tags": ["etl"], "schedule": "@hourly", "target": hook})
    ticker = api.post(
        "/v1/jobs",
        {
            "name": "ticker",
            "schedule": "@every 1s",
            "missed_runs": "skip",
            "target": {**hook, "url": target.url + "/t"},
        },
    )
    page, problems = watched_page(browser)

    # The list filtered by tag: pause and resume every job it selects.
    page.goto(api.url + "/console/#/jobs")
    jobs = page.locator("table.jobs tbody tr")
    expect(jobs).to_have_count(3)
    page.fill("input[name=tag]", "etl")
    expect(jobs).to_have_count(2)
    page.get_by_role("button", name="Pause all matching").click()
    expect(page.locator(".bulk .note")).to_have_text("Paused 2 jobs (tag etl).")
    expect(jobs.locator(".badge.b-paused")).to_have_count(2)
    assert api.get("/v1/jobs?name_prefix=ticker")["jobs"][0]["state"] == "active"
    page.get_by_role("button", name="Resume all matching").click()
    expect(jobs.locator(".badge.b-active")).to_have_count(2)

    # A run with overrides: delivered with them, shown with the execution (the secret masked).
    page.goto(f"{api.url}/console/#/jobs/{ticker['id']}")
    expect(page.get_by_role("heading", name="ticker")).to_be_visible()
    page.locator("details.run-options summary").click()
    page.fill("textarea[name=run_body]", '{"region": "{{vars.region}}"}')
    page.fill("textarea[name=run_headers]", "X-Env: staging\nAuthorization: Bearer console-s3cret")
    page.fill("textarea[name=run_vars]", "region=eu-west-1")
    page.get_by_role("button", name="Run with overrides", exact=True).click()
    manual = manual_runs(page)
    expect(manual.locator(".tag")).to_have_text("overrides")
    manual.first.click()
    expect(page.locator("pre.overrides")).to_contain_text('"Authorization": "***"')
    assert "console-s3cret" not in page.content()
    sent = [r for r in target.requests if r["body"] == b'{"region": "eu-west-1"}']
    assert sent and sent[0]["headers"]["Authorization"] == "Bearer console-s3cret"

    # A backfill of the last three seconds: previewed (a dry run), then queued and delivered as itself.
    from datetime import UTC, datetime, timedelta

    now = datetime.now(UTC).replace(microsecond=0)
    page.fill("input[name=backfill_start]", (now - timedelta(seconds=3)).isoformat())
    page.fill("input[name=backfill_end]", now.isoformat())
    page.get_by_role("button", name="Preview backfill", exact=True).click()
    expect(page.locator(".backfill-result")).to_contain_text("would run")
    page.get_by_role("button", name="Backfill", exact=True).click()
    expect(page.locator(".backfill-result")).to_contain_text("Queued")
    backfilled = page.locator("table.executions tbody tr.exec").filter(has_text="backfill")
    expect(backfilled.first).to_be_visible()

    # A pause with a note and an end: shown in the summary, ended by the runner, its skipped row listed.
    page.fill("input[name=pause_note]", "vendor maintenance")
    page.fill("input[name=pause_minutes]", "1")
    page.get_by_role("button", name="Pause with note", exact=True).click()
    expect(page.locator("h1 .badge")).to_have_text("paused")
    expect(page.locator("dd.pause-note")).to_have_text("vendor maintenance")
    expect(page.locator("dd.pause-until")).to_contain_text("by itself")
    with psycopg.connect(db_url, autocommit=True) as conn:  # its end comes now (the runner checks every second)
        conn.execute("UPDATE job_specs SET pause_until = now() WHERE id = %s", (ticker["id"],))
    expect(page.locator("h1 .badge")).to_have_text("active")
    # Its row among the skipped ones: a ticker that falls behind under load also skips occurrences
    # as missed (missed_runs: skip), and those rows may come after it.
    skipped = page.locator("table.executions tbody tr.exec").filter(has=page.locator(".badge.b-skipped"))
    expect(skipped.filter(has_text="skipped: paused").first).to_be_visible()
    _shoot(page, "job-skipped")
    page.get_by_role("link", name="Recent activity").click()
    page.select_option("select[name=status]", "skipped")
    expect(page.locator("table.executions tbody tr.exec").first).to_contain_text("ticker")


def test_a_jobs_changes_tab_and_the_cause_of_a_chained_run(browser, api, target):
    """The job view's Changes tab lists who changed what (a secret only said to have changed);
    a chained run's execution links to the execution that caused it, and that to its job."""
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    hook = {"type": "http", "method": "POST", "timeout_seconds": 5}
    report = api.post(
        "/v1/jobs",
        {"name": "report", "schedule": "0 0 1 1 *", "target": {**hook, "url": target.url + "/report"}},
    )
    extract = api.post(
        "/v1/jobs",
        {
            "name": "extract",
            "schedule": "0 0 1 1 *",
            "on_success": ["report"],
            "target": {**hook, "url": target.url + "/extract", "auth": {"type": "bearer", "token": "first-token"}},
        },
    )
    patched = requests.patch(
        f"{api.url}/v1/jobs/{extract['id']}",
        json={"description": "nightly extract", "target": {"auth": {"token": "second-token"}}},
        timeout=10,
    )
    assert patched.status_code == 200, patched.text
    api.post(f"/v1/jobs/{extract['id']}/run", {})
    target.wait_for(2, timeout=30)  # the extract, then the report it ran

    page, problems = watched_page(browser, 860)
    page.goto(f"{api.url}/console/#/jobs/{extract['id']}")
    expect(page.get_by_role("heading", name="extract")).to_be_visible()
    expect(page.locator(".chains")).to_contain_text("on success: report")
    page.get_by_role("tab", name="Changes").click()
    rows = page.locator("table.changes tbody tr")
    expect(rows).to_have_count(3)  # run, update, create: newest first
    expect(rows.nth(0).locator(".action")).to_have_text("run")
    expect(rows.nth(1)).to_contain_text("target.auth.token: changed (secret)")
    expect(rows.nth(1)).to_contain_text('"nightly extract"')
    expect(rows.nth(2).locator(".action")).to_have_text("create")
    assert "second-token" not in page.content() and "first-token" not in page.content()
    _shoot(page, "job-changes")

    # The report's execution says what caused it, and leads there.
    page.goto(f"{api.url}/console/#/jobs/{report['id']}")
    expect(page.get_by_role("heading", name="report")).to_be_visible()
    cause = page.locator("table.executions a.cause")
    expect(cause).to_have_text("chain ←")
    page.locator("table.executions tr.exec").first.click()
    expect(page.locator(".execution-details")).to_contain_text("Caused by")
    page.locator(".execution-details a.cause").click()
    # The cause: the extract's execution, on a page of its own, which leads to its job.
    expect(page.get_by_role("heading", name="Execution of extract")).to_be_visible()
    expect(page.locator(".execution-summary")).to_contain_text("manual")
    page.locator(".execution-summary a.job").click()
    expect(page.get_by_role("heading", name="extract")).to_be_visible()
    assert problems == []

"""The console's rule sets by tag in a real browser (Debian's Chromium driven by Playwright)
against a real `scheduler local`: the Alerts page lists them (their tag linking to the tagged
jobs, their rules and targets, secrets never shown) and the alerts they fired, named by set; a
tagged job's page names the sets that cover it."""

from __future__ import annotations

import json
import re

import pytest
import requests

from tests.browser.test_console import TIMEOUT_MS, _shoot, api, browser, target, watched_page  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_alerts_page_lists_the_rule_sets_and_their_alerts(browser, api, target):
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    slack = {"type": "http", "url": target.url + "/slack", "auth": {"type": "bearer", "token": "console-tok-Q7"}}
    answer = requests.put(
        api.url + "/v1/alert-rules/billing-team",
        json={"tag": "billing", "alerts": [{"on": "failure", "target": slack}, {"on": "recovery", "target": slack}]},
        timeout=10,
    )
    assert answer.status_code == 201, answer.text
    api.post(
        "/v1/jobs",
        {
            "name": "ledger",
            "tags": ["billing"],
            "schedule": "@every 1s",
            "retry": {"max_attempts": 1},
            "target": {"type": "http", "url": target.url + "/flaky"},
        },
    )
    page, problems = watched_page(browser)
    page.goto(api.url + "/console/#/alerts")
    row = page.locator("tr.rule-set-row")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("billing-team")
    expect(row).to_contain_text("failure")
    expect(row).to_contain_text("recovery")
    expect(row).to_contain_text(target.url + "/slack")
    expect(page.locator("tr.alert-row")).to_have_count(1)
    expect(page.locator("tr.alert-row")).to_contain_text("billing-team/failure")
    expect(page.locator("tr.alert-row")).to_contain_text("ledger")
    _shoot(page, "alert-rules")
    assert "console-tok-Q7" not in page.content()
    # The set's name opens its change log, its secret masked.
    page.locator("tr.rule-set-row").get_by_role("button", name="billing-team").click()
    changes = page.locator(".rule-set-changes table.changes tbody tr")
    expect(changes).to_have_count(1)
    expect(changes.first).to_contain_text("create")
    expect(changes.first).to_contain_text("alerts.0.target.auth.token: changed (secret)")
    assert "console-tok-Q7" not in page.content()
    page.locator("tr.rule-set-row a", has_text="billing").click()
    expect(page.locator("input[name=tag]")).to_have_value("billing")
    page.get_by_role("link", name="ledger").click()
    # The job's page: no rules of its own, the set of its tag, and the alert it fired.
    expect(page.locator(".job-rule-sets")).to_contain_text("billing-team (billing)")
    expect(page.locator(".job-alerts tr.alert-row")).to_have_count(1)
    expect(page.locator(".job-alerts tr.alert-row")).to_contain_text("billing-team/failure")
    assert problems == []


def test_rule_sets_are_made_changed_and_deleted_in_the_console(browser, api, target):
    """The Alerts page makes a rule set, edits it (a secret shown as *** and kept; a set changed
    elsewhere since the form opened is not overwritten) and deletes it after a confirmation."""
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    page, problems = watched_page(browser, expected=(400, 412))  # the refusals the test provokes
    page.goto(api.url + "/console/#/alerts")
    expect(page.locator(".no-rule-sets")).to_be_visible()
    rows = page.locator("tr.rule-set-row")
    hook = {"type": "http", "url": target.url + "/ops", "auth": {"type": "bearer", "token": "ops-secret-K2"}}

    page.get_by_role("button", name="New rule set").click()
    page.fill("input[name=rule_set_name]", "ops")
    page.fill("input[name=rule_set_tag]", "ops")
    page.fill(
        "textarea[name=rule_set_alerts]", json.dumps([{"on": "failures_in_a_row", "threshold": 0, "target": hook}])
    )
    page.get_by_role("button", name="Create").click()
    expect(page.locator('.rule-set-form .field-error[data-field="alerts"]')).to_contain_text("alerts.0.threshold")
    page.fill(
        "textarea[name=rule_set_alerts]", json.dumps([{"on": "failures_in_a_row", "threshold": 3, "target": hook}])
    )
    page.get_by_role("button", name="Create").click()
    expect(page.locator(".rule-sets .note")).to_have_text("Saved ops (version 1).")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("failures_in_a_row >= 3")
    # A new set never replaces one of its name (If-None-Match: *): said at the name.
    page.get_by_role("button", name="New rule set").click()
    page.fill("input[name=rule_set_name]", "ops")
    page.fill("input[name=rule_set_tag]", "elsewhere")
    page.fill("textarea[name=rule_set_alerts]", json.dumps([{"on": "failure", "target": hook}]))
    page.get_by_role("button", name="Create").click()
    expect(page.locator('.rule-set-form .field-error[data-field="name"]')).to_contain_text(
        "a rule set named ops exists"
    )
    assert requests.get(api.url + "/v1/alert-rules/ops", timeout=10).json()["tag"] == "ops"
    page.get_by_role("button", name="Cancel").click()

    # An edit: the secret shown as ***, kept when the rules are saved with it.
    rows.first.get_by_role("button", name="Edit").click()
    rules = page.locator("textarea[name=rule_set_alerts]")
    expect(rules).to_have_value(re.compile(r'"token": "\*\*\*"'))
    assert "ops-secret-K2" not in page.content()
    edited = json.loads(rules.input_value())
    edited.append({"on": "recovery", "target": edited[0]["target"]})
    page.fill("textarea[name=rule_set_alerts]", json.dumps(edited))
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".rule-sets .note")).to_have_text("Saved ops (version 2).")
    expect(rows.first).to_contain_text("recovery")
    [change] = requests.get(api.url + "/v1/alert-rules/ops/changes?limit=1", timeout=10).json()["changes"]
    assert change["version"] == 2 and "alerts.1.on" in change["diff"]
    assert "alerts.0.target.auth.token" not in change["diff"]  # the first rule's secret kept as it was

    # Changed elsewhere while its form is open: the save is refused, nothing overwritten.
    rows.first.get_by_role("button", name="Edit").click()
    elsewhere = requests.put(
        api.url + "/v1/alert-rules/ops", json={"tag": "ops", "alerts": [{"on": "failure", "target": hook}]}, timeout=10
    )
    assert elsewhere.status_code == 200, elsewhere.text
    page.fill("input[name=rule_set_tag]", "operations")
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".rule-set-form .alert")).to_contain_text(
        "This rule set changed since you opened it: it is now at version 3."
    )
    assert requests.get(api.url + "/v1/alert-rules/ops", timeout=10).json()["tag"] == "ops"
    # Loaded again, the form holds the set as it is now, and a save of that version goes.
    page.locator(".rule-set-form").get_by_role("button", name="Load it again").click()
    expect(page.locator("input[name=rule_set_tag]")).to_have_value("ops")
    expect(page.locator(".rule-set-form .alert")).to_have_count(0)
    page.fill("input[name=rule_set_tag]", "operations")
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".rule-sets .note")).to_have_text("Saved ops (version 4).")
    assert requests.get(api.url + "/v1/alert-rules/ops", timeout=10).json()["tag"] == "operations"

    rows.first.get_by_role("button", name="Delete").click()
    rows.first.locator(".confirm").get_by_role("button", name="Delete").click()
    expect(rows).to_have_count(0)
    assert requests.get(api.url + "/v1/alert-rules/ops", timeout=10).status_code == 404
    assert problems == []


def _add_alerts(db_url: str, job_id: str, count: int) -> None:
    """Delivered alerts of the job, one a second back from now (the sender has nothing to send)."""
    import psycopg

    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(
            """INSERT INTO alert_deliveries (id, owner, job_id, job_name, rule_key, rule_on, event, incident_id,
                                             target, vars, created_at, status, attempts, delivered_at)
               SELECT gen_random_uuid(), owner, id, name, 'failure', 'failure', 'fired', gen_random_uuid(),
                      '{"type": "http", "url": "https://hooks.example.com/x"}', '{}',
                      now() - make_interval(secs => g), 'delivered', 1, now()
               FROM job_specs, generate_series(1, %s) AS g WHERE id = %s""",
            (count, job_id),
        )


def test_the_alerts_page_pages_back_and_lists_one_jobs_alerts(browser, api, target, db_url):
    """The Alerts page lists the newest 50 alerts, older ones a page at a time; a job's page links
    to all of its alerts (#/alerts?job_id=), and "all jobs" lists every job's again."""
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    hook = {"type": "http", "url": target.url}
    noisy = api.post("/v1/jobs", {"name": "noisy", "schedule": "0 0 1 1 *", "target": hook})
    quiet = api.post("/v1/jobs", {"name": "quiet", "schedule": "0 0 1 1 *", "target": hook})
    _add_alerts(db_url, noisy["id"], 55)
    _add_alerts(db_url, quiet["id"], 3)
    page, problems = watched_page(browser)
    rows = page.locator("tr.alert-row")
    older = page.get_by_role("button", name="Older alerts")
    page.goto(api.url + "/console/#/alerts")
    expect(rows).to_have_count(50)
    older.click()
    expect(rows).to_have_count(58)
    expect(older).to_have_count(0)

    page.goto(f"{api.url}/console/#/jobs/{noisy['id']}")
    page.locator("a.all-alerts").click()
    expect(page).to_have_url(re.compile(rf"#/alerts\?job_id={noisy['id']}$"))
    expect(page.locator(".job-filter")).to_contain_text("noisy")
    expect(rows).to_have_count(50)
    older.click()
    expect(rows).to_have_count(55)
    expect(rows.filter(has_text="quiet")).to_have_count(0)
    page.get_by_role("button", name="all jobs").click()
    expect(rows).to_have_count(50)
    expect(rows.filter(has_text="quiet")).to_have_count(3)
    assert problems == []

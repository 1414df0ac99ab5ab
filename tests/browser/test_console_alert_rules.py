"""The console's rule sets by tag in a real browser (Debian's Chromium driven by Playwright)
against a real `scheduler local`: the Alerts page lists them (their tag linking to the tagged
jobs, their rules and targets, secrets never shown) and the alerts they fired, named by set; a
tagged job's page names the sets that cover it."""

from __future__ import annotations

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

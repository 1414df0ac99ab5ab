"""``scheduler calendars ...``, a job's ``--exclude-calendar``/``--on-excluded`` and ``scheduler
preview --explain``, run as a user runs them against a real ``scheduler local``."""

from __future__ import annotations

import json

import pytest

from tests.e2e.test_cli_local import cli
from tests.support import LocalScheduler

UK_ICS = (
    "BEGIN:VCALENDAR\r\nVERSION:2.0\r\n"
    "BEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20261225\r\nDTEND;VALUE=DATE:20261226\r\nSUMMARY:Christmas Day\r\nEND:VEVENT\r\n"
    "BEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20261228\r\nDTEND;VALUE=DATE:20261229\r\nSUMMARY:Boxing Day\r\nEND:VEVENT\r\n"
    "END:VCALENDAR\r\n"
)


@pytest.fixture
def local(db_url, tmp_path):
    scheduler = LocalScheduler(db_url, str(tmp_path / "data"))
    yield scheduler
    assert scheduler.stop() == 0


def test_calendars_from_the_command_line(local, tmp_path):
    ics = tmp_path / "uk.ics"
    ics.write_text(UK_ICS, encoding="utf-8")
    made = cli(local.url, "calendars", "create", "--name", "uk", "--timezone", "Europe/London", "-f", str(ics))
    assert made.returncode == 0, made.stderr
    assert "uk" in made.stdout and "ics: 2 events" in made.stdout
    flags = cli(
        local.url,
        "calendars",
        "create",
        "--name",
        "office",
        "--date",
        "2026-12-31",
        "--yearly",
        "01-01",
        "--range",
        "2026-08-01..2026-08-14",
        "-o",
        "json",
    )
    assert flags.returncode == 0, flags.stderr
    assert json.loads(flags.stdout)["ranges"] == [{"start": "2026-08-01", "end": "2026-08-14"}]
    bad = cli(local.url, "calendars", "create", "--name", "bad", "--date", "2026-02-30")
    assert bad.returncode != 0 and "dates.0" in bad.stderr

    listed = cli(local.url, "calendars", "list")
    assert listed.returncode == 0 and [line.split()[0] for line in listed.stdout.splitlines()[1:]] == ["office", "uk"]
    assert json.loads(cli(local.url, "calendars", "get", "uk").stdout)["timezone"] == "Europe/London"

    job = cli(
        local.url,
        "jobs",
        "create",
        "--name",
        "daily",
        "--schedule",
        "0 9 * * *",
        "--timezone",
        "Europe/London",
        "--start-at",
        "2026-12-24T10:00:00Z",
        "--url",
        "https://example.com/hook",
        "--exclude-calendar",
        "uk",
        "--on-excluded",
        "shift",
        "-o",
        "json",
    )
    assert job.returncode == 0, job.stderr
    assert json.loads(job.stdout)["next_run_at"] == "2026-12-26T00:00:00Z"

    explained = cli(
        local.url,
        "preview",
        "0 9 * * *",
        "--timezone",
        "Europe/London",
        "--after",
        "2026-12-24T10:00:00Z",
        "--count",
        "2",
        "--exclude-calendar",
        "uk",
        "--explain",
    )
    assert explained.returncode == 0, explained.stderr
    assert "excluded by calendar uk" in explained.stdout and "2026-12-26T09:00:00Z" in explained.stdout

    in_use = cli(local.url, "calendars", "delete", "uk")
    assert in_use.returncode == 4 and "daily" in in_use.stderr
    # apply replaces the calendar of that name; its job is replanned.
    applied = cli(
        local.url, "calendars", "apply", "--name", "uk", "--timezone", "Europe/London", "--date", "2026-12-26"
    )
    assert applied.returncode == 0, applied.stderr
    again = json.loads(cli(local.url, "jobs", "get", "daily", "-o", "json").stdout)
    assert again["next_run_at"] == "2026-12-25T09:00:00Z"
    assert cli(local.url, "jobs", "update", "daily", "--on-excluded", "skip").returncode == 0
    assert cli(local.url, "jobs", "delete", "daily").returncode == 0
    deleted = cli(local.url, "calendars", "delete", "uk")
    assert deleted.returncode == 0 and "deleted calendar uk" in deleted.stdout


WEEKENDS_ICS = (
    "BEGIN:VCALENDAR\r\n"
    "BEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20260103\r\nRRULE:FREQ=WEEKLY;BYDAY=SA,SU\r\nSUMMARY:Weekend\r\nEND:VEVENT\r\n"
    "BEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20270531\r\nRRULE:FREQ=YEARLY;BYMONTH=5;BYDAY=-1MO\r\n"
    "SUMMARY:Spring bank holiday\r\nEND:VEVENT\r\n"
    "END:VCALENDAR\r\n"
)


def test_an_ics_rule_from_the_command_line_and_the_skipped_rows_it_leaves(local, tmp_path):
    ics = tmp_path / "weekends.ics"
    ics.write_text(WEEKENDS_ICS, encoding="utf-8")
    made = cli(local.url, "calendars", "create", "--name", "weekends", "--timezone", "Europe/London", "-f", str(ics))
    assert made.returncode == 0, made.stderr
    # Friday 28 May 2027, after 09:00: the weekend and the bank holiday Monday are left out.
    job = cli(
        local.url,
        "jobs",
        "create",
        "--name",
        "workdays",
        "--schedule",
        "0 9 * * *",
        "--timezone",
        "Europe/London",
        "--start-at",
        "2027-05-28T10:00:00Z",
        "--url",
        "https://example.com/hook",
        "--exclude-calendar",
        "weekends",
        "-o",
        "json",
    )
    assert job.returncode == 0, job.stderr
    assert json.loads(job.stdout)["next_run_at"] == "2027-06-01T08:00:00Z"
    skipped = cli(local.url, "executions", "workdays", "--status", "skipped")
    assert skipped.returncode == 0, skipped.stderr
    assert "3 occurrences skipped: calendar" in skipped.stdout

    bad = tmp_path / "bad.ics"
    bad.write_text(WEEKENDS_ICS.replace("BYDAY=SA,SU", "BYDAY=SA,SU;BYSETPOS=1"), encoding="utf-8")
    refused = cli(local.url, "calendars", "create", "--name", "bad", "-f", str(bad))
    assert refused.returncode != 0 and "ics" in refused.stderr and "BYSETPOS" in refused.stderr

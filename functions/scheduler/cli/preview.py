"""``scheduler preview SCHEDULE``: when a schedule will fire, asked of the API (the code that
plans the jobs), before a job is saved."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import datetime
from typing import Any

from scheduler.cli.api import client_command
from scheduler.cli.common import EXIT_OK, UsageError, positive_int
from scheduler.cli.definitions import add_calendar_flags, add_spread_options
from scheduler.cli.output import format_table, print_data


def preview_request(args: argparse.Namespace) -> dict[str, Any]:
    """The body of ``POST /v1/schedules/preview`` of the flags (absent flags left out)."""
    schedules = list(args.schedule)
    body: dict[str, Any] = {"schedule": schedules[0]} if len(schedules) == 1 else {"schedules": schedules}
    for key in ("timezone", "start_at", "end_at", "after", "count", "job_id", "on_excluded"):
        value = getattr(args, key, None)
        if value is not None:
            body[key] = value
    if getattr(args, "spread", None) is not None:
        body["spread"] = {"window_seconds": args.spread, "mode": getattr(args, "spread_mode", None) or "stable"}
    if getattr(args, "exclude_calendars", None):
        body["exclude_calendars"] = list(args.exclude_calendars)
    if getattr(args, "explain", False):
        body["explain"] = True
    return body


def _wall_time(instant: str, zone: str | None) -> str | None:
    if not zone or zone == "UTC":
        return None
    from zoneinfo import ZoneInfo

    try:
        moment = datetime.fromisoformat(instant.replace("Z", "+00:00")).astimezone(ZoneInfo(zone))
    except (ValueError, KeyError, OSError):
        return None
    return moment.strftime("%Y-%m-%d %H:%M:%S %Z")


def explanation(item: dict[str, Any]) -> str:
    """What a calendar did to an explained occurrence, in words."""
    if item.get("shifted_from"):
        return f"shifted from {item['shifted_from']} (calendar {item.get('excluded_by')})"
    if item.get("excluded_by"):
        return f"excluded by calendar {item['excluded_by']} (does not run)"
    return ""


def _explained(items: list[dict[str, Any]], zone: str | None) -> str:
    """The table of ``--explain``: each time, its local time, its expression, its spread and
    what a calendar did."""
    local = bool(zone and zone != "UTC")
    header = ("UTC", *(("LOCAL TIME",) if local else ()), "EXPRESSION", "SPREAD", "CALENDAR")
    rows = (
        [
            item.get("at"),
            *([_wall_time(str(item.get("at")), zone)] if local else []),
            item.get("expression"),
            f"+{item.get('spread_seconds', 0)}s",
            explanation(item),
        ]
        for item in items
    )
    return format_table(header, rows)


@client_command
def preview(args: argparse.Namespace, client: Any) -> int:
    """``scheduler preview``."""
    if not all(schedule.strip() for schedule in args.schedule):
        raise UsageError("SCHEDULE is empty")
    if args.job_id is not None:  # a name, as every other JOB argument takes, or an id
        args.job_id = client.resolve_job_id(args.job_id)
        if args.start_at is None:  # its own start_at bounds it; without one, the API counts from its creation
            args.start_at = client.get_job(args.job_id).get("start_at")
    answer = client.preview_schedule(preview_request(args))
    if print_data(args.output, answer):
        return EXIT_OK
    occurrences = answer.get("occurrences") or []
    if not occurrences:
        print("no occurrences (the schedule has ended)")
        return EXIT_OK
    if args.explain:
        print(_explained(occurrences, args.timezone))
    elif args.timezone and args.timezone != "UTC":
        print(format_table(("UTC", "LOCAL TIME"), ([o, _wall_time(o, args.timezone)] for o in occurrences)))
    else:
        print("\n".join(occurrences))
    return EXIT_OK


def add_parsers(sub: Any, subparser: Callable[..., argparse.ArgumentParser]) -> None:
    """``scheduler preview``."""
    parser = subparser(sub, "preview", "the next occurrences of a schedule (computed by the API)")
    parser.add_argument(
        "schedule",
        metavar="SCHEDULE",
        nargs="+",
        help="cron, @hourly-style macro, '@every 90s', cron(...), rate(...) or at(...); quote it; "
        "several: their union (the job's schedules)",
    )
    parser.add_argument("--timezone", metavar="IANA_NAME", help="time zone of the schedule (default UTC)")
    parser.add_argument("--count", type=positive_int, metavar="N", help="how many occurrences (1 to 100; default 10)")
    parser.add_argument("--start-at", metavar="TIMESTAMP", help="no occurrence before this RFC 3339 instant")
    parser.add_argument("--end-at", metavar="TIMESTAMP", help="no occurrence after this RFC 3339 instant")
    parser.add_argument("--after", metavar="TIMESTAMP", help="occurrences strictly after this instant (default: now)")
    add_spread_options(parser)
    add_calendar_flags(parser)
    parser.add_argument(
        "--job", dest="job_id", metavar="JOB", help="the job (id or name) whose id seeds --spread (its real times)"
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="say which expression gave each time, the spread applied and what a calendar excluded or shifted",
    )
    parser.set_defaults(func=preview)

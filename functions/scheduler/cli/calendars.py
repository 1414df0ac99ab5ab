"""``scheduler calendars list|get|create|apply|delete``: an owner's calendars, a client of the API.

A calendar is given by a file (``-f FILE``: JSON or YAML, the API's calendar object, or an
iCalendar ``.ics`` file, whose text becomes ``ics``) and/or flags (``--date``, ``--yearly``,
``--range START..END``, ``--ics FILE``); ``apply`` creates it, or replaces the one of that name.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scheduler.cli.api import client_command
from scheduler.cli.common import EXIT_OK, UsageError, add_if_match_flag
from scheduler.cli.jobs import add_page_flags, print_listing
from scheduler.cli.output import CHANGE_ROWS, format_changes, format_table, print_data
from scheduler.cli.reading import read_definition
from scheduler.cli.streaming import Rows

_COLUMNS = ("NAME", "TIMEZONE", "DAYS", "VERSION", "UPDATED")


def _summary(calendar: dict[str, Any]) -> str:
    if calendar.get("ics"):
        return "ics: " + str(calendar["ics"].upper().count("BEGIN:VEVENT")) + " events"
    parts = [f"{len(calendar.get(key) or [])} {key}" for key in ("dates", "ranges", "yearly") if calendar.get(key)]
    return ", ".join(parts) or "none"


def _row(calendar: dict[str, Any]) -> list[Any]:
    return [
        calendar["name"],
        calendar.get("timezone"),
        _summary(calendar),
        calendar.get("version"),
        calendar.get("updated_at"),
    ]


def format_calendars(calendars: list[dict[str, Any]]) -> str:
    """The calendars as a table."""
    return format_table(_COLUMNS, (_row(c) for c in calendars))


def _read_text(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None


def calendar_definition(args: argparse.Namespace) -> dict[str, Any]:
    """The calendar of ``-f`` and the flags (the flags' lists added to the file's)."""
    definition: dict[str, Any] = {}
    if args.file:
        if args.file.lower().endswith((".ics", ".ical", ".ifb")):
            definition["ics"] = _read_text(args.file)
        else:
            definition = dict(read_definition(args.file, "calendar"))
    if args.name:
        definition["name"] = args.name
    if args.timezone:
        definition["timezone"] = args.timezone
    if args.ics:
        definition["ics"] = _read_text(args.ics)
    for key, values in (("dates", args.dates), ("yearly", args.yearly)):
        if values:
            definition[key] = [*(definition.get(key) or []), *values]
    for text in args.ranges or []:
        start, sep, end = text.partition("..")
        if not sep or not start or not end:
            raise UsageError(f"--range {text!r}: give START..END (dates or date-times)")
        definition["ranges"] = [*(definition.get("ranges") or []), {"start": start, "end": end}]
    if not definition.get("name"):
        raise UsageError("give the calendar's name: --name NAME, or a name in -f FILE")
    return definition


def _show(args: argparse.Namespace, calendar: dict[str, Any]) -> None:
    if not print_data(args.output, calendar):
        print(format_calendars([calendar]))


@client_command
def calendars_list(args: argparse.Namespace, client: Any) -> int:
    """``calendars list``."""
    return print_listing(
        args,
        "calendars",
        (format_calendars, Rows(_COLUMNS, _row)),
        lambda: client.list_calendars(limit=args.limit, cursor=args.cursor),
        lambda: client.iter_calendar_pages(limit=args.limit, cursor=args.cursor),
    )


@client_command
def calendars_get(args: argparse.Namespace, client: Any) -> int:
    """``calendars get NAME``: the whole calendar (JSON unless ``-o yaml``)."""
    print_data(args.output if args.output != "table" else "json", client.get_calendar(args.calendar))
    return EXIT_OK


@client_command
def calendars_create(args: argparse.Namespace, client: Any) -> int:
    """``calendars create``."""
    _show(args, client.create_calendar(calendar_definition(args)))
    return EXIT_OK


@client_command
def calendars_apply(args: argparse.Namespace, client: Any) -> int:
    """``calendars apply``: create the calendar, or replace the one of that name."""
    from scheduler.client import ResourceNotFound

    definition = calendar_definition(args)
    try:
        calendar = client.replace_calendar(definition["name"], definition, if_match=args.if_match)
    except ResourceNotFound:
        if args.if_match is not None:  # a version named: only that calendar is replaced, none created
            raise
        calendar = client.create_calendar(definition)
    _show(args, calendar)
    return EXIT_OK


@client_command
def calendars_delete(args: argparse.Namespace, client: Any) -> int:
    """``calendars delete NAME`` (refused, exit 4, while a job names it)."""
    client.delete_calendar(args.calendar, if_match=args.if_match)
    if args.output == "table":
        print(f"deleted calendar {args.calendar}")
    return EXIT_OK


@client_command
def calendars_history(args: argparse.Namespace, client: Any) -> int:
    """``calendars history NAME``: the calendar's change log, newest first (after a delete too)."""
    return print_listing(
        args,
        "changes",
        (format_changes, CHANGE_ROWS),
        lambda: client.list_calendar_changes(args.calendar, limit=args.limit, cursor=args.cursor),
        lambda: client.iter_calendar_change_pages(args.calendar, limit=args.limit, cursor=args.cursor),
    )


def _definition_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-f", "--file", metavar="FILE", help="a calendar in JSON or YAML, or an iCalendar .ics file")
    parser.add_argument("--name", help="the calendar's name, unique per owner")
    parser.add_argument("--timezone", metavar="IANA_NAME", help="the zone its days are local to (default UTC)")
    parser.add_argument("--date", dest="dates", action="append", metavar="YYYY-MM-DD", help="a day (repeatable)")
    parser.add_argument("--yearly", action="append", metavar="MM-DD", help="a day of every year (repeatable)")
    parser.add_argument(
        "--range",
        dest="ranges",
        action="append",
        metavar="START..END",
        help="days START..END (both included) or date-times (end excluded); repeatable",
    )
    parser.add_argument("--ics", metavar="FILE", help="an iCalendar file (instead of dates, ranges and yearly)")


def add_parsers(sub: Any, subparser: Callable[..., argparse.ArgumentParser]) -> None:
    """``scheduler calendars ...``."""
    calendars = sub.add_parser(
        "calendars",
        help="holiday and blackout calendars that jobs leave out",
        description="holiday and blackout calendars that jobs leave out (exclude_calendars)",
    )
    actions = calendars.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = subparser(actions, "list", "list calendars (in name order)")
    add_page_flags(listing)
    listing.set_defaults(func=calendars_list)
    get = subparser(actions, "get", "show a calendar, every field")
    get.add_argument("calendar", metavar="NAME")
    get.set_defaults(func=calendars_get)
    create = subparser(actions, "create", "create a calendar")
    _definition_flags(create)
    create.set_defaults(func=calendars_create)
    apply = subparser(actions, "apply", "create a calendar, or replace the one of that name (its jobs replanned)")
    _definition_flags(apply)
    add_if_match_flag(apply, "the calendar", creates=False)
    apply.set_defaults(func=calendars_apply)
    delete = subparser(actions, "delete", "delete a calendar (refused while a job names it)")
    delete.add_argument("calendar", metavar="NAME")
    add_if_match_flag(delete, "the calendar")
    delete.set_defaults(func=calendars_delete)
    history = subparser(actions, "history", "a calendar's change log: who changed what, when (newest first)")
    history.add_argument("calendar", metavar="NAME")
    add_page_flags(history)
    history.set_defaults(func=calendars_history)

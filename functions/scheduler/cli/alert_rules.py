"""``scheduler alert-rules list|get|apply|delete``: an owner's alert rule sets, each the alert
rules of every job of theirs with a tag (``/v1/alert-rules``), a client of the API.

A rule set is given by a file (``-f FILE``: JSON or YAML, the API's object ``{"name", "tag",
"alerts"}``) and/or flags: ``--name``, ``--tag``, and ``--alert ON[=THRESHOLD]`` (repeatable),
rules whose target is the ``--webhook URL`` (an HTTP POST with the Slack-compatible default
body), added to the file's. ``apply`` creates the set, or replaces the one of that name.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from scheduler.cli.alerts import rule_text
from scheduler.cli.api import client_command
from scheduler.cli.common import EXIT_OK, UsageError, add_if_match_flag
from scheduler.cli.jobs import add_page_flags, print_listing
from scheduler.cli.manifests import with_secret_references
from scheduler.cli.output import CHANGE_ROWS, format_changes, format_table, print_data
from scheduler.cli.reading import read_definition
from scheduler.cli.streaming import Rows

_COLUMNS = ("NAME", "TAG", "RULES", "VERSION", "UPDATED")


def _rule_text(rule: dict[str, Any]) -> str:
    return rule_text(rule.get("on"), rule.get("threshold"))


def _row(rule_set: dict[str, Any]) -> list[Any]:
    return [
        rule_set.get("name"),
        rule_set.get("tag"),
        ", ".join(_rule_text(a) for a in rule_set.get("alerts") or []),
        rule_set.get("version"),
        rule_set.get("updated_at"),
    ]


def format_alert_rules(rule_sets: list[dict[str, Any]]) -> str:
    """The rule sets as a table: name, tag, their rules (``on>threshold``), version, update."""
    return format_table(_COLUMNS, (_row(r) for r in rule_sets))


def _flag_rule(text: str, webhook: str | None) -> dict[str, Any]:
    if not webhook:
        raise UsageError("--alert: give the --webhook URL its alerts go to")
    on, sep, threshold = text.partition("=")
    rule: dict[str, Any] = {"on": on, "target": {"type": "http", "url": webhook, "method": "POST"}}
    if sep:
        try:
            rule["threshold"] = int(threshold) if threshold.isdigit() else float(threshold)
        except ValueError:
            raise UsageError(f"--alert {text!r}: the threshold after = is a number") from None
    return rule


def alert_rule_definition(args: argparse.Namespace) -> dict[str, Any]:
    """The rule set of ``-f`` and the flags (the flags' rules added to the file's)."""
    definition: dict[str, Any] = (
        with_secret_references(read_definition(args.file, "alert rule set"), args.file) if args.file else {}
    )
    if args.name:
        definition["name"] = args.name
    if args.tag:
        definition["tag"] = args.tag
    flagged = [_flag_rule(text, args.webhook) for text in args.alerts or []]
    if flagged:
        definition["alerts"] = [*(definition.get("alerts") or []), *flagged]
    if not definition.get("name") or not isinstance(definition["name"], str):
        raise UsageError("give the rule set's name: --name NAME, or a name in -f FILE")
    if not definition.get("alerts"):
        raise UsageError("give its rules: --alert ON[=THRESHOLD] with --webhook URL, or alerts in -f FILE")
    return definition


@client_command
def alert_rules_list(args: argparse.Namespace, client: Any) -> int:
    """``alert-rules list``."""
    return print_listing(
        args,
        "alert_rules",
        (format_alert_rules, Rows(_COLUMNS, _row)),
        lambda: client.list_alert_rules(limit=args.limit, cursor=args.cursor),
        lambda: client.iter_alert_rule_pages(limit=args.limit, cursor=args.cursor),
    )


@client_command
def alert_rules_get(args: argparse.Namespace, client: Any) -> int:
    """``alert-rules get NAME``: the whole rule set (JSON unless ``-o yaml``; secrets ``***``)."""
    print_data(args.output if args.output != "table" else "json", client.get_alert_rule(args.rule_set))
    return EXIT_OK


@client_command
def alert_rules_apply(args: argparse.Namespace, client: Any) -> int:
    """``alert-rules apply``: create the rule set, or replace the one of that name."""
    definition = alert_rule_definition(args)
    found = client.put_alert_rule(
        definition["name"], definition.get("tag"), definition["alerts"], if_match=args.if_match
    )
    if not print_data(args.output, found):
        print(format_alert_rules([found]))
    return EXIT_OK


@client_command
def alert_rules_delete(args: argparse.Namespace, client: Any) -> int:
    """``alert-rules delete NAME``."""
    client.delete_alert_rule(args.rule_set, if_match=args.if_match)
    if args.output == "table":
        print(f"deleted alert rule set {args.rule_set}")
    return EXIT_OK


@client_command
def alert_rules_history(args: argparse.Namespace, client: Any) -> int:
    """``alert-rules history NAME``: the rule set's change log, newest first (after a delete too)."""
    return print_listing(
        args,
        "changes",
        (format_changes, CHANGE_ROWS),
        lambda: client.list_alert_rule_changes(args.rule_set, limit=args.limit, cursor=args.cursor),
        lambda: client.iter_alert_rule_change_pages(args.rule_set, limit=args.limit, cursor=args.cursor),
    )


def add_parsers(sub: Any, subparser: Callable[..., argparse.ArgumentParser]) -> None:
    """``scheduler alert-rules ...``."""
    group = sub.add_parser(
        "alert-rules",
        help="alert rules for every job with a tag",
        description="alert rules for every job of yours with a tag (jobs tagged later too)",
    )
    actions = group.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = subparser(actions, "list", "list alert rule sets (in name order)")
    add_page_flags(listing)
    listing.set_defaults(func=alert_rules_list)
    get = subparser(actions, "get", "show a rule set, every field")
    get.add_argument("rule_set", metavar="NAME")
    get.set_defaults(func=alert_rules_get)
    apply = subparser(actions, "apply", "create a rule set, or replace the one of that name")
    apply.add_argument("-f", "--file", metavar="FILE", help='a rule set in JSON or YAML ({"name", "tag", "alerts"})')
    apply.add_argument("--name", help="the rule set's name, unique per owner")
    apply.add_argument("--tag", help="the tag of the jobs it covers")
    apply.add_argument(
        "--alert",
        dest="alerts",
        action="append",
        metavar="ON[=THRESHOLD]",
        help="a rule: failure, failures_in_a_row=3, recovery, missing_run=SECONDS, late=SECONDS (repeatable)",
    )
    apply.add_argument("--webhook", metavar="URL", help="where the --alert rules go (an HTTP POST, Slack-compatible)")
    add_if_match_flag(apply, "the rule set", creates=False)
    apply.set_defaults(func=alert_rules_apply)
    delete = subparser(actions, "delete", "delete a rule set (its jobs keep their own rules)")
    delete.add_argument("rule_set", metavar="NAME")
    add_if_match_flag(delete, "the rule set")
    delete.set_defaults(func=alert_rules_delete)
    history = subparser(actions, "history", "a rule set's change log: who changed what, when (newest first)")
    history.add_argument("rule_set", metavar="NAME")
    add_page_flags(history)
    history.set_defaults(func=alert_rules_history)

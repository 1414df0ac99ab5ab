"""``scheduler alerts``: the alerts your jobs' rules fired, newest first, with how their
delivery went (``GET /v1/alerts``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from scheduler.cli.api import client_command
from scheduler.cli.common import positive_int
from scheduler.cli.jobs import print_listing
from scheduler.cli.output import format_table
from scheduler.cli.streaming import Rows

ALERT_STATUSES = ("pending", "delivered", "failed")
HEADERS = ("CREATED", "JOB", "ON", "EVENT", "STATUS", "ATTEMPTS", "MESSAGE")
MESSAGE_WIDTH = 80


def rule_text(on: Any, threshold: Any) -> str:
    """A rule as a table shows it: ``failures_in_a_row>=3`` (that many in a row fire it),
    ``late>60`` and ``missing_run>600`` (more than that many seconds), ``failure``."""
    if threshold is None:
        return str(on)
    return f"{on}{'>=' if on == 'failures_in_a_row' else '>'}{threshold:g}"


def alert_row(alert: dict[str, Any], *, wide: bool = False) -> tuple[Any, ...]:
    """An alert's cells: when, the job, the rule (``set/on>threshold`` for a rule set's by tag,
    ``rule_text``),
    fired or recovered, the delivery (the message cut to ``MESSAGE_WIDTH`` unless ``wide``)."""
    message = str(alert.get("message") or "")
    rule = rule_text(alert.get("on"), alert.get("threshold"))
    status = alert.get("status")
    return (
        alert.get("created_at"),
        alert.get("job_name"),
        (f"{alert['rule']}/" if alert.get("rule") else "") + rule,
        alert.get("event"),
        status if not alert.get("last_error") else f"{status} ({alert.get('last_error')})",
        alert.get("attempts"),
        message if wide or len(message) <= MESSAGE_WIDTH else message[: MESSAGE_WIDTH - 1] + "…",
    )


def format_alerts(alerts: list[dict[str, Any]], *, wide: bool = False) -> str:
    """The alerts as a table (``alert_row``)."""
    if not alerts:
        return "no alerts"
    return format_table(HEADERS, (alert_row(a, wide=wide) for a in alerts))


@client_command
def alerts(args: argparse.Namespace, client: Any) -> int:
    """``scheduler alerts``."""
    job_id = client.resolve_job_id(args.job) if args.job else None
    filters = {"job_id": job_id, "status": args.status, "limit": args.limit}
    return print_listing(
        args,
        "alerts",
        (lambda rows: format_alerts(rows, wide=args.wide), Rows(HEADERS, lambda a: alert_row(a, wide=args.wide))),
        lambda: client.list_alerts(cursor=args.cursor, **filters),
        lambda: client.pages(client.list_alerts, {**filters, "cursor": args.cursor}),
    )


def add_parsers(sub: Any, subparser: Callable[..., argparse.ArgumentParser]) -> None:
    """``scheduler alerts``."""
    parser = subparser(sub, "alerts", "list the alerts your jobs' rules fired (newest first) and their delivery")
    parser.add_argument("--job", metavar="JOB", help="only this job's (id or name)")
    parser.add_argument("--status", choices=ALERT_STATUSES, help="only alerts whose delivery is in this state")
    parser.add_argument("--limit", type=positive_int, metavar="N", help="page size")
    parser.add_argument("--cursor", help="the next_cursor of the previous page")
    parser.add_argument("--all", action="store_true", help="follow next_cursor to the last page")
    parser.add_argument("--wide", action="store_true", help="print whole messages")
    parser.set_defaults(func=alerts)

"""``scheduler export``: calendars, alert rule sets and jobs as the files ``apply`` reads, written
a page at a time as the listings arrive (``streaming``): the first document comes after the
first page, and what is held is a page, not every job. A listing that fails midway leaves an
output ``apply`` refuses (``streaming.INCOMPLETE``), the error on stderr and its exit code.

Two things need more than the page in hand. With a job filter (``--tag``, ``--state``,
``--name-prefix``), the calendars written first are those the exported jobs name: the jobs are
listed once for those names (only when there are calendars, and only until every calendar is
named), then again to be written. A chain that names a job by its id is written with the job's
name: from the page when the job is on it, else from a map of every job's id to its name, made
by one listing of the ids and names when a chain first needs it.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from scheduler.cli.api import client_command
from scheduler.cli.chaining import ChainNames
from scheduler.cli.common import EXIT_OK
from scheduler.cli.export_documents import exported, exported_alert_rules, exported_calendar, yaml_stream
from scheduler.cli.reading import KINDS
from scheduler.cli.streaming import emit, json_close, json_items

PAGE = 200  # the API's largest page: the fewest requests


@client_command
def export(args: argparse.Namespace, client: Any) -> int:
    """``scheduler export``: calendars, alert rule sets and jobs as a YAML stream (JSON with
    ``-o json``), in the order apply needs them, printed as the pages arrive. A job filter keeps
    the calendars its jobs name, ``--tag`` the rule sets of that tag."""
    references: list[str] = []
    chains = ChainNames(client)
    states: Counter[str] = Counter()
    pages = _document_pages(args, client, references, chains, states)
    emit(_json_pieces(pages) if args.output == "json" else ("".join(yaml_stream(iter(page))) for page in pages))
    if states:
        # A file has no state: applied where the jobs are not, they are created active.
        held = " and ".join(f"{n} {state} job{'s' if n > 1 else ''}" for state, n in sorted(states.items()))
        print(
            f"export: {held} written without their state: apply creates them active where they do not exist "
            "(a one-off whose run_at has passed runs at once)",
            file=sys.stderr,
        )
    if chains.dangling:
        print(f"export: chains name jobs that no longer exist: {', '.join(sorted(chains.dangling))}", file=sys.stderr)
    if references:
        print(
            f"export: secrets written as references: {', '.join(references)} (unset, apply keeps the stored ones)",
            file=sys.stderr,
        )
    return EXIT_OK


def _json_pieces(pages: Iterable[list[dict[str, Any]]]) -> Iterator[str]:
    """The documents as one JSON list (``json.dumps(documents, indent=2)``), a page at a time."""
    empty = True
    for documents in pages:
        if documents:
            yield json_items(documents, 0, empty)
            empty = False
    yield json_close(0, empty) + "\n"


def _document_pages(
    args: argparse.Namespace, client: Any, references: list[str], chains: ChainNames, states: Counter[str]
) -> Iterator[list[dict[str, Any]]]:
    """The documents, a page of them at a time: the calendars, the rule sets, then the jobs;
    ``references`` gets the secrets' names as they are written, ``states`` the number of jobs
    written paused or completed."""
    kinds = set(args.kinds or KINDS)
    filters = {"tag": args.tag, "state": args.state, "name_prefix": args.name_prefix}
    filtered = any(value is not None for value in filters.values())
    taken: set[str] = set()

    def written(names: list[str]) -> None:
        references.extend(names)
        taken.update(names)

    if "calendar" in kinds:
        calendars = [c for page in client.iter_calendar_pages(limit=PAGE) for c in page.get("calendars") or []]
        named = _calendars_named(client, filters, {c["name"] for c in calendars}) if filtered and calendars else None
        yield [exported_calendar(c) for c in calendars if named is None or c["name"] in named]
    if "alert_rules" in kinds and (args.tag is not None or not filtered):
        for page in client.iter_alert_rule_pages(limit=PAGE):
            documents = []
            for rule_set in page.get("alert_rules") or []:
                if args.tag is None or rule_set.get("tag") == args.tag:
                    document, names = exported_alert_rules(rule_set, taken)
                    documents.append(document)
                    written(names)
            yield documents
    if "job" in kinds:
        for page in client.iter_job_pages(**filters, limit=PAGE):
            jobs = page.get("jobs") or []
            chains.rename(jobs)
            documents = []
            for job in jobs:
                if job.get("state") in ("paused", "completed"):
                    states[job["state"]] += 1
                document, names = exported(job, taken)
                documents.append(document)
                written(names)
            yield documents


def _calendars_named(client: Any, filters: dict[str, Any], calendars: set[str]) -> set[str]:
    """The calendars the jobs of ``filters`` name (a listing of them; it stops once every one
    of ``calendars`` is named)."""
    named: set[str] = set()
    for page in client.iter_job_pages(**filters, limit=PAGE):
        named.update(name for job in page.get("jobs") or [] for name in job.get("exclude_calendars") or [])
        if calendars <= named:
            break
    return named

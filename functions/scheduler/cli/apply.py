"""``scheduler apply -f FILE|DIR``: make your calendars, alert rule sets and jobs what the files
say, each matched by kind and name (created, replaced with ``If-Match`` of the version read, and
with ``--prune --selector tag=T`` jobs deleted); ``scheduler export`` (``exporting``): them as
the files ``apply`` reads (the command's parser is here). ``apply`` of ``export``'s output changes
nothing (``0 changed``).

Two definitions are compared in the API's normal form (the model with its defaults, instants as
instants, secrets masked): a secret's value cannot be compared (the API answers ``***``), so an
object is sent again only when something else changed, or with ``--resend-secrets``. Each
stored object is compared with its document as its page of the listing arrives, and only the
step is kept. Calendars and rule sets are written before jobs, so a job may name a calendar the
same files create.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from scheduler.cli.api import client_command
from scheduler.cli.chaining import ChainNames, chained_after, chains_by_name, note_chains
from scheduler.cli.common import EXIT_API_ERROR, EXIT_OK, JOB_STATES, UsageError
from scheduler.cli.comparing import differences, masked_secret_problems, normal_form
from scheduler.cli.exporting import export
from scheduler.cli.manifests import Resolved, read_documents, resolve
from scheduler.cli.output import print_data
from scheduler.cli.reading import KINDS, READ_ONLY_FIELDS


@dataclass
class Step:
    """What apply does to one document's object: ``create``, ``update``, ``delete`` or nothing
    (``unchanged``). ``key`` is what the API knows it by (a job's id, else its name)."""

    action: str
    name: str
    key: str | None = None
    version: int | None = None
    definition: dict[str, Any] | None = None
    changes: list[str] = field(default_factory=list)
    kind: str = "job"
    source: str | None = None  # the document's place (jobs.yaml#2)
    refused: list[str] = field(default_factory=list)  # what the API's model says is wrong with it
    done: bool = False  # written
    resend_only: bool = False  # an update for --resend-secrets alone: nothing else differs

    @property
    def refusable(self) -> bool:
        """A create or update the API's model refuses (a dry run says so instead of the change)."""
        return bool(self.refused) and self.action in ("create", "update")

    @property
    def shown(self) -> str:
        """How a line names it: a job by its name, the others by kind and name."""
        return self.name if self.kind == "job" else f"{self.kind}/{self.name}"


def plan(
    resolved: list[Resolved],
    client: Any,
    *,
    resend_secrets: bool,
    chained: dict[str, set[str]] | None = None,
    strays: dict[str, list[str]] | None = None,
) -> list[Step]:
    """One step per document: create what is absent, update what differs. Each kind the files
    hold is listed once, and each stored object compared with its document as its page arrives:
    what is held is the documents, their steps and a page, not every stored object too (a
    listing of 50,000 jobs is some 500 MB of answers). A stored chain that names a job by its id
    is the same as the file's by that job's name (as ``export`` writes it). ``chained`` gets,
    for each job a chain names (by name or id), the jobs whose chains name it: the stored jobs
    no file defines, and the files' jobs. ``strays`` gets, by each tag of the files' jobs, the
    stored jobs of that tag that no file defines (a job renamed in the files, or taken out)."""
    wanted = {(item.document.kind, item.document.name): i for i, item in enumerate(resolved)}
    tags = {str(t) for item in resolved if item.document.kind == "job" for t in item.definition.get("tags") or ()}
    steps: list[Step | None] = [None] * len(resolved)
    names = ChainNames(client)
    for kind in KINDS:
        if not any(item.document.kind == kind for item in resolved):
            continue
        for page in _LISTINGS[kind](client):
            items = page.get(_PAGE_ITEMS[kind]) or []
            by_name = chains_by_name(names, items) if kind == "job" else {}
            for current in items:
                i = wanted.get((kind, current.get("name")))
                if i is not None:
                    steps[i] = _compared(resolved[i], current, resend_secrets, by_name.get(current.get("id")))
                elif kind == "job":
                    if chained is not None:
                        note_chains(chained, current)
                    if strays is not None:
                        for tag in set(current.get("tags") or ()) & tags:
                            strays.setdefault(tag, []).append(str(current.get("name")))
    if chained is not None:
        for item in resolved:
            if item.document.kind == "job":
                note_chains(chained, item.definition, item.document.name)
    return [step or _created(item) for item, step in zip(resolved, steps)]


def _created(item: Resolved) -> Step:
    """The step of a document whose object is absent: create it (a one-off that ran and deleted
    itself: skip it)."""
    kind, name = item.document.kind, item.document.name
    if item.unset_secrets:
        raise UsageError(
            f"{item.document.source}: a new {item.document.noun} needs its secrets: set {', '.join(item.unset_secrets)}"
        )
    if kind == "job" and _ran_and_deleted(item.definition):
        return Step("skip", name, changes=[_RAN_AND_DELETED], kind=kind, source=item.document.source)
    problems: list[str] = []
    normal_form(item.definition, kind, problems)
    step = Step("create", name, definition=item.definition, kind=kind, source=item.document.source)
    step.refused = problems + masked_secret_problems(item.definition, None)
    if kind == "job" and _run_at_passed(item.definition):
        step.changes = ["(a one-off whose run_at has passed: created, it runs at once)"]
    return step


def _compared(
    item: Resolved, current: dict[str, Any], resend_secrets: bool, by_name: dict[str, Any] | None = None
) -> Step:
    """The step of a document whose object is stored (``current``, as answered): update it when
    they differ. ``by_name``: the stored job with the ids of its chains as names, the same too."""
    kind, name = item.document.kind, item.document.name
    problems: list[str] = []
    kept = {k: v for k, v in current.items() if k not in READ_ONLY_FIELDS}
    wanted = normal_form(item.definition, kind, problems)
    changes = differences(wanted, normal_form(kept, kind))
    if changes and by_name is not None:
        renamed = {k: v for k, v in by_name.items() if k not in READ_ONLY_FIELDS}
        if not differences(wanted, normal_form(renamed, kind)):
            changes = []
    resend_only = resend_secrets and _has_secret(item.definition) and not changes
    if resend_only:
        changes = ["(secrets sent again: --resend-secrets)"]
    key = current["id"] if kind == "job" else name
    action = "update" if changes else "unchanged"
    if kind in ("job", "alert_rules") and changes:
        problems += masked_secret_problems(item.definition, current)
    step = Step(action, name, key, current.get("version"), item.definition, changes, kind)
    step.source, step.refused, step.resend_only = item.document.source, problems, resend_only
    return step


_RAN_AND_DELETED = (
    "(a one-off whose run_at has passed and that deletes itself once run: it ran and was deleted, "
    "and created again it would run again)"
)


def _ran_and_deleted(definition: dict[str, Any]) -> bool:
    """Whether a job absent from the API is a one-off that deleted itself after it ran
    (``after_completion: delete``, its ``run_at`` past): apply does not create it again."""
    return definition.get("after_completion") == "delete" and _run_at_passed(definition)


def _run_at_passed(definition: dict[str, Any]) -> bool:
    """Whether a definition is a one-off whose ``run_at`` has passed (by this machine's clock)."""
    run_at = definition.get("run_at")
    if not isinstance(run_at, str):
        return False
    try:
        when = datetime.fromisoformat(run_at.replace("Z", "+00:00"))
    except ValueError:
        return False
    return when.tzinfo is not None and when < datetime.now(UTC)


def _has_secret(definition: dict[str, Any]) -> bool:
    """Whether a resolved definition carries a secret's value (a job's target's, or an alert
    rule's), rather than only ``***``."""
    from scheduler.core.constants import SECRET_MASK
    from scheduler.secrets import map_secrets

    found: list[str] = []

    def collect(field: str, value: str, kind: str) -> str:
        found.append(value)
        return value

    targets = [definition.get("target")]
    alerts = definition.get("alerts")
    targets += [rule.get("target") for rule in alerts if isinstance(rule, dict)] if isinstance(alerts, list) else []
    for target in targets:
        if isinstance(target, dict):
            map_secrets(target, collect)
    return any(value != SECRET_MASK for value in found)


def prune_steps(client: Any, selector: str, keep: set[str]) -> list[Step]:
    """The jobs the selector picks (``tag=T``) whose names no file defines: to delete."""
    key, sep, value = selector.partition("=")
    if key.strip() != "tag" or not sep or not value.strip():
        raise UsageError(f"--selector takes tag=TAG, not {selector!r}")
    pages = client.iter_job_pages(tag=value.strip(), limit=200)
    # Each deleted at the version listed (If-Match): a job changed meanwhile (its tag taken off,
    # its definition edited) is not deleted unseen.
    return [
        Step("delete", job["name"], job["id"], job.get("version"))
        for page in pages
        for job in page.get("jobs") or []
        if job["name"] not in keep
    ]


def refuse_pruning_chained(pruned: list[Step], chained: dict[str, set[str]]) -> None:
    """Refuse (before anything is written) a prune that would delete a job another job's chain
    names, by name or id: the files' jobs and the stored jobs that stay."""
    deleted = {step.name for step in pruned}
    named = []
    for step in pruned:
        by = sorted((chained.get(step.name, set()) | chained.get(str(step.key).lower(), set())) - deleted)
        if by:
            named.append(f"{step.name} (named by {', '.join(by)})")
    if named:
        raise UsageError(
            f"--prune would delete jobs that chains name: {'; '.join(named)}: keep them in the files, "
            "or take them out of those chains first"
        )


# Where each kind's objects are listed, created and replaced (with If-Match of the version read).
_LISTINGS: dict[str, Callable[[Any], Iterator[dict[str, Any]]]] = {
    "job": lambda client: client.iter_job_pages(limit=200),
    "calendar": lambda client: client.iter_calendar_pages(limit=200),
    "alert_rules": lambda client: client.iter_alert_rule_pages(limit=200),
}
_PAGE_ITEMS = {"job": "jobs", "calendar": "calendars", "alert_rules": "alert_rules"}
_APPLY_ORDER = {"calendar": 0, "alert_rules": 1, "job": 2}


def _write(client: Any, step: Step) -> Any:
    """Carry out one step; the API's answer (None for a delete)."""
    definition = step.definition or {}
    if step.kind == "job":
        if step.action == "create":
            answer = client.create_job(definition)
            step.key = answer["id"]
            return answer
        if step.action == "update":
            return _replace_job(client, step, definition)
        return client.delete_job(step.key, if_match=step.version)
    if step.kind == "calendar":
        if step.action == "create":
            return client.create_calendar(definition)
        return client.replace_calendar(step.name, definition, if_match=step.version)
    # a rule set: a PUT with If-None-Match: * creates it (not one made meanwhile); with If-Match
    # it only replaces the version read
    version = step.version if step.action == "update" else None
    return client.put_alert_rule(
        step.name, definition.get("tag"), definition.get("alerts") or [], if_match=version, create_only=version is None
    )


def _replace_job(client: Any, step: Step, definition: dict[str, Any]) -> Any:
    """Replace a job at the version read. When it moved on since by replans only (a calendar it
    names replaced, by this apply or by someone else: a replan moves the job's plan and version,
    never its definition), it is replaced at the version they left; any other change since is
    the 412 it was."""
    from scheduler.client import ApiCallFailed

    try:
        return client.replace_job(step.key, definition, if_match=step.version)
    except ApiCallFailed as exc:
        version = _replanned_to(client, step) if exc.status == 412 else None
        if version is None:
            raise
    step.version = version
    return client.replace_job(step.key, definition, if_match=version)


# The change-log entries that leave a job's definition as it was: a replan (a calendar's), and
# runs and backfills made at a version a replan left.
_DEFINITION_KEPT = frozenset({"replan", "run", "backfill"})


def _replanned_to(client: Any, step: Step) -> int | None:
    """The job's version when every change since the version read is a replan (on the newest
    page of its change log), else None."""
    page = client.list_changes(step.key, limit=50)
    later = [c for c in page.get("changes") or [] if isinstance(c.get("version"), int) and c["version"] > step.version]
    if not later or (len(later) == len(page.get("changes") or []) and page.get("next_cursor")):
        return None  # none, or more than a page: not known to be replans only
    if any(c.get("action") not in _DEFINITION_KEPT for c in later) or all(c.get("action") != "replan" for c in later):
        return None
    return max(c["version"] for c in later)


def _kept_as_stored(step: Step, answer: Any) -> bool:
    """Whether a step that only sent its secrets again changed nothing: the API compared them
    with the stored ones and kept its version (local mode's, and a deployment's whose API has its
    KMS HMAC key)."""
    return step.resend_only and isinstance(answer, dict) and answer.get("version") == step.version


_VERBS = {"create": ("+", "created"), "update": ("~", "updated"), "delete": ("-", "deleted"), "skip": ("=", "skipped")}


def carry_out(client: Any, steps: list[Step], *, dry_run: bool, say: Callable[[str], None]) -> None:
    """Do each step (or, ``dry_run``, only say it), printing a line per change and its fields. A
    dry run says what the API would refuse, field by field (the model's own checks), instead of
    what it would change. A step the API refuses stops the run; what it says is led by the
    document at fault and the steps made before it."""
    for i, step in enumerate(steps):
        if step.action == "unchanged":
            continue
        mark, done = _VERBS[step.action]
        if dry_run and step.refusable:
            say(f"! {step.shown} (would be refused{': ' + step.source if step.source else ''})")
            for problem in step.refused:
                say(f"    {problem}")
            continue
        if not dry_run and step.action != "skip":
            try:
                answer = _write(client, step)
                step.done = True
            except Exception:
                made = sum(s.action not in ("unchanged", "skip") for s in steps[:i])
                where = f" ({step.source})" if step.source else ""
                print(
                    f"apply: {step.shown}{where} could not be {done}; {made} change(s) before it made", file=sys.stderr
                )
                raise
            if _kept_as_stored(step, answer):  # counted unchanged: the secrets sent were those stored
                step.action = "unchanged"
                continue
        say(f"{mark} {step.shown} ({'would be ' + done if dry_run and step.action != 'skip' else done})")
        for change in step.changes:
            say(f"    {change}")
        if dry_run and step.resend_only:  # the API alone can compare a secret with the stored one
            say("    (counted unchanged by the run itself where the API finds the secrets as stored)")


def summary(steps: list[Step], dry_run: bool) -> str:
    """``2 changed (1 created, 1 updated), 3 unchanged``."""
    # A dry run's refused steps are said as such, not as changes.
    counted = [s for s in steps if not (dry_run and s.refusable)]
    counts = {a: sum(s.action == a for s in counted) for a in ("create", "update", "delete", "skip", "unchanged")}
    changed = counts["create"] + counts["update"] + counts["delete"]
    parts = [f"{counts[a]} {_VERBS[a][1]}" for a in ("create", "update", "delete") if counts[a]]
    line = f"{changed} {'would change' if dry_run and changed else 'changed'}"
    line += f" ({', '.join(parts)})" if parts else ""
    line += f", {counts['unchanged']} unchanged" + (f", {counts['skip']} skipped" if counts["skip"] else "")
    refused = sum(s.refusable for s in steps)
    line += f", {refused} would be refused" if dry_run and refused else ""
    return line + (" (dry run: nothing was changed)" if dry_run else "")


@client_command
def apply(args: argparse.Namespace, client: Any) -> int:
    """``scheduler apply``."""
    if args.prune and not args.selector:
        raise UsageError("--prune needs --selector tag=TAG (the jobs it may delete)")
    if args.selector and not args.prune:
        raise UsageError("--selector picks the jobs --prune may delete: give --prune with it, or leave it out")
    documents = read_documents(args.files)
    if args.prune and not any(d.kind == "job" for d in documents):
        # An empty file (a failed export), or one of calendars only: it would delete them all.
        raise UsageError("--prune with no job document read would delete every job of the selector: give the job files")
    resolved = [resolve(document) for document in documents]
    for item in resolved:
        for secret in item.unset_secrets:
            print(
                f"{item.document.source}: {secret} is not set: sent as ***, which keeps a stored secret "
                "(a job or rule set this creates has none to keep: it is refused)",
                file=sys.stderr,
            )
    # Calendars and rule sets first: a job may name a calendar the same files create; and a job
    # after those its chains name (the API refuses a chain to a job that does not exist yet).
    resolved = chained_after(sorted(resolved, key=lambda item: _APPLY_ORDER[item.document.kind]))
    chained: dict[str, set[str]] = {}
    strays: dict[str, list[str]] = {}
    steps = plan(
        resolved,
        client,
        resend_secrets=args.resend_secrets,
        chained=chained if args.prune else None,
        strays=None if args.prune else strays,
    )
    for tag, names in sorted(strays.items()):  # a rename leaves the old job: said, never deleted unasked
        shown = ", ".join(sorted(names)[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        print(
            f"apply: stored jobs tagged {tag} that no file defines: {shown} (--prune --selector tag={tag} deletes them)",
            file=sys.stderr,
        )
    if args.prune:
        pruned = prune_steps(client, args.selector, {d.name for d in documents if d.kind == "job"})
        refuse_pruning_chained(pruned, chained)
        steps += pruned
    table = args.output == "table"
    refused = [step for step in steps if step.refusable]
    if refused and not args.dry_run:  # what the API's model refuses: said before anything is written
        for step in refused:
            print(f"apply: {step.shown}{f' ({step.source})' if step.source else ''} would be refused:", file=sys.stderr)
            for problem in step.refused:
                print(f"    {problem}", file=sys.stderr)
        print(f"apply: {len(refused)} document(s) the API would refuse: nothing was changed", file=sys.stderr)
        if not table:
            print_data(args.output, {**_result([], False), "refused": {step.shown: step.refused for step in refused}})
        return EXIT_API_ERROR
    try:
        carry_out(client, steps, dry_run=args.dry_run, say=print if table else (lambda line: None))
    except Exception:
        if not table:  # what was made before the refusal, in the form asked for
            print_data(args.output, _result(steps, args.dry_run, made_only=True))
        raise
    if table:
        print(summary(steps, args.dry_run))
    else:
        print_data(args.output, _result(steps, args.dry_run))
    return EXIT_API_ERROR if args.dry_run and refused else EXIT_OK


def _result(steps: list[Step], dry_run: bool, *, made_only: bool = False) -> dict[str, Any]:
    """``-o json``'s answer: the objects by what apply did to them (``made_only``: the steps made
    before one the API refused, and that one as ``failed``)."""
    result: dict[str, Any] = {"dry_run": dry_run}
    if made_only:
        failed = next((s for s in steps if s.action in ("create", "update", "delete") and not s.done), None)
        steps = steps[: steps.index(failed)] if failed else steps
        result["failed"] = failed.shown if failed else None
    listed = [s for s in steps if not (dry_run and s.refusable)]
    for action in ("create", "update", "delete", "skip", "unchanged"):
        result[_VERBS[action][1] if action in _VERBS else action] = [s.shown for s in listed if s.action == action]
    if dry_run:
        result["refused"] = {s.shown: s.refused for s in steps if s.refusable}
    return result


def add_parsers(sub: Any, subparser: Callable[..., argparse.ArgumentParser]) -> None:
    """``scheduler apply`` and ``scheduler export``."""
    parser = subparser(
        sub, "apply", "make your jobs, calendars and alert rule sets what job files say, matched by name"
    )
    parser.add_argument(
        "-f",
        "--file",
        dest="files",
        action="append",
        required=True,
        metavar="FILE|DIR",
        help="YAML (documents separated by ---) or JSON; a folder's .yaml/.yml/.json files; - for stdin (repeatable)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print what would change, change nothing")
    parser.add_argument(
        "--prune", action="store_true", help="delete the jobs --selector picks that no file defines any more"
    )
    parser.add_argument("--selector", metavar="tag=TAG", help="--prune: the jobs it may delete (those with this tag)")
    parser.add_argument(
        "--resend-secrets",
        action="store_true",
        help="send the jobs whose secret references are set even when nothing else changed (a rotated secret)",
    )
    parser.set_defaults(func=apply, flag_hints=False)  # a file's fields, not the flags of jobs create

    parser = subparser(
        sub,
        "export",
        "print your calendars, alert rule sets and jobs as job files (a YAML stream) that apply takes back",
    )
    parser.add_argument("--tag", help="only jobs with this tag (and the rule sets of this tag)")
    parser.add_argument("--state", choices=JOB_STATES, help="only jobs in this state")
    parser.add_argument("--name-prefix", metavar="PREFIX", help="only jobs whose name starts so")
    parser.add_argument(
        "--kind",
        dest="kinds",
        action="append",
        choices=tuple(KINDS),
        help="only this kind of document (repeatable; default all: calendar, alert_rules, job). With a job "
        "filter, the calendars are those the jobs name",
    )
    parser.set_defaults(func=export)

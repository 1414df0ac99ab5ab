"""``scheduler apply -f FILE|DIR``: make your jobs what the files say, matched by name (created,
replaced, and with ``--prune --selector tag=T`` deleted); ``scheduler export``: your jobs as the
files ``apply`` reads. ``apply`` of ``export``'s output changes nothing (``0 changed``).

Two definitions are compared in the API's normal form (the job model with its defaults, instants
as instants, secrets masked): a secret's value cannot be compared (the API answers ``***``), so a
job is sent again only when something else changed, or with ``--resend-secrets``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from scheduler.cli.api import client_command
from scheduler.cli.common import EXIT_OK, JOB_STATES, UsageError
from scheduler.cli.definitions import READ_ONLY_FIELDS
from scheduler.cli.manifests import Resolved, exported, read_documents, resolve, yaml_stream
from scheduler.cli.output import print_data


@dataclass
class Step:
    """What apply does to one job: ``create``, ``update``, ``delete`` or nothing (``unchanged``)."""

    action: str
    name: str
    job_id: str | None = None
    version: int | None = None
    definition: dict[str, Any] | None = None
    changes: list[str] = field(default_factory=list)


def normal_form(definition: dict[str, Any]) -> dict[str, Any] | None:
    """The definition as the API would store it (defaults filled in, secrets masked); None when
    the model refuses it (the API will say why)."""
    from pydantic import ValidationError

    from scheduler.schema.models import JobSpec
    from scheduler.secrets import mask_target_secrets

    masked = dict(definition)
    if isinstance(masked.get("target"), dict):
        masked["target"] = mask_target_secrets(masked["target"])
    try:
        return JobSpec.model_validate(masked).model_dump(mode="python")
    except (ValidationError, ValueError, TypeError):
        return None


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flat(item, f"{prefix}.{key}" if prefix else str(key)))
        return out or {prefix: {}}
    return {prefix: value}


def _shown(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    return json.dumps(value, ensure_ascii=False, default=str)


def differences(wanted: dict[str, Any] | None, stored: dict[str, Any] | None) -> list[str]:
    """``field: old -> new`` for each field that differs (every field when either side is unknown)."""
    if wanted is None or stored is None:
        return ["(the definition is checked by the API)"]
    new, old = _flat(wanted), _flat(stored)
    return [
        f"{key}: {_shown(old.get(key))} -> {_shown(new.get(key))}"
        for key in sorted(set(new) | set(old))
        if new.get(key) != old.get(key)
    ]


def plan(resolved: list[Resolved], stored: dict[str, dict[str, Any]], *, resend_secrets: bool) -> list[Step]:
    """One step per document: create what is absent, update what differs."""
    steps = []
    for item in resolved:
        job = stored.get(item.document.name)
        if job is None:
            if item.unset_secrets:
                raise UsageError(
                    f"{item.document.source}: a new job needs its secrets: set {', '.join(item.unset_secrets)}"
                )
            steps.append(Step("create", item.document.name, definition=item.definition))
            continue
        current = {k: v for k, v in job.items() if k not in READ_ONLY_FIELDS}
        changes = differences(normal_form(item.definition), normal_form(current))
        sent_secrets = resend_secrets and _has_secret(item.definition)
        if sent_secrets and not changes:
            changes = ["(secrets sent again: --resend-secrets)"]
        action = "update" if changes else "unchanged"
        steps.append(Step(action, item.document.name, job["id"], job.get("version"), item.definition, changes))
    return steps


def _has_secret(definition: dict[str, Any]) -> bool:
    from scheduler.core.constants import SECRET_MASK
    from scheduler.secrets import map_secrets

    found: list[str] = []
    target = definition.get("target")
    if isinstance(target, dict):

        def collect(field: str, value: str, kind: str) -> str:
            found.append(value)
            return value

        map_secrets(target, collect)
    return any(value != SECRET_MASK for value in found)


def prune_steps(client: Any, selector: str, keep: set[str]) -> list[Step]:
    """The jobs the selector picks (``tag=T``) whose names no file defines: to delete."""
    key, sep, value = selector.partition("=")
    if key.strip() != "tag" or not sep or not value.strip():
        raise UsageError(f"--selector takes tag=TAG, not {selector!r}")
    selected = [job for page in client.iter_job_pages(tag=value.strip(), limit=200) for job in page.get("jobs") or []]
    return [Step("delete", job["name"], job["id"]) for job in selected if job["name"] not in keep]


_VERBS = {"create": ("+", "created"), "update": ("~", "updated"), "delete": ("-", "deleted")}


def carry_out(client: Any, steps: list[Step], *, dry_run: bool, say: Callable[[str], None]) -> None:
    """Do each step (or, ``dry_run``, only say it), printing a line per change and its fields."""
    for step in steps:
        if step.action == "unchanged":
            continue
        mark, done = _VERBS[step.action]
        if not dry_run:
            if step.action == "create":
                step.job_id = client.create_job(step.definition)["id"]
            elif step.action == "update":
                client.replace_job(step.job_id, step.definition, if_match=step.version)
            else:
                client.delete_job(step.job_id)
        say(f"{mark} {step.name} ({'would be ' + done if dry_run else done})")
        for change in step.changes:
            say(f"    {change}")


def summary(steps: list[Step], dry_run: bool) -> str:
    """``2 changed (1 created, 1 updated), 3 unchanged``."""
    counts = {action: sum(s.action == action for s in steps) for action in ("create", "update", "delete", "unchanged")}
    changed = counts["create"] + counts["update"] + counts["delete"]
    parts = [f"{counts[a]} {_VERBS[a][1]}" for a in ("create", "update", "delete") if counts[a]]
    line = f"{changed} {'would change' if dry_run and changed else 'changed'}"
    line += f" ({', '.join(parts)})" if parts else ""
    return line + f", {counts['unchanged']} unchanged" + (" (dry run: nothing was changed)" if dry_run else "")


@client_command
def apply(args: argparse.Namespace, client: Any) -> int:
    """``scheduler apply``."""
    if args.prune and not args.selector:
        raise UsageError("--prune needs --selector tag=TAG (the jobs it may delete)")
    documents = read_documents(args.files)
    resolved = [resolve(document) for document in documents]
    for item in resolved:
        for secret in item.unset_secrets:
            print(f"{item.document.source}: {secret} is not set: the stored secret is kept", file=sys.stderr)
    stored = {job["name"]: job for page in client.iter_job_pages(limit=200) for job in page.get("jobs") or []}
    steps = plan(resolved, stored, resend_secrets=args.resend_secrets)
    if args.prune:
        steps += prune_steps(client, args.selector, {d.name for d in documents})
    table = args.output == "table"
    carry_out(client, steps, dry_run=args.dry_run, say=print if table else (lambda line: None))
    if table:
        print(summary(steps, args.dry_run))
    else:
        result: dict[str, Any] = {"dry_run": args.dry_run}
        for action in ("create", "update", "delete", "unchanged"):
            result[_VERBS[action][1] if action in _VERBS else action] = [s.name for s in steps if s.action == action]
        print_data(args.output, result)
    return EXIT_OK


@client_command
def export(args: argparse.Namespace, client: Any) -> int:
    """``scheduler export``: the jobs as a YAML stream (JSON with ``-o json``)."""
    filters = {"tag": args.tag, "state": args.state, "name_prefix": args.name_prefix, "limit": 200}
    jobs = [job for page in client.iter_job_pages(**filters) for job in page.get("jobs") or []]
    documents, references = [], []
    for job in jobs:
        document, names = exported(job)
        documents.append(document)
        references += names
    if args.output == "json":
        print(json.dumps(documents, indent=2, ensure_ascii=False))
    else:
        sys.stdout.write("".join(yaml_stream(iter(documents))))
    if references:
        print(
            f"export: secrets written as references: {', '.join(references)} (unset, apply keeps the stored ones)",
            file=sys.stderr,
        )
    return EXIT_OK


def add_parsers(sub: Any, subparser: Callable[..., argparse.ArgumentParser]) -> None:
    """``scheduler apply`` and ``scheduler export``."""
    parser = subparser(sub, "apply", "make your jobs what job files say, matched by name")
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
    parser.set_defaults(func=apply)

    parser = subparser(sub, "export", "print your jobs as job files (a YAML stream) that apply takes back")
    parser.add_argument("--tag", help="only jobs with this tag")
    parser.add_argument("--state", choices=JOB_STATES, help="only jobs in this state")
    parser.add_argument("--name-prefix", metavar="PREFIX", help="only jobs whose name starts so")
    parser.set_defaults(func=export)

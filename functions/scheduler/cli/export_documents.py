"""Documents of ``scheduler export``: a job, calendar or alert rule set answer as the document
``apply`` takes back: its definition without what the scheduler sets, its fields in order, its
own ``${`` escaped, each secret (``***`` in the answer) a ``${NAME}`` reference."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import Any

from scheduler.cli.manifests import reference_name
from scheduler.cli.reading import READ_ONLY_FIELDS, yaml_text
from scheduler.secrets import map_secrets

# The order of a job's fields in an exported document.
FIELD_ORDER = (
    "name",
    "description",
    "tags",
    "schedule",
    "schedules",
    "spread",
    "run_at",
    "timezone",
    "start_at",
    "end_at",
    "missed_runs",
    "after_completion",
    "exclude_calendars",
    "on_excluded",
    "on_success",
    "on_failure",
    "on_complete",
    "retry",
    "target",
)


def _escaped(value: Any) -> Any:
    """``value`` with every ``${`` of its strings written ``$${`` (a literal, which apply reads
    back as it was): a job's own text is never taken for a reference."""
    if isinstance(value, dict):
        return {k: _escaped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_escaped(v) for v in value]
    return value.replace("${", "$${") if isinstance(value, str) else value


def exported(job: dict[str, Any], taken: Collection[str] = ()) -> tuple[dict[str, Any], list[str]]:
    """A job answer as a document of a job file: its definition in ``FIELD_ORDER``, nothing
    empty, its own ``${`` escaped, each secret (``***`` in the answer) a ``${NAME}`` reference
    (unique beside ``taken``, the names already used by the export: a set, for an export of
    many, as each name is looked up in it); and the names used."""
    names: list[str] = []
    definition = _escaped({k: v for k, v in job.items() if k not in READ_ONLY_FIELDS and v is not None})
    target = definition.get("target")
    if isinstance(target, dict):
        masked = _referenced(target, str(job.get("name")), "", "job", (names, taken))
        definition["target"] = {"type": masked.get("type"), **masked}
    if isinstance(definition.get("alerts"), list):
        definition["alerts"] = _referenced_alerts(definition["alerts"], str(job.get("name")), "job", (names, taken))
    definition = _clean(definition)
    ordered = {key: definition[key] for key in FIELD_ORDER if key in definition}
    ordered.update({k: v for k, v in definition.items() if k not in ordered})
    return ordered, names


def exported_calendar(calendar: dict[str, Any]) -> dict[str, Any]:
    """A calendar answer as a document (``kind: calendar``): its definition, nothing empty."""
    kept = {k: v for k, v in calendar.items() if k not in READ_ONLY_FIELDS}
    return {"kind": "calendar", **_clean(_escaped(kept))}


def exported_alert_rules(rule_set: dict[str, Any], taken: Collection[str] = ()) -> tuple[dict[str, Any], list[str]]:
    """An alert rule set answer as a document (``kind: alert_rules``), its own ``${`` escaped,
    each secret a reference (unique beside ``taken``); and the names used."""
    names: list[str] = []
    alerts = _escaped(rule_set.get("alerts") or [])
    alerts = _referenced_alerts(alerts, str(rule_set.get("name")), "alert_rules", (names, taken))
    tag = _escaped(rule_set.get("tag"))
    document = {"kind": "alert_rules", "name": rule_set.get("name"), "tag": tag, "alerts": alerts}
    return _clean(document), names


# The names a document's references take (appended to), and those taken before it.
_Names = tuple[list[str], Collection[str]]


def _referenced(target: dict[str, Any], owner_name: str, prefix: str, kind: str, names: _Names) -> dict[str, Any]:
    """A target as answered (secrets ``***``) with each secret a ``${NAME}`` reference."""
    new, taken = names

    def reference(field: str, value: str, secret_kind: str) -> str:
        name = base = reference_name(owner_name, prefix + field, kind)
        count = 1
        while name in new or name in taken:  # two jobs whose names read alike ("svc-a", "Svc.A"): one variable each
            count += 1
            name = f"{base}_{count}"
        new.append(name)
        return f"${{{name}}}"

    return map_secrets(target, reference) or {}


def _referenced_alerts(alerts: list[Any], owner_name: str, kind: str, names: _Names) -> list[Any]:
    return [
        {**rule, "target": _referenced(rule["target"], owner_name, f"alerts.{i}.", kind, names)}
        if isinstance(rule, dict) and isinstance(rule.get("target"), dict)
        else rule
        for i, rule in enumerate(alerts)
    ]


def _clean(value: Any) -> Any:
    """JSON without its empty parts: None values, empty objects and (but for a list's items) empty
    lists left out, at every depth (each is the field's default)."""
    if isinstance(value, dict):
        cleaned = {k: _clean(v) for k, v in value.items()}
        return {k: v for k, v in cleaned.items() if v is not None and v != {} and v != []}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def yaml_stream(documents: Iterator[dict[str, Any]]) -> Iterator[str]:
    """YAML documents separated by ``---`` (each block style, keys in their order)."""
    for document in documents:
        yield "---\n" + yaml_text(document)

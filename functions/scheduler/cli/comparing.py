"""Comparing a file's definition with the stored one, as ``scheduler apply`` does: both in the
API's normal form (the model with its defaults filled in, instants as instants, secrets masked),
field by field; and what the model says is wrong with a definition, as the API's 400 would."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from scheduler.secrets import mask_target_secrets


def normal_form(
    definition: dict[str, Any], kind: str = "job", problems: list[str] | None = None
) -> dict[str, Any] | None:
    """The definition as the API would store it (defaults filled in, secrets masked, empty lists
    as absent); None when the model refuses it (the API will say why; ``problems`` gets the
    fields at fault, as the API's 400 names them)."""
    from pydantic import BaseModel, ValidationError

    from scheduler.schema.alert_rules import AlertRuleSetSpec
    from scheduler.schema.calendars import CalendarDefinition
    from scheduler.schema.details import validation_details
    from scheduler.schema.models import JobSpec

    masked = {k: v for k, v in definition.items() if kind == "job" or k != "name"}
    if isinstance(masked.get("target"), dict):
        masked["target"] = mask_target_secrets(masked["target"])
    if isinstance(masked.get("alerts"), list):
        masked["alerts"] = [
            {**rule, "target": mask_target_secrets(rule["target"])}
            if isinstance(rule, dict) and isinstance(rule.get("target"), dict)
            else rule
            for rule in masked["alerts"]
        ]
    models: dict[str, type[BaseModel]] = {
        "job": JobSpec,
        "calendar": CalendarDefinition,
        "alert_rules": AlertRuleSetSpec,
    }
    model = models[kind]
    queue_url = _emulator_queue_url(masked) if kind == "job" else None
    if queue_url is not None:  # checked by the server, against the endpoint it is configured with
        masked["target"] = {**masked["target"], "queue_url": _STAND_IN_QUEUE_URL}
    try:
        dumped = model.model_validate(masked).model_dump(mode="python")
        if queue_url is not None:
            dumped["target"]["queue_url"] = queue_url
        if problems is not None and masked != definition:
            # The secrets' own values too (a line break, a header's non-Latin-1 character), as
            # the API checks them; its messages name the character, never the value.
            unmasked = {k: v for k, v in definition.items() if kind == "job" or k != "name"}
            if queue_url is not None:
                unmasked["target"] = {**unmasked["target"], "queue_url": _STAND_IN_QUEUE_URL}
            model.model_validate(unmasked)
    except ValidationError as exc:
        if problems is not None:
            problems.extend(
                f"{d['field']}: {d['message']}" if d.get("field") else d["message"] for d in validation_details(exc)
            )
        return None
    except (ValueError, TypeError) as exc:
        if problems is not None:
            problems.append(str(exc))
        return None
    if kind == "job":
        return dumped
    return {k: v for k, v in dumped.items() if k != "name" and v is not None and v != []}


def masked_secret_problems(definition: dict[str, Any], stored: dict[str, Any] | None) -> list[str]:
    """What the API answers of a ``"***"`` it has nothing to keep for: one anywhere in a definition
    to create (``stored`` None: a job's target, an alert rule's), or, over a stored job or rule set
    (as answered), one in its target whose url moves to another scheme, host or port (a secret
    never follows it there), or in an alert rule that matches no stored rule holding that secret
    (matched as the API matches them: ``stored_rule``)."""
    from scheduler.core.errors import MaskedSecretError
    from scheduler.secrets import keep_masked_secrets, stored_rule

    targets: list[tuple[str, Any, Any]] = [("", definition.get("target"), (stored or {}).get("target"))]
    alerts = definition.get("alerts")
    before = [rule for rule in (stored or {}).get("alerts") or [] if isinstance(rule, dict)]
    for i, rule in enumerate(alerts if isinstance(alerts, list) else []):
        if isinstance(rule, dict):
            match = stored_rule(rule, i, before) if stored is not None else None
            targets.append((f"alerts.{i}.", rule.get("target"), match.get("target") if match else None))
    problems = []
    for prefix, target, was in targets:
        if not isinstance(target, dict) or not target.get("type"):
            continue
        try:
            keep_masked_secrets(target, was if isinstance(was, dict) else None)
        except MaskedSecretError as exc:
            problems.append(f"{prefix}{exc.field}: {exc.message}")
    return problems


# An SQS queue URL that is not AWS's (an emulator's: LocalStack, moto) is valid only where the
# server is configured with that endpoint, which the CLI cannot know: the model checks the rest
# of the definition with this one in its place.
_STAND_IN_QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/000000000000/stand-in"


def _emulator_queue_url(definition: dict[str, Any]) -> str | None:
    """A job's SQS queue URL when it is not one of AWS's own shapes, else None."""
    from scheduler.core.aws_arns import queue_url_region

    target = definition.get("target")
    url = target.get("queue_url") if isinstance(target, dict) and target.get("type") == "sqs" else None
    return url if isinstance(url, str) and queue_url_region(url, endpoint="") is None else None


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """Each leaf by its dotted path; a list of objects (alert rules) item by item, by index, so
    that a change says which rule's field moved; other lists (tags, dates) whole."""
    items: Any = None
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        items = enumerate(value)
    if items is not None:
        out: dict[str, Any] = {}
        for key, item in items:
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
    # A list emptied (every alert rule taken away): one line for it, not a line a field of each
    # item ("alerts.0.on: ... -> null" reads as one field cleared).
    emptied = {key for key in new if new[key] in ([], {}) and key not in old and _has_items(key, old)}
    lines = [(key, f"{key}: {_shown(_at(stored, key))} -> {_shown(new[key])}") for key in emptied]
    for key in set(new) | set(old):
        inside_emptied = any(key.startswith(gone + ".") for gone in emptied)
        # A list filled (the first rule): its items' lines say it; "[] -> null" would read as
        # the field taken away.
        filled = key in old and key not in new and old[key] in ([], {}) and _has_items(key, new)
        if key not in emptied and not inside_emptied and not filled and new.get(key) != old.get(key):
            lines.append((key, f"{key}: {_shown(old.get(key))} -> {_shown(new.get(key))}"))
    return [line for _, line in sorted(lines)]


def _has_items(key: str, flat: dict[str, Any]) -> bool:
    return any(other.startswith(key + ".") for other in flat)


def _at(value: Any, key: str) -> Any:
    """The value at a dotted path of ``_flat`` (list items by index)."""
    for part in key.split("."):
        value = value[int(part)] if isinstance(value, list) else (value or {}).get(part)
    return value

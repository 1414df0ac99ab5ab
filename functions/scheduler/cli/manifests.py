"""Job files for ``scheduler apply`` and ``scheduler export``: YAML streams (documents separated
by ``---``) or JSON, read from files and folders; ``${NAME}`` references to the environment;
secrets only as references, never as values.

A document is a job, or, with ``kind: calendar`` or ``kind: alert_rules``, a calendar or an alert
rule set (the API's objects, with their ``name``); ``kind: job`` may be written, and is the default.

A secret's place (``target.auth.password``, ``token``, a header auth's ``value``, the password of
an AMQP URL, a credential header, in a job's target and in every alert rule's target) holds
``${NAME}`` (after an auth scheme too: ``Bearer ${NAME}``), or ``***`` (keep the stored secret).
A literal secret is refused: files are committed and shared, and the API never answers a secret
back, so an ``export`` could not write one anyway.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scheduler.cli.common import UsageError
from scheduler.cli.reading import READ_ONLY_FIELDS, load_json, yaml_error, yaml_loader, yaml_text
from scheduler.cli.streaming import INCOMPLETE
from scheduler.core.constants import SECRET_MASK
from scheduler.secrets import map_secrets

_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# A secret's place holds a reference, alone or after an auth scheme (``Bearer ${API_TOKEN}``).
_SECRET_REFERENCE = re.compile(r"^([A-Za-z][A-Za-z0-9._-]* )?\$\{([A-Za-z_][A-Za-z0-9_]*)\}\Z")
_SUFFIXES = (".yaml", ".yml", ".json")
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


# The kinds of document, each with the noun its messages use.
KINDS = {"job": "job", "calendar": "calendar", "alert_rules": "alert rule set"}


@dataclass
class Document:
    """One document of the files: its kind, its definition as written (without ``kind``) and
    where it was read (``jobs.yaml#2``)."""

    source: str
    definition: dict[str, Any]
    kind: str = "job"

    @property
    def name(self) -> str:
        """The name, its references expanded (``${ENV}-nightly``): what the API knows it by, so
        what apply matches, prunes and chains by."""
        return str(_expand(self.definition.get("name"), self.source, "name"))

    @property
    def noun(self) -> str:
        """``job``, ``calendar`` or ``alert rule set``."""
        return KINDS[self.kind]


def _files(path: str) -> list[Path]:
    where = Path(path)
    if where.is_dir():
        # Not under a folder or file whose name starts with a dot (.github/workflows/ci.yml is
        # not a job file).
        found = sorted(
            p
            for p in where.rglob("*")
            if p.is_file()
            and p.suffix.lower() in _SUFFIXES
            and not any(part.startswith(".") for part in p.relative_to(where).parts)
        )
        if not found:
            raise UsageError(f"{path}: no .yaml, .yml or .json file in this folder")
        return found
    if not where.exists():
        raise UsageError(f"cannot read {path}: no such file or folder")
    return [where]


def _parse(text: str, source: str) -> list[Any]:
    """The documents of a file: JSON for a ``.json`` file, YAML for a ``.yaml`` or ``.yml`` one
    (flow style included: ``{name: x}``), and by its first character from standard input."""
    if re.search(f"^{re.escape(INCOMPLETE)}\\b", text, re.MULTILINE):  # (a YAML or JSON error otherwise)
        raise UsageError(
            f"{source}: the output of an export that failed midway (its last line is {INCOMPLETE}), not a "
            "whole one: export again"
        )
    suffix = source.lower().rsplit(".", 1)[-1]
    json_like = text.lstrip("\ufeff \t\r\n").startswith(("{", "["))
    if suffix == "json" or (suffix not in ("yaml", "yml") and json_like):
        data = load_json(text, source)
        return data if isinstance(data, list) else [data]
    try:
        import yaml
    except ImportError:
        raise UsageError(f"{source}: YAML needs PyYAML (pip install pyyaml); JSON works without it") from None
    try:
        return list(yaml.load_all(text, Loader=yaml_loader()))
    except yaml.YAMLError as exc:
        raise yaml_error(source, text, exc) from None


_RULE_SET_FIELDS = {"name", "tag", "alerts"}


# Lists of names or expressions, where YAML 1.1 reads a bare on, off, yes or no as a boolean.
_LISTS_OF_TEXT = ("tags", "schedules", "exclude_calendars", "on_success", "on_failure", "on_complete")


def _refuse_yaml_booleans(where: str, data: dict[str, Any]) -> None:
    """A boolean in a list of text (``tags: [on, yes]``): YAML read a bare word as true or false,
    which the API would refuse as ``must be a string`` without saying why."""
    for field in _LISTS_OF_TEXT:
        items = data.get(field)
        for i, item in enumerate(items if isinstance(items, list) else []):
            if isinstance(item, bool):
                raise UsageError(
                    f"{where}: {field}.{i}: YAML reads a bare on, off, yes, no, true or false as a boolean: "
                    'quote it ("on")'
                )


def read_documents(paths: list[str]) -> list[Document]:
    """Every document of the files and folders (``-`` is standard input), in order; names
    unique within a kind."""
    documents: list[Document] = []
    for path in paths:
        sources = [("<stdin>", sys.stdin.read())] if path == "-" else [(str(p), _read(p)) for p in _files(path)]
        for source, text in sources:
            for number, data in enumerate(_parse(text, source), 1):
                if data is None:  # an empty document (a trailing ---)
                    continue
                where = f"{source}#{number}"
                if not isinstance(data, dict):
                    raise UsageError(f"{where}: a job must be a mapping, not {type(data).__name__}")
                kind = data.get("kind", "job")
                if not isinstance(kind, str) or kind not in KINDS:
                    raise UsageError(f"{where}: kind must be one of {', '.join(KINDS)}, not {kind!r}")
                if data.get("name") is not None and not isinstance(data["name"], str):
                    raise UsageError(f'{where}: name: must be a string (quote it: name: "{data["name"]}")')
                if not isinstance(data.get("name"), str) or not data["name"]:
                    raise UsageError(f"{where}: a {KINDS[kind]} needs its name (apply matches by name)")
                _refuse_yaml_booleans(where, data)
                definition = {k: v for k, v in data.items() if k != "kind" and k not in READ_ONLY_FIELDS}
                unknown = sorted(set(definition) - _RULE_SET_FIELDS) if kind == "alert_rules" else []
                if unknown:  # (a job's and a calendar's unknown fields are the API's 400)
                    raise UsageError(f"{where}: {unknown[0]}: is not a field of an alert rule set (name, tag, alerts)")
                documents.append(Document(where, definition, kind))
    seen: dict[tuple[str, str], str] = {}
    for document in documents:
        key = (document.kind, document.name)
        if key in seen:
            raise UsageError(f"{document.source}: the {document.noun} {document.name!r} is also defined in {seen[key]}")
        seen[key] = document.source
    return documents


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text") from None


def _expand(value: Any, where: str, field: str) -> Any:
    """``${NAME}`` in every string replaced by the environment's value (``$${`` is a literal ``${``)."""
    if isinstance(value, dict):
        return {k: _expand(v, where, f"{field}.{k}" if field else str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, where, f"{field}.{i}") for i, v in enumerate(value)]
    if not isinstance(value, str) or "${" not in value:
        return value
    protected = value.replace("$${", "\0")

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise UsageError(f"{where}: {field}: ${{{name}}} is not set in the environment")
        return os.environ[name]

    return _REFERENCE.sub(one, protected).replace("\0", "${")


@dataclass
class Resolved:
    """A document ready to send: its definition with references expanded, and the secrets whose
    reference is unset (sent as ``***``: the stored secret is kept)."""

    document: Document
    definition: dict[str, Any]
    unset_secrets: list[str]


def resolve(document: Document) -> Resolved:
    """Check the secrets of a document (references only) and expand every reference."""
    definition = dict(document.definition)
    unset: list[str] = []
    target = definition.get("target")
    if document.kind == "job" and isinstance(target, dict):
        definition["target"] = _typed(target)
    expanded = _expand({k: v for k, v in definition.items() if k not in ("target", "alerts")}, document.source, "")
    if "target" in definition:
        expanded["target"] = _resolved_target(document, definition["target"], "", unset)
    if "alerts" in definition:
        alerts = definition["alerts"]
        expanded["alerts"] = (
            [_resolved_rule(document, rule, f"alerts.{i}", unset) for i, rule in enumerate(alerts)]
            if isinstance(alerts, list)
            else alerts  # not a list: the API says what is wrong with it
        )
    return Resolved(document, {k: expanded[k] for k in definition}, unset)


def _typed(target: dict[str, Any]) -> dict[str, Any]:
    """A target (a job's, an alert rule's) with its type, as ``jobs create -f`` takes one
    without: http, or amqp by its fields."""
    if target.get("type"):
        return target
    return {**target, "type": "amqp" if {"exchange", "routing_key"} & set(target) else "http"}


def _resolved_rule(document: Document, rule: Any, field: str, unset: list[str]) -> Any:
    """An alert rule with its target's secrets resolved and its references expanded."""
    if not isinstance(rule, dict):
        return rule
    resolved = _expand({k: v for k, v in rule.items() if k != "target"}, document.source, field)
    if "target" in rule:
        target = _typed(rule["target"]) if isinstance(rule["target"], dict) else rule["target"]
        resolved["target"] = _resolved_target(document, target, f"{field}.", unset)
    return {k: resolved[k] for k in rule}


def _secret_of_reference(value: str) -> tuple[str | None, str] | None:
    """A secret written as a reference (``${NAME}``, ``Bearer ${NAME}``): its value from the
    environment, the scheme kept (None when the variable is not set), and the variable's name.
    None when the value is not a reference."""
    reference = _SECRET_REFERENCE.match(value)
    if reference is None:
        return None
    scheme, name = reference.group(1) or "", reference.group(2)
    return (scheme + os.environ[name] if name in os.environ else None), name


def _resolved_target(document: Document, target: Any, prefix: str, unset: list[str]) -> Any:
    """A target (a job's, or an alert rule's: ``prefix`` ``alerts.N.``) with each secret's
    reference replaced by the environment's value (``***``, keeping the stored secret, when it
    is unset: noted in ``unset``), then the references of its other fields expanded."""
    if not isinstance(target, dict):
        return _expand(target, document.source, f"{prefix}target")

    def secret(field: str, value: str, kind: str) -> str:
        field = prefix + field
        if value == SECRET_MASK or (kind == "url_password" and value in ("***", "%2A%2A%2A")):
            return value
        referenced = _secret_of_reference(value)
        if referenced is None:
            raise UsageError(
                f"{document.source}: {field}: a literal secret in a job file; write a reference such as "
                f"${{{reference_name(document.name, field, document.kind)}}} and set it in the environment"
            )
        secret_value, name = referenced
        if secret_value is None:
            unset.append(f"{field} (${{{name}}})")
            return SECRET_MASK
        return secret_value

    return _expand_outside_secrets(map_secrets(target, secret), document.source, f"{prefix}target")


def with_secret_references(definition: dict[str, Any], source: str) -> dict[str, Any]:
    """A definition of ``jobs create -f``, ``jobs update -f`` or ``alert-rules apply -f`` with
    each secret written as a reference (``${NAME}``, ``Bearer ${NAME}``) replaced by the
    environment's value, as apply does (one that is not set is refused, naming it); the rest as
    written (a literal secret too: these commands do not read committed files)."""

    def targets(prefix: str) -> Callable[[str, str, str], str]:
        def one(field: str, value: str, kind: str) -> str:
            referenced = _secret_of_reference(value)
            if referenced is None:
                return value
            secret_value, name = referenced
            if secret_value is None:
                raise UsageError(f"{source}: {prefix}{field}: ${{{name}}} is not set in the environment")
            return secret_value

        return one

    out = dict(definition)
    if isinstance(out.get("target"), dict):
        # Its secret places are those of its type (a patch's target may not say it: it keeps none)
        mapped = map_secrets(_typed(out["target"]), targets(""))
        out["target"] = mapped if "type" in out["target"] else {k: v for k, v in mapped.items() if k != "type"}
    if isinstance(out.get("alerts"), list):
        out["alerts"] = [
            {**rule, "target": map_secrets(rule["target"], targets(f"alerts.{i}."))}
            if isinstance(rule, dict) and isinstance(rule.get("target"), dict)
            else rule
            for i, rule in enumerate(out["alerts"])
        ]
    return out


def _expand_outside_secrets(target: dict[str, Any], where: str, field: str) -> dict[str, Any]:
    """References of a target's other fields (its secrets were resolved already)."""
    secrets: dict[str, str] = {}

    def hold(field: str, value: str, kind: str) -> str:
        secrets[field] = value
        return f"\0SECRET{len(secrets)}\0"

    held = map_secrets(target, hold)
    expanded = _expand(held, where, field)

    def put_back(field: str, value: str, kind: str) -> str:
        return secrets[field]

    return map_secrets(expanded, put_back)


_ALERT_FIELD = re.compile(r"^alerts\.(\d+)\.(target\..*)\Z")


def _env_word(text: str) -> str:
    """``text`` as a part of an environment variable's name: ``svc-a.x`` -> ``SVC_A_X``."""
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").upper()


def reference_name(name: str, field: str, kind: str = "job") -> str:
    """The environment variable an export names for a secret: ``NIGHTLY_REPORT_TOKEN`` for a
    job's target, ``NIGHTLY_REPORT_ALERT1_TOKEN`` for its first alert rule's,
    ``BILLING_TEAM_RULES_ALERT1_TOKEN`` for a rule set's, and ``NIGHTLY_REPORT_HEADER_X_API_KEY``
    for a credential header of a target."""
    base = _env_word(name) or "JOB"
    if base[0].isdigit():
        base = "JOB_" + base
    if kind == "alert_rules":
        base += "_RULES"
    alert = _ALERT_FIELD.match(field)
    if alert:
        base += f"_ALERT{int(alert.group(1)) + 1}"
        field = alert.group(2)
    if field.startswith("target.headers."):  # a credential header: HEADER_X_API_KEY
        suffix = "HEADER_" + _env_word(field.removeprefix("target.headers."))
    else:
        suffix = {"target.url": "BROKER_PASSWORD", "target.auth.value": "HEADER_VALUE"}.get(
            field, field.rsplit(".", 1)[-1].upper()
        )
    return f"{base}_{suffix}"


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

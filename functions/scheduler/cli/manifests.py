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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scheduler.cli.common import UsageError
from scheduler.cli.reading import KINDS, READ_ONLY_FIELDS, load_json, yaml_error, yaml_loader
from scheduler.cli.streaming import INCOMPLETE
from scheduler.core.constants import SECRET_MASK
from scheduler.secrets import map_secrets

_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# A secret's place holds a reference, alone or after an auth scheme (``Bearer ${API_TOKEN}``).
_SECRET_REFERENCE = re.compile(r"^([A-Za-z][A-Za-z0-9._-]* )?\$\{([A-Za-z_][A-Za-z0-9_]*)\}\Z")
_SUFFIXES = (".yaml", ".yml", ".json")


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
        documents = list(yaml.load_all(text, Loader=yaml_loader()))
    except yaml.YAMLError as exc:
        raise yaml_error(source, text, exc) from None
    # A YAML list of definitions, as a JSON file may hold one: each item a document.
    return [item for data in documents for item in (data if isinstance(data, list) else [data])]


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
    read: set[Path] = set()  # a file named again (-f jobs -f jobs/one.yaml) is read once
    for path in paths:
        files = []
        for file in [] if path == "-" else _files(path):
            if (real := file.resolve()) not in read:
                read.add(real)
                files.append(file)
        sources = [("<stdin>", sys.stdin.read())] if path == "-" else [(str(p), _read(p)) for p in files]
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
                _say_read_only(where, data)
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


def _say_read_only(where: str, data: dict[str, Any]) -> None:
    """A line on stderr for the fields a document holds that the API sets itself (``state``,
    ``version``...): left out, not applied (a job is paused with ``jobs pause``, not by a file)."""
    dropped = [k for k in data if k in READ_ONLY_FIELDS]
    if dropped:
        print(
            f"{where}: {', '.join(dropped)}: set by the scheduler, not by a file: left out"
            + (" (pause or resume a job with scheduler jobs pause|resume)" if "state" in dropped else ""),
            file=sys.stderr,
        )


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
    _refuse_malformed(protected, where, field)

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise UsageError(f"{where}: {field}: ${{{name}}} is not set in the environment")
        return os.environ[name]

    return _REFERENCE.sub(one, protected).replace("\0", "${")


def _refuse_malformed(text: str, where: str, field: str) -> None:
    """A ``${`` that does not open a reference (``${ENV:-prod}``, ``${ NAME }``, ``${deploy-env}``):
    refused, where it would be sent as written (no default, no spaces: ``${NAME}`` only)."""
    rest = _REFERENCE.sub("", text)
    start = rest.find("${")
    if start >= 0:
        end = rest.find("}", start)
        shown = rest[start : end + 1] if end >= 0 else rest[start:]
        raise UsageError(
            f"{where}: {field}: {shown} is not a reference: write ${{NAME}} (letters, digits and _; no default, "
            "no spaces), or $${ for a literal ${"
        )


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


def _refuse_empty(name: str, where: str) -> None:
    """A secret's variable set but empty (a CI system passes a secret it lacks as ""): refused,
    where it would replace the stored secret with nothing (unset, it keeps the stored one)."""
    if not os.environ.get(name, "").strip():
        raise UsageError(
            f"{where}: ${{{name}}} is set but empty: set it to the secret, or unset it to keep the stored one"
        )


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
            example = reference_name(document.name, field, document.kind)
            if "${" in value:
                raise UsageError(
                    f"{document.source}: {field}: a secret's place holds one reference, alone or after an auth "
                    f"scheme (${{{example}}}, Bearer ${{{example}}}): put the whole secret in one variable"
                )
            raise UsageError(
                f"{document.source}: {field}: a literal secret in a job file; write a reference such as "
                f"${{{example}}} and set it in the environment"
            )
        secret_value, name = referenced
        if secret_value is None:
            unset.append(f"{field} (${{{name}}})")
            return SECRET_MASK
        _refuse_empty(name, f"{document.source}: {field}")
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
            _refuse_empty(name, f"{source}: {prefix}{field}")
            return secret_value

        return one

    out = dict(definition)
    if isinstance(out.get("target"), dict):
        # Its secret places are those of its type (a patch's target may not say it: it keeps none)
        mapped = map_secrets(_typed(out["target"]), targets(""))
        out["target"] = mapped if "type" in out["target"] else {k: v for k, v in mapped.items() if k != "type"}
    if isinstance(out.get("alerts"), list):  # a rule's target is whole: its type defaults as apply's does
        out["alerts"] = [
            {**rule, "target": map_secrets(_typed(rule["target"]), targets(f"alerts.{i}."))}
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

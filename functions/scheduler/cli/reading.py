"""Reading job definitions and manifests: JSON and YAML text, read strictly (a key named twice
is refused, a schedule YAML cannot read unquoted gets a hint), and the fields of a job answer
that are not part of its definition dropped."""

from __future__ import annotations

import functools
import json
import re
import sys
from pathlib import Path
from typing import Any

from scheduler.cli.common import UsageError
from scheduler.transport.api_models import READ_ONLY_FIELDS  # dropped from a job file

# A schedule written unquoted that YAML cannot read: ``*/5 * * * *`` (an alias) or ``@daily`` (a
# reserved indicator).
_UNQUOTED_SCHEDULE = re.compile(r"^[\s-]*schedules?\s*:\s*(?:-\s*)?([*@])", re.MULTILINE)


# The values a YAML document may stand for once its aliases (``*name``) are expanded: far past
# any real file of jobs (3 MB of them is about 200,000), far short of an alias bomb's billions.
MAX_EXPANDED_NODES = 2_000_000


def yaml_text(value: Any) -> str:
    """``value`` as block-style YAML, keys in their order, non-ASCII as it is; a string holding a
    NEL (U+0085, which a plain or single-quoted scalar would turn into a space when read back)
    double-quoted, so that it reads back as it was."""
    import yaml

    # A lone scalar: libyaml leaves out PyYAML's document end marker (``...``).
    lone = not isinstance(value, (dict, list, tuple))
    dumper = yaml_dumper(pure=lone or _beyond_libyaml(value))
    return yaml.dump(value, Dumper=dumper, sort_keys=False, allow_unicode=True, default_flow_style=False)


# What libyaml's emitter writes otherwise than PyYAML's: a character beyond the Basic
# Multilingual Plane (an emoji: escaped, ``"\U0001F600"``) or a lone surrogate (refused); and a
# key that is empty, long or not printable (one writes it as a complex key, ``? ...``, the other not).
_NOT_FOR_LIBYAML = re.compile("[\U00010000-\U0010ffff\ud800-\udfff]")


def _beyond_libyaml(value: Any, key: bool = False) -> bool:
    """Whether a text of ``value`` (a key or a value, at any depth) is such a text."""
    if isinstance(value, str):
        odd_key = key and not (0 < len(value) <= 120 and value.isprintable())
        return odd_key or _NOT_FOR_LIBYAML.search(value) is not None
    if isinstance(value, dict):
        return any(_beyond_libyaml(name, key=True) or _beyond_libyaml(item) for name, item in value.items())
    if isinstance(value, (list, tuple)):
        return any(_beyond_libyaml(item) for item in value)
    return False


@functools.cache
def yaml_dumper(pure: bool = False) -> Any:
    """``yaml_text``'s dumper: libyaml's emitter where PyYAML was built with it (five times
    faster: 2,000 jobs in 0.28 s against 1.42), else, or when ``pure``, PyYAML's own. The two
    write the same text but for what ``_beyond_libyaml`` finds, written by PyYAML's (a property
    test holds ``yaml_text`` to PyYAML's text)."""
    import yaml

    base = yaml.SafeDumper if pure else getattr(yaml, "CSafeDumper", yaml.SafeDumper)

    class Dumper(base):  # type: ignore[misc, valid-type]
        pass

    def string(dumper: Any, data: str) -> Any:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style='"' if "\x85" in data else None)

    Dumper.add_representer(str, string)
    return Dumper


def refuse_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``'s ``object_pairs_hook``: an object that names a key twice is refused (the
    last one would silently win)."""
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"duplicate key {key!r}")
        seen[key] = value
    return seen


def load_json(text: str, source: str) -> Any:
    """JSON text of a definition or a manifest; ``UsageError`` naming the source when it is not
    valid JSON or names a key twice in one object."""
    try:  # a byte-order mark before the text (some editors write one) is not part of it
        return json.loads(text.removeprefix("\ufeff"), object_pairs_hook=refuse_duplicate_keys)
    except ValueError as exc:  # json.JSONDecodeError is one
        raise UsageError(f"{source}: not valid JSON: {exc}") from None


def yaml_error(source: str, text: str, exc: Exception, what: str = "YAML") -> UsageError:
    """The usage error of YAML text that does not read, with a hint for an unquoted schedule."""
    hint = ""
    if (unquoted := _UNQUOTED_SCHEDULE.search(text)) is not None:
        example = "*/5 * * * *" if unquoted.group(1) == "*" else "@daily"
        hint = f" (hint: quote a schedule that starts with '{unquoted.group(1)}', as in schedule: \"{example}\")"
    return UsageError(f"{source}: not valid {what}: {' '.join(str(exc).split())}{hint}")


def yaml_loader() -> Any:
    """PyYAML's safe loader without implicit timestamps: ``run_at: 2026-12-01T10:00:00Z`` stays
    the string it was written as; a key ``on:`` (or off, yes, no) is that word, not a boolean; a
    mapping that names a key twice is refused (PyYAML lets the last one win)."""
    import yaml

    class Loader(yaml.SafeLoader):
        def compose_node(self, parent: Any, index: Any) -> Any:
            # The nodes a node stands for once its aliases are expanded, counted as they are
            # composed: ten aliases of ten aliases ... of a few bytes stand for a billion (a file
            # of half a kilobyte that would take gigabytes and minutes to walk) and are refused.
            alias = self.check_event(yaml.events.AliasEvent)
            node = super().compose_node(parent, index)
            sizes = self.__dict__.setdefault("_expanded_sizes", {})
            if alias:
                return node
            children = node.value if isinstance(node, yaml.SequenceNode) else []
            if isinstance(node, yaml.MappingNode):
                children = [part for pair in node.value for part in pair]
            size = 1 + sum(sizes.get(id(child), 1) for child in children)
            if size > MAX_EXPANDED_NODES:
                raise yaml.composer.ComposerError(
                    None, None, f"aliases expand it past {MAX_EXPANDED_NODES:,} values", node.start_mark
                )
            sizes[id(node)] = size
            return node

        def compose_document(self) -> Any:
            # An alias names an anchor of its own document: each document's sizes start afresh,
            # so a stream of 50,000 documents does not keep a size for each of its million nodes.
            self.__dict__["_expanded_sizes"] = {}
            return super().compose_document()

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[str] = set()
            for key, _ in node.value:
                if not isinstance(key, yaml.ScalarNode):
                    continue
                # YAML 1.1 reads a bare on/off/yes/no as a boolean: as a key (an alert rule's
                # ``on:``) it stays the word written.
                if (
                    key.tag == "tag:yaml.org,2002:bool"
                    and key.style is None
                    and key.value.lower() not in ("true", "false")
                ):
                    key.tag = "tag:yaml.org,2002:str"
                if key.value in seen:
                    raise yaml.constructor.ConstructorError(
                        "while reading a mapping", node.start_mark, f"found duplicate key {key.value!r}", key.start_mark
                    )
                seen.add(key.value)
            return super().construct_mapping(node, deep)

    Loader.yaml_implicit_resolvers = {
        key: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    return Loader


def parse_definition(text: str, source: str = "-", kind: str = "job") -> dict[str, Any]:
    """A job definition (or another ``kind``'s: ``calendar``...) from JSON or YAML text (JSON
    when it is valid JSON or the file ends in ``.json``); it must be a mapping."""
    data: Any
    stripped = text.strip()
    if source.lower().endswith(".json") or stripped.startswith("{"):
        try:
            data = load_json(text, source)
        except UsageError:
            if source.lower().endswith(".json"):
                raise
            data = _parse_yaml(text, source)
    else:
        data = _parse_yaml(text, source)
    if data is None:
        raise UsageError(f"{source}: empty {kind} definition")
    if not isinstance(data, dict):
        raise UsageError(f"{source}: a {kind} definition must be a mapping (JSON object), not {type(data).__name__}")
    # A document of apply's files or of an export names its kind: this command's own is taken.
    written = data.get("kind", _KIND_WORDS.get(kind))
    if written != _KIND_WORDS.get(kind):
        raise UsageError(f"{source}: kind: {written!r} is not a {kind} (apply -f takes every kind)")
    return {k: v for k, v in data.items() if k not in READ_ONLY_FIELDS and k != "kind"}


# The kinds of document (``kind: alert_rules``), each with the noun its messages use; and each
# kind by its noun, as the commands name what they read.
KINDS = {"job": "job", "calendar": "calendar", "alert_rules": "alert rule set"}
_KIND_WORDS = {noun: kind for kind, noun in KINDS.items()}


def _parse_yaml(text: str, source: str) -> Any:
    try:
        import yaml
    except ImportError:
        raise UsageError(f"{source}: YAML needs PyYAML (pip install pyyaml); JSON works without it") from None
    try:
        return yaml.load(text, Loader=yaml_loader())
    except yaml.YAMLError as exc:
        raise yaml_error(source, text, exc, "YAML or JSON") from None


def read_definition(path: str, kind: str = "job") -> dict[str, Any]:
    """The job definition (or another ``kind``'s) in a file (``-``: standard input)."""
    if path == "-":
        return parse_definition(sys.stdin.read(), "<stdin>", kind)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text") from None
    return parse_definition(text, path, kind)

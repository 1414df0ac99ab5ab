"""No validating regular expression ends in ``$``: in Python's ``re`` it also matches before a
final newline, so ``"name\\n"`` passed a name check and then broke a ``Location`` header (and
reached a header line). Patterns end in ``\\Z`` instead. Read from the source with ``ast``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[2] / "functions" / "scheduler"
_CALLS = {"compile", "match", "fullmatch", "search"}


def _last_literal(node: ast.expr) -> str | None:
    """The literal text a pattern expression ends with: a string, the last part of an f-string,
    or the right-hand side of a concatenation."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values:
        return _last_literal(node.values[-1])
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _last_literal(node.right)
    return None


def _patterns_ending_in_dollar(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args):
            continue
        if node.func.attr not in _CALLS or not (isinstance(node.func.value, ast.Name) and node.func.value.id == "re"):
            continue
        if "MULTILINE" in ast.unparse(node):
            continue  # a line-by-line pattern: $ is meant
        text = _last_literal(node.args[0])
        if text is not None and text.endswith("$") and not text.endswith("\\$"):
            found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    return found


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_pattern_ends_in_a_dollar(path):
    assert _patterns_ending_in_dollar(path) == []


def test_the_check_sees_a_dollar(tmp_path):
    module = tmp_path / "m.py"
    module.write_text('import re\nA = re.compile(r"^[a-z]+$")\nB = re.compile(r"^[a-z]+\\Z")\n')
    global PACKAGE
    saved, PACKAGE = PACKAGE, tmp_path
    try:
        assert _patterns_ending_in_dollar(module) == ["m.py:2"]
    finally:
        PACKAGE = saved


def test_why_dollar_is_not_enough():
    assert re.match(r"^[a-z]+$", "name\n") is not None
    assert re.match(r"^[a-z]+\Z", "name\n") is None

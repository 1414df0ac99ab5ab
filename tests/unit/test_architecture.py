"""The shape of the code base (docs/architecture.md): no import circles, no module over 500
lines, and none of the arrows the architecture forbids. Read from the source with ``ast``;
nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

FUNCTIONS = Path(__file__).parents[2] / "functions"
PACKAGE = FUNCTIONS / "scheduler"
MAX_LINES = 500
# Being split into packages on other branches (issue 11): drop each name once its split lands.
NOT_YET_SPLIT: set[str] = set()


def module_name(path: Path) -> str:
    parts = list(path.relative_to(FUNCTIONS).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}
HANDLERS = {path.stem: path for path in sorted(FUNCTIONS.glob("*_handler.py"))}


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _resolve(name: str) -> str | None:
    """The module of ours an imported name is (or is in), None for another library."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def imports(module: str, path: Path, *, top_level_only: bool) -> set[str]:
    """Our modules ``module`` imports: at load time (``top_level_only``: not in a function, not
    under ``TYPE_CHECKING``), or anywhere but under ``TYPE_CHECKING``."""
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                for other in child.orelse:
                    visit(other, in_function)
                continue
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, (ast.Import, ast.ImportFrom)) and not (top_level_only and in_function):
                if isinstance(child, ast.Import):
                    names = [alias.name for alias in child.names]
                else:
                    base = child.module or ""
                    if child.level:
                        anchor = package.split(".")[: len(package.split(".")) - child.level + 1]
                        base = ".".join(anchor + ([base] if base else []))
                    names = [f"{base}.{alias.name}" for alias in child.names] + [base]
                for name in names:
                    target = _resolve(name)
                    if target is not None and target != module:
                        found.add(target)
            visit(child, inside)

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    # Importing a module runs its packages' __init__ first.
    for target in list(found):
        parent = target.rpartition(".")[0]
        while parent and parent != "scheduler":
            if parent != module and not module.startswith(parent + "."):
                found.add(parent)
            parent = parent.rpartition(".")[0]
    return found


def graph(*, top_level_only: bool) -> dict[str, set[str]]:
    return {module: imports(module, path, top_level_only=top_level_only) for module, path in MODULES.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(edges.get(node, ())):
            if other not in index:
                connect(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            connect(node)
    return found


def test_the_graph_sees_the_imports():
    edges = graph(top_level_only=False)
    assert "scheduler.planning.lifecycle" in edges["scheduler.service"]
    assert "scheduler.targets.results" in edges["scheduler.targets.http"]
    assert "scheduler.targets.http" in edges["scheduler.targets.router"]  # a lazy import counts as an arrow
    assert "scheduler.targets.http" not in graph(top_level_only=True)["scheduler.targets.router"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_nothing_imports_in_a_circle():
    # Load-time imports: a circle there is a module that may see a half-initialized other.
    assert cycles(graph(top_level_only=True)) == []


def test_no_lazy_import_hides_a_circle():
    # Function-level imports too (they keep optional dependencies out of a Lambda's cold
    # start, never to break a circle).
    assert cycles(graph(top_level_only=False)) == []


@pytest.mark.parametrize("module", sorted(set(MODULES) | {f"handler:{name}" for name in HANDLERS}))
def test_no_module_is_over_500_lines(module):
    if module in NOT_YET_SPLIT:
        pytest.skip("being split into a package on another branch")
    path = HANDLERS[module.split(":", 1)[1]] if module.startswith("handler:") else MODULES[module]
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(FUNCTIONS)} has {lines} lines"


def _arrows() -> list[tuple[str, str]]:
    return [(module, target) for module, targets in graph(top_level_only=False).items() for target in targets]


def _in(module: str, room: str) -> bool:
    return module == room or module.startswith(room + ".")


# (from, to, why): the arrows the architecture forbids, in either form of import.
FORBIDDEN = [
    ("scheduler.store", "scheduler.planning.lifecycle", "the store does data access; planning is the service's"),
    ("scheduler.store", "scheduler.service", "the store does data access; planning is the service's"),
    ("scheduler.schema.models", "scheduler.targets", "the API's schema does not load the delivery"),
    ("scheduler.api", "scheduler.targets", "the API does not load the delivery"),
    ("scheduler.api", "scheduler.store", "the API depends on the ports, not the concrete store"),
    ("scheduler.core.domain", "scheduler.store", "the domain depends on nothing of ours but the time helpers"),
    ("scheduler.planning.lifecycle", "scheduler.store", "planning is pure"),
    ("scheduler.targets", "scheduler.store", "delivery knows nothing of storage"),
    ("scheduler.targets", "scheduler.api", "delivery knows nothing of the API"),
    ("scheduler.targets", "scheduler.schema.models", "delivery reads typed views: an executor does not load pydantic"),
    (
        "scheduler.runner.executor",
        "scheduler.schema.models",
        "delivery reads typed views: an executor does not load pydantic",
    ),
    ("scheduler.runner.fanout", "scheduler.runner.executor", "the fan-out Lambda does not load the delivery"),
    ("scheduler.runner.fanout", "scheduler.targets", "the fan-out Lambda does not load the delivery"),
    ("scheduler.runner.dispatch", "scheduler.runner.executor", "the fan-out Lambda does not load the delivery"),
]


@pytest.mark.parametrize("source,target,why", FORBIDDEN)
def test_forbidden_arrows(source, target, why):
    offending = sorted(f"{a} -> {b}" for a, b in _arrows() if _in(a, source) and _in(b, target))
    assert offending == [], why


def test_the_core_imports_nothing_of_ours_outside_it():
    for module in [m for m in MODULES if _in(m, "scheduler.core")] + ["scheduler.ports", "scheduler.api.routes"]:
        extra = {target for target in graph(top_level_only=False)[module] if not _in(target, "scheduler.core")}
        assert extra == set(), f"{module} imports {sorted(extra)}"


# The rooms of docs/architecture.md as folders of the package: every module lives in one, and
# at most MAX_TOP_LEVEL modules stay at the top (the composition root, the ports, the service,
# the settings and the client library's entry point).
ROOMS = {
    "core",
    "schedules",
    "planning",
    "schema",
    "store",
    "sql",
    "targets",
    "runner",
    "api",
    "transport",
    "local",
    "cli",
    "console",
    "secrets",
}
MAX_TOP_LEVEL = 12


def test_the_package_s_folders_are_the_rooms_of_the_architecture():
    folders = {path.name for path in PACKAGE.iterdir() if path.is_dir() and (path / "__init__.py").exists()}
    assert folders == ROOMS
    document = (FUNCTIONS.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    for room in ROOMS:
        assert f"`{room}/`" in document, f"docs/architecture.md does not name the folder {room}/"


def test_at_most_twelve_modules_stay_at_the_top():
    top = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL, top


def test_no_module_loads_one_of_ours_by_name_at_run_time():
    """``__import__``/``importlib.import_module`` of our own code would hide an arrow from these tests."""
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
                name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
                if name in ("__import__", "import_module") and node.args:
                    first = node.args[0]
                    loaded = first.value if isinstance(first, ast.Constant) else ""
                    assert not str(loaded).startswith("scheduler"), f"{module} loads {loaded} by name"


MAX_FUNCTION_LINES = 80


@pytest.mark.parametrize("module", sorted(set(MODULES) | {f"handler:{name}" for name in HANDLERS}))
def test_no_function_is_longer_than_80_lines(module):
    path = HANDLERS[module.split(":", 1)[1]] if module.startswith("handler:") else MODULES[module]
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert long == [], f"{path.relative_to(FUNCTIONS)}: {', '.join(long)}"

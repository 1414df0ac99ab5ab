"""Paths and names shared by the constructs.

The names the functions read (environment keys, handler entry points, metric names) live in
``functions/scheduler/core/constants.py``. It is loaded here by path, on its own: synthesis must not
import the ``scheduler`` package or the handler modules (their dependencies live in the layer).
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
FUNCTIONS_DIR = ROOT / "functions"
MIGRATIONS_DIR = FUNCTIONS_DIR / "scheduler" / "sql" / "migrations"
LAYERS_DIR = ROOT / "layers"


def _load(name: str, path: Path) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


#: ``functions/scheduler/core/constants.py``: ``C.ENV_DATABASE_HOST``, ``C.API_HANDLER``, ...
C = _load("_scheduler_constants", FUNCTIONS_DIR / "scheduler" / "core" / "constants.py")

#: ``layers/build.py``: ``layer_build.build_layer(...)``.
layer_build = _load("_scheduler_layer_build", LAYERS_DIR / "build.py")


def migrations_hash(directory: Path = MIGRATIONS_DIR) -> str:
    """A hash of the migration files (names and contents): it changes when a migration does."""
    digest = hashlib.sha256()
    for path in sorted(directory.glob("*.sql")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()

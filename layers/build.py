"""Build the Lambda assets, without Docker: the third-party dependency layer and the function code,
both with bytecode compiled for the runtime's Python.

pip downloads Linux wheels for the runtime's Python version and architecture
(``--platform ... --only-binary=:all:``), so the build works on any machine that reaches PyPI.
The result is ``layers/build/python<version>-<arch>/python/`` (``python313-arm64``; ``python/`` is
the layout Lambda expects), with a fingerprint of the inputs next to it: a second call with the
same requirements, Python version and architecture does nothing. The function code asset is
``layers/build/code-python<version>/`` (``functions/`` less build leftovers), rebuilt when a file
of ``functions/`` changes.

Bytecode: Lambda's ``/opt`` (the layer) and ``/var/task`` (the code) are read-only, so without
shipped ``.pyc`` files every cold start compiles everything it imports (twice the import time).
Both assets are compiled with the runtime's own interpreter (``python3.13 -m compileall
--invalidation-mode unchecked-hash``: no timestamps, so the zip's dates do not matter and the
asset hash is stable), found on ``PATH``, under ``~/.pyenv/versions`` or in
``$SCHEDULER_BUILD_PYTHON``. Bytecode is specific to the minor version, so the default runtime
is the newest whose interpreter the build machine has (3.13 here: pyenv has 3.12 and 3.13, no
3.14). Without that interpreter the assets ship source only, with a warning.

    python layers/build.py [--python 3.13] [--architecture arm64|x86_64] [--force]

``app.py`` calls :func:`build_layer` before it defines the stack, so ``npx cdk synth`` from a
fresh clone builds the layer by itself.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements.txt"
BUILD_ROOT = HERE / "build"
FUNCTIONS_DIR = HERE.parent / "functions"

# The Lambda runtime the assets are built for; infra/ reads these, so they live in one place. 3.13:
# the newest runtime whose interpreter the build machine has, so its bytecode can be shipped.
DEFAULT_PYTHON_VERSION = "3.13"
DEFAULT_ARCHITECTURE = "arm64"
# The newest Python runtime Lambda has (a function on an older one is acknowledged to cdk-nag).
LATEST_RUNTIME = "3.14"

# Bump when the steps below change in a way that changes the output.
BUILD_VERSION = "2"

# Where the assets are mounted on Lambda: the paths recorded in the bytecode (tracebacks).
LAYER_MOUNT = "/opt/python"
CODE_MOUNT = "/var/task"

# Not part of the code asset: build and editor leftovers.
CODE_IGNORED = ("__pycache__", "*.pyc", "*.egg-info", ".pytest_cache", ".mypy_cache", ".ruff_cache")

# Lambda architecture name -> the machine name in wheel tags and extension-module suffixes.
MACHINES = {"arm64": "aarch64", "x86_64": "x86_64"}

# Lambda's Python runtimes (3.12 and later) run on Amazon Linux 2023, glibc 2.34: any manylinux
# wheel up to 2_34 loads there. pip does not expand ``manylinux_2_X`` tags by itself, so every
# one from 2_17 (manylinux2014) up is listed.
GLIBC_MINOR_RANGE = range(34, 16, -1)

# The runtime provides the AWS SDK; a copy in the layer would shadow it and add 30 MB.
EXCLUDED_DISTRIBUTIONS = ("boto3", "botocore", "s3transfer")

# Compiled modules that must be present, as a check that pip chose the right wheels.
REQUIRED_EXTENSIONS = ("psycopg_binary/_psycopg", "pydantic_core/_pydantic_core")


def platform_tags(architecture: str) -> list[str]:
    """The ``--platform`` values for pip, newest glibc first."""
    machine = _machine(architecture)
    tags = [f"manylinux_2_{minor}_{machine}" for minor in GLIBC_MINOR_RANGE]
    tags.append(f"manylinux2014_{machine}")
    return tags


def extension_suffix(python_version: str, architecture: str) -> str:
    """The file-name suffix of a compiled module for that interpreter, e.g. ``.cpython-314-aarch64-linux-gnu.so``."""
    return f".cpython-{python_version.replace('.', '')}-{_machine(architecture)}-linux-gnu.so"


def layer_dir(python_version: str = DEFAULT_PYTHON_VERSION, architecture: str = DEFAULT_ARCHITECTURE) -> Path:
    """The asset directory of the layer (it holds ``python/``)."""
    _machine(architecture)
    return BUILD_ROOT / f"python{python_version.replace('.', '')}-{architecture}"


def fingerprint(python_version: str, architecture: str, requirements: Path = REQUIREMENTS) -> str:
    """A hash of everything the layer's content depends on."""
    digest = hashlib.sha256()
    compiled = "bytecode" if runtime_interpreter(python_version) else "source"
    parts = (
        BUILD_VERSION,
        python_version,
        architecture,
        compiled,
        *platform_tags(architecture),
        *EXCLUDED_DISTRIBUTIONS,
    )
    for part in parts:
        digest.update(part.encode() + b"\0")
    digest.update(requirements.read_bytes())
    return digest.hexdigest()


def runtime_interpreter(python_version: str) -> str | None:
    """A path to an interpreter of that Python version (to compile bytecode with), or None.

    ``$SCHEDULER_BUILD_PYTHON`` first, then ``python<version>`` on ``PATH``, then pyenv's versions."""
    candidates = [os.environ.get("SCHEDULER_BUILD_PYTHON", ""), shutil.which(f"python{python_version}") or ""]
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    candidates += [str(p) for p in sorted(pyenv.glob(f"{python_version}.*/bin/python{python_version}"), reverse=True)]
    for candidate in filter(None, candidates):
        if _CHECKED.get(candidate) is None:
            _CHECKED[candidate] = _version_of(candidate) == python_version
        if _CHECKED[candidate]:
            return candidate
    return None


_CHECKED: dict[str, bool] = {}


def _version_of(interpreter: str) -> str | None:
    try:
        result = subprocess.run(
            [interpreter, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
    except OSError:
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def compile_bytecode(directory: Path, python_version: str, mount: str) -> bool:
    """Compile every module under ``directory`` with the runtime's interpreter (unchecked-hash
    ``.pyc``, paths recorded as under ``mount``); False, with a warning, when there is none."""
    interpreter = runtime_interpreter(python_version)
    if interpreter is None:
        warnings.warn(
            f"no Python {python_version} interpreter on this machine (PATH, ~/.pyenv, $SCHEDULER_BUILD_PYTHON): "
            "the Lambda assets ship without bytecode, so each cold start compiles what it imports",
            stacklevel=2,
        )
        return False
    command = [
        interpreter, "-m", "compileall", "-q", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash",
        "-s", str(directory), "-p", mount, str(directory),
    ]  # fmt: skip
    # A few packages carry files for other Python versions that do not compile: they are never imported.
    subprocess.run(command, capture_output=True, text=True, check=False, timeout=900)
    return True


def code_dir(python_version: str = DEFAULT_PYTHON_VERSION) -> Path:
    """The staged function code asset (``functions/`` with its bytecode)."""
    return BUILD_ROOT / f"code-python{python_version.replace('.', '')}"


def _code_files(functions: Path) -> list[Path]:
    ignored = shutil.ignore_patterns(*CODE_IGNORED)
    files: list[Path] = []
    for folder, dirs, names in os.walk(functions):
        skip = ignored(folder, [*dirs, *names])
        dirs[:] = sorted(d for d in dirs if d not in skip)
        files += [Path(folder, n) for n in sorted(names) if n not in skip]
    return files


def build_code(
    python_version: str = DEFAULT_PYTHON_VERSION, functions: Path = FUNCTIONS_DIR, target: Path | None = None
) -> Path:
    """Stage the function code asset with bytecode for the runtime, unless the staged copy is of the
    same files; return its directory."""
    files = _code_files(functions)
    digest = hashlib.sha256()
    compiled = "bytecode" if runtime_interpreter(python_version) else "source"
    for part in (BUILD_VERSION, python_version, compiled):
        digest.update(part.encode() + b"\0")
    for path in files:
        digest.update(str(path.relative_to(functions)).encode() + b"\0" + path.read_bytes() + b"\0")
    target = target or code_dir(python_version)
    stamp = target.with_name(target.name + ".fingerprint")
    BUILD_ROOT.mkdir(parents=True, exist_ok=True)
    with _lock(BUILD_ROOT / ".lock"):
        if target.is_dir() and stamp.is_file() and stamp.read_text().strip() == digest.hexdigest():
            return target
        with tempfile.TemporaryDirectory(dir=BUILD_ROOT, prefix=".tmp-") as tmp:
            staging = Path(tmp) / "code"
            for path in files:
                copy = staging / path.relative_to(functions)
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, copy)
            compile_bytecode(staging, python_version, CODE_MOUNT)
            stamp.unlink(missing_ok=True)
            if target.exists():
                shutil.rmtree(target)
            staging.rename(target)
        stamp.write_text(digest.hexdigest() + "\n")
    return target


def build_layer(
    python_version: str = DEFAULT_PYTHON_VERSION,
    architecture: str = DEFAULT_ARCHITECTURE,
    *,
    force: bool = False,
    requirements: Path = REQUIREMENTS,
) -> Path:
    """Build the layer unless an identical build is already there; return its asset directory."""
    target = layer_dir(python_version, architecture)
    stamp = target.with_name(target.name + ".fingerprint")
    wanted = fingerprint(python_version, architecture, requirements)
    BUILD_ROOT.mkdir(parents=True, exist_ok=True)
    with _lock(BUILD_ROOT / ".lock"):
        if not force and target.is_dir() and stamp.is_file() and stamp.read_text().strip() == wanted:
            return target
        with tempfile.TemporaryDirectory(dir=BUILD_ROOT, prefix=".tmp-") as tmp:
            staging = Path(tmp) / "layer"
            _pip_install(staging / "python", python_version, architecture, requirements)
            _prune(staging / "python")
            if compile_bytecode(staging / "python", python_version, LAYER_MOUNT):
                check_bytecode(staging / "python", python_version)
            check_layer(staging, python_version, architecture)
            stamp.unlink(missing_ok=True)
            if target.exists():
                shutil.rmtree(target)
            staging.rename(target)
        stamp.write_text(wanted + "\n")
    return target


def check_layer(directory: Path, python_version: str, architecture: str) -> None:
    """Raise if the layer lacks the compiled modules of the runtime's Python and architecture."""
    site = directory / "python"
    suffix = extension_suffix(python_version, architecture)
    missing = [name for name in REQUIRED_EXTENSIONS if not (site / f"{name}{suffix}").is_file()]
    if missing:
        raise RuntimeError(f"layer at {directory} lacks {', '.join(m + suffix for m in missing)}")
    shipped = [name for name in EXCLUDED_DISTRIBUTIONS if (site / name).exists()]
    if shipped:
        raise RuntimeError(f"layer at {directory} ships {', '.join(shipped)}, which the runtime provides")


def check_bytecode(site: Path, python_version: str) -> None:
    """Raise if the packages the handlers import most were not compiled for that Python."""
    tag = f"cpython-{python_version.replace('.', '')}"
    missing = [
        name for name in ("pydantic", "psycopg") if not (site / name / "__pycache__" / f"__init__.{tag}.pyc").is_file()
    ]
    if missing:
        raise RuntimeError(f"{site}: no {tag} bytecode for {', '.join(missing)}")


def _machine(architecture: str) -> str:
    try:
        return MACHINES[architecture]
    except KeyError:
        raise ValueError(f"architecture must be one of {sorted(MACHINES)}, not {architecture!r}") from None


def _pip_install(site: Path, python_version: str, architecture: str, requirements: Path) -> None:
    command = [
        sys.executable, "-m", "pip", "install",
        "--quiet", "--disable-pip-version-check", "--no-input",
        "--only-binary=:all:", "--implementation", "cp", "--python-version", python_version,
        *(arg for tag in platform_tags(architecture) for arg in ("--platform", tag)),
        "--no-compile", "--target", str(site), "-r", str(requirements),
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"pip could not build the layer:\n{result.stdout}\n{result.stderr}")


def _prune(site: Path) -> None:
    for name in EXCLUDED_DISTRIBUTIONS:
        shutil.rmtree(site / name, ignore_errors=True)
        for info in site.glob(f"{name}-*.dist-info"):
            shutil.rmtree(info)
    shutil.rmtree(site / "bin", ignore_errors=True)
    for cache in list(site.rglob("__pycache__")):
        shutil.rmtree(cache, ignore_errors=True)


@contextmanager
def _lock(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=DEFAULT_PYTHON_VERSION, help="Lambda runtime Python version")
    parser.add_argument("--architecture", default=DEFAULT_ARCHITECTURE, choices=sorted(MACHINES))
    parser.add_argument("--force", action="store_true", help="rebuild even if the fingerprint matches")
    args = parser.parse_args(argv)
    print(build_layer(args.python, args.architecture, force=args.force))
    print(build_code(args.python))
    return 0


if __name__ == "__main__":
    sys.exit(main())

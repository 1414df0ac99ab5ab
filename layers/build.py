"""Build the third-party dependency layer for the Lambda Python runtime, without Docker.

pip downloads Linux wheels for the runtime's Python version and architecture
(``--platform ... --only-binary=:all:``), so the build works on any machine that reaches PyPI.
The result is ``layers/build/python<version>-<arch>/python/`` (``python314-arm64``; ``python/`` is
the layout Lambda expects), with a fingerprint of the inputs next to it: a second call with the
same requirements, Python version and architecture does nothing.

    python layers/build.py [--python 3.14] [--architecture arm64|x86_64] [--force]

``app.py`` calls :func:`build_layer` before it defines the stack, so ``npx cdk synth`` from a
fresh clone builds the layer by itself.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements.txt"
BUILD_ROOT = HERE / "build"

# The Lambda runtime the layer is built for; infra/ reads these, so they live in one place.
DEFAULT_PYTHON_VERSION = "3.14"
DEFAULT_ARCHITECTURE = "arm64"

# Bump when the steps below change in a way that changes the output.
BUILD_VERSION = "1"

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
    for part in (BUILD_VERSION, python_version, architecture, *platform_tags(architecture), *EXCLUDED_DISTRIBUTIONS):
        digest.update(part.encode() + b"\0")
    digest.update(requirements.read_bytes())
    return digest.hexdigest()


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
    return 0


if __name__ == "__main__":
    sys.exit(main())

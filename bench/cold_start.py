"""Cold-start cost of each Lambda handler module, and the size of the dependency layer.

    .venv/bin/python bench/cold_start.py [--repeats 5] [--quick]

For each ``functions/*_handler.py``, with ``PYTHONPATH=functions`` and this virtualenv's
packages:
- ``python -X importtime -c "import <handler>"``: the cumulative import time of the handler
  module (best of N), and its heaviest direct imports;
- the wall time of a fresh interpreter importing it (best of N), next to the wall time of a
  fresh interpreter doing nothing (the same run, so the difference is the import's cost);
- both with compiled bytecode available (``.pyc``, a warm local install) and without: the
  layer is built with ``--no-compile`` and Lambda's ``/opt`` is read-only, so unless the layer
  ships ``.pyc`` files every cold start compiles what it imports. "No .pyc" imports a copy of
  the function code and of the third-party packages the handlers import, without
  ``__pycache__`` (the standard library and boto3/botocore, which the runtime provides, keep
  theirs).

Then the layer: unpacked bytes and files of ``layers/build/*/python`` (built with
``python layers/build.py`` when absent) and its zipped size, with the function code asset,
against Lambda's 250 MB unzipped limit.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

from common import PYTHON, ROOT, machine_summary, write_json

FUNCTIONS = ROOT / "functions"
LAYER_BUILD = ROOT / "layers" / "build"
LAMBDA_UNZIPPED_LIMIT = 250 * 1024 * 1024
IMPORTTIME = re.compile(r"^import time:\s+(\d+)\s+\|\s+(\d+)\s+\|(\s*)(\S+)\s*$")


def handler_modules() -> list[str]:
    return sorted(p.stem for p in FUNCTIONS.glob("*_handler.py"))


# Provided by the Lambda Python runtime: taken from this virtualenv as they are, never copied.
RUNTIME_PROVIDED = ("boto3", "botocore", "s3transfer", "jmespath")


def base_env(pythonpath: str = str(FUNCTIONS), no_bytecode: bool = False) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "SCHEDULER_", "AWS_"))}
    env.update(
        PYTHONPATH=pythonpath,
        AWS_REGION="us-east-1",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
        POWERTOOLS_SERVICE_NAME="scheduler",
    )
    env.pop("DATABASE_URL", None)
    if no_bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def imported_modules(env: dict[str, str]) -> set[str]:
    """Top-level names of every module the handlers import."""
    names: set[str] = set()
    for module in handler_modules():
        proc = subprocess.run(
            [PYTHON, "-X", "importtime", "-c", f"import {module}"],
            env=env,
            cwd=str(ROOT),
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        names.update(m.group(4).split(".")[0] for m in map(IMPORTTIME.match, proc.stderr.splitlines()) if m)
    return names


def uncompiled_copy(dest: Path, env: dict[str, str]) -> str:
    """Copy, without any ``__pycache__``, the function code and the third-party packages the
    handlers import (as the layer ships them: no .pyc); return the PYTHONPATH to use. The
    standard library keeps its .pyc (so does the Lambda runtime's)."""
    import importlib.util
    import shutil
    import sysconfig

    site_dirs = {Path(sysconfig.get_paths()[k]).resolve() for k in ("purelib", "platlib")}
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    shutil.copytree(FUNCTIONS, dest / "functions", ignore=ignore)
    site = dest / "site"
    site.mkdir()
    for name in sorted(imported_modules(env)):
        if name in RUNTIME_PROVIDED or name in handler_modules() or name == "scheduler":
            continue
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is None or not spec.origin or spec.origin in ("built-in", "frozen"):
            continue
        origin = Path(spec.origin).resolve()
        home = next((d for d in site_dirs if d in origin.parents), None)
        if home is None:
            continue  # the standard library
        if spec.submodule_search_locations:
            shutil.copytree(origin.parent, site / origin.parent.name, ignore=ignore, dirs_exist_ok=True)
        else:
            shutil.copy2(origin, site / origin.name)
        for libs in home.glob(f"{name}*.libs"):  # bundled shared libraries of binary wheels
            shutil.copytree(libs, site / libs.name, dirs_exist_ok=True)
    return os.pathsep.join([str(dest / "functions"), str(site)])


def importtime(module: str, env: dict[str, str]) -> tuple[float, list[tuple[str, float]]]:
    """(cumulative ms of ``module``, its direct imports as (name, cumulative ms), heaviest first)."""
    proc = subprocess.run(
        [PYTHON, "-X", "importtime", "-c", f"import {module}"],
        env=env,
        cwd=str(ROOT),
        capture_output=True,
        text=True,
        timeout=120,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"import {module} failed:\n{proc.stderr[-3000:]}")
    # One line per module, after its own imports; nesting adds two spaces after the last "|".
    rows = []
    for line in proc.stderr.splitlines():
        m = IMPORTTIME.match(line)
        if m:
            rows.append(((len(m.group(3)) - 1) // 2, m.group(4), int(m.group(2)) / 1000))
    tops = [i for i, (depth, name, _) in enumerate(rows) if depth == 0 and name == module]
    if not tops:
        raise RuntimeError(f"no importtime line for {module}")
    last = tops[-1]
    first = max([i for i, (depth, _, _) in enumerate(rows[:last]) if depth == 0] or [-1]) + 1
    children = sorted(((name, ms) for depth, name, ms in rows[first:last] if depth == 1), key=lambda x: -x[1])
    return rows[last][2], children


def wall(code: str, env: dict[str, str]) -> float:
    began = time.perf_counter()
    subprocess.run(
        [PYTHON, "-c", code],
        env=env,
        cwd=str(ROOT),
        check=True,
        timeout=120,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return (time.perf_counter() - began) * 1000


def measure_imports(repeats: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-nopyc-") as tmp:
        pyc_env = base_env()
        envs = {"pyc": pyc_env, "no_pyc": base_env(uncompiled_copy(Path(tmp), pyc_env), no_bytecode=True)}
        for mode, env in envs.items():
            for module in handler_modules():  # warm the OS cache (and the .pyc files) once
                importtime(module, env)
            baseline = [wall("pass", env) for _ in range(repeats)]
            for module in handler_modules():
                totals, walls, children = [], [], []
                for _ in range(repeats):  # interleaved with the bare interpreter: the same noise
                    total, kids = importtime(module, env)
                    totals.append(total)
                    children.append(kids)
                    walls.append(wall(f"import {module}", env))
                    baseline.append(wall("pass", env))
                best = totals.index(min(totals))
                entry = out.setdefault("modules", {}).setdefault(module, {})
                entry[mode] = {
                    "importtime_ms": min(totals),
                    "importtime_median_ms": statistics.median(totals),
                    "wall_ms": min(walls),
                    "wall_median_ms": statistics.median(walls),
                    "top_imports": [[n, round(ms, 1)] for n, ms in children[best][:6]],
                }
            out.setdefault("baseline_ms", {})[mode] = min(baseline)
    for entry in out["modules"].values():
        for mode in ("pyc", "no_pyc"):
            entry[mode]["wall_minus_bare_ms"] = entry[mode]["wall_ms"] - out["baseline_ms"][mode]
        entry["no_pyc_vs_pyc"] = entry["no_pyc"]["importtime_ms"] / entry["pyc"]["importtime_ms"]
    return out


def tree_size(path: Path, skip: tuple[str, ...] = ()) -> tuple[int, int]:
    total = files = 0
    for p in path.rglob("*"):
        if any(part in skip for part in p.parts):
            continue
        if p.is_file() and not p.is_symlink():
            total += p.stat().st_size
            files += 1
    return total, files


def zipped_size(path: Path, arcroot: Path, skip: tuple[str, ...] = ()) -> int:
    with tempfile.TemporaryFile() as tmp:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
            for p in sorted(path.rglob("*")):
                if any(part in skip for part in p.parts) or not p.is_file():
                    continue
                zf.write(p, p.relative_to(arcroot))
        tmp.seek(0, os.SEEK_END)
        return tmp.tell()


def measure_layer(build: bool) -> dict[str, Any]:
    layers = sorted(d for d in LAYER_BUILD.glob("*/python") if d.is_dir()) if LAYER_BUILD.is_dir() else []
    built_now = False
    if not layers and build:
        print("  building the layer: python layers/build.py", flush=True)
        subprocess.run([PYTHON, str(ROOT / "layers" / "build.py")], check=True, timeout=900, cwd=str(ROOT))
        layers = sorted(d for d in LAYER_BUILD.glob("*/python") if d.is_dir())
        built_now = True
    skip = ("__pycache__", "scheduler.egg-info")
    code_bytes, code_files = tree_size(FUNCTIONS, skip)
    result: dict[str, Any] = {
        "built_now": built_now,
        "layers": {},
        "function_code": {
            "bytes": code_bytes,
            "files": code_files,
            "zipped_bytes": zipped_size(FUNCTIONS, FUNCTIONS, skip),
        },
    }
    for d in layers:
        size, files = tree_size(d)
        pyc = sum(1 for _ in d.rglob("*.pyc"))
        result["layers"][d.parent.name] = {
            "bytes": size,
            "files": files,
            "pyc_files": pyc,
            "zipped_bytes": zipped_size(d, d.parent),
            "share_of_unzipped_limit": (size + code_bytes) / LAMBDA_UNZIPPED_LIMIT,
        }
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs per measurement; the best is kept")
    parser.add_argument("--no-build", action="store_true", help="do not build the layer when it is absent")
    parser.add_argument("--quick", action="store_true", help="a small run: 2 repeats")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats = min(args.repeats, 2)

    results: dict[str, Any] = {
        "benchmark": "cold_start",
        "repeats": args.repeats,
        "machine": machine_summary(),
        "python": sys.version.split()[0],
    }
    print(f"handler import cost, best of {args.repeats} (Python {results['python']}, this virtualenv)", flush=True)
    imports = measure_imports(args.repeats)
    results.update(imports)
    base = imports["baseline_ms"]
    print(f"  bare interpreter: {base['pyc']:.0f} ms")
    for module, e in imports["modules"].items():
        print(
            f"  {module:<18} importtime {e['pyc']['importtime_ms']:6.0f} ms (no .pyc: {e['no_pyc']['importtime_ms']:6.0f} ms,"
            f" x{e['no_pyc_vs_pyc']:.1f}) | fresh interpreter {e['pyc']['wall_ms']:5.0f} ms "
            f"(+{e['pyc']['wall_minus_bare_ms']:.0f} over bare; no .pyc {e['no_pyc']['wall_ms']:.0f} ms)"
        )
        heavy = ", ".join(f"{n} {ms:.0f}" for n, ms in e["pyc"]["top_imports"][:4])
        print(f"  {'':<18} heaviest imports (ms): {heavy}")
    layer = measure_layer(not args.no_build)
    results["layer"] = layer
    code = layer["function_code"]
    print(
        f"function code: {code['bytes'] / 1e6:.2f} MB unpacked ({code['files']} files), "
        f"{code['zipped_bytes'] / 1e6:.2f} MB zipped"
    )
    for name, entry in layer["layers"].items():
        print(
            f"layer {name}: {entry['bytes'] / 1e6:.1f} MB unpacked ({entry['files']} files, {entry['pyc_files']} .pyc), "
            f"{entry['zipped_bytes'] / 1e6:.1f} MB zipped; with the code {entry['share_of_unzipped_limit']:.0%} "
            f"of Lambda's 250 MB unzipped limit"
        )
    if not layer["layers"]:
        print("layer: not built (run python layers/build.py)")
    write_json(args.json, results)
    return results


if __name__ == "__main__":
    main()

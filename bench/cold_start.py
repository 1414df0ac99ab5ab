"""Cold-start cost of each Lambda handler as deployed, and the size of the assets.

    .venv/bin/python bench/cold_start.py [--repeats 5] [--quick] [--python 3.13]

Each handler is imported the way Lambda imports it: by the runtime's own interpreter (``python3.13``,
the deployed runtime, found as ``layers/build.py`` finds it), from the assets' own layout, the built
code asset (``layers/build/code-python313``, Lambda's ``/var/task``) then the layer's ``python/``
(``/opt/python``; built for this machine's architecture so its compiled modules load here), then
boto3/botocore as the runtime provides them (installed for that Python beside the build, with
bytecode). No writable cache: ``PYTHONDONTWRITEBYTECODE=1``, and the run checks that no ``.pyc``
appeared. Three forms of the same assets:

- **shipped**: as built, with the bytecode ``layers/build.py`` compiles for the runtime;
- **source**: the same files without any ``__pycache__`` (how the assets shipped before: every cold
  start compiled what it imported);
- **X-Ray SDK**: shipped, with ``SCHEDULER_XRAY_SDK=true`` (the ``xray_sdk`` deploy option).

For each: ``python -X importtime -c "import <handler>"`` (the cumulative import time of the handler,
best of N, and its heaviest direct imports), and the wall time of a fresh interpreter importing it
next to a bare one. Whether the executor loaded pydantic is recorded (it must not).

Then the assets: unpacked bytes and files of the layer and the code, their zipped size, against
Lambda's 250 MB unzipped limit.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

from common import PYTHON, ROOT, machine_summary, write_json

sys.path.insert(0, str(ROOT / "layers"))
import build as layer_build

FUNCTIONS = ROOT / "functions"
LAYER_BUILD = ROOT / "layers" / "build"
LAMBDA_UNZIPPED_LIMIT = 250 * 1024 * 1024
IMPORTTIME = re.compile(r"^import time:\s+(\d+)\s+\|\s+(\d+)\s+\|(\s*)(\S+)\s*$")
# What the Lambda Python runtime provides beside the layer (its own boto3, with bytecode).
RUNTIME_PACKAGES = ("boto3",)
TARGETS_MS = {"api_handler": 400.0, "executor_handler": 250.0}
MODES = ("shipped", "source", "xray_sdk")


def handler_modules() -> list[str]:
    return sorted(p.stem for p in FUNCTIONS.glob("*_handler.py") if p.stem != "jobs_handler")


def host_architecture() -> str:
    return "arm64" if platform.machine() in ("aarch64", "arm64") else "x86_64"


def runtime_sdk(python_version: str, interpreter: str) -> Path:
    """boto3/botocore for that Python, compiled, as the Lambda runtime has them (built once)."""
    target = LAYER_BUILD / f"runtime-sdk-python{python_version.replace('.', '')}"
    if not (target / "botocore").is_dir():
        staging = target.with_name(target.name + ".tmp")
        shutil.rmtree(staging, ignore_errors=True)
        subprocess.run(
            [PYTHON, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-compile",
             "--only-binary=:all:", "--python-version", python_version, "--target", str(staging), *RUNTIME_PACKAGES],
            check=True, timeout=600,
        )  # fmt: skip
        subprocess.run(
            [interpreter, "-m", "compileall", "-q", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash",
             str(staging)],
            check=False, timeout=600,
        )  # fmt: skip
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    return target


def env_for(pythonpath: list[Path], xray_sdk: bool = False) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "SCHEDULER_", "AWS_"))}
    env.update(
        PYTHONPATH=os.pathsep.join(map(str, pythonpath)),
        PYTHONDONTWRITEBYTECODE="1",  # /var/task and /opt are read-only: nothing is cached
        AWS_REGION="us-east-1",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
        POWERTOOLS_SERVICE_NAME="scheduler",
    )
    env.pop("DATABASE_URL", None)
    if xray_sdk:
        env["SCHEDULER_XRAY_SDK"] = "true"
    return env


def assets(python_version: str, workdir: Path) -> tuple[str, dict[str, list[Path]], dict[str, Any]]:
    """(interpreter, mode -> PYTHONPATH, facts): the assets built, copied twice into ``workdir``."""
    interpreter = layer_build.runtime_interpreter(python_version)
    if interpreter is None:
        raise SystemExit(f"no Python {python_version} interpreter here (PATH, ~/.pyenv, $SCHEDULER_BUILD_PYTHON)")
    layer = layer_build.build_layer(python_version, host_architecture()) / "python"
    code = layer_build.build_code(python_version)
    sdk = runtime_sdk(python_version, interpreter)
    shipped = [workdir / "shipped" / "task", workdir / "shipped" / "opt"]
    source = [workdir / "source" / "task", workdir / "source" / "opt"]
    for (task, opt), strip in ((shipped, False), (source, True)):
        ignore = shutil.ignore_patterns("__pycache__") if strip else None
        shutil.copytree(code, task, ignore=ignore)
        shutil.copytree(layer, opt, ignore=ignore)
    paths = {"shipped": [*shipped, sdk], "source": [*source, sdk], "xray_sdk": [*shipped, sdk]}
    facts = {"interpreter": interpreter, "layer": str(layer.relative_to(ROOT)), "code": str(code.relative_to(ROOT))}
    return interpreter, paths, facts


def pyc_count(paths: list[Path]) -> int:
    return sum(1 for path in paths for _ in path.rglob("*.pyc"))


def importtime(python: str, module: str, env: dict[str, str]) -> tuple[float, list[tuple[str, float]], bool]:
    """(cumulative ms of ``module``, its direct imports as (name, ms) heaviest first, pydantic loaded)."""
    code = f"import {module}, sys; print('pydantic' in sys.modules)"
    proc = subprocess.run(
        [python, "-S", "-X", "importtime", "-c", code], env=env, cwd="/", capture_output=True, text=True, timeout=120
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
    return rows[last][2], children, proc.stdout.strip() == "True"


def wall(python: str, code: str, env: dict[str, str]) -> tuple[float, float]:
    """(wall ms, CPU ms: user + system) of a fresh interpreter running ``code``. The CPU figure moves
    less than the wall time on a shared machine: it leaves out the waits for a core."""
    began = time.perf_counter()
    proc = subprocess.Popen(
        [python, "-S", "-c", code], env=env, cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{python} -c {code!r} exited with {proc.returncode}")
    return (time.perf_counter() - began) * 1000, (usage.ru_utime + usage.ru_stime) * 1000


def measure_mode(python: str, env: dict[str, str], repeats: int) -> tuple[float, dict[str, Any]]:
    """(bare interpreter ms, module -> figures) for one form of the assets."""
    for module in handler_modules():  # warm the OS cache once
        importtime(python, module, env)
    baseline = [wall(python, "pass", env) for _ in range(repeats)]
    out: dict[str, Any] = {}
    for module in handler_modules():
        totals, walls, children, pydantic = [], [], [], False
        for _ in range(repeats):  # interleaved with the bare interpreter: the same noise
            total, kids, loaded = importtime(python, module, env)
            totals.append(total)
            children.append(kids)
            pydantic |= loaded
            walls.append(wall(python, f"import {module}", env))
            baseline.append(wall(python, "pass", env))
        best = totals.index(min(totals))
        out[module] = {
            "importtime_ms": min(totals),
            "importtime_median_ms": statistics.median(totals),
            "wall_ms": min(w for w, _ in walls),
            "wall_median_ms": statistics.median(w for w, _ in walls),
            "cpu_ms": min(c for _, c in walls),
            "top_imports": [[n, round(ms, 1)] for n, ms in children[best][:6]],
            "loads_pydantic": pydantic,
        }
    bare_cpu = min(c for _, c in baseline)
    for figures in out.values():
        figures["cpu_minus_bare_ms"] = figures["cpu_ms"] - bare_cpu
    return min(w for w, _ in baseline), out


def measure_imports(python_version: str, repeats: int) -> dict[str, Any]:
    out: dict[str, Any] = {"modules": {}, "baseline_ms": {}}
    with tempfile.TemporaryDirectory(prefix="bench-cold-") as tmp:
        python, paths, facts = assets(python_version, Path(tmp))
        out.update(facts)
        before = {mode: pyc_count(p[:2]) for mode, p in paths.items()}
        for mode in MODES:
            env = env_for(paths[mode], xray_sdk=mode == "xray_sdk")
            baseline, modules = measure_mode(python, env, repeats)
            out["baseline_ms"][mode] = baseline
            for module, figures in modules.items():
                figures["wall_minus_bare_ms"] = figures["wall_ms"] - baseline
                out["modules"].setdefault(module, {})[mode] = figures
        after = {mode: pyc_count(p[:2]) for mode, p in paths.items()}
        out["pyc_files"] = before
        out["no_cache_written"] = before == after
    for module, entry in out["modules"].items():
        entry["source_vs_shipped"] = entry["source"]["importtime_ms"] / entry["shipped"]["importtime_ms"]
        entry["xray_sdk_extra_ms"] = entry["xray_sdk"]["importtime_ms"] - entry["shipped"]["importtime_ms"]
        if module in TARGETS_MS:
            entry["target_ms"] = TARGETS_MS[module]
            entry["met"] = entry["shipped"]["importtime_ms"] <= TARGETS_MS[module]
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


def measure_layer(python_version: str) -> dict[str, Any]:
    """Sizes of the deployed assets (the arm64 layer as deployed, the code asset), built when absent."""
    layer = layer_build.build_layer(python_version, layer_build.DEFAULT_ARCHITECTURE) / "python"
    code = layer_build.build_code(python_version)
    code_bytes, code_files = tree_size(code)
    result: dict[str, Any] = {
        "layers": {},
        "function_code": {
            "path": str(code.relative_to(ROOT)),
            "bytes": code_bytes,
            "files": code_files,
            "pyc_files": sum(1 for _ in code.rglob("*.pyc")),
            "zipped_bytes": zipped_size(code, code),
        },
    }
    size, files = tree_size(layer)
    result["layers"][layer.parent.name] = {
        "bytes": size,
        "files": files,
        "pyc_files": sum(1 for _ in layer.rglob("*.pyc")),
        "zipped_bytes": zipped_size(layer, layer.parent),
        "share_of_unzipped_limit": (size + code_bytes) / LAMBDA_UNZIPPED_LIMIT,
    }
    return result


def report(results: dict[str, Any]) -> None:
    base = results["baseline_ms"]
    print(f"  bare interpreter: {base['shipped']:.0f} ms; no .pyc written: {results['no_cache_written']}")
    for module, e in results["modules"].items():
        target = f" (target <= {e['target_ms']:.0f} ms: {'met' if e['met'] else 'NOT met'})" if "target_ms" in e else ""
        print(
            f"  {module:<18} importtime {e['shipped']['importtime_ms']:6.0f} ms{target} | source only "
            f"{e['source']['importtime_ms']:6.0f} ms (x{e['source_vs_shipped']:.1f}) | with the X-Ray SDK "
            f"{e['xray_sdk']['importtime_ms']:6.0f} ms | fresh interpreter {e['shipped']['wall_ms']:5.0f} ms, CPU of the "
            f"import {e['shipped']['cpu_minus_bare_ms']:4.0f} ms (X-Ray SDK {e['xray_sdk']['cpu_minus_bare_ms']:4.0f}) "
            f"| pydantic loaded: {e['shipped']['loads_pydantic']}"
        )
        heavy = ", ".join(f"{n} {ms:.0f}" for n, ms in e["shipped"]["top_imports"][:4])
        print(f"  {'':<18} heaviest imports (ms): {heavy}")
    code = results["layer"]["function_code"]
    print(
        f"function code: {code['bytes'] / 1e6:.2f} MB unpacked ({code['files']} files, {code['pyc_files']} .pyc), "
        f"{code['zipped_bytes'] / 1e6:.2f} MB zipped"
    )
    for name, entry in results["layer"]["layers"].items():
        print(
            f"layer {name}: {entry['bytes'] / 1e6:.1f} MB unpacked ({entry['files']} files, {entry['pyc_files']} .pyc), "
            f"{entry['zipped_bytes'] / 1e6:.1f} MB zipped; with the code {entry['share_of_unzipped_limit']:.0%} "
            f"of Lambda's 250 MB unzipped limit"
        )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs per measurement; the best is kept")
    parser.add_argument("--python", default=layer_build.DEFAULT_PYTHON_VERSION, help="the runtime's Python version")
    parser.add_argument("--quick", action="store_true", help="a small run: 2 repeats")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats = min(args.repeats, 2)
    results: dict[str, Any] = {
        "benchmark": "cold_start",
        "repeats": args.repeats,
        "machine": machine_summary(),
        "runtime_python": args.python,
        "load_average": os.getloadavg(),
    }
    print(f"handler imports as deployed, best of {args.repeats} (Python {args.python}, the assets' layout)", flush=True)
    results.update(measure_imports(args.python, args.repeats))
    results["python"] = subprocess.run(
        [results["interpreter"], "-c", "import sys; print(sys.version.split()[0])"], capture_output=True, text=True
    ).stdout.strip()
    results["layer"] = measure_layer(args.python)
    results["load_average_after"] = os.getloadavg()
    report(results)
    write_json(args.json, results)
    return results


if __name__ == "__main__":
    main()

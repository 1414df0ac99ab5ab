"""docs/benchmarks.md's sections of issue 36: cold starts as deployed, the scheduling workload
against APScheduler, ten million jobs, the floor of a Python client (rendered by run_all.py from
bench/results/*.json)."""

from __future__ import annotations

import textwrap
from typing import Any

SYSTEM_LABELS = {
    "local": "local mode",
    "apscheduler-memory": "APScheduler, memory store",
    "apscheduler-sql": "APScheduler, SQLAlchemy store",
}


def verdict(ok: bool) -> str:
    return "met" if ok else "**not met**"


def _wrap(text: str) -> list[str]:
    return textwrap.wrap(text, 100, break_long_words=False, break_on_hyphens=False)


def _load(data: dict[str, Any], key: str = "load_average") -> str:
    load = data.get(key) or data.get("machine", {}).get("loadavg")
    return f"{load[0]:.1f}" if load else "?"


# -- cold start -----------------------------------------------------------------------------------


def cold_start_summary(cs: dict[str, Any]) -> list[str]:
    rows = []
    for module, e in cs["modules"].items():
        if "target_ms" not in e:
            continue
        rows.append(
            f"| cold start: `{module}` imported as deployed (Python {cs['runtime_python']}, shipped bytecode, no "
            f"writable cache) | **{e['shipped']['importtime_ms']:.0f} ms** (source only {e['source']['importtime_ms']:.0f} "
            f"ms, with the X-Ray SDK {e['xray_sdk']['importtime_ms']:.0f} ms) | <= {e['target_ms']:.0f} ms | "
            f"{verdict(e['met'])} |"
        )
    ex = cs["modules"].get("executor_handler")
    if ex:
        loads = ex["shipped"]["loads_pydantic"]
        rows.append(f"| executor loads pydantic | {'yes' if loads else 'no'} | no | {verdict(not loads)} |")
    for name, layer in cs["layer"]["layers"].items():
        rows.append(
            f"| layer {name} | {layer['bytes'] / 1e6:.1f} MB unpacked ({layer['pyc_files']} .pyc), "
            f"{layer['zipped_bytes'] / 1e6:.1f} MB zipped | < 250 MB unzipped with the code | "
            f"{verdict(layer['share_of_unzipped_limit'] < 1)} |"
        )
    return rows


def cold_start_section(cs: dict[str, Any], command: str, plot: str) -> list[str]:
    out = ["## Cold start: handler imports as deployed, and the assets", ""]
    out += [f"`{command}` (`--repeats`, `--python`)", "", f"![cold start](img/{plot})", ""]
    out += _wrap(
        f"Each handler imported by the runtime's own interpreter (Python {cs['python']}, `{cs['interpreter']}`) from "
        f"the assets' layout: the code asset (`{cs['code']}`, Lambda's `/var/task`), then the layer's `python/` "
        "(`/opt/python`; built for this machine's architecture so its compiled modules load here), then boto3 as the "
        "runtime provides it. `PYTHONDONTWRITEBYTECODE=1` and `-S` (the host interpreter's own site-packages is no "
        f"part of the runtime); no `.pyc` was written during the run: {cs['no_cache_written']}. Best of "
        f"{cs['repeats']}; load average {_load(cs)} when it started, {_load(cs, 'load_average_after')} at the end "
        "(a shared machine: the CPU column, the import's user + system time in a fresh interpreter less a bare "
        "one's, moves less than the wall figures). **shipped**: the assets as built, with the bytecode "
        "`layers/build.py` compiles for the runtime (`compileall --invalidation-mode unchecked-hash`); **source "
        "only**: the same files without `__pycache__`, as the assets shipped before; **X-Ray SDK**: shipped, with "
        "`SCHEDULER_XRAY_SDK=true` (`-c xray_sdk=true`)."
    )
    out += [
        "",
        "| handler | importtime, shipped | target | source only | with the X-Ray SDK | CPU of the import (shipped / X-Ray SDK) | pydantic | heaviest direct imports (ms, shipped) |",
    ]
    out.append("|---|---|---|---|---|---|---|---|")
    for module, e in cs["modules"].items():
        heavy = ", ".join(f"`{n}` {ms:.0f}" for n, ms in e["shipped"]["top_imports"][:4])
        target = f"<= {e['target_ms']:.0f} ms, {verdict(e['met'])}" if "target_ms" in e else ""
        out.append(
            f"| `{module}` | **{e['shipped']['importtime_ms']:.0f} ms** | {target} | {e['source']['importtime_ms']:.0f} ms "
            f"(x{e['source_vs_shipped']:.1f}) | {e['xray_sdk']['importtime_ms']:.0f} ms | "
            f"{e['shipped']['cpu_minus_bare_ms']:.0f} / {e['xray_sdk']['cpu_minus_bare_ms']:.0f} ms | "
            f"{'loaded' if e['shipped']['loads_pydantic'] else 'not loaded'} | {heavy} |"
        )
    code = cs["layer"]["function_code"]
    out += ["", "| asset | unpacked | files | zipped | share of the 250 MB unzipped limit (with the code) |"]
    out.append("|---|---|---|---|---|")
    out.append(
        f"| function code (`{code['path']}`) | {code['bytes'] / 1e6:.2f} MB | {code['files']} ({code['pyc_files']} .pyc) | "
        f"{code['zipped_bytes'] / 1e6:.2f} MB | |"
    )
    for name, layer in cs["layer"]["layers"].items():
        out.append(
            f"| layer `layers/build/{name}/python` | {layer['bytes'] / 1e6:.1f} MB | {layer['files']} "
            f"({layer['pyc_files']} .pyc) | {layer['zipped_bytes'] / 1e6:.1f} MB | {layer['share_of_unzipped_limit']:.0%} |"
        )
    out += [""] + _wrap(
        "**Reading.** Bytecode is specific to the minor version, so the runtime is the newest Python the build "
        "machine has an interpreter for (3.13: pyenv has 3.12 and 3.13, no 3.14); `layers/build.py` finds it on "
        "`PATH`, in pyenv or in `$SCHEDULER_BUILD_PYTHON`. `/var/task` and `/opt` are read-only, so without shipped "
        "bytecode every cold start compiled what it imported (the source-only column). The X-Ray SDK (Powertools' "
        "`Tracer`) patches libraries and builds a botocore client for its sampler when imported; it is loaded only "
        "with `-c xray_sdk=true` now, and Lambda's active tracing still records every invocation without it. "
        "`cryptography` loads when a secret is first sealed or opened. What the api handler still imports is the "
        "event handler with its OpenAPI models (pydantic) and psycopg, which every request needs."
    )
    return out + [""]


def plot_cold_start(data: dict[str, Any], path: Any, plt: Any) -> None:
    modules = list(data["modules"])
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    ys = range(len(modules))
    for offset, mode, label in ((0.27, "shipped", "shipped bytecode"), (0, "xray_sdk", "with the X-Ray SDK"),
                                (-0.27, "source", "source only (as before)")):  # fmt: skip
        ax.barh(
            [y + offset for y in ys], [data["modules"][m][mode]["importtime_ms"] for m in modules], 0.27, label=label
        )
    for y, m in zip(ys, modules):
        if "target_ms" in data["modules"][m]:
            ax.plot([data["modules"][m]["target_ms"]] * 2, [y - 0.45, y + 0.45], color="black", lw=1)
    ax.set_yticks(list(ys))
    ax.set_yticklabels(modules)
    ax.set_xlabel(f"import time, ms (best of {data['repeats']}, Python {data['python']}; bars: targets)")
    ax.set_title("cold-start import of each handler, as deployed", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- the scheduling workload ------------------------------------------------------------------------


def _runs(sv: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["workload"], r["system"]): r for r in sv["runs"]}


def schedules_summary(sv: dict[str, Any]) -> list[str]:
    rows = []
    by = _runs(sv)
    for (workload, system), r in by.items():
        if system != "local":
            continue
        cpu = r["cpu_ms_per_delivery"]
        rows.append(
            f"| {workload} ({r['jobs']:,} jobs): local mode's CPU per delivery (scheduler + Postgres) | "
            f"**{cpu:.2f} ms** | <= 0.4 ms | {verdict(cpu <= 0.4)} |"
        )
        for peer, ratio in sv["ratios"].get(workload, {}).items():
            rows.append(
                f"| {workload}: local mode's firings per CPU second vs {SYSTEM_LABELS[peer[3:]]} | **{ratio:.2f}x** "
                f"| >= 2x | {verdict(ratio >= 2)} |"
            )
        if "p99_bound_s" in r:
            p99, bound = r["lateness_s"]["p99"], r["p99_bound_s"]
            rows.append(
                f"| {workload}: local mode's burst p99 vs 1.2 x N x c / 2 (c = {r['c_ms']:.2f} ms) | **{p99:.2f} s** vs "
                f"{bound:.2f} s | p99 <= bound | {verdict(p99 <= bound)} |"
            )
    return rows


def schedules_section(sv: dict[str, Any], command: str) -> list[str]:
    out = ["## The scheduling workload against APScheduler", ""]
    out += [f"`{command}` (`--workloads`, `--systems`, `--window`, `--local-runners`, `--ap-threads`, `--quick`)", ""]
    out += _wrap(
        "Recurring jobs, each delivering to the same loopback no-op HTTP target (an asyncio server in a process of "
        f"its own), run by local mode (`scheduler local --runners {sv.get('local_runners', 1)}`: one runner process "
        "per core, each claiming its own batches from the same database; jobs created through its API) and by "
        f"APScheduler 3.11 (`BackgroundScheduler`, a `ThreadPoolExecutor` of {sv['ap_threads']} threads, "
        "`coalesce=False`, no misfire limit; each job one `requests` POST on a keep-alive session per thread) "
        "with its memory store and with its `SQLAlchemyJobStore` on the same Postgres. **Shortened form:** "
        "schedules here have minute precision, so the every-minute workloads are `@every 60s` from one "
        "`start_at` a few seconds after the setup (APScheduler: an `IntervalTrigger` of 60 s from the same "
        "start): every job due at the same instant, once a minute, as `* * * * *` at a minute boundary, "
        "without waiting for one; the first burst is measured. `@every 1s` is measured over "
        f"{sv['window_s']} s. Lateness: arrival minus the occurrence's due time. CPU: `/proc/<pid>/stat` of the "
        "scheduler's processes, `/proc/<pid>/schedstat` (nanoseconds) of the Postgres backends connected to its "
        "database, from just before the due "
        "time to the last expected arrival, per delivery; c adds the target's. RSS: the scheduler's processes' "
        f"peak. Load average {_load(sv)} at the start, {_load(sv, 'load_average_after')} at the end."
    )
    out += [
        "",
        "| workload | system | lateness p50 | p99 | p99 bound 1.2 x N x c / 2 | deliveries/s | CPU ms per delivery (scheduler + Postgres) | c, ms (+ target) | firings per CPU second | peak RSS |",
    ]
    out.append("|---|---|---|---|---|---|---|---|---|---|")
    for r in sv["runs"]:
        late = r["lateness_s"]
        bound = f"{r['p99_bound_s']:.2f} s" if "p99_bound_s" in r else ""
        flag = "" if r["complete"] else " (incomplete)"
        out.append(
            f"| {r['workload']} ({r['jobs']:,}) | {SYSTEM_LABELS[r['system']]}{flag} | {late['p50']:.2f} s | "
            f"{late['p99']:.2f} s | {bound} | {r['deliveries_per_s']:.0f} | {r['cpu_ms_per_delivery']:.2f} | "
            f"{r['c_ms']:.2f} | {r['firings_per_cpu_s'] or 0:.0f} | {r['peak_rss_mb']:.0f} MB |"
        )
    out.append("")
    return out


# -- ten million jobs -----------------------------------------------------------------------------


def ten_million_summary(tm: dict[str, Any]) -> list[str]:
    rows = []
    for key, label in (("claim", "claim"), ("list_jobs", "`GET /v1/jobs` first page"),
                       ("list_executions", "a job's executions page")):  # fmt: skip
        e = tm["cases"][key]
        rows.append(
            f"| {label}, {tm['large']:,} vs {tm['small']:,} jobs | {e['large_ms']:.2f} vs {e['small_ms']:.2f} ms = "
            f"**{e['ratio']:.2f}x** | <= 1.3x | {verdict(e['ratio'] <= 1.3)} |"
        )
    rows.append(
        f"| storage per job ({tm['large']:,} jobs) | **{tm['bytes_per_job']:.0f} bytes** (tables and indexes) | "
        "quoted | |"
    )
    return rows


def ten_million_section(tm: dict[str, Any], command: str) -> list[str]:
    out = ["## Ten million jobs", "", f"`{command}` (`--large`, `--small`, `--repeats`)", ""]
    out += _wrap(
        f"{tm['large']:,} jobs loaded with `INSERT ... SELECT generate_series` ({tm['load_s']:.0f} s, "
        f"{tm['large'] / tm['load_s']:,.0f} rows/s, then `VACUUM ANALYZE` and `CHECKPOINT`), {tm['due']:,} of them due, the rest due "
        f"in the next year; beside a database of {tm['small']:,} jobs with the same {tm['due']:,} due, in one run, the cases "
        f"alternated, the median of {tm['repeats']} each. The claim: `Store.claim_due` of {tm['batch']} rows (given back by key "
        "after each, so every repeat claims again); `GET /v1/jobs`: `Store.list_jobs` of one owner's first page "
        f"({tm['page']} jobs, the owner holding a tenth of the jobs); a job's executions page: "
        f"`Store.list_executions` of one job with {tm['executions_per_job']} executions. Load average {_load(tm)}."
    )
    out += ["", f"| case | {tm['small']:,} jobs | {tm['large']:,} jobs | ratio | target |", "|---|---|---|---|---|"]
    for e in tm["cases"].values():
        out.append(
            f"| {e['label']} | {e['small_ms']:.2f} ms | {e['large_ms']:.2f} ms | **{e['ratio']:.2f}x** | <= 1.3x, "
            f"{verdict(e['ratio'] <= 1.3)} |"
        )
    if "due_pages" in tm:
        out += [""] + _wrap(
            f"The due jobs' rows sat on {tm['due_pages']['small']} and {tm['due_pages']['large']} heap pages after the "
            "claims (as loaded they sit together, 20 to a page): a claim or a give-back that cannot update a row in place (its page full, its dead "
            "versions still held by another session's transaction) moves it, and every later claim touches one "
            "page more; the leases are given back by key, so both databases see the same."
        )
    out += ["", "| relation | size |", "|---|---|"]
    for name, size in tm["sizes"].items():
        out.append(f"| `{name}` | {size / 2**20:,.0f} MiB |")
    out += [""] + _wrap(
        f"Storage: {tm['bytes_per_job']:.0f} bytes per job (`pg_total_relation_size` of the jobs table, its "
        f"indexes and TOAST, over the count); {tm['large']:,} jobs take {tm['jobs_bytes'] / 2**30:.1f} GiB. "
        "Executions are counted apart (one row per delivery, kept by day): see [capacity.md](capacity.md)."
    )
    return out + [""]


# -- the floor of a Python client -----------------------------------------------------------------

FLOOR_LABELS = {"store": "store", "floor": "Python floor (psycopg, no per-job work)", "pgbench": "pgbench"}


def client_floor_section(cf: dict[str, Any], command: str) -> list[str]:
    """How near the store and a Python client without per-job work come to pgbench, one run."""
    table = cf["table"]
    pgbench = table["pgbench"]["jobs_per_s"]
    out = [
        "## How near a Python client can come to pgbench",
        "",
        f"`{command}` (`--jobs`, `--workers`, `--rounds`)",
        "",
    ]
    out += _wrap(
        f"{cf['jobs']:,} due jobs drained by {cf['workers']} processes, claim batch {cf['batch']}, the median of "
        f"{cf['rounds']} round(s), the systems' order rotated: the store as above; a Python client running exactly "
        "pgbench's script through psycopg (prepared statements, the claim's rows aggregated by the server into the "
        "completion's outcomes, so that Python does nothing per job); pgbench. The store's distance from the floor "
        "is its work per job; the floor's distance from pgbench is Python and psycopg themselves."
    )
    out += ["", "| system | jobs/s | vs pgbench | Postgres CPU per job | client CPU per job |", "|---|---|---|---|---|"]
    for system, label in FLOOR_LABELS.items():
        row = table[system]
        server, client = row.get("server_cpu_ms_per_job"), row.get("client_cpu_us_per_job")
        out.append(
            f"| {label} | {row['jobs_per_s']:,.0f} | **{row['jobs_per_s'] / pgbench:.2f}x** | "
            + (f"{server * 1000:.1f} us" if server is not None else "-")
            + " | "
            + (f"{client:.1f} us" if client is not None and system != "pgbench" else "-")
            + " |"
        )
    out += [""] + _wrap(
        'Reading: see [capacity.md](capacity.md), "How near a Python client can come": the store\'s client work '
        "per job (each claimed row read into a job and an execution, each completion planned and encoded) and the "
        "Postgres work of its 34 columns a row are what keep it from 0.9x with two processes."
    )
    return out + [""]

"""Run every benchmark, then rewrite docs/benchmarks.md and its plots (docs/img/bench-*.png).

    .venv/bin/python bench/run_all.py [--quick] [--only NAME ...] [--render-only]

Each benchmark runs as its own process (``bench/<script>.py ... --json``); its results are kept
in ``bench/results/<name>.json``, so ``--only lateness`` re-runs one and the page is rebuilt
from the last results of the others, and ``--render-only`` rebuilds the page without running
anything. Set ``DATABASE_URL`` to measure against a running Postgres (otherwise each
benchmark starts an embedded one).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import render_perf

from common import ROOT, machine_summary, run_bench_script

RESULTS = ROOT / "bench" / "results"
DOC = ROOT / "docs" / "benchmarks.md"
IMG = ROOT / "docs" / "img"

# name -> (script, arguments, timeout in seconds)
BENCHMARKS: dict[str, tuple[str, list[str], float]] = {
    "throughput": ("throughput_vs_peers.py", [], 1200),
    "client_floor": ("client_floor.py", [], 900),
    "claim_latency": ("claim_throughput.py", ["--skip-throughput"], 900),
    "lateness": ("lateness_local.py", [], 600),
    "dispatch": ("dispatch_rate.py", [], 900),
    "cold_start": ("cold_start.py", [], 1500),
    "executions_index": ("executions_index.py", [], 1200),
    "deploy": ("deploy_sim.py", ["--max-fanouts", "4"], 1500),
    "planning_next": ("planning_next.py", [], 300),
    "schedules": ("schedules_vs_peers.py", [], 1800),
    "ten_million": ("ten_million.py", [], 3600),
}
# Run only when named (``--only ten_million``, ``make bench-10m``): loading ten million jobs takes minutes.
SEPARATE = ("ten_million",)
COMMANDS = {
    name: f".venv/bin/python bench/{script}{' ' + ' '.join(args) if args else ''}"
    for name, (script, args, _) in BENCHMARKS.items()
}


def load(name: str) -> dict[str, Any] | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


# -- plots ---------------------------------------------------------------------------------------


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_throughput(data: dict[str, Any], path: Path) -> None:
    plt = _plt()
    table = data["table"]
    workers = sorted(table, key=int)
    systems = [
        ("store", "store (local mode's batched path)"),
        ("store_per_job", "store, per job (executor Lambda)"),
        ("pgbench", "pgbench, the store's SQL"),
        ("pgqueuer", "pgqueuer"),
    ]
    systems = [(key, label) for key, label in systems if all(key in table[w] for w in workers)]
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    width = 0.8 / len(systems)
    for i, (key, label) in enumerate(systems):
        xs = [j + (i - (len(systems) - 1) / 2) * width for j in range(len(workers))]
        ys = [table[w][key] for w in workers]
        bars = ax.bar(xs, ys, width, label=label)
        for bar, y in zip(bars, ys):
            ax.annotate(f"{y:.0f}", (bar.get_x() + bar.get_width() / 2, y), ha="center", va="bottom", fontsize=8)
    ax.set_yscale("log")
    top = max(table[w][key] for w in workers for key, _ in systems)
    ax.set_ylim(top=top * 4)  # room for the legend above the bars
    ax.set_xticks(range(len(workers)))
    ax.set_xticklabels(
        [
            f"{w} process{'es' if w != '1' else ''}\nstore/pgbench {table[w]['store_vs_pgbench']:.2f}"
            f"\nstore/pgqueuer {table[w]['store_vs_pgqueuer']:.2f}"
            for w in workers
        ],
        fontsize=8,
    )
    ax.set_ylabel("jobs/s (log scale)")
    ax.set_title(
        f"claim + start + complete, {data['jobs']} jobs, batch {data['batch']} (median of {data['rounds']})",
        fontsize=10,
    )
    ax.legend(fontsize=8, loc="upper left", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_claim_latency(data: dict[str, Any], path: Path) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    small, large = data["small_ms"]["samples"], data["large_ms"]["samples"]
    ax.boxplot([small, large], orientation="horizontal", showfliers=False)
    ax.set_yticks([1, 2])
    ax.set_yticklabels([f"{data['small']:,} rows", f"{data['large']:,} rows"])
    ax.set_xlabel(f"ms to claim {data['due']} due jobs (whiskers 1.5 IQR, outliers hidden)")
    ax.set_title(f"claim latency, median ratio large/small {data['ratio']:.2f} (target <= 1.3)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_lateness(data: dict[str, Any], path: Path) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for run in data["runs"]:
        samples = run["lateness_samples"]
        n = len(samples)
        ax.plot(
            samples,
            [(i + 1) / n for i in range(n)],
            drawstyle="steps-post",
            label=f"--runners {run['runners']}: p50 {run['lateness_s']['p50']:.2f} s, "
            f"p99 {run['lateness_s']['p99']:.2f} s",
        )
    ax.axvline(1.0, color="red", linestyle="--", linewidth=1, label="target p99 <= 1 s")
    ax.set_xlabel("receipt time - X-Scheduler-Scheduled-At (s)")
    ax.set_ylabel("share of deliveries")
    ax.set_title(f"local mode: {data['jobs']} one-off jobs due at the same instant", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_dispatch(data: dict[str, Any], path: Path) -> None:
    plt = _plt()
    labels = ["fan-out\n(client as wired)", "fan-out\n(botocore defaults)", "invokes only\n(no database)"]
    keys = ["fanout", "fanout_botocore_defaults", "invokes_only"]
    ys = [data[k]["invokes_per_s"] for k in keys]
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    bars = ax.bar(labels, ys, color=["C0", "C0", "C7"])
    for bar, y in zip(bars, ys):
        ax.annotate(f"{y:.0f}", (bar.get_x() + bar.get_width() / 2, y), ha="center", va="bottom", fontsize=8)
    ax.axhline(500, color="red", linestyle="--", linewidth=1, label="target 500/s")
    ax.set_ylim(top=max(ys) * 1.15)
    ax.set_ylabel("Lambda invokes/s")
    ax.set_title(f"fan-out dispatch, {data['jobs']} due jobs, claim batch {data['batch']}", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_cold_start(data: dict[str, Any], path: Path) -> None:
    render_perf.plot_cold_start(data, path, _plt())


PLOTS: dict[str, tuple[str, Callable[[dict[str, Any], Path], None]]] = {
    "throughput": ("bench-throughput.png", plot_throughput),
    "claim_latency": ("bench-claim-latency.png", plot_claim_latency),
    "lateness": ("bench-lateness.png", plot_lateness),
    "dispatch": ("bench-dispatch.png", plot_dispatch),
    "cold_start": ("bench-cold-start.png", plot_cold_start),
    "executions_index": ("bench-executions-index.png", lambda data, path: plot_executions_index(data, path)),
    "deploy": ("bench-deploy.png", lambda data, path: plot_deploy(data, path)),
    "planning_next": ("bench-planning-next.png", lambda data, path: plot_planning_next(data, path)),
}


# -- the page --------------------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "met" if ok else "**not met**"


def render(results: dict[str, dict[str, Any] | None], meta: dict[str, Any]) -> str:
    out: list[str] = []
    w = out.append
    w("# Benchmarks")
    w("")
    w("<!-- Generated by bench/run_all.py from bench/results/*.json: edit the generator, not this page. -->")
    w("")
    w(
        f"Measured {meta['when']} on {meta['machine']} (a shared, noisy machine: each comparison is run "
        "side by side in one run, and the ratios matter more than the absolute figures). "
        f"{meta['postgres']}. Regenerate everything with `.venv/bin/python bench/run_all.py` "
        "(about 30 minutes here, more if the layer must be built; ten million jobs apart: `make bench-10m`, about 10 minutes; `--quick` for a small run, `--only NAME` for one benchmark, `--render-only` to "
        "rebuild this page from the last results). Each section gives the command that reproduces its figure; "
        "set `DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres` to use a running Postgres "
        "(otherwise an embedded one is started)."
    )
    w("")
    w("## Summary")
    w("")
    w("| figure | measured | target | |")
    w("|---|---|---|---|")
    tp, cl, la, di, cs = (results.get(k) for k in ("throughput", "claim_latency", "lateness", "dispatch", "cold_start"))
    if tp:
        for workers, row in sorted(tp["table"].items(), key=lambda x: int(x[0])):
            # With several processes the store should scale as its own statements do under pgbench.
            floor = 0.5 if int(workers) == 1 else 0.9
            w(
                f"| store vs pgbench, {workers} process(es) | {row['store']:.0f} vs {row['pgbench']:.0f} jobs/s = "
                f"**{row['store_vs_pgbench']:.2f}x** | >= {floor}x | {verdict(row['store_vs_pgbench'] >= floor)} |"
            )
        for workers, row in sorted(tp["table"].items(), key=lambda x: int(x[0])):
            w(
                f"| store vs pgqueuer, {workers} process(es) | {row['store']:.0f} vs {row['pgqueuer']:.0f} jobs/s = "
                f"**{row['store_vs_pgqueuer']:.2f}x** | >= 1.0x | {verdict(row['store_vs_pgqueuer'] >= 1.0)} |"
            )
    if cl:
        w(
            f"| claim latency, {cl['large']:,} vs {cl['small']:,} rows | {cl['large_ms']['median']:.2f} vs "
            f"{cl['small_ms']['median']:.2f} ms = **{cl['ratio']:.2f}x** | <= 1.3x | {verdict(cl['ratio'] <= 1.3)} |"
        )
    if results.get("executions_index"):
        w(executions_index_summary(results["executions_index"]))
    if results.get("deploy"):
        w(deploy_summary(results["deploy"]))
    if results.get("planning_next"):
        w(planning_next_summary(results["planning_next"]))
    if la:
        for run in la["runs"]:
            p99 = run["lateness_s"]["p99"]
            w(
                f"| local lateness, {la['jobs']} jobs due in one second, `--runners {run['runners']}` | "
                f"p50 {run['lateness_s']['p50']:.2f} s, **p99 {p99:.2f} s** | p99 <= 1 s | {verdict(p99 <= 1.0)} |"
            )
    if di:
        rate = di["fanout"]["invokes_per_s"]
        w(f"| fan-out dispatch through LambdaDispatch | **{rate:.0f} invokes/s** | >= 500/s | {verdict(rate >= 500)} |")
    if cs:
        out.extend(render_perf.cold_start_summary(cs))
    if results.get("schedules"):
        out.extend(render_perf.schedules_summary(results["schedules"]))
    if results.get("ten_million"):
        out.extend(render_perf.ten_million_summary(results["ten_million"]))
    w("")

    if tp:
        w("## Claim + start + complete throughput against pgbench and pgqueuer")
        w("")
        w(f"`{COMMANDS['throughput']}` (`--jobs`, `--workers`, `--rounds`, `--batch`, `--quick`)")
        w("")
        w(f"![throughput](img/{PLOTS['throughput'][0]})")
        w("")
        w(
            f"{tp['jobs']} due jobs drained per run ({tp.get('per_job_jobs', tp['jobs'])} for store per job), claim batch "
            f"{tp['batch']}, the median of {tp['rounds']} run(s) per system and worker count, the systems' order "
            "rotated between runs:"
        )
        w("")
        w(
            "- **store**: N worker *processes*, each doing what local mode's runner does with the store, less the "
            "delivery: the fan-out loop's `Store.claim_and_start(batch)` (the claim and the start of the batch in one "
            "statement) while a recorder thread records the batch before with `complete_executions` (one statement, "
            "each job's next occurrence planned in Python), each on a connection of its own, at most one batch "
            "waiting for the recorder."
        )
        w(
            "- **store per job**: as the deployment does it while few jobs are due at once: the fan-out's "
            "`claim_due(batch)`, then for each claim what an executor Lambda invoked with one claim does, "
            "`start_execution` and `complete_execution` (two statements per job; under a backlog an executor takes "
            "a group of claims and two statements serve the group: see the deployed path below). For scale; the "
            "targets are read on the row above."
        )
        w(
            "- **pgbench**: the store's statements from `queries.sql` (`claim_and_start`, its rows aggregated by the "
            "server into `complete_jobs`' JSON outcomes with `\\gset`, then `complete_jobs` of the whole batch), "
            "`-M prepared -c N -j N`. No Python and no client-side planning: the database's own limit for this work "
            "on this machine."
        )
        w(
            f"- **pgqueuer** {_pgq_version()}: its schema installed with `Queries.install()` in a separate database, "
            f"N no-op jobs enqueued with `Queries.enqueue`, drained by N processes each running a `QueueManager` in "
            f"drain mode with one no-op entrypoint, the same batch size, the {tp['pgqueuer_driver']} driver."
        )
        w("")
        order = [
            s
            for s in ("store", "store_per_job", "pgbench", "pgqueuer")
            if all(s in row for row in tp["table"].values())
        ]
        names = {"store": "store", "store_per_job": "store per job", "pgbench": "pgbench", "pgqueuer": "pgqueuer"}
        w(
            "| processes | " + " | ".join(f"{names[s]} jobs/s" for s in order) + " | store/pgbench | store/pgqueuer | "
            f"transactions per job ({' / '.join(names[s] for s in order)}) | Postgres CPU ms per job (same order) |"
        )
        w("|---|" + "---|" * (len(order) + 4))
        for workers, row in sorted(tp["table"].items(), key=lambda x: int(x[0])):
            x = tp.get("transactions_per_job", {}).get(workers, {})
            xs = " / ".join(f"{x[s]:.2f}" for s in order) if x else ""
            c = tp.get("server_cpu_ms_per_job", {}).get(workers, {})
            cpu_s = " / ".join(f"{c[s]:.3f}" for s in order) if c else "n/a"
            w(
                f"| {workers} | "
                + " | ".join(f"{row[s]:.0f}" for s in order)
                + f" | {row['store_vs_pgbench']:.2f} | {row['store_vs_pgqueuer']:.2f} | {xs} | {cpu_s} |"
            )
        w("")
        w(
            "Transactions per job: the change of `xact_commit + xact_rollback` in `pg_stat_database` over the run, "
            "divided by the jobs. pgbench's include the transactions it spends preparing its statements on each "
            "connection (its durable commits per job are the store's by construction); pgqueuer's include its "
            "empty polls at the end of the drain; autovacuum may add a few to any of them. Postgres CPU: the CPU "
            "time of the server's processes over the run (from /proc, the server being on this host), divided by the "
            "jobs; it includes whatever else the shared server did meanwhile."
        )
        w("")
        prof = tp.get("profile")
        if prof:
            w("### Where the store's time goes")
            w("")
            w(
                f"One store worker over {prof['jobs']} jobs ({prof['jobs_per_s']:.0f} jobs/s); round trips counted "
                f"from libpq's protocol trace over {prof['traced_jobs']} jobs (one `ReadyForQuery` per round trip):"
            )
            w("")
            w("| call | calls | median ms | round trips per call | ms per job |")
            w("|---|---|---|---|---|")
            for name in prof["calls"]:
                rts = prof["round_trips_per_call"].get(name)
                w(
                    f"| `{name}` | {prof['calls'][name]} | {prof['median_ms'][name]:.2f} | "
                    f"{'' if rts is None else f'{rts:.1f}'} | {prof['total_ms_per_job'][name]:.2f} |"
                )
            w("")
            rtj = prof.get("round_trips_per_job")
            w(
                f"Per job: {'' if rtj is None else f'{rtj:.2f} round trips, '}{prof['commits_per_job']:.2f} durable "
                f"commits. For scale, on the same connection: a bare round trip (`SELECT 1`) takes "
                f"{prof['select1_ms']:.2f} ms, a bare durable commit (a one-row UPDATE) {prof['commit_ms']:.2f} ms, and "
                f"planning the next occurrence in Python (`lifecycle.plan_completion`, the benchmark's one yearly "
                f"schedule) {prof['plan_completion_ms']:.3f} ms."
            )
            if prof.get("wal_bytes_per_job") is not None:
                w(
                    f"Each job writes about {prof['wal_bytes_per_job'] / 1024:.1f} KiB of WAL (cluster-wide reading), "
                    f"and an execution row takes about {prof['execution_bytes_per_row']:.0f} bytes with its indexes."
                )
            w("")
        w(throughput_reading(tp))
        w("")

    if cl:
        w("## Claim latency: 10k vs 1M rows")
        w("")
        w(f"`{COMMANDS['claim_latency']}` (`--small`, `--large`, `--due`, `--repeats`)")
        w("")
        w(f"![claim latency](img/{PLOTS['claim_latency'][0]})")
        w("")
        w(
            f"Claiming {cl['due']} due jobs from a table of {cl['small']:,} rows vs {cl['large']:,} rows (the rest due "
            f"tomorrow), {cl['repeats']} claims on each, alternating, the leases given back between claims (untimed):"
        )
        w("")
        w("| rows | median ms | p95 ms |")
        w("|---|---|---|")
        w(f"| {cl['small']:,} | {cl['small_ms']['median']:.2f} | {cl['small_ms']['p95']:.2f} |")
        w(f"| {cl['large']:,} | {cl['large_ms']['median']:.2f} | {cl['large_ms']['p95']:.2f} |")
        w("")
        w(
            f"Ratio of the medians: **{cl['ratio']:.2f}** (target at most 1.3): the partial index on `due_at` keeps the "
            "claim's cost on the due rows, not the table."
        )
        w("")

    if la:
        w("## End-to-end lateness in local mode")
        w("")
        w(f"`{COMMANDS['lateness']}` (`--jobs`, `--lead`, `--threads`, `--runners`, `--rounds`)")
        w("")
        w(f"![lateness](img/{PLOTS['lateness'][0]})")
        w("")
        first = la["runs"][0]
        w(
            f"`scheduler local --port 0 --database-url <fresh database> --runners N` as a child process, once per N; "
            f"{la['jobs']} one-off jobs created through `POST /v1/jobs` ({first['create_per_s']:.0f}/s with 8 clients), "
            f"all with the same `run_at` (a few seconds after the last was created), each targeting "
            + TARGET_KINDS[la.get("target", "threaded")]
            + " on loopback. Lateness = receipt time at the target - `X-Scheduler-Scheduled-At`. "
            f"{la.get('rounds', 1)} burst(s) per runner count; the table shows the burst with the median p99, and the "
            "last column every burst's p99."
        )
        w("")
        w(
            "| runner processes | received | duplicates | p50 | p90 | p99 | max | first / last delivery after run_at "
            "| burst rate | p99 of each burst |"
        )
        w("|---|---|---|---|---|---|---|---|---|---|")
        for run in la["runs"]:
            late = run["lateness_s"]
            rounds = ", ".join(f"{p:.2f}" for p in run.get("p99_rounds", [late["p99"]]))
            w(
                f"| {run['runners']} | {run['received']} / {run['jobs']} | {run['duplicates']} | {late['p50']:.3f} s | "
                f"{late['p90']:.3f} s | **{late['p99']:.3f} s** | {late['max']:.3f} s | "
                f"{run['first_after_due_s']:+.3f} s / {run['last_after_due_s']:+.3f} s | {run['deliveries_per_s']:.0f}/s | "
                f"{rounds} s |"
            )
        w("")
        w(lateness_reading(la))
        w("")

    if di:
        w("## Fan-out dispatch rate")
        w("")
        w(f"`{COMMANDS['dispatch']}` (`--jobs`, `--batch`, `--rounds`)")
        w("")
        w(f"![dispatch](img/{PLOTS['dispatch'][0]})")
        w("")
        w(
            f"`run_fanout(store, LambdaDispatch(client, name), budget_seconds=0, batch_size={di['batch']})` over "
            f"{di['jobs']} due jobs, the boto3 Lambda client pointed at a loopback server (its own process) that answers "
            "`POST /2015-03-31/functions/{name}/invocations` with 202 and an empty body, dummy credentials, "
            f"us-east-1; median of {di['rounds']} runs of each variant, order rotated:"
        )
        w("")
        w("| variant | invokes/s |")
        w("|---|---|")
        cpu_line = ""
        w(
            f"| fan-out, the client as `scheduler.wiring` builds it (a pooled connection per invoker thread, "
            "no client-side parameter validation) | "
            f"**{di['fanout']['invokes_per_s']:.0f}** |"
        )
        cpu_line = (
            f"The fan-out process spent {di['fanout']['cpu_ms_per_invoke']:.2f} ms of CPU per invoke (claims, "
            "signing, HTTP), which bounds a fan-out Lambda by its CPU share. "
            if di["fanout"].get("cpu_ms_per_invoke")
            else ""
        )
        w(
            f"| fan-out, a client of botocore's default configuration (10 pooled connections) | "
            f"{di['fanout_botocore_defaults']['invokes_per_s']:.0f} |"
        )
        w(
            f"| invokes only: the same invoker and client fed claims in the same batches, no database | "
            f"{di['invokes_only']['invokes_per_s']:.0f} |"
        )
        w("")
        w(
            "\n".join(
                _wrap(f"Fan-out / invokes only: {di['fanout_vs_invokes_only']:.2f}. " + cpu_line + DISPATCH_READING)
            )
        )
        w("")

    if results.get("client_floor"):
        out.extend(render_perf.client_floor_section(results["client_floor"], COMMANDS["client_floor"]))
    if cs:
        out.extend(render_perf.cold_start_section(cs, COMMANDS["cold_start"], PLOTS["cold_start"][0]))
    if results.get("schedules"):
        out.extend(render_perf.schedules_section(results["schedules"], COMMANDS["schedules"]))
    if results.get("ten_million"):
        out.extend(render_perf.ten_million_section(results["ten_million"], COMMANDS["ten_million"]))

    if results.get("executions_index"):
        out.extend(executions_index_section(results["executions_index"]))
    if results.get("deploy"):
        out.extend(deploy_section(results["deploy"]))
    if results.get("planning_next"):
        out.extend(planning_next_section(results["planning_next"]))

    w("## Caveats")
    w("")
    w(CAVEATS)
    w("")
    return "\n".join(out)


def _pgq_version() -> str:
    try:
        from importlib.metadata import version

        return version("pgqueuer")
    except Exception:
        return ""


def _span(values: list[float], fmt: str = ".2f", suffix: str = "") -> str:
    """``a to b`` over ``values``, or ``a`` alone when every value prints the same."""
    low, high = f"{min(values, default=0):{fmt}}{suffix}", f"{max(values, default=0):{fmt}}{suffix}"
    return low if low == high else f"{low} to {high}"


def throughput_reading(tp: dict[str, Any]) -> str:
    table = tp["table"]
    vs_bench = [row["store_vs_pgbench"] for row in table.values()]
    vs_pgq = [row["store_vs_pgqueuer"] for row in table.values()]
    per_job = [row["store_per_job"] / row["store"] for row in table.values() if "store_per_job" in row]
    xacts = tp.get("transactions_per_job", {})
    store_x = [x["store"] for x in xacts.values()]
    pgq_x = [x["pgqueuer"] for x in xacts.values()]
    bench_vs_pgq = [row["pgbench"] / row["pgqueuer"] for row in table.values()]
    text = [
        f"**Reading.** The store takes a batch in two statements (claim and start together, then every outcome "
        f"at once), so it commits {_span(store_x)} times per job against pgqueuer's {_span(pgq_x)}, and the "
        f"database runs that work {_span(bench_vs_pgq, '.1f', 'x')} as fast as pgqueuer drains its queue "
        "(pgbench against pgqueuer), although each job also leaves a row of history (an execution inserted as "
        "`running`, then updated with its outcome) and plans its next occurrence."
    ]
    text.append(
        f"Against pgqueuer the store reaches {_span(vs_pgq, '.2f', 'x')}, and against pgbench "
        f"running its own statements {_span(vs_bench, '.2f', 'x')}: what separates the store "
        "from pgbench is the Python client (psycopg turning the 34 columns of each started job into Python "
        "values, planning each job's next occurrence, encoding the outcomes), which shares the two "
        "cores with the server; a worker's claims and records overlap, as local mode's do."
    )
    server, client = tp.get("server_cpu_ms_per_job", {}), tp.get("client_cpu_us_per_job", {})
    busy = [w for w in sorted(table, key=int) if int(w) >= 2 and w in server and w in client]
    if busy:
        costs = "; ".join(
            f"{w} processes: the store {server[w]['store'] * 1000:.0f} us of Postgres and "
            f"{client[w]['store']:.0f} us of client, pgqueuer {server[w]['pgqueuer'] * 1000:.0f} and "
            f"{client[w]['pgqueuer']:.0f} us"
            for w in busy
        )
        text.append(
            "From two processes on, both keep the two cores busy, and the rate follows the CPU a job costs "
            f"Postgres and the client together ({costs})."
        )
    if per_job:
        text.append(
            f"The per-job path (an executor Lambda per job: two commits per job) runs at "
            f"{_span(per_job, '.2f', 'x')} of the batched one here; in the deployment its "
            "throughput comes from many executors at once, not from one process."
        )
    return "\n".join(_wrap(" ".join(text)))


def _wrap(text: str, width: int = 100) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width=width, break_on_hyphens=False, break_long_words=False)


TARGET_KINDS = {
    "asyncio": "a minimal asyncio HTTP server in the benchmark's process (`--target asyncio`, the default: "
    "a target elsewhere costs this machine nothing, and `http.server`'s 0.2 ms of CPU a request would be "
    "taken from the cores the runners share)",
    "threaded": "a threaded HTTP server (`http.server`, `--target threaded`)",
}


def lateness_reading(la: dict[str, Any]) -> str:
    runs = {run["runners"]: run for run in la["runs"]}
    one = runs.get(1) or la["runs"][0]
    text = (
        f"**Reading.** The first delivery leaves {one['first_after_due_s']:.2f} s after `run_at` (the fan-out "
        "sleeps until the next due time); the tail is the time the runners take to drain the burst. One runner "
        "process claims and starts a batch in one statement (no more than its 64 idle executor threads), "
        "delivers over kept-alive connections and records the outcomes in batches; it is bound by one core "
        f"(one Python process), at about {one['deliveries_per_s']:.0f} deliveries/s here, so its p99 is about "
        f"jobs / rate ({la['jobs']} / {one['deliveries_per_s']:.0f} = {la['jobs'] / one['deliveries_per_s']:.2f} s, "
        f"measured {one['lateness_s']['p99']:.2f} s)."
    )
    more = [run for run in la["runs"] if run["runners"] > 1]
    for run in more:
        faster = run["deliveries_per_s"] > one["deliveries_per_s"] * 1.1
        text += (
            f" With `--runners {run['runners']}` the processes claim disjoint batches from the same database "
            f"and the burst drains at {run['deliveries_per_s']:.0f}/s: p99 {run['lateness_s']['p99']:.2f} s"
            + (
                ". "
                if faster
                else ", no faster here: this machine has two cores, which one runner, Postgres, the API and the "
                "target already keep busy; more runners pay off with more cores. "
            )
            + "Bursts vary from run to run by 10-20% on this shared machine (the last column)."
        )
    text += (
        " In the deployment the burst is spread over executor Lambdas (one per job while few are due, groups of "
        "claims under a backlog), so the lateness there is bounded by the fan-outs' dispatch rate (next section), "
        "Lambda's async queue and the executors' concurrency, not by one process."
    )
    return "\n".join(_wrap(text))


DISPATCH_READING = (
    "The invoker's 16 threads share botocore's pool of 10 connections by default, so some connections are "
    'discarded and reopened (urllib3 warns "Connection pool is full"); a client built with '
    "`Config(max_pool_connections=16)` avoids that. On loopback an invoke is cheap, so the figure is mostly the "
    "client's own cost (signing and sending one request per job from Python threads); from a VPC in AWS each "
    "invoke takes about 10-20 ms, so 16 threads bound the rate to about 16 / invoke latency, and a 512 MB "
    "Lambda has about 0.3 vCPU for the signing (see [capacity.md](capacity.md))."
)


CAVEATS = """\
- The machine is shared (2 cores) and noisy: absolute figures move by 30% or more between runs;
  each comparison is made in one run, side by side, with the order of the systems rotated, and the
  median kept.
- Everything runs on one host: Postgres, the workers, the HTTP targets and the load generators
  compete for the same two cores, and loopback round trips (~0.05 ms) are far shorter than to RDS
  through RDS Proxy (~1 ms), so per-job costs that are round trips count for more in AWS. See
  [capacity.md](capacity.md) for the scaling to the deployment.
- pgqueuer and pgbench run against the same server, each in its own database; pgqueuer uses its
  defaults except the batch size (the same as ours) and log aggregation (turned off during the
  drain, as it would only add work)."""


# -- main ------------------------------------------------------------------------------------------


# -- GET /v1/executions: the index across a caller's jobs ------------------------------------------

_EXECUTION_CASES = (
    ("first_page", "first page"),
    ("after_cursor", "page after a cursor"),
    ("status_failed", "first page, `status=failed` (2% of the rows)"),
    ("status_running", "first page, `status=running` (20 live runs)"),
    ("status_lost", "first page, `status=lost` (30 rows)"),
)
_EXECUTION_PLOT_LABELS = {
    "first_page": "first page",
    "after_cursor": "after a cursor",
    "status_failed": "status=failed",
    "status_running": "status=running",
    "status_lost": "status=lost",
}


def plot_executions_index(data: dict[str, Any], path: Path) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    series, labels = [], []
    for key, _label in _EXECUTION_CASES:
        if key not in data:  # results of a run before the case was measured
            continue
        for size in ("small", "large"):
            series.append(data[key][size + "_ms"]["samples"])
            labels.append(f"{_EXECUTION_PLOT_LABELS[key]}, {data[size]:,}")
    ax.boxplot(series, orientation="horizontal", showfliers=False)
    ax.set_yticks(range(1, len(labels) + 1))
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xlabel(f"ms for a page of {data['limit']} (whiskers 1.5 IQR, outliers hidden)")
    ax.set_title(
        f"GET /v1/executions, one owner's {data['jobs']:,} jobs: first page ratio {data['ratio']:.2f}", fontsize=10
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_deploy(data: dict[str, Any], path: Path) -> None:
    """The deployment simulation: sustained jobs/s beside the per-job SQL limit."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    labels = ["simulated deployment", "per-job SQL limit (pgbench)"]
    values = [data["sustained"]["jobs_per_s"], data["per_job_sql"]["jobs_per_s"]]
    if data.get("grouped_sql"):
        labels.append(f"grouped SQL limit, groups of {data['grouped_sql']['group']} (pgbench)")
        values.append(data["grouped_sql"]["jobs_per_s"])
    bars = ax.barh(labels, values, color=["C0", "C7", "C2"][: len(values)])
    for bar, value in zip(bars, values, strict=True):
        ax.annotate(f"{value:.0f}/s", (value, bar.get_y() + bar.get_height() / 2), va="center", fontsize=8)
    ax.set_xlabel("jobs per second")
    ax.set_title(f"ratio {data['ratio']:.2f}; burst of {data['burst']['jobs']:,}: p99 {data['burst']['p99_s']:.1f} s")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def deploy_summary(dep: dict[str, Any]) -> str:
    """The summary table's rows of the deployment simulation."""
    burst = dep["burst"]
    return (
        f"| simulated deployment, sustained vs the per-job SQL limit | {dep['sustained']['jobs_per_s']:.0f} vs "
        f"{dep['per_job_sql']['jobs_per_s']:.0f} jobs/s = **{dep['ratio']:.2f}x** | >= 0.7x | "
        f"{verdict(dep['ratio'] >= 0.7)} |\n"
        f"| simulated deployment, burst of {burst['jobs']:,} due in one second | p50 {burst['p50_s']:.2f} s, "
        f"**p99 {burst['p99_s']:.2f} s** | p99 <= 10 s | {verdict(burst['p99_s'] <= 10)} |"
    )


def _db_cpu(figures: dict[str, Any], key: str = "db_cpu_ms_per_job") -> str:
    """ ", Postgres CPU x ms per job" when the run could read the server's CPU."""
    value = figures.get(key)
    return "" if value is None else f"; Postgres CPU {value:.2f} ms per job"


def deploy_section(dep: dict[str, Any]) -> list[str]:
    """The page's section of the deployment simulation."""
    cfg, sus, burst, sql = dep["config"], dep["sustained"], dep["burst"], dep["per_job_sql"]
    grouped = dep.get("grouped_sql")
    return [
        "## The deployed path, simulated",
        "",
        f"`{COMMANDS['deploy']}` (`make bench-deploy`; `--executors`, `--max-fanouts`, `--jobs`, `--seconds`, "
        "`--burst`, `--quick`)",
        "",
        f"![deployment simulation](img/{PLOTS['deploy'][0]})",
        "",
        "Fan-out processes run `fanout.run_lambda_invocation` (the fan-out handler's code) with `LambdaDispatch`, "
        "whose Lambda client (built as the fan-out Lambda builds it: invokes signed by `scheduler.transport.lambda_invoke`) "
        "calls a loopback Invoke API; it queues each asynchronous invoke (Lambda's async "
        f"queue) for {cfg['executors']} executor processes, each running the real `executor_handler` (start, "
        "HTTP delivery to a loopback target, completion) on real Postgres"
        + (
            f", whose executions table has {dep['partitions']} day partitions (a deployment keeping "
            f"{cfg.get('history_days', 30)} days of history)"
            if dep.get("partitions")
            else ""
        )
        + ". The fan-outs keep their live leases "
        f"under the executor's reserved concurrency ({cfg.get('executor_concurrency') or 'unbounded'}), as the "
        "fan-out handler does, and send a group of up to "
        f"{cfg.get('claims_per_invoke', 1)} claims an invoke under a backlog (`-c claims_per_invoke`), which one "
        "executor starts, delivers and records together. A primary fan-out starts helpers "
        f"through the same endpoint as the backlog calls for them, up to {cfg.get('max_fanouts', 1)}. The Invoke "
        "API and the target are minimal asyncio servers, so that the stand-ins cost the two cores little. Side by "
        f"side, pgbench runs the per-job path's own statements from `queries.sql` ({sql['clients']} clients: "
        "`claim_due` for a batch, then `start_execution` and `complete_job` per job, each its own commit), "
        f"sent as the executors send them through RDS Proxy (`-M {sql.get('mode', 'prepared')}`: planned at each "
        "call, since a server-side prepared statement would pin the proxy's connection)"
        + (
            f"; and the grouped path's (`start_executions` and `complete_jobs` per group of {grouped['group']}), "
            "the database's limit for the work the simulated deployment sends under a backlog."
            if grouped
            else "."
        ),
        "",
        "| figure | value |",
        "|---|---|",
        f"| sustained ({cfg['jobs']:,} jobs `@every 1s`, {sus['window_s']:.0f} s counted) | **{sus['jobs_per_s']:.0f} "
        "jobs/s** |",
        *(
            [
                f"| claims per executor invoke (mean); Postgres CPU per execution | {sus['claims_per_invoke']:.1f}"
                + (
                    f"; {sus['db_cpu_ms_per_execution']:.2f} ms |"
                    if sus.get("db_cpu_ms_per_execution") is not None
                    else " |"
                )
            ]
            if "claims_per_invoke" in sus
            else []
        ),
        f"| per-job SQL limit (pgbench) | {sql['jobs_per_s']:.0f} jobs/s{_db_cpu(sql)} |",
        *(
            [
                f"| same, statements prepared once per connection (`-M prepared`, not possible through RDS Proxy) | "
                f"{dep['per_job_sql_prepared']['jobs_per_s']:.0f} jobs/s (the deployment: "
                f"{dep['sustained']['jobs_per_s'] / dep['per_job_sql_prepared']['jobs_per_s']:.2f}x of it) |"
            ]
            if dep.get("per_job_sql_prepared")
            else []
        ),
        *(
            [
                f"| grouped SQL limit (pgbench, groups of {grouped['group']}) | {grouped['jobs_per_s']:.0f} jobs/s"
                f"{_db_cpu(grouped)} (the deployment: {sus['jobs_per_s'] / grouped['jobs_per_s']:.2f}x of it) |"
            ]
            if grouped
            else []
        ),
        f"| ratio | **{dep['ratio']:.2f}x** (target >= 0.7x) |",
        f"| fan-out CPU per claim dispatched | {sus['fanout_cpu_ms_per_invoke']:.2f} ms |",
        *(
            [f"| executor CPU per execution | {sus['executor_cpu_ms_per_execution']:.2f} ms |"]
            if "executor_cpu_ms_per_execution" in sus
            else []
        ),
        f"| burst of {burst['jobs']:,} due in one second: lateness p50 / p99 / max | {burst['p50_s']:.2f} / "
        f"**{burst['p99_s']:.2f}** / {burst['max_s']:.2f} s (target p99 <= 10 s) |",
        f"| burst drained | {burst['drain_s']:.1f} s after the first was due |",
        "",
        "Reading: every part shares two cores. Under the backlog the fan-outs sent the claims in groups (the "
        "mean above), so per job an executor process spends the CPU above (less than with one job an "
        "invocation: one start and a completion or two serve a group), a fan-out a small share, and Postgres a "
        "tenth to a fifth "
        "of the per-job path's work (the per-job and grouped SQL limits' Postgres CPU above; the simulation's "
        "own figure adds the fan-outs' polling and completions gathered fewer than a group at a time). So the "
        "deployment passes the per-job SQL limit, which counts the per-job statements alone, and the executors' "
        "Python, not the database, is what the two cores spend most on: the grouped SQL limit is far above. The "
        "burst drains at about the sustained rate. In AWS each executor has its own share of a vCPU and the "
        "database its own host: docs/capacity.md sizes the deployment from the per-job costs measured here, not "
        "from the simulated jobs/s.",
        "",
    ]


def executions_index_summary(ex: dict[str, Any]) -> str:
    """The summary table's row of the executions index benchmark."""
    fp = ex["first_page"]
    return (
        f"| GET /v1/executions first page, {ex['large']:,} vs {ex['small']:,} executions | "
        f"{fp['large_ms']['median']:.2f} vs {fp['small_ms']['median']:.2f} ms = **{fp['ratio']:.2f}x** | "
        f"near 1 (<= 1.3x) | {verdict(fp['ratio'] <= 1.3)} |"
    )


def executions_index_section(ex: dict[str, Any]) -> list[str]:
    """The page's section of the executions index benchmark."""
    out = [
        f"## Executions across jobs: {ex['small']:,} vs {ex['large']:,} executions",
        "",
        f"`{COMMANDS['executions_index']}` (`--jobs`, `--small`, `--large`, `--others`, `--repeats`, `--limit`)",
        "",
        f"![executions index](img/{PLOTS['executions_index'][0]})",
        "",
        f"One owner's {ex['jobs']:,} jobs with {ex['small']:,} vs {ex['large']:,} executions spread over them"
        + (f", and {ex['others']:,} executions of another owner in both tables" if ex.get("others") else "")
        + f"; `Store.list_owner_executions` (what `GET /v1/executions` calls) timed {ex['repeats']} times on "
        f"each, alternating, for a page of {ex['limit']}:",
        "",
        "| page | executions | median ms | p95 ms | ratio of the medians |",
        "|---|---|---|---|---|",
    ]
    for key, label in _EXECUTION_CASES:
        if key not in ex:  # results of a run before the case was measured
            continue
        for size in ("small", "large"):
            ms = ex[key][size + "_ms"]
            ratio = f"**{ex[key]['ratio']:.2f}**" if size == "large" else ""
            out.append(f"| {label} | {ex[size]:,} | {ms['median']:.2f} | {ms['p95']:.2f} | {ratio} |")
    out += [
        "",
        f"Each execution carries its job's owner, and the index on `(owner, started_at DESC, id DESC)` "
        f"gives one owner's executions in the page's order, the cursor's `(started_at, id) < (...)` being "
        f"its index condition; where one owner holds every row, as here, the planner may walk the "
        f"`started_at` index instead, which reads the same rows. Either way a page reads about `limit` "
        f"rows: the first page touched {ex['small_first_page_buffers']} vs "
        f"{ex['large_first_page_buffers']} buffers. A status filter walks the same order until it has a "
        f"page, so its cost follows the share of that status, not the table's size; the rare ones, fewer "
        f"than a page here, would have it walk every row, and are read where they are named instead: "
        f"`running` from the run state of each of the owner's jobs (every running execution is its job's "
        f"live run), `lost` from the owner's entries of `lost_executions` (migration 0028), each "
        f"execution probed by its day's primary key.",
        "",
    ]
    return out


# The cases of bench/planning_next.py, in the page's words.
_PLANNING_CASES = {
    "calendar_two_expressions_and_spread": "a calendar (shift), two expressions and a stable spread",
    "two_expressions_and_spread": "two expressions and a stable spread",
    "two_expressions_random_spread": "two expressions and a random spread",
    "one_expression": "one expression, no spread (most jobs)",
    "burst_one_expression_many_creations": "a burst of {jobs:,} such jobs, created apart",
}


def _planning_label(name: str, case: dict[str, Any]) -> str:
    """A case's words, the burst's with the number of jobs it ran (fewer with ``--quick``)."""
    return _PLANNING_CASES[name].format(jobs=case.get("jobs", 10_000))


def plot_planning_next(data: dict[str, Any], path: Path) -> None:
    plt = _plt()
    cases = [name for name in _PLANNING_CASES if name in data["cases"]]
    fig, ax = plt.subplots(figsize=(8, 3.4))
    values = [data["cases"][name]["us_per_plan"] for name in cases]
    bars = ax.barh([_planning_label(name, data["cases"][name]) for name in cases], values)
    for bar, value in zip(bars, values):
        ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, f" {value:.1f}", va="center")
    ax.axvline(data["target_us"], color="grey", linestyle="--", label=f"target {data['target_us']:.0f} us")
    ax.set_xlabel("microseconds per next-time planning")
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def planning_next_summary(pn: dict[str, Any]) -> str:
    """The summary table's row of the planning benchmark."""
    case = "calendar_two_expressions_and_spread"
    label = "a calendar, two expressions and a spread"
    if case not in pn["cases"]:  # results of before the calendar's case
        case, label = "two_expressions_and_spread", "two expressions and a spread"
    us = pn["cases"][case]["us_per_plan"]
    return (
        f"| next-time planning, {label} | **{us:.1f} us** | < {pn['target_us']:.0f} us | "
        f"{verdict(us < pn['target_us'])} |"
    )


def planning_next_section(pn: dict[str, Any]) -> list[str]:
    """The page's section of the planning benchmark."""
    out = [
        "## Next-time planning of a job with a calendar, several expressions and a spread",
        "",
        f"`{COMMANDS['planning_next']}` (`--plans`, `--repeats`, `--quick`)",
        "",
        f"![planning next](img/{PLOTS['planning_next'][0]})",
        "",
        f"`lifecycle.plan_completion` (what a runner computes when a run ends: the next occurrence and "
        f"its fire time) timed over {pn['plans']:,} runs in a row, each planned from the previous one, "
        f"best of {pn['repeats']}; no database. The burst's case plans one run of each of its jobs, all "
        "ending the same occurrence: the jobs share their parsed schedule whenever they were created "
        "(before the second stop of 2026-12-05 each job's creation time keyed a parse of its own, and a "
        "burst of 10,000 such jobs cost about 35 us a planning, measured beside this code).",
        "",
        "| job | us per planning |",
        "|---|---|",
    ]
    for name in _PLANNING_CASES:
        if name in pn["cases"]:
            out.append(f"| {_planning_label(name, pn['cases'][name])} | {pn['cases'][name]['us_per_plan']:.1f} |")
    out.append("")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="pass --quick to every benchmark")
    parser.add_argument("--only", nargs="+", choices=list(BENCHMARKS), help="run these benchmarks only")
    parser.add_argument("--render-only", action="store_true", help="run nothing; rebuild the page from bench/results")
    args = parser.parse_args(argv)

    RESULTS.mkdir(parents=True, exist_ok=True)
    IMG.mkdir(parents=True, exist_ok=True)
    names = [] if args.render_only else (args.only or [n for n in BENCHMARKS if n not in SEPARATE])
    failed = []
    began = time.monotonic()
    for name in names:
        script, extra, timeout = BENCHMARKS[name]
        target = RESULTS / f"{name}.json"
        tmp = target.with_suffix(".json.tmp")
        try:
            data = run_bench_script(script, [*extra, *(["--quick"] if args.quick else [])], str(tmp), timeout=timeout)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError, ValueError) as exc:
            print(f"!! {name} failed: {exc}", file=sys.stderr, flush=True)
            failed.append(name)
            tmp.unlink(missing_ok=True)
            continue
        data["quick"] = args.quick
        data["measured_at"] = datetime.now(UTC).isoformat(timespec="seconds")
        data["command"] = COMMANDS[name] + (" --quick" if args.quick else "")
        target.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
        tmp.unlink(missing_ok=True)
    results = {name: load(name) for name in BENCHMARKS}
    for name, data in results.items():
        if data and name in PLOTS:
            filename, plot = PLOTS[name]
            plot(data, IMG / filename)
    machine = machine_summary()
    postgres = next((f"Postgres {d['postgres']}" for d in results.values() if d and d.get("postgres")), "Postgres")
    stamps = sorted({d["measured_at"][:10] for d in results.values() if d and d.get("measured_at")})
    meta = {
        "when": " to ".join(dict.fromkeys([stamps[0], stamps[-1]])) if stamps else "(date unknown)",
        "machine": f"{machine['cpus']} CPUs, {machine.get('memory_gib', '?')} GiB, {machine['platform']}, "
        f"Python {machine['python']}",
        "postgres": postgres,
    }
    if any(d and d.get("quick") for d in results.values()):
        meta["when"] += " (some figures from a --quick run)"
    DOC.write_text(render(results, meta) + "\n", encoding="utf-8")
    print(
        f"wrote {DOC.relative_to(ROOT)} and {len([d for d in results.values() if d])} plot(s) under "
        f"{IMG.relative_to(ROOT)} in {time.monotonic() - began:.0f} s",
        flush=True,
    )
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

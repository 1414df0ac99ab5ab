"""The store's batched path (what local mode's runner does per batch, less the delivery) of an
earlier revision against this tree, in turns, on the same Postgres: is a change slower for jobs
that use none of its features?

    .venv/bin/python bench/before_after.py REV [--jobs 8000] [--rounds 4] [--workers 1 2]

REV (a commit, tag or branch) is checked out in a temporary git worktree. Each round drains
``--jobs`` due jobs with ``throughput_vs_peers.run_store`` once per tree and worker count, the
order of the two trees alternating between rounds (ABBA), each run in a fresh interpreter with
that tree's ``functions/`` and ``bench/`` on its path. Prints each run, then per worker count the
medians side by side: jobs/s, the workers' client CPU per job and the server's CPU per job, and
the ratio after / before. The jobs are plain ``* * * * *`` HTTP jobs (``tests.support.insert_due_jobs``):
no calendar, union, spread, pause, override, chain, alert or limit.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import json
from common import fresh_database, postgres_server
from throughput_vs_peers import run_store
with postgres_server() as server, fresh_database(server, "before_after") as url:
    print("RESULT", json.dumps(run_store(url, {jobs}, {workers}, 50)))
"""


def one_run(tree: Path, jobs: int, workers: int) -> dict[str, Any]:
    """One drain by ``tree``'s code, in an interpreter of its own."""
    env = dict(os.environ, PYTHONPATH=f"{tree}/functions:{tree}:{tree}/bench")
    code = CHILD.format(jobs=jobs, workers=workers)
    done = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line.removeprefix("RESULT "))
    raise RuntimeError(f"{tree}: no result\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")


def median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(run[key] for run in runs if run[key] is not None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rev", help="the earlier revision (commit, tag or branch)")
    parser.add_argument("--jobs", type=int, default=8000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="before-") as tmp:
        before = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(before), args.rev], check=True)
        try:
            trees = {"before": before, "after": ROOT}
            runs: dict[tuple[str, int], list[dict[str, Any]]] = {(k, w): [] for k in trees for w in args.workers}
            for round_ in range(args.rounds):
                order = ["before", "after"] if round_ % 2 == 0 else ["after", "before"]
                for workers in args.workers:
                    for name in order:
                        run = one_run(trees[name], args.jobs, workers)
                        runs[(name, workers)].append(run)
                        print(
                            f"round {round_} {name:6} x{workers}: {run['jobs_per_s']:.0f} jobs/s, "
                            f"client {run['client_cpu_us_per_job']:.1f} us/job, server {run['server_cpu_ms_per_job']} ms/job",
                            flush=True,
                        )
            for workers in args.workers:
                b, a = runs[("before", workers)], runs[("after", workers)]
                rate_b, rate_a = median(b, "jobs_per_s"), median(a, "jobs_per_s")
                print(
                    f"x{workers}: jobs/s {rate_b:.0f} -> {rate_a:.0f} ({rate_a / rate_b:.3f}x); "
                    f"client us/job {median(b, 'client_cpu_us_per_job'):.1f} -> {median(a, 'client_cpu_us_per_job'):.1f}; "
                    f"server ms/job {median(b, 'server_cpu_ms_per_job'):.4f} -> {median(a, 'server_cpu_ms_per_job'):.4f}"
                )
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before)], check=False)


if __name__ == "__main__":
    main()

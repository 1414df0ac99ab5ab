"""The CLI's whole-listing commands at scale: ``jobs list --all`` (table, JSON, YAML), ``export``
(YAML, JSON) and ``apply --dry-run`` of that export (and, for scale, ``jobs list``: one page),
against ``scheduler local`` with --jobs jobs.

    .venv/bin/python bench/cli_listing.py [--jobs 50000] [--tree LABEL=PATH ...] [--json PATH]

The jobs are inserted with SQL (one statement: filling 50,000 through the API would take minutes),
owned by local mode's principal, none due. Each command runs as its own process, once per
``--tree`` (the CLI of that checkout: ``PATH/functions`` on PYTHONPATH; the server is this
checkout's), against the same server and database; for each it prints the time to the first
byte of standard output, the total time, the peak RSS of the CLI process (``wait4``'s
``ru_maxrss``), and a digest of the output, so that two trees can be compared byte for byte.
``apply --dry-run`` reads the YAML export written by the first tree.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import ROOT, fresh_database, machine_summary, postgres_server, write_json
from scheduler.local.runtime import LOCAL_PRINCIPAL
from scheduler.store.db import make_pool
from tests.support import LocalScheduler, insert_jobs_sql

COMMANDS: dict[str, list[str]] = {
    "one page": ["jobs", "list"],  # the CLI's own floor: the interpreter, its imports, a page
    "list table": ["jobs", "list", "--all"],
    "list json": ["jobs", "list", "--all", "-o", "json"],
    "list yaml": ["jobs", "list", "--all", "-o", "yaml"],
    "export yaml": ["export"],
    "export json": ["export", "-o", "json"],
    "apply dry-run": ["apply", "--dry-run", "-f", "{export}"],
}


def fill(url: str, jobs: int) -> None:
    """``jobs`` jobs of local mode's principal, not due (paused a year ahead), each with a
    description, tags, a time zone and an HTTP target with a header and a body."""
    pool = make_pool(url, min_size=1, max_size=1)
    with pool.connection() as conn:
        conn.execute(
            insert_jobs_sql(
                "id, owner, name, description, tags, timezone, schedule, target, retry, state, "
                "scheduled_at, next_run_at",
                """
                SELECT gen_random_uuid(), %(owner)s, 'job-' || lpad(g::text, 6, '0'),
                       'nightly export of the ledger number ' || g,
                       ARRAY['team-' || (g %% 20), 'bench'], 'Europe/Berlin', '15 3 * * *',
                       jsonb_build_object('type', 'http', 'method', 'POST',
                                          'url', 'https://hooks.example.com/ledger/' || g,
                                          'headers', jsonb_build_object('X-Ledger', g::text),
                                          'body', '{"ledger": ' || g || ', "at": "{{scheduled_at}}"}'),
                       '{"max_attempts": 3, "min_backoff_seconds": 1, "max_backoff_seconds": 60}'::jsonb,
                       'active', now() + interval '300 days', now() + interval '300 days'
                FROM generate_series(1, %(count)s) AS g""",
            ),
            {"owner": LOCAL_PRINCIPAL, "count": jobs},
        )
    pool.close()


def run_cli(tree: str, endpoint: str, argv: list[str], keep: Path | None = None) -> dict[str, Any]:
    """One CLI process: its time to the first byte of stdout, total time, peak RSS and output digest."""
    env = {**os.environ, "PYTHONPATH": str(Path(tree) / "functions"), "SCHEDULER_ENDPOINT": endpoint}
    digest, size, first = hashlib.sha256(), 0, None
    began = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "scheduler.cli", *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out = keep.open("wb") if keep else None
    assert process.stdout is not None and process.stderr is not None
    while chunk := process.stdout.read1(1 << 16):
        first = first if first is not None else time.monotonic() - began
        digest.update(chunk)
        size += len(chunk)
        if out:
            out.write(chunk)
    if out:
        out.close()
    error = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    total = time.monotonic() - began
    process.returncode = os.waitstatus_to_exitcode(status)
    return {
        "exit": process.returncode,
        "first_byte_s": round(first, 3) if first is not None else None,
        "total_s": round(total, 3),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "bytes": size,
        "sha256": digest.hexdigest()[:16],
        "stderr": error.decode("utf-8", "replace")[-300:],
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=50_000, help="jobs stored (default 50000)")
    parser.add_argument("--tree", action="append", metavar="LABEL=PATH", help="a checkout whose CLI runs (repeatable)")
    parser.add_argument("--only", action="append", choices=tuple(COMMANDS), help="only these commands (repeatable)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    trees = [tuple(t.split("=", 1)) for t in args.tree or [f"this={ROOT}"]]
    results: dict[str, Any] = {"benchmark": "cli_listing", "jobs": args.jobs, "machine": machine_summary(), "runs": []}
    with (
        postgres_server() as server,
        fresh_database(server, "clilist") as url,
        tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp,
    ):
        fill(url, args.jobs)
        api = LocalScheduler(url, str(Path(tmp) / "data"))
        try:
            export = Path(tmp) / "export.yaml"
            for name, command in COMMANDS.items():
                if args.only and name not in args.only and not (name == "export yaml" and not export.exists()):
                    continue
                for label, tree in trees:
                    keep = export if name == "export yaml" and not export.exists() else None
                    argv_ = [part.replace("{export}", str(export)) for part in command]
                    run = {"command": name, "tree": label, **run_cli(tree, api.url, argv_, keep)}
                    results["runs"].append(run)
                    print(
                        f"{name:14} {label:8} exit {run['exit']}  first byte {run['first_byte_s']} s  "
                        f"total {run['total_s']} s  peak RSS {run['peak_rss_mb']} MB  "
                        f"{run['bytes']:,} bytes sha256 {run['sha256']}",
                        flush=True,
                    )
        finally:
            api.stop()
    write_json(args.json, results)
    return results


if __name__ == "__main__":
    main()

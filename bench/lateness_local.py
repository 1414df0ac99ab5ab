"""End-to-end lateness in local mode: 1,000 one-off jobs due in the same second.

    .venv/bin/python bench/lateness_local.py [--jobs 1000] [--lead 10] [--runners 1 2] [--quick]

For each ``--runners`` count, starts ``scheduler local --port 0 --database-url <a fresh database>
--runners N`` as a child process (the real command: API, fan-out loop and executors in one
process, and N - 1 more runner processes), creates N one-off jobs
through its HTTP API (``POST /v1/jobs``), all with the same ``run_at`` about ``--lead`` seconds
ahead, each targeting an HTTP server on loopback in this process (``--target``: a minimal asyncio
server by default, or http.server with a thread per connection). Lateness is the
receipt time at that server minus the job's ``X-Scheduler-Scheduled-At`` header (same machine,
same clock as the database). Prints p50 / p90 / p99 / max and how long the burst took to
deliver, for each of ``--rounds`` bursts; the burst with the median p99 is reported. Target:
p99 at most 1 s.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from common import (
    ROOT,
    LoopbackServer,
    fresh_database,
    machine_summary,
    percentile,
    postgres_server,
    progress,
    server_version,
    write_json,
)

BANNER = re.compile(r"scheduler local: API (http://127\.0\.0\.1:(\d+))/v1")


def scheduler_command() -> list[str]:
    """``scheduler`` (the console script next to this interpreter), else the same entry point."""
    script = Path(sys.executable).with_name("scheduler")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from scheduler.cli import main; sys.exit(main(sys.argv[1:]))"]


class LocalScheduler:
    """``scheduler local`` as a child process; ``api`` is its base URL once the banner is out."""

    def __init__(self, database_url: str, data_dir: str, startup_timeout: float = 90.0, runners: int = 1) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "functions"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        env.pop("DATABASE_URL", None)  # the command line names the database
        cmd = [
            *scheduler_command(),
            "local",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--database-url",
            database_url,
            "--data-dir",
            data_dir,
            "--runners",
            str(runners),
        ]
        self.proc = subprocess.Popen(
            cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=data_dir
        )
        self.output: list[str] = []
        self._port: int | None = None
        self._ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        if not self._ready.wait(startup_timeout) or self._port is None:
            self.stop()
            raise RuntimeError("scheduler local did not print its banner:\n" + "".join(self.output[-30:]))
        self.port = self._port
        self.api = f"http://127.0.0.1:{self.port}/v1"

    def _read(self) -> None:
        for line in self.proc.stdout:  # drained to the end so the child never blocks on a full pipe
            if len(self.output) < 2000:
                self.output.append(line)
            m = BANNER.search(line)
            if m and self._port is None:
                self._port = int(m.group(2))
                self._ready.set()
        self._ready.set()

    def stop(self, timeout: float = 30.0) -> int | None:
        """Ctrl-C (SIGINT), as a user would; killed if it does not stop in time."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode


class ApiClient:
    """One keep-alive connection per thread to the local API."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.local = threading.local()

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
        data = json.dumps(body).encode()
        for attempt in (1, 2):
            conn = getattr(self.local, "conn", None)
            if conn is None:
                conn = self.local.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            try:
                conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                return resp.status, resp.read()
            except (http.client.HTTPException, ConnectionError):
                conn.close()
                self.local.conn = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")


def create_jobs(client: ApiClient, jobs: int, run_at: datetime, target_url: str, threads: int) -> float:
    """POST the jobs with ``threads`` concurrent clients; returns the seconds it took."""
    stamp = run_at.isoformat()
    bar = progress(jobs, "creating jobs")
    lock = threading.Lock()

    def create(i: int) -> None:
        status, body = client.post(
            "/v1/jobs",
            {
                "name": f"lateness-{i:05d}",
                "run_at": stamp,
                "target": {"type": "http", "url": target_url, "method": "POST", "timeout_seconds": 10},
                "retry": {"max_attempts": 1},
            },
        )
        if status != 201:
            raise RuntimeError(f"POST /v1/jobs answered {status}: {body[:300]!r}")
        with lock:
            bar.update(1)

    began = time.monotonic()
    try:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            list(pool.map(create, range(jobs)))
    finally:
        bar.close()
    return time.monotonic() - began


def parse_time(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def measure(args: argparse.Namespace, runners: int) -> dict[str, Any]:
    """One burst: a fresh database, ``scheduler local --runners N``, the jobs created, then
    delivered; the lateness of each delivery."""
    results: dict[str, Any] = {"runners": runners, "jobs": args.jobs}
    target = LoopbackServer(200, kind=args.target)
    try:
        with (
            postgres_server() as server,
            fresh_database(server, "late") as url,
            tempfile.TemporaryDirectory(prefix="bench-local-") as data_dir,
        ):
            results["postgres"] = server_version(url)
            local = LocalScheduler(url, data_dir, runners=runners)
            try:
                client = ApiClient(local.port)
                # Warm the API (first request imports and connects), outside the clock.
                status, _ = client.post(
                    "/v1/jobs",
                    {
                        "name": "warm-up",
                        "schedule": "0 0 1 1 *",
                        "target": {"type": "http", "url": target.url + "/warm"},
                    },
                )
                if status != 201:
                    raise RuntimeError(f"warm-up POST /v1/jobs answered {status}")
                run_at = datetime.fromtimestamp(math.ceil(time.time() + args.lead), tz=UTC)
                print(
                    f"{args.jobs} one-off jobs due at {run_at.isoformat()} -> {target.url}/hook "
                    f"(scheduler local --runners {runners} on port {local.port})",
                    flush=True,
                )
                created_in = create_jobs(client, args.jobs, run_at, target.url + "/hook", args.threads)
                margin = run_at.timestamp() - time.time()
                results.update(create_seconds=created_in, create_per_s=args.jobs / created_in, margin_seconds=margin)
                print(
                    f"  created in {created_in:.1f} s ({args.jobs / created_in:.0f}/s); "
                    f"{margin:.1f} s to spare before run_at",
                    flush=True,
                )
                if margin < 0.5:
                    print("  WARNING: the jobs were not all created before run_at; raise --lead", flush=True)
                    results["warning"] = "creation ended after run_at - 0.5 s: the figures mix creation and delivery"
                bar = progress(args.jobs, "deliveries")
                got = target.wait_for(
                    args.jobs, timeout=max(margin, 0) + 120, on_progress=lambda n: bar.update(n - bar.n)
                )
                bar.close()
                time.sleep(1.0)  # duplicates arriving late would show up
            finally:
                code = local.stop()
                results["local_exit_code"] = code
    finally:
        target.close()
    received = list(target.received)
    keys = [h.get("Idempotency-Key") for _, h in received]
    lateness = [
        arrived - parse_time(h["X-Scheduler-Scheduled-At"])
        for arrived, h in received
        if h.get("X-Scheduler-Scheduled-At")
    ]
    due = run_at.timestamp()
    arrivals = sorted(a for a, _ in received)
    results.update(
        received=len(received),
        duplicates=len(keys) - len(set(keys)),
        lateness_s={
            "p50": percentile(lateness, 50),
            "p90": percentile(lateness, 90),
            "p99": percentile(lateness, 99),
            "max": max(lateness, default=math.nan),
            "min": min(lateness, default=math.nan),
        },
        first_after_due_s=(arrivals[0] - due) if arrivals else None,
        last_after_due_s=(arrivals[-1] - due) if arrivals else None,
        deliveries_per_s=(len(arrivals) - 1) / (arrivals[-1] - arrivals[0]) if len(arrivals) > 1 else None,
        lateness_samples=sorted(round(x, 4) for x in lateness),
    )
    if got < args.jobs:
        print(f"  ONLY {got} of {args.jobs} deliveries arrived", flush=True)
    late = results["lateness_s"]
    print(
        f"  received {len(received)} ({results['duplicates']} duplicates); lateness p50 {late['p50']:.3f} s, "
        f"p90 {late['p90']:.3f} s, p99 {late['p99']:.3f} s (target <= 1.0), max {late['max']:.3f} s",
        flush=True,
    )
    if arrivals:
        print(
            f"  first delivery {results['first_after_due_s']:+.3f} s after run_at, last {results['last_after_due_s']:+.3f} s; "
            f"{results['deliveries_per_s']:.0f} deliveries/s during the burst",
            flush=True,
        )
    return results


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument(
        "--lead", type=float, default=10.0, help="seconds between the start of the creation and run_at (default 10)"
    )
    parser.add_argument("--threads", type=int, default=8, help="concurrent API clients creating the jobs")
    parser.add_argument(
        "--runners",
        type=int,
        nargs="+",
        default=[1, 2],
        help="runner processes of scheduler local, one burst each (default: 1 2)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="bursts per runner count; the one with the median p99 is reported (default 3)",
    )
    parser.add_argument(
        "--target",
        choices=("asyncio", "threaded"),
        default="asyncio",
        help="the loopback target: a minimal asyncio server (default: it takes almost none of the two cores "
        "the runners share), or http.server with a thread per connection (about 0.2 ms of CPU a request, "
        "the target of earlier runs)",
    )
    parser.add_argument("--quick", action="store_true", help="a small run: 200 jobs, one round")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.jobs, args.rounds = min(args.jobs, 200), 1
    runs = []
    for runners in args.runners:
        bursts = sorted((measure(args, runners) for _ in range(args.rounds)), key=lambda r: r["lateness_s"]["p99"])
        median = bursts[len(bursts) // 2]
        median["p99_rounds"] = [b["lateness_s"]["p99"] for b in bursts]
        print(
            f"--runners {runners}: p99 over {args.rounds} burst(s) "
            f"{', '.join(f'{p:.3f}' for p in median['p99_rounds'])} s; median {median['lateness_s']['p99']:.3f} s",
            flush=True,
        )
        runs.append(median)
    results: dict[str, Any] = {
        "benchmark": "lateness_local",
        "jobs": args.jobs,
        "rounds": args.rounds,
        "target": args.target,
        "machine": machine_summary(),
        "runs": runs,
    }
    write_json(args.json, results)
    return results


if __name__ == "__main__":
    main()

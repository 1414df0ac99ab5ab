"""The scheduling workload against a peer: many recurring jobs firing on time, local mode vs APScheduler.

    .venv/bin/python bench/schedules_vs_peers.py [--quick] [--workloads minute-2000 ...] [--systems ...]

Workloads (``--quick``: 200 / 1,000 / 200 jobs and a 10 s window):

- ``minute-2000``, ``minute-10000``: 2,000 and 10,000 jobs due every minute, all at the same second.
  **Shortened form:** the schedules have minute precision (``* * * * *`` fires at second 0), so
  instead of waiting for a minute boundary each job is ``@every 60s`` from one ``start_at`` a few
  seconds after the jobs are created: the same burst (every job due at one instant, once a minute),
  without waiting up to a minute for the boundary. One burst is measured: the first.
- ``every1s-1000``: 1,000 jobs on ``@every 1s``, measured over ``--window`` seconds (20).

Systems, each delivering to the same loopback no-op HTTP target, a process of its own (the
asyncio server of ``common.LoopbackServer``):

- ``local``: ``scheduler local --runners N`` (``--local-runners``, default one per core: the first
  process serves the API and runs a fan-out loop and executors, each other one a fan-out loop and
  executors), on a fresh database; the jobs are created through its API (``POST /v1/jobs``, http
  targets).
- ``apscheduler-memory`` / ``apscheduler-sql``: APScheduler 3.11's ``BackgroundScheduler`` with a
  ``ThreadPoolExecutor`` (``--ap-threads``, 20) in a process of its own, the memory job store or the
  ``SQLAlchemyJobStore`` on a fresh database of the same Postgres (psycopg 3); each job an
  ``IntervalTrigger`` from the same start, ``coalesce=False``, no misfire grace limit (every
  occurrence runs, as local mode's), calling ``deliver`` below: one ``requests`` POST with a
  keep-alive session per thread.

Figures, per workload and system: lateness (arrival at the target minus the occurrence's due time:
local mode sends it in ``X-Scheduler-Scheduled-At``; for APScheduler the k-th arrival of a job is
its k-th occurrence) p50/p99; deliveries/s; CPU per delivery of the scheduler's processes plus its
Postgres backends (``/proc/<pid>/stat`` of the processes, ``/proc/<pid>/schedstat`` of the
backends connected to its database, sampled every 0.2 s, between just before the first due time and the last expected
arrival), and with the target's CPU (``c``); peak RSS of the scheduler's processes. Targets
(issue 36): CPU per delivery at most 0.4 ms; at least 2x APScheduler's firings per CPU second
against both stores; the burst's p99 at most 1.2 x N x c / 2 (two cores).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from common import (
    ROOT,
    checkpoint,
    fresh_database,
    machine_summary,
    percentile,
    postgres_server,
    server_version,
    wait_until_quiet,
    write_json,
)

HERE = Path(__file__).resolve().parent
TICK = os.sysconf("SC_CLK_TCK")
WORKLOADS = {"minute-2000": (2000, 60), "minute-10000": (10000, 60), "every1s-1000": (1000, 1)}
QUICK = {"minute-2000": 200, "minute-10000": 1000, "every1s-1000": 200}
SYSTEMS = ("local", "apscheduler-memory", "apscheduler-sql")
CPU_TARGET_MS = 0.4
# Local mode's runner processes: one per core (at most 4). A process's Python runs on one core at a
# time (the GIL), so one runner drains a burst no faster than its own CPU allows, with a core idle.
RUNNERS = min(os.cpu_count() or 1, 4)


# -- /proc ------------------------------------------------------------------------------------------


def cpu_seconds(pid: int, one_thread: bool = False) -> float | None:
    """CPU time of a process so far: for a process of one thread (a Postgres backend), its
    nanoseconds on a CPU (``/proc/<pid>/schedstat``); else its threads' user and
    system time in clock ticks (``/proc/<pid>/stat``, dead threads included). A tick is a
    hundredth of a second: a dozen backends read in ticks could each be 10 ms off, on a burst
    that costs Postgres a few tenths of a second in all."""
    try:
        if one_thread:
            return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError, ValueError):
        return None
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    children: dict[int, list[int]] = defaultdict(list)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children[parent].append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


class CpuMeter:
    """CPU ticks of a process tree, of the Postgres backends connected to ``database_url``'s
    database and of the target, sampled in a thread (a backend that exits keeps its last sample)."""

    def __init__(self, root_pid: int, target_pid: int, database_url: str | None) -> None:
        import psycopg

        self.root_pid, self.target_pid = root_pid, target_pid
        self._conn = psycopg.connect(database_url, autocommit=True) if database_url else None
        self._own = self._conn.info.backend_pid if self._conn else None
        self.last: dict[tuple[str, int], float] = {}
        self.start: dict[tuple[str, int], float] = {}
        self.peak_rss = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _backends(self) -> list[int]:
        if self._conn is None:
            return []
        rows = self._conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
        return [pid for (pid,) in rows]

    def sample(self) -> None:
        tree = descendants(self.root_pid)
        groups = [("scheduler", tree), ("postgres", self._backends()), ("target", [self.target_pid])]
        for group, pids in groups:
            for pid in pids:
                seconds = cpu_seconds(pid, one_thread=group == "postgres")
                if seconds is not None:
                    self.last[(group, pid)] = seconds
        self.peak_rss = max(self.peak_rss, sum(rss_bytes(pid) for pid in tree))

    def begin(self) -> None:
        self.sample()
        self.start = dict(self.last)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self.sample()

    def end(self) -> dict[str, float]:
        """CPU seconds per group since ``begin``."""
        self._stop.set()
        if self._thread:
            self._thread.join()
        self.sample()
        if self._conn is not None:
            self._conn.close()
        out = {"scheduler": 0.0, "postgres": 0.0, "target": 0.0}
        for (group, pid), seconds in self.last.items():
            out[group] += seconds - self.start.get((group, pid), 0.0)
        return out


# -- the target: a process of its own ---------------------------------------------------------------


def serve_target(out_dir: str) -> None:
    """Child: the loopback target; prints its port, writes its count every 0.1 s, dumps what it
    received on SIGTERM."""
    from common import LoopbackServer

    server = LoopbackServer(200, keep_headers=("X-Scheduler-Scheduled-At", "X-Job"))
    print(server.port, flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    count_file = Path(out_dir, "count")
    while not done.wait(0.1):
        count_file.write_text(str(server.count))
    with server._cond:
        received = list(server.received)
    Path(out_dir, "received.json").write_text(json.dumps(received))
    Path(out_dir, "dumped").write_text("1")


class Target:
    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="bench-target-")
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve-target", self.dir], stdout=subprocess.PIPE, text=True, cwd=str(HERE)
        )
        self.port = int(self.proc.stdout.readline())
        self.url = f"http://127.0.0.1:{self.port}"

    def count(self) -> int:
        try:
            return int(Path(self.dir, "count").read_text() or 0)
        except (OSError, ValueError):
            return 0

    def wait_for(self, count: int, deadline: float) -> int:
        while time.time() < deadline:
            seen = self.count()
            if seen >= count:
                return seen
            time.sleep(0.05)
        return self.count()

    def finish(self) -> list[tuple[float, dict[str, str]]]:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        return [(a, h) for a, h in json.loads(Path(self.dir, "received.json").read_text())]


# -- APScheduler: a process of its own ---------------------------------------------------------------

_session = threading.local()


def deliver(url: str, job: int) -> None:
    """What each APScheduler job runs: one POST to the target (a keep-alive session per thread)."""
    import requests

    session = getattr(_session, "s", None)
    if session is None:
        session = _session.s = requests.Session()
    session.post(url, data=b"{}", headers={"X-Job": str(job), "Content-Type": "application/json"}, timeout=30)


def run_apscheduler(args: argparse.Namespace) -> None:
    """Child: add the jobs, start, print "ready", run until SIGTERM."""
    import logging

    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.jobstores.memory import MemoryJobStore
    from apscheduler.schedulers.background import BackgroundScheduler
    from apscheduler.triggers.interval import IntervalTrigger

    logging.basicConfig(level=logging.ERROR)
    if args.ap_store == "sql":
        from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
        from psycopg.conninfo import conninfo_to_dict
        from sqlalchemy import URL

        info = conninfo_to_dict(args.ap_db)
        url = URL.create(
            "postgresql+psycopg",
            username=info.get("user"),
            password=info.get("password"),
            host=info.get("host"),
            port=int(info["port"]) if info.get("port") else None,
            database=info.get("dbname"),
        )
        store: Any = SQLAlchemyJobStore(url=url)
    else:
        store = MemoryJobStore()
    scheduler = BackgroundScheduler(
        jobstores={"default": store},
        executors={"default": ThreadPoolExecutor(args.ap_threads)},
        job_defaults={"coalesce": False, "misfire_grace_time": None, "max_instances": 1000},
        timezone=UTC,
    )
    start = datetime.fromtimestamp(args.ap_start, tz=UTC)
    scheduler.start(paused=True)
    for i in range(args.ap_jobs):
        trigger = IntervalTrigger(seconds=args.ap_interval, start_date=start, timezone=UTC)
        scheduler.add_job(deliver, trigger, args=[args.ap_url, i], id=f"job-{i}", replace_existing=True)
    scheduler.resume()
    print("ready", flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    done.wait()
    scheduler.shutdown(wait=False)


# -- one measurement -------------------------------------------------------------------------------


def start_local(
    url: str, data_dir: str, target: Target, jobs: int, interval: int, lead: float, runners: int = 1
) -> tuple[Any, float]:
    """``scheduler local`` with the jobs created through its API; (the process, the first due time).
    The creation rate is probed first (100 jobs due in a day, which never fire during the run), so
    the due time leaves room for the creation on a busy machine."""
    from concurrent.futures import ThreadPoolExecutor

    from lateness_local import ApiClient, LocalScheduler

    local = LocalScheduler(url, data_dir, runners=runners)
    client = ApiClient(local.port)

    def create(i: int, start_at: str, every: int, prefix: str) -> None:
        job = {
            "name": f"{prefix}-{i:05d}",
            "schedule": f"@every {every}s",
            "start_at": start_at,
            "target": {"type": "http", "url": target.url + "/hook", "method": "POST", "timeout_seconds": 30},
            "retry": {"max_attempts": 1},
        }
        status, body = client.post("/v1/jobs", job)
        if status != 201:
            raise RuntimeError(f"POST /v1/jobs answered {status}: {body[:300]!r}")

    later = datetime.fromtimestamp(time.time() + 86400, tz=UTC).isoformat()
    began = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: create(i, later, 86400, "probe"), range(100)))
    rate = 100 / (time.monotonic() - began)
    due = float(int(time.time() + lead + 1.5 * jobs / rate) + 1)
    start_at = datetime.fromtimestamp(due, tz=UTC).isoformat()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: create(i, start_at, interval, "every"), range(jobs)))
    return local, due


def start_apscheduler(store: str, db: str | None, target: Target, jobs: int, interval: int, lead: float, threads: int):
    due = float(int(time.time() + lead) + 1)
    cmd = [
        sys.executable, __file__, "--apscheduler-child", "--ap-store", store, "--ap-jobs", str(jobs),
        "--ap-interval", str(interval), "--ap-start", str(due), "--ap-url", target.url + "/hook",
        "--ap-threads", str(threads), *(["--ap-db", db] if db else []),
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=str(HERE))
    line = proc.stdout.readline()
    if line.strip() != "ready":
        proc.kill()
        raise RuntimeError(f"APScheduler child did not start: {line!r}")
    return proc, due


def lateness_of(system: str, received: list[tuple[float, dict[str, str]]], due: float, interval: int, window: int):
    """(lateness of each occurrence in the window, arrivals in it)."""
    late: list[float] = []
    if system == "local":
        for arrived, headers in received:
            stamp = headers.get("X-Scheduler-Scheduled-At")
            if stamp:
                scheduled = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
                if due <= scheduled < due + window:
                    late.append(arrived - scheduled)
        return late
    per_job: dict[str, list[float]] = defaultdict(list)
    for arrived, headers in received:
        if headers.get("X-Job"):
            per_job[headers["X-Job"]].append(arrived)
    for arrivals in per_job.values():
        for k, arrived in enumerate(sorted(arrivals)):
            if k * interval < window:
                late.append(arrived - (due + k * interval))
    return late


def measure(system: str, workload: str, jobs: int, args: argparse.Namespace, server: str) -> dict[str, Any]:
    target = Target()
    try:
        return _measure(system, workload, jobs, args, server, target)
    finally:
        if target.proc.poll() is None:
            target.proc.kill()


def _measure(system: str, workload: str, jobs: int, args: argparse.Namespace, server: str, target: Target):
    interval = WORKLOADS[workload][1]
    window = interval if interval >= 60 else args.window  # one burst, or a window of @every 1s
    occurrences = jobs * max(1, window // interval)
    # Setup before the first due time: APScheduler's add_job (local mode probes its API's rate).
    lead = args.lead + jobs / {"local": 1e9, "apscheduler-memory": 1500, "apscheduler-sql": 80}[system]
    result: dict[str, Any] = {"system": system, "workload": workload, "jobs": jobs, "interval_s": interval}
    with tempfile.TemporaryDirectory(prefix="bench-sched-") as data_dir, fresh_database(server, "sched") as url:
        # Each system starts on a quiet machine with the WAL flushed: within `make bench`, what
        # the benchmark before left running (autovacuum, a checkpoint) otherwise shares its cores.
        checkpoint(url)
        result.update(wait_until_quiet())
        began = time.time()
        if system == "local":
            proc, due = start_local(url, data_dir, target, jobs, interval, lead, args.local_runners)
            root_pid, db = proc.proc.pid, url
        else:
            store = system.split("-", 1)[1]
            proc, due = start_apscheduler(
                store, url if store == "sql" else None, target, jobs, interval, lead, args.ap_threads
            )
            root_pid, db = proc.pid, (url if store == "sql" else None)
        try:
            result["setup_s"] = time.time() - began
            result["margin_s"] = due - time.time()
            if result["margin_s"] < 0.5:
                result["warning"] = "setup ended less than 0.5 s before the due time: lateness includes setup"
                print(f"  WARNING: {system} {workload}: {result['warning']}", flush=True)
            meter = CpuMeter(root_pid, target.proc.pid, db)
            time.sleep(max(0.0, due - 0.5 - time.time()))
            meter.begin()
            mark = time.time()
            before = target.count()
            got = target.wait_for(before + occurrences, due + window + args.timeout)
            ended = time.time()
            cpu = meter.end()
            delivered = target.count() - before
        finally:
            if system == "local":
                proc.stop()
            else:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
        received = target.finish()
    late = lateness_of(system, received, due, interval, window)
    arrivals = sorted(a for a, _ in received if a >= due - 1)
    per = 1000 / max(delivered, 1)
    result.update(
        occurrences=occurrences,
        received_in_window=len(late),
        complete=got >= before + occurrences,
        lateness_s={"p50": percentile(late, 50), "p99": percentile(late, 99), "max": max(late, default=float("nan"))},
        # The occurrences in the window over the time until the last of them arrived (at least the window).
        deliveries_per_s=len(late) / max(max(arrivals, default=due) - due, 1e-6 if interval >= 60 else window),
        measured_s=ended - mark,
        delivered_while_measured=delivered,
        cpu_s=cpu,
        cpu_ms_per_delivery=(cpu["scheduler"] + cpu["postgres"]) * per,
        c_ms=(cpu["scheduler"] + cpu["postgres"] + cpu["target"]) * per,
        peak_rss_mb=meter.peak_rss / 2**20,
    )
    result["firings_per_cpu_s"] = 1000 / result["cpu_ms_per_delivery"] if result["cpu_ms_per_delivery"] else None
    if interval >= 60:
        bound = 1.2 * jobs * result["c_ms"] / 1000 / 2
        result["p99_bound_s"] = bound
    late_s = result["lateness_s"]
    bound = f" (bound {result['p99_bound_s']:.2f} s)" if "p99_bound_s" in result else ""
    print(
        f"  {system:<19} {workload:<13} p50 {late_s['p50']:6.2f} s  p99 {late_s['p99']:6.2f} s{bound}  "
        f"{result['deliveries_per_s']:6.0f}/s  CPU {result['cpu_ms_per_delivery']:.2f} ms/delivery "
        f"(sched {cpu['scheduler']:.2f} s, pg {cpu['postgres']:.2f} s, target {cpu['target']:.2f} s; c "
        f"{result['c_ms']:.2f} ms)  RSS {result['peak_rss_mb']:.0f} MB  "
        f"{len(late)}/{occurrences} in window{'' if result['complete'] else ' INCOMPLETE'}",
        flush=True,
    )
    return result


def compare(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per workload: local mode's firings per CPU second against each APScheduler store's."""
    out: dict[str, Any] = {}
    by = {(r["workload"], r["system"]): r for r in runs}
    for workload in {r["workload"] for r in runs}:
        local = by.get((workload, "local"))
        if not local or not local["firings_per_cpu_s"]:
            continue
        entry = out.setdefault(workload, {})
        for system in ("apscheduler-memory", "apscheduler-sql"):
            peer = by.get((workload, system))
            if peer and peer["firings_per_cpu_s"]:
                entry[f"vs_{system}"] = local["firings_per_cpu_s"] / peer["firings_per_cpu_s"]
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="+", choices=sorted(WORKLOADS), default=list(WORKLOADS))
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    parser.add_argument("--window", type=int, default=20, help="seconds of @every 1s measured (default 20)")
    parser.add_argument("--lead", type=float, default=4.0, help="seconds between setup and the first due time")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds past the window to wait")
    parser.add_argument(
        "--local-runners",
        type=int,
        default=RUNNERS,
        help=f"local mode's runner processes, its --runners (default {RUNNERS}: one per core, at most 4)",
    )
    parser.add_argument("--ap-threads", type=int, default=20, help="APScheduler's thread pool (default 20)")
    parser.add_argument("--quick", action="store_true", help="200 / 1,000 / 200 jobs, a 10 s window")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--serve-target", help=argparse.SUPPRESS)
    parser.add_argument("--apscheduler-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--ap-store", help=argparse.SUPPRESS)
    parser.add_argument("--ap-db", help=argparse.SUPPRESS)
    parser.add_argument("--ap-jobs", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--ap-interval", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--ap-start", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--ap-url", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_target:
        serve_target(args.serve_target)
        return {}
    if args.apscheduler_child:
        run_apscheduler(args)
        return {}
    if args.quick:
        args.window = min(args.window, 10)
    results: dict[str, Any] = {
        "benchmark": "schedules_vs_peers",
        "quick": args.quick,
        "machine": machine_summary(),
        "window_s": args.window,
        "ap_threads": args.ap_threads,
        "local_runners": args.local_runners,
        "runs": [],
    }
    with postgres_server() as server:
        results["postgres"] = server_version(server)
        for workload in args.workloads:
            jobs = QUICK[workload] if args.quick else WORKLOADS[workload][0]
            print(f"{workload}: {jobs} jobs (load average {os.getloadavg()[0]:.1f})", flush=True)
            for system in args.systems:
                results["runs"].append(measure(system, workload, jobs, args, server))
    results["load_average_after"] = os.getloadavg()
    results["ratios"] = compare(results["runs"])
    for workload, entry in results["ratios"].items():
        print(f"{workload}: local mode's firings per CPU second vs APScheduler: "
              + ", ".join(f"{k[3:]} {v:.2f}x" for k, v in entry.items()), flush=True)  # fmt: skip
    write_json(args.json, results)
    return results


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "functions"))
    main()

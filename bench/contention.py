"""Where the batched path waits with two processes (issue 36, item 1's analysis): pg_stat_activity
and pg_locks sampled while ``throughput_vs_peers.py`` runs the store and pgbench.

    .venv/bin/python bench/contention.py [--workers 1 2] [--jobs 20000] [--interval 0.02]

Runs ``bench/throughput_vs_peers.py --workers ... --rounds 1`` as a child and, every
``--interval`` seconds, reads the backends of its database (``sched_peers_*``): pgbench's
(``application_name`` pgbench) and the store's (everything else there: two connections a worker
process, the claimer and the recorder). Each sample of a backend is counted by what it was doing:
on CPU (active, no wait event), waiting on a lock (``Lock``), on a lightweight lock (``LWLock``),
on I/O (``IO``: WAL flushes among them), or idle waiting for its client (``Client``/idle: the
client's own time, Python or pgbench, and the round trip). pg_locks' ungranted requests of that
database are counted too. Prints the shares per system and process count.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from typing import Any

import psycopg

from common import ROOT, machine_summary, postgres_server, write_json

SAMPLE_SQL = """
SELECT a.datname, a.application_name, a.state, a.wait_event_type, a.wait_event, left(a.query, 60),
       (SELECT count(*) FROM pg_locks l WHERE l.pid = a.pid AND NOT l.granted)
FROM pg_stat_activity a
WHERE a.datname LIKE 'sched_peers_%' AND a.backend_type = 'client backend'"""


def kind(state: str | None, wait_type: str | None) -> str:
    if state != "active":
        return "client (idle: the client's time and the round trip)"
    if wait_type is None:
        return "on CPU"
    if wait_type == "Client":
        return "client (active, reading from the client)"
    return f"waiting: {wait_type}"


def sample(server: str, stop: threading.Event, interval: float, out: dict[tuple[str, int], Counter]) -> None:
    events: dict[tuple[str, int], Counter] = defaultdict(Counter)
    with psycopg.connect(server, autocommit=True) as conn:
        while not stop.is_set():
            rows = conn.execute(SAMPLE_SQL).fetchall()
            store = [r for r in rows if r[1] != "pgbench"]
            bench = [r for r in rows if r[1] == "pgbench"]
            for system, group, per_process in (("store", store, 2), ("pgbench", bench, 1)):
                if not group:
                    continue
                processes = max(1, round(len(group) / per_process))
                for _, _, state, wait_type, wait_event, query, ungranted in group:
                    out[(system, processes)][kind(state, wait_type)] += 1
                    if wait_type not in (None, "Client"):
                        events[(system, processes)][f"{wait_type}:{wait_event} ({query.strip()[:40]})"] += 1
                    if ungranted:
                        out[(system, processes)]["ungranted lock requests"] += ungranted
            time.sleep(interval)
    out.update({("events:" + k[0], k[1]): v for k, v in events.items()})


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", nargs="+", default=["1", "2"])
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--interval", type=float, default=0.02)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    counts: dict[tuple[str, int], Counter] = defaultdict(Counter)
    stop = threading.Event()
    with postgres_server() as server:
        thread = threading.Thread(target=sample, args=(server, stop, args.interval, counts), daemon=True)
        thread.start()
        child = [sys.executable, str(ROOT / "bench" / "throughput_vs_peers.py"), "--workers", *args.workers,
                 "--rounds", "1", "--jobs", str(args.jobs)]  # fmt: skip
        subprocess.run(child, check=True, cwd=str(ROOT), timeout=1800)
        stop.set()
        thread.join()
    results: dict[str, Any] = {"benchmark": "contention", "machine": machine_summary(), "shares": {}, "events": {}}
    for (system, processes), counter in sorted(counts.items()):
        if system.startswith("events:"):
            results["events"][f"{system[7:]} x{processes}"] = dict(counter.most_common(8))
            continue
        total = sum(v for k, v in counter.items() if k != "ungranted lock requests")
        shares = {k: v / total for k, v in counter.items() if k != "ungranted lock requests"}
        results["shares"][f"{system} x{processes}"] = {
            "samples": total,
            "shares": shares,
            "ungranted": counter["ungranted lock requests"],
        }
        print(
            f"{system}, {processes} process(es): {total} backend samples, ungranted locks {counter['ungranted lock requests']}"
        )
        for k, v in sorted(shares.items(), key=lambda kv: -kv[1]):
            print(f"    {v:6.1%}  {k}")
    for key, events in results["events"].items():
        print(f"  wait events, {key}: {events}")
    write_json(args.json, results)
    return results


if __name__ == "__main__":
    main()

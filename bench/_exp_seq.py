"""Experiment: store worker variants side by side with pgbench (not for landing)."""
from __future__ import annotations
import os, statistics, sys, tempfile, time
from pathlib import Path
import throughput_vs_peers as tvp
from common import ServerCpu, fresh_database, postgres_server
from scheduler.store.db import make_pool
from scheduler.store.postgres import Store


def drain_sequential(store, batch, deadline=float("inf"), on_batch=None):
    done = 0
    while time.monotonic() < deadline and (claims := store.claim_and_start(batch, 30)):
        done += tvp.record_batch(store, claims, time.monotonic())
        if on_batch:
            on_batch(len(claims))
    return done


def worker(url, batch, variant, barrier, counter, results):
    connections = 2 if variant == "batched" else 1
    pool = make_pool(url, min_size=connections, max_size=connections)
    store = Store(pool)
    store.now()
    if connections == 2:
        with pool.connection(), pool.connection():
            pass
    barrier.wait(timeout=60)
    began, cpu = time.monotonic(), time.process_time()
    def count(n):
        with counter.get_lock():
            counter.value += n
    drain = tvp.drain_batched if variant == "batched" else drain_sequential
    done = drain(store, batch, began + tvp.RUN_TIMEOUT, count)
    ended, cpu = time.monotonic(), time.process_time() - cpu
    pool.close()
    results.put((began, ended, done, cpu))


def run_variant(url, jobs, workers, batch, variant):
    tvp.reset_jobs(url, jobs)
    cpu = ServerCpu(url); c0 = cpu.seconds()
    elapsed, done, ccpu = tvp.spawn_workers(worker, lambda i: (url, batch, variant), workers, jobs, variant)
    return {"jobs_per_s": jobs / elapsed, "pg_us": tvp.server_cpu_ms_per_job(cpu, c0, jobs) * 1000, "client_us": ccpu * 1e6 / jobs}


def main():
    jobs, batch, rounds = 20000, 50, int(os.environ.get("ROUNDS", "3"))
    workers = [int(w) for w in os.environ.get("WORKERS", "2").split()]
    with postgres_server() as server, fresh_database(server, "exp") as url, tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "s.sql"; script.write_text(tvp.pgbench_script(batch))
        for w in workers:
            res = {}
            for r in range(rounds):
                order = ["batched", "sequential", "pgbench"]
                order = order[r % 3:] + order[: r % 3]
                for v in order:
                    if v == "pgbench":
                        out = tvp.run_pgbench(url, jobs, w, batch, script)
                        out = {"jobs_per_s": out["jobs_per_s"], "pg_us": (out.get("server_cpu_ms_per_job") or 0) * 1000, "client_us": 0}
                    else:
                        out = run_variant(url, jobs, w, batch, v)
                    res.setdefault(v, []).append(out)
                    print(w, r, v, {k: round(x, 1) for k, x in out.items()}, flush=True)
            pb = statistics.median(o["jobs_per_s"] for o in res["pgbench"])
            for v, outs in res.items():
                m = {k: statistics.median(o[k] for o in outs) for k in outs[0]}
                print(f"workers {w} {v:10s} {m['jobs_per_s']:8.0f} jobs/s  {m['jobs_per_s']/pb:.2f}x  pg {m['pg_us']:.1f} us  client {m['client_us']:.1f} us", flush=True)

if __name__ == "__main__":
    main()

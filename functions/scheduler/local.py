"""Local mode: the API and the runner of the cloud deployment in one process.

A WSGI server (waitress) feeds the api handler API Gateway events through the HTTP adapter, a
loop calls the fan-out, and a thread pool stands in for the asynchronous Lambda invoke of the
executor (claims started, and outcomes recorded, a batch per statement). Postgres is embedded
(pgserver, data kept under ``--data-dir``) unless a database URL is given; migrations are
applied at start. Several processes on one database act as several runners (``--runners``
starts them). Ctrl-C (or SIGTERM) stops the intake, lets running executions finish and records
them, and stops the embedded Postgres (the runner claims only what it can start at once, so no
claim waits in a queue).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from scheduler.settings import Settings

logger = logging.getLogger("scheduler.local")

LOCAL_PRINCIPAL = "arn:aws:iam::000000000000:user/local"


class EmbeddedPostgres:
    """A pgserver Postgres kept under ``data_dir/pgdata`` (shared by processes on the same folder)."""

    def __init__(self, data_dir: Path):
        import pgserver

        pgdata = data_dir / "pgdata"
        pgdata.mkdir(parents=True, exist_ok=True)
        self.server = pgserver.get_server(str(pgdata), cleanup_mode="stop")
        self.url = self.server.get_uri()

    def stop(self) -> None:
        """Stop the server (pgserver keeps it up while another process still uses it)."""
        self.server.cleanup()


def principal_resolver(auth: str, credentials_file: str | None) -> Callable[[dict[str, Any]], str | None]:
    """Who is calling: one fixed local principal, or the owner of a verified SigV4 signature."""
    if auth == "none":
        return lambda environ: LOCAL_PRINCIPAL
    from scheduler.sigv4 import SignatureError, load_credentials, verify_wsgi

    if not credentials_file:
        raise SystemExit("scheduler local: --auth sigv4 needs --credentials FILE")
    credentials = load_credentials(credentials_file)

    def resolve(environ: dict[str, Any]) -> str | None:
        try:
            return verify_wsgi(environ, environ.get("scheduler.body", b""), credentials)
        except SignatureError as exc:
            logger.info("request refused: %s", exc)
            return None

    return resolve


def run_runner(deps: Any, settings: Settings, invoker: Any, stop: threading.Event) -> None:
    """The runner's loop: fan-out after fan-out until ``stop``, surviving database outages (the
    leases protect the jobs meanwhile)."""
    from scheduler.runner import run_fanout

    while not stop.is_set():
        try:
            budget = 60.0 if settings.precision == "second" else 0.0
            run_fanout(deps.store, invoker, budget_seconds=budget, batch_size=settings.claim_batch_size,
                       lease_seconds=settings.claim_lease_seconds, metrics=deps.metrics, stop=stop,
                       retention_days=settings.execution_retention_days)
            if settings.precision == "minute":
                stop.wait(60.0)
        except Exception:  # the database went away: keep trying
            logger.exception("fan-out failed; retrying in 1 s")
            stop.wait(1.0)


def _local_invoker(deps: Any) -> Any:
    from scheduler.executor import Executor
    from scheduler.runner import LocalInvoker

    return LocalInvoker(Executor(deps.store, deps.decrypt_target, deps.target_policy, deps.metrics))


def _close_delivery_clients() -> None:
    from scheduler.targets import amqp as amqp_target
    from scheduler.targets import http as http_target

    http_target.close_sessions()
    amqp_target.close_all()


def runner_process(settings: Settings) -> None:
    """An extra runner process (``--runners``): the fan-out loop and its executors, no API. It
    stops on SIGINT or SIGTERM, or when its parent is gone, after its deliveries under way end
    and are recorded."""
    import multiprocessing

    from scheduler.cli import configure_logging
    from scheduler.wiring import Dependencies

    configure_logging(multiprocessing.current_process().name)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    parent = multiprocessing.parent_process()  # its sentinel ends with the parent, however it died

    def watch_parent() -> None:  # a killed parent (SIGKILL): do not run on as an orphan
        while not stop.wait(0.5):
            if parent is None or not parent.is_alive():
                stop.set()

    threading.Thread(target=watch_parent, name="parent-watch", daemon=True).start()
    deps = Dependencies(settings, pool_max_size=8)
    deps.store, deps.secret_box  # built now, before the threads that share them  # noqa: B018
    invoker = _local_invoker(deps)
    try:
        run_runner(deps, settings, invoker, stop)
    finally:
        invoker.close()
        _close_delivery_clients()
        deps.pool.close()


def serve(args: argparse.Namespace, *, ready: threading.Event | None = None,
          stop: threading.Event | None = None) -> int:
    """Run until interrupted; ``ready`` is set once the API answers (tests), ``stop`` ends it."""
    import multiprocessing

    from waitress import create_server

    from scheduler.api.app import make_app
    from scheduler.http_adapter import make_wsgi_app
    from scheduler.migrations import migrate
    from scheduler.wiring import Dependencies

    stop = stop or threading.Event()
    data_dir = Path(args.data_dir or ".scheduler").resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    embedded = None
    database_url = args.database_url or os.environ.get("DATABASE_URL")
    if not database_url:
        embedded = EmbeddedPostgres(data_dir)
        database_url = embedded.url
    settings = replace(Settings.from_env(), database_url=database_url, allow_private_targets=True,
                       precision=getattr(args, "precision", None) or "second",
                       local_key_file=str(data_dir / "secret.key"))
    migrate(database_url)
    deps = Dependencies(settings, pool_max_size=24)
    deps.store, deps.secret_box  # built now, before the threads that share them  # noqa: B018
    app = make_app(lambda: deps.store, lambda: deps.secret_box, settings)
    wsgi = make_wsgi_app(lambda event, context: app.resolve(event, context),
                         principal_resolver(getattr(args, "auth", "none") or "none", getattr(args, "credentials", None)))
    wsgi = __import__("scheduler.console", fromlist=["local_app"]).local_app(wsgi, host=args.host)  # console, guard
    server = create_server(wsgi, host=args.host, port=args.port, threads=8, ident="scheduler-local")
    invoker = _local_invoker(deps)
    runners = getattr(args, "runners", 1) or 1
    # More runners: processes of their own (one Python process delivers about a thousand jobs a
    # second on one core); they share the database, so their claims never overlap.
    extra = [multiprocessing.get_context("spawn").Process(target=runner_process, args=(settings,),
                                                          name=f"scheduler-runner-{i + 2}")
             for i in range(runners - 1)]
    for process in extra:
        process.start()

    def shutdown(*_: Any) -> None:
        stop.set()

    runner_thread = threading.Thread(target=run_runner, args=(deps, settings, invoker, stop), name="fanout",
                                     daemon=True)
    runner_thread.start()
    server_thread = threading.Thread(target=server.run, name="api", daemon=True)
    server_thread.start()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, shutdown)
        signal.signal(signal.SIGTERM, shutdown)
    url = f"http://{args.host}:{server.effective_port}"
    where = "embedded Postgres under " + str(data_dir / "pgdata") if embedded else "the given database"
    print(f"scheduler local: API {url}/v1 ({where}; precision {settings.precision}; "
          f"{runners} runner process{'es' if runners > 1 else ''}). Ctrl-C to stop.", flush=True)
    if ready is not None:
        ready.set()
    try:
        stop.wait()
    finally:
        print("scheduler local: stopping", flush=True)
        server.close()
        for process in extra:
            process.terminate()  # SIGTERM: it finishes and records its deliveries under way
        runner_thread.join(timeout=10)
        invoker.close()
        for process in extra:
            process.join(timeout=60)
            if process.is_alive():
                process.kill()
                process.join()
        _close_delivery_clients()
        deps.pool.close()
        if embedded is not None:
            embedded.stop()
        print("scheduler local: stopped", flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover
    from scheduler.cli import main

    sys.exit(main(["local", *sys.argv[1:]]))

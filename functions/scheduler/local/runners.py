"""Local mode's extra runner processes (``--runners N``): what each runs, and their start and
supervision by the process that serves the API."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from scheduler.local.background import (
    ALERTS_STOP_SECONDS,
    close_delivery_clients,
    run_runner,
    start_alerts,
    warn_if_the_key_does_not_open,
)
from scheduler.local.stopping import stop_on_signals, waiting_for
from scheduler.settings import Settings

logger = logging.getLogger(__name__)


def runner_process(settings: Settings) -> None:
    """An extra runner process (``--runners``): the fan-out loop and its executors, no API. It
    stops on SIGINT, SIGTERM or SIGHUP, or when its parent is gone, after its deliveries under way end
    and are recorded."""
    import multiprocessing

    from scheduler.local.logs import configure_logging
    from scheduler.wiring import Dependencies

    configure_logging(multiprocessing.current_process().name)
    stop = threading.Event()
    stop_on_signals(stop)
    parent = multiprocessing.parent_process()  # its sentinel ends with the parent, however it died

    def watch_parent() -> None:  # a killed parent (SIGKILL): do not run on as an orphan
        while not stop.wait(0.5):
            if parent is None or not parent.is_alive():
                stop.set()

    threading.Thread(target=watch_parent, name="parent-watch", daemon=True).start()
    deps = Dependencies(settings, pool_max_size=8)
    deps.store, deps.secret_box  # built now, before the threads that share them  # noqa: B018
    warn_if_the_key_does_not_open(deps.store, deps.secret_box, settings.local_key_file)
    dispatch = deps.in_process_dispatch()
    alerts = start_alerts(deps, stop, settings.console_url)
    try:
        run_runner(deps, settings, dispatch, stop)
    finally:
        waiting = waiting_for(dispatch)
        if waiting:
            logger.info("stopping: %s", waiting)
        dispatch.close()
        alerts.join(timeout=ALERTS_STOP_SECONDS)
        close_delivery_clients()
        deps.pool.close()


def start_runner_process(settings: Settings, name: str) -> Any:
    """A runner process named ``name``, started (spawned: a fresh interpreter, no thread of this one)."""
    import multiprocessing

    process = multiprocessing.get_context("spawn").Process(target=runner_process, args=(settings,), name=name)
    process.start()
    return process


def start_runner_processes(settings: Settings, runners: int) -> list[Any]:
    """The runner processes beyond this one (one Python process delivers several thousand jobs a
    second to a fast target on one core); they share the database, so their claims never overlap."""
    return [start_runner_process(settings, f"scheduler-runner-{i + 2}") for i in range(runners - 1)]


def runner_stop_seconds() -> float:
    """How long a stop waits for an extra runner process: its longest delivery (the longest
    target timeout the API accepts, and the lease margin over it: by then the lease is gone and
    the job is another runner's to deliver again), then its alerts being sent."""
    from scheduler.runner.delivering import LEASE_MARGIN_SECONDS
    from scheduler.schema.models import MAX_TIMEOUT_SECONDS

    return MAX_TIMEOUT_SECONDS + LEASE_MARGIN_SECONDS + ALERTS_STOP_SECONDS


def stop_runner_processes(processes: list[Any], timeout: float | None = None) -> None:
    """Wait for the runner processes (sent SIGTERM) to finish and record their deliveries under
    way, up to ``timeout`` (default ``runner_stop_seconds()``) in all; one still running then is
    killed, after a line that names it."""
    import time

    timeout = runner_stop_seconds() if timeout is None else timeout
    deadline = time.monotonic() + timeout
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            logger.error(
                "runner process %s still running %g s into the stop: killed; the jobs it was delivering "
                "are delivered again when their leases expire",
                process.name,
                timeout,
            )
            process.kill()
            process.join()


# A runner process that ends on its own is started again after this pause, doubled (up to the
# longest) each time one ends within a minute of its start: a crash loop does not spin.
RESTART_FIRST_PAUSE = 1.0
RESTART_MAX_PAUSE = 60.0


def supervise_runners(processes: list[Any], start: Callable[[str], Any], stop: threading.Event) -> None:
    """Until ``stop``: a runner process that ended (killed, or crashed) is reported and started
    again in its place in ``processes``, so ``--runners N`` keeps N. Its claims were leased: the
    jobs it held are reclaimed when their leases expire, as after any runner's death."""
    import time

    pauses = {process.name: RESTART_FIRST_PAUSE for process in processes}
    restart_at: dict[str, float] = {}
    started = {process.name: time.monotonic() for process in processes}
    while not stop.wait(0.5):
        for i, process in enumerate(processes):
            name, now = process.name, time.monotonic()
            if process.is_alive():
                continue
            if name not in restart_at:
                pause = pauses[name] if now - started[name] < 60 else RESTART_FIRST_PAUSE
                pauses[name] = min(pause * 2, RESTART_MAX_PAUSE)
                restart_at[name] = now + pause
                logger.error(
                    "runner process ended; starting it again: %s, exit code %s, in %g s", name, process.exitcode, pause
                )
            elif now >= restart_at[name]:
                del restart_at[name]
                processes[i] = start(name)
                started[name] = time.monotonic()

"""How local mode stops: the signals that stop it (Ctrl-C, SIGTERM, and SIGHUP: the terminal
closed, an SSH session dropped), each a clean stop, and a second one that quits at once; what
the stop says while it waits; the API's close."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import threading
from typing import Any, NoReturn

logger = logging.getLogger(__name__)

#: The signals that stop a local-mode process cleanly: the intake stops, the deliveries under way
#: end and are recorded. SIGHUP's default (dying at once) would lose them, and orphan the
#: embedded Postgres.
STOP_SIGNALS: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)
#: How long the API's stop waits for the requests being answered.
API_STOP_SECONDS = 10.0
QUITTING = (
    "scheduler local: quitting now: the deliveries under way are left to their leases "
    "(their jobs are delivered again when those expire)\n"
)


def interrupt_start_on_signals() -> None:
    """While local mode starts (Postgres, migrations, the API), SIGTERM and SIGHUP interrupt it as
    Ctrl-C does (``KeyboardInterrupt``): what it started is stopped (an embedded Postgres, a
    migration's transaction), where their default would kill the process as it stands and leave
    the embedded Postgres running. From the main thread only."""

    def interrupt(signum: int, frame: object) -> NoReturn:
        raise KeyboardInterrupt

    for sig in STOP_SIGNALS:
        if sig != signal.SIGINT:
            signal.signal(sig, interrupt)


def stop_on_signals(stop: threading.Event) -> None:
    """``stop`` set by any of the ``STOP_SIGNALS`` (from the main thread only)."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, lambda *_: stop.set())


class Stop:
    """The stop of the process that serves the API: the first stop signal sets ``event`` (the
    clean stop, which waits for the deliveries under way); another one then quits at once: the
    extra runner processes killed, the embedded Postgres stopped, the deliveries under way left
    to their leases (their jobs are delivered again when the leases expire)."""

    def __init__(self, event: threading.Event, runners: list[Any], embedded: Any | None) -> None:
        self.event, self.runners, self.embedded = event, runners, embedded

    def on_signals(self) -> None:
        """From the main thread only."""
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._signalled)

    def _signalled(self, signum: int, frame: object) -> None:
        if self.event.is_set():
            self.quit_now(128 + signum)
        self.event.set()

    def quit_now(self, exit_code: int) -> NoReturn:
        """Quit without waiting (the second Ctrl-C)."""
        try:  # (not print: the main thread may be inside a print of its own)
            os.write(1, QUITTING.encode())
        except OSError:
            pass
        for process in list(self.runners):
            with contextlib.suppress(Exception):  # (already gone: nothing to kill)
                process.kill()
        embedded, self.embedded = self.embedded, None
        if embedded is not None:
            with contextlib.suppress(Exception):  # (the process ends anyway; the next start reuses it)
                embedded.stop()
        os._exit(exit_code)

    def postgres_stopping(self) -> None:
        """The clean stop has reached the embedded Postgres: quitting now leaves it to that stop."""
        self.embedded = None


def waiting_for(dispatch: Any | None) -> str | None:
    """``waiting for N deliveries under way (up to X s)`` of this process, None when none is."""
    count, left = dispatch.under_way() if dispatch is not None else (0, None)
    if not count:
        return None
    up_to = f" (up to {math.ceil(left)} s)" if left is not None else ""
    return f"waiting for {count} deliver{'y' if count == 1 else 'ies'} under way{up_to}"


def stopping_line(dispatch: Any | None, runners: int) -> str:
    """What the stop says: ``scheduler local: stopping``, and while deliveries may be under way,
    how many, for how long at most, and that Ctrl-C again quits at once."""
    waiting = waiting_for(dispatch)
    if waiting is None and not runners:
        return "scheduler local: stopping"
    here = waiting or "waiting for the deliveries under way"
    if runners:
        here += f", and those of the {runners} extra runner process{'es' if runners > 1 else ''}"
    return (
        f"scheduler local: stopping: {here}; Ctrl-C again to quit now (their jobs are then "
        "delivered again when their leases expire)"
    )


def close_api(server: Any, api: threading.Thread, timeout: float = API_STOP_SECONDS) -> None:
    """Stop waitress cleanly: no new connection, the requests being answered answered (up to
    ``timeout``), then every connection closed by the server's own thread (``api``, whose loop
    then ends). Closing its sockets under that thread made the requests still being answered
    fail on them, a traceback each (``OSError: [Errno 9] Bad file descriptor``)."""
    from waitress import wasyncore

    trigger = server.trigger
    try:
        trigger.pull_trigger(lambda: wasyncore.dispatcher.close(server))  # the listening socket
    except (OSError, ValueError):  # the server's loop has ended (its trigger closed): close it here
        wasyncore.dispatcher.close(server)
    server.task_dispatcher.shutdown(cancel_pending=True, timeout=timeout)
    server.pull_trigger = lambda: None  # a request still running past the timeout: its answer is dropped

    def close_connections() -> None:  # in the server's thread
        for channel in list(server._map.values()):
            if channel is not trigger:
                channel.close_when_flushed = True  # once what it has to send is sent
        trigger.close()

    try:
        trigger.pull_trigger(close_connections)
    except (OSError, ValueError):  # the trigger is closed already: the server's loop has ended
        close_connections()
    api.join(timeout)


def say(line: str) -> None:
    """A line on stdout that may be gone (a closed terminal): the stop goes on without it."""
    try:
        print(line, flush=True)
    except (OSError, ValueError):
        pass

"""How local mode stops: the signals that stop it (Ctrl-C, SIGTERM, and SIGHUP: the terminal
closed, an SSH session dropped), each a clean stop."""

from __future__ import annotations

import signal
import threading

#: The signals that stop a local-mode process cleanly: the intake stops, the deliveries under way
#: end and are recorded. SIGHUP's default (dying at once) would lose them, and orphan the
#: embedded Postgres.
STOP_SIGNALS: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


def stop_on_signals(stop: threading.Event) -> None:
    """``stop`` set by any of the ``STOP_SIGNALS`` (from the main thread only)."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, lambda *_: stop.set())


def say(line: str) -> None:
    """A line on stdout that may be gone (a closed terminal): the stop goes on without it."""
    try:
        print(line, flush=True)
    except (OSError, ValueError):
        pass

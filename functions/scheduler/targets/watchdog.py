"""The wall-clock deadline of a delivery: a ``Watchdog`` shuts the delivery's sockets down when
its time is up, served by one shared thread; ``running`` makes it the current one of a thread.
"""

from __future__ import annotations

import heapq
import itertools
import socket
import threading
import time
from collections.abc import Callable
from typing import Any


class _Deadlines:
    """One thread that fires every watchdog at its deadline (a timer thread per delivery would
    cost a thread start per delivery). Finished watchdogs are dropped when they reach the top."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Watchdog]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def add(self, watchdog: Watchdog) -> None:
        with self._cond:
            earliest = not self._heap or watchdog.deadline < self._heap[0][0]
            heapq.heappush(self._heap, (watchdog.deadline, next(self._seq), watchdog))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="delivery-watchdog", daemon=True)
                self._thread.start()
            if earliest:  # the thread sleeps until the earliest deadline: wake it only for a new one
                self._cond.notify()

    def _next_due(self) -> Watchdog:
        with self._cond:
            while True:
                while self._heap and self._heap[0][2].finished:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                delay = self._heap[0][0] - time.monotonic()
                if delay <= 0:
                    return heapq.heappop(self._heap)[2]
                self._cond.wait(delay)

    def _run(self) -> None:
        while True:
            self._next_due()._fire()


_DEADLINES = _Deadlines()


class Watchdog:
    """A wall-clock deadline for one delivery.

    Per-operation socket timeouts do not bound a delivery: a peer that trickles one byte per
    second never trips a 30 s read timeout. At the deadline the watchdog shuts the watched
    sockets down (``shutdown(SHUT_RDWR)`` on the file descriptor, which wakes any blocked read
    or write in the delivering thread with an error) and sets :attr:`fired`. One shared thread
    (``_Deadlines``) serves every watchdog.

    Sockets are watched through getters (``lambda: conn.sock``) because a TLS wrap replaces the
    socket object of a connection after it was registered.
    """

    def __init__(self, budget: float):
        self.budget = budget
        self.deadline = time.monotonic() + max(budget, 0.0)
        self.fired = False
        self._done = False
        self._lock = threading.Lock()
        self._getters: list[Callable[[], Any]] = []

    def __enter__(self) -> Watchdog:
        _DEADLINES.add(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def finished(self) -> bool:
        """Disarmed or already fired: nothing left to do at the deadline."""
        return self._done or self.fired

    def remaining(self) -> float:
        """Seconds left before the deadline (never negative)."""
        return max(0.0, self.deadline - time.monotonic())

    def watch(self, getter: Callable[[], Any]) -> None:
        """Shut down the socket ``getter()`` returns when the deadline passes."""
        with self._lock:
            if self._done:
                return
            if self.fired:
                _shutdown(getter)
                return
            self._getters.append(getter)

    def forget(self, getter: Callable[[], Any]) -> None:
        """Stop watching the socket of ``getter`` (one registration of it): a connection kept
        alive past this delivery must not be shut down at its deadline."""
        with self._lock:
            try:
                self._getters.remove(getter)
            except ValueError:
                pass

    def stop(self) -> None:
        """Disarm (the delivery is over); sockets are not touched after this returns."""
        with self._lock:
            self._done = True
            self._getters.clear()

    def _fire(self) -> None:
        with self._lock:
            if self._done:
                return
            self.fired = True
            for getter in self._getters:
                _shutdown(getter)


def _shutdown(getter: Callable[[], Any]) -> None:
    try:
        sock = getter()
    except Exception:
        return
    if sock is None:
        return
    try:
        # The plain socket method, on purpose: ssl.SSLSocket.shutdown would also tear down the
        # TLS state under the feet of the thread that is reading.
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except (OSError, TypeError, ValueError):
        pass


_local = threading.local()


def current_watchdog() -> Watchdog | None:
    """The watchdog of the delivery running on this thread, if any."""
    return getattr(_local, "watchdog", None)


class running:
    """Context manager: make ``watchdog`` the current one of this thread while it runs."""

    def __init__(self, watchdog: Watchdog):
        self.watchdog = watchdog

    def __enter__(self) -> Watchdog:
        self._previous = current_watchdog()
        _local.watchdog = self.watchdog
        self.watchdog.__enter__()
        return self.watchdog

    def __exit__(self, *exc_info: object) -> None:
        self.watchdog.__exit__(*exc_info)
        _local.watchdog = self._previous

"""Local mode's waiting room for limited deliveries: the claims whose target's key is full wait
here, all in one thread, instead of holding an executor thread each.

A burst of jobs on one limited key (``limits: {"max_in_flight": 2}`` on a slow API, say) would
otherwise fill every delivery thread with waits, and the other jobs due meanwhile would wait for
a thread behind them. Here each key's waits queue in order; while a key is full only the first
of its queue asks for a slot (the others would be refused too), with a backoff per key, and a
slot taken goes to a delivery thread at once. A wait keeps its job's lease while it waits.

It knows nothing of delivery: the executor gives it the calls (``take``, ``keep``) and the
dispatch what to do with a wait that got its slot (``start``) or could not go on (``end``).
"""

from __future__ import annotations

import heapq
import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

logger = logging.getLogger(__name__)

# How often the leases of the waits are looked at (each is extended once half of it has run).
LEASE_CHECK_SECONDS = 1.0
# A key's first pause between tries for a slot while it is full, and the longest (it doubles).
SLOT_FIRST_PAUSE = 0.005
SLOT_MAX_PAUSE = 0.1


class Wait(Protocol):
    """What the room needs of a wait: the key it waits on, and the count of the refusals its key
    gave while it waited (the room adds them: those to the first wait count for every wait behind
    it)."""

    @property
    def key(self) -> str: ...

    refused: int


W = TypeVar("W", bound=Wait)


class SlotWaitingRoom(Generic[W]):
    """Waits for a slot of their key, taken in turns by one thread.

    ``take(wait)`` asks for a slot (its token, or None while the key is full); ``keep(waits,
    now)`` keeps the waiting jobs' leases, answering the waits that must end with their outcomes;
    ``start(wait, token)`` hands a wait that got its slot to a delivery; ``end(wait, outcome)``
    a wait that cannot go on. ``close`` returns once every wait has had its slot or ended.
    """

    def __init__(
        self,
        take: Callable[[W], str | None],
        keep: Callable[[list[W], float], list[tuple[W, Any]]],
        start: Callable[[W, str], None],
        end: Callable[[W, Any], None],
        *,
        first_pause: float = SLOT_FIRST_PAUSE,
        max_pause: float = SLOT_MAX_PAUSE,
    ):
        self._take, self._keep, self._start, self._end = take, keep, start, end
        self._first_pause, self._max_pause = first_pause, max_pause
        # Each key's waits in order, each with its key's refusals when it was added.
        self._queues: dict[str, deque[tuple[W, int]]] = {}
        self._due: list[tuple[float, str]] = []  # a heap: (when a key is tried next, the key)
        self._pauses: dict[str, float] = {}  # each key's next backoff
        self._refusals: dict[str, int] = {}  # each key's refusals so far
        self._count = 0
        self._closing = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="slot-waits", daemon=True)
        self._thread.start()

    def __len__(self) -> int:
        with self._cond:
            return self._count

    def add(self, wait: W) -> None:
        """Queue a wait behind the others of its key (tried at once when it is the first)."""
        with self._cond:
            waits = self._queues.get(wait.key)
            if waits is None:
                waits = self._queues[wait.key] = deque()
                self._pauses[wait.key] = self._first_pause
                self._refusals[wait.key] = 0
                heapq.heappush(self._due, (time.monotonic(), wait.key))
            waits.append((wait, self._refusals[wait.key]))
            self._count += 1
            self._cond.notify()

    def nudge(self, key: str) -> None:
        """A slot of ``key`` was just given back here: its first wait asks at once, not after
        its backoff."""
        with self._cond:
            if key in self._queues:
                self._pauses[key] = self._first_pause
                heapq.heappush(self._due, (time.monotonic(), key))
                self._cond.notify()

    def close(self) -> None:
        """Let every wait have its slot (or end), then stop the thread."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join()

    def _run(self) -> None:
        next_lease_check = time.monotonic() + LEASE_CHECK_SECONDS
        while True:
            with self._cond:
                while True:
                    if self._closing and not self._count:
                        return
                    now = time.monotonic()
                    if (self._due and self._due[0][0] <= now) or (self._count and now >= next_lease_check):
                        break
                    wake = [self._due[0][0]] if self._due else []
                    if self._count:
                        wake.append(next_lease_check)
                    self._cond.wait(min(wake) - now if wake else None)
                key = heapq.heappop(self._due)[1] if self._due and self._due[0][0] <= now else None
            if key is not None and key in self._queues:  # (a nudged key may be in the heap twice)
                self._try(key)
            if now >= next_lease_check:
                next_lease_check = now + LEASE_CHECK_SECONDS
                self._keep_leases(now)

    def _try(self, key: str) -> None:
        """Slots for the key's waits in order, while it gives them; then its next try after a
        backoff (none when its queue is empty)."""
        while True:
            with self._cond:
                waits = self._queues[key]
                if not waits:
                    del self._queues[key], self._pauses[key], self._refusals[key]
                    return
                first, seen = waits[0]
            try:
                token = self._take(first)
            except Exception:  # the database is away: the key is tried again after its backoff
                logger.warning("taking a target slot failed; trying again", exc_info=True)
                token = None
            if token is None:
                break
            with self._cond:
                waits.popleft()
                self._count -= 1
                self._pauses[key] = self._first_pause
                first.refused += self._refusals[key] - seen
            self._start(first, token)
        with self._cond:
            self._refusals[key] += 1
            if any(due_key == key for _, due_key in self._due):
                return  # nudged meanwhile: tried again then
            pause = self._pauses[key]
            self._pauses[key] = min(pause * 2, self._max_pause)
            heapq.heappush(self._due, (time.monotonic() + pause * (0.5 + random.random()), key))

    def _keep_leases(self, now: float) -> None:
        """Keep the waiting jobs' leases; a wait whose lease was taken over ends."""
        with self._cond:
            waiting = [wait for waits in self._queues.values() for wait, _ in waits]
        try:
            ending = self._keep(waiting, now)
        except Exception:  # the database is away: tried again at the next check
            logger.warning("keeping the waiting jobs' leases failed", exc_info=True)
            return
        for wait, ended in ending:
            with self._cond:
                waits = self._queues.get(wait.key)
                at = next((i for i, (queued, _) in enumerate(waits or ()) if queued is wait), None)
                if waits is None or at is None:
                    continue  # not waiting any more (only this thread takes waits out)
                del waits[at]
                self._count -= 1
            self._end(wait, ended)

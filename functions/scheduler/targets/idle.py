"""Idle connections kept for the next delivery, per key (an origin, a broker URL), shared by the
HTTP and AMQP targets: taken most recently used first, at most ``per_key`` kept for each key and,
when ``keys`` is given, for that many keys (the least recently used key's go first). What the pool
drops is closed with ``close``, outside its lock. Whether a connection taken may still serve is
the caller's check."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class IdlePool(Generic[T]):
    """Idle connections per key; thread-safe."""

    def __init__(self, close: Callable[[T], None], *, per_key: int, keys: int | None = None) -> None:
        self._close = close
        self.per_key = per_key
        self.keys = keys
        self._idle: OrderedDict[Hashable, list[T]] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, key: Hashable) -> T | None:
        """The most recently kept connection of ``key``, or None."""
        with self._lock:
            kept = self._idle.get(key)
            return kept.pop() if kept else None

    def give(self, key: Hashable, item: T) -> None:
        """Keep ``item`` for ``key``, or close it when ``key`` has as many as it may keep."""
        dropped: list[T] = []
        with self._lock:
            kept = self._idle.get(key)
            if kept is None:
                kept = self._idle[key] = []
                while self.keys is not None and len(self._idle) > self.keys:
                    dropped.extend(self._idle.popitem(last=False)[1])
            else:
                self._idle.move_to_end(key)
            if len(kept) < self.per_key:
                kept.append(item)
            else:
                dropped.append(item)
        for old in dropped:
            self._close(old)

    def sweep(self, stale: Callable[[T], bool]) -> list[T]:
        """Take out every idle connection ``stale`` says can no longer serve, whatever its key
        (one whose key is never asked for again would stay open otherwise): the caller closes them."""
        swept: list[T] = []
        with self._lock:
            for key in list(self._idle):
                kept: list[T] = []
                for item in self._idle[key]:  # each asked once: what it says goes
                    (swept if stale(item) else kept).append(item)
                if kept:
                    self._idle[key] = kept
                else:
                    del self._idle[key]
        return swept

    def kept(self, key: Hashable) -> list[T]:
        """The idle connections of ``key`` (a copy; for tests and diagnostics)."""
        with self._lock:
            return list(self._idle.get(key, ()))

    def close_all(self) -> None:
        """Close every idle connection (tests; local mode at shutdown)."""
        with self._lock:
            kept = [item for items in self._idle.values() for item in items]
            self._idle.clear()
        for item in kept:
            self._close(item)

"""Spread: a job's occurrences fired at an offset inside a window after them (the API's
``spread: {"window_seconds", "mode"}``), so that many jobs on one expression do not all fire at
the same second.

The offset is a whole number of seconds in ``[0, window_seconds)``, fixed when the occurrence is
planned (the job's ``next_run_at`` is the occurrence plus its offset; the occurrence itself,
``scheduled_at``, keeps naming the run, its ``Idempotency-Key`` included):

* ``stable``: one offset per job, derived from its id (Jenkins' ``H``): every occurrence of the
  job fires the same number of seconds after it;
* ``random``: an offset per occurrence, drawn from the job's id and the occurrence by a hash, so
  that it is the same whoever plans it (the preview shows the real one) while spread evenly over
  the window from one occurrence to the next.

Both are a keyed BLAKE2b of the job id (and the occurrence's Unix second), reduced modulo the
window: deterministic across processes and Python versions (``hash()`` is not).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from scheduler.schedules.base import ScheduleError

#: The widest window a spread takes (one day).
MAX_SPREAD_SECONDS = 86400
SPREAD_MODES = ("stable", "random")


def _draw(text: str, window: int) -> int:
    digest = hashlib.blake2b(text.encode(), digest_size=8, person=b"sched-spread").digest()
    return int.from_bytes(digest, "big") % window


@dataclass(frozen=True, slots=True)
class Spread:
    """A job's spread: ``window_seconds`` (1 to ``MAX_SPREAD_SECONDS``), ``mode`` (``stable`` or
    ``random``) and ``seed`` (the job's id)."""

    window_seconds: int
    mode: str = "stable"
    seed: str = ""
    _stable: timedelta = field(default=timedelta(0), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        window = self.window_seconds
        if isinstance(window, bool) or not isinstance(window, int) or not 1 <= window <= MAX_SPREAD_SECONDS:
            raise ScheduleError(
                f"must be a whole number of seconds from 1 to {MAX_SPREAD_SECONDS}", field="spread.window_seconds"
            )
        if self.mode not in SPREAD_MODES:
            raise ScheduleError("must be stable or random", field="spread.mode")
        if self.mode == "stable":
            object.__setattr__(self, "_stable", timedelta(seconds=_draw(self.seed, window)))

    @classmethod
    def of(cls, spread: Any, seed: str | None) -> Spread | None:
        """The spread of a job's ``spread`` field (a mapping, or None: no spread)."""
        if not spread:
            return None
        return cls(spread.get("window_seconds"), spread.get("mode") or "stable", seed or "")

    def offset(self, occurrence: datetime) -> timedelta:
        """How long after ``occurrence`` (aware) it fires."""
        if self.mode == "stable":
            return self._stable
        second = int(occurrence.timestamp())
        return timedelta(seconds=_draw(f"{self.seed}@{second}", self.window_seconds))

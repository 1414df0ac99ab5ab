"""Local mode on a laptop: noticing that the machine slept, so that the deliveries under way when
it went to sleep keep their leases when it wakes (``WakeGuard``)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)

#: The wall clock ran this much ahead of the monotonic clock between two checks: the machine
#: slept (an NTP correction moves it by far less).
SLEPT_SECONDS = 2.0
#: After a wake, the claims (and local mode's slot takes) wait this long once this process has
#: kept its leases, so that every runner process of the database (each checks at least once a
#: second: in_process.WAKE_CHECK_SECONDS) has kept its own before any claim could take them as lost.
WAKE_GRACE_SECONDS = 2.0


class WakeGuard:
    """Checked before each claim (and, in local mode, each slot taken and every second besides):
    after the machine slept, ``keep`` is called (this process's leases kept) and the claims hold
    off for ``grace_seconds``. ``held`` names what ``keep`` keeps, in the warning it logs (a
    process has a guard for its deliveries and one for its alerts: two lines, each saying its own).

    While a machine sleeps (a laptop's lid closed), the wall clock, and so the database's
    ``now()``, runs on, but the monotonic clock stops (Linux's ``CLOCK_MONOTONIC``, macOS's
    ``mach_absolute_time``): the leases of the deliveries under way have expired when it wakes,
    though those deliveries slept too and go on. Unguarded, the first claim after the wake took
    their jobs as lost and delivered them again, and the deliveries that then ended were refused
    their record (their tokens had changed): a target on the same laptop, which slept as well,
    received the same occurrence twice."""

    def __init__(
        self,
        keep: Callable[[], None],
        *,
        held: str = "the deliveries under way",
        slept_seconds: float = SLEPT_SECONDS,
        grace_seconds: float = WAKE_GRACE_SECONDS,
        wall_clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ):
        self._keep, self._held = keep, held
        self.slept_seconds, self.grace_seconds = slept_seconds, grace_seconds
        self._wall_clock, self._monotonic = wall_clock, monotonic
        self._offset = wall_clock() - monotonic()
        self._keep_pending = False
        self._claims_from = float("-inf")  # time.monotonic(): the end of a wake's grace
        self._lock = threading.Lock()

    def check(self) -> float:
        """Seconds the next claim should still wait (0 but in a wake's grace). After a sleep, the
        leases are kept first, and the grace counts from then; when the database does not answer,
        ``keep``'s error propagates (the claim it precedes would fail alike) and the next check
        tries again."""
        with self._lock:
            now = self._monotonic()
            offset = self._wall_clock() - now
            slept, self._offset = offset - self._offset, offset
            if slept > self.slept_seconds:
                logger.warning(
                    "the machine slept for about %.0f s: the leases of %s are kept before the next claim",
                    slept,
                    self._held,
                )
                self._keep_pending = True
                self._claims_from = now + self.grace_seconds
            if self._keep_pending:
                self._keep()
                self._keep_pending = False
                # The grace counts from the leases kept, not from the wake: with the database
                # away longer than the grace, the other processes keep theirs (each checks every
                # second) once it answers, before this one claims.
                self._claims_from = max(self._claims_from, self._monotonic() + self.grace_seconds)
            return max(0.0, self._claims_from - now)

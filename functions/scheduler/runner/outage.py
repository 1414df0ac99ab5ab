"""What a loop that needs the database says of an outage: an error when it begins, a reminder
each minute while it lasts, a line once the database has answered again for a while (a
database that answers reads but fails writes, a full disk, comes and goes: one outage, not a
line a second); never a traceback a second."""

from __future__ import annotations

import logging
import time

logger = logging.getLogger(__name__)


class Outage:
    """A database outage as one loop meets it (``what`` waits meanwhile: "deliveries", "alert
    sweeps"). ``began`` is None while the database answers."""

    REMIND_SECONDS = 60.0
    # How long the database must answer, without a failure, for the outage to be over.
    CONFIRM_SECONDS = 30.0

    def __init__(self, what: str) -> None:
        self.what = what
        self.began: float | None = None
        self._said = 0.0
        self._answering_since: float | None = None

    def goes_on(self, exc: Exception) -> None:
        """The loop failed for want of the database (``exc``: ``StoreUnavailable``)."""
        now = time.monotonic()
        self._answering_since = None
        if self.began is None:
            self.began = self._said = now
            logger.error("the database is unavailable (%s); %s wait for it, trying again every second", exc, self.what)
        elif now - self._said >= self.REMIND_SECONDS:
            self._said = now
            logger.error(
                "the database is still unavailable after %.0f s (%s); %s wait", now - self.began, exc, self.what
            )

    def answers(self) -> None:
        """The database answered the loop: the outage is over once it has for ``CONFIRM_SECONDS``."""
        if self.began is None:
            return
        now = time.monotonic()
        if self._answering_since is None:
            self._answering_since = now
        if now - self._answering_since >= self.CONFIRM_SECONDS:
            lasted = self._answering_since - self.began
            # From the loop's first failure: the outage may have begun before it (a call waits
            # up to 10 s for a connection), so it is said as what the loop waited.
            logger.warning(
                "the database is available again (%s waited %.0f s for it); %s go on", self.what, lasted, self.what
            )
            self.began = self._answering_since = None

"""What a loop that needs the database says of an outage: an error when it begins, a reminder
each minute while it lasts, a line when the database answers again; never a traceback a second."""

from __future__ import annotations

import logging
import time

logger = logging.getLogger(__name__)


class Outage:
    """A database outage as one loop meets it (``what`` waits meanwhile: "deliveries", "alert
    sweeps"). ``began`` is None while the database answers."""

    REMIND_SECONDS = 60.0

    def __init__(self, what: str) -> None:
        self.what = what
        self.began: float | None = None
        self._said = 0.0

    def goes_on(self, exc: Exception) -> None:
        """The loop failed for want of the database (``exc``: ``StoreUnavailable``)."""
        now = time.monotonic()
        if self.began is None:
            self.began = self._said = now
            logger.error("the database is unavailable (%s); %s wait for it, trying again every second", exc, self.what)
        elif now - self._said >= self.REMIND_SECONDS:
            self._said = now
            logger.error(
                "the database is still unavailable after %.0f s (%s); %s wait", now - self.began, exc, self.what
            )

    def ended(self) -> None:
        """The database answered again."""
        if self.began is not None:
            waited = time.monotonic() - self.began
            logger.warning("the database is available again after %.0f s; %s resume", waited, self.what)
        self.began = None

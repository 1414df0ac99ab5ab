"""The scheduler's domain errors, under one base: ``SchedulerError``.

Domain code raises these; the API maps them to HTTP answers in one place
(``scheduler.api.errors``), the CLI and the runner catch them by base class. Errors of a
transport (the API's own ``ApiError``, a delivery failure, which is a value rather than an
exception) are not domain errors and live with their transport.
"""

from __future__ import annotations

#: The API's message for an execution id the caller has none of (``GET /v1/executions/{id}``):
#: a client tells it from a route an older API lacks by it. (Here, beside the errors, as the
#: clients' standard-library modules read it: the ``Job`` construct's function ships this file.)
NO_SUCH_EXECUTION = "no such execution"


class SchedulerError(Exception):
    """Base of every error the domain raises on purpose."""


class NotFound(SchedulerError, LookupError):
    """No such job for this owner (another principal's job is indistinguishable from an absent one)."""


class NameTaken(SchedulerError, ValueError):
    """The owner already has a job of that name."""


class CalendarNotFound(SchedulerError, LookupError):
    """No calendar of that name for this owner."""

    def __init__(self, name: str):
        super().__init__(f"no calendar named {name!r}")
        self.name = name


class AlertRuleNotFound(SchedulerError, LookupError):
    """No alert rule set of that name for this owner."""

    def __init__(self, name: str):
        super().__init__(f"no alert rule set named {name!r}")
        self.name = name


class AlertRuleExists(SchedulerError, ValueError):
    """A rule set asked to be created only (If-None-Match: *) names one the owner has."""

    def __init__(self, name: str):
        super().__init__(f"an alert rule set named {name!r} exists")
        self.name = name


class CalendarNameTaken(SchedulerError, ValueError):
    """The owner already has a calendar of that name."""


class CalendarInUse(SchedulerError):
    """A calendar some jobs name cannot be deleted: ``jobs`` lists them (``(id, name)``)."""

    def __init__(self, name: str, jobs: list[tuple[str, str]]):
        shown = ", ".join(job_name for _, job_name in jobs)
        super().__init__(f"calendar {name!r} is used by the jobs {shown}")
        self.name = name
        self.jobs = jobs


class VersionMismatch(SchedulerError, ValueError):
    """A job's, calendar's or alert rule set's version is not the one the caller expected
    (If-Match): ``current`` is its version now, None when it no longer exists (a rule set, which
    a PUT would otherwise create)."""

    def __init__(self, current: int | None, what: str = "job"):
        super().__init__(f"the {what} is at version {current}" if current is not None else f"the {what} does not exist")
        self.current = current
        self.what = what


class EditConflict(SchedulerError):
    """The job kept changing while an edit was planned from it (the edit was not written)."""

    def __init__(self, job_id: str):
        super().__init__(f"job {job_id} changed while it was being edited; try again")
        self.job_id = job_id


class ScheduleError(SchedulerError, ValueError):
    """Bad schedule input.

    ``str(e)`` is a clear message meant for the API's 400 detail; ``field`` names the request
    field at fault: ``"schedule"``, ``"timezone"``, ``"run_at"``, ``"start_at"`` or ``"end_at"``
    (and ``"after"`` or ``"count"`` from the preview, ``schedules.occurrences``).
    """

    def __init__(self, message: str, field: str = "schedule"):
        super().__init__(message)
        self.message = message
        self.field = field


class SecretError(SchedulerError, ValueError):
    """A token that cannot be decrypted: malformed, tampered with, or for another key."""


class MaskedSecretError(SchedulerError, ValueError):
    """A ``"***"`` was sent back where no stored secret exists to keep, or where the stored one
    belongs to another origin (the target's url moved to another scheme, host or port)."""

    def __init__(
        self, field: str, message: str = 'is masked ("***") but there is no stored secret to keep; send the value'
    ):
        super().__init__(message)
        self.field = field
        self.message = str(self)


class StoreUnavailable(SchedulerError):
    """The database could not serve a call now: it gave no connection within the pool's wait
    (it is down, unreachable, or every connection is busy), or failed again on a fresh
    connection. Nothing was written; the call may be made again shortly (the API's 503)."""


class InvalidCursor(SchedulerError, ValueError):
    """The cursor was not made by this service for this query."""


class MigrationError(SchedulerError, RuntimeError):
    """An applied migration differs from the file of the same number, or one failed."""


class ChainError(SchedulerError, ValueError):
    """A chain (``on_success``, ``on_failure``, ``on_complete``) that names no job of the owner,
    or would close a cycle. ``field`` names the request field at fault."""

    def __init__(self, message: str, field: str):
        super().__init__(message)
        self.message = message
        self.field = field

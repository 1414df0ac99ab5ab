"""The errors that stop local mode before it starts: each one line for the user, no traceback."""

from __future__ import annotations

from scheduler.core.errors import SchedulerError


class LocalError(SchedulerError):
    """Local mode cannot start (busy port, unreachable database, missing package...): one line
    for the user, no traceback."""


class OptionError(LocalError):
    """An option, or the environment variable standing for it, is wrong (a malformed database
    URL, ``--credentials`` with ``--auth none``...): a usage error, exit code 2."""

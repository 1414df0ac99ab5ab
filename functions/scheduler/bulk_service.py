"""Bulk pause and resume: the owner's jobs that a tag or a name prefix selects, each paused or
resumed as its own route would (``service.pause_job``, ``service.resume_job``), in a transaction
of its own, planned from the page of jobs that listed it."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from scheduler.core.domain import Job, JobState, Pause
from scheduler.core.errors import NotFound
from scheduler.ports import JobStore
from scheduler.service import pause_job, resume_job

# The most jobs one bulk pause or resume changes, and the page it reads them by.
BULK_LIMIT = 1000
_BULK_PAGE = 200


class BulkChange(NamedTuple):
    """What a bulk pause or resume changed: the jobs, in name order, and whether jobs it selects
    are left past ``BULK_LIMIT`` (the same request again changes the next ones)."""

    jobs: list[Job]
    more: bool


def pause_jobs(
    store: JobStore,
    owner: str,
    *,
    tag: str | None = None,
    name_prefix: str | None = None,
    pause: Pause | None = None,
    by: str | None = None,
) -> BulkChange:
    """Pause the owner's active jobs with ``tag`` or whose name starts with ``name_prefix``
    (at most ``BULK_LIMIT``), each as ``pause_job``; the jobs paused, in name order."""
    return _bulk(
        store,
        owner,
        JobState.ACTIVE,
        tag,
        name_prefix,
        lambda job: pause_job(store, owner, str(job.id), pause, by=by, as_read=job),
    )


def resume_jobs(
    store: JobStore, owner: str, *, tag: str | None = None, name_prefix: str | None = None, by: str | None = None
) -> BulkChange:
    """Resume the owner's paused jobs with ``tag`` or whose name starts with ``name_prefix``
    (at most ``BULK_LIMIT``), each as ``resume_job``; the jobs resumed, in name order."""
    return _bulk(
        store,
        owner,
        JobState.PAUSED,
        tag,
        name_prefix,
        lambda job: resume_job(store, owner, str(job.id), by=by, as_read=job),
    )


def _bulk(
    store: JobStore,
    owner: str,
    state: JobState,
    tag: str | None,
    name_prefix: str | None,
    change: Callable[[Job], Job],
) -> BulkChange:
    """``change`` applied to each of the owner's jobs in ``state`` that the filter selects, as
    its page read it (a job deleted meanwhile is left out), up to ``BULK_LIMIT``; ``more`` when
    one more is selected."""
    changed: list[Job] = []
    after: str | None = None
    while True:
        page = store.list_jobs(owner, state=state, tag=tag, name_prefix=name_prefix, limit=_BULK_PAGE, after_name=after)
        for job in page:
            if len(changed) == BULK_LIMIT:
                return BulkChange(changed, True)
            try:
                changed.append(change(job))
            except NotFound:
                continue
        if len(page) < _BULK_PAGE:
            return BulkChange(changed, False)
        after = page[-1].name

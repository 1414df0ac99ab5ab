"""The typed side of ``SchedulerClient``: ``client.jobs``, ``client.executions`` and
``client.schedules``, whose methods answer the records of ``api_models`` (``Job``,
``Execution``...) and whose listings are iterators that follow ``next_cursor`` page by page.

A job is named by its id or its name (a name is looked up: names are unique per owner). The
client's dict methods (``create_job``, ``list_jobs``...) stay as they were: these call them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from scheduler.transport.api_models import Change, Execution, Job, Page, RunRequest, parse_time
from scheduler.transport.api_wire import NO_SUCH_EXECUTION, AccessDenied, ExecutionNotFound, ResourceNotFound

if TYPE_CHECKING:
    from scheduler.client import SchedulerClient

Instant = datetime | str


def rfc3339(value: Instant | None) -> str | None:
    """An instant as the API takes it: a ``datetime`` (a naive one is read as UTC) in RFC 3339, a
    string as is."""
    if value is None or isinstance(value, str):
        return value
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.isoformat().replace("+00:00", "Z")


class Jobs:
    """``client.jobs``: create, read, change and run jobs."""

    def __init__(self, client: SchedulerClient):
        self._client = client

    def _id(self, job: str | Job) -> str:
        return job.id if isinstance(job, Job) else self._client.resolve_job_id(job)

    def create(self, definition: Mapping[str, Any]) -> Job:
        """``POST /v1/jobs``: the new job."""
        return Job.from_json(self._client.create_job(definition))

    def get(self, job: str) -> Job:
        """The job of this id or name (``ResourceNotFound`` for an unknown id, ``JobNotFound`` for
        an unknown name)."""
        return Job.from_json(self._client.get_job(self._id(job)))

    def page(
        self,
        *,
        state: str | None = None,
        tag: str | None = None,
        name_prefix: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Job]:
        """One page of ``GET /v1/jobs`` (name order)."""
        answer = self._client.list_jobs(state=state, tag=tag, name_prefix=name_prefix, limit=limit, cursor=cursor)
        return Page(tuple(Job.from_json(j) for j in answer["jobs"]), answer.get("next_cursor"))

    def list(
        self,
        *,
        state: str | None = None,
        tag: str | None = None,
        name_prefix: str | None = None,
        page_size: int | None = None,
    ) -> Iterator[Job]:
        """Every job that matches, in name order, fetched a page at a time as it is iterated."""
        filters = {"state": state, "tag": tag, "name_prefix": name_prefix, "limit": page_size}
        for answer in self._client.iter_job_pages(**filters):
            for item in answer.get("jobs") or []:
                yield Job.from_json(item)

    def update(self, job: str | Job, patch: Mapping[str, Any], *, if_match: int | str | None = None) -> Job:
        """``PATCH /v1/jobs/{id}``: a JSON merge patch (``None`` removes a field)."""
        return Job.from_json(self._client.patch_job(self._id(job), patch, if_match=if_match))

    def replace(self, job: str | Job, definition: Mapping[str, Any], *, if_match: int | str | None = None) -> Job:
        """``PUT /v1/jobs/{id}``: the whole definition (``Job.definition()`` is one)."""
        return Job.from_json(self._client.replace_job(self._id(job), definition, if_match=if_match))

    def delete(self, job: str | Job, *, if_match: int | str | None = None) -> None:
        """``DELETE /v1/jobs/{id}``: the job and its executions (with ``if_match``, only at that
        version: ``Conflict`` otherwise, nothing deleted)."""
        self._client.delete_job(self._id(job), if_match=if_match)

    def pause(
        self,
        job: str | Job,
        *,
        note: str | None = None,
        until: Instant | None = None,
        if_match: int | str | None = None,
    ) -> Job:
        """Pause the job's schedule (a manual run still runs), with a ``note``; at ``until`` the
        runner resumes it by itself (with ``if_match``, only at that version)."""
        answer = self._client.pause_job(self._id(job), note=note, until=rfc3339(until), if_match=if_match)
        return Job.from_json(answer)

    def pause_all(
        self,
        *,
        tag: str | None = None,
        name_prefix: str | None = None,
        note: str | None = None,
        until: Instant | None = None,
    ) -> tuple[str, ...]:
        """Pause the caller's active jobs with ``tag`` or ``name_prefix``: the ids paused."""
        selection = {"tag": tag, "name_prefix": name_prefix, "note": note, "until": rfc3339(until)}
        answer = self._client.pause_jobs({k: v for k, v in selection.items() if v is not None})
        return tuple(str(job_id) for job_id in (answer or {}).get("jobs") or [])

    def backfill(self, job: str | Job, start: Instant, end: Instant, *, dry_run: bool = False) -> tuple[datetime, ...]:
        """Run the job's occurrences from ``start`` to ``end`` (both included; at most 10,000),
        each as itself, one at a time, trigger ``backfill``; with ``dry_run`` only answer them.
        The occurrences of a dry run; empty otherwise (the count is ``len`` of a dry run)."""
        answer = self._client.backfill_job(self._id(job), rfc3339(start) or "", rfc3339(end) or "", dry_run=dry_run)
        return tuple(at for at in (parse_time(text) for text in (answer or {}).get("occurrences") or []) if at)

    def resume_all(self, *, tag: str | None = None, name_prefix: str | None = None) -> tuple[str, ...]:
        """Resume the caller's paused jobs with ``tag`` or ``name_prefix``: the ids resumed."""
        selection = {"tag": tag, "name_prefix": name_prefix}
        answer = self._client.resume_jobs({k: v for k, v in selection.items() if v is not None})
        return tuple(str(job_id) for job_id in (answer or {}).get("jobs") or [])

    def resume(self, job: str | Job, *, if_match: int | str | None = None) -> Job:
        """Resume the job's schedule (``missed_runs`` says what happens to the occurrences
        missed; with ``if_match``, only at that version)."""
        return Job.from_json(self._client.resume_job(self._id(job), if_match=if_match))

    def run(
        self,
        job: str | Job,
        *,
        body: str | None = None,
        headers: Mapping[str, str] | None = None,
        vars: Mapping[str, str] | None = None,
    ) -> RunRequest:
        """Queue one attempt now, outside the schedule; ``body``, ``headers`` and ``vars`` (the
        body's ``{{vars.NAME}}``) override the target's for that run only."""
        overrides = {"body": body, "headers": dict(headers or {}), "vars": dict(vars or {})}
        given = {k: v for k, v in overrides.items() if v is not None and v != {}}
        return RunRequest.from_json(self._client.run_job(self._id(job), given or None) or {})

    def changes(self, job: str | Job, *, page_size: int | None = None) -> Iterator[Change]:
        """The job's change log, newest first, a page at a time as it is iterated (after a
        delete, name the job by its id)."""
        for answer in self._client.iter_change_pages(self._id(job), limit=page_size):
            for item in answer.get("changes") or []:
                yield Change.from_json(item)


class Executions:
    """``client.executions``: the attempts, a job's or across all of the caller's jobs."""

    def __init__(self, client: SchedulerClient):
        self._client = client

    def page(
        self,
        *,
        job: str | Job | None = None,
        status: str | None = None,
        since: Instant | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Execution]:
        """One page, newest first: across jobs (``GET /v1/executions``, ``since`` an instant), or
        one job's (``GET /v1/jobs/{id}/executions``, when ``job`` is given without ``since``)."""
        fetch, filters = self._listing(job, status, since)
        answer = fetch(**filters, limit=limit, cursor=cursor)
        return Page(tuple(Execution.from_json(e) for e in answer["executions"]), answer.get("next_cursor"))

    def list(
        self,
        *,
        job: str | Job | None = None,
        status: str | None = None,
        since: Instant | None = None,
        page_size: int | None = None,
    ) -> Iterator[Execution]:
        """Every execution that matches, newest first, fetched a page at a time as it is iterated."""
        fetch, filters = self._listing(job, status, since)
        for answer in self._client.pages(fetch, {**filters, "limit": page_size}):
            for item in answer.get("executions") or []:
                yield Execution.from_json(item)

    def get(self, execution_id: str, *, job: str | Job | None = None, since: Instant | None = None) -> Execution:
        """The execution of this id, whole (its response excerpt and error included), with its
        job's name: one call (``GET /v1/executions/{id}``). ``ExecutionNotFound`` when the caller
        has none of that id.

        Against an API older than that route, the caller's executions are read newest first
        until the id is met (fast for a recent one): ``job`` (its job) or ``since`` (no earlier
        than its start) narrow that walk; they are not needed otherwise."""
        try:
            return Execution.from_json(self._client.get_execution(execution_id))
        except (ResourceNotFound, AccessDenied) as exc:  # AccessDenied: API Gateway's answer to no route
            if exc.message == NO_SUCH_EXECUTION:
                raise ExecutionNotFound(f"no execution {execution_id} among your executions") from None
            if exc.status not in (403, 404):
                raise
        wanted = execution_id.lower()
        for execution in self.list(job=job, since=since, page_size=200):
            if execution.id.lower() == wanted:
                return execution
        raise ExecutionNotFound(f"no execution {execution_id} among your executions")

    def _listing(self, job: str | Job | None, status: str | None, since: Instant | None) -> tuple[Any, dict[str, Any]]:
        job_id = None if job is None else job.id if isinstance(job, Job) else self._client.resolve_job_id(job)
        if job_id is not None and since is None:
            return (lambda **kw: self._client.list_executions(job_id, **kw)), {"status": status}
        return self._client.list_all_executions, {"status": status, "job_id": job_id, "since": rfc3339(since)}


class Schedules:
    """``client.schedules``: when a schedule fires, before a job is saved."""

    def __init__(self, client: SchedulerClient):
        self._client = client

    def preview(
        self,
        schedule: str | None = None,
        *,
        run_at: Instant | None = None,
        timezone: str | None = None,
        start_at: Instant | None = None,
        end_at: Instant | None = None,
        after: Instant | None = None,
        count: int | None = None,
        schedules: Sequence[str] | None = None,
        spread: Mapping[str, Any] | None = None,
        job_id: str | None = None,
    ) -> list[datetime]:
        """The next fire times (UTC) strictly after ``after`` (default: the server's now), as
        the planner computes them; ``rate()``/``@every`` count from ``start_at``, else ``after``.
        ``schedules``: several expressions (their union) instead of ``schedule``; ``spread``
        (``{"window_seconds", "mode"}``) seeded by ``job_id``."""
        body = {
            "schedule": schedule,
            "schedules": None if schedules is None else list(schedules),
            "spread": None if spread is None else dict(spread),
            "job_id": job_id,
            "run_at": rfc3339(run_at),
            "timezone": timezone,
            "start_at": rfc3339(start_at),
            "end_at": rfc3339(end_at),
            "after": rfc3339(after),
            "count": count,
        }
        answer = self._client.preview_schedule({k: v for k, v in body.items() if v is not None})
        return [moment for moment in (parse_time(o) for o in answer["occurrences"]) if moment is not None]

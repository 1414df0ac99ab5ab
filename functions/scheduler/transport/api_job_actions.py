"""The calls of ``scheduler.client.SchedulerClient`` that act on jobs rather than change their
definition: pause and resume (one job, or by tag or name prefix), a backfill, a run now. A base
class of the client."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from scheduler.transport import api_wire
from scheduler.transport.api_wire import job_path


class JobActionCalls:
    """``pause_job``, ``resume_job``, ``pause_jobs``, ``resume_jobs``, ``backfill_job``,
    ``run_job``, on the client's ``request``."""

    # The client's: one request (the parsed JSON answer).
    request: Callable[..., Any]

    @staticmethod
    def _job_path(job_id: str, suffix: str = "") -> str:
        return job_path(job_id, suffix)

    def pause_job(
        self, job_id: str, *, note: str | None = None, until: str | None = None, if_match: str | int | None = None
    ) -> dict[str, Any]:
        """``POST /v1/jobs/{id}/pause``: the job (with a ``note``, and ``until``, an RFC 3339
        instant at which the runner resumes it); ``If-Match`` when ``if_match`` is given."""
        body = {k: v for k, v in (("note", note), ("until", until)) if v is not None}
        path, headers = self._job_path(job_id, "/pause"), api_wire.if_match(if_match)
        return api_wire.expect_job(self.request("POST", path, body=body or None, headers=headers))

    def backfill_job(self, job_id: str, start: str, end: str, *, dry_run: bool = False) -> dict[str, Any]:
        """``POST /v1/jobs/{id}/backfill``: a dry run's ``{"occurrences", "count"}``, else ``{"count"}``."""
        answer = self.request(
            "POST", self._job_path(job_id, "/backfill"), body={"start": start, "end": end, "dry_run": dry_run}
        )
        return api_wire.expect_fields(answer, count=int)

    def pause_jobs(self, selection: Mapping[str, Any]) -> dict[str, Any]:
        """``POST /v1/jobs/pause`` with ``{"tag"}`` or ``{"name_prefix"}`` (and ``note``,
        ``until``), sent again while the answer says ``more``: ``{"jobs": [ids], "count": n}``
        of them all."""
        return self._bulk("/v1/jobs/pause", selection)

    def resume_jobs(self, selection: Mapping[str, Any]) -> dict[str, Any]:
        """``POST /v1/jobs/resume`` with ``{"tag"}`` or ``{"name_prefix"}``, sent again while the
        answer says ``more``: ``{"jobs", "count"}`` of them all."""
        return self._bulk("/v1/jobs/resume", selection)

    def _bulk(self, path: str, selection: Mapping[str, Any]) -> dict[str, Any]:
        """A bulk action until it has changed every job selected (a request changes at most
        1,000; one that changes none ends it, whatever it says)."""
        jobs: list[Any] = []
        while True:
            answer = api_wire.expect_fields(self.request("POST", path, body=dict(selection)), jobs=list, count=int)
            jobs.extend(answer["jobs"])
            if answer.get("more") is not True or not answer["jobs"]:
                return {"jobs": jobs, "count": len(jobs)}

    def resume_job(self, job_id: str, *, if_match: str | int | None = None) -> dict[str, Any]:
        """``POST /v1/jobs/{id}/resume``: the job; ``If-Match`` when ``if_match`` is given."""
        path, headers = self._job_path(job_id, "/resume"), api_wire.if_match(if_match)
        return api_wire.expect_job(self.request("POST", path, headers=headers))

    def run_job(self, job_id: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """``POST /v1/jobs/{id}/run``: ``{"job_id", "status": "queued", "requested_at", "job"}``;
        ``overrides``: ``{"body", "headers", "vars"}`` for that run only."""
        answer = self.request("POST", self._job_path(job_id, "/run"), body=dict(overrides) if overrides else None)
        return api_wire.expect_fields(answer, job_id=str, status=str)

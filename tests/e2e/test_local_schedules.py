"""`scheduler local` as a black box (issue 33): a job on several expressions with a spread
fires at the union's occurrences, each at its occurrence plus the job's offset, and every
delivery names the occurrence (``X-Scheduler-Scheduled-At``, ``Idempotency-Key``), not the
spread time."""

from __future__ import annotations

from datetime import datetime, timedelta

from tests.e2e.test_local_mode import http_target, local, target  # noqa: F401 (fixtures)
from tests.support import poll


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_a_union_with_a_spread_fires_at_each_occurrence_plus_its_offset(local, target):
    api = local()
    job = api.post(
        "/v1/jobs",
        {
            "name": "union-spread",
            "schedules": ["@every 2s", "@every 3s"],
            "spread": {"window_seconds": 2, "mode": "stable"},
            "target": http_target(target.url + "/union"),
        },
    )
    anchor = _instant(job["created_at"]).replace(microsecond=0)
    requests = target.wait_for(4, timeout=30)
    assert len(requests) >= 4
    scheduled = []
    for request in requests[:4]:
        headers = {k.lower(): v for k, v in request["headers"].items()}
        at = headers["x-scheduler-scheduled-at"]
        assert headers["idempotency-key"] == f"{job['id']}:{at}"  # the occurrence's, not the spread time
        since = (_instant(at) - anchor).total_seconds()
        assert since % 2 == 0 or since % 3 == 0, since  # an occurrence of either expression
        scheduled.append(_instant(at))
    assert scheduled == sorted(scheduled) and len(set(scheduled)) == len(scheduled)

    # Each first attempt was due at its occurrence plus the job's one offset (the preview's).
    executions = poll(
        lambda: (
            [
                e
                for e in api.get(f"/v1/jobs/{job['id']}/executions?limit=50")["executions"]
                if e["status"] == "succeeded" and e["trigger"] == "schedule"
            ][:4]
            or None
        )
    )
    offsets = {_instant(e["due_at"]) - _instant(e["scheduled_at"]) for e in executions}
    [offset] = offsets
    assert timedelta(0) <= offset < timedelta(seconds=2)
    explained = api.post(
        "/v1/schedules/preview",
        {
            "schedules": ["@every 2s", "@every 3s"],
            "spread": {"window_seconds": 2},
            "job_id": job["id"],
            "start_at": job["created_at"][:19] + "Z",
            "count": 1,
            "explain": True,
        },
    )["occurrences"]
    assert explained[0]["spread_seconds"] == offset.total_seconds()
    assert all(_instant(e["started_at"]) >= _instant(e["due_at"]) for e in executions)

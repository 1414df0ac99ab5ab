"""The chains of a job's write (``on_success``, ``on_failure``, ``on_complete``): each names a job
of the owner, and none closes a cycle. The check runs in the write's transaction, with the
owner's chains held (the store's ``hold_chains``), so that two writes of one owner at once
(``A.on_success = [B]`` and ``B.on_success = [A]``) are checked one after the other: the second
sees the first's links, and exactly one is refused. ``service`` re-exports it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from msgspec import structs

from scheduler.core.changes import cause_of, find_cycle
from scheduler.core.domain import CHAIN_FIELDS, Job, Outcome, Plan
from scheduler.core.errors import ChainError
from scheduler.core.records import ChainRun
from scheduler.planning.alerts import FAILED
from scheduler.ports import ChainCheck, ChainLookup, JobStore

# How many of a job's newest executions are looked through for the attempt a dropped retry
# follows (skipped rows recorded since may come before it).
_LOOK_BACK = 5


def chains_of_a_dropped_retry(store: JobStore, current: Job, plan: Plan) -> Plan:
    """``plan`` (an edit's, which starts the occurrences afresh) with the chained runs of the
    occurrence in hand when it drops that occurrence's pending retry: its last attempt failed,
    and with no attempt to come it was the final one, so its ``on_failure`` and ``on_complete``
    run, as they would have after the retry's failure. Nothing when no retry was pending (no
    attempt made, or one under way: its end is recorded against the new plan and runs its
    chains then), or the job chains to nothing."""
    if not (current.on_failure or current.on_complete) or current.attempt <= 0 or current.lease_kind is not None:
        return plan
    if plan.scheduled_at == current.scheduled_at and plan.attempt == current.attempt:
        return plan  # the occurrence in hand kept: its retry still comes
    assert current.id is not None and current.owner is not None
    for execution in store.list_executions(current.owner, current.id, limit=_LOOK_BACK):
        if execution.scheduled_at == current.scheduled_at and execution.attempt == current.attempt:
            if execution.status not in FAILED:  # the statuses that count as a failure for alerts too
                return plan
            outcome = Outcome(
                execution.status,
                error=execution.error,
                http_status=execution.http_status,
                response_excerpt=execution.response_excerpt,
            )
            cause = cause_of(current, outcome, execution.id)
            return structs.replace(plan, chain=ChainRun(current.owner, current.chained(outcome), cause))
    return plan


def chain_check(owner: str, job_id: str | None, spec: Mapping[str, Any]) -> ChainCheck | None:
    """The check of a write of ``spec`` for the store to run in its transaction with the owner's
    chains held; None for a spec that chains to no job (its write holds nothing, as before)."""
    if not any(spec.get(field) for field in CHAIN_FIELDS):
        return None
    return lambda lookup: check_chains(lookup, owner, job_id, spec)


def check_chains(lookup: ChainLookup, owner: str, job_id: str | None, spec: Mapping[str, Any]) -> None:
    """Refuse (``ChainError``, a 400 naming the field) a chain naming no job of the owner, or one
    that would close a cycle through this job (the cycle named, by job names). Run by the store in
    the write's transaction, the owner's chains held (``chain_check``)."""
    refs = {field: tuple(spec.get(field) or ()) for field in CHAIN_FIELDS}
    wanted = tuple(dict.fromkeys(ref for field_refs in refs.values() for ref in field_refs))
    if not wanted:
        return
    found = lookup.resolve_jobs(owner, wanted)
    links = lookup.chain_links(owner)
    # A reference the job already has stays when its job is gone (a run passes it over): an edit
    # of anything else is not refused for it. A new one must name a job.
    kept = set(links[job_id][1]) if job_id is not None and job_id in links else set()
    for field, field_refs in refs.items():
        for i, ref in enumerate(field_refs):
            if ref in found or ref in kept or (job_id is not None and ref == job_id) or ref == spec.get("name"):
                continue
            raise ChainError(f"names no job of yours: {ref!r}", f"{field}.{i}")
    me = job_id or "(new)"
    names = {job: name for job, (name, _) in links.items()}
    names.update({found_id: name for found_id, name in found.values()})
    names[me] = str(spec.get("name"))
    by_ref = {ref: found_id for ref, (found_id, _) in found.items()}
    # Ids before names: a reference that is a job's id names that job (as the runs read it).
    for job in links:
        by_ref.setdefault(job, job)
    for job, (name, _) in links.items():
        by_ref.setdefault(name, job)
    by_ref[names[me]] = me
    if job_id is not None:
        by_ref[job_id] = me
    graph = {job: tuple(by_ref[r] for r in targets if r in by_ref) for job, (_, targets) in links.items() if job != me}
    graph[me] = tuple(by_ref[r] for r in wanted if r in by_ref)
    cycle = find_cycle(me, graph)
    if cycle is not None:  # the field naming the cycle's first step from this job
        naming = [f for f, field_refs in refs.items() if any(by_ref.get(r) == cycle[1] for r in field_refs)]
        field = naming[0] if naming else next(f for f, field_refs in refs.items() if field_refs)
        raise ChainError("would make a cycle: " + " -> ".join(names.get(job, job) for job in cycle), field)

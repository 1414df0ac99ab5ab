"""Chains in job files (``on_success``, ``on_failure``, ``on_complete``): what ``export`` writes
(a job's name for its id, ``ChainNames``), what ``apply`` reads them as (a stored chain by id the
same as the file's by name, ``chains_by_name``), the order it writes jobs in (each after those its
chains name, ``chained_after``) and which jobs a chain names, for ``--prune`` (``note_chains``)."""

from __future__ import annotations

from typing import Any

from scheduler.cli.manifests import Resolved

CHAINS = ("on_success", "on_failure", "on_complete")
_PAGE = 200  # the API's largest page: the fewest requests


def is_id(ref: Any) -> bool:
    """Whether a chain's reference is a job's id (else it is a name)."""
    from scheduler.transport.api_wire import is_job_id

    return isinstance(ref, str) and is_job_id(ref)


def chains_by_name(names: ChainNames, jobs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The page's jobs whose chains name a job by its id, as they read with names instead."""
    chained = [job for job in jobs if any(is_id(ref) for chain in CHAINS for ref in job.get(chain) or [])]
    if not chained:
        return {}
    renamed = [{**job, **{chain: list(job[chain]) for chain in CHAINS if job.get(chain)}} for job in chained]
    names.rename(renamed, page=jobs)  # the whole page's names: a listing of every job only for the others
    return {job["id"]: job for job in renamed}


def note_chains(chained: dict[str, set[str]], job: dict[str, Any], name: str | None = None) -> None:
    """Each job ``job``'s chains name (by name or id), with ``job`` among those naming it."""
    for chain in CHAINS:
        refs = job.get(chain)
        for ref in refs if isinstance(refs, list) else []:
            if isinstance(ref, str):
                chained.setdefault(ref.lower() if is_id(ref) else ref, set()).add(name or job.get("name") or "?")


def chained_after(resolved: list[Resolved]) -> list[Resolved]:
    """``resolved`` with each job after the jobs of the same files its chains name (by name);
    otherwise in order (a cycle, which the API refuses anyway, keeps its order). Walked without
    recursion: a chain of thousands of jobs is as good as one of two."""
    jobs = {item.document.name: item for item in resolved if item.document.kind == "job"}
    placed: list[Resolved] = []
    seen: set[int] = set()

    def named_by(item: Resolved) -> list[Resolved]:
        refs = [ref for chain in CHAINS for ref in item.definition.get(chain) or [] if isinstance(ref, str)]
        return [jobs[ref] for ref in refs if ref in jobs and ref != item.document.name]

    for first in resolved:
        if id(first) in seen:
            continue
        # A depth-first walk: each job is placed once the jobs it names are; one on the path
        # already (a cycle) is not walked again.
        stack = [(first, iter(named_by(first)))]
        path = {id(first)}
        while stack:
            item, pending = stack[-1]
            following = next((n for n in pending if id(n) not in seen and id(n) not in path), None)
            if following is not None:
                stack.append((following, iter(named_by(following))))
                path.add(id(following))
                continue
            stack.pop()
            path.discard(id(item))
            if id(item) not in seen:
                seen.add(id(item))
                placed.append(item)
    return placed


class ChainNames:
    """Each chain reference that is a job id written as the job's name: a file names jobs by
    name, so that it applies anywhere (ids differ from one deployment to another). An id that
    names no job (a job deleted since, which a run passes over) stays, and is kept in
    ``dangling`` for stderr."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.every: dict[str, str] | None = None  # every job's name by id, once a chain needs it
        self.dangling: set[str] = set()

    def rename(self, jobs: list[dict[str, Any]], page: list[dict[str, Any]] | None = None) -> None:
        """The chains of a page's jobs, in place (``page``: the whole page they are of, whose
        names are known without another listing; default ``jobs``)."""
        ids = {r.lower() for job in jobs for chain in CHAINS for r in job.get(chain) or [] if is_id(r)}
        if not ids:
            return
        names = {job["id"]: job["name"] for job in (jobs if page is None else page)}
        if ids - set(names):
            if self.every is None:
                pages = self.client.iter_job_pages(limit=_PAGE)
                self.every = {job["id"]: job["name"] for page in pages for job in page.get("jobs") or []}
            names = self.every
        for job in jobs:
            for chain in CHAINS:
                if job.get(chain):
                    job[chain] = [names.get(str(ref).lower(), ref) for ref in job[chain]]
        self.dangling.update(i for i in ids if i not in names)

"""Several expressions as one schedule (the API's ``schedules``): their union.

An instant is an occurrence of the union when it is an occurrence of any member; two members
firing at the same instant make one occurrence. Each member keeps its own rules (the DST rule of
the wall-time forms, the anchor of ``rate()``/``@every``). :meth:`UnionSchedule.source_of` names
the member that produced an occurrence (the first listed, when several did), for the preview's
``explain``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar

from scheduler.schedules.base import _ONE_US, Schedule, ScheduleError, _require_aware
from scheduler.schedules.parse import anchored, parse_schedule
from scheduler.schedules.zones import validate_timezone

#: How many expressions a job's ``schedules`` may list.
MAX_SCHEDULES = 10


@dataclass(frozen=True, eq=False, repr=False)
class UnionSchedule(Schedule):
    """Fires at every occurrence of each of ``members`` (recurring schedules, at least one)."""

    members: tuple[Schedule, ...] = ()
    kind: str = field(default="union", kw_only=True)
    one_off: ClassVar[bool] = False
    # Per member, its last search: (after, answer). A job's runs move from one occurrence to the
    # next, and most of them leave the other members' next occurrence where it was: when ``after``
    # is in [after, answer) of the memo, the answer is the same (nothing fires in between). Each
    # entry is replaced whole, so threads sharing the schedule read a consistent pair.
    _memo: list[tuple[datetime, datetime] | None] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        self._memo.extend([None] * len(self.members))

    def next_after(self, after: datetime) -> datetime | None:
        """The earliest of the members' next occurrences strictly after ``after``."""
        after = _require_aware(after, "after")
        memo, best = self._memo, None
        for index, member in enumerate(self.members):
            known = memo[index]
            if known is not None and known[0] <= after < known[1]:
                nxt: datetime | None = known[1]
            else:
                nxt = member.next_after(after)
                if nxt is not None:
                    memo[index] = (after, nxt)
            if nxt is not None and (best is None or nxt < best):
                best = nxt
        return best

    def last_at_or_before(self, at: datetime) -> datetime | None:
        """The latest of the members' occurrences ``<= at``."""
        at = _require_aware(at, "at")
        found = [last for member in self.members if (last := member.last_at_or_before(at)) is not None]
        return max(found) if found else None

    def source_of(self, occurrence: datetime) -> str:
        """The expression of the first member that fires at ``occurrence`` (an occurrence of the
        union); the union's text when none does (not an occurrence)."""
        before = occurrence - _ONE_US
        for member in self.members:
            if member.next_after(before) == occurrence:
                return member.expression
        return self.expression


def parse_union(expressions: Sequence[str], timezone: str = "UTC", anchor: datetime | None = None) -> UnionSchedule:
    """Parse the expressions of a job's ``schedules`` (each as :func:`parse_schedule` does, with
    the job's zone and anchor) into their union.

    Raises :class:`ScheduleError` with ``field`` ``schedules`` (an empty or too long list) or
    ``schedules.<i>`` (the expression at fault, one-offs included: ``at()`` belongs in
    ``run_at``), ``timezone`` or ``start_at``.
    """
    tz = validate_timezone(timezone)
    if isinstance(expressions, str) or not isinstance(expressions, Sequence) or not expressions:
        raise ScheduleError("schedules must be a non-empty list of expressions", field="schedules")
    if len(expressions) > MAX_SCHEDULES:
        raise ScheduleError(f"schedules lists at most {MAX_SCHEDULES} expressions", field="schedules")
    members = []
    for index, expression in enumerate(expressions):
        try:
            member = parse_schedule(expression, timezone, anchor)
        except ScheduleError as exc:
            where = exc.field if exc.field in ("timezone", "start_at") else f"schedules.{index}"
            raise ScheduleError(str(exc), field=where) from None
        if member.one_off:
            raise ScheduleError(
                "a one-off cannot be one of several expressions (use run_at)", field=f"schedules.{index}"
            )
        members.append(member)
    text = " | ".join(member.expression for member in members)
    return UnionSchedule(text, tz, members=tuple(members))


def anchored_union(union: UnionSchedule, anchor: datetime | None) -> UnionSchedule:
    """``union``, parsed without an anchor, with its intervals counting from ``anchor`` (what
    ``parse_union`` answers with that anchor); itself when none of its members is an interval."""
    members = tuple(anchored(member, anchor) for member in union.members)
    if all(new is old for new, old in zip(members, union.members, strict=True)):
        return union
    return UnionSchedule(union.expression, union.tz, members=members)

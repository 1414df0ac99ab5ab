"""Schedule expressions: parsing, validation and next-fire-time computation.

One expression string per job (the API's ``schedule`` field), several (``schedules``: their
union, :class:`UnionSchedule`), or an instant (``run_at``); a job's ``spread`` fires each
occurrence at an offset after it (:class:`Spread`, :func:`fire_time`).

Forms
-----
``m h dom mon dow``
    Classic 5-field cron, matched against LOCAL WALL TIME in the job's IANA time zone.
    Lists (``1,5``), ranges (``1-5``), steps (``*/15``, ``1-10/2``, ``5/15`` = ``5-59/15``),
    month names ``JAN``-``DEC`` and day names ``SUN``-``SAT`` (case-insensitive); day of week
    0-7 where 0 and 7 are both Sunday. Vixie rule for the day fields: when BOTH are restricted
    a day matches if EITHER matches, otherwise both must match. As in Vixie cron a field that
    begins with ``*`` (``*``, ``*/2``) counts as unrestricted for that rule.
``@yearly`` ``@annually`` ``@monthly`` ``@weekly`` ``@daily`` ``@midnight`` ``@hourly``
    Shorthands for ``0 0 1 1 *``, ``0 0 1 * *``, ``0 0 * * 0``, ``0 0 * * *``, ``0 * * * *``.
``@every <duration>``
    Go-style duration made of ``<number><unit>`` parts, units ``d`` (24 h), ``h``, ``m``, ``s``
    (e.g. ``90s``, ``5m``, ``1h30m``, ``1.5h``, ``1d``); the total must be a whole number of
    seconds, at least 1 s and at most 36500 days. Fires at ``anchor + k * interval`` (k >= 0)
    in absolute time: no drift, independent of the time zone and of DST.
``cron(min hr dom mon dow year)``
    EventBridge cron: 6 fields, day-of-week 1-7 with 1 = Sunday (``SUN``-``SAT``), exactly one
    of day-of-month / day-of-week is ``?``. Day-of-month also takes ``L`` (last day), ``LW``
    (last weekday), ``nW`` (weekday nearest to day n, within the month); day-of-week also takes
    ``L`` (Saturday, the last day of the week), ``nL`` (last weekday n of the month, e.g.
    ``6L`` = last Friday) and ``n#k`` (k-th weekday n of the month, k 1-5). Year 1970-2199.
    Matched against local wall time like 5-field cron.
``rate(N unit)``
    ``minute(s)``, ``hour(s)``, ``day(s)`` and, as our extension, ``second(s)``; N a whole
    number >= 1 (singular/plural not enforced). Counts from the anchor like ``@every``.
``at(yyyy-mm-ddThh:mm:ss)``
    A one-off at that wall time in the job's time zone.
``one_off(run_at)``
    The API's ``run_at``: a one-off at that instant.

The anchor of ``rate()``/``@every`` is the job's ``start_at``, else its creation time, as a
whole second (:func:`interval_anchor`: ``start_at`` rounded up, the creation time down; the
caller passes it to :func:`parse_schedule`); without one the Unix epoch is used, which aligns
the occurrences on a fixed grid (``rate(5 minutes)`` at :00, :05, ...).

DST rule (contract)
-------------------
Wall-time forms (5-field cron, macros, ``cron()``, ``at()``) match local wall time:

* a wall time that does not exist (spring-forward gap) fires once, at the instant the clocks
  jump (02:30 on a spring-forward night in Europe/Berlin fires at 03:00 CEST = 01:00Z); when
  several matching wall times fall in one gap (``*/15 2 * * *``) they all map to that instant
  and it fires once;
* a repeated wall time (fall back) fires once, at its first occurrence (``fold=0``). A
  consequence: the instants whose wall time is the second occurrence never fire, so
  ``0 * * * *`` in America/New_York fires at 05:00Z (01:00 EDT) and then 07:00Z (02:00 EST)
  on the fall-back night -- 06:00Z (01:00 EST) is not an occurrence.

Equivalently, the occurrence of a matching wall time ``w`` is the earliest instant whose local
wall time is ``>= w``. That map is monotonic, so occurrences are strictly increasing instants.

Search cost
-----------
Next/previous occurrences are found by walking matching *days* (skipping whole months and
years that cannot match) and bisecting the matching times of a day, never minute by minute.
The search stops at a horizon: :data:`HORIZON_YEARS` years from the starting point for
expressions without a year field, and past the last (before the first) listed year for
``cron()`` expressions with one; ``None`` is answered when nothing matches within it.

Modules
-------
``base`` (the error, :class:`Schedule`, limits), ``zones`` (zone names, the DST rule),
``fields`` (cron fields), ``cron`` (5-field cron, macros, the wall-time search),
``eventbridge`` (``cron()``), ``intervals`` (``@every``, ``rate()``), ``oneoff`` (``at()``,
``run_at``), ``parse`` (:func:`parse_schedule`), ``union`` (several expressions, the API's
``schedules``: :func:`parse_union`), ``spread`` (the offset of a job's ``spread``),
``planning`` (the window, the ``missed_runs`` policy, the anchor, the fire time, the preview
:func:`occurrences` and :func:`explain_occurrences`). Import from this package;
names with a leading underscore are private to it.
"""

from scheduler.schedules.base import HORIZON_YEARS, Schedule, ScheduleError
from scheduler.schedules.cron import CronSchedule
from scheduler.schedules.intervals import IntervalSchedule
from scheduler.schedules.oneoff import OneOffSchedule, one_off
from scheduler.schedules.parse import anchored, parse_schedule
from scheduler.schedules.planning import (
    MISSED_RUN_POLICIES,
    Occurrence,
    explain_occurrences,
    fire_time,
    first_run,
    interval_anchor,
    next_occurrence,
    occurrences,
    plan_next,
    schedule_for,
)
from scheduler.schedules.spread import MAX_SPREAD_SECONDS, SPREAD_MODES, Spread
from scheduler.schedules.union import MAX_SCHEDULES, UnionSchedule, anchored_union, parse_union
from scheduler.schedules.zones import validate_timezone

__all__ = [
    "HORIZON_YEARS",
    "MAX_SCHEDULES",
    "MAX_SPREAD_SECONDS",
    "MISSED_RUN_POLICIES",
    "SPREAD_MODES",
    "CronSchedule",
    "IntervalSchedule",
    "Occurrence",
    "OneOffSchedule",
    "Schedule",
    "ScheduleError",
    "Spread",
    "UnionSchedule",
    "explain_occurrences",
    "fire_time",
    "first_run",
    "interval_anchor",
    "next_occurrence",
    "occurrences",
    "one_off",
    "anchored",
    "anchored_union",
    "parse_schedule",
    "parse_union",
    "plan_next",
    "schedule_for",
    "validate_timezone",
]

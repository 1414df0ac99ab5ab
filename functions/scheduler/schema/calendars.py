"""The calendar JSON as pydantic models: a calendar's definition (``dates``, ``ranges``,
``yearly``, or ``ics``) in its zone. The types are checked here; what the values mean (a real
date, a supported iCalendar text) by the planning code that compiles it
(``schedules.calendars.build_calendar``), whose refusals name the field too."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from scheduler.schedules import ScheduleError, validate_timezone
from scheduler.schedules.calendars import MAX_DATES, MAX_RANGES, MAX_YEARLY
from scheduler.schedules.ics import MAX_ICS_CHARS
from scheduler.schema.models import _NAME_RE, MAX_NAME_LENGTH, _FieldError

_Short = Annotated[str, Field(min_length=1, max_length=40)]


class CalendarRange(BaseModel):
    """Days from ``start`` to ``end`` (dates, both included), or instants from ``start`` to
    ``end`` (date-times: with an offset, else wall times of the calendar's zone; end excluded)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    start: _Short
    end: _Short


class CalendarDefinition(BaseModel):
    """What a calendar excludes, in its zone (a PUT body; a POST adds the name)."""

    model_config = ConfigDict(extra="forbid", strict=True, str_max_length=MAX_ICS_CHARS)

    timezone: str = Field(default="UTC", max_length=64, description="IANA zone the days are local to.")
    dates: list[_Short] | None = Field(default=None, max_length=MAX_DATES, description="Days, `YYYY-MM-DD`.")
    ranges: list[CalendarRange] | None = Field(default=None, max_length=MAX_RANGES)
    yearly: list[_Short] | None = Field(default=None, max_length=MAX_YEARLY, description="Days of every year, `MM-DD`.")
    ics: str | None = Field(
        default=None, max_length=MAX_ICS_CHARS, description="iCalendar text (instead of dates/ranges/yearly)."
    )

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, v: str) -> str:
        try:
            validate_timezone(v)
        except ScheduleError as exc:
            raise ValueError(str(exc)) from None
        return v

    @model_validator(mode="after")
    def _one_form(self) -> CalendarDefinition:
        if self.ics is not None and (self.dates or self.ranges or self.yearly):
            raise _FieldError("ics", "give either ics or dates/ranges/yearly, not both")
        return self


class CalendarSpec(CalendarDefinition):
    """A new calendar (POST body)."""

    name: str = Field(min_length=1, max_length=MAX_NAME_LENGTH)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME_RE.match(v):
            raise ValueError("use letters, digits and . _ : - (starting with a letter or digit)")
        return v

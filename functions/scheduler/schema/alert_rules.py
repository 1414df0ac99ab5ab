"""An owner's alert rule set as a pydantic model: the rules of a job's ``alerts`` (the same
model, the same checks) for every job of the owner that carries ``tag``."""

from __future__ import annotations

from pydantic import Field

from scheduler.schema.models import MAX_ALERTS, MAX_NAME_LENGTH, MAX_TAG_LENGTH, AlertRule, _Strict


class AlertRuleSetSpec(_Strict):
    """A rule set (a PUT body): ``name`` may be left out, the path names it."""

    name: str | None = Field(default=None, max_length=MAX_NAME_LENGTH, description="the path's name, if given")
    tag: str = Field(
        min_length=1,
        max_length=MAX_TAG_LENGTH,
        description="Every job of yours with this tag has the rules (jobs tagged later too).",
    )
    alerts: list[AlertRule] = Field(min_length=1, max_length=MAX_ALERTS, description="As a job's `alerts`.")

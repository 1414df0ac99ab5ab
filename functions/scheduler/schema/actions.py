"""The bodies of the job actions beyond the job itself (issue 33): a run with overrides, a pause
with a note and an end, and the selection of a bulk pause or resume. Strict as the job's models
(unknown fields and wrong JSON types refused), each refusal naming its field."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator, model_validator

from scheduler.schema.models import (
    MAX_BODY_LENGTH,
    MAX_HEADER_VALUE_LENGTH,
    MAX_HEADERS,
    MAX_NAME_LENGTH,
    MAX_TAG_LENGTH,
    Instant,
    _check_headers,
    _FieldError,
    _Strict,
)

MAX_NOTE_LENGTH = 1024
MAX_VARS = 50
_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}\Z")


class RunRequest(_Strict):
    """``POST /v1/jobs/{id}/run``'s optional body: overrides for that run only."""

    body: str | None = Field(
        default=None,
        max_length=MAX_BODY_LENGTH,
        description="Replaces the target's body (an AWS target's payload, message or detail) for this run.",
    )
    headers: dict[str, str] | None = Field(
        default=None,
        description="Merged over the target's headers (HTTP and AMQP targets) for this run; values of "
        "credential-like names (Authorization, Cookie, *token*, *secret*, *key*, *password*) are "
        "recorded as `***`.",
    )
    vars: dict[str, str] | None = Field(
        default=None, description="Values of the body's `{{vars.NAME}}` placeholders for this run."
    )

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        return None if value is None else _check_headers(value)

    @field_validator("vars")
    @classmethod
    def _vars(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is None:
            return None
        if len(value) > MAX_VARS:
            raise ValueError(f"at most {MAX_VARS} vars")
        for name, text in value.items():
            if not _VAR_NAME.match(name):
                raise ValueError(f"var name {name[:64]!r} must be letters, digits and _ (not first a digit)")
            if len(text) > MAX_HEADER_VALUE_LENGTH:
                raise _FieldError(name, f"at most {MAX_HEADER_VALUE_LENGTH} characters")
        return value

    def given(self) -> bool:
        """Whether the request overrides anything."""
        return self.body is not None or bool(self.headers) or bool(self.vars)


class PauseRequest(_Strict):
    """``POST /v1/jobs/{id}/pause``'s optional body."""

    note: str | None = Field(default=None, max_length=MAX_NOTE_LENGTH, description="Why the job is paused.")
    until: Instant | None = Field(
        default=None,
        description="When the runner resumes the job by itself (under its missed-run policy); RFC 3339, "
        "in the future. Without it, the job stays paused until resumed.",
    )


class BackfillRequest(_Strict):
    """``POST /v1/jobs/{id}/backfill``: the job's occurrences from ``start`` to ``end``."""

    start: Instant = Field(description="The first instant of the range (included); RFC 3339.")
    end: Instant = Field(description="The last instant of the range (included); RFC 3339.")
    dry_run: bool = Field(default=False, description="Answer the occurrences, write nothing.")


class _Selection(_Strict):
    tag: str | None = Field(default=None, min_length=1, max_length=MAX_TAG_LENGTH, description="Jobs with this tag.")
    name_prefix: str | None = Field(
        default=None, min_length=1, max_length=MAX_NAME_LENGTH, description="Jobs whose name starts with this."
    )

    @model_validator(mode="after")
    def _one_selection(self) -> Any:
        if (self.tag is None) == (self.name_prefix is None):
            raise _FieldError("tag", "give exactly one of tag or name_prefix")
        return self


class BulkPauseRequest(_Selection, PauseRequest):
    """``POST /v1/jobs/pause``: the caller's active jobs with ``tag`` or ``name_prefix``."""


class BulkResumeRequest(_Selection):
    """``POST /v1/jobs/resume``: the caller's paused jobs with ``tag`` or ``name_prefix``."""


__all__ = ["MAX_HEADERS", "BackfillRequest", "BulkPauseRequest", "BulkResumeRequest", "PauseRequest", "RunRequest"]

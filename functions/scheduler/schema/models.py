"""The job and execution JSON of the contract, as pydantic models.

Request models forbid unknown fields and carry limits on every field; ``validation_details``
turns a ``ValidationError`` into the API's ``details`` list with the field path of each error.
Secrets (``auth.password``, ``auth.token``, header-auth ``value``, a password in an AMQP URL)
are plain strings here; the API encrypts them before the store sees them and masks them as
``"***"`` in answers.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from scheduler.core.json_text import whole_if_integral
from scheduler.core.urls import MAX_URL_LENGTH, check_broker_url_syntax, check_url_syntax
from scheduler.schedules import (
    MAX_SCHEDULES,
    MAX_SPREAD_SECONDS,
    Schedule,
    ScheduleError,
    parse_schedule,
    parse_union,
    validate_timezone,
)
from scheduler.schedules.base import just_before
from scheduler.schedules.calendars import MAX_CALENDARS_PER_JOB
from scheduler.schema.aws_models import (
    EventBridgeTarget,
    LambdaTarget,
    SigV4Auth,
    SnsTarget,
    SqsTarget,
    as_alert_target,
)
from scheduler.schema.details import validation_details  # noqa: F401 (re-exported)
from scheduler.schema.instants import Instant, is_job_id, parse_time  # noqa: F401 (re-exported)
from scheduler.schema.messages import (
    FieldError,
    amqp_headers_problem,
    http_header_value,
    single_line,
)

MAX_NAME_LENGTH = 128
MAX_DESCRIPTION_LENGTH = 2048
MAX_TAGS = 20
MAX_TAG_LENGTH = 64
MAX_HEADERS = 50
MAX_HEADER_NAME_LENGTH = 256
MAX_HEADER_VALUE_LENGTH = 8192
MAX_BODY_LENGTH = 256 * 1024
MAX_TIMEOUT_SECONDS = 900
MAX_ATTEMPTS = 100
MAX_BACKOFF_SECONDS = 86400
MAX_AGE_SECONDS = 30 * 86400

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]*\Z")
_TOKEN_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")  # RFC 9110 header field name
_RESERVED_HEADERS = {"idempotency-key", "host", "content-length", "transfer-encoding", "connection"}


_FieldError = FieldError  # a model-level error that names its field


class _Strict(BaseModel):
    # strict: JSON types as they are (no true for a number, no "3" for an integer, no 1 for a
    # boolean); the instants, which JSON can only give as text, are read from it by ``Instant``.
    model_config = ConfigDict(extra="forbid", str_max_length=MAX_BODY_LENGTH, strict=True)


def _not_the_scheduler_s(name: str, reserved: tuple[str, ...] | set[str]) -> None:
    if name.lower() in reserved or name.lower().startswith("x-scheduler-"):
        raise ValueError(f"header {name!r} is set by the scheduler and cannot be given")


def _check_headers(headers: dict[str, str]) -> dict[str, str]:
    if len(headers) > MAX_HEADERS:
        raise ValueError(f"at most {MAX_HEADERS} headers")
    for name, value in headers.items():
        if not _TOKEN_RE.match(name) or len(name) > MAX_HEADER_NAME_LENGTH:
            raise ValueError(f"header name {name[:64]!r} is not a valid HTTP token")
        _not_the_scheduler_s(name, _RESERVED_HEADERS)
        if len(value) > MAX_HEADER_VALUE_LENGTH:
            raise _FieldError(name, f"is longer than {MAX_HEADER_VALUE_LENGTH} characters")
        try:
            http_header_value(value)
        except ValueError as exc:
            raise _FieldError(name, str(exc)) from None
    return headers


class BasicAuth(_Strict):
    type: Literal["basic"]
    username: str = Field(min_length=1, max_length=256)
    password: str = Field(max_length=1024)

    @field_validator("username")
    @classmethod
    def _username(cls, v: str) -> str:
        if ":" in v:
            raise ValueError("must not contain ':' (it ends the username in basic auth)")
        return single_line(v)

    @field_validator("password")
    @classmethod
    def _password(cls, v: str) -> str:
        return single_line(v)


class BearerAuth(_Strict):
    type: Literal["bearer"]
    token: str = Field(min_length=1, max_length=8192)

    @field_validator("token")
    @classmethod
    def _token(cls, v: str) -> str:
        return single_line(v, latin1=True)


class HeaderAuth(_Strict):
    type: Literal["header"]
    name: str = Field(min_length=1, max_length=MAX_HEADER_NAME_LENGTH)
    value: str = Field(min_length=1, max_length=MAX_HEADER_VALUE_LENGTH)

    @field_validator("name")
    @classmethod
    def _name_is_token(cls, v: str) -> str:
        _check_headers({v: ""})
        return v

    @field_validator("value")
    @classmethod
    def _value(cls, v: str) -> str:
        return http_header_value(v)


Auth = Annotated[BasicAuth | BearerAuth | HeaderAuth | SigV4Auth, Field(discriminator="type")]

# Methods whose requests carry no body (the delivery's views refuse one too: targets/views.py).
BODILESS_METHODS = ("GET", "HEAD")


class HttpTarget(_Strict):
    """An HTTP request to make."""

    type: Literal["http"]
    url: str = Field(min_length=1, max_length=MAX_URL_LENGTH)
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"] = "POST"
    headers: dict[str, str] = Field(default_factory=dict)
    body: str | None = Field(default=None, max_length=MAX_BODY_LENGTH)
    auth: Auth | None = None
    timeout_seconds: int = Field(default=30, ge=1, le=MAX_TIMEOUT_SECONDS)
    success_codes: list[Annotated[int, Field(ge=100, le=599)]] | None = Field(
        default=None, min_length=1, max_length=100
    )
    follow_redirects: bool = False

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        # The rules the delivery applies too, so a URL accepted here cannot fail there on syntax.
        problem = check_url_syntax(v)
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("headers")
    @classmethod
    def _headers(cls, v: dict[str, str]) -> dict[str, str]:
        return _check_headers(v)

    @model_validator(mode="after")
    def _no_body_without_semantics(self) -> HttpTarget:
        # Many servers ignore a GET's or HEAD's body, and read it as the next request on the
        # connection: a second answer nobody asked for, taken by the delivery that comes next.
        # An empty body sends nothing: it is kept as none.
        if self.method in BODILESS_METHODS and self.body == "":
            self.body = None
        if self.method in BODILESS_METHODS and self.body is not None:
            raise _FieldError("body", f"a {self.method} request carries no body: leave body out (or null)")
        return self


class AmqpTarget(_Strict):
    """A message to publish to a RabbitMQ exchange."""

    type: Literal["amqp"]
    url: str | None = Field(default=None, max_length=MAX_URL_LENGTH)
    exchange: str = Field(default="", max_length=255)
    routing_key: str = Field(default="", max_length=255)
    body: str = Field(default="", max_length=MAX_BODY_LENGTH)
    body_encoding: Literal["utf-8", "base64"] = "utf-8"
    headers: dict[str, str] = Field(default_factory=dict)
    content_type: str | None = Field(default=None, max_length=255)
    timeout_seconds: int = Field(default=30, ge=1, le=300)

    @field_validator("url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        problem = None if v is None else check_broker_url_syntax(v)
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("exchange", "routing_key", "content_type")
    @classmethod
    def _short_string(cls, v: str | None) -> str | None:
        # AMQP's short strings are 255 bytes, not characters: "é" * 200 failed every delivery.
        if v is not None and len(v.encode("utf-8", "surrogatepass")) > 255:
            raise ValueError("must be at most 255 bytes once encoded as UTF-8 (AMQP's short string)")
        return v

    @field_validator("headers")
    @classmethod
    def _headers(cls, v: dict[str, str]) -> dict[str, str]:
        if len(v) > MAX_HEADERS:
            raise ValueError(f"at most {MAX_HEADERS} headers")
        for name, value in v.items():
            if not name or len(name) > MAX_HEADER_NAME_LENGTH or len(value) > MAX_HEADER_VALUE_LENGTH:
                raise ValueError(f"header {name[:64]!r}: name or value too long")
            _not_the_scheduler_s(name, ("idempotency-key",))  # the message's identity would replace it
        if problem := amqp_headers_problem(v):
            raise ValueError(problem)
        return v

    @model_validator(mode="after")
    def _base64(self) -> AmqpTarget:
        if self.body_encoding == "base64":
            import base64
            import binascii

            try:
                base64.b64decode(self.body, validate=True)
            except (binascii.Error, ValueError):
                raise _FieldError("body", "is not valid base64") from None
        return self


Target = Annotated[
    HttpTarget | AmqpTarget | LambdaTarget | SqsTarget | SnsTarget | EventBridgeTarget, Field(discriminator="type")
]


class RetryPolicy(_Strict):
    """How failed attempts at one occurrence are retried (exponential backoff, full jitter)."""

    max_attempts: int = Field(default=3, ge=1, le=MAX_ATTEMPTS)
    min_backoff_seconds: float = Field(default=1, ge=0, le=MAX_BACKOFF_SECONDS)
    max_backoff_seconds: float = Field(default=300, ge=0, le=MAX_BACKOFF_SECONDS)
    max_age_seconds: int | None = Field(default=None, ge=1, le=MAX_AGE_SECONDS)

    @field_validator("min_backoff_seconds", "max_backoff_seconds")
    @classmethod
    def _whole_seconds(cls, value: float) -> float | None:
        """A whole number of seconds stays an integer, as given (and as the defaults are): a
        float field makes every number a float, so an edit turned a stored ``300`` into ``300.0``."""
        return whole_if_integral(value)

    @model_validator(mode="after")
    def _order(self) -> RetryPolicy:
        if self.max_backoff_seconds < self.min_backoff_seconds:
            raise ValueError("max_backoff_seconds must be at least min_backoff_seconds")
        return self


# A chain's references: names or ids of jobs of the same owner (a name's syntax, or a UUID).
# The pattern is pydantic's (Rust's regex), where "$" is the end of the text, unlike Python's.
MAX_CHAIN = 20
ChainRefs = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=MAX_NAME_LENGTH, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")]],
    Field(max_length=MAX_CHAIN),
]


class SpreadSpec(_Strict):
    """Fire each occurrence at an offset inside a window after it (fixed when it is planned)."""

    window_seconds: int = Field(ge=1, le=MAX_SPREAD_SECONDS, description="The window's width, in seconds.")
    mode: Literal["stable", "random"] = Field(
        default="stable",
        description="`stable`: one offset per job, derived from its id; `random`: one per occurrence.",
    )


ALERT_EVENTS = ("failure", "failures_in_a_row", "recovery", "missing_run", "late")
MAX_ALERTS = 10
MAX_ALERT_THRESHOLD_SECONDS = 30 * 86400


class AlertRule(_Strict):
    """An alert rule of a job: when it fires (``on``, with its ``threshold``) and where the alert
    goes (a target of any type a job can use)."""

    on: Literal["failure", "failures_in_a_row", "recovery", "missing_run", "late"]
    threshold: float | None = Field(
        default=None,
        gt=0,
        le=MAX_ALERT_THRESHOLD_SECONDS,
        description="failures_in_a_row: the count (an integer, default 3); missing_run and late: "
        "seconds (required); failure and recovery take none.",
    )
    target: Target

    @field_validator("target", mode="wrap")
    @classmethod
    def _fitted_at_render(cls, value: Any, handler: Any) -> Any:
        return as_alert_target(handler, value)

    @field_validator("threshold")
    @classmethod
    def _whole_threshold(cls, value: float | None) -> float | None:
        """A whole number stays an integer, as given (``2``, not ``2.0``)."""
        return whole_if_integral(value)

    @model_validator(mode="after")
    def _threshold(self) -> AlertRule:
        if self.on in ("failure", "recovery") and self.threshold is not None:
            raise _FieldError("threshold", f"is not taken by {self.on} alerts")
        if self.on in ("missing_run", "late") and self.threshold is None:
            raise _FieldError("threshold", f"is required for {self.on} alerts (seconds)")
        if self.on == "failures_in_a_row":
            if self.threshold is None:
                self.threshold = 3
            if self.threshold != int(self.threshold) or self.threshold > MAX_ATTEMPTS * 100:
                raise _FieldError("threshold", "must be a whole number of failures, at most 10000")
            self.threshold = int(self.threshold)
        return self


class Limits(_Strict):
    """Per-target limits: at most ``max_in_flight`` deliveries at once and ``per_second``
    started in any second to ``key`` (default: the target's origin), across every runner."""

    key: str | None = Field(default=None, min_length=1, max_length=256, description="default: the target's origin")
    max_in_flight: int | None = Field(default=None, ge=1, le=10000)
    per_second: float | None = Field(default=None, gt=0, le=100000)

    @field_validator("key")
    @classmethod
    def _key(cls, v: str | None) -> str | None:
        return None if v is None else single_line(v)

    @model_validator(mode="after")
    def _some(self) -> Limits:
        if self.max_in_flight is None and self.per_second is None:
            raise _FieldError("max_in_flight", "give max_in_flight, per_second or both")
        return self


class JobSpec(_Strict):
    """The writable fields of a job (POST and PUT bodies)."""

    name: str = Field(min_length=1, max_length=MAX_NAME_LENGTH)
    description: str | None = Field(default=None, max_length=MAX_DESCRIPTION_LENGTH)
    tags: list[Annotated[str, Field(min_length=1, max_length=MAX_TAG_LENGTH)]] = Field(
        default_factory=list, max_length=MAX_TAGS
    )
    schedule: str | None = Field(default=None, max_length=256)
    schedules: list[Annotated[str, Field(max_length=256)]] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_SCHEDULES,
        description="Several expressions: the job fires at each occurrence of any (their union). "
        "Instead of `schedule` or `run_at`.",
    )
    spread: SpreadSpec | None = Field(
        default=None, description="Fire each occurrence at an offset after it, inside `window_seconds`."
    )
    run_at: Instant | None = None
    timezone: str = Field(default="UTC", max_length=64)
    start_at: Instant | None = None
    end_at: Instant | None = None
    target: Target
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    missed_runs: Literal["skip", "run_once", "run_all"] = "run_once"
    after_completion: Literal["keep", "delete"] = Field(
        default="keep",
        description="`delete`: once completed (a one-off that ran, or past `end_at`), the job "
        "is deleted with its executions.",
    )
    exclude_calendars: list[Annotated[str, Field(min_length=1, max_length=MAX_NAME_LENGTH)]] = Field(
        default_factory=list,
        max_length=MAX_CALENDARS_PER_JOB,
        description="Names of the caller's calendars whose days and spans the schedule leaves out.",
    )
    on_excluded: Literal["skip", "shift"] = Field(
        default="skip",
        description="`skip`: an excluded occurrence does not run; `shift`: it runs at the first "
        "allowed time after the excluded span (once, however many occurrences land there).",
    )

    @field_validator("exclude_calendars")
    @classmethod
    def _calendars(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("names each calendar once")
        return v

    alerts: list[AlertRule] = Field(default_factory=list, max_length=MAX_ALERTS)
    limits: Limits | None = None
    on_success: ChainRefs = Field(
        default_factory=list,
        description="Jobs of yours (names or ids) run when an execution of this one succeeds (its final outcome).",
    )
    on_failure: ChainRefs = Field(
        default_factory=list,
        description="Jobs of yours (names or ids) run when an execution of this one fails for good (after its retries).",
    )
    on_complete: ChainRefs = Field(
        default_factory=list,
        description="Jobs of yours (names or ids) run when an execution of this one ends, either way.",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME_RE.match(v):
            raise ValueError("use letters, digits and . _ : - (starting with a letter or digit)")
        if is_job_id(v):
            # A chain, a route or the CLI reads it as a job's id: it would name two jobs at once.
            raise ValueError("has the form of a job id, which names jobs too: choose a name that is not a UUID")
        return v

    @field_validator("tags")
    @classmethod
    def _tags(cls, v: list[str]) -> list[str]:
        return sorted(set(v))

    @field_validator("on_success", "on_failure", "on_complete")
    @classmethod
    def _chain(cls, v: list[str]) -> list[str]:
        # An id in any case names the job, as in the job routes: kept in the case ids are stored in.
        return list(dict.fromkeys(ref.lower() if is_job_id(ref) else ref for ref in v))

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, v: str) -> str:
        try:
            validate_timezone(v)
        except ScheduleError as exc:
            raise ValueError(str(exc)) from None
        return v

    @model_validator(mode="after")
    def _schedule(self) -> JobSpec:
        given = [name for name in ("schedule", "schedules", "run_at") if getattr(self, name) is not None]
        if len(given) != 1:
            raise _FieldError(
                given[0] if given else "schedule",
                "give exactly one of schedule, schedules or run_at"
                + (f" (got {' and '.join(given)})" if given else ""),
            )
        if self.spread is not None and self.run_at is not None:
            raise _FieldError("spread", "applies to schedule or schedules, not to a one-off's run_at")
        if self.start_at and self.end_at and self.end_at < self.start_at:
            raise _FieldError("end_at", "must not be before start_at (both are included)")
        schedule = self._parsed()
        if schedule is not None and not schedule.one_off:
            # From start_at, which may be an occurrence itself, else from now. A window with no
            # occurrence is refused; an end_at already past without a start_at is a job completed.
            # (Without start_at, a new job's window from now is the create's check, not the
            # model's: an edit of a job in its last stretch keeps its window.)
            first = schedule.next_after(just_before(self.start_at) if self.start_at else datetime.now(UTC))
            if first is None:
                raise _FieldError(given[0], "never fires (no matching time in the coming years)")
            if self.start_at is not None and self.end_at is not None and first > self.end_at:
                raise _FieldError(given[0], "never fires between start_at and end_at")
        if self.run_at is not None and self.exclude_calendars:
            raise _FieldError("exclude_calendars", "applies to a schedule, not to a one-off run_at")
        return self

    def _parsed(self) -> Schedule | None:
        return _parsed_schedule(self)


def _parsed_schedule(spec: JobSpec) -> Schedule | None:
    """The schedule of ``spec``'s ``schedule`` or ``schedules`` (None for a ``run_at``); a
    refused expression raises the field error naming it."""
    try:
        if spec.schedule is not None:
            return parse_schedule(spec.schedule, spec.timezone, spec.start_at)
        if spec.schedules is not None:
            return parse_union(spec.schedules, spec.timezone, spec.start_at)
    except ScheduleError as exc:
        raise _FieldError(getattr(exc, "field", "schedule") or "schedule", str(exc)) from None
    return None

"""The dependencies routes declare with ``Depends``. Each is a placeholder that ``make_app``
overrides with the providers it is given (``app.dependency_overrides``), so the Lambda handler,
local mode and tests each pass their own store, secret box and cursor codec."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler.request import Request

from scheduler.api.cursors import CursorCodec
from scheduler.api.identity import caller_from_event, require_owner
from scheduler.ports import JobStore
from scheduler.secrets import SecretBox


def get_store() -> JobStore:
    """The store (given to ``make_app``)."""
    raise RuntimeError("no store configured: build the app with scheduler.api.app.make_app")


def get_secret_box() -> SecretBox:
    """The secret box (given to ``make_app``)."""
    raise RuntimeError("no secret box configured: build the app with scheduler.api.app.make_app")


def get_cursors() -> CursorCodec:
    """The cursor codec (built by ``make_app`` from the settings)."""
    raise RuntimeError("no cursor codec configured: build the app with scheduler.api.app.make_app")


def get_owner(request: Request) -> str:
    """The caller's IAM principal; 403 without one."""
    return require_owner(request.resolved_event.raw_event)


def get_caller(request: Request) -> str:
    """Who is calling, as the change log names it (the session of an assumed role kept)."""
    return caller_from_event(request.resolved_event.raw_event)


def get_settings() -> Any:
    """The settings (given to ``make_app``; None in tests that give none)."""
    return None

"""The calendar calls of ``scheduler.client.SchedulerClient`` (``/v1/calendars``): an owner's
holiday and blackout calendars, and each one's change log. A base class of the client."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import quote

from scheduler.transport import api_wire
from scheduler.transport.api_wire import API_PREFIX

PATH = f"{API_PREFIX}/calendars"


class CalendarCalls:
    """``create_calendar``, ``list_calendars``, ``iter_calendar_pages``, ``get_calendar``,
    ``replace_calendar``, ``delete_calendar``, ``list_calendar_changes``,
    ``iter_calendar_change_pages``, on the client's ``request``."""

    # The client's: one request (the parsed JSON answer), and every page of a listing.
    request: Callable[..., Any]
    pages: Callable[[Any, dict[str, Any]], Iterator[dict[str, Any]]]

    @staticmethod
    def _calendar_path(name: str) -> str:
        return f"{PATH}/{quote(name, safe='')}"

    def create_calendar(self, definition: Mapping[str, Any]) -> dict[str, Any]:
        """``POST /v1/calendars``: the new calendar."""
        return api_wire.expect_fields(self.request("POST", PATH, body=definition), name=str)

    def list_calendars(self, *, limit: int | None = None, cursor: str | None = None) -> dict[str, Any]:
        """``GET /v1/calendars``: one page, ``{"calendars": [...], "next_cursor": ...}``."""
        answer = self.request("GET", PATH, query={"limit": limit, "cursor": cursor})
        return api_wire.expect_list(answer, "calendars")

    def iter_calendar_pages(self, **filters: Any) -> Iterator[dict[str, Any]]:
        """Every page of ``list_calendars``."""
        return self.pages(self.list_calendars, filters)

    def get_calendar(self, name: str) -> dict[str, Any]:
        """``GET /v1/calendars/{name}``."""
        return api_wire.expect_fields(self.request("GET", self._calendar_path(name)), name=str)

    def replace_calendar(
        self, name: str, definition: Mapping[str, Any], *, if_match: str | int | None = None
    ) -> dict[str, Any]:
        """``PUT /v1/calendars/{name}``: a full definition (the jobs that name it are replanned);
        ``If-Match`` when ``if_match`` is given (412 if the calendar is at another version)."""
        body = {key: value for key, value in definition.items() if key != "name"}
        answer = self.request("PUT", self._calendar_path(name), body=body, headers=api_wire.if_match(if_match))
        return api_wire.expect_fields(answer, name=str)

    def delete_calendar(self, name: str, *, if_match: str | int | None = None) -> None:
        """``DELETE /v1/calendars/{name}`` (409 naming the jobs while any names it); ``If-Match``
        when ``if_match`` is given (412, nothing deleted, if the calendar is at another version)."""
        headers = api_wire.if_match(if_match)
        api_wire.expect_empty(self.request("DELETE", self._calendar_path(name), headers=headers))

    def list_calendar_changes(
        self, name: str, *, limit: int | None = None, cursor: str | None = None
    ) -> dict[str, Any]:
        """``GET /v1/calendars/{name}/changes``: one page of the calendar's change log, newest
        first, ``{"changes": [...], "next_cursor": ...}`` (kept after its delete)."""
        answer = self.request("GET", self._calendar_path(name) + "/changes", query={"limit": limit, "cursor": cursor})
        return api_wire.expect_list(answer, "changes")

    def iter_calendar_change_pages(self, name: str, **filters: Any) -> Iterator[dict[str, Any]]:
        """Every page of ``list_calendar_changes``, following ``next_cursor``."""
        return self.pages(lambda **kw: self.list_calendar_changes(name, **kw), filters)

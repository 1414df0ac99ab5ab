"""The alert rule set calls of ``scheduler.client.SchedulerClient`` (``/v1/alert-rules``): an
owner's named alert rules for every job of theirs with a tag. A base class of the client."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from scheduler.transport import api_wire
from scheduler.transport.api_wire import API_PREFIX

PATH = f"{API_PREFIX}/alert-rules"


class AlertRuleCalls:
    """``put_alert_rule``, ``list_alert_rules``, ``iter_alert_rule_pages``, ``get_alert_rule``,
    ``delete_alert_rule``, ``list_alert_rule_changes``, ``iter_alert_rule_change_pages``, on the
    client's ``request``."""

    # The client's: one request (the parsed JSON answer), and every page of a listing.
    request: Callable[..., Any]
    pages: Callable[[Any, dict[str, Any]], Iterator[dict[str, Any]]]

    @staticmethod
    def _alert_rule_path(name: str) -> str:
        return f"{PATH}/{quote(name, safe='')}"

    def put_alert_rule(
        self,
        name: str,
        tag: str | None,
        alerts: Sequence[Mapping[str, Any]],
        *,
        if_match: str | int | None = None,
        create_only: bool = False,
    ) -> dict[str, Any]:
        """``PUT /v1/alert-rules/{name}``: create or replace the rule set; the rule set. With
        ``if_match`` (a version), only replace that version (412 otherwise; nothing is created);
        with ``create_only``, only create it (``If-None-Match: *``: 412 when the name is taken).
        A ``tag`` of None is left out (the API answers that it is required)."""
        body: dict[str, Any] = {"alerts": list(alerts)} if tag is None else {"tag": tag, "alerts": list(alerts)}
        headers = api_wire.if_match(if_match)
        if create_only:
            headers["If-None-Match"] = "*"
        answer = self.request("PUT", self._alert_rule_path(name), body=body, headers=headers)
        return api_wire.expect_fields(answer, name=str)

    def list_alert_rules(self, *, limit: int | None = None, cursor: str | None = None) -> dict[str, Any]:
        """``GET /v1/alert-rules``: one page, ``{"alert_rules": [...], "next_cursor": ...}``."""
        answer = self.request("GET", PATH, query={"limit": limit, "cursor": cursor})
        return api_wire.expect_list(answer, "alert_rules")

    def iter_alert_rule_pages(self, **filters: Any) -> Iterator[dict[str, Any]]:
        """Every page of ``list_alert_rules``."""
        return self.pages(self.list_alert_rules, filters)

    def get_alert_rule(self, name: str) -> dict[str, Any]:
        """``GET /v1/alert-rules/{name}``."""
        return api_wire.expect_fields(self.request("GET", self._alert_rule_path(name)), name=str)

    def delete_alert_rule(self, name: str, *, if_match: str | int | None = None) -> None:
        """``DELETE /v1/alert-rules/{name}``: its jobs no longer have its rules; ``If-Match`` when
        ``if_match`` is given (412, nothing deleted, if the set is at another version)."""
        headers = api_wire.if_match(if_match)
        api_wire.expect_empty(self.request("DELETE", self._alert_rule_path(name), headers=headers))

    def list_alert_rule_changes(
        self, name: str, *, limit: int | None = None, cursor: str | None = None
    ) -> dict[str, Any]:
        """``GET /v1/alert-rules/{name}/changes``: one page of the rule set's change log, newest
        first, ``{"changes": [...], "next_cursor": ...}`` (kept after its delete)."""
        answer = self.request("GET", self._alert_rule_path(name) + "/changes", query={"limit": limit, "cursor": cursor})
        return api_wire.expect_list(answer, "changes")

    def iter_alert_rule_change_pages(self, name: str, **filters: Any) -> Iterator[dict[str, Any]]:
        """Every page of ``list_alert_rule_changes``, following ``next_cursor``."""
        return self.pages(lambda **kw: self.list_alert_rule_changes(name, **kw), filters)

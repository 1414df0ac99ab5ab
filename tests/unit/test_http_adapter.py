"""Local mode's WSGI adapter (``transport.http_adapter.make_event``): the request as API
Gateway's proxy event."""

from __future__ import annotations

from scheduler.transport.http_adapter import make_event


def test_a_header_sent_empty_stays_so_that_its_condition_is_refused():
    """An empty ``If-None-Match`` was dropped, so a rule set's PUT with it replaced the set (an
    outside audit); it stays, as API Gateway passes it, and the API refuses it (400). An empty
    ``CONTENT_TYPE`` or ``CONTENT_LENGTH`` (a WSGI server's way of saying none) is no header."""
    environ = {
        "REQUEST_METHOD": "PUT",
        "PATH_INFO": "/v1/alert-rules/team",
        "HTTP_IF_NONE_MATCH": "",
        "HTTP_X_TRACE": "abc",
        "CONTENT_TYPE": "",
        "CONTENT_LENGTH": "",
    }
    event = make_event(environ, b"", "alice")
    assert event["headers"]["If-None-Match"] == "" and event["headers"]["X-Trace"] == "abc"
    assert "Content-Type" not in event["headers"] and "Content-Length" not in event["headers"]
    assert event["multiValueHeaders"]["If-None-Match"] == [""]

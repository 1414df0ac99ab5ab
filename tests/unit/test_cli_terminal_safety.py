"""What the CLI prints of a target's answer never acts on the terminal: control characters
(ESC, NUL, C1, bidirectional overrides) are shown escaped, in tables and in an execution's
details alike; ordinary text and whitespace are kept."""

from __future__ import annotations

from scheduler.cli.columns import cell
from scheduler.cli.output import format_execution_details, format_executions
from scheduler.local.logs import printable


def test_control_characters_are_shown_escaped():
    assert printable("plain text, tabs\tand ünïcode") == "plain text, tabs\tand ünïcode"
    assert printable("\x1b[31mred\x00\x9b\u202e") == "\\x1b[31mred\\x00\\x9b\\u202e"
    assert cell("HTTP 500 a\x1b[2Jb\r\nnext") == "HTTP 500 a\\x1b[2Jb next"


def test_an_execution_s_error_and_excerpt_print_without_escape_codes():
    execution = {
        "id": "e1",
        "job_id": "j1",
        "status": "failed",
        "trigger": "schedule",
        "attempt": 1,
        "scheduled_at": "2026-12-05T10:00:00Z",
        "started_at": "2026-12-05T10:00:01Z",
        "error": "HTTP 500 \x1b]0;owned\x07",
        "response_excerpt": "line one\n\x1b[2Jline two",
    }
    for text in (format_execution_details(execution), format_executions([execution])):
        assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b[2Jline two" in format_execution_details(execution)

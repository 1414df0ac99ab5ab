"""docs/sdk.md, run as written: its ``python`` blocks (not those marked ``python skip``) are
executed in order, in one namespace, against a live ``scheduler local`` (``$SCHEDULER_ENDPOINT``)
and a recording target standing in for ``http://127.0.0.1:9000``."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from tests.support import ROOT, LocalScheduler, RecordingServer

SDK_DOC = Path(ROOT) / "docs" / "sdk.md"
TARGET = "http://127.0.0.1:9000"

pytestmark = pytest.mark.slow


def python_blocks(text: str) -> list[str]:
    """The runnable ``python`` blocks of a Markdown text (``python skip`` ones left out)."""
    return [body for info, body in re.findall(r"```(python[^\n]*)\n(.*?)```", text, re.S) if info.strip() == "python"]


def test_the_sdk_examples_run_against_a_live_local_scheduler(db_url, tmp_path, monkeypatch):
    blocks = python_blocks(SDK_DOC.read_text(encoding="utf-8"))
    assert len(blocks) >= 8, "docs/sdk.md lost its examples"
    target = RecordingServer()
    api = LocalScheduler(db_url, str(tmp_path / "data"))
    try:
        monkeypatch.setenv("SCHEDULER_ENDPOINT", api.url)
        namespace: dict = {"__name__": "sdk_doc"}
        printed = io.StringIO()
        for number, block in enumerate(blocks, 1):
            code = compile(block.replace(TARGET, target.url), f"docs/sdk.md block {number}", "exec")
            with contextlib.redirect_stdout(printed):
                exec(code, namespace)
        # the run reached the target, with the stored secret; the run with overrides, with its own
        call, overridden = [r for r in target.requests if r["path"] == "/report"]
        assert call["headers"]["Authorization"] == "Bearer s3cret"
        assert overridden["headers"]["X-Api-Key"] == "k3y" and overridden["headers"]["X-Env"] == "staging"
        assert overridden["headers"]["Authorization"] == "Bearer s3cret"  # the target's auth wins
        assert "400 invalid_request schedule" in printed.getvalue()
        assert "succeeded 200 manual" in printed.getvalue()
    finally:
        target.close()
        assert api.stop() == 0, "".join(api.lines)


def test_blocks_marked_skip_are_left_out():
    text = "```python\na = 1\n```\n\n```python skip\nb = 2\n```\n```sh\nc\n```\n"
    assert python_blocks(text) == ["a = 1\n"]

"""The README's tour, run as written: its commands are read from README.md (between the
``<!-- tour -->`` markers), the two servers it starts (``scheduler local``, ``scheduler echo``)
are started on free ports, and every other command must succeed against them. A delivery of
the tour's job must reach the echo target."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support import ROOT

README = Path(ROOT) / "README.md"
ECHO_URL = "http://127.0.0.1:9000"


# Commands whose API routes a server may not have yet: run when the live server has the route.
def tour_commands(text: str) -> list[list[str]]:
    """The ``scheduler ...`` commands of the tour, continuation lines joined, comments dropped."""
    match = re.search(r"<!-- tour -->(.*?)<!-- /tour -->", text, re.S)
    assert match, "README.md has no <!-- tour --> ... <!-- /tour --> section"
    blocks = re.findall(r"```sh\n(.*?)```", match.group(1), re.S)
    commands = []
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words:
                assert words[0] == "scheduler", f"the tour runs only scheduler commands: {line}"
                commands.append(words[1:])
    return commands


def start_up_patterns(text: str) -> list[re.Pattern[str]]:
    """The start-up lines the README quotes (the block after ``<!-- start-up -->``), as patterns:
    ``...`` stands for a path, a port for any port, and the embedded database's words for the
    given database's too (the test gives one)."""
    match = re.search(r"<!-- start-up -->\s*```\n(.*?)```", text, re.S)
    assert match, "README.md has no <!-- start-up --> block"
    embedded = re.escape("embedded Postgres under .../.scheduler/pgdata")
    storage = r"(?:embedded Postgres under \S+/pgdata|the given database \(--database-url\))"
    patterns = []
    for line in match.group(1).strip().splitlines():
        escaped = re.escape(line).replace(embedded, storage).replace(re.escape("..."), r"\S*").replace("8080", r"\d+")
        patterns.append(re.compile("^" + escaped + "$"))
    return patterns


class Process:
    """A ``scheduler`` subprocess whose output is collected; ``wait_for`` a line matching a regex."""

    def __init__(self, argv: list[str], env: dict[str, str]):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "scheduler.cli", *argv],
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        self.lines: list[str] = []
        self.changed = threading.Condition()
        self.closed = False
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            with self.changed:
                self.lines.append(line)
                self.changed.notify_all()
        with self.changed:
            self.closed = True
            self.changed.notify_all()

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        regex, deadline = re.compile(pattern), time.monotonic() + timeout
        with self.changed:
            while True:
                for line in self.lines:
                    if found := regex.search(line):
                        return found
                left = deadline - time.monotonic()
                if left <= 0 or self.closed:  # out of time, or the process ended without it
                    raise AssertionError(f"no line matching {pattern!r}:\n" + "".join(self.lines))
                self.changed.wait(min(left, 0.5))

    def stop(self) -> int:
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout=30)


def test_the_readme_tour_runs_against_a_live_local_server_and_echo(db_url, tmp_path):
    commands = tour_commands(README.read_text(encoding="utf-8"))
    servers = {c[0]: c for c in commands if c[0] in ("local", "echo")}
    assert set(servers) == {"local", "echo"}, "the tour starts scheduler local and scheduler echo"
    assert servers["echo"] == ["echo", "--port", "9000"]
    env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "functions"), "PYTHONUNBUFFERED": "1"}
    for name in ("SCHEDULER_ENDPOINT", "SCHEDULER_DATABASE_URL", "DATABASE_URL", "SCHEDULER_PRECISION"):
        env.pop(name, None)
    local = Process([*servers["local"], "--port", "0", "--database-url", db_url, "--data-dir", str(tmp_path)], env)
    echo = Process(["echo", "--port", "0"], env)
    try:
        api = local.wait_for(r"scheduler local: API (http://\S+)/v1").group(1)
        local.wait_for(r"scheduler local: console ")
        # the start-up lines are the README's, word for word
        for pattern in start_up_patterns(README.read_text(encoding="utf-8")):
            assert any(pattern.match(line.rstrip("\n")) for line in local.lines), (pattern.pattern, local.lines)
        echo_url = echo.wait_for(r"listening on (http://\S+)").group(1)
        env["SCHEDULER_ENDPOINT"] = api
        ran, outputs = [], {}
        for argv in commands:
            if argv[0] in ("local", "echo"):
                continue
            argv = [a.replace(ECHO_URL, echo_url) for a in argv]
            result = subprocess.run(
                [sys.executable, "-m", "scheduler.cli", *argv], env=env, capture_output=True, text=True, timeout=60
            )
            assert result.returncode == 0, f"scheduler {shlex.join(argv)}: {result.returncode}\n{result.stderr}"
            assert "Traceback" not in result.stderr
            ran.append(argv[:2])
            outputs[argv[0] if argv[0] == "preview" else " ".join(argv[:2])] = result.stdout
            if argv[:2] == ["jobs", "run"]:
                # the run reaches the echo target, which prints the request
                echo.wait_for(r"^--> POST /hello$", timeout=30)
                echo.wait_for(r"^X-Scheduler-Job-Id: [0-9a-f-]{36}$", timeout=5)
                local.wait_for(
                    r"scheduler\.runner\.executor: hello [0-9a-f-]{36} succeeded http=200 took=\d+ms late=-?\d+ms"
                    r" execution=[0-9a-f-]{36} owner=\S+ at=\S+Z$"
                )
        assert ["jobs", "create"] in ran and ["jobs", "run"] in ran and ["jobs", "delete"] in ran
        assert ["preview", "30 2 * * *"] in ran and ["executions", "--status"] in ran
        # the DST rule, as the server's preview answers it: 02:30 is skipped on 2027-03-28, 03:00 runs
        assert "2027-03-28T01:00:00Z  2027-03-28 03:00:00 CEST" in outputs["preview"], outputs["preview"]
        assert " succeeded  200 " in outputs["executions hello"], outputs["executions hello"]
        assert outputs["executions --status"] == "no executions\n"  # across jobs: the real route answered
    finally:
        assert echo.stop() == 0
        assert local.stop() == 0


def test_tour_commands_are_parsed_from_the_readme():
    commands = tour_commands(README.read_text(encoding="utf-8"))
    create = next(c for c in commands if c[:2] == ["jobs", "create"])
    assert (
        "--body" in create and create[create.index("--body") + 1] == '{"job": "{{job_id}}", "at": "{{scheduled_at}}"}'
    )
    if not commands:
        pytest.fail("empty tour")

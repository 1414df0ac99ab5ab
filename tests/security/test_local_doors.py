"""Issue 31, items 2, 3 and 4: the doors of `scheduler local` itself.

2. ``--credentials`` never serves an unauthenticated API: alone it turns ``--auth sigv4`` on,
   with ``--auth none`` it is a usage error; the start-up lines say the auth mode and the
   console's URL.
3. ``GET /v1/health`` answers unsigned under ``--auth sigv4`` (probes do not sign), and
   nothing else does.
4. A malformed database URL is one line naming what is wrong with it, and exit code 2, never
   a traceback.

Each through the real thing: `scheduler local` / `scheduler migrate` processes, or the security
suite's `scheduler local --auth sigv4` on loopback. Each failed before the fix.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support import ROOT

EXIT_USAGE = 2


def scheduler(*argv: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """One `scheduler ...` process run to its end (killed, and the test failed, past ``timeout``)."""
    full_env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "functions"), **(env or {})}
    for name in ("DATABASE_URL", "SCHEDULER_DATABASE_URL"):
        if name not in (env or {}):
            full_env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "scheduler.cli", *argv],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        check=False,
    )


def one_error_line(result: subprocess.CompletedProcess, command: str) -> str:
    """The single line ``scheduler COMMAND: error: ...`` the process printed (asserts exit 2)."""
    assert result.returncode == EXIT_USAGE, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"scheduler {command}: error: "), result.stderr
    return lines[0]


# -- 4. malformed database URLs -----------------------------------------------------------------

MALFORMED = {
    "no-scheme": ("localhost:5432", "neither a postgresql:// URL nor key=value"),
    "mysql": ("mysql://app:pw-1234@db.example/app", "'mysql'"),
    "open-bracket": ("postgresql://app:pw-1234@[::1/app", "cannot be read"),
    "bad-port": ("postgresql://app:pw-1234@db.example:54x2/app", "port"),
}


@pytest.mark.parametrize("command", ["local", "migrate"])
@pytest.mark.parametrize(("url", "words"), MALFORMED.values(), ids=MALFORMED.keys())
def test_4_a_malformed_database_url_is_one_line_and_a_usage_error(tmp_path, command, url, words):
    extra = ["--port", "0", "--data-dir", str(tmp_path / "data")] if command == "local" else []
    result = scheduler(command, *extra, "--database-url", url)
    line = one_error_line(result, command)
    assert line.startswith(f"scheduler {command}: error: --database-url ") and words in line, line
    assert "pw-1234" not in result.stderr + result.stdout  # the password is never repeated
    assert not (tmp_path / "data" / "pgdata").exists()  # no embedded Postgres started instead


def test_4_the_environment_variable_at_fault_is_named(tmp_path):
    result = scheduler("migrate", env={"DATABASE_URL": "localhost:5432"})
    assert one_error_line(result, "migrate").startswith("scheduler migrate: error: $DATABASE_URL ")
    result = scheduler(
        "local", "--port", "0", "--data-dir", str(tmp_path / "d"), env={"SCHEDULER_DATABASE_URL": "mysql://h/db"}
    )
    assert one_error_line(result, "local").startswith("scheduler local: error: $SCHEDULER_DATABASE_URL ")


def test_4_an_empty_database_url_does_not_fall_back_to_the_environment(tmp_path):
    # `--database-url "$UNSET"` must not migrate whatever $DATABASE_URL names.
    result = scheduler("migrate", "--database-url", "", env={"DATABASE_URL": "postgresql://u@127.0.0.1:1/x"})
    assert "--database-url is empty" in one_error_line(result, "migrate")

"""Local mode's embedded Postgres (pgserver), kept under the data directory and shared by the
processes that use the same one: it stops when the last of them leaves."""

from __future__ import annotations

import json
import os
from pathlib import Path


class EmbeddedPostgres:
    """A pgserver Postgres kept under ``data_dir/pgdata`` (shared by processes on the same folder)."""

    def __init__(self, data_dir: Path):
        import pgserver

        pgdata = data_dir / "pgdata"
        pgdata.mkdir(parents=True, exist_ok=True)
        forget_dead_users(pgdata)
        self.server = pgserver.get_server(str(pgdata), cleanup_mode="stop")
        self.url = self.server.get_uri()

    def stop(self) -> None:
        """Stop the server (pgserver keeps it up while another process still uses it)."""
        self.server.cleanup()


def forget_dead_users(pgdata: Path) -> None:
    """Take the processes that died without stopping (SIGKILL) off pgserver's list of the
    server's users (``.handle_pids.json``): it stops the server when its last user leaves, and a
    dead one on the list would keep it running for good after every other has left."""
    handles = pgdata / ".handle_pids.json"
    try:
        pids = json.loads(handles.read_text())
    except (OSError, ValueError):
        return  # no list yet (or not one pgserver wrote): nothing to forget
    alive = [pid for pid in pids if isinstance(pid, int) and _alive(pid)]
    if alive != pids:
        handles.write_text(json.dumps(alive))


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

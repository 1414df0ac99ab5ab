"""``python -m tests.localstack up|down|status``: the stack on LocalStack (``make localstack``).

``up`` installs LocalStack (first time), starts it on 127.0.0.1:4566, deploys the stack with
this machine's PostgreSQL (``DATABASE_URL``, else 127.0.0.1:5432, else an embedded one kept under
``.localstack/``) and RabbitMQ (127.0.0.1:5672 when it answers), and ends with the line
``api: <URL>``. ``down`` destroys the stack, stops LocalStack and every process it started, and
drops the stack's database. See README.md, "LocalStack".
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path

from tests.localstack.environment import (
    DEFAULT_BROKER_URL,
    DEFAULT_HOME,
    DEFAULT_PORT,
    LocalStack,
    LocalStackError,
    broker_reachable,
    database_for,
    drop_database,
)

LOCAL_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"


def _embedded_server(home: Path, *, start: bool) -> str | None:
    """An embedded PostgreSQL kept running under ``home/pgdata`` (when no server answers)."""
    pgdata = home / "pgdata"
    if not start and not pgdata.exists():
        return None
    import pgserver

    pgdata.mkdir(parents=True, exist_ok=True)
    return str(pgserver.get_server(str(pgdata), cleanup_mode=None).get_uri())


def _server_url(home: Path) -> str:
    import psycopg

    url = os.environ.get("DATABASE_URL") or LOCAL_SERVER
    try:
        psycopg.connect(url, connect_timeout=3).close()
        return url
    except psycopg.Error:
        if os.environ.get("DATABASE_URL"):
            raise LocalStackError(f"DATABASE_URL does not answer ({url.split('@')[-1]})") from None
    print("localstack: no PostgreSQL at 127.0.0.1:5432; starting an embedded one", file=sys.stderr)
    server = _embedded_server(home, start=True)
    assert server is not None
    return server


def up(localstack: LocalStack) -> int:
    """Start LocalStack, deploy the stack, print ``api: URL`` last."""
    server = _server_url(localstack.state)
    (localstack.state / "server.json").parent.mkdir(parents=True, exist_ok=True)
    (localstack.state / "server.json").write_text(json.dumps({"server": server}))
    database_url = database_for(server)
    broker_url = DEFAULT_BROKER_URL if broker_reachable() else ""
    if not broker_url:
        print("localstack: no RabbitMQ at 127.0.0.1:5672; AMQP jobs must name their broker", file=sys.stderr)
    localstack.start()
    print(
        f"localstack: bootstrapping, then deploying {localstack.stack_name} (Lambda {localstack.lambda_runtime})",
        file=sys.stderr,
    )
    localstack.bootstrap()
    deployment = localstack.deploy(database_url, broker_url)
    print(
        f"localstack: deployed in {deployment.deploy_seconds:.0f} s; sign with AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION={deployment.region}",
        file=sys.stderr,
    )
    print(f"api: {deployment.api_url}", flush=True)
    return 0


def down(localstack: LocalStack) -> int:
    """Destroy the stack, stop LocalStack, drop the stack's database."""
    errors = []
    try:
        localstack.destroy()
    except LocalStackError as error:
        errors.append(str(error))
    localstack.stop()
    with contextlib.suppress(OSError, ValueError, KeyError):
        server = json.loads((localstack.state / "server.json").read_text())["server"]
        drop_database(server)
        (localstack.state / "server.json").unlink()
    pgdata = localstack.state / "pgdata"
    if pgdata.exists():
        import pgserver

        pgserver.get_server(str(pgdata), cleanup_mode="stop").cleanup()
    for error in errors:
        print(f"localstack: {error}", file=sys.stderr)
    print("localstack: down", file=sys.stderr)
    return 1 if errors else 0


def status(localstack: LocalStack) -> int:
    """Whether LocalStack runs, and the deployed API's URL."""
    if not localstack.healthy():
        print(f"localstack: not running on {localstack.endpoint}")
        return 1
    outputs = {}
    with contextlib.suppress(OSError, ValueError):
        outputs = json.loads(localstack.outputs_file.read_text()).get(localstack.stack_name, {})
    print(f"localstack: running on {localstack.endpoint}")
    if outputs.get("ApiUrl"):
        print(f"api: {outputs['ApiUrl']}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.localstack", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("up", "down", "status"))
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="LocalStack's port on 127.0.0.1 (default 4566)")
    parser.add_argument("--home", type=Path, default=DEFAULT_HOME, help="where its state goes (default .localstack/)")
    args = parser.parse_args(argv)
    localstack = LocalStack(args.home, port=args.port)
    try:
        return {"up": up, "down": down, "status": status}[args.command](localstack)
    except LocalStackError as error:
        print(f"localstack: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""The database out of reach (a TCP forwarder in front of the test's Postgres, cut and restored).

What must hold: a call that finds no connection fails once, after the pool's wait and not a
multiple of it, as ``StoreUnavailable``; the API answers it ``503 database_unavailable`` with
``Retry-After`` (not a 500 after a minute); once the database is reachable again the same store
serves calls within seconds, however long the outage lasted; the link's limits are set unless
the URL sets its own.
"""

from __future__ import annotations

import time

import pytest
from psycopg.conninfo import make_conninfo

from scheduler.api.app import make_app
from scheduler.core.errors import StoreUnavailable
from scheduler.secrets import LocalSecretBox
from scheduler.settings import Settings
from scheduler.store.db import LINK_DEFAULTS, make_pool
from scheduler.store.postgres import Store
from tests.faults.faultkit import TcpProxy, poll, postgres_upstream
from tests.integration.test_api import Client

WAIT = 1.0


@pytest.fixture
def cut(db_url):
    """(the forwarder, a store whose pool connects through it, waiting ``WAIT`` for a connection)."""
    proxy = TcpProxy(postgres_upstream(db_url))
    pool = make_pool(make_conninfo(db_url, host="127.0.0.1", port=proxy.port), max_size=4, wait_seconds=WAIT)
    yield proxy, Store(pool)
    pool.close(timeout=1)
    proxy.close()


def test_a_call_without_the_database_fails_once_after_the_wait_and_recovers(cut):
    proxy, store = cut
    store.now()  # a live connection in the pool, cut below
    proxy.down()
    began = time.monotonic()
    with pytest.raises(StoreUnavailable, match="no connection in time"):
        store.list_jobs("arn:aws:iam::111111111111:user/alice")
    took = time.monotonic() - began
    assert took < 2 * WAIT + 1, f"the wait was made more than once: {took:.1f} s"
    # A longer outage: the pool keeps trying, and serves again soon after the database returns.
    for _ in range(3):
        with pytest.raises(StoreUnavailable):
            store.now()
    proxy.up()
    poll(lambda: _answers(store), timeout=10, what="the store to serve again after the outage")


def _answers(store: Store) -> bool:
    try:
        store.now()
        return True
    except StoreUnavailable:
        return False


def test_the_api_answers_503_with_retry_after_while_the_database_is_away(cut, tmp_path):
    proxy, store = cut
    api = Client(make_app(lambda: store, lambda: LocalSecretBox(tmp_path / "secret.key"), Settings()).resolve)
    assert api("GET", "/v1/jobs").status == 200
    proxy.down()
    began = time.monotonic()
    answer = api("GET", "/v1/jobs")
    assert time.monotonic() - began < 2 * WAIT + 1
    assert answer.status == 503 and answer.body["error"]["code"] == "database_unavailable", answer.body
    assert answer.headers["Retry-After"] == "5"
    assert "send the request again" in answer.body["error"]["message"]
    assert "127.0.0.1" not in str(answer.body) and "postgres" not in str(answer.body).lower()
    assert api("GET", "/v1/health").status == 200  # the health check reads no database
    proxy.up()
    poll(lambda: api("GET", "/v1/jobs").status == 200, timeout=10, what="the API to answer again")


def test_the_link_limits_apply_unless_the_url_sets_its_own(db_url):
    pool = make_pool(make_conninfo(db_url, connect_timeout=3), max_size=1)
    try:
        with pool.connection() as conn:
            params = conn.info.get_parameters()
        assert params["connect_timeout"] == "3"  # the URL's own
        assert {k: params[k] for k in ("keepalives_idle", "tcp_user_timeout")} == {
            "keepalives_idle": str(LINK_DEFAULTS["keepalives_idle"]),
            "tcp_user_timeout": str(LINK_DEFAULTS["tcp_user_timeout"]),
        }
    finally:
        pool.close()

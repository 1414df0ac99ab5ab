"""What every store module shares: the retry on a dead pooled connection, the canonical id
check, and the cursor that reads the runner's started rows cheaply."""

from __future__ import annotations

import contextlib
import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import psycopg
from psycopg.abc import Buffer
from psycopg.adapt import Loader
from psycopg.rows import tuple_row
from psycopg.types.json import Jsonb
from psycopg.types.string import TextLoader
from psycopg_pool import PoolTimeout

from scheduler.core.domain import CHAIN_FIELDS, SPEC_FIELDS, Plan
from scheduler.core.errors import StoreUnavailable

try:  # the `local` extra: an order of magnitude faster than json.loads on a started row's target
    import orjson
except ImportError:  # pragma: no cover - without it, psycopg's default (json.loads)
    orjson = None  # type: ignore[assignment]


def extend_held(pool: Any, query: str, names: Sequence[str], rows: Sequence[Sequence[Any]], answer: str) -> set[str]:
    """Run a statement that keeps what a runner holds (leases, slots) that many more seconds,
    once for all of ``rows``: each row's values in ``names``' order, the last its seconds (sent
    as floats: psycopg types a list by its values), one array parameter a name, which the
    statement unnests. The ``answer`` column of the rows it kept; nothing is run for no rows."""
    if not rows:
        return set()
    params: dict[str, list[Any]] = {name: [row[i] for row in rows] for i, name in enumerate(names)}
    params[names[-1]] = [float(seconds) for seconds in params[names[-1]]]
    with pool.connection() as conn:
        return {row[answer] for row in conn.execute(query, params)}


def retry_on_dead_connection(method: Callable) -> Callable:
    """Run a method once more when its pooled connection turned out dead (the server restarted,
    or RDS Proxy closed an idle client): the pool drops the broken connection (and tests its
    idle ones) and the retry gets a working one. When the retry fails too, or no connection came
    within the pool's wait, the call raises ``StoreUnavailable`` (the API's 503). A dead
    connection fails at the method's first statement, before anything was written; in the rare
    case of a reply lost after a commit, the runner's writes are fenced by their lease tokens (a
    start answers "lease lost" on the retry and its lease is reclaimed later; a claim's first
    batch waits out its lease)."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except PoolTimeout as exc:  # no connection in the pool's wait: another wait would not help
            raise unavailable(exc) from exc
        except psycopg.OperationalError:
            drop_dead_connections(self.pool)
        try:
            return method(self, *args, **kwargs)
        except psycopg.OperationalError as exc:
            raise unavailable(exc) from exc

    return wrapper


def drop_dead_connections(pool: Any) -> None:
    """After a connection died: the pool's idle connections tested (a statement each) and the
    dead ones replaced, so that the retry does not take another of those a restarted server
    left dead. On that path only: a call's connection is not tested before its use."""
    with contextlib.suppress(Exception):  # a test that fails leaves it to the retry
        pool.check()


def unavailable(exc: psycopg.OperationalError) -> StoreUnavailable:
    """The domain's error for a call the database could not serve (``exc``: the pool's wait
    ended, or a fresh connection failed too), naming the cause without the connection string."""
    if isinstance(exc, PoolTimeout):
        return StoreUnavailable("the database gave no connection in time (it is down, unreachable or busy)")
    return StoreUnavailable(f"the database could not serve the call ({type(exc).__name__})")


# 19 digits in a row may be an integer beyond 64 bits, which orjson turns into a float (lossy).
# Found by mapping every digit to "0" and looking for 19 zeros: translate and a substring search
# run in C without the regex engine's per-call setup, which showed in profiles of a claim.
_DIGITS_AS_ZEROS = bytes.maketrans(b"123456789", b"000000000")
_TEXT_DIGITS_AS_ZEROS = str.maketrans("123456789", "000000000")
_LONG_DIGITS = b"0" * 19
_LONG_DIGITS_TEXT = "0" * 19
# Whether orjson reads a value exactly, by the value's text (bytes from the jsonb loader, str from
# a started row's target and retry): most jobs share their retry policy, and many their target,
# so the search above runs once per distinct text rather than per row (about 4,300 instructions
# a value, 6% of a claimed and recorded job's). Bounded; cleared when full.
_ORJSON_EXACT: dict[bytes | str, bool] = {}
_ORJSON_EXACT_MAX = 4096


def _orjson_exact(data: bytes | str) -> bool:
    exact = _ORJSON_EXACT.get(data)
    if exact is None:
        if isinstance(data, str):
            exact = _LONG_DIGITS_TEXT not in data.translate(_TEXT_DIGITS_AS_ZEROS)
        else:
            exact = _LONG_DIGITS not in data.translate(_DIGITS_AS_ZEROS)
        if len(_ORJSON_EXACT) >= _ORJSON_EXACT_MAX:
            _ORJSON_EXACT.clear()
        _ORJSON_EXACT[data] = exact
    return exact


def json_value(text: str | bytes) -> Any:
    """A JSON text as ``json.loads`` reads it, by orjson where that gives the same: ``json.loads``
    for integers beyond 64 bits (orjson reads them as floats), for what orjson refuses (lone
    surrogates, 1e400), and without orjson (the Lambda layer has none)."""
    if orjson is not None and _orjson_exact(text):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)


class _JsonbLoader(Loader):
    """jsonb (text format) as json_value reads it. A started row's target and retry, the values
    read most, do not come through here (they come as text)."""

    def load(self, data: Buffer) -> Any:
        # psycopg hands bytes; a memoryview is copied first
        return json_value(data if isinstance(data, bytes) else bytes(data))


_UUID_OID, _JSONB_OID = 2950, 3802  # registered by oid: a lookup by type name costs more than the rest


def started_rows_cursor(conn: psycopg.Connection) -> psycopg.Cursor:
    """The connection's cursor for started rows, made once per connection and kept on it. It
    reads rows as tuples and uuid columns as text: the runner's started rows carry ids used only
    as text, and a uuid.UUID object per id is a measurable share of a batch's cost; its jsonb
    columns are read with orjson when installed (a started row's target and retry come as text,
    parsed by ``json_value`` in ``read_started``: no loader's Python frame a value). Kept, since a
    cursor builds a loader for each column of its first result and keeps them for the next: a
    new cursor per batch built the 26 loaders of a started row at every claim (8% of the runner's
    CPU in a profile of the batched path). The connection is used by one thread at a time (the
    pool lends it), and so is its cursor."""
    cursor = getattr(conn, "_scheduler_started_rows", None)
    if cursor is None or cursor.closed:
        cursor = conn.cursor(row_factory=tuple_row)
        cursor.adapters.register_loader(_UUID_OID, TextLoader)
        if orjson is not None:
            cursor.adapters.register_loader(_JSONB_OID, _JsonbLoader)
        conn._scheduler_started_rows = cursor  # type: ignore[attr-defined]
    return cursor


def transaction_if(conn: psycopg.Connection[Any], wanted: bool) -> contextlib.AbstractContextManager[Any]:
    """A transaction around a write that needs one (a write with its change-log entry, a
    completion with the rows it also writes), none for a statement alone, which commits by
    itself."""
    return conn.transaction() if wanted else contextlib.nullcontext()


_CANONICAL_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def is_uuid(value: str) -> bool:
    # The canonical text form only: uuid.UUID also takes "urn:uuid:...", braces and missing or
    # extra dashes, which Postgres refuses (a 500 had the check let them through).
    return isinstance(value, str) and _CANONICAL_UUID.fullmatch(value) is not None


def plan_params(plan: Plan) -> dict[str, Any]:
    """A plan as the parameters of a statement that writes it."""
    return {
        "state": plan.state,
        "scheduled_at": plan.scheduled_at,
        "attempt": plan.attempt,
        "next_run_at": plan.next_run_at,
    }


def spec_params(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A job's writable fields as the parameters of a statement that writes them."""
    params = {k: spec.get(k) for k in SPEC_FIELDS}
    params["tags"] = list(spec.get("tags") or [])
    params["timezone"] = spec.get("timezone") or "UTC"
    params["missed_runs"] = spec.get("missed_runs") or "run_once"
    params["target"] = Jsonb(spec["target"])
    params["retry"] = Jsonb(spec.get("retry") or {})
    params["after_completion"] = spec.get("after_completion") or "keep"
    params["schedules"] = list(spec["schedules"]) if spec.get("schedules") else None
    params["spread"] = Jsonb(dict(spec["spread"])) if spec.get("spread") else None
    params["exclude_calendars"] = list(spec.get("exclude_calendars") or [])
    params["on_excluded"] = spec.get("on_excluded") or "skip"
    params["alerts"] = Jsonb(list(spec["alerts"])) if spec.get("alerts") else None
    params["limits"] = Jsonb(dict(spec["limits"])) if spec.get("limits") else None
    for name in CHAIN_FIELDS:
        params[name] = list(spec.get(name) or [])
    return params

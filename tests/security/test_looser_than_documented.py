"""Issue 31, item 9: input the API took although the contract refuses it, each reproduced through
`scheduler local --auth sigv4` over real sockets (the address table also in process). Each of
these failed before the fix.

1. Instants (``run_at``, ``start_at``, ``end_at``, the preview's ``after``) are RFC 3339
   date-times with an offset, nothing else: no Unix time as a number or a numeric string, no
   date without a time, no naive time, no ISO 8601 variants outside RFC 3339.
2. ``GET /v1/executions?job_id=`` takes a job id in the canonical form the job routes take.
3. A URL host is accepted only when the delivery can send it, to the host it reads as: no
   ideographic or fullwidth dots, no label that is only valid once mapped (enclosed or
   fullwidth letters, soft hyphens, zero-width characters), for HTTP and AMQP targets alike.
4. The SSRF guard's special-purpose address table is its own (the IANA registries), not the
   running Python's: 192.0.0.8 and 3fff::/20 are refused on every Python.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from scheduler.core.urls import check_broker_url_syntax, check_url_syntax
from scheduler.targets import ssrf
from scheduler.targets.http import _prepared_url
from scheduler.targets.http_wire import _origin_of
from scheduler.targets.results import TargetPolicy
from tests.security.conftest import KEYS, Tenant, spec, unique

# -- 1. instants are RFC 3339 with an offset ----------------------------------------------------

NOT_RFC3339 = [
    1798761600,  # Unix time, a JSON number
    1798761600.5,
    "1798761600",  # Unix time, a numeric string
    "2026-12-01",  # a date without a time
    "2026-12-01T10:00:00",  # naive
    "2026-12-01 10:00:00Z",  # ISO 8601's space, not RFC 3339's T
    "2026-12-01T10:00Z",  # no seconds
    "2026-12-01T10:00:00+0100",  # an offset without its colon
    "2026-12-01T10:00:00,5Z",  # a decimal comma
    "20261201T100000Z",  # ISO 8601 basic format
    "2026-W49-2T10:00:00Z",  # a week date
    "2026-12-01T10:00:00+01",  # an offset without minutes
    "2026-12-01T25:00:00Z",
    " 2026-12-01T10:00:00Z",
    "\uff12\uff10\uff12\uff16-12-01T10:00:00Z",  # fullwidth digits
    True,
]
RFC3339 = [
    "2099-12-01T10:00:00Z",
    "2099-12-01T10:00:00+01:00",
    "2099-12-01T10:00:00.250-05:30",
    "2099-12-01t10:00:00z",  # RFC 3339 section 5.6: T and Z may be lower case
    "2099-12-01T10:00:00-00:00",  # RFC 3339 section 4.3: UTC, local offset unknown
]


@pytest.mark.parametrize("value", NOT_RFC3339, ids=repr)
@pytest.mark.parametrize("field", ["run_at", "start_at", "end_at"])
def test_1_job_instants_other_than_rfc3339_with_an_offset_are_400(alice, field, value):
    name = unique("when")
    body = spec(name)
    if field != "run_at":
        del body["run_at"]
        body["schedule"] = "@daily"
    body[field] = value
    answer = alice.call("POST", "/v1/jobs", body)
    assert answer.status == 400, answer.text
    assert answer.fields() == [field]
    assert "RFC 3339" in answer.error()["details"][0]["message"]
    assert name not in alice.names()


@pytest.mark.parametrize("value", [1798761600, "1798761600", "2026-12-01 10:00:00Z"], ids=repr)
def test_1_put_and_patch_refuse_them_too(alice, value):
    job = alice.create(spec(unique("whenput")))
    path = f"/v1/jobs/{job['id']}"
    put = alice.call("PUT", path, {**spec(job["name"]), "run_at": value})
    assert put.status == 400 and put.fields() == ["run_at"], put.text
    patch = alice.call("PATCH", path, {"run_at": value})
    assert patch.status == 400 and patch.fields() == ["run_at"], patch.text
    assert alice.call("GET", path).json["run_at"] == "2099-01-01T00:00:00Z"


@pytest.mark.parametrize("value", RFC3339)
def test_1_rfc3339_instants_are_taken(alice, value):
    job = alice.create(spec(unique("whenok"), run_at=value))
    assert job["run_at"].startswith("2099-12-01T")
    assert job["run_at"].endswith("Z")


@pytest.mark.parametrize("value", NOT_RFC3339, ids=repr)
@pytest.mark.parametrize("field", ["after", "run_at", "start_at", "end_at"])
def test_1_the_preview_refuses_them_too(alice, field, value):
    body = {"run_at": value} if field == "run_at" else {"schedule": "@daily", field: value}
    answer = alice.call("POST", "/v1/schedules/preview", body)
    assert answer.status == 400, answer.text
    assert answer.fields() == [field]


def test_1_the_preview_takes_rfc3339(alice):
    answer = alice.call("POST", "/v1/schedules/preview", {"schedule": "@daily", "after": "2099-01-01t10:00:00+01:00"})
    assert answer.status == 200, answer.text
    assert answer.json["occurrences"][0] == "2099-01-02T00:00:00Z"


@pytest.mark.parametrize("value", ["1798761600", "2026-12-01 10:00:00Z", "2026-12-01T10:00Z", "2026-12-01"])
def test_1_since_is_rfc3339_too(alice, value):
    answer = alice.call("GET", f"/v1/executions?since={value.replace(' ', '%20')}")
    assert answer.status == 400 and answer.fields() == ["since"], answer.text


# -- 2. the job_id filter takes canonical ids -------------------------------------------------


@pytest.fixture(scope="module")
def ran(local_server):
    """A job of alice's with one finished execution (its target refuses the connection)."""
    alice = Tenant(local_server.api, "alice", *KEYS["alice"])
    execution = alice.run_once(
        spec(unique("filter"), {"type": "http", "url": "http://127.0.0.1:9/x"}, retry={"max_attempts": 1})
    )
    return execution


@pytest.mark.parametrize("form", ["urn:uuid:{}", "{{{}}}", "undashed", "upper-undashed", "dashes", "uuid:{}", "x{}"])
def test_2_executions_job_id_filter_refuses_what_the_job_routes_refuse(alice, ran, form):
    raw = ran["job_id"]
    if form == "undashed":
        odd = raw.replace("-", "")
    elif form == "upper-undashed":
        odd = raw.replace("-", "").upper()
    elif form == "dashes":
        odd = raw.replace("-", "--", 1)
    else:
        odd = form.format(raw)
    assert alice.call("GET", f"/v1/jobs/{odd}").status == 404  # the job routes' rule
    answer = alice.call("GET", f"/v1/executions?job_id={odd.replace('{', '%7B').replace('}', '%7D')}")
    assert answer.status == 400, answer.text
    assert answer.fields() == ["job_id"]


@pytest.mark.parametrize("case", [str.lower, str.upper])
def test_2_canonical_ids_in_either_case_match_as_on_the_job_routes(alice, ran, case):
    job_id = case(ran["job_id"])
    assert alice.call("GET", f"/v1/jobs/{job_id}").status == 200
    answer = alice.call("GET", f"/v1/executions?job_id={job_id}")
    assert answer.status == 200, answer.text
    assert [e["id"] for e in answer.json["executions"]] == [ran["id"]]


# -- 3. URL hosts the delivery cannot send ------------------------------------------------------

UNSENDABLE_HOSTS = [
    "\u24d4\u24e7\u24d0\u24dc\u24df\u24db\u24d4.com",  # enclosed letters (UTS 46 maps them to example)
    "example\u3002com",  # ideographic full stop
    "example\uff0ecom",  # fullwidth full stop
    "example\uff61com",  # halfwidth ideographic full stop
    "\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45.com",  # fullwidth letters
    "ex\u00adample.com",  # a soft hyphen (mapped away)
    "ex\u200bample.com",  # a zero-width space
    "\u2460.com",  # a circled digit
    "\u210c.com",  # a black-letter capital
    "\ufb00.com",  # a ligature
    "\u2603.net",  # a snowman: IDNA 2003 encodes it, IDNA 2008 does not
    "stra\u00dfe.de",  # IDNA 2003 reads it as strasse.de, IDNA 2008 as xn--strae-oqa.de
    "\u0301x.com",  # a label starting with a combining mark
    "127\u30020\u30020\u30021",
]
SENDABLE_HOSTS = [
    "example.com",
    "EXAMPLE.com",
    "b\u00fccher.example",
    "B\u00dcCHER.example",
    "xn--bcher-kva.example",
    "\u4f8b\u3048.\u30c6\u30b9\u30c8",  # Japanese labels, dots ASCII
    "exa_mple.com",
    "example.com.",
]


@pytest.mark.parametrize("host", UNSENDABLE_HOSTS, ids=ascii)
@pytest.mark.parametrize("kind", ["http", "amqp"])
def test_3_url_hosts_the_delivery_cannot_send_are_400(alice, kind, host):
    name = unique("host")
    if kind == "http":
        target = {"type": "http", "url": f"https://{host}/hook"}
    else:
        target = {"type": "amqp", "url": f"amqps://user:pw-SECRET@{host}:5671/vhost"}
    answer = alice.call("POST", "/v1/jobs", spec(name, target))
    assert answer.status == 400, answer.text
    assert answer.fields() == ["target.url"]
    assert "SECRET" not in answer.text
    assert name not in alice.names()


def test_3_a_patch_to_such_a_host_is_400(alice):
    job = alice.create(spec(unique("hostpatch")))
    answer = alice.call("PATCH", f"/v1/jobs/{job['id']}", {"target": {"url": f"https://{UNSENDABLE_HOSTS[0]}/"}})
    assert answer.status == 400 and answer.fields() == ["target.url"], answer.text


@pytest.mark.parametrize("host", SENDABLE_HOSTS, ids=ascii)
def test_3_hosts_the_delivery_sends_are_taken(alice, host):
    assert alice.create(spec(unique("hostok"), {"type": "http", "url": f"https://{host}/hook"}))
    assert alice.create(spec(unique("hostok"), {"type": "amqp", "url": f"amqps://{host}/vhost"}))


def _sent_host_http(url: str) -> str:
    """The host the HTTP delivery connects to (and names in TLS), as it prepares the URL."""
    return _origin_of(_prepared_url(url)).host


def _sent_host_amqp(url: str) -> str:
    """The host the AMQP delivery resolves and names in TLS: the URL's host, which socket and
    ssl encode with Python's IDNA codec."""
    return urlsplit(url).hostname.encode("idna").decode("ascii").lower()


_LABEL_CHARS = st.sampled_from(
    list("abcxyzAZ09-_")
    + list("\u00fc\u00e9\u00df\u03c2\u0131\u0130\u00c9")  # Latin and Greek, with IDNA 2003/2008 deviations
    + list("\u24d0\u24b6\uff41\uff21\u2460\u210c\ufb00\u00aa\u2070")  # compatibility forms
    + list("\u3002\uff0e\uff61\u00ad\u200b\u200c\u200d\u0301\u0308")  # other dots, invisible, combining
    + list("\u4f8b\u30c6\u0627\u05d0\u0661\u2603\U0001f600")  # CJK, Arabic, Hebrew, symbols
)
_HOSTS = st.lists(st.text(_LABEL_CHARS, min_size=1, max_size=8), min_size=1, max_size=3).map(".".join)


@settings(max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(host=_HOSTS)
@example(host=UNSENDABLE_HOSTS[0])
@example(host="b\u00fccher.example")
def test_3_a_host_taken_at_write_time_is_the_host_each_delivery_sends_to(host):
    """Whatever the write-time check accepts, the HTTP delivery prepares without error and both
    deliveries send to one and the same ASCII host (so a certificate names what the user wrote)."""
    http_url, amqp_url = f"https://{host}/hook", f"amqps://{host}/vhost"
    http_ok, amqp_ok = check_url_syntax(http_url) is None, check_broker_url_syntax(amqp_url) is None
    assert http_ok == amqp_ok
    if http_ok:
        sent = _sent_host_http(http_url)
        assert sent.isascii()
        assert sent == _sent_host_amqp(amqp_url)
        assert sent.rstrip(".") == host.rstrip(".").lower() or "xn--" in sent


# -- 4. the SSRF table is the registries', not the running Python's -----------------------------

# One address at each end of each special-purpose block, and the reason given for it.
SPECIAL = [
    ("0.0.0.0", "unspecified"),
    ("0.255.255.255", "unspecified"),
    ("10.0.0.0", "private"),
    ("10.255.255.255", "private"),
    ("100.64.0.0", "reserved"),
    ("100.127.255.255", "reserved"),
    ("127.0.0.0", "loopback"),
    ("127.255.255.255", "loopback"),
    ("169.254.0.0", "link-local"),
    ("169.254.255.255", "link-local"),
    ("172.16.0.0", "private"),
    ("172.31.255.255", "private"),
    ("192.0.0.0", "reserved"),
    ("192.0.0.8", "reserved"),  # IPv4 dummy address (RFC 7600): public for Python 3.11
    ("192.0.0.9", "reserved"),
    ("192.0.0.171", "reserved"),
    ("192.0.0.255", "reserved"),
    ("192.0.2.0", "reserved"),
    ("192.0.2.255", "reserved"),
    ("192.88.99.0", "reserved"),
    ("192.88.99.255", "reserved"),
    ("192.168.0.0", "private"),
    ("192.168.255.255", "private"),
    ("198.18.0.0", "private"),
    ("198.19.255.255", "private"),
    ("198.51.100.0", "reserved"),
    ("198.51.100.255", "reserved"),
    ("203.0.113.0", "reserved"),
    ("203.0.113.255", "reserved"),
    ("224.0.0.0", "multicast"),
    ("239.255.255.255", "multicast"),
    ("240.0.0.0", "reserved"),
    ("255.255.255.254", "reserved"),
    ("255.255.255.255", "reserved"),
    ("::", "unspecified"),
    ("::1", "loopback"),
    ("::2", "reserved"),  # IPv4-compatible (deprecated), outside the global unicast space
    ("::ffff:192.0.0.8", "reserved"),  # IPv4-mapped: judged by the embedded address
    ("::ffff:10.1.2.3", "private"),
    ("64:ff9b::c000:8", "reserved"),  # NAT64 of 192.0.0.8
    ("64:ff9b::a9fe:a9fe", "link-local"),
    ("64:ff9b:1::", "private"),  # local-use NAT64 (RFC 8215)
    ("64:ff9b:1:ffff:ffff:ffff:ffff:ffff", "private"),
    ("100::", "reserved"),
    ("100::ffff:ffff:ffff:ffff", "reserved"),
    ("100:0:0:1::1", "reserved"),
    ("2001::", "reserved"),
    ("2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", "reserved"),
    ("2001:db8::", "reserved"),
    ("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", "reserved"),
    ("2002:c000:8::1", "reserved"),  # 6to4 around 192.0.0.8
    ("2002:a00:1::1", "private"),  # 6to4 around 10.0.0.1
    ("3fff::", "reserved"),  # documentation (RFC 9637): public for Python 3.11
    ("3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", "reserved"),
    ("5f00::1", "reserved"),
    ("fc00::", "private"),
    ("fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "private"),
    ("fe80::", "link-local"),
    ("febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "link-local"),
    ("fec0::1", "private"),
    ("ff00::", "multicast"),
    ("ff0e::1", "multicast"),
    ("4000::1", "reserved"),
    ("1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "reserved"),
]
PUBLIC = [
    "1.1.1.1",
    "8.8.8.8",
    "1.0.0.0",  # just past 0.0.0.0/8
    "11.0.0.0",
    "100.63.255.255",
    "100.128.0.0",
    "126.255.255.255",
    "128.0.0.0",
    "169.253.255.255",
    "169.255.0.0",
    "172.15.255.255",
    "172.32.0.0",
    "192.0.1.0",
    "192.0.3.0",
    "192.31.196.1",  # AS112 (RFC 7535): globally reachable
    "192.88.98.255",
    "192.88.100.0",
    "192.167.255.255",
    "192.169.0.0",
    "198.17.255.255",
    "198.20.0.0",
    "198.51.99.255",
    "198.51.101.0",
    "203.0.112.255",
    "203.0.114.0",
    "223.255.255.255",
    "2000::1",
    "2001:200::1",
    "2001:db7:ffff:ffff:ffff:ffff:ffff:ffff",
    "2001:db9::",
    "2606:4700:4700::1111",
    "2620:4f:8000::1",  # AS112 (RFC 7534): globally reachable
    "3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
    "3fff:1000::",
    "3fff:ffff::1",
    "::ffff:8.8.8.8",
    "64:ff9b::808:808",
    "2002:808:808::1",
]


@pytest.mark.parametrize("address, reason", SPECIAL)
def test_4_every_special_purpose_block_is_refused_with_its_reason(address, reason):
    assert ssrf.classify(address) == reason
    assert ssrf.classify(ipaddress.ip_address(address)) == reason


@pytest.mark.parametrize("address", PUBLIC)
def test_4_addresses_just_outside_the_blocks_are_public(address):
    assert ssrf.classify(address) is None


def test_4_the_verdicts_do_not_ask_pythons_tables(monkeypatch):
    """With every ``is_*`` property of ``ipaddress`` broken, the verdicts are the same: they come
    from the table in ssrf.py, whatever Python runs it."""

    def broken(self):
        raise AssertionError("classify asked ipaddress for its tables")

    for cls in (ipaddress.IPv4Address, ipaddress.IPv6Address):
        for name in ("is_private", "is_global", "is_reserved", "is_loopback", "is_link_local", "is_multicast"):
            monkeypatch.setattr(cls, name, property(broken))
        monkeypatch.setattr(cls, "is_unspecified", property(broken))
    monkeypatch.setattr(ipaddress.IPv6Address, "is_site_local", property(broken))
    for address, reason in SPECIAL:
        assert ssrf.classify(address) == reason, address
    for address in PUBLIC:
        assert ssrf.classify(address) is None, address
    assert ssrf.address_problem("192.0.0.8", TargetPolicy()) == "reserved"


@pytest.mark.parametrize(
    "host, address",
    [
        ("192.0.0.8", "192.0.0.8"),
        ("[3fff::1]", "3fff::1"),
        ("[64:ff9b::c000:8]", "64:ff9b::c000:8"),
        ("198.51.100.7", "198.51.100.7"),
    ],
)
def test_4_the_guard_refuses_them_through_the_server(guarded, host, address):
    execution = guarded.run_once(
        spec(
            unique("special"),
            {"type": "http", "url": f"http://{host}:8080/hook", "timeout_seconds": 2},
            retry={"max_attempts": 1},
        )
    )
    assert (execution["status"], execution["error"]) == (
        "failed",
        f"target address {address} is not allowed (reserved)",
    )

"""The SSRF guard: which addresses a job may make the scheduler connect to.

Outside local mode (``TargetPolicy.allow_private`` false), a target must not reach the
scheduler's own network: loopback, private (RFC 1918, IPv6 ULA and site-local), link-local
(``169.254.169.254``, the instance metadata service, included), multicast, unspecified
(``0.0.0.0``, ``::``) and reserved or otherwise non-public addresses are refused, for IPv4 and
IPv6. IPv6 forms that embed an IPv4 address (IPv4-mapped ``::ffff:127.0.0.1``, 6to4
``2002::/16``, NAT64 ``64:ff9b::/96``) are judged by the embedded address. Which addresses are
special is this module's own table (``_SPECIAL_BLOCKS``, from the IANA special-purpose address
registries), not the running Python's ``ipaddress`` properties, so the verdict is the same on
every Python.

The check is made on the address actually connected, not on a name: :func:`connect` resolves
the host once, refuses the whole target if ANY of its addresses is not allowed, and connects to
one of exactly those validated addresses. There is no second resolution, hence no DNS-rebinding
window. TLS keeps using the original host name for SNI and certificate checks (callers do the
TLS wrap with the name, see :mod:`scheduler.targets.http` and :mod:`scheduler.targets.amqp`).

Operators may exempt targets with ``TargetPolicy.allow_list``: host names (exact, or
``*.example.com`` / ``.example.com`` for the subdomains of example.com) skip the check
entirely; CIDRs or single addresses (``10.20.0.0/16``, ``fd00::/8``, ``10.1.2.3``) exempt the
addresses they contain.

:func:`check_url_syntax` and :func:`check_broker_url_syntax` (the syntax rules, defined in
:mod:`scheduler.core.urls` for the API) are re-exported here for the delivery.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import socket
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from scheduler.core.urls import MAX_URL_LENGTH, check_broker_url_syntax, check_url_syntax  # noqa: F401 (re-exported)
from scheduler.targets.results import TargetPolicy

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
AddrInfo = tuple[Any, Any, int, str, tuple]

_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class TargetNotAllowed(Exception):
    """A target resolved to an address the policy refuses (not an ``OSError``: never retried)."""

    def __init__(self, address: str, reason: str):
        self.address = address
        self.reason = reason
        super().__init__(f"target address {address} is not allowed ({reason})")


class ResolveTimeout(TimeoutError):
    """Name resolution did not finish within the delivery's time."""


# --------------------------------------------------------------------------- address checks


def _block(cidr: str, reason: str, source: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str, str]:
    """One special-purpose block: its network, what :func:`classify` answers for an address in
    it, and the RFC that sets it apart."""
    return ipaddress.ip_network(cidr), reason, source


# The special-purpose addresses, from the IANA IPv4 and IPv6 Special-Purpose Address Registries
# (RFC 6890, RFC 8190) and the address architectures, with the RFC of each block. Kept here, not
# taken from ipaddress's is_private / is_global, whose tables change between Python releases
# (Python 3.11 lets 192.0.0.8 and 3fff::/20 through). The registries' blocks that are globally
# reachable are left out (AS112 192.31.196.0/24 and 192.175.48.0/24, AMT 192.52.193.0/24,
# 2620:4f:8000::/48), except inside 192.0.0.0/24 and 2001::/23, refused whole: their few
# anycast service addresses (PCP, TURN, DNS-SD) are no webhook's destination.
_SPECIAL_BLOCKS = (
    # IPv4 (IANA IPv4 Special-Purpose Address Registry; multicast: IANA IPv4 Multicast Registry)
    _block("0.0.0.0/8", "unspecified", "RFC 791 section 3.2: this network"),
    _block("0.0.0.0/32", "unspecified", "RFC 1122 section 3.2.1.3: this host on this network"),
    _block("10.0.0.0/8", "private", "RFC 1918: private use"),
    _block("100.64.0.0/10", "reserved", "RFC 6598: shared address space (carrier-grade NAT)"),
    _block("127.0.0.0/8", "loopback", "RFC 1122 section 3.2.1.3: loopback"),
    _block("169.254.0.0/16", "link-local", "RFC 3927: link local (the instance metadata service)"),
    _block("172.16.0.0/12", "private", "RFC 1918: private use"),
    _block("192.0.0.0/24", "reserved", "RFC 6890 section 2.1: IETF protocol assignments (RFC 7335, RFC 7600 ...)"),
    _block("192.0.2.0/24", "reserved", "RFC 5737: documentation (TEST-NET-1)"),
    _block("192.88.99.0/24", "reserved", "RFC 7526: deprecated 6to4 relay anycast (RFC 3068)"),
    _block("192.168.0.0/16", "private", "RFC 1918: private use"),
    _block("198.18.0.0/15", "private", "RFC 2544: benchmarking"),
    _block("198.51.100.0/24", "reserved", "RFC 5737: documentation (TEST-NET-2)"),
    _block("203.0.113.0/24", "reserved", "RFC 5737: documentation (TEST-NET-3)"),
    _block("224.0.0.0/4", "multicast", "RFC 5771: multicast"),
    _block("240.0.0.0/4", "reserved", "RFC 1112 section 4: reserved"),
    _block("255.255.255.255/32", "reserved", "RFC 8190, RFC 919 section 7: limited broadcast"),
    # IPv6 (IANA IPv6 Special-Purpose Address Registry; RFC 4291 for the architecture's blocks).
    # ::ffff:0:0/96 (RFC 4291 section 2.5.5.2), 64:ff9b::/96 (RFC 6052) and 2002::/16 (RFC 3056)
    # embed an IPv4 address and are judged by it, before this table (_embedded_ipv4).
    _block("::/128", "unspecified", "RFC 4291 section 2.5.2: unspecified"),
    _block("::1/128", "loopback", "RFC 4291 section 2.5.3: loopback"),
    _block("64:ff9b:1::/48", "private", "RFC 8215: local-use IPv4/IPv6 translation"),
    _block("100::/64", "reserved", "RFC 6666: discard-only"),
    _block("2001::/23", "reserved", "RFC 2928: IETF protocol assignments (Teredo RFC 4380, ORCHIDv2 RFC 7343 ...)"),
    _block("2001:db8::/32", "reserved", "RFC 3849: documentation"),
    _block("3fff::/20", "reserved", "RFC 9637: documentation"),
    _block("5f00::/16", "reserved", "RFC 9602: SRv6 segment identifiers"),
    _block("fc00::/7", "private", "RFC 4193: unique local"),
    _block("fe80::/10", "link-local", "RFC 4291 section 2.5.6: link-local unicast"),
    _block("fec0::/10", "private", "RFC 3879: site-local (deprecated)"),
    _block("ff00::/8", "multicast", "RFC 4291 section 2.7: multicast"),
)
# The most specific block first: an address takes the reason of the smallest block holding it.
_SPECIAL_BY_PREFIX = tuple(sorted(_SPECIAL_BLOCKS, key=lambda block: -block[0].prefixlen))
# RFC 4291 section 2.4 and the IANA IPv6 Address Space registry: global unicast is 2000::/3; the
# rest of the space, outside the blocks above, is reserved by the IETF (::/96 IPv4-compatible,
# 100::/8 beyond the discard-only block, 4000::/3 ...), so it is never a public address.
_IPV6_GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")


def classify(address: IPAddress | str) -> str | None:
    """Why ``address`` is not a public unicast address (``"loopback"``, ``"private"``,
    ``"link-local"``, ``"multicast"``, ``"unspecified"``, ``"reserved"``), or None if it is.

    The verdict comes from ``_SPECIAL_BLOCKS`` (the IANA special-purpose registries), the same
    on every Python; an IPv6 address that embeds an IPv4 one (IPv4-mapped, NAT64, 6to4) is
    judged by the embedded address."""
    ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            return classify(embedded)  # NAT64 of a public address is public (IPv6-only subnets)
    for network, reason, _source in _SPECIAL_BY_PREFIX:
        if ip.version == network.version and ip in network:
            return reason
    if isinstance(ip, ipaddress.IPv6Address) and ip not in _IPV6_GLOBAL_UNICAST:
        return "reserved"
    return None


# The IPv6 forms that embed an IPv4 address: IPv4-mapped (RFC 4291 section 2.5.5.2) and NAT64's
# well-known prefix (_NAT64, RFC 6052) in the last 32 bits, 6to4 (RFC 3056) in bits 16 to 47.
_IPV4_MAPPED = ipaddress.ip_network("::ffff:0:0/96")
_SIX_TO_FOUR = ipaddress.ip_network("2002::/16")


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip in _IPV4_MAPPED or ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _SIX_TO_FOUR:
        return ipaddress.IPv4Address((int(ip) >> 80) & 0xFFFFFFFF)
    return None


@functools.lru_cache(maxsize=64)
def _allow_list(entries: tuple[str, ...]) -> tuple[tuple[Any, ...], frozenset[str], tuple[str, ...]]:
    networks, names, suffixes = [], set(), []
    for raw in entries:
        entry = raw.strip().lower()
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            continue
        except ValueError:
            pass
        if entry.startswith("*."):
            suffixes.append(entry[1:].rstrip("."))
        elif entry.startswith("."):
            suffixes.append(entry.rstrip("."))
        else:
            names.add(entry.rstrip("."))
    return tuple(networks), frozenset(names), tuple(suffixes)


_ALLOW_LIST_NAME = re.compile(r"(?:\*\.|\.)?[\w-]+(?:\.[\w-]+)*\.?")  # \w: internationalised names too


def allow_list_problems(entries: Iterable[str]) -> list[str]:
    """The entries of an allow-list that are neither an address, a network (CIDR) nor a host
    name (``*.example.com`` and ``.example.com`` for its subdomains): each would match nothing."""
    problems = []
    for raw in entries:
        entry = raw.strip().lower()
        if not entry:
            continue
        try:
            ipaddress.ip_network(entry.strip("[]"), strict=False)
            continue
        except ValueError:
            pass
        if not _ALLOW_LIST_NAME.fullmatch(entry) or entry.replace(".", "").replace("/", "").isdigit():
            problems.append(f"{raw.strip()!r} is neither an address, a network (CIDR) nor a host name")
    return problems


def host_allow_listed(host: str, policy: TargetPolicy) -> bool:
    """True when ``host`` (a name from a URL) matches a host-name entry of the allow-list."""
    if not policy.allow_list or not host:
        return False
    _, names, suffixes = _allow_list(tuple(policy.allow_list))
    name = host.strip("[]").lower().rstrip(".")
    return name in names or any(name.endswith(suffix) for suffix in suffixes)


def address_problem(address: IPAddress | str, policy: TargetPolicy) -> str | None:
    """The reason ``policy`` refuses ``address`` (see :func:`classify`), or None if allowed."""
    if policy.allow_private:
        return None
    ip = ipaddress.ip_address(address.split("%", 1)[0]) if isinstance(address, str) else address
    reason = classify(ip)
    if reason is None:
        return None
    networks, _, _ = _allow_list(tuple(policy.allow_list))
    candidates = [ip]
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        candidates.append(ip.ipv4_mapped)
    for candidate in candidates:
        if any(candidate.version == net.version and candidate in net for net in networks):
            return None
    return reason


def check_addresses(host: str, addresses: Iterable[str], policy: TargetPolicy) -> None:
    """Raise :class:`TargetNotAllowed` unless every one of ``addresses`` (of ``host``) is allowed."""
    if policy.allow_private or host_allow_listed(host, policy):
        return
    for address in addresses:
        reason = address_problem(address, policy)
        if reason is not None:
            raise TargetNotAllowed(address.split("%", 1)[0], reason)


# ----------------------------------------------------------------------- resolve and connect

# Name lookups in flight: at most LOOKUPS_PER_OWNER for one owner, LOOKUPS_IN_ALL in the process.
# A lookup cannot be interrupted: one that hangs (a slow or dead resolver of a name a job chose)
# keeps its slot and its thread until it ends, so an owner whose lookups hang waits for its own
# slots (within each delivery's time) while the other owners' lookups find theirs.
LOOKUPS_PER_OWNER = 8
LOOKUPS_IN_ALL = 64

_resolver = ThreadPoolExecutor(max_workers=LOOKUPS_IN_ALL, thread_name_prefix="target-resolve")


class _LookupSlots:
    """Admission of name lookups, per owner and in all; thread-safe. An owner's count is dropped
    when it reaches zero, so owners that come and go leave nothing behind."""

    def __init__(self, per_owner: int, in_all: int) -> None:
        self.per_owner = per_owner
        self.in_all = in_all
        self._by_owner: dict[str | None, int] = {}
        self._total = 0
        self._changed = threading.Condition()

    def take(self, owner: str | None, deadline: float) -> bool:
        """Take a slot for ``owner``, waiting until ``deadline`` (``time.monotonic``) at most;
        False when none came free in time."""
        with self._changed:
            while self._by_owner.get(owner, 0) >= self.per_owner or self._total >= self.in_all:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(remaining)
            self._by_owner[owner] = self._by_owner.get(owner, 0) + 1
            self._total += 1
            return True

    def give_back(self, owner: str | None) -> None:
        """Free a slot of ``owner`` (its lookup ended)."""
        with self._changed:
            left = self._by_owner[owner] - 1
            if left:
                self._by_owner[owner] = left
            else:
                del self._by_owner[owner]
            self._total -= 1
            self._changed.notify_all()

    def in_flight(self, owner: str | None) -> int:
        """The lookups of ``owner`` in flight (for tests and diagnostics)."""
        with self._changed:
            return self._by_owner.get(owner, 0)

    @property
    def total(self) -> int:
        """The lookups in flight, of every owner (for tests and diagnostics)."""
        with self._changed:
            return self._total


_slots = _LookupSlots(LOOKUPS_PER_OWNER, LOOKUPS_IN_ALL)


def resolve(host: str, port: int, timeout: float, *, owner: str | None = None) -> list[AddrInfo]:
    """``getaddrinfo(host, port)`` for TCP, bounded by ``timeout`` seconds, as a lookup of
    ``owner`` (the job's owner: see ``LOOKUPS_PER_OWNER``).

    Raises ``socket.gaierror`` when the name does not resolve, :class:`ResolveTimeout` when
    the resolver does not answer in time, or no lookup slot of the owner came free in time (the
    lookup itself cannot be interrupted; it finishes in a worker thread and its answer is dropped).
    """
    host = host.strip("[]")
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
        literal = True
    except ValueError:
        literal = False
    if literal:
        infos = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM, 0, socket.AI_NUMERICHOST)
    else:
        infos = _lookup(host, port, owner, time.monotonic() + max(timeout, 0.0))
    unique: list[AddrInfo] = []
    for info in infos:
        if info[0] in (socket.AF_INET, socket.AF_INET6) and info not in unique:
            unique.append(info)
    if not unique:
        raise socket.gaierror(socket.EAI_NONAME, f"no address for {host!r}")
    return unique


def _lookup(host: str, port: int, owner: str | None, deadline: float) -> list[AddrInfo]:
    """``getaddrinfo`` in a worker thread, in a slot of ``owner`` held until it ends."""
    slots = _slots
    if not slots.take(owner, deadline):
        raise ResolveTimeout(f"name resolution of {host!r} timed out (waiting for earlier lookups)")
    try:
        future = _resolver.submit(socket.getaddrinfo, host, port, 0, socket.SOCK_STREAM)
    except BaseException:
        slots.give_back(owner)
        raise
    future.add_done_callback(lambda _: slots.give_back(owner))  # when it ends, however late
    try:
        return future.result(timeout=max(deadline - time.monotonic(), 0.0))
    except FutureTimeout:
        future.cancel()
        raise ResolveTimeout(f"name resolution of {host!r} timed out") from None


def resolve_checked(
    host: str, port: int, policy: TargetPolicy, timeout: float, *, guard: bool = True, owner: str | None = None
) -> list[AddrInfo]:
    """Resolve ``host`` once (a lookup of ``owner``, see :func:`resolve`) and, when ``guard``,
    refuse it unless all its addresses are allowed.

    Returns the ``getaddrinfo`` entries; connect to one of their ``sockaddr`` exactly.
    """
    infos = resolve(host, port, timeout, owner=owner)
    if guard:
        check_addresses(host, [info[4][0] for info in infos], policy)
    return infos


def connect(
    host: str,
    port: int,
    policy: TargetPolicy,
    *,
    timeout: float,
    guard: bool = True,
    socket_options: Sequence[tuple[int, int, Any]] | None = None,
    source_address: tuple[str, int] | None = None,
    owner: str | None = None,
) -> socket.socket:
    """Open a TCP connection to ``host:port`` on a validated address, within ``timeout`` seconds.

    The name is resolved once (:func:`resolve_checked`, a lookup of ``owner``); the addresses
    are tried in the resolver's order. Raises :class:`TargetNotAllowed`, ``socket.gaierror``,
    ``TimeoutError`` or the ``OSError`` of the last attempt.
    """
    deadline = time.monotonic() + timeout
    infos = resolve_checked(host, port, policy, timeout, guard=guard, owner=owner)
    error: OSError | None = None
    for family, socktype, proto, _name, sockaddr in infos:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"connection to {host} timed out")
        sock = socket.socket(family, socktype, proto)
        try:
            for option in socket_options or ():
                sock.setsockopt(*option)
            sock.settimeout(remaining)
            if source_address:
                sock.bind(source_address)
            sock.connect(sockaddr)
            return sock
        except OSError as exc:
            error = exc
            sock.close()
    assert error is not None
    raise error

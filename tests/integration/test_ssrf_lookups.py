"""Name lookups of the delivery (scheduler.targets.ssrf.resolve): each bounded by the delivery's
time, at most so many in flight for one owner and in all, so that one owner's hung lookups
hold up only that owner's deliveries. The resolver is a stub (a resolver that does not answer
cannot be had here); the threads, slots and timeouts are the real ones."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from scheduler.targets import ssrf
from tests.support import poll


class StubResolver:
    """``socket.getaddrinfo``: a name under ``.hung.test`` hangs until ``release``, then does
    not resolve; any other name is 127.0.0.1."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.hanging = 0
        self.lock = threading.Lock()

    def __call__(self, host, port, *args, **kwargs):
        if host.endswith(".hung.test"):
            with self.lock:
                self.hanging += 1
            try:
                self.released.wait(30)
            finally:
                with self.lock:
                    self.hanging -= 1
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("127.0.0.1", port))]


@pytest.fixture
def stub(monkeypatch) -> Iterator[StubResolver]:
    resolver = StubResolver()
    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    slots = ssrf._LookupSlots(per_owner=2, in_all=3)
    monkeypatch.setattr(ssrf, "_slots", slots)
    yield resolver
    resolver.released.set()
    poll(lambda: slots.total == 0, what="the hung lookups ended")


def hang(owner: str, count: int, stub: StubResolver) -> list[BaseException]:
    """Start ``count`` lookups of ``owner`` that hang; return the list their errors go to."""
    errors: list[BaseException] = []

    def lookup(i: int) -> None:
        try:
            ssrf.resolve(f"h{i}.hung.test", 80, 30, owner=owner)
        except BaseException as exc:
            errors.append(exc)

    for i in range(count):
        threading.Thread(target=lookup, args=(i,), daemon=True).start()
    return errors


def test_a_lookup_is_bounded_by_the_time_it_is_given(stub):
    with pytest.raises(ssrf.ResolveTimeout, match="h.hung.test"):
        ssrf.resolve("h.hung.test", 80, 0.2, owner="alice")


def test_an_owners_hung_lookups_take_only_its_own_slots(stub):
    hang("alice", 2, stub)
    poll(lambda: stub.hanging == 2, what="alice's lookups hanging")
    # Alice's next lookup waits for a slot of hers, within its time, and gets none.
    with pytest.raises(ssrf.ResolveTimeout, match="waiting for earlier lookups"):
        ssrf.resolve("other.example", 80, 0.2, owner="alice")
    # Bob's lookup does not wait behind hers.
    assert ssrf.resolve("bob.example", 80, 5, owner="bob")[0][4] == ("127.0.0.1", 80)
    assert stub.hanging == 2  # alice's are still hanging


def test_the_slots_in_all_bound_the_lookup_threads(stub):
    hang("alice", 2, stub)
    hang("bob", 1, stub)
    poll(lambda: stub.hanging == 3, what="three lookups hanging")
    with pytest.raises(ssrf.ResolveTimeout):
        ssrf.resolve("carol.example", 80, 0.2, owner="carol")  # all three slots are taken


def test_a_slot_comes_back_when_its_lookup_ends_not_when_its_delivery_gave_up(stub):
    errors = hang("alice", 2, stub)
    poll(lambda: stub.hanging == 2, what="alice's lookups hanging")
    with pytest.raises(ssrf.ResolveTimeout):
        ssrf.resolve("h.hung.test", 80, 0.2, owner="alice")
    assert ssrf._slots.in_flight("alice") == 2  # the hung ones still hold theirs
    stub.released.set()
    poll(lambda: len(errors) == 2 and ssrf._slots.in_flight("alice") == 0, what="alice's slots back")
    assert all(isinstance(error, socket.gaierror) for error in errors)
    assert ssrf.resolve("again.example", 80, 5, owner="alice")[0][4] == ("127.0.0.1", 80)

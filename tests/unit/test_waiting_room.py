"""Local mode's waiting room for limited deliveries, with the slots and leases faked: each key's
waits take their slots in order, only the first of a full key asks, keys do not wait for one
another, a wait whose lease is lost leaves, and close returns once every wait is out."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest

from scheduler.runner import waiting_room
from scheduler.runner.waiting_room import SlotWaitingRoom
from tests.support import poll


@dataclass(eq=False)
class FakeWait:
    key: str
    name: str
    refused: int = 0


class Slots:
    """Keys opened by the test; every ask counted per wait."""

    def __init__(self) -> None:
        self.open: set[str] = set()
        self.asked: list[str] = []
        self.started: list[str] = []
        self.ended: list[tuple[str, str]] = []
        self.lost: set[str] = set()
        self.lock = threading.Lock()

    def take(self, wait: FakeWait) -> str | None:
        with self.lock:
            self.asked.append(wait.name)
            return f"token-{wait.name}" if wait.key in self.open else None

    def keep(self, waits: list[FakeWait], now: float) -> list[tuple[FakeWait, str]]:
        return [(wait, "lease taken over") for wait in waits if wait.name in self.lost]

    def start(self, wait: FakeWait, token: str) -> None:
        self.started.append(wait.name)

    def end(self, wait: FakeWait, outcome: str) -> None:
        self.ended.append((wait.name, outcome))


@pytest.fixture
def slots(monkeypatch):
    monkeypatch.setattr(waiting_room, "LEASE_CHECK_SECONDS", 0.05)
    return Slots()


def room(slots: Slots) -> SlotWaitingRoom[FakeWait]:
    return SlotWaitingRoom(slots.take, slots.keep, slots.start, slots.end, first_pause=0.001, max_pause=0.01)


def test_a_full_keys_waits_take_their_slots_in_order_and_only_the_first_asks(slots):
    waits = room(slots)
    queued = [FakeWait("a", f"a{i}") for i in range(3)]
    for wait in queued:
        waits.add(wait)
    poll(lambda: slots.asked.count("a0") >= 5, what="the first wait asking again and again")
    assert set(slots.asked) == {"a0"} and len(waits) == 3
    slots.open.add("a")
    poll(lambda: slots.started == ["a0", "a1", "a2"], what="each wait given its slot, in order")
    assert len(waits) == 0
    waits.close()
    # Every one of them waited on the full key: the refusals to the first count for those behind it.
    refusals = slots.asked.count("a0") - 1
    assert [wait.refused for wait in queued] == [refusals] * 3
    late = FakeWait("a", "late")  # added once the key is free: it did not wait
    waits = room(slots)
    waits.add(late)
    waits.close()
    assert late.refused == 0


def test_a_free_key_does_not_wait_for_a_full_one(slots):
    waits = room(slots)
    waits.add(FakeWait("full", "f0"))
    waits.add(FakeWait("free", "x0"))
    slots.open.add("free")
    poll(lambda: slots.started == ["x0"], what="the free key's wait started")
    assert len(waits) == 1
    slots.open.add("full")
    waits.close()  # returns once the last wait had its slot
    assert slots.started == ["x0", "f0"]


def test_a_wait_whose_lease_was_lost_leaves_the_room(slots):
    waits = room(slots)
    waits.add(FakeWait("a", "kept"))
    waits.add(FakeWait("a", "gone"))
    slots.lost.add("gone")
    poll(lambda: slots.ended == [("gone", "lease taken over")], what="the lost wait ended")
    assert len(waits) == 1
    slots.open.add("a")
    waits.close()
    assert slots.started == ["kept"]


def test_a_nudge_asks_at_once_instead_of_after_the_backoff(slots):
    waits = SlotWaitingRoom(slots.take, slots.keep, slots.start, slots.end, first_pause=30.0, max_pause=30.0)
    waits.add(FakeWait("a", "a0"))
    poll(lambda: slots.asked == ["a0"], what="the first ask, refused")
    slots.open.add("a")  # a slot given back by a delivery of this runner: no 30 s backoff
    waits.nudge("a")
    poll(lambda: slots.started == ["a0"], timeout=5, what="the wait started at the nudge")
    waits.nudge("gone")  # a key nobody waits on: nothing to do
    waits.close()

"""The idle-connection pool both delivery targets keep (scheduler.targets.idle)."""

from __future__ import annotations

from scheduler.targets.idle import IdlePool


def test_most_recent_first_and_at_most_per_key():
    closed: list[str] = []
    pool = IdlePool(closed.append, per_key=2)
    for item in ("a1", "a2", "a3"):
        pool.give("a", item)
    assert closed == ["a3"]  # the key already kept two
    assert pool.kept("a") == ["a1", "a2"]
    assert pool.take("a") == "a2" and pool.take("a") == "a1" and pool.take("a") is None


def test_the_least_recently_used_key_goes_first():
    closed: list[str] = []
    pool = IdlePool(closed.append, per_key=4, keys=2)
    pool.give("a", "a1")
    pool.give("b", "b1")
    pool.give("a", "a2")  # "a" used again: "b" is now the least recent
    pool.give("c", "c1")
    assert closed == ["b1"]
    assert pool.kept("a") == ["a1", "a2"] and pool.kept("b") == [] and pool.kept("c") == ["c1"]


def test_close_all_closes_and_forgets_every_connection():
    closed: list[str] = []
    pool = IdlePool(closed.append, per_key=4)
    pool.give("a", "a1")
    pool.give("b", "b1")
    pool.close_all()
    assert sorted(closed) == ["a1", "b1"]
    assert pool.take("a") is None and pool.take("b") is None


def test_a_sweep_takes_out_what_can_no_longer_serve_under_every_key():
    pool = IdlePool(lambda item: None, per_key=4)
    for key, item in (("a", "a-old"), ("a", "a-new"), ("b", "b-old")):
        pool.give(key, item)
    assert sorted(pool.sweep(lambda item: item.endswith("old"))) == ["a-old", "b-old"]
    assert pool.kept("a") == ["a-new"] and pool.kept("b") == []
    assert pool.sweep(lambda item: False) == []

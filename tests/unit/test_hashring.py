"""The consistent-hash ring: deterministic, balanced, and a member change moves ~1/N."""

from __future__ import annotations

from collections import Counter

import pytest

from manager.hashring import HashRing, ring_hash

KEYS = [f"ns-{i % 7}/obj-{i}" for i in range(30_000)]


def shares(ring: HashRing) -> Counter[str]:
    return Counter(ring.owner(k) for k in KEYS)


def test_the_same_members_make_the_same_ring_in_any_order() -> None:
    a = HashRing(["r-2", "r-0", "r-1"])
    b = HashRing(["r-1", "r-2", "r-0", "r-1"])
    assert a == b and a.version == b.version and a.members == ("r-0", "r-1", "r-2")
    assert all(a.owner(k) == b.owner(k) for k in KEYS[:1000])
    assert HashRing(["r-0", "r-1"]).version != a.version
    assert HashRing(["r-0", "r-1", "r-2"], virtual_nodes=50).version != a.version


def test_the_hash_is_stable_across_processes() -> None:
    assert ring_hash("default/web") == 0x8A761021F891EEDC  # pinned: never Python's hash()


def test_an_empty_ring_owns_nothing() -> None:
    assert HashRing([]).owner("a/b") == ""


@pytest.mark.parametrize("members", [2, 3, 5])
def test_keys_are_shared_within_15_percent_of_even(members: int) -> None:
    ring = HashRing([f"overseer-{i}-abcdef" for i in range(members)])
    even = len(KEYS) / members
    counts = shares(ring)
    assert set(counts) == set(ring.members)
    assert all(abs(n - even) / even <= 0.15 for n in counts.values()), counts


def test_adding_a_member_moves_about_one_nth_and_only_to_it() -> None:
    before = HashRing(["a", "b", "c"])
    after = HashRing(["a", "b", "c", "d"])
    moved = [k for k in KEYS if before.owner(k) != after.owner(k)]
    assert all(after.owner(k) == "d" for k in moved)
    assert abs(len(moved) / len(KEYS) - 1 / 4) < 0.05


def test_removing_a_member_moves_only_its_keys() -> None:
    before = HashRing(["a", "b", "c"])
    after = HashRing(["a", "c"])
    moved = [k for k in KEYS if before.owner(k) != after.owner(k)]
    assert all(before.owner(k) == "b" for k in moved)
    assert sum(1 for k in KEYS if before.owner(k) == "b") == len(moved)


def test_virtual_nodes_must_be_positive() -> None:
    with pytest.raises(ValueError, match="virtual_nodes"):
        HashRing(["a"], virtual_nodes=0)

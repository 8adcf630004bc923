"""The ring on the API server's shard hash space: FNV-1a as Go computes it, ranges,
selectors, and a slot ring that is deterministic, balanced and moves little."""

from __future__ import annotations

import hashlib
import uuid
from collections import Counter

import pytest

from manager.hashring import (
    HASH_SPACE,
    RangeSet,
    RingParameters,
    SlotRing,
    fnv1a_64,
    hex_bound,
    intersect_ranges,
    merge_ranges,
    ranges_size,
    shard_hash,
    shard_selector,
    subtract_ranges,
)

HALF = 1 << 63
UIDS = [str(uuid.UUID(int=fnv1a_64(str(i)) << 64 | fnv1a_64(f"x{i}"))) for i in range(20_000)]


def test_fnv1a_64_matches_go_hash_fnv() -> None:
    # Go: fnv.New64a(); h.Write([]byte(s)); fmt.Sprintf("%016x", h.Sum64())
    assert f"{fnv1a_64(''):016x}" == "cbf29ce484222325"
    assert f"{fnv1a_64('a'):016x}" == "af63dc4c8601ec8c"
    assert f"{fnv1a_64('foobar'):016x}" == "85944171f73967e8"
    assert fnv1a_64("é") == fnv1a_64("\u00e9")  # UTF-8 bytes, not code points


def test_shard_hash_reads_uid_or_namespace() -> None:
    obj = {"metadata": {"uid": "u-1", "namespace": "team-a", "name": "x"}}
    assert shard_hash(obj) == fnv1a_64("u-1")
    assert shard_hash(obj, "namespace") == fnv1a_64("team-a")
    assert shard_hash({"metadata": {"name": "cluster-scoped"}}, "namespace") == fnv1a_64("")
    with pytest.raises(ValueError, match="shard_by must be one of"):
        shard_hash(obj, "name")


def test_range_arithmetic() -> None:
    assert merge_ranges([(5, 9), (0, 5), (20, 30), (25, 40)]) == [(0, 9), (20, 40)]
    assert subtract_ranges([(0, 100)], [(10, 20), (90, 200)]) == [(0, 10), (20, 90)]
    assert intersect_ranges([(0, 50), (60, 100)], [(40, 70)]) == [(40, 50), (60, 70)]
    assert ranges_size([(0, HALF), (HALF, HASH_SPACE)]) == HASH_SPACE
    rs = RangeSet([(10, 20), (30, 40)])
    assert [h in rs for h in (9, 10, 19, 20, 30, 39, 40)] == [
        False, True, True, False, True, True, False,
    ]  # fmt: skip
    for bad in [(5, 5), (9, 3), (-1, 4), (0, HASH_SPACE + 1)]:
        with pytest.raises(ValueError, match="not a hash range"):
            merge_ranges([bad])


def test_selector_is_the_servers_normal_form() -> None:
    assert shard_selector([(0, HALF)]) == (
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
    )
    assert shard_selector([(HALF, HASH_SPACE), (0, 16)], "namespace") == (
        "shardRange(object.metadata.namespace, '0x0000000000000000', '0x0000000000000010')"
        " || shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')"
    )
    assert hex_bound(HASH_SPACE) == "0x10000000000000000"
    with pytest.raises(ValueError, match="at least one"):
        shard_selector([])


def test_the_same_members_make_the_same_ring() -> None:
    a = SlotRing(["r-2", "r-0", "r-1"])
    b = SlotRing(["r-1", "r-0", "r-2", "r-1"])
    assert a == b and a.assignment() == b.assignment()
    assert SlotRing(["r-0", "r-1", "r-2"], RingParameters(slots=32)).version != a.version
    assert SlotRing(["r-0", "r-1", "r-2"], RingParameters(shard_by="namespace")) != a


def test_ranges_cover_the_space_once_and_agree_with_owner_of() -> None:
    ring = SlotRing([f"overseer-{i}" for i in range(3)])
    every = [r for m in ring.members for r in ring.ranges_of(m)]
    assert merge_ranges(every) == [(0, HASH_SPACE)]
    assert ranges_size(every) == HASH_SPACE  # no overlap
    for member in ring.members:
        mine = RangeSet(ring.ranges_of(member))
        for uid in UIDS[:2000]:
            h = fnv1a_64(uid)
            assert (ring.owner_of(h) == member) == (h in mine)
    assert ring.owner_of(0) and ring.owner_of(HASH_SPACE - 1)
    assert SlotRing([]).owner_of(5) == "" and SlotRing([]).ranges_of("x") == []


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_keys_are_shared_within_10_percent_of_even(n: int) -> None:
    ring = SlotRing([f"overseer-{i}-abcdef" for i in range(n)])
    counts = {m: 0 for m in ring.members}
    for uid in UIDS:
        counts[ring.owner_of(fnv1a_64(uid))] += 1
    even = len(UIDS) / n
    assert all(abs(c - even) / even <= 0.10 for c in counts.values()), counts
    longest = max(len(ring.selector_of(m)) for m in ring.members)
    assert longest <= 2000, longest  # stays a short query parameter


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_a_join_moves_at_most_a_third_more_than_the_minimum(n: int) -> None:
    members = [f"overseer-{i}-abcdef" for i in range(n)]
    before, after = SlotRing(members[:-1]), SlotRing(members)
    moved = sum(
        1 for uid in UIDS if before.owner_of(fnv1a_64(uid)) != after.owner_of(fnv1a_64(uid))
    )
    assert moved / len(UIDS) <= (1 / n) * 1.4, moved / len(UIDS)


def test_parameters_describe_and_parse() -> None:
    p = RingParameters(slots=128, shard_by="namespace")
    assert p.describe() == "slots-v1;slots=128;shardBy=namespace"
    assert RingParameters.parse(p.describe()) == p
    for bad in ["slots-v2;slots=64;shardBy=uid", "slots-v1;slots=x;shardBy=uid", "slots-v1"]:
        with pytest.raises(ValueError):
            RingParameters.parse(bad)
    with pytest.raises(ValueError, match="slots: must be in"):
        RingParameters(slots=0)


# -- placed units (the clusters of a fleet sharded by cluster) ----------------------------

CLUSTERS = [f"cluster-{i}" for i in range(40)]


def _unit(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big")


def _loads(ring: SlotRing, units: list[int]) -> Counter[str]:
    return Counter(ring.owner_of(u) for u in units)


@pytest.mark.parametrize("members", [1, 2, 3, 4, 5, 7])
@pytest.mark.parametrize("n", [1, 2, 5, 6, 7, 20, 21, 40])
def test_units_are_placed_at_most_ceil_n_over_members_on_each(members: int, n: int) -> None:
    """Hashing n clusters over the slots gives one member 9 of 20 as often as not; units
    are placed by a bounded-load rule: nobody holds more than ceil(n / members)."""
    units = [_unit(c) for c in CLUSTERS[:n]]
    names = [f"ring-overseer-{i}" for i in range(members)]
    ring = SlotRing(names, RingParameters(units=tuple(units)))
    loads = _loads(ring, units)
    assert max(loads.values()) <= -(-n // members), loads
    assert sum(loads.values()) == n
    assert SlotRing(reversed(names), RingParameters(units=tuple(reversed(units)))) == ring
    assert all(
        ring.owner_of(u) == SlotRing(names, RingParameters(units=tuple(units))).owner_of(u)
        for u in units
    )


def test_plain_hashing_would_not_have_been_bounded() -> None:
    """What the bounded placement is for: the same 20 clusters by their slot alone."""
    units = [_unit(c) for c in CLUSTERS[:20]]
    names = [f"ring-overseer-{i}" for i in range(3)]
    assert max(_loads(SlotRing(names), units).values()) > 7


def test_a_hash_that_is_not_a_unit_follows_its_slot() -> None:
    names = ["a", "b", "c"]
    units = tuple(_unit(c) for c in CLUSTERS[:10])
    plain, placed = SlotRing(names), SlotRing(names, RingParameters(units=units))
    assert all(plain.owner_of(fnv1a_64(uid)) == placed.owner_of(fnv1a_64(uid)) for uid in UIDS)
    assert plain.assignment() == placed.assignment()  # the caches' ranges are the slots'
    assert plain.version != placed.version  # but it is another ring


def test_adding_a_unit_or_a_member_moves_few_units() -> None:
    """A new cluster moves at most a couple of the others; a joining member takes its
    share and the others keep most of theirs."""
    names = [f"ring-overseer-{i}" for i in range(3)]
    units = [_unit(c) for c in CLUSTERS[:21]]
    for n in range(2, 21):
        before = SlotRing(names, RingParameters(units=tuple(units[:n])))
        after = SlotRing(names, RingParameters(units=tuple(units[: n + 1])))
        moved = sum(before.owner_of(u) != after.owner_of(u) for u in units[:n])
        assert moved <= 3, (n, moved)
    before = SlotRing(names, RingParameters(units=tuple(units[:20])))
    after = SlotRing([*names, "ring-overseer-9"], RingParameters(units=tuple(units[:20])))
    moved = [u for u in units[:20] if before.owner_of(u) != after.owner_of(u)]
    assert 5 <= len(moved) <= 8, len(moved)


def test_units_describe_and_parse() -> None:
    p = RingParameters(units=(5, 2**64 - 1, 5))
    assert p.units == (5, 2**64 - 1)  # sorted, each once
    assert p.describe() == ("slots-v1;slots=64;shardBy=uid;units=0000000000000005,ffffffffffffffff")
    assert RingParameters.parse(p.describe()) == p
    assert RingParameters().describe() == "slots-v1;slots=64;shardBy=uid"  # as before
    assert p.rules() == RingParameters()  # the configuration, without the units
    for bad in [
        "slots-v1;slots=64;shardBy=uid;units=xyz",
        "slots-v1;slots=64;shardBy=uid;units=1",
        "slots-v1;slots=64;shardBy=uid;units=",
    ]:
        with pytest.raises(ValueError, match="units"):
            RingParameters.parse(bad)
    with pytest.raises(ValueError, match="units: each must be in"):
        RingParameters(units=(2**64,))

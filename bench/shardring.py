"""``python -m bench.shardring``: how rings on the API server's shard hash space compare.

Pure computation (no API server): for 1..5 members it prints, per structure, the
longest ``shardSelector`` a member sends (characters and ranges), the balance (the
largest share over the even share) and the hash space that moves when a member joins
(N-1 -> N) or leaves (N -> N-1, the worst member to lose), next to the minimum
(1/N of the space). Moved space equals moved keys in expectation: uids are random,
so their FNV-1a 64 hashes spread evenly.

Structures: ``slots-v1`` (:class:`manager.hashring.SlotRing`: equal slots, stable
matching with bounded load) at 16/64/256 slots; plain rendezvous over 64 slots (no
load bound); virtual-node arcs (points at BLAKE2b of ``member-i``, each arc to the next
point's member, adjacent arcs merged) with 16 and 100 points per member.

The table it prints is the "Shard ring" section of bench/RESULTS.md.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

from manager.hashring import (
    HASH_SPACE,
    HashRange,
    RingParameters,
    SlotRing,
    merge_ranges,
    ranges_size,
    ring_hash,
    shard_selector,
)

Assign = Callable[[list[str]], dict[str, list[HashRange]]]


def slots_v1(slots: int) -> Assign:
    def assign(members: list[str]) -> dict[str, list[HashRange]]:
        return SlotRing(members, RingParameters(slots=slots)).assignment()

    return assign


def rendezvous(slots: int) -> Assign:
    def assign(members: list[str]) -> dict[str, list[HashRange]]:
        out: dict[str, list[HashRange]] = {m: [] for m in members}
        for i in range(slots):
            best = max(members, key=lambda m: (ring_hash(f"{m}|{i}"), m))
            out[best].append((i * HASH_SPACE // slots, (i + 1) * HASH_SPACE // slots))
        return {m: merge_ranges(r) for m, r in out.items()}

    return assign


def arcs(points: int) -> Assign:
    def assign(members: list[str]) -> dict[str, list[HashRange]]:
        ring = sorted((ring_hash(f"{m}-{i}"), m) for m in members for i in range(points))
        starts = [p for p, _ in ring]
        out: dict[str, list[HashRange]] = {m: [] for m in members}
        # the arc (previous point, this point] belongs to this point's member
        prev = 0
        for p, m in ring:
            if p + 1 > prev:
                out[m].append((prev, p + 1))
            prev = p + 1
        if prev < HASH_SPACE:
            out[ring[bisect.bisect_left(starts, 0)][1]].append((prev, HASH_SPACE))
        return {m: merge_ranges(r) for m, r in out.items()}

    return assign


def moved(before: dict[str, list[HashRange]], after: dict[str, list[HashRange]]) -> float:
    """The share of the space whose owner differs."""
    same = 0
    for member, ranges in after.items():
        mine = merge_ranges(ranges)
        for start, end in merge_ranges(before.get(member, [])):
            for s, e in mine:
                lo, hi = max(start, s), min(end, e)
                if lo < hi:
                    same += hi - lo
    return 1 - same / HASH_SPACE


def row(name: str, assign: Assign, n: int) -> list[str]:
    members = [f"overseer-{i}-{ring_hash(str(i)) % 10**6:06d}" for i in range(n)]
    now = assign(members)
    longest = max(now.values(), key=lambda r: len(shard_selector(r)))
    share = max(ranges_size(r) for r in now.values()) / HASH_SPACE
    join = moved(assign(members[:-1]), now) if n > 1 else 1.0
    leave = (
        max(moved(now, assign([m for m in members if m != gone])) for gone in members)
        if n > 1
        else 1.0
    )
    return [
        name,
        str(n),
        str(len(shard_selector(longest))),
        str(len(longest)),
        f"{share * n:.3f}",
        f"{join:.3f}" if n > 1 else "-",
        f"{leave:.3f}" if n > 1 else "-",
        f"{1 / n:.3f}" if n > 1 else "-",
    ]


STRUCTURES: list[tuple[str, Assign]] = [
    ("slots-v1, 16 slots", slots_v1(16)),
    ("slots-v1, 64 slots (default)", slots_v1(64)),
    ("slots-v1, 256 slots", slots_v1(256)),
    ("rendezvous, 64 slots, no load bound", rendezvous(64)),
    ("arcs, 16 points/member", arcs(16)),
    ("arcs, 100 points/member", arcs(100)),
]


def main() -> None:
    header = [
        "structure",
        "members",
        "selector chars (max)",
        "ranges (max)",
        "largest share / even",
        "moved at join",
        "moved at leave (worst)",
        "minimum move",
    ]
    print("| " + " | ".join(header) + " |")
    print("|---|" + "---:|" * (len(header) - 1))
    for name, assign in STRUCTURES:
        for n in range(1, 6):
            print("| " + " | ".join(row(name, assign, n)) + " |")


if __name__ == "__main__":
    main()

"""Consistent-hash rings: which member owns a key.

Two rings live here:

* :class:`SlotRing` (the ring of server-side sharding, KEP-5866): keys are the FNV-1a 64
  hash of the primary object's uid (or namespace), the hash the API server filters
  ``shardSelector`` lists and watches by, and a member's share is a set of hash ranges
  (:meth:`SlotRing.ranges_of`, :func:`shard_selector`). Its structure and the figures
  that chose it are in the comment above :data:`HASH_SPACE` and bench/RESULTS.md.
* :class:`HashRing` (virtual nodes over BLAKE2b of ``namespace/name``), which
  ``manager.sharding`` uses today, described next.

Each member is placed on a 64-bit ring at ``virtual_nodes`` points (the hash of
``"<member>-<i>"``); a key belongs to the first point at or after the key's own hash,
wrapping around. Adding or removing one of N members moves about 1/N of the keys, and
only between that member and the others. Every replica computes the same ring from the
same member names, so a ring is named by a :attr:`HashRing.version` derived from them.

The hash is BLAKE2b truncated to 64 bits (``hashlib``, in C): stable across processes,
machines and Python versions (unlike :func:`hash`). The same role as
``timebertt/kubernetes-controller-sharding``'s ``consistenthash`` ring.

Immutable, so safe to share between threads.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "DEFAULT_SLOTS",
    "DEFAULT_VIRTUAL_NODES",
    "HASH_SPACE",
    "SHARD_BY_NAMESPACE",
    "SHARD_BY_UID",
    "SHARD_FIELDS",
    "HashRange",
    "HashRing",
    "RangeSet",
    "RingParameters",
    "SlotRing",
    "fnv1a_64",
    "hex_bound",
    "intersect_ranges",
    "merge_ranges",
    "ranges_size",
    "ring_hash",
    "shard_hash",
    "shard_selector",
    "subtract_ranges",
]

JsonDict = dict[str, Any]

DEFAULT_VIRTUAL_NODES = 100


def ring_hash(text: str) -> int:
    """A stable 64-bit hash of ``text``."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


class HashRing:
    """The owners of keys for one set of members.

    Args:
        members: member names (duplicates are ignored; order does not matter).
        virtual_nodes: points per member on the ring (>= 1).
    """

    __slots__ = ("_owners", "_points", "members", "version", "virtual_nodes")

    def __init__(self, members: Iterable[str], virtual_nodes: int = DEFAULT_VIRTUAL_NODES) -> None:
        if virtual_nodes < 1:
            raise ValueError(f"virtual_nodes must be >= 1, got {virtual_nodes}")
        self.members: tuple[str, ...] = tuple(sorted(set(members)))
        self.virtual_nodes = virtual_nodes
        points = sorted(
            (ring_hash(f"{member}-{i}"), member)
            for member in self.members
            for i in range(virtual_nodes)
        )
        self._points = [p for p, _ in points]
        self._owners = [m for _, m in points]
        digest = hashlib.blake2b(
            f"{virtual_nodes}|{','.join(self.members)}".encode(), digest_size=6
        ).hexdigest()
        self.version: str = digest
        """Names this ring: equal for every replica that sees the same members."""

    def owner(self, key: str) -> str:
        """The member owning ``key`` ("" for a ring without members)."""
        return self.owner_of_hash(ring_hash(key))

    def owner_of_hash(self, h: int) -> str:
        """The member owning a key whose :func:`ring_hash` is ``h`` (one hash, many rings)."""
        if not self._points:
            return ""
        i = bisect.bisect_left(self._points, h)
        return self._owners[i if i < len(self._points) else 0]

    def __len__(self) -> int:
        return len(self.members)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HashRing) and other.version == self.version

    def __hash__(self) -> int:
        return hash(self.version)

    def __repr__(self) -> str:
        return f"HashRing(version={self.version!r}, members={list(self.members)!r})"


# -- the ring on the API server's shard hash space (KEP-5866) -------------------------------
#
# kube-apiserver 1.36 (gate ShardedListAndWatch) filters lists and watches by
# ``shardSelector=shardRange(object.metadata.uid, '0x<start>', '0x<end>') || ...``: the
# FNV-1a 64 hash of the object's uid (or namespace), start inclusive, end exclusive, over
# [0, 2**64). A replica's share must therefore be a set of hash *ranges*. The structure
# chosen, and why (figures: bench/RESULTS.md "Shard ring"):
#
# * The space is cut into ``slots`` equal slots (default 64). Each slot is assigned to a
#   member by slot-proposing stable matching with bounded load: a slot prefers members by
#   rendezvous score (BLAKE2b of ``member|slot``), a member keeps at most
#   ``ceil(slots / members)`` slots, preferring those it scores highest. The assignment
#   depends on the member names alone (every replica computes the same), is within one
#   slot of even, and a join or leave moves close to the minimum (1/(N+1) resp. 1/N).
# * A member's slots, adjacent ones merged, are its ranges: about slots/N * (1 - 1/N)
#   ranges, so a selector of 64 slots stays near 1-1.5 KB.
# * Virtual-node arcs (the HashRing above, moved to this space) need ~100 points per member
#   for +-10% balance, which makes selectors of ~100 ranges (8 KB) per member; fewer
#   points unbalance it. That is why slots, not arcs.

HASH_SPACE: Final = 1 << 64
"""The end (exclusive) of the shard hash space."""

SHARD_BY_UID: Final = "uid"
SHARD_BY_NAMESPACE: Final = "namespace"
SHARD_FIELDS: Final = {
    SHARD_BY_UID: "object.metadata.uid",
    SHARD_BY_NAMESPACE: "object.metadata.namespace",
}
DEFAULT_SLOTS: Final = 64
RING_ALGORITHM: Final = "slots-v1"
"""Names the assignment rule; part of :meth:`RingParameters.describe`."""

_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK64 = HASH_SPACE - 1

HashRange = tuple[int, int]
"""``(start, end)``: the hashes ``start <= h < end``, ``0 <= start < end <= 2**64``."""


def fnv1a_64(text: str) -> int:
    """FNV-1a 64 of ``text``'s UTF-8 bytes: the hash kube-apiserver shards by (Go's
    ``hash/fnv.New64a``)."""
    h = _FNV_OFFSET
    for byte in text.encode():
        h = ((h ^ byte) * _FNV_PRIME) & _MASK64
    return h


def shard_hash(obj: JsonDict, shard_by: str = SHARD_BY_UID) -> int:
    """The shard hash of an object: FNV-1a 64 of its ``metadata.uid`` or
    ``metadata.namespace`` (an absent value hashes as "", as the server's accessor reads
    it)."""
    meta = obj.get("metadata") or {}
    if shard_by == SHARD_BY_UID:
        return fnv1a_64(str(meta.get("uid") or ""))
    if shard_by == SHARD_BY_NAMESPACE:
        return fnv1a_64(str(meta.get("namespace") or ""))
    raise ValueError(f"shard_by must be one of {sorted(SHARD_FIELDS)}, got {shard_by!r}")


def hex_bound(value: int) -> str:
    """A range bound as the server writes it: ``0x`` and 16 lowercase hex digits, or
    ``0x10000000000000000`` for the end of the space."""
    if not 0 <= value <= HASH_SPACE:
        raise ValueError(f"hash bound out of [0, 2**64]: {value}")
    return f"0x{value:016x}"


def merge_ranges(ranges: Iterable[HashRange]) -> list[HashRange]:
    """Sorted, with overlapping and adjacent ranges joined.

    Raises:
        ValueError: a range is empty, reversed or outside [0, 2**64).
    """
    out: list[HashRange] = []
    for start, end in sorted(ranges):
        if not 0 <= start < end <= HASH_SPACE:
            raise ValueError(f"not a hash range: ({start}, {end})")
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def subtract_ranges(ranges: Iterable[HashRange], minus: Iterable[HashRange]) -> list[HashRange]:
    """The hashes in ``ranges`` and not in ``minus`` (merged)."""
    cut = merge_ranges(minus)
    out: list[HashRange] = []
    for start, end in merge_ranges(ranges):
        pos = start
        for c_start, c_end in cut:
            if c_end <= pos or c_start >= end:
                continue
            if c_start > pos:
                out.append((pos, c_start))
            pos = max(pos, c_end)
            if pos >= end:
                break
        if pos < end:
            out.append((pos, end))
    return out


def intersect_ranges(a: Iterable[HashRange], b: Iterable[HashRange]) -> list[HashRange]:
    """The hashes in both ``a`` and ``b`` (merged)."""
    left, right = merge_ranges(a), merge_ranges(b)
    out: list[HashRange] = []
    i = j = 0
    while i < len(left) and j < len(right):
        start = max(left[i][0], right[j][0])
        end = min(left[i][1], right[j][1])
        if start < end:
            out.append((start, end))
        if left[i][1] < right[j][1]:
            i += 1
        else:
            j += 1
    return out


def ranges_size(ranges: Iterable[HashRange]) -> int:
    """How many hashes ``ranges`` cover (a fraction of the space: divide by 2**64)."""
    return sum(end - start for start, end in merge_ranges(ranges))


class RangeSet:
    """A membership test for merged ranges: ``h in rs`` by bisection. Immutable."""

    __slots__ = ("_ends", "_starts", "ranges")

    def __init__(self, ranges: Iterable[HashRange]) -> None:
        self.ranges: tuple[HashRange, ...] = tuple(merge_ranges(ranges))
        self._starts = [s for s, _ in self.ranges]
        self._ends = [e for _, e in self.ranges]

    def __contains__(self, h: object) -> bool:
        if not isinstance(h, int):
            return False
        i = bisect.bisect_right(self._starts, h) - 1
        return i >= 0 and h < self._ends[i]

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RangeSet) and other.ranges == self.ranges

    def __hash__(self) -> int:
        return hash(self.ranges)

    def __repr__(self) -> str:
        return f"RangeSet({[(hex_bound(s), hex_bound(e)) for s, e in self.ranges]})"


def shard_selector(ranges: Iterable[HashRange], shard_by: str = SHARD_BY_UID) -> str:
    """The ``shardSelector`` for ``ranges`` (merged first), in the form kube-apiserver
    normalises to: ``shardRange(object.metadata.uid, '0x…', '0x…') || …``.

    Raises:
        ValueError: no ranges (an empty selector is refused by the server: a replica
            without ranges must not list at all), or an unknown ``shard_by``.
    """
    field = SHARD_FIELDS.get(shard_by)
    if field is None:
        raise ValueError(f"shard_by must be one of {sorted(SHARD_FIELDS)}, got {shard_by!r}")
    merged = merge_ranges(ranges)
    if not merged:
        raise ValueError("no hash ranges: a shard selector needs at least one")
    return " || ".join(
        f"shardRange({field}, '{hex_bound(start)}', '{hex_bound(end)}')" for start, end in merged
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class RingParameters:
    """What two replicas must agree on besides the members to compute the same ring."""

    slots: int = DEFAULT_SLOTS  # equal slots the hash space is cut into
    shard_by: str = SHARD_BY_UID  # the hashed field: uid | namespace
    algorithm: str = RING_ALGORITHM  # the assignment rule
    # Hashes placed one by one rather than by their slot (sorted, each once): the
    # clusters of a fleet sharded by cluster, few and large, which hashing into slots
    # spreads unevenly (20 over 3 members: 9 on one as often as not). Each goes to a
    # member by a bounded-load rule (:func:`_assign`): at most ceil(units / members)
    # each. Part of what replicas agree on, so a change of them is a ring change.
    units: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        problems = []
        if not 1 <= self.slots <= 4096:
            problems.append(f"slots: must be in [1, 4096], got {self.slots}")
        if self.shard_by not in SHARD_FIELDS:
            problems.append(
                f"shard_by: must be one of {sorted(SHARD_FIELDS)}, got {self.shard_by!r}"
            )
        if self.algorithm != RING_ALGORITHM:
            problems.append(f"algorithm: only {RING_ALGORITHM!r} is known, got {self.algorithm!r}")
        bad = [u for u in self.units if not (isinstance(u, int) and 0 <= u < HASH_SPACE)]
        if bad:
            problems.append(f"units: each must be in [0, 2**64), got {bad[:3]!r}")
        if problems:
            raise ValueError("invalid RingParameters: " + "; ".join(problems))
        object.__setattr__(self, "units", tuple(sorted(set(self.units))))

    def describe(self) -> str:
        """A stable text of the parameters, e.g. ``slots-v1;slots=64;shardBy=uid`` (and
        ``;units=<16 hex digits>,...`` when there are units): equal for replicas that
        compute the same ring from the same members."""
        text = f"{self.algorithm};slots={self.slots};shardBy={self.shard_by}"
        if self.units:
            text += ";units=" + ",".join(f"{u:016x}" for u in self.units)
        return text

    def rules(self) -> RingParameters:
        """These parameters without their units: the configured part, which replicas
        that follow another's units (a cluster it knows first) still share."""
        return RingParameters(slots=self.slots, shard_by=self.shard_by, algorithm=self.algorithm)

    @classmethod
    def parse(cls, text: str) -> RingParameters:
        """The parameters :meth:`describe` wrote.

        Raises:
            ValueError: not such a text (naming what is wrong).
        """
        algorithm, _, rest = text.partition(";")
        fields: dict[str, str] = {}
        for part in rest.split(";") if rest else []:
            key, sep, value = part.partition("=")
            if not sep or key in fields:
                raise ValueError(f"ring parameters {text!r}: bad or repeated field {part!r}")
            fields[key] = value
        if set(fields) - {"units"} != {"slots", "shardBy"}:
            raise ValueError(f"ring parameters {text!r}: need exactly slots and shardBy")
        if not fields["slots"].isdigit():
            raise ValueError(f"ring parameters {text!r}: slots is not a number")
        units: list[int] = []
        if "units" in fields:
            for unit in fields["units"].split(","):
                if len(unit) != 16 or unit.strip("0123456789abcdef"):
                    raise ValueError(
                        f"ring parameters {text[:120]!r}: units: {unit!r} is not 16 hex digits"
                    )
                units.append(int(unit, 16))
        return cls(
            slots=int(fields["slots"]),
            shard_by=fields["shardBy"],
            algorithm=algorithm,
            units=tuple(units),
        )


class SlotRing:
    """The owners of the shard hash space for one set of members (see the comment above
    :data:`HASH_SPACE` for the structure and why).

    Args:
        members: member names (duplicates ignored; order does not matter).
        parameters: slots and the hashed field.
    """

    __slots__ = ("_owners", "_placed", "_ranges", "_starts", "members", "parameters", "version")

    def __init__(self, members: Iterable[str], parameters: RingParameters | None = None) -> None:
        self.parameters = parameters or RingParameters()
        self.members: tuple[str, ...] = tuple(sorted(set(members)))
        slots = self.parameters.slots
        owners = _assign_slots(self.members, slots)
        self._starts = [_slot_start(i, slots) for i in range(slots)]
        self._owners = owners
        ranges: dict[str, list[HashRange]] = {m: [] for m in self.members}
        for i, owner in enumerate(owners if self.members else ()):
            start, end = _slot_start(i, slots), _slot_start(i + 1, slots)
            mine = ranges[owner]
            if mine and mine[-1][1] == start:
                mine[-1] = (mine[-1][0], end)
            else:
                mine.append((start, end))
        self._ranges = {m: tuple(r) for m, r in ranges.items()}
        units = self.parameters.units
        self._placed: dict[int, str] = (
            dict(zip(units, _assign(self.members, [f"unit:{u:016x}" for u in units]), strict=True))
            if self.members
            else {}
        )
        digest = hashlib.blake2b(
            f"{self.parameters.describe()}|{','.join(self.members)}".encode(), digest_size=6
        ).hexdigest()
        self.version: str = digest
        """Names this ring: equal for every replica with the same members and parameters."""

    @property
    def shard_by(self) -> str:
        return self.parameters.shard_by

    def owner_of(self, h: int) -> str:
        """The member owning hash ``h`` ("" for a ring without members)."""
        if not self.members:
            return ""
        if not 0 <= h < HASH_SPACE:
            raise ValueError(f"hash out of [0, 2**64): {h}")
        placed = self._placed.get(h)
        if placed is not None:
            return placed
        return self._owners[bisect.bisect_right(self._starts, h) - 1]

    def owner_of_object(self, obj: JsonDict) -> str:
        """The member owning ``obj`` (by its uid or namespace hash)."""
        return self.owner_of(shard_hash(obj, self.parameters.shard_by))

    def ranges_of(self, member: str) -> list[HashRange]:
        """``member``'s ranges, merged and sorted ([] for a non-member)."""
        return list(self._ranges.get(member, ()))

    def assignment(self) -> dict[str, list[HashRange]]:
        """Every member's ranges."""
        return {m: list(r) for m, r in self._ranges.items()}

    def selector_of(self, member: str) -> str:
        """``member``'s ``shardSelector`` (ValueError for a member without ranges)."""
        return shard_selector(self._ranges.get(member, ()), self.parameters.shard_by)

    def __len__(self) -> int:
        return len(self.members)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SlotRing) and other.version == self.version

    def __hash__(self) -> int:
        return hash(self.version)

    def __repr__(self) -> str:
        return (
            f"SlotRing(version={self.version!r}, members={list(self.members)!r}, "
            f"parameters={self.parameters.describe()!r})"
        )


def _slot_start(i: int, slots: int) -> int:
    return i * HASH_SPACE // slots


def _assign_slots(members: tuple[str, ...], slots: int) -> list[str]:
    """The owner of each slot (see :func:`_assign`)."""
    if not members:
        return [""] * slots
    return _assign(members, [str(i) for i in range(slots)])


def _assign(members: tuple[str, ...], items: list[str]) -> list[str]:
    """The owner of each of ``items`` by item-proposing stable matching with capacity
    ``ceil(items / members)``: each item ranks members by rendezvous score (the hash of
    ``"<member>|<item>"``), each member keeps the proposals it scores highest. The result
    depends only on (members, items) and is unique; an item or a member more moves few
    of the others (the rendezvous ranks do not change, only who is full)."""
    capacity = -(-len(items) // len(members))
    scores = [{m: ring_hash(f"{m}|{item}") for m in members} for item in items]
    prefs = [sorted(members, key=lambda m, s=s: (-s[m], m)) for s in scores]  # type: ignore[misc]
    nxt = [0] * len(items)
    held: dict[str, list[tuple[int, int]]] = {m: [] for m in members}  # member -> (score, item)
    free = list(range(len(items)))
    while free:
        item = free.pop()
        member = prefs[item][nxt[item]]
        nxt[item] += 1
        mine = held[member]
        bisect.insort(mine, (scores[item][member], item))
        if len(mine) > capacity:
            _, rejected = mine.pop(0)  # the lowest score goes on to its next choice
            free.append(rejected)
    owners = [""] * len(items)
    for member, mine in held.items():
        for _, item in mine:
            owners[item] = member
    return owners

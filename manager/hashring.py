"""A consistent-hash ring: which member owns a key (ring hash with virtual nodes).

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

__all__ = ["DEFAULT_VIRTUAL_NODES", "HashRing", "ring_hash"]

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

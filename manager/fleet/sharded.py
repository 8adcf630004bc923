"""A fleet sharded by cluster: each replica engages only the clusters the shard ring gives
it, so caches and watch connections divide by the number of replicas.

The ring is the manager's (:class:`~manager.sharding.ShardRing`: shard Leases in the home
cluster) and its unit is the cluster: a cluster's shard hash is a hash of its name
(:func:`cluster_hash`). Clusters are few and large, and hashing them into the ring's slots
as keys are would spread them unevenly (20 over 3 replicas: 9 on one as often as not, and
the busiest replica's memory is what a Deployment's limit must cover), so every cluster
the providers know is *placed* (:meth:`ShardRing.set_units <manager.sharding.ShardRing.
set_units>`): at most ceil(clusters / replicas) on each replica, by a bounded-load rule
that every replica computes alike from the ring's members and published units (a new
cluster moves at most a few others). Engaging a cluster is, for
the ring, one long reconcile of that key — :meth:`ShardRing.begin
<manager.sharding.ShardRing.begin>` when it is engaged, :meth:`ShardRing.end
<manager.sharding.ShardRing.end>` once it has left — so a ring change hands a cluster over
with the handshake keys use:

* a replica that loses a cluster drains: the ring tells this policy (a watcher), the fleet
  reconsiders and the cluster leaves (its keys stop, their in-flight reconciles end, its
  caches and connections go), and only then — or at ``drain_timeout`` — does the replica
  publish a ring without it;
* the replica that gains it engages it only once that publication (or the Lease's expiry)
  is visible, as for any key: never two replicas at once.

Writes are fenced per cluster (:meth:`ClusterShards.fence`): every write the cluster's
keys make (to that cluster, or to another through a cluster-aware reconciler), and every
write through the member's client, is allowed only while this replica's shard Lease is
valid on its own clock *and* its applied ring gives it the cluster (during a drain that
takes it away, only until the drain's deadline). A replica paused past a handover, or a
reconcile that outlasted the drain, writes nothing.

Thread-safe: the fleet calls :meth:`engages` and :meth:`released` with its lock held;
lock order fleet → policy → ring; the ring calls its watchers with no lock held.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable

from manager.fencing import Fence
from manager.sharding import ShardRing

__all__ = ["ClusterShards", "cluster_hash", "cluster_key"]


def cluster_hash(name: str) -> int:
    """The shard hash of cluster ``name``: where the ring places it — the first 8 bytes of
    the SHA-256 of its UTF-8 name, big-endian. Not the FNV-1a keys hash by: cluster names
    are short and alike (``prod-1``, ``prod-2``), and FNV-1a of strings that differ in
    their last byte differ in the low bits only, so they would all land in one slot. No
    API server needs to filter by this hash (a cluster is placed, not a watch), so any
    stable, well-mixed hash does; every replica computes the same one."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big")


def cluster_key(name: str) -> str:
    """The ring key of cluster ``name`` (in-flight bookkeeping and fence messages)."""
    return f"cluster/{name}"


class ClusterShards:
    """The :class:`~manager.fleet.fleet.ClusterPolicy` of a fleet sharded by cluster.

    Args:
        ring: the manager's shard ring.
        reconsider: what the fleet does when the answer may have changed
            (:meth:`Fleet.reconsider <manager.fleet.fleet.Fleet.reconsider>`).
    """

    def __init__(self, ring: ShardRing, reconsider: Callable[[], None]) -> None:
        self.ring = ring
        self._lock = threading.Lock()
        self._held: set[str] = set()  # engaged (or leaving): begun on the ring, not ended
        ring.add_watcher(reconsider)

    def known(self, names: list[str]) -> None:
        """Every cluster the providers know now: the ring places them (a change is a
        ring change: drained, published, handed over)."""
        self.ring.set_units(cluster_hash(name) for name in names)

    def engages(self, name: str) -> bool:
        """Whether this replica engages cluster ``name`` now: one it holds while the ring
        still gives it the cluster and no drain takes it away; a new one once the ring's
        handshake lets it start (:meth:`ShardRing.begin <manager.sharding.ShardRing.begin>`)."""
        h = cluster_hash(name)
        with self._lock:
            if name in self._held:
                return self.ring.keeps(h)
            if self.ring.begin(cluster_key(name), h):
                self._held.add(name)
                return True
            return False

    def released(self, name: str) -> None:
        """Cluster ``name`` has left this replica for good (keys stopped, caches gone):
        a drain of it may end."""
        with self._lock:
            if name not in self._held:
                return
            self._held.discard(name)
        self.ring.end(cluster_key(name), cluster_hash(name))

    def held(self) -> list[str]:
        """The clusters this replica holds on the ring now (engaged or leaving)."""
        with self._lock:
            return sorted(self._held)

    def fence(self, name: str) -> Fence:
        """The write fence of cluster ``name``: open while the shard Lease is valid on our
        clock and the applied ring gives us the cluster."""
        return self.ring.fence(cluster_key(name), cluster_hash(name))

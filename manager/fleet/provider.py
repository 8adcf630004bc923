"""Cluster providers: what finds the clusters of a fleet and says how to reach them
(multicluster-runtime's ``multicluster.Provider``; the fleet is its ``multicluster.Aware``).

A :class:`ClusterProvider` runs in a thread of its own (``fleet-provider/<name>``) from the
moment the manager runs until it stops, and tells the fleet (a :class:`ClusterSink`) which
clusters exist: :meth:`ClusterSink.engage` with a name and a :class:`ClusterSource` when
one appears or its credentials change (another ``revision``), :meth:`ClusterSink.disengage`
when it goes. Both return at once: the fleet connects, caches and starts the keys of a
cluster in that cluster's own thread, so a provider is never held up by a slow cluster
(multicluster-runtime asks the same of ``Engage``: re-entrant and non-blocking).

Which of the clusters the providers know a replica engages is decided by the fleet's
:class:`~manager.fleet.fleet.ClusterPolicy` (all of them, by default), not by the
providers.

The built-in providers (:mod:`manager.fleet.providers`): a static list of kubeconfig files,
kubeconfig Secrets in a namespace of the home cluster (the shape Cluster API writes), and
the home cluster itself. A plugin adds its own (a ClusterProfile reader, say) with
:meth:`Manager.add_cluster_provider <manager.manager.Manager.add_cluster_provider>` in its
``setup``.

Thread-safe: a sink may be called from any thread, any number of times.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Protocol

from manager.client.kubeconfig import ClusterConfig

__all__ = ["ClusterProvider", "ClusterSink", "ClusterSource"]


@dataclass(frozen=True, slots=True)
class ClusterSource:
    """How to reach one cluster, as a provider found it.

    Attributes:
        config: the API server and credentials (None: the home cluster itself, reached
            with the manager's own client and caches).
        revision: what identifies these credentials (a hash of the kubeconfig): a source
            engaged again with another revision replaces the cluster's connection and
            caches (credentials rotated); with the same one it changes nothing.
        where: where it came from, for messages (``kubeconfig /etc/fleet/east``,
            ``secret fleet/east-kubeconfig``).
    """

    config: ClusterConfig | None
    revision: str = ""
    where: str = field(default="", compare=False)

    @property
    def is_home(self) -> bool:
        """The manager's own cluster."""
        return self.config is None


class ClusterSink(Protocol):
    """What a provider reports to (the fleet)."""

    def engage(self, name: str, source: ClusterSource) -> None:
        """Cluster ``name`` exists and is reached through ``source`` (again, or with new
        credentials). Returns at once."""
        ...

    def disengage(self, name: str) -> None:
        """Cluster ``name`` is gone: its keys stop, its caches are dropped. Returns at
        once."""
        ...


class ClusterProvider(Protocol):
    """Finds the clusters of a fleet (multicluster-runtime's ``Provider.Start``).

    ``name`` names the provider in logs, ``/statusz`` and its thread. ``run`` reports
    clusters to ``fleet`` until ``stop`` is set, then returns; an exception is logged and
    the provider is started again after a pause.
    """

    name: str

    def run(self, stop: threading.Event, fleet: ClusterSink) -> None: ...

"""Fleets: one manager, many clusters (multicluster-runtime, in Overseer's terms).

==================  ===================================================================
``provider``        :class:`ClusterProvider`, :class:`ClusterSink`, :class:`ClusterSource`:
                    what finds clusters and says how to reach them
``providers``       the built-in providers: kubeconfig files, kubeconfig Secrets (Cluster
                    API's shape), the home cluster
``cluster``         :class:`Cluster`: one cluster's name, client, caches and recorder
``fleet``           :class:`Fleet`: engages and disengages each cluster on its own; the
                    :class:`ClusterPolicy` that decides which are engaged
``controller``      :class:`FleetController`: a controller's keys in every cluster
``sharded``         :class:`ClusterShards`: the policy of a fleet sharded by cluster (the
                    shard ring places clusters; each replica engages its share)
==================  ===================================================================

The README's "Fleets" section says how to configure and write for one.
"""

from __future__ import annotations

from manager.fleet.cluster import Cluster, HomeCluster, MemberCluster
from manager.fleet.controller import FleetController, ReconcilerFactory, cluster_stopping
from manager.fleet.fleet import (
    ClusterListener,
    ClusterPolicy,
    EngageAll,
    Fleet,
    FleetOptions,
    WatchScope,
)
from manager.fleet.provider import ClusterProvider, ClusterSink, ClusterSource
from manager.fleet.providers import (
    HomeProvider,
    KubeconfigFile,
    KubeconfigFiles,
    KubeconfigSecrets,
    cluster_name_of_secret,
)
from manager.fleet.sharded import ClusterShards, cluster_hash

__all__ = [
    "Cluster",
    "ClusterListener",
    "ClusterPolicy",
    "ClusterProvider",
    "ClusterShards",
    "ClusterSink",
    "ClusterSource",
    "EngageAll",
    "Fleet",
    "FleetController",
    "FleetOptions",
    "HomeCluster",
    "HomeProvider",
    "KubeconfigFile",
    "KubeconfigFiles",
    "KubeconfigSecrets",
    "MemberCluster",
    "ReconcilerFactory",
    "WatchScope",
    "cluster_hash",
    "cluster_name_of_secret",
    "cluster_stopping",
]

"""The pod port creator (``podport``): every pod gets a logical network port.

For every pod in scope (not hostNetwork, not annotated ``overseer.io/skip-port: "true"``,
in the configured namespaces and label selector) it allocates an address on a network
(``overseer.io/network`` or the default) and a MAC derived from it, records them as a
cluster-scoped ``LogicalPort`` (``logicalports.network.overseer.io/v1alpha1``) named
after network and address — the API server's name uniqueness is the lock, so no address
is ever held by two pods, even while two replicas both believe they lead — and writes
them on the pod (``overseer.io/logical-port``, ``overseer.io/ip``, ``overseer.io/mac``,
``overseer.io/network``). Ports are released when their pod goes (or is replaced by a
pod of the same name); orphans left by downtime are swept at start and periodically.
DESIGN.md §4.2; the model is kube-ovn's pod controller and its IPAM.

Modules: :mod:`~controllers.podport.config` (settings), :mod:`~controllers.podport.ipam`
(pure address pools, MACs, names), :mod:`~controllers.podport.allocator` (the cache's
view plus in-flight reservations), :mod:`~controllers.podport.crd` (the CRD),
:mod:`~controllers.podport.reconciler`, :mod:`~controllers.podport.sweeper` (orphan
collection), :mod:`~controllers.podport.metrics`, :mod:`~controllers.podport.plugin`
(wiring), :mod:`~controllers.podport.rbac` (the permissions it needs).
"""

from __future__ import annotations

from controllers.podport.config import Network, PodPortConfig
from controllers.podport.plugin import PodPortPlugin
from controllers.podport.rbac import INSTALL_CRD_RBAC_RULES, RBAC_RULES, rbac_rules

__all__ = [
    "INSTALL_CRD_RBAC_RULES",
    "RBAC_RULES",
    "Network",
    "PodPortConfig",
    "PodPortPlugin",
    "rbac_rules",
]

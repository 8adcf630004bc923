"""The deployment exposer (DESIGN.md §4.1): an opted-in Deployment gets a Service and an
Ingress named like it and owned by it, kept right for as long as it lives.

Modules: :mod:`~controllers.exposer.config` (the ``controllers.exposer`` section),
:mod:`~controllers.exposer.names` (DNS name and path rules),
:mod:`~controllers.exposer.desired` (Deployment → desired objects, validation),
:mod:`~controllers.exposer.merge` (desired fields into observed objects),
:mod:`~controllers.exposer.expectations` (own writes the cache has not shown yet),
:mod:`~controllers.exposer.reconciler`, :mod:`~controllers.exposer.plugin`,
:mod:`~controllers.exposer.rbac` (the permissions it needs).
"""

from __future__ import annotations

from controllers.exposer.config import ExposerConfig, NamespaceScope, TLSConfig
from controllers.exposer.plugin import ExposerPlugin
from controllers.exposer.rbac import RBAC_RULES
from controllers.exposer.reconciler import EXPOSED_DEPLOYMENTS, ExposerReconciler

__all__ = [
    "EXPOSED_DEPLOYMENTS",
    "RBAC_RULES",
    "ExposerConfig",
    "ExposerPlugin",
    "ExposerReconciler",
    "NamespaceScope",
    "TLSConfig",
]

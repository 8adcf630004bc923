"""The ``exposer`` plugin: wires :class:`ExposerReconciler` into a manager.

Watches (controller-runtime builder):

* ``for`` Deployments — creates, deletes, and updates that change the spec (generation)
  or the annotations, so status churn does not wake it;
* ``owns`` Services and Ingresses, so an owned object edited or deleted by someone wakes
  its Deployment and is repaired;
* ``watches`` Services and Ingresses that are *not* controlled by the Deployment of their
  name, mapped to that Deployment by name: when a foreign object that blocked the
  exposure (``ExposeConflict``) is deleted, the Deployment is exposed without waiting for
  another change to it.

Every watch is filtered by the configured namespace scope before anything is queued.

Fleet-wide (``fleet: true``), each engaged cluster gets a reconciler of its own over that
cluster's caches (its Services and Ingresses written there, its Events there), with the
same watches; ``overseer_exposer_exposed_deployments`` then has a ``cluster`` label.

Sharded (``sharded: true``), a replica caches its share only: ``for`` its Deployments (by
uid, selected by the API server where it can), ``owns`` the Services and Ingresses
labelled ``app.kubernetes.io/managed-by=overseer`` (selected by the API server) whose
controller owner is in its share (filtered here), ``watches`` the unlabelled ones (what
the exposer did not make). A foreign object that carries the label anyway is not watched:
its conflict is looked at again every :data:`LABELLED_FOREIGN_RETRY` seconds.

Thread-safe: ``setup`` runs once, before the manager runs.
"""

from __future__ import annotations

from typing import Any

from controllers.exposer.config import ExposerConfig
from controllers.exposer.desired import LABEL_MANAGED_BY, MANAGED_BY
from controllers.exposer.rbac import RBAC_RULES
from controllers.exposer.reconciler import (
    DEPLOYMENTS,
    EXPOSED_DEPLOYMENTS,
    EXPOSER_METRICS,
    INGRESSES,
    SERVICES,
    ExposerReconciler,
)
from manager import (
    AnnotationChanged,
    Cluster,
    Funcs,
    GenerationChanged,
    JsonDict,
    Manager,
    PluginContext,
    Predicate,
    Request,
    any_of,
)

__all__ = ["LABELLED_FOREIGN_RETRY", "ExposerPlugin"]

LABELLED_FOREIGN_RETRY = 30.0
"""Seconds after which a sharded exposer looks again at a conflict with a foreign object
carrying its label (its watch of foreign objects selects the unlabelled)."""


def _same_name_deployment(obj: JsonDict) -> list[Request]:
    meta = obj.get("metadata") or {}
    return [Request(str(meta.get("namespace") or ""), str(meta.get("name") or ""))]


def _controlled_by_namesake(obj: JsonDict) -> bool:
    meta = obj.get("metadata") or {}
    return any(
        ref.get("controller")
        and ref.get("kind") == "Deployment"
        and ref.get("name") == meta.get("name")
        for ref in meta.get("ownerReferences") or []
    )


_FOREIGN: Predicate = Funcs(
    on_create=lambda obj: not _controlled_by_namesake(obj),
    on_update=lambda old, new: not (_controlled_by_namesake(old) and _controlled_by_namesake(new)),
    on_delete=lambda obj: not _controlled_by_namesake(obj),
)


def _in_scope(config: ExposerConfig) -> Predicate:
    def selects(obj: JsonDict) -> bool:
        meta = obj.get("metadata") or {}
        return config.namespaces.selects(str(meta.get("namespace") or ""))

    return Funcs(
        on_create=selects,
        on_update=lambda old, new: selects(new),
        on_delete=selects,
    )


class ExposerPlugin:
    """Entry point ``exposer = "controllers.exposer:ExposerPlugin"``."""

    config_class = ExposerConfig
    rbac_rules = RBAC_RULES  # what its ClusterRole must grant (`overseer rbac`)

    def setup(self, mgr: Manager, ctx: PluginContext[Any]) -> None:
        """Add the exposer controller to ``mgr``."""
        config = ctx.config
        if not isinstance(config, ExposerConfig):
            raise TypeError(f"exposer: config must be ExposerConfig, got {type(config).__name__}")
        sharded = ctx.settings.sharded
        if ctx.settings.fleet:
            self._setup_fleet(mgr, ctx.name, config, ctx)
            return
        # Sharded, a replica caches only its share: its Deployments (for_), the Services and
        # Ingresses it made for them (owns: labelled as the exposer's by the API server,
        # then by owner here), and the foreign ones (the unlabelled, selected by the API
        # server: what the exposer did not make, which a conflict waits on). Unsharded,
        # one cache of each holds everything, as the watches of foreign objects need.
        owned = f"{LABEL_MANAGED_BY}={MANAGED_BY}" if sharded else None
        foreign = f"{LABEL_MANAGED_BY}!={MANAGED_BY}" if sharded else None
        shard = "owned" if sharded else None
        reconciler = ExposerReconciler(
            mgr.client,
            # sharded: the cache of this replica's share, the one for_() is woken by
            deployments=mgr.lister(DEPLOYMENTS, shard="primary" if sharded else None),
            services=mgr.lister(SERVICES, label_selector=owned, shard=shard),
            ingresses=mgr.lister(INGRESSES, label_selector=owned, shard=shard),
            recorder=mgr.recorder(ctx.name),
            config=config,
            foreign_services=mgr.lister(SERVICES, label_selector=foreign) if sharded else None,
            foreign_ingresses=mgr.lister(INGRESSES, label_selector=foreign) if sharded else None,
            labelled_foreign_retry=LABELLED_FOREIGN_RETRY if sharded else None,
        )
        scope = _in_scope(config)
        mgr.add(EXPOSER_METRICS.runnable("exposer-metrics"), leader_only=False)
        mgr.add(EXPOSED_DEPLOYMENTS.runnable("exposer-exposed", reconciler), leader_only=False)
        (
            ctx.controller(reconciler)
            .for_(DEPLOYMENTS, scope, any_of(GenerationChanged(), AnnotationChanged()))
            .owns(SERVICES, scope, label_selector=owned)
            .owns(INGRESSES, scope, label_selector=owned)
            .watches(SERVICES, _same_name_deployment, scope, _FOREIGN, label_selector=foreign)
            .watches(INGRESSES, _same_name_deployment, scope, _FOREIGN, label_selector=foreign)
            .complete()
        )

    def _setup_fleet(
        self, mgr: Manager, name: str, config: ExposerConfig, ctx: PluginContext[Any]
    ) -> None:
        """Fleet-wide: a reconciler per engaged cluster over that cluster's caches, writing
        through its client, its Events in that cluster; the same watches in each cluster."""

        def for_cluster(cluster: Cluster) -> ExposerReconciler:
            reconciler = ExposerReconciler(
                cluster.client,
                deployments=cluster.lister(DEPLOYMENTS),
                services=cluster.lister(SERVICES),
                ingresses=cluster.lister(INGRESSES),
                recorder=cluster.recorder(name),
                config=config,
            )
            EXPOSED_DEPLOYMENTS.attach(reconciler, cluster.name)  # close() detaches it
            return reconciler

        scope = _in_scope(config)
        mgr.add(EXPOSER_METRICS.runnable("exposer-metrics"), leader_only=False)
        (
            ctx.controller(for_cluster)
            .for_(DEPLOYMENTS, scope, any_of(GenerationChanged(), AnnotationChanged()))
            .owns(SERVICES, scope)
            .owns(INGRESSES, scope)
            .watches(SERVICES, _same_name_deployment, scope, _FOREIGN)
            .watches(INGRESSES, _same_name_deployment, scope, _FOREIGN)
            .complete()
        )

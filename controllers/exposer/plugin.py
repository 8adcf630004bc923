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

Thread-safe: ``setup`` runs once, before the manager runs.
"""

from __future__ import annotations

from typing import Any

from controllers.exposer.config import ExposerConfig
from controllers.exposer.rbac import RBAC_RULES
from controllers.exposer.reconciler import (
    DEPLOYMENTS,
    EXPOSER_METRICS,
    INGRESSES,
    SERVICES,
    ExposerReconciler,
)
from manager import (
    AnnotationChanged,
    Funcs,
    GenerationChanged,
    JsonDict,
    Manager,
    PluginContext,
    Predicate,
    Request,
    any_of,
)

__all__ = ["ExposerPlugin"]


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
        reconciler = ExposerReconciler(
            mgr.client,
            # sharded: the cache of this replica's share, the one for_() is woken by
            deployments=mgr.lister(DEPLOYMENTS, shard="primary" if ctx.settings.sharded else None),
            services=mgr.lister(SERVICES),
            ingresses=mgr.lister(INGRESSES),
            recorder=mgr.recorder(ctx.name),
            config=config,
        )
        scope = _in_scope(config)
        mgr.add(EXPOSER_METRICS.runnable("exposer-metrics"), leader_only=False)
        (
            ctx.controller(reconciler)
            .for_(DEPLOYMENTS, scope, any_of(GenerationChanged(), AnnotationChanged()))
            .owns(SERVICES, scope)
            .owns(INGRESSES, scope)
            .watches(SERVICES, _same_name_deployment, scope, _FOREIGN)
            .watches(INGRESSES, _same_name_deployment, scope, _FOREIGN)
            .complete()
        )

"""A sample third-party controller plugin for Overseer.

For every ConfigMap annotated ``sample.overseer.io/greet: "true"`` the reconciler writes
the annotation ``sample.overseer.io/greeting: "<greeting>, <name>!"`` and the label
``<label>: "true"``. It imports only from ``manager`` (the public API), like any plugin.

Configuration (``controllers.sample`` in the Overseer file)::

    controllers:
      sample:
        enabled: true
        workers: 2
        greeting: Hello
        label: sample.overseer.io/greeted
"""

from __future__ import annotations

from dataclasses import dataclass, field

from manager import (
    Conflict,
    Funcs,
    JsonDict,
    Manager,
    NotFound,
    PluginContext,
    Request,
    Result,
    builtin,
)

__all__ = ["GREET", "GREETING", "SampleConfig", "SamplePlugin", "SampleReconciler"]

CONFIGMAPS = builtin("v1", "configmaps")
GREET = "sample.overseer.io/greet"
GREETING = "sample.overseer.io/greeting"


@dataclass(frozen=True, kw_only=True, slots=True)
class SampleConfig:
    """The plugin's own settings (its section under ``controllers.sample``)."""

    greeting: str = field(default="Hello", metadata={"help": "first word of the greeting"})
    label: str = field(
        default="sample.overseer.io/greeted", metadata={"help": "label set on greeted objects"}
    )

    def validate(self) -> list[str]:
        return [] if self.greeting.strip() else ["greeting: must not be empty"]


class SampleReconciler:
    """Greets one ConfigMap; idempotent (a second pass writes nothing)."""

    def __init__(self, mgr: Manager, config: SampleConfig) -> None:
        self._client = mgr.client
        self._lister = mgr.lister(CONFIGMAPS)
        self._config = config

    def reconcile(self, request: Request) -> Result:
        obj = self._lister.get(request.name, request.namespace)
        if obj is None or not _wants_greeting(obj):
            return Result()
        greeting = f"{self._config.greeting}, {request.name}!"
        meta = obj["metadata"]
        if (meta.get("annotations") or {}).get(GREETING) == greeting and (
            meta.get("labels") or {}
        ).get(self._config.label) == "true":
            return Result()
        patch = {
            "metadata": {
                "annotations": {GREETING: greeting},
                "labels": {self._config.label: "true"},
                "resourceVersion": meta["resourceVersion"],
            }
        }
        try:
            self._client.patch(CONFIGMAPS, request.name, patch, namespace=request.namespace)
        except NotFound:
            return Result()
        except Conflict:
            return Result(requeue=True)  # the cache was stale; try again with the new one
        return Result()


def _wants_greeting(obj: JsonDict) -> bool:
    return ((obj.get("metadata") or {}).get("annotations") or {}).get(GREET) == "true"


class SamplePlugin:
    """The ``sample`` entry point: ``overseer_sample_plugin:SamplePlugin``."""

    config_class = SampleConfig
    # what its ClusterRole must grant (`overseer rbac`): the informer and the patch
    rbac_rules = [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch", "patch"]}
    ]

    def setup(self, mgr: Manager, ctx: PluginContext[SampleConfig]) -> None:
        reconciler = SampleReconciler(mgr, ctx.config)
        annotated = Funcs(
            on_create=_wants_greeting,
            on_update=lambda old, new: _wants_greeting(new),
            on_delete=lambda obj: False,
        )
        ctx.controller(reconciler).for_(CONFIGMAPS, annotated).complete()

"""Controller plugins: discovered through the ``overseer.controllers`` entry points.

A plugin is what an entry point names: a class (instantiated with no arguments) or a
factory function returning an object with this shape (:class:`ControllerPlugin`)::

    class ExposerPlugin:
        config_class = ExposerConfig          # a frozen dataclass, every field defaulted

        def setup(self, mgr: Manager, ctx: PluginContext[ExposerConfig]) -> None:
            ctx.controller(ExposerReconciler(mgr, ctx.config)).for_(DEPLOYMENTS).complete()

The entry point's name is the controller's name and its section in the configuration
file (``controllers.<name>``). The built-in controllers register the same way.

Configuration classes are frozen dataclasses. Field names are snake_case in Python and
camelCase in YAML (``expose_all`` ↔ ``exposeAll``). Supported field types: ``str``,
``int``, ``float``, ``bool``, ``list[T]``, ``tuple[T, ...]``, ``dict[str, T]``, nested
dataclasses, ``Literal[...]`` and ``T | None``. Constraints and help go in the field
metadata: ``field(default=1, metadata={"min": 1, "max": 64, "help": "..."})``; a
``validate(self) -> list[str]`` method may add cross-field checks.

Discovery (:func:`discover`) reads entry points without importing them, sorted by name;
:func:`load` imports one and reports a failure with its distribution and the error.

Thread-safe: discovery and loading happen once, at start-up.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
from collections.abc import Hashable
from dataclasses import dataclass
from importlib import metadata
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from manager.errors import PluginLoadError
from manager.reconcile import Reconciler
from manager.workqueue import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
)

if TYPE_CHECKING:
    from manager.manager import ControllerBuilder, Manager

__all__ = [
    "ENTRY_POINT_GROUP",
    "ControllerPlugin",
    "ControllerSettings",
    "PluginContext",
    "PluginInfo",
    "RateLimiterSettings",
    "discover",
    "load",
    "load_path",
]

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "overseer.controllers"

C = TypeVar("C")


@dataclass(frozen=True, kw_only=True, slots=True)
class RateLimiterSettings:
    """The controller's requeue rate limiter: max of per-item exponential and a bucket."""

    base_delay: float = dataclasses.field(
        default=0.005, metadata={"min": 0.001, "help": "first retry delay, seconds"}
    )
    max_delay: float = dataclasses.field(
        default=1000.0, metadata={"min": 0.001, "help": "retry delay cap, seconds"}
    )
    qps: float = dataclasses.field(
        default=10.0, metadata={"min": 0.001, "help": "overall requeue rate, per second"}
    )
    burst: int = dataclasses.field(default=100, metadata={"min": 1, "help": "bucket size"})

    def validate(self) -> list[str]:
        if self.max_delay < self.base_delay:
            return ["maxDelay: must be >= baseDelay"]
        return []

    def build(self) -> RateLimiter[Hashable]:
        """The limiter these settings describe."""
        return MaxOfRateLimiter(
            ItemExponentialFailureRateLimiter(base_delay=self.base_delay, max_delay=self.max_delay),
            BucketRateLimiter(qps=self.qps, burst=self.burst),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class ControllerSettings:
    """What every controller section has besides the controller's own settings."""

    enabled: bool = dataclasses.field(default=True, metadata={"help": "run this controller"})
    workers: int = dataclasses.field(
        default=1, metadata={"min": 1, "max": 256, "help": "concurrent reconciles"}
    )
    rate_limiter: RateLimiterSettings = dataclasses.field(default_factory=RateLimiterSettings)


@dataclass(frozen=True, slots=True)
class PluginContext(Generic[C]):
    """What a plugin's ``setup`` receives besides the manager."""

    name: str  # the controller name (entry point name, config section)
    config: C  # the plugin's own validated settings
    settings: ControllerSettings
    manager: Manager

    def controller(self, reconciler: Reconciler) -> ControllerBuilder:
        """A controller builder named after the plugin, with its workers and rate limiter."""
        return self.manager.controller(
            self.name,
            reconciler,
            workers=self.settings.workers,
            rate_limiter=self.settings.rate_limiter.build(),
        )


class ControllerPlugin(Protocol):
    """What an ``overseer.controllers`` entry point provides."""

    config_class: type[Any]

    def setup(self, mgr: Manager, ctx: PluginContext[Any]) -> None:
        """Wire the plugin's controllers into ``mgr`` (before the manager runs)."""
        ...


@dataclass(frozen=True, slots=True)
class PluginInfo:
    """A discovered entry point, not imported yet."""

    name: str
    value: str  # "module:attr"
    distribution: str
    version: str
    entry_point: metadata.EntryPoint | None = None


def discover() -> list[PluginInfo]:
    """Every ``overseer.controllers`` entry point, sorted by name; nothing is imported.

    Raises:
        PluginLoadError: two distributions register the same controller name.
    """
    found: dict[str, PluginInfo] = {}
    for dist in metadata.distributions():
        for ep in dist.entry_points:
            if ep.group != ENTRY_POINT_GROUP:
                continue
            info = PluginInfo(
                ep.name, ep.value, dist.metadata["Name"] or "?", dist.version or "?", ep
            )
            other = found.get(ep.name)
            if other is not None and (other.distribution, other.value) != (
                info.distribution,
                info.value,
            ):
                raise PluginLoadError(
                    f"controller {ep.name!r} is registered twice: by {other.distribution} "
                    f"({other.value}) and by {info.distribution} ({info.value})"
                )
            found[ep.name] = info
    return [found[name] for name in sorted(found)]


def _instantiate(obj: Any, where: str) -> ControllerPlugin:
    plugin = obj() if callable(obj) else obj
    if not hasattr(plugin, "setup") or not hasattr(plugin, "config_class"):
        raise PluginLoadError(
            f"{where}: not a controller plugin (needs config_class and setup(mgr, ctx))"
        )
    if not dataclasses.is_dataclass(plugin.config_class):
        raise PluginLoadError(f"{where}: config_class must be a dataclass")
    return plugin  # type: ignore[no-any-return]


def load(info: PluginInfo) -> ControllerPlugin:
    """Import the plugin an entry point names.

    Raises:
        PluginLoadError: the import failed, or the object is not a plugin; the message
            names the controller, the distribution and the cause.
    """
    where = f"controller {info.name!r} from {info.distribution} {info.version} ({info.value})"
    try:
        obj = info.entry_point.load() if info.entry_point is not None else _import(info.value)
    except Exception as exc:
        raise PluginLoadError(f"{where} failed to load: {type(exc).__name__}: {exc}") from exc
    return _instantiate(obj, where)


def _import(value: str) -> Any:
    module_name, _, attr = value.partition(":")
    module = importlib.import_module(module_name)
    for part in attr.split(".") if attr else []:
        module = getattr(module, part)
    return module


def load_path(name: str, value: str) -> ControllerPlugin:
    """Load a plugin from ``module:attr`` without an entry point (tests, ``--controller``).

    Raises:
        PluginLoadError: as :func:`load`.
    """
    return load(PluginInfo(name, value, "(path)", "-"))

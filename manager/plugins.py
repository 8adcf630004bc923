"""Controller plugins: discovered through the ``overseer.controllers`` entry points, or
named on the command line (``overseer run --plugin``).

A plugin is what an entry point names: a class (instantiated with no arguments) or a
factory function returning an object with this shape (:class:`ControllerPlugin`)::

    class ExposerPlugin:
        config_class = ExposerConfig          # a frozen dataclass, every field defaulted
        rbac_rules = RBAC_RULES               # optional: what its ClusterRole must grant

        def setup(self, mgr: Manager, ctx: PluginContext[ExposerConfig]) -> None:
            ctx.controller(ExposerReconciler(mgr, ctx.config)).for_(DEPLOYMENTS).complete()

The entry point's name is the controller's name and its section in the configuration
file (``controllers.<name>``). The built-in controllers register the same way.

* ``config_class`` (optional: a plugin without settings leaves it out and gets
  :class:`NoSettings`): a frozen dataclass. Field names are snake_case in Python and
  camelCase in YAML (``expose_all`` ↔ ``exposeAll``). Supported field types: ``str``,
  ``int``, ``float``, ``bool``, ``list[T]``, ``tuple[T, ...]``, ``dict[str, T]``,
  nested dataclasses, ``Literal[...]`` and ``T | None``; a ``dict[str, T]``'s keys are
  the user's, kept as written (never camelCased). Constraints and help go in the field
  metadata: ``field(default=1, metadata={"min": 1, "max": 64, "help": "..."})``.
  A ``validate(self) -> list[str]`` method adds cross-field checks: each problem starts
  with the camelCase field it is about (``"cidr: not a network"``) and is reported as
  ``controllers.<name>.cidr: not a network``; a problem that names no field is
  reported at the section (``controllers.<name>: ...``).
* ``setup(mgr, ctx)``: wires the controllers and declares admission webhooks and CRD
  conversions (``ctx.webhook``, ``ctx.conversion``: :mod:`manager.webhook`; every
  replica serves them), before the manager runs. An exception here (a declaration kube
  would refuse, too) stops ``overseer run`` with exit code 2 and the controller's name
  (:class:`~manager.errors.PluginSetupError`).
* ``rbac_rules`` (optional): the ClusterRole rules the controller needs, as Kubernetes
  writes them (``{"apiGroups": [...], "resources": [...], "verbs": [...]}``): a list,
  or a method ``rbac_rules(self, config)`` when they depend on the configuration.
  ``overseer rbac`` prints the ClusterRole of the enabled controllers from them. A rule
  with ``"namespaces": ["a", ...]`` is granted in those namespaces only (a Role in
  each). The test kit runs a plugin as a ServiceAccount bound to exactly these rules.

Names: an entry point's name; for ``--plugin [NAME=]FILE.py:ATTR`` or
``--plugin [NAME=]MODULE:ATTR`` the NAME given, else ATTR in lower case without a
trailing ``Plugin`` (``TeamInfoPlugin`` → ``teaminfo``). A name is lower-case letters,
digits, ``-`` and ``_``. A ``--plugin`` whose name an installed plugin already has is an
error, unless it names the very same object.

Discovery (:func:`discover`) reads entry points without importing them, sorted by name;
:func:`load` imports one and reports a failure with its distribution and the error;
:func:`load_plugins` does both, plus the ``--plugin`` specs.

Thread-safe: discovery and loading happen once, at start-up.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import logging
import os
import re
import sys
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from manager.errors import PluginLoadError, PluginSetupError
from manager.reconcile import Reconciler
from manager.workqueue import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
)

if TYPE_CHECKING:
    from manager.cache.lister import Lister
    from manager.fleet.controller import ReconcilerFactory
    from manager.manager import ControllerBuilder, Manager
    from manager.resources import Resource
    from manager.served import WhenServed
    from manager.webhook import Conversion, MutatingWebhook, ValidatingWebhook

__all__ = [
    "ENTRY_POINT_GROUP",
    "SPEC_DISTRIBUTION",
    "ControllerPlugin",
    "ControllerSettings",
    "NoSettings",
    "PluginContext",
    "PluginInfo",
    "PluginSet",
    "RateLimiterSettings",
    "RbacRule",
    "config_class_of",
    "declared_rbac_rules",
    "discover",
    "load",
    "load_path",
    "load_plugins",
    "parse_spec",
    "setup_plugins",
]

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "overseer.controllers"
SPEC_DISTRIBUTION = "(--plugin)"  # PluginInfo.distribution of a plugin named by --plugin

C = TypeVar("C")
RbacRule = dict[str, list[str]]  # one PolicyRule: apiGroups, resources, verbs, ...

_NAME = re.compile(r"^[a-z0-9]([a-z0-9_-]*[a-z0-9])?$")
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")  # a DNS-1123 label


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
    sharded: bool = dataclasses.field(
        default=False,
        metadata={
            "help": "run on every replica, each for its share of the keys (see sharding); "
            "else only in the leader"
        },
    )
    fleet: bool = dataclasses.field(
        default=False,
        metadata={
            "help": "run in every cluster of the fleet (see clusters), each cluster's keys "
            "with their own queue, workers and backoff; else in the home cluster only"
        },
    )

    def validate(self) -> list[str]:
        return []


@dataclass(frozen=True, slots=True)
class PluginContext(Generic[C]):
    """What a plugin's ``setup`` receives besides the manager."""

    name: str  # the controller name (entry point name, config section)
    config: C  # the plugin's own validated settings
    settings: ControllerSettings
    manager: Manager

    def controller(self, reconciler: Reconciler | ReconcilerFactory) -> ControllerBuilder:
        """A controller builder named after the plugin, with its workers, rate limiter,
        ``sharded`` and ``fleet`` settings. ``reconciler`` may be a factory
        ``reconciler(cluster)``: fleet-wide (``fleet: true``) it is called for every engaged
        cluster, otherwise once with the manager's own cluster (:meth:`Manager.controller
        <manager.manager.Manager.controller>`): such a plugin runs either way unchanged."""
        fleet = self.settings.fleet
        return self.manager.controller(
            self.name,
            reconciler,
            workers=self.settings.workers,
            rate_limiter=None if fleet else self.settings.rate_limiter.build(),
            sharded=self.settings.sharded,
            fleet=fleet,
            rate_limiters=self.settings.rate_limiter.build if fleet else None,
        )

    def lister(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        shard: str | None = None,
    ) -> Lister:
        """A lister of this controller's caches, sharded or not: ``shard="primary"`` reads
        the cache its ``for_()`` fills, ``shard="owned"`` the one its ``owns()`` fills
        (with the same namespace and selectors). Sharded (``sharded: true``), those hold
        this replica's share; otherwise they are the whole caches, the same ``for_()`` and
        ``owns()`` use then. ``shard=None`` is a plain :meth:`Manager.lister` (the whole
        resource). Write a plugin with these and it runs sharded or not unchanged.

        Raises:
            ValueError: ``shard`` is none of None, "primary", "owned".
        """
        if shard not in (None, "primary", "owned"):
            raise ValueError(f"shard must be None, 'primary' or 'owned', got {shard!r}")
        return self.manager.lister(
            resource,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            shard=shard if self.settings.sharded else None,
        )

    def when_served(self, names: str | Sequence[str], wire: Callable[..., None]) -> WhenServed:
        """Call ``wire(*resources)`` once the custom resources ``names`` are served (a
        CRD installed after the manager starts is waited for; the replica is not ready
        until then): :meth:`Manager.when_served <manager.manager.Manager.when_served>`
        under this controller's name."""
        return self.manager.when_served(names, wire, name=self.name)

    def webhook(self, hook: ValidatingWebhook | MutatingWebhook) -> None:
        """Serve an admission webhook on every replica (:meth:`Manager.webhook
        <manager.manager.Manager.webhook>`, declared by this controller).

        Raises:
            InvalidWebhook: another declaration has its name or path.
        """
        self.manager.webhook(hook, owner=self.name)

    def conversion(self, conversion: Conversion) -> None:
        """Serve a CRD's conversion webhook on every replica (:meth:`Manager.webhook
        <manager.manager.Manager.webhook>`, declared by this controller).

        Raises:
            InvalidWebhook: another declaration converts that CRD or has its path.
        """
        self.manager.webhook(conversion, owner=self.name)


class ControllerPlugin(Protocol):
    """What an ``overseer.controllers`` entry point provides (``config_class`` and
    ``rbac_rules`` are optional: see the module's documentation)."""

    def setup(self, mgr: Manager, ctx: PluginContext[Any]) -> None:
        """Wire the plugin's controllers into ``mgr`` (before the manager runs)."""
        ...


@dataclass(frozen=True, slots=True)
class PluginInfo:
    """A discovered entry point (or a ``--plugin`` spec), not imported yet."""

    name: str
    value: str  # "module:attr" or "path/to/file.py:attr"
    distribution: str  # SPEC_DISTRIBUTION for a --plugin
    version: str
    entry_point: metadata.EntryPoint | None = None

    @property
    def from_spec(self) -> bool:
        """Named by ``--plugin`` rather than installed."""
        return self.distribution == SPEC_DISTRIBUTION


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


def parse_spec(spec: str) -> PluginInfo:
    """A ``--plugin`` value: ``[NAME=]FILE.py:ATTR`` or ``[NAME=]MODULE:ATTR``.

    Raises:
        PluginLoadError: not of that form, or no usable name.
    """
    name, sep, target = spec.partition("=")
    if not sep or "/" in name or ":" in name:
        name, target = "", spec
    where, colon, attr = target.rpartition(":")
    if not colon or not where or not attr or not all(p.isidentifier() for p in attr.split(".")):
        raise PluginLoadError(
            f"--plugin {spec}: expected [NAME=]path/to/file.py:Class or [NAME=]module:Class"
        )
    if not name:
        name = attr.rpartition(".")[2].removesuffix("Plugin").lower()
    if not _NAME.match(name):
        raise PluginLoadError(
            f"--plugin {spec}: {name!r} is not a controller name (lower-case letters, digits, "
            "'-', '_'): name it with --plugin NAME=..."
        )
    return PluginInfo(name, target, SPEC_DISTRIBUTION, "-")


@dataclass(frozen=True, kw_only=True, slots=True)
class NoSettings:
    """The settings of a plugin that declares no ``config_class``: none (its section
    takes the common keys only: ``enabled``, ``workers``, ``rateLimiter``, ...)."""


def config_class_of(plugin: Any) -> type[Any]:
    """The plugin's ``config_class``, or :class:`NoSettings` when it declares none."""
    found: type[Any] = getattr(plugin, "config_class", NoSettings)
    return found


def _instantiate(obj: Any, where: str) -> ControllerPlugin:
    plugin = obj() if callable(obj) else obj
    if not hasattr(plugin, "setup"):
        raise PluginLoadError(
            f"{where}: not a controller plugin (needs setup(mgr, ctx))",
            reason="not a controller plugin (needs setup(mgr, ctx))",
        )
    if not dataclasses.is_dataclass(config_class_of(plugin)):
        raise PluginLoadError(
            f"{where}: config_class must be a dataclass", reason="config_class must be a dataclass"
        )
    return plugin  # type: ignore[no-any-return]


def _is_file(target: str) -> bool:
    return target.endswith(".py") or "/" in target or os.sep in target


def load(info: PluginInfo) -> ControllerPlugin:
    """Import the plugin an entry point (or a ``--plugin`` spec) names.

    Raises:
        PluginLoadError: the import failed, or the object is not a plugin; the message
            names the controller, the distribution and the cause.
    """
    if info.from_spec:
        where = f"controller {info.name!r} (--plugin {info.value})"
    else:
        where = f"controller {info.name!r} from {info.distribution} {info.version} ({info.value})"
    try:
        if info.entry_point is not None:
            obj = info.entry_point.load()
        else:
            target, _, attr = info.value.rpartition(":")
            obj = _import_file(target, attr) if _is_file(target) else _import(target, attr)
    except PluginLoadError:
        raise
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}"
        raise PluginLoadError(f"{where} failed to load: {reason}", reason=reason) from exc
    return _instantiate(obj, where)


def _attribute(module: Any, attr: str) -> Any:
    for part in attr.split(".") if attr else []:
        module = getattr(module, part)
    return module


def _import(module_name: str, attr: str) -> Any:
    # `overseer run --plugin mymodule:Plugin` from mymodule's directory: the console
    # script has no current directory on sys.path (`python -m` has); append it, so an
    # installed module of the same name still wins
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)
    return _attribute(importlib.import_module(module_name), attr)


def _import_file(target: str, attr: str) -> Any:
    """Import ``target`` (a .py file) as the module named after its file, with its
    directory on sys.path (sibling modules import as when running ``python FILE``)."""
    path = Path(target).expanduser().resolve()
    if not path.is_file():
        raise PluginLoadError(
            f"--plugin {target}:{attr}: no such file: {path}", reason=f"no such file: {path}"
        )
    module_name = path.stem
    if not module_name.isidentifier():
        raise PluginLoadError(f"--plugin {target}:{attr}: {path.name} is not a module name")
    existing = sys.modules.get(module_name)
    if existing is not None:
        if Path(getattr(existing, "__file__", "") or "").resolve() == path:
            return _attribute(existing, attr)
        raise PluginLoadError(
            f"--plugin {target}:{attr}: a module named {module_name!r} is already imported "
            f"(from {getattr(existing, '__file__', None) or 'built-in'}): rename the file"
        )
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise PluginLoadError(f"--plugin {target}:{attr}: cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    directory = str(path.parent)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    # registered before it runs: dataclasses resolve annotations through sys.modules
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return _attribute(module, attr)


def load_path(name: str, value: str) -> ControllerPlugin:
    """Load a plugin from ``module:attr`` (or ``file.py:attr``) without an entry point.

    Raises:
        PluginLoadError: as :func:`load`.
    """
    return load(PluginInfo(name, value, SPEC_DISTRIBUTION, "-"))


@dataclass(slots=True)
class PluginSet:
    """The controllers a command works with: every installed entry point and every
    ``--plugin``, loaded; those that failed to load are in ``broken``."""

    infos: dict[str, PluginInfo] = dataclasses.field(default_factory=dict)
    plugins: dict[str, ControllerPlugin] = dataclasses.field(default_factory=dict)
    broken: dict[str, PluginLoadError] = dataclasses.field(default_factory=dict)

    @property
    def schemas(self) -> dict[str, type[Any]]:
        """Controller name → its ``config_class`` (loaded plugins only)."""
        return {name: config_class_of(p) for name, p in self.plugins.items()}


def load_plugins(specs: Sequence[str] = (), *, installed: bool = True) -> PluginSet:
    """Load every installed plugin (unless ``installed=False``) and each ``--plugin`` spec.

    An installed plugin that fails to load is kept in ``broken`` (whether that is fatal
    depends on the configuration); a ``--plugin`` that fails to load is an error.

    Raises:
        PluginLoadError: a bad spec, a spec that fails to load, two specs of one name,
            or a spec named like an installed plugin that is not the same object.
    """
    found = PluginSet()
    for info in discover() if installed else []:
        found.infos[info.name] = info
        try:
            found.plugins[info.name] = load(info)
        except PluginLoadError as exc:
            found.broken[info.name] = exc
    for spec in specs:
        info = parse_spec(spec)
        other = found.infos.get(info.name)
        if other is not None:
            if other.from_spec:
                raise PluginLoadError(
                    f"--plugin {spec}: another --plugin ({other.value}) is named {info.name!r}"
                )
            if other.value == info.value:
                continue  # the installed entry point names the same object
            raise PluginLoadError(
                f"--plugin {spec}: {info.name!r} is the name of an installed controller "
                f"({other.distribution} {other.version}, {other.value}): name this one "
                "differently (--plugin NAME=...) or uninstall the other"
            )
        found.infos[info.name] = info
        found.plugins[info.name] = load(info)
    found.infos = dict(sorted(found.infos.items()))
    return found


def setup_plugins(
    mgr: Manager,
    plugins: Mapping[str, ControllerPlugin],
    controllers: Mapping[str, tuple[ControllerSettings, Any]],
) -> list[str]:
    """Call ``setup`` of every enabled controller, in name order; returns their names.

    Raises:
        PluginSetupError: a ``setup`` raised (the controller's name, the cause chained).
    """
    enabled = []
    for name, (settings, own) in sorted(controllers.items()):
        if not settings.enabled:
            continue
        try:
            plugins[name].setup(mgr, PluginContext(name, own, settings, mgr))
        except Exception as exc:
            raise PluginSetupError(name, exc) from exc
        enabled.append(name)
    return enabled


def declared_rbac_rules(name: str, plugin: ControllerPlugin, config: Any) -> list[RbacRule] | None:
    """The plugin's ``rbac_rules`` for ``config`` (None when it declares none).

    Raises:
        PluginLoadError: ``rbac_rules`` raised, or is not a list of PolicyRules.
    """
    declared = getattr(plugin, "rbac_rules", None)
    if declared is None:
        return None
    try:
        rules = declared(config) if callable(declared) else declared
        out = []
        for rule in rules:
            if not isinstance(rule, Mapping) or not rule.get("verbs"):
                raise ValueError(f"{rule!r} is not a PolicyRule (apiGroups, resources, verbs)")
            entry: RbacRule = {}
            for key, values in rule.items():
                if isinstance(values, str) or not all(isinstance(v, str) for v in values):
                    raise ValueError(f"{key}: expected a list of strings, got {values!r}")
                bad = [v for v in values if key == "namespaces" and not _NAMESPACE.match(v)]
                if bad:
                    raise ValueError(f"namespaces: {bad[0]!r} is not a namespace name")
                entry[str(key)] = list(values)
            out.append(entry)
    except Exception as exc:
        raise PluginLoadError(
            f"controllers.{name}: rbac_rules: {type(exc).__name__}: {exc}"
        ) from exc
    return out

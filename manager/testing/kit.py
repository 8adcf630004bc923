"""Test kit for controller plugins: run a manager inside a test, wait for what it does,
check a configuration section exactly as ``overseer`` does.

* :func:`run_manager` / :func:`run_plugin`: a context manager that runs a
  :class:`~manager.manager.Manager` with the given plugins and configuration in a
  thread, against an API server named by a kubeconfig (the local one, or a real
  cluster), the way ``overseer run`` would: the same strict loader, the same options,
  ``setup`` of each enabled controller. It returns once the caches have synced, the
  controllers run and the webhooks (if any) are served (with managed certificates: the
  leader's certificate, verified by its bundle); on exit it stops the manager gracefully
  and joins every thread it started. If the manager stopped or failed on its own
  meanwhile, the exit raises :class:`ManagerFailed` with the cause. Metrics and probes
  are off unless asked for, and then on 127.0.0.1 with free ports; leader election is
  off unless the configuration turns it on. The manager runs as a ServiceAccount bound
  to exactly what ``overseer rbac`` generates for the configuration (``rbac=False``: as
  the kubeconfig's user), so a rule a plugin forgot to declare fails its test with
  kube's 403 Forbidden, as it would fail on a cluster; a cache that cannot sync for a
  403 fails the start at once, naming the refused request. Fleet-wide (``fleet={name:
  kubeconfig, ...}``): those clusters are the fleet's (``clusters.kubeconfigs``), the
  plugin runs with ``fleet: true``, and the run starts once every one of them is ready
  and the fleet-wide controllers' keys run in each.
* :func:`eventually`: poll a check until it holds, bounded; the failure says what was
  awaited and what was last seen.
* :func:`validate_section`: a plugin's section (``controllers.<name>``) through the
  loader, with the loader's messages and paths.

The pytest plugin (:mod:`manager.testing.pytest_plugin`) adds fixtures for the API
server, a client and a namespace per test.

Thread-safe: each call works on its own objects; a running manager is used from the
test's thread only.
"""

from __future__ import annotations

import ast
import base64
import contextlib
import dataclasses
import inspect
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, TypeVar

import yaml

from manager.client import ClientOptions, KubeClient
from manager.config import OverseerConfig, load_config, manager_options
from manager.errors import ConfigError, NotFound, OverseerError, RbacRefusal
from manager.fleet.controller import FleetController
from manager.keys import JsonDict
from manager.manager import Manager
from manager.plugins import (
    ControllerPlugin,
    ControllerSettings,
    PluginInfo,
    PluginSet,
    declared_rbac_rules,
    load_path,
    parse_spec,
    setup_plugins,
)
from manager.rbac import for_controllers as rbac_for_controllers
from manager.resources import UnknownResource
from manager.testing.serviceaccount import bound_service_account
from manager.webhook.conversion import Conversion
from manager.zpages import flag_values

__all__ = [
    "ManagerFailed",
    "PluginLike",
    "RunningManager",
    "eventually",
    "plugin_name",
    "run_manager",
    "run_plugin",
    "validate_section",
]

T = TypeVar("T")

# a plugin object, its class or factory, or "module:attr" / "path/to/file.py:attr"
PluginLike = ControllerPlugin | type | Callable[[], Any] | str

# what a test manager differs in from `overseer run`'s defaults (the file may override)
_TEST_DEFAULTS: dict[str, Any] = {
    "leaderElection": {"enabled": False},
    "metrics": {"secure": False},  # plain HTTP on loopback unless the test's config asks
    "gracefulShutdownTimeout": 10.0,
    "cacheSyncTimeout": 30.0,
    "webhooks": {"shutdownDelay": 0.0},  # no Service to leave: stop at once
    # a sharded controller starts keys after watching the ring for a lease duration:
    # 2 s rather than 15 (a test's own sharding settings win)
    "sharding": {"leaseDuration": 2.0, "renewDeadline": 1.5, "retryPeriod": 0.3},
}
_LOOPBACK = "127.0.0.1:0"
_MOVED: Any = object()  # the default of the retired ``namespace`` keyword
# seconds a list/watch may be refused (403) before a starting manager is failed: RBAC
# objects made just before take a moment to reach a real API server's authorizer
_FORBIDDEN_GRACE = 3.0


class ManagerFailed(OverseerError, AssertionError):
    """The manager under test stopped by itself (an exception, lost leadership, caches
    that never synced) or did not stop cleanly. An AssertionError, so that pytest
    reports it as a test failure."""


@dataclasses.dataclass(frozen=True, slots=True)
class RunningManager:
    """A manager run by :func:`run_manager`."""

    manager: Manager
    config: OverseerConfig  # the validated file
    controllers: Mapping[str, tuple[ControllerSettings, Any]]  # per controller, as loaded

    @property
    def client(self) -> KubeClient:
        """The manager's own client (closed when the manager stops)."""
        return self.manager.client

    @property
    def metrics_url(self) -> str | None:
        """``http://127.0.0.1:PORT/metrics`` when metrics are on (``https`` when the
        config's ``metrics.secure`` is true)."""
        address = self.manager.metrics_address
        if address is None:
            return None
        return f"{self.manager.metrics_scheme}://{address[0]}:{address[1]}/metrics"

    @property
    def probes_url(self) -> str | None:
        """``http://127.0.0.1:PORT`` (``/healthz``, ``/readyz``) when probes are on."""
        address = self.manager.health_probe_address
        return None if address is None else f"http://{address[0]}:{address[1]}"

    @property
    def webhook_url(self) -> str | None:
        """``https://127.0.0.1:PORT`` while a plugin's webhooks are served (their paths:
        ``/validate/<name>``, ``/mutate/<name>``, ``/convert/<crd>``), else None."""
        return self.manager.webhooks.url

    @property
    def webhook_ca(self) -> str:
        """What to trust (a ``caBundle``, PEM): the managed certificates' CA bundle with
        ``webhooks.certificates: managed``, else the server's certificate (self-signed
        unless the configuration names a ``webhooks.certDir``)."""
        certificates = self.manager.certificates
        if certificates is not None:
            return certificates.certificate.bundle_pem
        return self.manager.webhooks.certificate.certificate_pem


def _refuse_namespace(namespace: object) -> None:
    if namespace is not _MOVED:
        raise TypeError(
            f"namespace={namespace!r} is now watch_namespace=: it makes the manager watch "
            "only that namespace (objects a controller makes elsewhere are never seen "
            "again). Pass watch_namespace= for that, or leave it out to watch every "
            "namespace"
        )


def plugin_name(plugin: PluginLike) -> str:
    """The name ``--plugin`` would give ``plugin``: its class (or attribute) name in lower
    case without a trailing ``Plugin`` (``TeamInfoPlugin`` → ``teaminfo``)."""
    if isinstance(plugin, str):
        return parse_spec(plugin).name
    obj = plugin if isinstance(plugin, type) or inspect.isfunction(plugin) else type(plugin)
    return parse_spec(f"x:{obj.__name__}").name


def _plugin(name: str, plugin: PluginLike) -> ControllerPlugin:
    if isinstance(plugin, str):
        return load_path(name, plugin)
    if isinstance(plugin, type) or inspect.isfunction(plugin):
        plugin = plugin()
    if not hasattr(plugin, "setup"):
        raise TypeError(f"{name}: {plugin!r} is not a controller plugin (no setup)")
    return plugin  # type: ignore[return-value]


def _document(config: Mapping[str, Any] | str | None) -> dict[str, Any]:
    doc = yaml.safe_load(config) if isinstance(config, str) else config
    if doc is None:
        return {}
    if not isinstance(doc, Mapping):
        raise ConfigError([f"<test config>: expected a mapping at the top level, got {doc!r}"])
    return dict(doc)


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def validate_section(
    plugin: PluginLike,
    section: Mapping[str, Any] | str | None = None,
    *,
    name: str | None = None,
) -> tuple[ControllerSettings, Any]:
    """Load ``section`` as ``controllers.<name>`` of a configuration file: the strict
    loader ``overseer config validate`` uses, with its messages and paths.

    Args:
        plugin: the plugin (object, class, or ``module:attr`` / ``file.py:attr``).
        section: the section as YAML text or a mapping (camelCase keys, as in the file).
        name: the controller's name (default: :func:`plugin_name`).

    Returns:
        The common settings (``enabled``, ``workers``, ``rateLimiter``) and the plugin's
        own ``config_class`` instance.

    Raises:
        ConfigError: ``problems`` lists every error, e.g.
            ``controllers.teaminfo.workers: expected integer >= 1 and <= 256, got 0``.
    """
    name = name or plugin_name(plugin)
    body = yaml.safe_load(section) if isinstance(section, str) else section
    loaded = _plugin(name, plugin)
    plugins = PluginSet({name: PluginInfo(name, "", "(test)", "-")}, {name: loaded})
    _, controllers, _ = load_config({"controllers": {name: body}}, plugins, source="<test>")
    return controllers[name]


@contextlib.contextmanager
def run_manager(
    kubeconfig: str | os.PathLike[str],
    plugins: Mapping[str, PluginLike],
    config: Mapping[str, Any] | str | None = None,
    *,
    watch_namespace: str | None = None,
    metrics: bool = False,
    probes: bool = False,
    timeout: float = 30.0,
    rbac: bool = True,
    register_webhooks: bool | None = None,
    fleet: Mapping[str, str | os.PathLike[str]] | None = None,
    namespace: object = _MOVED,
) -> Iterator[RunningManager]:
    """Run a manager with ``plugins`` (controller name → plugin) in a thread.

    By default the manager runs as a ServiceAccount bound to exactly what ``overseer
    rbac`` generates for this configuration (the ClusterRole of the controllers'
    ``rbac_rules``, their namespaced Roles, the framework's own rules), made for the
    run and deleted after it: a request a rule is missing for is refused with kube's
    403 (``secrets is forbidden: User "system:serviceaccount:..." cannot list
    resource "secrets" ...``), in the test as on a cluster. The kit's local API server
    enforces RBAC; so does a real cluster.

    Args:
        kubeconfig: the API server (the ``kubeconfig_path`` fixture).
        plugins: the controllers to run, by name; installed plugins are not loaded.
        config: the configuration file as YAML text or a mapping, validated exactly as
            ``overseer`` validates it (sections under ``controllers:``). Test defaults
            under it: leader election off, a 10 s graceful stop, no webhook shutdown
            delay; its bind addresses are replaced (``metrics`` and ``probes`` decide;
            webhooks, when a plugin declares some, on 127.0.0.1 and a free port:
            :attr:`RunningManager.webhook_url`).
        watch_namespace: the manager watches (caches, reconciles) namespaced resources
            in this namespace only (``watchNamespace``): what a controller writes
            elsewhere it never sees again, and a lister refuses reads elsewhere. Leave
            it out for a controller that works across namespaces.
        namespace: no longer accepted (a TypeError saying so): it silently meant
            ``watch_namespace``.
        metrics: serve ``/metrics`` on 127.0.0.1, a free port (:attr:`RunningManager.
            metrics_url`).
        probes: serve ``/healthz`` and ``/readyz`` the same way.
        timeout: seconds for the caches to sync and the controllers to start, and
            again for the manager to stop.
        rbac: run as that ServiceAccount (default); False: with the credentials of
            ``kubeconfig`` (an admin's, in the kit).
        register_webhooks: install the plugins' webhook configurations (and their CRD
            conversions) in the API server, calling this run's webhook server by URL
            and trusting its certificate, for the run; deleted (and the CRDs' conversion
            put back) on exit. Default: when ``watch_namespace`` is given, scoped to it
            (a ``namespaceSelector`` on its name is added to each webhook's); True
            without it installs them as declared, for the whole cluster.
        fleet: member clusters by name → kubeconfig (the ``local_servers`` fixture's, say):
            added to ``clusters.kubeconfigs``. The run starts once every cluster of the
            fleet it knows of (these, the file's ``clusters.kubeconfigs`` and home) is
            ready and every fleet-wide controller's keys run in it. The manager's RBAC
            is in the home cluster (``kubeconfig``); in the members it acts with their
            kubeconfigs' credentials.

    Raises:
        ConfigError: the configuration does not validate (every problem, with its path),
            or the RBAC objects cannot be made (e.g. a namespaced rule's namespace does
            not exist).
        PluginSetupError: a plugin's ``setup`` raised.
        ManagerFailed: the manager stopped or failed by itself, did not start in time,
            or did not stop cleanly.
    """
    _refuse_namespace(namespace)
    loaded = PluginSet()
    for name, plugin in plugins.items():
        loaded.infos[name] = PluginInfo(name, "", "(test)", "-")
        loaded.plugins[name] = _plugin(name, plugin)
    doc = _merge(_TEST_DEFAULTS, _document(config))
    if watch_namespace is not None:
        doc["watchNamespace"] = watch_namespace
    # never a fixed port (a deploy config's ":8080"): off, or loopback and a free port
    doc["metricsBindAddress"] = _LOOPBACK if metrics else "0"
    doc["healthProbeBindAddress"] = _LOOPBACK if probes else "0"
    doc["webhooks"] = {**(doc.get("webhooks") or {}), "host": "127.0.0.1", "port": 0}
    if fleet:
        clusters = dict(doc.get("clusters") or {})
        clusters["kubeconfigs"] = [
            *(clusters.get("kubeconfigs") or []),
            *({"name": name, "path": os.fspath(path)} for name, path in fleet.items()),
        ]
        doc["clusters"] = clusters
    settings, controllers, _ = load_config(doc, loaded, source="<test config>")
    with contextlib.ExitStack() as stack:
        manager_kubeconfig = os.fspath(kubeconfig)
        if rbac:
            manager_kubeconfig = os.fspath(
                stack.enter_context(_service_account(kubeconfig, loaded, settings, controllers))
            )
        with _running(
            manager_kubeconfig, loaded, settings, controllers, timeout, rbac=rbac
        ) as running:
            register = watch_namespace is not None
            if register_webhooks is not None:
                register = register_webhooks
            # installed after the server serves, removed before it stops
            with contextlib.ExitStack() as webhooks:
                if register and running.webhook_url is not None:
                    webhooks.enter_context(_registered(kubeconfig, running, watch_namespace))
                yield running


KIT_LABEL: Final = "overseer.io/test-kit"


@contextlib.contextmanager
def _registered(
    kubeconfig: str | os.PathLike[str], running: RunningManager, namespace: str | None
) -> Iterator[None]:
    """The running manager's webhooks installed in the API server, by URL (the kit's
    server on 127.0.0.1, its certificate as the caBundle), scoped to ``namespace``; its
    conversions patched into their CRDs (those that exist). Undone on exit."""
    from manager.resources import builtin

    url, declared = running.webhook_url, running.manager.webhooks.declarations()
    assert url is not None
    bundle = base64.b64encode(running.webhook_ca.encode()).decode()
    name = f"ovs-kit-{uuid.uuid4().hex[:8]}"
    made: list[tuple[Any, str]] = []
    patched: list[tuple[Any, str, Any]] = []
    crds = builtin("CustomResourceDefinition")
    with KubeClient.from_kubeconfig(os.fspath(kubeconfig)) as admin:
        try:
            for kind, mutating in (
                ("ValidatingWebhookConfiguration", False),
                ("MutatingWebhookConfiguration", True),
            ):
                hooks = [
                    _scoped(h.entry({"url": url + h.served_path, "caBundle": bundle}), namespace)
                    for h, _ in declared
                    if not isinstance(h, Conversion) and h.mutating is mutating
                ]
                if hooks:
                    resource = builtin(kind)
                    body = {"metadata": {"name": name, "labels": {KIT_LABEL: "true"}}}
                    admin.create(resource, {**body, "webhooks": hooks})
                    made.append((resource, name))
            for h, _ in declared:
                if isinstance(h, Conversion):
                    try:
                        crd = admin.get(crds, h.crd)
                    except NotFound:
                        continue  # made later by the test: nothing to convert yet
                    before = crd["spec"].get("conversion") or {"strategy": "None"}
                    config = h.client_config({"url": url + h.served_path, "caBundle": bundle})
                    admin.patch(crds, h.crd, {"spec": {"conversion": config}})
                    patched.append((crds, h.crd, before))
            yield
        finally:
            for resource, made_name in made:
                with contextlib.suppress(NotFound):
                    admin.delete(resource, made_name)
            for resource, crd_name, before in patched:
                with contextlib.suppress(NotFound):
                    admin.patch(
                        resource,
                        crd_name,
                        [{"op": "replace", "path": "/spec/conversion", "value": before}],
                        patch_type="json",
                    )


def _scoped(entry: JsonDict, namespace: str | None) -> JsonDict:
    """``entry`` calling only for objects of ``namespace`` (and cluster-scoped ones)."""
    if namespace is None:
        return entry
    selector = dict(entry.get("namespaceSelector") or {})
    name = {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [namespace]}
    selector["matchExpressions"] = [*(selector.get("matchExpressions") or []), name]
    return {**entry, "namespaceSelector": selector}


def _service_account(
    kubeconfig: str | os.PathLike[str],
    loaded: PluginSet,
    settings: OverseerConfig,
    controllers: Mapping[str, tuple[ControllerSettings, Any]],
) -> contextlib.AbstractContextManager[os.PathLike[str]]:
    """A ServiceAccount bound to what ``overseer rbac`` prints for this configuration."""
    name = f"ovs-kit-{uuid.uuid4().hex[:8]}"
    le = settings.leader_election
    sharded = any(s.enabled and s.sharded for s, _ in controllers.values())
    # the account lives where the manager's Leases are (its Roles go there), else in a
    # namespace of its own
    namespace = name
    if le.enabled or sharded:
        namespace = le.namespace or os.environ.get("POD_NAMESPACE", "") or "default"
    webhooks = None
    if settings.webhooks.certificates == "managed":
        from manager.webhook.manifests import declared_webhooks

        webhooks = declared_webhooks(loaded.plugins, settings, controllers)
    text, _ = rbac_for_controllers(
        loaded.plugins, settings, controllers, name=name, namespace=namespace, webhooks=webhooks
    )
    return bound_service_account(kubeconfig, text, namespace=namespace, name=name)


@contextlib.contextmanager
def _running(
    kubeconfig: str,
    loaded: PluginSet,
    settings: OverseerConfig,
    controllers: Mapping[str, tuple[ControllerSettings, Any]],
    timeout: float,
    *,
    rbac: bool,
) -> Iterator[RunningManager]:
    client = KubeClient.from_kubeconfig(
        kubeconfig,
        options=ClientOptions(
            qps=settings.client.qps, burst=settings.client.burst, timeout=settings.client.timeout
        ),
    )
    try:
        mgr = Manager(
            client,
            manager_options(settings, controllers),
            flags=flag_values(settings, dict(controllers)),
        )
        setup_plugins(mgr, loaded.plugins, controllers)
    except BaseException:
        client.close()
        raise
    declared = tuple(
        (name, tuple(declared_rbac_rules(name, loaded.plugins[name], own) or ()))
        for name, (settings_of, own) in sorted(controllers.items())
        if settings_of.enabled
    )
    watched = _Watched(mgr, declared, rbac)
    runner = _Runner(mgr)
    try:
        runner.wait_started(timeout)
        with _ACTIVE_LOCK:
            _ACTIVE.append(watched)
        yield RunningManager(mgr, settings, controllers)
    except BaseException as exc:
        runner.stop(timeout)
        client.close()
        if not isinstance(exc, ManagerFailed):
            # a manager that failed is the likelier cause of what failed in the test
            runner.raise_failure()
        raise
    finally:
        with _ACTIVE_LOCK:
            if watched in _ACTIVE:
                _ACTIVE.remove(watched)
    runner.stop(timeout)
    client.close()
    runner.raise_failure()


@contextlib.contextmanager
def run_plugin(
    plugin: PluginLike,
    kubeconfig: str | os.PathLike[str],
    section: Mapping[str, Any] | str | None = None,
    *,
    name: str | None = None,
    config: Mapping[str, Any] | str | None = None,
    watch_namespace: str | None = None,
    metrics: bool = False,
    probes: bool = False,
    timeout: float = 30.0,
    rbac: bool = True,
    register_webhooks: bool | None = None,
    fleet: Mapping[str, str | os.PathLike[str]] | None = None,
    namespace: object = _MOVED,
) -> Iterator[RunningManager]:
    """:func:`run_manager` with one plugin, configured by its own ``section``
    (``controllers.<name>`` of the file: ``workers``, the plugin's settings, ...);
    ``config`` holds the rest of the file. ``name`` defaults to :func:`plugin_name`.
    With ``fleet`` (member clusters by name → kubeconfig) the plugin runs fleet-wide
    (``fleet: true`` in its section) in those clusters (see :func:`run_manager`)."""
    _refuse_namespace(namespace)
    name = name or plugin_name(plugin)
    body = yaml.safe_load(section) if isinstance(section, str) else section
    doc = _document(config)
    body = dict(body or {})
    if fleet:
        body.setdefault("fleet", True)
    doc["controllers"] = {**(doc.get("controllers") or {}), name: body}
    with run_manager(
        kubeconfig,
        {name: plugin},
        doc,
        watch_namespace=watch_namespace,
        metrics=metrics,
        probes=probes,
        timeout=timeout,
        rbac=rbac,
        register_webhooks=register_webhooks,
        fleet=fleet,
    ) as running:
        yield running


@dataclasses.dataclass(frozen=True)
class _Watched:
    """A manager the kit runs, and the rules its plugins declare (for the message)."""

    mgr: Manager
    declared: tuple[tuple[str, tuple[Mapping[str, Any], ...]], ...]  # (plugin, rules)
    rbac: bool


_ACTIVE_LOCK = threading.Lock()
_ACTIVE: list[_Watched] = []


def _covers(rule: Mapping[str, Any], refusal: RbacRefusal) -> bool:
    def has(key: str, value: str) -> bool:
        values = rule.get(key) or []
        return "*" in values or value in values

    namespaces = rule.get("namespaces")
    in_scope = not namespaces or refusal.namespace in namespaces
    return (
        has("apiGroups", refusal.group)
        and has("resources", refusal.resource)
        and has("verbs", refusal.verb)
        and in_scope
    )


def _refused_reconcile() -> str | None:
    """What a kit-run manager's reconcile was refused by RBAC, with the rule that would
    allow it and whether a plugin declares it; None while nothing was. A reconcile
    refused for a missing rule is retried with backoff and never succeeds: a test
    waiting for its effect fails now, saying why, not at its timeout."""
    with _ACTIVE_LOCK:
        watched = list(_ACTIVE)
    for run in watched:
        with run.mgr._wiring:
            controllers = [c for c, _ in run.mgr._controllers]
        for controller in controllers:
            last = controller.last_refusal
            refusal = None if last is None else last[1].refusal
            if last is None or refusal is None:
                continue
            request, error = last
            declaring = [
                name for name, rules in run.declared if any(_covers(r, refusal) for r in rules)
            ]
            scope = f' (namespaces: ["{refusal.namespace}"])' if refusal.namespace else ""
            if declaring:
                why = (
                    f"controllers {', '.join(declaring)} declare it and `overseer rbac` "
                    "generates it: something else narrows it (a Role in other namespaces?)"
                )
            else:
                why = (
                    "no plugin declares it, so `overseer rbac` does not generate it: add it "
                    "to the plugin's rbac_rules"
                    + (
                        " (this run is under the test's own credentials: rbac=False)"
                        if not run.rbac
                        else ""
                    )
                )
            return (
                f"controller {controller.name!r}: a reconcile of {request.key} was refused by "
                f"RBAC: it may not {refusal.describe()} ({error.message}). The rule that "
                f"would allow it: {json.dumps(refusal.rule)}{scope}; {why}"
            )
    return None


class _Runner:
    """``Manager.run`` in a thread, with its outcome kept for the test."""

    def __init__(self, mgr: Manager) -> None:
        self.mgr = mgr
        self.stop_event = threading.Event()
        self.rc: int | None = None
        self.error: BaseException | None = None
        self.problem: str | None = None
        self.stopped = False
        self.thread = threading.Thread(target=self._run, name="test/manager")
        self.thread.start()

    def _run(self) -> None:
        try:
            self.rc = self.mgr.run(self.stop_event)
        except BaseException as exc:
            self.error = exc

    def _failed(self) -> str | None:
        if self.error is not None:
            return f"the manager failed: {type(self.error).__name__}: {self.error}"
        if not self.thread.is_alive() and not self.stop_event.is_set():
            return f"the manager stopped by itself with {self.rc} (see the log)"
        return None

    def _started(self) -> bool:
        informers = self.mgr.factory.informers()
        return (
            self.mgr.is_leader()
            and all(i.has_synced() for i in informers)
            # webhooks: serving (with managed certificates: the leader's certificate)
            and self.mgr.webhooks.ready_reason() is None
            and not self._fleet_pending()
        )

    def _fleet_pending(self) -> list[str]:
        """The clusters of the fleet not ready yet, or in which a fleet-wide controller's
        keys do not run yet: every configured one (``clusters.kubeconfigs``, home) and
        every one a provider reported."""
        mgr = self.mgr
        fleet = mgr._fleet
        if fleet is None:
            return []
        options = mgr.options.fleet
        expected = set(fleet.known())
        if options is not None:
            expected.update(k.name for k in options.kubeconfigs)
            if options.home:
                expected.add(options.home)
        reasons = fleet.ready_reasons()
        ready = set(fleet.clusters())
        pending = [
            f"{name} ({reasons.get(f'cluster/{name}') or 'not reported yet'})"
            for name in sorted(expected - ready)
        ]
        with mgr._wiring:
            controllers = [c for c, _ in mgr._controllers if isinstance(c, FleetController)]
        for controller in controllers:
            running = set(controller.clusters())
            pending += [
                f"{name} (keys of {controller.name} not started)"
                for name in sorted((expected & ready) - running)
            ]
        return pending

    def wait_started(self, timeout: float) -> None:
        start = time.monotonic()
        deadline = start + timeout
        while not self._started():
            failure = self._failed()
            informers = list(self.mgr.factory.informers())
            if self.mgr.certificates is not None:  # the certificate Secret's own watch
                informers.append(self.mgr.certificates.watcher.informer)
            forbidden = [
                f"{i.name}: {error}"
                for i in informers
                if not i.has_synced()
                and (error := getattr(i, "last_error", "")).startswith("Forbidden")
            ]
            if failure is None and forbidden and time.monotonic() > start + _FORBIDDEN_GRACE:
                # a missing RBAC rule: it will not appear by waiting longer
                failure = "the manager's caches cannot sync: " + "; ".join(forbidden)
            if failure is None and time.monotonic() > deadline:
                pending = [
                    f"{i.name} ({error})" if (error := getattr(i, "last_error", "")) else i.name
                    for i in self.mgr.factory.informers()
                    if not i.has_synced()
                ]
                failure = (
                    f"the manager did not start within {timeout} s "
                    f"(leading: {self.mgr.is_leader()}, not synced: {pending or 'none'}, "
                    f"webhooks: {self.mgr.webhooks.ready_reason() or 'ready'}, "
                    f"clusters: {self._fleet_pending() or 'ready'})"
                )
            if failure is not None:
                self.problem = failure
                self.stop(timeout)
                raise ManagerFailed(failure) from self.error
            time.sleep(0.01)

    def stop(self, timeout: float) -> None:
        """Stop the manager (once) and note what went wrong, if anything."""
        if self.stopped:
            return
        self.stopped = True
        failure = self.problem or self._failed()
        self.stop_event.set()
        self.thread.join(timeout)
        if failure is not None:
            self.problem = failure
        elif self.thread.is_alive():
            self.problem = f"the manager did not stop within {timeout} s"
        elif self.error is not None or self.rc != 0:
            self.problem = self._failed() or f"the manager stopped with {self.rc}"
        if self.thread.is_alive():
            return
        if self.rc != 0:
            # lost leadership leaves the informers to the process exit (``overseer run``
            # exits): a test process goes on, so they are shut down here
            self.mgr.events.shutdown(timeout=2.0)
            self.mgr.factory.shutdown(timeout=timeout)
        if not self.mgr.join(timeout) and self.problem is None:
            self.problem = f"the manager's threads did not end within {timeout} s"

    def raise_failure(self) -> None:
        if self.problem is not None:
            raise ManagerFailed(self.problem) from self.error


def _lambda_node(check: Callable[..., Any]) -> tuple[str, ast.Lambda] | None:
    """The lambda's own source text and tree: ``inspect.getsource`` gives the whole
    lines it is on (``eventually(lambda: a == b, timeout=3)``), so the longest piece
    from ``lambda`` on that parses as a lambda is it."""
    try:
        source = inspect.getsource(check)
    except (OSError, TypeError):
        return None
    start = source.find("lambda")
    if start < 0:
        return None
    text = source[start:]
    for end in range(len(text), 0, -1):
        if end < len(text) and text[end] not in ",)]}\n#;":
            continue
        candidate = text[:end]
        try:
            tree = ast.parse(candidate.strip(), mode="eval")
        except SyntaxError:
            continue
        if isinstance(tree.body, ast.Lambda):
            return " ".join(candidate.split()), tree.body
    return None


def _describe(check: Callable[..., Any]) -> str:
    name = getattr(check, "__name__", "") or repr(check)
    if name != "<lambda>":
        return name
    found = _lambda_node(check)
    return found[0] if found is not None else "a lambda"


def _compared(check: Callable[..., Any]) -> str:
    """For a lambda that is one comparison (``lambda: a == b``), its operands' values
    as pytest shows a failed ``assert a == b``: ``'x' == 'y'`` (evaluated once more,
    after the last try); "" for anything else."""
    found = getattr(check, "__name__", "") == "<lambda>" and _lambda_node(check)
    if not found:
        return ""
    body = found[1].body
    if not isinstance(body, ast.Compare) or len(body.ops) != 1 or found[1].args.args:
        return ""
    symbols = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">",
               ast.GtE: ">=", ast.In: "in", ast.NotIn: "not in", ast.Is: "is",
               ast.IsNot: "is not"}  # fmt: skip
    symbol = symbols.get(type(body.ops[0]))
    if symbol is None:
        return ""
    closure = inspect.getclosurevars(check)
    scope = {**check.__globals__, **closure.nonlocals}
    values = []
    for operand in (body.left, body.comparators[0]):
        try:
            value = eval(compile(ast.Expression(operand), "<eventually>", "eval"), scope)
        except Exception as exc:
            return f": {type(exc).__name__} evaluating {ast.unparse(operand)}"
        text = repr(value)
        values.append(text if len(text) <= 240 else text[:237] + "...")
    return f": {values[0]} {symbol} {values[1]}"


def _failed_wiring() -> str | None:
    """A ``when_served`` wiring of a kit-run manager that raised, with its error; None
    while none did. The controller it was to wire never runs."""
    with _ACTIVE_LOCK:
        watched = list(_ACTIVE)
    for run in watched:
        for waiter in run.mgr.waiters:
            reason = waiter.ready_reason()
            if reason is not None and reason.startswith("wiring failed"):
                return f"{waiter.name}: {reason} (the controller it wires never runs)"
    return None


def eventually(
    check: Callable[[], T],
    *,
    timeout: float = 10.0,
    interval: float = 0.05,
    what: str | None = None,
) -> T:
    """Call ``check`` until it returns a truthy value, and return that value.

    An ``AssertionError``, :class:`~manager.errors.NotFound` or
    :class:`~manager.resources.UnknownResource` from ``check`` counts as "not yet" (so a
    check may assert, and ``client.get`` of an object still to come, or
    ``client.resource`` of a CRD still to be served, is fine); any other exception is a
    failure at once. So is a reconcile of a kit-run manager refused by RBAC, and a
    ``when_served`` wiring that raised: what the check waits for will not happen. A check
    that asserts should end with ``return True``.

    Raises:
        AssertionError: ``timeout`` seconds passed: names ``what`` (default: the check's
            name or the lambda's source) and the last value or exception seen; for a
            lambda that is one comparison, the compared values too (``last returned
            False: 'v1' == 'v2'``).
    """
    deadline = time.monotonic() + timeout
    while True:
        last_error: BaseException | None = None
        try:
            value = check()
            if value:
                return value
            last = f"last returned {value!r}"
            if value is False and time.monotonic() >= deadline:
                last += _compared(check)
        except (AssertionError, NotFound, UnknownResource) as exc:
            last_error = exc
            last = f"last raised {type(exc).__name__}: {exc}"
        refused = _refused_reconcile() or _failed_wiring()
        if refused is not None:
            raise AssertionError(
                f"{what or _describe(check)}: will not happen: {refused}"
            ) from last_error
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"not within {timeout} s: {what or _describe(check)}; {last}"
            ) from last_error
        time.sleep(interval)

"""Wiring of the podport controller into a manager: the plugin and its two runnables.

The LogicalPort CRD may be missing when the manager starts (or be installed later), and a
manager whose informers do not sync gives up. So nothing that needs the CRD is wired at
setup. :class:`PortCache`, a runnable of every replica (warm standby), polls discovery
until ``logicalports.network.overseer.io`` is served (installing the CRD first when
``installCrd`` is set), then asks the manager for the LogicalPort informer — started at
once, the manager already runs — with the allocator as one of its handlers, and once it
has synced wires the controller through the ordinary builder (pods as the primary
resource, LogicalPorts mapped to their pod) and adds the :class:`SweeperRunner`. Both are
leader-only: they start when this replica leads (at once if it already does). Until the
cache has synced the readiness check ``podport-crd`` reports why.

Fleet-wide (``fleet: true``) each engaged cluster gets its own CRD, ports, allocator and
sweeper instead (:mod:`controllers.podport.fleet`).

Thread-safe: wiring happens in ``setup`` and in the port cache's thread (the manager's
``add`` is safe while it runs); each runnable runs in its own thread.
"""

from __future__ import annotations

import logging
import threading
from typing import Final

from controllers.podport.allocator import Allocator
from controllers.podport.config import PodPortConfig
from controllers.podport.crd import CRD_NAME, LOGICAL_PORTS, crd_served, install_crd
from controllers.podport.fleet import ClusterPorts
from controllers.podport.metrics import PORT_METRICS
from controllers.podport.rbac import rbac_rules
from controllers.podport.reconciler import (
    POD_BY_UID,
    PODS,
    PORT_BY_POD,
    PORT_BY_POD_UID,
    DeletedPods,
    PodPortReconciler,
    Scope,
    index_pod_uid,
    index_port_pod,
    index_port_pod_uid,
    requests_for_port,
)
from controllers.podport.sweeper import Sweeper
from manager import (
    ApiError,
    Cluster,
    Controller,
    Manager,
    PluginContext,
    Request,
    SharedInformer,
)

__all__ = ["PodPortPlugin", "PortCache", "SweeperRunner"]

logger = logging.getLogger(__name__)

CRD_POLL: Final = 2.0  # seconds between discovery checks while the CRD is missing
WAIT_STEP: Final = 0.05  # seconds between looks at a condition


class PortCache:
    """Waits for the CRD, runs the LogicalPort informer, then wires the controller and the
    sweeper (every replica; the controller and sweeper run only in the leader)."""

    name = "podport-ports"

    def __init__(
        self,
        mgr: Manager,
        ctx: PluginContext[PodPortConfig],
        *,
        scope: Scope,
        pods: SharedInformer,
        allocator: Allocator,
        deleted_pods: DeletedPods,
    ) -> None:
        self._mgr = mgr
        self._ctx = ctx
        self._config = ctx.config
        self._scope = scope
        self._pods = pods
        self._allocator = allocator
        self._deleted = deleted_pods
        self._reason: str | None = f"CRD {CRD_NAME} is not installed"
        self._lock = threading.Lock()
        self.informer: SharedInformer | None = None
        self.controller: Controller | None = None
        self.sweeper: Sweeper | None = None
        self.synced = threading.Event()

    def ready_reason(self) -> str | None:
        """The readiness check: None once the LogicalPort cache has synced."""
        with self._lock:
            return self._reason

    def _set_reason(self, reason: str | None) -> None:
        with self._lock:
            self._reason = reason

    def _may_start(self) -> bool:
        opts = self._mgr.options
        if opts.warm_standby or not opts.leader_election or self._ctx.settings.sharded:
            return True  # caches on every replica (a sharded controller works on every one)
        return self._mgr.is_leader()

    def run(self, stop: threading.Event) -> None:
        if not self._wait_for_crd(stop):
            return
        self._set_reason("LogicalPort cache not synced")
        informer = self._mgr.informer(
            LOGICAL_PORTS,
            indexers={PORT_BY_POD: index_port_pod, PORT_BY_POD_UID: index_port_pod_uid},
        )
        registration = informer.add_event_handler(self._allocator)
        self.informer = informer
        while not (informer.has_synced() and registration.has_synced()):
            if stop.wait(WAIT_STEP):
                return
        self._set_reason(None)
        self.synced.set()
        logger.info("LogicalPort cache synced", extra={"ports": len(informer.indexer)})
        self._wire(informer)
        try:
            stop.wait()
        finally:
            self._allocator.set_waker(None)
            PORT_METRICS.detach(self._allocator)

    def _wait_for_crd(self, stop: threading.Event) -> bool:
        client = self._mgr.client
        while not stop.is_set():
            if not self._may_start():
                stop.wait(WAIT_STEP * 10)
                continue
            try:
                served = crd_served(client)
                if not served and self._config.install_crd:
                    install_crd(client)
                    served = crd_served(client)
            except ApiError as exc:
                logger.warning("cannot check the LogicalPort CRD", extra={"error": str(exc)})
                self._set_reason(f"CRD {CRD_NAME}: cannot check: {exc}")
                stop.wait(CRD_POLL)
                continue
            if served:
                return True
            self._set_reason(f"CRD {CRD_NAME} is not installed")
            stop.wait(CRD_POLL)
        return False

    def _wire(self, ports: SharedInformer) -> None:
        """The controller and the sweeper, through the manager's ordinary API."""
        mgr, cfg = self._mgr, self._config
        # A reconcile reads its pod from the cache its events come from. Sharded, that is
        # the controller's own (this replica's share), fed by a watch of its own: the
        # namespace-wide pod cache may not hold a new pod yet when its event arrives, and
        # a pod "not found" there was dropped until its next event.
        pods = mgr.informer(PODS, shard="primary") if self._ctx.settings.sharded else self._pods
        reconciler = PodPortReconciler(
            mgr.client,
            cfg,
            scope=self._scope,
            pods=pods,
            ports=ports,
            allocator=self._allocator,
            recorder=mgr.recorder(),
            deleted_pods=self._deleted,
        )
        controller = (
            self._ctx.controller(reconciler)
            .for_(PODS)
            .watches(LOGICAL_PORTS, requests_for_port(self._scope))
            .complete()
        )
        self.controller = controller

        def wake(req: Request) -> None:
            controller.enqueue(req)

        # a freed address wakes the pods waiting here (every replica where it runs)
        self._allocator.set_waker(wake)
        PORT_METRICS.attach(self._allocator)
        self.sweeper = Sweeper(mgr.client, self._scope, self._pods, ports, cfg.gc_interval)
        # one sweeper for the whole cluster, in the leader, sharded controller or not
        mgr.add(SweeperRunner(controller, self.sweeper), leader_only=True)


class SweeperRunner:
    """The sweeper beside the controller (leader only): once the controller runs here, it
    sweeps orphaned ports now and every ``gcInterval`` and enqueues every pod (a sharded
    controller skips the pods another replica owns)."""

    name = "podport-sweeper"

    def __init__(self, controller: Controller, sweeper: Sweeper) -> None:
        self._controller = controller
        self._sweeper = sweeper

    def run(self, stop: threading.Event) -> None:
        while not _started(self._controller):
            if stop.wait(WAIT_STEP):
                return
        controller = self._controller

        def enqueue(req: Request) -> None:
            controller.enqueue(req)

        self._sweeper.run(stop, enqueue)


def _started(controller: Controller) -> bool:
    try:
        controller.queue  # noqa: B018 - raises until the controller runs
    except RuntimeError:
        return False
    return True


class PodPortPlugin:
    """The ``podport`` controller plugin (entry point ``controllers.podport:PodPortPlugin``)."""

    config_class = PodPortConfig

    def rbac_rules(self, config: PodPortConfig) -> list[dict[str, list[str]]]:
        """What its ClusterRole must grant: more with ``installCrd``."""
        return rbac_rules(config)

    def setup(self, mgr: Manager, ctx: PluginContext[PodPortConfig]) -> None:
        cfg = ctx.config
        problems = cfg.validate()
        if problems:
            raise ValueError("invalid podport config: " + "; ".join(problems))
        scope = Scope(cfg, mgr.options.namespace)
        if ctx.settings.fleet:
            _setup_fleet(mgr, ctx, scope)
            return
        allocator = Allocator(cfg.pools())
        deleted = DeletedPods()
        pods = mgr.informer(PODS, indexers={POD_BY_UID: index_pod_uid})
        pods.add_event_handler(deleted)
        cache = PortCache(
            mgr, ctx, scope=scope, pods=pods, allocator=allocator, deleted_pods=deleted
        )
        mgr.add(cache, leader_only=False)
        mgr.add_ready_check(f"{ctx.name}-crd", cache.ready_reason)
        if cfg.install_crd:
            try:
                install_crd(mgr.client)
            except ApiError as exc:  # the port cache retries while the CRD is missing
                logger.warning("cannot install the LogicalPort CRD", extra={"error": str(exc)})


def _setup_fleet(mgr: Manager, ctx: PluginContext[PodPortConfig], scope: Scope) -> None:
    """Fleet-wide: the ports of each engaged cluster (:mod:`controllers.podport.fleet`)."""
    made: list[Controller] = []

    def enqueue(req: Request) -> bool:
        return bool(made) and made[0].enqueue(req)

    def for_cluster(cluster: Cluster) -> ClusterPorts:
        return ClusterPorts(
            cluster,
            ctx.config,
            scope=scope,
            component=ctx.name,
            enqueue=enqueue,
            sync_timeout=mgr.options.cache_sync_timeout,
        )

    made.append(ctx.controller(for_cluster).for_(PODS).complete())

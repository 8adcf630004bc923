"""Wiring of the podport controller into a manager: the plugin and its two runnables.

The LogicalPort CRD may be missing when the manager starts (or be installed later), and a
manager whose informers do not sync gives up. So the LogicalPort informer is not created
at setup, but by :class:`PortCache`, a runnable of every replica (warm standby): it polls
discovery until ``logicalports.network.overseer.io`` is served (installing the CRD first
when ``installCrd`` is set), then creates and starts the informer with the allocator as
one of its handlers. Until then the readiness check ``podport-crd`` reports why.

:class:`PodPortController` runs in the leader only: it waits for the port cache, then
runs the controller (pods as primary resource, LogicalPorts mapped to their pod) and the
:class:`~controllers.podport.sweeper.Sweeper` beside it.

Thread-safe: wiring happens once, in ``setup``; each runnable runs in its own thread.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Final

from controllers.podport.allocator import Allocator
from controllers.podport.config import PodPortConfig
from controllers.podport.crd import CRD_NAME, LOGICAL_PORTS, crd_served, install_crd
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
    Controller,
    EnqueueRequestsFromMapFunc,
    Manager,
    PluginContext,
    Request,
    SharedInformer,
)

__all__ = ["PodPortController", "PodPortPlugin", "PortCache"]

logger = logging.getLogger(__name__)

CRD_POLL: Final = 2.0  # seconds between discovery checks while the CRD is missing
WAIT_STEP: Final = 0.05  # seconds between looks at a condition


class PortCache:
    """Waits for the CRD, then runs the LogicalPort informer (every replica)."""

    name = "podport-ports"

    def __init__(self, mgr: Manager, config: PodPortConfig, allocator: Allocator) -> None:
        self._mgr = mgr
        self._config = config
        self._allocator = allocator
        self._reason: str | None = f"CRD {CRD_NAME} is not installed"
        self._lock = threading.Lock()
        self.informer: SharedInformer | None = None
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
        return opts.warm_standby or not opts.leader_election or self._mgr.is_leader()

    def run(self, stop: threading.Event) -> None:
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
                break
            self._set_reason(f"CRD {CRD_NAME} is not installed")
            stop.wait(CRD_POLL)
        if stop.is_set():
            return
        self._set_reason("LogicalPort cache not synced")
        informer = self._mgr.informer(
            LOGICAL_PORTS,
            indexers={PORT_BY_POD: index_port_pod, PORT_BY_POD_UID: index_port_pod_uid},
        )
        registration = informer.add_event_handler(self._allocator)
        self.informer = informer
        self._mgr.factory.start(stop)  # the manager's informers may have started already
        while not stop.is_set():
            if informer.has_synced() and registration.has_synced():
                self._set_reason(None)
                self.synced.set()
                logger.info("LogicalPort cache synced", extra={"ports": len(informer.indexer)})
                break
            stop.wait(WAIT_STEP)
        stop.wait()


class PodPortController:
    """The controller and the sweeper (leader only), once the port cache is ready."""

    name = "podport"

    def __init__(
        self,
        mgr: Manager,
        ctx: PluginContext[PodPortConfig],
        *,
        pods: SharedInformer,
        cache: PortCache,
        allocator: Allocator,
        scope: Scope,
        deleted_pods: DeletedPods,
    ) -> None:
        self._mgr = mgr
        self._ctx = ctx
        self._pods = pods
        self._cache = cache
        self._allocator = allocator
        self._scope = scope
        self._deleted = deleted_pods
        self.controller: Controller | None = None
        self.sweeper: Sweeper | None = None

    def run(self, stop: threading.Event) -> None:
        while not (stop.is_set() or self._cache.synced.is_set()):
            stop.wait(WAIT_STEP)
        ports = self._cache.informer
        if stop.is_set() or ports is None:
            return
        ctx, cfg = self._ctx, self._ctx.config
        reconciler = PodPortReconciler(
            self._mgr.client,
            cfg,
            scope=self._scope,
            pods=self._pods,
            ports=ports,
            allocator=self._allocator,
            recorder=self._mgr.recorder(),
            deleted_pods=self._deleted,
        )
        controller = Controller(
            ctx.name,
            reconciler,
            workers=ctx.settings.workers,
            rate_limiter=ctx.settings.rate_limiter.build(),
        )
        controller.for_(self._pods)
        controller.watch(ports, EnqueueRequestsFromMapFunc(requests_for_port(self._scope)))
        self.controller = controller
        sweeper = Sweeper(self._mgr.client, self._scope, self._pods, ports, cfg.gc_interval)
        self.sweeper = sweeper

        def enqueue(req: Request) -> None:
            # not started yet: its start enqueues every pod anyway
            with contextlib.suppress(RuntimeError):
                controller.queue.add(req)

        done = threading.Event()

        def sweep() -> None:
            while not (done.is_set() or _started(controller)):
                done.wait(WAIT_STEP)
            sweeper.run(done, enqueue)

        self._allocator.set_waker(enqueue)
        PORT_METRICS.attach(self._allocator)
        gc = threading.Thread(target=sweep, name=f"sweeper/{ctx.name}")
        gc.start()
        try:
            controller.run(stop)
        finally:
            done.set()
            gc.join()
            self._allocator.set_waker(None)
            PORT_METRICS.detach(self._allocator)


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
        allocator = Allocator(cfg.pools())
        deleted = DeletedPods()
        pods = mgr.informer(PODS, indexers={POD_BY_UID: index_pod_uid})
        pods.add_event_handler(deleted)
        cache = PortCache(mgr, cfg, allocator)
        mgr.add(cache, leader_only=False)
        mgr.add_ready_check(f"{ctx.name}-crd", cache.ready_reason)
        runner = PodPortController(
            mgr, ctx, pods=pods, cache=cache, allocator=allocator, scope=scope, deleted_pods=deleted
        )
        mgr.add(runner, leader_only=True)
        if cfg.install_crd:
            try:
                install_crd(mgr.client)
            except ApiError as exc:  # the port cache retries while the CRD is missing
                logger.warning("cannot install the LogicalPort CRD", extra={"error": str(exc)})

"""podport fleet-wide (``fleet: true``): each engaged cluster gets its own ports — its own
LogicalPort CRD and objects, its own allocator rebuilt from them, its own sweeper — made
when that cluster's keys start, let go when they stop.

:class:`ClusterPorts` is the reconciler of one cluster (the fleet-wide controller's
factory makes one per cluster): built as the single-cluster wiring does it
(:mod:`controllers.podport.plugin`): wait until the CRD is served in that cluster
(installing it first with ``installCrd``), run its LogicalPort informer with the
allocator as a handler, and only once the allocator has seen every port reconcile pods
there; LogicalPort events wake their pod, a freed address wakes the pods waiting for
one, the sweeper collects orphaned ports every ``gcInterval``. Its ``close()`` stops the
sweeper and detaches all of it. The address figures get a ``cluster`` label.

A cluster whose CRD is not served within the cache sync timeout does not start its keys;
the fleet-wide controller tries again a few seconds later (the reason is logged). When the
cluster's keys stop meanwhile (:func:`~manager.fleet.cluster_stopping`: the cluster left,
leadership or the manager ended), the wait ends at once.

Thread-safe: built in the cluster's keys thread; then as :class:`PodPortReconciler`.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Final

from controllers.podport.allocator import Allocator
from controllers.podport.config import PodPortConfig
from controllers.podport.crd import CRD_NAME, LOGICAL_PORTS, crd_served, install_crd
from controllers.podport.metrics import PORT_METRICS
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
from manager import Cluster, DeletedFinalStateUnknown, JsonDict, Request, Result
from manager.fleet import cluster_stopping

__all__ = ["ClusterPorts", "KeysStopped", "PortEvents"]

logger = logging.getLogger(__name__)

CRD_POLL: Final = 1.0  # seconds between discovery checks while a cluster lacks the CRD
WAIT_STEP: Final = 0.02  # seconds between looks at the caches while they sync


class KeysStopped(Exception):
    """The cluster's keys stopped while its ports were being made (nothing to retry)."""


class PortEvents:
    """The LogicalPort informer handler of one cluster: a port's event wakes its pod there
    (what ``.watches(LOGICAL_PORTS, requests_for_port(scope))`` does in one cluster)."""

    def __init__(
        self,
        requests: Callable[[JsonDict], Iterable[Request]],
        cluster: str,
        enqueue: Callable[[Request], object],
    ) -> None:
        self._requests = requests
        self._cluster = cluster
        self._enqueue = enqueue

    def _wake(self, obj: JsonDict) -> None:
        for req in self._requests(obj):
            self._enqueue(Request(req.namespace, req.name, self._cluster))

    def on_add(self, obj: JsonDict, is_in_initial_list: bool) -> None:
        self._wake(obj)

    def on_update(self, old: JsonDict, new: JsonDict) -> None:
        self._wake(old)
        self._wake(new)

    def on_delete(self, obj: JsonDict | DeletedFinalStateUnknown) -> None:
        self._wake(obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj)


class ClusterPorts:
    """podport in one cluster of the fleet (see the module).

    Args:
        cluster: the engaged cluster.
        config: podport's settings.
        scope: which pods get ports.
        component: the source of its Events.
        enqueue: adds a request to the fleet-wide controller (its cluster's queue).
        sync_timeout: seconds to wait for the CRD and the LogicalPort cache.

    Raises:
        TimeoutError: the CRD is not served, or the LogicalPort cache did not sync, within
            ``sync_timeout`` seconds.
        KeysStopped: the cluster's keys stopped first.
    """

    def __init__(
        self,
        cluster: Cluster,
        config: PodPortConfig,
        *,
        scope: Scope,
        component: str,
        enqueue: Callable[[Request], object],
        sync_timeout: float,
    ) -> None:
        self._cluster = cluster.name
        stopping = cluster_stopping()
        deadline = time.monotonic() + sync_timeout
        while True:
            served = crd_served(cluster.client)
            if not served and config.install_crd:
                install_crd(cluster.client)
                served = crd_served(cluster.client)
            if served:
                break
            if time.monotonic() >= deadline:
                raise TimeoutError(f"cluster {cluster.name}: CRD {CRD_NAME} is not installed")
            if stopping.wait(CRD_POLL):
                raise KeysStopped(f"cluster {cluster.name}: stopped waiting for CRD {CRD_NAME}")
        pods = cluster.informer(PODS, indexers={POD_BY_UID: index_pod_uid})
        ports = cluster.informer(
            LOGICAL_PORTS,
            indexers={PORT_BY_POD: index_port_pod, PORT_BY_POD_UID: index_port_pod_uid},
        )
        self._deleted = DeletedPods()
        self._allocator = Allocator(config.pools())
        self._handlers = [
            (pods, pods.add_event_handler(self._deleted)),
            (ports, ports.add_event_handler(self._allocator)),
            (
                ports,
                ports.add_event_handler(
                    PortEvents(requests_for_port(scope), cluster.name, enqueue)
                ),
            ),
        ]
        try:
            while not all(reg.has_synced() for _, reg in self._handlers) or not all(
                informer.has_synced() for informer, _ in self._handlers
            ):
                if time.monotonic() >= deadline:
                    raise TimeoutError(
                        f"cluster {cluster.name}: the LogicalPort cache did not sync"
                    )
                if stopping.wait(WAIT_STEP):
                    raise KeysStopped(f"cluster {cluster.name}: stopped waiting for its caches")
        except BaseException:
            self._detach()
            raise

        def wake(req: Request) -> None:
            enqueue(Request(req.namespace, req.name, cluster.name))

        self._allocator.set_waker(wake)
        PORT_METRICS.attach(self._allocator, cluster.name)
        self.reconciler = PodPortReconciler(
            cluster.client,
            config,
            scope=scope,
            pods=pods,
            ports=ports,
            allocator=self._allocator,
            recorder=cluster.recorder(component),
            deleted_pods=self._deleted,
        )
        # the sweeper writes (deletes orphaned ports): under the fence of these keys
        self._stop = threading.Event()
        sweeper = Sweeper(cluster.client, scope, pods, ports, config.gc_interval)
        self._sweeper = threading.Thread(
            target=contextvars.copy_context().run,
            args=(sweeper.run, self._stop, wake),
            name=f"podport-sweeper/{cluster.name}",
        )
        self._sweeper.start()
        logger.info("LogicalPort cache synced", extra={"cluster": cluster.name})

    def reconcile(self, request: Request) -> Result:
        return self.reconciler.reconcile(request)

    def close(self) -> None:
        """The cluster's keys have stopped: stop the sweeper, let go of the caches."""
        self._stop.set()
        self._sweeper.join()
        self._detach()

    def _detach(self) -> None:
        self._allocator.set_waker(None)
        PORT_METRICS.detach(self._allocator)
        for informer, registration in self._handlers:
            informer.remove_event_handler(registration)

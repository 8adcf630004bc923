"""A fleet-wide controller: one controller's keys in every engaged cluster, each
cluster's keys on their own (multicluster-runtime's ``mcController``: sources engaged
per cluster, requests carrying the cluster's name).

Declared like any controller (``mgr.controller(..., fleet=True)`` or ``fleet: true`` in its
configuration section), with ``for_``/``owns``/``watches`` of *scopes*: every engaged
cluster caches them (:meth:`Fleet.watch <manager.fleet.fleet.Fleet.watch>`), and once a
cluster's caches have synced its keys start:

* a :class:`~manager.controller.Controller` of its own per cluster
  (``controller/<name>/<cluster>``) with its own queue (``<name>/<cluster>``), its own
  workers (``workers`` per cluster) and its own rate limiter: a cluster whose reconciles
  fail backs off alone, a slow cluster holds only its own workers, an unreachable one
  only its own keys;
* every request carries the cluster (:attr:`Request.cluster
  <manager.reconcile.Request.cluster>`); a map function may name another cluster in a
  request it returns, which then goes to that cluster's queue (dropped while that cluster
  is not engaged: its keys are all looked at when it is);
* the reconciler is either *uniform* — a factory ``reconciler(cluster)`` called once per
  engaged cluster, whose reconciler reads and writes through that cluster's client and
  listers as a single-cluster one does (the same code runs either way; its ``close()``,
  if it has one, is called once that cluster's keys have stopped) — or
  *cluster-aware* — one reconciler for every cluster, which looks at ``request.cluster``
  and may read in one cluster and write in another (:meth:`Manager.cluster
  <manager.manager.Manager.cluster>`).

It runs as leader-only work (while this replica leads): its writes in every cluster ask
the leader fence, whose Lease is in the home cluster. Sharded by cluster
(:mod:`manager.fleet.sharded`) it runs on every replica, in the clusters the ring gives
that replica, each cluster's writes under that cluster's fence. When a cluster leaves, its keys
stop and its in-flight reconciles finish before its caches go; when leadership ends,
every cluster's keys stop at once.

Thread-safe: wiring before :meth:`FleetController.run`; the fleet calls
``cluster_ready`` and ``cluster_leaving`` from its threads.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Final, cast

from manager.cache.informer import SharedInformer
from manager.controller import (
    ACTIVE_WORKERS,
    MAX_CONCURRENT,
    RECONCILE_ERRORS,
    RECONCILE_PANICS,
    RECONCILE_TOTAL,
    TERMINAL_ERRORS,
    Controller,
)
from manager.errors import Forbidden
from manager.fencing import fenced
from manager.fleet.cluster import Cluster
from manager.fleet.fleet import Fleet, WatchScope
from manager.handler import EventMapper
from manager.keys import JsonDict
from manager.predicate import Predicate
from manager.reconcile import Reconciler, Request, Result
from manager.workqueue import RateLimiter, RateLimitingQueue

__all__ = ["FleetController", "ReconcilerFactory", "cluster_stopping", "is_factory"]

logger = logging.getLogger(__name__)

ReconcilerFactory = Callable[[Cluster], Reconciler]
"""A uniform fleet-wide controller's reconciler, made for each engaged cluster."""

_RETRY_FACTORY: Final = 5.0  # seconds before a failed reconciler factory is called again


_NEVER: Final = threading.Event()  # never set: what code outside a cluster's keys gets
_KEYS_STOP: contextvars.ContextVar[threading.Event] = contextvars.ContextVar(
    "overseer_cluster_keys_stop", default=_NEVER
)


def cluster_stopping() -> threading.Event:
    """Set once the keys of the cluster this code runs for stop: the cluster leaves this
    replica, the replica loses leadership, the manager stops. What a reconciler factory
    (run in the cluster's keys thread) or a reconcile that waits for something — a CRD
    to be served, say — waits on, so that it lets go at once (controller-runtime's
    ``ctx.Done()`` for an engaged cluster). Outside a fleet-wide controller's cluster:
    an Event that is never set."""
    return _KEYS_STOP.get()


def is_factory(reconciler: object) -> bool:
    """Whether ``reconciler`` makes reconcilers (a class, a function of the cluster)
    rather than being one (an object with ``reconcile``)."""
    return isinstance(reconciler, type) or not hasattr(reconciler, "reconcile")


@dataclass(frozen=True, slots=True)
class _Watch:
    scope: WatchScope
    mapper: EventMapper
    predicates: tuple[Predicate, ...]


class _Stamped:
    """A watch's mapper in one cluster: its requests carry the cluster; one naming another
    cluster goes to that cluster's queue."""

    def __init__(self, mapper: EventMapper, cluster: str, route: Callable[[Request], bool]):
        self._mapper = mapper
        self._cluster = cluster
        self._route = route

    def requests(self, obj: JsonDict) -> Iterable[Request]:
        out = []
        for req in self._mapper.requests(obj):
            if not req.cluster:
                out.append(Request(req.namespace, req.name, self._cluster))
            elif req.cluster == self._cluster:
                out.append(req)
            else:
                self._route(req)
        return out


class _Unused:
    """The reconciler slot of a uniform fleet-wide controller: each cluster has its own."""

    def reconcile(self, request: Request) -> Result:
        raise RuntimeError("a fleet-wide controller reconciles through its clusters")


class _Keys:
    """One cluster's keys: its controller (once made), stop event and thread."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.controller: Controller | None = None
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None


class FleetController(Controller):
    """A controller whose keys run in every engaged cluster (see the module).

    Args:
        name: the controller's name (metrics, logs, ``/statusz``).
        fleet: the manager's fleet.
        reconciler: a cluster-aware :class:`~manager.reconcile.Reconciler` shared by every
            cluster, or a factory making one per cluster.
        workers: concurrent reconciles per cluster.
        rate_limiters: makes each cluster's requeue rate limiter (default: the
            controller default, one per cluster).
        sharded: the fleet is sharded by cluster (:mod:`manager.fleet.sharded`): the
            controller runs on every replica, and each cluster's keys run under that
            cluster's fence (:meth:`Fleet.fence <manager.fleet.fleet.Fleet.fence>`)
            instead of the leader's.
    """

    def __init__(
        self,
        name: str,
        fleet: Fleet,
        reconciler: Reconciler | ReconcilerFactory,
        *,
        workers: int = 1,
        rate_limiters: Callable[[], RateLimiter[Hashable]] | None = None,
        sharded: bool = False,
    ) -> None:
        shared: Reconciler | None = None
        factory: ReconcilerFactory | None = None
        if is_factory(reconciler):
            factory = cast(ReconcilerFactory, reconciler)
        else:
            shared = cast(Reconciler, reconciler)
        super().__init__(name, shared or _Unused(), workers=workers)
        self._fleet = fleet
        self.sharded = sharded
        self._factory = factory
        self._rate_limiters = rate_limiters
        self._fleet_watches: list[_Watch] = []
        self._cond = threading.Condition()
        self._pending: list[Cluster] = []
        self._keys: dict[str, _Keys] = {}
        self._context: contextvars.Context | None = None
        self._error: tuple[float, str] | None = None  # a factory that failed

    # -- wiring ----------------------------------------------------------------------

    def watch_scope(
        self, scope: WatchScope, mapper: EventMapper, *predicates: Predicate
    ) -> FleetController:
        """Every engaged cluster caches ``scope``; its events there enqueue ``mapper``'s
        requests (stamped with the cluster) when they pass ``predicates``."""
        if self._started:
            raise RuntimeError(f"controller {self.name}: watch after start")
        self._fleet_watches.append(_Watch(scope, mapper, predicates))
        self._fleet.watch(scope)
        return self

    def watch(
        self, informer: SharedInformer, mapper: EventMapper, *predicates: Predicate
    ) -> Controller:
        raise TypeError(
            f"controller {self.name} is fleet-wide: it watches scopes in every cluster "
            "(ControllerBuilder.for_/owns/watches), not one informer"
        )

    # -- facts -------------------------------------------------------------------------

    def clusters(self) -> list[str]:
        """The clusters whose keys run now (their workers have started)."""
        with self._cond:
            keys = list(self._keys.values())
        return sorted(
            k.cluster.name
            for k in keys
            if k.controller is not None and k.controller.queue_depth is not None
        )

    @property
    def queue(self) -> RateLimitingQueue[Request]:
        raise RuntimeError(f"controller {self.name} is fleet-wide: it has a queue per cluster")

    def _controllers(self) -> list[Controller]:
        with self._cond:
            return [k.controller for k in self._keys.values() if k.controller is not None]

    @property
    def queue_depth(self) -> int | None:
        """Requests waiting in every cluster's queue (None before :meth:`run`)."""
        if not self._started:
            return None
        return sum(c.queue_depth or 0 for c in self._controllers())

    @property
    def active_workers(self) -> int:
        return sum(c.active_workers for c in self._controllers())

    @property
    def last_error(self) -> tuple[float, str] | None:
        errors = [c.last_error for c in self._controllers()]
        with self._cond:
            errors.append(self._error)
        found = [e for e in errors if e is not None]
        return max(found) if found else None

    @property
    def last_refusal(self) -> tuple[Request, Forbidden] | None:
        for controller in self._controllers():
            refusal = controller.last_refusal
            if refusal is not None:
                return refusal
        return None

    def enqueue(self, request: Request) -> bool:
        """Add ``request`` to its cluster's queue (False when that cluster's keys do not
        run here now)."""
        with self._cond:
            keys = self._keys.get(request.cluster)
            controller = None if keys is None else keys.controller
        return controller is not None and controller.enqueue(request)

    # -- the fleet's listener ----------------------------------------------------------

    def cluster_ready(self, cluster: Cluster) -> None:
        with self._cond:
            self._pending = [c for c in self._pending if c.name != cluster.name]
            self._pending.append(cluster)
            self._cond.notify_all()

    def cluster_leaving(self, name: str, timeout: float) -> bool:
        with self._cond:
            self._pending = [c for c in self._pending if c.name != name]
            keys = self._keys.pop(name, None)
            if keys is not None:
                keys.stop.set()
        if keys is None or keys.thread is None:
            return True
        keys.thread.join(timeout)
        if keys.thread.is_alive():
            return False
        logger.info("cluster keys stopped", extra={"controller": self.name, "cluster": name})
        return True

    # -- running -----------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Run every ready cluster's keys (and those of clusters ready later) until
        ``stop`` is set; then stop them all and wait for their in-flight reconciles."""
        if self._started:
            raise RuntimeError(f"controller {self.name} may be run once")
        self._started = True
        name = self.name
        MAX_CONCURRENT.labels(name).set(self.workers)
        ACTIVE_WORKERS.labels(name).set(0)
        for result in ("success", "error", "requeue", "requeue_after", "fenced"):
            RECONCILE_TOTAL.labels(name, result)
        for counter in (RECONCILE_ERRORS, RECONCILE_PANICS, TERMINAL_ERRORS):
            counter.labels(name)
        # the clusters' threads run in this context: the leader fence applies to them
        self._context = contextvars.copy_context()
        self._fleet.subscribe(self)
        logger.info("fleet-wide controller started", extra={"controller": name})
        try:
            while True:
                with self._cond:
                    while not (self._pending or stop.is_set()):
                        self._cond.wait(0.1)
                    if stop.is_set():
                        break
                    while self._pending:  # none kept here: a cluster that left is freed
                        self._start_keys(self._pending.pop(0))
        finally:
            self._fleet.unsubscribe(self)
            with self._cond:
                self._stopping.set()
                every = list(self._keys.values())
                for keys in every:
                    keys.stop.set()
            for keys in every:
                if keys.thread is not None:
                    keys.thread.join()
            with self._cond:  # only now: a leaving cluster's caches wait for its keys
                for keys in every:
                    if self._keys.get(keys.cluster.name) is keys:
                        del self._keys[keys.cluster.name]
            logger.info("fleet-wide controller stopped", extra={"controller": name})

    def _start_keys(self, cluster: Cluster) -> None:
        # Caller holds self._cond.
        old = self._keys.get(cluster.name)
        if old is not None:
            old.stop.set()  # the cluster was engaged again: its old keys end first
        keys = _Keys(cluster)
        self._keys[cluster.name] = keys
        assert self._context is not None
        keys.thread = threading.Thread(
            target=self._context.copy().run,
            args=(self._run_keys, keys, old),
            name=f"controller/{self.name}/{cluster.name}",
        )
        keys.thread.start()

    def _run_keys(self, keys: _Keys, old: _Keys | None) -> None:
        """One cluster's keys: the reconciler (the factory's, for this cluster), a
        controller of its own over the cluster's caches, until its stop is set. Sharded
        by cluster, all of it runs under the cluster's fence (its workers inherit it)."""
        if old is not None and old.thread is not None:
            old.thread.join()
        fence = self._fleet.fence(keys.cluster.name) if self.sharded else None
        if fence is None:
            self._run_cluster(keys)
            return
        with fenced(fence):
            self._run_cluster(keys)

    def _run_cluster(self, keys: _Keys) -> None:
        cluster = keys.cluster
        reconciler = self.reconciler
        _KEYS_STOP.set(keys.stop)  # this thread's context (a copy): its workers' too
        while self._factory is not None:
            try:
                reconciler = self._factory(cluster)
                break
            except Exception as exc:
                if keys.stop.is_set():  # it let go because the keys stopped
                    logger.info(
                        "the cluster's keys stopped before its reconciler was made",
                        extra={"controller": self.name, "cluster": cluster.name, "error": str(exc)},
                    )
                    return
                logger.exception(
                    "the reconciler could not be made for a cluster",
                    extra={"controller": self.name, "cluster": cluster.name},
                )
                with self._cond:
                    self._error = (time.time(), f"{cluster.name}: {type(exc).__name__}: {exc}")
                if keys.stop.wait(_RETRY_FACTORY):
                    return
        limiter = self._rate_limiters() if self._rate_limiters is not None else None
        controller = Controller(
            self.name, reconciler, workers=self.workers, rate_limiter=limiter, cluster=cluster.name
        )
        for w in self._fleet_watches:
            informer = cluster.informer(
                w.scope.resource,
                namespace=w.scope.namespace,
                label_selector=w.scope.label_selector,
            )
            controller.watch(
                informer, _Stamped(w.mapper, cluster.name, self.enqueue), *w.predicates
            )
        try:
            with self._cond:
                if keys.stop.is_set():
                    return
                keys.controller = controller
            controller.run(keys.stop)
        finally:
            close = getattr(reconciler, "close", None)
            if self._factory is not None and callable(close):
                try:
                    close()
                except Exception:
                    logger.exception(
                        "closing a cluster's reconciler failed",
                        extra={"controller": self.name, "cluster": cluster.name},
                    )

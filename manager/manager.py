"""The manager: starts and stops everything in the right order (controller-runtime
``pkg/manager``).

Start order (DESIGN.md §3.8): HTTP servers (metrics, probes) → informers → wait for
cache sync → leader election → leader-only runnables (controllers). Stop in reverse.

* Warm standby (default): every replica runs the informers, so a new leader reconciles
  from warm caches within a second of acquiring the Lease. With it off, a replica starts
  its informers only once it leads.
* Graceful stop (``stop`` set, e.g. on SIGTERM): controllers take no new requests,
  in-flight reconciles finish within ``graceful_shutdown_timeout``, then the Lease is
  released (so a standby takes over in about one retry period), then informers and
  servers stop. :meth:`Manager.run` returns 0. If the reconciles do not finish in time,
  the Lease is *not* released (a reconcile may still write) and run returns 1.
* Lost leadership: leader-only work is told to stop at once and :meth:`Manager.run`
  returns 1 without waiting; the process must exit (the CLI does ``os._exit``) so that
  the Deployment restarts it clean.
* ``/healthz``: the process and its informer threads are alive. ``/readyz``: caches
  synced — a standby with synced caches is ready; readiness does not mean leadership.

Every thread is named and non-daemon. ``run`` may be called once.

Thread-safe: wiring (``controller``, ``add``, checks) happens before ``run``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Protocol

from manager.cache.factory import InformerFactory
from manager.cache.informer import SharedInformer
from manager.cache.lister import Lister
from manager.cache.store import IndexFunc
from manager.controller import Controller
from manager.events import EventBroadcaster, EventRecorder
from manager.handler import EnqueueRequestsFromMapFunc, EventMapper, MapFunc
from manager.healthz import Checks, EndpointServer
from manager.kube import KubeClient
from manager.leaderelection import LeaderElectionConfig, LeaderElector, default_identity
from manager.metrics import metrics_route
from manager.predicate import Predicate
from manager.reconcile import Reconciler
from manager.resources import Resource
from manager.workqueue import RateLimiter

__all__ = ["ControllerBuilder", "Manager", "ManagerOptions", "Runnable"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True, slots=True)
class ManagerOptions:
    """How a manager runs. Defaults follow controller-runtime."""

    name: str = "overseer"  # component name: events source, logs
    metrics_bind_address: str = ":8080"  # "0" disables /metrics
    health_probe_bind_address: str = ":8081"  # "0" disables /healthz and /readyz
    leader_election: bool = True
    leader_election_id: str = "overseer-leader"  # the Lease name
    leader_election_namespace: str = ""  # "" = $POD_NAMESPACE, else "default"
    identity: str = ""  # "" = $POD_NAME or hostname, plus a random suffix
    lease_duration: float = 15.0  # seconds
    renew_deadline: float = 10.0  # seconds
    retry_period: float = 2.0  # seconds
    warm_standby: bool = True  # followers run informers too
    graceful_shutdown_timeout: float = 30.0  # seconds for in-flight reconciles on stop
    cache_sync_timeout: float = 120.0  # seconds to wait for informers to sync
    namespace: str | None = None  # restrict namespaced informers to one namespace

    def __post_init__(self) -> None:
        problems = []
        if self.graceful_shutdown_timeout < 0:
            problems.append("graceful_shutdown_timeout must be >= 0")
        if self.cache_sync_timeout <= 0:
            problems.append("cache_sync_timeout must be > 0")
        if problems:
            raise ValueError("invalid ManagerOptions: " + "; ".join(problems))


class Runnable(Protocol):
    """Anything the manager runs in its own thread until ``stop`` is set."""

    name: str

    def run(self, stop: threading.Event) -> None: ...


class ControllerBuilder:
    """Wires a controller: ``for_`` the primary resource, ``owns`` children, ``watches``
    anything else; ``complete()`` adds it to the manager (controller-runtime's builder)."""

    def __init__(
        self,
        mgr: Manager,
        name: str,
        reconciler: Reconciler,
        *,
        workers: int,
        rate_limiter: RateLimiter[Hashable] | None,
    ) -> None:
        self._mgr = mgr
        self._controller = Controller(name, reconciler, workers=workers, rate_limiter=rate_limiter)
        self._primary: Resource | None = None

    def for_(
        self,
        resource: Resource,
        *predicates: Predicate,
        namespace: str | None = None,
        label_selector: str | None = None,
    ) -> ControllerBuilder:
        """The primary resource: each object is its own request."""
        informer = self._mgr.informer(resource, namespace=namespace, label_selector=label_selector)
        self._controller.for_(informer, *predicates)
        self._primary = resource
        return self

    def owns(self, resource: Resource, *predicates: Predicate) -> ControllerBuilder:
        """Objects of ``resource`` controlled by a primary object wake that object."""
        if self._primary is None:
            raise RuntimeError("owns() needs for_() first: the owner kind comes from it")
        informer = self._mgr.informer(resource)
        self._controller.owns(informer, self._primary.group, self._primary.kind, *predicates)
        return self

    def watches(
        self, resource: Resource, mapper: EventMapper | MapFunc, *predicates: Predicate
    ) -> ControllerBuilder:
        """Events of ``resource`` wake the requests ``mapper`` returns."""
        informer = self._mgr.informer(resource)
        if not hasattr(mapper, "requests"):
            mapper = EnqueueRequestsFromMapFunc(mapper)
        self._controller.watch(informer, mapper, *predicates)
        return self

    def complete(self) -> Controller:
        """Add the controller to the manager (it runs only while leading)."""
        self._mgr.add(self._controller, leader_only=True)
        return self._controller


class Manager:
    """Owns the client, the informer factory, the event recorder and every runnable."""

    def __init__(self, client: KubeClient, options: ManagerOptions | None = None) -> None:
        self.client = client
        self.options = options or ManagerOptions()
        self.identity = self.options.identity or default_identity()
        self.factory = InformerFactory(client, namespace=self.options.namespace)
        self.events = EventBroadcaster(client, component=self.options.name)
        self._leader_runnables: list[Runnable] = []
        self._runnables: list[Runnable] = []
        self._health = Checks()
        self._ready = Checks()
        self._started = False
        self._leading = threading.Event()
        self._lost = threading.Event()
        self._threads: list[threading.Thread] = []
        self._informers_started = threading.Event()
        self._elector: LeaderElector | None = None
        self._health.add("ping", lambda: None)
        self._health.add("informers", self._informers_alive)
        self._ready.add("informers-synced", self._informers_synced)
        self._metrics_server = EndpointServer(
            "metrics", self.options.metrics_bind_address, {"/metrics": metrics_route}
        )
        self._probe_server = EndpointServer(
            "probes",
            self.options.health_probe_bind_address,
            {"/healthz": self._health.route("healthz"), "/readyz": self._ready.route("readyz")},
        )

    # -- wiring ----------------------------------------------------------------------

    def informer(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
    ) -> SharedInformer:
        """The shared informer for this scope (one per scope for the whole manager)."""
        return self.factory.informer(
            resource,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            indexers=indexers,
        )

    def lister(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> Lister:
        """A lister over the shared informer of this scope: the same informer that
        ``for_``/``owns``/``watches`` use for the same resource, namespace and selectors,
        so a reconcile reads the cache whose event woke it.

        Raises:
            ValueError: a namespace given for a cluster-scoped resource.
        """
        if namespace and not resource.namespaced:
            raise ValueError(f"{resource} is cluster-scoped: a lister for it takes no namespace")
        return self.factory.lister(
            resource,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
        )

    def recorder(self, component: str | None = None) -> EventRecorder:
        """An event recorder whose events come from ``component`` (default: the manager's)."""
        return self.events.recorder(component)

    def controller(
        self,
        name: str,
        reconciler: Reconciler,
        *,
        workers: int = 1,
        rate_limiter: RateLimiter[Hashable] | None = None,
    ) -> ControllerBuilder:
        """Start wiring a controller; finish with ``.complete()``."""
        return ControllerBuilder(self, name, reconciler, workers=workers, rate_limiter=rate_limiter)

    def add(self, runnable: Runnable, *, leader_only: bool = True) -> None:
        """Run ``runnable`` (only while leading, unless ``leader_only=False``)."""
        if self._started:
            raise RuntimeError("Manager.add after run()")
        (self._leader_runnables if leader_only else self._runnables).append(runnable)

    def add_health_check(self, name: str, check: object) -> None:
        """Add a liveness check: a callable returning None (healthy) or a reason."""
        self._health.add(name, check)  # type: ignore[arg-type]

    def add_ready_check(self, name: str, check: object) -> None:
        """Add a readiness check: a callable returning None (ready) or a reason."""
        self._ready.add(name, check)  # type: ignore[arg-type]

    # -- facts -----------------------------------------------------------------------

    def is_leader(self) -> bool:
        return self._leading.is_set() and not self._lost.is_set()

    @property
    def metrics_address(self) -> tuple[str, int] | None:
        return self._metrics_server.address

    @property
    def health_probe_address(self) -> tuple[str, int] | None:
        return self._probe_server.address

    def _informers_alive(self) -> str | None:
        if not self._informers_started.is_set():
            return None
        dead = [
            t.name for t in self._threads if t.name.startswith("informer/") and not t.is_alive()
        ]
        return f"informer threads ended: {', '.join(dead)}" if dead else None

    def _informers_synced(self) -> str | None:
        if not self._informers_started.is_set():
            if self.options.warm_standby or not self.options.leader_election:
                return "informers not started"
            return None  # cold standby: nothing to sync until leading
        pending = [i.name for i in self.factory.informers() if not i.has_synced()]
        return f"not synced: {', '.join(pending)}" if pending else None

    # -- running ---------------------------------------------------------------------

    def _spawn(self, name: str, target: object, *args: object) -> threading.Thread:
        t = threading.Thread(target=target, args=args, name=name)  # type: ignore[arg-type]
        self._threads.append(t)
        t.start()
        return t

    def _start_informers(self, informer_stop: threading.Event, stop: threading.Event) -> bool:
        self.factory.start(informer_stop)
        self._informers_started.set()
        self._threads.extend(t for t in self.factory.threads() if t not in self._threads)
        # wait on the caller's stop: a SIGTERM while the API server is unreachable must
        # not wait out the whole cache sync timeout (informer_stop is set only later)
        ok = self.factory.wait_for_cache_sync(self.options.cache_sync_timeout, stop=stop)
        if ok:
            logger.info("caches synced", extra={"informers": len(self.factory.informers())})
        return ok

    def run(self, stop: threading.Event) -> int:
        """Run until ``stop`` is set (returns 0) or leadership is lost (returns 1).

        Raises:
            RuntimeError: called twice.
            OSError: a bind address cannot be bound.
        """
        if self._started:
            raise RuntimeError("Manager.run may be called once")
        self._started = True
        opts = self.options
        informer_stop = threading.Event()
        leader_stop = threading.Event()
        elector_stop = threading.Event()
        events_stop = threading.Event()
        leader_threads: list[threading.Thread] = []
        elector_thread: threading.Thread | None = None
        self._metrics_server.start()
        self._probe_server.start()
        try:
            self.events.start(events_stop)
            for r in self._runnables:
                self._spawn(f"runnable/{r.name}", r.run, informer_stop)
            warm = opts.warm_standby or not opts.leader_election
            if warm and not self._start_informers(informer_stop, stop):
                if stop.is_set():
                    return 0
                logger.error(
                    "caches did not sync in time", extra={"timeout": opts.cache_sync_timeout}
                )
                return 1
            if opts.leader_election:
                self._elector = LeaderElector(
                    self.client,
                    LeaderElectionConfig(
                        lease_name=opts.leader_election_id,
                        namespace=opts.leader_election_namespace
                        or os.environ.get("POD_NAMESPACE", "")
                        or "default",
                        identity=self.identity,
                        lease_duration=opts.lease_duration,
                        renew_deadline=opts.renew_deadline,
                        retry_period=opts.retry_period,
                    ),
                    on_started_leading=self._leading.set,
                    on_new_leader=lambda who: logger.info("new leader", extra={"leader": who}),
                )
                elector_thread = self._spawn("leader-election", self._run_elector, elector_stop)
            else:
                self._leading.set()
            # wait for leadership (or stop)
            while not (stop.is_set() or self._leading.is_set() or self._lost.is_set()):
                stop.wait(0.05)
            if self._leading.is_set() and not stop.is_set() and not self._lost.is_set():
                acquired = time.monotonic()
                if not self._informers_started.is_set() and not self._start_informers(
                    informer_stop, stop
                ):
                    return 0 if stop.is_set() else 1
                for r in self._leader_runnables:
                    leader_threads.append(self._spawn(f"controller/{r.name}", r.run, leader_stop))
                logger.info(
                    "leading: controllers started",
                    extra={"after_acquire_seconds": round(time.monotonic() - acquired, 3)},
                )
            while not (stop.is_set() or self._lost.is_set()):
                stop.wait(0.05)
            if self._lost.is_set():
                leader_stop.set()  # at once; no drain: the process must exit now
                logger.error("leadership lost: stopping leader-only work and exiting")
                return 1
            return self._graceful(leader_stop, leader_threads, elector_stop, elector_thread)
        finally:
            leader_stop.set()
            elector_stop.set()
            informer_stop.set()
            events_stop.set()
            if not self._lost.is_set():
                self.events.shutdown(timeout=2.0)
                self.factory.shutdown(timeout=5.0)
            self._probe_server.stop()
            self._metrics_server.stop()

    def _run_elector(self, elector_stop: threading.Event) -> None:
        assert self._elector is not None
        if not self._elector.run(elector_stop):  # False: leadership lost, not stopped
            self._lost.set()

    def _graceful(
        self,
        leader_stop: threading.Event,
        leader_threads: list[threading.Thread],
        elector_stop: threading.Event,
        elector_thread: threading.Thread | None,
    ) -> int:
        timeout = self.options.graceful_shutdown_timeout
        logger.info("stopping: finishing in-flight reconciles", extra={"timeout": timeout})
        leader_stop.set()
        deadline = time.monotonic() + timeout
        for t in leader_threads:
            t.join(max(0.0, deadline - time.monotonic()))
        stuck = [t.name for t in leader_threads if t.is_alive()]
        if stuck:
            logger.error(
                "reconciles still running after the graceful shutdown timeout; "
                "not releasing the Lease",
                extra={"threads": stuck},
            )
            return 1
        elector_stop.set()  # the elector releases the Lease now that nothing writes
        if elector_thread is not None:
            elector_thread.join(max(1.0, self.options.retry_period * 2))
        logger.info("stopped cleanly")
        return 0

    def join(self, timeout: float | None = None) -> bool:
        """Wait for every thread the manager started (after :meth:`run` returned)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for t in self._threads:
            t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._threads)

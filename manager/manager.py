"""The manager: starts and stops everything in the right order (controller-runtime
``pkg/manager``).

Start order (DESIGN.md §3.8): HTTP servers (webhooks, metrics, probes) → informers →
wait for cache sync → leader election → leader-only runnables (controllers). Stop in
reverse.

* Webhooks (:mod:`manager.webhook`): when a controller declares admission webhooks or
  conversions (:meth:`Manager.webhook`), every replica serves them (admission is not
  leader work) from the start, before the replica can be ready (readiness check
  ``webhook-server``), and stops them last, after the controllers, the caches and the
  other servers: on a graceful stop it keeps answering for ``webhook.shutdown_delay``
  seconds counted from the stop (every answer closing its connection), so that the API
  server, which learns of the pod's end asynchronously, is never left calling a pod that
  no longer answers. With managed certificates (``webhook.managed``), every replica
  watches the certificate Secret and serves it, and the leader keeps it and the
  ``caBundle`` of the plugin's configurations and CRDs (:mod:`manager.webhook.
  certificates`, a leader-only runnable, its writes fenced like a controller's).

* Warm standby (default): every replica runs the informers, so a new leader reconciles
  from warm caches within a second of acquiring the Lease. With it off, a replica starts
  its informers only once it leads.
* Graceful stop (``stop`` set, e.g. on SIGTERM): controllers take no new requests,
  in-flight reconciles finish within ``graceful_shutdown_timeout``, the Events they
  recorded are flushed, then the Lease is released (so a standby takes over in about one
  retry period), then informers and servers stop; :meth:`Manager.run` returns 0. If the
  reconciles do not finish in time, the Lease is *not* released (a reconcile may still
  write), renewing stops, and run returns 1 at once: the process must exit.
* Lost leadership, at any moment (the graceful drain included): the election reported
  it, or the renew deadline passed on this replica's clock, or the election thread
  failed. Leader-only work is told to stop at once and :meth:`Manager.run` returns 1
  without waiting; the process must exit (the CLI does ``os._exit``) so that the
  Deployment restarts it clean.
* Write fencing (:mod:`manager.fencing`): :attr:`Manager.client` refuses every write
  (:class:`~manager.errors.WriteFenced`, nothing sent) while this replica does not hold
  the Lease on its own clock — a standby, a leader past its renew deadline (paused,
  partitioned), a leader that released or lost the Lease. Leader-only work runs under the
  leader fence, a sharded reconcile under its key's fence; a write made outside any fence
  context (a thread started without :func:`contextvars.copy_context`) falls back to the
  leader fence — and is refused when the manager has sharded controllers, since nothing
  tells which key it belongs to. Writes before :meth:`run` (set-up) and those of
  runnables added with ``leader_only=False`` are not fenced. Before the Lease is released,
  writes still in flight under it (an Event's POST) are abandoned, their connections shut
  down.
* Fleets (:mod:`manager.fleet`): with cluster providers (``options.fleet``, or one a
  plugin adds), the fleet runs beside the informers (on every replica with warm standby)
  and engages each member cluster on its own; fleet-wide controllers are leader-only
  work, their writes to every cluster fenced by the leader Lease of this (the home)
  cluster — or, sharded by cluster (:mod:`manager.fleet.sharded`), run on every replica
  in the clusters the shard ring gives it, each cluster's writes fenced by the shard
  Lease and the ring's ownership of that cluster. ``/readyz?verbose`` lists each cluster
  (``cluster/<name>``, informational), ``/statusz`` has them in a table.
* ``/healthz``: the process, its informer threads, its election thread and its Event
  sender are alive (a sender that ended by itself fails check ``event-sender`` until the
  manager stops; one that ended because the manager stops does not). ``/readyz``:
  caches synced — a standby with synced caches is ready; readiness does not mean
  leadership.

Every thread is named and non-daemon. ``run`` may be called once.

Thread-safe: wiring (``controller``, ``add``, checks) happens before ``run``.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, cast

from manager.cache.factory import InformerFactory
from manager.cache.informer import SharedInformer
from manager.cache.lister import Lister
from manager.cache.sharded import SHARD_BY_OWNER, ShardedInformer
from manager.cache.store import IndexFunc
from manager.client import KubeClient
from manager.controller import Controller
from manager.errors import ClusterNotFound, WriteFenced
from manager.events import EventBroadcaster, EventRecorder
from manager.fencing import FENCED_WRITES, IN_FLIGHT, UNFENCED, Fence, ValidityFence, fenced
from manager.fleet.cluster import Cluster, HomeCluster
from manager.fleet.controller import FleetController, ReconcilerFactory, is_factory
from manager.fleet.fleet import Fleet, FleetOptions, WatchScope
from manager.fleet.provider import ClusterProvider
from manager.fleet.sharded import ClusterShards
from manager.handler import (
    EnqueueRequestForObject,
    EnqueueRequestForOwner,
    EnqueueRequestsFromMapFunc,
    EventMapper,
    MapFunc,
)
from manager.hashring import SHARD_BY_NAMESPACE, SHARD_BY_UID
from manager.healthz import Checks, EndpointServer, Negotiated, Route
from manager.leaderelection import LEASES, LeaderElectionConfig, LeaderElector, default_identity
from manager.metrics import metrics_route
from manager.metricsauth import MetricsAuth
from manager.predicate import Predicate
from manager.reconcile import Reconciler
from manager.resources import Resource
from manager.served import WhenServed
from manager.servingcert import ServingCertificate
from manager.sharding import (
    RING_LABEL,
    SHARD_OWNED,
    SHARD_PRIMARY,
    KeyHashes,
    ShardedReconciler,
    ShardingOptions,
    ShardRing,
)
from manager.webhook.configuration import MutatingWebhook, ValidatingWebhook
from manager.webhook.conversion import Conversion
from manager.webhook.server import WebhookServer, WebhookServerOptions
from manager.workqueue import RateLimiter
from manager.zpages import ControllerStatus, Status, flag_values, flagz_route, statusz_route

if TYPE_CHECKING:
    from manager.webhook.certificates import ManagedCertificates

__all__ = ["ControllerBuilder", "Manager", "ManagerOptions", "Runnable"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True, slots=True)
class ManagerOptions:
    """How a manager runs. Defaults follow controller-runtime."""

    name: str = "overseer"  # component name: events source, logs
    metrics_bind_address: str = ":8080"  # "0" disables /metrics
    metrics_secure: bool = False  # HTTPS + TokenReview/SubjectAccessReview (file default: on)
    metrics_cert_dir: str = ""  # tls.crt/tls.key here; "" = self-signed at start
    metrics_cert_name: str = "tls.crt"  # the certificate's file name in metrics_cert_dir
    metrics_key_name: str = "tls.key"  # the key's file name in metrics_cert_dir
    metrics_auth_cache_ttl: float = 10.0  # seconds a review's answer is reused
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
    sharding: ShardingOptions | None = None  # the ring of sharded controllers (None: none)
    fleet: FleetOptions | None = None  # the clusters of a fleet (None: none configured)
    webhook: WebhookServerOptions = field(default_factory=WebhookServerOptions)  # if declared

    def __post_init__(self) -> None:
        problems = []
        if self.graceful_shutdown_timeout < 0:
            problems.append("graceful_shutdown_timeout must be >= 0")
        if self.cache_sync_timeout <= 0:
            problems.append("cache_sync_timeout must be > 0")
        if self.metrics_auth_cache_ttl < 0:
            problems.append("metrics_auth_cache_ttl must be >= 0")
        if problems:
            raise ValueError("invalid ManagerOptions: " + "; ".join(problems))


class Runnable(Protocol):
    """Anything the manager runs in its own thread until ``stop`` is set."""

    name: str

    def run(self, stop: threading.Event) -> None: ...


@dataclass(frozen=True, slots=True)
class _Scope:
    """What one informer holds: a resource in a namespace (None: all) with selectors."""

    resource: Resource
    namespace: str | None
    label_selector: str | None
    field_selector: str | None

    @classmethod
    def of(
        cls,
        mgr: Manager,
        resource: Resource,
        namespace: str | None,
        label_selector: str | None,
        field_selector: str | None = None,
    ) -> _Scope:
        ns = (namespace or mgr.options.namespace or None) if resource.namespaced else None
        return cls(resource, ns, label_selector or None, field_selector or None)


def _share(listed: _Scope, lister: Lister, watched: _Scope, informer: SharedInformer) -> None:
    """Let a lister of every namespace read a namespace a controller watches (same
    resource and selectors) from that watch's cache."""
    if (
        listed.namespace is None
        and watched.namespace is not None
        and (listed.resource, listed.label_selector, listed.field_selector)
        == (watched.resource, watched.label_selector, watched.field_selector)
    ):
        lister.share(watched.namespace, informer)


class ControllerBuilder:
    """Wires a controller: ``for_`` the primary resource, ``owns`` children, ``watches``
    anything else; ``complete()`` adds it to the manager (controller-runtime's builder)."""

    def __init__(
        self,
        mgr: Manager,
        name: str,
        reconciler: Reconciler | ReconcilerFactory,
        *,
        workers: int,
        rate_limiter: RateLimiter[Hashable] | None,
        sharded: bool = False,
        fleet: bool = False,
        rate_limiters: Callable[[], RateLimiter[Hashable]] | None = None,
    ) -> None:
        self._mgr = mgr
        self._sharded = sharded
        self._sharded_reconciler: ShardedReconciler | None = None
        self._fleet: FleetController | None = None
        self._primary: Resource | None = None
        self._primary_informer: SharedInformer | None = None
        if fleet:
            if sharded:
                mgr._shard_fleet_by_cluster(name)
            else:
                mgr._fleet_not_sharded(name)
            if rate_limiters is None and rate_limiter is not None:
                raise ValueError(
                    f"controller {name} is fleet-wide: give rate_limiters (a factory: one "
                    "limiter per cluster, so that one cluster's failures back off alone)"
                )
            self._fleet = FleetController(
                name,
                mgr.fleet,
                reconciler,
                workers=workers,
                rate_limiters=rate_limiters,
                sharded=sharded,
            )
            self._controller: Controller = self._fleet
            return
        made = (  # a factory makes it for the manager's own cluster
            cast(ReconcilerFactory, reconciler)(mgr.cluster())
            if is_factory(reconciler)
            else cast(Reconciler, reconciler)
        )
        if sharded:
            if mgr.shards is None:
                raise ValueError(
                    f"controller {name} is sharded, but the manager has no sharding options"
                )
            made = self._sharded_reconciler = ShardedReconciler(mgr.shards, made)
        self._controller = Controller(name, made, workers=workers, rate_limiter=rate_limiter)

    def for_(
        self,
        resource: Resource,
        *predicates: Predicate,
        namespace: str | None = None,
        label_selector: str | None = None,
    ) -> ControllerBuilder:
        """The primary resource: each object is its own request. Sharded, its cache holds
        this replica's share only (:meth:`Manager.informer` with ``shard="primary"``).
        Fleet-wide, every engaged cluster caches it.

        Raises:
            ValueError: sharded by namespace with a cluster-scoped primary resource.
        """
        if self._fleet is not None:
            self._fleet_watch(
                resource, namespace, label_selector, EnqueueRequestForObject(), predicates
            )
            self._primary = resource
            return self
        shard = None
        if self._sharded_reconciler is not None:
            ring = self._sharded_reconciler.ring
            if ring.shard_by == SHARD_BY_NAMESPACE and not resource.namespaced:
                raise ValueError(
                    f"controller {self._controller.name}: sharding.shardBy is namespace, but "
                    f"its primary resource {resource} is cluster-scoped (every key would hash "
                    "alike): shard it by uid"
                )
            shard = SHARD_PRIMARY
        informer = self._watch_informer(resource, namespace, label_selector, shard)
        if self._sharded_reconciler is not None:
            self._sharded_reconciler.keys = KeyHashes(self._sharded_reconciler.ring, informer)
        self._controller.for_(informer, *predicates)
        self._primary = resource
        self._primary_informer = informer
        return self

    def owns(
        self,
        resource: Resource,
        *predicates: Predicate,
        namespace: str | None = None,
        label_selector: str | None = None,
    ) -> ControllerBuilder:
        """Objects of ``resource`` controlled by a primary object wake that object; the
        request follows the owner's scope (a cluster-scoped owner such as a Namespace is
        requested with namespace ""). ``namespace`` and ``label_selector`` narrow what is
        cached and watched (the informer is shared with every other user of that scope,
        e.g. ``mgr.lister(resource, label_selector=...)``); without them, every object
        of ``resource`` in the manager's watch namespace is cached."""
        if self._primary is None:
            raise RuntimeError("owns() needs for_() first: the owner kind comes from it")
        if self._fleet is not None:
            owner = EnqueueRequestForOwner(
                self._primary.group, self._primary.kind, owner_namespaced=self._primary.namespaced
            )
            self._fleet_watch(resource, namespace, label_selector, owner, predicates)
            return self
        # sharded: only objects whose owner is in our share (by namespace, or by the
        # controller owner's uid hash, filtered on the client)
        informer = self._watch_informer(
            resource, namespace, label_selector, SHARD_OWNED if self._sharded else None
        )
        self._controller.owns(
            informer,
            self._primary.group,
            self._primary.kind,
            *predicates,
            owner_namespaced=self._primary.namespaced,
        )
        return self

    def watches(
        self,
        resource: Resource,
        mapper: EventMapper | MapFunc,
        *predicates: Predicate,
        namespace: str | None = None,
        label_selector: str | None = None,
    ) -> ControllerBuilder:
        """Events of ``resource`` wake the requests ``mapper`` returns: a map function
        ``obj -> [Request, ...]`` (fan-out: one object wakes many; or none). ``namespace``
        and ``label_selector`` narrow what is cached and watched, as for :meth:`owns`.
        Its cache holds the whole resource (in that scope), sharded controller or not: a
        map function may send any object to any key (keys not in this replica's share
        are skipped)."""
        if not hasattr(mapper, "requests"):
            mapper = EnqueueRequestsFromMapFunc(mapper)
        if self._fleet is not None:
            self._fleet_watch(resource, namespace, label_selector, mapper, predicates)
            return self
        informer = self._watch_informer(resource, namespace, label_selector)
        self._controller.watch(informer, mapper, *predicates)
        return self

    def _fleet_watch(
        self,
        resource: Resource,
        namespace: str | None,
        label_selector: str | None,
        mapper: EventMapper,
        predicates: Sequence[Predicate],
    ) -> None:
        if namespace and not resource.namespaced:
            raise ValueError(f"{resource} is cluster-scoped: it takes no namespace")
        assert self._fleet is not None
        scope = WatchScope(resource, namespace or None, label_selector or None)
        self._fleet.watch_scope(scope, mapper, *predicates)

    def _watch_informer(
        self,
        resource: Resource,
        namespace: str | None,
        label_selector: str | None,
        shard: str | None = None,
    ) -> SharedInformer:
        if namespace and not resource.namespaced:
            raise ValueError(f"{resource} is cluster-scoped: it takes no namespace")
        informer = self._mgr.informer(
            resource, namespace=namespace, label_selector=label_selector, shard=shard
        )
        self._mgr._watch_added(_Scope.of(self._mgr, resource, namespace, label_selector), informer)
        return informer

    def complete(self) -> Controller:
        """Add the controller to the manager. Leader-elected (the default), it runs only
        while leading; sharded, it runs on every replica for the keys the ring gives it
        (:mod:`manager.sharding`). After :meth:`Manager.run` has started this works too:
        the controller starts at once if it may (its informers first sync), else as soon
        as it may. Fleet-wide, it runs while leading, in every engaged cluster
        (:mod:`manager.fleet.controller`): the :class:`~manager.fleet.controller.
        FleetController` is returned; fleet-wide and sharded, it runs on every replica, in
        the clusters the ring gives it (:mod:`manager.fleet.sharded`)."""
        if self._fleet is not None:
            if self._primary is None:
                raise RuntimeError("a fleet-wide controller needs for_(): its keys come from it")
            # sharded by cluster: on every replica, in the clusters the ring gives it
            self._mgr.add(self._fleet, leader_only=not self._sharded)
            return self._fleet
        if not self._sharded:
            self._mgr.add(self._controller, leader_only=True)
            return self._controller
        if self._primary_informer is None or self._sharded_reconciler is None:
            raise RuntimeError("a sharded controller needs for_(): its keys come from it")
        keys = self._sharded_reconciler.keys
        assert keys is not None
        self._mgr._add_sharded(self._controller, keys)
        return self._controller


class Manager:
    """Owns the client, the informer factory, the event recorder and every runnable.

    Args:
        client: the API client (the manager wraps it in its write fence).
        options: how it runs.
        flags: what ``/flagz`` shows: the effective configuration as ``(key, value)``
            pairs, secrets already redacted (:func:`manager.zpages.flag_values`; the CLI
            gives the whole file). Default: the options.
    """

    def __init__(
        self,
        client: KubeClient,
        options: ManagerOptions | None = None,
        *,
        flags: Sequence[tuple[str, str]] | None = None,
    ) -> None:
        self.options = options or ManagerOptions()
        self.identity = self.options.identity or default_identity()
        self._fence = ValidityFence(
            self._write_validity,
            reason="not_leader",
            message="this replica does not hold the leader Lease (on its own clock)",
        )
        # Every write through the manager's client asks a fence (manager.fencing): the
        # one its work runs under (leader-only work: the leader's; a sharded reconcile:
        # its key's); a write from outside any (a thread started without the context)
        # falls back to the leader's, or is refused when keys are sharded.
        self.client = client.with_fence(_FallbackFence(self))
        self._election_client = client
        self.factory = InformerFactory(client, namespace=self.options.namespace)
        self.events = EventBroadcaster(self.client, component=self.options.name)
        self._leader_runnables: list[Runnable] = []
        self._runnables: list[Runnable] = []
        self._waiters: list[WhenServed] = []  # when_served()
        # which informers controllers watch and which listers read: a lister of another
        # scope than its resource's watches is a second cache (see scope_warnings)
        self._watched: list[tuple[_Scope, SharedInformer]] = []
        self._listed: list[tuple[_Scope, SharedInformer, Lister]] = []
        self._health = Checks()
        self._ready = Checks()
        self._started = False
        self._finished = False
        self._stopping = False  # the graceful stop has begun
        self._drained = False  # every leader-only runnable has ended: the Lease may go
        self._leading = threading.Event()
        self._lost = threading.Event()
        self._leader_stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._informers_started = threading.Event()
        self._informer_stop = threading.Event()
        self._wiring = threading.Lock()  # runnables added while running
        self._leader_threads: list[threading.Thread] = []
        self._controllers_started = False
        self._ring_started = False
        self._elector: LeaderElector | None = None
        self._elector_thread: threading.Thread | None = None
        self._shard_stop = threading.Event()  # sharded controllers stop taking work
        self._ring_stop = threading.Event()  # the ring stops (and may release its Lease)
        self._sharded: list[Controller] = []
        self._shard_threads: list[threading.Thread] = []
        self.shards: ShardRing | None = None
        """The ring of this manager's sharded controllers (None without sharding)."""
        if self.options.sharding is not None:
            self.shards = self._shard_ring(self.options.sharding)
        self._health.add("ping", lambda: None)
        self._health.add("informers", self._informers_alive)
        self._health.add("leader-election", self._elector_alive)
        self._health.add("event-sender", self._events_alive)
        self._ready.add("informers-synced", self._informers_synced)
        if self.shards is not None:
            self._health.add("shard-lease", self.shards.elector_alive)
            self._ready.add("sharding", self.shards.ready_reason)
        self._started_wall = time.time()
        self._started_mono = time.monotonic()
        self._controllers: list[tuple[Controller, str]] = []  # (controller, mode)
        zpages: dict[str, Route | Negotiated] = {
            "/statusz": Negotiated(statusz_route(self.status)),
            "/flagz": flagz_route(
                self.options.name, flag_values(self.options) if flags is None else flags
            ),
        }
        self.serving_cert: ServingCertificate | None = None
        """The metrics server's certificate (None: plain HTTP)."""
        guard = None
        if self.options.metrics_secure:
            self.serving_cert = ServingCertificate(
                self.options.metrics_cert_dir,
                cert_name=self.options.metrics_cert_name,
                key_name=self.options.metrics_key_name,
            )
            # unfenced: a standby answers scrapes too
            guard = MetricsAuth(client, cache_ttl=self.options.metrics_auth_cache_ttl)
        self._metrics_server = EndpointServer(
            "metrics",
            self.options.metrics_bind_address,
            {"/metrics": metrics_route, **zpages},
            guard=guard,
            tls=None if self.serving_cert is None else self.serving_cert.context,
        )
        self._probe_server = EndpointServer(
            "probes",
            self.options.health_probe_bind_address,
            {"/healthz": self._health.route("healthz"), "/readyz": self._ready.route("readyz")},
        )
        self.certificates: ManagedCertificates | None = None
        """With managed webhook certificates: the certificate, its watcher and rotator."""
        if self.options.webhook.managed is not None:
            from manager.webhook.certificates import ManagedCertificates

            self.certificates = ManagedCertificates(
                self.client,
                self.options.webhook,
                lambda: self.webhooks.declarations(),  # noqa: PLW0108 (the server comes next)
            )
        self._certificates_added = False
        self.webhooks = WebhookServer(
            self.options.webhook,
            certificate=None if self.certificates is None else self.certificates.certificate,
        )
        """The webhook server: serves once a webhook or conversion is declared."""
        self._ready.add("webhook-server", self.webhooks.ready_reason)
        self._stop_seen: float | None = None  # when run() saw the stop (the drain counts from it)
        self._fleet: Fleet | None = None
        self._fleet_started = False
        self._fleet_sharded: bool | None = None  # its controllers sharded by cluster
        if self.options.fleet is not None:
            self._fleet = Fleet.from_options(
                self, self.options.fleet, namespace=self._own_namespace()
            )
            self._ready.add_informational(self._fleet.ready_reasons)

    # -- wiring ----------------------------------------------------------------------

    @property
    def fleet(self) -> Fleet:
        """The clusters this manager works in besides its own (:mod:`manager.fleet`):
        configured by ``options.fleet``, or made, empty, on first use (a plugin that adds
        a cluster provider, a fleet-wide controller)."""
        with self._wiring:
            fleet = self._fleet
            if fleet is None:
                fleet = self._fleet = Fleet(self)
                self._ready.add_informational(fleet.ready_reasons)
            start = self._started and not self._fleet_started and self._informers_started.is_set()
        if start:
            self._start_fleet()
        return fleet

    def add_cluster_provider(self, provider: ClusterProvider) -> None:
        """Find clusters with ``provider`` too (a plugin's, e.g. one reading
        ClusterProfiles): :meth:`Fleet.add_provider <manager.fleet.fleet.Fleet.add_provider>`."""
        self.fleet.add_provider(provider)

    def cluster(self, name: str = "") -> Cluster:
        """A cluster to read and write: ``""`` is this manager's own (its client, caches,
        recorder), any other name an engaged cluster of the fleet whose caches have
        synced. A cluster-aware reconciler reads in one and writes in another with it.

        Raises:
            ClusterNotFound: no cluster of that name is engaged and ready now.
        """
        if not name:
            return HomeCluster(self)
        fleet = self._fleet
        if fleet is None:
            raise ClusterNotFound(name)
        return fleet.cluster(name)

    def informer(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
        shard: str | None = None,
    ) -> SharedInformer:
        """The shared informer for this scope (one per scope for the whole manager).

        Asked for after the manager's informers started (a watch added while running),
        it is started at once; readers wait for its first sync (see :class:`Lister`) and
        ``/readyz`` reports it until it has synced, as controller-runtime's cache does.

        ``shard`` (with sharding options): ``"primary"`` caches this replica's share of
        the resource (objects whose uid, or namespace, hashes into its ranges);
        ``"owned"`` the objects whose controller owner is in its share (by namespace:
        the same ranges; by uid: filtered on the client by the owner's uid). Such
        informers follow the ring (:meth:`~manager.sharding.ShardRing.add_informer`).

        Raises:
            ValueError: ``shard`` without sharding options, or not one of the two.
        """
        shard_by = None
        if shard is not None:
            if self.shards is None:
                raise ValueError(f"a sharded informer of {resource} needs sharding options")
            if shard not in (SHARD_PRIMARY, SHARD_OWNED):
                raise ValueError(f"shard must be 'primary' or 'owned', got {shard!r}")
            shard_by = self.shards.shard_by
            if shard == SHARD_OWNED and shard_by == SHARD_BY_UID:
                shard_by = SHARD_BY_OWNER
        informer = self.factory.informer(
            resource,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            indexers=indexers,
            shard_by=shard_by,
        )
        if self.shards is not None and isinstance(informer, ShardedInformer):
            self.shards.add_informer(informer)
        if self._informers_started.is_set() and not informer.started:
            self.factory.start(self._informer_stop)
            with self._wiring:
                self._threads.extend(t for t in self.factory.threads() if t not in self._threads)
        return informer

    def lister(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        shard: str | None = None,
    ) -> Lister:
        """A lister over the shared informer of this scope: the same informer that
        ``for_``/``owns``/``watches`` use for the same resource, namespace and selectors,
        so a reconcile reads the cache whose event woke it. A read waits (up to the cache
        sync timeout) for that informer's first sync once it runs. A sharded controller
        reads its primary objects with ``shard="primary"`` and its owned ones with
        ``shard="owned"`` (the caches its ``for_``/``owns`` use: this replica's share).

        Raises:
            ValueError: a namespace given for a cluster-scoped resource.
        """
        if namespace and not resource.namespaced:
            raise ValueError(f"{resource} is cluster-scoped: a lister for it takes no namespace")
        informer = self.informer(
            resource,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            shard=shard,
        )
        scope = _Scope.of(self, resource, namespace, label_selector, field_selector)
        lister = Lister(
            informer.indexer,
            resource,
            informer=informer,
            sync_timeout=self.options.cache_sync_timeout,
            scope_namespace=scope.namespace,
        )
        self._listed.append((scope, informer, lister))
        for watched, by in self._watched:
            _share(scope, lister, watched, by)
        return lister

    def _watch_added(self, scope: _Scope, informer: SharedInformer) -> None:
        self._watched.append((scope, informer))
        for listed, _, lister in self._listed:
            _share(listed, lister, scope, informer)

    def scope_warnings(self) -> list[str]:
        """Listers whose scope is none of the scopes controllers watch their resource
        with, and that cannot read a watched namespace from the watch's cache (a lister
        of every namespace reads one a controller watches, with the same selectors, from
        that controller's cache): such a lister is a second cache, filled by its own
        watch, that may lag behind the event that woke a reconcile ("not in cache" for
        an object that exists). One message per lister, naming both scopes. Logged at
        start."""
        watched = {id(i) for _, i in self._watched}
        out = []
        seen: set[int] = set()
        for scope, informer, lister in self._listed:
            if id(informer) in watched or id(informer) in seen or lister.shared():
                continue
            seen.add(id(informer))
            others = sorted({i.name for s, i in self._watched if s.resource == scope.resource})
            if others:
                sharded = any("shardBy=" in name for name in others)
                fix = (
                    "read a sharded controller's caches with ctx.lister(..., "
                    'shard="primary") (its for_()) or shard="owned" (its owns()), with the '
                    "same namespace and selectors"
                    if sharded
                    else "give mgr.lister() the same namespace and selectors as "
                    "for_()/owns()/watches()"
                )
                out.append(
                    f"the lister of {informer.name} reads another cache than the "
                    f"controller's watch of {' and '.join(others)}: {fix}, so that a "
                    "reconcile reads the cache whose event woke it"
                )
        return out

    def recorder(self, component: str | None = None) -> EventRecorder:
        """An event recorder whose events come from ``component`` (default: the manager's)."""
        return self.events.recorder(component)

    def controller(
        self,
        name: str,
        reconciler: Reconciler | ReconcilerFactory,
        *,
        workers: int = 1,
        rate_limiter: RateLimiter[Hashable] | None = None,
        sharded: bool = False,
        fleet: bool = False,
        rate_limiters: Callable[[], RateLimiter[Hashable]] | None = None,
    ) -> ControllerBuilder:
        """Start wiring a controller; finish with ``.complete()``. ``sharded``: run it on
        every replica, each for its share of the keys (needs ``options.sharding``).
        ``fleet``: run it in every engaged cluster of the fleet (:mod:`manager.fleet`),
        each cluster with its own queue, workers and rate limiter (one from
        ``rate_limiters`` per cluster).

        ``reconciler`` is a :class:`~manager.reconcile.Reconciler`, or a factory
        ``reconciler(cluster)`` (a :class:`~manager.fleet.cluster.Cluster` in, a
        Reconciler out): fleet-wide, called for each engaged cluster; otherwise called
        once, with this manager's own cluster. A plugin written with a factory runs
        fleet-wide or not unchanged.

        Raises:
            ValueError: sharded without sharding options; fleet-wide controllers some
                sharded by cluster and some not.
        """
        return ControllerBuilder(
            self,
            name,
            reconciler,
            workers=workers,
            rate_limiter=rate_limiter,
            sharded=sharded,
            fleet=fleet,
            rate_limiters=rate_limiters,
        )

    def add(self, runnable: Runnable, *, leader_only: bool = True) -> None:
        """Run ``runnable`` (only while leading, unless ``leader_only=False``).

        Allowed while the manager runs: a runnable for every replica starts at once; a
        leader-only one starts at once if this replica's controllers run, else when they
        start. Nothing starts once the manager is stopping.
        """
        if isinstance(runnable, Controller):
            with self._wiring:
                mode = "leader-elected" if leader_only else "every replica"
                if isinstance(runnable, FleetController):
                    mode = "fleet, sharded by cluster" if runnable.sharded else "fleet"
                self._controllers.append((runnable, mode))
        with self._wiring:
            if not self._started:
                (self._leader_runnables if leader_only else self._runnables).append(runnable)
                return
            if self._stopping or self._finished or self._lost.is_set():
                logger.warning(
                    "manager stopping: runnable not started", extra={"runnable": runnable.name}
                )
                return
            if not leader_only:
                self._runnables.append(runnable)
                self._spawn(
                    f"runnable/{runnable.name}", runnable.run, self._informer_stop, fence=UNFENCED
                )
                return
            self._leader_runnables.append(runnable)
            if self._controllers_started:
                self._start_leader_runnable(runnable)

    def webhook(
        self, hook: ValidatingWebhook | MutatingWebhook | Conversion, *, owner: str = ""
    ) -> None:
        """Serve an admission webhook or a CRD's conversion on every replica (see
        :mod:`manager.webhook`); ``owner`` names the controller that declares it. Allowed
        while the manager runs: the server starts at once if it was not serving.

        Raises:
            InvalidWebhook: another declaration has the same name (or CRD) or path.
            ServingCertError, BindError: the server had to start and could not.
        """
        self.webhooks.register(hook, owner or "(manager)")
        with self._wiring:
            running = self._started and not (self._stopping or self._finished)
        if running and not self.webhooks.started:
            certificates = self.certificates
            if certificates is not None and not self._certificates_added:
                self._certificates_added = True
                self.add(certificates.watcher, leader_only=False)
                self.add(certificates.rotator)
            self.webhooks.start()

    @property
    def webhook_address(self) -> tuple[str, int] | None:
        """The webhook server's bound ``(host, port)`` while it serves, else None."""
        return self.webhooks.address

    def when_served(
        self, names: str | Sequence[str], wire: Callable[..., None], *, name: str
    ) -> WhenServed:
        """Call ``wire(*resources)`` once every resource of ``names`` is served, found by
        discovery by any name kubectl takes (``"widgets.example.com"``): for a controller
        of a custom resource whose CRD may be installed after the manager starts. Until
        then the replica is not ready (readiness check ``<name>-served`` says what is
        missing) and a log line says so; nothing crashes. ``wire`` builds informers and
        controllers as ``setup`` does; they start at once (or when this replica leads).
        ``name`` names the waiter (the controller's name). See :mod:`manager.served`.
        """
        waiter = WhenServed(self.client, name, [names] if isinstance(names, str) else names, wire)
        self.add_ready_check(f"{name}-served", waiter.ready_reason)
        with self._wiring:
            self._waiters.append(waiter)
        self.add(waiter, leader_only=False)
        return waiter

    @property
    def waiters(self) -> list[WhenServed]:
        """The :meth:`when_served` waiters, in the order they were asked for."""
        with self._wiring:
            return list(self._waiters)

    def add_health_check(self, name: str, check: object) -> None:
        """Add a liveness check: a callable returning None (healthy) or a reason."""
        self._health.add(name, check)  # type: ignore[arg-type]

    def add_ready_check(self, name: str, check: object) -> None:
        """Add a readiness check: a callable returning None (ready) or a reason."""
        self._ready.add(name, check)  # type: ignore[arg-type]

    # -- facts -----------------------------------------------------------------------

    def is_leader(self) -> bool:
        """Whether this replica leads now. With leader election: it holds the Lease and,
        on its own clock, its renew deadline has not passed (False the moment it does,
        and after the Lease was lost or released). Without: while :meth:`run` runs."""
        if self._lost.is_set() or self._finished:
            return False
        if not self.options.leader_election:
            return self._leading.is_set()
        elector = self._elector
        return elector is not None and elector.is_leader()

    def role(self) -> str:
        """This replica's part now, as ``/statusz`` shows it: ``leader``, ``standby``,
        ``leader (no election)`` (leader election off: this replica runs the leader-only
        work, unelected), ``starting``, ``stopping``, ``stopped`` or ``lost its
        Lease``."""
        if self._lost.is_set():
            return "lost its Lease"
        if self._finished:
            return "stopped"
        if self._stopping:
            return "stopping"
        if not self._started:
            return "starting"
        if not self.options.leader_election:
            return "leader (no election)"
        return "leader" if self.is_leader() else "standby"

    def status(self) -> Status:
        """A snapshot of this replica for ``/statusz``."""
        from manager import __version__

        elector = self._elector
        lease = ""
        if self.options.leader_election:
            namespace = (
                self.options.leader_election_namespace
                or os.environ.get("POD_NAMESPACE", "")
                or "default"
            )
            lease = f"{namespace}/{self.options.leader_election_id}"
        controllers = []
        with self._wiring:
            registered = list(self._controllers)
            leader_running = self._controllers_started and not self._stopping
            ring_running = self._ring_started and not self._stopping
        for controller, registered_mode in registered:
            error = controller.last_error
            running = {
                "sharded": ring_running,
                "leader-elected": leader_running,
                "fleet": leader_running,
            }.get(registered_mode, self._started and not self._finished)
            mode = registered_mode
            if mode == "leader-elected" and not self.options.leader_election:
                mode = "no-election"  # leader-only work, run here without an election
            controllers.append(
                ControllerStatus(
                    name=controller.name,
                    mode=mode,
                    running=running and not self._lost.is_set(),
                    workers=controller.workers,
                    active=controller.active_workers,
                    queue_depth=controller.queue_depth,
                    last_error="" if error is None else error[1],
                    last_error_time=None if error is None else error[0],
                )
            )
        return Status(
            component=self.options.name,
            version=__version__,
            python=sys.version.split()[0],
            identity=self.identity,
            started=self._started_wall,
            uptime=time.monotonic() - self._started_mono,
            role=self.role(),
            leader=elector.leader() if elector is not None else "",
            lease=lease,
            ring=None if self.shards is None else self.shards.status(),
            controllers=tuple(sorted(controllers, key=lambda c: c.name)),
            clusters=() if self._fleet is None else self._fleet.status(),
        )

    @property
    def metrics_address(self) -> tuple[str, int] | None:
        return self._metrics_server.address

    @property
    def metrics_scheme(self) -> str:
        """``https`` when metrics are secure, else ``http``."""
        return self._metrics_server.scheme

    @property
    def health_probe_address(self) -> tuple[str, int] | None:
        return self._probe_server.address

    def _write_validity(self) -> float | None:
        """The write fence's question: for how long may this replica write (None: no
        limit; <= 0: not now)? Before :meth:`run` (set-up) and without leader election,
        always; while running with it, only while the Lease is held on our clock."""
        if not self._started or not self.options.leader_election:
            return None
        if self._lost.is_set():
            return 0.0
        elector = self._elector
        return 0.0 if elector is None else elector.valid_for()

    def _informers_alive(self) -> str | None:
        if not self._informers_started.is_set():
            return None
        dead = [
            t.name for t in self._threads if t.name.startswith("informer/") and not t.is_alive()
        ]
        return f"informer threads ended: {', '.join(dead)}" if dead else None

    def _elector_alive(self) -> str | None:
        thread = self._elector_thread
        if thread is None or thread.is_alive() or self._stopping:
            return None
        return "the leader election thread has ended"

    def _events_alive(self) -> str | None:
        """The Event sender survives every failure of a write or a batch; if it has ended
        anyway (or could not start), reconciles record Events nobody sends: restart us.
        Not while stopping, when it ends by design."""
        if self._stopping or self._finished:
            return None
        return self.events.sender_alive()

    def _informers_synced(self) -> str | None:
        if not self._informers_started.is_set():
            if self.options.warm_standby or not self.options.leader_election:
                return "informers not started"
            return None  # cold standby: nothing to sync until leading
        pending = [i.name for i in self.factory.informers() if not i.has_synced()]
        return f"not synced: {', '.join(pending)}" if pending else None

    def _lease_lost(self) -> bool:
        """Leadership, once acquired, is gone: reported lost, or past the renew deadline
        on our clock even if the election thread has not noticed yet (a stuck request)."""
        if self._lost.is_set():
            return True
        if self.shards is not None and self.shards.lost:
            self._on_lost("the shard Lease was lost")
            return True
        elector = self._elector
        if elector is not None and self._leading.is_set() and not elector.is_leader():
            self._on_lost("the renew deadline passed")
            return True
        return False

    def _own_namespace(self) -> str:
        """This replica's namespace: the leader election's, else ``$POD_NAMESPACE``, else
        ``default``."""
        return (
            self.options.leader_election_namespace
            or os.environ.get("POD_NAMESPACE", "")
            or "default"
        )

    def _shard_fleet_by_cluster(self, controller: str) -> None:
        """A fleet-wide controller is sharded: the fleet engages the clusters the shard
        ring gives this replica (:class:`~manager.fleet.sharded.ClusterShards`).

        Raises:
            ValueError: no sharding options; a fleet-wide controller that is not sharded.
        """
        if self.shards is None:
            raise ValueError(
                f"controller {controller} is sharded, but the manager has no sharding options"
            )
        fleet = self.fleet
        with self._wiring:
            if self._fleet_sharded is False:
                raise ValueError(
                    f"controller {controller}: the fleet-wide controllers are all sharded by "
                    "cluster or none (a replica engages its share of the clusters or all)"
                )
            first = self._fleet_sharded is None
            self._fleet_sharded = True
        if first:
            fleet.set_policy(ClusterShards(self.shards, fleet.reconsider))

    def _fleet_not_sharded(self, controller: str) -> None:
        with self._wiring:
            if self._fleet_sharded is True:
                raise ValueError(
                    f"controller {controller}: the fleet-wide controllers are all sharded by "
                    "cluster or none (a replica engages its share of the clusters or all)"
                )
            self._fleet_sharded = False

    def _start_fleet(self) -> None:
        """Run the fleet (its providers, its clusters' engagement) with the informers:
        on every replica with warm standby, else once leading."""
        with self._wiring:
            fleet = self._fleet
            if fleet is None or self._fleet_started or self._stopping or self._finished:
                return
            self._fleet_started = True
            self._spawn("fleet", fleet.run, self._informer_stop)

    def _shard_ring(self, options: ShardingOptions) -> ShardRing:
        namespace = (
            options.namespace
            or self.options.leader_election_namespace
            or os.environ.get("POD_NAMESPACE", "")
            or "default"
        )
        leases = self.informer(
            LEASES, namespace=namespace, label_selector=f"{RING_LABEL}={options.ring_name}"
        )
        return ShardRing(
            self._election_client,
            leases,
            options,
            identity=self.identity,
            namespace=namespace,
            on_lost=self._on_lost,
        )

    def _add_sharded(self, controller: Controller, keys: KeyHashes) -> None:
        """A sharded controller: on every replica, started with the ring (or at once when
        added while running)."""
        assert self.shards is not None
        self.shards.add_controller(controller, keys)
        with self._wiring:
            self._controllers.append((controller, "sharded"))
            self._sharded.append(controller)
            if self._ring_started and not (self._stopping or self._lost.is_set()):
                self._start_sharded(controller)

    def _start_sharded(self, controller: Controller) -> None:
        # Caller holds self._wiring.
        thread = self._spawn(f"controller/{controller.name}", controller.run, self._shard_stop)
        self._shard_threads.append(thread)

    def _on_lost(self, reason: str) -> None:
        """A Lease (the leader's, or this replica's shard Lease) is gone: leader-only and
        sharded work stops now (no drain)."""
        if self._lost.is_set():
            return
        self._lost.set()
        self._leader_stop.set()
        self._shard_stop.set()
        logger.error("leadership lost: stopping leader-only work", extra={"reason": reason})

    # -- running ---------------------------------------------------------------------

    def _spawn(
        self, name: str, target: object, *args: object, fence: Fence | None = None
    ) -> threading.Thread:
        if fence is None:
            run = target
        else:

            def run(*a: object) -> None:
                with fenced(fence):
                    target(*a)  # type: ignore[operator]

        t = threading.Thread(target=run, args=args, name=name)  # type: ignore[arg-type]
        self._threads.append(t)
        t.start()
        return t

    def _start_informers(self, informer_stop: threading.Event, stop: threading.Event) -> bool:
        """Start the informers and wait for their sync; False on timeout, on ``stop``, or
        when leadership is lost meanwhile (a cold standby syncs after acquiring)."""
        for warning in self.scope_warnings():
            logger.warning("lister scope differs from the watch", extra={"problem": warning})
        self.factory.start(informer_stop)
        self._informers_started.set()
        self._threads.extend(t for t in self.factory.threads() if t not in self._threads)
        self._start_fleet()  # its clusters sync on their own: the home sync does not wait
        deadline = time.monotonic() + self.options.cache_sync_timeout
        # polls ``stop`` too: a SIGTERM while the API server is unreachable must not wait
        # out the whole cache sync timeout (informer_stop is set only later)
        while not all(i.has_synced() for i in self.factory.informers()):
            if stop.is_set() or self._lease_lost() or time.monotonic() >= deadline:
                return False
            stop.wait(0.01)
        logger.info("caches synced", extra={"informers": len(self.factory.informers())})
        return True

    def run(self, stop: threading.Event) -> int:
        """Run until ``stop`` is set (returns 0) or leadership is lost (returns 1).

        Returns 1 as well when caches never synced, or when reconciles outlast the
        graceful shutdown timeout (the Lease is then not released: the process must exit
        so that nothing it runs writes again).

        Raises:
            RuntimeError: called twice.
            OSError: a bind address cannot be bound.
        """
        if self._started:
            raise RuntimeError("Manager.run may be called once")
        self._started = True
        self._started_wall = time.time()
        self._started_mono = time.monotonic()
        opts = self.options
        informer_stop = self._informer_stop
        leader_stop = self._leader_stop
        elector_stop = threading.Event()
        events_stop = threading.Event()
        leaving_now = True  # skip the flushes on the way out (lost, overrun, failed)
        try:
            # inside the try: a probe address in use stops the metrics server again
            if self.webhooks.has_routes:
                self._wire_certificates()
                self.webhooks.start()  # first: a replica is never ready before it serves
            if self.serving_cert is not None and self._metrics_server.enabled:
                self.serving_cert.load()  # a missing or broken certificate fails the start
            self._metrics_server.start()
            self._probe_server.start()
            self.events.start(events_stop)
            for r in self._runnables:
                # they run on every replica: leadership does not fence their writes
                self._spawn(f"runnable/{r.name}", r.run, informer_stop, fence=UNFENCED)
            # sharded controllers work on every replica: they need the caches everywhere
            warm = opts.warm_standby or not opts.leader_election or self.shards is not None
            if warm and not self._start_informers(informer_stop, stop):
                if stop.is_set():
                    leaving_now = False
                    return 0
                logger.error(
                    "caches did not sync in time", extra={"timeout": opts.cache_sync_timeout}
                )
                return 1
            if self.shards is not None:
                ring = self.shards
                self._spawn(
                    ring.name, lambda s: ring.run(s, release=lambda: self._drained), self._ring_stop
                )
                with self._wiring:
                    self._ring_started = True
                    for controller in self._sharded:
                        self._start_sharded(controller)
            if opts.leader_election:
                self._elector = LeaderElector(
                    self._election_client,
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
                    on_stopped_leading=lambda: (
                        None if elector_stop.is_set() else self._on_lost("the Lease was lost")
                    ),
                    on_new_leader=lambda who: logger.info("new leader", extra={"leader": who}),
                )
                self._elector_thread = self._spawn(
                    "leader-election", self._run_elector, elector_stop
                )
            else:
                self._leading.set()
            # wait for leadership (or stop)
            while not (stop.is_set() or self._leading.is_set() or self._lost.is_set()):
                stop.wait(0.05)
            if self._leading.is_set() and not stop.is_set() and not self._lease_lost():
                acquired = time.monotonic()
                if not self._informers_started.is_set() and not self._start_informers(
                    informer_stop, stop
                ):
                    if self._lease_lost():
                        return 1
                    if stop.is_set():
                        leaving_now = False
                        return self._graceful(elector_stop)
                    logger.error(
                        "caches did not sync in time", extra={"timeout": opts.cache_sync_timeout}
                    )
                    return 1
                if self._lease_lost():
                    return 1
                with self._wiring:
                    self._controllers_started = True
                    for r in self._leader_runnables:
                        self._start_leader_runnable(r)
                logger.info(
                    "leading: controllers started",
                    extra={"after_acquire_seconds": round(time.monotonic() - acquired, 3)},
                )
            while not (stop.is_set() or self._lease_lost()):
                stop.wait(0.05)
            self._stop_seen = time.monotonic()
            if self._lost.is_set():
                return 1  # at once; no drain: the process must exit now
            rc = self._graceful(elector_stop)
            leaving_now = rc != 0
            return rc
        finally:
            leader_stop.set()
            self._shard_stop.set()
            self._ring_stop.set()
            elector_stop.set()
            informer_stop.set()
            events_stop.set()
            if not leaving_now:
                self.events.shutdown(timeout=2.0)
                self.factory.shutdown(timeout=5.0)
            self._finished = True
            self._probe_server.stop()
            self._metrics_server.stop()
            self._stop_webhooks(graceful=not leaving_now)

    def _wire_certificates(self) -> None:
        """Managed webhook certificates: the Secret's watcher runs on every replica, its
        rotator as leader-only work (fenced). Called by :meth:`run` before anything
        starts."""
        certificates = self.certificates
        if certificates is None or self._certificates_added:
            return
        self._certificates_added = True
        with self._wiring:
            self._runnables.append(certificates.watcher)
            self._leader_runnables.append(certificates.rotator)

    def _stop_webhooks(self, *, graceful: bool) -> None:
        """Last of all: on a graceful stop, after answering (each answer closing its
        connection) until ``shutdown_delay`` has passed since the stop."""
        linger = 0.0
        if graceful:
            seen = self._stop_seen if self._stop_seen is not None else time.monotonic()
            linger = max(0.0, seen + self.options.webhook.shutdown_delay - time.monotonic())
        self.webhooks.stop(linger=linger, timeout=10.0 if graceful else 1.0)

    def _start_leader_runnable(self, runnable: Runnable) -> None:
        # Caller holds self._wiring.
        thread = self._spawn(
            f"controller/{runnable.name}", runnable.run, self._leader_stop, fence=self._fence
        )
        self._leader_threads.append(thread)

    def _run_elector(self, elector_stop: threading.Event) -> None:
        """The election thread: any way it ends other than by ``elector_stop`` is a lost
        Lease — a False return, and just as much an exception (the election failed, so
        nothing renews the Lease and another replica will take it)."""
        assert self._elector is not None
        try:
            if self._elector.run(elector_stop, release=self._may_release):
                return
            reason = "the Lease was lost"
        except BaseException:
            logger.exception("leader election failed")
            if elector_stop.is_set():
                return
            reason = "the leader election failed"
        self._on_lost(reason)

    def _graceful(self, elector_stop: threading.Event) -> int:
        """Stop taking work, let in-flight reconciles finish within the timeout, flush
        their Events, then release the Lease. Losing the Lease meanwhile ends it at once
        (1); reconciles outlasting the timeout end it without a release (1)."""
        with self._wiring:
            self._stopping = True  # from now on nothing new starts
            leader_threads = list(self._leader_threads) + list(self._shard_threads)
        timeout = self.options.graceful_shutdown_timeout
        logger.info("stopping: finishing in-flight reconciles", extra={"timeout": timeout})
        self._leader_stop.set()
        self._shard_stop.set()
        deadline = time.monotonic() + timeout
        while True:
            alive = [t for t in leader_threads if t.is_alive()]
            if self._lease_lost():
                logger.error(
                    "leadership lost while stopping: not waiting for in-flight reconciles",
                    extra={"threads": [t.name for t in alive]},
                )
                return 1
            remaining = deadline - time.monotonic()
            if not alive or remaining <= 0:
                break
            alive[0].join(min(0.05, remaining))
        if alive:
            logger.error(
                "reconciles still running after the graceful shutdown timeout; "
                "not releasing the Lease, and exiting",
                extra={"threads": [t.name for t in alive]},
            )
            elector_stop.set()  # no renew, no release: writes stop being allowed now
            self._ring_stop.set()  # the shard Lease too: kept, not released
            return 1
        # Events their reconciles recorded go out while the Lease is still ours; one still
        # on its way when the Lease goes is abandoned first (see _may_release).
        if not self.events.flush(max(deadline - time.monotonic(), 1.0)):
            logger.warning("events not all written before the Lease is released")
        self._drained = True
        elector_stop.set()  # the elector releases the Lease now that nothing writes
        self._ring_stop.set()  # and the ring its shard Lease
        if self._elector_thread is not None:
            self._elector_thread.join(max(1.0, self.options.retry_period * 2))
        for thread in self._threads:
            if thread.name.startswith("shard-ring/"):
                thread.join(max(2.0, self.options.retry_period * 2))
        logger.info("stopped cleanly")
        return 0

    def _may_release(self) -> bool:
        """Asked by the elector once leading has ended (the leader fence is closed): every
        leader-only runnable has ended, and every write made under the leader fence has
        been answered — none is still under way (an Event's POST, say: waited for, each
        one's timeout having been capped by the permission it was sent under), and none
        ended unanswered within a lease duration. Otherwise the Lease is not released
        but left to expire, so that a write still on its way cannot land after a standby
        took over at once (:meth:`~manager.fencing.WritesInFlight.settle`)."""
        if not self._drained:
            return False
        return IN_FLIGHT.settle(
            lambda fence: fence is self._fence or isinstance(fence, _FallbackFence),
            "the leader Lease is being released",
            timeout=2.0,
            window=self.options.lease_duration,
        )

    def join(self, timeout: float | None = None) -> bool:
        """Wait for every thread the manager started (after :meth:`run` returned)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for t in self._threads:
            t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._threads)


class _FallbackFence:
    """The fence of a write made through :attr:`Manager.client` outside any work's fence
    context — a thread a reconcile started without copying its context, say. Without
    sharded controllers every such write is leader work: the leader fence decides. With
    them, it cannot be told which key it belongs to, so it is refused."""

    def __init__(self, mgr: Manager) -> None:
        self._mgr = mgr

    def check(self) -> float | None:
        mgr = self._mgr
        if mgr._started and mgr._sharded:
            FENCED_WRITES.labels("no_fence").inc()
            raise WriteFenced(
                "write refused: made outside any reconcile's fence in a manager with sharded "
                "controllers (start threads with contextvars.copy_context().run so that "
                "their writes carry the fence of the work they belong to)",
                reason="no_fence",
            )
        return mgr._fence.check()

    def __repr__(self) -> str:
        return "FallbackFence"

"""The fleet: the clusters one manager works in, each engaged and disengaged on its own
(multicluster-runtime's provider → manager → ``Aware.Engage`` path, with its
``Coordinator`` as the :class:`ClusterPolicy`).

Who decides what:

* providers (:mod:`manager.fleet.provider`) say which clusters exist and how to reach
  them (:meth:`Fleet.engage` / :meth:`Fleet.disengage`);
* one :class:`ClusterPolicy` decides which of those this replica engages (default
  :class:`EngageAll`; sharded by cluster, :class:`~manager.fleet.sharded.ClusterShards`
  engages the share the shard ring gives this replica and calls :meth:`Fleet.reconsider`
  when the share changes);
* the fleet engages each cluster in a thread of its own (``fleet/<cluster>``), so one
  unreachable or slow cluster never holds up another: connect (a client with its own
  connection pool and rate limiter), start the informers every fleet-wide controller
  watches with, wait for them to sync — only then is the cluster *ready* and are its
  keys started (:class:`ClusterListener.cluster_ready`) — then probe it every
  ``probe_period`` seconds;
* new credentials for the same connection (a rotated token: the server, its CA, the TLS
  settings and client certificate unchanged) are swapped into the cluster's clients in
  place: the next request carries them, open watches go on, nothing is listed again;
* a cluster leaves when its provider drops it, when the policy no longer engages it,
  when how to connect to it changes (another server, CA, TLS setting or client
  certificate: it is then engaged again at once), when it has answered no probe for
  ``unreachable_after`` seconds, and when the manager stops.
  Leaving: first its keys stop (:meth:`ClusterListener.cluster_leaving`, which returns
  once in-flight reconciles of that cluster have finished), then its informers stop, its
  threads are joined, its client is closed and its caches are dropped: the memory is
  returned. An unreachable cluster is then probed with backoff (``probe_period``
  doubling, jittered, up to 30 times ``probe_period``) and engaged again once it answers.

The home cluster, when a member, uses the manager's own client and informers: it is
never dropped for being unreachable (the manager's own readiness covers it).

Readiness: :meth:`Fleet.ready_reasons` gives one line per cluster (``cluster/<name>`` in
``/readyz?verbose``); they are informational — a member that is down does not make the
replica unready (readiness gates the Service and rollouts of every replica, and a member
is as far from one replica as from the others). ``/readyz/cluster/<name>`` asks one.

Metrics (label ``cluster``): ``overseer_fleet_cluster_ready`` (1 while engaged with synced
caches), ``overseer_fleet_cluster_engagements_total`` (connections and caches built: first
engagement, new credentials, back from unreachable),
``overseer_fleet_cluster_unreachable_total``, ``overseer_fleet_cluster_credential_swaps_total``
(new credentials taken in place). The informers of a member carry
``cluster=<name>`` in their ``resource`` label, a fleet-wide controller's per-cluster
queue is ``name="<controller>/<cluster>"`` in the ``workqueue_*`` metrics.

Thread-safe: one lock guards the registry; engagement work happens outside it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final, Protocol, cast

from prometheus_client import Counter, Gauge

from manager.cache.backoff import Backoff
from manager.client import ClientOptions, KubeClient
from manager.client.kubeconfig import Credentials
from manager.errors import ApiError, ClusterNotFound, ConfigError
from manager.fleet.cluster import Cluster, HomeCluster, MemberCluster
from manager.fleet.provider import ClusterProvider, ClusterSource
from manager.fleet.providers import (
    CAPI_CLUSTER_NAME_LABEL,
    SECRETS,
    HomeProvider,
    KubeconfigFile,
    KubeconfigFiles,
    KubeconfigSecrets,
)
from manager.metrics import REGISTRY
from manager.resources import Resource
from manager.zpages import ClusterStatus

if TYPE_CHECKING:
    from manager.fencing import Fence
    from manager.manager import Manager

__all__ = [
    "CLUSTER_ENGAGEMENTS",
    "CLUSTER_READY",
    "CLUSTER_UNREACHABLE",
    "ClusterListener",
    "ClusterPolicy",
    "EngageAll",
    "Fleet",
    "FleetOptions",
    "WatchScope",
]

logger = logging.getLogger(__name__)

CLUSTER_READY = Gauge(
    "overseer_fleet_cluster_ready",
    "1 while a cluster of the fleet is engaged and its caches have synced, else 0.",
    ["cluster"],
    registry=REGISTRY,
)
CLUSTER_ENGAGEMENTS = Counter(
    "overseer_fleet_cluster_engagements_total",
    "Times a cluster's connection and caches were built: engaged, credentials changed, "
    "back after being unreachable.",
    ["cluster"],
    registry=REGISTRY,
)
CLUSTER_UNREACHABLE = Counter(
    "overseer_fleet_cluster_unreachable_total",
    "Times a cluster was disengaged because it answered no probe for unreachableAfter.",
    ["cluster"],
    registry=REGISTRY,
)
CLUSTER_CREDENTIAL_SWAPS = Counter(
    "overseer_fleet_cluster_credential_swaps_total",
    "New credentials of an engaged member taken in place (the same connection otherwise).",
    ["cluster"],
    registry=REGISTRY,
)

_POLL: Final = 0.02  # seconds between looks at a cluster's caches while they sync
_JOIN: Final = 10.0  # seconds to wait for a cluster's threads when it leaves


@dataclass(frozen=True, kw_only=True, slots=True)
class FleetOptions:
    """The fleet of a manager (``clusters:`` in the configuration). Defaults as there."""

    home: str = ""  # the home cluster is a member of this name ("": it is not a member)
    kubeconfigs: tuple[KubeconfigFile, ...] = ()  # a static list of clusters
    secrets_namespace: str | None = None  # kubeconfig Secrets here (None: off; "": own ns)
    secrets_selector: str = CAPI_CLUSTER_NAME_LABEL  # which Secrets (a label selector)
    secrets_key: str = "value"  # the data key of the kubeconfig in each
    probe_period: float = 10.0  # seconds between probes of an engaged member
    probe_timeout: float = 5.0  # seconds a probe waits for its answer
    unreachable_after: float = 60.0  # seconds without an answer before a member leaves
    reload_period: float = 30.0  # seconds between reads of the kubeconfig files


class ClusterPolicy(Protocol):
    """Which of the clusters the providers know this replica engages (multicluster-runtime's
    ``Coordinator``). A policy whose answer changes calls :meth:`Fleet.reconsider`.

    Optionally, a policy also has ``known(names)`` (called, with the fleet's lock held,
    with every cluster the providers know, before it is asked about them: a policy that
    places clusters needs the whole set), ``released(name)`` (called, with the fleet's lock held,
    once a cluster it engaged has left for good: its keys stopped, its caches gone) and
    ``fence(name)`` (the :class:`~manager.fencing.Fence` every write to that member and of
    its keys asks, instead of the leader's): what a policy that hands clusters over
    between replicas needs (:class:`~manager.fleet.sharded.ClusterShards`)."""

    def engages(self, name: str) -> bool: ...


class EngageAll:
    """The default policy: every known cluster."""

    def engages(self, name: str) -> bool:
        return True


class ClusterListener(Protocol):
    """What works in the clusters (a fleet-wide controller)."""

    def cluster_ready(self, cluster: Cluster) -> None:
        """``cluster`` is engaged and its caches have synced: its keys may start. Must
        return at once (called with the fleet's lock held)."""
        ...

    def cluster_leaving(self, name: str, timeout: float) -> bool:
        """Cluster ``name`` leaves: stop its keys and return once its in-flight reconciles
        have ended (within ``timeout`` seconds: False if they had not)."""
        ...


@dataclass(frozen=True, slots=True)
class WatchScope:
    """A scope every engaged cluster caches (a fleet-wide controller's watch)."""

    resource: Resource
    namespace: str | None = None
    label_selector: str | None = None


class _Rotating:
    """A member's credentials, replaceable while its clients run: every client of the
    cluster (fenced, probe) shares the configuration, so a swap reaches them all at their
    next request."""

    def __init__(self, credentials: Credentials | None) -> None:
        self._lock = threading.Lock()
        self._current = credentials

    def swap(self, credentials: Credentials | None) -> None:
        with self._lock:
            self._current = credentials

    def authorization(self) -> str | None:
        with self._lock:
            current = self._current
        return None if current is None else current.authorization()

    def rejected(self, authorization: str) -> None:
        with self._lock:
            current = self._current
        rejected = getattr(current, "rejected", None)
        if callable(rejected):
            rejected(authorization)


def _same_connection(a: ClusterSource, b: ClusterSource) -> bool:
    """Whether ``b`` reaches the cluster as ``a`` does but for its credentials (a token):
    the server, its CA, the TLS settings, client certificate, proxy and impersonation are
    equal (a :class:`ClusterConfig` compares all but its credentials)."""
    return a.config is not None and b.config is not None and a.config == b.config


class _Member:
    """One engaged cluster: its source, its state and the thread that drives it."""

    def __init__(self, fleet: Fleet, name: str, source: ClusterSource, provider: str) -> None:
        self.fleet = fleet
        self.name = name
        self.source = source
        self.provider = provider
        self.state = "connecting"
        self.reason = "connecting"
        self.since = time.time()
        self.cluster: MemberCluster | HomeCluster | None = None
        self.credentials: _Rotating | None = None  # the engaged member's, swapped in place
        self.leaving = False  # for good: dropped, no longer engaged, or the fleet stops
        self.cond = threading.Condition(fleet._lock)
        self.thread = threading.Thread(target=self._run, name=f"fleet/{name}")

    # -- state (fleet lock held) -------------------------------------------------------

    def _set(self, state: str, reason: str) -> None:
        if state != self.state:
            self.since = time.time()
            logger.info(
                "cluster state changed",
                extra={"cluster": self.name, "state": state, "was": self.state, "why": reason},
            )
        self.state, self.reason = state, reason
        CLUSTER_READY.labels(self.name).set(1 if state == "ready" else 0)

    def _changed(self, source: ClusterSource) -> bool:
        return self.leaving or self.source != source or self.fleet._stop.is_set()

    # -- the thread --------------------------------------------------------------------

    def _run(self) -> None:
        fleet = self.fleet
        backoff = Backoff(
            initial=fleet.probe_period, cap=30 * fleet.probe_period, jitter=0.5, reset_after=1e9
        )
        try:
            while True:
                with fleet._lock:
                    if self.leaving or fleet._stop.is_set():
                        return
                    source = self.source
                    self._set("connecting", f"connecting to {source.where or 'the cluster'}")
                try:
                    cluster = fleet._connect(self.name, source)
                except ConfigError as exc:  # a credential that cannot even be used
                    with fleet._lock:
                        self._set("failed", f"cannot use {source.where}: {exc}")
                        while not self._changed(source):
                            self.cond.wait()
                    continue
                CLUSTER_ENGAGEMENTS.labels(self.name).inc()
                try:
                    outcome = self._engaged(cluster, source)
                finally:  # keys first, then the caches: whatever ended the engagement
                    fleet._release(self.name)
                    with fleet._lock:
                        self.cluster = None
                    if isinstance(cluster, MemberCluster):
                        cluster.close(_JOIN)
                    del cluster
                if outcome != "unreachable":
                    continue  # leaving, stopped or new credentials: the loop decides
                CLUSTER_UNREACHABLE.labels(self.name).inc()
                self._wait_reachable(source, backoff)
                backoff.reset()
        except BaseException:
            logger.exception("cluster engagement failed", extra={"cluster": self.name})
            with fleet._lock:
                self._set("failed", "the engagement thread failed (see the log)")
            raise
        finally:
            with fleet._lock:
                if self.state != "failed":
                    self._set("stopped", "disengaged")
            fleet._gone(self)

    def _engaged(self, cluster: MemberCluster | HomeCluster, source: ClusterSource) -> str:
        """Run ``cluster`` until it must go: ``"changed"`` (leaving, stopping, new
        credentials) or ``"unreachable"``."""
        fleet = self.fleet
        with fleet._lock:
            self.cluster = cluster
            scopes = list(fleet._scopes)
        informers = [
            cluster.informer(s.resource, namespace=s.namespace, label_selector=s.label_selector)
            for s in scopes
        ]
        if isinstance(cluster, MemberCluster):
            cluster.start()
        ready = False
        probe = fleet._probe_client(cluster) if isinstance(cluster, MemberCluster) else None
        try:
            last_answer = time.monotonic()
            next_probe = last_answer + fleet.probe_period
            while True:
                with fleet._lock:
                    if self._changed(source) and not self._rotated(source):
                        return "changed"
                    source = self.source
                    if not ready:
                        synced = (
                            cluster.synced()
                            if isinstance(cluster, MemberCluster)
                            else all(i.has_synced() for i in informers)
                        )
                        if synced:
                            ready = True
                            self._set("ready", "caches synced")
                            fleet._ready(cluster)
                        else:
                            pending = (
                                cluster.unsynced()
                                if isinstance(cluster, MemberCluster)
                                else [i.name for i in informers if not i.has_synced()]
                            )
                            self.reason = "caches not synced: " + ", ".join(pending)
                    wait = max(0.0, next_probe - time.monotonic()) if probe else 3600.0
                    self.cond.wait(min(wait, _POLL) if not ready else wait)
                if probe is None or time.monotonic() < next_probe:
                    continue
                answer = fleet._probe(probe)
                now = time.monotonic()
                next_probe = now + fleet.probe_period
                if answer is None:
                    last_answer = now
                    with fleet._lock:
                        if ready and self.state == "ready":
                            self.reason = "caches synced"  # a failed probe is forgotten
                    continue
                with fleet._lock:
                    if ready:
                        self.reason = f"probe failed: {answer}"
                if now - last_answer >= fleet.unreachable_after:
                    with fleet._lock:
                        self._set(
                            "unreachable",
                            f"no answer for {now - last_answer:.1f} s: {answer}",
                        )
                    return "unreachable"
        finally:
            if probe is not None:
                probe.close()

    def _rotated(self, source: ClusterSource) -> bool:
        """Take new credentials for the same connection in place; True if that is all
        that changed since ``source``. Caller holds the fleet's lock."""
        new, credentials = self.source, self.credentials
        if self.leaving or self.fleet._stop.is_set() or credentials is None:
            return False
        if not _same_connection(source, new):
            return False
        assert new.config is not None
        credentials.swap(new.config.credentials)
        CLUSTER_CREDENTIAL_SWAPS.labels(self.name).inc()
        logger.info(
            "cluster credentials rotated in place",
            extra={"cluster": self.name, "from": new.where},
        )
        return True

    def _wait_reachable(self, source: ClusterSource, backoff: Backoff) -> None:
        """Probe with backoff until the cluster answers, or it must go."""
        fleet = self.fleet
        assert source.config is not None
        while True:
            delay = backoff.next()
            with fleet._lock:
                deadline = time.monotonic() + delay
                while not self._changed(source):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self.cond.wait(remaining)
                if self._changed(source):
                    return
            client = KubeClient(source.config, options=fleet._probe_options())
            try:
                answer = fleet._probe(client)
            finally:
                client.close()
            if answer is None:
                logger.info("cluster answers again", extra={"cluster": self.name})
                return
            with fleet._lock:
                self.reason = f"unreachable: {answer}"


class Fleet:
    """The clusters of one manager (see the module). Made by the manager (``mgr.fleet``);
    :meth:`run` is one of its runnables.

    Args:
        mgr: the manager (its client's options and fence, its informers for the home
            cluster, its namespace scope and timeouts).
        probe_period: seconds between probes of an engaged member (``GET /version``).
        unreachable_after: seconds without an answer after which a member is disengaged.
        probe_timeout: seconds a probe waits for its answer.
    """

    def __init__(
        self,
        mgr: Manager,
        *,
        probe_period: float = 10.0,
        unreachable_after: float = 60.0,
        probe_timeout: float = 5.0,
    ) -> None:
        if probe_period <= 0 or unreachable_after <= 0 or probe_timeout <= 0:
            raise ValueError("probe_period, unreachable_after and probe_timeout must be > 0")
        self._mgr = mgr
        self.probe_period = probe_period
        self.unreachable_after = unreachable_after
        self.probe_timeout = probe_timeout
        self._lock = threading.RLock()
        self._providers: list[ClusterProvider] = []
        self._known: dict[str, tuple[ClusterSource, str]] = {}  # name -> (source, provider)
        self._members: dict[str, _Member] = {}
        self._listeners: list[ClusterListener] = []
        self._scopes: list[WatchScope] = []
        self._policy: ClusterPolicy = EngageAll()
        self._stop = threading.Event()
        self._running = False
        self._provider_threads: list[threading.Thread] = []

    @classmethod
    def from_options(cls, mgr: Manager, options: FleetOptions, *, namespace: str) -> Fleet:
        """The fleet ``options`` describe, with its built-in providers; ``namespace`` is
        the manager's own (where kubeconfig Secrets are looked for by default)."""
        fleet = cls(
            mgr,
            probe_period=options.probe_period,
            unreachable_after=options.unreachable_after,
            probe_timeout=options.probe_timeout,
        )
        if options.home:
            fleet.add_provider(HomeProvider(options.home))
        if options.kubeconfigs:
            fleet.add_provider(
                KubeconfigFiles(options.kubeconfigs, reload_period=options.reload_period)
            )
        if options.secrets_namespace is not None:
            informer = mgr.informer(
                SECRETS,
                namespace=options.secrets_namespace or namespace,
                label_selector=options.secrets_selector or None,
            )
            fleet.add_provider(KubeconfigSecrets(informer, key=options.secrets_key))
        return fleet

    # -- wiring ----------------------------------------------------------------------

    def add_provider(self, provider: ClusterProvider) -> None:
        """Run ``provider`` with the fleet (at once if the fleet runs already)."""
        with self._lock:
            if any(p.name == provider.name for p in self._providers):
                raise ValueError(f"a cluster provider named {provider.name!r} exists already")
            self._providers.append(provider)
            if self._running:
                self._start_provider(provider)

    @property
    def providers(self) -> list[ClusterProvider]:
        with self._lock:
            return list(self._providers)

    def set_policy(self, policy: ClusterPolicy) -> None:
        """Decide with ``policy`` which known clusters are engaged (at once)."""
        with self._lock:
            self._policy = policy
        self.reconsider()

    @property
    def policy(self) -> ClusterPolicy:
        with self._lock:
            return self._policy

    def fence(self, name: str) -> Fence | None:
        """The fence of writes to member ``name`` and of its keys, when the policy has
        one (a fleet sharded by cluster); None: the manager's (the leader's)."""
        with self._lock:
            policy = self._policy
        fence = getattr(policy, "fence", None)
        return cast("Fence", fence(name)) if callable(fence) else None

    def watch(self, scope: WatchScope) -> None:
        """Cache ``scope`` in every engaged cluster (its informer made and started at once
        in clusters engaged already; part of "caches synced" in those engaged later)."""
        with self._lock:
            if scope in self._scopes:
                return
            self._scopes.append(scope)
            clusters = [m.cluster for m in self._members.values() if m.cluster is not None]
        for cluster in clusters:
            cluster.informer(
                scope.resource, namespace=scope.namespace, label_selector=scope.label_selector
            )

    def subscribe(self, listener: ClusterListener) -> None:
        """Tell ``listener`` of every cluster that is ready now and becomes ready later,
        and of every one that leaves."""
        with self._lock:
            self._listeners.append(listener)
            for member in self._members.values():
                if member.state == "ready" and member.cluster is not None:
                    listener.cluster_ready(member.cluster)

    def unsubscribe(self, listener: ClusterListener) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    # -- the sink providers report to ------------------------------------------------

    def engage(self, name: str, source: ClusterSource, *, provider: str) -> None:
        """A provider knows cluster ``name`` (see :class:`~manager.fleet.provider.
        ClusterSink`). A name another provider reported first keeps that one's source."""
        with self._lock:
            known = self._known.get(name)
            if known is not None and known[1] != provider:
                logger.warning(
                    "two cluster providers name the same cluster: the first one is used",
                    extra={"cluster": name, "used": known[1], "ignored": provider},
                )
                return
            if known is not None and known[0] == source:
                return
            self._known[name] = (source, provider)
        self.reconsider()

    def disengage(self, name: str, *, provider: str) -> None:
        with self._lock:
            known = self._known.get(name)
            if known is None or known[1] != provider:
                return
            del self._known[name]
        self.reconsider()

    def reconsider(self) -> None:
        """Engage the known clusters the policy engages, let the others go, and pass new
        credentials on (what every change of providers or policy ends with)."""
        with self._lock:
            if not self._running or self._stop.is_set():
                return
            known_hook = getattr(self._policy, "known", None)
            if known_hook is not None:
                known_hook(sorted(self._known))
            wanted = {
                name: known for name, known in self._known.items() if self._policy.engages(name)
            }
            for name, member in list(self._members.items()):
                known = wanted.get(name)
                if known is None:
                    member.leaving = True
                    if member.state == "ready":
                        member._set("leaving", "no longer in the fleet")
                elif member.source != known[0]:
                    if not _same_connection(member.source, known[0]):
                        logger.info(
                            "how to reach the cluster changed: engaging it again",
                            extra={"cluster": name, "from": known[0].where},
                        )
                    member.source = known[0]
                member.cond.notify_all()
            for name, (source, provider) in wanted.items():
                existing = self._members.get(name)
                if existing is not None and not existing.leaving:
                    continue
                if existing is not None and existing.thread.is_alive():
                    continue  # still leaving: engaged again once it has gone (see _gone)
                member = _Member(self, name, source, provider)
                self._members[name] = member
                member.thread.start()

    # -- facts -------------------------------------------------------------------------

    def cluster(self, name: str) -> Cluster:
        """The engaged cluster ``name`` whose caches have synced.

        Raises:
            ClusterNotFound: no such cluster is ready now.
        """
        with self._lock:
            member = self._members.get(name)
            if member is None or member.state != "ready" or member.cluster is None:
                raise ClusterNotFound(name, known=tuple(self._ready_names()))
            return member.cluster

    def clusters(self) -> list[str]:
        """The names of the clusters that are ready now (engaged, caches synced)."""
        with self._lock:
            return self._ready_names()

    def known(self) -> list[str]:
        """Every cluster the providers report, engaged or not."""
        with self._lock:
            return sorted(self._known)

    def _ready_names(self) -> list[str]:
        return sorted(n for n, m in self._members.items() if m.state == "ready")

    def ready_reasons(self) -> dict[str, str | None]:
        """``cluster/<name>`` → None (ready) or why not, for every known cluster."""
        with self._lock:
            out: dict[str, str | None] = {}
            for name in sorted(self._known):
                member = self._members.get(name)
                if member is None:
                    out[f"cluster/{name}"] = "not engaged by this replica"
                elif member.state == "ready":
                    out[f"cluster/{name}"] = None
                else:
                    out[f"cluster/{name}"] = f"{member.state}: {member.reason}"
            return out

    def status(self) -> tuple[ClusterStatus, ...]:
        """Every known cluster, for ``/statusz``."""
        with self._lock:
            rows = []
            for name in sorted(set(self._known) | set(self._members)):
                member = self._members.get(name)
                source, provider = self._known.get(name, (None, ""))
                if member is not None:
                    source, provider = member.source, member.provider
                rows.append(
                    ClusterStatus(
                        name=name,
                        provider=provider,
                        server=(
                            "(home)"
                            if source is None or source.config is None
                            else source.config.server
                        ),
                        state="not engaged" if member is None else member.state,
                        since=None if member is None else member.since,
                        reason="" if member is None or member.state == "ready" else member.reason,
                    )
                )
            return tuple(rows)

    # -- running -----------------------------------------------------------------------

    name = "fleet"

    def run(self, stop: threading.Event) -> None:
        """Run the providers and engage what they report until ``stop`` is set; then every
        cluster leaves (keys first, caches after) and every thread is joined."""
        with self._lock:
            if self._running:
                raise RuntimeError("Fleet.run may be called once")
            self._running = True
            providers = list(self._providers)
        if not providers:
            logger.warning("a fleet without cluster providers: it engages no cluster")
        for provider in providers:
            with self._lock:
                self._start_provider(provider)
        self.reconsider()
        try:
            stop.wait()
        finally:
            with self._lock:
                self._stop.set()
                members = list(self._members.values())
                for member in members:
                    member.leaving = True
                    member.cond.notify_all()
                threads = list(self._provider_threads)
            deadline = time.monotonic() + _JOIN + self._mgr.options.graceful_shutdown_timeout
            for thread in [*threads, *(m.thread for m in members)]:
                thread.join(max(0.0, deadline - time.monotonic()))

    def threads(self) -> list[threading.Thread]:
        """The fleet's threads (providers, clusters) started so far."""
        with self._lock:
            return [*self._provider_threads, *(m.thread for m in self._members.values())]

    def _start_provider(self, provider: ClusterProvider) -> None:
        # Caller holds the lock.
        thread = threading.Thread(
            target=self._run_provider, args=(provider,), name=f"fleet-provider/{provider.name}"
        )
        self._provider_threads.append(thread)
        thread.start()

    def _run_provider(self, provider: ClusterProvider) -> None:
        sink = _Sink(self, provider.name)
        while not self._stop.is_set():
            try:
                provider.run(self._stop, sink)
                return
            except Exception:
                logger.exception("cluster provider failed", extra={"provider": provider.name})
                self._stop.wait(5.0)

    # -- engagement internals --------------------------------------------------------

    def _connect(self, name: str, source: ClusterSource) -> MemberCluster | HomeCluster:
        mgr = self._mgr
        if source.config is None:
            return HomeCluster(mgr, name)
        credentials = _Rotating(source.config.credentials)
        with self._lock:
            member = self._members.get(name)
            if member is not None:
                member.credentials = credentials
        config = replace(source.config, credentials=credentials)
        client = KubeClient(config, options=mgr.client.options)
        return MemberCluster(
            name,
            # the manager's fence: leader-only work's writes are refused once the Lease
            # (in the home cluster) is not held, whichever cluster they go to; sharded by
            # cluster, the cluster's own (shard Lease valid and the cluster ours)
            client.with_fence(self.fence(name) or mgr.client.fence),
            namespace=mgr.options.namespace,
            sync_timeout=mgr.options.cache_sync_timeout,
            component=mgr.options.name,
        )

    def _probe_options(self) -> ClientOptions:
        return replace(self._mgr.client.options, timeout=self.probe_timeout, max_retries=0)

    def _probe_client(self, cluster: MemberCluster) -> KubeClient:
        return cluster.client.with_options(self._probe_options())

    def _probe(self, client: KubeClient) -> str | None:
        """None when the cluster answers (any HTTP answer but a 5xx), else why not."""
        try:
            client.request("GET", "/version", idempotent=True)
        except ApiError as exc:
            if exc.status == 0 or exc.status >= 500:
                return f"{type(exc).__name__}: {exc}"
            return None  # it answers (a 401 is for its readiness to tell)
        return None

    def _ready(self, cluster: Cluster) -> None:
        # Caller holds the lock.
        for listener in list(self._listeners):
            listener.cluster_ready(cluster)

    def _release(self, name: str) -> None:
        """Stop the keys of cluster ``name`` everywhere, before its caches go."""
        with self._lock:
            member = self._members.get(name)
            if member is not None and member.state == "ready":
                member._set("leaving", "its keys are stopping")
            listeners = list(self._listeners)
        timeout = self._mgr.options.graceful_shutdown_timeout
        for listener in listeners:
            if not listener.cluster_leaving(name, timeout):
                logger.warning(
                    "reconciles of a leaving cluster outlasted the timeout",
                    extra={"cluster": name, "timeout": timeout},
                )
        with self._lock:
            if member is not None and member.state == "leaving":
                member.reason = "its caches are stopping"

    def _gone(self, member: _Member) -> None:
        """A member's thread ended for good: forget it (and engage it afresh if it is
        known and wanted again meanwhile)."""
        with self._lock:
            if self._members.get(member.name) is member:
                del self._members[member.name]
                released = getattr(self._policy, "released", None)
                if callable(released):  # under the lock: no new member before it knows
                    released(member.name)
            if member.name not in self._known:
                for metric in (CLUSTER_READY, CLUSTER_ENGAGEMENTS, CLUSTER_UNREACHABLE):
                    with contextlib.suppress(KeyError):
                        metric.remove(member.name)
        self.reconsider()


class _Sink:
    """What one provider reports through: the fleet, with the provider's name."""

    def __init__(self, fleet: Fleet, provider: str) -> None:
        self._fleet = fleet
        self._provider = provider

    def engage(self, name: str, source: ClusterSource) -> None:
        self._fleet.engage(name, source, provider=self._provider)

    def disengage(self, name: str) -> None:
        self._fleet.disengage(name, provider=self._provider)

"""Sharding: every replica reconciles its own share of a controller's keys, and a key is
worked on by one replica at a time, moves included.

Membership is in the Kubernetes API and nowhere else: each replica holds a shard Lease of
its own (named ``<ring>-<identity>``, labelled ``sharding.overseer.io/ring=<ring>``),
acquired, renewed, fenced and released by the same :class:`~manager.leaderelection.
LeaderElector` rules as the leader Lease. Every replica watches the ring's Leases; a shard
is a *member* while its Lease is held and, on the watcher's own monotonic clock, has
changed within its ``leaseDurationSeconds``. A ring on kube-apiserver's shard hash space
(:class:`~manager.hashring.SlotRing`: 64 slots of the FNV-1a 64 space assigned to the
members) assigns each key to one member by the hash of its primary object's ``uid``
(``shard_by: uid``, the default) or ``namespace``; owned objects follow their owner
because their events become their owner's requests. A request names ``namespace/name``
only: its hash is the one of the object the primary cache holds under that key, or the
uid it last had if deleted since (:class:`KeyHashes`); a key whose object this replica
never cached is not started here.

Moves without overlap (the handshake):

* A replica whose view of the members changes *drains* first: from that moment it starts
  no key it would lose, and it waits for the reconciles of such keys in flight (at most
  ``drain_timeout``; after that their writes are refused by the fence).
* Then it *applies* the new ring and *publishes* it on its Lease (annotation
  ``sharding.overseer.io/applied``: the virtual nodes and the members). Its writes for a
  key are allowed only while the applied ring gives it the key.
* It starts a key it *gains* only once (a) its publication is visible in its own cache —
  so every claim published before it is visible too, the API server orders them — and
  (b) no other member's published ring gives that member the key. A member whose Lease
  expired (on our clock) or was released claims nothing: its own fence closed before
  (renew deadline < lease duration), or it drained before releasing.

So key ``k`` goes from A to B only after A published a ring without ``k`` (A acknowledged
it, having stopped working on ``k``) or A's Lease expired. Two replicas that publish
claims on the same key concurrently are ordered by the API server: the later one sees the
earlier claim and waits; both converge once their member views agree.

What a replica trusts (each rule closes a window a fault script opened):

* **Its own claim, once seen.** Every ring applied since the last one confirmed visible
  in its own cache must give it a key before it starts the key: applying {A,B} and then
  {A} again before seeing {A,B} published does not make B's keys A's.
* **A view no older than a lease duration.** A member's Lease expires when it has not
  changed for its duration *as of the freshest moment this replica's cache is known to
  cover* — the start of the round that wrote the own renew the cache shows — not as of
  "now": a stalled Lease watch (bytes held, connection open) freezes every expiry instead
  of expiring everybody. A view older than a lease duration while renewals succeed is
  reported (``shard_stale_views_total``) and the watch is restarted.
* **A vanished Lease is a lost Lease.** The owner of a deleted shard Lease stops at once
  (its elector does not re-create it) and the manager exits 1; the others keep its last
  claims until it would have expired; and a replica starts no key before it has watched
  the ring for a lease duration, so a Lease deleted before it began to watch has expired
  by then.
* **Writes in flight do not outlive the permission.** While a key is drained its write
  permission ends at the drain deadline (a request's timeout is cut to it); before the
  ring that gives the key away is published, every write of the key still under way is
  abandoned (:data:`~manager.fencing.IN_FLIGHT`: its connection is shut down), Events
  included; writes pipelined behind others, which the server reads ahead and applies
  whatever the close, count as under way until the server will have handled them at
  its pace (bounded by the permission they were sent under). The shard Lease is released
  only once every write under it has been answered, and none ended unanswered within a
  lease duration; otherwise it is left to expire.
* **One set of ring parameters.** Each member publishes its configured parameters
  (``sharding.overseer.io/params``: :meth:`~manager.hashring.RingParameters.describe`,
  e.g. ``slots-v1;slots=64;shardBy=uid``); the ring uses those of the lowest-named live
  member, so replicas configured differently (a rollout that changes ``slots`` or
  ``shardBy``) still agree on every key's owner. A replica that follows parameters other
  than its own logs it and exports ``shard_ring_params_mismatch 1``; its sharded caches
  whose field is not the followed one cache everything meanwhile.

Writes are fenced per key (:meth:`ShardRing.fence`): allowed while this replica's shard
Lease is valid on its clock and its applied ring gives it the key — a paused replica that
wakes up, or a reconcile that outlasted a drain, writes nothing. Losing the shard Lease is
losing the process: the manager stops and exits 1, as for the leader Lease.

Caches divide too (DESIGN.md §3.7a; README "Sharding"): a sharded controller's primary
informer, and its owned objects' (same selector by namespace; by the controller owner's
uid, filtered on the client, by uid) are :class:`~manager.cache.sharded.ShardedInformer`
s that follow this replica's ranges (:meth:`ShardRing.add_informer`). At a ring change
the ranges gained are listed *before* the drain, and a gained key starts only once its
range is listed and synced (:meth:`_may_work`); the ranges lost leave the caches only
after the drain and the publication. Kept ranges are never relisted. Dead shard Leases
are deleted by the lowest member once dead for ``max(60 s, 4 x lease duration)``.

Thread-safety: :meth:`ShardRing.begin`, :meth:`ShardRing.end`, :meth:`ShardRing.owns` and
fences are called from worker threads; the ring's own thread does the rest. One
condition guards the state.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Final

from prometheus_client import Counter as PromCounter
from prometheus_client import Gauge, Histogram

from manager.cache.informer import SharedInformer
from manager.cache.sharded import SHARD_BY_OWNER, ShardedInformer
from manager.client import KubeClient
from manager.clock import Clock, RealClock
from manager.controller import Controller
from manager.errors import ApiError, Conflict, NotFound
from manager.fencing import IN_FLIGHT, Fence, ValidityFence, fenced
from manager.hashring import (
    DEFAULT_SLOTS,
    HASH_SPACE,
    SHARD_BY_NAMESPACE,
    SHARD_BY_UID,
    SHARD_FIELDS,
    HashRange,
    RangeSet,
    RingParameters,
    SlotRing,
    fnv1a_64,
    merge_ranges,
    subtract_ranges,
)
from manager.keys import JsonDict
from manager.leaderelection import LEASES, LeaderElectionConfig, LeaderElector
from manager.metrics import REGISTRY
from manager.reconcile import Reconciler, Request, Result, reconciling

__all__ = [
    "APPLIED_ANNOTATION",
    "PARAMS_ANNOTATION",
    "RING_LABEL",
    "SHARD_OWNED",
    "SHARD_PRIMARY",
    "KeyHashes",
    "RingStatus",
    "ShardRing",
    "ShardedReconciler",
    "ShardingOptions",
    "decode_ring",
    "encode_ring",
    "shard_lease_name",
]

logger = logging.getLogger(__name__)

RING_LABEL: Final = "sharding.overseer.io/ring"
APPLIED_ANNOTATION: Final = "sharding.overseer.io/applied"
PARAMS_ANNOTATION: Final = "sharding.overseer.io/params"
SHARD_PRIMARY: Final = "primary"
"""``Manager.informer(shard=...)``: this replica's share of a sharded controller's primary
resource."""
SHARD_OWNED: Final = "owned"
"""``Manager.informer(shard=...)``: the objects whose controller owner is in this share."""

KEYS_OWNED = Gauge(
    "shard_keys_owned",
    "Keys of sharded controllers this replica owns.",
    ["ring"],
    registry=REGISTRY,
)
RING_MEMBERS = Gauge(
    "shard_ring_members", "Members of the ring this replica applied.", ["ring"], registry=REGISTRY
)
RING_INFO = Gauge(
    "shard_ring_info",
    "The ring version this replica applied (value 1; the version is a label).",
    ["ring", "version"],
    registry=REGISTRY,
)
RING_CHANGES = PromCounter(
    "shard_ring_changes_total", "Ring versions applied.", ["ring"], registry=REGISTRY
)
MOVES = PromCounter(
    "shard_moves_total",
    "Keys that moved to (in) or away from (out) this replica at a ring change.",
    ["ring", "direction"],
    registry=REGISTRY,
)
DRAINS = PromCounter(
    "shard_drains_total",
    "Drains before a ring change, by result (ok, timeout).",
    ["ring", "result"],
    registry=REGISTRY,
)
DRAIN_SECONDS = Histogram(
    "shard_drain_seconds",
    "Time to drain the keys this replica loses at a ring change.",
    ["ring"],
    buckets=(0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
    registry=REGISTRY,
)

MEMBER = Gauge(
    "shard_ring_member",
    "1 while this replica holds its shard Lease and its applied ring includes it, else 0.",
    ["ring"],
    registry=REGISTRY,
)
STALE_VIEWS = PromCounter(
    "shard_stale_views_total",
    "Times this replica's view of the ring's Leases was older than a lease duration while "
    "its own renewals succeeded (a stalled watch); the watch is restarted.",
    ["ring"],
    registry=REGISTRY,
)
ABANDONED = PromCounter(
    "shard_abandoned_writes_total",
    "Writes still in flight for keys given up (a ring change or a release), abandoned.",
    ["ring"],
    registry=REGISTRY,
)
PARAMS_MISMATCH = Gauge(
    "shard_ring_params_mismatch",
    "1 while this replica follows ring parameters (virtual nodes) other than its own.",
    ["ring"],
    registry=REGISTRY,
)

_DNS_SUBDOMAIN_INVALID = re.compile(r"[^a-z0-9.-]+")
_ABANDON_WAIT: Final = 2.0  # seconds to wait for abandoned writers to notice


@dataclass(frozen=True, kw_only=True, slots=True)
class RingStatus:
    """What ``/statusz`` shows of this replica's ring (a snapshot)."""

    ring: str  # the ring's name
    lease: str  # this replica's shard Lease
    member: bool  # the shard Lease is held and the applied ring includes it
    version: str  # the applied ring's version ("" before the first)
    members: tuple[str, ...]  # the applied ring's members (shard Lease names)
    keys_owned: int  # keys of sharded controllers the applied ring gives this replica


@dataclass(frozen=True, kw_only=True, slots=True)
class ShardingOptions:
    """The ring sharded controllers share (``sharding:`` in the configuration)."""

    ring_name: str = "overseer"  # names the ring: the Lease label value and name prefix
    namespace: str = ""  # "" = the leader election namespace ($POD_NAMESPACE, else default)
    slots: int = DEFAULT_SLOTS  # equal slots the shard hash space is cut into
    shard_by: str = SHARD_BY_UID  # what a key hashes: the primary's uid, or its namespace
    lease_duration: float = 15.0  # seconds
    renew_deadline: float = 10.0  # seconds
    retry_period: float = 2.0  # seconds
    drain_timeout: float = 30.0  # seconds a ring change waits for lost keys' reconciles

    def __post_init__(self) -> None:
        problems = []
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", self.ring_name or ""):
            problems.append(f"ring_name: not a DNS label value: {self.ring_name!r}")
        if not 1 <= self.slots <= 4096:
            problems.append(f"slots: must be in [1, 4096], got {self.slots}")
        if self.shard_by not in SHARD_FIELDS:
            problems.append(
                f"shard_by: must be one of {sorted(SHARD_FIELDS)}, got {self.shard_by!r}"
            )
        if self.drain_timeout < 0:
            problems.append("drain_timeout: must be >= 0")
        if problems:
            raise ValueError("invalid ShardingOptions: " + "; ".join(problems))

    @property
    def parameters(self) -> RingParameters:
        """The ring parameters this replica publishes (slots and the hashed field)."""
        return RingParameters(slots=self.slots, shard_by=self.shard_by)


def shard_lease_name(ring: str, identity: str) -> str:
    """The shard Lease of ``identity`` in ``ring``: a DNS subdomain name."""
    base = _DNS_SUBDOMAIN_INVALID.sub("-", f"{ring}-{identity}".lower()).strip("-.")
    return base[:253].rstrip("-.")


def encode_ring(ring: SlotRing) -> str:
    """The published form of ``ring`` (``APPLIED_ANNOTATION``): its parameters, a ``|``
    and its members, e.g. ``slots-v1;slots=64;shardBy=uid|ring-a_1,ring-b_2``."""
    return f"{ring.parameters.describe()}|{','.join(ring.members)}"


def decode_ring(text: str) -> tuple[RingParameters, tuple[str, ...]] | None:
    """The parameters and members :func:`encode_ring` wrote; None for anything else (a
    member publishing another format claims nothing)."""
    params, sep, members = text.partition("|")
    if not sep:
        return None
    parsed = _params(params)
    if parsed is None:
        return None
    return parsed, tuple(m for m in members.split(",") if m)


class _Seen:
    """What this replica saw of one shard Lease, and when (its monotonic clock)."""

    __slots__ = ("changed_at", "params", "record", "vanished")

    def __init__(self, record: tuple[Any, ...], now: float, params: RingParameters | None) -> None:
        self.record = record
        self.changed_at = now
        self.params = params
        self.vanished = False


def _params(text: object) -> RingParameters | None:
    try:
        return RingParameters.parse(str(text or ""))
    except ValueError:
        return None


class KeyFence:
    """The write fence of one key of a ring: open while this replica's shard Lease is
    valid on its clock and its applied ring gives it the key; during a drain that takes
    the key away, only until the drain's deadline."""

    __slots__ = ("_inner", "hash", "key", "ring")

    def __init__(self, ring: ShardRing, key: str, h: int) -> None:
        self.ring = ring
        self.key = key
        self.hash = h
        self._inner = ValidityFence(
            self._valid_for,
            reason="not_owner",
            message=f"this replica does not own the key {key}",
        )

    def check(self) -> float | None:
        return self._inner.check()

    def _valid_for(self) -> float:
        return self.ring._key_valid_for(self.hash)

    def __repr__(self) -> str:
        return f"KeyFence({self.key!r})"


class ShardRing:
    """This replica's membership in one ring, and which keys it may work on now.

    Args:
        client: an unfenced client (the shard Lease and its publications are membership,
            not controller writes).
        leases: an informer of the ring's Leases (label ``RING_LABEL=<ring>``, namespace).
        options: the ring.
        identity: this replica's identity (the shard Lease's holder).
        namespace: where the shard Leases live.
        on_lost: called once if this replica loses its shard Lease while running.
        clock: monotonic time (membership expiry, fences).
    """

    def __init__(
        self,
        client: KubeClient,
        leases: SharedInformer,
        options: ShardingOptions,
        *,
        identity: str,
        namespace: str,
        on_lost: Callable[[str], None],
        clock: Clock | None = None,
    ) -> None:
        self.options = options
        self.name = f"shard-ring/{options.ring_name}"
        self.identity = identity
        self.namespace = namespace
        self.lease_name = shard_lease_name(options.ring_name, identity)
        self._client = client
        self._leases = leases
        self._on_lost = on_lost
        self._clock: Clock = clock or RealClock()
        self._ring_label = options.ring_name
        self._elector = LeaderElector(
            client,
            LeaderElectionConfig(
                lease_name=self.lease_name,
                namespace=namespace,
                identity=identity,
                lease_duration=options.lease_duration,
                renew_deadline=options.renew_deadline,
                retry_period=options.retry_period,
                labels={RING_LABEL: options.ring_name},
            ),
            on_stopped_leading=self._stopped_leading,
            clock=self._clock,
        )
        self._cond = threading.Condition()
        self._wake = False
        self._stopping = False
        self._lost = False
        self._applied: SlotRing | None = None  # the ring we act on (writes allowed by it)
        self._desired: SlotRing | None = None  # during a drain: the ring we move to
        self._drain_deadline = 0.0  # during a drain: when lost keys' writes must end
        self._visible: SlotRing | None = None  # the last applied ring seen in our cache
        self._pending: list[SlotRing] = []  # applied since, not yet seen in our cache
        self._published_rv = 0
        self._claims: dict[str, SlotRing] = {}  # other live members' published rings
        self._inflight: Counter[tuple[str, int]] = Counter()  # (key, hash) in flight
        self._controllers: list[tuple[Controller, KeyHashes]] = []
        self._informers: list[ShardedInformer] = []  # caches that follow our ranges
        self._syncing: list[tuple[RangeSet, threading.Event]] = []  # gained, not yet synced
        self._seen: dict[str, _Seen] = {}
        self._rings: dict[tuple[RingParameters, tuple[str, ...]], SlotRing] = {}
        self._elector_thread: threading.Thread | None = None
        self._released_ok: Callable[[], bool] = lambda: False
        self._owned = 0  # keys the applied ring gives us, as last counted
        self._view_started: float | None = None  # when this replica began to watch
        self._observed = False  # the observation period has passed
        self._told_observing = False  # its log line written
        self._fresh_at: float | None = None  # our cache holds all committed before this
        self._stale = False  # the view is reported stale (once per stale period)
        self._published_params: RingParameters | None = None
        self._following: RingParameters | None = None  # the parameters of the ring we follow
        self._units: tuple[int, ...] = ()  # placed one by one (a fleet's clusters)
        self._watchers: list[Callable[[], None]] = []  # told when ownership may change

    # -- what workers ask ------------------------------------------------------------------

    @property
    def shard_by(self) -> str:
        """What keys hash by (the configured field; replicas follow the lowest member's
        parameters, see :meth:`following`)."""
        return self.options.shard_by

    def begin(self, key: str, h: int) -> bool:
        """Whether this replica may start work on ``key`` (shard hash ``h``) now; if so it
        is in flight until :meth:`end`."""
        with self._cond:
            if not self._may_work(h):
                return False
            self._inflight[(key, h)] += 1
            return True

    def end(self, key: str, h: int) -> None:
        with self._cond:
            self._inflight[(key, h)] -= 1
            if self._inflight[(key, h)] <= 0:
                del self._inflight[(key, h)]
            self._cond.notify_all()

    def owns(self, h: int) -> bool:
        """Whether the applied ring gives the shard hash ``h`` to this replica (whatever
        its handshake)."""
        with self._cond:
            ring = self._applied
        return ring is not None and ring.owner_of(h) == self.lease_name

    def keeps(self, h: int) -> bool:
        """Whether work this replica holds on the shard hash ``h`` (begun, not yet ended)
        may go on: the shard Lease is held, the applied ring gives it ``h`` and no drain
        takes it away. (Long work — a cluster of a sharded fleet — lets go when not.)"""
        me = self.lease_name
        with self._cond:
            applied, desired = self._applied, self._desired
            if self._lost or self._stopping or applied is None or _owner(applied, h) != me:
                return False
            if desired is not None and _owner(desired, h) != me:
                return False
        return self._elector.is_leader()

    def fence(self, key: str, h: int) -> Fence:
        """Writes for ``key`` (shard hash ``h``) are allowed while the shard Lease is valid
        on our clock and the applied ring gives us ``h`` (during a drain that takes it
        away: until the drain's deadline)."""
        return KeyFence(self, key, h)

    def following(self) -> RingParameters:
        """The ring parameters this replica follows now (its own until it has seen a
        lower-named member's)."""
        with self._cond:
            return self._following or self._configured()

    def set_units(self, units: Iterable[int]) -> None:
        """Place the hashes ``units`` one by one, at most ceil(units / members) on each
        member (:attr:`RingParameters.units <manager.hashring.RingParameters.units>`):
        what a fleet sharded by cluster calls with its clusters' hashes whenever the
        clusters it knows change. They are published with this replica's parameters; the
        ring follows the lowest-named member's, so a change is a ring change like any
        other: drained, published, handed over."""
        placed = tuple(sorted(set(units)))
        with self._cond:
            if placed == self._units:
                return
            self._units = placed
            self._wake = True
            self._cond.notify_all()

    def _configured(self) -> RingParameters:
        """The parameters this replica publishes: its configuration and its units."""
        params = self.options.parameters
        with self._cond:
            units = self._units
        return replace(params, units=units) if units else params

    def _key_valid_for(self, h: int) -> float:
        me = self.lease_name
        with self._cond:
            applied, desired = self._applied, self._desired
            if self._lost or applied is None or _owner(applied, h) != me:
                return 0.0
            limit = None
            if desired is not None and _owner(desired, h) != me:
                limit = self._drain_deadline - time.monotonic()
        valid = self._elector.valid_for()
        return valid if limit is None else max(min(valid, limit), 0.0)

    def _may_work(self, h: int) -> bool:
        # Caller holds the condition.
        me = self.lease_name
        applied, visible = self._applied, self._visible
        if self._lost or self._stopping or applied is None or visible is None:
            return False
        if not self._observed or not self._elector.is_leader():
            return False
        if _owner(applied, h) != me or _owner(visible, h) != me:
            return False  # not ours, or gained but our claim is not visible yet
        if any(_owner(ring, h) != me for ring in self._pending):
            return False  # gained since the last ring we saw published
        if self._desired is not None and _owner(self._desired, h) != me:
            return False  # being drained
        if any(h in gained and not synced.is_set() for gained, synced in self._syncing) and not all(
            informer.synced_for(h) for informer in self._informers
        ):
            return False  # gained, but its objects are not listed and synced yet
        return all(_owner(ring, h) != name for name, ring in self._claims.items())

    # -- wiring --------------------------------------------------------------------------

    def add_controller(self, controller: Controller, keys: KeyHashes) -> None:
        """Requeue ``controller``'s keys (from its primary cache, ``keys``) whenever
        ownership changes."""
        with self._cond:
            self._controllers.append((controller, keys))

    def add_watcher(self, watcher: Callable[[], None]) -> None:
        """Call ``watcher()`` whenever what this replica may work on may have changed: a
        drain begins (keys it loses may not start, those in flight must end), a ring is
        applied, seen published or claims change, the shard Lease is lost. Called from
        the ring's thread with no lock held; it must return quickly. (A fleet sharded by
        cluster asks :meth:`begin` again for the clusters it may engage.)"""
        with self._cond:
            self._watchers.append(watcher)

    def _tell_watchers(self) -> None:
        with self._cond:
            watchers = list(self._watchers)
        for watcher in watchers:
            try:
                watcher()
            except Exception:
                logger.exception("a ring watcher failed", extra={"ring": self.options.ring_name})

    def add_informer(self, informer: ShardedInformer) -> None:
        """``informer`` caches this replica's ranges from now on (all of them, when its
        field is not the one the ring follows); before a gained key starts, its gained
        ranges are listed and synced."""
        with self._cond:
            if informer in self._informers:
                return
            self._informers.append(informer)
            ring = self._applied
        if ring is not None:
            ranges = self._ranges_for(informer, ring)
            synced = informer.set_ranges(ranges)
            if ranges and not synced.is_set():
                with self._cond:
                    self._syncing.append((RangeSet(ranges), synced))

    def wake(self) -> None:
        with self._cond:
            self._wake = True
            self._cond.notify_all()

    def ready_reason(self) -> str | None:
        """Readiness: None once this replica is a member that has published a ring."""
        with self._cond:
            if self._visible is not None and self._elector.is_leader():
                return None
            if not self._elector.is_leader():
                return f"shard Lease {self.lease_name} not held yet"
            if self._applied is None and not self._observed:
                return (
                    "ring not published yet: watching the ring for a lease duration "
                    f"({self.options.lease_duration:g} s) first"
                )
            return "ring not published yet"

    def elector_alive(self) -> str | None:
        thread = self._elector_thread
        if thread is None or thread.is_alive() or self._stopping:
            return None
        return "the shard Lease thread has ended"

    @property
    def lost(self) -> bool:
        return self._lost

    def status(self) -> RingStatus:
        """A snapshot for ``/statusz``."""
        with self._cond:
            applied, owned, lost = self._applied, self._owned, self._lost
        member = (
            not lost
            and self._elector.is_leader()
            and applied is not None
            and self.lease_name in applied.members
        )
        return RingStatus(
            ring=self.options.ring_name,
            lease=self.lease_name,
            member=member,
            version="" if applied is None else applied.version,
            members=() if applied is None else applied.members,
            keys_owned=owned if member else 0,
        )

    def _report_membership(self) -> None:
        MEMBER.labels(self.options.ring_name).set(1 if self.status().member else 0)

    # -- running -------------------------------------------------------------------------

    def run(self, stop: threading.Event, *, release: Callable[[], bool]) -> None:
        """Hold the shard Lease and follow the ring until ``stop``; the Lease is released
        if ``release()`` says so then (every sharded reconcile has ended) and every write
        of its keys still in flight has been abandoned."""
        self._released_ok = release
        self._view_started = self._clock.now()
        elector_stop = threading.Event()
        self._elector_thread = threading.Thread(
            target=self._run_elector,
            args=(elector_stop,),
            name=f"shard-lease/{self.options.ring_name}",
        )
        self._elector_thread.start()
        registration = self._leases.add_event_handler(_Waker(self))
        try:
            while not stop.is_set() and not self._lost:
                with self._cond:
                    if not self._wake:
                        # gained ranges being listed: look again soon (their keys start
                        # once synced)
                        idle = 0.05 if self._syncing else 0.5
                        self._cond.wait(min(self.options.retry_period / 2, idle))
                    self._wake = False
                if stop.is_set():
                    break
                try:
                    self._step(stop)
                except ApiError as exc:
                    logger.warning(
                        "ring step failed",
                        extra={"ring": self.options.ring_name, "error": str(exc)},
                    )
        finally:
            with self._cond:
                self._stopping = True
                self._cond.notify_all()
            MEMBER.labels(self.options.ring_name).set(0)
            self._leases.remove_event_handler(registration)
            elector_stop.set()
            self._elector_thread.join(max(2.0, self.options.retry_period * 2))

    def _may_release(self) -> bool:
        """Asked by the elector once the shard Lease is no longer ours to write under (its
        fences are closed): the manager agrees, and no write of our keys is in flight."""
        if not self._released_ok():
            return False
        return IN_FLIGHT.settle(
            lambda fence: isinstance(fence, KeyFence) and fence.ring is self,
            "the shard Lease is being released",
            timeout=_ABANDON_WAIT,
            window=self.options.lease_duration,
        )

    def _give_up(self, lost: Callable[[int], bool], why: str) -> bool:
        """Abandon the writes in flight for keys (by hash) that ``lost`` accepts; True
        once none is left."""

        def match(fence: Fence) -> bool:
            return isinstance(fence, KeyFence) and fence.ring is self and lost(fence.hash)

        n = IN_FLIGHT.abandon(match, why)
        if n:
            ABANDONED.labels(self.options.ring_name).inc(n)
        return IN_FLIGHT.wait(match, _ABANDON_WAIT)

    def _run_elector(self, elector_stop: threading.Event) -> None:
        try:
            self._elector.run(elector_stop, release=self._may_release)
        except BaseException:
            logger.exception("shard Lease election failed")
            if not elector_stop.is_set():
                self._lose("the shard Lease election failed")

    def _stopped_leading(self) -> None:
        with self._cond:
            stopping = self._stopping
        if not stopping:
            self._lose("the shard Lease was lost")

    def _lose(self, reason: str) -> None:
        with self._cond:
            if self._lost:
                return
            self._lost = True
            self._cond.notify_all()
        MEMBER.labels(self.options.ring_name).set(0)
        self._on_lost(reason)
        self._tell_watchers()

    # -- one step of the ring thread ------------------------------------------------------

    def _step(self, stop: threading.Event) -> None:
        self._report_membership()
        if not self._elector.is_leader():
            return  # not a member yet (or no more: the elector reports the loss)
        members, claims, own = self._observe()
        self._check_view()
        desired = self._ring(self._ring_params(members), (*members, self.lease_name))
        with self._cond:
            changed_claims = claims != self._claims
            self._claims = claims
            current = self._applied
            observed_now = not self._observed and self._observation_over()
            if observed_now:
                self._observed = True
            observing = not self._observed
        if current is None and observing and not claims:
            # Our first ring waits for the observation period, unless we join members
            # that already published one: replicas started together each hold their Lease
            # before they see the others', and a ring of ourselves alone would have every
            # sharded cache list the whole space (an unsharded replica's peak memory,
            # which Python keeps) only to drop most of it a moment later. No key starts
            # before the observation period is over anyway.
            if not self._told_observing:
                self._told_observing = True
                logger.info(
                    "watching the ring for a lease duration before the first one: no key "
                    "starts before (sharding.leaseDuration)",
                    extra={
                        "ring": self.options.ring_name,
                        "seconds": self.options.lease_duration,
                    },
                )
            return
        if desired != current or self._published_params != self._configured():
            self._apply(desired, stop)
            return
        synced_now = self._synced_now()
        if own is not None and self._visible != current and self._is_published(own):
            with self._cond:
                self._visible = current
                self._pending = []
            self._requeue()
        elif changed_claims or observed_now or synced_now:
            self._requeue()  # a key another member held (or not yet listed) may start now
        self._collect_garbage(members)

    def _observation_over(self) -> bool:
        started = self._view_started
        return started is not None and (self._clock.now() - started >= self.options.lease_duration)

    def _synced_now(self) -> bool:
        """Whether gained ranges finished their first list since the last step (an entry
        whose segment ended before it synced — the ranges were lost again — is dropped
        once every informer says the ranges it covers are synced)."""
        with self._cond:
            informers = list(self._informers)
            left = [
                (g, e)
                for g, e in self._syncing
                if not e.is_set()
                and not all(inf.synced_for(lo) for inf in informers for lo, _ in g.ranges)
            ]
            done = len(left) != len(self._syncing)
            self._syncing = left
        return done

    def _observe(self) -> tuple[list[str], dict[str, SlotRing], JsonDict | None]:
        """Live members other than us, their published rings, and our own Lease as cached.

        A member is live while its Lease is held and, as of the freshest moment our cache
        is known to cover, changed within its duration. A Lease that vanished from the
        cache counts as it was last seen until then."""
        now = self._clock.now()
        members: list[str] = []
        claims: dict[str, SlotRing] = {}
        own: JsonDict | None = None
        seen: dict[str, _Seen] = {}
        for lease in self._leases.indexer.list():
            meta = lease.get("metadata") or {}
            name = str(meta.get("name") or "")
            spec = lease.get("spec") or {}
            annotations = meta.get("annotations") or {}
            if name == self.lease_name:
                own = lease
                written = self._elector.written_at(str(spec.get("renewTime") or ""))
                if written is not None and (self._fresh_at is None or written > self._fresh_at):
                    self._fresh_at = written
                continue
            record = (
                spec.get("holderIdentity") or "",
                spec.get("renewTime"),
                spec.get("leaseDurationSeconds"),
                annotations.get(APPLIED_ANNOTATION),
            )
            previous = self._seen.get(name)
            entry = previous if previous is not None and previous.record == record else None
            seen[name] = entry or _Seen(record, now, _params(annotations.get(PARAMS_ANNOTATION)))
        for name, previous in self._seen.items():
            if name not in seen and name != self.lease_name:
                previous.vanished = True  # deleted: counts as last seen until it expires
                seen[name] = previous
        for name in list(seen):
            entry = seen[name]
            record = entry.record
            duration = record[2] if isinstance(record[2], int) and record[2] > 0 else None
            fresh = self._fresh_at
            expired = fresh is not None and (
                fresh - entry.changed_at >= (duration or self.options.lease_duration)
            )
            if expired and entry.vanished:
                del seen[name]
                continue
            if not record[0] or expired:
                continue  # released or expired: not a member, claims nothing
            members.append(name)
            decoded = decode_ring(str(record[3] or ""))
            if decoded is not None:
                claims[name] = self._ring(*decoded)
        self._seen = seen
        return members, claims, own

    def _check_view(self) -> None:
        """A view older than a lease duration while our renewals succeed is a stalled
        watch: report it and restart the watch."""
        now = self._clock.now()
        since = self._fresh_at if self._fresh_at is not None else self._view_started
        if since is None or now - since <= self.options.lease_duration:
            self._stale = False
            return
        if self._stale:
            return
        self._stale = True
        STALE_VIEWS.labels(self.options.ring_name).inc()
        logger.warning(
            "the ring's Lease watch is stale: restarting it",
            extra={"ring": self.options.ring_name, "view_age": round(now - since, 3)},
        )
        self._leases.restart_watch()

    def _ring_params(self, members: list[str]) -> RingParameters:
        """The parameters of the lowest-named live member that published its own (ours
        when we are the lowest, or nobody else published)."""
        mine = self._configured()
        candidates = sorted(
            [(self.lease_name, mine.describe(), mine)]
            + [
                (name, params.describe(), params)
                for name in members
                if (params := self._seen[name].params) is not None
            ]
        )
        chosen = candidates[0][2]
        if chosen != self._following:
            with self._cond:
                before, self._following = self._following, chosen
            # Units another member knows before us (or after) are no misconfiguration:
            # only the configured part counts, and is told once per change.
            differs = chosen.rules() != mine.rules()
            PARAMS_MISMATCH.labels(self.options.ring_name).set(int(differs))
            if differs and (before is None or before.rules() != chosen.rules()):
                logger.warning(
                    "ring parameters differ from this replica's: following the ring's",
                    extra={
                        "ring": self.options.ring_name,
                        "parameters": chosen.rules().describe(),
                        "configured": mine.rules().describe(),
                        "from": candidates[0][0],
                    },
                )
        return chosen

    def _ring(self, params: RingParameters, members: tuple[str, ...]) -> SlotRing:
        key = (params, tuple(sorted(set(members))))
        ring = self._rings.get(key)
        if ring is None:
            if len(self._rings) > 64:
                self._rings.clear()
            ring = self._rings[key] = SlotRing(key[1], params)
        return ring

    def _ranges_for(self, informer: ShardedInformer, ring: SlotRing) -> list[HashRange]:
        """What ``informer`` caches under ``ring``: our ranges when it hashes the field the
        ring shards by (owned objects by their owner's uid follow a uid ring), else the
        whole space (a ring whose parameters differ from ours, during a rollout)."""
        field = SHARD_BY_UID if informer.shard_by == SHARD_BY_OWNER else informer.shard_by
        if field != ring.shard_by:
            return [(0, HASH_SPACE)]
        return ring.ranges_of(self.lease_name)

    def _gain_ranges(self, desired: SlotRing) -> None:
        """Before ``desired`` is applied: every sharded cache lists the ranges it gains
        (keeping all it has: the lost ones leave after the publication), and keys of
        gained ranges wait for that list (:meth:`_may_work`)."""
        with self._cond:
            informers = list(self._informers)
        for informer in informers:
            old = informer.ranges
            new = self._ranges_for(informer, desired)
            gained = subtract_ranges(new, old)
            if not gained:
                continue
            synced = informer.set_ranges(merge_ranges([*old, *new]))
            if not synced.is_set():
                with self._cond:
                    self._syncing.append((RangeSet(gained), synced))

    def _drop_ranges(self, applied: SlotRing) -> None:
        """After ``applied`` is published: every sharded cache drops what it lost."""
        with self._cond:
            informers = list(self._informers)
        for informer in informers:
            informer.set_ranges(self._ranges_for(informer, applied))

    def _apply(self, desired: SlotRing, stop: threading.Event) -> None:
        """List what we gain, drain what we lose, abandon its writes still in flight,
        apply and publish ``desired``, then drop what we lost from the caches."""
        me = self.lease_name
        started = time.monotonic()
        self._gain_ranges(desired)
        with self._cond:
            previous = self._applied
            self._desired = desired
            deadline = started + self.options.drain_timeout
            self._drain_deadline = deadline
        self._tell_watchers()  # what is drained may let go of its keys now (a cluster)
        with self._cond:

            def draining() -> list[str]:
                return [k for k, h in self._inflight if desired.owner_of(h) != me]

            while (left := draining()) and not stop.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(min(remaining, 0.1))
            timed_out = bool(draining())
            self._applied = desired  # from now on writes are judged by the new ring
            self._pending.append(desired)
            self._desired = None
        # Nothing of a key we give away may still be on its way (a write sent before the
        # drain's deadline, an Event): abandoned before the others can start the key.
        self._give_up(lambda h: _owner(desired, h) != me, "the key moved to another replica")
        waited = time.monotonic() - started
        ring = self.options.ring_name
        DRAIN_SECONDS.labels(ring).observe(waited)
        DRAINS.labels(ring, "timeout" if timed_out else "ok").inc()
        if timed_out:
            logger.warning(
                "drain timed out: the remaining reconciles' writes are refused",
                extra={"ring": ring, "keys": ",".join(sorted(left)[:10])},
            )
        gained, lost, owned = self._moves(previous, desired)
        MOVES.labels(ring, "in").inc(gained)
        MOVES.labels(ring, "out").inc(lost)
        RING_CHANGES.labels(ring).inc()
        RING_MEMBERS.labels(ring).set(len(desired))
        RING_INFO.clear()
        RING_INFO.labels(ring, desired.version).set(1)
        KEYS_OWNED.labels(ring).set(owned)
        with self._cond:
            self._owned = owned
        self._report_membership()
        logger.info(
            "ring changed",
            extra={
                "ring": ring,
                "version": desired.version,
                "members": ",".join(desired.members),
                "keys_in": gained,
                "keys_out": lost,
                "keys_owned": owned,
                "drain_seconds": round(waited, 3),
            },
        )
        params = self._configured()
        patch = {
            "metadata": {
                "annotations": {
                    APPLIED_ANNOTATION: encode_ring(desired),
                    PARAMS_ANNOTATION: params.describe(),
                }
            }
        }
        written = self._client.patch(LEASES, self.lease_name, patch, namespace=self.namespace)
        rv = str((written.get("metadata") or {}).get("resourceVersion") or "0")
        with self._cond:
            self._published_rv = int(rv) if rv.isdigit() else 0
            self._published_params = params
        # Published: nothing of the lost ranges runs or will start here; memory comes back.
        self._drop_ranges(desired)
        self.wake()  # the next step sees our publication in the cache and starts gained keys

    def _is_published(self, own: JsonDict) -> bool:
        """Our applied ring, as cached, at or after the revision that published it."""
        meta = own.get("metadata") or {}
        applied = self._applied
        if applied is None or (meta.get("annotations") or {}).get(
            APPLIED_ANNOTATION
        ) != encode_ring(applied):
            return False
        rv = str(meta.get("resourceVersion") or "0")
        return (int(rv) if rv.isdigit() else 0) >= self._published_rv

    def _moves(self, before: SlotRing | None, after: SlotRing) -> tuple[int, int, int]:
        """Keys gained, lost and owned, among those cached (a cache of our share only
        counts the keys we lose and keep; gained ones arrive with their list)."""
        me = self.lease_name
        gained = lost = owned = 0
        for _, h in self._keys():
            now = after.owner_of(h) == me
            was = before is not None and before.owner_of(h) == me
            owned += now
            gained += now and not was
            lost += was and not now
        return gained, lost, owned

    def _keys(self) -> set[tuple[str, int]]:
        with self._cond:
            controllers = list(self._controllers)
        keys: set[tuple[str, int]] = set()
        for _, hashes in controllers:
            keys.update((request.key, h) for request, h in hashes.cached())
        return keys

    def _requeue(self) -> None:
        """Every key of every sharded controller back in its queue: the reconcile wrapper
        decides; keys that are not ours cost one lookup."""
        with self._cond:
            controllers = list(self._controllers)
            ring = self._applied
        owned = 0
        for controller, hashes in controllers:
            for request, h in hashes.cached():
                if ring is not None and ring.owner_of(h) == self.lease_name:
                    owned += 1
                    controller.enqueue(request)
        KEYS_OWNED.labels(self.options.ring_name).set(owned)
        with self._cond:
            self._owned = owned
        self._tell_watchers()

    def _collect_garbage(self, members: list[str]) -> None:
        """The lowest member deletes shard Leases dead for a while (pods come and go with
        new identities); rv-checked, so a Lease renewed meanwhile stays."""
        if min([*members, self.lease_name]) != self.lease_name:
            return
        after = max(60.0, 4 * self.options.lease_duration)
        now = self._clock.now()
        for lease in self._leases.indexer.list():
            meta = lease.get("metadata") or {}
            name = str(meta.get("name") or "")
            seen = self._seen.get(name)
            if name == self.lease_name or name in members or seen is None:
                continue
            if now - seen.changed_at < after:
                continue
            try:
                self._client.delete(
                    LEASES,
                    name,
                    self.namespace,
                    preconditions={"resourceVersion": meta.get("resourceVersion")},
                )
                logger.info("deleted a dead shard Lease", extra={"lease": name})
            except (NotFound, Conflict):
                pass


def _owner(ring: SlotRing, h: int) -> str:
    return ring.owner_of(h)


class _Waker:
    """The Lease informer's handler: any change wakes the ring thread."""

    def __init__(self, ring: ShardRing) -> None:
        self._ring = ring

    def on_add(self, obj: JsonDict, is_in_initial_list: bool) -> None:
        self._ring.wake()

    def on_update(self, old: JsonDict, new: JsonDict) -> None:
        self._ring.wake()

    def on_delete(self, obj: object) -> None:
        self._ring.wake()


class KeyHashes:
    """The shard hash of a sharded controller's keys, found from its primary cache.

    A request carries ``namespace/name``; the ring places the primary object's uid (or
    namespace) hash. With ``namespace`` the key says it. With ``uid`` it is the uid of the
    object the primary cache holds under the key, or — for an object deleted since — the
    uid it last had (:meth:`~manager.cache.sharded.ShardedInformer.last_known`: recorded
    under the cache's lock before the delete is delivered, so the reconcile the delete
    wakes finds it). A key whose object this replica never cached has no hash: it is
    not in our ranges, or gone before we listed it, and is skipped (as a key of another
    replica is). So every write of a key is fenced by the hash of an object we cached.

    Thread-safe (reads the cache; the ring's followed parameters under its lock).
    """

    def __init__(self, ring: ShardRing, primary: SharedInformer) -> None:
        self._ring = ring
        self._primary = primary

    def hash_of(self, key: str) -> int | None:
        """The shard hash of ``key`` (None: unknown here)."""
        return self.locate(key)[0]

    def locate(self, key: str) -> tuple[int | None, str | None]:
        """The shard hash of ``key`` (None: unknown here) and the uid of the incarnation
        it was found from (None: none cached; with ``namespace`` the hash needs none)."""
        obj = self._last_known(key)
        meta = (obj.get("metadata") or {}) if obj is not None else {}
        uid = str(meta.get("uid") or "") or None
        if self._ring.following().shard_by == SHARD_BY_NAMESPACE:
            namespace, sep, _ = key.partition("/")
            return fnv1a_64(namespace if sep else ""), uid
        return (fnv1a_64(uid) if uid else None), uid

    def settled(self, key: str) -> None:
        """A reconcile of ``key`` ended for good: a deleted object's uid may go."""
        if isinstance(self._primary, ShardedInformer):
            self._primary.forget(key)

    def cached(self) -> list[tuple[Request, int]]:
        """Every key cached in the primary informer, with its hash."""
        shard_by = self._ring.following().shard_by
        out = []
        for obj in self._primary.indexer.list():
            meta = obj.get("metadata") or {}
            ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
            value = ns if shard_by == SHARD_BY_NAMESPACE else str(meta.get("uid") or "")
            out.append((Request(ns, name), fnv1a_64(value)))
        return out

    def _last_known(self, key: str) -> JsonDict | None:
        if isinstance(self._primary, ShardedInformer):
            return self._primary.last_known(key)
        return self._primary.indexer.get_by_key(key)


class ShardedReconciler:
    """Runs ``inner`` for the keys this replica may work on now, under the key's write
    fence; any other key is skipped (it comes back when ownership changes), and so is a
    key whose hash is unknown here (:class:`KeyHashes`). A key the applied ring gives this
    replica but that may not start yet (its claim not yet seen, another member's claim,
    ranges still syncing) is requeued after ``retry``: an event is never dropped for a
    reason that passes. ``inner`` runs for the incarnation (uid) the hash was found from
    (:func:`~manager.reconcile.incarnation`)."""

    retry: float = 0.5  # seconds before a key of ours that may not start yet is tried again

    def __init__(self, ring: ShardRing, inner: Reconciler) -> None:
        self.ring = ring
        self.inner = inner
        self.keys: KeyHashes | None = None  # set when the primary resource is known

    def reconcile(self, request: Request) -> Result:
        key = request.key
        keys = self.keys
        if keys is None:
            raise RuntimeError("a sharded reconciler needs its primary cache (for_())")
        h, uid = keys.locate(key)
        if h is None:
            return Result()
        if not self.ring.begin(key, h):
            if self.ring.owns(h) and not self.ring.lost:
                return Result(requeue_after=self.retry)
            return Result()
        settled = False
        try:
            with fenced(self.ring.fence(key, h)), reconciling(uid):
                result = self.inner.reconcile(request)
            settled = not result.requeue and result.requeue_after is None
            return result
        finally:
            self.ring.end(key, h)
            if settled:
                keys.settled(key)

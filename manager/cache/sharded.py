"""The sharded informer: a shared informer that caches only a replica's share of a
resource, a set of hash ranges on kube-apiserver's shard hash space (KEP-5866).

What it caches, by ``shard_by``:

* ``uid`` / ``namespace``: objects whose FNV-1a 64 hash of ``metadata.uid`` (resp.
  ``metadata.namespace``) is in the ranges. It lists and watches with
  ``shardSelector=shardRange(object.metadata.<field>, ...) || ...``.
* ``owner``: objects whose *controller owner's* uid hashes into the ranges (owned
  objects follow their owner, itself sharded by uid). No server can filter on that: it
  lists and watches everything and filters before the store. Memory divides, watch
  traffic does not.

Lists come in pages of :data:`LIST_PAGE` (consistent lists, which kube-apiserver 1.34+
serves from its watch cache), each page filtered before the next, so that a replica's
peak memory is its share plus one page, not a whole list's bytes and objects at once.

Server mode and fallback (never assume the gate): a list answered with
``metadata.shardInfo`` was filtered by the server (kube-apiserver 1.36+ with
``--feature-gates=ShardedListAndWatch=true``); one without it (gate off, older server,
or ``owner``) was not, and the informer filters on the client with the same ranges. The
mode is logged once when first known (again with a warning if a later list disagrees)
and exported as ``overseer_shard_informer_mode``. Every list and event passes the range
filter either way (one FNV-1a per object): a watch that outlives a range loss by a few
events cannot put an object of a lost range back.

Ring changes (:meth:`ShardedInformer.set_ranges`), without relisting what is kept:

* Gained ranges get a *segment* of their own: one reflector that lists and watches just
  them. ``set_ranges`` returns a :class:`threading.Event` set once every gained segment
  has its first list in the store and delivered to every handler (as adds with
  ``is_in_initial_list=True``): the signal "synced before started".
* Lost ranges leave their segments: a segment left without ranges stops; one that keeps
  some re-opens its watch from its last resourceVersion with the narrower selector (no
  relist). Their objects are dropped from the store at once, **without** delete
  notifications to handlers: the objects were not deleted, and a delete would wake
  reconciles that read "not found" and may clean up what another replica now owns
  (client-go delivers deletes when an object leaves a label selector because it
  changed; here nothing changed but the owner). Dropped objects are counted.
* Each gain adds one LIST and one WATCH; segments end when their ranges are all lost.

An object whose hash changes leaves the ranges as an object leaves a label selector in
client-go: only ``owner`` hashes can change (an object re-parented to an owner of another
shard, or orphaned: an owner deleted with ``propagationPolicy: Orphan`` loses its
dependents' ownerReferences, and an object without a controller owner is in no range).
The cache that held it drops it and delivers a delete carrying its last cached state at
the revision of the change, what kube-apiserver's watch cache (and the local server)
sends for an object that stops matching a selector; the cache whose ranges it enters
gets an add. Without that, its stale copy would stay, and stay after its deletion (whose
final state is out of range too) until a relist. A uid or namespace never changes, so by
those (and in server mode, which only they use) nothing leaves.

Two segments may hold the same ``namespace/name`` for a moment (an object deleted and
re-created under a new uid that hashes into another segment, seen by the two watches
in either order): a delete or update never touches a cached object with another uid
unless it is newer (a larger resourceVersion), so the store ends with the live one.

Metrics: ``overseer_informer_objects{resource}`` (objects cached, as for any informer),
``overseer_shard_informer_mode{resource,mode}`` (1 for the mode in effect: server or
client), ``overseer_shard_informer_ranges{resource}`` and
``overseer_shard_informer_share{resource}`` (ranges owned and their share of the hash
space), ``overseer_shard_informer_ring_lists_total{resource}`` (lists caused by ring
changes: one per gain), ``overseer_shard_informer_dropped_total{resource}`` (objects
dropped at losses).

Thread-safe: every public method may be called from any thread.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Final

from prometheus_client import Counter, Gauge

from manager.cache.frozen import freeze_in_place
from manager.cache.informer import _INITIAL_DONE, SharedInformer, _Note
from manager.cache.listwatch import ResourceListWatch
from manager.cache.reflector import Reflector, Transform, WatchEvents, drop_managed_fields
from manager.cache.store import IndexFunc
from manager.client import KubeClient
from manager.clock import Clock
from manager.hashring import (
    SHARD_BY_NAMESPACE,
    SHARD_BY_UID,
    HashRange,
    RangeSet,
    fnv1a_64,
    intersect_ranges,
    ranges_size,
    shard_hash,
    shard_selector,
    subtract_ranges,
)
from manager.keys import DeletedFinalStateUnknown, JsonDict, meta_namespace_key
from manager.metrics import REGISTRY
from manager.resources import Resource

__all__ = [
    "MODE_CLIENT",
    "MODE_SERVER",
    "SHARD_BY_OWNER",
    "ShardedInformer",
    "ShardedListWatch",
]

logger = logging.getLogger(__name__)

SHARD_BY_OWNER: Final = "owner"
LIST_PAGE: Final = 500
"""Objects per LIST page of a sharded cache (each page is filtered before the next)."""
GONE_KEPT: Final = 50_000
"""Deleted objects whose last-known metadata a sharded informer keeps (oldest go first)."""
MODE_SERVER: Final = "server"
MODE_CLIENT: Final = "client"

_MODE = Gauge(
    "overseer_shard_informer_mode",
    "1 for the mode a sharded informer is in: server (the API server filtered its last "
    "list by shardSelector) or client (it filters on the client).",
    ["resource", "mode"],
    registry=REGISTRY,
)
_RANGES = Gauge(
    "overseer_shard_informer_ranges",
    "Hash ranges a sharded informer caches.",
    ["resource"],
    registry=REGISTRY,
)
_SHARE = Gauge(
    "overseer_shard_informer_share",
    "The share of the shard hash space a sharded informer caches (0..1).",
    ["resource"],
    registry=REGISTRY,
)
_RING_LISTS = Counter(
    "overseer_shard_informer_ring_lists_total",
    "LISTs a sharded informer made because a ring change gave it ranges.",
    ["resource"],
    registry=REGISTRY,
)
_DROPPED = Counter(
    "overseer_shard_informer_dropped_total",
    "Objects a sharded informer dropped from its cache because it lost their ranges.",
    ["resource"],
    registry=REGISTRY,
)


def _owner_hash(obj: JsonDict) -> int | None:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    for ref in refs:
        if ref.get("controller") and ref.get("uid"):
            return fnv1a_64(str(ref["uid"]))
    return None


def _int_rv(obj: JsonDict) -> int:
    rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
    return int(rv) if rv.isdigit() else -1


class ShardedListWatch:
    """Lists and watches one segment's ranges (client-go ``cache.ListWatch`` with a
    shard selector). ``server_filtered`` tells whether the last list carried
    ``metadata.shardInfo`` (None before the first list)."""

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        ranges: Callable[[], RangeSet],
        *,
        shard_by: str,
        description: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> None:
        self._inner = ResourceListWatch(
            client,
            resource,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
        )
        self._client = client
        self._ranges = ranges
        self._shard_by = shard_by
        self._description = description
        self.server_filtered: bool | None = None

    @property
    def description(self) -> str:
        return self._description

    def selector(self) -> str | None:
        """The shardSelector sent now (None for ``owner``, or without ranges)."""
        ranges = self._ranges()
        if self._shard_by == SHARD_BY_OWNER or not ranges:
            return None
        return shard_selector(ranges.ranges, self._shard_by)

    def list(self, *, resource_version: str, limit: int | None, continue_: str | None) -> JsonDict:
        inner = self._inner
        page = self._client.list(
            inner.resource,
            inner.namespace,
            label_selector=inner.label_selector,
            field_selector=inner.field_selector,
            limit=limit,
            continue_=continue_,
            resource_version=resource_version or None,
            shard_selector=self.selector(),
        )
        api_version, kind = inner.resource.api_version, inner.resource.kind
        for item in page.get("items") or ():
            if "kind" not in item:
                item["apiVersion"] = api_version
                item["kind"] = kind
        self.server_filtered = "shardInfo" in (page.get("metadata") or {})
        return page

    def watch(
        self, *, resource_version: str, timeout_seconds: int, read_timeout: float
    ) -> WatchEvents:
        inner = self._inner
        return self._client.watch(
            inner.resource,
            inner.namespace,
            resource_version=resource_version,
            label_selector=inner.label_selector,
            field_selector=inner.field_selector,
            timeout_seconds=timeout_seconds,
            read_timeout=read_timeout,
            allow_bookmarks=True,
            shard_selector=self.selector(),
        )


class _Segment:
    """Ranges gained together: one reflector (a :class:`~manager.cache.reflector.
    ReflectorSink` that forwards to the informer under its lock)."""

    def __init__(self, informer: ShardedInformer, ranges: RangeSet, n: int) -> None:
        self.informer = informer
        self.ranges = ranges
        self.n = n
        self.listed = False
        self.synced = False
        self._waiters: list[threading.Event] = []
        self._guard = threading.Lock()
        self.stopped = False
        self.lw = ShardedListWatch(
            informer._client,
            informer._resource,
            lambda: self.ranges,
            shard_by=informer.shard_by,
            description=informer.name,
            namespace=informer._namespace,
            label_selector=informer._label_selector,
            field_selector=informer._field_selector,
        )
        # Listed in pages, each page filtered before the next: a replica never holds more
        # than its share and one page. A whole list parsed at once costs the list's bytes
        # and its objects together (a 10,000-object share took a replica from 67 to 124
        # MiB for a moment, its peak), and Python keeps that memory. By owner, or where
        # the server ignores the selector (gate off), a list brings the whole resource:
        # parsed at once, that is an unsharded replica's peak. kube-apiserver 1.34+
        # serves such paginated consistent lists from its watch cache
        # (ConsistentListFromCache, ListFromCacheSnapshot).
        self.reflector = Reflector(
            self.lw,
            self,
            transform=informer._transform,
            page_size=informer._page_size or LIST_PAGE,
            paged_lists=True,
            keep=lambda obj: informer._in(self, obj),
            clock=informer._clock,
            cached=informer._cached_version,
        )
        self.thread: threading.Thread | None = None

    def wait_for_sync(self, event: threading.Event) -> None:
        """Set ``event`` once this segment has synced (now, if it has)."""
        with self._guard:
            if not self.synced:
                self._waiters.append(event)
                return
        event.set()

    def set_synced(self) -> None:
        with self._guard:
            self.synced = True
            waiters, self._waiters = self._waiters, []
        for event in waiters:
            event.set()

    def replace(self, objs: list[JsonDict], resource_version: str) -> None:
        self.informer._segment_replace(self, objs)

    def add(self, obj: JsonDict) -> None:
        self.informer._segment_event(self, "ADDED", obj)

    def update(self, obj: JsonDict) -> None:
        self.informer._segment_event(self, "MODIFIED", obj)

    def delete(self, obj: JsonDict) -> None:
        self.informer._segment_event(self, "DELETED", obj)


class ShardedInformer(SharedInformer):
    """A resource's cache for a set of hash ranges (see the module docstring).

    Args:
        client: the API client.
        resource: what to list and watch.
        shard_by: ``uid``, ``namespace`` or ``owner`` (the controller owner's uid).
        ranges: the initial ranges (more or fewer later with :meth:`set_ranges`); none
            means nothing is listed until ranges arrive (synced, empty).
        namespace, label_selector, field_selector: the scope, as for any informer.
        indexers, transform, page_size, clock: as :class:`SharedInformer`.
    """

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        *,
        shard_by: str = SHARD_BY_UID,
        ranges: Iterable[HashRange] = (),
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
        transform: Transform | None = drop_managed_fields,
        page_size: int | None = None,
        clock: Clock | None = None,
    ) -> None:
        if shard_by not in (SHARD_BY_UID, SHARD_BY_NAMESPACE, SHARD_BY_OWNER):
            raise ValueError(
                f"shard_by must be uid, namespace or owner, got {shard_by!r} "
                f"(informer for {resource})"
            )
        base = ResourceListWatch(
            client,
            resource,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
        )
        description = f"{base.description} shardBy={shard_by}"
        named = _Named(description)
        super().__init__(
            named, indexers=indexers, transform=transform, page_size=page_size, clock=clock
        )
        self.shard_by = shard_by
        self._client = client
        self._resource = resource
        self._namespace = base.namespace
        self._label_selector = base.label_selector
        self._field_selector = base.field_selector
        self._transform = transform
        self._page_size = page_size
        self._ranges = RangeSet(ranges)
        self._segments: list[_Segment] = []
        self._ended: list[threading.Thread] = []
        self._numbers = itertools.count()
        self._run_stop: threading.Event | None = None
        self._mode: str | None = None
        self._gone: OrderedDict[str, JsonDict] = OrderedDict()  # key -> deleted's metadata
        self._hash: Callable[[JsonDict], int | None] = (
            _owner_hash if shard_by == SHARD_BY_OWNER else lambda o: shard_hash(o, shard_by)
        )
        if self._ranges:
            self._segments.append(_Segment(self, self._ranges, next(self._numbers)))
        self._publish_ranges()

    # -- public ----------------------------------------------------------------------

    @property
    def ranges(self) -> list[HashRange]:
        """The ranges cached now."""
        with self._lock:
            return list(self._ranges.ranges)

    def synced_for(self, h: int) -> bool:
        """Whether the objects of shard hash ``h`` are listed and delivered: True when a
        segment caching ``h`` has synced, or ``h`` is not in this informer's ranges (it
        has nothing to wait for). The ground truth, whatever became of the events
        :meth:`set_ranges` returned (a segment stopped before it synced never sets its)."""
        with self._lock:
            if h not in self._ranges:
                return True
            return any(h in seg.ranges and seg.synced for seg in self._segments)

    @property
    def mode(self) -> str | None:
        """``server`` or ``client`` once a list has told; None before."""
        with self._lock:
            return self._mode

    @property
    def segments(self) -> int:
        """Reflectors (each one LIST + one WATCH) running for the ranges."""
        with self._lock:
            return sum(1 for s in self._segments if not s.stopped)

    @property
    def last_sync_resource_version(self) -> str:
        with self._lock:
            segments = list(self._segments)
        return max(
            (s.reflector.last_sync_resource_version for s in segments),
            key=lambda rv: int(rv) if rv.isdigit() else -1,
            default="",
        )

    def last_known(self, key: str) -> JsonDict | None:
        """The object cached at ``key``, or the metadata (uid, namespace, name) it last had
        if it was deleted since (recorded before the delete is delivered to handlers,
        kept until :meth:`forget`, a loss of its range, or :data:`GONE_KEPT` newer ones);
        None if neither."""
        with self._lock:
            obj = self._indexer.get_by_key(key)
            return obj if obj is not None else self._gone.get(key)

    def forget(self, key: str) -> None:
        """The deleted object at ``key`` needs no more work: its metadata may go."""
        with self._lock:
            self._gone.pop(key, None)

    def owns(self, obj: JsonDict) -> bool:
        """Whether ``obj`` falls in this informer's ranges."""
        h = self._hash(obj)
        with self._lock:
            return h is not None and h in self._ranges

    def set_ranges(self, ranges: Iterable[HashRange]) -> threading.Event:
        """Cache ``ranges`` from now on; returns an event set once the gained ranges are
        listed, stored and delivered to every handler (at once if nothing is gained).

        Lost ranges' objects leave the store before this returns, without delete
        notifications; kept ranges are not relisted.
        """
        new = RangeSet(ranges)
        done = threading.Event()
        waiting: _Segment | None = None
        dropped = 0
        with self._lock:
            old = self._ranges
            gained = subtract_ranges(new.ranges, old.ranges)
            lost = subtract_ranges(old.ranges, new.ranges)
            self._ranges = new
            if self._run_stop is None:  # not running: one segment, listed by run()
                self._segments = [_Segment(self, new, next(self._numbers))] if new else []
                waiting = self._segments[0] if gained else None
            else:
                for seg in self._segments:
                    kept = RangeSet(intersect_ranges(seg.ranges.ranges, new.ranges))
                    if kept == seg.ranges:
                        continue
                    seg.ranges = kept
                    if not kept:
                        seg.stopped = True
                        seg.reflector.stop()
                        # nobody waits for ranges lost before they synced
                        seg.set_synced()
                        if seg.thread is not None:
                            self._ended.append(seg.thread)
                    else:
                        seg.reflector.rewatch()  # the narrower selector, no relist
                self._segments = [seg for seg in self._segments if not seg.stopped]
                if lost:
                    dropped = self._drop(RangeSet(lost))
                if gained:
                    waiting = _Segment(self, RangeSet(gained), next(self._numbers))
                    self._segments.append(waiting)
                    self._start_segment(waiting)
        self._publish_ranges()
        if dropped:
            _DROPPED.labels(self.name).inc(dropped)
        logger.info(
            "sharded informer ranges changed",
            extra={
                "resource": self.name,
                "ranges": len(new.ranges),
                "gained": len(gained),
                "lost": len(lost),
                "dropped": dropped,
            },
        )
        if waiting is None:
            done.set()
        else:
            waiting.wait_for_sync(done)
        return done

    def run(self, stop: threading.Event) -> None:
        """Run the segments' reflectors and the handlers until ``stop``; joins every
        thread."""
        with self._lock:
            if self._started:
                raise RuntimeError(f"informer {self.name} may be run once")
            self._started = True
            self._run_stop = stop
            for listener in self._listeners:
                listener.start()
            for seg in self._segments:
                if not seg.stopped:
                    self._start_segment(seg)
            if not self._segments:
                self._listed = True  # nothing to list: synced and empty
                self._initial_listeners = list(self._listeners)
                for lst in self._listeners:
                    lst.push(_INITIAL_DONE)
        try:
            self._resync_loop(stop)
        finally:
            with self._lock:
                segments = list(self._segments)
            for seg in segments:
                seg.reflector.stop()
            for seg in segments:
                if seg.thread is not None:
                    seg.thread.join()
            for thread in self._ended:
                thread.join()
            with self._lock:
                self._stopped = True
                listeners = list(self._listeners)
            for listener in listeners:
                listener.stop()
            for listener in listeners:
                listener.join(None)

    # -- segments (under the lock unless said) ----------------------------------------

    def _start_segment(self, seg: _Segment) -> None:
        assert self._run_stop is not None
        seg.thread = threading.Thread(
            target=seg.reflector.run,
            args=(self._run_stop,),
            name=f"reflector/{self.name}/{seg.n}",
        )
        seg.thread.start()

    def _in(self, seg: _Segment, obj: JsonDict) -> bool:
        h = self._hash(obj)
        return h is not None and h in seg.ranges

    def _accept(self, obj: JsonDict, current: JsonDict | None) -> bool:
        """Whether ``obj`` may replace ``current`` at its key: the same object, or a newer
        one (another uid: deleted and re-created, seen by two segments in any order)."""
        if current is None:
            return True
        old_uid = (current.get("metadata") or {}).get("uid")
        if old_uid == (obj.get("metadata") or {}).get("uid"):
            return True
        return _int_rv(obj) > _int_rv(current)

    def _segment_replace(self, seg: _Segment, objs: list[JsonDict]) -> None:
        with self._lock:
            if seg.stopped:
                return
            self._note_mode(seg)
            mine = [o for o in objs if self._in(seg, o)]
            indexer = self._indexer
            notes: list[_Note] = []
            first = not seg.listed
            listed_keys = set()
            for obj in mine:
                key = meta_namespace_key(obj)
                before = indexer.get_by_key(key)
                if not self._accept(obj, before):
                    continue
                listed_keys.add(key)
                indexer.add(obj)
                self._gone.pop(key, None)
                if before is None or first:
                    notes.append(("add", obj, first))
                else:
                    notes.append(("update", before, obj))
            if not first:  # a relist: what vanished from this segment is deleted
                for obj in indexer.list():
                    key = meta_namespace_key(obj)
                    if key not in listed_keys and self._in(seg, obj):
                        indexer.delete(obj)
                        self._note_gone(key, obj)
                        notes.append(("delete", DeletedFinalStateUnknown(key, obj), None))
            seg.listed = True
            initial = not self._listed
            if initial:
                self._listed = True
                self._initial_listeners = list(self._listeners)
            for lst in self._listeners:
                lst.push_many(notes)
                if initial:
                    lst.push(_INITIAL_DONE)
            if first:
                self._mark_synced(seg)
                if not initial:
                    _RING_LISTS.labels(self.name).inc()
            self._metric.set(len(indexer))

    def _segment_event(self, seg: _Segment, type_: str, obj: JsonDict) -> None:
        with self._lock:
            if seg.stopped:
                return
            key = meta_namespace_key(obj)
            before = self._indexer.get_by_key(key)
            if not self._in(seg, obj):
                if before is not None and self._left(seg, before, obj):
                    self._leave(key, before, obj)
                return
            if type_ == "DELETED":
                if before is None or not self._same_or_older(before, obj):
                    return
                self._indexer.delete(obj)
                self._note_gone(key, obj)
                self._notify(("delete", obj, None))
            else:
                if not self._accept(obj, before):
                    return
                self._indexer.add(obj)
                self._gone.pop(key, None)
                self._notify(("add", obj, False) if before is None else ("update", before, obj))
            self._metric.set(len(self._indexer))

    def _left(self, seg: _Segment, cached: JsonDict, obj: JsonDict) -> bool:
        """Whether ``obj``, out of ``seg``'s ranges, is ``cached`` (same uid) leaving this
        cache: ``seg`` held it and none of the informer's ranges holds it now (in another
        segment's ranges it only moved: that segment's event updates it)."""
        if not self._in(seg, cached) or not self._same_or_older(cached, obj):
            return False
        h = self._hash(obj)
        return h is None or h not in self._ranges

    def _leave(self, key: str, cached: JsonDict, obj: JsonDict) -> None:
        """The object at ``key`` left the ranges (its owner changed, or it has none): for
        this cache it is deleted. Handlers get the delete kube-apiserver's watch cache
        sends for an object leaving a selector: the last state this cache had (whose
        owner is the key to wake) at the revision of the change."""
        meta = dict(cached.get("metadata") or {})
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if rv:
            meta["resourceVersion"] = rv
        gone = freeze_in_place({**cached, "metadata": meta})  # read-only as all it hands out
        self._indexer.delete(gone)
        self._note_gone(key, gone)
        self._notify(("delete", gone, None))
        self._metric.set(len(self._indexer))

    @staticmethod
    def _same_or_older(current: JsonDict, deleted: JsonDict) -> bool:
        """A delete removes the cached object only if it is that object (same uid)."""
        uid = (current.get("metadata") or {}).get("uid")
        return bool(uid == (deleted.get("metadata") or {}).get("uid"))

    def _mark_synced(self, seg: _Segment) -> None:
        """``seg`` is synced once every handler has delivered what was pushed so far."""
        listeners = list(self._listeners)
        if not listeners:
            seg.set_synced()
            return
        left = [len(listeners)]
        guard = threading.Lock()

        def one_done() -> None:
            with guard:
                left[0] -= 1
                last = left[0] == 0
            if last:
                seg.set_synced()

        for lst in listeners:
            lst.push(("call", one_done, None))

    def _note_gone(self, key: str, obj: JsonDict) -> None:
        meta = obj.get("metadata") or {}
        stub = {k: meta[k] for k in ("uid", "namespace", "name", "ownerReferences") if k in meta}
        self._gone[key] = freeze_in_place({"metadata": stub})
        self._gone.move_to_end(key)
        while len(self._gone) > GONE_KEPT:
            self._gone.popitem(last=False)

    def _drop(self, lost: RangeSet) -> int:
        gone = [o for o in self._indexer.list() if (h := self._hash(o)) is not None and h in lost]
        for obj in gone:
            self._indexer.delete(obj)
        for key, stub in list(self._gone.items()):
            if (h := self._hash(stub)) is not None and h in lost:
                del self._gone[key]
        self._metric.set(len(self._indexer))
        return len(gone)

    def _note_mode(self, seg: _Segment) -> None:
        mode = MODE_SERVER if seg.lw.server_filtered else MODE_CLIENT
        if mode == self._mode:
            return
        extra = {"resource": self.name, "mode": mode, "shard_by": self.shard_by}
        if self._mode is None:
            if mode == MODE_SERVER:
                logger.info("sharded list and watch: the API server filters", extra=extra)
            else:
                logger.info(
                    "sharded list and watch: filtering on the client (the API server "
                    "ignored shardSelector, or the shard is by owner)",
                    extra=extra,
                )
        else:
            logger.warning("sharded list and watch: the mode changed", extra=extra)
        self._mode = mode
        _MODE.labels(self.name, MODE_SERVER).set(mode == MODE_SERVER)
        _MODE.labels(self.name, MODE_CLIENT).set(mode == MODE_CLIENT)

    def _publish_ranges(self) -> None:
        with self._lock:
            ranges = self._ranges.ranges
        _RANGES.labels(self.name).set(len(ranges))
        _SHARE.labels(self.name).set(ranges_size(ranges) / (1 << 64))


class _Named:
    """A lister-watcher that only names the informer (its segments do the work)."""

    def __init__(self, description: str) -> None:
        self._description = description

    @property
    def description(self) -> str:
        return self._description

    def list(self, *, resource_version: str, limit: int | None, continue_: str | None) -> JsonDict:
        raise RuntimeError("a sharded informer lists through its segments")

    def watch(
        self, *, resource_version: str, timeout_seconds: int, read_timeout: float
    ) -> WatchEvents:
        raise RuntimeError("a sharded informer watches through its segments")

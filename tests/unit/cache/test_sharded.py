"""The sharded informer's store rules, without a server: the range filter before the
store; a key held by two segments at once (an object re-created under a new uid that
hashes elsewhere) ends with the live object whatever the order; and an owned object whose
owner changes (re-parented, orphaned) leaves the cache that held it as a delete and
enters the one of its new range as an add."""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from typing import Any, cast

import pytest

from manager.cache.frozen import freeze
from manager.cache.informer import HandlerFuncs, HandlerRegistration
from manager.cache.sharded import SHARD_BY_OWNER, ShardedInformer, _Segment
from manager.client import KubeClient
from manager.hashring import HASH_SPACE, RangeSet, fnv1a_64
from manager.resources import builtin
from tests.unit.cache.fakes import WAIT

CM = builtin("v1", "configmaps")
HALF = 1 << 63
UIDS = [str(uuid.uuid5(uuid.NAMESPACE_DNS, f"object-{i}")) for i in range(40)]  # uuid-like
LOW_UIDS = [u for u in UIDS if fnv1a_64(u) < HALF][:5]
HIGH_UIDS = [u for u in UIDS if fnv1a_64(u) >= HALF][:5]


def cm(name: str, uid: str, rv: int, **meta: object) -> dict[str, object]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": str(rv)} | meta
    }


def informer(shard_by: str = "uid") -> ShardedInformer:
    client = cast(KubeClient, object())  # never called: no reflector runs here
    return ShardedInformer(client, CM, shard_by=shard_by, ranges=[(0, HALF)])


def names(inf: ShardedInformer) -> set[str]:
    return {o["metadata"]["name"] for o in inf.indexer.list()}


def test_only_objects_in_range_reach_the_store() -> None:
    inf = informer()
    (seg,) = inf._segments
    seg.replace([cm("a", LOW_UIDS[0], 1), cm("b", HIGH_UIDS[0], 2)], "2")
    seg.add(cm("c", HIGH_UIDS[1], 3))
    seg.add(cm("d", LOW_UIDS[1], 4))
    assert names(inf) == {"a", "d"}
    assert inf.mode == "client"  # the list had no shardInfo
    assert inf.has_synced()


def test_owned_objects_are_kept_by_their_controller_owners_uid() -> None:
    inf = informer(SHARD_BY_OWNER)
    (seg,) = inf._segments

    def owned(name: str, owner_uid: str, controller: bool = True) -> dict[str, object]:
        ref = {"kind": "Deployment", "name": "d", "uid": owner_uid, "controller": controller}
        return cm(name, HIGH_UIDS[0], 1, ownerReferences=[ref])

    seg.replace(
        [
            owned("mine", LOW_UIDS[0]),
            owned("theirs", HIGH_UIDS[1]),
            owned("loose", LOW_UIDS[1], False),
        ],
        "1",
    )
    assert names(inf) == {"mine"}  # "loose" has no controller owner: no key, not cached


@pytest.mark.parametrize("order", ["old-first", "new-first"])
def test_a_recreated_object_seen_by_two_segments_ends_live(order: str) -> None:
    inf = informer()
    (low,) = inf._segments
    low.replace([], "1")
    inf._ranges = RangeSet([(0, HASH_SPACE)])
    high = _Segment(inf, RangeSet([(HALF, HASH_SPACE)]), 1)
    high.listed = True
    old, new = cm("x", LOW_UIDS[0], 5), cm("x", HIGH_UIDS[0], 9)
    if order == "old-first":
        low.add(old)
        high.add(new)  # created after old was deleted: newer
        low.update(cm("x", LOW_UIDS[0], 6))  # a late update of the old one
        low.delete(cm("x", LOW_UIDS[0], 7))  # its late delete
    else:
        high.add(new)
        low.add(old)  # the old one's events arrive late
        low.delete(cm("x", LOW_UIDS[0], 7))
    (cached,) = inf.indexer.list()
    assert cached["metadata"]["uid"] == HIGH_UIDS[0]
    high.delete(cm("x", HIGH_UIDS[0], 10))
    assert inf.indexer.list() == []


def test_set_ranges_before_run_keeps_one_segment_and_drops_nothing() -> None:
    inf = informer()
    event = inf.set_ranges([(0, HALF), (HALF, HALF + 10)])
    assert not event.is_set() and len(inf._segments) == 1
    (seg,) = inf._segments
    seg.replace([cm("a", LOW_UIDS[0], 1)], "1")
    assert inf.ranges == [(0, HALF + 10)]


class PagedList:
    """A lister that answers two pages and records what it was asked."""

    description = "v1/configmaps paged"

    def __init__(self, pages: list[list[dict[str, object]]]) -> None:
        self.pages = pages
        self.calls: list[tuple[str, int | None, str | None]] = []

    def list(self, *, resource_version: str, limit: int | None, continue_: str | None) -> dict:
        self.calls.append((resource_version, limit, continue_))
        i = int(continue_ or 0)
        last = i + 1 == len(self.pages)
        meta = {"resourceVersion": "9"} if last else {"continue": str(i + 1)}
        return {"metadata": meta, "items": self.pages[i]}


def test_owned_objects_are_listed_in_pages_each_filtered_before_the_next() -> None:
    # the server cannot filter by owner: a list brings the whole resource, so it comes
    # in pages and each page keeps only the share (a replica never parses it all at once)
    inf = informer(SHARD_BY_OWNER)
    (seg,) = inf._segments

    def owned(name: str, owner_uid: str) -> dict[str, object]:
        ref = {"kind": "Deployment", "name": "d", "uid": owner_uid, "controller": True}
        return cm(name, HIGH_UIDS[0], 1, ownerReferences=[ref])

    pages = [[owned("a", LOW_UIDS[0]), owned("b", HIGH_UIDS[1])], [owned("c", LOW_UIDS[1])]]
    lister = PagedList(pages)
    seg.reflector._lw = lister  # type: ignore[assignment]
    kept: list[str] = []
    seg.replace = lambda objs, rv: kept.extend(o["metadata"]["name"] for o in objs)  # type: ignore[method-assign]
    seg.reflector._list()
    assert lister.calls == [("", 500, None), ("", 500, "1")]
    assert kept == ["a", "c"]


def test_caches_sharded_by_uid_list_in_pages_each_filtered_before_the_next() -> None:
    # one LIST of a 10,000-object share parsed at once took a replica from 67 to 124 MiB
    # for a moment (its peak, above what it then keeps); in pages of 500 a list never holds
    # more than a page beside the share. kube-apiserver 1.34+ serves paginated consistent
    # lists from its watch cache (ConsistentListFromCache, ListFromCacheSnapshot). A server
    # that ignores the selector (gate off) sends everything: each page is filtered first.
    inf = informer()
    (seg,) = inf._segments
    pages = [[cm("a", LOW_UIDS[0], 1), cm("b", HIGH_UIDS[0], 2)], [cm("c", LOW_UIDS[1], 3)]]
    lister = PagedList(pages)
    seg.reflector._lw = lister  # type: ignore[assignment]
    kept: list[str] = []
    seg.replace = lambda objs, rv: kept.extend(o["metadata"]["name"] for o in objs)  # type: ignore[method-assign]
    seg.reflector._list()
    assert lister.calls == [("", 500, None), ("", 500, "1")]
    assert kept == ["a", "c"]


# -- owned objects that leave (or enter) the range: their owner changed -----------------


class Recorder:
    """What a handler was told: (kind, name, controller owner's uid, resourceVersion)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str | None, str]] = []

    @staticmethod
    def _row(kind: str, obj: dict[str, Any]) -> tuple[str, str, str | None, str]:
        meta = obj["metadata"]
        refs = [r["uid"] for r in meta.get("ownerReferences") or () if r.get("controller")]
        return kind, meta["name"], (refs[0] if refs else None), meta["resourceVersion"]

    def on_add(self, obj: dict[str, Any], is_in_initial_list: bool) -> None:
        self.seen.append(self._row("add", obj))

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.seen.append(self._row("update", new))

    def on_delete(self, obj: object) -> None:
        assert isinstance(obj, dict), "a watch delete carries the object, not a tombstone"
        self.seen.append(self._row("delete", obj))


def delivered(registration: HandlerRegistration) -> None:
    """Deliver what the informer pushed to one handler so far (the informer is not run
    here: its handler thread is started, drained up to a marker, and joined)."""
    listener = registration._listener
    done = threading.Event()
    listener.push(("call", done.set, None))
    listener.start()
    try:
        assert done.wait(WAIT), "the handler thread did not drain"
    finally:
        listener.stop()
        listener.join(WAIT)


def owned(name: str, rv: int, owner_uid: str | None) -> dict[str, object]:
    """A dependent whose controller owner has ``owner_uid`` (None: orphaned, the
    garbage collector removed the ownerReference)."""
    refs = (
        []
        if owner_uid is None
        else [{"kind": "ConfigMap", "name": "o", "uid": owner_uid, "controller": True}]
    )
    return cm(name, UIDS[-1], rv, ownerReferences=refs)


@dataclass
class Owned:
    """An owned-object cache (by the controller owner's uid) of some ranges, listed empty,
    with a recording handler."""

    inf: ShardedInformer
    seg: _Segment
    recorder: Recorder
    registration: HandlerRegistration

    @classmethod
    def of(cls, ranges: list[tuple[int, int]]) -> Owned:
        client = cast(KubeClient, object())
        inf = ShardedInformer(client, CM, shard_by=SHARD_BY_OWNER, ranges=ranges)
        recorder = Recorder()
        registration = inf.add_event_handler(recorder)
        (seg,) = inf._segments
        seg.replace([], "1")
        return cls(inf, seg, recorder, registration)

    def seen(self) -> list[tuple[str, str, str | None, str]]:
        delivered(self.registration)
        return self.recorder.seen


def test_an_orphaned_object_leaves_the_owned_cache_as_a_delete() -> None:
    # the owner deleted with propagationPolicy=Orphan: the garbage collector removes the
    # ownerReference; the dependent has no controller owner, so no replica's key
    mine = Owned.of([(0, HALF)])
    mine.seg.add(owned("child", 2, LOW_UIDS[0]))
    mine.seg.update(owned("child", 3, None))
    assert names(mine.inf) == set()
    assert mine.inf.last_known("ns/child") is not None  # as for any delete: metadata kept
    mine.seg.delete(owned("child", 4, None))  # deleted later: nothing left to remove
    assert names(mine.inf) == set()
    # the delete carries the last state this cache had (its owner: whose key to wake),
    # at the revision it left, as kube-apiserver's watch sends an object leaving a selector
    assert mine.seen() == [
        ("add", "child", LOW_UIDS[0], "2"),
        ("delete", "child", LOW_UIDS[0], "3"),
    ]


def test_what_the_sharded_informer_makes_itself_is_read_only_too() -> None:
    """The reflector freezes what it feeds; the delete of an object leaving the ranges
    and the metadata kept of a deleted one are built here, and are frozen as well."""
    mine = Owned.of([(0, HALF)])
    told: list[Any] = []
    mine.inf.add_event_handler(HandlerFuncs(delete=told.append))
    mine.seg.add(freeze(owned("child", 2, LOW_UIDS[0])))
    mine.seg.update(freeze(owned("child", 3, None)))  # orphaned: leaves as a delete
    mine.seen()
    kept = mine.inf.last_known("ns/child")
    assert kept is not None and kept["metadata"]["name"] == "child"
    with pytest.raises(TypeError, match="read-only"):
        kept["metadata"]["name"] = "other"
    for registration in list(mine.inf._listeners)[1:]:
        delivered(HandlerRegistration(registration))
    [gone] = told
    assert gone["metadata"]["resourceVersion"] == "3"  # the revision it left at
    with pytest.raises(TypeError, match="read-only"):
        gone["metadata"]["labels"] = {}
    with pytest.raises(TypeError, match="read-only"):
        gone["metadata"]["ownerReferences"].clear()


def test_a_reparented_object_moves_to_its_new_owners_shard_and_its_delete_is_not_lost() -> None:
    mine, theirs = Owned.of([(0, HALF)]), Owned.of([(HALF, HASH_SPACE)])
    for r in (mine, theirs):  # every replica watches every owned object
        r.seg.add(owned("child", 2, LOW_UIDS[0]))
    assert (names(mine.inf), names(theirs.inf)) == ({"child"}, set())
    for r in (mine, theirs):  # re-parented to an owner of the other shard
        r.seg.update(owned("child", 3, HIGH_UIDS[1]))
    assert (names(mine.inf), names(theirs.inf)) == (set(), {"child"})
    for r in (mine, theirs):
        r.seg.delete(owned("child", 4, HIGH_UIDS[1]))
    assert (names(mine.inf), names(theirs.inf)) == (set(), set())
    assert mine.seen() == [
        ("add", "child", LOW_UIDS[0], "2"),
        ("delete", "child", LOW_UIDS[0], "3"),
    ]
    assert theirs.seen() == [
        ("add", "child", HIGH_UIDS[1], "3"),
        ("delete", "child", HIGH_UIDS[1], "4"),
    ]


@pytest.mark.parametrize("order", ["leaving-segment-first", "entering-segment-first"])
def test_an_object_moving_between_two_segments_of_one_cache_stays_cached(order: str) -> None:
    # both ranges are this replica's: the object changed owner but not cache, an update
    mine = Owned.of([(0, HALF)])
    low = mine.seg
    low.add(owned("child", 2, LOW_UIDS[0]))
    mine.inf._ranges = RangeSet([(0, HASH_SPACE)])
    high = _Segment(mine.inf, RangeSet([(HALF, HASH_SPACE)]), 1)
    high.listed = True
    mine.inf._segments.append(high)
    moved = owned("child", 3, HIGH_UIDS[1])
    for seg in (low, high) if order == "leaving-segment-first" else (high, low):
        seg.update(moved)
    (cached,) = mine.inf.indexer.list()
    assert cached["metadata"]["resourceVersion"] == "3"
    assert mine.seen() == [
        ("add", "child", LOW_UIDS[0], "2"),
        ("update", "child", HIGH_UIDS[1], "3"),
    ]

"""Watch fan-out for the local API server: one :class:`Watcher` per open watch stream.

Storage offers every committed event of a resource to each of its watchers (under the
storage lock, so the order is the commit order). The watcher applies the watch's
namespace and selectors (label, field, and shard with the ShardedListAndWatch gate) the
way kube-apiserver's watch cache does: an object that stops matching arrives as DELETED
(its last matching state, carrying the new revision), one that starts matching arrives
as ADDED (never for a shard selector: the hashed uid or namespace does not change).
Bookmarks carry a revision up to which every event has been offered. The HTTP handler
thread drains the watcher's queue.

A watcher whose client falls too far behind is closed (kube-apiserver closes slow
watchers too); the client re-watches.

Thread-safe: ``offer`` runs on writer threads, ``next_batch`` on the handler thread.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from apiserver.api.resources import ServedResource
from apiserver.storage.selectors import FieldSelector, object_fields
from apiserver.storage.shardselector import ShardSelector
from apiserver.storage.store import Event
from manager.labels import LabelSelector

__all__ = ["Watcher"]

JsonDict = dict[str, Any]
Item = tuple[str, JsonDict]


class Watcher:
    """The queue of one watch stream, filtered by namespace and selectors."""

    def __init__(
        self,
        served: ServedResource,
        namespace: str | None,
        labels: LabelSelector | None,
        fields: FieldSelector | None,
        *,
        bookmarks: bool,
        shards: ShardSelector | None = None,
        max_queue: int = 200_000,
    ) -> None:
        self.served = served
        self.namespace = namespace
        self.labels = labels
        self.fields = fields
        self.shards = shards
        self.bookmarks = bookmarks
        self._max_queue = max_queue
        self._cond = threading.Condition(threading.Lock())
        self._queue: deque[Item] = deque()
        self._closed = False
        self.close_reason = ""
        self._last_revision = 0

    # -- filtering -------------------------------------------------------------------

    def matches(self, obj: JsonDict) -> bool:
        """Whether ``obj`` is in this watch's namespace and selectors."""
        meta = obj.get("metadata") or {}
        if self.namespace is not None and meta.get("namespace", "") != self.namespace:
            return False
        if self.labels is not None and not self.labels.matches(meta.get("labels") or {}):
            return False
        if self.fields is not None:
            r = self.served.resource
            if not self.fields.matches(object_fields(r.plural, r.group, obj)):
                return False
        # the hashed uid or namespace never changes: an object never moves between shards
        return self.shards is None or self.shards.matches(obj)

    def translate(self, event: Event) -> Item | None:
        """The event this watch should see for a committed write, if any."""
        new_ok = self.matches(event.object)
        old_ok = event.prev is not None and self.matches(event.prev)
        if event.type == "ADDED":
            return ("ADDED", event.object) if new_ok else None
        if event.type == "DELETED":
            return ("DELETED", event.object) if new_ok else None
        if new_ok and old_ok:
            return ("MODIFIED", event.object)
        if new_ok:
            return ("ADDED", event.object)
        if old_ok and event.prev is not None:
            gone = dict(event.prev)
            gone["metadata"] = dict(gone.get("metadata") or {})
            gone["metadata"]["resourceVersion"] = str(event.revision)
            return ("DELETED", gone)
        return None

    # -- storage side ----------------------------------------------------------------

    def offer(self, event: Event) -> None:
        item = self.translate(event)
        with self._cond:
            self._last_revision = event.revision
            if item is None or self._closed:
                return
            if len(self._queue) >= self._max_queue:
                self._closed = True
                self.close_reason = "client too slow"
                self._cond.notify_all()
                return
            self._queue.append(item)
            self._cond.notify_all()

    def offer_progress(self, revision: int) -> None:
        if not self.bookmarks:
            return
        with self._cond:
            if self._closed:
                return
            self._queue.append(("BOOKMARK", self.bookmark_object(revision)))
            self._cond.notify_all()

    def push(self, type_: str, obj: JsonDict) -> None:
        """Queue an event directly (initial events, replayed history)."""
        with self._cond:
            if not self._closed:
                self._queue.append((type_, obj))
                self._cond.notify_all()

    def bookmark_object(
        self, revision: int, *, annotations: dict[str, str] | None = None
    ) -> JsonDict:
        r = self.served.resource
        meta: JsonDict = {"resourceVersion": str(revision)}
        if annotations:
            meta["annotations"] = annotations
        return {"kind": r.kind, "apiVersion": r.api_version, "metadata": meta}

    # -- handler side ----------------------------------------------------------------

    def next_batch(self, timeout: float) -> list[Item] | None:
        """Wait up to ``timeout`` for events; [] on timeout, None once closed and drained."""
        with self._cond:
            if not self._queue and not self._closed:
                self._cond.wait(timeout)
            if self._queue:
                batch = list(self._queue)
                self._queue.clear()
                return batch
            return None if self._closed else []

    def close(self, reason: str = "closed") -> None:
        with self._cond:
            if not self._closed:
                self._closed = True
                self.close_reason = reason
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        with self._cond:
            return self._closed

"""Versioned object storage for the local API server: what etcd is to kube-apiserver.

Every write takes the next value of one global revision counter (the
``resourceVersion`` clients see), so revisions are monotonic across all resources, as
with etcd. Each write is appended to a bounded history; a watch can start from any
revision still in the history, and ``compact()`` forgets history so that older
revisions answer 410 Gone. The state at an older revision (for
``resourceVersionMatch=Exact`` and paginated lists) is rebuilt by undoing history.

Objects are stored as plain dicts and are never handed out for mutation: readers get the
stored dict and must copy it before changing it (the server copies on every write).

Thread-safe: one re-entrant lock serialises writes, history and watcher registration, so
a watcher registered "at revision R" sees exactly the writes after R.
"""

from __future__ import annotations

import builtins
import copy
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import orjson

__all__ = [
    "Event",
    "EventType",
    "ObjectKey",
    "Storage",
    "TooOldResourceVersion",
    "WatchSink",
    "copy_json",
]

JsonDict = dict[str, Any]
EventType = Literal["ADDED", "MODIFIED", "DELETED"]
# (storage key "group/plural", namespace or "", name)
ObjectKey = tuple[str, str, str]


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON value (dicts, lists, strings, numbers, booleans, None).

    Every write copies the object it stores; an orjson round trip does that several
    times faster than ``copy.deepcopy`` (values orjson cannot encode fall back to it).
    """
    try:
        return orjson.loads(orjson.dumps(value))
    except (TypeError, orjson.JSONEncodeError):
        return copy.deepcopy(value)


class TooOldResourceVersion(Exception):
    """The requested revision has been compacted away (kube-apiserver: 410 Expired)."""

    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")
        self.requested = requested
        self.oldest = oldest


@dataclass(frozen=True, slots=True)
class Event:
    """One committed write: the object after it (or as deleted) and the one before."""

    revision: int
    type: EventType
    key: ObjectKey
    object: JsonDict
    prev: JsonDict | None


class WatchSink(Protocol):
    """What storage pushes committed events to (a watcher); called under the lock."""

    def offer(self, event: Event) -> None:
        """Take one event; must not block."""

    def offer_progress(self, revision: int) -> None:
        """Every write up to ``revision`` has been offered (for bookmarks)."""


class Storage:
    """All objects of all resources, a global revision, bounded history, watch fan-out."""

    def __init__(self, *, history_size: int = 100_000, start_revision: int = 1) -> None:
        self.lock = threading.RLock()
        self._objects: dict[str, dict[tuple[str, str], JsonDict]] = {}
        self._revision = start_revision
        self._history: deque[Event] = deque(maxlen=history_size)
        # Every revision <= _compacted is gone; starts just below the first revision.
        self._compacted = start_revision - 1
        self._sinks: dict[str, set[WatchSink]] = {}
        self._listeners: builtins.list[Callable[[Event], None]] = []
        self._progress = threading.Condition(self.lock)

    # -- reading ---------------------------------------------------------------------

    @property
    def revision(self) -> int:
        """The revision of the latest write."""
        with self.lock:
            return self._revision

    @property
    def compacted_revision(self) -> int:
        """Every revision at or below this one is compacted away."""
        with self.lock:
            return max(self._compacted, self._oldest_kept() - 1)

    def _oldest_kept(self) -> int:
        if self._history.maxlen is not None and len(self._history) == self._history.maxlen:
            return self._history[0].revision
        return self._compacted + 1

    def get(self, key: ObjectKey) -> JsonDict | None:
        """The stored object (do not mutate it), or None."""
        with self.lock:
            return self._objects.get(key[0], {}).get((key[1], key[2]))

    def has_any(self, resource_key: str) -> bool:
        """Whether any object of one resource is stored (cheaper than a list)."""
        with self.lock:
            return bool(self._objects.get(resource_key))

    def list(self, resource_key: str, namespace: str | None = None) -> builtins.list[JsonDict]:
        """Every stored object of one resource (one namespace when given), sorted by key."""
        with self.lock:
            items = self._objects.get(resource_key, {})
            keys = sorted(k for k in items if namespace is None or k[0] == namespace)
            return [items[k] for k in keys]

    def list_at(
        self, resource_key: str, namespace: str | None, revision: int
    ) -> builtins.list[JsonDict]:
        """The objects of one resource as they were right after ``revision``.

        Raises:
            TooOldResourceVersion: ``revision`` is compacted away.
        """
        with self.lock:
            if revision < self.compacted_revision:
                raise TooOldResourceVersion(revision, self.compacted_revision + 1)
            state = {
                k: v
                for k, v in self._objects.get(resource_key, {}).items()
                if namespace is None or k[0] == namespace
            }
            for event in reversed(self._history):
                if event.revision <= revision:
                    break
                if event.key[0] != resource_key:
                    continue
                if namespace is not None and event.key[1] != namespace:
                    continue
                k = (event.key[1], event.key[2])
                if event.type == "ADDED":
                    state.pop(k, None)
                elif event.prev is not None:
                    state[k] = event.prev
            return [state[k] for k in sorted(state)]

    def namespaces_in_use(self, namespace: str) -> builtins.list[tuple[str, JsonDict]]:
        """Every object stored in ``namespace``, with its resource key."""
        with self.lock:
            return [
                (rk, obj)
                for rk, items in self._objects.items()
                for (ns, _), obj in items.items()
                if ns == namespace
            ]

    def all_objects(self) -> Iterable[tuple[str, JsonDict]]:
        """A snapshot of every stored object with its resource key."""
        with self.lock:
            return [(rk, obj) for rk, items in self._objects.items() for obj in items.values()]

    # -- writing ---------------------------------------------------------------------

    def wait_for(self, revision: int, timeout: float) -> bool:
        """Block until a write reaches ``revision`` (True) or ``timeout`` seconds pass."""
        with self._progress:
            return self._progress.wait_for(lambda: self._revision >= revision, timeout)

    def next_revision(self) -> int:
        """Reserve the revision the next commit will carry (call with the lock held)."""
        return self._revision + 1

    def commit(self, type_: EventType, key: ObjectKey, obj: JsonDict) -> Event:
        """Store a write. ``obj`` must already carry ``metadata.resourceVersion`` equal to
        :meth:`next_revision` (the caller builds it under the lock)."""
        with self.lock:
            revision = self._revision + 1
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if rv != str(revision):
                raise ValueError(f"object carries resourceVersion {rv!r}, commit is {revision}")
            items = self._objects.setdefault(key[0], {})
            prev = items.get((key[1], key[2]))
            if type_ == "ADDED" and prev is not None:
                raise KeyError(f"{key} exists")
            if type_ != "ADDED" and prev is None:
                raise KeyError(f"{key} does not exist")
            if type_ == "DELETED":
                del items[(key[1], key[2])]
            else:
                items[(key[1], key[2])] = obj
            self._revision = revision
            event = Event(revision, type_, key, obj, prev)
            self._history.append(event)
            for sink in list(self._sinks.get(key[0], ())):
                sink.offer(event)
            for listener in self._listeners:
                listener(event)
            self._progress.notify_all()
            return event

    def advance(self) -> int:
        """A write outside every resource (etcd's compact key): the revision moves on, no
        event. Returns the new revision."""
        with self.lock:
            self._revision += 1
            self._progress.notify_all()
            return self._revision

    def compact(self, revision: int | None = None) -> int:
        """Forget history up to ``revision`` (default: all of it). Returns the revision."""
        with self.lock:
            target = self._revision if revision is None else min(revision, self._revision)
            while self._history and self._history[0].revision <= target:
                self._history.popleft()
            self._compacted = max(self._compacted, target)
            return target

    # -- watching --------------------------------------------------------------------

    def subscribe(
        self, resource_key: str, sink: WatchSink, since: int | None
    ) -> builtins.list[Event]:
        """Register ``sink`` for future writes of one resource.

        Returns the history after ``since`` (empty when ``since`` is None) so the caller
        can replay it before the live events; both are taken atomically.

        Raises:
            TooOldResourceVersion: ``since`` is compacted away.
        """
        with self.lock:
            backlog: builtins.list[Event] = []
            if since is not None and since < self._revision:
                if since < self.compacted_revision:
                    raise TooOldResourceVersion(since, self.compacted_revision + 1)
                backlog = [
                    e for e in self._history if e.revision > since and e.key[0] == resource_key
                ]
            self._sinks.setdefault(resource_key, set()).add(sink)
            return backlog

    def unsubscribe(self, resource_key: str, sink: WatchSink) -> None:
        with self.lock:
            self._sinks.get(resource_key, set()).discard(sink)

    def progress(self) -> None:
        """Tell every watcher the current revision (bookmarks are built from this)."""
        with self.lock:
            for sinks in self._sinks.values():
                for sink in sinks:
                    sink.offer_progress(self._revision)

    def sinks(self) -> builtins.list[WatchSink]:
        with self.lock:
            return [s for sinks in self._sinks.values() for s in sinks]

    def add_listener(self, listener: Callable[[Event], None]) -> None:
        """Call ``listener(event)`` for every commit, under the lock (must not block)."""
        with self.lock:
            self._listeners.append(listener)

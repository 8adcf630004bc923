"""Thread-safe object store with named indexes (client-go ``tools/cache`` store.go,
thread_safe_store.go, index.go).

The store maps keys (``namespace/name``) to objects. Index functions map an object to a
list of index values; ``by_index(name, value)`` answers every object with that value.
Stored objects are shared with every reader, so an informer's store holds them
read-only: its reflector froze them on the way in (:mod:`manager.cache.frozen`: ``dict``
and ``list`` subclasses whose every change raises ``TypeError``). Reads hand out those
objects themselves, not copies; to change one, copy it (``copy.deepcopy`` or
``manager.thaw``) and write the copy to the API server, never into the cache. The store
itself stores what it is given (a store filled by hand holds what its owner put in).

Thread-safe: one lock guards items and indexes; reads return lists built under it.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from manager.keys import JsonDict, meta_namespace_key

__all__ = [
    "BY_CONTROLLER_UID",
    "BY_NAMESPACE",
    "BY_OWNER_UID",
    "IndexError_",
    "IndexFunc",
    "Indexer",
    "KeyFunc",
    "Store",
    "index_by_controller_uid",
    "index_by_namespace",
    "index_by_owner_uid",
    "new_indexer",
]

IndexFunc = Callable[[JsonDict], list[str]]
KeyFunc = Callable[[JsonDict], str]

BY_NAMESPACE = "namespace"
BY_OWNER_UID = "owner-uid"
BY_CONTROLLER_UID = "controller-uid"


class IndexError_(KeyError):  # noqa: N801 - avoids shadowing the builtin IndexError
    """An index name that is not registered, or a conflicting registration."""


class Store(Protocol):
    """A keyed collection of objects (client-go ``cache.Store``)."""

    def add(self, obj: JsonDict) -> None:
        """Insert or replace the object under its key."""

    def update(self, obj: JsonDict) -> None:
        """Same as :meth:`add`."""

    def delete(self, obj: JsonDict) -> None:
        """Remove the object's key (no error if absent)."""

    def get_by_key(self, key: str) -> JsonDict | None:
        """The object stored under ``key``, or None."""

    def list(self) -> builtins.list[JsonDict]:
        """Every stored object (in no particular order)."""

    def list_keys(self) -> builtins.list[str]:
        """Every key."""

    def replace(self, objs: Iterable[JsonDict]) -> None:
        """Atomically make the store hold exactly ``objs``."""

    def __len__(self) -> int:
        """How many objects are stored."""


class Indexer(Store, Protocol):
    """A :class:`Store` with named indexes (client-go ``cache.Indexer``)."""

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Register more index functions; existing objects are indexed at once.

        Raises:
            IndexError_: a name is already registered.
        """

    def by_index(self, index_name: str, value: str) -> builtins.list[JsonDict]:
        """Every object whose index function returned ``value``."""

    def index_keys(self, index_name: str, value: str) -> builtins.list[str]:
        """The keys of :meth:`by_index`."""

    def index_values(self, index_name: str) -> builtins.list[str]:
        """Every value the index currently holds."""

    def indexer_names(self) -> builtins.list[str]:
        """The registered index names."""


def index_by_namespace(obj: JsonDict) -> builtins.list[str]:
    """Index function: the object's namespace (cluster-scoped objects: none)."""
    ns = (obj.get("metadata") or {}).get("namespace")
    return [ns] if ns else []


def index_by_owner_uid(obj: JsonDict) -> builtins.list[str]:
    """Index function: the uid of every owner in ``metadata.ownerReferences``."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return [str(r["uid"]) for r in refs if r.get("uid")]


def index_by_controller_uid(obj: JsonDict) -> builtins.list[str]:
    """Index function: the uid of the controller owner (``controller: true``), if any."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return [str(r["uid"]) for r in refs if r.get("controller") and r.get("uid")]


class _ThreadSafeIndexer:
    def __init__(self, key_func: KeyFunc, indexers: Mapping[str, IndexFunc]) -> None:
        self._key_func = key_func
        self._lock = threading.RLock()
        self._items: dict[str, JsonDict] = {}
        self._indexers: dict[str, IndexFunc] = {}
        # index name -> value -> keys
        self._indices: dict[str, dict[str, set[str]]] = {}
        self.add_indexers(indexers)

    # -- index maintenance (lock held) -----------------------------------------------

    def _unindex(self, key: str, obj: JsonDict) -> None:
        for name, func in self._indexers.items():
            index = self._indices[name]
            for value in func(obj):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]

    def _index(self, key: str, obj: JsonDict) -> None:
        for name, func in self._indexers.items():
            index = self._indices[name]
            for value in func(obj):
                index.setdefault(value, set()).add(key)

    # -- Store -----------------------------------------------------------------------

    def add(self, obj: JsonDict) -> None:
        key = self._key_func(obj)
        with self._lock:
            old = self._items.get(key)
            if old is not None and self._indexers:
                self._unindex(key, old)
            self._items[key] = obj
            if self._indexers:
                self._index(key, obj)

    update = add

    def delete(self, obj: JsonDict) -> None:
        self.delete_key(self._key_func(obj))

    def delete_key(self, key: str) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None and self._indexers:
                self._unindex(key, old)

    def get_by_key(self, key: str) -> JsonDict | None:
        with self._lock:
            return self._items.get(key)

    def list(self) -> builtins.list[JsonDict]:
        with self._lock:
            return list(self._items.values())

    def list_keys(self) -> builtins.list[str]:
        with self._lock:
            return list(self._items)

    def replace(self, objs: Iterable[JsonDict]) -> None:
        items = {self._key_func(o): o for o in objs}
        with self._lock:
            self._items = items
            self._indices = {name: {} for name in self._indexers}
            if self._indexers:
                for key, obj in items.items():
                    self._index(key, obj)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    # -- Indexer ---------------------------------------------------------------------

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        with self._lock:
            clash = sorted(set(indexers) & set(self._indexers))
            if clash:
                raise IndexError_(f"indexer conflict: {', '.join(clash)}")
            for name, func in indexers.items():
                self._indexers[name] = func
                index: dict[str, set[str]] = {}
                for key, obj in self._items.items():
                    for value in func(obj):
                        index.setdefault(value, set()).add(key)
                self._indices[name] = index

    def _index_of(self, index_name: str) -> dict[str, set[str]]:
        try:
            return self._indices[index_name]
        except KeyError:
            raise IndexError_(f"index {index_name!r} does not exist") from None

    def by_index(self, index_name: str, value: str) -> builtins.list[JsonDict]:
        with self._lock:
            keys = self._index_of(index_name).get(value, ())
            return [self._items[k] for k in keys]

    def index_keys(self, index_name: str, value: str) -> builtins.list[str]:
        with self._lock:
            return list(self._index_of(index_name).get(value, ()))

    def index_values(self, index_name: str) -> builtins.list[str]:
        with self._lock:
            return list(self._index_of(index_name))

    def indexer_names(self) -> builtins.list[str]:
        with self._lock:
            return list(self._indexers)


def new_indexer(
    indexers: Mapping[str, IndexFunc] | None = None, key_func: KeyFunc = meta_namespace_key
) -> Indexer:
    """A thread-safe indexer; by default indexed by namespace and owner uids."""
    if indexers is None:
        indexers = {
            BY_NAMESPACE: index_by_namespace,
            BY_OWNER_UID: index_by_owner_uid,
            BY_CONTROLLER_UID: index_by_controller_uid,
        }
    return _ThreadSafeIndexer(key_func, indexers)

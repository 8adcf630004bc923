"""Listers: typed read access to an informer's cache (client-go ``listers``).

A lister answers from memory: ``get`` by name, ``list`` by namespace and label selector,
``by_index`` by a named index. Objects are the cached ones themselves, shared by every
reader and read-only: every dict in them is a ``dict`` subclass and every list a ``list``
subclass whose changes raise ``TypeError`` (:mod:`manager.cache.frozen`), where
controller-runtime's cache-backed client copies each object it returns. Reads cost no
copy; to change an object, copy it (``copy.deepcopy(obj)`` or ``manager.thaw(obj)``,
both plain and changeable) and write the copy to the API server. The lists that ``list``
and ``by_index`` return are new on each call.

A lister made with its informer (as :meth:`Manager.lister <manager.manager.Manager.lister>`
makes them) does not answer from a cache that is still filling: once the informer runs, a
read waits for its first sync (up to ``sync_timeout``, then
:class:`~manager.errors.CacheNotSynced`), as controller-runtime's cache-backed client
does. Before the informer runs, reads answer from the (empty) cache at once.

A lister of every namespace may also read one namespace from another informer
(:meth:`Lister.share`): the manager does that when a controller watches exactly that
namespace with the lister's selectors, so a reconcile reads the cache whose event woke
it. A lister that holds one namespace refuses reads of another (they could only answer
None).

Thread-safe: reads go through the thread-safe indexer; ``share`` is wiring, done before
the reads it affects.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping

from manager.cache.informer import SharedInformer, wait_for_cache_sync
from manager.cache.store import BY_NAMESPACE, Indexer
from manager.errors import CacheNotSynced
from manager.keys import JsonDict
from manager.labels import LabelSelector, label_selector_from_dict
from manager.resources import Resource

__all__ = ["Lister"]


class Lister:
    """Reads one resource's objects from an informer's cache.

    Args:
        indexer: the cache.
        resource: what it holds.
        informer: the informer filling ``indexer``; reads wait for its first sync once it
            runs (None: never wait).
        sync_timeout: seconds a read waits for that sync at most.
        scope_namespace: the only namespace the informer holds (None: every namespace);
            a read of another namespace is an error (it could never find anything).
    """

    def __init__(
        self,
        indexer: Indexer,
        resource: Resource,
        *,
        informer: SharedInformer | None = None,
        sync_timeout: float = 120.0,
        scope_namespace: str | None = None,
    ) -> None:
        self._indexer = indexer
        self._scope_namespace = scope_namespace
        self.resource = resource
        self._informer = informer
        self._sync_timeout = sync_timeout
        self._synced = informer is None
        # namespace -> the informer of a controller's watch of exactly that namespace
        # (same selectors): reads of it go there (see share)
        self._shared: dict[str, SharedInformer] = {}

    def share(self, namespace: str, informer: SharedInformer) -> None:
        """Read ``namespace`` from ``informer`` from now on: a controller's watch of
        exactly that namespace with this lister's selectors, so a reconcile reads the
        cache whose event woke it rather than this lister's own, which may lag behind."""
        self._shared[namespace] = informer

    def shared(self) -> builtins.list[str]:
        """The namespaces read from a controller's watch (see :meth:`share`)."""
        return sorted(self._shared)

    def _source(self, namespace: str | None) -> Indexer:
        """The cache that answers for ``namespace``, once it may answer."""
        shared = self._shared.get(namespace) if namespace else None
        if shared is None:
            self._wait_synced()
            return self._indexer
        waiting = not shared.has_synced() and shared.started
        if waiting and not wait_for_cache_sync(self._sync_timeout, shared):
            raise CacheNotSynced(
                f"{self.resource}: the cache of namespace {namespace} has not synced "
                f"within {self._sync_timeout:g} s"
            )
        return shared.indexer

    def _check_scope(self, namespace: str | None) -> None:
        scope = self._scope_namespace
        if scope is not None and namespace and namespace != scope:
            raise ValueError(
                f"{self.resource}: this lister holds only the namespace {scope!r} (its "
                f"informer watches nothing else: watchNamespace, or the lister's namespace), "
                f"so nothing in {namespace!r} can be found here"
            )

    def _wait_synced(self) -> None:
        if self._synced:
            return
        informer = self._informer
        assert informer is not None
        if informer.has_synced():
            self._synced = True
            return
        if not informer.started:
            return  # nothing fills it yet: answer from what is there
        if not wait_for_cache_sync(self._sync_timeout, informer):
            raise CacheNotSynced(
                f"{self.resource}: the cache has not synced within {self._sync_timeout:g} s"
            )
        self._synced = True

    def get(self, name: str, namespace: str | None = None) -> JsonDict | None:
        """The cached object, or None. Namespaced resources need ``namespace``.

        Raises:
            ValueError: a namespaced resource without a namespace, or the reverse, or a
                namespace outside what the lister holds.
        """
        if self.resource.namespaced and not namespace:
            raise ValueError(f"{self.resource}: namespace required")
        if not self.resource.namespaced and namespace:
            raise ValueError(f"{self.resource} is cluster-scoped: no namespace")
        self._check_scope(namespace)
        return self._source(namespace).get_by_key(f"{namespace}/{name}" if namespace else name)

    def list(
        self,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | LabelSelector | None = None,
    ) -> builtins.list[JsonDict]:
        """Cached objects in ``namespace`` (None: all) matching ``label_selector``.

        The selector is the Kubernetes text form (``app=web,tier in (a,b)``), a mapping of
        required labels, or a parsed :class:`~manager.labels.LabelSelector`.

        Raises:
            ValueError: ``namespace`` is outside what the lister holds.
        """
        self._check_scope(namespace)
        indexer = self._source(namespace)
        objs = (
            indexer.by_index(BY_NAMESPACE, namespace)
            if namespace and BY_NAMESPACE in indexer.indexer_names()
            else [
                o
                for o in indexer.list()
                if not namespace or (o.get("metadata") or {}).get("namespace") == namespace
            ]
        )
        if label_selector is None:
            return objs
        if isinstance(label_selector, str):
            selector = LabelSelector.parse(label_selector)
        elif isinstance(label_selector, LabelSelector):
            selector = label_selector
        else:
            selector = label_selector_from_dict({"matchLabels": dict(label_selector)})
        return [o for o in objs if selector.matches((o.get("metadata") or {}).get("labels") or {})]

    def by_index(self, index_name: str, value: str) -> builtins.list[JsonDict]:
        """Cached objects whose index ``index_name`` has ``value``."""
        self._wait_synced()
        return self._indexer.by_index(index_name, value)

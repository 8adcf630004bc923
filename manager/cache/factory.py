"""The informer factory: one shared informer per (resource, namespace, selectors)
(client-go ``informers.SharedInformerFactory``, controller-runtime's cache).

Every controller that asks for the same resource with the same scope gets the same
:class:`~manager.cache.informer.SharedInformer`, so the API server sees one LIST and one
WATCH however many controllers watch it. A *sharded* informer (``shard_by``: a
:class:`~manager.cache.sharded.ShardedInformer`, which caches only the ranges the shard
ring gives it) is another scope: sharded controllers of one resource share it, others
get the whole resource. ``start(stop)`` runs every informer created so
far in its own thread (``informer/<resource>``) and may be called again for informers
created later; ``shutdown()`` waits for them all to end after ``stop`` is set.

Thread-safe.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

from manager.cache.informer import SharedInformer, wait_for_cache_sync
from manager.cache.listwatch import ResourceListWatch
from manager.cache.reflector import Transform, drop_managed_fields
from manager.cache.sharded import ShardedInformer
from manager.cache.store import IndexFunc
from manager.client import KubeClient
from manager.resources import Resource

__all__ = ["InformerFactory", "InformerKey"]


@dataclass(frozen=True, slots=True)
class InformerKey:
    """What makes two informers the same one."""

    resource: Resource
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None
    shard_by: str | None = None  # a sharded informer: uid, namespace or owner


class InformerFactory:
    """Creates, shares, starts and stops informers for one API client."""

    def __init__(
        self,
        client: KubeClient,
        *,
        namespace: str | None = None,
        transform: Transform | None = drop_managed_fields,
        page_size: int | None = None,
        paged_lists: bool = False,
        cluster: str = "",
    ) -> None:
        """
        Args:
            client: the API client every informer lists and watches through.
            cluster: the fleet member ``client`` talks to ("" for the manager's own
                cluster); its informers' names say ``cluster=<name>``.
            namespace: default scope for namespaced resources (None: all namespaces).
            transform: applied to every object before it is cached.
            page_size: LIST page size for consistent relists (None: unpaged).
            paged_lists: every list of an unsharded informer is a consistent one in pages
                of ``page_size``, so a list is never parsed whole (a fleet's members).
        """
        self._client = client
        self._namespace = namespace
        self._transform = transform
        self._page_size = page_size
        self._paged_lists = paged_lists
        self._cluster = cluster
        self._lock = threading.Lock()
        self._informers: dict[InformerKey, SharedInformer] = {}
        self._threads: dict[InformerKey, threading.Thread] = {}

    def informer(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
        shard_by: str | None = None,
    ) -> SharedInformer:
        """The shared informer for this scope, created on first use.

        ``indexers`` are added to the informer if it does not have them yet. With
        ``shard_by`` it is a :class:`~manager.cache.sharded.ShardedInformer` without
        ranges (caching nothing until the shard ring gives it some).
        """
        ns = (namespace or self._namespace) if resource.namespaced else None
        key = InformerKey(
            resource, ns, label_selector or None, field_selector or None, shard_by or None
        )
        with self._lock:
            informer = self._informers.get(key)
            if informer is None and key.shard_by is not None:
                informer = ShardedInformer(
                    self._client,
                    resource,
                    shard_by=key.shard_by,
                    namespace=ns,
                    label_selector=key.label_selector,
                    field_selector=key.field_selector,
                    transform=self._transform,
                    page_size=self._page_size,
                )
                self._informers[key] = informer
            elif informer is None:
                lw = ResourceListWatch(
                    self._client,
                    resource,
                    namespace=ns,
                    label_selector=key.label_selector,
                    field_selector=key.field_selector,
                    cluster=self._cluster,
                )
                informer = SharedInformer(
                    lw,
                    transform=self._transform,
                    page_size=self._page_size,
                    paged_lists=self._paged_lists,
                )
                self._informers[key] = informer
        if indexers:
            missing = {
                k: v for k, v in indexers.items() if k not in informer.indexer.indexer_names()
            }
            if missing:
                informer.add_indexers(missing)
        return informer

    @property
    def default_namespace(self) -> str | None:
        """The namespace of namespaced informers asked for without one (None: all)."""
        return self._namespace

    def informers(self) -> list[SharedInformer]:
        with self._lock:
            return list(self._informers.values())

    def start(self, stop: threading.Event) -> None:
        """Run every informer not yet running, each in its own thread; returns at once."""
        with self._lock:
            for key, informer in self._informers.items():
                if key in self._threads:
                    continue
                t = threading.Thread(
                    target=informer.run, args=(stop,), name=f"informer/{informer.name}"
                )
                self._threads[key] = t
                t.start()

    def threads(self) -> list[threading.Thread]:
        """The informer threads started so far."""
        with self._lock:
            return list(self._threads.values())

    def wait_for_cache_sync(self, timeout: float, stop: threading.Event | None = None) -> bool:
        """Wait until every informer created so far has synced; False on timeout/stop."""
        return wait_for_cache_sync(timeout, *self.informers(), stop=stop)

    def shutdown(self, timeout: float | None = None) -> bool:
        """Join every informer thread (``stop`` must be set); True if all ended."""
        with self._lock:
            threads = list(self._threads.values())
        for t in threads:
            t.join(timeout)
        return not any(t.is_alive() for t in threads)

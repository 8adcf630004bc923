"""Listers: typed read access to an informer's cache (client-go ``listers``).

A lister answers from memory: ``get`` by name, ``list`` by namespace and label selector,
``by_index`` by a named index. Objects are the cached dicts: shared and read-only.

Thread-safe: reads go through the thread-safe indexer.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping

from manager.cache.store import BY_NAMESPACE, Indexer
from manager.keys import JsonDict
from manager.labels import LabelSelector, label_selector_from_dict
from manager.resources import Resource

__all__ = ["Lister"]


class Lister:
    """Reads one resource's objects from an informer's cache."""

    def __init__(self, indexer: Indexer, resource: Resource) -> None:
        self._indexer = indexer
        self.resource = resource

    def get(self, name: str, namespace: str | None = None) -> JsonDict | None:
        """The cached object, or None. Namespaced resources need ``namespace``.

        Raises:
            ValueError: a namespaced resource without a namespace, or the reverse.
        """
        if self.resource.namespaced and not namespace:
            raise ValueError(f"{self.resource}: namespace required")
        if not self.resource.namespaced and namespace:
            raise ValueError(f"{self.resource} is cluster-scoped: no namespace")
        return self._indexer.get_by_key(f"{namespace}/{name}" if namespace else name)

    def list(
        self,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | LabelSelector | None = None,
    ) -> builtins.list[JsonDict]:
        """Cached objects in ``namespace`` (None: all) matching ``label_selector``.

        The selector is the Kubernetes text form (``app=web,tier in (a,b)``), a mapping of
        required labels, or a parsed :class:`~manager.labels.LabelSelector`.
        """
        objs = (
            self._indexer.by_index(BY_NAMESPACE, namespace)
            if namespace and BY_NAMESPACE in self._indexer.indexer_names()
            else [
                o
                for o in self._indexer.list()
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
        return self._indexer.by_index(index_name, value)

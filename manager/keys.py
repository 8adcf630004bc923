"""Object keys and small object accessors (client-go ``cache.MetaNamespaceKeyFunc``).

A key is ``namespace/name`` for namespaced objects and ``name`` for cluster-scoped ones.
Objects are plain dicts as decoded from the API server.

Thread-safe: pure functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "DeletedFinalStateUnknown",
    "JsonDict",
    "meta_namespace_key",
    "split_key",
]

JsonDict = dict[str, Any]


@dataclass(frozen=True, slots=True)
class DeletedFinalStateUnknown:
    """A tombstone: an object deleted while the watch was down (found missing on relist).

    ``obj`` is the last state the cache knew; the real final state is unknown.
    """

    key: str
    obj: JsonDict


def meta_namespace_key(obj: JsonDict | DeletedFinalStateUnknown) -> str:
    """``namespace/name``, or ``name`` for cluster-scoped objects; a tombstone's own key.

    Raises:
        ValueError: the object has no ``metadata.name``.
    """
    if isinstance(obj, DeletedFinalStateUnknown):
        return obj.key
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not name:
        raise ValueError("object has no metadata.name")
    namespace = meta.get("namespace")
    return f"{namespace}/{name}" if namespace else str(name)


def split_key(key: str) -> tuple[str, str]:
    """``(namespace, name)`` from a key; namespace is "" for cluster-scoped keys.

    Raises:
        ValueError: the key has more than one ``/``.
    """
    parts = key.split("/")
    if len(parts) == 1:
        return "", parts[0]
    if len(parts) == 2:
        return parts[0], parts[1]
    raise ValueError(f"unexpected key format: {key!r}")

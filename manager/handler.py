"""Event handlers: which requests an informer event becomes (controller-runtime
``pkg/handler``).

* :class:`EnqueueRequestForObject` — the object itself (the ``for`` resource).
* :class:`EnqueueRequestForOwner` — the object's owner of a given kind (``owns``): a
  Service owned by a Deployment wakes the Deployment's request.
* :class:`EnqueueRequestsFromMapFunc` — any mapping (``watches``).

For an update, the requests of the old and the new object are both enqueued (an owner
reference that was removed still wakes the old owner). A tombstone
(:class:`~manager.keys.DeletedFinalStateUnknown`) is mapped through its last known state.

Thread-safe: mappers hold only configuration.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from manager.keys import DeletedFinalStateUnknown, JsonDict
from manager.reconcile import Request

__all__ = [
    "EnqueueRequestForObject",
    "EnqueueRequestForOwner",
    "EnqueueRequestsFromMapFunc",
    "EventMapper",
    "MapFunc",
    "unwrap",
]

MapFunc = Callable[[JsonDict], Iterable[Request]]


class EventMapper(Protocol):
    """Maps one object (from any event) to the requests it should wake."""

    def requests(self, obj: JsonDict) -> Iterable[Request]: ...


def unwrap(obj: JsonDict | DeletedFinalStateUnknown) -> JsonDict:
    """The object, or a tombstone's last known state."""
    return obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj


def _request_for(obj: JsonDict) -> Request | None:
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not name:
        return None
    return Request(str(meta.get("namespace") or ""), str(name))


class EnqueueRequestForObject:
    """The event's own object."""

    def requests(self, obj: JsonDict) -> Iterable[Request]:
        req = _request_for(obj)
        return () if req is None else (req,)


class EnqueueRequestForOwner:
    """The owner(s) of kind ``owner_kind`` in group ``owner_group`` named by the object's
    ownerReferences; only the controller owner unless ``only_controller=False``.

    Owners are assumed to live in the object's namespace (owner references cannot cross
    namespaces); a cluster-scoped owner is requested with namespace "" when
    ``owner_namespaced`` is False.
    """

    def __init__(
        self,
        owner_group: str,
        owner_kind: str,
        *,
        only_controller: bool = True,
        owner_namespaced: bool = True,
    ) -> None:
        self._group = owner_group
        self._kind = owner_kind
        self._only_controller = only_controller
        self._namespaced = owner_namespaced

    def requests(self, obj: JsonDict) -> Iterable[Request]:
        meta = obj.get("metadata") or {}
        namespace = str(meta.get("namespace") or "") if self._namespaced else ""
        out = []
        for ref in meta.get("ownerReferences") or []:
            if ref.get("kind") != self._kind:
                continue
            group = str(ref.get("apiVersion") or "").rpartition("/")[0]
            if group != self._group:
                continue
            if self._only_controller and not ref.get("controller"):
                continue
            if ref.get("name"):
                out.append(Request(namespace, str(ref["name"])))
        return out


class EnqueueRequestsFromMapFunc:
    """Whatever ``fn`` returns for the object."""

    def __init__(self, fn: MapFunc) -> None:
        self._fn = fn

    def requests(self, obj: JsonDict) -> Iterable[Request]:
        return self._fn(obj)

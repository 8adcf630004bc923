"""Expectations: the writes this process made that its cache has not shown yet
(client-go ``pkg/controller/controller_utils.go`` ``ControllerExpectations``, reduced to
one pending write per object).

The reconciler reads from the informer cache, which lags behind its own writes by a
watch round trip. Without a memory of its writes, a reconcile that runs in that window
(woken by another event for the same Deployment) would create the object again
(``AlreadyExists``) or update it from a stale resourceVersion (``Conflict``). Neither
would be wrong — both are handled — but under a burst they become storms.

* After a create: :meth:`created`. While the cache has no object of that name the write
  is *pending*; the reconciler then asks the API server (one GET) instead of creating
  again, because "not in the cache" may also mean "created and already deleted".
* After an update or patch: :meth:`updated` with the resourceVersion it replaced. While
  the cache still shows that resourceVersion (and uid) the write is pending and the
  object is left alone: the watch event of the write will wake the Deployment again.
* An expectation older than ``ttl`` seconds counts as met (a lost event must not wedge an
  object) and is dropped.

Expectations are hints for efficiency only, never for correctness: the API server's
optimistic concurrency and name uniqueness remain the safety net, and a restarted
process starts with none.

Thread-safe: one lock; workers of one controller share an instance.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Expectations", "Kind", "ObjectKey"]

Kind = Literal["create", "update"]

ObjectKey = tuple[str, str, str]  # (resource plural, namespace, name)


@dataclass(frozen=True, slots=True)
class _Pending:
    uid: str
    replaced_version: str | None  # None: a create
    at: float


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


class Expectations:
    """Pending writes by object key."""

    def __init__(self, ttl: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._pending: dict[ObjectKey, _Pending] = {}
        self._last_expiry = clock()

    def created(self, key: ObjectKey, obj: Mapping[str, Any]) -> None:
        """``obj`` (the API server's answer) was just created."""
        with self._lock:
            self._pending[key] = _Pending(str(_meta(obj).get("uid") or ""), None, self._clock())

    def updated(self, key: ObjectKey, replaced: Mapping[str, Any]) -> None:
        """The object whose cached state was ``replaced`` was just written."""
        meta = _meta(replaced)
        with self._lock:
            self._pending[key] = _Pending(
                str(meta.get("uid") or ""), str(meta.get("resourceVersion") or ""), self._clock()
            )

    def forget(self, key: ObjectKey) -> None:
        """Drop the expectation for ``key`` (met, or no longer relevant)."""
        with self._lock:
            self._pending.pop(key, None)

    def pending(self, key: ObjectKey, cached: Mapping[str, Any] | None) -> Kind | None:
        """Which write of ``key`` the cache (``cached``: its object, or None) has not shown
        yet: ``"create"``, ``"update"``, or None. A met expectation is dropped."""
        with self._lock:
            pending = self._live(key)
            if pending is None:
                return None
            if pending.replaced_version is None:
                if cached is None:
                    return "create"
            else:
                meta = _meta(cached) if cached is not None else {}
                if (
                    cached is not None
                    and str(meta.get("uid") or "") == pending.uid
                    and str(meta.get("resourceVersion") or "") == pending.replaced_version
                ):
                    return "update"
            del self._pending[key]
            return None

    def __len__(self) -> int:
        with self._lock:
            self._expire()
            return len(self._pending)

    def _live(self, key: ObjectKey) -> _Pending | None:
        # Caller holds the lock.
        pending = self._pending.get(key)
        if pending is not None and self._clock() - pending.at > self._ttl:
            del self._pending[key]
            return None
        if self._clock() - self._last_expiry > self._ttl:
            self._expire()
        return pending

    def _expire(self) -> None:
        # Caller holds the lock.
        now = self._clock()
        self._last_expiry = now
        for key in [k for k, p in self._pending.items() if now - p.at > self._ttl]:
            del self._pending[key]

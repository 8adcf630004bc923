"""Who wrote what, and who held which Lease at that moment: the local API server's audit.

kube-apiserver's audit log records each request with its user; proving that only the
leader writes needs one more fact per write: did the writer hold the Lease when the write
was *applied*? :class:`Audit` records every committed write together with the user whose
request made it, and keeps the history of every Lease, both in commit order under the
storage lock. So "who held Lease L right after revision r" has an exact answer
(:meth:`Audit.lease_holder`), with no race between reading the Lease and the write.

Users: the local server authenticates nobody; a bearer token names the user (a kubeconfig
from :meth:`~apiserver.LocalApiServer.kubeconfig_for` carries one), a request
without one is ``system:anonymous``, and writes the server makes itself (garbage
collection, namespace cleanup, the minimal kubelet) are ``system:local-apiserver``.

Recording starts with :meth:`Audit.start` (it costs a record per write; off by default).

Thread-safe: request threads set their user with :meth:`Audit.acting`; records are made
under the storage lock; readers get copies.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from apiserver.storage.store import Event, Storage

__all__ = ["SYSTEM_USER", "Audit", "AuditRecord", "LeaseState"]

SYSTEM_USER = "system:local-apiserver"
LEASES_KEY = "coordination.k8s.io/leases"


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One applied write."""

    revision: int  # the resourceVersion it committed
    time: float  # wall clock, seconds since the epoch
    user: str
    verb: str  # the request's verb (create, update, patch, delete, ...) or "system"
    event: str  # ADDED, MODIFIED or DELETED
    group: str
    resource: str  # plural
    namespace: str  # "" for cluster-scoped objects
    name: str
    uid: str = ""  # the object's metadata.uid (a shard ring places keys by it)
    owner_uid: str = ""  # its controller ownerReference's uid: owned objects follow it


@dataclass(frozen=True, slots=True)
class LeaseState:
    """A Lease as it was right after one write to it."""

    revision: int
    time: float  # wall clock of the write
    holder: str  # "" when free, released or deleted
    labels: dict[str, str]
    annotations: dict[str, str]
    deleted: bool = False  # this write deleted the Lease


class Audit:
    """The audit of one local API server's storage."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        self._lock = threading.Lock()
        self._local = threading.local()
        self._enabled = False
        self._records: list[AuditRecord] = []
        # (namespace, name) -> every state of the Lease, in commit order
        self._leases: dict[tuple[str, str], list[LeaseState]] = {}
        storage.add_listener(self._on_commit)

    def start(self) -> None:
        """Record from now on (Lease history included)."""
        with self._storage.lock:
            self._enabled = True
            for key, lease in self._storage.all_objects():
                if key == LEASES_KEY:
                    self._note_lease(self._storage.revision, lease, deleted=False)

    def stop(self) -> None:
        with self._storage.lock:
            self._enabled = False

    def clear(self) -> None:
        with self._storage.lock, self._lock:
            self._records.clear()
            self._leases.clear()

    @contextmanager
    def acting(self, user: str, verb: str) -> Iterator[None]:
        """Writes committed by this thread inside the block are ``user``'s ``verb``."""
        self._local.who = (user, verb)
        try:
            yield
        finally:
            self._local.who = None

    def records(self, user: str | None = None) -> list[AuditRecord]:
        """The writes recorded so far (of ``user`` only, when given), in commit order."""
        with self._lock:
            return [r for r in self._records if user is None or r.user == user]

    def lease_holder(self, namespace: str, name: str, revision: int) -> str:
        """The Lease's ``holderIdentity`` right after ``revision`` ("" if free or absent)."""
        state = self.lease_at(namespace, name, revision)
        return "" if state is None else state.holder

    def lease_at(self, namespace: str, name: str, revision: int) -> LeaseState | None:
        """The Lease as it was right after ``revision`` (None: not there, or not recorded)."""
        with self._lock:
            history = list(self._leases.get((namespace, name), ()))
        found = None
        for state in history:
            if state.revision > revision:
                break
            found = state
        return found

    def lease_history(self, namespace: str, name: str) -> list[tuple[int, str]]:
        """Every recorded change of the Lease's holder: ``(revision, holder)``."""
        with self._lock:
            states = list(self._leases.get((namespace, name), ()))
        out: list[tuple[int, str]] = []
        for state in states:
            if not out or out[-1][1] != state.holder:
                out.append((state.revision, state.holder))
        return out

    def lease_states(self, namespace: str | None = None) -> dict[tuple[str, str], list[LeaseState]]:
        """Every recorded state of every Lease (of ``namespace``), by (namespace, name)."""
        with self._lock:
            return {
                key: list(states)
                for key, states in self._leases.items()
                if namespace is None or key[0] == namespace
            }

    # -- internals (called under the storage lock) --------------------------------------

    def _on_commit(self, event: Event) -> None:
        if not self._enabled:
            return
        group, _, plural = event.key[0].partition("/")
        if event.key[0] == LEASES_KEY:
            self._note_lease(event.revision, event.object, deleted=event.type == "DELETED")
        who = getattr(self._local, "who", None)
        user, verb = who if who is not None else (SYSTEM_USER, "system")
        meta = (event.object or {}).get("metadata") or {}
        record = AuditRecord(
            revision=event.revision,
            time=time.time(),
            user=user,
            verb=verb,
            event=event.type,
            group=group,
            resource=plural,
            namespace=event.key[1],
            name=event.key[2],
            uid=str(meta.get("uid") or ""),
            owner_uid=next(
                (
                    str(ref.get("uid") or "")
                    for ref in meta.get("ownerReferences") or ()
                    if isinstance(ref, dict) and ref.get("controller")
                ),
                "",
            ),
        )
        with self._lock:
            self._records.append(record)

    def _note_lease(self, revision: int, lease: dict[str, Any], *, deleted: bool) -> None:
        meta = lease.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        spec = lease.get("spec") or {}
        state = LeaseState(
            revision=revision,
            time=time.time(),
            holder="" if deleted else str(spec.get("holderIdentity") or ""),
            labels=dict(meta.get("labels") or {}),
            annotations={} if deleted else dict(meta.get("annotations") or {}),
            deleted=deleted,
        )
        with self._lock:
            self._leases.setdefault(key, []).append(state)

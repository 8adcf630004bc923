"""Garbage collection and namespace deletion for the local API server.

What kube-controller-manager's garbage collector and namespace controller do, run as one
background thread fed by storage commits:

* an object whose every controller/owner (``ownerReferences`` by uid) is gone is deleted
  (background cascading deletion);
* an owner deleted with ``propagationPolicy=Foreground`` carries the
  ``foregroundDeletion`` finalizer: its dependents are deleted, and once no dependent with
  ``blockOwnerDeletion: true`` remains the finalizer is removed and the owner goes;
* an owner deleted with ``Orphan`` carries the ``orphan`` finalizer: its dependents lose
  the ownerReference, then the finalizer is removed;
* a terminating namespace has all its content deleted, then its ``kubernetes`` finalizer
  removed, then it goes;
* a deleted CRD has all its custom objects deleted before its cleanup finalizer goes.

Work is asynchronous, as in a real cluster: a DELETE answers before dependents go.
:attr:`GarbageCollector.latency` (seconds, 0 by default) holds each commit back that long
before the collector acts on it: kube-controller-manager's collector takes milliseconds
to seconds under load, and a test of a controller's own cleanup (a name deleted and
created again, say) must not find it always beaten by a collector that is never late.

Thread-safe: the commit listener only queues work; the worker thread performs writes
through :class:`~apiserver.machinery.rest.Rest` like any client.
"""

from __future__ import annotations

import copy
import datetime as dt
import logging
import threading
import time
from collections import defaultdict, deque
from typing import Any

from apiserver.api.resources import ServedResource
from apiserver.machinery.rest import CRD_CLEANUP_FINALIZER, DeleteOptions, Rest, StatusError
from apiserver.storage.store import Event, ObjectKey

__all__ = ["GarbageCollector"]

logger = logging.getLogger(__name__)

JsonDict = dict[str, Any]
_MANAGER = "kube-controller-manager"
_NAMESPACE_OK: dict[str, tuple[str, str, str]] = {
    "NamespaceDeletionDiscoveryFailure": (
        "False",
        "ResourcesDiscovered",
        "All resources successfully discovered",
    ),
    "NamespaceDeletionGroupVersionParsingFailure": (
        "False",
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    "NamespaceDeletionContentFailure": (
        "False",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    "NamespaceContentRemaining": ("False", "ContentRemoved", "All content successfully removed"),
    "NamespaceFinalizersRemaining": (
        "False",
        "ContentHasNoFinalizers",
        "All content-preserving finalizers finished",
    ),
}


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class GarbageCollector:
    """The background worker that enforces ownerReferences, finalizers and namespaces."""

    def __init__(self, rest: Rest) -> None:
        self._rest = rest
        self._storage = rest.storage
        self._cond = threading.Condition()
        self._pending: deque[tuple[float, Event]] = deque()  # (committed, monotonic)
        self.latency = 0.0  # seconds each commit waits before the collector acts on it
        self._stopped = False
        self._thread: threading.Thread | None = None
        # uid -> keys of objects naming it as owner; uid -> key of the object itself
        self._dependents: dict[str, set[ObjectKey]] = defaultdict(set)
        self._uids: dict[str, ObjectKey] = {}
        self._storage.add_listener(self._on_commit)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="local-apiserver/gc")
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)

    # -- indexing (storage lock held) ------------------------------------------------

    def _on_commit(self, event: Event) -> None:
        if event.prev is not None:
            for ref in (event.prev.get("metadata") or {}).get("ownerReferences") or []:
                self._dependents[str(ref.get("uid"))].discard(event.key)
        meta = event.object.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        if event.type == "DELETED":
            self._uids.pop(uid, None)
        else:
            self._uids[uid] = event.key
            for ref in meta.get("ownerReferences") or []:
                self._dependents[str(ref.get("uid"))].add(event.key)
        # Only deletions, owned objects (or ones that were) and objects being deleted can
        # need GC work; skipping the rest keeps the write path cheap.
        if (
            event.type != "DELETED"
            and not meta.get("ownerReferences")
            and not meta.get("deletionTimestamp")
            and not (
                event.prev is not None and (event.prev.get("metadata") or {}).get("ownerReferences")
            )
        ):
            return
        with self._cond:
            self._pending.append((time.monotonic(), event))
            self._cond.notify()

    # -- worker ----------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped:
                    wait = (
                        None
                        if not self._pending
                        else self._pending[0][0] + self.latency - time.monotonic()
                    )
                    if wait is not None and wait <= 0:
                        break
                    self._cond.wait(wait)
                if self._stopped:
                    return
                event = self._pending.popleft()[1]
            try:
                with self._storage.lock:
                    self._handle(event)
            except Exception:
                logger.exception("garbage collection step failed", extra={"key": event.key})

    def _served(self, resource_key: str) -> ServedResource | None:
        versions = self._rest.registry.by_key(resource_key)
        return versions[0] if versions else None

    def _handle(self, event: Event) -> None:
        meta = event.object.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        if event.type == "DELETED":
            for key in sorted(self._dependents.get(uid, set())):
                self._attempt_to_delete(key)
            # a dependent went: owners waiting in foreground deletion may proceed
            for ref in meta.get("ownerReferences") or []:
                owner_key = self._uids.get(str(ref.get("uid")))
                if owner_key is not None:
                    self._foreground_check(owner_key)
            namespace = meta.get("namespace")
            if namespace:
                self._namespace_check(namespace)
            return
        refs = meta.get("ownerReferences") or []
        if refs and any(str(r.get("uid")) not in self._uids for r in refs):
            self._attempt_to_delete(event.key)
        if event.prev is not None:
            self._unblocked_owners(event.prev, refs)
        if not meta.get("deletionTimestamp"):
            return
        if event.key[0] == "/pods":
            self._kubelet(event)
        finalizers = meta.get("finalizers") or []
        if "orphan" in finalizers:
            self._orphan(event.key, uid)
        if "foregroundDeletion" in finalizers:
            self._foreground(event.key, uid)
        if CRD_CLEANUP_FINALIZER in finalizers:
            self._crd_cleanup(event.key)
        if event.key[0] == "/namespaces":
            self._namespace_check(event.key[2])

    def _kubelet(self, event: Event) -> None:
        """What a kubelet does for a terminating pod on its node: delete it for good.

        Only for nodes that exist as Node objects; a pod bound to a node that is not
        there stays terminating until deleted with grace period 0, as on a real cluster
        (before the pod garbage collector's 40 s quarantine).
        """
        pod = event.object
        node = (pod.get("spec") or {}).get("nodeName")
        meta = pod.get("metadata") or {}
        if not node or meta.get("finalizers") or not meta.get("deletionGracePeriodSeconds"):
            return
        if self._storage.get(("/nodes", "", str(node))) is None:
            return
        served = self._served(event.key[0])
        if served is None:
            return
        try:
            self._rest.delete(
                served,
                event.key[1],
                event.key[2],
                DeleteOptions(grace_period_seconds=0),
                manager="kubelet",
            )
        except StatusError as exc:
            if exc.code != 404:
                raise

    def _get(self, key: ObjectKey) -> JsonDict | None:
        return self._storage.get(key)

    def _delete(self, key: ObjectKey, policy: str = "Background") -> None:
        served = self._served(key[0])
        if served is None:
            return
        try:
            self._rest.delete(
                served,
                key[1] or None,
                key[2],
                DeleteOptions(propagation_policy=policy),
                manager=_MANAGER,
            )
        except StatusError as exc:
            if exc.code != 404:
                raise

    def _update(self, key: ObjectKey, change: Any) -> None:
        """Read-modify-write ``key`` with ``change(obj)``; retried on conflict."""
        served = self._served(key[0])
        if served is None:
            return
        for _ in range(5):
            current = self._get(key)
            if current is None:
                return
            new = copy.deepcopy(current)
            change(new)
            try:
                self._rest.update(served, key[1] or None, key[2], new, manager=_MANAGER)
                return
            except StatusError as exc:
                if exc.code == 404:
                    return
                if exc.code != 409:
                    raise

    def _remove_finalizer(self, key: ObjectKey, finalizer: str) -> None:
        def change(obj: JsonDict) -> None:
            obj["metadata"]["finalizers"] = [
                f for f in obj["metadata"].get("finalizers") or [] if f != finalizer
            ]
            if not obj["metadata"]["finalizers"]:
                del obj["metadata"]["finalizers"]

        self._update(key, change)

    @staticmethod
    def _deleting_dependents(obj: JsonDict | None) -> bool:
        """In foreground deletion: waiting for its dependents (``isDeletingDependents``)."""
        meta = (obj or {}).get("metadata") or {}
        return bool(meta.get("deletionTimestamp")) and "foregroundDeletion" in (
            meta.get("finalizers") or []
        )

    def _attempt_to_delete(self, key: ObjectKey) -> None:
        """``attemptToDeleteItem`` for an object some owner of which is gone or waiting.

        Owners are solid (there, not waiting for dependents), dangling (gone) or
        waiting (foreground deletion). With a solid owner the object stays and loses
        the references to the others. Else it is deleted: in the foreground when an
        owner waits and it has dependents itself, after unblocking its own references
        if one of those dependents waits too (a cycle: otherwise each would wait for the
        other); else by its own finalizers (orphan, foreground) or in the background.
        An object being deleted is left to its deletion.
        """
        obj = self._get(key)
        if obj is None:
            return
        meta = obj.get("metadata") or {}
        refs = meta.get("ownerReferences") or []
        if meta.get("deletionTimestamp") or not refs:
            return
        solid: set[str] = set()
        waiting = False
        for ref in refs:
            owner_key = self._uids.get(str(ref.get("uid")))
            owner = self._get(owner_key) if owner_key is not None else None
            if owner is None:
                continue
            if self._deleting_dependents(owner):
                waiting = True
            else:
                solid.add(str(ref.get("uid")))
        if solid:
            if len(solid) != len(refs):

                def keep_solid(o: JsonDict) -> None:
                    o["metadata"]["ownerReferences"] = [
                        r
                        for r in o["metadata"].get("ownerReferences") or []
                        if str(r.get("uid")) in solid
                    ]

                self._update(key, keep_solid)
            return
        dependents = [
            d for d in self._dependents.get(str(meta.get("uid")), set()) if self._get(d) is not None
        ]
        if waiting and dependents:
            if any(self._deleting_dependents(self._get(d)) for d in dependents):

                def unblock(o: JsonDict) -> None:
                    o["metadata"]["ownerReferences"] = [
                        {**r, "blockOwnerDeletion": False} if r.get("blockOwnerDeletion") else r
                        for r in o["metadata"].get("ownerReferences") or []
                    ]

                self._update(key, unblock)
            self._delete(key, "Foreground")
            return
        finalizers = meta.get("finalizers") or []
        if "orphan" in finalizers:
            self._delete(key, "Orphan")
        elif "foregroundDeletion" in finalizers:
            self._delete(key, "Foreground")
        else:
            self._delete(key)

    def _unblocked_owners(self, prev: JsonDict, refs: list[Any]) -> None:
        """Owners waiting for their dependents that a change of ownerReferences (a
        blocking reference removed or made non-blocking) may have freed."""
        blocking = {str(r.get("uid")) for r in refs if r.get("blockOwnerDeletion")}
        for ref in (prev.get("metadata") or {}).get("ownerReferences") or []:
            uid = str(ref.get("uid"))
            if ref.get("blockOwnerDeletion") and uid not in blocking:
                owner_key = self._uids.get(uid)
                if owner_key is not None:
                    self._foreground_check(owner_key)

    def _orphan(self, key: ObjectKey, uid: str) -> None:
        for dep in sorted(self._dependents.get(uid, set())):

            def change(o: JsonDict) -> None:
                refs = [
                    r
                    for r in o["metadata"].get("ownerReferences") or []
                    if str(r.get("uid")) != uid
                ]
                if refs:
                    o["metadata"]["ownerReferences"] = refs
                else:
                    o["metadata"].pop("ownerReferences", None)

            self._update(dep, change)
        self._remove_finalizer(key, "orphan")

    def _foreground(self, key: ObjectKey, uid: str) -> None:
        for dep in sorted(self._dependents.get(uid, set())):
            self._attempt_to_delete(dep)
        self._foreground_check(key)

    def _foreground_check(self, key: ObjectKey) -> None:
        owner = self._get(key)
        if owner is None:
            return
        meta = owner.get("metadata") or {}
        if "foregroundDeletion" not in (meta.get("finalizers") or []):
            return
        uid = str(meta.get("uid"))
        for dep in sorted(self._dependents.get(uid, set())):
            obj = self._get(dep)
            if obj is None:
                continue
            for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
                if str(ref.get("uid")) == uid and ref.get("blockOwnerDeletion"):
                    return
        self._remove_finalizer(key, "foregroundDeletion")

    def _namespace_check(self, namespace: str) -> None:
        key: ObjectKey = ("/namespaces", "", namespace)
        ns = self._get(key)
        if ns is None or not (ns.get("metadata") or {}).get("deletionTimestamp"):
            return
        content = self._storage.namespaces_in_use(namespace)
        for resource_key, obj in content:
            if not (obj.get("metadata") or {}).get("deletionTimestamp"):
                self._delete((resource_key, namespace, obj["metadata"]["name"]))
        remaining = self._storage.namespaces_in_use(namespace)
        self._namespace_conditions(key, remaining)
        if remaining:
            return
        served = self._served("/namespaces")
        if served is None or not (ns.get("spec") or {}).get("finalizers"):
            return
        body = {"metadata": {"name": namespace}, "spec": {"finalizers": []}}
        try:
            self._rest.update(
                served, None, namespace, body, subresource="finalize", manager=_MANAGER
            )
        except StatusError as exc:
            if exc.code not in (404, 409):
                raise
        ns = self._get(key)
        if ns is not None and not (ns.get("metadata") or {}).get("finalizers"):
            self._delete(key)

    def _namespace_conditions(self, key: ObjectKey, remaining: list[tuple[str, Any]]) -> None:
        """The five conditions the namespace controller keeps on a terminating namespace
        (``namespace_condition_updater.go``): what content and finalizers remain."""
        served = self._served("/namespaces")
        ns = self._get(key)
        if served is None or ns is None:
            return
        by_resource: dict[str, int] = defaultdict(int)
        by_finalizer: dict[str, int] = defaultdict(int)
        for resource_key, obj in remaining:
            group, _, plural = resource_key.partition("/")
            by_resource[f"{plural}.{group}"] += 1
            for fin in (obj.get("metadata") or {}).get("finalizers") or []:
                by_finalizer[str(fin)] += 1
        wanted: dict[str, tuple[str, str, str]] = dict(_NAMESPACE_OK)
        if by_resource:
            listed = sorted(f"{r} has {n} resource instances" for r, n in by_resource.items())
            wanted["NamespaceContentRemaining"] = (
                "True",
                "SomeResourcesRemain",
                f"Some resources are remaining: {', '.join(listed)}",
            )
        if by_finalizer:
            listed = sorted(f"{f} in {n} resource instances" for f, n in by_finalizer.items())
            wanted["NamespaceFinalizersRemaining"] = (
                "True",
                "SomeFinalizersRemain",
                "Some content in the namespace has finalizers remaining: " + ", ".join(listed),
            )
        status = ns.get("status") or {}
        old = {c.get("type"): c for c in status.get("conditions") or [] if isinstance(c, dict)}
        conditions = [c for t, c in old.items() if t not in wanted]
        changed = False
        for ctype, (state, reason, message) in wanted.items():
            before = old.get(ctype)
            if before is not None and (
                before.get("status"),
                before.get("reason"),
                before.get("message"),
            ) == (state, reason, message):
                conditions.append(before)
                continue
            changed = True
            moved = before is None or before.get("status") != state
            conditions.append(
                {
                    "type": ctype,
                    "status": state,
                    "lastTransitionTime": (
                        _now() if moved or before is None else before.get("lastTransitionTime")
                    ),
                    "reason": reason,
                    "message": message,
                }
            )
        if not changed:
            return
        body = copy.deepcopy(ns)
        body["status"] = {**status, "conditions": conditions}
        try:
            self._rest.update(served, None, key[2], body, subresource="status", manager=_MANAGER)
        except StatusError as exc:
            if exc.code not in (404, 409):
                raise

    def _crd_cleanup(self, key: ObjectKey) -> None:
        crd = self._get(key)
        if crd is None:
            return
        spec = crd.get("spec") or {}
        resource_key = f"{spec.get('group', '')}/{(spec.get('names') or {}).get('plural', '')}"
        for obj in self._storage.list(resource_key):
            meta = obj.get("metadata") or {}
            if not meta.get("deletionTimestamp"):
                self._delete((resource_key, meta.get("namespace", ""), meta["name"]))
        if not self._storage.list(resource_key):
            self._remove_finalizer(key, CRD_CLEANUP_FINALIZER)

"""Minimal workload controllers: Deployment -> ReplicaSet, ReplicaSet/ReplicationController
-> Pod, for the local API server's embedded and demo modes.

kube-apiserver runs no controller: kube-controller-manager's deployment and replicaset
controllers (pkg/controller/deployment, pkg/controller/replicaset) make the ReplicaSets
and Pods. The local server's plain test mode stays like kube-apiserver alone (nothing is
made for you: a test must not rely on a controller the server under test may lack);
``LocalApiServer(workload_controllers=True)`` — what ``overseer run --embedded`` and the
demo server use — runs these, so that a demo or a plugin's manual test sees what a
cluster shows: a Deployment gets a ReplicaSet named ``{deployment}-{pod-template-hash}``
owned by it, and a ReplicaSet or ReplicationController gets its ``replicas`` Pods (they
stay ``Pending``: there is no scheduler or kubelet).

Kept deliberately small, and what it leaves out is documented in
``docs/local-apiserver.md``: a changed template makes a new ReplicaSet and scales the
old ones to zero at once (no rolling update, no surge, no revision history limit);
Pods are never adopted by selector (only Pods the controller made are counted); the
``pod-template-hash`` is a hash of the template's JSON (kube's hashes Go's printing of
the struct, so the value differs); readiness and availability stay zero.

Thread-safety: one worker thread; storage events are queued from the commit path under
the storage lock and handled under it, like the garbage collector.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from typing import Any, Final

import orjson

from apiserver.api.resources import ServedResource
from apiserver.machinery.rest import DeleteOptions, Rest, StatusError
from apiserver.storage.store import Event

__all__ = ["WorkloadControllers", "pod_template_hash"]

logger = logging.getLogger(__name__)

JsonDict = dict[str, Any]

MANAGER: Final = "kube-controller-manager"
_DEPLOYMENTS: Final = "apps/deployments"
_REPLICASETS: Final = "apps/replicasets"
_RCS: Final = "/replicationcontrollers"
_PODS: Final = "/pods"
_ALPHANUMS: Final = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand


def _fnv32a(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def pod_template_hash(template: JsonDict, collision_count: int = 0) -> str:
    """The ``pod-template-hash`` label of a Deployment's template: FNV-32a over the
    template (here its sorted JSON), the collision count mixed in, written with
    ``rand.SafeEncodeString`` as kube writes it."""
    data = orjson.dumps(template, option=orjson.OPT_SORT_KEYS)
    if collision_count:
        data += str(collision_count).encode()
    return "".join(_ALPHANUMS[b % len(_ALPHANUMS)] for b in str(_fnv32a(data)).encode())


def _controller_uid(obj: JsonDict) -> str:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid", ""))
    return ""


def _owner_ref(obj: JsonDict, api_version: str, kind: str) -> JsonDict:
    meta = obj["metadata"]
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _replicas(obj: JsonDict) -> int:
    value = (obj.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


class WorkloadControllers:
    """Deployment and ReplicaSet/ReplicationController controllers over one storage."""

    def __init__(self, rest: Rest) -> None:
        self._rest = rest
        self._storage = rest.storage
        self._cond = threading.Condition()
        self._pending: deque[tuple[str, str, str]] = deque()
        self._queued: set[tuple[str, str, str]] = set()
        self._stopped = False
        self._thread: threading.Thread | None = None
        self._storage.add_listener(self._on_commit)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="local-apiserver/workloads")
        self._thread.start()
        with self._storage.lock:  # what existed before the start
            for key in (_DEPLOYMENTS, _REPLICASETS, _RCS):
                for obj in self._storage.list(key):
                    meta = obj.get("metadata") or {}
                    self._enqueue(key, str(meta.get("namespace", "")), str(meta.get("name", "")))

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)

    # -- events (storage lock held) --------------------------------------------------

    def _enqueue(self, resource: str, namespace: str, name: str) -> None:
        item = (resource, namespace, name)
        with self._cond:
            if item not in self._queued:
                self._queued.add(item)
                self._pending.append(item)
                self._cond.notify()

    def _on_commit(self, event: Event) -> None:
        resource, namespace, name = event.key
        if resource in (_DEPLOYMENTS, _REPLICASETS, _RCS):
            self._enqueue(resource, namespace, name)
        if resource in (_REPLICASETS, _PODS):
            # an owned object changed: its controller counts again
            for ref in (event.object.get("metadata") or {}).get("ownerReferences") or []:
                owner = {"Deployment": _DEPLOYMENTS, "ReplicaSet": _REPLICASETS}.get(
                    str(ref.get("kind"))
                )
                if ref.get("kind") == "ReplicationController":
                    owner = _RCS
                if owner is not None and ref.get("controller"):
                    self._enqueue(owner, namespace, str(ref.get("name", "")))

    # -- worker ----------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                item = self._pending.popleft()
                self._queued.discard(item)
            try:
                with self._storage.lock:
                    self._reconcile(*item)
            except StatusError as exc:
                logger.warning(
                    "workload controller write refused",
                    extra={"key": item, "code": exc.code, "error": exc.message},
                )
            except Exception:
                logger.exception("workload controller step failed", extra={"key": item})

    def _served(self, resource_key: str) -> ServedResource:
        return self._rest.registry.by_key(resource_key)[0]

    def _reconcile(self, resource: str, namespace: str, name: str) -> None:
        obj = self._storage.get((resource, namespace, name))
        if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
            return
        if resource == _DEPLOYMENTS:
            self._deployment(obj)
        else:
            self._replicas(resource, obj)

    def _owned(self, resource: str, namespace: str, uid: str) -> list[JsonDict]:
        return [o for o in self._storage.list(resource, namespace) if _controller_uid(o) == uid]

    def _write_status(self, resource: str, obj: JsonDict, status: JsonDict) -> None:
        current = obj.get("status") or {}
        if all(current.get(k) == v for k, v in status.items()):
            return
        meta = obj["metadata"]
        self._rest.update(
            self._served(resource),
            meta.get("namespace"),
            meta["name"],
            {**obj, "status": {**current, **status}},
            subresource="status",
            manager=MANAGER,
        )

    # -- Deployment -> ReplicaSet ----------------------------------------------------

    def _deployment(self, deployment: JsonDict) -> None:
        meta, spec = deployment["metadata"], deployment.get("spec") or {}
        namespace = str(meta.get("namespace", ""))
        template = spec.get("template") or {}
        collisions = int((deployment.get("status") or {}).get("collisionCount") or 0)
        hashed = pod_template_hash(template, collisions)
        name = f"{meta['name']}-{hashed}"
        owned = self._owned(_REPLICASETS, namespace, str(meta["uid"]))
        current = next((rs for rs in owned if rs["metadata"]["name"] == name), None)
        replicas = _replicas(deployment)
        served = self._served(_REPLICASETS)
        if current is None:
            labels = {**((template.get("metadata") or {}).get("labels") or {})}
            labels["pod-template-hash"] = hashed
            selector = dict(spec.get("selector") or {})
            selector["matchLabels"] = {
                **(selector.get("matchLabels") or {}),
                "pod-template-hash": hashed,
            }
            revision = 1 + max(
                (
                    int(
                        (rs["metadata"].get("annotations") or {}).get(
                            "deployment.kubernetes.io/revision", 0
                        )
                    )
                    for rs in owned
                ),
                default=0,
            )
            body: JsonDict = {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {
                    "name": name,
                    "labels": labels,
                    "annotations": {
                        "deployment.kubernetes.io/desired-replicas": str(replicas),
                        "deployment.kubernetes.io/max-replicas": str(replicas),
                        "deployment.kubernetes.io/revision": str(revision),
                    },
                    "ownerReferences": [_owner_ref(deployment, "apps/v1", "Deployment")],
                },
                "spec": {
                    "replicas": replicas,
                    "selector": selector,
                    "template": {
                        **template,
                        "metadata": {**(template.get("metadata") or {}), "labels": labels},
                    },
                },
            }
            if spec.get("minReadySeconds"):
                body["spec"]["minReadySeconds"] = spec["minReadySeconds"]
            current = self._rest.create(served, namespace, body, manager=MANAGER)
        elif _replicas(current) != replicas:
            scaled = {**current, "spec": {**current["spec"], "replicas": replicas}}
            current = self._rest.update(served, namespace, name, scaled, manager=MANAGER)
        for old in owned:  # no rolling update: the old ones go to zero at once
            if old["metadata"]["name"] != name and _replicas(old) != 0:
                zero = {**old, "spec": {**old["spec"], "replicas": 0}}
                self._rest.update(served, namespace, old["metadata"]["name"], zero, manager=MANAGER)
        total = sum(int((rs.get("status") or {}).get("replicas") or 0) for rs in owned)
        updated = int((current.get("status") or {}).get("replicas") or 0)
        status: JsonDict = {"observedGeneration": meta.get("generation", 1), "replicas": total}
        status["updatedReplicas"] = updated
        status["unavailableReplicas"] = total
        self._write_status(_DEPLOYMENTS, deployment, status)

    # -- ReplicaSet / ReplicationController -> Pods ----------------------------------

    def _replicas(self, resource: str, owner: JsonDict) -> None:
        meta, spec = owner["metadata"], owner.get("spec") or {}
        namespace = str(meta.get("namespace", ""))
        pods = [
            p
            for p in self._owned(_PODS, namespace, str(meta["uid"]))
            if not (p.get("metadata") or {}).get("deletionTimestamp")
        ]
        want = _replicas(owner)
        served = self._served(_PODS)
        template = spec.get("template") or {}
        kind, api_version = (
            ("ReplicaSet", "apps/v1")
            if resource == _REPLICASETS
            else ("ReplicationController", "v1")
        )
        for _ in range(want - len(pods)):
            tmeta = template.get("metadata") or {}
            body: JsonDict = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "generateName": f"{meta['name']}-",
                    "labels": dict(tmeta.get("labels") or {}),
                    "ownerReferences": [_owner_ref(owner, api_version, kind)],
                },
                "spec": orjson.loads(orjson.dumps(template.get("spec") or {})),
            }
            if tmeta.get("annotations"):
                body["metadata"]["annotations"] = dict(tmeta["annotations"])
            pods.append(self._rest.create(served, namespace, body, manager=MANAGER))
        if len(pods) > want:  # the newest go first
            pods.sort(
                key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"])
            )
            for pod in pods[want:]:
                self._rest.delete(
                    served, namespace, pod["metadata"]["name"], DeleteOptions(), manager=MANAGER
                )
            pods = pods[:want]
        status: JsonDict = {
            "replicas": len(pods),
            "fullyLabeledReplicas": len(pods),
            "observedGeneration": meta.get("generation", 1),
        }
        self._write_status(resource, owner, status)

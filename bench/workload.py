"""Objects the benchmarks write, and a bounded parallel writer.

:func:`pod` and :func:`pod_status` build a realistic Pod (labels, annotations, two
containers with env, ports, resources and volume mounts, an owner, and a status with
conditions and container statuses): about 5 KB as the API server stores it, managedFields
included. :func:`run_parallel` spreads a bounded list of requests over threads.

What a real cluster keeps (a benchmark must create nothing that a cluster's controllers
delete or rewrite meanwhile):

* pods are not bound to a node (``nodeName`` unset): a pod bound to a node that does not
  exist is deleted by kube-controller-manager's pod garbage collector within a minute;
  and a Node object without a kubelet turns NotReady, the node lifecycle controller then
  rewrites every pod's Ready condition and taints the node, and the taint manager evicts;
* they name a scheduler that does not exist (:data:`NO_SCHEDULER`): the default scheduler
  only takes pods whose ``schedulerName`` is its own, so they stay Pending and nobody
  writes them (not scheduled onto a real node, no Unschedulable status updates); the pod
  garbage collector leaves unbound, non-terminating pods alone;
* their owner is a ConfigMap (:func:`owner`): the garbage collector keeps a pod while its
  owner exists (the local server's too), and no workload controller manages pods owned
  by a ConfigMap (a ReplicaSet owner would delete pods beyond its replica count).

Thread-safe: the builders are pure; :func:`run_parallel` joins its threads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

JsonDict = dict[str, Any]


def _container(name: str, image: str, port: int, i: int) -> JsonDict:
    return {
        "name": name,
        "image": f"registry.example.com/team/{image}:1.{i % 7}.3",
        "imagePullPolicy": "IfNotPresent",
        "args": ["--listen", f":{port}", "--log-level", "info"],
        "env": [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "LOG_FORMAT", "value": "json"},
            {"name": "CACHE_SIZE", "value": str(128 + i % 64)},
        ],
        "ports": [
            {"name": "http", "containerPort": port, "protocol": "TCP"},
            {"name": "metrics", "containerPort": port + 1000, "protocol": "TCP"},
        ],
        "resources": {
            "requests": {"cpu": "100m", "memory": "128Mi"},
            "limits": {"cpu": "500m", "memory": "512Mi"},
        },
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/app", "readOnly": True},
            {"name": "data", "mountPath": "/var/lib/app"},
        ],
        "readinessProbe": {
            "httpGet": {"path": "/healthz", "port": port},
            "periodSeconds": 10,
        },
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }


OWNERS = 50  # ConfigMaps the pods belong to
NO_SCHEDULER = "overseer-bench-unscheduled"  # no such scheduler runs: pods stay Pending


def owner_name(n: int) -> str:
    return f"app-{n}-7d9f8b6c5"


def owner(n: int, namespace: str) -> JsonDict:
    """ConfigMap ``n``: the owner of pods ``i`` with ``i % OWNERS == n`` (a garbage
    collector deletes pods whose owner does not exist; nothing else acts on it)."""
    labels = {"app.kubernetes.io/name": f"app-{n}", "pod-template-hash": "7d9f8b6c5"}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": owner_name(n), "namespace": namespace, "labels": labels},
        "data": {"replicas": "200"},
    }


def pod(i: int, namespace: str, owner_uids: list[str]) -> JsonDict:
    """Pod number ``i`` of owner ``i % OWNERS`` (uids in ``owner_uids``)."""
    app = f"app-{i % OWNERS}"
    rs = owner_name(i % OWNERS)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{rs}-{i:06d}",
            "namespace": namespace,
            "labels": {
                "app.kubernetes.io/name": app,
                "app.kubernetes.io/part-of": "bench",
                "pod-template-hash": "7d9f8b6c5",
                "tier": "backend" if i % 2 else "frontend",
            },
            "annotations": {
                "prometheus.io/scrape": "true",
                "prometheus.io/port": "9090",
                "kubectl.kubernetes.io/restartedAt": "2024-05-01T10:00:00Z",
            },
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": rs,
                    "uid": owner_uids[i % OWNERS],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "containers": [
                _container("main", app, 8080, i),
                _container("sidecar", "proxy", 8081, i),
            ],
            "volumes": [
                {"name": "config", "configMap": {"name": f"{app}-config"}},
                {"name": "data", "emptyDir": {}},
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "schedulerName": NO_SCHEDULER,
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
            ],
        },
    }


def pod_status(i: int, obj: JsonDict) -> JsonDict:
    """``obj`` (as created) with a Running status, for a PUT to ``/status`` (the size of a
    running pod's status; nothing on a real cluster rewrites it, see the module doc)."""
    t = "2024-05-01T10:00:00Z"
    body = dict(obj)
    body["status"] = {
        "phase": "Running",
        "hostIP": f"10.0.{i % 20}.1",
        "podIP": f"10.244.{(i // 250) % 256}.{i % 250}",
        "podIPs": [{"ip": f"10.244.{(i // 250) % 256}.{i % 250}"}],
        "startTime": t,
        "qosClass": "Burstable",
        "conditions": [
            {"type": c, "status": "True", "lastProbeTime": None, "lastTransitionTime": t}
            for c in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
        ],
        "containerStatuses": [
            {
                "name": c["name"],
                "ready": True,
                "restartCount": 0,
                "started": True,
                "image": c["image"],
                "imageID": f"registry.example.com/team/img@sha256:{i:064x}",
                "containerID": f"containerd://{(i * 7919 + n):064x}",
                "state": {"running": {"startedAt": t}},
                "lastState": {},
            }
            for n, c in enumerate(obj["spec"]["containers"])
        ],
    }
    return body


def run_parallel(
    count: int, threads: int, work: Callable[[int], None], *, deadline: float
) -> tuple[float, int]:
    """Call ``work(i)`` for i in range(count) on ``threads`` threads.

    Returns (seconds, calls completed). Stops early at ``deadline`` (``time.monotonic()``).
    The first exception is re-raised after every thread has been joined.
    """
    lock = threading.Lock()
    next_i = iter(range(count))
    failures: list[BaseException] = []
    done: list[int] = []

    def worker() -> None:
        while time.monotonic() < deadline and not failures:
            with lock:
                i = next(next_i, None)
            if i is None:
                return
            try:
                work(i)
                done.append(i)
            except BaseException as exc:  # reported by the caller
                failures.append(exc)
                return

    pool = [threading.Thread(target=worker, name=f"bench-writer/{n}") for n in range(threads)]
    start = time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    elapsed = time.perf_counter() - start
    if failures:
        raise failures[0]
    return elapsed, len(done)

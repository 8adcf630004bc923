"""The sweeper: mark-and-sweep of LogicalPorts whose pod is gone (kube-ovn's ``gc``).

Runs in the leader, once when the controller starts and then every ``gc_interval``:

* *mark*: every LogicalPort we manage (configured network, pod namespace in scope) whose
  pod UID is not in the pod cache;
* *confirm*: the cache may be stale (a new pod another replica just gave a port), so
  each candidate is checked against the API server — a live GET of its pod, or one live
  LIST of the namespace when a namespace has many candidates — and kept if its pod is
  there with the same UID;
* *sweep*: the rest are deleted with the port's UID as precondition;
* then every pod in scope is enqueued, so pods without a port (created while no replica
  was leading) get one.

Thread-safe: one sweeper runs in one thread; it reads the thread-safe caches.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable

from controllers.podport.crd import LOGICAL_PORTS
from controllers.podport.reconciler import POD_BY_UID, PODS, Scope
from manager import Conflict, JsonDict, KubeClient, NotFound, Request, SharedInformer

__all__ = ["Sweeper"]

logger = logging.getLogger(__name__)

LIST_ABOVE = 10  # candidates in one namespace above which one LIST replaces the GETs


class Sweeper:
    """Deletes orphaned LogicalPorts and re-enqueues every pod, periodically."""

    def __init__(
        self,
        client: KubeClient,
        scope: Scope,
        pods: SharedInformer,
        ports: SharedInformer,
        interval: float,
    ) -> None:
        self._client = client
        self._scope = scope
        self._pods = pods
        self._ports = ports
        self._interval = interval
        self.sweeps = 0  # completed sweeps (tests and logs)

    def run(self, stop: threading.Event, enqueue: Callable[[Request], None]) -> None:
        """Sweep now and every ``interval`` seconds until ``stop`` is set."""
        while not stop.is_set():
            try:
                deleted = self.sweep()
                queued = self.enqueue_pods(enqueue)
                self.sweeps += 1
                logger.info(
                    "swept logical ports", extra={"deleted": deleted, "pods_enqueued": queued}
                )
            except Exception:
                logger.exception("sweep of logical ports failed; next one at the interval")
            stop.wait(self._interval)

    def orphans(self) -> list[JsonDict]:
        """Ports we manage whose pod UID is not in the pod cache (the mark phase)."""
        pods = self._pods.indexer
        out = []
        for port in self._ports.indexer.list():
            if not self._scope.port(port):
                continue
            uid = str((port.get("spec") or {}).get("podUID") or "")
            if not uid or not pods.index_keys(POD_BY_UID, uid):
                out.append(port)
        return out

    def sweep(self) -> int:
        """Delete confirmed orphans; how many were deleted."""
        by_namespace: dict[str, list[JsonDict]] = defaultdict(list)
        for port in self.orphans():
            by_namespace[str(port["spec"]["podNamespace"])].append(port)
        deleted = 0
        for namespace, ports in sorted(by_namespace.items()):
            alive = self._live_uids(namespace, ports)
            for port in ports:
                if str(port["spec"].get("podUID")) in alive:
                    continue  # the pod cache is behind; the pod exists
                meta = port["metadata"]
                try:
                    self._client.delete(
                        LOGICAL_PORTS, str(meta["name"]), preconditions={"uid": meta.get("uid")}
                    )
                except (NotFound, Conflict):
                    continue
                deleted += 1
                logger.info(
                    "deleted orphaned logical port",
                    extra={
                        "port": meta["name"],
                        "pod": f"{namespace}/{port['spec'].get('podName')}",
                    },
                )
        return deleted

    def _live_uids(self, namespace: str, ports: list[JsonDict]) -> set[str]:
        """UIDs of the candidates' pods that exist, read from the API server (not the
        cache)."""
        if len(ports) > LIST_ABOVE:
            listed = self._client.list(PODS, namespace)  # resourceVersion unset: a live read
            return {str((p.get("metadata") or {}).get("uid")) for p in listed.get("items") or []}
        alive = set()
        for port in ports:
            try:
                pod = self._client.get(PODS, str(port["spec"].get("podName")), namespace)
            except NotFound:
                continue
            alive.add(str((pod.get("metadata") or {}).get("uid")))
        return alive

    def enqueue_pods(self, enqueue: Callable[[Request], None]) -> int:
        """Enqueue every cached pod in scope; how many."""
        n = 0
        for pod in self._pods.indexer.list():
            meta = pod.get("metadata") or {}
            ns = str(meta.get("namespace") or "")
            if self._scope.namespace(ns):
                enqueue(Request(ns, str(meta.get("name"))))
                n += 1
        return n

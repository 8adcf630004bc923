"""The official-client peer: ``python -m bench.peers.official_exposer --kubeconfig K ...``.

What a user would write with the official ``kubernetes`` package alone: three
``kubernetes.informer.SharedInformer`` (Deployments, Services, Ingresses in one
namespace), a de-duplicating work queue (a key queued twice before a worker takes it is
reconciled once; a key is never reconciled by two workers at once: client-go's
workqueue contract), ``--workers`` threads, and the typed client for writes
(``CoreV1Api``, ``NetworkingV1Api``, ``AppsV1Api``).

Reconcile (level-based, from the caches): for an opted-in Deployment, create its Service
and Ingress (the URL as the Ingress's ``overseer.io/exposed-url``) if the cache has none
(409 AlreadyExists counts as done), and replace them when their ports or backend differ.
Nothing is written to the Deployment. A failed reconcile is retried with exponential
back-off.

Ends on SIGTERM with ``os._exit(0)`` (the official informer's threads are daemons
blocked in reads).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from typing import Any

from kubernetes import client, config
from kubernetes.client.rest import ApiException
from kubernetes.informer import ADDED, DELETED, MODIFIED, SharedInformer

from bench.peers import desired

logger = logging.getLogger("official_exposer")
MAX_BACKOFF = 5.0  # seconds


class WorkQueue:
    """client-go's workqueue semantics: dirty set, processing set, FIFO of keys."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queue: list[str] = []
        self._dirty: set[str] = set()
        self._processing: set[str] = set()

    def add(self, key: str) -> None:
        with self._cond:
            if key in self._dirty:
                return
            self._dirty.add(key)
            if key not in self._processing:
                self._queue.append(key)
                self._cond.notify()

    def add_after(self, key: str, delay: float) -> None:
        timer = threading.Timer(delay, self.add, args=(key,))
        timer.daemon = True
        timer.start()

    def get(self) -> str:
        with self._cond:
            while not self._queue:
                self._cond.wait()
            key = self._queue.pop(0)
            self._processing.add(key)
            self._dirty.discard(key)
            return key

    def done(self, key: str) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
                self._cond.notify()


class Exposer:
    def __init__(self, api: client.ApiClient, namespace: str, domain: str) -> None:
        self.api = api
        self.namespace = namespace
        self.domain = domain
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)
        self.net = client.NetworkingV1Api(api)
        self.queue = WorkQueue()
        self.deployments = SharedInformer(self.apps.list_namespaced_deployment, namespace)
        self.services = SharedInformer(self.core.list_namespaced_service, namespace)
        self.ingresses = SharedInformer(self.net.list_namespaced_ingress, namespace)
        for event in (ADDED, MODIFIED):
            self.deployments.add_event_handler(event, self._on_deployment)
        for informer in (self.services, self.ingresses):
            informer.add_event_handler(DELETED, self._on_owned_deleted)
        self.failures: dict[str, int] = {}

    def _on_deployment(self, obj: Any) -> None:
        annotations = obj.metadata.annotations or {}
        if annotations.get(desired.EXPOSE) == "true":
            self.queue.add(f"{obj.metadata.namespace}/{obj.metadata.name}")

    def _on_owned_deleted(self, obj: Any) -> None:
        self.queue.add(f"{obj.metadata.namespace}/{obj.metadata.name}")

    def start(self) -> None:
        for informer in (self.services, self.ingresses, self.deployments):
            informer.start()

    def worker(self) -> None:
        while True:
            key = self.queue.get()
            try:
                self.reconcile(key)
                self.failures.pop(key, None)
            except Exception:
                n = self.failures.get(key, 0) + 1
                self.failures[key] = n
                logger.exception("reconcile failed: %s", key)
                self.queue.add_after(key, min(MAX_BACKOFF, 0.005 * 2**n))
            finally:
                self.queue.done(key)

    def reconcile(self, key: str) -> None:
        cached = self.deployments.cache.get_by_key(key)
        if cached is None or cached.metadata.deletion_timestamp is not None:
            return
        deployment = self.api.sanitize_for_serialization(cached)
        if not desired.opted_in(deployment) or not desired.service_ports(deployment):
            return
        ns, name = deployment["metadata"]["namespace"], deployment["metadata"]["name"]
        want_svc = desired.service(deployment)
        svc = self.services.cache.get_by_key(key)
        if svc is None:
            self._create(self.core.create_namespaced_service, ns, want_svc)
        else:
            have = self.api.sanitize_for_serialization(svc)
            if have["spec"].get("ports") != want_svc["spec"]["ports"]:
                have["spec"]["ports"] = want_svc["spec"]["ports"]
                self.core.replace_namespaced_service(name, ns, have)
        want_ing = desired.ingress(deployment, self.domain)
        ing = self.ingresses.cache.get_by_key(key)
        if ing is None:
            self._create(self.net.create_namespaced_ingress, ns, want_ing)
        else:
            have = self.api.sanitize_for_serialization(ing)
            have_url = (have["metadata"].get("annotations") or {}).get(desired.URL)
            want_url = want_ing["metadata"]["annotations"][desired.URL]
            if have["spec"].get("rules") != want_ing["spec"]["rules"] or have_url != want_url:
                have["spec"]["rules"] = want_ing["spec"]["rules"]
                have["metadata"]["annotations"] = {
                    **(have["metadata"].get("annotations") or {}),
                    desired.URL: want_url,
                }
                self.net.replace_namespaced_ingress(name, ns, have)

    @staticmethod
    def _create(create: Any, namespace: str, body: dict[str, Any]) -> None:
        try:
            create(namespace, body)
        except ApiException as exc:
            if exc.status != 409:
                raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.peers.official_exposer")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--domain", default="bench.example.test")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    api = config.new_client_from_config(config_file=args.kubeconfig)
    exposer = Exposer(api, args.namespace, args.domain)
    exposer.start()
    for n in range(args.workers):
        threading.Thread(target=exposer.worker, name=f"worker/{n}", daemon=True).start()
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    raise SystemExit(main())

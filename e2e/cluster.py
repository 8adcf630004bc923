"""Overseer replicas as pods: the e2e target when ``deploy/`` runs in a cluster (kind).

``e2e/kind.sh`` sets ``OVERSEER_E2E_TARGET=kind`` (with ``OVERSEER_TEST_KUBECONFIG``,
``OVERSEER_E2E_NAMESPACE`` and ``OVERSEER_E2E_LEASE``). There the replicas are the
Deployment's pods, and :class:`PodReplicas` plays the part :class:`e2e.processes.ReplicaSet`
plays for local processes:

* the leader is the pod whose name prefixes the Lease's ``holderIdentity``
  (``<pod name>_<random suffix>``, see ``manager.leaderelection.default_identity``);
* kill -9 is a SIGKILL of the pod's container on its kind node (``docker exec <node>
  crictl stop --timeout 0``): the process gets no chance to release the Lease, and the
  kubelet restarts the container. A force delete would not do: the kubelet still sends
  SIGTERM first. Where the node is not a docker container (not kind), it falls back to
  ``kubectl delete pod --grace-period=0 --force``;
* graceful is a plain delete: SIGTERM, the manager drains and releases the Lease;
* metrics are read over ``kubectl port-forward`` with a token of the ServiceAccount
  ``e2e-metrics-reader`` (``e2e/kind.sh`` binds it to ``overseer-metrics-reader``): they
  are secure, and the API server's pod proxy does not pass a caller's token on.

Not thread-safe: one test drives one instance.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import ssl
import subprocess
import time
import urllib.request
from typing import Any

from manager.client import KubeClient
from manager.errors import NotFound
from manager.resources import builtin

TARGET = os.environ.get("OVERSEER_E2E_TARGET", "local")
NAMESPACE = os.environ.get("OVERSEER_E2E_NAMESPACE", "overseer-system")
LEASE_NAME = os.environ.get("OVERSEER_E2E_LEASE", "overseer-leader")
SELECTOR = "app.kubernetes.io/name=overseer"

PODS = builtin("v1", "pods")
LEASES = builtin("coordination.k8s.io/v1", "leases")
DEPLOYMENTS = builtin("apps/v1", "deployments")


class PodReplicas:
    """The Overseer pods of one install, and the Lease they share."""

    def __init__(
        self,
        client: KubeClient,
        *,
        namespace: str = NAMESPACE,
        lease: str = LEASE_NAME,
        selector: str = SELECTOR,
        kubeconfig: str | None = None,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.lease = lease
        self.selector = selector
        self.kubeconfig = kubeconfig

    def pods(self) -> list[dict[str, Any]]:
        """The replicas' pods that are not being deleted, by name."""
        items = self.client.list(PODS, self.namespace, label_selector=self.selector)["items"]
        live = [p for p in items if not p["metadata"].get("deletionTimestamp")]
        return sorted(live, key=lambda p: str(p["metadata"]["name"]))

    def ready(self) -> list[str]:
        """Names of the pods whose Ready condition is True."""
        return [
            p["metadata"]["name"]
            for p in self.pods()
            if any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (p.get("status") or {}).get("conditions") or []
            )
        ]

    def holder(self) -> str:
        """The Lease's holderIdentity ("" when released or missing)."""
        try:
            lease = self.client.get(LEASES, self.lease, self.namespace)
        except NotFound:
            return ""
        return str((lease.get("spec") or {}).get("holderIdentity") or "")

    def pod_of(self, identity: str) -> str | None:
        """The pod an identity belongs to (its name is the identity's prefix)."""
        for p in self.pods():
            name = str(p["metadata"]["name"])
            if identity.startswith(f"{name}_"):
                return name
        return None

    def leader(self) -> str | None:
        """The leading pod, if the holder is one of the live pods."""
        holder = self.holder()
        return self.pod_of(holder) if holder else None

    def kill(self, pod: str) -> None:
        """kill -9: SIGKILL the pod's container on its kind node; else a force delete."""
        node = next(
            (p["spec"].get("nodeName") for p in self.pods() if p["metadata"]["name"] == pod), None
        )
        if node and shutil.which("docker"):
            script = f"crictl stop --timeout 0 $(crictl ps -q --pod $(crictl pods -q --name {pod}))"
            done = subprocess.run(
                ["docker", "exec", node, "sh", "-c", script],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
            if done.returncode == 0:
                return
        with contextlib.suppress(NotFound):
            self.client.delete(PODS, pod, self.namespace, grace_period_seconds=0)

    def terminate(self, pod: str) -> None:
        """Graceful: a plain delete (SIGTERM, then the pod's termination grace period)."""
        with contextlib.suppress(NotFound):
            self.client.delete(PODS, pod, self.namespace)

    def wait_for_new_leader(self, old_holder: str, timeout: float, step: float = 0.05) -> str:
        """The first holderIdentity that is neither empty nor ``old_holder``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            holder = self.holder()
            if holder and holder != old_holder:
                return holder
            time.sleep(step)
        raise AssertionError(f"no new leader within {timeout} s (was {old_holder!r})")

    def metrics(self, pod: str, port: int = 8080) -> str:
        """``/metrics`` of one pod: HTTPS through ``kubectl port-forward``, as the
        ServiceAccount ``e2e-metrics-reader`` (a TokenReview and SubjectAccessReview
        decide, as for Prometheus; the certificate is self-signed, so not verified)."""
        kubectl = ["kubectl"] + (["--kubeconfig", self.kubeconfig] if self.kubeconfig else [])
        token = subprocess.run(
            [*kubectl, "-n", self.namespace, "create", "token", "e2e-metrics-reader"],
            capture_output=True, text=True, check=True, timeout=30,
        ).stdout.strip()  # fmt: skip
        forward = subprocess.Popen(
            [*kubectl, "-n", self.namespace, "port-forward", f"pod/{pod}", f":{port}"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        try:
            assert forward.stdout is not None
            line = forward.stdout.readline()  # Forwarding from 127.0.0.1:NNNNN -> 8080
            match = re.search(r"127\.0\.0\.1:(\d+)", line)
            if match is None:
                raise AssertionError(f"kubectl port-forward to {pod}: {line!r}")
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            request = urllib.request.Request(
                f"https://127.0.0.1:{match.group(1)}/metrics",
                headers={"Authorization": f"Bearer {token}"},
            )
            with urllib.request.urlopen(request, timeout=30, context=context) as answer:
                return str(answer.read().decode())
        finally:
            forward.terminate()
            forward.wait(10)
            if forward.stdout is not None:
                forward.stdout.close()


def sample(metrics: str, metric_name: str, /, **labels: str) -> float | None:
    """The value of one sample in Prometheus text format (labels must all match)."""
    for line in metrics.splitlines():
        if line.startswith("#") or not line.startswith(metric_name):
            continue
        head, _, value = line.rpartition(" ")
        metric, _, label_text = head.partition("{")
        if metric != metric_name:
            continue
        found = dict(
            part.split("=", 1) for part in label_text.rstrip("}").split(",") if "=" in part
        )
        if all(found.get(k, "").strip('"') == v for k, v in labels.items()):
            return float(value)
    return None

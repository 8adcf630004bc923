"""Conformance: kubectl works against the server.

kubectl is the strictest everyday client: it reads discovery, downloads OpenAPI for
``apply`` validation, applies with strategic merge patches and watches with chunked
streams. Skipped with a message when kubectl is not installed.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed (not on PATH)")

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    app: web
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
        - name: web
          image: registry.k8s.io/pause:3.9
          ports:
            - containerPort: 8080
              name: http
"""


def _kubectl(
    kubeconfig_path: str, tmp_path: Path, *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    return subprocess.run(
        [KUBECTL, "--kubeconfig", kubeconfig_path, "--cache-dir", str(tmp_path / "cache"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _succeeded(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"kubectl {result.args[5:]} failed:\n{result.stderr}"
    return result.stdout


def test_kubectl_get_namespaces(kubeconfig_path: str, tmp_path: Path, namespace: str) -> None:
    table = _succeeded(_kubectl(kubeconfig_path, tmp_path, "get", "ns"))
    assert table.splitlines()[0].split()[0] == "NAME"
    assert namespace in [line.split()[0] for line in table.splitlines()[1:]]

    names = _succeeded(_kubectl(kubeconfig_path, tmp_path, "get", "ns", "-o", "name"))
    assert f"namespace/{namespace}" in names.split()


def test_kubectl_prints_server_side_columns(
    kubeconfig_path: str, tmp_path: Path, namespace: str, api_client: Any
) -> None:
    """kubectl asks for ``as=Table``; kube-apiserver answers with the resource's columns."""
    client.CoreV1Api(api_client).create_namespaced_config_map(
        namespace,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cols"}, "data": {"a": "1"}},
    )
    table = _succeeded(_kubectl(kubeconfig_path, tmp_path, "get", "ns"))
    assert table.splitlines()[0].split() == ["NAME", "STATUS", "AGE"]
    rows = {line.split()[0]: line.split()[1] for line in table.splitlines()[1:]}
    assert rows[namespace] == "Active"

    table = _succeeded(_kubectl(kubeconfig_path, tmp_path, "-n", namespace, "get", "cm", "cols"))
    assert table.splitlines()[0].split() == ["NAME", "DATA", "AGE"]
    assert table.splitlines()[1].split()[:2] == ["cols", "1"]


def test_kubectl_apply_deployment(kubeconfig_path: str, tmp_path: Path, namespace: str) -> None:
    manifest = tmp_path / "deployment.yaml"
    manifest.write_text(DEPLOYMENT.format(replicas=1))
    out = _succeeded(
        _kubectl(kubeconfig_path, tmp_path, "-n", namespace, "apply", "-f", str(manifest))
    )
    assert out.strip() == "deployment.apps/web created"

    shown = json.loads(
        _succeeded(
            _kubectl(
                kubeconfig_path, tmp_path, "-n", namespace, "get", "deploy", "web", "-o", "json"
            )
        )
    )
    assert shown["kind"] == "Deployment"
    assert shown["metadata"]["namespace"] == namespace
    assert shown["spec"]["replicas"] == 1
    assert shown["metadata"]["generation"] == 1
    applied = json.loads(
        shown["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
    )
    assert applied["spec"]["replicas"] == 1

    out = _succeeded(
        _kubectl(kubeconfig_path, tmp_path, "-n", namespace, "apply", "-f", str(manifest))
    )
    assert out.strip() == "deployment.apps/web unchanged"

    manifest.write_text(DEPLOYMENT.format(replicas=2))
    out = _succeeded(
        _kubectl(kubeconfig_path, tmp_path, "-n", namespace, "apply", "-f", str(manifest))
    )
    assert out.strip() == "deployment.apps/web configured"
    listed = json.loads(
        _succeeded(
            _kubectl(kubeconfig_path, tmp_path, "-n", namespace, "get", "deploy", "-o", "json")
        )
    )
    assert listed["kind"] == "List"
    web = next(i for i in listed["items"] if i["metadata"]["name"] == "web")
    assert web["spec"]["replicas"] == 2
    assert web["metadata"]["generation"] == 2
    ports = web["spec"]["template"]["spec"]["containers"][0]["ports"]
    assert ports == [{"containerPort": 8080, "name": "http", "protocol": "TCP"}]


def test_kubectl_delete_configmap(
    kubeconfig_path: str, tmp_path: Path, namespace: str, api_client: Any
) -> None:
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map(
        namespace, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bye"}}
    )
    out = _succeeded(_kubectl(kubeconfig_path, tmp_path, "-n", namespace, "delete", "cm", "bye"))
    assert out.strip() == 'configmap "bye" deleted'
    with pytest.raises(ApiException) as caught:
        core.read_namespaced_config_map("bye", namespace)
    assert caught.value.status == 404


def _read_until(
    proc: subprocess.Popen[bytes], needle: str, buffer: list[str], timeout: float
) -> bool:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while needle not in "".join(buffer):
        remaining = deadline - time.monotonic()
        if remaining <= 0 or proc.poll() is not None:
            return False
        ready, _, _ = select.select([proc.stdout], [], [], min(remaining, 0.5))
        if ready:
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                return False
            buffer.append(chunk.decode(errors="replace"))
    return True


def test_kubectl_get_watch(
    kubeconfig_path: str, tmp_path: Path, namespace: str, api_client: Any
) -> None:
    assert KUBECTL is not None
    core = client.CoreV1Api(api_client)
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "listed-first"}}
    core.create_namespaced_config_map(namespace, cm)

    proc = subprocess.Popen(
        [
            KUBECTL,
            "--kubeconfig",
            kubeconfig_path,
            "--cache-dir",
            str(tmp_path / "cache"),
            "-n",
            namespace,
            "get",
            "cm",
            "--watch",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    output: list[str] = []
    try:
        assert _read_until(proc, "listed-first", output, 30), (
            f"initial list not printed: {''.join(output)!r}"
        )
        core.create_namespaced_config_map(
            namespace,
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "watched-later"}},
        )
        assert _read_until(proc, "watched-later", output, 30), (
            f"watch event not printed: {''.join(output)!r}"
        )
    finally:
        proc.terminate()
        try:
            _, stderr = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, stderr = proc.communicate(timeout=10)
    text = "".join(output)
    assert text.splitlines()[0].split()[0] == "NAME"
    assert text.index("listed-first") < text.index("watched-later")
    assert proc.returncode is not None
    assert b"error" not in stderr.lower(), stderr.decode(errors="replace")

"""Conformance: kubectl works against the server.

kubectl is the strictest everyday client: it reads discovery, downloads OpenAPI for
``apply`` validation, applies with strategic merge patches and watches with chunked
streams. Skipped with a message when kubectl is not installed.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.integration.crdopenapi import (
    FOO,
    NO_SCHEMA,
    PRESERVE_NESTED,
    PRESERVE_ROOT,
    TIMEOUT,
    Crd,
    crd_maker,
    v3_wait_for,
)
from tests.integration.rawhttp import eventually, http

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
    kubeconfig_path: str, tmp_path: Path, *args: str, timeout: float = 60, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    return subprocess.run(
        [KUBECTL, "--kubeconfig", kubeconfig_path, "--cache-dir", str(tmp_path / "cache"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        input=stdin,
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


def test_kubectl_get_quota_prints_requests_and_limits(
    kubeconfig_path: str, tmp_path: Path, namespace: str, api_client: Any
) -> None:
    """printResourceQuota's columns (Age last since 1.33): ``used/hard`` per resource."""
    hard = {"requests.cpu": "0.5", "limits.memory": "1024Mi"}
    client.CoreV1Api(api_client).create_namespaced_resource_quota(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "q"},
            "spec": {"hard": hard},
        },
    )
    want = ["q", "requests.cpu:", "0/500m", "limits.memory:", "0/1Gi"]
    deadline = time.monotonic() + 30
    while True:  # the quota controller fills status.hard and status.used
        table = _succeeded(_kubectl(kubeconfig_path, tmp_path, "-n", namespace, "get", "quota"))
        lines = table.splitlines()
        if lines[1].split()[:5] == want or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert lines[0].split() == ["NAME", "REQUEST", "LIMIT", "AGE"]
    assert lines[1].split()[:5] == want


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


# kubectl's typed create commands send protobuf (application/vnd.kubernetes.protobuf).
CREATE_COMMANDS = [
    (["create", "configmap", "cm1", "--from-literal=a=b"], "configmaps/cm1"),
    (["create", "secret", "generic", "s1", "--from-literal=k=v"], "secrets/s1"),
    (["create", "deployment", "web", "--image=registry.k8s.io/pause:3.9", "--replicas=0"], None),
    (["create", "service", "clusterip", "svc1", "--tcp=80:8080"], "services/svc1"),
    (["create", "service", "nodeport", "np1", "--tcp=80:8080"], "services/np1"),
    (["create", "serviceaccount", "sa1"], "serviceaccounts/sa1"),
    (["create", "job", "j1", "--image=registry.k8s.io/pause:3.9"], None),
    (
        ["create", "cronjob", "cj1", "--image=registry.k8s.io/pause:3.9", "--schedule=*/5 * * * *"],
        None,
    ),
    (["create", "role", "r1", "--verb=get", "--resource=pods"], None),
    (["create", "rolebinding", "rb1", "--role=r1", "--user=someone"], None),
    (["create", "poddisruptionbudget", "pdb1", "--selector=app=x", "--min-available=1"], None),
    (["create", "quota", "q1", "--hard=pods=2,cpu=1"], None),
    (["create", "ingress", "ing1", "--rule=ing1.example.com/=svc1:80"], None),
]


@pytest.mark.parametrize(
    ("args", "path"), CREATE_COMMANDS, ids=[" ".join(a[1:3]) for a, _ in CREATE_COMMANDS]
)
def test_kubectl_typed_create(
    kubeconfig_path: str, tmp_path: Path, namespace: str, args: list[str], path: str | None
) -> None:
    out = _succeeded(_kubectl(kubeconfig_path, tmp_path, "-n", namespace, *args, "-o", "json"))
    created = json.loads(out)
    assert created["metadata"]["name"] in args
    assert created["metadata"]["namespace"] == namespace
    assert created["metadata"]["uid"]
    shown = json.loads(
        _succeeded(
            _kubectl(
                kubeconfig_path,
                tmp_path,
                "-n",
                namespace,
                "get",
                f"{created['kind'].lower()}.{created['apiVersion'].split('/')[0]}"
                if "/" in created["apiVersion"]
                else created["kind"].lower(),
                created["metadata"]["name"],
                "-o",
                "json",
            )
        )
    )
    assert shown["metadata"]["uid"] == created["metadata"]["uid"]


def test_kubectl_create_configmap_and_secret_content(
    kubeconfig_path: str, tmp_path: Path, namespace: str, api_client: Any
) -> None:
    _succeeded(
        _kubectl(
            kubeconfig_path, tmp_path, "-n", namespace, "create", "configmap", "cfg",
            "--from-literal=a=b", "--from-literal=empty=",
        )
    )  # fmt: skip
    _succeeded(
        _kubectl(
            kubeconfig_path, tmp_path, "-n", namespace, "create", "secret", "generic", "sec",
            "--from-literal=k=v",
        )
    )  # fmt: skip
    core = client.CoreV1Api(api_client)
    cfg = core.read_namespaced_config_map("cfg", namespace)
    assert cfg.data == {"a": "b", "empty": ""}
    sec = core.read_namespaced_secret("sec", namespace)
    assert sec.data == {"k": "dg=="}
    assert sec.type == "Opaque"


def test_kubectl_create_deployment_keeps_zero_replicas(
    kubeconfig_path: str, tmp_path: Path, namespace: str
) -> None:
    _succeeded(
        _kubectl(
            kubeconfig_path, tmp_path, "-n", namespace, "create", "deployment", "zero",
            "--image=registry.k8s.io/pause:3.9", "--replicas=0", "--port=8080",
        )
    )  # fmt: skip
    shown = json.loads(
        _succeeded(
            _kubectl(
                kubeconfig_path, tmp_path, "-n", namespace, "get", "deploy", "zero", "-o", "json"
            )
        )
    )
    assert shown["spec"]["replicas"] == 0
    container = shown["spec"]["template"]["spec"]["containers"][0]
    assert container["ports"] == [{"containerPort": 8080, "protocol": "TCP"}]
    assert shown["spec"]["selector"] == {"matchLabels": {"app": "zero"}}


def test_kubectl_create_namespace(kubeconfig_path: str, tmp_path: Path, api_client: Any) -> None:
    name = f"ovs-kubectl-{uuid.uuid4().hex[:8]}"
    try:
        out = _succeeded(_kubectl(kubeconfig_path, tmp_path, "create", "namespace", name))
        assert out.strip() == f"namespace/{name} created"
        ns = client.CoreV1Api(api_client).read_namespace(name)
        assert ns.status.phase == "Active"
    finally:
        _kubectl(kubeconfig_path, tmp_path, "delete", "namespace", name, "--wait=false")


def test_kubectl_explain_reads_openapi_v3(kubeconfig_path: str, tmp_path: Path) -> None:
    out = _succeeded(_kubectl(kubeconfig_path, tmp_path, "explain", "deployment.spec.replicas"))
    assert "KIND:       Deployment" in out
    assert "replicas" in out
    assert "<integer>" in out
    out = _succeeded(_kubectl(kubeconfig_path, tmp_path, "explain", "pods.spec.containers"))
    assert "image\t<string>" in out


def test_kubectl_explain_shows_what_1_36_documents(kubeconfig_path: str, tmp_path: Path) -> None:
    """Descriptions, -required-, enums and IntOrString, as kube-apiserver 1.36's
    OpenAPI v3 documents give them to kubectl explain."""
    out = _succeeded(_kubectl(kubeconfig_path, tmp_path, "explain", "deployment"))
    assert "Deployment enables declarative updates for Pods and ReplicaSets." in out
    out = _succeeded(_kubectl(kubeconfig_path, tmp_path, "explain", "deployment.spec"))
    assert "DeploymentSpec is the specification of the desired behavior of the" in out
    assert "selector\t<LabelSelector> -required-" in out
    assert "template\t<PodTemplateSpec> -required-" in out
    assert "replicas\t<integer>\n    Number of desired pods." in out
    assert "paused\t<boolean>\n" in out  # optional: no marker
    out = _succeeded(
        _kubectl(kubeconfig_path, tmp_path, "explain", "deployment.spec.strategy.rollingUpdate")
    )
    assert "maxSurge\t<IntOrString>" in out
    assert "maxUnavailable\t<IntOrString>" in out
    out = _succeeded(_kubectl(kubeconfig_path, tmp_path, "explain", "pods.spec.containers"))
    assert "name\t<string> -required-" in out
    assert "imagePullPolicy\t<string>\n  enum: Always, IfNotPresent, Never" in out
    assert '- `"Never"` means that kubelet never pulls an image' in out
    out = _succeeded(
        _kubectl(kubeconfig_path, tmp_path, "explain", "pods.spec.containers.resources")
    )
    assert "limits\t<map[string]Quantity>" in out
    out = _succeeded(_kubectl(kubeconfig_path, tmp_path, "explain", "services.spec.ports"))
    assert "targetPort\t<IntOrString>" in out
    assert "port\t<integer> -required-" in out


# --- custom resources: the CustomResourcePublishOpenAPI conformance specs --------------


def _published(api_client: Any, crd: Crd) -> None:
    """Wait until kubectl can find the CRD's kind: discovery lists it and its schema is
    in the group-version's OpenAPI v3 document (kube publishes both asynchronously)."""

    def discovered() -> bool:
        listed = http(api_client, "GET", f"/apis/{crd.group}/v1")
        return listed.status == 200 and crd.plural in [r["name"] for r in listed.body["resources"]]

    eventually(discovered, TIMEOUT, f"{crd.plural} in discovery")
    v3_wait_for(api_client, crd.group, "v1", crd.definition("v1"))


def _explained(kubeconfig_path: str, tmp_path: Path, what: str, pattern: str) -> None:
    """verifyKubectlExplain: ``kubectl explain what`` succeeds and matches ``pattern``."""
    out = _succeeded(_kubectl(kubeconfig_path, tmp_path, "explain", what))
    assert re.search(pattern, out), f"kubectl explain {what}:\n{out}\ndoes not match {pattern}"


def test_kubectl_explain_custom_resource(
    kubeconfig_path: str, tmp_path: Path, api_client: Any
) -> None:
    """The patterns of "works for CRD with validation schema"."""
    with crd_maker(api_client) as make:
        crd = make(FOO, "v1")
        _published(api_client, crd)
        _explained(
            kubeconfig_path,
            tmp_path,
            crd.plural,
            r"(?s)DESCRIPTION:.*Foo CRD for Testing.*FIELDS:.*apiVersion.*<string>.*"
            r"APIVersion defines.*spec.*<Object>.*Specification of Foo",
        )
        _explained(
            kubeconfig_path,
            tmp_path,
            f"{crd.plural}.metadata",
            r"(?s)DESCRIPTION:.*Standard object's metadata.*FIELDS:.*creationTimestamp.*"
            r"<string>.*CreationTimestamp is a timestamp",
        )
        _explained(
            kubeconfig_path,
            tmp_path,
            f"{crd.plural}.spec",
            r"(?s)DESCRIPTION:.*Specification of Foo.*FIELDS:.*bars.*<\[\]Object>.*"
            r"List of Bars and their specs",
        )
        _explained(
            kubeconfig_path,
            tmp_path,
            f"{crd.plural}.spec.bars",
            r"(?s)(FIELD|RESOURCE):.*bars.*<\[\]Object>.*DESCRIPTION:.*List of Bars and their "
            r"specs.*FIELDS:.*bazs.*<\[\]string>.*List of Bazs.*name.*<string>.*Name of Bar",
        )
        missing = _kubectl(kubeconfig_path, tmp_path, "explain", f"{crd.plural}.spec.bars2")
        assert missing.returncode != 0
        assert 'field "bars2" does not exist' in missing.stderr


@pytest.mark.parametrize(
    ("schema", "pattern"),
    [
        (NO_SCHEMA, r"(?s)DESCRIPTION:.*<empty>"),
        (PRESERVE_ROOT, r"(?s)KIND:.*{kind}"),
        (
            PRESERVE_NESTED,
            r"(?s)DESCRIPTION:.*preserve-unknown-properties in nested field for Testing",
        ),
    ],
    ids=["without-schema", "preserving-at-root", "preserving-nested"],
)
def test_kubectl_explain_custom_resource_preserving_unknown_fields(
    kubeconfig_path: str, tmp_path: Path, api_client: Any, schema: dict[str, Any], pattern: str
) -> None:
    with crd_maker(api_client) as make:
        crd = make(schema, "v1")
        _published(api_client, crd)
        _explained(kubeconfig_path, tmp_path, crd.plural, pattern.format(kind=crd.kind))


def test_kubectl_validates_custom_resources(
    kubeconfig_path: str, tmp_path: Path, namespace: str, api_client: Any
) -> None:
    """create and apply of "works for CRD with validation schema": kubectl validates
    (server-side, since the OpenAPI v3 document says the server takes
    ``fieldValidation``)."""
    with crd_maker(api_client) as make:
        crd = make(FOO, "v1")
        _published(api_client, crd)
        meta = {"kind": crd.kind, "apiVersion": f"{crd.group}/v1", "metadata": {"name": "test-foo"}}

        def run(verb: str, spec: dict[str, Any]) -> subprocess.CompletedProcess[str]:
            body = json.dumps({**meta, "spec": spec})
            return _kubectl(kubeconfig_path, tmp_path, "-n", namespace, verb, "-f", "-", stdin=body)

        for verb in ("create", "apply"):
            _succeeded(run(verb, {"bars": [{"name": "test-bar"}]}))
            _succeeded(
                _kubectl(
                    kubeconfig_path, tmp_path, "-n", namespace, "delete", crd.plural, "test-foo"
                )
            )
        bad_enum = run("create", {"bars": [{"name": "test-bar", "feeling": "NonExistentValue"}]})
        assert 'Unsupported value: "NonExistentValue"' in bad_enum.stderr
        for verb in ("create", "apply"):
            unknown = run(verb, {"foo": True})
            assert (
                'unknown field "spec.foo"' in unknown.stderr
                or 'unknown field "foo"' in unknown.stderr
            )
            no_name = run(verb, {"bars": [{"age": "10"}]})
            assert "spec.bars[0].name: Required value" in no_name.stderr or (
                'missing required field "name"' in no_name.stderr
            )

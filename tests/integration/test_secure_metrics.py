"""Secure metrics against an API server that authenticates tokens and enforces RBAC (the
kit's local server has RBAC on; a real cluster with ``OVERSEER_TEST_KUBECONFIG``): the
manager runs as a ServiceAccount holding exactly what ``overseer rbac`` generates, serves
``/metrics`` over TLS (a self-signed certificate made at start), and answers 401 without
a token or with an unknown one, 403 to a token whose user lacks the reader ClusterRole,
and the metrics once ``<name>-metrics-reader`` is bound; the z-pages need
``<name>-status-reader``."""

from __future__ import annotations

import contextlib
import hashlib
import ssl
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from manager import KubeClient, Manager, PluginContext, Request, Result, builtin
from manager.errors import NotFound
from manager.rbac import RbacOptions, render
from manager.testing import eventually, run_plugin
from manager.testing.serviceaccount import service_account_kubeconfig

CONFIGMAPS = builtin("v1", "configmaps")
ACCOUNTS = builtin("v1", "serviceaccounts")
CLUSTER_ROLES = builtin("rbac.authorization.k8s.io/v1", "clusterroles")
CLUSTER_ROLE_BINDINGS = builtin("rbac.authorization.k8s.io/v1", "clusterrolebindings")
ROLES = builtin("rbac.authorization.k8s.io/v1", "roles")
ROLE_BINDINGS = builtin("rbac.authorization.k8s.io/v1", "rolebindings")
KINDS = {
    "ClusterRole": CLUSTER_ROLES,
    "ClusterRoleBinding": CLUSTER_ROLE_BINDINGS,
    "Role": ROLES,
    "RoleBinding": ROLE_BINDINGS,
}
READS_CONFIGMAPS = [
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}
]


@dataclass(frozen=True, kw_only=True, slots=True)
class WatcherConfig:
    pass


class Noop:
    def reconcile(self, request: Request) -> Result:
        return Result()


class WatcherPlugin:
    """Watches ConfigMaps; declares what it reads (``rbac_rules``)."""

    config_class = WatcherConfig

    def setup(self, mgr: Manager, ctx: PluginContext[WatcherConfig]) -> None:
        ctx.controller(Noop()).for_(CONFIGMAPS).complete()


@pytest.fixture
def cluster_objects(kube_client: KubeClient) -> Iterator[list[tuple[Any, str]]]:
    """Cluster-scoped objects a test makes: deleted after it."""
    made: list[tuple[Any, str]] = []
    yield made
    for resource, name in reversed(made):
        with contextlib.suppress(NotFound):
            kube_client.delete(resource, name)


def _token(client: KubeClient, namespace: str, account: str) -> str:
    answer = client.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
        body={
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        },
        idempotent=False,
    )
    return str(answer["status"]["token"])


def _get(url: str, token: str | None = None) -> tuple[int, str, bytes]:
    """(status, content type, body) of a GET over TLS without verifying the certificate
    (self-signed); the peer certificate's SHA-256 is checked by the test separately."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as answer:
            return answer.status, answer.headers["Content-Type"], answer.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.headers["Content-Type"], exc.read()


def _peer_sha256(url: str) -> str:
    host, port = url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
    pem = ssl.get_server_certificate((host, int(port)))
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem)).hexdigest()


def _manager_account(
    kube_client: KubeClient,
    *,
    kubeconfig_path: str,
    namespace: str,
    name: str,
    tmp_path: Path,
    cluster_objects: list[tuple[Any, str]],
    review_rules: bool,
) -> Path:
    """A ServiceAccount holding what `overseer rbac` prints for this controller (with or
    without the secure metrics rules); its kubeconfig."""
    kube_client.create(ACCOUNTS, {"metadata": {"name": name}}, namespace)
    generated = render(
        [("watcher", READS_CONFIGMAPS)],
        RbacOptions(
            name=name, namespace=namespace, leader_election=False, metrics_secure=review_rules
        ),
    )
    for doc in (d for d in yaml.safe_load_all(generated) if d):
        resource = KINDS[doc["kind"]]
        made = kube_client.create(resource, doc, doc["metadata"].get("namespace"))
        if not resource.namespaced:
            cluster_objects.append((resource, made["metadata"]["name"]))
    return service_account_kubeconfig(kubeconfig_path, namespace, name, tmp_path / name)


def test_without_the_review_rules_no_one_gets_the_metrics(
    kubeconfig_path: str,
    kube_client: KubeClient,
    namespace: str,
    tmp_path: Path,
    cluster_objects: list[tuple[Any, str]],
) -> None:
    """The tokenreviews/subjectaccessreviews rules are needed: a manager without them
    cannot check anyone, so even a caller with the reader role is refused."""
    name = f"ovs-{uuid.uuid4().hex[:8]}"
    manager_kubeconfig = _manager_account(
        kube_client,
        kubeconfig_path=kubeconfig_path,
        namespace=namespace,
        name=name,
        tmp_path=tmp_path,
        cluster_objects=cluster_objects,
        review_rules=False,
    )
    kube_client.create(ACCOUNTS, {"metadata": {"name": "scraper"}}, namespace)
    reader = {
        "metadata": {"name": f"{name}-reader"},
        "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
    }
    kube_client.create(CLUSTER_ROLES, reader)
    cluster_objects.append((CLUSTER_ROLES, f"{name}-reader"))
    kube_client.create(
        CLUSTER_ROLE_BINDINGS,
        {
            "metadata": {"name": f"{name}-reader"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": f"{name}-reader",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "scraper", "namespace": namespace}],
        },
    )
    cluster_objects.append((CLUSTER_ROLE_BINDINGS, f"{name}-reader"))
    token = _token(kube_client, namespace, "scraper")
    with run_plugin(
        WatcherPlugin,
        manager_kubeconfig,
        {},
        name="watcher",
        watch_namespace=namespace,
        config={"metrics": {"secure": True, "authCacheSeconds": 0}},
        metrics=True,
        rbac=False,  # the manager's ServiceAccount is made above
    ) as running:
        assert running.metrics_url is not None
        # the TokenReview is forbidden to the manager: the caller cannot be authenticated
        assert _get(running.metrics_url, token)[:3] == (
            401,
            "text/plain; charset=utf-8",
            b"Unauthorized\n",
        )


def test_metrics_need_a_token_the_api_server_knows_and_the_reader_role(
    kubeconfig_path: str,
    kube_client: KubeClient,
    namespace: str,
    tmp_path: Path,
    cluster_objects: list[tuple[Any, str]],
) -> None:
    name = f"ovs-{uuid.uuid4().hex[:8]}"  # cluster-scoped names of this test's own
    # The manager's identity: a ServiceAccount with exactly what `overseer rbac` prints
    # for this controller (its rules, the event recorder's, the secure metrics reviews).
    manager_kubeconfig = _manager_account(
        kube_client,
        kubeconfig_path=kubeconfig_path,
        namespace=namespace,
        name=name,
        tmp_path=tmp_path,
        cluster_objects=cluster_objects,
        review_rules=True,
    )
    # The caller: a ServiceAccount bound to nothing yet.
    kube_client.create(ACCOUNTS, {"metadata": {"name": "scraper"}}, namespace)
    token = _token(kube_client, namespace, "scraper")
    config = {"metrics": {"secure": True, "authCacheSeconds": 0.5}}
    with run_plugin(
        WatcherPlugin,
        manager_kubeconfig,
        {},
        name="watcher",
        watch_namespace=namespace,
        config=config,
        metrics=True,
        rbac=False,  # the manager's ServiceAccount is made above
    ) as running:
        url = running.metrics_url
        assert url is not None and url.startswith("https://127.0.0.1:")
        cert = running.manager.serving_cert
        assert cert is not None and cert.self_signed
        assert _peer_sha256(url) == cert.fingerprint

        # no token, a malformed header, a token nobody issued: 401
        assert _get(url) == (401, "text/plain; charset=utf-8", b"Unauthorized\n")
        assert _get(url, "not-a-token-anyone-issued")[:1] == (401,)
        # a known token whose user may not GET /metrics: 403, kube-rbac-proxy's text
        who = f"system:serviceaccount:{namespace}:scraper"
        status, ctype, body = _get(url, token)
        assert (status, ctype) == (403, "text/plain; charset=utf-8"), body
        assert body == f"Forbidden (user={who}, verb=get, resource=, subresource=)\n".encode()

        binding = {
            "metadata": {"name": f"{name}-scraper"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": f"{name}-metrics-reader",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "scraper", "namespace": namespace}],
        }
        kube_client.create(CLUSTER_ROLE_BINDINGS, binding)
        cluster_objects.append((CLUSTER_ROLE_BINDINGS, f"{name}-scraper"))

        def served(path: str) -> bytes:
            status, _, body = _get(f"{base}{path}", token)
            assert status == 200, body
            return body

        base = url.removesuffix("/metrics")
        metrics = eventually(lambda: served("/metrics")).decode()  # the denial's cache expired
        assert "controller_runtime_reconcile_total" in metrics
        # the reader role is /metrics only: the z-pages need the status reader
        assert _get(f"{base}/statusz", token)[0] == 403
        binding["metadata"]["name"] = f"{name}-scraper-status"
        binding["roleRef"]["name"] = f"{name}-status-reader"  # type: ignore[index]
        kube_client.create(CLUSTER_ROLE_BINDINGS, binding)
        cluster_objects.append((CLUSTER_ROLE_BINDINGS, f"{name}-scraper-status"))
        assert eventually(lambda: served("/statusz")).startswith(b"overseer statusz\n")
        assert _get(f"{base}/flagz", token)[0] == 200
        assert _get(f"{base}/flagz")[0] == 401

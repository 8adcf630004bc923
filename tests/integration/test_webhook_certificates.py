"""Managed webhook certificates between two replicas and an API server (the local one, or
a real cluster: ``OVERSEER_TEST_KUBECONFIG``): the leader makes the Secret and puts its
bundle into a ValidatingWebhookConfiguration this test installed (scoped so that it can
never match a request: an object selector on a label nothing has, failure policy
Ignore; deleted afterwards), the standby serves the same certificate, and a CA rotation
forced by short lifetimes reaches both replicas while a client that trusts whatever
``caBundle`` the configuration holds, as an API server does, never fails a handshake.
And what ``overseer webhooks`` prints passes the API server's validation (dry run)."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import http.client
import json
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from manager import (
    Admission,
    Conversion,
    Manager,
    ManagerOptions,
    MatchCondition,
    MutatingWebhook,
    PluginContext,
    Rule,
    Spoke,
    ValidatingWebhook,
)
from manager.client import KubeClient
from manager.config import parse
from manager.errors import NotFound
from manager.plugins import NoSettings
from manager.resources import builtin
from manager.webhook.manifests import (
    WebhookManifests,
    configurations,
    conversion_patches,
    declared_webhooks,
)
from manager.webhook.rotation import read_secret
from manager.webhook.server import ManagedCertificatesOptions, WebhookServerOptions

SECRETS = builtin("v1", "secrets")
VALIDATING = builtin("admissionregistration.k8s.io/v1", "validatingwebhookconfigurations")
CRDS = builtin("apiextensions.k8s.io/v1", "customresourcedefinitions")
SERVICE = "overseer-webhook"
OVERLAP = 0.4  # seconds: the new CA's bundle is everywhere this long before it is needed
LAG = 0.15  # seconds an API server's view of the configuration may lag (< OVERLAP)
SECRET = "overseer-webhook-tls"


def _hook(marker: str) -> ValidatingWebhook:
    return ValidatingWebhook(
        name="never.certificates.overseer.io",
        rules=[
            Rule(
                operations=["CREATE"],
                resources=["configmaps"],
                api_groups=[""],
                api_versions=["v1"],
                scope="Namespaced",
            )
        ],
        handler=lambda req: Admission.allow(),
        failure_policy="Ignore",
        timeout_seconds=1,
        object_selector={"matchLabels": {"overseer.io/certificates-test": marker}},
    )


@pytest.fixture
def configuration(
    kube_client: KubeClient, namespace: str
) -> Iterator[tuple[str, ValidatingWebhook]]:
    """A ValidatingWebhookConfiguration of this test's own, which nothing ever matches."""
    marker = uuid.uuid4().hex[:12]
    hook = _hook(marker)
    name = f"overseer-test-{marker}"
    service = {"name": SERVICE, "namespace": namespace, "port": 443}
    kube_client.create(
        VALIDATING,
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [hook.entry({"service": service})],
        },
    )
    try:
        yield name, hook
    finally:
        with contextlib.suppress(NotFound):
            kube_client.delete(VALIDATING, name)


def _options(namespace: str, configuration: str) -> ManagerOptions:
    return ManagerOptions(
        leader_election=True,
        leader_election_namespace=namespace,
        lease_duration=2.0,
        renew_deadline=1.5,
        retry_period=0.2,
        metrics_bind_address="0",
        health_probe_bind_address="127.0.0.1:0",
        graceful_shutdown_timeout=5.0,
        webhook=WebhookServerOptions(
            host="127.0.0.1",
            port=0,
            shutdown_delay=0.0,
            namespace=namespace,
            configuration_name=configuration,
            managed=ManagedCertificatesOptions(
                secret_name=SECRET,
                # the CA is due 1.5 s after it is made: a whole rotation in about 2 s
                ca_validity=3.0,
                cert_validity=3.0,
                renew_before=0.5,
                overlap=OVERLAP,
                check_interval=5.0,
            ),
        ),
    )


def _fingerprint(address: tuple[str, int], bundle: str, name: str) -> str:
    """Handshake as an API server does (the bundle, the Service's name); the served
    certificate's SHA-256."""
    context = ssl.create_default_context(cadata=bundle)
    with (
        socket.create_connection(address, timeout=3) as raw,
        context.wrap_socket(raw, server_hostname=name) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return hashlib.sha256(der).hexdigest()


def _review_connection(mgr: Manager, bundle: str, name: str) -> http.client.HTTPSConnection:
    address = mgr.webhook_address
    assert address is not None
    context = ssl.create_default_context(cadata=bundle)
    context.check_hostname = False  # dialed by address; the name was checked above
    return http.client.HTTPSConnection(address[0], address[1], context=context, timeout=5)


def _ask(conn: http.client.HTTPSConnection, hook: ValidatingWebhook) -> Any:
    """One AdmissionReview on ``conn`` (kept alive); whether it was allowed."""
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "operation": "CREATE",
            "namespace": "ns",
            "name": "cm",
            "userInfo": {"username": "alice"},
            "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}},
        },
    }
    conn.request("POST", hook.served_path, json.dumps(review), {"Content-Type": "application/json"})
    response = conn.getresponse()
    body = json.loads(response.read())
    assert response.status == 200, body
    return body["response"]["allowed"]


def _ready(mgr: Manager) -> bool:
    address = mgr.health_probe_address
    if address is None:
        return False
    try:
        with urllib.request.urlopen(f"http://{address[0]}:{address[1]}/readyz", timeout=2) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _wait(what: str, check: Any, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.02)


def _ca_bundle(client: KubeClient, name: str) -> str:
    hooks = client.get(VALIDATING, name)["webhooks"]
    return base64.b64decode(hooks[0]["clientConfig"].get("caBundle") or "").decode()


def test_two_replicas_share_one_managed_certificate_through_a_ca_rotation(
    kubeconfig_path: str,
    kube_client: KubeClient,
    namespace: str,
    configuration: tuple[str, ValidatingWebhook],
) -> None:
    name, hook = configuration
    dns_name = f"{SERVICE}.{namespace}.svc"
    managers: list[Manager] = []
    clients: list[KubeClient] = []
    threads: list[threading.Thread] = []
    stop = threading.Event()
    rcs: list[int] = []
    try:
        for i in range(2):
            client = KubeClient.from_kubeconfig(kubeconfig_path)
            clients.append(client)
            options = dataclasses.replace(_options(namespace, name), identity=f"replica-{i}")
            mgr = Manager(client, options)
            mgr.webhook(hook, owner="test")
            managers.append(mgr)
            thread = threading.Thread(
                target=lambda m=mgr: rcs.append(m.run(stop)), name=f"test/replica-{i}"
            )
            thread.start()
            threads.append(thread)
        leader = _wait("a leader", lambda: next((m for m in managers if m.is_leader()), None))
        standby = next(m for m in managers if m is not leader)
        # the leader made the Secret and put its bundle into the configuration
        secret = read_secret(_wait("the Secret", lambda: _get(kube_client, namespace)))
        first_ca = secret.bundle[0].fingerprint
        _wait("the caBundle", lambda: _ca_bundle(kube_client, name) != "")
        # both replicas ready, serving the one certificate the configuration's bundle verifies
        _wait("both replicas ready", lambda: all(_ready(m) for m in managers))
        addresses = [m.webhook_address for m in (leader, standby)]
        assert None not in addresses
        bundle = _ca_bundle(kube_client, name)
        served = {_fingerprint(a, bundle, dns_name) for a in addresses}  # type: ignore[arg-type]
        assert len(served) == 1, "the replicas serve different certificates"
        # a connection kept alive from before the rotation (kube-apiserver keeps them)
        kept = _review_connection(standby, bundle, dns_name)
        assert _ask(kept, hook) is True
        # the rotation: API servers dial both replicas over and over, one with the
        # caBundle the configuration has now, one with what it had LAG seconds ago (an
        # API server whose informer lags); not one handshake may fail
        failures: list[str] = []
        seen: list[set[str]] = [set(), set()]
        done = threading.Event()
        history: list[tuple[float, str]] = []

        def dial() -> None:
            while not done.is_set():
                now = time.monotonic()
                history.append((now, _ca_bundle(kube_client, name)))
                lagging = next(
                    b for t, b in reversed(history) if t <= now - LAG or t == history[0][0]
                )
                for i, address in enumerate(addresses):
                    for view, bundle in (("current", history[-1][1]), ("lagging", lagging)):
                        try:
                            seen[i].add(_fingerprint(address, bundle, dns_name))  # type: ignore[arg-type]
                        except (ssl.SSLError, OSError) as exc:
                            failures.append(f"replica {i}, {view} caBundle: {exc}")

        dialer = threading.Thread(target=dial, name="test/api-server")
        dialer.start()
        try:

            def rotated() -> bool:
                now = read_secret(_get(kube_client, namespace) or {})
                return (
                    now.ca is not None
                    and len(now.bundle) == 1
                    and now.bundle[0].fingerprint != first_ca
                    and now.issuer == now.ca.certificate
                    and all(now.leaf.fingerprint in s for s in seen)
                )

            _wait("a CA rotation served by both replicas", rotated, timeout=30)
        finally:
            done.set()
            dialer.join(10)
        assert not failures, failures[:5]
        assert all(len(s) >= 2 for s in seen), "a replica served one certificate throughout"
        # ... is still answered on the same connection: the rotation dropped nothing
        sock = kept.sock
        assert _ask(kept, hook) is True
        assert kept.sock is sock
        kept.close()
        assert all(_ready(m) for m in managers)
    finally:
        stop.set()
        for thread in threads:
            thread.join(20)
        for client in clients:
            client.close()
    assert rcs == [0, 0]


def _get(client: KubeClient, namespace: str) -> Any:
    try:
        return client.get(SECRETS, SECRET, namespace)
    except NotFound:
        return None


class _WidgetsPlugin:
    """Webhooks of both kinds and a conversion, as a plugin declares them."""

    def __init__(self, group: str) -> None:
        self.group = group

    def setup(self, mgr: Manager, ctx: PluginContext[Any]) -> None:
        rules = [
            Rule(
                operations=["CREATE", "UPDATE"],
                resources=["widgets", "widgets/status"],
                api_groups=[self.group],
                api_versions=["v1"],
                scope="Namespaced",
            )
        ]
        ctx.webhook(
            ValidatingWebhook(
                name=f"validate.{self.group}",
                rules=rules,
                handler=lambda req: Admission.allow(),
                match_conditions=[MatchCondition("not-admin", "request.userInfo.username != 'x'")],
            )
        )
        ctx.webhook(
            MutatingWebhook(
                name=f"default.{self.group}",
                rules=rules,
                handler=lambda req: req.object or {},
                reinvocation_policy="IfNeeded",
            )
        )
        ctx.conversion(
            Conversion(
                crd=f"widgets.{self.group}",
                hub="v1",
                spokes={"v2": Spoke(to_hub=dict, from_hub=dict)},
            )
        )


def _dry_run(client: KubeClient, method: str, path: str, body: Any, content_type: str) -> Any:
    return client.request(
        method,
        path,
        query={"dryRun": "All"},
        body=body,
        content_type=content_type,
        idempotent=True,  # a dry run stores nothing
    )


def test_what_overseer_webhooks_prints_is_accepted_by_the_api_server(
    kube_client: KubeClient, namespace: str
) -> None:
    """Server-side validation with ``dryRun=All`` (nothing is stored: safe on a real
    cluster): the configurations as created, the conversion patch on a real CRD."""
    group = f"t{uuid.uuid4().hex[:8]}.overseer-test.io"
    plugin = _WidgetsPlugin(group)
    config, controllers = parse({}, {"widgets": NoSettings})
    declared = declared_webhooks({"widgets": plugin}, config, controllers)
    options = WebhookManifests(name=f"overseer-test-{group.partition('.')[0]}", namespace=namespace)
    docs = configurations(declared, options)
    assert [d["kind"] for d in docs] == [
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    ]
    for doc in docs:
        plural = doc["kind"].lower() + "s"
        answer = _dry_run(
            kube_client,
            "POST",
            f"/apis/admissionregistration.k8s.io/v1/{plural}",
            doc,
            "application/json",
        )
        assert answer["metadata"]["name"] == options.name
        stored = answer["webhooks"][0]
        assert stored["clientConfig"]["service"] == doc["webhooks"][0]["clientConfig"]["service"]
    crd_name = f"widgets.{group}"
    version = {"served": True, "storage": True, "schema": {"openAPIV3Schema": {"type": "object"}}}
    kube_client.create(
        CRDS,
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": crd_name},
            "spec": {
                "group": group,
                "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [
                    {"name": "v1", **version},
                    {"name": "v2", **version, "storage": False},
                ],
            },
        },
    )
    try:
        (patch,) = conversion_patches(declared, options)
        assert patch["metadata"]["name"] == crd_name
        answer = _dry_run(
            kube_client,
            "PATCH",
            f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd_name}",
            {"spec": patch["spec"]},
            "application/merge-patch+json",
        )
        webhook = answer["spec"]["conversion"]["webhook"]
        assert answer["spec"]["conversion"]["strategy"] == "Webhook"
        assert webhook["clientConfig"]["service"]["path"] == f"/convert/{crd_name}"
        # dry run: the CRD itself is unchanged
        stored = kube_client.get(CRDS, crd_name)
        assert (stored["spec"].get("conversion") or {}).get("strategy", "None") == "None"
    finally:
        kube_client.delete(CRDS, crd_name)


class _ConfigMapsPlugin:
    def setup(self, mgr: Manager, ctx: PluginContext[Any]) -> None:
        ctx.webhook(_hook(uuid.uuid4().hex[:12]))


def test_managed_certificates_in_the_test_kit_under_the_rbac_overseer_rbac_generates(
    kubeconfig_path: str, kube_client: KubeClient, namespace: str
) -> None:
    """The kit runs the manager as a ServiceAccount bound to exactly what ``overseer
    rbac`` prints (the Role on the Secret by name, create on Secrets): the leader makes
    the Secret and the webhook answers over a certificate its bundle verifies."""
    from manager.testing import run_plugin

    config = {"webhooks": {"certificates": "managed", "namespace": namespace}}
    with run_plugin(
        _ConfigMapsPlugin, kubeconfig_path, name="configmaps", config=config
    ) as running:
        url = running.webhook_url
        assert url is not None
        secret = read_secret(kube_client.get(SECRETS, SECRET, namespace))
        assert running.webhook_ca == secret.bundle_pem.decode()
        host, _, port = url.removeprefix("https://").rpartition(":")
        served = _fingerprint((host, int(port)), running.webhook_ca, f"{SERVICE}.{namespace}.svc")
        assert served == secret.leaf.fingerprint

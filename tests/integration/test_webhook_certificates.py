"""Managed webhook certificates between two replicas and an API server (the local one, or
a real cluster: ``OVERSEER_TEST_KUBECONFIG``): the leader makes the Secret and puts its
bundle into a ValidatingWebhookConfiguration this test installed (scoped so that it can
never match a request: an object selector on a label nothing has, failure policy
Ignore; deleted afterwards), the standby serves the same certificate, and a CA rotation
forced by short lifetimes reaches both replicas while a client that trusts whatever
``caBundle`` the configuration holds, as an API server does, never fails a handshake."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
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

from manager import Admission, Manager, ManagerOptions, Rule, ValidatingWebhook
from manager.client import KubeClient
from manager.errors import NotFound
from manager.resources import builtin
from manager.webhook.rotation import read_secret
from manager.webhook.server import ManagedCertificatesOptions, WebhookServerOptions

SECRETS = builtin("v1", "secrets")
VALIDATING = builtin("admissionregistration.k8s.io/v1", "validatingwebhookconfigurations")
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

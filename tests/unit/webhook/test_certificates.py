"""Managed webhook certificates without an API server: what a replica serves from each
version of the Secret (a rotated one taken, a corrupted one refused with the previous
kept), the leader's rounds against an in-memory store with an injected time (the Secret
made, its bundle put into the configurations and CRDs, a CA rotation held back while a
configuration lacks the new bundle), and the configuration that turns it on."""

from __future__ import annotations

import base64
import copy
import datetime
import logging
from typing import Any

import pytest

from manager.config import ConfigError, manager_options, parse
from manager.errors import Conflict, NotFound
from manager.resources import Resource
from manager.servingcert import ServingCertError
from manager.webhook import Admission, Conversion, Rule, Spoke, ValidatingWebhook
from manager.webhook.certificates import (
    CRDS,
    SECRETS,
    VALIDATING,
    CertificateRotator,
    ManagedCertificate,
    inject_ca_bundle,
)
from manager.webhook.metrics import CERT_READ_ERRORS
from manager.webhook.rotation import (
    TLS_KEY,
    RotationPolicy,
    observe,
    plan,
    read_secret,
    secret_body,
    service_names,
)

T0 = datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)
NAMES = service_names("overseer-webhook", "ns")
POLICY = RotationPolicy(
    ca_validity=datetime.timedelta(days=300),
    cert_validity=datetime.timedelta(days=30),
    overlap=datetime.timedelta(minutes=10),
)
HOOK = ValidatingWebhook(
    name="check.widgets.example.com",
    rules=[
        Rule(
            operations=["CREATE"],
            resources=["widgets"],
            api_groups=["example.com"],
            api_versions=["v1"],
        )
    ],
    handler=lambda req: Admission.allow(),
)
CONVERSION = Conversion(
    crd="widgets.example.com",
    hub="v2",
    spokes={"v1": Spoke(to_hub=lambda o: o, from_hub=lambda o: o)},
)


def _secret(
    version: str, existing: dict[str, Any] | None = None, *, now: datetime.datetime = T0
) -> dict[str, Any]:
    """A Secret the leader would write (renewed from ``existing`` when given)."""
    current = observe(existing, now)
    step = plan(current, now=now, names=NAMES, policy=POLICY, injected_at=now)
    if existing is not None:  # force a renewal: the certificate is due
        found = read_secret(existing)
        due = POLICY.renew_at(found.leaf)
        step = plan(found, now=due, names=NAMES, policy=POLICY, injected_at=now)
        assert step.action == "issue"
    body = secret_body(step, name="tls", namespace="ns", labels={}, existing=existing)
    body["metadata"]["resourceVersion"] = version
    return body


def _certificate() -> ManagedCertificate:
    return ManagedCertificate(secret="tls", namespace="ns", service="overseer-webhook")


def test_nothing_is_served_until_the_secret_is_there() -> None:
    cert = _certificate()
    assert cert.not_ready() == "no webhook certificate yet: waiting for the Secret ns/tls"
    assert cert.trusted_by() is None
    with pytest.raises(ServingCertError, match="waiting for the Secret ns/tls"):
        cert.context()


def test_a_replica_serves_each_good_version_and_refuses_a_corrupted_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cert = _certificate()
    first = _secret("1")
    assert cert.offer(first)
    served = read_secret(first)
    assert cert.fingerprint == served.leaf.fingerprint and cert.not_ready() is None
    context = cert.context()
    assert cert.trusted_by() == (served.bundle_pem.decode(), "overseer-webhook.ns.svc")
    # a rotated version: taken
    second = _secret("2", first)
    assert cert.offer(second)
    assert cert.fingerprint == read_secret(second).leaf.fingerprint != served.leaf.fingerprint
    assert cert.context() is not context  # new connections get the new one
    # a corrupted version: refused, the previous one stays, said once
    broken = copy.deepcopy(second)
    broken["metadata"]["resourceVersion"] = "3"
    broken["data"][TLS_KEY] = first["data"][TLS_KEY]
    errors_before = CERT_READ_ERRORS._value.get()
    with caplog.at_level(logging.ERROR, logger="manager.webhook.certificates"):
        assert not cert.offer(broken)
        assert not cert.offer(broken)  # a resync delivers it again: not logged again
    assert CERT_READ_ERRORS._value.get() == errors_before + 2
    assert cert.fingerprint == read_secret(second).leaf.fingerprint
    assert cert.last_error == "tls.key is not the key of the certificate in tls.crt"
    refusals = [r for r in caplog.records if "cannot be served" in r.getMessage()]
    assert len(refusals) == 1
    assert refusals[0].error == cert.last_error  # type: ignore[attr-defined]
    assert cert.not_ready() is None  # still serving a good certificate


def test_a_replica_that_never_had_a_good_version_says_why_it_is_not_ready() -> None:
    cert = _certificate()
    broken = _secret("1")
    broken["data"]["ca.crt"] = base64.b64encode(b"not pem").decode()
    assert not cert.offer(broken)
    reason = cert.not_ready()
    assert reason is not None and "the last version was refused: ca.crt is not PEM" in reason


def test_the_ca_bundle_goes_into_every_webhook_and_the_conversion() -> None:
    bundle = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    encoded = base64.b64encode(bundle).decode()
    config = {
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "overseer", "managedFields": [{}]},
        "webhooks": [
            {"name": "a.example.com", "clientConfig": {"service": {"name": "s"}}},
            {"name": "b.example.com", "clientConfig": {"service": {"name": "s"}, "caBundle": "x"}},
        ],
    }
    changed, problem = inject_ca_bundle(config, bundle)
    assert problem == "" and changed is not None
    assert [h["clientConfig"]["caBundle"] for h in changed["webhooks"]] == [encoded] * 2
    assert "caBundle" not in config["webhooks"][0]["clientConfig"]  # a copy was changed
    assert inject_ca_bundle(changed, bundle) == (None, "")  # nothing to write
    crd: dict[str, Any] = {"kind": "CustomResourceDefinition", "metadata": {}, "spec": {}}
    assert inject_ca_bundle(crd, bundle)[1].startswith("converts with strategy None")
    crd["spec"]["conversion"] = {
        "strategy": "Webhook",
        "webhook": {"clientConfig": {"service": {"name": "s"}}, "conversionReviewVersions": ["v1"]},
    }
    changed, problem = inject_ca_bundle(crd, bundle)
    assert changed is not None and problem == ""
    assert changed["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"] == encoded


class _Store:
    """The few API calls the rotator makes, in memory, with kube's optimistic
    concurrency (a stale resourceVersion is a 409)."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.version = 0
        self.refuse_updates_of: set[str] = set()  # plurals whose updates conflict
        self.writes: list[tuple[str, str]] = []

    def _key(self, resource: Resource, name: str, namespace: str | None) -> tuple[str, str, str]:
        return (resource.plural, namespace or "", name)

    def put(self, resource: Resource, obj: dict[str, Any], namespace: str | None = None) -> None:
        self.version += 1
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.version)
        self.objects[self._key(resource, obj["metadata"]["name"], namespace)] = obj

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        found = self.objects.get(self._key(resource, name, namespace))
        if found is None:
            raise NotFound(f"{resource.plural} {name!r} not found")
        return copy.deepcopy(found)

    def create(
        self, resource: Resource, body: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        self.writes.append(("create", resource.plural))
        self.put(resource, body, namespace)
        return body

    def replace(
        self, resource: Resource, body: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        key = self._key(resource, body["metadata"]["name"], namespace)
        if resource.plural in self.refuse_updates_of or (
            self.objects[key]["metadata"]["resourceVersion"] != body["metadata"]["resourceVersion"]
        ):
            raise Conflict("the object has been modified")
        self.writes.append(("update", resource.plural))
        self.put(resource, body, namespace)
        return body


def _configuration() -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "overseer"},
        "webhooks": [HOOK.entry({"service": {"name": "overseer-webhook", "namespace": "ns"}})],
    }


def _crd() -> dict[str, Any]:
    client = {"service": {"name": "overseer-webhook", "namespace": "ns", "path": "/convert"}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"conversion": CONVERSION.client_config(client)},
    }


def _bundles(store: _Store) -> tuple[str, str]:
    config = store.get(VALIDATING, "overseer")["webhooks"][0]["clientConfig"].get("caBundle")
    crd = store.get(CRDS, "widgets.example.com")["spec"]["conversion"]["webhook"]
    return config, crd["clientConfig"].get("caBundle")


def test_the_leader_makes_the_secret_and_keeps_every_ca_bundle_through_a_ca_rotation() -> None:
    store = _Store()
    store.put(VALIDATING, _configuration())
    store.put(CRDS, _crd())
    clock = [T0]
    rotator = CertificateRotator(
        store,  # type: ignore[arg-type]
        _certificate(),
        POLICY,
        lambda: [(HOOK, "widgets"), (CONVERSION, "widgets")],
        configuration_name="overseer",
        check_interval=300.0,
        now=lambda: clock[0],
    )
    assert rotator.targets() == [(VALIDATING, "overseer"), (CRDS, "widgets.example.com")]
    delay = rotator.reconcile()
    secret = read_secret(store.get(SECRETS, "tls", "ns"))
    encoded = base64.b64encode(secret.bundle_pem).decode()
    assert _bundles(store) == (encoded, encoded)
    assert rotator.injected and delay == 300.0  # nothing due before the next check
    assert store.writes == [
        ("create", "secrets"),
        ("update", "validatingwebhookconfigurations"),
        ("update", "customresourcedefinitions"),
    ]
    # a re-applied configuration without its caBundle is repaired at the next check
    store.put(VALIDATING, _configuration())
    rotator.reconcile()
    assert _bundles(store) == (encoded, encoded)
    # the CA is due: a new CA joins the bundle, and both carry it
    ca_due = POLICY.renew_at(secret.ca.certificate)  # type: ignore[union-attr]
    clock[0] = ca_due
    store.refuse_updates_of = {"customresourcedefinitions"}  # someone keeps changing it
    delay = rotator.reconcile()
    rotated = read_secret(store.get(SECRETS, "tls", "ns"))
    assert len(rotated.bundle) == 2 and rotated.issuer == secret.issuer
    assert not rotator.injected and delay == 5.0  # the CRD lacks the new bundle: retried soon
    # past the overlap, the certificate of the new CA still waits for the CRD
    clock[0] = ca_due + POLICY.overlap * 2
    rotator.reconcile()
    assert read_secret(store.get(SECRETS, "tls", "ns")).issuer == secret.issuer
    store.refuse_updates_of = set()
    delay = rotator.reconcile()  # the CRD takes the bundle: the overlap counts from now
    assert rotator.injected and delay == 300.0  # the check interval is sooner
    assert read_secret(store.get(SECRETS, "tls", "ns")).issuer == secret.issuer
    clock[0] += POLICY.overlap
    rotator.reconcile()  # then the new CA's certificate is served
    after = read_secret(store.get(SECRETS, "tls", "ns"))
    assert after.ca is not None and after.issuer == after.ca.certificate != secret.issuer
    encoded = base64.b64encode(after.bundle_pem).decode()
    assert _bundles(store) == (encoded, encoded)


def test_a_missing_configuration_is_reported_once_and_does_not_hold_back_the_rotation(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = _Store()
    rotator = CertificateRotator(
        store,  # type: ignore[arg-type]
        _certificate(),
        POLICY,
        lambda: [(HOOK, "widgets")],
        configuration_name="overseer",
        now=lambda: T0,
    )
    with caplog.at_level(logging.WARNING, logger="manager.webhook.certificates"):
        rotator.reconcile()
        rotator.reconcile()
    missing = [r for r in caplog.records if "cannot put the CA bundle" in r.getMessage()]
    assert len(missing) == 1
    assert "not installed" in missing[0].problem  # type: ignore[attr-defined]
    assert rotator.injected


def test_managed_certificates_in_the_configuration() -> None:
    config, _ = parse(
        {
            "webhooks": {
                "certificates": "managed",
                "namespace": "hooks",
                "managed": {"certValidityDays": 2, "renewBeforePercentage": 50, "overlap": 30},
            }
        },
        {},
    )
    options = manager_options(config).webhook
    assert options.managed is not None
    assert options.managed.cert_validity == 2 * 86400.0
    assert options.managed.renew_before == 0.5 and options.managed.overlap == 30.0
    assert options.service_namespace == "hooks" and options.service == "overseer-webhook"
    assert manager_options(parse({}, {})[0]).webhook.managed is None
    with pytest.raises(ConfigError) as exc:
        parse(
            {"webhooks": {"certificates": "managed", "certDir": "/tls", "service": "No_Such"}},
            {},
        )
    assert exc.value.problems == [
        "webhooks.certDir: not with certificates: managed (the leader keeps the certificate "
        "in managed.secretName)",
        "webhooks.service: must be a DNS subdomain name, got 'No_Such'",
    ]


def test_cryptography_is_loaded_only_for_managed_certificates() -> None:
    """A replica without managed certificates never imports it (memory per replica)."""
    import subprocess
    import sys

    probe = (
        "import sys, manager, manager.cli, manager.testing; "
        "from manager.config import manager_options, parse; "
        "from manager.manager import Manager; "
        "from manager.client import KubeClient; "
        "from manager.client.kubeconfig import ClusterConfig; "
        "Manager(KubeClient(ClusterConfig('http://127.0.0.1:9')), "
        "manager_options(parse({}, {})[0])); "
        "print('cryptography' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "False", out.stderr

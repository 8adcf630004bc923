"""Managed webhook certificates: one CA and one serving certificate in a Secret, made and
rotated by the leader, served by every replica (open-policy-agent/cert-controller's
rotator; kopf's self-signed certificates, shared).

* :class:`ManagedCertificate` (every replica): serves what the Secret
  (``webhooks.managed.secretName`` in ``webhooks.namespace``) holds. It reads each
  version the watch delivers (:class:`CertificateWatcher`: an informer on that one
  Secret, ``fieldSelector=metadata.name=...``), checks it
  (:func:`~manager.webhook.rotation.read_secret`) and swaps the TLS context new
  connections get; open connections keep theirs, so nothing is dropped. A version that
  cannot be served (a key that is not its certificate's, a certificate no CA of the
  bundle signed, not PEM) is refused, logged once with what is wrong and counted
  (``certwatcher_read_certificate_errors_total``); the previous certificate stays
  served. Until a first good version arrives, connections are closed at once and the
  replica is not ready; after, readiness is a handshake that verifies the certificate
  with the Secret's bundle for ``<service>.<namespace>.svc``, as an API server does.
* :class:`CertificateRotator` (the leader only, its writes fenced as every leader
  write): reads the Secret, writes its bundle into ``caBundle`` of the plugin's own
  configurations (the Validating and MutatingWebhookConfiguration named
  ``webhooks.configurationName``, when a plugin declares such webhooks) and of each CRD
  with a declared conversion (``spec.conversion.webhook.clientConfig``), then takes the
  schedule's next step (:mod:`manager.webhook.rotation`: create, renew, rotate the CA
  with an overlap), and sleeps until the schedule's next moment, a change of the Secret,
  or ``check_interval`` (a configuration re-applied without its ``caBundle`` is
  repaired then). Every write is conditional (the resourceVersion read); a lost race is
  retried from a fresh read.

The configurations are not created here (kopf's managed mode creates them): they come
from ``overseer webhooks`` with the install, so that no replica needs the right to
create webhook configurations, which would let it intercept any request in the cluster,
and an uninstall removes them with everything else. One that is missing is logged once
and skipped.

Thread-safe: a :class:`ManagedCertificate` swaps its context under a lock; the rotator
runs in one thread.
"""

from __future__ import annotations

import base64
import copy
import datetime
import logging
import os
import ssl
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from manager.cache.informer import HandlerFuncs, SharedInformer
from manager.cache.listwatch import ResourceListWatch
from manager.client import KubeClient
from manager.errors import AlreadyExists, ApiError, Conflict, NotFound, OutcomeUnknown, WriteFenced
from manager.keys import JsonDict
from manager.resources import Resource, builtin
from manager.servingcert import ServingCertError
from manager.webhook.authority import CertificateError
from manager.webhook.configuration import MutatingWebhook, ValidatingWebhook
from manager.webhook.conversion import Conversion
from manager.webhook.metrics import (
    CA_BUNDLE_UPDATES,
    CERT_EXPIRY,
    CERT_READ_ERRORS,
    CERT_READS,
    CERT_ROTATIONS,
    CERTIFICATE_METRICS,
)
from manager.webhook.rotation import (
    RotationPolicy,
    ServingSecret,
    observe,
    plan,
    read_secret,
    secret_body,
    service_names,
)
from manager.webhook.server import WebhookServerOptions

__all__ = [
    "CertificateRotator",
    "CertificateWatcher",
    "ManagedCertificate",
    "ManagedCertificates",
    "inject_ca_bundle",
]

logger = logging.getLogger(__name__)

SECRETS: Final = builtin("v1", "secrets")
VALIDATING: Final = builtin("admissionregistration.k8s.io/v1", "validatingwebhookconfigurations")
MUTATING: Final = builtin("admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations")
CRDS: Final = builtin("apiextensions.k8s.io/v1", "customresourcedefinitions")
LABELS: Final = {
    "app.kubernetes.io/name": "overseer",
    "app.kubernetes.io/component": "webhook",
    "app.kubernetes.io/managed-by": "overseer",
}
_RETRY_INJECTION: Final = 5.0  # seconds before a failed caBundle write is tried again

Declarations = Callable[[], list[tuple[ValidatingWebhook | MutatingWebhook | Conversion, str]]]


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _server_context(cert_pem: bytes, key_pem: bytes, alpn: tuple[str, ...]) -> ssl.SSLContext:
    """A server context from PEM in memory: ``load_cert_chain`` reads files only, so the
    pair goes through an anonymous in-memory file (a private temporary file where there
    is none)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if alpn:
        context.set_alpn_protocols(list(alpn))
    pem = key_pem + b"\n" + cert_pem
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fd = os.memfd_create("overseer-webhook-tls", os.MFD_CLOEXEC)
        try:
            os.write(fd, pem)
            context.load_cert_chain(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
        return context
    with tempfile.TemporaryDirectory(prefix="overseer-webhook-tls-") as tmp:
        path = Path(tmp) / "tls.pem"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(pem)
        context.load_cert_chain(str(path))
    return context


class ManagedCertificate:
    """The serving certificate of every replica, from the managed Secret (a
    :class:`~manager.servingcert.CertificateSource`).

    Args:
        secret: the Secret's name.
        namespace: its namespace (the Service's).
        service: the Service API servers dial (the name verified:
            ``<service>.<namespace>.svc``).
        alpn: the application protocols offered.
    """

    def __init__(
        self, *, secret: str, namespace: str, service: str, alpn: tuple[str, ...] = ("http/1.1",)
    ) -> None:
        self.secret = secret
        self.namespace = namespace
        self.service = service
        self._alpn = alpn
        self._lock = threading.Lock()
        self._context: ssl.SSLContext | None = None
        self._served: ServingSecret | None = None
        self._version = ""  # resourceVersion served
        self._refused = ""  # resourceVersion last refused (logged once)
        self.fingerprint = ""
        self.self_signed = False
        self.last_error = ""
        """Why the newest version of the Secret was refused ("" once one is served since)."""

    @property
    def where(self) -> str:
        return f"{self.namespace}/{self.secret}"

    @property
    def certificate_pem(self) -> str:
        with self._lock:
            return "" if self._served is None else self._served.leaf.pem.decode()

    @property
    def bundle_pem(self) -> str:
        """The CA bundle of the Secret served ("" before one)."""
        with self._lock:
            return "" if self._served is None else self._served.bundle_pem.decode()

    @property
    def served(self) -> ServingSecret | None:
        with self._lock:
            return self._served

    def load(self) -> ManagedCertificate:
        return self  # the watch delivers it

    def context(self) -> ssl.SSLContext:
        with self._lock:
            context = self._context
        if context is None:
            raise ServingCertError(
                f"webhooks: no certificate yet: waiting for the Secret {self.where} (the "
                "leader makes it)"
            )
        return context

    def not_ready(self) -> str | None:
        with self._lock:
            if self._context is not None:
                return None
        why = f": the last version was refused: {self.last_error}" if self.last_error else ""
        return f"no webhook certificate yet: waiting for the Secret {self.where}{why}"

    def trusted_by(self) -> tuple[str, str] | None:
        with self._lock:
            served = self._served
        if served is None:
            return None
        return served.bundle_pem.decode(), f"{self.service}.{self.namespace}.svc"

    def offer(self, obj: Mapping[str, Any]) -> bool:
        """Serve this version of the Secret if it can be served; True if it is (or
        already was) served."""
        meta = obj.get("metadata") or {}
        version = str(meta.get("resourceVersion") or "")
        with self._lock:
            if version and version == self._version:
                return True
        CERT_READS.inc()
        try:
            secret = read_secret(obj)
            context = _server_context(secret.leaf.pem, secret.leaf_key_pem, self._alpn)
        except (CertificateError, ssl.SSLError, OSError) as exc:
            CERT_READ_ERRORS.inc()
            self.last_error = str(exc)
            if version != self._refused:
                self._refused = version
                logger.error(
                    "webhooks: the certificate Secret cannot be served; serving the previous "
                    "certificate",
                    extra={
                        "secret": self.where,
                        "resource_version": version,
                        "error": str(exc),
                        "serving": self.fingerprint or "nothing yet",
                    },
                )
            return False
        with self._lock:
            self._context, self._served, self._version = context, secret, version
            self.fingerprint = secret.leaf.fingerprint
        self.last_error = ""
        CERT_EXPIRY.set(secret.leaf.not_after.timestamp())
        logger.info(
            "webhooks: serving the managed certificate",
            extra={
                "secret": self.where,
                "sha256": secret.leaf.fingerprint,
                "not_after": secret.leaf.not_after.isoformat(),
                "issuer": secret.issuer.subject,
                "cas": len(secret.bundle),
            },
        )
        return True


class CertificateWatcher:
    """Every replica: watches the managed Secret (and only it) and offers each version
    to the :class:`ManagedCertificate`; ``on_change`` is called after each event (the
    leader's rotator looks again)."""

    name = "webhook-certificates"

    def __init__(
        self,
        client: KubeClient,
        certificate: ManagedCertificate,
        *,
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        self.certificate = certificate
        self._on_change = on_change
        lw = ResourceListWatch(
            client,
            SECRETS,
            namespace=certificate.namespace,
            field_selector=f"metadata.name={certificate.secret}",
        )
        self.informer = SharedInformer(lw)
        self.informer.add_event_handler(
            HandlerFuncs(add=self._seen, update=lambda _, new: self._seen(new), delete=self._gone)
        )

    def _seen(self, obj: JsonDict) -> None:
        self.certificate.offer(obj)
        self._on_change()

    def _gone(self, obj: object) -> None:
        logger.warning(
            "webhooks: the certificate Secret was deleted; serving the previous certificate "
            "until the leader makes a new one",
            extra={"secret": self.certificate.where},
        )
        self._on_change()

    def run(self, stop: threading.Event) -> None:
        CERTIFICATE_METRICS.attach()
        try:
            self.informer.run(stop)
        finally:
            CERTIFICATE_METRICS.detach()


def _set_bundle(config: Any, bundle: str) -> bool:
    """Set ``caBundle`` in a ``clientConfig``; True if it changed."""
    if not isinstance(config, dict) or config.get("caBundle") == bundle:
        return False
    config["caBundle"] = bundle
    return True


def inject_ca_bundle(obj: JsonDict, bundle_pem: bytes) -> tuple[JsonDict | None, str]:
    """``obj`` (a webhook configuration or a CRD) with ``bundle_pem`` as the ``caBundle``
    of every webhook (or of its conversion webhook): a changed copy, or None when it
    already carries it; and a problem when it has nowhere to put it ("": none)."""
    bundle = base64.b64encode(bundle_pem).decode()
    out = copy.deepcopy(obj)
    changed = False
    if out.get("kind") == "CustomResourceDefinition":
        conversion = (out.get("spec") or {}).get("conversion") or {}
        config = (conversion.get("webhook") or {}).get("clientConfig")
        if conversion.get("strategy") != "Webhook" or not isinstance(config, dict):
            return None, (
                f"converts with strategy {conversion.get('strategy') or 'None'}, not through "
                "the webhook: apply the conversion patch `overseer webhooks` prints"
            )
        changed = _set_bundle(config, bundle)
    else:
        hooks = out.get("webhooks") or []
        for hook in hooks:
            if isinstance(hook, dict):
                changed = _set_bundle(hook.setdefault("clientConfig", {}), bundle) or changed
        if not hooks:
            return None, "has no webhooks"
    out.get("metadata", {}).pop("managedFields", None)
    return (out if changed else None), ""


class CertificateRotator:
    """The leader's side (a leader-only runnable: its writes are fenced): keeps the
    Secret per the schedule and its bundle in every ``caBundle`` (see the module)."""

    name = "webhook-certificate-rotator"

    def __init__(
        self,
        client: KubeClient,
        certificate: ManagedCertificate,
        policy: RotationPolicy,
        declarations: Declarations,
        *,
        configuration_name: str,
        check_interval: float = 300.0,
        now: Callable[[], datetime.datetime] = _utcnow,
    ) -> None:
        self._client = client
        self._certificate = certificate
        self.policy = policy
        self._declarations = declarations
        self.configuration_name = configuration_name
        self._check_interval = check_interval
        self._now = now
        self._wake = threading.Event()
        self._reported: set[tuple[str, str, str]] = set()  # problems logged once
        self.injected = False
        """Whether every configuration and CRD carried the Secret's bundle at the last
        check."""
        self._injected: tuple[bytes, datetime.datetime] | None = None  # (bundle, since)

    @property
    def names(self) -> list[str]:
        cert = self._certificate
        return service_names(cert.service, cert.namespace)

    def poke(self) -> None:
        """Look again now (the Secret changed)."""
        self._wake.set()

    def targets(self) -> list[tuple[Resource, str]]:
        """What carries the CA bundle: the configurations of the declared kinds, and the
        CRDs of the declared conversions."""
        declared = [hook for hook, _ in self._declarations()]
        out: list[tuple[Resource, str]] = []
        if any(isinstance(h, ValidatingWebhook) for h in declared):
            out.append((VALIDATING, self.configuration_name))
        if any(isinstance(h, MutatingWebhook) for h in declared):
            out.append((MUTATING, self.configuration_name))
        out.extend((CRDS, h.crd) for h in declared if isinstance(h, Conversion))
        return out

    def _report(self, resource: Resource, name: str, problem: str) -> None:
        key = (resource.plural, name, problem)
        if key not in self._reported:
            self._reported.add(key)
            logger.warning(
                "webhooks: cannot put the CA bundle in place",
                extra={"kind": resource.kind, "object": name, "problem": problem},
            )

    def inject(self, bundle_pem: bytes) -> bool:
        """Put ``bundle_pem`` in every target's ``caBundle``; True when every target
        that exists carries it now (one that cannot be read or written, a 403 say, is
        logged once and makes it False).

        Raises:
            WriteFenced: this replica no longer leads.
        """
        ok = True
        for resource, name in self.targets():
            try:
                obj = self._client.get(resource, name)
                changed, problem = inject_ca_bundle(obj, bundle_pem)
                if problem:
                    self._report(resource, name, problem)
                    continue
                if changed is None:
                    continue
                self._client.replace(resource, changed)  # conditional: its resourceVersion
            except NotFound:
                what = "what `overseer webhooks` prints" if resource is not CRDS else "the CRD"
                self._report(resource, name, f"not installed (apply {what})")
                continue
            except Conflict:
                ok = False  # changed meanwhile: read again soon
                continue
            except ApiError as exc:
                self._report(resource, name, f"{type(exc).__name__}: {exc}")
                ok = False
                continue
            CA_BUNDLE_UPDATES.labels(resource.kind).inc()
            logger.info(
                "webhooks: CA bundle updated",
                extra={"kind": resource.kind, "object": name, "bytes": len(bundle_pem)},
            )
        return ok

    def _read(self) -> JsonDict | None:
        cert = self._certificate
        try:
            return self._client.get(SECRETS, cert.secret, cert.namespace)
        except NotFound:
            return None

    def _write(self, body: JsonDict, existing: JsonDict | None) -> None:
        cert = self._certificate
        if existing is None:
            self._client.create(SECRETS, body, cert.namespace)
        else:
            self._client.replace(SECRETS, body, cert.namespace)

    def reconcile(self) -> float:
        """One round: read, inject, step (and again after a write, up to a few steps);
        returns the seconds until the next round.

        Raises:
            ApiError, WriteFenced: a request failed (the caller backs off).
        """
        for _ in range(6):
            existing = self._read()
            now = self._now()
            observed = observe(existing, now)
            injected = False
            if isinstance(observed, ServingSecret):
                injected = self.inject(observed.bundle_pem)
                if not injected:
                    self._injected = None
                elif self._injected is None or self._injected[0] != observed.bundle_pem:
                    # the overlap counts from when every caBundle has it, not from the write
                    self._injected = (observed.bundle_pem, self._now())
            self.injected = injected
            step = plan(
                observed,
                now=now,
                names=self.names,
                policy=self.policy,
                injected_at=self._injected[1] if injected and self._injected else None,
            )
            if step.secret is None:
                delay = self._check_interval
                if step.wake_at is not None:
                    delay = min(delay, (step.wake_at - now).total_seconds())
                if isinstance(observed, ServingSecret) and not injected:
                    delay = min(delay, _RETRY_INJECTION)
                return max(delay, 0.05)
            cert = self._certificate
            body = secret_body(
                step, name=cert.secret, namespace=cert.namespace, labels=LABELS, existing=existing
            )
            try:
                self._write(body, existing)
            except (AlreadyExists, Conflict, OutcomeUnknown) as exc:
                logger.info(
                    "webhooks: the certificate Secret changed meanwhile; reading it again",
                    extra={"secret": cert.where, "error": type(exc).__name__},
                )
                continue
            CERT_ROTATIONS.labels(step.action).inc()
            logger.info(
                f"webhooks: certificates {step.action}",
                extra={
                    "secret": cert.where,
                    "reason": step.reason,
                    "sha256": step.secret.leaf.fingerprint,
                    "not_after": step.secret.leaf.not_after.isoformat(),
                    "cas": len(step.secret.bundle),
                },
            )
        return 0.05

    def run(self, stop: threading.Event) -> None:
        backoff = 1.0
        while not stop.is_set():
            self._wake.clear()
            try:
                delay = self.reconcile()
                backoff = 1.0
            except WriteFenced:
                delay = 1.0  # no longer leading: stop is about to be set
            except (ApiError, OSError) as exc:
                logger.warning(
                    "webhooks: certificate rotation failed; trying again",
                    extra={"error": str(exc), "retry_seconds": backoff},
                )
                delay, backoff = backoff, min(backoff * 2, 60.0)
            except Exception:
                logger.exception("webhooks: certificate rotation failed")
                delay, backoff = backoff, min(backoff * 2, 60.0)
            deadline = time.monotonic() + delay
            while not stop.is_set() and not self._wake.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._wake.wait(min(remaining, 0.2))


class ManagedCertificates:
    """What the manager runs for ``webhooks.certificates: managed``: the certificate the
    server serves, the watcher (every replica), the rotator (the leader)."""

    def __init__(
        self,
        client: KubeClient,
        options: WebhookServerOptions,
        declarations: Declarations,
        *,
        now: Callable[[], datetime.datetime] = _utcnow,
    ) -> None:
        managed = options.managed
        assert managed is not None
        namespace = options.service_namespace
        self.certificate = ManagedCertificate(
            secret=managed.secret_name, namespace=namespace, service=options.service
        )
        policy = RotationPolicy(
            ca_validity=datetime.timedelta(seconds=managed.ca_validity),
            cert_validity=datetime.timedelta(seconds=managed.cert_validity),
            renew_before=managed.renew_before,
            overlap=datetime.timedelta(seconds=managed.overlap),
        )
        self.rotator = CertificateRotator(
            client,
            self.certificate,
            policy,
            declarations,
            configuration_name=options.configuration_name,
            check_interval=managed.check_interval,
            now=now,
        )
        self.watcher = CertificateWatcher(client, self.certificate, on_change=self.rotator.poke)

"""The managed serving certificate's Secret and its rotation schedule (the part of
open-policy-agent/cert-controller's ``refreshCertIfNeeded`` that decides, as a pure
function of the Secret and the time, so that tests drive it with any clock).

The Secret (type ``kubernetes.io/tls``) holds:

* ``tls.crt``, ``tls.key``: the serving certificate every replica serves;
* ``ca.crt``: the CA bundle API servers must trust (``caBundle``): the current CA
  first, then, during a rotation, the previous one;
* ``ca.key``: the current CA's key (the leader signs with it);
* annotation ``overseer.io/certificates-rotated-at``: when the leader last changed it.

What the leader does (:func:`plan`), one step at a time:

* **No Secret**: a new CA and a certificate signed by it (``create``).
* **A Secret that cannot be used** (a key that is not its certificate's, a certificate
  no CA of the bundle signed, no ``ca.key``, an expired CA, not PEM): made anew
  (``regenerate``), keeping the old bundle's CAs that still parse and have not expired,
  so that replicas still serving the old certificate stay verifiable while they pick up
  the new one; they are dropped after the overlap like any old CA.
* **The serving certificate is renewed** (``issue``) when less than ``renew_before`` of
  its lifetime remains, when it lacks a DNS name the Service needs, or when it is not
  valid now. The CA does not change, nor does ``caBundle``: API servers verify the new
  certificate with what they have.
* **The CA is renewed in three steps**, so that an API server that has either bundle
  verifies what every replica serves at every moment (cert-controller replaces CA and
  certificate at once, and API servers reject the new certificate until the new
  ``caBundle`` reaches them):

  1. ``rotate-ca``, when less than ``renew_before`` of the CA's lifetime remains: a new
     CA goes first in ``ca.crt``, the old one stays after it; ``ca.key`` becomes the new
     CA's; the serving certificate (signed by the old CA) stays. The leader injects the
     two-CA bundle into every configuration.
  2. ``issue`` from the new CA, once every configuration has carried the two-CA bundle
     for ``overlap`` (``injected_at``: for every API server to read the configurations
     again); or at once if the old certificate is due for renewal anyway.
  3. ``trim``: the old CA leaves the bundle once ``overlap`` has passed since step 2
     (for every replica to serve the new certificate).

:meth:`Step.wake_at` says when the schedule next has something to do. Time is an
argument: nothing here reads a clock.

Thread-safe: pure functions over immutable values.
"""

from __future__ import annotations

import base64
import binascii
import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from manager.keys import JsonDict
from manager.webhook.authority import (
    Certificate,
    CertificateError,
    KeyPair,
    issue,
    key_matches,
    new_authority,
    read_certificates,
    read_key,
)

__all__ = [
    "CA_CERT",
    "CA_KEY",
    "ROTATED_AT",
    "TLS_CERT",
    "TLS_KEY",
    "Broken",
    "RotationPolicy",
    "ServingSecret",
    "Step",
    "observe",
    "plan",
    "read_secret",
    "salvage",
    "secret_body",
    "service_names",
]

TLS_CERT: Final = "tls.crt"
TLS_KEY: Final = "tls.key"
CA_CERT: Final = "ca.crt"
CA_KEY: Final = "ca.key"
ROTATED_AT: Final = "overseer.io/certificates-rotated-at"
_LONG_AGO: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


@dataclass(frozen=True, kw_only=True, slots=True)
class RotationPolicy:
    """How long certificates live and when they are renewed."""

    ca_validity: datetime.timedelta = datetime.timedelta(days=3650)
    cert_validity: datetime.timedelta = datetime.timedelta(days=365)
    renew_before: float = 1 / 3  # renew when less than this fraction of the lifetime is left
    overlap: datetime.timedelta = datetime.timedelta(minutes=10)  # see the module

    def __post_init__(self) -> None:
        if not 0 < self.renew_before < 1:
            raise ValueError(f"renew_before must be between 0 and 1, got {self.renew_before}")
        for name in ("ca_validity", "cert_validity"):
            if getattr(self, name) < datetime.timedelta(seconds=1):
                raise ValueError(f"{name} must be at least a second")
        if self.overlap < datetime.timedelta(0):
            raise ValueError("overlap must be >= 0")

    def renew_at(self, cert: Certificate) -> datetime.datetime:
        """When ``cert`` is due: ``renew_before`` of its lifetime before its end."""
        lifetime = cert.lifetime
        if lifetime <= datetime.timedelta(0):
            return cert.not_before
        return cert.not_after - lifetime * self.renew_before


def service_names(service: str, namespace: str) -> list[str]:
    """The DNS names an API server may dial a Service by (it verifies
    ``<service>.<namespace>.svc``)."""
    return [
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
        f"{service}.{namespace}",
        service,
    ]


@dataclass(frozen=True, slots=True)
class ServingSecret:
    """A Secret's certificates, checked: the serving pair and the bundle that verifies
    it (what every replica needs), and the CA that signs (what the leader needs)."""

    leaf: Certificate
    leaf_key_pem: bytes
    bundle: tuple[Certificate, ...]
    issuer: Certificate  # the CA of the bundle that signed ``leaf``
    ca: KeyPair | None  # the current CA with its key; None: ``ca_problem`` says why
    ca_problem: str = ""
    rotated_at: datetime.datetime | None = None

    @property
    def bundle_pem(self) -> bytes:
        return b"".join(c.pem for c in self.bundle)

    def data(self) -> dict[str, str]:
        """The Secret's ``data`` (base64)."""
        assert self.ca is not None, "only a Secret with its CA key is written"
        raw = {
            TLS_CERT: self.leaf.pem,
            TLS_KEY: self.leaf_key_pem,
            CA_CERT: self.bundle_pem,
            CA_KEY: self.ca.key_pem,
        }
        return {k: base64.b64encode(v).decode() for k, v in raw.items()}


@dataclass(frozen=True, slots=True)
class Broken:
    """A Secret that cannot be served: why, and the CAs of its bundle still worth
    keeping in the next one (they parse and have not expired)."""

    problem: str
    salvaged: tuple[Certificate, ...] = ()


def _decoded(data: Mapping[str, Any], key: str) -> bytes:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise CertificateError(f"{key} is missing")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise CertificateError(f"{key} is not base64") from None


def _rotated_at(obj: Mapping[str, Any]) -> datetime.datetime | None:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(ROTATED_AT)
    if not isinstance(text, str):
        return None
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=datetime.UTC)


def read_secret(obj: Mapping[str, Any]) -> ServingSecret:
    """Check a Secret as the replicas serve it.

    Raises:
        CertificateError: what makes it unusable to serve (the key, the certificate, the
            bundle, which CA signed what), in words.
    """
    data = obj.get("data") or {}
    if not isinstance(data, Mapping):
        raise CertificateError("data is not a mapping")
    certs = read_certificates(_decoded(data, TLS_CERT), TLS_CERT)
    leaf = certs[0]
    leaf_key_pem = _decoded(data, TLS_KEY)
    if not key_matches(leaf, read_key(leaf_key_pem, TLS_KEY)):
        raise CertificateError(f"{TLS_KEY} is not the key of the certificate in {TLS_CERT}")
    bundle = tuple(read_certificates(_decoded(data, CA_CERT), CA_CERT))
    not_ca = [c.subject for c in bundle if not c.is_ca]
    if not_ca:
        raise CertificateError(f"{CA_CERT} holds a certificate that is no CA: {not_ca[0]}")
    issuer = next((c for c in bundle if leaf.signed_by(c)), None)
    if issuer is None:
        raise CertificateError(
            f"no CA of {CA_CERT} signed the certificate in {TLS_CERT} ({leaf.subject})"
        )
    ca: KeyPair | None = None
    problem = ""
    try:
        ca_key_pem = _decoded(data, CA_KEY)
        ca_key = read_key(ca_key_pem, CA_KEY)
        current = next((c for c in bundle if key_matches(c, ca_key)), None)
        if current is None:
            problem = f"{CA_KEY} is the key of no CA in {CA_CERT}"
        else:
            ca = KeyPair(current, ca_key_pem)
    except CertificateError as exc:
        problem = str(exc)
    return ServingSecret(
        leaf=leaf,
        leaf_key_pem=leaf_key_pem,
        bundle=bundle,
        issuer=issuer,
        ca=ca,
        ca_problem=problem,
        rotated_at=_rotated_at(obj),
    )


def salvage(obj: Mapping[str, Any], now: datetime.datetime) -> tuple[Certificate, ...]:
    """The CAs of a Secret's bundle that parse and are valid at ``now`` (kept when the
    Secret is made anew)."""
    data = obj.get("data") or {}
    try:
        certs = read_certificates(_decoded(data, CA_CERT), CA_CERT)
    except (CertificateError, AttributeError):
        return ()
    return tuple(c for c in certs if c.is_ca and c.valid_at(now))


def observe(obj: Mapping[str, Any] | None, now: datetime.datetime) -> ServingSecret | Broken | None:
    """What the leader sees: the Secret checked, a :class:`Broken` one, or None."""
    if obj is None:
        return None
    try:
        return read_secret(obj)
    except CertificateError as exc:
        return Broken(str(exc), salvage(obj, now))


@dataclass(frozen=True, slots=True)
class Step:
    """What the schedule says to do now."""

    action: str  # create, regenerate, rotate-ca, issue, trim; "" = nothing now
    reason: str
    secret: ServingSecret | None = None  # what to write
    wake_at: datetime.datetime | None = None  # nothing to do until then
    annotations: dict[str, str] = field(default_factory=dict)


def _write(action: str, reason: str, secret: ServingSecret, now: datetime.datetime) -> Step:
    return Step(action, reason, secret, None, {ROTATED_AT: now.isoformat()})


def _fresh(
    action: str,
    reason: str,
    *,
    now: datetime.datetime,
    names: Sequence[str],
    policy: RotationPolicy,
    keep: Sequence[Certificate] = (),
) -> Step:
    ca = new_authority(names[-1], now=now, validity=policy.ca_validity)
    leaf = issue(ca, names, now=now, validity=policy.cert_validity)
    kept = tuple(c for c in keep if c.fingerprint != ca.certificate.fingerprint)
    secret = ServingSecret(
        leaf=leaf.certificate,
        leaf_key_pem=leaf.key_pem,
        bundle=(ca.certificate, *kept),
        issuer=ca.certificate,
        ca=ca,
        rotated_at=now,
    )
    return _write(action, reason, secret, now)


def _issued(
    secret: ServingSecret, names: Sequence[str], now: datetime.datetime, policy: RotationPolicy
) -> ServingSecret:
    assert secret.ca is not None
    leaf = issue(secret.ca, names, now=now, validity=policy.cert_validity)
    return ServingSecret(
        leaf=leaf.certificate,
        leaf_key_pem=leaf.key_pem,
        bundle=secret.bundle,
        issuer=secret.ca.certificate,
        ca=secret.ca,
        rotated_at=now,
    )


def plan(
    current: ServingSecret | Broken | None,
    *,
    now: datetime.datetime,
    names: Sequence[str],
    policy: RotationPolicy,
    injected_at: datetime.datetime | None,
) -> Step:
    """The next step for the Secret as it is now (see the module).

    Args:
        current: the Secret checked (:func:`observe`).
        now: the time (aware).
        names: the DNS names the serving certificate must have (the first is its
            common name; the last names the CA).
        policy: lifetimes, renewal fraction, overlap.
        injected_at: since when every configuration that exists has carried the
            Secret's bundle as its ``caBundle`` (as the leader has seen it); None while
            one lacks it.
    """
    if current is None:
        return _fresh("create", "no Secret yet", now=now, names=names, policy=policy)
    if isinstance(current, Broken):
        return _fresh(
            "regenerate",
            f"the Secret cannot be used: {current.problem}",
            now=now,
            names=names,
            policy=policy,
            keep=current.salvaged,
        )
    ca = current.ca
    live = tuple(c for c in current.bundle if c.valid_at(now))
    if ca is None or not ca.certificate.valid_at(now):
        why = current.ca_problem or f"its CA is not valid now ({ca and ca.certificate.subject})"
        return _fresh(
            "regenerate",
            f"the Secret cannot be used: {why}",
            now=now,
            names=names,
            policy=policy,
            keep=live,
        )
    rotated = current.rotated_at or _LONG_AGO
    settled = rotated + policy.overlap
    leaf_due = policy.renew_at(current.leaf)
    leaf_usable = current.leaf.valid_at(now) and current.issuer.valid_at(now)
    if current.issuer.fingerprint != ca.certificate.fingerprint:
        # step 2 of a CA rotation: the certificate is still the old CA's
        spread = None if injected_at is None else max(injected_at, rotated) + policy.overlap
        if (spread is not None and now >= spread) or now >= leaf_due or not leaf_usable:
            why = (
                f"the bundle with the new CA has been in every configuration for {policy.overlap}"
                if spread is not None and now >= spread
                else "the certificate of the old CA is due before the overlap ended"
            )
            return _write(
                "issue",
                f"serving certificate from the new CA: {why}",
                _issued(current, names, now, policy),
                now,
            )
        return Step(
            "",
            "waiting for the bundle with the new CA to reach every configuration and API "
            "server before serving a certificate it signed",
            wake_at=leaf_due if spread is None else min(spread, leaf_due),
        )
    # a certificate due is renewed first, under the CA that signed it: then, when the
    # CA is due too, the new CA waits out its overlap behind a fresh certificate
    missing = [n for n in names if n not in current.leaf.dns_names]
    if now >= leaf_due or missing or not leaf_usable:
        if missing:
            why = f"it lacks the DNS names {', '.join(missing)}"
        elif not leaf_usable:
            why = "it is not valid now"
        else:
            why = f"it ends {current.leaf.not_after.isoformat()}"
        return _write(
            "issue",
            f"serving certificate renewed: {why}",
            _issued(current, names, now, policy),
            now,
        )
    ca_due = policy.renew_at(ca.certificate)
    if now >= ca_due:
        fresh = new_authority(names[-1], now=now, validity=policy.ca_validity)
        rotated_secret = ServingSecret(
            leaf=current.leaf,
            leaf_key_pem=current.leaf_key_pem,
            bundle=(fresh.certificate, *live),
            issuer=current.issuer,
            ca=fresh,
            rotated_at=now,
        )
        return _write(
            "rotate-ca",
            f"the CA ends {ca.certificate.not_after.isoformat()}: a new CA joins the bundle",
            rotated_secret,
            now,
        )
    old = [c for c in current.bundle if c.fingerprint != ca.certificate.fingerprint]
    if old and now >= settled:
        trimmed = ServingSecret(
            leaf=current.leaf,
            leaf_key_pem=current.leaf_key_pem,
            bundle=(ca.certificate,),
            issuer=current.issuer,
            ca=ca,
            rotated_at=now,
        )
        return _write(
            "trim",
            f"the old CA leaves the bundle: every replica has served the new certificate "
            f"for {policy.overlap}",
            trimmed,
            now,
        )
    wakes = [ca_due, leaf_due] + ([settled] if old else [])
    return Step("", "", wake_at=min(wakes))


def secret_body(
    step: Step,
    *,
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    existing: Mapping[str, Any] | None,
) -> JsonDict:
    """The Secret to write for ``step``: ``existing`` (with its resourceVersion, so the
    write is conditional) with new data and annotations, or a new one."""
    assert step.secret is not None
    if existing is None:
        meta: JsonDict = {"name": name, "namespace": namespace, "labels": dict(labels)}
        body: JsonDict = {"apiVersion": "v1", "kind": "Secret", "metadata": meta}
        body["type"] = "kubernetes.io/tls"
    else:
        body = {k: v for k, v in existing.items() if k not in ("data", "stringData")}
        meta = dict(body.get("metadata") or {})
        meta.pop("managedFields", None)
        body["metadata"] = meta
    meta["annotations"] = {**(meta.get("annotations") or {}), **step.annotations}
    body["data"] = step.secret.data()
    return body

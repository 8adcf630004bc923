"""A certificate authority for the webhook server: make a CA, sign serving certificates
with it, read both back (what open-policy-agent/cert-controller's rotator does with Go's
``crypto/x509``; here with the ``cryptography`` package).

* :func:`new_authority`: a self-signed CA (ECDSA P-256, ``CA:TRUE``, path length 0,
  ``keyCertSign``), its subject unique per CA (``<name>-ca@<unix time>-<random>``) so
  that an old and a new CA in one bundle are told apart by name as well as by key id.
* :func:`issue`: a serving certificate signed by a CA for DNS names (a SAN: Go's
  verifier, kube-apiserver's, ignores the common name), ``serverAuth``, never valid
  past its CA.
* Both start :data:`BACKDATE` before ``now`` (a node whose clock is a little behind
  must not see a certificate that is "not valid yet", as cert-controller backdates an
  hour); :attr:`Certificate.lifetime` leaves that out, so a schedule that renews at a
  fraction of the lifetime means the time asked for.
* :func:`read_certificates`, :func:`read_key`: PEM back to objects, every problem a
  :class:`CertificateError` naming what is wrong.

Times are aware UTC datetimes, cut to whole seconds (X.509 has no fractions). Keys are
PKCS#8 PEM, unencrypted (they live in a Secret).

Thread-safe: pure functions over immutable values.
"""

from __future__ import annotations

import datetime
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "BACKDATE",
    "Certificate",
    "CertificateError",
    "KeyPair",
    "issue",
    "key_matches",
    "new_authority",
    "read_certificates",
    "read_key",
]

BACKDATE: Final = datetime.timedelta(hours=1)
"""How long before it is made a certificate starts to be valid (clock skew between the
node that made it and the API servers that verify it)."""


class CertificateError(ValueError):
    """A certificate or key that cannot be used, with what is wrong with it."""


@dataclass(frozen=True, slots=True)
class Certificate:
    """One parsed X.509 certificate and its PEM."""

    cert: x509.Certificate
    pem: bytes

    @property
    def not_before(self) -> datetime.datetime:
        return self.cert.not_valid_before_utc

    @property
    def not_after(self) -> datetime.datetime:
        return self.cert.not_valid_after_utc

    @property
    def lifetime(self) -> datetime.timedelta:
        """From when it was made (``not_before`` plus :data:`BACKDATE`) to its end."""
        return self.not_after - self.not_before - BACKDATE

    @property
    def subject(self) -> str:
        return self.cert.subject.rfc4514_string()

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the DER, hex."""
        return self.cert.fingerprint(hashes.SHA256()).hex()

    @property
    def is_ca(self) -> bool:
        try:
            constraints = self.cert.extensions.get_extension_for_class(x509.BasicConstraints)
        except x509.ExtensionNotFound:
            return False
        return bool(constraints.value.ca)

    @property
    def dns_names(self) -> tuple[str, ...]:
        try:
            san = self.cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
        except x509.ExtensionNotFound:
            return ()
        return tuple(san.value.get_values_for_type(x509.DNSName))

    def public_key_der(self) -> bytes:
        return self.cert.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def signed_by(self, issuer: Certificate) -> bool:
        """Whether ``issuer`` (a CA) signed this certificate."""
        if not issuer.is_ca:
            return False
        try:
            self.cert.verify_directly_issued_by(issuer.cert)
        except (ValueError, TypeError, InvalidSignature):
            return False
        return True

    def valid_at(self, when: datetime.datetime) -> bool:
        return self.not_before <= when < self.not_after


@dataclass(frozen=True, slots=True)
class KeyPair:
    """A certificate with its private key (PKCS#8 PEM)."""

    certificate: Certificate
    key_pem: bytes

    @property
    def cert_pem(self) -> bytes:
        return self.certificate.pem


def _seconds(when: datetime.datetime) -> datetime.datetime:
    return when.astimezone(datetime.UTC).replace(microsecond=0)


def _seconds_up(when: datetime.datetime) -> datetime.datetime:
    """The end of a validity, never earlier than asked."""
    cut = _seconds(when)
    return cut if cut == when else cut + datetime.timedelta(seconds=1)


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def new_authority(name: str, *, now: datetime.datetime, validity: datetime.timedelta) -> KeyPair:
    """A new self-signed CA valid ``validity`` from ``now``, named after ``name`` (the
    webhook Service's name)."""
    key = ec.generate_private_key(ec.SECP256R1())
    stamp = int(now.timestamp())
    subject = x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, f"{name}-ca@{stamp}-{secrets.token_hex(4)}")]
    )
    public = key.public_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(_seconds(now - BACKDATE))
        .not_valid_after(_seconds_up(now + validity))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(Certificate(cert, _pem(cert)), _key_pem(key))


def issue(
    authority: KeyPair,
    names: Sequence[str],
    *,
    now: datetime.datetime,
    validity: datetime.timedelta,
) -> KeyPair:
    """A serving certificate for ``names`` (the first is its common name) signed by
    ``authority``, valid ``validity`` from ``now`` but never past the CA.

    Raises:
        CertificateError: the CA's key does not load or is not the CA's.
    """
    if not names:
        raise ValueError("a serving certificate needs at least one DNS name")
    ca_key = read_key(authority.key_pem, "the CA key")
    ca = authority.certificate
    if _public_der(ca_key) != ca.public_key_der():
        raise CertificateError("the CA key is not the key of the CA certificate")
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise CertificateError(f"the CA key is a {type(ca_key).__name__}: cannot sign with it")
    key = ec.generate_private_key(ec.SECP256R1())
    public = key.public_key()
    not_after = min(_seconds_up(now + validity), ca.not_after)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca.cert.subject)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(max(_seconds(now - BACKDATE), ca.not_before))
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    cert = builder.sign(ca_key, hashes.SHA256())
    return KeyPair(Certificate(cert, _pem(cert)), _key_pem(key))


def _public_der(key: PrivateKeyTypes) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def read_certificates(pem: bytes, what: str) -> list[Certificate]:
    """Every certificate of a PEM file, in order.

    Raises:
        CertificateError: ``what`` holds none, or one that does not parse.
    """
    if not pem.strip():
        raise CertificateError(f"{what} is empty")
    try:
        certs = x509.load_pem_x509_certificates(pem)
    except ValueError as exc:
        raise CertificateError(f"{what} is not PEM certificates: {exc}") from None
    return [Certificate(c, _pem(c)) for c in certs]


def read_key(pem: bytes, what: str) -> PrivateKeyTypes:
    """A private key from PEM.

    Raises:
        CertificateError: ``what`` is empty, encrypted or not a key.
    """
    if not pem.strip():
        raise CertificateError(f"{what} is empty")
    try:
        return serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        raise CertificateError(f"{what} is not a PEM private key: {exc}") from None


def key_matches(certificate: Certificate, key: PrivateKeyTypes) -> bool:
    """Whether ``key`` is the private key of ``certificate``."""
    return _public_der(key) == certificate.public_key_der()

"""The serving certificate of the secure metrics server and of the webhook server
(controller-runtime's ``metricsserver.Options.CertDir``, ``webhook.Options.CertDir`` and
their ``certwatcher``).

* With a certificate directory (``metrics.certDir``, ``webhooks.certDir``: e.g. a mounted
  Secret of type ``kubernetes.io/tls`` from cert-manager): ``tls.crt`` and ``tls.key``
  there (``certName``, ``keyName``). They are
  read at start and again whenever either file changes (checked per connection, by
  modification time and size), so a rotated certificate is served without a restart; a
  change that cannot be loaded (a half-written pair) keeps the previous one and is logged.
* Without one: a self-signed certificate made at start with ``openssl`` (an ECDSA P-256
  key, valid a year, for ``localhost``, ``127.0.0.1``, the host name and, in a pod, the
  Service's names), logged with its SHA-256 fingerprint. Its files live in a private
  temporary directory only while they are loaded; its PEM is :attr:`certificate_pem`
  (it is its own CA: what a caller that must verify it trusts, e.g. a webhook
  configuration's ``caBundle`` in tests).

TLS 1.2 or later; ``alpn`` offers application protocols (the webhook server offers
``http/1.1`` only). Thread-safe: one lock guards the current context.

:class:`CertificateSource` is what a server needs of its certificate; the webhook
server's managed certificate (:mod:`manager.webhook.certificates`: a Secret the leader
keeps) is the other one.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Protocol

from manager.errors import OverseerError

__all__ = ["CertificateSource", "ServingCertError", "ServingCertificate"]

logger = logging.getLogger(__name__)


class ServingCertError(OverseerError):
    """No usable serving certificate: the files cannot be loaded, or none was given and
    a self-signed one cannot be made."""


class CertificateSource(Protocol):
    """Where a TLS server's certificate comes from.

    :meth:`context` is asked once per new connection (a rotation reaches new connections;
    open ones keep theirs); it raises :class:`ServingCertError` while there is no
    certificate to serve (the connection is then closed).
    """

    fingerprint: str  # SHA-256 of the certificate served (DER), hex; "" before one
    self_signed: bool

    @property
    def certificate_pem(self) -> str:
        """The certificate served (PEM), "" before one."""
        ...

    def load(self) -> CertificateSource:
        """Load what is there now (at start).

        Raises:
            ServingCertError: what is there cannot be served.
        """
        ...

    def context(self) -> ssl.SSLContext:
        """The TLS context for a new connection.

        Raises:
            ServingCertError: there is no certificate to serve yet.
        """
        ...

    def not_ready(self) -> str | None:
        """Why this cannot serve yet (readiness), or None."""
        ...

    def trusted_by(self) -> tuple[str, str] | None:
        """The CA bundle (PEM) clients verify the certificate with and the DNS name they
        dial, when those are known (readiness then checks a verified handshake); None
        for a certificate clients are given otherwise."""
        ...


def _context(cert: Path, key: Path, alpn: tuple[str, ...] = ()) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(str(cert), str(key))
    if alpn:
        context.set_alpn_protocols(list(alpn))
    return context


def _stamp(*paths: Path) -> tuple[tuple[int, int], ...]:
    out = []
    for p in paths:
        st = p.stat()
        out.append((st.st_mtime_ns, st.st_size))
    return tuple(out)


def _names(service: str) -> list[str]:
    names = ["DNS:localhost", "IP:127.0.0.1", "IP:::1"]
    host = socket.gethostname()
    if host and host != "localhost":
        names.append(f"DNS:{host}")
    namespace = os.environ.get("POD_NAMESPACE", "")
    if namespace and service:
        names += [
            f"DNS:{service}.{namespace}.svc",
            f"DNS:{service}.{namespace}.svc.cluster.local",
        ]
    return names


class ServingCertificate:
    """Where a server's TLS context comes from.

    Args:
        cert_dir: the directory with the certificate and key ("" = self-signed).
        cert_name: the certificate's file name in ``cert_dir``.
        key_name: the key's file name in ``cert_dir``.
        service: the server's Service name, for the self-signed certificate's names.
        setting: the configuration section messages name (``metrics``, ``webhooks``).
        alpn: the application protocols offered (ALPN), in order of preference.
    """

    def __init__(
        self,
        cert_dir: str = "",
        *,
        cert_name: str = "tls.crt",
        key_name: str = "tls.key",
        service: str = "overseer-metrics",
        setting: str = "metrics",
        alpn: tuple[str, ...] = (),
    ) -> None:
        self._dir = Path(cert_dir) if cert_dir else None
        self._cert = self._dir / cert_name if self._dir else None
        self._key = self._dir / key_name if self._dir else None
        self._service = service
        self._setting = setting
        self._alpn = alpn
        self._pem = ""
        self._lock = threading.Lock()
        self._context: ssl.SSLContext | None = None
        self._stamp: tuple[tuple[int, int], ...] = ()
        self.fingerprint = ""
        """SHA-256 of the certificate served (DER), hex; "" before :meth:`load`."""
        self.self_signed = self._dir is None

    @property
    def certificate_pem(self) -> str:
        """The certificate served (PEM; a chain as the file holds it), "" before
        :meth:`load`."""
        with self._lock:
            return self._pem

    def load(self) -> ServingCertificate:
        """Load the certificate now (or make the self-signed one).

        Raises:
            ServingCertError: what is wrong, with the file names.
        """
        if self._cert is None or self._key is None:
            with self._lock:
                if self._context is None:
                    self._context, self.fingerprint, self._pem = self._self_signed()
            return self
        try:
            stamp = _stamp(self._cert, self._key)
            context = _context(self._cert, self._key, self._alpn)
            pem = self._cert.read_text()
        except (OSError, ssl.SSLError) as exc:
            raise ServingCertError(
                f"{self._setting}.certDir: cannot load {self._cert} and {self._key}: {exc}"
            ) from exc
        with self._lock:
            self._context, self._stamp, self._pem = context, stamp, pem
            self.fingerprint = _fingerprint(pem)
        logger.info(
            f"{self._setting}: serving the mounted certificate",
            extra={"cert": str(self._cert), "sha256": self.fingerprint},
        )
        return self

    def not_ready(self) -> str | None:
        return None

    def trusted_by(self) -> tuple[str, str] | None:
        return None

    def context(self) -> ssl.SSLContext:
        """The TLS context for a new connection (reloaded first when the files changed)."""
        with self._lock:
            context = self._context
        if context is None:
            self.load()
            with self._lock:
                assert self._context is not None
                return self._context
        if self._cert is None or self._key is None:
            return context
        try:
            stamp = _stamp(self._cert, self._key)
        except OSError:
            return context  # being replaced: keep serving the last good one
        if stamp == self._stamp:
            return context
        try:
            fresh = _context(self._cert, self._key, self._alpn)
            pem = self._cert.read_text()
            fingerprint = _fingerprint(pem)
        except (OSError, ssl.SSLError, ValueError) as exc:
            logger.warning(
                f"{self._setting}: the changed certificate cannot be loaded; serving the "
                "previous one",
                extra={"cert": str(self._cert), "error": str(exc)},
            )
            return context
        with self._lock:
            self._context, self._stamp, self.fingerprint = fresh, stamp, fingerprint
            self._pem = pem
        logger.info(
            f"{self._setting}: certificate reloaded",
            extra={"cert": str(self._cert), "sha256": fingerprint},
        )
        return fresh

    def _self_signed(self) -> tuple[ssl.SSLContext, str, str]:
        openssl = shutil.which("openssl")
        setting = self._setting
        if openssl is None:
            raise ServingCertError(
                f"{setting}: no certificate given ({setting}.certDir) and openssl is not "
                "installed to make a self-signed one"
            )
        with tempfile.TemporaryDirectory(prefix=f"overseer-{setting}-tls-") as tmp:
            cert, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
            argv = [
                openssl, "req", "-x509", "-nodes", "-newkey", "ec",
                "-pkeyopt", "ec_paramgen_curve:prime256v1",
                "-keyout", str(key), "-out", str(cert), "-days", "365",
                "-subj", f"/CN={self._service}",
                "-addext", "subjectAltName=" + ",".join(_names(self._service)),
            ]  # fmt: skip
            done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
            if done.returncode != 0:
                raise ServingCertError(
                    f"{setting}: openssl could not make a self-signed certificate: "
                    + (done.stderr.strip() or f"exit {done.returncode}")
                )
            context = _context(cert, key, self._alpn)
            pem = cert.read_text()
            fingerprint = _fingerprint(pem)
        logger.warning(
            f"{setting}: no certificate given ({setting}.certDir): serving a self-signed one "
            "made at start; clients must skip verification or pin it",
            extra={"sha256": fingerprint},
        )
        return context, fingerprint, pem


def _fingerprint(pem: str) -> str:
    """SHA-256 of the first certificate of a PEM file (the leaf of a chain)."""
    end = "-----END CERTIFICATE-----"
    first = pem[: pem.index(end) + len(end)] if end in pem else pem
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(first.strip() + "\n")).hexdigest()

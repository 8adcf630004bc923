"""The serving certificate of the secure metrics server (controller-runtime's
``metricsserver.Options.CertDir`` and its ``certwatcher``).

* With a certificate directory (``metrics.certDir``, e.g. a mounted Secret of type
  ``kubernetes.io/tls`` from cert-manager): ``tls.crt`` and ``tls.key`` there. They are
  read at start and again whenever either file changes (checked per connection, by
  modification time and size), so a rotated certificate is served without a restart; a
  change that cannot be loaded (a half-written pair) keeps the previous one and is logged.
* Without one: a self-signed certificate made at start with ``openssl`` (an ECDSA P-256
  key, valid a year, for ``localhost``, ``127.0.0.1``, the host name and, in a pod, the
  metrics Service's names), logged with its SHA-256 fingerprint. Its files live in a
  private temporary directory only while they are loaded.

TLS 1.2 or later. Thread-safe: one lock guards the current context.
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

from manager.errors import OverseerError

__all__ = ["ServingCertError", "ServingCertificate"]

logger = logging.getLogger(__name__)


class ServingCertError(OverseerError):
    """No usable serving certificate: the files cannot be loaded, or none was given and
    a self-signed one cannot be made."""


def _context(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(str(cert), str(key))
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
    """Where the metrics server's TLS context comes from.

    Args:
        cert_dir: the directory with the certificate and key ("" = self-signed).
        cert_name: the certificate's file name in ``cert_dir``.
        key_name: the key's file name in ``cert_dir``.
        service: the metrics Service's name, for the self-signed certificate's names.
    """

    def __init__(
        self,
        cert_dir: str = "",
        *,
        cert_name: str = "tls.crt",
        key_name: str = "tls.key",
        service: str = "overseer-metrics",
    ) -> None:
        self._dir = Path(cert_dir) if cert_dir else None
        self._cert = self._dir / cert_name if self._dir else None
        self._key = self._dir / key_name if self._dir else None
        self._service = service
        self._lock = threading.Lock()
        self._context: ssl.SSLContext | None = None
        self._stamp: tuple[tuple[int, int], ...] = ()
        self.fingerprint = ""
        """SHA-256 of the certificate served (DER), hex; "" before :meth:`load`."""
        self.self_signed = self._dir is None

    def load(self) -> ServingCertificate:
        """Load the certificate now (or make the self-signed one).

        Raises:
            ServingCertError: what is wrong, with the file names.
        """
        if self._cert is None or self._key is None:
            with self._lock:
                if self._context is None:
                    self._context, self.fingerprint = self._self_signed()
            return self
        try:
            stamp = _stamp(self._cert, self._key)
            context = _context(self._cert, self._key)
        except (OSError, ssl.SSLError) as exc:
            raise ServingCertError(
                f"metrics.certDir: cannot load {self._cert} and {self._key}: {exc}"
            ) from exc
        with self._lock:
            self._context, self._stamp = context, stamp
            self.fingerprint = _fingerprint(self._cert.read_text())
        logger.info(
            "metrics: serving the mounted certificate",
            extra={"cert": str(self._cert), "sha256": self.fingerprint},
        )
        return self

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
            fresh = _context(self._cert, self._key)
            fingerprint = _fingerprint(self._cert.read_text())
        except (OSError, ssl.SSLError, ValueError) as exc:
            logger.warning(
                "metrics: the changed certificate cannot be loaded; serving the previous one",
                extra={"cert": str(self._cert), "error": str(exc)},
            )
            return context
        with self._lock:
            self._context, self._stamp, self.fingerprint = fresh, stamp, fingerprint
        logger.info(
            "metrics: certificate reloaded",
            extra={"cert": str(self._cert), "sha256": fingerprint},
        )
        return fresh

    def _self_signed(self) -> tuple[ssl.SSLContext, str]:
        openssl = shutil.which("openssl")
        if openssl is None:
            raise ServingCertError(
                "metrics.secure: no certificate given (metrics.certDir) and openssl is not "
                "installed to make a self-signed one"
            )
        with tempfile.TemporaryDirectory(prefix="overseer-metrics-tls-") as tmp:
            cert, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
            argv = [
                openssl, "req", "-x509", "-nodes", "-newkey", "ec",
                "-pkeyopt", "ec_paramgen_curve:prime256v1",
                "-keyout", str(key), "-out", str(cert), "-days", "365",
                "-subj", "/CN=overseer-metrics",
                "-addext", "subjectAltName=" + ",".join(_names(self._service)),
            ]  # fmt: skip
            done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
            if done.returncode != 0:
                raise ServingCertError(
                    "metrics.secure: openssl could not make a self-signed certificate: "
                    + (done.stderr.strip() or f"exit {done.returncode}")
                )
            context = _context(cert, key)
            fingerprint = _fingerprint(cert.read_text())
        logger.warning(
            "metrics: no certificate given (metrics.certDir): serving a self-signed one "
            "made at start; scrapers must skip verification or pin it",
            extra={"sha256": fingerprint},
        )
        return context, fingerprint


def _fingerprint(pem: str) -> str:
    """SHA-256 of the first certificate of a PEM file (the leaf of a chain)."""
    end = "-----END CERTIFICATE-----"
    first = pem[: pem.index(end) + len(end)] if end in pem else pem
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(first.strip() + "\n")).hexdigest()

"""The cluster's root CA: a self-signed CA certificate the local API server makes at start.

A kube-apiserver cluster has a CA (kubeadm's ``/etc/kubernetes/pki/ca.crt``, CN
``kubernetes``, ten years) that kube-controller-manager's root-ca publisher
(``pkg/controller/certificates/rootcacertpublisher``) puts in every namespace as the
``kube-root-ca.crt`` ConfigMap, and that pods mount to verify the API server. The local
server makes one with ``openssl`` (as ``manager/servingcert.py`` does; the
``cryptography`` package is not a dependency): an ECDSA P-256 key and a self-signed
certificate with ``basicConstraints=CA:TRUE``. It serves plain HTTP, so nothing it
serves is signed by this CA yet; the key is kept for whoever signs with it.

Thread-safety: :func:`generate` is a pure function (it runs one ``openssl`` process in a
temporary directory); a :class:`RootCA` is immutable.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = ["RootCA", "RootCAError", "generate"]

COMMON_NAME: Final = "kubernetes"  # kubeadm's CA subject
VALID_DAYS: Final = 3650  # kubeadm's CA validity: ten years


class RootCAError(RuntimeError):
    """The CA could not be made (no ``openssl``, or it failed)."""


@dataclass(frozen=True, slots=True)
class RootCA:
    """A CA: its certificate and private key, both PEM."""

    cert_pem: str
    key_pem: str


def generate(common_name: str = COMMON_NAME, *, days: int = VALID_DAYS) -> RootCA:
    """Make a new self-signed CA.

    Raises:
        RootCAError: ``openssl`` is not installed or could not make the certificate.
    """
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RootCAError(
            "local API server: openssl is not installed to make the cluster CA (kube-root-ca.crt)"
        )
    with tempfile.TemporaryDirectory(prefix="overseer-apiserver-ca-") as tmp:
        cert, key = Path(tmp) / "ca.crt", Path(tmp) / "ca.key"
        argv = [
            openssl, "req", "-x509", "-nodes", "-newkey", "ec",
            "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-keyout", str(key), "-out", str(cert), "-days", str(days),
            "-subj", f"/CN={common_name}",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,digitalSignature,keyEncipherment,keyCertSign",
        ]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise RootCAError(
                "local API server: openssl could not make the cluster CA: "
                + (done.stderr.strip() or f"exit {done.returncode}")
            )
        return RootCA(cert_pem=cert.read_text(), key_pem=key.read_text())

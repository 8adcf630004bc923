"""The metrics server's certificate: a mounted pair is loaded, and reloaded when it
changes (a broken change keeps the previous one); missing files are a clear error; with
no directory a self-signed certificate is made (openssl)."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path

import pytest

from manager.servingcert import ServingCertError, ServingCertificate

pytestmark = pytest.mark.skipif(
    shutil.which("openssl") is None, reason="openssl is not installed (it makes test certificates)"
)


def _make_pair(directory: Path, cn: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            "openssl", "req", "-x509", "-nodes", "-newkey", "ec",
            "-pkeyopt", "ec_paramgen_curve:prime256v1", "-days", "1", "-subj", f"/CN={cn}",
            "-keyout", str(directory / "tls.key"), "-out", str(directory / "tls.crt"),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip


def test_a_mounted_pair_is_served_and_reloaded_when_it_changes(tmp_path: Path) -> None:
    certs = tmp_path / "certs"
    _make_pair(certs, "first")
    cert = ServingCertificate(str(certs)).load()
    first = cert.fingerprint
    assert not cert.self_signed and len(first) == 64
    context = cert.context()
    assert isinstance(context, ssl.SSLContext)
    assert cert.context() is context  # unchanged files: the same context
    _make_pair(tmp_path / "next", "second")
    for name in ("tls.crt", "tls.key"):
        shutil.copy(tmp_path / "next" / name, certs / name)
    rotated = cert.context()
    assert rotated is not context
    assert cert.fingerprint not in ("", first)
    # a half-written pair: the previous certificate stays
    (certs / "tls.key").write_text("-----BEGIN PRIVATE KEY-----\ntruncated\n")
    assert cert.context() is rotated


def test_missing_files_name_the_setting_and_the_path(tmp_path: Path) -> None:
    with pytest.raises(ServingCertError) as error:
        ServingCertificate(str(tmp_path / "nowhere")).load()
    assert "metrics.certDir: cannot load" in str(error.value)
    assert str(tmp_path / "nowhere" / "tls.crt") in str(error.value)


def test_without_a_directory_a_self_signed_certificate_is_made() -> None:
    cert = ServingCertificate().load()
    assert cert.self_signed and len(cert.fingerprint) == 64
    assert isinstance(cert.context(), ssl.SSLContext)

"""A tiny HTTPS webhook in the test process, for the admission and conversion webhook
conformance tests (tests/integration/test_apiserver_webhooks.py).

The server listens on ``127.0.0.1`` with a certificate signed by a CA of its own (made
with ``openssl``, as ``manager/servingcert.py`` makes one), valid for ``127.0.0.1``,
``localhost`` and any service names asked for (``<service>.<namespace>.svc``, the name an
API server checks when it calls a webhook through a Service). The API server calls it at
``url: https://127.0.0.1:<port>/<path>`` with ``caBundle`` set to :attr:`ca_bundle`: that
works with the local API server and with a real kube-apiserver on the same machine.

Each path answers with a script (a function of the review it receives); every call is
recorded. Reviews of the objects a cluster's own controllers write into a new namespace
(its ``kube-root-ca.crt`` ConfigMap) are allowed without a script and not recorded: on a
real cluster they may arrive while a test's webhook is active. Thread-safe: the API
server may call several webhooks at once.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

JsonDict = dict[str, Any]


@dataclass(frozen=True)
class Reply:
    """A raw answer (not a review): a status, a body, after a delay in seconds."""

    status: int = 200
    body: bytes = b""
    delay: float = 0.0
    close: bool = False  # answer with Connection: close (and close it)


Script = Callable[[JsonDict], "JsonDict | Reply"]

# objects kube-controller-manager writes in every namespace (not the tests')
IGNORED_NAMES = frozenset({"kube-root-ca.crt"})


@dataclass(frozen=True)
class Call:
    """One call the webhook received: its path, query and the review sent."""

    path: str
    query: dict[str, str]
    review: JsonDict

    @property
    def request(self) -> JsonDict:
        return dict(self.review.get("request") or {})


@dataclass(frozen=True)
class Certificates:
    """A CA (PEM) and a server TLS context serving a certificate it signed."""

    ca_pem: bytes
    context: ssl.SSLContext


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"openssl failed: {done.stderr.strip()}")


def make_certificates(names: Iterable[str] = ()) -> Certificates:
    """A new CA and a serving certificate for 127.0.0.1, localhost and ``names``."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError("openssl is needed to make the test webhook's certificates")
    with tempfile.TemporaryDirectory(prefix="overseer-test-webhook-") as tmp:
        return _make(openssl, Path(tmp), names)


def _make(openssl: str, d: Path, names: Iterable[str]) -> Certificates:
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _run([
        openssl, "req", "-x509", *ec, "-keyout", str(d / "ca.key"), "-out", str(d / "ca.crt"),
        "-days", "2", "-subj", "/CN=overseer-test-webhook-ca",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    ])  # fmt: skip
    _run([
        openssl, "req", "-new", *ec, "-keyout", str(d / "tls.key"), "-out", str(d / "tls.csr"),
        "-subj", "/CN=overseer-test-webhook",
    ])  # fmt: skip
    sans = ["IP:127.0.0.1", "DNS:localhost", *(f"DNS:{n}" for n in names)]
    (d / "ext.cnf").write_text(
        f"subjectAltName={','.join(sans)}\n"
        "basicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature\n"
        "extendedKeyUsage=serverAuth\n"
    )
    _run([
        openssl, "x509", "-req", "-in", str(d / "tls.csr"), "-CA", str(d / "ca.crt"),
        "-CAkey", str(d / "ca.key"), "-CAcreateserial", "-out", str(d / "tls.crt"),
        "-days", "2", "-extfile", str(d / "ext.cnf"),
    ])  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(d / "tls.crt", d / "tls.key")
    return Certificates((d / "ca.crt").read_bytes(), context)


@functools.cache
def _shared_certificates() -> Certificates:
    """The certificates of servers that need no service name (made once per session)."""
    return make_certificates()


class WebhookServer:
    """An HTTPS server answering admission and conversion reviews by script.

    Use as a context manager; :meth:`close` stops it and joins its threads.
    """

    def __init__(
        self, service_names: Iterable[str] = (), *, certificates_of: WebhookServer | None = None
    ) -> None:
        names = tuple(service_names)
        if certificates_of is not None:  # two endpoints of one Service: one caBundle
            self._certs = certificates_of._certs
        else:
            self._certs = make_certificates(names) if names else _shared_certificates()
        self._lock = threading.Lock()
        self._scripts: dict[str, Script] = {}
        self._calls: list[Call] = []
        self._closing = threading.Event()
        self._open: set[socket.socket] = set()
        self.connections = 0  # connections accepted so far (kept alive: HTTP/1.1)
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out at once

            def setup(self) -> None:
                super().setup()
                with owner._lock:
                    owner.connections += 1
                    owner._open.add(self.connection)

            def finish(self) -> None:
                with owner._lock:
                    owner._open.discard(self.connection)
                super().finish()

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                owner._serve(self)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
        self._httpd.daemon_threads = False
        self._httpd.block_on_close = True
        self._httpd.server_bind()
        self._httpd.server_activate()
        self._httpd.socket = self._certs.context.wrap_socket(self._httpd.socket, server_side=True)
        self.port = int(self._httpd.server_address[1])
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="test-webhook-server",
        )
        self._thread.start()

    # -- configuration -------------------------------------------------------------------

    @property
    def ca_bundle(self) -> str:
        """The CA that signed the serving certificate, base64 (a ``caBundle``)."""
        return base64.b64encode(self._certs.ca_pem).decode()

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def client_config(self, path: str) -> JsonDict:
        """A ``clientConfig`` calling ``path`` of this server by URL."""
        return {"url": self.url(path), "caBundle": self.ca_bundle}

    def route(self, path: str, script: Script) -> None:
        """Answer POSTs to ``path`` with ``script(review)``."""
        with self._lock:
            self._scripts[path] = script

    def calls(self, path: str | None = None) -> list[Call]:
        """The calls received so far (to ``path`` only, if given), oldest first."""
        with self._lock:
            return [c for c in self._calls if path is None or c.path == path]

    def clear(self) -> None:
        with self._lock:
            self._calls.clear()

    def drop_connections(self) -> None:
        """Close every open connection (as a webhook that restarts closes them), and wait
        until their threads have seen it."""
        with self._lock:
            open_ = list(self._open)
        for sock in open_:
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            with self._lock:
                if not self._open & set(open_):
                    return
            time.sleep(0.01)

    # -- serving -----------------------------------------------------------------------

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        split = urlsplit(handler.path)
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            review = json.loads(raw or b"{}")
        except ValueError:
            review = {}
        query = {k: v[-1] for k, v in parse_qs(split.query).items()}
        answer: JsonDict | Reply
        if (review.get("request") or {}).get("name") in IGNORED_NAMES:
            answer = allow(review)
        else:
            with self._lock:
                script = self._scripts.get(split.path)
                self._calls.append(Call(split.path, query, review))
            answer = Reply(404, b"no script") if script is None else script(review)
        if isinstance(answer, Reply):
            if answer.delay and self._closing.wait(answer.delay):
                return
            status, body, ctype = answer.status, answer.body, "text/plain"
            if answer.close:
                handler.close_connection = True
                ctype = "application/json"
        else:
            status, body, ctype = 200, json.dumps(answer).encode(), "application/json"
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", ctype)
            handler.send_header("Content-Length", str(len(body)))
            if handler.close_connection:
                handler.send_header("Connection", "close")
            handler.end_headers()
            handler.wfile.write(body)
        except OSError:  # the API server gave up (a timeout): nobody listens
            handler.close_connection = True

    def close(self) -> None:
        """Stop: API servers keep connections alive (kube-apiserver for 90 s), so the
        open ones are closed rather than waited for."""
        self._closing.set()
        self._httpd.shutdown()
        self.drop_connections()
        self._httpd.server_close()
        self._thread.join()

    def __enter__(self) -> WebhookServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- admission review answers ------------------------------------------------------------


def _response(review: JsonDict, allowed: bool, **fields: Any) -> JsonDict:
    request = review.get("request") or {}
    return {
        "apiVersion": review.get("apiVersion", "admission.k8s.io/v1"),
        "kind": "AdmissionReview",
        "response": {"uid": request.get("uid", ""), "allowed": allowed, **fields},
    }


def allow(review: JsonDict, **fields: Any) -> JsonDict:
    """An AdmissionReview allowing the request (extra response fields: warnings, ...)."""
    return _response(review, True, **fields)


def deny(review: JsonDict, **status: Any) -> JsonDict:
    """An AdmissionReview refusing the request with ``status`` (code, message, reason)."""
    return _response(review, False, status=status) if status else _response(review, False)


def patch(review: JsonDict, operations: list[JsonDict], **fields: Any) -> JsonDict:
    """An AdmissionReview allowing the request with a JSONPatch."""
    encoded = base64.b64encode(json.dumps(operations).encode()).decode()
    return _response(review, True, patchType="JSONPatch", patch=encoded, **fields)


def converted(review: JsonDict, convert: Callable[[JsonDict, str], JsonDict]) -> JsonDict:
    """A ConversionReview answer: each object of the request through ``convert``."""
    request = review.get("request") or {}
    desired = str(request.get("desiredAPIVersion", ""))
    return {
        "apiVersion": review.get("apiVersion", "apiextensions.k8s.io/v1"),
        "kind": "ConversionReview",
        "response": {
            "uid": request.get("uid", ""),
            "result": {"status": "Success"},
            "convertedObjects": [convert(o, desired) for o in request.get("objects") or []],
        },
    }

"""Calling a webhook over HTTPS, as kube-apiserver's webhook client does.

A port of ``staging/src/k8s.io/apiserver/pkg/util/webhook`` (``client.go``: a client
config is a ``url`` or a ``service``; ``serviceresolver.go``) and of how client-go's REST
client words a failed POST, so that kube's error messages come out the same:

* ``url``: POSTed to as given; a deadline adds ``?timeout=<seconds>s`` (client-go's
  ``Request.Timeout``), which the webhook may read.
* ``service`` (namespace, name, path, port 443 by default): the TLS server name is
  ``<name>.<namespace>.svc`` and the URL shown in errors ``https://<name>.<namespace>.svc:
  <port><path>``, as kube's. Where a connection goes: kube-apiserver (without
  ``--enable-aggregator-routing``) dials the Service's ClusterIP and kube-proxy sends each
  new connection to one ready endpoint; there is no kube-proxy here, so a ClusterIP,
  NodePort or LoadBalancer Service's new connection goes to one ready endpoint of its
  EndpointSlices, chosen at random (the port named as the Service port numbered
  ``port``), and stays there while it is kept alive; an ExternalName Service is dialed
  at its ``externalName`` and ``port``, as kube's default resolver does.
* TLS: the ``caBundle`` (PEM, base64 in the API) verifies the webhook's certificate
  (the system's roots without one), HTTP/1.1 only.
* **Connections are kept alive**, as client-go's transport (Go's ``http.Transport``)
  keeps them: a review goes on the most recently used idle connection to the same
  URL host (or Service) and CA, else on a new one; at most 25 idle connections per
  host (client-go's ``MaxIdleConnsPerHost``), each closed after 90 s idle. A connection
  the webhook has closed is never reused (Go's read loop sees the close and drops it),
  an answer with ``Connection: close`` closes it, and a review whose connection breaks
  before any of it was sent on a reused connection goes again on a new one (Go's
  ``nothingWrittenError`` retry). Nothing else is retried: a review sent, then answered
  by a closed connection, fails (``EOF``), as a POST does in Go.

Failures raise :class:`CallError` with Go's text: ``Post "<url>": dial tcp
127.0.0.1:1: connect: connection refused``, ``... context deadline exceeded``,
``... tls: failed to verify certificate: x509: certificate signed by unknown authority``;
an answer that is not 2xx becomes the Status client-go makes of it (its message alone).

Thread-safety: TLS contexts and idle connections are kept under a lock; a connection
is used by one call at a time.
"""

from __future__ import annotations

import base64
import binascii
import http.client
import random
import select
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any, Final, Protocol
from urllib.parse import urlsplit

import orjson

from apiserver.api.errors import StatusError

__all__ = [
    "CallError",
    "ClientConfig",
    "Service",
    "Storage",
    "WebhookClient",
    "go_duration",
]

JsonDict = dict[str, Any]

SERVICES: Final = "/services"
ENDPOINT_SLICES: Final = "discovery.k8s.io/endpointslices"
_SERVICE_NAME_LABEL: Final = "kubernetes.io/service-name"
_MAX_TEXT: Final = 2048  # client-go's maxUnstructuredResponseTextBytes
_USER_AGENT: Final = "kube-apiserver-admission"
MAX_IDLE_PER_HOST: Final = 25  # client-go's transport (utilnet.SetTransportDefaults)
IDLE_TIMEOUT: Final = 90.0  # seconds: Go's DefaultTransport.IdleConnTimeout


class Storage(Protocol):
    """Where Services and EndpointSlices are read."""

    def get(self, key: tuple[str, str, str]) -> JsonDict | None: ...

    def list(self, key: str, namespace: str | None = None) -> list[JsonDict]: ...


@dataclass(frozen=True, slots=True)
class Service:
    """``clientConfig.service``."""

    namespace: str
    name: str
    path: str = ""
    port: int = 443


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """A ``clientConfig``: a ``url`` or a ``service``, and the ``caBundle`` (PEM)."""

    url: str = ""
    ca_bundle: bytes = b""
    service: Service | None = None

    @classmethod
    def from_api(cls, raw: Any) -> ClientConfig:
        """From the API's JSON (``caBundle`` is base64)."""
        raw = raw if isinstance(raw, dict) else {}
        try:
            ca = base64.b64decode(str(raw.get("caBundle") or ""), validate=True)
        except (binascii.Error, ValueError):
            ca = b""
        svc = raw.get("service")
        service = None
        if isinstance(svc, dict):
            service = Service(
                str(svc.get("namespace") or ""),
                str(svc.get("name") or ""),
                str(svc.get("path") or ""),
                int(svc.get("port") or 443),
            )
        return cls(str(raw.get("url") or ""), ca, service)


class CallError(Exception):
    """The POST failed. The text is what client-go's error says; ``status`` is the Status
    of an error answer (None for a failure to get one)."""

    def __init__(self, text: str, status: StatusError | None = None) -> None:
        super().__init__(text)
        self.text = text
        self.status = status


def go_duration(seconds: float) -> str:
    """Go's ``time.Duration.String()`` of whole seconds below an hour (``5s``, ``1m0s``)."""
    whole = int(seconds)
    minutes, secs = divmod(whole, 60)
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


@dataclass(frozen=True, slots=True)
class _Target:
    shown: str  # the URL as Go prints it (with ?timeout=)
    server_name: str  # TLS server name (and Host header)
    port: int
    request_path: str  # path and query sent


class _Idle:
    """A kept-alive connection waiting for its next review."""

    __slots__ = ("conn", "since")

    def __init__(self, conn: http.client.HTTPConnection) -> None:
        self.conn = conn
        self.since = time.monotonic()

    def usable(self) -> bool:
        """Not idle too long, and not closed by the webhook: an idle connection has
        nothing to read unless its peer closed it (or sent what nobody asked for)."""
        sock = self.conn.sock
        if sock is None or time.monotonic() - self.since > IDLE_TIMEOUT:
            return False
        try:
            readable, _, _ = select.select([sock], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable


class _Deadline:
    def __init__(self, timeout: float) -> None:
        self.end = time.monotonic() + timeout

    def left(self) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            raise TimeoutError
        return left


class WebhookClient:
    """POSTs to webhooks (admission and conversion)."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        self._lock = threading.Lock()
        self._contexts: dict[bytes, ssl.SSLContext] = {}
        self._idle: dict[tuple[Any, ...], list[_Idle]] = {}

    def close(self) -> None:
        """Close every idle connection."""
        with self._lock:
            idle, self._idle = self._idle, {}
        for waiting in idle.values():
            for entry in waiting:
                entry.conn.close()

    def post(self, config: ClientConfig, body: bytes, *, timeout: float, query: bool) -> bytes:
        """POST ``body`` (JSON); the body of a 2xx answer. ``query``: tell the webhook
        the timeout (``?timeout=``), as admission webhooks are told.

        Raises:
            CallError: the webhook could not be called, or answered an error.
        """
        target = self._target(config, timeout if query else None)
        deadline = _Deadline(timeout)
        try:
            return self._post(config, target, body, deadline)
        except TimeoutError:
            raise CallError(f'Post "{target.shown}": context deadline exceeded') from None

    # -- where ---------------------------------------------------------------------------

    @staticmethod
    def _target(config: ClientConfig, timeout: float | None) -> _Target:
        suffix = f"?timeout={go_duration(timeout)}" if timeout is not None else ""
        if config.service is not None:
            svc = config.service
            name = f"{svc.name}.{svc.namespace}.svc"
            path = svc.path
            return _Target(
                f"https://{name}:{svc.port}{path}{suffix}", name, svc.port, (path or "/") + suffix
            )
        if not config.url:
            raise CallError("webhook configuration must have either service or URL")
        try:
            split = urlsplit(config.url)
            port = split.port or 443
        except ValueError as exc:
            raise CallError(f"Unparsable URL: {exc}") from None
        host = split.hostname or ""
        path = split.path
        return _Target(
            f"{split.scheme}://{split.netloc}{path}{suffix}", host, port, (path or "/") + suffix
        )

    def _resolve(self, config: ClientConfig, target: _Target) -> tuple[str, int]:
        """The host and port to dial."""
        svc = config.service
        if svc is None:
            return target.server_name, target.port
        obj = self._storage.get((SERVICES, svc.namespace, svc.name))
        if obj is None:
            raise _Dial(f'service "{svc.name}" not found')
        spec = obj.get("spec") or {}
        kind = spec.get("type") or "ClusterIP"
        if kind == "ExternalName":
            return str(spec.get("externalName") or ""), svc.port
        if kind not in ("ClusterIP", "NodePort", "LoadBalancer"):
            raise _Dial(f'unsupported service type "{kind}"')
        port_name = None
        for port in spec.get("ports") or []:
            if int(port.get("port") or 0) == svc.port:
                port_name = str(port.get("name") or "")
                break
        if port_name is None:
            raise _Dial(f'no service port {svc.port} found for service "{svc.name}"')
        candidates: list[tuple[str, int]] = []
        for eps in self._storage.list(ENDPOINT_SLICES, svc.namespace):
            labels = (eps.get("metadata") or {}).get("labels") or {}
            if labels.get(_SERVICE_NAME_LABEL) != svc.name:
                continue
            ports = [p for p in eps.get("ports") or [] if str(p.get("name") or "") == port_name]
            if not ports or ports[0].get("port") is None:
                continue
            number = int(ports[0]["port"])
            for endpoint in eps.get("endpoints") or []:
                if (endpoint.get("conditions") or {}).get("ready") is False:
                    continue
                candidates.extend((str(a), number) for a in endpoint.get("addresses") or [])
        if not candidates:
            raise _Dial(f'no endpoints available for service "{svc.name}"')
        return random.choice(candidates)

    # -- how -----------------------------------------------------------------------------

    def _context(self, ca: bytes) -> ssl.SSLContext:
        with self._lock:
            context = self._contexts.get(ca)
            if context is None:
                if ca:
                    try:
                        context = ssl.create_default_context(cadata=ca.decode("ascii", "replace"))
                    except (ssl.SSLError, ValueError):
                        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # trusts nothing
                else:
                    context = ssl.create_default_context()
                context.set_alpn_protocols(["http/1.1"])
                if len(self._contexts) > 64:
                    self._contexts.clear()
                self._contexts[ca] = context
            return context

    @staticmethod
    def _pool_key(config: ClientConfig, target: _Target) -> tuple[Any, ...]:
        svc = config.service
        where: tuple[Any, ...] = (
            ("service", svc.namespace, svc.name, svc.port)
            if svc is not None
            else ("url", target.server_name, target.port)
        )
        return (*where, config.ca_bundle)

    def _take(self, key: tuple[Any, ...]) -> http.client.HTTPConnection | None:
        """The most recently used idle connection for ``key`` that is still usable."""
        stale: list[_Idle] = []
        found = None
        with self._lock:
            waiting = self._idle.get(key)
            while waiting:
                entry = waiting.pop()
                if entry.usable():
                    found = entry.conn
                    break
                stale.append(entry)
        for entry in stale:
            entry.conn.close()
        return found

    def _give_back(self, key: tuple[Any, ...], conn: http.client.HTTPConnection) -> None:
        with self._lock:
            waiting = self._idle.setdefault(key, [])
            waiting.append(_Idle(conn))
            extra = waiting[: max(0, len(waiting) - MAX_IDLE_PER_HOST)]  # the oldest
            del waiting[: len(extra)]
        for entry in extra:
            entry.conn.close()

    def _connect(
        self, config: ClientConfig, target: _Target, deadline: _Deadline
    ) -> http.client.HTTPConnection:
        shown = target.shown
        try:
            host, port = self._resolve(config, target)
            sock = _dial(host, port, deadline)
        except _Dial as exc:
            raise CallError(f'Post "{shown}": {exc}') from None
        try:
            sock.settimeout(deadline.left())
            tls = self._context(config.ca_bundle).wrap_socket(
                sock, server_hostname=target.server_name
            )
        except ssl.SSLCertVerificationError as exc:
            sock.close()
            raise CallError(
                f'Post "{shown}": tls: failed to verify certificate: '
                f"{_x509(exc, target.server_name)}"
            ) from None
        except ssl.SSLError as exc:
            sock.close()
            raise CallError(f'Post "{shown}": remote error: tls: {exc.reason or exc}') from None
        except TimeoutError:
            sock.close()
            raise
        except OSError as exc:  # the webhook went away during the handshake
            sock.close()
            raise CallError(f'Post "{shown}": {_handshake_error(exc)}') from None
        except BaseException:
            sock.close()
            raise
        # plain HTTPConnection over the TLS socket made above (HTTPSConnection would
        # load the system's CAs on every call)
        conn = http.client.HTTPConnection(target.server_name, target.port)
        conn.sock = tls
        return conn

    def _post(
        self, config: ClientConfig, target: _Target, body: bytes, deadline: _Deadline
    ) -> bytes:
        shown = target.shown
        key = self._pool_key(config, target)
        while True:
            conn = self._take(key)
            reused = conn is not None
            if conn is None:
                conn = self._connect(config, target, deadline)
            assert conn.sock is not None
            try:
                conn.sock.settimeout(deadline.left())
                try:
                    conn.request(
                        "POST",
                        target.request_path,
                        body=body,
                        headers={
                            "Content-Type": "application/json",
                            "Accept": "application/json, */*",
                            "User-Agent": _USER_AGENT,
                        },
                    )
                except (ConnectionError, OSError):
                    if reused:  # broken before the review went out: again, on a new one
                        conn.close()
                        continue
                    raise
                assert conn.sock is not None
                conn.sock.settimeout(deadline.left())
                resp = conn.getresponse()
                data = resp.read()
            except TimeoutError:
                conn.close()
                raise TimeoutError from None
            except (http.client.HTTPException, ConnectionError, OSError) as exc:
                conn.close()
                raise CallError(f'Post "{shown}": {_go_io_error(exc)}') from None
            except BaseException:
                conn.close()
                raise
            if resp.will_close or conn.sock is None:
                conn.close()
            else:
                self._give_back(key, conn)
            break
        if 200 <= resp.status <= 206:
            return data
        raise _status_error(resp.status, resp.getheader("Content-Type") or "", data)


class _Dial(Exception):
    """A failure before the TLS handshake, worded as Go's dialer words it."""


def _dial(host: str, port: int, deadline: _Deadline) -> socket.socket:
    """Connect to ``host:port`` (every address of a name, in order)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        raise _Dial(f"dial tcp: lookup {host}: no such host") from None
    last = ""
    for family, kind, proto, _name, address in infos:
        ip, number = str(address[0]), int(address[1])
        shown = f"[{ip}]:{number}" if family == socket.AF_INET6 else f"{ip}:{number}"
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(deadline.left())
            sock.connect(address)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as Go's dialer
            return sock
        except TimeoutError:
            sock.close()
            raise TimeoutError from None
        except ConnectionRefusedError:
            last = f"dial tcp {shown}: connect: connection refused"
        except OSError as exc:
            last = f"dial tcp {shown}: connect: {(exc.strerror or str(exc)).lower()}"
        sock.close()
    raise _Dial(last or f"dial tcp: lookup {host}: no such host")


def _x509(exc: ssl.SSLCertVerificationError, name: str) -> str:
    """An OpenSSL verification failure as Go's x509 package words it."""
    code = getattr(exc, "verify_code", 0)
    if code in (62, 64):  # X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH
        return f"x509: certificate is not valid for {name}"
    if code in (9, 10):  # not yet valid, expired
        return "x509: certificate has expired or is not yet valid"
    return "x509: certificate signed by unknown authority"


def _handshake_error(exc: OSError) -> str:
    """A transport failure during the TLS handshake, as Go words it."""
    if isinstance(exc, ConnectionResetError):
        return "read: connection reset by peer"
    if exc.errno is None:  # the peer closed: OpenSSL's unexpected EOF
        return "EOF"
    return str(exc.strerror or exc).lower()


def _go_io_error(exc: BaseException) -> str:
    if isinstance(exc, http.client.RemoteDisconnected | ConnectionResetError | BrokenPipeError):
        return "EOF"
    if isinstance(exc, http.client.HTTPException):
        return f"net/http: {exc}"
    return str(getattr(exc, "strerror", None) or exc).lower()


# client-go's NewGenericServerResponse messages by status code
_GENERIC: Final = {
    400: ("BadRequest", "the server rejected our request for an unknown reason"),
    401: ("Unauthorized", "the server has asked for the client to provide credentials"),
    404: ("NotFound", "the server could not find the requested resource"),
    405: ("MethodNotAllowed", "the server does not allow this method on the requested resource"),
    409: ("AlreadyExists", "the server reported a conflict"),
    422: ("Invalid", "the server rejected our request due to an error in our request"),
    429: (
        "TooManyRequests",
        "the server has received too many requests and has asked us to try again later",
    ),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
    504: (
        "Timeout",
        "the server was unable to return a response in the time allotted, but may still be "
        "processing the request",
    ),
}


def _status_error(code: int, content_type: str, data: bytes) -> CallError:
    """What client-go makes of an error answer: its Status if it sent one, else a
    generic one by code (``newUnstructuredResponseError``)."""
    try:
        sent = orjson.loads(data)
    except orjson.JSONDecodeError:
        sent = None
    if isinstance(sent, dict) and sent.get("kind") == "Status":
        message = str(sent.get("message") or "")
        status = StatusError(
            int(sent.get("code") or code),
            str(sent.get("reason") or ""),
            message,
            sent.get("details"),
        )
        return CallError(message, status)
    text = "unknown"
    if content_type.split(";", maxsplit=1)[0].strip().lower() == "text/plain":
        text = data[:_MAX_TEXT].decode("utf-8", "replace").strip()
    unknown = (
        f"the server responded with the status code {code} but did not return more information"
    )
    reason, message = _GENERIC.get(code, ("", unknown))
    if code in (403, 415):
        message = text
    elif code == 406:
        message = (
            "the server was unable to respond with a content type that the client supports"
            if text in ("", "unknown")
            else text
        )
    elif code >= 500 and code not in _GENERIC:
        reason = "InternalError"
        message = f'an error on the server ("{text}") has prevented the request from succeeding'
    details = {"causes": [{"reason": "UnexpectedServerResponse", "message": text}]}
    return CallError(message, StatusError(code, reason, message, details))

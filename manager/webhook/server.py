"""The webhook server: admission and conversion reviews over HTTPS (controller-runtime
``pkg/webhook.Server``).

* **Every replica serves**: admission is not leader work. The manager starts the server
  with its HTTP servers, before anything can make the replica ready (readiness check
  ``webhook-server``: a TLS handshake with the server, as controller-runtime's
  ``StartedChecker`` dials it), and stops it last, after the controllers, the caches and
  the other servers, so that a replica that is still an endpoint answers.
* **HTTPS only**, TLS 1.2 or later, ALPN ``http/1.1``: kube-apiserver speaks HTTP/1.1 to
  webhooks (:mod:`manager.webhook.wire`) and keeps connections alive. The certificate is
  ``certDir``'s pair, reloaded when it changes (a rotation: connections open keep
  theirs, new ones get the new certificate), or a self-signed one made at start
  (:class:`~manager.servingcert.ServingCertificate`), or the managed one: a CA and a
  certificate the leader keeps in a Secret that every replica watches
  (:mod:`manager.webhook.certificates`); until that Secret is there, connections are
  closed after accept and the replica is not ready. With a certificate whose CA bundle is
  known (the managed one), readiness is a handshake that verifies the certificate as
  an API server does: against the bundle, for the Service's DNS name.
* **One thread per connection** reads a request, runs the handler and writes the answer:
  no hand-over between threads on the way. At most ``max_concurrent`` reviews run at
  once; a request waits for a slot until its deadline (the API server's
  ``?timeout=10s``; 30 s without one) and is then answered 429 (the API server applies
  the webhook's failurePolicy). At most 1,024 connections; an idle one is closed after
  120 s (longer than client-go's 90 s idle timeout, so the client closes first).
* **A handler that outlives the request's deadline** is not interrupted (a Python
  thread cannot be): its answer is written late, when the API server has given up on it
  (``overseer_webhook_late_answers_total``, a warning with the time it took), and it
  holds one of the ``max_concurrent`` slots meanwhile. When slow handlers hold every
  slot, reviews are answered 429 at their deadline: bounded, and the failurePolicy
  decides.
* **Malformed requests** (not a review, another kind or version, no request or uid, a
  content type other than JSON, not a POST, an unknown path) are answered 400 (404, 405,
  413) with a ``Status`` naming the problem, which kube-apiserver logs with the failed
  call; the connection and the server go on.
* **Shutdown** (:meth:`WebhookServer.stop`): first a drain for ``linger`` seconds, in
  which new connections are still accepted and answered but every answer says
  ``Connection: close`` (the API server reconnects, through the Service, to a pod that
  stays). Kept-alive connections are not closed under their clients meanwhile: a review
  sent just as the server closed one would be lost, since kube-apiserver does not resend
  a POST that went out (Go's ``http.Server.Shutdown`` closes them at once); each one's
  next answer closes it. Then the listener and the connections left idle close,
  in-flight reviews finish (up to ``timeout``), and every thread is joined.

Metrics: :mod:`manager.webhook.metrics`, attached while the server runs. Each review runs
in a span ``webhook.review``, the child of the API server's when it sends a
``traceparent`` (kube-apiserver with tracing on), and handlers log with the webhook,
operation, namespace, name and request uid in their context.

Thread-safe: routes are replaced whole under a lock (a webhook may be added while the
server runs); each connection belongs to its thread.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import orjson
from opentelemetry import propagate, trace

from manager.healthz import BindError
from manager.servingcert import CertificateSource, ServingCertError, ServingCertificate
from manager.webhook.admission import REASONS, BadReview, review
from manager.webhook.configuration import InvalidWebhook, MutatingWebhook, ValidatingWebhook
from manager.webhook.conversion import Conversion, convert
from manager.webhook.metrics import (
    IN_FLIGHT,
    LATE,
    LATENCY,
    REJECTED,
    REQUESTS,
    WEBHOOK_METRICS,
)
from manager.webhook.wire import HttpError, IncomingRequest, answer, go_duration, read_request

__all__ = ["ManagedCertificatesOptions", "WebhookServer", "WebhookServerOptions"]

logger = logging.getLogger(__name__)
tracer = trace.get_tracer("overseer.webhook")

MAX_CONNECTIONS: Final = 1024
IDLE_TIMEOUT: Final = 120.0  # seconds a kept-alive connection may wait for its next request
HANDSHAKE_TIMEOUT: Final = 10.0  # seconds a client gets to finish its TLS handshake
DEFAULT_DEADLINE: Final = 30.0  # seconds, without ?timeout= (kube's largest timeoutSeconds)
_NOT_FOUND: Final = b"404 page not found\n"


@dataclass(frozen=True, kw_only=True, slots=True)
class ManagedCertificatesOptions:
    """Certificates the leader keeps in a Secret (:mod:`manager.webhook.certificates`)."""

    secret_name: str = "overseer-webhook-tls"  # in WebhookServerOptions.namespace
    ca_validity: float = 3650 * 86400.0  # seconds a CA is valid
    cert_validity: float = 365 * 86400.0  # seconds a serving certificate is valid
    renew_before: float = 1 / 3  # renewed when less than this fraction of its life is left
    overlap: float = 600.0  # seconds a CA change waits for API servers and replicas
    check_interval: float = 300.0  # seconds between checks of the configurations' caBundle

    def __post_init__(self) -> None:
        if not 0 < self.renew_before < 1:
            raise ValueError("renew_before must be between 0 and 1")
        if min(self.ca_validity, self.cert_validity) < 1:
            raise ValueError("certificate validities must be at least a second")
        if self.overlap < 0 or self.check_interval <= 0:
            raise ValueError("overlap must be >= 0 and check_interval > 0")


@dataclass(frozen=True, kw_only=True, slots=True)
class WebhookServerOptions:
    """How the webhook server listens (controller-runtime's ``webhook.Options``)."""

    host: str = ""  # "" = every interface
    port: int = 9443  # 0 = a free port
    cert_dir: str = ""  # tls.crt/tls.key here (reloaded when they change); "" = self-signed
    cert_name: str = "tls.crt"
    key_name: str = "tls.key"
    max_concurrent: int = 32  # reviews answered at once
    shutdown_delay: float = 5.0  # seconds of drain (still serving, Connection: close) on stop
    service: str = "overseer-webhook"  # the Service in front of the replicas
    namespace: str = ""  # the Service's (and the managed Secret's); "" = $POD_NAMESPACE
    configuration_name: str = "overseer"  # the Validating/MutatingWebhookConfigurations
    managed: ManagedCertificatesOptions | None = None  # None: cert_dir or self-signed

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"webhook port {self.port}: out of range")
        if self.max_concurrent < 1:
            raise ValueError("webhook max_concurrent must be >= 1")
        if self.shutdown_delay < 0:
            raise ValueError("webhook shutdown_delay must be >= 0")
        if self.managed is not None and self.cert_dir:
            raise ValueError("webhook certificates are managed or in cert_dir, not both")

    @property
    def service_namespace(self) -> str:
        """The Service's namespace: ``namespace``, else ``$POD_NAMESPACE``, else default."""
        return self.namespace or os.environ.get("POD_NAMESPACE", "") or "default"


def _status(code: int, reason: str, message: str) -> bytes:
    return orjson.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }
    )


@dataclass(eq=False, slots=True)
class _Route:
    """One path: a webhook or a CRD's conversion, with its metric children."""

    path: str
    name: str  # the webhook's name, or the CRD's
    owner: str  # the controller that declared it
    serve: Callable[[bytes], tuple[int, bytes]]
    hook: ValidatingWebhook | MutatingWebhook | Conversion
    codes: dict[int, Any] = field(default_factory=dict)
    latency: Any = field(init=False)
    in_flight: Any = field(init=False)

    def __post_init__(self) -> None:
        self.latency = LATENCY.labels(self.path)
        self.in_flight = IN_FLIGHT.labels(self.path)
        for code in (200, 500):  # controller-runtime initializes the likeliest codes
            self.counter(code)

    def counter(self, code: int) -> Any:
        child = self.codes.get(code)
        if child is None:
            child = self.codes[code] = REQUESTS.labels(self.path, str(code))
        return child


def _admission_route(hook: ValidatingWebhook | MutatingWebhook, owner: str) -> _Route:
    path, name, handler, mutating = hook.served_path, hook.name, hook.handler, hook.mutating

    def serve(body: bytes) -> tuple[int, bytes]:
        return 200, review(body, name=name, handler=handler, mutating=mutating, path=path)[2]

    return _Route(path, name, owner, serve, hook)


def _conversion_route(conversion: Conversion, owner: str) -> _Route:
    def serve(body: bytes) -> tuple[int, bytes]:
        return 200, convert(body, conversion)[2]

    return _Route(conversion.served_path, conversion.crd, owner, serve, conversion)


class _Connection:
    __slots__ = ("busy", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.busy = False  # a request is being read, answered or written

    def shut(self) -> None:
        """Wake the connection's thread: its reads end (the socket is closed there)."""
        # the plain socket's shutdown: SSLSocket.shutdown would drop its SSL object under
        # the thread reading through it
        with contextlib.suppress(OSError):
            socket.socket.shutdown(self.sock, socket.SHUT_RDWR)


class WebhookServer:
    """Serves the admission webhooks and conversions registered with :meth:`register`.

    Args:
        options: where and how it listens.
        certificate: the serving certificate (default: from ``options``: ``cert_dir``'s
            files or a self-signed one; the manager gives the managed one).
    """

    def __init__(
        self,
        options: WebhookServerOptions | None = None,
        *,
        certificate: CertificateSource | None = None,
    ) -> None:
        self.options = options or WebhookServerOptions()
        self.certificate: CertificateSource = certificate or ServingCertificate(
            self.options.cert_dir,
            cert_name=self.options.cert_name,
            key_name=self.options.key_name,
            service=self.options.service,
            setting="webhooks",
            alpn=("http/1.1",),
        )
        self._lock = threading.Lock()
        self._routes: dict[str, _Route] = {}
        self._names: dict[str, _Route] = {}  # "webhook <name>" / "conversion <crd>"
        self._slots = threading.BoundedSemaphore(self.options.max_concurrent)
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        self._threads: list[threading.Thread] = []
        self._connections: set[_Connection] = set()
        self._draining = False
        self._closed = threading.Event()  # no new connections
        self._stopped = threading.Event()
        self._start_lock = threading.Lock()
        self.started = False

    # -- registration ----------------------------------------------------------------

    def register(self, hook: ValidatingWebhook | MutatingWebhook | Conversion, owner: str) -> None:
        """Serve ``hook`` (declared by controller ``owner``); allowed while running.

        Raises:
            InvalidWebhook: another declaration has its name (or CRD) or its path.
        """
        if isinstance(hook, Conversion):
            key, route = f"conversion of {hook.crd}", _conversion_route(hook, owner)
            what = f"Conversion {hook.crd!r}"
        elif isinstance(hook, ValidatingWebhook | MutatingWebhook):
            key, route = f"webhook {hook.name}", _admission_route(hook, owner)
            what = f"{type(hook).__name__} {hook.name!r}"
        else:
            raise TypeError(f"not a webhook or a conversion: {hook!r}")
        with self._lock:
            other = self._names.get(key)
            if other is not None:
                raise InvalidWebhook(
                    what, [f"the {key} is declared twice (by {other.owner} and by {owner})"]
                )
            other = self._routes.get(route.path)
            if other is not None:
                raise InvalidWebhook(
                    what,
                    [f"path: {route.path} is already served for {other.name} ({other.owner})"],
                )
            self._names = {**self._names, key: route}
            self._routes = {**self._routes, route.path: route}

    @property
    def has_routes(self) -> bool:
        return bool(self._routes)

    @property
    def paths(self) -> list[str]:
        """Every path served, sorted."""
        return sorted(self._routes)

    def declarations(self) -> list[tuple[ValidatingWebhook | MutatingWebhook | Conversion, str]]:
        """Every webhook and conversion served, with the controller that declared it, in
        the order declared."""
        return [(route.hook, route.owner) for route in self._names.values()]

    # -- lifecycle -------------------------------------------------------------------

    @property
    def address(self) -> tuple[str, int] | None:
        """The bound ``(host, port)`` once started (port 0 resolved), else None."""
        listener = self._listener
        if listener is None:
            return None
        host, port = listener.getsockname()[:2]
        return str(host), int(port)

    @property
    def url(self) -> str | None:
        """``https://host:port`` once started (a wildcard host as loopback)."""
        address = self.address
        if address is None:
            return None
        host = _dialable(address[0])
        return f"https://[{host}]:{address[1]}" if ":" in host else f"https://{host}:{address[1]}"

    def start(self) -> None:
        """Load the certificate, bind, and serve in thread ``webhooks/accept``.

        Raises:
            ServingCertError: the certificate cannot be loaded or made.
            BindError: the address cannot be bound.
        """
        with self._start_lock:
            if self.started:
                return
            self._start()

    def _start(self) -> None:
        self.certificate.load()
        host = self.options.host or "0.0.0.0"
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((host.strip("[]"), self.options.port))
            listener.listen(128)
        except OSError as exc:
            listener.close()
            raise BindError("webhooks", f"{host}:{self.options.port}", exc) from exc
        listener.settimeout(1.0)
        self._listener = listener
        self.started = True
        WEBHOOK_METRICS.attach()
        self._acceptor = threading.Thread(target=self._accept, name="webhooks/accept")
        self._acceptor.start()
        logger.info(
            "serving webhooks",
            extra={"address": self.url, "paths": ",".join(self.paths)},
        )

    def ready_reason(self) -> str | None:
        """None when the server completes a TLS handshake with a client (readiness
        check ``webhook-server``), else why not; None too when it has nothing to serve."""
        if not self.has_routes:
            return None
        address = self.address
        if not self.started or address is None:
            return "the webhook server has not been started yet"
        if self._draining:
            return "the webhook server is stopping"
        waiting = self.certificate.not_ready()
        if waiting is not None:
            return waiting
        trust = self.certificate.trusted_by()
        name = None
        if trust is None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        else:
            bundle, name = trust
            context = ssl.create_default_context(cadata=bundle)
        try:
            with (
                socket.create_connection((_dialable(address[0]), address[1]), timeout=2.0) as s,
                context.wrap_socket(s, server_hostname=name),
            ):
                pass
        except ssl.SSLCertVerificationError as exc:
            return (
                f"the webhook server's certificate is not verified by its CA bundle for "
                f"{name}: {exc.verify_message}"
            )
        except OSError as exc:
            return f"the webhook server is not reachable: {exc}"
        return None

    def stop(self, *, linger: float = 0.0, timeout: float = 10.0) -> None:
        """Drain for ``linger`` seconds (still serving; answers close their connection),
        then stop accepting, give in-flight reviews ``timeout`` seconds, and join every
        thread. No-op when not started."""
        if not self.started or self._closed.is_set():
            return
        self._draining = True
        # idle kept-alive connections stay open while the drain lasts: a review their
        # client sends just as the server closes one would be lost (kube-apiserver does
        # not resend a POST that went out); each one's next answer closes it instead
        if linger > 0:
            logger.info("webhook server draining", extra={"seconds": round(linger, 3)})
            self._stopped.wait(linger)
        self._closed.set()
        listener = self._listener
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)  # wakes accept() on Linux
        if self._acceptor is not None:
            self._acceptor.join()
        if listener is not None:
            listener.close()
        deadline = time.monotonic() + timeout
        while True:
            self._shut_idle()
            alive = [t for t in self._threads if t.is_alive()]
            if not alive or time.monotonic() >= deadline:
                break
            alive[0].join(min(0.05, max(0.0, deadline - time.monotonic())))
        with self._lock:
            connections = list(self._connections)
        for connection in connections:  # reviews past the timeout: their answers are lost
            connection.shut()
        for thread in self._threads:
            thread.join(1.0)
        self._listener = None
        WEBHOOK_METRICS.detach()
        logger.info("webhook server stopped")

    # -- serving ---------------------------------------------------------------------

    def _shut_idle(self) -> None:
        with self._lock:
            idle = [c for c in self._connections if not c.busy]
        for connection in idle:
            connection.shut()

    def _accept(self) -> None:
        listener = self._listener
        assert listener is not None
        while not self._closed.is_set():
            try:
                sock, peer = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if self._closed.is_set():
                    return
                logger.warning("webhook server: accept failed", exc_info=True)
                time.sleep(0.1)
                continue
            self._threads = [t for t in self._threads if t.is_alive()]
            if len(self._threads) >= MAX_CONNECTIONS:
                logger.warning(
                    "webhook server: too many connections; closing a new one",
                    extra={"limit": MAX_CONNECTIONS, "client": str(peer)},
                )
                sock.close()
                continue
            thread = threading.Thread(target=self._serve, args=(sock,), name="webhooks/conn")
            self._threads.append(thread)
            thread.start()

    def _serve(self, raw: socket.socket) -> None:
        connection = _Connection(raw)
        with self._lock:
            self._connections.add(connection)
        sock: socket.socket = raw
        try:
            raw.settimeout(HANDSHAKE_TIMEOUT)
            try:
                context = self.certificate.context()
            except ServingCertError as exc:
                logger.debug("webhook server: no certificate to serve", extra={"why": str(exc)})
                return
            try:
                sock = context.wrap_socket(raw, server_side=True)
            except (OSError, ssl.SSLError) as exc:
                logger.debug("webhook server: TLS handshake failed", extra={"error": str(exc)})
                return
            connection.sock = sock
            sock.settimeout(IDLE_TIMEOUT)
            reader = sock.makefile("rb", buffering=256 * 1024)
            try:
                self._requests(connection, sock, reader)
            finally:
                reader.close()
        except (ConnectionError, TimeoutError, ssl.SSLError) as exc:
            logger.debug("webhook server: client went away", extra={"error": str(exc)})
        except OSError as exc:
            logger.debug("webhook server: connection failed", extra={"error": str(exc)})
        except Exception:
            logger.error("webhook server: connection failed", exc_info=True)
        finally:
            with self._lock:
                self._connections.discard(connection)
            with contextlib.suppress(OSError):
                sock.close()

    def _requests(self, connection: _Connection, sock: socket.socket, reader: Any) -> None:
        while not self._closed.is_set():
            connection.busy = False
            try:
                request = read_request(reader, sock)
            except HttpError as exc:
                connection.busy = True
                reason = REASONS.get(exc.status, "BadRequest")
                body = _status(exc.status, reason, str(exc))
                sock.sendall(answer(exc.status, body, close=True))
                return
            if request is None:
                return
            connection.busy = True
            status, content_type, body = self._answer(request, time.monotonic())
            # draining: every answer closes its connection, so that the API server's
            # next request opens a new one, to a pod that stays
            close = request.close or self._draining
            sock.sendall(answer(status, body, content_type=content_type, close=close))
            if close:
                return

    def _answer(self, request: IncomingRequest, started: float) -> tuple[int, str, bytes]:
        """The answer to ``request``: status, content type, body."""
        path, _, query = request.target.partition("?")
        route = self._routes.get(path)
        if route is None:
            logger.debug("webhook server: no such path", extra={"path": path})
            return 404, "text/plain; charset=utf-8", _NOT_FOUND
        if request.method != "POST":
            message = f"{request.method} is not allowed: a webhook takes POST"
            return _refused(route, 405, message, "method")
        media = request.content_type.partition(";")[0].strip().lower()
        if media != "application/json":
            message = f"contentType={request.content_type}, expected application/json"
            return _refused(route, 400, message, "bad_request")
        deadline = started + _deadline(query)
        if not self._slots.acquire(timeout=max(0.0, deadline - time.monotonic())):
            message = (
                f"webhook server busy: {self.options.max_concurrent} reviews in flight "
                "(webhooks.maxConcurrent); none ended before the request's deadline"
            )
            route.latency.observe(time.monotonic() - started)
            return _refused(route, 429, message, "busy")
        route.in_flight.inc()
        try:
            if _tracing():
                with tracer.start_as_current_span(
                    "webhook.review",
                    context=_parent(request),
                    kind=trace.SpanKind.SERVER,
                    attributes={"http.route": route.path},
                    record_exception=False,
                    set_status_on_exception=False,
                ):
                    status, body = _serve(route, request.body)
            else:  # no tracer provider: not even a no-op span (a few microseconds each)
                status, body = _serve(route, request.body)
        finally:
            self._slots.release()
            route.in_flight.dec()
        done = time.monotonic()
        route.counter(status).inc()
        route.latency.observe(done - started)
        if done > deadline:
            LATE.labels(route.path).inc()
            logger.warning(
                "webhook answered after the API server's timeout: it had given up",
                extra={"path": route.path, "seconds": round(done - started, 3)},
            )
        return status, "application/json", body


def _serve(route: _Route, body: bytes) -> tuple[int, bytes]:
    try:
        return route.serve(body)
    except BadReview as exc:
        REJECTED.labels(route.path, "bad_request").inc()
        logger.warning(
            "webhook request refused: not a review", extra={"path": route.path, "why": str(exc)}
        )
        return 400, _status(400, "BadRequest", str(exc))


def _tracing() -> bool:
    """Whether a tracer provider is installed (``setup_tracing``, a test's SDK one)."""
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def _refused(route: _Route, code: int, message: str, why: str) -> tuple[int, str, bytes]:
    REJECTED.labels(route.path, why).inc()
    route.counter(code).inc()
    logger.warning("webhook request refused", extra={"path": route.path, "why": message})
    return code, "application/json", _status(code, REASONS.get(code, "BadRequest"), message)


_DEADLINES: dict[str, float] = {}  # query -> seconds: the API server sends few distinct ones


def _deadline(query: str) -> float:
    """Seconds the API server waits, from ``timeout=`` in the query."""
    seconds = _DEADLINES.get(query)
    if seconds is None:
        seconds = _parse_deadline(query)
        if len(_DEADLINES) < 64:
            _DEADLINES[query] = seconds
    return seconds


def _parse_deadline(query: str) -> float:
    for part in query.split("&"):
        key, _, value = part.partition("=")
        if key == "timeout":
            seconds = go_duration(value)
            if seconds is not None and seconds > 0:
                return seconds
    return DEFAULT_DEADLINE


def _parent(request: IncomingRequest) -> Any:
    """The API server's trace context, when it sent one."""
    if not request.traceparent:
        return None
    carrier = {"traceparent": request.traceparent}
    if request.tracestate:
        carrier["tracestate"] = request.tracestate
    return propagate.extract(carrier)


def _dialable(host: str) -> str:
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "::1"
    return host

"""API access: one HTTP client per manager, raw JSON in and out, mapped errors, retries.

The concept is client-go's ``rest`` package (``RESTClient``, ``Request``, ``with_retry.go``,
the ``rest_client_*`` metrics) together with its ``dynamic`` client: requests address a
:class:`~manager.resources.Resource` plus namespace and name, and objects are plain
``dict`` values decoded with ``orjson`` from the response bytes. No model classes of the
official client are ever built, and the ``kubernetes`` package is not imported at all
(its import alone costs a replica about 20 MiB): where the server is and how to
authenticate come from :mod:`manager.kubeconfig`, connections from urllib3.

Contract:

* Every non-2xx answer raises the narrowest :class:`~manager.errors.ApiError` subclass
  (``NotFound``, ``AlreadyExists``, ``Conflict``, ``Invalid``, ...), built from the
  ``Status`` body when there is one. A server that cannot be reached (refused, reset,
  timed out, TLS failure) raises :class:`~manager.errors.Unavailable` with ``status=0``
  and the host in the message.
* Retries happen here and nowhere else below the workqueue, by client-go's rules
  (``rest/with_retry.go``, ``net/http``'s ``shouldRetryRequest``) made exact for writes:

  - a request that never reached the server is sent again, whatever its verb: a
    connection that could not be opened, or one found closed before the first byte of
    the request went out (a kept-alive connection the server had closed while idle);
  - a 429, or a 5xx that carries ``Retry-After``, is retried for every verb: the server
    says it did not do it, and when to come back (client-go's ``checkWait``);
  - anything else that went wrong after bytes of the request may have reached the
    server (a connection reset or closed before the answer, an answer that timed out, a
    5xx without ``Retry-After``) is retried only when a replay cannot apply the request
    twice (:func:`_replayable`): a GET; a PUT or PATCH carrying a resourceVersion
    precondition (``metadata.resourceVersion``, or a JSON patch that tests it); a DELETE
    with a uid or resourceVersion precondition. A replay the server had already applied
    then fails that precondition (409, 404): never applied twice. A create, a blind
    update or patch, a blind delete are never sent again: they raise
    :class:`~manager.errors.OutcomeUnknown` (the server may or may not have applied
    them; the reconcile is requeued and reads what happened).

  ``Retry-After`` is honoured; otherwise the wait is exponential with jitter. Attempts
  are bounded by ``ClientOptions.max_retries`` and each wait by ``retry_max_wait``.
* Every attempt passes the client-side :class:`~manager.flowcontrol.TokenBucket` first
  (``qps``/``burst``), shared by all requests of one client; a watch counts once, when it
  connects.
* Writes (POST, PUT, PATCH, DELETE) of a client with a fence (:meth:`KubeClient.with_fence`,
  the manager's client) ask the fence that applies (:mod:`manager.fencing`) before the
  rate limiter and again in the HTTP connection right before the first byte is sent; a
  closed fence raises :class:`~manager.errors.WriteFenced` and nothing is sent. The
  permission's remaining seconds cap the write's timeout.
* Between retries the client waits with ``retry_sleep``; :class:`StopAwareSleep` is the one
  a stopping process wants (Retry-After honoured within the shutdown budget). A wait that
  raises :class:`RetryAbandoned` ends the retries with the error being retried.
* A watch is a :class:`WatchStream` of decoded events. It ends cleanly when the server
  closes the stream (``timeoutSeconds`` elapsed) or when :meth:`WatchStream.close` is
  called. A read timeout (no byte for ``read_timeout`` seconds, i.e. a dead connection)
  or a connection broken mid-stream raises :class:`~manager.errors.Unavailable`
  (``status=0``). Either way the caller re-watches from its last resourceVersion.
  ``ERROR`` events (such as the 410 ``Expired`` a real API server sends for a too old
  resourceVersion) are passed through as events; interpreting them is the reflector's job.

Thread-safety: a :class:`KubeClient` is meant to be shared by every informer and worker
of a manager (the urllib3 pool is sized by ``ClientOptions.pool_size``). A
:class:`WatchStream` is iterated by one thread; :meth:`WatchStream.close` may be called
from any thread and unblocks a read in progress.
"""

from __future__ import annotations

import builtins
import contextlib
import contextvars
import copy
import email.utils
import io
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Final, Literal, Self, cast
from urllib.parse import urlencode, urlsplit

import orjson
import tenacity
import urllib3
from opentelemetry import trace
from prometheus_client import Counter, Histogram
from urllib3.util.wait import wait_for_read

from manager.errors import (
    ApiError,
    NotFound,
    OutcomeUnknown,
    ServerError,
    TooManyRequests,
    Unavailable,
    WriteFenced,
    api_error_from_status,
)
from manager.fencing import IN_FLIGHT, Fence, Flight, current_fence
from manager.flowcontrol import RateLimiter, TokenBucket
from manager.kubeconfig import (
    ClusterConfig,
    from_kubernetes_configuration,
    load_in_cluster,
    load_kubeconfig,
    pool_manager,
)
from manager.metrics import REGISTRY
from manager.resources import BUILTINS, Resource

__all__ = [
    "ClientOptions",
    "JsonDict",
    "KubeClient",
    "PatchType",
    "RetryAbandoned",
    "StopAwareSleep",
    "WatchStream",
    "Write",
    "WriteSession",
]

logger = logging.getLogger(__name__)
_tracer = trace.get_tracer("overseer.kube")

JsonDict = dict[str, Any]
"""A decoded JSON object: what every read and write returns."""

PatchType = Literal["merge", "json", "strategic", "apply"]
"""The patch flavours of the API server, by their short name."""

QueryValue = str | int | float | bool
Query = Mapping[str, QueryValue | None] | Sequence[tuple[str, QueryValue]]

_PATCH_CONTENT_TYPES: Final[dict[str, str]] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}
_METHODS: Final = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
_WRITES: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
_WATCH_CHUNK: Final = 64 * 1024
_ERROR_TEXT_LIMIT: Final = 300

# client-go's restclient metrics (k8s.io/component-base/metrics/prometheus/restclient).
REQUESTS_TOTAL = Counter(
    "rest_client_requests_total",
    "Number of HTTP requests, partitioned by status code, method, and host.",
    ["code", "method", "host"],
    registry=REGISTRY,
)
REQUEST_DURATION = Histogram(
    "rest_client_request_duration_seconds",
    "Request latency in seconds. Broken down by verb, and host.",
    ["verb", "host"],
    buckets=(0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0),
    registry=REGISTRY,
)

_BUILTIN_KINDS: Final[dict[tuple[str, str], Resource]] = {
    (r.api_version, r.kind): r for r in BUILTINS.values()
}


def _default_user_agent() -> str:
    from manager import __version__

    return f"overseer/{__version__}"


# The fenced write this thread is sending, for the connection's last-moment check.
_OUTGOING: contextvars.ContextVar[Flight | None] = contextvars.ContextVar(
    "overseer_outgoing_write", default=None
)


def _check_outgoing(conn: Any) -> None:
    flight = _OUTGOING.get()
    if flight is not None:
        flight.fence.check()
        IN_FLIGHT.sending(flight, conn)  # refused if abandoned meanwhile


class _FencedHTTPConnection(urllib3.connection.HTTPConnection):
    """Asks the fence of the write being sent right before each piece goes on the wire,
    so a pause between the client's check and the send cannot let a late write out; and
    tells :data:`~manager.fencing.IN_FLIGHT` which connection carries it, so that it can
    be abandoned."""

    def send(self, data: Any) -> None:
        _check_outgoing(self)
        super().send(data)


class _FencedHTTPSConnection(urllib3.connection.HTTPSConnection):
    def send(self, data: Any) -> None:
        _check_outgoing(self)
        super().send(data)


class _FencedHTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _FencedHTTPConnection


class _FencedHTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _FencedHTTPSConnection


def _use_fenced_connections(pool_manager: Any) -> None:
    # pool_classes_by_scheme is PoolManager's documented hook for its pool classes; a
    # new dict, so urllib3's module-level default stays untouched.
    pool_manager.pool_classes_by_scheme = {"http": _FencedHTTPPool, "https": _FencedHTTPSPool}


# Whether the wait tenacity is about to sleep was asked for by the server (Retry-After).
_SERVER_ASKED_WAIT: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "overseer_server_asked_wait", default=False
)


class RetryAbandoned(Exception):
    """Raised by a ``retry_sleep`` to end the retries: the request then raises the error
    it was retrying."""


class StopAwareSleep:
    """The wait between retries of a :class:`KubeClient` in a process that stops gracefully.

    Until ``stop`` is set it waits the whole time asked (the server's ``Retry-After`` or
    the backoff). Once ``stop`` is set, a wait the server asked for (``Retry-After``) is
    still honoured — a throttled request of a draining reconcile is not retried back to
    back — but only within the shutdown budget, ``grace`` seconds from when the stop was
    first seen; a wait that does not fit in what is left, and any client-side backoff
    (an unreachable server will not come back for a shutdown), raise
    :class:`RetryAbandoned`, which ends the retries with the error being retried.

    Args:
        stop: set when the process starts stopping.
        grace: the shutdown budget in seconds (the graceful shutdown timeout).
        clock: monotonic seconds (default :func:`time.monotonic`).
        sleep: an uninterruptible wait (default :func:`time.sleep`).
        wait: waits on ``stop`` for at most the given seconds, True if it was set
            (default ``stop.wait``).

    Thread-safe: shared by every request of a client.
    """

    def __init__(
        self,
        stop: threading.Event,
        grace: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        wait: Callable[[float], bool] | None = None,
    ) -> None:
        if grace < 0:
            raise ValueError(f"grace must be >= 0, got {grace}")
        self._stop = stop
        self._grace = grace
        self._clock = clock
        self._sleep = sleep
        self._wait = wait if wait is not None else stop.wait
        self._lock = threading.Lock()
        self._stopped_at: float | None = None

    def __call__(self, seconds: float) -> None:
        now = self._clock()
        end = now + max(seconds, 0.0)
        if not self._stop.is_set():
            if not self._wait(max(seconds, 0.0)):
                return
            now = self._clock()
        with self._lock:
            if self._stopped_at is None:
                self._stopped_at = now
            budget_end = self._stopped_at + self._grace
        if not _SERVER_ASKED_WAIT.get():
            raise RetryAbandoned("stopping: no backoff retries")
        if end > budget_end:
            raise RetryAbandoned(
                f"stopping: a retry in {end - now:.1f} s would outlast the shutdown budget "
                f"({max(budget_end - now, 0.0):.1f} s left)"
            )
        if end > now:
            self._sleep(end - now)


@dataclass(frozen=True, kw_only=True, slots=True)
class ClientOptions:
    """How a :class:`KubeClient` talks to the API server (controller-runtime defaults)."""

    qps: float = 20.0
    """Client-side steady request rate, requests per second (default 20.0; <= 0: no limit)."""
    burst: int = 30
    """Requests allowed back to back above ``qps`` (default 30 requests)."""
    timeout: float = 30.0
    """Timeout of one non-watch request, and of connecting a watch (default 30.0 seconds)."""
    pool_size: int = 32
    """urllib3 connections kept per host: informers + workers (default 32 connections)."""
    max_retries: int = 5
    """Retries of a failed request that is safe to repeat (default 5 retries)."""
    retry_max_wait: float = 30.0
    """Longest wait between two attempts, Retry-After included (default 30.0 seconds)."""
    user_agent: str = field(default_factory=_default_user_agent)
    """User-Agent header (default ``overseer/<version>``)."""

    def __post_init__(self) -> None:
        problems = []
        if self.burst < 1:
            problems.append(f"burst: must be at least 1, got {self.burst}")
        if self.timeout <= 0:
            problems.append(f"timeout: must be positive, got {self.timeout}")
        if self.pool_size < 1:
            problems.append(f"pool_size: must be at least 1, got {self.pool_size}")
        if self.max_retries < 0:
            problems.append(f"max_retries: must not be negative, got {self.max_retries}")
        if self.retry_max_wait < 0:
            problems.append(f"retry_max_wait: must not be negative, got {self.retry_max_wait}")
        if problems:
            raise ValueError("invalid ClientOptions: " + "; ".join(problems))


class WatchStream:
    """The events of one watch request, decoded line by line as they arrive.

    Iterating yields event dicts ``{"type": "ADDED"|"MODIFIED"|"DELETED"|"BOOKMARK"|"ERROR",
    "object": {...}}``. Iteration stops when the server ends the stream or after
    :meth:`close`; an incomplete last line is dropped. A read timeout or a broken
    connection raises :class:`~manager.errors.Unavailable` (``status=0``); an undecodable
    line raises :class:`~manager.errors.ApiError` with reason ``InvalidWatchEvent``. In
    every case the connection is released.

    Use it as a context manager so the connection is released when the caller leaves early.
    """

    def __init__(self, response: urllib3.BaseHTTPResponse, *, description: str) -> None:
        self._response = response
        self._description = description
        self._lock = threading.Lock()
        self._closed = False
        self._reading = False
        self._released = False
        self._tail: builtins.list[bytes] = []  # pieces of an incomplete line
        self._lines: builtins.list[bytes] = []  # complete lines not yet returned
        self._next_line = 0

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __iter__(self) -> Iterator[JsonDict]:
        return self

    def __next__(self) -> JsonDict:
        while True:
            while self._next_line < len(self._lines):
                line = self._lines[self._next_line]
                self._next_line += 1
                if line.strip():
                    return self._decode(line)
            chunk = self._read()
            if not chunk:
                dropped = sum(len(piece) for piece in self._tail)
                if dropped:
                    logger.debug(
                        "watch stream ended inside an event",
                        extra={"watch": self._description, "dropped_bytes": dropped},
                    )
                self._tail = []
                raise StopIteration
            if b"\n" not in chunk:  # a large object arrives in many chunks: no re-copying
                self._tail.append(chunk)
                continue
            parts = b"".join([*self._tail, chunk]).split(b"\n")
            last = parts.pop()
            self._tail = [last] if last else []
            self._lines = parts
            self._next_line = 0

    @property
    def closed(self) -> bool:
        """``True`` once the stream ended or was closed."""
        return self._closed

    def close(self) -> None:
        """Stop the stream and release its connection; safe from any thread, idempotent.

        A read blocked in another thread is woken up (the socket is shut down for reading)
        and that iteration stops without an error.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            reading = self._reading
        if not reading:
            self._release()
            return
        try:
            self._response.shutdown()
        except (ValueError, RuntimeError, NotImplementedError, OSError):
            # No socket to shut down: the reader wakes at its read timeout and releases.
            logger.debug(
                "watch stream could not interrupt a read", extra={"watch": self._description}
            )

    def _read(self) -> bytes:
        with self._lock:
            closed = self._closed
            self._reading = not closed
        if closed:
            self._release()
            return b""
        try:
            chunk = self._response.read1(_WATCH_CHUNK)
        except urllib3.exceptions.ReadTimeoutError:
            if self._stopped():
                return b""
            self._closed = True
            raise Unavailable(
                f"watch {self._description}: no data within the read timeout",
                status=0,
                reason="Timeout",
            ) from None
        except Exception as exc:
            if self._stopped():  # close() shut the socket under our feet
                return b""
            self._closed = True
            raise Unavailable(
                f"watch {self._description}: connection broken: {exc}",
                status=0,
                reason="ConnectionError",
            ) from None
        finally:
            with self._lock:
                self._reading = False
                finished = self._closed
            if finished:
                self._release()
        if not chunk:
            self._closed = True
            self._release()
        return chunk

    def _stopped(self) -> bool:
        # A method, not the attribute: close() may flip it from another thread mid-read.
        return self._closed

    def _release(self) -> None:
        with self._lock:
            if self._released:
                return
            self._released = True
        try:
            self._response.close()
            self._response.release_conn()
        except Exception:  # releasing must never mask the reason the stream ended
            logger.debug("watch stream release failed", exc_info=True)

    def _decode(self, line: bytes) -> JsonDict:
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            event = exc
        if not isinstance(event, dict) or "type" not in event or "object" not in event:
            self.close()
            text = line[:_ERROR_TEXT_LIMIT].decode("utf-8", "replace")
            raise ApiError(
                f"watch {self._description}: not a watch event: {text!r}",
                status=0,
                reason="InvalidWatchEvent",
            )
        return cast(JsonDict, event)


class KubeClient:
    """One connection pool to one API server; raw JSON reads, writes and watches.

    Build it with :meth:`load`, :meth:`from_kubeconfig` or :meth:`in_cluster`, or from a
    :class:`~manager.kubeconfig.ClusterConfig` (a ``kubernetes.client.Configuration`` is
    accepted too: its host, TLS settings, proxy and API key or basic auth are used); close
    it with :meth:`close` or by using it as a context manager. Safe to share between
    threads.

    ``rate_limiter`` replaces the default :class:`~manager.flowcontrol.TokenBucket`
    (``options.qps``/``options.burst``); ``retry_sleep`` replaces ``time.sleep`` between
    retries (tests pass a recorder).
    """

    def __init__(
        self,
        configuration: object,
        *,
        options: ClientOptions | None = None,
        rate_limiter: RateLimiter | None = None,
        retry_sleep: Callable[[float], None] | None = None,
    ) -> None:
        if isinstance(configuration, ClusterConfig):
            config = configuration
        elif type(configuration).__module__.startswith("kubernetes.client"):
            config = from_kubernetes_configuration(configuration)
        else:
            raise TypeError(
                "configuration must be a manager.kubeconfig.ClusterConfig "
                "(or a kubernetes.client.Configuration)"
            )
        self._config = config
        # Impersonate-* header lines of every request (a name may repeat: not in a dict)
        self._impersonation: tuple[tuple[str, str], ...] = (
            config.impersonation.headers() if config.impersonation is not None else ()
        )
        self._options = options if options is not None else ClientOptions()
        self._host: str = config.server
        self._host_label = urlsplit(self._host).netloc or self._host
        self._pool_manager: Any = pool_manager(config, self._options.pool_size)
        _use_fenced_connections(self._pool_manager)
        self._fence: Fence | None = None
        self._limiter: RateLimiter = (
            rate_limiter
            if rate_limiter is not None
            else TokenBucket(self._options.qps, self._options.burst)
        )
        self._retry_sleep = retry_sleep if retry_sleep is not None else time.sleep
        self._discovery_lock = threading.Lock()
        self._discovered: dict[str, dict[str, Resource]] = {}
        # The pool of the API server's connections, for requests sent without urllib3's
        # request machinery (None behind a proxy: those go through urllib3).
        self._pool: Any = None
        if not isinstance(self._pool_manager, urllib3.ProxyManager) and config.proxy_url is None:
            self._pool = self._pool_manager.connection_from_url(self._host)
        origin = urlsplit(self._host)
        self._origin = f"{origin.scheme}://{origin.netloc}"
        self._host_header = f"Host: {origin.netloc}"
        # (method, code) -> the rest_client_* children of this client's host
        self._metric_children: dict[tuple[str, str], tuple[Any, Any]] = {}

    # -- construction -------------------------------------------------------------------

    @classmethod
    def from_kubeconfig(
        cls,
        path: str | None = None,
        context: str | None = None,
        *,
        options: ClientOptions | None = None,
        rate_limiter: RateLimiter | None = None,
        retry_sleep: Callable[[float], None] | None = None,
    ) -> KubeClient:
        """A client for a kubeconfig (:func:`manager.kubeconfig.load_kubeconfig` says
        what of it is used, and how several files are merged).

        Args:
            path: the file, which must exist; default every file of ``$KUBECONFIG``,
                merged as kubectl merges them (a missing one skipped), else
                ``~/.kube/config``.
            context: the context to use; default the ``current-context``.

        Raises:
            ConfigError: the file is missing (or no file of ``$KUBECONFIG`` exists), a
                file is unreadable, or it is not a usable kubeconfig.
        """
        files: str | list[str] = (
            os.path.expanduser(path) if path else _env_kubeconfig() or _home_kubeconfig()
        )
        configuration = load_kubeconfig(files, context)
        return cls(
            configuration, options=options, rate_limiter=rate_limiter, retry_sleep=retry_sleep
        )

    @classmethod
    def in_cluster(
        cls,
        *,
        options: ClientOptions | None = None,
        rate_limiter: RateLimiter | None = None,
        retry_sleep: Callable[[float], None] | None = None,
    ) -> KubeClient:
        """A client for the API server of the cluster this pod runs in (service account;
        its token is re-read as the kubelet rotates it).

        Raises:
            ConfigError: not in a pod, or the service account token/CA cannot be read.
        """
        configuration = load_in_cluster()
        return cls(
            configuration, options=options, rate_limiter=rate_limiter, retry_sleep=retry_sleep
        )

    @classmethod
    def load(
        cls,
        kubeconfig: str | None = None,
        context: str | None = None,
        *,
        options: ClientOptions | None = None,
        rate_limiter: RateLimiter | None = None,
        retry_sleep: Callable[[float], None] | None = None,
    ) -> KubeClient:
        """The client the process was configured for.

        Order: ``kubeconfig`` when given (one file), then ``$KUBECONFIG`` (all its files,
        merged as kubectl merges them: see :func:`manager.kubeconfig.load_kubeconfig`;
        a missing one is skipped, none existing is an error naming them), then
        ``~/.kube/config`` if it exists, then the in-cluster service account when
        ``KUBERNETES_SERVICE_HOST`` is set. Without any of those, a ``ConfigError``
        names ``~/.kube/config``.

        Raises:
            ConfigError: the chosen source is unusable.
        """
        if not kubeconfig and not _env_kubeconfig():
            home = _home_kubeconfig()
            if not os.path.isfile(home) and os.environ.get("KUBERNETES_SERVICE_HOST"):
                return cls.in_cluster(
                    options=options, rate_limiter=rate_limiter, retry_sleep=retry_sleep
                )
        return cls.from_kubeconfig(
            kubeconfig,
            context,
            options=options,
            rate_limiter=rate_limiter,
            retry_sleep=retry_sleep,
        )

    # -- lifecycle ----------------------------------------------------------------------

    @property
    def host(self) -> str:
        """The API server URL (``https://10.0.0.1:443``), without a trailing slash."""
        return self._host

    @property
    def options(self) -> ClientOptions:
        """The options this client was built with."""
        return self._options

    def with_options(self, options: ClientOptions) -> KubeClient:
        """A new client to the same server with the same credentials and other options.

        It has its own connection pool and rate limiter (the caller closes it), and the same
        fence as this client: a client derived from a fenced one is fenced. Leader election
        uses this (on an unfenced client) for short, unretried requests that cannot outlast
        its deadline.
        """
        clone = KubeClient(self._config, options=options, retry_sleep=self._retry_sleep)
        clone._fence = self._fence
        return clone

    @property
    def fence(self) -> Fence | None:
        """The fence this client's writes ask by default (None: writes are not fenced)."""
        return self._fence

    def with_fence(self, fence: Fence | None) -> KubeClient:
        """This client — the same connections, rate limiter and discovery cache — whose
        writes ask ``fence`` (or the fence set for the current context with
        :func:`manager.fencing.fenced`) before they are sent; None: unfenced.

        The two share one connection pool: closing either closes both.
        """
        clone = copy.copy(self)
        clone._fence = fence
        return clone

    def close(self) -> None:
        """Close every pooled connection now. Open watch streams should be closed first;
        a connection still in use is closed when it is given back."""
        # urllib3 2.x PoolManager.clear() only forgets its pools (their sockets close when
        # they are garbage collected, which a kept traceback can delay forever): close them.
        pools = self._pool_manager.pools
        for key in builtins.list(pools.keys()):
            pool = pools.get(key)
            if pool is not None:
                pool.close()
        self._pool_manager.clear()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"KubeClient(host={self._host!r})"

    # -- reads --------------------------------------------------------------------------

    def get(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        timeout: float | None = None,
    ) -> JsonDict:
        """GET one object (``timeout``: seconds for this request, default the client's).

        Raises:
            NotFound: no such object (or namespace).
        """
        path = _object_path(resource, namespace, name)
        return self._json("GET", path, replayable=True, timeout=timeout)

    def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_: str | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
        shard_selector: str | None = None,
    ) -> JsonDict:
        """LIST a collection: the whole List object (``items``, ``metadata.resourceVersion``,
        ``metadata.continue``). Without ``namespace`` a namespaced resource is listed in
        all namespaces. ``shard_selector`` (KEP-5866): a server that honours it answers
        with ``metadata.shardInfo``; one without the gate ignores it.

        Raises:
            Gone: ``resource_version_match="Exact"`` at a compacted resourceVersion, or an
                expired ``continue_`` token.
        """
        query: dict[str, QueryValue | None] = {
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
            "limit": limit,
            "continue": continue_,
            "resourceVersion": resource_version,
            "resourceVersionMatch": resource_version_match,
            "shardSelector": shard_selector,
        }
        return self._json("GET", resource.path(namespace), query=query, replayable=True)

    def watch(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        resource_version: str,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: float,
        read_timeout: float,
        allow_bookmarks: bool = True,
        send_initial_events: bool = False,
        shard_selector: str | None = None,
    ) -> WatchStream:
        """Open a WATCH and return its event stream (see :class:`WatchStream`).

        Args:
            resource_version: where to start; ``""`` means "now" (no replay).
            timeout_seconds: the server ends the watch after this many seconds (sent as a
                whole number, at least 1).
            read_timeout: seconds without a byte after which the connection counts as dead
                (pick it longer than the bookmark interval and ``timeout_seconds``).
            send_initial_events: stream the current state first (sets
                ``resourceVersionMatch=NotOlderThan``; ends with an initial-events-end
                BOOKMARK when bookmarks are allowed).
            shard_selector: only objects in these hash ranges (KEP-5866), where the
                server honours it (feature gate ShardedListAndWatch); else ignored.

        Raises:
            ApiError: the watch request itself was refused (HTTP status != 2xx), after
                retries where they apply.
        """
        query: dict[str, QueryValue | None] = {
            "watch": True,
            "resourceVersion": resource_version or None,
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
            "timeoutSeconds": max(int(timeout_seconds), 1),
            "allowWatchBookmarks": True if allow_bookmarks else None,
            "sendInitialEvents": True if send_initial_events else None,
            "resourceVersionMatch": "NotOlderThan" if send_initial_events else None,
            "shardSelector": shard_selector,
        }
        path = resource.path(namespace)
        response = self._execute(
            "GET",
            path,
            query=query,
            body=None,
            content_type=None,
            replayable=True,
            timeout=(self._options.timeout, read_timeout),
            stream=True,
        )
        assert isinstance(response, urllib3.BaseHTTPResponse)
        return WatchStream(response, description=f"{resource} {namespace or ''}".rstrip())

    # -- writes -------------------------------------------------------------------------

    def create(
        self,
        resource: Resource,
        body: JsonDict,
        namespace: str | None = None,
        *,
        timeout: float | None = None,
    ) -> JsonDict:
        """POST a new object; ``namespace`` defaults to ``body.metadata.namespace``;
        ``timeout``: seconds for this request (default the client's).

        Never sent twice: retried only when nothing reached the server, or on a 429 or a
        5xx with ``Retry-After`` (see the module's retry rules).

        Raises:
            AlreadyExists: the name is taken.
            Invalid: the object failed validation.
            OutcomeUnknown: the request was sent and no answer came (the object may
                exist now, or not).
        """
        ns = _namespace_for(resource, namespace, body)
        return self._json("POST", resource.path(ns), body=body, replayable=False, timeout=timeout)

    def replace(
        self,
        resource: Resource,
        body: JsonDict,
        namespace: str | None = None,
        subresource: str | None = None,
        *,
        timeout: float | None = None,
    ) -> JsonDict:
        """PUT an object (name and, by default, namespace from ``body.metadata``;
        ``timeout``: seconds for this request, default the client's).

        With ``metadata.resourceVersion`` set this is an optimistic-concurrency update,
        and may be sent again after a broken connection; without, it is not.

        Raises:
            Conflict: the resourceVersion is stale.
            OutcomeUnknown: a blind update was sent and no answer came.
        """
        name = _metadata(body).get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{resource.group_resource}: replace needs body.metadata.name")
        ns = _namespace_for(resource, namespace, body)
        path = resource.path(ns, name, subresource)
        replayable = _replayable("PUT", body, None)
        return self._json("PUT", path, body=body, replayable=replayable, timeout=timeout)

    def patch(
        self,
        resource: Resource,
        name: str,
        patch: JsonDict | builtins.list[JsonDict],
        *,
        namespace: str | None = None,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool | None = None,
    ) -> JsonDict:
        """PATCH an object.

        ``patch_type="json"`` takes a list of operations, the others an object.
        ``"apply"`` (server-side apply) needs ``field_manager``. A patch carrying a
        resourceVersion precondition (``metadata.resourceVersion``, or a JSON patch
        ``test`` of ``/metadata/resourceVersion``) may be sent again after a broken
        connection; a blind one is not (applied twice, it could undo a write made in
        between, or land on a re-created object of the same name) and raises
        :class:`~manager.errors.OutcomeUnknown` instead.
        """
        content_type = _PATCH_CONTENT_TYPES.get(patch_type)
        if content_type is None:
            raise ValueError(f"unknown patch type {patch_type!r}")
        if (patch_type == "json") != isinstance(patch, builtins.list):
            raise ValueError("a JSON patch is a list of operations; other patches are objects")
        if patch_type == "apply" and not field_manager:
            raise ValueError("server-side apply needs a field_manager")
        path = _object_path(resource, namespace, name, subresource)
        query: dict[str, QueryValue | None] = {"fieldManager": field_manager, "force": force}
        return self._json(
            "PATCH",
            path,
            query=query,
            body=patch,
            content_type=content_type,
            replayable=_replayable("PATCH", patch, content_type),
        )

    def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        propagation_policy: str | None = None,
        preconditions: JsonDict | None = None,
        grace_period_seconds: int | None = None,
    ) -> JsonDict:
        """DELETE an object. Returns what the server answers: a ``Status`` for some
        resources, the deleted object (or, with finalizers, the object still present)
        for others.

        A DELETE with a uid or resourceVersion precondition may be sent again after a
        broken connection (a replay the server had applied is a 404 or 409, and can never
        delete a re-created object of the same name); a blind one is not.

        Raises:
            NotFound: already gone (also when a replayed DELETE had succeeded before).
            Conflict: a precondition (uid, resourceVersion) failed.
            OutcomeUnknown: a blind DELETE was sent and no answer came.
        """
        body = _delete_options(propagation_policy, preconditions, grace_period_seconds)
        path = _object_path(resource, namespace, name)
        return self._json("DELETE", path, body=body, replayable=_replayable("DELETE", body, None))

    def delete_collection(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        propagation_policy: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> JsonDict:
        """DELETE every object of a collection that matches the selectors; returns the
        List of deleted items."""
        body = _delete_options(propagation_policy, None, grace_period_seconds)
        query: dict[str, QueryValue | None] = {
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
        }
        # not replayable: a second one could delete objects created in between
        return self._json(
            "DELETE", resource.path(namespace), query=query, body=body, replayable=False
        )

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: Any = None,
        content_type: str | None = None,
        idempotent: bool,
    ) -> JsonDict:
        """Any request: ``method`` on ``path`` (``/apis/...``), JSON ``body``; returns the
        decoded JSON object (``{}`` for an empty body).

        ``idempotent``: the caller vouches that a replay cannot apply the request twice,
        so that it may be sent again after a broken connection or a 5xx (GET, HEAD and
        OPTIONS are, whatever it says); False follows the module's rules for writes.
        """
        method = method.upper()
        if method not in _METHODS:
            raise ValueError(f"unsupported HTTP method {method!r}")
        if not path.startswith("/"):
            raise ValueError(f"path must start with '/': {path!r}")
        replayable = idempotent or method in _SAFE_METHODS
        return self._json(
            method, path, query=query, body=body, content_type=content_type, replayable=replayable
        )

    def write_session(self) -> WriteSession:
        """A :class:`WriteSession`: many small writes on one held connection, each far
        cheaper in CPU than :meth:`create` / :meth:`patch` (for the Event sender, which
        writes in batches). Close it (a context manager) to give the connection back.
        """
        return WriteSession(self)

    # -- discovery ----------------------------------------------------------------------

    def discover(self, group_version: str) -> builtins.list[Resource]:
        """The resources one group/version serves (``"v1"``, ``"apps/v1"``), from its
        APIResourceList. Subresources are not listed; a ``<plural>/status`` entry sets
        ``has_status`` on its resource. The result also refreshes :meth:`resource_for`'s
        cache.

        Raises:
            NotFound: the group/version is not served.
        """
        if "/" in group_version:
            group, version = group_version.split("/", 1)
            path = f"/apis/{group_version}"
        else:
            group, version = "", group_version
            path = f"/api/{group_version}"
        try:
            document = self._json("GET", path, replayable=True)
        except NotFound as exc:
            raise NotFound(
                f"{group_version} is not served by {self._host}", status=404, reason="NotFound"
            ) from exc
        entries = [e for e in document.get("resources") or [] if isinstance(e, dict)]
        with_status = {
            str(e.get("name", "")).split("/", 1)[0]
            for e in entries
            if str(e.get("name", "")).endswith("/status")
        }
        resources = [
            Resource(
                group,
                version,
                str(e["name"]),
                str(e.get("kind", "")),
                namespaced=bool(e.get("namespaced", False)),
                has_status=str(e["name"]) in with_status,
            )
            for e in entries
            if e.get("name") and "/" not in str(e["name"])
        ]
        with self._discovery_lock:
            self._discovered[group_version] = {r.kind: r for r in resources}
        return resources

    def resource_for(self, api_version: str, kind: str) -> Resource:
        """The resource serving ``kind`` in ``api_version``: a built-in, else from
        discovery (cached; rediscovered once on a miss, so a new CRD is found).

        Raises:
            NotFound: the group/version or the kind is not served.
        """
        builtin = _BUILTIN_KINDS.get((api_version, kind))
        if builtin is not None:
            return builtin
        with self._discovery_lock:
            cached = self._discovered.get(api_version, {}).get(kind)
        if cached is not None:
            return cached
        for resource in self.discover(api_version):
            if resource.kind == kind:
                return resource
        raise NotFound(
            f"kind {kind} is not served in {api_version} by {self._host}",
            status=404,
            reason="NotFound",
        )

    # -- transport ----------------------------------------------------------------------

    def _json(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: Any = None,
        content_type: str | None = None,
        replayable: bool,
        timeout: float | None = None,
    ) -> JsonDict:
        seconds = self._options.timeout if timeout is None else timeout
        if method == "GET":
            data = self._execute(
                method,
                path,
                query=query,
                body=body,
                content_type=content_type,
                replayable=replayable,
                timeout=seconds,
                stream=False,
            )
        elif not trace.get_current_span().is_recording():
            # Not inside a recorded reconcile span (tracing off, or not sampled): no
            # child span to make, not even a no-op one (its context managers cost a
            # write about 3% of its CPU, and asking for the tracer provider reads the
            # environment on every call).
            data = self._execute(
                method,
                path,
                query=query,
                body=body,
                content_type=content_type,
                replayable=replayable,
                timeout=seconds,
                stream=False,
            )
        else:
            # Writes get a child span of the reconcile that makes them (reads do not: a
            # cached read makes none, and list/watch are not part of a reconcile).
            with _tracer.start_as_current_span(
                f"kube {method}", attributes={"http.request.method": method, "url.path": path}
            ):
                data = self._execute(
                    method,
                    path,
                    query=query,
                    body=body,
                    content_type=content_type,
                    replayable=replayable,
                    timeout=seconds,
                    stream=False,
                )
        assert isinstance(data, bytes)
        decoded = _json_object(data, method, path)
        if isinstance(decoded, ApiError):
            raise decoded
        return decoded

    def _execute(
        self,
        method: str,
        path: str,
        *,
        query: Query | None,
        body: Any,
        content_type: str | None,
        replayable: bool,
        timeout: float | tuple[float, float],
        stream: bool,
    ) -> bytes | urllib3.BaseHTTPResponse:
        url = self._host + path
        encoded = _encode_query(query)
        if encoded:
            url = f"{url}?{encoded}"

        def retryable(exc: BaseException) -> bool:
            return _is_retryable(exc, replayable)

        # The first attempt goes without tenacity's machinery (about 5% of a write's
        # Python time); only a failure that may be retried enters it, as attempt 1.
        try:
            return self._attempt(method, url, body, content_type, timeout=timeout, stream=stream)
        except Exception as exc:
            if not retryable(exc) or self._options.max_retries < 1:
                raise
            first_failure: builtins.list[BaseException] = [exc]

        def attempt(*args: Any, **kwargs: Any) -> bytes | urllib3.BaseHTTPResponse:
            if first_failure:
                raise first_failure.pop()
            return self._attempt(*args, **kwargs)

        retried: builtins.list[BaseException] = []

        def log_retry(state: tenacity.RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            if exc is not None:
                retried[:] = [exc]
            logger.info(
                "retrying API request",
                extra={
                    "method": method,
                    "url": url,
                    "attempt": state.attempt_number,
                    "wait_seconds": round(state.upcoming_sleep, 3),
                    "status": getattr(exc, "status", None),
                    "error": str(exc),
                },
            )

        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self._options.max_retries + 1),
            wait=self._wait,
            retry=tenacity.retry_if_exception(retryable),
            sleep=self._retry_sleep,
            before_sleep=log_retry,
            reraise=True,
        )
        try:
            return retrying(
                attempt, method, url, body, content_type, timeout=timeout, stream=stream
            )
        except RetryAbandoned as abandoned:
            logger.info("API request not retried", extra={"url": url, "why": str(abandoned)})
            if retried:
                raise retried[0] from None
            raise

    def _wait(self, state: tenacity.RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        cap = self._options.retry_max_wait
        if (
            isinstance(exc, ApiError)
            and exc.retry_after is not None
            and (exc.status == 429 or exc.status >= 500)
        ):
            _SERVER_ASKED_WAIT.set(True)
            return min(max(exc.retry_after, 0.0), cap)
        _SERVER_ASKED_WAIT.set(False)
        exponent = min(state.attempt_number - 1, 32)
        backoff = _BACKOFF_INITIAL * 2.0**exponent + random.uniform(0, _BACKOFF_JITTER)
        return min(backoff, cap)

    def _attempt(
        self,
        method: str,
        url: str,
        body: Any,
        content_type: str | None,
        *,
        timeout: float | tuple[float, float],
        stream: bool,
    ) -> bytes | urllib3.BaseHTTPResponse:
        """One throttled, measured HTTP exchange. Raises ApiError for anything not 2xx,
        WriteFenced for a write this replica may not send now."""
        fence = self._write_fence(method)
        if fence is not None:
            fence.check()  # before waiting for a token: a refused write spends none
        self._limiter.accept()
        flight: Flight | None = None
        if fence is not None:
            valid_for = fence.check()  # the limiter may have made us wait
            if valid_for is not None and isinstance(timeout, float | int):
                timeout = min(float(timeout), valid_for)
            flight = IN_FLIGHT.begin(fence)
        headers = self._headers()
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        start = time.monotonic()
        response: urllib3.BaseHTTPResponse | None = None
        answer_headers: Mapping[str, str]
        outgoing = _OUTGOING.set(flight)
        try:
            if not stream and self._pool is not None and isinstance(timeout, float | int):
                status, answer_headers, data = self._exchange(
                    method, url, headers, body, float(timeout)
                )
            else:
                response = self._send(method, url, headers, body, timeout)
                status = int(response.status)
                if stream and 200 <= status < 300:
                    self._observe(method, str(status), start)
                    return response
                data = response.data
                answer_headers = response.headers
            if flight is not None:
                flight.answered = True
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            if response is not None:
                response.close()
            self._observe(method, "<error>", start)
            if flight is not None and flight.aborted:
                raise WriteFenced(
                    f"{method} {urlsplit(url).path}: write abandoned: {flight.aborted}",
                    reason="abandoned",
                ) from exc
            raise self._connection_error(exc, method, urlsplit(url).path) from exc
        finally:
            _OUTGOING.reset(outgoing)
            if flight is not None:
                IN_FLIGHT.end(flight)
        self._observe(method, str(status), start)
        if 200 <= status < 300:
            return data
        if status == 401:
            self._rejected(headers.get("Authorization"))
        raise _error_from_response(status, answer_headers, data, method, urlsplit(url).path)

    def _exchange(
        self, method: str, url: str, headers: dict[str, str], body: Any, timeout: float
    ) -> tuple[int, Mapping[str, str], bytes]:
        """One request and its whole answer on a connection of the client's pool, without
        urllib3's and http.client's per-request machinery (URL parsing, header objects,
        the email-based header parser: half of a write's Python time): the request is
        one buffer, the answer is read by :func:`_read_response`. The connection (TLS
        as the kubeconfig set it up) comes from and goes back to the pool (which drops a
        kept-alive connection the server has closed meanwhile); the fence's last check
        happens right before the bytes go out, as in :class:`_FencedHTTPConnection`.

        Sent once: only a request of which not one byte left (:func:`_send_request`) goes
        again, on a new connection. Whether one that broke after that may be replayed is
        the retry rules' decision (:func:`_is_retryable`), not this exchange's."""
        payload = _encode_body(body)
        lines = [f"{method} {url[len(self._origin) :] or '/'} HTTP/1.1", self._host_header]
        lines.extend(f"{name}: {value}" for name, value in headers.items())
        lines.extend(f"{name}: {value}" for name, value in self._impersonation)
        if payload is not None:
            lines.append(f"Content-Length: {len(payload)}")
        request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        if payload:
            request += payload
        pool = self._pool
        conn = pool._get_conn(timeout=timeout)
        keep = False
        reader: Any = None
        try:
            while True:
                reused = conn.sock is not None
                if not reused:
                    conn.timeout = timeout
                    conn.connect()
                _check_outgoing(conn)
                conn.sock.settimeout(timeout)
                if _send_request(conn.sock, request) or not reused:
                    break
                conn.close()  # not a byte left on a stale connection: once more, anew
            reader = conn.sock.makefile("rb")
            status, retry_after, data, close = _read_response(reader)
            keep = not close
        finally:
            if reader is not None:
                with contextlib.suppress(OSError):
                    reader.close()
            if not keep:
                conn.close()
            pool._put_conn(conn)
        return status, ({"Retry-After": retry_after} if retry_after else {}), data

    def _headers(self) -> dict[str, str]:
        """User-Agent, Accept and the credentials' Authorization header (refreshed by the
        credentials when due) for the next request. The ``Impersonate-*`` headers, whose
        names may repeat, are ``self._impersonation``: every way of sending adds them."""
        headers = {"User-Agent": self._options.user_agent, "Accept": "application/json"}
        credentials = self._config.credentials
        if credentials is not None:
            authorization = credentials.authorization()
            if authorization:
                headers["Authorization"] = authorization
        return headers

    def _rejected(self, authorization: str | None) -> None:
        """A 401: credentials that can be fetched again (an exec plugin's) are, next time."""
        rejected = getattr(self._config.credentials, "rejected", None)
        if authorization and rejected is not None:
            rejected(authorization)

    def _write_fence(self, method: str) -> Fence | None:
        """The fence a request must pass: writes of a fenced client only."""
        if self._fence is None or method not in _WRITES:
            return None
        return current_fence() or self._fence

    def _send(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        body: Any,
        timeout: float | tuple[float, float],
    ) -> urllib3.BaseHTTPResponse:
        """The HTTP exchange itself, on the client's urllib3 pool (TLS, proxy and auth
        as the kubeconfig set them up). Bodies are encoded with orjson here rather than
        through ``ApiClient.call_api``, whose sanitising and ``json.dumps`` cost about a
        quarter of a write's client CPU; and urllib3 never retries (tenacity does)."""
        if isinstance(timeout, tuple):
            t = urllib3.Timeout(connect=timeout[0], read=timeout[1])
        else:
            t = urllib3.Timeout(total=timeout)
        payload = _encode_body(body)
        pool = self._pool_manager
        sent: Mapping[str, str] = headers
        if self._impersonation:
            sent = urllib3.HTTPHeaderDict(headers)  # one line per value of a repeated name
            for name, value in self._impersonation:
                sent.add(name, value)
        return cast(
            urllib3.BaseHTTPResponse,
            pool.request(
                method,
                url,
                body=payload,
                headers=sent,
                timeout=t,
                preload_content=False,
                retries=False,
            ),
        )

    def _observe(self, method: str, code: str, start: float) -> None:
        # The labelled children are looked up once (``labels`` takes the metric's lock);
        # two threads racing here get the same children.
        children = self._metric_children.get((method, code))
        if children is None:
            children = (
                REQUEST_DURATION.labels(method, self._host_label),
                REQUESTS_TOTAL.labels(code, method, self._host_label),
            )
            self._metric_children[(method, code)] = children
        children[0].observe(time.monotonic() - start)
        children[1].inc()

    def _connection_error(self, exc: BaseException, method: str, path: str) -> Unavailable:
        """The error a broken exchange is: :class:`~manager.errors.OutcomeUnknown` for a
        write whose bytes may have reached the server, else ``Unavailable``."""
        cause: object = exc
        if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
            cause = exc.reason
        if method in _WRITES and not _never_sent(exc):
            return OutcomeUnknown(
                f"{method} {path}: sent to {self._host}, no answer ({cause}): "
                "the server may or may not have applied it",
                status=0,
                reason="OutcomeUnknown",
            )
        return Unavailable(
            f"{method} {path}: cannot reach {self._host}: {cause}",
            status=0,
            reason="ConnectionError",
        )


@dataclass(frozen=True, slots=True)
class Write:
    """One write of a :meth:`WriteSession.pipeline`: POST ``body`` to a collection or
    merge-PATCH an object with it (build it with :meth:`create` or :meth:`patch`)."""

    method: str
    path: str
    body: JsonDict
    content_type: str

    @classmethod
    def create(cls, resource: Resource, body: JsonDict, namespace: str | None = None) -> Write:
        path = resource.path(_namespace_for(resource, namespace, body))
        return cls("POST", path, body, "application/json")

    @classmethod
    def patch(cls, resource: Resource, name: str, patch: JsonDict, namespace: str | None) -> Write:
        path = _object_path(resource, namespace, name)
        return cls("PATCH", path, patch, _PATCH_CONTENT_TYPES["merge"])


def _answer(
    status: int, retry_after: str, data: bytes, method: str, path: str
) -> JsonDict | ApiError:
    """A write's answer read by :func:`_read_response`: the decoded object, or the
    :class:`~manager.errors.ApiError` it is (an error status, or a body that is no JSON
    object)."""
    if not 200 <= status < 300:
        headers = {"Retry-After": retry_after} if retry_after else {}
        return _error_from_response(status, headers, data, method, path)
    return _json_object(data, method, path)


def _json_object(data: bytes, method: str, path: str) -> JsonDict | ApiError:
    """A successful answer's body as the object it must be (an empty body is ``{}``), or
    the ``InvalidResponse`` error it is when it is no JSON object."""
    try:
        decoded = orjson.loads(data) if data.strip() else {}
    except orjson.JSONDecodeError:
        decoded = None
    if not isinstance(decoded, dict):
        text = data[:_ERROR_TEXT_LIMIT].decode("utf-8", "replace")
        return ApiError(
            f"{method} {path}: the answer is not a JSON object: {text!r}",
            status=0,
            reason="InvalidResponse",
        )
    return decoded


def _request_bytes(write: Write, prefix: str, head: bytes) -> bytes:
    payload = orjson.dumps(write.body)
    return b"".join(
        (
            f"{write.method} {prefix}{write.path} HTTP/1.1\r\n".encode(),
            head,
            f"Content-Type: {write.content_type}\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n".encode(),
            payload,
        )
    )


class WriteSession:
    """Writes (POST, merge PATCH) sent one after the other on one connection this session
    holds, without urllib3's and http.client's per-request machinery: the request head is
    built once per session (the authentication header included, so a refreshed token is
    picked up by the next session), the body is one ``orjson.dumps``, and the answer is
    read with a minimal HTTP/1.1 parser (status, ``Content-Length`` or chunked body).
    Built by :meth:`KubeClient.write_session`.

    The rules of the client's writes hold: every write passes the client's rate limiter;
    a fenced client's write asks the fence that applies (:mod:`manager.fencing`) before
    the limiter and again right before its bytes go out, registers with
    :data:`~manager.fencing.IN_FLIGHT` (so that an abandon shuts its connection) and
    raises :class:`~manager.errors.WriteFenced` when refused; answers other than 2xx raise
    the mapped :class:`~manager.errors.ApiError`; ``rest_client_*`` metrics count each
    write; a 401 makes the credentials fetch again and the head be built anew. Nothing is
    sent twice: a write goes again (on a new connection) only if not one byte of it had
    left, or (in a pipeline) if the server had closed the connection by ``Connection:
    close`` before handling it. A write that broke after that raises (or, in a
    pipeline, results in) :class:`~manager.errors.OutcomeUnknown`; one whose connection
    could not be opened, ``Unavailable``. The next write opens a new connection.

    When the client goes through an HTTP proxy or authenticates with a query parameter,
    the session falls back to the client's ordinary requests.

    A session may be used for many rounds (the Event sender keeps one for its life and
    uses it once per batch): :meth:`close` gives the connection back and forgets the head,
    the next write takes a connection and builds the head again. What it learnt about
    how fast the server answers a pipeline (see :meth:`pipeline`) it keeps.

    Not thread-safe: one thread (the Event sender) uses a session.
    """

    def __init__(self, client: KubeClient) -> None:
        self._client = client
        self._pool: Any = client._pool
        self._conn: Any = None
        self._reader: Any = None
        self._used = False  # the held connection has carried a write already
        self._head: bytes | None = None
        self._prefix = urlsplit(client._host).path.rstrip("/")
        self._raw: _SocketReads | None = None  # under ``_reader``: counts the receives
        # seconds the server took per write of the last pipelines (0: not known yet)
        self._answer_seconds = 0.0
        # the slowest seconds per write the server showed lately (0: not known yet)
        self._write_seconds = 0.0
        self._authorization: str | None = None  # what the head sends
        self._sleep: Callable[[float], None] = time.sleep  # the wait for a pipeline's answers

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            self._release(keep=False)  # left by an exception: the connection may be mid-answer
        self.close()

    def create(self, resource: Resource, body: JsonDict, namespace: str | None = None) -> JsonDict:
        """POST ``body`` (as :meth:`KubeClient.create`: sent once, never again once a
        byte of it has left)."""
        ns = _namespace_for(resource, namespace, body)
        return self._write("POST", resource.path(ns), body, "application/json")

    def patch(
        self, resource: Resource, name: str, patch: JsonDict, *, namespace: str | None = None
    ) -> JsonDict:
        """A merge PATCH (as :meth:`KubeClient.patch` with ``patch_type="merge"``, sent
        once: a session replays nothing)."""
        path = _object_path(resource, namespace, name)
        return self._write("PATCH", path, patch, _PATCH_CONTENT_TYPES["merge"])

    def pipeline(
        self, writes: Sequence[Write], *, decode: bool = True
    ) -> builtins.list[JsonDict | ApiError | WriteFenced]:
        """Send ``writes`` back to back (HTTP/1.1 pipelining: one buffer, one send) and
        read their answers in order: the result of each, a decoded object or the
        :class:`~manager.errors.ApiError` it met. Nothing raises. Every write takes its
        token from the rate limiter. The API server handles a connection's requests one
        after the other, in order, and reads ahead: a write queued behind others is
        handled even if this client has gone meanwhile.

        Nothing is sent twice. Writes behind an answer that closes the connection
        (``Connection: close``: the server handles nothing more on it) go out again on a
        new connection; when the connection breaks otherwise, every write without an
        answer is :class:`~manager.errors.OutcomeUnknown` (it may have been handled).

        A fenced session sends in rounds, asking the fence before each: a round holds
        as many writes as the server answers, at the slowest pace it showed on this
        session lately (:attr:`write_seconds`), within half of what is left of the
        fence's permission (at least one; one while the pace is not known yet). So no
        write waits in the server's queue beyond the permission of the replica that
        sent it, even if that replica is paused right after sending; writes left when
        the fence closes are :class:`~manager.errors.WriteFenced`, unsent.

        The server answers the writes of a round one by one as it handles them; reading
        each as it comes would wake this thread once per write. So a round of several
        writes first waits about as long as the server took per write before (at most
        :data:`_PACE_CAP`), then reads what has arrived in one go; a wait that found
        every answer there already is shortened next time.

        Args:
            writes: what to send, in order.
            decode: False: a successful answer's body is not decoded (nor checked),
                its result is an empty dict (for a caller that needs only to know that
                the write succeeded).
        """
        results: builtins.list[JsonDict | ApiError | WriteFenced] = []
        if not writes:
            return results
        client = self._client
        head = self._head if self._head is not None else self._build_head()
        if self._pool is None or head is None:  # a proxy or query auth: one by one
            for w in writes:
                try:
                    results.append(self._write(w.method, w.path, w.body, w.content_type))
                except ApiError as exc:
                    results.append(exc)
            return results
        fence = client._write_fence(writes[0].method)
        try:
            if fence is not None:
                fence.check()  # before waiting for tokens: a refused pipeline spends none
            for _ in writes:
                client._limiter.accept()
        except WriteFenced as exc:
            return [exc] * len(writes)
        requests = [_request_bytes(w, self._prefix, head) for w in writes]
        flight = IN_FLIGHT.begin(fence) if fence is not None else None
        start = time.monotonic()
        pending = 0  # index of the first write without an answer
        try:
            reopened = 0
            while pending < len(writes):
                timeout = client._options.timeout
                valid_for = fence.check() if fence is not None else None
                if valid_for is not None:
                    timeout = min(timeout, valid_for)
                count = self._round(len(writes) - pending, valid_for)
                conn = self._connection(timeout)
                reused = self._used
                if flight is not None:
                    flight.fence.check()
                    lands_by = None
                    if count > 1 and valid_for is not None:
                        lands_by = time.monotonic() + valid_for
                    IN_FLIGHT.sending(flight, conn, lands_by=lands_by)
                    flight.answered = False
                if not _send_request(conn.sock, b"".join(requests[pending : pending + count])):
                    if reused:  # not a byte left on a stale connection: anew
                        self._release(keep=False)
                        continue
                    raise _NothingSent("the connection broke before the request's first byte")
                self._used = True
                sent_at = time.monotonic()
                if count > 1 and self._answer_seconds > 0:
                    self._sleep(min(self._answer_seconds * count, _PACE_CAP, timeout))
                receives = self._raw.receives if self._raw is not None else 0
                answered = 0
                close = False
                while answered < count and not close:
                    answer = _read_response(self._reader)
                    results.append(self._result(writes[pending], answer, start, decode))
                    close = answer[3]
                    pending += 1
                    answered += 1
                if answered == count:
                    self._learn(count, sent_at, self._raw.receives - receives if self._raw else 1)
                if flight is not None:
                    flight.answered = True  # this round's: nothing of it can land later
                if close:
                    # the server handles nothing more on this connection (RFC 9112 9.6):
                    # what it did not answer it did not handle; again on a new one
                    self._release(keep=False)
                    reopened += 1
                    if reopened > len(writes):
                        raise _ClosedEarly("the server keeps closing the connection")
        except (OSError, urllib3.exceptions.HTTPError, WriteFenced) as exc:
            self._release(keep=False)
            error: ApiError | WriteFenced
            if isinstance(exc, WriteFenced):
                error = exc
            elif flight is not None and flight.aborted:
                error = WriteFenced(f"writes abandoned: {flight.aborted}", reason="abandoned")
            else:
                error = client._connection_error(exc, writes[pending].method, writes[pending].path)
            for w in writes[pending:]:
                client._observe(w.method, "<error>", start)
            results.extend([error] * (len(writes) - pending))
        except BaseException:
            self._release(keep=False)  # never give a connection back mid-exchange
            raise
        finally:
            if flight is not None:
                IN_FLIGHT.end(flight)
        return results

    @property
    def write_seconds(self) -> float:
        """The slowest time per write the server showed on this session's recent rounds
        (seconds, from the send to the last answer; 0 while not known). It bounds how
        many fenced writes a round holds."""
        return self._write_seconds

    def close(self) -> None:
        """Give the connection back to the client's pool (or close it if it is broken)
        and forget the request head; the session may be used again."""
        self._release(keep=True)
        self._head = None

    # -- internals ----------------------------------------------------------------------

    def _result(
        self, write: Write, answer: tuple[int, str, bytes, bool], start: float, decode: bool
    ) -> JsonDict | ApiError:
        status, retry_after, data, _ = answer
        self._client._observe(write.method, str(status), start)
        if not decode and 200 <= status < 300:
            return {}
        if status == 401:
            self._rejected()
        return _answer(status, retry_after, data, write.method, write.path)

    def _rejected(self) -> None:
        """A 401: the credentials are fetched again (an exec plugin's) and the head is
        built anew for the next write."""
        self._client._rejected(self._authorization)
        self._head = None

    def _round(self, left: int, valid_for: float | None) -> int:
        """How many of ``left`` writes the next round sends: all without a time limit;
        else as many as the server answers within half of ``valid_for`` at the pace
        of :attr:`write_seconds`, at least one (one alone on its connection: the
        server drops it when the connection closes before it commits), and one while
        the pace is not known."""
        if valid_for is None:
            return left
        if self._write_seconds <= 0:
            return 1
        return max(1, min(left, int(valid_for * _FENCED_SHARE / self._write_seconds)))

    def _learn(self, sent: int, sent_at: float, receives: int) -> None:
        """What a round whose answers all came says about the server's pace: the time
        per write for :attr:`write_seconds` (the slowest lately: a slower round raises
        it at once, a faster one lowers it by half at most), and the wait before reading
        the next round's answers (:meth:`_pace`)."""
        per_write = (time.monotonic() - sent_at) / sent
        self._write_seconds = max(per_write, self._write_seconds * _PACE_DECAY)
        if sent > 1:
            self._pace(sent, sent_at, receives)

    def _pace(self, sent: int, sent_at: float, receives: int) -> None:
        """Learn how long to wait before reading the next pipeline's answers from how
        this one's came: in one receive (every answer was there when the wait ended: it
        may have been too long) or in more (the server's pace is what it took)."""
        if receives <= 1:
            self._answer_seconds *= _PACE_SHRINK
        else:
            self._answer_seconds = (time.monotonic() - sent_at) / sent

    def _write(self, method: str, path: str, body: JsonDict, content_type: str) -> JsonDict:
        client = self._client
        if self._pool is None:  # a proxy: the ordinary, slower path
            return client._json(
                method, path, body=body, content_type=content_type, replayable=False
            )
        head = self._head if self._head is not None else self._build_head()
        if head is None:  # authentication in the query string: the ordinary path
            return client._json(
                method, path, body=body, content_type=content_type, replayable=False
            )
        fence = client._write_fence(method)
        timeout = client._options.timeout
        if fence is not None:
            fence.check()  # before waiting for a token: a refused write spends none
        client._limiter.accept()
        flight: Flight | None = None
        if fence is not None:
            valid_for = fence.check()  # the limiter may have made us wait
            if valid_for is not None:
                timeout = min(timeout, valid_for)
            flight = IN_FLIGHT.begin(fence)
        payload = orjson.dumps(body)
        request = b"".join(
            (
                f"{method} {self._prefix}{path} HTTP/1.1\r\n".encode(),
                head,
                f"Content-Type: {content_type}\r\nContent-Length: {len(payload)}\r\n\r\n".encode(),
                payload,
            )
        )
        start = time.monotonic()
        try:
            while True:
                conn = self._connection(timeout)
                reused = self._used
                if flight is not None:
                    flight.fence.check()
                    IN_FLIGHT.sending(flight, conn)  # refused if abandoned meanwhile
                if _send_request(conn.sock, request):
                    break
                if not reused:
                    raise _NothingSent("the connection broke before the request's first byte")
                self._release(keep=False)  # not a byte left on a stale connection: anew
            self._used = True
            sent_at = time.monotonic()
            status, retry_after, data, close = _read_response(self._reader)
            if flight is not None:
                flight.answered = True
            self._learn(1, sent_at, 1)
        except (OSError, ValueError, urllib3.exceptions.HTTPError) as exc:
            self._release(keep=False)
            client._observe(method, "<error>", start)
            if flight is not None and flight.aborted:
                raise WriteFenced(
                    f"{method} {path}: write abandoned: {flight.aborted}", reason="abandoned"
                ) from exc
            raise client._connection_error(exc, method, path) from exc
        except BaseException:
            self._release(keep=False)  # never give a connection back mid-exchange
            raise
        finally:
            if flight is not None:
                IN_FLIGHT.end(flight)
        if close:
            self._release(keep=False)
        client._observe(method, str(status), start)
        if status == 401:
            self._rejected()
        answer = _answer(status, retry_after, data, method, path)
        if isinstance(answer, ApiError):
            raise answer
        return answer

    def _build_head(self) -> bytes | None:
        """Host, User-Agent, Accept, authentication and impersonation headers, once per
        session."""
        headers = self._client._headers()
        self._authorization = headers.get("Authorization")
        host = urlsplit(self._client._host).netloc
        lines = [f"Host: {host}"] + [
            f"{k}: {v}"
            for k, v in headers.items()
            if k.lower() not in ("host", "content-type", "content-length")
        ]
        lines.extend(f"{k}: {v}" for k, v in self._client._impersonation)
        self._head = ("\r\n".join(lines) + "\r\n").encode("latin-1")
        return self._head

    def _connection(self, timeout: float) -> Any:
        if self._conn is None:
            self._conn = self._pool._get_conn(timeout=timeout)
            self._used = self._conn.sock is not None  # a pooled, kept-alive connection
        conn = self._conn
        if conn.sock is not None and self._used and wait_for_read(conn.sock, timeout=0.0):
            # held since its last answer, and readable now: the server closed it (or
            # sent what nobody asked for): not to be written on
            self._release(keep=False)
            return self._connection(timeout)
        if conn.sock is None:
            conn.timeout = timeout
            conn.connect()
            self._reader = None
            self._used = False
        if self._reader is None:
            self._raw = _SocketReads(conn.sock)
            self._reader = io.BufferedReader(self._raw, _READ_BUFFER)
        conn.sock.settimeout(timeout)
        return conn

    def _release(self, *, keep: bool) -> None:
        conn, reader = self._conn, self._reader
        self._conn = self._reader = self._raw = None
        self._used = keep and self._used
        if reader is not None:
            with contextlib.suppress(OSError):
                reader.close()
        if conn is None:
            return
        if not keep:
            conn.close()
        self._pool._put_conn(conn)


_MAX_LINE: Final = 65536
_READ_BUFFER: Final = 256 * 1024  # bytes a session reads at once: a pipeline's answers
_PACE_CAP: Final = 0.2  # seconds a pipeline waits for its answers before reading, at most
_PACE_SHRINK: Final = 0.75  # the next wait after one that found every answer there
_PACE_DECAY: Final = 0.5  # how far one faster round lowers WriteSession.write_seconds
_FENCED_SHARE: Final = 0.5  # of a fence's remaining permission, what a round may take


def _send_request(sock: Any, request: bytes) -> bool:
    """Send ``request`` whole. False when the connection refused its first byte (broken
    before anything left: safe to send on another one, as Go's ``nothingWrittenError``);
    an error once a byte has left is raised: the server may be handling the request."""
    try:
        sent = int(sock.send(request))
    except (BrokenPipeError, ConnectionResetError):
        return False
    if sent < len(request):
        sock.sendall(request[sent:])
    return True


def _encode_body(body: Any) -> bytes | None:
    if body is None:
        return None
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    return orjson.dumps(body)


class _SocketReads(io.RawIOBase):
    """A socket as the raw stream under a write session's buffered reader, counting its
    receives (each one a wait for the server, unless its answers were there already)."""

    def __init__(self, sock: Any) -> None:
        super().__init__()
        self._sock = sock
        self.receives = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self.receives += 1
        return int(self._sock.recv_into(buffer))


class _ClosedEarly(ConnectionError):
    """The server closed the connection before the first byte of its answer."""


class _NothingSent(ConnectionError):
    """A new connection broke before the first byte of the request left."""


def _read_response(reader: Any) -> tuple[int, str, bytes, bool]:
    """Read one HTTP/1.1 answer: (status, Retry-After, body, connection closes).

    Raises:
        ConnectionError: the connection ended inside the answer (``_ClosedEarly``:
            before its first byte).
        urllib3.exceptions.ProtocolError: not an HTTP answer.
    """
    try:
        return _parse_response(reader)
    except ValueError as exc:  # a number that is none: the answer is garbled
        raise urllib3.exceptions.ProtocolError(f"not an HTTP answer: {exc}") from None


def _line(reader: Any) -> bytes:
    line = reader.readline(_MAX_LINE + 1)
    if not line:
        raise ConnectionError("the server closed the connection inside its answer")
    if len(line) > _MAX_LINE:
        raise urllib3.exceptions.ProtocolError("an answer line longer than 64 KiB")
    return bytes(line)


def _parse_response(reader: Any) -> tuple[int, str, bytes, bool]:
    while True:
        line = reader.readline(_MAX_LINE + 1)
        if not line:
            raise _ClosedEarly("the server closed the connection before answering")
        parts = line.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/"):
            raise urllib3.exceptions.ProtocolError(f"not an HTTP status line: {line[:80]!r}")
        status = int(parts[1])
        length: int | None = None
        chunked = False
        close = parts[0] == b"HTTP/1.0"
        retry_after = ""
        while True:
            header = _line(reader)
            if header in (b"\r\n", b"\n"):
                break
            name, _, value = header.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"connection":
                close = value.strip().lower() == b"close"
            elif name == b"retry-after":
                retry_after = value.strip().decode("latin-1")
        if 100 <= status < 200:
            continue  # an interim answer: the real one follows
        if chunked:
            pieces = []
            while True:
                size = int(_line(reader).split(b";", 1)[0], 16)
                if size == 0:
                    while _line(reader) not in (b"\r\n", b"\n"):
                        pass  # trailers
                    break
                pieces.append(_read_exactly(reader, size))
                _line(reader)
            return status, retry_after, b"".join(pieces), close
        if length is not None:
            return status, retry_after, _read_exactly(reader, length), close
        if status in (204, 304):
            return status, retry_after, b"", close
        return status, retry_after, reader.read(), True  # delimited by the close


def _read_exactly(reader: Any, size: int) -> bytes:
    data = reader.read(size)
    if len(data) != size:
        raise ConnectionError(f"the answer ended after {len(data)} of {size} bytes")
    return bytes(data)


_HOME_KUBECONFIG: Final = "~/.kube/config"
_BACKOFF_INITIAL: Final = 0.5  # seconds before the first retry, doubled per attempt
_BACKOFF_JITTER: Final = 0.5  # up to this many seconds added at random


def _env_kubeconfig() -> list[str]:
    """The files of ``$KUBECONFIG`` in order, each once (as client-go deduplicates
    them), ``~`` expanded; empty when it is unset or lists nothing."""
    entries = (e.strip() for e in os.environ.get("KUBECONFIG", "").split(os.pathsep))
    return list(dict.fromkeys(os.path.expanduser(e) for e in entries if e))


def _home_kubeconfig() -> str:
    return os.path.expanduser(_HOME_KUBECONFIG)


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= _ERROR_TEXT_LIMIT else text[: _ERROR_TEXT_LIMIT - 3] + "..."


def _is_retryable(exc: BaseException, replayable: bool) -> bool:
    """The module's retry rules: may a request that failed with ``exc`` go again?"""
    if isinstance(exc, TooManyRequests):
        return True  # refused before anything was done: safe for every verb
    if isinstance(exc, Unavailable) and _never_sent(exc.__cause__):
        return True  # the connection never opened: nothing reached the server
    if isinstance(exc, ServerError) and exc.status >= 500 and exc.retry_after is not None:
        return True  # the server says it did not do it, and when to come back
    return replayable and isinstance(exc, ServerError)


def _replayable(method: str, body: Any, content_type: str | None) -> bool:
    """Whether a request may be sent again although its bytes may have reached the
    server: a replay of it cannot be applied twice. GET, HEAD, OPTIONS; a PUT or PATCH
    with a resourceVersion precondition (the server applies one request of a given
    resourceVersion at most once: the replay of an applied one is a 409); a DELETE with
    a uid or resourceVersion precondition (the replay of an applied one is a 404, or a
    409 on a re-created object). Never a POST."""
    if method in _SAFE_METHODS:
        return True
    if method == "DELETE":
        preconditions = body.get("preconditions") if isinstance(body, Mapping) else None
        return isinstance(preconditions, Mapping) and bool(
            preconditions.get("uid") or preconditions.get("resourceVersion")
        )
    if method not in ("PUT", "PATCH"):
        return False
    if content_type == _PATCH_CONTENT_TYPES["json"]:
        return isinstance(body, builtins.list) and any(
            isinstance(op, Mapping)
            and op.get("op") == "test"
            and op.get("path") == "/metadata/resourceVersion"
            and bool(op.get("value"))
            for op in body
        )
    return bool(_metadata(body).get("resourceVersion"))


def _never_sent(cause: BaseException | None) -> bool:
    if isinstance(cause, _NothingSent):
        return True
    if isinstance(cause, urllib3.exceptions.MaxRetryError):
        cause = cause.reason
    # NewConnectionError (refused, no route, DNS) is a ConnectTimeoutError in urllib3 2.
    return isinstance(cause, urllib3.exceptions.ConnectTimeoutError)


def _encode_query(query: Query | None) -> str:
    if not query:
        return ""
    pairs = query.items() if isinstance(query, Mapping) else query
    encoded = [
        (key, ("true" if value else "false") if isinstance(value, bool) else str(value))
        for key, value in pairs
        if value is not None
    ]
    return urlencode(encoded)


def _metadata(body: Any) -> Mapping[str, Any]:
    metadata = body.get("metadata") if isinstance(body, Mapping) else None
    return metadata if isinstance(metadata, Mapping) else {}


def _namespace_for(resource: Resource, namespace: str | None, body: Any) -> str | None:
    if not resource.namespaced:
        return None
    ns = namespace or _metadata(body).get("namespace")
    if not isinstance(ns, str) or not ns:
        raise ValueError(f"{resource.group_resource} is namespaced: a namespace is required")
    return ns


def _object_path(
    resource: Resource, namespace: str | None, name: str, subresource: str | None = None
) -> str:
    if resource.namespaced and not namespace:
        raise ValueError(f"{resource.group_resource} is namespaced: a namespace is required")
    return resource.path(namespace, name, subresource)


def _delete_options(
    propagation_policy: str | None,
    preconditions: JsonDict | None,
    grace_period_seconds: int | None,
) -> JsonDict | None:
    options: JsonDict = {}
    if propagation_policy is not None:
        options["propagationPolicy"] = propagation_policy
    if preconditions is not None:
        options["preconditions"] = preconditions
    if grace_period_seconds is not None:
        options["gracePeriodSeconds"] = grace_period_seconds
    if not options:
        return None
    return {"kind": "DeleteOptions", "apiVersion": "v1", **options}


def _parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - datetime.now(UTC)).total_seconds(), 0.0)


def _error_from_response(
    status: int, headers: Mapping[str, str], data: bytes, method: str, path: str
) -> ApiError:
    body: JsonDict | None = None
    try:
        decoded = orjson.loads(data) if data.strip() else None
    except orjson.JSONDecodeError:
        decoded = None
    if isinstance(decoded, dict) and (decoded.get("kind") == "Status" or "message" in decoded):
        body = decoded
    text = " ".join(data[:_ERROR_TEXT_LIMIT].decode("utf-8", "replace").split())
    fallback = f"{method} {path}: {text}" if text and body is None else f"{method} {path}"
    return api_error_from_status(
        status,
        body,
        retry_after=_parse_retry_after(headers.get("Retry-After")),
        fallback_message=fallback,
    )

"""The client: one per manager, requests addressed by resource, namespace and name, raw
JSON in and out, mapped errors, the retry rules of :mod:`manager.client.retry` applied,
the client-side rate limiter and the write fence asked (client-go ``rest/client.go`` and
``rest/request.go`` with its ``dynamic`` client). See :mod:`manager.client` for the
contract.
"""

from __future__ import annotations

import builtins
import contextlib
import copy
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final, Self, cast
from urllib.parse import urlsplit

import tenacity
import urllib3
from opentelemetry import trace
from prometheus_client import Counter, Histogram

from manager.client.answers import error_from_response, json_object
from manager.client.kubeconfig import (
    ClusterConfig,
    from_kubernetes_configuration,
    load_in_cluster,
    load_kubeconfig,
    pool_manager,
)
from manager.client.request import (
    METHODS,
    PATCH_CONTENT_TYPES,
    WRITES,
    JsonDict,
    PatchType,
    Query,
    QueryValue,
    delete_options,
    encode_body,
    encode_query,
    metadata_of,
    namespace_for,
    object_path,
)
from manager.client.retry import (
    BACKOFF_INITIAL,
    BACKOFF_JITTER,
    SAFE_METHODS,
    SERVER_ASKED_WAIT,
    RetryAbandoned,
    is_replayable,
    is_retryable,
    never_sent,
)
from manager.client.session import WriteSession
from manager.client.watch import WatchStream
from manager.client.wire import (
    OUTGOING,
    check_outgoing,
    read_response,
    send_request,
    use_fenced_connections,
)
from manager.errors import (
    ApiError,
    NotFound,
    OutcomeUnknown,
    Unavailable,
    WriteFenced,
)
from manager.fencing import IN_FLIGHT, Fence, Flight, current_fence
from manager.flowcontrol import RateLimiter, TokenBucket
from manager.metrics import REGISTRY
from manager.resources import (
    BUILTIN_TABLE,
    BUILTINS,
    Resource,
    ResourceTable,
    UnknownResource,
    unknown_message,
)

__all__ = ["REQUESTS_TOTAL", "REQUEST_DURATION", "ClientOptions", "KubeClient"]

logger = logging.getLogger(__name__)
_tracer = trace.get_tracer("overseer.kube")

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


def _resources_of(
    group_version: str, document: JsonDict
) -> builtins.list[tuple[Resource, tuple[str, ...], str]]:
    """The resources of an APIResourceList, with their short and singular names.
    Subresources are not listed; a ``<plural>/status`` entry sets ``has_status``."""
    group, _, version = group_version.rpartition("/")
    entries = [e for e in document.get("resources") or [] if isinstance(e, dict)]
    with_status = {
        str(e.get("name", "")).split("/", 1)[0]
        for e in entries
        if str(e.get("name", "")).endswith("/status")
    }
    return [
        (
            Resource(
                group,
                version,
                str(e["name"]),
                str(e.get("kind", "")),
                namespaced=bool(e.get("namespaced", False)),
                has_status=str(e["name"]) in with_status,
            ),
            tuple(str(n) for n in e.get("shortNames") or ()),
            str(e.get("singularName") or ""),
        )
        for e in entries
        if e.get("name") and "/" not in str(e["name"])
    ]


def _default_user_agent() -> str:
    from manager import __version__

    return f"overseer/{__version__}"


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


class KubeClient:
    """One connection pool to one API server; raw JSON reads, writes and watches.

    Build it with :meth:`load`, :meth:`from_kubeconfig` or :meth:`in_cluster`, or from a
    :class:`~manager.client.kubeconfig.ClusterConfig` (a ``kubernetes.client.Configuration`` is
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
                "configuration must be a manager.client.kubeconfig.ClusterConfig "
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
        use_fenced_connections(self._pool_manager)
        self._fence: Fence | None = None
        self._limiter: RateLimiter = (
            rate_limiter
            if rate_limiter is not None
            else TokenBucket(self._options.qps, self._options.burst)
        )
        self._retry_sleep = retry_sleep if retry_sleep is not None else time.sleep
        self._discovery_lock = threading.Lock()
        self._discovered: dict[str, dict[str, Resource]] = {}
        self._served: ResourceTable | None = None  # what resource() found by discovery
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
        """A client for a kubeconfig (:func:`manager.client.kubeconfig.load_kubeconfig` says
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
        merged as kubectl merges them: see :func:`manager.client.kubeconfig.load_kubeconfig`;
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
        path = object_path(resource, namespace, name)
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
        ns = namespace_for(resource, namespace, body)
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
        name = metadata_of(body).get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{resource.group_resource}: replace needs body.metadata.name")
        ns = namespace_for(resource, namespace, body)
        path = resource.path(ns, name, subresource)
        replayable = is_replayable("PUT", body, None)
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
        content_type = PATCH_CONTENT_TYPES.get(patch_type)
        if content_type is None:
            raise ValueError(f"unknown patch type {patch_type!r}")
        if (patch_type == "json") != isinstance(patch, builtins.list):
            raise ValueError("a JSON patch is a list of operations; other patches are objects")
        if patch_type == "apply" and not field_manager:
            raise ValueError("server-side apply needs a field_manager")
        path = object_path(resource, namespace, name, subresource)
        query: dict[str, QueryValue | None] = {"fieldManager": field_manager, "force": force}
        return self._json(
            "PATCH",
            path,
            query=query,
            body=patch,
            content_type=content_type,
            replayable=is_replayable("PATCH", patch, content_type),
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
        body = delete_options(propagation_policy, preconditions, grace_period_seconds)
        path = object_path(resource, namespace, name)
        return self._json("DELETE", path, body=body, replayable=is_replayable("DELETE", body, None))

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
        body = delete_options(propagation_policy, None, grace_period_seconds)
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
        if method not in METHODS:
            raise ValueError(f"unsupported HTTP method {method!r}")
        if not path.startswith("/"):
            raise ValueError(f"path must start with '/': {path!r}")
        replayable = idempotent or method in SAFE_METHODS
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
        path = f"/apis/{group_version}" if "/" in group_version else f"/api/{group_version}"
        try:
            document = self._json("GET", path, replayable=True)
        except NotFound as exc:
            raise NotFound(
                f"{group_version} is not served by {self._host}", status=404, reason="NotFound"
            ) from exc
        resources = [r for r, _, _ in _resources_of(group_version, document)]
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

    def resource(self, name: str, plural: str | None = None) -> Resource:
        """A resource by any name kubectl takes (see :func:`~manager.resources.builtin`):
        a built-in of Kubernetes 1.36 without asking the server, else what the server
        serves by discovery (custom resources: ``"widgets.example.com"``, ``"Widget"``,
        a short name, ``"example.com/v1/Widget"``). Discovery is cached and asked again on
        a miss, so a CRD installed since is found.

        Raises:
            UnknownResource: nothing by that name is served (a ``KeyError``; the message
                names the closest matches and asks whether a CRD is missing).
            ApiError: discovery failed.
        """
        found = BUILTIN_TABLE.resolve(name, plural)
        if found is not None:
            return found
        with self._discovery_lock:
            table = self._served
        if table is not None:
            found = table.resolve(name, plural)
            if found is not None:
                return found
        table = self._discover_served()
        found = table.resolve(name, plural)
        if found is not None:
            return found
        raise UnknownResource(
            unknown_message(
                name,
                plural,
                [BUILTIN_TABLE, table],
                head=f"no resource {{asked}} is served by {self._host}",
                hint=" Is its CustomResourceDefinition installed? A controller can wait for "
                "it: PluginContext.when_served(name, wire).",
            )
        )

    def _discover_served(self) -> ResourceTable:
        """What the server serves beyond Kubernetes' own group versions, in kubectl's
        order (groups as ``/apis`` lists them, the preferred version of each first)."""
        groups = self._json("GET", "/apis", replayable=True).get("groups") or []
        known = {r.api_version for r in BUILTIN_TABLE}
        entries: list[tuple[Resource, tuple[str, ...]]] = []
        singular: dict[Resource, str] = {}
        for group in groups:
            preferred = (group.get("preferredVersion") or {}).get("groupVersion")
            versions = [v.get("groupVersion") for v in group.get("versions") or []]
            ordered = (
                [preferred, *(v for v in versions if v != preferred)] if preferred else versions
            )
            for group_version in ordered:
                if not isinstance(group_version, str) or group_version in known:
                    continue
                try:
                    document = self._json("GET", f"/apis/{group_version}", replayable=True)
                except NotFound:
                    continue  # removed between the two reads
                found = _resources_of(group_version, document)
                with self._discovery_lock:
                    self._discovered[group_version] = {r.kind: r for r, _, _ in found}
                for resource, short, single in found:
                    entries.append((resource, short))
                    if single:
                        singular[resource] = single
        table = ResourceTable(entries, singular=singular)
        with self._discovery_lock:
            self._served = table
        return table

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
        decoded = json_object(data, method, path)
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
        encoded = encode_query(query)
        if encoded:
            url = f"{url}?{encoded}"

        def retryable(exc: BaseException) -> bool:
            return is_retryable(exc, replayable)

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
            SERVER_ASKED_WAIT.set(True)
            return min(max(exc.retry_after, 0.0), cap)
        SERVER_ASKED_WAIT.set(False)
        exponent = min(state.attempt_number - 1, 32)
        backoff = BACKOFF_INITIAL * 2.0**exponent + random.uniform(0, BACKOFF_JITTER)
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
        outgoing = OUTGOING.set(flight)
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
            OUTGOING.reset(outgoing)
            if flight is not None:
                IN_FLIGHT.end(flight)
        self._observe(method, str(status), start)
        if 200 <= status < 300:
            return data
        if status == 401:
            self._rejected(headers.get("Authorization"))
        raise error_from_response(status, answer_headers, data, method, urlsplit(url).path)

    def _exchange(
        self, method: str, url: str, headers: dict[str, str], body: Any, timeout: float
    ) -> tuple[int, Mapping[str, str], bytes]:
        """One request and its whole answer on a connection of the client's pool, without
        urllib3's and http.client's per-request machinery (URL parsing, header objects,
        the email-based header parser: half of a write's Python time): the request is
        one buffer, the answer is read by :func:`read_response`. The connection (TLS
        as the kubeconfig set it up) comes from and goes back to the pool (which drops a
        kept-alive connection the server has closed meanwhile); the fence's last check
        happens right before the bytes go out, as in :class:`_FencedHTTPConnection`.

        Sent once: only a request of which not one byte left (:func:`send_request`) goes
        again, on a new connection. Whether one that broke after that may be replayed is
        the retry rules' decision (:func:`is_retryable`), not this exchange's."""
        payload = encode_body(body)
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
                check_outgoing(conn)
                conn.sock.settimeout(timeout)
                if send_request(conn.sock, request) or not reused:
                    break
                conn.close()  # not a byte left on a stale connection: once more, anew
            reader = conn.sock.makefile("rb")
            status, retry_after, data, close = read_response(reader)
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
        if self._fence is None or method not in WRITES:
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
        payload = encode_body(body)
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
        if method in WRITES and not never_sent(exc):
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


_HOME_KUBECONFIG: Final = "~/.kube/config"


def _env_kubeconfig() -> list[str]:
    """The files of ``$KUBECONFIG`` in order, each once (as client-go deduplicates
    them), ``~`` expanded; empty when it is unset or lists nothing."""
    entries = (e.strip() for e in os.environ.get("KUBECONFIG", "").split(os.pathsep))
    return list(dict.fromkeys(os.path.expanduser(e) for e in entries if e))


def _home_kubeconfig() -> str:
    return os.path.expanduser(_HOME_KUBECONFIG)

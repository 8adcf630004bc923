"""The local API server: kube-apiserver's REST protocol over HTTP, in process.

:class:`LocalApiServer` serves discovery, CRUD, PATCH, status subresources, LIST with
selectors and pagination, and WATCH (chunked JSON lines, bookmarks, 410 as an ERROR
event) on 127.0.0.1 at a free port, and writes a kubeconfig for itself, so that the
official ``kubernetes`` client and ``kubectl`` talk to it without knowing it is not a
cluster. Plugin authors use it in their tests; ``overseer run --embedded`` runs on it.

Routing and HTTP live here; what each verb does lives in :mod:`.rest`, storage and
revisions in :mod:`.storage`, watch fan-out in :mod:`.watch`, garbage collection in
:mod:`.garbage`, fault injection in :mod:`.faults`.

Thread-safe: one thread per connection (named ``local-apiserver/conn-N``) plus the
server and garbage-collector threads; ``stop()`` closes every connection and joins them.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
import os
import random
import socket
import ssl
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qs, unquote, urlsplit

import orjson
import yaml

from apiserver.api.errors import StatusError
from apiserver.api.gofmt import quote
from apiserver.api.resources import ResourceRegistry, ServedResource
from apiserver.http import discovery, featuregates, openapi, printers
from apiserver.http.audit import Audit
from apiserver.http.faults import Faults
from apiserver.machinery import negotiation, protobuf
from apiserver.machinery.admission import request_context
from apiserver.machinery.authenticator import ANONYMOUS, Authenticator, UserInfo
from apiserver.machinery.authorizer import (
    Attributes,
    RbacAuthorizer,
    bootstrap_policy,
    forbidden,
    request_name,
)
from apiserver.machinery.fieldvalidation import Directive, warning_headers
from apiserver.machinery.rest import (
    DeleteOptions,
    ListOptions,
    Rest,
    check_write_options,
)
from apiserver.registry import eventsconv, hpaconv, subresources
from apiserver.registry.allocator import SERVICE_RANGE
from apiserver.registry.garbage import GarbageCollector
from apiserver.registry.quota import DEFAULT_SYNC_PERIOD, QuotaController
from apiserver.registry.strategy import new_rest
from apiserver.registry.workloads import WorkloadControllers
from apiserver.storage.compaction import DEFAULT_COMPACTION_INTERVAL, Compactor
from apiserver.storage.store import Storage, TooOldResourceVersion
from apiserver.storage.watch import Watcher

__all__ = ["LocalApiServer"]

logger = logging.getLogger(__name__)

JsonDict = dict[str, Any]
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
_WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
# Subresources whose REST storage has no table convertor in kube (BindingREST,
# EvictionREST, TokenREST); create-only resources (the reviews, bindings) have none either.
_NO_TABLE_SUBRESOURCES = frozenset({"binding", "eviction", "token"})


def _has_table_convertor(route: _Route) -> bool:
    if route.subresource in _NO_TABLE_SUBRESOURCES:
        return False
    return route.subresource is not None or tuple(route.served.verbs) != ("create",)


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = False
    block_on_close = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], owner: LocalApiServer) -> None:
        self.owner = owner
        self._conn_ids = itertools.count(1)
        self._sockets: set[socket.socket] = set()
        self._sockets_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        # Like ThreadingMixIn.process_request, with named threads we can find and join.
        with self._sockets_lock:
            self._sockets.add(request)
        t = threading.Thread(
            target=self.process_request_thread,
            args=(request, client_address),
            name=f"local-apiserver/conn-{next(self._conn_ids)}",
        )
        if self._threads is not None:  # type: ignore[attr-defined]
            self._threads.append(t)  # type: ignore[attr-defined]
        t.start()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # socketserver's default prints a traceback to stderr: a client that went away is
        # routine (debug), anything else is a bug of ours, logged with its traceback
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError | TimeoutError | ssl.SSLError):
            logger.debug("client went away", extra={"client": client_address, "error": str(error)})
        else:
            logger.error("request failed", extra={"client": client_address}, exc_info=True)

    def shutdown_request(self, request: Any) -> None:
        with self._sockets_lock:
            self._sockets.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self._sockets_lock:
            sockets = list(self._sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class _Route:
    """A parsed resource URL."""

    __slots__ = ("name", "namespace", "served", "subresource", "watch_path")

    def __init__(
        self,
        served: ServedResource,
        namespace: str | None,
        name: str | None,
        subresource: str | None,
        watch_path: bool,
    ) -> None:
        self.served = served
        self.namespace = namespace
        self.name = name
        self.subresource = subresource
        self.watch_path = watch_path


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in one write; without TCP_NODELAY a small answer would
    # still wait for the client's delayed ACK (~40 ms per request).
    disable_nagle_algorithm = True
    server: _HttpServer
    server_version = "overseer-local-apiserver"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("http request", extra={"client": self.address_string(), "line": format % args})

    # -- plumbing --------------------------------------------------------------------

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send_json(
        self,
        code: int,
        body: Any,
        headers: dict[str, str] | None = None,
        *,
        content_type: str = "application/json",
    ) -> None:
        data = orjson.dumps(body) + b"\n"  # as kube-apiserver, a newline after every body
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        if "Cache-Control" not in (headers or {}):
            self.send_header("Cache-Control", "no-cache, private")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        for value in warning_headers(getattr(self, "_warnings", ())):
            self.send_header("Warning", value)
        self._finish(data)

    def _finish(self, data: bytes) -> None:
        """End the headers and send them with the body in one write."""
        self._headers_buffer.append(b"\r\n" + data)  # type: ignore[attr-defined]
        self.flush_headers()

    def _send_text(self, code: int, text: str) -> None:
        data = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Length", str(len(data)))
        self._finish(data)

    def _send_plain(self, code: int, text: str) -> None:
        data = text.encode()
        self.send_response(code)
        if code == 204:  # StreamObject without a stream: the status alone
            self.send_header("Cache-Control", "no-cache, private")
            self._finish(b"")
            return
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache, private")
        self._finish(data)

    def _send_answer(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
        """An API answer in the media type negotiated for this request (JSON unless a
        resource endpoint negotiated YAML or protobuf); a kind without a protobuf form
        here is written in JSON."""
        media = self._accepted.media
        data = None
        if media == negotiation.PROTOBUF:
            data = _protobuf_or_none(body)
        elif media == negotiation.YAML:
            data = negotiation.to_yaml(body)
        if data is None:
            self._send_json(code, body, headers)
            return
        self.send_response(code)
        self.send_header("Content-Type", media)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache, private")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        for value in warning_headers(getattr(self, "_warnings", ())):
            self.send_header("Warning", value)
        self._finish(data)

    def _send_status(self, err: StatusError) -> None:
        """An error, as kube's ``ErrorNegotiated`` writes it: in the first media type the
        Accept header allows with no transformation (a Status has a protobuf form even
        where the resource has none), else as raw JSON (``WriteRawJSON``: indented, no
        newline after it) with the error's own code."""
        media = negotiation.error_media(self.headers.get("Accept") or "")
        if media is None:
            data = orjson.dumps(err.status(), option=orjson.OPT_INDENT_2)
            self.send_response(err.code)
            for k, v in err.headers.items():
                self.send_header(k, v)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self._finish(data)
            return
        self._accepted = negotiation.Accepted(media)
        self._send_answer(err.code, err.status(), err.headers)

    def _not_found_page(self) -> None:
        self._send_text(404, "404 page not found\n")

    # -- dispatch --------------------------------------------------------------------

    def _dispatch(self, method: str) -> None:
        owner = self.server.owner
        self._warnings: list[str] = []  # Warning headers of this request's answer
        # what the answer is written in: JSON until a resource endpoint negotiates it
        self._accepted = negotiation.Accepted()
        split = urlsplit(self.path)
        path = unquote(split.path).rstrip("/") or "/"
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        body = self._body() if method in ("POST", "PUT", "PATCH", "DELETE") else b""
        try:
            self._who = self._authenticate()
            route = self._route(path)
            if owner.authorizer is not None:
                self._authorize(method, path, route, query)
            if self._serve_meta(method, path):
                return
            if route is None:
                if self._under_builtin_api(path):
                    # go-restful claims /api and /apis/{built-in group}: its 404 is a Status.
                    self._send_status(
                        StatusError(
                            404,
                            "NotFound",
                            "the server could not find the requested resource",
                            {},
                        )
                    )
                else:
                    self._not_found_page()
                return
            verb = self._verb(method, route, query)
            if _scope_differs(route, verb):
                self._not_found_page()
                return
            if verb not in route.served.verbs and verb == "deletecollection":
                # go-restful has no route for it: NewGenericServerResponse's 405
                raise _method_not_allowed()
            if verb == "patch" and not route.served.custom:
                _restful_consumes(self.headers.get("Content-Type") or "")
            if not route.served.custom:
                _restful_produces(verb, route.subresource or "", self.headers.get("Accept") or "")
            r = route.served.resource
            owner._count(verb, r.group, r.plural, route.subresource or "")
            latency = owner.faults.latency
            if latency:
                time.sleep(latency)
            injected = owner.faults.check(verb, route.served.resource.plural)
            if injected is not None:
                self._send_status(injected)
                return
            # every handler negotiates its answer before it reads or writes anything
            # (handlers/get.go, create.go, ...: NegotiateOutputMediaType comes first)
            self._accepted = negotiation.negotiate(
                self.headers.get("Accept") or "",
                custom=route.served.custom,
                table=_has_table_convertor(route),
            )
            if verb == "watch":
                self._watch(route, query)
                return
            if verb in _WRITE_VERBS and self._client_gone():
                # kube-apiserver: the client's close cancels the request's context, so a
                # write that is not yet committing is not applied (nobody hears the answer)
                logger.debug("client gone: write not applied", extra={"path": self.path})
                self.close_connection = True
                return
            with (
                owner.audit.acting(self._user(), verb),
                request_context(self._who.name, self._who.groups, self._who.uid) as admitted,
            ):
                try:
                    code, answer = self._handle(verb, route, query, body)
                finally:
                    self._warnings.extend(admitted.warnings)  # a Warn binding's, or a Deny's
            if isinstance(answer, str):  # pods/log
                self._send_plain(code, answer)
                return
            if verb in ("get", "list"):
                answer = self._transform(route, verb, answer, query)
            self._send_answer(code, answer)
        except StatusError as err:
            self._send_status(err)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:
            logger.exception("local API server failed a request", extra={"path": self.path})
            with contextlib.suppress(OSError):
                self._send_status(StatusError(500, "InternalError", f"internal error: {exc}"))

    def _user(self) -> str:
        """Who asks, by name (for the audit)."""
        return self._who.name

    def _authenticate(self) -> UserInfo:
        """The user the bearer token names (kube answers 401 to a token it does not
        know; without RBAC the local server takes an unknown token as the user's name)."""
        owner = self.server.owner
        auth = self.headers.get("Authorization") or ""
        scheme, _, token = auth.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return owner.authenticator.admin if owner.anonymous_is_admin else ANONYMOUS
        user = owner.authenticator.lookup(token)
        if user is not None:
            return user
        if owner.authorizer is None:
            return UserInfo(token, groups=("system:authenticated",))
        raise StatusError(401, "Unauthorized", "Unauthorized")

    def _authorize(
        self, method: str, path: str, route: _Route | None, query: dict[str, str]
    ) -> None:
        """Refuse (403, kube's message) what RBAC does not allow."""
        owner = self.server.owner
        assert owner.authorizer is not None
        if route is None:
            attrs = Attributes(self._who, method.lower(), False, path=path)
        else:
            verb = self._verb(method, route, query)
            if verb == "patch" and not route.served.custom:
                _restful_consumes(self.headers.get("Content-Type") or "")
            r = route.served.resource
            name = route.name or ""
            if verb in ("list", "watch") and not name:
                name = request_name(query.get("fieldSelector", ""))
            namespace = route.namespace or ""
            if r.plural == "namespaces" and not r.group and route.name:
                namespace = route.name  # kube's RequestInfo: a namespace is its own
            attrs = Attributes(
                self._who,
                verb,
                True,
                namespace=namespace,
                api_group=r.group,
                resource=r.plural,
                subresource=route.subresource or "",
                name=name,
            )
        decision = owner.authorizer.authorize(attrs)
        if not decision.allowed:
            raise forbidden(attrs, decision.reason)

    def _client_gone(self) -> bool:
        """Whether the client has closed its side of the connection (EOF is waiting)."""
        sock: socket.socket = self.connection
        try:
            data = sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            return True
        return data == b""

    def _serve_meta(self, method: str, path: str) -> bool:
        owner = self.server.owner
        if method != "GET":
            return False
        if path in ("/healthz", "/readyz", "/livez"):
            self._send_text(200, "ok")
        elif path == "/version":
            # responsewriters.WriteRawJSON: indented, and no newline after it.
            data = orjson.dumps(discovery.version_info(), option=orjson.OPT_INDENT_2)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self._finish(data)
        elif path == "/openapi/v3":
            # kube-aggregator's handleDiscovery sets no Content-Type and http.ServeContent
            # sniffs the JSON as text
            root = openapi.root(owner.registry, self._crds())
            self._send_json(200, root, content_type="text/plain; charset=utf-8")
        elif path.startswith("/openapi/v3/"):
            self._openapi(path.removeprefix("/openapi/v3/"))
        elif path == "/openapi/v2":
            self._openapi_v2()
        elif (
            path in ("/api", "/apis")
            and (target := negotiation.target(self.headers.get("Accept") or "")).as_kind
            == "APIGroupDiscoveryList"
        ):
            # Aggregated discovery: the Content-Type names what was answered (client-go
            # checks it to tell aggregated from legacy discovery).
            listing = discovery.aggregated(
                owner.registry, core=path == "/api", version=target.version
            )
            ctype = (
                f"application/json;g=apidiscovery.k8s.io;v={target.version}"
                ";as=APIGroupDiscoveryList"
            )
            self._send_json(200, listing, {"Vary": "Accept"}, content_type=ctype)
        elif path == "/api":
            self._send_json(
                200, discovery.api_versions(self.server.owner.url.removeprefix("http://"))
            )
        elif path == "/apis":
            self._send_json(200, discovery.api_group_list(owner.registry))
        elif path == "/api/v1":
            doc = discovery.api_resource_list(owner.registry, "", "v1")
            self._send_json(200, doc)
        elif path.startswith("/apis/") and path.count("/") in (2, 3):
            parts = path.split("/")[2:]
            doc = (
                discovery.api_group(owner.registry, parts[0])
                if len(parts) == 1
                else discovery.api_resource_list(owner.registry, parts[0], parts[1])
            )
            if doc is None:
                self._not_found_page()
            else:
                self._send_json(200, doc)
        else:
            return False
        return True

    def _crds(self) -> dict[str, JsonDict]:
        storage = self.server.owner.storage
        with storage.lock:
            crds = storage.list("apiextensions.k8s.io/customresourcedefinitions", None)
        return {str(c["metadata"]["name"]): c for c in crds}

    def _openapi(self, rel: str) -> None:
        """One group-version's OpenAPI v3 document; ``?hash=`` as kube-apiserver serves it
        (the current hash: cacheable for good; a stale one: a redirect to the current)."""
        parts = rel.split("/")
        registry = self.server.owner.registry
        doc = None
        if parts[0] == "api" and len(parts) == 2:
            doc = openapi.group_version_document(registry, "", parts[1], self._crds())
        elif parts[0] == "apis" and len(parts) == 3:
            doc = openapi.group_version_document(registry, parts[1], parts[2], self._crds())
        if doc is None:
            self._not_found_page()
            return
        digest = openapi.document_hash(doc)
        asked = parse_qs(urlsplit(self.path).query).get("hash", [""])[-1]
        if asked and asked != digest:
            self.send_response(301)
            self.send_header("Location", f"/openapi/v3/{rel}?hash={digest}")
            self.send_header("Content-Length", "0")
            self._finish(b"")
            return
        headers = {"Etag": f'"{digest}"', "Vary": "Accept"}
        if asked:
            headers["Cache-Control"] = "public, immutable"
            headers["Expires"] = time.strftime(
                "%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 365 * 86400)
            )
        if self._not_modified(headers):
            return
        self._send_json(200, doc, headers)

    def _openapi_v2(self) -> None:
        """``/openapi/v2`` as kube-openapi's handler serves it: JSON with its ETag (the
        SHA-512 of the body), 304 to an ``If-None-Match`` naming it. Protobuf is not
        offered: an ``Accept`` that takes nothing else is answered 406."""
        if not _takes_json(self.headers.get("Accept") or "*/*"):
            self.send_response(406)
            self.send_header("Vary", "Accept")
            self.send_header("Content-Length", "0")
            self._finish(b"")
            return
        data = orjson.dumps(openapi.swagger(self.server.owner.registry, self._crds()))
        headers = {"Etag": f'"{hashlib.sha512(data).hexdigest().upper()}"', "Vary": "Accept"}
        if self._not_modified(headers):
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers.items():
            self.send_header(k, v)
        self._finish(data)

    def _not_modified(self, headers: dict[str, str]) -> bool:
        """Answer 304 (``http.ServeContent``) when ``If-None-Match`` names the ETag."""
        asked = self.headers.get("If-None-Match") or ""
        etag = headers["Etag"]
        if asked.strip() != "*" and etag not in [t.strip() for t in asked.split(",")]:
            return False
        self.send_response(304)
        for k, v in headers.items():
            self.send_header(k, v)
        self._finish(b"")
        return True

    def _under_builtin_api(self, path: str) -> bool:
        """Whether kube-apiserver's go-restful container claims ``path``: ``/api/...`` and
        ``/apis/{group}/...`` of a built-in group (unknown groups, CRD groups and other
        paths fall through to the plain-text not-found handler)."""
        parts = path.strip("/").split("/")
        if parts[0] == "api":
            return True
        return (
            parts[0] == "apis"
            and len(parts) >= 2
            and parts[1] in self.server.owner.registry.builtin_groups()
        )

    def _route(self, path: str) -> _Route | None:
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif parts[0] == "apis" and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        watch_path = bool(rest) and rest[0] == "watch"
        if watch_path:
            rest = rest[1:]
        registry = self.server.owner.registry
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        elif len(rest) == 2 and rest[0] == "namespaces" and not group:
            pass  # /api/v1/namespaces/{name}
        if not rest or len(rest) > 3:
            return None
        served = registry.lookup(group, version, rest[0])
        if served is None:
            # /api/v1/namespaces/{name}/{status|finalize}
            if namespace is not None and not group and rest[0] in ("status", "finalize"):
                ns_served = registry.lookup("", "v1", "namespaces")
                if ns_served is not None:
                    return _Route(ns_served, None, namespace, rest[0], watch_path)
            return None
        if namespace is not None and not served.resource.namespaced:
            return None
        name = rest[1] if len(rest) >= 2 else None
        subresource = rest[2] if len(rest) == 3 else None
        if subresource is not None and subresource not in (
            "status",
            "finalize",
            *served.subresources,
        ):
            return None
        if subresource == "status" and not served.resource.has_status:
            return None
        if subresource == "finalize" and served.resource.kind != "Namespace":
            return None
        return _Route(served, namespace, name, subresource, watch_path)

    @staticmethod
    def _verb(method: str, route: _Route, query: dict[str, str]) -> str:
        if method == "GET":
            if route.name is None:
                return "watch" if route.watch_path or _truthy(query.get("watch")) else "list"
            return "watch" if route.watch_path else "get"
        if method == "POST":
            return "create"
        if method == "PUT":
            return "update"
        if method == "PATCH":
            return "patch"
        return "delete" if route.name is not None else "deletecollection"

    @staticmethod
    def _dry_run(query: dict[str, str], body: bytes, verb: str) -> list[str]:
        """Every ``dryRun`` value of the query (and of a DeleteOptions body)."""
        values = [query["dryRun"]] if "dryRun" in query else []
        if verb in ("delete", "deletecollection") and body.strip()[:1] == b"{":
            with contextlib.suppress(ValueError):
                sent = orjson.loads(body).get("dryRun")
                if isinstance(sent, list):
                    values += [str(v) for v in sent]
        return values

    def _decode(self, body: bytes, served: ServedResource) -> Any:
        """A create/update body, read by its Content-Type (JSON, YAML or protobuf)."""
        ctype = self.headers.get("Content-Type") or ""
        return negotiation.decode_body(body, ctype, custom=served.custom)

    def _decode_write(
        self, served: ServedResource, query: dict[str, str], body: bytes
    ) -> tuple[Any, Directive]:
        """A POST/PUT body as kube's decoder reads it; its warnings go with the answer."""
        decoded, directive = self.server.owner.rest.decode_write(
            served, body, query.get("fieldValidation", ""), self.headers.get("Content-Type") or ""
        )
        self._warnings = directive.warnings
        return decoded, directive

    def _manager(self, query: dict[str, str]) -> str:
        agent = self.headers.get("User-Agent") or ""
        return query.get("fieldManager") or agent.split("/")[0] or "unknown"

    def _handle(
        self, verb: str, route: _Route, query: dict[str, str], body: bytes
    ) -> tuple[int, Any]:
        rest = self.server.owner.rest
        served, ns, name = route.served, route.namespace, route.name
        if served.resource.api_version in _VIEWS:
            return self._handle_view(verb, route, query, body)
        manager = self._manager(query)
        dry_run = query.get("dryRun") == "All"
        check_write_options(
            verb, query, self._dry_run(query, body, verb), self.headers.get("Content-Type") or ""
        )
        sub = route.subresource
        if sub is not None and sub not in ("status", "finalize", "approval"):
            assert name is not None
            owner = self.server.owner
            decoded = self._decode(body, served) if verb in ("create", "update") else None
            return subresources.handle(
                rest,
                owner.registry,
                verb,
                served,
                ns,
                name=name,
                subresource=sub,
                body=decoded,
                raw=body,
                content_type=self.headers.get("Content-Type") or "",
                query=query,
                manager=manager,
                dry_run=dry_run,
                authenticator=owner.authenticator,
            )
        if served.resource.kind == "ComponentStatus":
            return self._component_statuses(verb, name)
        if served.resource.kind in subresources.CREATE_ONLY_KINDS:
            if verb != "create" or name is not None:
                raise _method_not_allowed()
            return subresources.create_only(
                rest,
                self.server.owner.registry,
                served,
                ns,
                self._decode(body, served),
                user=self._who,
                authorizer=self.server.owner.authorizer,
                authenticator=self.server.owner.authenticator,
            )
        if sub == "approval":
            if verb != "update":
                raise _method_not_allowed()
            route = _Route(served, ns, name, "status", route.watch_path)
            verb = "update"
        if verb == "get":
            assert name is not None
            return 200, rest.get(served, ns, name)
        if verb == "list":
            return 200, rest.list(served, ns, _list_options(query))
        if verb == "create":
            if name is not None:
                raise _method_not_allowed(custom=served.custom)
            if served.resource.namespaced and ns is None:
                raise StatusError(
                    404, "NotFound", "the server could not find the requested resource"
                )
            decoded, directive = self._decode_write(served, query, body)
            obj = rest.create(
                served,
                ns,
                decoded,
                manager=manager,
                dry_run=dry_run,
                directive=directive,
                owned=True,
            )
            return 201, obj
        if verb == "update":
            if name is None:
                raise _method_not_allowed(custom=served.custom)
            decoded, directive = self._decode_write(served, query, body)
            obj = rest.update(
                served,
                ns,
                name,
                decoded,
                subresource=route.subresource,
                manager=manager,
                dry_run=dry_run,
                directive=directive,
                owned=True,
            )
            return 200, obj
        if verb == "patch":
            if name is None:
                raise _method_not_allowed(custom=served.custom)
            ctype = self.headers.get("Content-Type") or ""
            directive = Directive(mode=query.get("fieldValidation") or "Warn")
            self._warnings = directive.warnings
            return rest.patch_with_status(
                served,
                ns,
                name,
                body,
                ctype,
                subresource=route.subresource,
                manager=manager,
                dry_run=dry_run,
                force=_truthy(query.get("force")),
                directive=directive,
            )
        options = _delete_options(query, body, self.headers.get("Content-Type") or "")
        if verb == "delete":
            assert name is not None
            gone, last = rest.delete(served, ns, name, options, manager=manager)
            return 200, rest.delete_answer(served, gone, last)
        return 200, rest.delete_collection(
            served, ns, _list_options(query), options, manager=manager
        )

    def _transform(
        self, route: _Route, verb: str, answer: JsonDict, query: dict[str, str]
    ) -> JsonDict:
        """The answer in the form the Accept header asks for (Table, metadata only)."""
        target = self._accepted.target
        if target.as_kind == "Table":
            return self._table(route, verb, answer, query)
        if target.as_kind in ("PartialObjectMetadata", "PartialObjectMetadataList"):
            wanted = "PartialObjectMetadataList" if verb == "list" else "PartialObjectMetadata"
            if target.as_kind != wanted:
                raise StatusError(
                    406,
                    "NotAcceptable",
                    f"only the following media types are accepted: application/json;as="
                    f"{wanted};g=meta.k8s.io;v={target.version}",
                )
            return partial_metadata(answer, f"meta.k8s.io/{target.version}", listed=verb == "list")
        return answer

    def _table(self, route: _Route, verb: str, answer: JsonDict, query: dict[str, str]) -> JsonDict:
        """Server-side printing: a meta.k8s.io/v1 Table, as ``kubectl get`` asks for."""
        r = route.served.resource
        columns = None
        if route.served.custom:
            crd = self.server.owner.storage.get(
                ("apiextensions.k8s.io/customresourcedefinitions", "", route.served.crd_name)
            )
            for version in ((crd or {}).get("spec") or {}).get("versions") or []:
                if version.get("name") == r.version:
                    columns = version.get("additionalPrinterColumns")
        if verb == "list":
            objs, meta = answer.get("items") or [], answer.get("metadata") or {}
        else:
            objs = [answer]
            meta = {"resourceVersion": (answer.get("metadata") or {}).get("resourceVersion", "")}
        if query.get("includeObject") == "Object":
            # asTable: each row's object is encoded as an object of the request's version
            typed = {"kind": r.kind, "apiVersion": r.api_version}
            objs = [typed | obj for obj in objs]
        try:
            return printers.to_table(
                r.kind,
                r.group,
                objs,
                list_metadata=meta,
                include_object=query.get("includeObject", "Metadata"),
                crd_columns=columns,
            )
        except ValueError as exc:
            raise StatusError(400, "BadRequest", str(exc)) from None

    def _component_statuses(self, verb: str, name: str | None) -> tuple[int, JsonDict]:
        """``componentstatuses`` (get, list): kube-apiserver probes etcd, the scheduler
        and kube-controller-manager when asked. Here the storage is in process (etcd-0
        is healthy) and the other two are not running, which is what kube reports when
        their health endpoints refuse connections."""
        if verb not in ("get", "list"):
            raise _method_not_allowed()
        ports = {"scheduler": 10259, "controller-manager": 10257}

        def status(component: str) -> JsonDict:
            if component == "etcd-0":
                condition = {"type": "Healthy", "status": "True", "message": "ok"}
            else:
                url = f"https://127.0.0.1:{ports[component]}/healthz"
                condition = {
                    "type": "Healthy",
                    "status": "False",
                    "error": f'Get "{url}": dial tcp 127.0.0.1:{ports[component]}: connect: '
                    "connection refused",
                }
            return {
                "kind": "ComponentStatus",
                "apiVersion": "v1",
                "metadata": {"name": component},
                "conditions": [condition],
            }

        names = ("controller-manager", "etcd-0", "scheduler")
        if verb == "list":
            items = [
                {k: v for k, v in status(n).items() if k not in ("kind", "apiVersion")}
                for n in names
            ]
            return 200, {
                "kind": "ComponentStatusList",
                "apiVersion": "v1",
                "metadata": {},
                "items": items,
            }
        if name not in names:
            raise StatusError(
                404,
                "NotFound",
                f'componentstatuses "{name}" not found',
                {"name": name, "kind": "componentstatuses"},
            )
        return 200, status(str(name))

    def _handle_view(
        self, verb: str, route: _Route, query: dict[str, str], body: bytes
    ) -> tuple[int, JsonDict]:
        """A resource stored as another version or resource and served through a
        conversion, as kube serves one internal object at several versions:
        events.k8s.io/v1 Events are core Events, autoscaling/v1 HorizontalPodAutoscalers
        are the autoscaling/v2 objects."""
        owner = self.server.owner
        rest = owner.rest
        served, ns, name = route.served, route.namespace, route.name
        view = _VIEWS[served.resource.api_version]
        stored = owner.registry.lookup(*view.stored)
        assert stored is not None
        manager = self._manager(query)
        dry_run = query.get("dryRun") == "All"
        sub = route.subresource
        ctype = self.headers.get("Content-Type") or ""
        check_write_options(verb, query, self._dry_run(query, body, verb), ctype)

        def incoming() -> tuple[JsonDict, Directive | None]:
            if view.typed_decode:
                obj, directive = self._decode_write(served, query, body)
            else:
                obj, directive = self._decode(body, served), None
            if not isinstance(obj, dict):
                raise StatusError(400, "BadRequest", "the body must be an object")
            if directive is None:
                rest._check_body_type(served, obj)
            return view.to_stored(obj), directive

        def out(obj: JsonDict) -> JsonDict:
            return view.to_view(obj)

        if verb == "get":
            assert name is not None
            return 200, out(rest.get(stored, ns, name))
        if verb in ("list", "deletecollection"):
            if verb == "list":
                listed = rest.list(stored, ns, _list_options(query))
            else:
                listed = rest.delete_collection(
                    stored,
                    ns,
                    _list_options(query),
                    _delete_options(query, body, ctype),
                    manager=manager,
                )
            items = []
            for item in listed["items"]:
                converted = out(item)
                converted.pop("kind", None)
                converted.pop("apiVersion", None)
                items.append(converted)
            return 200, {
                **listed,
                "apiVersion": served.resource.api_version,
                "kind": f"{served.resource.kind}List",
                "items": items,
            }
        if verb == "create":
            if name is not None or ns is None:
                raise _method_not_allowed()
            obj, directive = incoming()
            if view.check_create is not None:
                view.check_create(
                    rest, {**obj, "metadata": {**(obj.get("metadata") or {}), "namespace": ns}}
                )
            created = rest.create(
                stored, ns, obj, manager=manager, dry_run=dry_run, directive=directive, owned=True
            )
            return 201, out(created)
        if name is None:
            raise _method_not_allowed()
        if verb == "update":
            obj, directive = incoming()
            updated = rest.update(
                stored,
                ns,
                name,
                obj,
                subresource=sub,
                manager=manager,
                dry_run=dry_run,
                directive=directive,
                owned=True,
            )
            return 200, out(updated)
        if verb == "patch":
            code, obj = rest.patch_with_status(
                stored,
                ns,
                name,
                body,
                ctype,
                subresource=sub,
                manager=manager,
                dry_run=dry_run,
                force=_truthy(query.get("force")),
                view=view.to_view,
                unview=view.to_stored,
                viewed=served,
            )
            return code, out(obj)
        gone, last = rest.delete(
            stored, ns, name, _delete_options(query, body, ctype), manager=manager
        )
        return 200, rest.delete_answer(served, gone, out(last))

    # -- watch -----------------------------------------------------------------------

    def _watch(self, route: _Route, query: dict[str, str]) -> None:
        owner = self.server.owner
        rest = owner.rest
        served = route.served
        opts = _list_options(query)
        bookmarks = _truthy(query.get("allowWatchBookmarks"))
        initial = _truthy(query.get("sendInitialEvents"))
        initial_given = "sendInitialEvents" in query
        match = opts.resource_version_match
        if initial_given and match != "NotOlderThan":
            raise StatusError(
                422,
                "Invalid",
                'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                {
                    "kind": "ListOptions",
                    "group": "meta.k8s.io",
                    "causes": [
                        {
                            "reason": "FieldValueForbidden",
                            "message": "Forbidden: sendInitialEvents requires setting "
                            "resourceVersionMatch to NotOlderThan",
                            "field": "resourceVersionMatch",
                        }
                    ],
                },
            )
        if match and not initial_given:
            raise StatusError(
                422,
                "Invalid",
                'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            )
        labels, fields = rest.parse_selectors(served, opts)
        shards = rest.parse_shard_selector(opts)
        namespace = route.namespace if served.resource.namespaced else None
        if route.name is not None:
            from apiserver.storage.selectors import FieldSelector, supported_fields

            r = served.resource
            by_name = FieldSelector.parse(
                f"metadata.name={route.name}", supported_fields(r.plural, r.group)
            )
            fields = (
                by_name
                if fields is None
                else FieldSelector.parse(
                    f"{opts.field_selector},metadata.name={route.name}",
                    supported_fields(r.plural, r.group),
                )
            )
        # serveWatchHandler: the stream serializer is negotiated once the watch is made
        # (YAML has none: 406)
        self._accepted = negotiation.negotiate_stream(
            self.headers.get("Accept") or "",
            custom=served.custom,
            table=_has_table_convertor(route),
        )
        framed = self._accepted.media == negotiation.PROTOBUF
        watcher = Watcher(served, namespace, labels, fields, bookmarks=bookmarks, shards=shards)
        rv_text = opts.resource_version
        storage = owner.storage
        expired: str | None = None
        with storage.lock:
            if initial_given and not initial and rv_text in ("", "0"):
                storage.subscribe(served.key, watcher, None)  # from now, nothing replayed
            elif initial or rv_text in ("", "0"):
                for obj in storage.list(served.key, namespace):
                    if watcher.matches(obj):
                        watcher.push("ADDED", obj)
                if initial and bookmarks:
                    watcher.push(
                        "BOOKMARK",
                        watcher.bookmark_object(
                            storage.revision, annotations={INITIAL_EVENTS_END: "true"}
                        ),
                    )
                storage.subscribe(served.key, watcher, None)
            else:
                since = _watch_rv(rv_text)
                floor = rest.watch_floor(served)
                try:
                    if since < floor:
                        raise TooOldResourceVersion(since, floor)
                    backlog = storage.subscribe(served.key, watcher, since)
                except TooOldResourceVersion as exc:
                    expired = str(exc)
                else:
                    for event in backlog:
                        item = watcher.translate(event)
                        if item is not None:
                            watcher.push(*item)
        timeout = _timeout(query.get("timeoutSeconds"))
        self.send_response(200)
        self.send_header(
            "Content-Type", negotiation.PROTOBUF + ";stream=watch" if framed else "application/json"
        )
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if expired is not None:
            status = {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": expired,
                "reason": "Expired",
                "code": 410,
            }
            self._chunk(
                protobuf.encode_frame("ERROR", status)
                if framed
                else orjson.dumps({"type": "ERROR", "object": status}) + b"\n"
            )
            self._chunk(b"")  # the answer is complete: the connection stays open, as Go's
            return
        owner._watch_opened(watcher)
        try:
            self._stream(
                watcher, timeout, bookmarks, self._watch_transform(route, query), framed=framed
            )
        finally:
            storage.unsubscribe(served.key, watcher)
            owner._watch_closed(watcher)
        # A watch that ended cleanly is a complete chunked answer: like Go's server, keep
        # the connection for the client's next request (closing it after the last chunk
        # raced pooled clients into RemoteDisconnected); a stopping server closes it.
        self.close_connection = owner.stopping or self.close_connection

    def _watch_transform(
        self, route: _Route, query: dict[str, str]
    ) -> Callable[[str, JsonDict], JsonDict] | None:
        """What each event's object becomes when the Accept header asks for a Table (one
        row per event; column definitions on the first only, as the watch server's
        Fixup sets NoHeaders) or for PartialObjectMetadata; None for plain objects."""
        target = self._accepted.target
        rest = self.server.owner.rest
        render = _renderer(route.served, rest, _watch_decoder(rest, route.served))
        if target.as_kind == "PartialObjectMetadata":
            api_version = f"meta.k8s.io/{target.version}"
            return lambda _t, obj: partial_metadata(render(obj), api_version, listed=False)
        if target.as_kind != "Table":
            return None
        headers = [True]

        def table(event_type: str, obj: JsonDict) -> JsonDict:
            if event_type in ("BOOKMARK", "ERROR"):
                return obj
            rv = (obj.get("metadata") or {}).get("resourceVersion", "")
            out = self._table(route, "get", render(obj), query)
            out["metadata"] = {"resourceVersion": rv}
            if not headers[0]:
                out["columnDefinitions"] = None
            headers[0] = False
            return out

        return table

    def _stream(
        self,
        watcher: Watcher,
        timeout: float,
        bookmarks: bool,
        transform: Callable[[str, JsonDict], JsonDict] | None = None,
        *,
        framed: bool = False,
    ) -> None:
        """Send the watcher's events until the timeout, the server's stop or the client's
        close: JSON lines, or (``framed``) length-prefixed protobuf ``WatchEvent``s."""
        owner = self.server.owner
        deadline = time.monotonic() + timeout
        interval = owner.bookmark_interval
        next_bookmark = time.monotonic() + interval
        render = transform or _event_renderer(
            watcher.served, owner.rest, _watch_decoder(owner.rest, watcher.served)
        )

        try:
            while True:
                now = time.monotonic()
                if now >= deadline or owner.stopping:
                    break
                if bookmarks and now >= next_bookmark:
                    with owner.storage.lock:
                        watcher.offer_progress(owner.storage.revision)
                    next_bookmark = now + interval
                wait = min(deadline, next_bookmark if bookmarks else deadline) - now
                batch = watcher.next_batch(max(0.0, min(wait, 0.5)))
                if batch is None:
                    break
                if batch and framed:
                    self._chunk(b"".join(protobuf.encode_frame(t, render(t, o)) for t, o in batch))
                elif batch:
                    self._chunk(
                        b"".join(
                            b'{"type":"'
                            + t.encode()
                            + b'","object":'
                            + orjson.dumps(render(t, o))
                            + b"}\n"
                            for t, o in batch
                        )
                    )
            self._chunk(b"")
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass
        except StatusError as exc:  # a conversion webhook failed: the stream ends there
            logger.warning(
                "watch ended: an event could not be converted", extra={"error": exc.message}
            )
            with contextlib.suppress(OSError):
                self._chunk(b"")
        finally:
            watcher.close()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


def _takes_json(accept: str) -> bool:
    """Whether an ``Accept`` header takes JSON (``application/json``, ``application/*``
    or ``*/*``, with a non-zero q)."""
    for entry in accept.split(","):
        media, *params = (p.strip() for p in entry.split(";"))
        zero = any(p.replace(" ", "") in ("q=0", "q=0.0", "q=0.00", "q=0.000") for p in params)
        if media.lower() in ("application/json", "application/*", "*/*") and not zero:
            return True
    return False


def _protobuf_or_none(body: Any) -> bytes | None:
    """The protobuf answer for ``body``; None when its kind has no protobuf form (a
    Table, a custom resource's list...), which is then answered in JSON."""
    if not isinstance(body, dict):
        return None
    if protobuf.message_of(str(body.get("apiVersion") or ""), str(body.get("kind") or "")) is None:
        return None
    try:
        return protobuf.encode(body)
    except protobuf.ProtobufError:
        logger.exception(
            "local API server could not write protobuf", extra={"kind": body.get("kind")}
        )
        return None


@dataclass(frozen=True, slots=True)
class _View:
    """A group-version served through a conversion of what another one stores."""

    stored: tuple[str, str, str]  # (group, version, plural) of the stored resource
    to_view: Callable[[JsonDict], JsonDict]
    to_stored: Callable[[JsonDict], JsonDict]
    typed_decode: bool  # decode writes with fieldValidation against the view's type
    check_create: Callable[[Any, JsonDict], None] | None = None


def _check_events_v1(rest: Any, core_event: JsonDict) -> None:
    rest.check_events_v1(core_event)


def _hpa_to_v2(obj: JsonDict) -> JsonDict:
    try:
        return hpaconv.v1_to_v2(obj)
    except hpaconv.ConversionError as exc:
        raise StatusError(400, "BadRequest", str(exc)) from None


# Keyed by the view's apiVersion.
_VIEWS: Final = {
    "events.k8s.io/v1": _View(
        ("", "v1", "events"),
        eventsconv.core_to_events,
        eventsconv.events_to_core,
        typed_decode=False,
        check_create=_check_events_v1,
    ),
    "autoscaling/v1": _View(
        ("autoscaling", "v2", "horizontalpodautoscalers"),
        hpaconv.v2_to_v1,
        _hpa_to_v2,
        typed_decode=True,
    ),
}


def _event_renderer(
    served: ServedResource, rest: Rest, decode: Callable[[JsonDict], JsonDict] | None = None
) -> Callable[[str, JsonDict], JsonDict]:
    """``_renderer`` taking the event type too (one call per event on the hot path); a
    bookmark is the watch cache's own object, never decoded."""
    if not served.custom and served.resource.api_version not in _VIEWS:
        return lambda _t, obj: obj
    plain = _renderer(served, rest)
    if not served.custom or decode is None:
        return lambda _t, obj: plain(obj)
    decoded = _renderer(served, rest, decode)
    return lambda t, obj: plain(obj) if t in ("BOOKMARK", "ERROR") else decoded(obj)


def _renderer(
    served: ServedResource, rest: Rest, decode: Callable[[JsonDict], JsonDict] | None = None
) -> Any:
    """An object of ``served`` as answered: a view's shape, or a custom resource at the
    served version, ``decode``d first as storage decodes it (``Rest.decoder``), then
    converted (``Rest.served_form``: by the CRD's conversion webhook, or only the
    apiVersion)."""
    if served.resource.api_version in _VIEWS:
        return _VIEWS[served.resource.api_version].to_view
    if not served.custom:
        return lambda obj: obj
    api_version = served.resource.api_version

    def render(obj: JsonDict) -> JsonDict:
        if decode is not None:
            obj = decode(obj)
        if obj.get("apiVersion") in (api_version, None):
            return obj
        # at the version watched: by the CRD's conversion webhook, or only the apiVersion
        return rest.served_form(served, obj)

    return render


def _watch_decoder(rest: Rest, served: ServedResource) -> Callable[[JsonDict], JsonDict]:
    """Each event's object decoded by its CRD as it is when the event is sent (a decoder
    holds the CRD it found; the watch outlives it)."""

    def decode(obj: JsonDict) -> JsonDict:
        return rest.decoder(served)(obj)

    return decode


def partial_metadata(answer: JsonDict, api_version: str, *, listed: bool) -> JsonDict:
    """``PartialObjectMetadata`` of an object, or ``PartialObjectMetadataList`` of a list
    (handlers/response.go ``asPartialObjectMetadata``/``asPartialObjectMetadataList``)."""

    def one(obj: JsonDict) -> JsonDict:
        return {
            "kind": "PartialObjectMetadata",
            "apiVersion": api_version,
            "metadata": obj.get("metadata") or {},
        }

    if not listed:
        return one(answer)
    return {
        "kind": "PartialObjectMetadataList",
        "apiVersion": api_version,
        "metadata": answer.get("metadata") or {},
        "items": [one(item) for item in answer.get("items") or []],
    }


def _truthy(value: str | None) -> bool:
    return (value or "").lower() in ("true", "1")


def _timeout(value: str | None) -> float:
    if value:
        try:
            return max(0.0, float(value))
        except ValueError:
            raise StatusError(
                400, "BadRequest", f'timeoutSeconds: Invalid value: "{value}"'
            ) from None
    return 1800.0 * (1 + random.random())


def _list_options(query: dict[str, str]) -> ListOptions:
    try:
        limit = int(query.get("limit") or 0)
    except ValueError:
        raise StatusError(
            400, "BadRequest", f'limit: Invalid value: "{query.get("limit")}"'
        ) from None
    return ListOptions(
        label_selector=query.get("labelSelector", ""),
        field_selector=query.get("fieldSelector", ""),
        limit=max(0, limit),
        continue_=query.get("continue", ""),
        resource_version=query.get("resourceVersion", ""),
        resource_version_match=query.get("resourceVersionMatch", ""),
        shard_selector=query.get("shardSelector", ""),
    )


def _scope_differs(route: _Route, verb: str) -> bool:
    """Whether the apiextensions handler passes this request on to the plain 404: a
    namespaced custom resource asked for without a namespace, except to list or watch
    across namespaces (its crdHandler: the scopes of the CRD and the request differ)."""
    served = route.served
    return (
        served.custom
        and served.resource.namespaced
        and route.namespace is None
        and verb not in ("list", "watch")
    )


def _watch_rv(text: str) -> int:
    """A watch's resourceVersion as the storage parses it (``APIObjectVersioner``): a text
    that is no unsigned integer fails the watch before it starts, a 500 without a reason
    (kube-apiserver 1.36 answers the storage's error unconverted).

    Raises:
        StatusError: 500.
    """
    if not text.isascii() or not text.isdigit():
        raise StatusError(
            500,
            "",
            f"resourceVersion: Invalid value: {quote(text)}: strconv.ParseUint: parsing "
            f"{quote(text)}: invalid syntax",
        )
    return int(text)


def _method_not_allowed(*, custom: bool = False) -> StatusError:
    """go-restful's 405 for a method no route of the path has, as kube's service error
    handler answers it (``NewGenericServerResponse``: details ``{}``). Custom resources
    are not routed by go-restful; their 405 keeps no details."""
    return StatusError(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
        None if custom else {},
    )


# What go-restful's PATCH routes of the built-in resources consume (endpoints/installer.go).
_RESTFUL_PATCH_TYPES: Final = frozenset(
    {
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
        "application/apply-patch+yaml",
    }
)


def _restful_consumes(content_type: str) -> None:
    """go-restful's route selection for a PATCH of a built-in resource: a media type the
    route does not consume (none is ``application/octet-stream``) never reaches the
    handler; kube's service error handler answers it with ``NewGenericServerResponse``
    (its message is go-restful's, its details empty). Custom resources are not served by
    go-restful: their handler refuses with the patch types it accepts instead.

    Raises:
        StatusError: 415 UnsupportedMediaType.
    """
    media = content_type.split(";", maxsplit=1)[0].strip().lower() or "application/octet-stream"
    if media not in _RESTFUL_PATCH_TYPES:
        raise StatusError(415, "UnsupportedMediaType", "415: Unsupported Media Type", {})


_RESTFUL_CONNECT: Final = frozenset({"proxy", "exec", "attach", "portforward"})


def _restful_produces(verb: str, subresource: str, accept: str) -> None:
    """go-restful's route selection by ``Accept`` for a built-in resource (route.go
    ``matchesAccept``), before kube's own negotiation: a clause, its parameters cut off,
    must equal one of the media types the route produces (no wildcard but ``*/*``), so
    ``application/*`` is refused here while a custom resource, which go-restful does not
    serve, answers it in JSON. A list (and a watch) also produces the stream forms; a log
    ``text/plain`` first (installer.go, ``ProducesMIMETypes``); a connect route ``*/*``.
    The refusal is go-restful's message in a Status (``serviceErrorHandler``).

    Raises:
        StatusError: 406 NotAcceptable naming what the route produces.
    """
    if subresource in _RESTFUL_CONNECT:
        return
    produces = list(negotiation.BUILTIN_TYPES)
    if verb in ("list", "watch"):
        produces += list(negotiation.STREAM_TYPES)
    if subresource == "log":
        produces.insert(0, "text/plain")
    for clause in (accept or "*/*").split(","):
        media = clause.split(";", maxsplit=1)[0].strip(" ")
        if media == "*/*" or media in produces:
            return
    raise StatusError(
        406,
        "NotAcceptable",
        "406: Not Acceptable\n\nAvailable representations: " + ", ".join(produces),
        {},
    )


def _delete_options(query: dict[str, str], body: bytes, content_type: str = "") -> DeleteOptions:
    data: JsonDict = {}
    if body.strip():
        decoded = negotiation.decode_body(body, content_type)
        if not isinstance(decoded, dict):
            raise StatusError(400, "BadRequest", "DeleteOptions must be an object")
        data = decoded
    grace = query.get("gracePeriodSeconds", data.get("gracePeriodSeconds"))
    orphan = data.get("orphanDependents")
    if "orphanDependents" in query:
        orphan = _truthy(query["orphanDependents"])
    dry_run = data.get("dryRun") or ([query["dryRun"]] if "dryRun" in query else [])
    return DeleteOptions(
        propagation_policy=str(
            query.get("propagationPolicy") or data.get("propagationPolicy") or ""
        ),
        orphan_dependents=orphan,
        preconditions=dict(data.get("preconditions") or {}),
        grace_period_seconds=int(grace) if grace is not None else None,
        dry_run="All" in dry_run,
    )


class LocalApiServer:
    """A Kubernetes API server on 127.0.0.1 for tests, demos and plugin authors.

    Example:
        >>> with LocalApiServer() as server:
        ...     client = KubeClient.from_kubeconfig(str(server.kubeconfig_path))

    Args:
        host: address to bind (loopback by default).
        port: port to bind; 0 picks a free one.
        history_size: how many writes are kept for watches from an older
            resourceVersion; older ones answer 410 Gone (see also :meth:`compact`).
        bookmark_interval: seconds between BOOKMARK events on watches that asked for
            them (kube-apiserver sends one about every minute; shorter here so tests
            see them).
        kubeconfig_path: where to write the kubeconfig; a temporary file by default.
        compaction_interval: seconds between compactions of the history (kube-apiserver's
            ``--etcd-compaction-interval``, 5 minutes by default); each compacts what the
            previous one saw, so a resourceVersion or continue token older than two
            intervals answers 410 (see :mod:`apiserver.storage.compaction`).
        quota_sync_period: seconds between full recounts of every ResourceQuota's usage
            (kube-controller-manager's ``--resource-quota-sync-period``, 5 minutes); a
            quota is also recounted when created, when its ``spec.hard`` changes and when
            something it counts goes (see :mod:`apiserver.registry.quota`).
        rbac: authenticate every request and authorize it by RBAC, as kube-apiserver
            does (a token it does not know is a 401; what no Role or ClusterRole
            bound to the user allows is a 403 with kube's message). Its kubeconfig then
            carries an admin token (``system:masters``); ServiceAccount tokens come from
            ``serviceaccounts/{name}/token``. Off: everyone may do anything.
        anonymous_is_admin: with ``rbac``, a request without credentials acts as the
            admin rather than ``system:anonymous``, and the kubeconfig carries no token:
            ``kubectl`` (client-go) sends credentials only over TLS, and this server
            speaks plain HTTP. The test kit's server does this; a ServiceAccount's
            token is then what RBAC restricts.
        feature_gates: gates to turn on or off, by name (kube-apiserver's
            ``--feature-gates``; :mod:`~apiserver.http.featuregates` lists them).
            ``{"ShardedListAndWatch": True}``: lists and watches honour
            ``shardSelector`` (off by default, as in kube-apiserver 1.36).
        workload_controllers: run minimal Deployment -> ReplicaSet and ReplicaSet /
            ReplicationController -> Pod controllers, as kube-controller-manager would
            (off: a plain kube-apiserver makes nothing; embedded and demo modes turn it
            on).

    Raises:
        ValueError: a bad argument, an unknown feature gate.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        history_size: int = 100_000,
        bookmark_interval: float = 1.0,
        kubeconfig_path: str | os.PathLike[str] | None = None,
        compaction_interval: float = DEFAULT_COMPACTION_INTERVAL,
        quota_sync_period: float = DEFAULT_SYNC_PERIOD,
        rbac: bool = False,
        anonymous_is_admin: bool = False,
        feature_gates: Mapping[str, bool] | None = None,
        workload_controllers: bool = False,
    ) -> None:
        self.feature_gates = featuregates.feature_gates(feature_gates)
        if history_size < 1:
            raise ValueError(f"history_size must be >= 1, got {history_size}")
        if bookmark_interval <= 0:
            raise ValueError(f"bookmark_interval must be > 0, got {bookmark_interval}")
        self.storage = Storage(history_size=history_size)
        self.compactor = Compactor(self.storage, compaction_interval)
        self.registry = ResourceRegistry()
        self.rest = new_rest(self.storage, self.registry)
        self.rest.sharded_list_and_watch = self.feature_gates[featuregates.SHARDED_LIST_AND_WATCH]
        self.gc = GarbageCollector(self.rest)
        self.quota = QuotaController(self.rest, quota_sync_period)
        # Deployment -> ReplicaSet -> Pod, as kube-controller-manager would (off: a plain
        # kube-apiserver makes nothing; the embedded and demo modes turn it on)
        self.workloads = WorkloadControllers(self.rest) if workload_controllers else None
        self.faults = Faults(self._drop_watches)
        self.audit = Audit(self.storage)
        self.authenticator = Authenticator(self._account_uid)
        self.authorizer = RbacAuthorizer(self.storage) if rbac else None
        self.anonymous_is_admin = rbac and anonymous_is_admin
        self.bookmark_interval = bookmark_interval
        self._host, self._port = host, port
        self._kubeconfig_arg = kubeconfig_path
        self._tmpdir: tempfile.TemporaryDirectory[str] | None = None
        self._kubeconfig: Path | None = None
        self._http: _HttpServer | None = None
        self._serve_thread: threading.Thread | None = None
        self._watchers: set[Watcher] = set()
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str, str, str], int] = {}
        self.stopping = False
        self._started = False

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> LocalApiServer:
        """Bind, write the kubeconfig, start serving. Returns self."""
        if self._started:
            raise RuntimeError("LocalApiServer.start may be called once")
        self._started = True
        self.rest.bootstrap()
        subresources.bootstrap_apiservices(self.rest, self.registry)
        if self.authorizer is not None:
            for plural, obj in bootstrap_policy():
                served = self.resource("rbac.authorization.k8s.io/v1", plural)
                self.rest.create(served, None, obj, manager="kube-apiserver")
        self.gc.start()
        self.quota.start()
        self.compactor.start()
        if self.workloads is not None:
            self.workloads.start()
        self._serve((self._host, self._port))
        self._bootstrap_kubernetes_service()
        self._write_kubeconfig()
        logger.info("local API server started", extra={"url": self.url})
        return self

    def _bootstrap_kubernetes_service(self) -> None:
        """The ``kubernetes`` Service of ``default`` with its Endpoints and EndpointSlice,
        as kube-apiserver's controlplane controllers keep them: the first IP of the
        service range, port 443 to the API server's own address and port."""
        assert self._http is not None
        host, port = self._http.server_address[:2]
        ip = str(host) if str(host) not in ("", "0.0.0.0", "localhost") else "127.0.0.1"
        services = self.registry.lookup("", "v1", "services")
        endpoints = self.registry.lookup("", "v1", "endpoints")
        slices = self.registry.lookup("discovery.k8s.io", "v1", "endpointslices")
        assert services is not None and endpoints is not None and slices is not None
        labels = {"component": "apiserver", "provider": "kubernetes"}
        service = {
            "metadata": {"name": "kubernetes", "labels": labels},
            "spec": {
                "type": "ClusterIP",
                "clusterIP": "10.96.0.1",
                "sessionAffinity": "None",
                "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}],
            },
        }
        self.rest.create(services, "default", service, manager="kube-apiserver")
        self._bootstrap_service_cidr()
        self.rest.create(
            endpoints,
            "default",
            {
                "metadata": {
                    "name": "kubernetes",
                    "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"},
                },
                "subsets": [
                    {
                        "addresses": [{"ip": ip}],
                        "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
                    }
                ],
            },
            manager="kube-apiserver",
        )
        self.rest.create(
            slices,
            "default",
            {
                "metadata": {
                    "name": "kubernetes",
                    "labels": {"kubernetes.io/service-name": "kubernetes"},
                },
                "addressType": "IPv4",
                "endpoints": [{"addresses": [ip], "conditions": {"ready": True}}],
                "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
            },
            manager="kube-apiserver",
        )

    def _bootstrap_service_cidr(self) -> None:
        """The default ``kubernetes`` ServiceCIDR, Ready, as kube-apiserver's
        defaultservicecidr controller keeps it: the range ClusterIPs come from."""
        cidrs = self.registry.lookup("networking.k8s.io", "v1", "servicecidrs")
        assert cidrs is not None
        manager = "kubernetes-service-cidr-controller"
        created = self.rest.create(
            cidrs,
            None,
            {"metadata": {"name": "kubernetes"}, "spec": {"cidrs": [str(SERVICE_RANGE)]}},
            manager=manager,
        )
        ready = {
            "type": "Ready",
            "status": "True",
            "lastTransitionTime": created["metadata"]["creationTimestamp"],
            "reason": "",
            "message": "Kubernetes Service CIDR is ready",
        }
        self.rest.update(
            cidrs,
            None,
            "kubernetes",
            {**created, "status": {"conditions": [ready]}},
            subresource="status",
            manager=manager,
        )

    def _serve(self, address: tuple[str, int]) -> None:
        self._http = _HttpServer(address, self)
        self._serve_thread = threading.Thread(
            target=self._http.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="local-apiserver/serve",
        )
        self._serve_thread.start()

    def _close_http(self) -> None:
        assert self._http is not None
        self.stopping = True
        self._drop_watches()
        self._http.shutdown()
        self._http.close_connections()
        self._http.server_close()
        if self._serve_thread is not None:
            self._serve_thread.join(timeout=10)

    def restart(self, downtime: float = 0.0) -> None:
        """An API server restart as its clients see it: every connection and watch is cut,
        connections are refused for ``downtime`` seconds, then the server answers again on
        the same address with everything stored kept (as etcd keeps it), the revision
        included. Watches resume from their resourceVersion."""
        if self._http is None:
            raise RuntimeError("the local API server is not running")
        host, port = self._http.server_address[:2]
        self._close_http()
        if downtime > 0:
            time.sleep(downtime)
        self.stopping = False
        self._serve((str(host), int(port)))
        logger.info("local API server restarted", extra={"url": self.url})

    def stop(self) -> None:
        """Stop serving, close every connection, join every thread."""
        if self._http is None:
            return
        self._close_http()
        if self.rest.webhooks is not None:
            self.rest.webhooks.close()
        self.gc.stop()
        self.quota.stop()
        self.compactor.stop()
        if self.workloads is not None:
            self.workloads.stop()
        self._http = None
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None

    def __enter__(self) -> LocalApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- facts -----------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self._http is None:
            raise RuntimeError("the local API server is not running")
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def kubeconfig_path(self) -> Path:
        if self._kubeconfig is None:
            raise RuntimeError("the local API server is not running")
        return self._kubeconfig

    @property
    def compaction_interval(self) -> float:
        """Seconds between scheduled compactions."""
        return self.compactor.interval

    @property
    def revision(self) -> int:
        """The current (global) resourceVersion."""
        return self.storage.revision

    def compact(self) -> int:
        """Forget history: a watch or exact list from an older resourceVersion answers 410."""
        return self.storage.compact()

    def request_count(self, verb: str | None = None, resource: str | None = None) -> int:
        """Requests served so far, by Kubernetes verb and resource plural (None = any)."""
        with self._lock:
            return sum(
                n
                for (v, _, r, _), n in self._counts.items()
                if verb in (None, v) and resource in (None, r)
            )

    def requests(self) -> dict[tuple[str, str, str, str], int]:
        """Every request served so far: ``(verb, group, resource, subresource) -> count``
        (group and subresource are "" when there is none), e.g. to check RBAC rules."""
        with self._lock:
            return dict(self._counts)

    # -- internals -------------------------------------------------------------------

    def _count(self, verb: str, group: str, resource: str, subresource: str) -> None:
        key = (verb, group, resource, subresource)
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + 1

    def _watch_opened(self, watcher: Watcher) -> None:
        with self._lock:
            self._watchers.add(watcher)

    def _watch_closed(self, watcher: Watcher) -> None:
        with self._lock:
            self._watchers.discard(watcher)

    def _drop_watches(self) -> int:
        with self._lock:
            watchers = list(self._watchers)
        for w in watchers:
            w.close("dropped")
        return len(watchers)

    @property
    def rbac(self) -> bool:
        """Whether this server enforces RBAC."""
        return self.authorizer is not None

    def _account_uid(self, namespace: str, name: str) -> str | None:
        sa = self.storage.get(("/serviceaccounts", namespace, name))
        return None if sa is None else str(sa["metadata"]["uid"])

    def kubeconfig_for(
        self,
        user: str,
        path: str | os.PathLike[str],
        *,
        server: str | None = None,
        groups: tuple[str, ...] = ("system:masters",),
    ) -> Path:
        """Write a kubeconfig whose requests come from ``user`` (in ``groups``; a static
        bearer token naming it, as the :attr:`audit` sees it), to ``server`` (default
        this server's URL; e.g. a :class:`~manager.testing.proxy.TcpProxy` in front of
        it). Returns the path. The user is an admin (``system:masters``) unless ``groups``
        say otherwise; then, with :attr:`rbac`, it may do what RBAC grants it."""
        self.authenticator.add_token(user, user, groups)
        return self._kubeconfig_file(Path(path), server or self.url, {"token": user})

    def _write_kubeconfig(self) -> None:
        if self._kubeconfig_arg is not None:
            path = Path(self._kubeconfig_arg)
        else:
            self._tmpdir = tempfile.TemporaryDirectory(prefix="overseer-apiserver-")
            path = Path(self._tmpdir.name) / "kubeconfig"
        with_token = self.rbac and not self.anonymous_is_admin
        user = {"token": self.authenticator.admin_token} if with_token else {}
        self._kubeconfig = self._kubeconfig_file(path, self.url, user)

    def _kubeconfig_file(self, path: Path, server: str, user: dict[str, str]) -> Path:
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "overseer-local", "cluster": {"server": server}}],
            "users": [{"name": "overseer-local", "user": user}],
            "contexts": [
                {
                    "name": "overseer-local",
                    "context": {
                        "cluster": "overseer-local",
                        "user": "overseer-local",
                        "namespace": "default",
                    },
                }
            ],
            "current-context": "overseer-local",
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump(doc, sort_keys=False))
        tmp.replace(path)
        return path

    # -- in-process convenience (seeding demo objects without HTTP) --------------------

    def resource(self, api_version: str, plural: str) -> ServedResource:
        """The served resource for ``apiVersion`` and plural, for in-process use."""
        group, _, version = api_version.rpartition("/")
        served = self.registry.lookup(group, version, plural)
        if served is None:
            raise KeyError(f"not served: {api_version}/{plural}")
        return served

    def create(
        self, api_version: str, plural: str, body: JsonDict, namespace: str | None = None
    ) -> JsonDict:
        """Create an object in process (as a client would over HTTP)."""
        return self.rest.create(
            self.resource(api_version, plural), namespace, body, manager="overseer-seed"
        )

"""Unit tests of manager.client (and manager.flowcontrol) against a scripted stub HTTP server.

The stub answers each request with the next scripted :class:`Reply` for its method and
path (a plain-text 404 once the script runs out, like an API server's unknown path) and
records what it received. Nothing here sleeps: retry waits go to a recording function and
the token bucket runs on a fake clock.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket
import struct
import threading
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from manager.client import ClientOptions, KubeClient
from manager.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    ConfigError,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    ServerError,
    TooManyRequests,
    Unavailable,
)
from manager.flowcontrol import TokenBucket
from manager.metrics import REGISTRY
from manager.resources import BUILTINS, Resource, UnknownResource

PODS = BUILTINS["v1/pods"]
CONFIGMAPS = BUILTINS["v1/configmaps"]
DEPLOYMENTS = BUILTINS["apps/v1/deployments"]
NAMESPACES = BUILTINS["v1/namespaces"]

# -- the stub API server ------------------------------------------------------------------


@dataclass
class Reply:
    """One scripted answer. ``chunks`` streams a chunked body (then, with ``hold``, waits
    for the event before ending the stream); otherwise ``body`` is sent whole."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    chunks: list[bytes] | None = None
    hold: threading.Event | None = None
    reset: bool = False  # read and record the request, then reset the connection unanswered
    interim_then_close: bool = False  # answer 100 Continue, then close: no final answer


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    header_lines: list[tuple[str, str]] = field(default_factory=list)  # as sent, repeats kept

    def json(self) -> Any:
        return json.loads(self.body)

    def impersonation(self) -> list[tuple[str, str]]:
        """The ``Impersonate-*`` headers, in order, names as sent."""
        return [(n, v) for n, v in self.header_lines if n.lower().startswith("impersonate-")]


def status_body(code: int, reason: str, message: str, **details: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


class _JoiningHTTPServer(ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins every connection thread


class StubApiServer:
    def __init__(self) -> None:
        self.script: dict[tuple[str, str], deque[Reply]] = defaultdict(deque)
        self.seen: list[Seen] = []
        self.holds: list[threading.Event] = []
        self.lock = threading.Lock()
        self.httpd = _JoiningHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="stub-apiserver"
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def reply(self, method: str, path: str, *replies: Reply) -> None:
        with self.lock:
            self.script[(method, path)].extend(replies)
            self.holds.extend(r.hold for r in replies if r.hold is not None)

    def next_reply(self, method: str, path: str) -> Reply:
        with self.lock:
            queue = self.script.get((method, path))
            if queue:
                return queue.popleft()
        return Reply(404, b"404 page not found\n", {"Content-Type": "text/plain"})

    def requests(self, method: str | None = None) -> list[Seen]:
        with self.lock:
            return [s for s in self.seen if method is None or s.method == method]

    def stop(self) -> None:
        for hold in self.holds:
            hold.set()
        self.httpd.shutdown()
        self.httpd.server_close()  # joins the per-connection handler threads
        self.thread.join()


def _lower(headers: Any) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


def _handler_for(stub: StubApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 10  # a handler never outlives a forgotten connection by long

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def finish(self) -> None:
            if self.connection.fileno() == -1:
                return  # reset on purpose (Reply.reset): nothing left to flush
            super().finish()

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            split = urlsplit(self.path)
            with stub.lock:
                stub.seen.append(
                    Seen(
                        self.command,
                        split.path,
                        parse_qs(split.query),
                        _lower(self.headers),
                        body,
                        list(self.headers.items()),
                    )
                )
            reply = stub.next_reply(self.command, split.path)
            if reply.reset or reply.interim_then_close:
                # the server handled the request (it is recorded: "committed") and died
                # before answering it
                self.close_connection = True
                if reply.interim_then_close:
                    self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                linger = struct.pack("ii", 1, 0)  # close with an RST
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
                self.connection.close()
                return
            try:
                self._send(reply)
            except OSError:  # the client went away mid-stream (a closed watch)
                self.close_connection = True

        def _send(self, reply: Reply) -> None:
            self.send_response(reply.status)
            if reply.chunks is not None:
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for chunk in reply.chunks:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                if reply.hold is not None:
                    reply.hold.wait(10)
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
                return
            payload = reply.body
            if payload is None:
                payload = b""
            elif not isinstance(payload, bytes):
                payload = json.dumps(payload).encode()
            headers = {"Content-Type": "application/json", **reply.headers}
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def do_PUT(self) -> None:
            self._serve()

        def do_PATCH(self) -> None:
            self._serve()

        def do_DELETE(self) -> None:
            self._serve()

    return Handler


def write_kubeconfig(path: Path, server: str, *, token: str = "stub-token") -> Path:
    path.write_text(
        f"""
apiVersion: v1
kind: Config
clusters:
- name: stub
  cluster: {{server: "{server}"}}
- name: elsewhere
  cluster: {{server: "http://127.0.0.2:6443"}}
users:
- name: stub
  user: {{token: {token}}}
contexts:
- name: stub
  context: {{cluster: stub, user: stub}}
- name: other
  context: {{cluster: elsewhere, user: stub}}
current-context: stub
"""
    )
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def pod(name: str, namespace: str = "default", **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": "7"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        **extra,
    }


# -- configuration ------------------------------------------------------------------------


def test_from_kubeconfig_explicit_path_uses_its_server_and_token(
    stub: StubApiServer, kubeconfig: Path
) -> None:
    stub.reply("GET", "/api/v1/namespaces/default/pods/a", Reply(body=pod("a")))
    options = ClientOptions(pool_size=4)
    with KubeClient.from_kubeconfig(str(kubeconfig), options=options) as client:
        assert client.host == stub.url
        assert client.options is options
        client.get(PODS, "a", "default")
    (seen,) = stub.requests()
    assert seen.headers["authorization"] == "Bearer stub-token"
    assert seen.headers["user-agent"].startswith("overseer/")
    assert seen.headers["accept"] == "application/json"


def test_from_kubeconfig_context_selects_another_cluster(kubeconfig: Path) -> None:
    with KubeClient.from_kubeconfig(str(kubeconfig), context="other") as client:
        assert client.host == "http://127.0.0.2:6443"


def test_kubeconfig_env_files_are_merged_the_first_definition_winning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stub: StubApiServer
) -> None:
    """$KUBECONFIG as kubectl reads it: every file, a missing one skipped; of each name
    the first definition, of the current-context the first one set."""
    first = tmp_path / "first"
    first.write_text(
        json.dumps(
            {
                "users": [{"name": "stub", "user": {"token": "from-first"}}],
                "contexts": [{"name": "mixed", "context": {"cluster": "stub", "user": "stub"}}],
                "current-context": "mixed",
            }
        )
    )
    # The cluster is only here; its user "stub" and its current-context lose to the first's.
    second = write_kubeconfig(tmp_path / "second", stub.url, token="from-second")
    files = [str(first), str(tmp_path / "missing"), str(second)]
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join(files))
    stub.reply("GET", "/api/v1/namespaces/default/pods/a", *[Reply(body=pod("a"))] * 2)
    for make in (KubeClient.load, KubeClient.from_kubeconfig):
        with make() as client:
            assert client.host == stub.url
            client.get(PODS, "a", "default")
    assert [s.headers["authorization"] for s in stub.requests()] == ["Bearer from-first"] * 2
    with KubeClient.load(context="other") as client:  # a context of the second file
        assert client.host == "http://127.0.0.2:6443"
    # An explicit kubeconfig is that one file.
    with pytest.raises(ConfigError) as info:
        KubeClient.load(str(first))
    assert str(info.value) == f"kubeconfig {first}: cluster 'stub' of context 'mixed' not found"


def test_kubeconfig_env_whose_files_are_all_missing_is_an_error_naming_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = [str(tmp_path / "a"), str(tmp_path / "b")]
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join(files))
    for make in (KubeClient.load, KubeClient.from_kubeconfig):
        with pytest.raises(ConfigError) as info:
            make()
        assert all(f in str(info.value) for f in files)


def test_every_request_impersonates_the_kubeconfig_users_as(
    stub: StubApiServer, tmp_path: Path, make_client: Callable[..., KubeClient]
) -> None:
    """``as``, ``as-uid``, ``as-groups``, ``as-user-extra``: client-go's impersonation
    headers on every request, whichever way it is sent (the client's own exchange, urllib3
    for a watch, a write session and its pipeline)."""
    from manager.client import Write

    path = tmp_path / "impersonating"
    user = {
        "token": "t",
        "as": "jane",
        "as-uid": "1234",
        "as-groups": ["dev", "équipe-用"],
        "as-user-extra": {"example.com/scopes": ["read", "write"], "ü %": ["x"]},
    }
    path.write_text(
        json.dumps(
            {
                "clusters": [{"name": "c", "cluster": {"server": stub.url}}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    expected = [
        ("Impersonate-User", "jane"),
        ("Impersonate-Uid", "1234"),
        ("Impersonate-Group", "dev"),
        # A value goes as its UTF-8 bytes, as Go sends it (http.server reads latin-1).
        ("Impersonate-Group", "équipe-用".encode().decode("latin-1")),
        # A key is percent-encoded byte by byte where not a header token character,
        # and so is "%" (client-go's headerKeyEscape).
        ("Impersonate-Extra-example.com%2Fscopes", "read"),
        ("Impersonate-Extra-example.com%2Fscopes", "write"),
        ("Impersonate-Extra-%C3%BC%20%25", "x"),
    ]
    pods = "/api/v1/namespaces/team/pods"
    stub.reply("GET", f"{pods}/a", Reply(body=pod("a", "team")))
    stub.reply("GET", pods, Reply(body={"items": []}), Reply(chunks=[]))
    stub.reply("POST", pods, *[Reply(201, pod("a", "team"))] * 3)
    stub.reply("PATCH", f"{pods}/a", Reply(200, pod("a", "team")))
    client = make_client(path)
    client.get(PODS, "a", "team")
    client.list(PODS, "team")
    with client.watch(PODS, "team", resource_version="1", timeout_seconds=60, read_timeout=30) as w:
        assert list(w) == []
    client.create(PODS, pod("a", "team"))
    with client.write_session() as session:
        session.create(PODS, pod("a", "team"))
        session.pipeline([Write.create(PODS, pod("a", "team")), Write.patch(PODS, "a", {}, "team")])
    seen = stub.requests()
    assert [(s.method, s.path) for s in seen] == [
        ("GET", f"{pods}/a"),
        ("GET", pods),
        ("GET", pods),
        ("POST", pods),
        ("POST", pods),
        ("POST", pods),
        ("PATCH", f"{pods}/a"),
    ]
    assert seen[2].query["watch"] == ["true"]
    for s in seen:
        assert s.impersonation() == expected, (s.method, s.path)
        assert s.headers["authorization"] == "Bearer t"  # the client still authenticates


def test_load_prefers_an_explicit_kubeconfig(
    kubeconfig: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, stub: StubApiServer
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    with KubeClient.load(str(kubeconfig)) as client:
        assert client.host == stub.url


def test_load_falls_back_to_home_then_in_cluster(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, stub: StubApiServer
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    home_config = tmp_path / ".kube" / "config"
    with pytest.raises(ConfigError, match=str(home_config)):
        KubeClient.load()
    # In a pod (service host set) without a home kubeconfig: the service account is tried.
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    with pytest.raises(ConfigError, match="in-cluster"):
        KubeClient.load()
    # A home kubeconfig wins over the in-cluster account.
    home_config.parent.mkdir()
    write_kubeconfig(home_config, stub.url)
    with KubeClient.load() as client:
        assert client.host == stub.url


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "no such file"),
        ("clusters: [\n", "not valid YAML"),
        ("just a string\n", "expected a YAML mapping"),
        ("{}\n", "current-context"),
        ("current-context: nope\ncontexts: []\n", "nope"),
    ],
)
def test_unusable_kubeconfig_is_a_config_error_naming_the_path(
    tmp_path: Path, content: str | None, problem: str
) -> None:
    path = tmp_path / "kubeconfig"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError) as info:
        KubeClient.from_kubeconfig(str(path))
    assert str(path) in str(info.value)
    assert problem in str(info.value)
    # No chained traceback from the client's internals.
    assert info.value.__cause__ is None
    assert info.value.__context__ is None or info.value.__suppress_context__


def test_in_cluster_outside_a_pod_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ConfigError, match="in-cluster"):
        KubeClient.in_cluster()


def test_client_options_defaults_and_validation() -> None:
    options = ClientOptions()
    assert (options.qps, options.burst, options.timeout, options.pool_size) == (20.0, 30, 30.0, 32)
    assert (options.max_retries, options.retry_max_wait) == (5, 30.0)
    assert options.user_agent.startswith("overseer/")
    with pytest.raises(ValueError, match="burst"):
        ClientOptions(burst=0)
    with pytest.raises(ValueError, match="max_retries"):
        ClientOptions(max_retries=-1)


# -- reads return plain dicts -------------------------------------------------------------


def test_get_returns_a_plain_dict(client: KubeClient, stub: StubApiServer) -> None:
    stub.reply("GET", "/api/v1/namespaces/default/pods/a", Reply(body=pod("a")))
    obj = client.get(PODS, "a", "default")
    assert type(obj) is dict
    assert type(obj["metadata"]) is dict
    assert type(obj["spec"]["containers"][0]) is dict
    assert obj == pod("a")


def test_get_of_a_namespaced_resource_needs_a_namespace(client: KubeClient) -> None:
    with pytest.raises(ValueError, match="namespace"):
        client.get(PODS, "a")


def test_list_returns_the_whole_list_and_sends_its_parameters(
    client: KubeClient, stub: StubApiServer
) -> None:
    answer = {
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "42", "continue": "tok2"},
        "items": [pod("a"), pod("b")],
    }
    stub.reply("GET", "/api/v1/pods", Reply(body=answer))
    result = client.list(
        PODS,
        label_selector="app=x",
        field_selector="spec.nodeName=n1",
        limit=2,
        continue_="tok1",
        resource_version="0",
        resource_version_match="NotOlderThan",
    )
    assert result == answer
    assert all(type(item) is dict for item in result["items"])
    (seen,) = stub.requests()
    assert seen.query == {
        "labelSelector": ["app=x"],
        "fieldSelector": ["spec.nodeName=n1"],
        "limit": ["2"],
        "continue": ["tok1"],
        "resourceVersion": ["0"],
        "resourceVersionMatch": ["NotOlderThan"],
    }


def test_list_of_a_cluster_scoped_resource(client: KubeClient, stub: StubApiServer) -> None:
    stub.reply("GET", "/api/v1/namespaces", Reply(body={"items": []}))
    assert client.list(NAMESPACES) == {"items": []}
    assert stub.requests()[0].query == {}


# -- writes -------------------------------------------------------------------------------


def test_create_posts_json_into_the_body_namespace(client: KubeClient, stub: StubApiServer) -> None:
    stub.reply("POST", "/api/v1/namespaces/team/pods", Reply(201, pod("a", "team")))
    created = client.create(PODS, pod("a", "team"))
    assert created["metadata"]["namespace"] == "team"
    (seen,) = stub.requests()
    assert seen.headers["content-type"] == "application/json"
    assert seen.json() == pod("a", "team")


def test_replace_puts_to_the_named_object_or_subresource(
    client: KubeClient, stub: StubApiServer
) -> None:
    path = "/apis/apps/v1/namespaces/default/deployments/web"
    body = {"metadata": {"name": "web", "namespace": "default", "resourceVersion": "3"}}
    stub.reply("PUT", path, Reply(body=body))
    stub.reply("PUT", path + "/status", Reply(body=body))
    assert client.replace(DEPLOYMENTS, body) == body
    client.replace(DEPLOYMENTS, body, subresource="status")
    assert [s.path for s in stub.requests("PUT")] == [path, path + "/status"]
    with pytest.raises(ValueError, match=r"metadata\.name"):
        client.replace(DEPLOYMENTS, {"metadata": {}}, "default")


@pytest.mark.parametrize(
    ("patch_type", "patch", "content_type"),
    [
        ("merge", {"metadata": {"labels": {"a": "b"}}}, "application/merge-patch+json"),
        ("strategic", {"spec": {"replicas": 2}}, "application/strategic-merge-patch+json"),
        (
            "json",
            [{"op": "add", "path": "/metadata/labels/a", "value": "b"}],
            "application/json-patch+json",
        ),
    ],
)
def test_patch_sends_the_content_type_of_its_flavour(
    client: KubeClient, stub: StubApiServer, patch_type: Any, patch: Any, content_type: str
) -> None:
    stub.reply("PATCH", "/apis/apps/v1/namespaces/default/deployments/web", Reply(body={}))
    client.patch(DEPLOYMENTS, "web", patch, namespace="default", patch_type=patch_type)
    (seen,) = stub.requests()
    assert seen.headers["content-type"] == content_type
    assert seen.json() == patch


def test_server_side_apply_sends_field_manager_and_force(
    client: KubeClient, stub: StubApiServer
) -> None:
    path = "/apis/apps/v1/namespaces/default/deployments/web/status"
    stub.reply("PATCH", path, Reply(body={"ok": True}))
    body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}
    result = client.patch(
        DEPLOYMENTS,
        "web",
        body,
        namespace="default",
        patch_type="apply",
        subresource="status",
        field_manager="overseer",
        force=True,
    )
    assert result == {"ok": True}
    (seen,) = stub.requests()
    assert seen.headers["content-type"] == "application/apply-patch+yaml"
    assert seen.query == {"fieldManager": ["overseer"], "force": ["true"]}
    assert seen.json() == body
    with pytest.raises(ValueError, match="field_manager"):
        client.patch(DEPLOYMENTS, "web", body, namespace="default", patch_type="apply")
    with pytest.raises(ValueError, match="list of operations"):
        client.patch(DEPLOYMENTS, "web", body, namespace="default", patch_type="json")


def test_delete_sends_delete_options_and_returns_the_answer(
    client: KubeClient, stub: StubApiServer
) -> None:
    path = "/api/v1/namespaces/default/configmaps/c"
    success = {"kind": "Status", "apiVersion": "v1", "status": "Success", "details": {}}
    stub.reply("DELETE", path, Reply(body=success), Reply(body=success))
    assert client.delete(CONFIGMAPS, "c", "default") == success
    client.delete(
        CONFIGMAPS,
        "c",
        "default",
        propagation_policy="Foreground",
        preconditions={"uid": "u1"},
        grace_period_seconds=0,
    )
    first, second = stub.requests()
    assert first.body == b""
    assert second.json() == {
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "propagationPolicy": "Foreground",
        "preconditions": {"uid": "u1"},
        "gracePeriodSeconds": 0,
    }


def test_delete_collection_selects_and_returns_the_deleted_list(
    client: KubeClient, stub: StubApiServer
) -> None:
    deleted = {"kind": "ConfigMapList", "items": [{"metadata": {"name": "c"}}]}
    stub.reply("DELETE", "/api/v1/namespaces/default/configmaps", Reply(body=deleted))
    result = client.delete_collection(
        CONFIGMAPS, "default", label_selector="app=x", propagation_policy="Background"
    )
    assert result == deleted
    (seen,) = stub.requests()
    assert seen.query == {"labelSelector": ["app=x"]}
    assert seen.json()["propagationPolicy"] == "Background"


def test_request_is_a_general_escape_hatch(client: KubeClient, stub: StubApiServer) -> None:
    stub.reply("GET", "/version", Reply(body={"gitVersion": "v1.36.0"}))
    stub.reply("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", Reply(201, b""))
    assert client.request("get", "/version", query={"x": 1, "y": None}, idempotent=True) == {
        "gitVersion": "v1.36.0"
    }
    review = {"spec": {"resourceAttributes": {"verb": "get"}}}
    assert (
        client.request(
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            body=review,
            idempotent=False,
        )
        == {}
    )
    get, post = stub.requests()
    assert get.query == {"x": ["1"]}
    assert post.json() == review
    with pytest.raises(ValueError, match="method"):
        client.request("BREW", "/coffee", idempotent=True)


def test_a_2xx_answer_that_is_not_a_json_object_is_an_api_error(
    client: KubeClient, stub: StubApiServer
) -> None:
    stub.reply("GET", "/healthz", Reply(body=b"ok", headers={"Content-Type": "text/plain"}))
    with pytest.raises(ApiError, match="not a JSON object") as info:
        client.request("GET", "/healthz", idempotent=True)
    assert info.value.reason == "InvalidResponse"


# -- error mapping ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "case",
    [
        (400, status_body(400, "BadRequest", "bad"), BadRequest, "BadRequest"),
        (403, status_body(403, "Forbidden", "pods is forbidden"), Forbidden, "Forbidden"),
        (404, status_body(404, "NotFound", 'pods "a" not found'), NotFound, "NotFound"),
        (409, status_body(409, "AlreadyExists", "exists"), AlreadyExists, "AlreadyExists"),
        (409, status_body(409, "Conflict", "modified"), Conflict, "Conflict"),
        (410, status_body(410, "Expired", "too old"), Gone, "Expired"),
        (422, status_body(422, "Invalid", "bad spec", causes=[{"field": "x"}]), Invalid, "Invalid"),
        (429, status_body(429, "TooManyRequests", "slow down"), TooManyRequests, "TooManyRequests"),
        (500, status_body(500, "InternalError", "boom"), ServerError, "InternalError"),
        (503, status_body(503, "ServiceUnavailable", "later"), Unavailable, "ServiceUnavailable"),
    ],
    ids=lambda case: f"{case[0]}-{case[3]}",
)
def test_error_status_maps_to_the_error_tree(
    make_client: Callable[..., KubeClient],
    stub: StubApiServer,
    case: tuple[int, dict[str, Any], type[ApiError], str],
) -> None:
    status, body, expected, reason = case
    client = make_client(max_retries=0)
    stub.reply("GET", "/api/v1/namespaces/default/pods/a", Reply(status, body))
    with pytest.raises(expected) as info:
        client.get(PODS, "a", "default")
    error = info.value
    assert type(error) is expected
    assert (error.status, error.reason, error.message) == (status, reason, body["message"])
    assert error.details == body.get("details")


def test_plain_text_404_is_not_found_naming_the_path(client: KubeClient) -> None:
    with pytest.raises(NotFound) as info:
        client.request("GET", "/apis/nothing.example/v1", idempotent=True)
    assert info.value.status == 404
    assert "404 page not found" in info.value.message
    assert "/apis/nothing.example/v1" in info.value.message


def test_connection_refused_is_unavailable_naming_the_host(
    make_client: Callable[..., KubeClient], tmp_path: Path, sleeps: list[float]
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    client = make_client(write_kubeconfig(tmp_path / "dead", dead), max_retries=2)
    with pytest.raises(Unavailable) as info:
        client.get(PODS, "a", "default")
    assert info.value.status == 0
    assert dead in str(info.value)
    assert len(sleeps) == 2  # retried: a GET is safe to repeat
    sleeps.clear()
    with pytest.raises(Unavailable):
        client.create(PODS, pod("a"))
    assert len(sleeps) == 2  # retried too: the connection never opened, nothing was sent


# -- retries ------------------------------------------------------------------------------


def test_429_is_retried_after_retry_after_even_for_create(
    client: KubeClient, stub: StubApiServer, sleeps: list[float]
) -> None:
    throttled = Reply(429, status_body(429, "TooManyRequests", "slow down"), {"Retry-After": "2"})
    stub.reply("POST", "/api/v1/namespaces/default/pods", throttled, Reply(201, pod("a")))
    assert client.create(PODS, pod("a"))["metadata"]["name"] == "a"
    assert sleeps == [2.0]
    assert len(stub.requests("POST")) == 2


def test_retry_after_from_status_details_is_honoured(
    client: KubeClient, stub: StubApiServer, sleeps: list[float]
) -> None:
    throttled = Reply(429, status_body(429, "TooManyRequests", "x", retryAfterSeconds=3))
    stub.reply("GET", "/api/v1/namespaces/default/pods/a", throttled, Reply(body=pod("a")))
    client.get(PODS, "a", "default")
    assert sleeps == [3.0]


def test_retry_after_is_capped_by_retry_max_wait(
    make_client: Callable[..., KubeClient], stub: StubApiServer, sleeps: list[float]
) -> None:
    client = make_client(retry_max_wait=5.0)
    busy = Reply(503, status_body(503, "ServiceUnavailable", "x"), {"Retry-After": "120"})
    stub.reply("GET", "/api/v1/namespaces/default/pods/a", busy, Reply(body=pod("a")))
    client.get(PODS, "a", "default")
    assert sleeps == [5.0]


def test_create_is_not_retried_on_500(
    client: KubeClient, stub: StubApiServer, sleeps: list[float]
) -> None:
    failure = Reply(500, status_body(500, "InternalError", "boom"))
    stub.reply("POST", "/api/v1/namespaces/default/pods", failure, Reply(201, pod("a")))
    with pytest.raises(ServerError):
        client.create(PODS, pod("a"))
    assert sleeps == []
    assert len(stub.requests("POST")) == 1


def test_get_is_retried_on_500_up_to_max_retries_then_raises(
    make_client: Callable[..., KubeClient],
    stub: StubApiServer,
    sleeps: list[float],
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = make_client(max_retries=4, retry_max_wait=1.5)
    failure = Reply(500, status_body(500, "InternalError", "boom"))
    stub.reply("GET", "/api/v1/namespaces/default/pods/a", *[failure] * 10)
    with (
        caplog.at_level(logging.INFO, logger="manager.client"),
        pytest.raises(ServerError, match="boom"),
    ):
        client.get(PODS, "a", "default")
    assert len(stub.requests()) == 5  # one attempt + max_retries
    assert len(sleeps) == 4
    assert all(0 < s <= 1.5 for s in sleeps)
    retries = [r for r in caplog.records if r.name == "manager.client.rest"]
    assert [r.getMessage() for r in retries] == ["retrying API request"] * 4
    assert [getattr(r, "attempt", None) for r in retries] == [1, 2, 3, 4]
    assert all(getattr(r, "status", None) == 500 for r in retries)


def test_get_retried_on_500_succeeds_when_the_server_recovers(
    client: KubeClient, stub: StubApiServer, sleeps: list[float]
) -> None:
    failure = Reply(502, b"bad gateway", {"Content-Type": "text/plain"})
    stub.reply("GET", "/api/v1/namespaces/default/pods/a", failure, failure, Reply(body=pod("a")))
    assert client.get(PODS, "a", "default") == pod("a")
    assert len(sleeps) == 2


def test_writes_with_a_precondition_are_retried_on_503_blind_ones_are_not(
    client: KubeClient, stub: StubApiServer, sleeps: list[float]
) -> None:
    """A 503 without Retry-After may have come after the write was applied: replayed
    only where the replay cannot apply it twice (test_write_retries has every case)."""
    busy = Reply(503, status_body(503, "ServiceUnavailable", "later"))
    path = "/api/v1/namespaces/default/pods/a"
    stub.reply("PUT", path, busy, Reply(body=pod("a")))
    stub.reply("DELETE", path, busy, Reply(body=pod("a")), busy)
    stub.reply("PATCH", path, busy, busy, Reply(body=pod("a")))
    client.replace(PODS, pod("a"))  # metadata.resourceVersion: "7"
    client.delete(PODS, "a", "default", preconditions={"uid": "u-a"})
    assert len(sleeps) == 2
    with pytest.raises(Unavailable):
        client.delete(PODS, "a", "default")
    with pytest.raises(Unavailable):
        client.patch(PODS, "a", [{"op": "remove", "path": "/x"}], namespace="default",
                     patch_type="json")  # fmt: skip
    with pytest.raises(Unavailable):
        client.patch(PODS, "a", {"metadata": {"labels": {"a": "b"}}}, namespace="default")
    assert len(sleeps) == 2


def test_client_errors_are_never_retried(
    client: KubeClient, stub: StubApiServer, sleeps: list[float]
) -> None:
    conflict = Reply(409, status_body(409, "Conflict", "stale"))
    stub.reply("PUT", "/api/v1/namespaces/default/pods/a", conflict, Reply(body=pod("a")))
    with pytest.raises(Conflict):
        client.replace(PODS, pod("a"))
    assert sleeps == []


# -- client-side rate limiting ------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_token_bucket_allows_a_burst_then_spaces_by_one_over_qps() -> None:
    clock = FakeClock()
    bucket = TokenBucket(10.0, 3, clock=clock, sleep=clock.sleep)
    times = []
    for _ in range(6):
        bucket.accept()
        times.append(round(clock.now, 6))
    assert times == [0.0, 0.0, 0.0, 0.1, 0.2, 0.3]
    assert not bucket.try_accept()
    clock.now += 10.0  # idle: refills, but never above burst
    assert [bucket.try_accept() for _ in range(4)] == [True, True, True, False]


def test_token_bucket_without_qps_never_waits() -> None:
    clock = FakeClock()
    bucket = TokenBucket(0, 1, clock=clock, sleep=clock.sleep)
    for _ in range(100):
        bucket.accept()
    assert clock.sleeps == []
    with pytest.raises(ValueError, match="burst"):
        TokenBucket(1.0, 0)


def test_token_bucket_is_shared_fairly_between_threads() -> None:
    clock = FakeClock()  # time stands still: every waiter must get its own slot
    waits: list[float] = []
    lock = threading.Lock()

    def record(seconds: float) -> None:
        with lock:
            waits.append(round(seconds, 6))

    bucket = TokenBucket(10.0, 1, clock=clock, sleep=record)

    def worker() -> None:
        for _ in range(25):
            bucket.accept()

    threads = [threading.Thread(target=worker, name=f"bucket-{i}") for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(waits) == [round(0.1 * k, 6) for k in range(1, 100)]


def test_every_request_of_a_client_takes_a_token(stub: StubApiServer, kubeconfig: Path) -> None:
    clock = FakeClock()
    bucket = TokenBucket(2.0, 2, clock=clock, sleep=clock.sleep)
    stub.reply("GET", "/api/v1/namespaces/default/pods/a", *[Reply(body=pod("a"))] * 4)
    with KubeClient.from_kubeconfig(str(kubeconfig), rate_limiter=bucket) as client:
        for _ in range(4):
            client.get(PODS, "a", "default")
    assert clock.sleeps == [0.5, 0.5]


# -- watch --------------------------------------------------------------------------------


def event(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


def test_watch_decodes_events_split_across_chunks(client: KubeClient, stub: StubApiServer) -> None:
    added = event("ADDED", pod("a"))
    modified = event("MODIFIED", pod("a", status={"phase": "Running"}))
    bookmark = event("BOOKMARK", {"kind": "Pod", "metadata": {"resourceVersion": "12"}})
    stream = added + modified + b"\n" + bookmark
    chunks = [stream[:10], stream[10 : len(added) + 5], stream[len(added) + 5 :], b'{"type": "AD']
    stub.reply("GET", "/api/v1/namespaces/default/pods", Reply(chunks=chunks))
    with client.watch(
        PODS, "default", resource_version="5", timeout_seconds=300, read_timeout=30
    ) as watch:
        events = list(watch)
        assert watch.closed
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "BOOKMARK"]
    assert events[1]["object"]["status"] == {"phase": "Running"}
    assert events[2]["object"]["metadata"]["resourceVersion"] == "12"
    assert all(type(e) is dict and type(e["object"]) is dict for e in events)
    (seen,) = stub.requests()
    assert seen.query == {
        "watch": ["true"],
        "resourceVersion": ["5"],
        "timeoutSeconds": ["300"],
        "allowWatchBookmarks": ["true"],
    }


def test_watch_passes_error_events_through(client: KubeClient, stub: StubApiServer) -> None:
    expired = status_body(410, "Expired", "too old resource version: 5 (99)")
    stub.reply("GET", "/api/v1/pods", Reply(chunks=[event("ERROR", expired)]))
    with client.watch(PODS, resource_version="5", timeout_seconds=60, read_timeout=30) as watch:
        assert list(watch) == [{"type": "ERROR", "object": expired}]


def test_watch_with_initial_events_and_selectors(client: KubeClient, stub: StubApiServer) -> None:
    stub.reply("GET", "/api/v1/pods", Reply(chunks=[]))
    with client.watch(
        PODS,
        resource_version="",
        label_selector="app=x",
        field_selector="metadata.name=a",
        timeout_seconds=60,
        read_timeout=30,
        allow_bookmarks=False,
        send_initial_events=True,
    ) as watch:
        assert list(watch) == []
    assert stub.requests()[0].query == {
        "watch": ["true"],
        "labelSelector": ["app=x"],
        "fieldSelector": ["metadata.name=a"],
        "timeoutSeconds": ["60"],
        "sendInitialEvents": ["true"],
        "resourceVersionMatch": ["NotOlderThan"],
    }


def test_watch_close_stops_iteration(client: KubeClient, stub: StubApiServer) -> None:
    hold = threading.Event()
    stub.reply("GET", "/api/v1/pods", Reply(chunks=[event("ADDED", pod("a"))], hold=hold))
    watch = client.watch(PODS, resource_version="1", timeout_seconds=60, read_timeout=30)
    assert next(watch)["type"] == "ADDED"
    watch.close()
    watch.close()  # idempotent
    assert list(watch) == []


def test_watch_close_from_another_thread_unblocks_a_read(
    client: KubeClient, stub: StubApiServer
) -> None:
    hold = threading.Event()
    stub.reply("GET", "/api/v1/pods", Reply(chunks=[event("ADDED", pod("a"))], hold=hold))
    watch = client.watch(PODS, resource_version="1", timeout_seconds=60, read_timeout=30)
    received: list[dict[str, Any]] = []
    failures: list[BaseException] = []
    first = threading.Event()

    def consume() -> None:
        try:
            for item in watch:
                received.append(item)
                first.set()
        except BaseException as exc:
            failures.append(exc)

    consumer = threading.Thread(target=consume, name="watch-consumer")
    consumer.start()
    assert first.wait(10)
    watch.close()  # the consumer is now blocked reading: this must wake it
    consumer.join(10)
    assert not consumer.is_alive()
    assert failures == []
    assert [e["type"] for e in received] == ["ADDED"]


def test_watch_read_timeout_raises_unavailable(client: KubeClient, stub: StubApiServer) -> None:
    hold = threading.Event()
    stub.reply("GET", "/api/v1/pods", Reply(chunks=[event("ADDED", pod("a"))], hold=hold))
    with client.watch(PODS, resource_version="1", timeout_seconds=60, read_timeout=0.2) as watch:
        assert next(watch)["type"] == "ADDED"
        with pytest.raises(Unavailable, match="read timeout") as info:
            next(watch)
        assert info.value.status == 0
        assert watch.closed
        assert list(watch) == []


def test_watch_undecodable_line_is_an_api_error(client: KubeClient, stub: StubApiServer) -> None:
    stub.reply("GET", "/api/v1/pods", Reply(chunks=[b"<html>oops</html>\n"]))
    watch = client.watch(PODS, resource_version="1", timeout_seconds=60, read_timeout=30)
    with pytest.raises(ApiError, match="not a watch event") as info:
        next(watch)
    assert info.value.reason == "InvalidWatchEvent"
    assert watch.closed  # the connection was released without a close() by the caller


def test_watch_request_refused_raises_the_mapped_error(
    client: KubeClient, stub: StubApiServer, sleeps: list[float]
) -> None:
    stub.reply("GET", "/api/v1/pods", Reply(403, status_body(403, "Forbidden", "no watch")))
    with pytest.raises(Forbidden, match="no watch"):
        client.watch(PODS, resource_version="1", timeout_seconds=60, read_timeout=30)
    busy = Reply(503, status_body(503, "ServiceUnavailable", "later"), {"Retry-After": "1"})
    stub.reply("GET", "/api/v1/pods", busy, Reply(chunks=[event("ADDED", pod("a"))]))
    with client.watch(PODS, resource_version="1", timeout_seconds=60, read_timeout=30) as watch:
        assert [e["type"] for e in watch] == ["ADDED"]
    assert sleeps == [1.0]  # the opening request of a watch is retried like a GET


# -- discovery ----------------------------------------------------------------------------

RESOURCE_LIST = {
    "kind": "APIResourceList",
    "apiVersion": "v1",
    "groupVersion": "network.overseer.io/v1alpha1",
    "resources": [
        {"name": "logicalports", "singularName": "logicalport", "namespaced": False,
         "kind": "LogicalPort", "verbs": ["get", "list", "watch", "create", "delete"]},
        {"name": "logicalports/status", "singularName": "", "namespaced": False,
         "kind": "LogicalPort", "verbs": ["get", "patch", "update"]},
        {"name": "networks", "singularName": "network", "namespaced": True,
         "kind": "Network", "verbs": ["get", "list"]},
    ],
}  # fmt: skip


def test_discover_parses_the_resource_list(client: KubeClient, stub: StubApiServer) -> None:
    stub.reply("GET", "/apis/network.overseer.io/v1alpha1", Reply(body=RESOURCE_LIST))
    assert client.discover("network.overseer.io/v1alpha1") == [
        Resource("network.overseer.io", "v1alpha1", "logicalports", "LogicalPort", False, True),
        Resource("network.overseer.io", "v1alpha1", "networks", "Network", True, False),
    ]


def test_discover_the_core_group(client: KubeClient, stub: StubApiServer) -> None:
    core = {
        "kind": "APIResourceList",
        "groupVersion": "v1",
        "resources": [
            {"name": "pods", "namespaced": True, "kind": "Pod"},
            {"name": "pods/status", "namespaced": True, "kind": "Pod"},
            {"name": "pods/log", "namespaced": True, "kind": "Pod"},
            {"name": "bindings", "namespaced": True, "kind": "Binding"},
        ],
    }
    stub.reply("GET", "/api/v1", Reply(body=core))
    assert client.discover("v1") == [
        Resource("", "v1", "pods", "Pod", True, True),
        Resource("", "v1", "bindings", "Binding", True, False),
    ]


def test_resource_for_uses_builtins_without_asking(client: KubeClient, stub: StubApiServer) -> None:
    assert client.resource_for("apps/v1", "Deployment") is DEPLOYMENTS
    assert client.resource_for("v1", "Pod") is PODS
    assert stub.requests() == []


def test_resource_for_discovers_once_and_rediscovers_on_a_miss(
    client: KubeClient, stub: StubApiServer
) -> None:
    path = "/apis/network.overseer.io/v1alpha1"
    later = {**RESOURCE_LIST, "resources": [
        *RESOURCE_LIST["resources"],
        {"name": "pools", "namespaced": False, "kind": "Pool"},
    ]}  # fmt: skip
    stub.reply("GET", path, Reply(body=RESOURCE_LIST), Reply(body=later), Reply(body=later))
    port = client.resource_for("network.overseer.io/v1alpha1", "LogicalPort")
    assert port == Resource(
        "network.overseer.io", "v1alpha1", "logicalports", "LogicalPort", False, True
    )
    assert client.resource_for("network.overseer.io/v1alpha1", "Network").namespaced
    assert len(stub.requests()) == 1  # cached
    # A kind the cache does not know (a CRD created meanwhile): discovery is refreshed.
    assert client.resource_for("network.overseer.io/v1alpha1", "Pool").plural == "pools"
    assert len(stub.requests()) == 2
    with pytest.raises(NotFound, match="Gateway"):
        client.resource_for("network.overseer.io/v1alpha1", "Gateway")


GROUP_LIST = {
    "kind": "APIGroupList",
    "apiVersion": "v1",
    "groups": [
        {"name": "apps", "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
         "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"}},
        {"name": "network.overseer.io",
         "versions": [{"groupVersion": "network.overseer.io/v1alpha1", "version": "v1alpha1"}],
         "preferredVersion": {"groupVersion": "network.overseer.io/v1alpha1",
                              "version": "v1alpha1"}},
    ],
}  # fmt: skip
LISTED_PORTS = {**RESOURCE_LIST, "resources": [
    {**RESOURCE_LIST["resources"][0], "shortNames": ["lp"]}, *RESOURCE_LIST["resources"][1:]
]}  # fmt: skip


def test_resource_knows_builtins_without_asking(client: KubeClient, stub: StubApiServer) -> None:
    assert client.resource("quota") == BUILTINS["v1/resourcequotas"]
    assert client.resource("apps/v1", "deployments") is DEPLOYMENTS
    assert stub.requests() == []


@pytest.mark.parametrize(
    "name",
    [
        "logicalports.network.overseer.io",
        "LogicalPort",
        "logicalport",
        "lp",
        "network.overseer.io/v1alpha1/LogicalPort",
        "logicalports.v1alpha1.network.overseer.io",
        "LogicalPort.network.overseer.io",
    ],
)
def test_resource_finds_a_custom_resource_by_discovery(
    client: KubeClient, stub: StubApiServer, name: str
) -> None:
    stub.reply("GET", "/apis", Reply(body=GROUP_LIST))
    stub.reply("GET", "/apis/network.overseer.io/v1alpha1", Reply(body=LISTED_PORTS))
    port = Resource("network.overseer.io", "v1alpha1", "logicalports", "LogicalPort", False, True)
    assert client.resource(name) == port
    # the built-in group versions are not asked for: kube's own resources are known
    assert [s.path for s in stub.requests()] == ["/apis", "/apis/network.overseer.io/v1alpha1"]
    assert client.resource(name) == port  # cached
    assert len(stub.requests()) == 2


def test_resource_rediscovers_on_a_miss_and_names_the_closest(
    client: KubeClient, stub: StubApiServer
) -> None:
    stub.reply("GET", "/apis", *[Reply(body=GROUP_LIST)] * 3)
    stub.reply("GET", "/apis/network.overseer.io/v1alpha1", *[Reply(body=LISTED_PORTS)] * 3)
    assert client.resource("networks.network.overseer.io").namespaced
    with pytest.raises(UnknownResource) as info:
        client.resource("logicalprots")  # a typo: discovery is asked again, then the hint
    message = str(info.value)
    assert "'logicalprots'" in message
    assert "did you mean logicalports.network.overseer.io (network.overseer.io/v1alpha1" in message
    assert message.startswith(f"no resource 'logicalprots' is served by {stub.url}")
    assert "Is its CustomResourceDefinition installed?" in message
    assert len(stub.requests()) == 4  # once at first, once more for the miss
    assert isinstance(info.value, KeyError)


def test_resource_of_an_uninstalled_crd_says_so(client: KubeClient, stub: StubApiServer) -> None:
    stub.reply("GET", "/apis", Reply(body={"kind": "APIGroupList", "groups": []}))
    with pytest.raises(
        UnknownResource,
        match=r"no resource 'widgets\.example\.com' is served by .*CustomResourceDefinition",
    ):
        client.resource("widgets.example.com")


def test_resource_for_an_unserved_group_is_not_found(client: KubeClient) -> None:
    with pytest.raises(NotFound, match=r"nothing\.example/v1 is not served"):
        client.resource_for("nothing.example/v1", "Thing")


# -- metrics ------------------------------------------------------------------------------


def sample(name: str, labels: dict[str, str]) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_requests_are_counted_and_timed(
    make_client: Callable[..., KubeClient], stub: StubApiServer, tmp_path: Path
) -> None:
    client = make_client(max_retries=0)
    host = f"127.0.0.1:{stub.port}"
    stub.reply("GET", "/api/v1/namespaces/default/pods/a", Reply(body=pod("a")))
    stub.reply("POST", "/api/v1/namespaces/default/pods", Reply(500, b"boom"))
    client.get(PODS, "a", "default")
    with pytest.raises(ServerError):
        client.create(PODS, pod("a"))
    with pytest.raises(NotFound):
        client.get(PODS, "b", "default")
    requests = "rest_client_requests_total"
    assert sample(requests, {"code": "200", "method": "GET", "host": host}) == 1
    assert sample(requests, {"code": "404", "method": "GET", "host": host}) == 1
    assert sample(requests, {"code": "500", "method": "POST", "host": host}) == 1
    duration = "rest_client_request_duration_seconds_count"
    assert sample(duration, {"verb": "GET", "host": host}) == 2
    assert sample(duration, {"verb": "POST", "host": host}) == 1

    dead_port = free_port()
    dead = make_client(
        write_kubeconfig(tmp_path / "dead", f"http://127.0.0.1:{dead_port}"), max_retries=0
    )
    with pytest.raises(Unavailable):
        dead.get(PODS, "a", "default")
    labels = {"code": "<error>", "method": "GET", "host": f"127.0.0.1:{dead_port}"}
    assert sample(requests, labels) == 1


# -- the write session (the Event sender's cheap writes) -----------------------------------


def test_a_write_session_posts_and_patches_on_one_connection_with_the_clients_headers(
    client: KubeClient, stub: StubApiServer
) -> None:
    stub.reply("POST", "/api/v1/namespaces/team/pods", Reply(201, pod("a", "team")))
    stub.reply("PATCH", "/api/v1/namespaces/team/pods/a", Reply(200, pod("a", "team", x=1)))
    ports = set()
    with client.write_session() as session:
        assert session.create(PODS, pod("a", "team")) == pod("a", "team")
        ports.add(session._conn.sock.getsockname()[1])
        assert session.patch(PODS, "a", {"x": 1}, namespace="team")["x"] == 1
        ports.add(session._conn.sock.getsockname()[1])
    assert len(ports) == 1  # the second write went on the connection of the first
    post, patch = stub.requests()
    assert post.json() == pod("a", "team")
    assert post.headers["content-type"] == "application/json"
    assert post.headers["authorization"] == "Bearer stub-token"
    assert post.headers["user-agent"].startswith("overseer/")
    assert (patch.method, patch.json()) == ("PATCH", {"x": 1})
    assert patch.headers["content-type"] == "application/merge-patch+json"
    counted = REGISTRY.get_sample_value(
        "rest_client_requests_total",
        {"code": "201", "method": "POST", "host": f"127.0.0.1:{stub.port}"},
    )
    assert counted is not None and counted >= 1


@pytest.mark.parametrize(
    "case",
    [
        (404, status_body(404, "NotFound", "gone"), NotFound),
        (409, status_body(409, "AlreadyExists", "exists"), AlreadyExists),
        (500, status_body(500, "InternalError", "boom"), ServerError),
        (429, status_body(429, "TooManyRequests", "slow down"), TooManyRequests),
    ],
    ids=lambda case: str(case[0]),
)
def test_a_write_session_maps_errors_and_never_retries(
    client: KubeClient,
    stub: StubApiServer,
    sleeps: list[float],
    case: tuple[int, dict[str, Any], type[ApiError]],
) -> None:
    status, body, expected = case
    stub.reply("POST", "/api/v1/namespaces/team/pods", Reply(status, body), Reply(201, pod("b")))
    with client.write_session() as session:
        with pytest.raises(expected) as info:
            session.create(PODS, pod("a", "team"))
        assert info.value.message == body["message"]
        # the connection is still good for the next write
        assert session.create(PODS, pod("b", "team"))["metadata"]["name"] == "b"
    assert len(stub.requests("POST")) == 2 and sleeps == []


def test_a_write_session_reads_a_chunked_answer(client: KubeClient, stub: StubApiServer) -> None:
    whole = json.dumps(pod("a", "team")).encode()
    reply = Reply(201, chunks=[whole[:7], whole[7:]])
    stub.reply("POST", "/api/v1/namespaces/team/pods", reply)
    stub.reply("POST", "/api/v1/namespaces/team/pods", Reply(201, pod("b", "team")))
    with client.write_session() as session:
        assert session.create(PODS, pod("a", "team")) == pod("a", "team")
        assert session.create(PODS, pod("b", "team")) == pod("b", "team")


def test_a_write_session_to_an_unreachable_server_is_unavailable(
    make_client: Callable[..., KubeClient], tmp_path: Path
) -> None:
    dead = make_client(write_kubeconfig(tmp_path / "dead", f"http://127.0.0.1:{free_port()}"))
    with dead.write_session() as session, pytest.raises(Unavailable) as info:
        session.create(PODS, pod("a", "team"))
    assert info.value.status == 0 and "127.0.0.1" in info.value.message


def test_a_fenced_write_session_sends_nothing_when_the_fence_is_closed(
    client: KubeClient, stub: StubApiServer
) -> None:
    from manager.errors import WriteFenced
    from manager.fencing import ValidityFence

    closed = ValidityFence(lambda: 0.0, reason="unit_session", message="not ours")
    with client.with_fence(closed).write_session() as session, pytest.raises(WriteFenced):
        session.create(PODS, pod("a", "team"))
    assert stub.requests() == []


# -- the answer parser of the lean request path ---------------------------------------------


def _answer(raw: bytes) -> tuple[int, str, bytes, bool]:
    import io

    from manager.client.wire import read_response as _read_response

    return _read_response(io.BufferedReader(io.BytesIO(raw)))  # type: ignore[arg-type]


def test_answers_with_a_length_chunks_an_interim_status_or_a_close_are_read_whole() -> None:
    assert _answer(b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}tail") == (
        201,
        "",
        b"{}",
        False,
    )
    chunked = (
        b"HTTP/1.1 100 Continue\r\n\r\n"
        b"HTTP/1.1 429 Too Many Requests\r\nTransfer-Encoding: chunked\r\nRetry-After: 3\r\n\r\n"
        b'3;ext=1\r\n{"a\r\n4\r\n":1}\r\n0\r\nX-Trailer: t\r\n\r\n'
    )
    assert _answer(chunked) == (429, "3", b'{"a":1}', False)
    assert _answer(b'HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{"b":2}') == (
        200,
        "",
        b'{"b":2}',
        True,
    )
    assert _answer(b"HTTP/1.0 204 No Content\r\n\r\n") == (204, "", b"", True)


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (b"", ConnectionError),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}", ConnectionError),
        (b"HTTP/1.1 200 OK\r\nContent-Le", ConnectionError),
        (b"SSH-2.0-OpenSSH\r\n\r\n", Exception),
        (b"HTTP/1.1 abc OK\r\n\r\n", Exception),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", Exception),
    ],
    ids=["nothing", "short-body", "cut-header", "not-http", "bad-status", "bad-chunk"],
)
def test_a_broken_or_garbled_answer_is_a_connection_or_protocol_error(
    raw: bytes, error: type[Exception]
) -> None:
    import urllib3

    with pytest.raises(error) as info:
        _answer(raw)
    assert isinstance(info.value, ConnectionError | urllib3.exceptions.ProtocolError)


def test_after_an_answer_that_closes_the_connection_the_next_request_goes_through(
    client: KubeClient, stub: StubApiServer
) -> None:
    closing = Reply(201, pod("a", "team"), {"Connection": "close"})
    stub.reply("POST", "/api/v1/namespaces/team/pods", closing, Reply(201, pod("b", "team")))
    assert client.create(PODS, pod("a", "team"))["metadata"]["name"] == "a"
    assert client.create(PODS, pod("b", "team"))["metadata"]["name"] == "b"
    assert len(stub.requests("POST")) == 2


def test_a_pipeline_sends_writes_back_to_back_and_returns_each_answer_in_order(
    client: KubeClient, stub: StubApiServer
) -> None:
    from manager.client import Write

    stub.reply(
        "POST",
        "/api/v1/namespaces/team/pods",
        Reply(201, pod("a", "team")),
        Reply(409, status_body(409, "AlreadyExists", "exists")),
    )
    stub.reply("PATCH", "/api/v1/namespaces/team/pods/a", Reply(200, pod("a", "team", x=1)))
    writes = [
        Write.create(PODS, pod("a", "team")),
        Write.patch(PODS, "a", {"x": 1}, "team"),
        Write.create(PODS, pod("a", "team")),
    ]
    with client.write_session() as session:
        first, second, third = session.pipeline(writes)
    assert first == pod("a", "team")
    assert second == pod("a", "team", x=1)
    assert isinstance(third, AlreadyExists)
    assert [s.method for s in stub.requests()] == ["POST", "PATCH", "POST"]


def test_writes_a_closing_server_did_not_answer_go_again_on_a_new_connection(
    client: KubeClient, stub: StubApiServer
) -> None:
    from manager.client import Write

    closing = Reply(201, pod("a", "team"), {"Connection": "close"})
    stub.reply(
        "POST",
        "/api/v1/namespaces/team/pods",
        closing,
        Reply(201, pod("b", "team")),
        Reply(201, pod("c", "team")),
    )
    with client.write_session() as session:
        results = session.pipeline([Write.create(PODS, pod(n, "team")) for n in "abc"])
    assert [r["metadata"]["name"] for r in results if isinstance(r, dict)] == ["a", "b", "c"]
    assert [s.json()["metadata"]["name"] for s in stub.requests()] == ["a", "b", "c"]


def test_a_pipeline_through_a_closed_fence_sends_nothing(
    client: KubeClient, stub: StubApiServer
) -> None:
    from manager.client import Write
    from manager.errors import WriteFenced
    from manager.fencing import ValidityFence

    closed = ValidityFence(lambda: 0.0, reason="unit_pipeline", message="not ours")
    with client.with_fence(closed).write_session() as session:
        results = session.pipeline([Write.create(PODS, pod(n, "team")) for n in "ab"])
    assert all(isinstance(r, WriteFenced) for r in results) and len(results) == 2
    assert stub.requests() == []


def test_a_pipeline_can_leave_successful_answers_undecoded_and_still_maps_errors(
    client: KubeClient, stub: StubApiServer
) -> None:
    from manager.client import Write

    stub.reply(
        "POST",
        "/api/v1/namespaces/team/pods",
        Reply(201, pod("a", "team")),
        Reply(409, status_body(409, "AlreadyExists", "exists")),
    )
    with client.write_session() as session:
        writes = [Write.create(PODS, pod("a", "team")), Write.create(PODS, pod("a", "team"))]
        created, refused = session.pipeline(writes, decode=False)
    assert created == {}  # a success, its body not decoded
    assert isinstance(refused, AlreadyExists) and refused.message == "exists"


def test_a_write_session_can_be_used_again_after_close_and_builds_its_head_anew(
    client: KubeClient, stub: StubApiServer
) -> None:
    stub.reply("POST", "/api/v1/namespaces/team/pods", Reply(201, pod("a")), Reply(201, pod("b")))

    class Rotating:  # credentials whose token changes (an exec plugin's, a token file's)
        token = "stub-token"

        def authorization(self) -> str:
            return f"Bearer {self.token}"

    rotating = Rotating()
    client._config = dataclasses.replace(client._config, credentials=rotating)
    session = client.write_session()
    with session:
        session.create(PODS, pod("a", "team"))

    # a refreshed token is sent from the next round on
    rotating.token = "fresh-token"
    with session:
        session.create(PODS, pod("b", "team"))
    first, second = stub.requests("POST")
    assert first.headers["authorization"] == "Bearer stub-token"
    assert second.headers["authorization"] == "Bearer fresh-token"


def test_a_pipeline_waits_once_for_its_answers_as_long_as_the_server_took_before(
    client: KubeClient, stub: StubApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server answers pipelined writes one by one: the session learns its pace from a
    pipeline whose answers came in several receives, and waits once before reading the
    next pipeline's answers instead of waking per answer."""
    from manager.client import Write, wire

    released = threading.Event()
    stub.reply(
        "POST",
        "/api/v1/namespaces/team/pods",
        Reply(201, pod("a", "team")),
        Reply(201, pod("b", "team")),
        # the third answer ends only once the session reads again: its answers cannot
        # all be there in one receive
        Reply(201, chunks=[json.dumps(pod("c", "team")).encode()], hold=released),
        *(Reply(201, pod(n, "team")) for n in "def"),
    )
    real_readinto = wire.SocketReads.readinto

    def readinto(raw: Any, buffer: Any) -> int:
        if raw.receives >= 1:
            released.set()
        return real_readinto(raw, buffer)

    monkeypatch.setattr(wire.SocketReads, "readinto", readinto)
    waits: list[float] = []
    with client.write_session() as session:
        session._sleep = waits.append
        first = session.pipeline([Write.create(PODS, pod(n, "team")) for n in "abc"])
        assert [r["metadata"]["name"] for r in first if isinstance(r, dict)] == ["a", "b", "c"]
        assert waits == []  # nothing known of the server's pace yet: read as they come
        per_write = session._answer_seconds
        assert per_write > 0
        second = session.pipeline([Write.create(PODS, pod(n, "team")) for n in "def"])
        assert [r["metadata"]["name"] for r in second if isinstance(r, dict)] == ["d", "e", "f"]
        assert waits == [pytest.approx(3 * per_write)]
        session.pipeline([])  # nothing sent, nothing waited for
        assert len(waits) == 1


def test_a_pipeline_wait_that_found_every_answer_there_is_shortened_next_time(
    client: KubeClient,
) -> None:
    import time

    session = client.write_session()
    session._answer_seconds = 0.01
    session._pace(4, time.monotonic(), receives=1)  # every answer in the first receive
    assert session._answer_seconds == pytest.approx(0.0075)
    session._pace(4, time.monotonic() - 0.2, receives=3)  # they kept coming: 0.2 s for 4
    assert session._answer_seconds == pytest.approx(0.05, rel=0.2)

"""The webhook server over real TLS, as kube-apiserver uses it: HTTP/1.1 keep-alive
connections POSTing AdmissionReviews and ConversionReviews; malformed requests answered
400 while the server goes on; the concurrency bound; a certificate rotated in certDir
while clients keep their connections; the drain on stop; metrics and spans."""

from __future__ import annotations

import base64
import http.client
import shutil
import socket
import ssl
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import generate_latest

from manager import (
    REGISTRY,
    Admission,
    AdmissionRequest,
    Conversion,
    JsonDict,
    MutatingWebhook,
    Rule,
    Spoke,
    ValidatingWebhook,
)
from manager.webhook import WebhookServer, WebhookServerOptions
from manager.webhook.metrics import IN_FLIGHT, LATE, REJECTED, REQUESTS

pytestmark = pytest.mark.skipif(
    shutil.which("openssl") is None, reason="openssl is not installed (it makes certificates)"
)

RULES = [
    Rule(
        operations=["CREATE", "UPDATE"],
        resources=["widgets"],
        api_groups=["example.com"],
        api_versions=["v1"],
    )
]
GATE = threading.Event()  # the slow handler waits for it


def _validate(req: AdmissionRequest) -> Admission:
    assert req.object is not None
    if req.object["spec"].get("size", 0) > 10:
        return Admission.deny("size: at most 10")
    return Admission.allow()


def _default(req: AdmissionRequest) -> JsonDict:
    assert req.object is not None
    req.object["metadata"].setdefault("labels", {})["defaulted"] = "true"
    return req.object


def _broken(req: AdmissionRequest) -> Admission:
    raise RuntimeError("the handler broke")


def _slow(req: AdmissionRequest) -> Admission:
    GATE.wait(10)
    return Admission.allow()


HOOKS: list[Any] = [
    ValidatingWebhook(name="validate.widgets.example.com", rules=RULES, handler=_validate),
    MutatingWebhook(name="default.widgets.example.com", rules=RULES, handler=_default),
    ValidatingWebhook(name="broken.widgets.example.com", rules=RULES, handler=_broken),
    ValidatingWebhook(name="slow.widgets.example.com", rules=RULES, handler=_slow),
    Conversion(
        crd="widgets.example.com",
        hub="v2",
        spokes={"v1": Spoke(to_hub=lambda o: o, from_hub=lambda o: o)},
    ),
]


def _server(**options: Any) -> WebhookServer:
    options = {"host": "127.0.0.1", "port": 0, "shutdown_delay": 0.0, **options}
    server = WebhookServer(WebhookServerOptions(**options))
    for hook in HOOKS:
        server.register(hook, "test")
    return server


@pytest.fixture
def server() -> Iterator[WebhookServer]:
    srv = _server(max_concurrent=2)
    srv.start()
    try:
        yield srv
    finally:
        GATE.set()
        srv.stop()
        GATE.clear()


class Client:
    """One keep-alive HTTPS connection, as the API server's transport keeps one."""

    def __init__(self, server: WebhookServer, cadata: str | None = None) -> None:
        address = server.address
        assert address is not None
        context = ssl.create_default_context(cadata=cadata or server.certificate.certificate_pem)
        context.set_alpn_protocols(["h2", "http/1.1"])  # what a Go client offers
        self.conn = http.client.HTTPSConnection(address[0], address[1], context=context, timeout=10)

    def post(
        self, path: str, body: bytes, content_type: str = "application/json", **headers: str
    ) -> tuple[int, JsonDict | bytes, http.client.HTTPResponse]:
        self.conn.request("POST", path, body, {"Content-Type": content_type, **headers})
        response = self.conn.getresponse()
        data = response.read()
        try:
            return response.status, orjson.loads(data), response
        except orjson.JSONDecodeError:
            return response.status, data, response

    def close(self) -> None:
        self.conn.close()


def _review(obj: JsonDict | None, operation: str = "CREATE", uid: str | None = None) -> bytes:
    request = {
        "uid": uid or str(uuid.uuid4()),
        "kind": {"group": "example.com", "version": "v1", "kind": "Widget"},
        "resource": {"group": "example.com", "version": "v1", "resource": "widgets"},
        "namespace": "shop",
        "name": "w",
        "operation": operation,
        "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        "object": obj,
        "oldObject": None,
        "dryRun": False,
    }
    return orjson.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    )


def _widget(size: int = 3) -> JsonDict:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "shop"},
        "spec": {"size": size},
    }


def _count(metric: Any, *labels: str) -> float:
    value: float = metric.labels(*labels)._value.get()
    return value


def test_allow_deny_mutate_and_a_failing_handler_on_one_kept_alive_connection(
    server: WebhookServer,
) -> None:
    client = Client(server)
    try:
        status, review, _ = client.post(
            "/validate/validate.widgets.example.com?timeout=10s", _review(_widget(), uid="u-1")
        )
        assert status == 200 and isinstance(review, dict)
        assert review["apiVersion"] == "admission.k8s.io/v1" and review["kind"] == "AdmissionReview"
        assert review["response"] == {"uid": "u-1", "allowed": True}
        sock = client.conn.sock
        status, review, _ = client.post(
            "/validate/validate.widgets.example.com", _review(_widget(20))
        )
        assert isinstance(review, dict) and review["response"]["allowed"] is False
        assert review["response"]["status"]["code"] == 403
        assert review["response"]["status"]["message"] == "size: at most 10"
        status, review, _ = client.post("/mutate/default.widgets.example.com", _review(_widget()))
        assert isinstance(review, dict) and review["response"]["patchType"] == "JSONPatch"
        assert orjson.loads(base64.b64decode(review["response"]["patch"])) == [
            {"op": "add", "path": "/metadata/labels", "value": {"defaulted": "true"}}
        ]
        errors = _count(REQUESTS, "/validate/broken.widgets.example.com", "200")
        status, review, _ = client.post("/validate/broken.widgets.example.com", _review(_widget()))
        assert status == 200 and isinstance(review, dict)
        assert review["response"]["status"] == {
            "status": "Failure",
            "code": 500,
            "reason": "InternalError",
            "message": "RuntimeError: the handler broke",
        }
        assert _count(REQUESTS, "/validate/broken.widgets.example.com", "200") == errors + 1
        assert client.conn.sock is sock  # every review on the one connection
    finally:
        client.close()


@pytest.mark.parametrize(
    ("path", "body", "content_type", "status", "message"),
    [
        (
            "/validate/validate.widgets.example.com",
            b"{oops",
            "application/json",
            400,
            "the body is not JSON",
        ),
        (
            "/validate/validate.widgets.example.com",
            orjson.dumps({"apiVersion": "v1", "kind": "Pod"}),
            "application/json",
            400,
            "expected a AdmissionReview of admission.k8s.io/v1",
        ),
        (
            "/validate/validate.widgets.example.com",
            orjson.dumps(
                {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}
            ),
            "application/json",
            400,
            "the AdmissionReview's request has no uid",
        ),
        (
            "/validate/validate.widgets.example.com",
            _review(_widget()),
            "text/plain",
            400,
            "contentType=text/plain, expected application/json",
        ),
        (
            "/convert/widgets.example.com",
            b"[]",
            "application/json",
            400,
            "expected a ConversionReview object",
        ),
        ("/validate/nothing.here.example.com", _review(_widget()), "application/json", 404, ""),
    ],
)
def test_malformed_requests_are_refused_and_the_server_goes_on(
    server: WebhookServer, path: str, body: bytes, content_type: str, *, status: int, message: str
) -> None:
    client = Client(server)
    try:
        got, answer, _ = client.post(path, body, content_type)
        assert got == status
        if message:
            assert isinstance(answer, dict) and answer["kind"] == "Status"
            assert answer["code"] == status and message in answer["message"]
        else:
            assert answer == b"404 page not found\n"
        # the same connection goes on
        ok, review, _ = client.post("/validate/validate.widgets.example.com", _review(_widget()))
        assert ok == 200 and isinstance(review, dict) and review["response"]["allowed"] is True
    finally:
        client.close()


def test_a_conversion_review(server: WebhookServer) -> None:
    client = Client(server)
    try:
        body = orjson.dumps(
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "ConversionReview",
                "request": {
                    "uid": "c-1",
                    "desiredAPIVersion": "example.com/v2",
                    "objects": [_widget()],
                },
            }
        )
        status, review, _ = client.post("/convert/widgets.example.com", body)
        assert status == 200 and isinstance(review, dict)
        assert review["response"]["uid"] == "c-1"
        assert review["response"]["result"] == {"status": "Success"}
        assert review["response"]["convertedObjects"] == [
            {**_widget(), "apiVersion": "example.com/v2"}
        ]
    finally:
        client.close()


def test_the_concurrency_bound_answers_429_at_the_deadline_and_late_answers_are_counted(
    server: WebhookServer,
) -> None:
    """max_concurrent=2: two slow reviews hold both slots; a third waits for one until its
    deadline (the API server's ?timeout=) and is answered 429; the slow ones, answered
    after their own deadline, count as late."""
    path = "/validate/slow.widgets.example.com"
    late = LATE.labels(path)._value.get()
    busy = REJECTED.labels(path, "busy")._value.get()
    results: list[int] = []

    def slow() -> None:
        client = Client(server)
        try:
            results.append(client.post(f"{path}?timeout=100ms", _review(_widget()))[0])
        finally:
            client.close()

    threads = [threading.Thread(target=slow, name=f"test/slow-{i}") for i in range(2)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 5
    while IN_FLIGHT.labels(path)._value.get() < 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    client = Client(server)
    try:
        started = time.monotonic()
        status, answer, _ = client.post(f"{path}?timeout=200ms", _review(_widget()))
        waited = time.monotonic() - started
        assert status == 429 and isinstance(answer, dict)
        assert "webhook server busy: 2 reviews in flight" in answer["message"]
        assert 0.15 < waited < 2.0
        assert REJECTED.labels(path, "busy")._value.get() == busy + 1
    finally:
        client.close()
        GATE.set()
        for t in threads:
            t.join()
    assert results == [200, 200]
    assert LATE.labels(path)._value.get() == late + 2


def _make_pair(directory: Path, cn: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            "openssl", "req", "-x509", "-nodes", "-newkey", "ec",
            "-pkeyopt", "ec_paramgen_curve:prime256v1", "-days", "1", "-subj", f"/CN={cn}",
            "-addext", "subjectAltName=IP:127.0.0.1",
            "-keyout", str(directory / "tls.key"), "-out", str(directory / "tls.crt"),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip


def _peer_cn(server: WebhookServer, cadata: str) -> str:
    address = server.address
    assert address is not None
    context = ssl.create_default_context(cadata=cadata)
    with (
        socket.create_connection(address, timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        cert = tls.getpeercert()
    return dict(x[0] for x in cert["subject"])["commonName"]


def test_a_rotated_certificate_is_served_to_new_connections_while_old_ones_go_on(
    tmp_path: Path,
) -> None:
    certs = tmp_path / "certs"
    _make_pair(certs, "first")
    _make_pair(tmp_path / "next", "second")
    both = (certs / "tls.crt").read_text() + (tmp_path / "next" / "tls.crt").read_text()
    server = _server(cert_dir=str(certs))
    server.start()
    failures: list[str] = []
    answered = [0]
    stop = threading.Event()

    def keep_posting(reconnect: bool) -> None:
        client = Client(server, both)
        try:
            while not stop.is_set():
                try:
                    status, review, _ = client.post(
                        "/validate/validate.widgets.example.com", _review(_widget())
                    )
                    if (
                        status != 200
                        or not isinstance(review, dict)
                        or not review["response"]["allowed"]
                    ):
                        failures.append(f"{status} {review!r}")
                    answered[0] += 1
                except (OSError, http.client.HTTPException) as exc:
                    failures.append(repr(exc))
                if reconnect:
                    client.close()  # the next post opens a new connection
        finally:
            client.close()

    threads = [
        threading.Thread(target=keep_posting, args=(r,), name=f"test/client-{r}")
        for r in (False, True)
    ]
    try:
        assert _peer_cn(server, both) == "first"
        for t in threads:
            t.start()
        time.sleep(0.2)
        for name in ("tls.key", "tls.crt"):  # as kubelet swaps a Secret volume: atomically
            tmp = certs / f".{name}.tmp"
            shutil.copy(tmp_path / "next" / name, tmp)
            tmp.replace(certs / name)
        deadline = time.monotonic() + 5
        while _peer_cn(server, both) != "second" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _peer_cn(server, both) == "second"
        before = answered[0]
        time.sleep(0.2)
        assert answered[0] > before  # both kinds of clients still being answered
    finally:
        stop.set()
        for t in threads:
            t.join()
        server.stop()
    assert failures == []


def test_stop_drains_then_closes(server: WebhookServer) -> None:
    """During the drain (linger) answers close their connection and new connections are
    still taken; a kept-alive connection is not closed under its client while the drain
    lasts (a review it sends as the server closes it would be lost: kube-apiserver does
    not resend a POST that went out); afterwards idle connections and the port are
    closed."""
    address = server.address
    assert address is not None
    kept = Client(server)
    kept.post("/validate/validate.widgets.example.com", _review(_widget()))
    idle = Client(server)
    idle.post("/validate/validate.widgets.example.com", _review(_widget()))
    stopper = threading.Thread(target=server.stop, kwargs={"linger": 0.5}, name="test/stop")
    stopper.start()
    try:
        deadline = time.monotonic() + 2
        while server.ready_reason() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert server.ready_reason() == "the webhook server is stopping"
        fresh = Client(server)
        try:
            status, _, response = fresh.post(
                "/validate/validate.widgets.example.com", _review(_widget())
            )
            assert status == 200 and response.getheader("Connection") == "close"
        finally:
            fresh.close()
        # the kept-alive connection is answered, and closed after the answer
        status, _, response = kept.post(
            "/validate/validate.widgets.example.com", _review(_widget())
        )
        assert status == 200 and response.getheader("Connection") == "close"
        # one left idle through the drain is closed when it ends
        assert idle.conn.sock is not None
        idle.conn.sock.settimeout(3)
        began = time.monotonic()
        assert idle.conn.sock.recv(1) == b""
        assert time.monotonic() - began > 0.2  # not at the drain's start
    finally:
        kept.close()
        idle.close()
        stopper.join()
    assert server.address is None
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(address, timeout=2).close()


def test_metrics_are_exported_only_while_the_server_runs() -> None:
    server = _server()
    name = b"controller_runtime_webhook_requests_in_flight"
    assert name not in generate_latest(REGISTRY)
    server.start()
    try:
        assert server.ready_reason() is None
        client = Client(server)
        client.post("/validate/validate.widgets.example.com", _review(_widget()))
        client.close()
        text = generate_latest(REGISTRY).decode()
        assert (
            'controller_runtime_webhook_requests_total{code="200",webhook="/validate/validate.widgets.example.com"}'
            in text
        )
        assert (
            'controller_runtime_webhook_latency_seconds_count{webhook="/validate/validate.widgets.example.com"}'
            in text
        )
        # initialized as controller-runtime does: 200 and 500 exist before any request
        convert = 'code="500",webhook="/convert/widgets.example.com"} 0.0'
        assert f"controller_runtime_webhook_requests_total{{{convert}" in text
    finally:
        server.stop()
    assert name not in generate_latest(REGISTRY)


def test_a_span_per_review_child_of_the_api_servers(server: WebhookServer) -> None:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        trace.set_tracer_provider(TracerProvider())
        provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    client = Client(server)
    try:
        client.post(
            "/validate/validate.widgets.example.com",
            _review(_widget(), uid="traced"),
            traceparent=parent,
        )
    finally:
        client.close()
        exporter.shutdown()
    [span] = [s for s in exporter.get_finished_spans() if s.name == "webhook.review"]
    assert format(span.context.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"
    assert span.parent is not None and format(span.parent.span_id, "016x") == "b7ad6b7169203331"
    assert span.attributes is not None
    assert span.attributes["webhook"] == "validate.widgets.example.com"
    assert span.attributes["uid"] == "traced" and span.attributes["allowed"] is True

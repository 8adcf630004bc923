"""Admission and conversion webhooks (apiserver/registry/webhook): reviews, the dispatchers'
rules, the client's errors and service resolution, the CRD converter."""

from __future__ import annotations

import base64
import contextlib
import socket
import struct
import threading
from typing import Any

import orjson
import pytest

from apiserver.api.errors import StatusError
from apiserver.machinery.admission import Attributes, ConversionFailed, request_context
from apiserver.machinery.fieldvalidation import warning_headers
from apiserver.registry.webhook import review
from apiserver.registry.webhook.admission import MUTATING, VALIDATING, WebhookDispatcher
from apiserver.registry.webhook.client import CallError, ClientConfig, Service, WebhookClient
from apiserver.registry.webhook.conversion import CRDS, CrdConverter
from tests.integration.webhookserver import Reply, WebhookServer, allow

JsonDict = dict[str, Any]


# -- reviews ---------------------------------------------------------------------------


def _answer(uid: str = "u1", **response: Any) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": uid, **response},
        }
    )


def test_a_refusal_is_worded_as_kube_words_it() -> None:
    err = review.to_status_error("w.x.io", {"code": 200, "message": "nope", "reason": "Bad"})
    assert (err.code, err.reason) == (400, "Bad")  # a code below 400 becomes 400
    assert err.message == 'admission webhook "w.x.io" denied the request: nope'
    assert review.to_status_error("w.x.io", {"reason": "Why"}).message.endswith("request: Why")
    bare = review.to_status_error("w.x.io", None)
    assert (bare.code, bare.message) == (
        400,
        'admission webhook "w.x.io" denied the request without explanation',
    )
    assert review.to_status_error("w.x.io", {"code": 422}).code == 422


def test_a_v1_answer_is_verified() -> None:
    ok = review.parse_response(_answer(allowed=True, warnings=["w"]), "u1", "v1", mutating=False)
    assert ok.allowed
    assert ok.warnings == ("w",)
    with pytest.raises(review.InvalidResponse, match=r'expected response\.uid="u1", got "u2"'):
        review.parse_response(_answer("u2", allowed=True), "u1", "v1", mutating=False)
    with pytest.raises(review.InvalidResponse, match="validating webhook may not return"):
        patch = base64.b64encode(b"[]").decode()
        review.parse_response(_answer(allowed=True, patch=patch), "u1", "v1", mutating=False)
    with pytest.raises(review.InvalidResponse, match=r"patch but not response\.patchType"):
        patch = base64.b64encode(b"[]").decode()
        review.parse_response(_answer(allowed=True, patch=patch), "u1", "v1", mutating=True)
    with pytest.raises(review.InvalidResponse, match="webhook response was absent"):
        review.parse_response(
            orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}),
            "u1",
            "v1",
            mutating=False,
        )
    with pytest.raises(review.Undecodable, match="Object 'Kind' is missing"):
        review.parse_response(b"{}", "u1", "v1", mutating=False)


def test_a_v1beta1_answer_is_taken_as_it_is() -> None:
    patch = base64.b64encode(b'[{"op":"add","path":"/a","value":1}]').decode()
    body = orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1beta1",
            "kind": "AdmissionReview",
            "response": {"uid": "other", "allowed": True, "patch": patch},
        }
    )
    got = review.parse_response(body, "u1", "v1beta1", mutating=True)
    assert (got.allowed, got.patch_type) == (True, "JSONPatch")


def test_the_review_version_is_the_first_kube_knows() -> None:
    assert review.review_version(["v2", "v1beta1", "v1"]) == "v1beta1"
    assert review.review_version(["v2"]) == ""


# -- dispatchers ------------------------------------------------------------------------


class _Storage:
    def __init__(self, **lists: list[JsonDict]) -> None:
        self.lists = lists
        self.objects: dict[tuple[str, str, str], JsonDict] = {}

    def list(self, key: str, namespace: str | None = None) -> list[JsonDict]:
        return [
            o
            for o in self.lists.get(key, [])
            if namespace is None or (o.get("metadata") or {}).get("namespace") == namespace
        ]

    def get(self, key: tuple[str, str, str]) -> JsonDict | None:
        return self.objects.get(key)

    def has_any(self, key: str) -> bool:
        return bool(self.lists.get(key))


class _Client:
    """Answers each webhook by its URL's path with a script of the review."""

    def __init__(self, **scripts: Any) -> None:
        self.scripts = scripts
        self.calls: list[tuple[str, JsonDict]] = []

    def post(self, config: ClientConfig, body: bytes, *, timeout: float, query: bool) -> bytes:
        path = config.url.rsplit("/", 1)[-1]
        sent = orjson.loads(body)
        self.calls.append((path, sent))
        answer = self.scripts[path](sent)
        if isinstance(answer, Exception):
            raise answer
        return orjson.dumps(answer)


def _hook(path: str, **extra: Any) -> JsonDict:
    return {
        "name": f"{path}.x.io",
        "clientConfig": {"url": f"https://127.0.0.1:1/{path}"},
        "rules": [
            {
                "operations": ["*"],
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": ["configmaps"],
            }
        ],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        **extra,
    }


def _configurations(key: str, *hooks_by_name: tuple[str, list[JsonDict]]) -> _Storage:
    return _Storage(**{key: [{"metadata": {"name": n}, "webhooks": h} for n, h in hooks_by_name]})


def _attrs(**kw: Any) -> Attributes:
    base: JsonDict = {
        "operation": "CREATE",
        "group": "",
        "version": "v1",
        "resource": "configmaps",
        "kind": "ConfigMap",
        "subresource": "",
        "namespace": "ns",
        "name": "cm",
        "obj": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}},
        "old": None,
    }
    return Attributes(**{**base, **kw})


def _dispatcher(storage: _Storage, client: _Client) -> WebhookDispatcher:
    def convert(obj: JsonDict, group: str, resource: str, api_version: str) -> JsonDict:
        return {**obj, "apiVersion": api_version}

    return WebhookDispatcher(storage, [], client, convert)  # type: ignore[arg-type]


def _label(name: str) -> Any:
    def script(sent: JsonDict) -> JsonDict:
        obj = sent["request"]["object"] or sent["request"]["oldObject"]
        labels = dict(obj["metadata"].get("labels") or {})
        if name in labels:
            return _allow(sent)
        labels[name] = "yes"
        ops = [{"op": "add", "path": "/metadata/labels", "value": labels}]
        return _allow(
            sent, patchType="JSONPatch", patch=base64.b64encode(orjson.dumps(ops)).decode()
        )

    return script


def _allow(sent: JsonDict, **response: Any) -> JsonDict:
    return {
        "apiVersion": sent["apiVersion"],
        "kind": "AdmissionReview",
        "response": {"uid": sent["request"]["uid"], "allowed": True, **response},
    }


def test_an_if_needed_webhook_is_reinvoked_once_after_a_later_change() -> None:
    client = _Client(a=_label("a"), b=_label("b"), c=_label("c"))
    storage = _configurations(
        MUTATING,
        ("2-second", [_hook("c")]),
        ("1-first", [_hook("a", reinvocationPolicy="IfNeeded"), _hook("b")]),
    )
    obj = _dispatcher(storage, client).admit(_attrs(), lambda o: o)
    assert obj is not None
    assert obj["metadata"]["labels"] == {"a": "yes", "b": "yes", "c": "yes"}
    # a changed the object itself (no reinvocation for that); b and c came later
    assert [path for path, _ in client.calls] == ["a", "b", "c", "a"]


def test_a_webhook_skipped_in_the_first_round_is_not_reinvoked() -> None:
    client = _Client(a=_label("a"), b=_label("b"))
    picky = _hook("a", reinvocationPolicy="IfNeeded", objectSelector={"matchLabels": {"b": "yes"}})
    storage = _configurations(MUTATING, ("c", [picky, _hook("b")]))
    _dispatcher(storage, client).admit(_attrs(), lambda o: o)
    assert [path for path, _ in client.calls] == ["b"]


def test_a_dry_run_reaches_only_webhooks_without_side_effects() -> None:
    client = _Client(some=_allow)
    storage = _configurations(VALIDATING, ("c", [_hook("some", sideEffects="Some")]))
    with pytest.raises(StatusError) as refused:
        _dispatcher(storage, client).validate(_attrs(dry_run=True))
    assert (refused.value.code, refused.value.message) == (
        400,
        'admission webhook "some.x.io" does not support dry run',
    )
    assert client.calls == []


def test_a_mutating_webhook_may_not_patch_a_delete() -> None:
    client = _Client(d=_label("d"))
    storage = _configurations(MUTATING, ("c", [_hook("d", failurePolicy="Ignore")]))
    attrs = _attrs(operation="DELETE", obj=None, old={"metadata": {"name": "cm"}})
    with pytest.raises(StatusError) as refused:
        _dispatcher(storage, client).admit(attrs, lambda o: o)
    assert refused.value.code == 500
    assert refused.value.message == (
        'Internal error occurred: admission webhook "d.x.io" attempted to modify the object, '
        "which is not supported for this operation"
    )


def test_failures_follow_the_failure_policy_and_the_first_error_wins() -> None:
    down = CallError('Post "https://127.0.0.1:1/x?timeout=10s": connection refused')
    client = _Client(
        ignored=lambda _s: down,
        failing=lambda _s: down,
        denying=lambda s: {**_allow(s), "response": {"uid": s["request"]["uid"], "allowed": False}},
    )
    storage = _configurations(
        VALIDATING,
        ("c", [_hook("ignored", failurePolicy="Ignore"), _hook("failing"), _hook("denying")]),
    )
    with pytest.raises(StatusError) as refused:
        _dispatcher(storage, client).validate(_attrs())
    assert refused.value.code == 500
    assert refused.value.message == (
        'Internal error occurred: failed calling webhook "failing.x.io": failed to call '
        'webhook: Post "https://127.0.0.1:1/x?timeout=10s": connection refused'
    )
    assert sorted(path for path, _ in client.calls) == ["denying", "failing", "ignored"]


def test_the_review_names_the_user_and_the_versions() -> None:
    client = _Client(v=_allow)
    storage = _configurations(
        VALIDATING, ("c", [_hook("v", admissionReviewVersions=["v1beta1", "v1"])])
    )
    with request_context("alice", ("devs",), "uid-1"):
        _dispatcher(storage, client).validate(_attrs(options={"kind": "CreateOptions"}))
    ((_, sent),) = client.calls
    assert sent["apiVersion"] == "admission.k8s.io/v1beta1"
    request = sent["request"]
    assert request["userInfo"] == {"username": "alice", "uid": "uid-1", "groups": ["devs"]}
    assert request["options"] == {"kind": "CreateOptions"}
    assert request["oldObject"] is None
    assert "subResource" not in request


def test_admission_configurations_are_never_sent() -> None:
    client = _Client(v=_allow)
    hook = _hook("v")
    hook["rules"] = [
        {"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}
    ]
    storage = _configurations(VALIDATING, ("c", [hook]))
    attrs = _attrs(
        group="admissionregistration.k8s.io",
        resource="validatingwebhookconfigurations",
        kind="ValidatingWebhookConfiguration",
        namespace="",
    )
    dispatcher = _dispatcher(storage, client)
    assert not dispatcher.wants(attrs, mutating=False)
    dispatcher.validate(attrs)
    assert client.calls == []


# -- the client ---------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_client_words_transport_failures_as_go_does() -> None:
    client = WebhookClient(_Storage())
    port = _free_port()
    with pytest.raises(CallError) as refused:
        client.post(ClientConfig(url=f"https://127.0.0.1:{port}/x"), b"{}", timeout=5, query=True)
    assert refused.value.text == (
        f'Post "https://127.0.0.1:{port}/x?timeout=5s": dial tcp 127.0.0.1:{port}: connect: '
        "connection refused"
    )
    with contextlib.closing(client), WebhookServer() as server:
        server.route("/x", allow)
        with pytest.raises(CallError) as untrusted:
            client.post(ClientConfig(url=server.url("/x")), b"{}", timeout=5, query=False)
        assert untrusted.value.text == (
            f'Post "{server.url("/x")}": tls: failed to verify certificate: x509: certificate '
            "signed by unknown authority"
        )
        trusted = ClientConfig.from_api(server.client_config("/missing"))
        with pytest.raises(CallError) as missing:
            client.post(trusted, b"{}", timeout=5, query=False)
        assert missing.value.status is not None
        assert missing.value.status.code == 404
        assert missing.value.text == "the server could not find the requested resource"


def test_a_connection_reset_in_the_handshake_is_a_failed_call() -> None:
    """A webhook that goes away during the TLS handshake (killed) fails the call with
    Go's words, like any transport failure (the failure policy decides), rather than
    failing the API server's request with an internal error of its own."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]

    def reset() -> None:
        conn, _ = listener.accept()
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.recv(1)  # the ClientHello has arrived
        conn.close()  # RST

    thread = threading.Thread(target=reset)
    thread.start()
    try:
        with pytest.raises(CallError) as failed:
            WebhookClient(_Storage()).post(
                ClientConfig(url=f"https://127.0.0.1:{port}/x"), b"{}", timeout=5, query=False
            )
    finally:
        thread.join()
        listener.close()
    assert failed.value.text.startswith(f'Post "https://127.0.0.1:{port}/x": ')
    assert failed.value.text.endswith("connection reset by peer"), failed.value.text


def test_a_service_is_called_through_its_endpoint_slices() -> None:
    with WebhookServer(service_names=["hooks.ns.svc"]) as server:
        server.route("/admit", allow)
        storage = _Storage()
        storage.objects[("/services", "ns", "hooks")] = {
            "spec": {"ports": [{"name": "https", "port": 443, "targetPort": server.port}]}
        }
        client = WebhookClient(storage)
        config = ClientConfig(
            ca_bundle=base64.b64decode(server.ca_bundle),
            service=Service("ns", "hooks", "/admit", 443),
        )
        with pytest.raises(CallError) as none:
            client.post(config, b"{}", timeout=5, query=True)
        assert none.value.text == (
            'Post "https://hooks.ns.svc:443/admit?timeout=5s": no endpoints available for '
            'service "hooks"'
        )
        storage.lists["discovery.k8s.io/endpointslices"] = [
            {
                "metadata": {
                    "namespace": "ns",
                    "labels": {"kubernetes.io/service-name": "hooks"},
                },
                "ports": [{"name": "https", "port": server.port}],
                "endpoints": [
                    {"addresses": ["10.0.0.9"], "conditions": {"ready": False}},
                    {"addresses": ["127.0.0.1"], "conditions": {"ready": True}},
                ],
            }
        ]
        client.post(config, b'{"request": {"uid": "x"}}', timeout=5, query=True)
        (call,) = server.calls("/admit")
        assert call.query == {"timeout": "5s"}
        with pytest.raises(CallError, match='no service port 8443 found for service "hooks"'):
            client.post(
                ClientConfig(service=Service("ns", "hooks", "/admit", 8443)),
                b"{}",
                timeout=5,
                query=False,
            )
        with pytest.raises(CallError, match='service "gone" not found'):
            client.post(
                ClientConfig(service=Service("ns", "gone", "", 443)), b"{}", timeout=5, query=False
            )
        client.close()


def _connections(server: WebhookServer) -> int:
    return server.connections


def test_the_client_keeps_connections_alive_as_kube_apiservers_transport_does() -> None:
    """kube-apiserver's webhook client (client-go's transport, Go's ``http.Transport``)
    sends each review on an idle kept-alive connection when one is there, opens one
    otherwise, and never reuses a connection the webhook has closed: a review is not
    lost to a connection that went away while idle."""
    client = WebhookClient(_Storage())
    with contextlib.closing(client), WebhookServer() as server:
        server.route("/x", allow)
        config = ClientConfig.from_api(server.client_config("/x"))
        for _ in range(5):
            client.post(config, b'{"request": {"uid": "u"}}', timeout=5, query=True)
        assert len(server.calls("/x")) == 5
        assert _connections(server) == 1  # one TLS handshake for five reviews
        server.drop_connections()  # the webhook closes its idle connections (a restart)
        client.post(config, b'{"request": {"uid": "u"}}', timeout=5, query=True)
        assert len(server.calls("/x")) == 6
        assert _connections(server) == 2
        # an answer that closes its connection (HTTP/1.1 Connection: close) is not reused
        server.route("/close", lambda r: Reply(200, orjson.dumps(allow(r)), close=True))
        closing = ClientConfig.from_api(server.client_config("/close"))
        for _ in range(2):  # the first on the kept-alive one, the second on a new one
            client.post(closing, b'{"request": {"uid": "u"}}', timeout=5, query=True)
        assert _connections(server) == 3
        client.post(config, b'{"request": {"uid": "u"}}', timeout=5, query=True)
        assert _connections(server) == 4


def test_a_service_connection_goes_to_one_ready_endpoint_and_stays_there() -> None:
    """Through a Service, each new connection goes to one ready endpoint (kube-proxy's
    choice per connection, kube-apiserver's default routing): kept-alive connections
    stay with the endpoint they reached, an endpoint that is not ready gets no new one."""
    with contextlib.ExitStack() as stack:
        a = stack.enter_context(WebhookServer(service_names=["hooks.ns.svc"]))
        b = stack.enter_context(WebhookServer(service_names=["hooks.ns.svc"], certificates_of=a))
        for s in (a, b):
            s.route("/admit", allow)
        storage = _Storage()
        storage.objects[("/services", "ns", "hooks")] = {
            "spec": {"ports": [{"name": "https", "port": 443}]}
        }

        def slices(ready_a: bool, ready_b: bool) -> None:
            storage.lists["discovery.k8s.io/endpointslices"] = [
                {
                    "metadata": {
                        "namespace": "ns",
                        "labels": {"kubernetes.io/service-name": "hooks"},
                    },
                    "ports": [{"name": "https", "port": s.port}],
                    "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": r}}],
                }
                for s, r in ((a, ready_a), (b, ready_b))
            ]

        slices(False, True)
        client = WebhookClient(storage)
        config = ClientConfig(
            ca_bundle=base64.b64decode(a.ca_bundle), service=Service("ns", "hooks", "/admit", 443)
        )
        stack.enter_context(contextlib.closing(client))
        for _ in range(3):
            client.post(config, b'{"request": {"uid": "u"}}', timeout=5, query=True)
        assert (len(a.calls()), len(b.calls()), b.connections) == (0, 3, 1)
        slices(True, True)  # the kept-alive connection to b is used while it is idle
        client.post(config, b'{"request": {"uid": "u"}}', timeout=5, query=True)
        assert (len(a.calls()), len(b.calls())) == (0, 4)
        b.drop_connections()
        slices(True, False)
        client.post(config, b'{"request": {"uid": "u"}}', timeout=5, query=True)
        assert (len(a.calls()), len(b.calls())) == (1, 4)


# -- conversion ---------------------------------------------------------------------------


def _crd_storage() -> _Storage:
    storage = _Storage()
    storage.objects[(CRDS, "", "paints.x.io")] = {
        "spec": {
            "conversion": {
                "strategy": "Webhook",
                "webhook": {
                    "conversionReviewVersions": ["v1"],
                    "clientConfig": {"url": "https://127.0.0.1:1/convert"},
                },
            }
        }
    }
    return storage


def _paint(name: str = "p", version: str = "v1") -> JsonDict:
    return {
        "apiVersion": f"x.io/{version}",
        "kind": "Paint",
        "metadata": {"name": name, "namespace": "ns", "uid": "1", "resourceVersion": "7"},
        "spec": {"color": "red"},
    }


def _converting(change: Any) -> _Client:
    def script(sent: JsonDict) -> JsonDict:
        request = sent["request"]
        objects = [
            change({**o, "apiVersion": request["desiredAPIVersion"]}) for o in request["objects"]
        ]
        return {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "response": {
                "uid": request["uid"],
                "result": {"status": "Success"},
                "convertedObjects": objects,
            },
        }

    return _Client(convert=script)


def test_a_conversion_keeps_the_original_metadata_but_labels_and_annotations() -> None:
    def relabel(obj: JsonDict) -> JsonDict:
        meta = {**obj["metadata"], "resourceVersion": "99", "labels": {"new": "yes"}}
        return {**obj, "metadata": meta}

    client = _converting(relabel)
    converter = CrdConverter(_crd_storage(), client)  # type: ignore[arg-type]
    (out,) = converter.convert("paints.x.io", [_paint()], "x.io/v2")
    assert out["apiVersion"] == "x.io/v2"
    assert out["metadata"]["resourceVersion"] == "7"
    assert out["metadata"]["labels"] == {"new": "yes"}
    # objects already at the version are not sent
    assert converter.convert("paints.x.io", [_paint(version="v2")], "x.io/v2")[0]["spec"]
    assert len(client.calls) == 1


def test_a_conversion_that_renames_the_object_fails() -> None:
    def rename(obj: JsonDict) -> JsonDict:
        return {**obj, "metadata": {**obj["metadata"], "name": "other"}}

    converter = CrdConverter(_crd_storage(), _converting(rename))  # type: ignore[arg-type]
    with pytest.raises(ConversionFailed) as failed:
        converter.convert("paints.x.io", [_paint()], "x.io/v2")
    assert str(failed.value) == (
        "conversion webhook for x.io/v1, Kind=Paint returned invalid object: must have the "
        "same name: p != other"
    )


def test_a_failed_conversion_says_why() -> None:
    def refuse(sent: JsonDict) -> JsonDict:
        return {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "response": {
                "uid": sent["request"]["uid"],
                "result": {"status": "Failure", "message": "no blue"},
            },
        }

    converter = CrdConverter(_crd_storage(), _Client(convert=refuse))  # type: ignore[arg-type]
    with pytest.raises(
        ConversionFailed, match=r"^conversion webhook for x.io/v1, Kind=Paint failed: no blue$"
    ):
        converter.convert("paints.x.io", [_paint()], "x.io/v2")


# -- warnings -------------------------------------------------------------------------------


def test_warnings_are_deduplicated_and_truncated_as_kube_does() -> None:
    assert warning_headers(["a", "", "b", "a", "bad\ntext"]) == ['299 - "a"', '299 - "b"']
    long = ["x" * 1000 + str(i) for i in range(5)]  # 5005 characters: past 4096
    cut = warning_headers(long)
    assert len(cut) == 5
    assert all(len(h) == len('299 - ""') + 256 for h in cut)


# -- the REST verbs around webhook calls ---------------------------------------------------


class _Intruder:
    """Webhooks whose first mutating call writes the object itself meanwhile (as another
    client would while the storage lock is released)."""

    def __init__(self) -> None:
        self.write: Any = None
        self.calls = 0

    def configured(self) -> bool:
        return True

    def wants(self, attrs: Attributes, *, mutating: bool) -> bool:
        return mutating and attrs.operation == "UPDATE"

    def admit(self, attrs: Attributes, decode: Any) -> JsonDict | None:
        self.calls += 1
        if self.write is not None:
            write, self.write = self.write, None
            write()
        return attrs.obj

    def round(self, attrs: Attributes, decode: Any, state: Any, *, reinvoke: bool) -> Any:
        return self.admit(attrs, decode)

    def validate(self, attrs: Attributes) -> None:
        pass


def _rest_with(intruder: _Intruder) -> tuple[Any, Any]:
    from apiserver.api.resources import ResourceRegistry
    from apiserver.registry.strategy import new_rest
    from apiserver.storage.store import Storage

    registry = ResourceRegistry()
    rest = new_rest(Storage(), registry)
    rest.bootstrap()
    rest.webhooks = intruder
    configmaps = registry.lookup("", "v1", "configmaps")
    rest.create(configmaps, "default", {"metadata": {"name": "c"}, "data": {"a": "1"}})
    return rest, configmaps


def test_a_patch_starts_over_when_the_object_changed_during_a_webhook_call() -> None:
    intruder = _Intruder()
    rest, configmaps = _rest_with(intruder)
    merge = "application/merge-patch+json"
    intruder.write = lambda: rest.patch_with_status(
        configmaps, "default", "c", b'{"data": {"b": "2"}}', merge
    )
    _, patched = rest.patch_with_status(configmaps, "default", "c", b'{"data": {"a": "3"}}', merge)
    # the other write is kept: the patch was applied again to the new object
    assert patched["data"] == {"a": "3", "b": "2"}
    assert intruder.calls == 3  # the first try, the other write, the second try


def test_an_update_naming_its_resource_version_conflicts_when_it_changed_meanwhile() -> None:
    intruder = _Intruder()
    rest, configmaps = _rest_with(intruder)
    current = rest.get(configmaps, "default", "c")
    intruder.write = lambda: rest.patch_with_status(
        configmaps, "default", "c", b'{"data": {"b": "2"}}', "application/merge-patch+json"
    )
    body = {**current, "data": {"a": "3"}}
    with pytest.raises(StatusError) as conflict:
        rest.update(configmaps, "default", "c", body)
    assert conflict.value.code == 409
    assert rest.get(configmaps, "default", "c")["data"] == {"a": "1", "b": "2"}

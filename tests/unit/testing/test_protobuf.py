"""The protobuf request decoder: bodies kubectl sent (captured), and hand-built ones."""

from __future__ import annotations

import pytest

from apiserver.api.errors import StatusError
from apiserver.machinery import negotiation, protobuf

# `kubectl create configmap cm1 --from-literal=a=b --from-literal=c=d` (kubectl 1.32)
CONFIGMAP = bytes.fromhex(
    "6b3873000a0f0a0276311209436f6e6669674d617012250a130a03636d3112001a0022002a003200380042"
    "0012060a016112016212060a01631201641a002200"
)
# `kubectl create secret generic s1 --from-literal=k=v`
SECRET = bytes.fromhex(
    "6b3873000a0c0a0276311206536563726574121e0a120a02733112001a0022002a00320038004200120"
    "60a016b1201761a001a002200"
)
# `kubectl create service nodeport np --tcp=80:8080`
SERVICE = bytes.fromhex(
    "6b3873000a0d0a02763112075365727669636512650a1d0a026e7012001a0022002a003200380042005a09"
    "0a0361707012026e7012400a1b0a0738302d38303830120354435018502207080010903f1a00280012090a"
    "0361707012026e701a0022084e6f6465506f72743a00420052005a00600068001a020a001a002200"
)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, value: bytes | int) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def _envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = _field(1, api_version.encode()) + _field(2, kind.encode())
    return protobuf.MAGIC + _field(1, type_meta) + _field(2, raw)


def test_configmap_from_kubectl() -> None:
    api_version, kind, obj = protobuf.decode(CONFIGMAP)
    assert (api_version, kind) == ("v1", "ConfigMap")
    # Empty strings and the zero generation/creationTimestamp gogo wrote are gone.
    assert obj == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cm1"},
        "data": {"a": "b", "c": "d"},
    }


def test_secret_data_is_base64() -> None:
    _, _, obj = protobuf.decode(SECRET)
    assert obj["data"] == {"k": "dg=="}
    assert obj["metadata"] == {"name": "s1"}
    assert "type" not in obj


def test_service_int_or_string_and_value_members() -> None:
    _, _, obj = protobuf.decode(SERVICE)
    spec = obj["spec"]
    assert spec["type"] == "NodePort"
    assert spec["selector"] == {"app": "np"}
    # targetPort is an IntOrString; nodePort 0 (a Go value member) is left out.
    assert spec["ports"] == [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}]
    assert obj["metadata"]["labels"] == {"app": "np"}
    assert obj["status"] == {"loadBalancer": {}}


def test_pointer_members_keep_their_zero() -> None:
    # DeploymentSpec.replicas is *int32: an explicit 0 survives; minReadySeconds (value) not.
    spec = _field(1, 0) + _field(5, 0)
    raw = _field(1, _field(1, b"web")) + _field(2, spec)
    _, _, obj = protobuf.decode(_envelope("apps/v1", "Deployment", raw))
    assert obj["spec"] == {"replicas": 0}


def test_time_quantity_and_inline_members() -> None:
    created = _field(1, 1_700_000_000)  # Time{seconds}
    meta = _field(1, b"p") + _field(8, created)
    quantity = _field(1, b"250m")
    requests = _field(1, b"cpu") + _field(2, quantity)  # map entry
    resources = _field(2, requests)
    container = _field(1, b"main") + _field(2, b"img") + _field(8, resources)
    volume = _field(1, b"data") + _field(2, _field(2, b""))  # volumeSource{emptyDir{}}
    spec = _field(1, volume) + _field(2, container)
    raw = _field(1, meta) + _field(2, spec)
    _, _, pod = protobuf.decode(_envelope("v1", "Pod", raw))
    assert pod["metadata"]["creationTimestamp"] == "2023-11-14T22:13:20Z"
    assert pod["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "250m"}}
    assert pod["spec"]["volumes"] == [{"name": "data", "emptyDir": {}}]


def test_delete_options_in_any_group() -> None:
    raw = _field(1, 0) + _field(4, b"Foreground")
    _, kind, obj = protobuf.decode(_envelope("apps/v1", "DeleteOptions", raw))
    assert kind == "DeleteOptions"
    assert obj["gracePeriodSeconds"] == 0
    assert obj["propagationPolicy"] == "Foreground"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"kind": "ConfigMap"}', "missing the k8s"),
        (protobuf.MAGIC + b"\x0a\x05\x0a\x03", "past the end"),
        (_envelope("example.com/v1", "Widget", b""), "no protobuf schema for example.com/v1"),
    ],
)
def test_bad_bodies_are_refused(body: bytes, message: str) -> None:
    with pytest.raises(protobuf.ProtobufError, match=message):
        protobuf.decode(body)


def test_negotiation_reads_json_yaml_and_protobuf() -> None:
    assert negotiation.decode_body(b'{"a": 1}', "application/json") == {"a": 1}
    assert negotiation.decode_body(b'{"a": 1}', "") == {"a": 1}
    assert negotiation.decode_body(b"a: 1\nb: [x]\n", "application/yaml") == {"a": 1, "b": ["x"]}
    obj = negotiation.decode_body(CONFIGMAP, "application/vnd.kubernetes.protobuf")
    assert obj["kind"] == "ConfigMap"


def test_negotiation_refuses_other_media_types() -> None:
    with pytest.raises(StatusError) as caught:
        negotiation.decode_body(b"x", "text/plain")
    assert caught.value.code == 415
    assert caught.value.message == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json, application/yaml, application/vnd.kubernetes.protobuf"
    )
    with pytest.raises(StatusError) as custom:
        negotiation.decode_body(CONFIGMAP, "application/vnd.kubernetes.protobuf", custom=True)
    assert custom.value.code == 415
    assert "application/json, application/yaml" in custom.value.message


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        ("application/json", negotiation.Target()),
        (
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
            negotiation.Target("Table", "meta.k8s.io", "v1"),
        ),
        (
            "application/json;as=Table;v=v9;g=meta.k8s.io,application/json",
            negotiation.Target(),
        ),
        (
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
            negotiation.Target("APIGroupDiscoveryList", "apidiscovery.k8s.io", "v2"),
        ),
        (
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,"
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
            negotiation.Target("PartialObjectMetadata", "meta.k8s.io", "v1"),
        ),
    ],
)
def test_accept_targets(accept: str, expected: negotiation.Target) -> None:
    assert negotiation.target(accept) == expected


def test_every_embedded_member_is_flattened() -> None:
    """A message member the official JSON model does not have is a Go member embedded
    with ``json:",inline"``: the decoder must flatten it (`kubectl create ingress` sent
    ``spec.rules[0].ingressRuleValue`` when one was missing)."""
    from kubernetes.client import models

    from apiserver.machinery.protoschema import MESSAGES

    embedded = set()
    for message, fields in MESSAGES.items():
        *_, version, short = message.split(".")
        model = getattr(models, version[0].upper() + version[1:] + short, None)
        if model is None:
            continue
        known = set(model.attribute_map.values())
        for name, kind, *_ in fields.values():
            if kind == "message" and name not in known:
                embedded.add((message, name))
    assert embedded, "no model matched: the check would pass vacuously"
    assert embedded - protobuf.INLINE == set()


# -- round trips of every served kind, derived from the official models ----------------

_SAMPLE_TIME = "2024-05-06T07:08:09Z"
_SPECIAL_SAMPLES: dict[str, object] = {
    "k8s.io.apimachinery.pkg.apis.meta.v1.Time": _SAMPLE_TIME,
    "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime": "2024-05-06T07:08:09.123456Z",
    "k8s.io.apimachinery.pkg.apis.meta.v1.Duration": "1m30s",
    "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1": {"f:data": {"f:a": {}}},
    "k8s.io.apimachinery.pkg.runtime.RawExtension": {"kind": "Any", "list": [1, "two"]},
    "k8s.io.apimachinery.pkg.api.resource.Quantity": "250m",
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSON": {"any": ["json", 1]},
}
_SCALAR_SAMPLES: dict[str, object] = {
    "string": "text",
    "bytes": "aGVsbG8=",
    "bool": True,
    "int32": -7,
    "int64": 1_700_000_000_123,
    "uint32": 7,
    "uint64": 7,
    "double": 1.5,
    "float": 0.5,
}
_APIEXT = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1."
# 1.36 members the (later) official model no longer has: alpha fields changed since.
_CHANGED_SINCE = frozenset(
    {
        "Pod.status.nodeAllocatableResourceClaimStatuses.resources",
        "ResourceSlice.spec.devices.nodeAllocatableResourceMappings",
    }
)


def _model_class(message: str) -> type | None:
    """The official model of a message: ``CoreV1Event`` where a group's type shares its
    name with another group's, else ``V1Event``."""
    from kubernetes.client import models

    package, short = message.rsplit(".", 1)
    group, version = package.split(".")[-2:]
    version = version[0].upper() + version[1:]
    return getattr(models, group.capitalize() + version + short, None) or getattr(
        models, version + short, None
    )


def _members(message: str) -> dict[str, tuple[str, tuple[object, ...]]]:
    """JSON name -> (owning message, field spec), embedded members flattened."""
    from apiserver.machinery.protoschema import MESSAGES

    out: dict[str, tuple[str, tuple[object, ...]]] = {}
    for spec in MESSAGES[message].values():
        if (message, spec[0]) in protobuf.INLINE:
            out.update(_members(str(spec[2])))
        else:
            out[str(spec[0])] = (message, spec)
    return out


def _sample(message: str, depth: int, path: str, unknown: list[str]) -> object:
    """A JSON value of ``message`` with every member of its protobuf message, each at a
    value that is not Go's zero (a zero of a value member is not written); ``unknown``
    gets the members the official model does not name (the model is of a later
    release: it may have more members, never fewer)."""
    from apiserver.machinery.protoschema import MESSAGES

    if message in _SPECIAL_SAMPLES:
        return _SPECIAL_SAMPLES[message]
    if message == "k8s.io.apimachinery.pkg.util.intstr.IntOrString":
        return "http" if depth % 2 else 8080
    if message.endswith((".Verbs", ".ExtraValue")):
        return ["get", "list"]
    if message.startswith(_APIEXT + "JSONSchemaPropsOr"):
        leaf = {"type": "string", "description": "leaf"}
        return {"OrArray": [leaf, leaf], "OrBool": False, "OrStringArray": ["a", "b"]}[
            message.rsplit("JSONSchemaProps", 1)[1]
        ]
    model = _model_class(message)
    known = set(model.attribute_map.values()) if model is not None else set()
    members = _members(message)
    if model is None and members and path not in _CHANGED_SINCE:
        unknown.append(f"{path}: no model {message}")
    out: dict[str, object] = {}
    for name, (_, (_, kind, ref, repeated, _)) in members.items():
        if name not in known and model is not None and f"{path}.{name}" not in _CHANGED_SINCE:
            unknown.append(f"{path}.{name}")
        if depth >= 4 and kind in ("message", "map"):
            continue  # recursive schemas: deep enough
        if kind == "map":
            entry = MESSAGES[str(ref)][2]
            value = (
                _sample(str(entry[2]), depth + 1, f"{path}.{name}", unknown)
                if entry[1] == "message"
                else _SCALAR_SAMPLES[str(entry[1])]
            )
            out[name] = {"key": value}
            continue
        one = (
            _sample(str(ref), depth + 1, f"{path}.{name}", unknown)
            if kind == "message"
            else _SCALAR_SAMPLES[str(kind)]
        )
        out[name] = [one] if repeated else one
    return out


def _served_builtin_kinds() -> list[tuple[str, str]]:
    from apiserver.api.resources import ResourceRegistry

    return sorted({(s.resource.api_version, s.kind) for s in ResourceRegistry() if not s.custom})


@pytest.mark.parametrize(("api_version", "kind"), _served_builtin_kinds())
def test_every_served_kind_round_trips(api_version: str, kind: str) -> None:
    """Every member of a served kind's protobuf message has its JSON name in the official
    model, and an object with all of them survives encode then decode (so do lists)."""
    message = protobuf.message_of(api_version, kind)
    assert message is not None, f"no protobuf message for {api_version} {kind}"
    unknown: list[str] = []
    obj = _sample(message, 0, kind, unknown)
    assert isinstance(obj, dict)
    assert unknown == [], "protobuf members whose JSON name the official model lacks"
    obj = {"apiVersion": api_version, "kind": kind, **obj}
    assert protobuf.decode(protobuf.encode(obj))[2] == obj
    if protobuf.message_of(api_version, kind + "List") is None:
        assert "create" in _verbs(api_version, kind) and len(_verbs(api_version, kind)) == 1
        return  # the create-only reviews have no list
    listed = {
        "apiVersion": api_version,
        "kind": kind + "List",
        "metadata": {"resourceVersion": "12", "continue": "abc", "remainingItemCount": 3},
        "items": [{k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}],
    }
    assert protobuf.decode(protobuf.encode(listed))[2] == listed


def _verbs(api_version: str, kind: str) -> tuple[str, ...]:
    from apiserver.api.resources import ResourceRegistry

    return next(
        s.verbs
        for s in ResourceRegistry()
        if (s.resource.api_version, s.kind) == (api_version, kind)
    )

"""The shape of every served kind: which fields exist, their JSON types, how lists merge.

kube-apiserver knows each built-in kind twice: as a Go struct (decoding rejects wrong JSON
types and reports unknown or duplicate fields) and as an OpenAPI schema that
structured-merge-diff reads for server-side apply (which lists are maps keyed by which
fields, which are sets, which maps are atomic). This module rebuilds that knowledge:

* built-in kinds from the ``kubernetes`` package's generated model classes (their
  ``openapi_types`` and ``attribute_map`` are the OpenAPI definitions, one class per
  definition), loaded lazily, one kind at a time, on first use;
* which strings are ``resource.Quantity`` (the models type them ``str``) from the
  protobuf field tables of 1.36 (:mod:`.protoschema`), walked alongside the models from
  each kind's message: a quantity node is decoded and written back canonical by
  :mod:`.fieldvalidation`;
* the list semantics the models do not carry (``x-kubernetes-list-type``,
  ``x-kubernetes-list-map-keys`` and ``patchMergeKey`` of ``k8s.io/api``) from
  :data:`_LISTS`, and the structs ``k8s.io/api`` marks ``x-kubernetes-map-type: atomic``
  from :data:`_ATOMIC_STRUCTS`;
* custom resources from their CRD's structural schema (:func:`from_crd_schema`).

A :class:`TypeNode` answers "what is at this path": a struct with named fields, a map
(granular or atomic), a list (atomic, set, or map with keys), a scalar, or ``untyped``
(anything goes: ``x-kubernetes-preserve-unknown-fields``, RawExtension, IntOrString).

Thread-safety: the caches are filled under a lock; nodes are immutable once built.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from apiserver.machinery.protobuf import INLINE
from apiserver.machinery.protoschema import KINDS, MESSAGES

__all__ = ["QUANTITY", "TypeNode", "builtin", "from_crd_schema", "object_meta"]

STRUCT: Final = "struct"
MAP: Final = "map"
LIST: Final = "list"
SCALAR: Final = "scalar"
UNTYPED: Final = "untyped"
QUANTITY: Final = "quantity"  # the scalar type of a resource.Quantity


@dataclass(slots=True, eq=False)
class TypeNode:
    """One type: ``kind`` is struct, map, list, scalar or untyped.

    Attributes:
        scalar: for scalars, the JSON type expected (string, integer, number, boolean,
            or "" for anything, e.g. IntOrString), or ``quantity`` for a
            ``resource.Quantity`` (a string or a number that ``ParseQuantity`` reads).
        go: the Go type as decoding errors name it (``v1.PodSpec``, ``int32``, ``string``).
        elem: the value type of maps and the item type of lists.
        list_type: atomic, set or map (lists); atomic maps and structs are ``atomic``.
        keys: the key fields of a list of type map.
        key_defaults: defaults of key fields (``protocol: TCP``), used when an item omits one.
        preserve: unknown fields are kept (no unknown-field report below this node).
        value_member: a Go value member (not a pointer) that ``json.Marshal`` always
            writes, at its zero when unset (``divisor: "0"``); set on quantities only.
    """

    kind: str
    scalar: str = ""
    go: str = ""
    elem: TypeNode | None = None
    list_type: str = "atomic"
    keys: tuple[str, ...] = ()
    key_defaults: Mapping[str, Any] = field(default_factory=dict)
    preserve: bool = False
    atomic: bool = False
    value_member: bool = False
    _fields: dict[str, TypeNode] | None = None
    _always: tuple[str, ...] | None = None
    _model: str = ""
    walk: int = field(init=False, default=0)  # 1: key by key, 2: item by item, 0: a leaf

    def __post_init__(self) -> None:
        if (self.kind in (STRUCT, MAP) and not self.atomic) or self.kind == UNTYPED:
            self.walk = 1
        elif self.kind == LIST and self.list_type != "atomic":
            self.walk = 2

    def fields(self) -> dict[str, TypeNode]:
        """The named fields of a struct (resolved on first use)."""
        if self._fields is None:
            self._fields = _model_fields(self._model) if self._model else {}
        return self._fields

    def always(self) -> tuple[str, ...]:
        """The fields of a struct that Go's JSON writes even when unset (value members)."""
        if self._always is None:
            self._always = tuple(k for k, v in self.fields().items() if v.value_member)
        return self._always


_ANY: Final = TypeNode(UNTYPED, preserve=True)
_STRING: Final = TypeNode(SCALAR, scalar="string", go="string")
_INT: Final = TypeNode(SCALAR, scalar="integer", go="int64")
_INT32: Final = TypeNode(SCALAR, scalar="integer", go="int32")
_NUMBER: Final = TypeNode(SCALAR, scalar="number", go="float64")
_BOOL: Final = TypeNode(SCALAR, scalar="boolean", go="bool")
_LOOSE: Final = TypeNode(SCALAR, scalar="", go="string")  # IntOrString, ...
_QUANTITY: Final = TypeNode(SCALAR, scalar=QUANTITY, go="resource.Quantity")
_QUANTITY_VALUE: Final = TypeNode(
    SCALAR, scalar=QUANTITY, go="resource.Quantity", value_member=True
)
_QUANTITY_MESSAGE: Final = "k8s.io.apimachinery.pkg.api.resource.Quantity"

# --- list semantics of k8s.io/api (x-kubernetes-list-type / list-map-keys / merge keys) ---

_PORT_KEYS: Final = (("containerPort", "protocol"), {"protocol": "TCP"})
_LISTS: Final[Mapping[tuple[str, str], tuple[str, tuple[str, ...], Mapping[str, Any]]]] = {
    ("V1ObjectMeta", "ownerReferences"): ("map", ("uid",), {}),
    ("V1ObjectMeta", "finalizers"): ("set", (), {}),
    ("V1PodSpec", "containers"): ("map", ("name",), {}),
    ("V1PodSpec", "initContainers"): ("map", ("name",), {}),
    ("V1PodSpec", "ephemeralContainers"): ("map", ("name",), {}),
    ("V1PodSpec", "volumes"): ("map", ("name",), {}),
    ("V1PodSpec", "imagePullSecrets"): ("map", ("name",), {}),
    ("V1PodSpec", "hostAliases"): ("map", ("ip",), {}),
    ("V1PodSpec", "topologySpreadConstraints"): ("map", ("topologyKey", "whenUnsatisfiable"), {}),
    ("V1PodSpec", "resourceClaims"): ("map", ("name",), {}),
    ("V1PodSpec", "schedulingGates"): ("map", ("name",), {}),
    ("V1Container", "ports"): ("map", *_PORT_KEYS),
    ("V1Container", "env"): ("map", ("name",), {}),
    ("V1Container", "volumeMounts"): ("map", ("mountPath",), {}),
    ("V1Container", "volumeDevices"): ("map", ("devicePath",), {}),
    ("V1EphemeralContainer", "ports"): ("map", *_PORT_KEYS),
    ("V1EphemeralContainer", "env"): ("map", ("name",), {}),
    ("V1EphemeralContainer", "volumeMounts"): ("map", ("mountPath",), {}),
    ("V1PodStatus", "podIPs"): ("map", ("ip",), {}),
    ("V1PodStatus", "hostIPs"): ("map", ("ip",), {}),
    ("V1ServiceSpec", "ports"): ("map", ("port", "protocol"), {"protocol": "TCP"}),
    ("V1NodeStatus", "addresses"): ("map", ("type",), {}),
    ("V1NodeSpec", "podCIDRs"): ("set", (), {}),
    ("V1ServiceAccount", "secrets"): ("map", ("name",), {}),
    ("V1NamespaceSpec", "finalizers"): ("set", (), {}),
}
"""(model, JSON field) -> (list type, keys, key defaults). ``conditions`` lists of
models with a ``type`` field are maps keyed by ``type`` (every status in k8s.io/api)."""

_ATOMIC_STRUCTS: Final = frozenset(
    {
        "V1LabelSelector",
        "V1LocalObjectReference",
        "V1ConfigMapKeySelector",
        "V1SecretKeySelector",
        "V1ObjectFieldSelector",
        "V1ResourceFieldSelector",
        "V1NodeSelector",
        "V1NodeSelectorTerm",
        "V1TypedLocalObjectReference",
    }
)
"""Structs ``k8s.io/api`` marks ``x-kubernetes-map-type: atomic`` (owned as a whole)."""

_MICRO_TIMES: Final = frozenset({"acquireTime", "renewTime", "eventTime", "lastObservedTime"})
"""Fields of type ``metav1.MicroTime`` (the models type every time as ``datetime``)."""

_INT32_HINTS: Final = re.compile(r"port|replicas|seconds|count|number|generation|limit", re.I)

_lock = threading.RLock()
_fields_cache: dict[str, dict[str, TypeNode]] = {}
_node_cache: dict[str, TypeNode] = {}
_messages: dict[str, str] = {}  # model -> its protobuf message, met walking from a kind

Hint = tuple[str, str, bool, bool]  # proto type, message or map entry, repeated, value member


def _models() -> Any:
    from kubernetes.client import models  # lazy: ~1 ms per model class used

    return models


def _go_name(model: str) -> str:
    """``V1PodSpec`` -> ``v1.PodSpec``; ``CoreV1EventSeries`` -> ``v1.EventSeries``."""
    m = re.match(r"^(?:[A-Z][a-z]+)*?(V\d+(?:alpha\d+|beta\d+)?)([A-Z].*)$", model)
    if not m:
        return model
    return f"{m.group(1).lower()}.{m.group(2)}"


def _model_node(model: str, message: str = "") -> TypeNode:
    with _lock:
        if message:
            _messages.setdefault(model, message)
        node = _node_cache.get(model)
        if node is None:
            node = TypeNode(
                STRUCT,
                go=_go_name(model),
                atomic=model in _ATOMIC_STRUCTS,
                _model=model,
            )
            _node_cache[model] = node
        return node


def _proto_fields(message: str) -> dict[str, Hint]:
    """The JSON members of a protobuf message, those of its inlined members included."""
    out: dict[str, Hint] = {}
    for member, kind, ref, repeated, value in MESSAGES.get(message, {}).values():
        if kind == "message" and (message, member) in INLINE:
            out.update(_proto_fields(ref))
        else:
            out[member] = (kind, ref, repeated, value)
    return out


def _parse_type(text: str, owner: str, json_name: str, hint: Hint | None = None) -> TypeNode:
    text = text.strip()
    if text.startswith("List[") and text.endswith("]"):
        item = (hint[0], hint[1], False, False) if hint is not None and hint[2] else None
        elem = _parse_type(text[5:-1], owner, json_name, item)
        list_type, keys, defaults = _LISTS.get((owner, json_name), ("atomic", (), {}))
        if (
            (owner, json_name) not in _LISTS
            and json_name == "conditions"
            and elem.kind == STRUCT
            and "type" in elem.fields()
        ):
            list_type, keys, defaults = "map", ("type",), {}
        return TypeNode(
            LIST,
            go=f"[]{elem.go}",
            elem=elem,
            list_type=list_type,
            keys=keys,
            key_defaults=defaults,
        )
    if text.startswith("Dict[") and text.endswith("]"):
        inner = text[5:-1].split(",", 1)[1]
        value: Hint | None = None
        if hint is not None and hint[0] == "map":
            _, kind, ref, _, _ = MESSAGES[hint[1]][2]  # the map entry's value
            value = (kind, ref, False, False)
        elem = _parse_type(inner, owner, json_name, value)
        return TypeNode(MAP, go=f"map[string]{elem.go}", elem=elem)
    if hint is not None and hint[1] == _QUANTITY_MESSAGE:
        return _QUANTITY_VALUE if hint[3] else _QUANTITY
    if text == "str":
        return _STRING
    if text == "int":
        return _INT32 if _INT32_HINTS.search(json_name) else _INT
    if text == "float":
        return _NUMBER
    if text == "bool":
        return _BOOL
    if text in ("datetime", "date"):
        micro = json_name in _MICRO_TIMES
        return TypeNode(SCALAR, scalar="string", go="v1.MicroTime" if micro else "v1.Time")
    if text == "bytes":
        return TypeNode(SCALAR, scalar="string", go="[]uint8")
    if text == "object":
        return _ANY if json_name in ("raw", "object", "value") else _LOOSE
    message = hint[1] if hint is not None and hint[0] == "message" else ""
    return _model_node(text, message)


def _model_fields(model: str) -> dict[str, TypeNode]:
    with _lock:
        cached = _fields_cache.get(model)
        if cached is not None:
            return cached
        cls = getattr(_models(), model, None)
        out: dict[str, TypeNode] = {}
        _fields_cache[model] = out  # recursive types resolve to this (filled below)
        if cls is not None:
            message = _messages.get(model)
            proto = _proto_fields(message) if message else {}
            types: Mapping[str, str] = cls.openapi_types
            names: Mapping[str, str] = cls.attribute_map
            for attr, text in types.items():
                json_name = names.get(attr, attr)
                out[json_name] = _parse_type(text, model, json_name, proto.get(json_name))
        return out


def _model_for(group: str, version: str, kind: str) -> str | None:
    models = _models()
    prefix = (
        "".join(p.capitalize() for p in group.split(".", maxsplit=1)[0].split("-")) if group else ""
    )
    ver = version[:1].upper() + version[1:]
    for name in (f"{ver}{kind}", f"{prefix}{ver}{kind}", f"Core{ver}{kind}"):
        if hasattr(models, name):
            return name
    return None


def builtin(group: str, version: str, kind: str) -> TypeNode | None:
    """The type of a built-in kind (``apps``, ``v1``, ``Deployment``), or None if unknown."""
    key = f"{group}/{version}/{kind}"
    with _lock:
        if key in _node_cache:
            return _node_cache[key]
        model = _model_for(group, version, kind)
        message = KINDS.get((group, version, kind), "")
        node = _model_node(model, message) if model is not None else None
        if node is not None:
            _node_cache[key] = node
        return node


def object_meta() -> TypeNode:
    """``v1.ObjectMeta``."""
    return _model_node("V1ObjectMeta", "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta")


# --- custom resources -------------------------------------------------------------------


def _schema_node(s: Mapping[str, Any] | None) -> TypeNode:
    if not isinstance(s, Mapping):
        return _ANY
    if s.get("x-kubernetes-int-or-string") is True:
        return _LOOSE
    if s.get("x-kubernetes-embedded-resource") is True:
        fields = {
            "apiVersion": _STRING,
            "kind": _STRING,
            "metadata": object_meta(),
        }
        props = s.get("properties")
        for k, v in (props if isinstance(props, Mapping) else {}).items():
            if k not in fields:
                fields[str(k)] = _schema_node(v)
        return TypeNode(
            STRUCT, go="map[string]interface {}", preserve=_preserves(s), _fields=fields
        )
    stype = s.get("type")
    if stype == "object":
        props = s.get("properties")
        add = s.get("additionalProperties")
        atomic = s.get("x-kubernetes-map-type") == "atomic"
        if isinstance(props, Mapping) and props:
            return TypeNode(
                STRUCT,
                go="map[string]interface {}",
                preserve=_preserves(s),
                atomic=atomic,
                _fields={str(k): _schema_node(v) for k, v in props.items()},
            )
        if isinstance(add, Mapping) or add is True:
            elem = _schema_node(add) if isinstance(add, Mapping) else _ANY
            return TypeNode(MAP, go="map[string]interface {}", elem=elem, atomic=atomic)
        return TypeNode(
            STRUCT,
            go="map[string]interface {}",
            preserve=_preserves(s) or not props,
            atomic=atomic,
            _fields={},
        )
    if stype == "array":
        items = s.get("items")
        list_type = str(s.get("x-kubernetes-list-type") or "atomic")
        keys = tuple(str(k) for k in s.get("x-kubernetes-list-map-keys") or ())
        elem = _schema_node(items if isinstance(items, Mapping) else None)
        defaults: dict[str, Any] = {}
        if list_type == "map" and isinstance(items, Mapping):
            props = items.get("properties")
            for k in keys:
                p = props.get(k) if isinstance(props, Mapping) else None
                if isinstance(p, Mapping) and "default" in p:
                    defaults[k] = p["default"]
        return TypeNode(
            LIST,
            go="[]interface {}",
            elem=elem,
            list_type=list_type,
            keys=keys,
            key_defaults=defaults,
        )
    if stype in ("string", "integer", "number", "boolean"):
        return TypeNode(SCALAR, scalar=str(stype), go=str(stype))
    if _preserves(s):
        return _ANY
    return _ANY


def _preserves(s: Mapping[str, Any]) -> bool:
    return s.get("x-kubernetes-preserve-unknown-fields") is True


def from_crd_schema(schema: Mapping[str, Any] | None) -> TypeNode:
    """The type of a custom resource whose version has ``schema`` (None: schemaless)."""
    fields: dict[str, TypeNode] = {
        "apiVersion": _STRING,
        "kind": _STRING,
        "metadata": object_meta(),
    }
    preserve = True
    if isinstance(schema, Mapping):
        preserve = _preserves(schema)
        props = schema.get("properties")
        for k, v in (props if isinstance(props, Mapping) else {}).items():
            if k not in fields:
                fields[str(k)] = _schema_node(v)
    return TypeNode(STRUCT, go="map[string]interface {}", preserve=preserve, _fields=fields)

"""Kubernetes protobuf bodies: requests decoded to the JSON objects they stand for, and
answers encoded from them.

kubectl and every client-go typed client send built-in kinds as
``application/vnd.kubernetes.protobuf``: the four bytes ``k8s\\x00``, then a
``runtime.Unknown`` message (``typeMeta`` = apiVersion and kind, ``raw`` = the object
as its own protobuf message). kube-apiserver accepts that for every built-in kind, and
client-go never falls back to JSON for it (its 415 fallback exists only for CBOR), so a
server that wants ``kubectl create configmap`` to work must read it.

kube-apiserver also *answers* in protobuf when the ``Accept`` header prefers it, for
built-in kinds (custom resources have no protobuf form: JSON is their answer, 406 when
the client accepts nothing else). :func:`encode` writes that envelope and
:func:`encode_frame` one event of a protobuf watch stream (a 4-byte big-endian length,
then a ``WatchEvent`` message whose ``object.raw`` is an enveloped object).

This module reads the wire format (varints, length-delimited fields) and maps each
message to JSON with the field table in :mod:`.protoschema`, which is generated from
the ``generated.proto`` files and Go struct tags of ``k8s.io/api``,
``k8s.io/apimachinery``, ``k8s.io/apiextensions-apiserver`` and ``k8s.io/kube-aggregator``
(``tools/protoschema.py``). The mapping follows what Go's JSON encoding of the decoded
struct gives: ``Time`` as RFC 3339, ``IntOrString`` as a number or a string,
``Quantity`` as its string, ``bytes`` as base64, ``RawExtension``/``FieldsV1`` as the
JSON they carry, embedded (``json:",inline"``) members flattened into their parent,
and the zero scalars of Go value members dropped (gogo writes every non-pointer member,
even at its zero, and their JSON tags omit them; a pointer member keeps its 0 or false).

Thread-safety: pure functions over immutable tables; safe to share between threads.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Iterator
from typing import Any, Final

import orjson

from apiserver.machinery.protoschema import KINDS, MESSAGES

__all__ = [
    "INLINE",
    "MAGIC",
    "ProtobufError",
    "decode",
    "decode_message",
    "encode",
    "encode_frame",
    "encode_message",
    "message_of",
]

MAGIC: Final = b"k8s\x00"
CONTENT_TYPE: Final = "application/vnd.kubernetes.protobuf"

_META: Final = "k8s.io.apimachinery.pkg.apis.meta.v1."
_TIME: Final = _META + "Time"
_MICRO_TIME: Final = _META + "MicroTime"
_DURATION: Final = _META + "Duration"
_FIELDS_V1: Final = _META + "FieldsV1"
_VERBS: Final = _META + "Verbs"
_INT_OR_STRING: Final = "k8s.io.apimachinery.pkg.util.intstr.IntOrString"
_QUANTITY: Final = "k8s.io.apimachinery.pkg.api.resource.Quantity"
_RAW_EXTENSION: Final = "k8s.io.apimachinery.pkg.runtime.RawExtension"
_UNKNOWN: Final = "k8s.io.apimachinery.pkg.runtime.Unknown"
# Go named slices (`type ExtraValue []string`): a message of one repeated `items` member
# whose JSON is the bare list.
_STRING_LISTS: Final = frozenset(
    {
        _VERBS,
        "k8s.io.api.authentication.v1.ExtraValue",
        "k8s.io.api.authorization.v1.ExtraValue",
        "k8s.io.api.certificates.v1.ExtraValue",
    }
)
_APIEXT: Final = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1."
_JSON: Final = _APIEXT + "JSON"
_OR_ARRAY: Final = _APIEXT + "JSONSchemaPropsOrArray"
_OR_BOOL: Final = _APIEXT + "JSONSchemaPropsOrBool"
_OR_STRINGS: Final = _APIEXT + "JSONSchemaPropsOrStringArray"
_SCHEMA: Final = _APIEXT + "JSONSchemaProps"

# Go members embedded with `json:",inline"`: their fields belong to the parent's JSON.
INLINE: Final = frozenset(
    {
        ("k8s.io.api.core.v1.Volume", "volumeSource"),
        ("k8s.io.api.core.v1.PersistentVolumeSpec", "persistentVolumeSource"),
        ("k8s.io.api.core.v1.Probe", "handler"),
        ("k8s.io.api.core.v1.EphemeralContainer", "ephemeralContainerCommon"),
        ("k8s.io.api.admissionregistration.v1.RuleWithOperations", "rule"),
        ("k8s.io.api.admissionregistration.v1.NamedRuleWithOperations", "ruleWithOperations"),
        ("k8s.io.api.networking.v1.IngressRule", "ingressRuleValue"),
        ("k8s.io.api.core.v1.ConfigMapEnvSource", "localObjectReference"),
        ("k8s.io.api.core.v1.ConfigMapKeySelector", "localObjectReference"),
        ("k8s.io.api.core.v1.ConfigMapProjection", "localObjectReference"),
        ("k8s.io.api.core.v1.ConfigMapVolumeSource", "localObjectReference"),
        ("k8s.io.api.core.v1.SecretEnvSource", "localObjectReference"),
        ("k8s.io.api.core.v1.SecretKeySelector", "localObjectReference"),
        ("k8s.io.api.core.v1.SecretProjection", "localObjectReference"),
        ("k8s.io.api.resource.v1.DeviceAllocationConfiguration", "deviceConfiguration"),
        ("k8s.io.api.resource.v1.DeviceClaimConfiguration", "deviceConfiguration"),
        ("k8s.io.api.resource.v1.DeviceClassConfiguration", "deviceConfiguration"),
    }
)
# Proto members that JSON never shows (`json:"-"`).
_HIDDEN: Final = frozenset({(_META + "ObjectMeta", "clusterName")})

_OPTIONS: Final = frozenset(
    {"DeleteOptions", "CreateOptions", "UpdateOptions", "PatchOptions", "GetOptions", "ListOptions"}
)

JsonDict = dict[str, Any]


class ProtobufError(ValueError):
    """The body is not a protobuf message kube-apiserver would accept."""


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ProtobufError("truncated varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ProtobufError("varint longer than 64 bits")


def fields(data: bytes) -> Iterator[tuple[int, int, Any]]:
    """``(field number, wire type, value)`` of every field in one message, in order.

    Varints come as ints, length-delimited fields as bytes, fixed-width ones as bytes.
    """
    pos, end = 0, len(data)
    while pos < end:
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > end:
                raise ProtobufError(f"field {number}: length {length} past the end")
            value, pos = data[pos : pos + length], pos + length
        elif wire == 1:
            value, pos = data[pos : pos + 8], pos + 8
        elif wire == 5:
            value, pos = data[pos : pos + 4], pos + 4
        else:
            raise ProtobufError(f"field {number}: unsupported wire type {wire}")
        if pos > end:
            raise ProtobufError(f"field {number}: truncated")
        yield number, wire, value


def _signed(value: int, bits: int) -> int:
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


def _scalar(kind: str, wire: int, value: Any) -> Any:
    if kind == "string":
        return bytes(value).decode("utf-8")
    if kind == "bytes":
        return base64.b64encode(bytes(value)).decode()
    if kind == "bool":
        return bool(value)
    if kind in ("int32", "int64"):
        return _signed(int(value), 64)
    if kind in ("uint32", "uint64"):
        return int(value)
    if kind in ("sint32", "sint64"):
        return (int(value) >> 1) ^ -(int(value) & 1)
    if kind in ("double", "fixed64", "sfixed64"):
        raw = bytes(value)
        if kind == "double":
            import struct

            return struct.unpack("<d", raw)[0]
        n = int.from_bytes(raw, "little")
        return _signed(n, 64) if kind == "sfixed64" else n
    if kind in ("float", "fixed32", "sfixed32"):
        raw = bytes(value)
        if kind == "float":
            import struct

            return struct.unpack("<f", raw)[0]
        n = int.from_bytes(raw, "little")
        return _signed(n, 32) if kind == "sfixed32" else n
    raise ProtobufError(f"unsupported scalar type {kind}")


def _packed(kind: str, data: bytes) -> list[Any]:
    out: list[Any] = []
    pos = 0
    while pos < len(data):
        if kind in ("double", "fixed64", "sfixed64"):
            out.append(_scalar(kind, 1, data[pos : pos + 8]))
            pos += 8
        elif kind in ("float", "fixed32", "sfixed32"):
            out.append(_scalar(kind, 5, data[pos : pos + 4]))
            pos += 4
        else:
            value, pos = _varint(data, pos)
            out.append(_scalar(kind, 0, value))
    return out


def _time(data: bytes, *, micro: bool) -> str | None:
    seconds = nanos = 0
    for number, _, value in fields(data):
        if number == 1:
            seconds = _signed(int(value), 64)
        elif number == 2:
            nanos = _signed(int(value), 64)
    if micro:
        when = dt.datetime.fromtimestamp(seconds, dt.UTC) + dt.timedelta(microseconds=nanos // 1000)
        return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if seconds == 0 and nanos == 0:
        return None  # Go's zero Time marshals as null; the JSON tags omit it
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _go_duration(nanos: int) -> str:
    if nanos == 0:
        return "0s"
    sign = "-" if nanos < 0 else ""
    nanos = abs(nanos)
    hours, rest = divmod(nanos, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    seconds = rest / 1e9
    text = f"{seconds:.9f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{text}"
    if minutes:
        return f"{sign}{minutes}m{text}"
    return sign + text


def _special(name: str, data: bytes) -> tuple[bool, Any]:
    """Messages whose JSON form is not an object of their fields."""
    if name == _TIME:
        return True, _time(data, micro=False)
    if name == _MICRO_TIME:
        return True, _time(data, micro=True)
    if name == _INT_OR_STRING:
        kind, number, text = 0, 0, ""
        for n, _, value in fields(data):
            if n == 1:
                kind = int(value)
            elif n == 2:
                number = _signed(int(value), 64)
            elif n == 3:
                text = bytes(value).decode()
        return True, text if kind == 1 else number
    if name == _QUANTITY:
        return True, next((bytes(v).decode() for n, _, v in fields(data) if n == 1), "0")
    if name == _DURATION:
        value = next((int(v) for n, _, v in fields(data) if n == 1), 0)
        return True, _go_duration(_signed(value, 64))
    if name == _OR_ARRAY:  # a schema, or an array of schemas
        schemas = [decode_message(_SCHEMA, bytes(v)) for n, _, v in fields(data) if n == 2]
        if schemas:
            return True, schemas
        one = next((bytes(v) for n, _, v in fields(data) if n == 1), None)
        return True, None if one is None else decode_message(_SCHEMA, one)
    if name == _OR_BOOL:  # a schema (which allows), or a bare boolean
        allows, schema = False, None
        for n, _, v in fields(data):
            if n == 1:
                allows = bool(v)
            elif n == 2:
                schema = decode_message(_SCHEMA, bytes(v))
        return True, schema if schema is not None else allows
    if name == _OR_STRINGS:  # a schema, or a list of property names
        strings = [bytes(v).decode() for n, _, v in fields(data) if n == 2]
        if strings:
            return True, strings
        one = next((bytes(v) for n, _, v in fields(data) if n == 1), None)
        return True, None if one is None else decode_message(_SCHEMA, one)
    if name in (_RAW_EXTENSION, _FIELDS_V1, _JSON):
        raw = next((bytes(v) for n, _, v in fields(data) if n == 1), b"")
        if not raw:
            return True, None
        try:
            return True, orjson.loads(raw)
        except orjson.JSONDecodeError:
            if raw.startswith(MAGIC):
                return True, decode(raw)[2]
            raise ProtobufError(f"{name}: raw is neither JSON nor protobuf") from None
    if name in _STRING_LISTS:
        return True, [bytes(v).decode() for n, _, v in fields(data) if n == 1]
    return False, None


def decode_message(name: str, data: bytes) -> Any:
    """The JSON value of the protobuf message ``name`` (full name, e.g.
    ``k8s.io.api.core.v1.ConfigMap``) encoded in ``data``."""
    special, value = _special(name, data)
    if special:
        return value
    table = MESSAGES.get(name)
    if table is None:
        raise ProtobufError(f"no schema for message {name}")
    out: JsonDict = {}
    for number, wire, raw in fields(data):
        spec = table.get(number)
        if spec is None:
            continue  # an unknown field: proto2 skips it, as Go's decoder does
        member, kind, ref, repeated, value_member = spec
        if (name, member) in _HIDDEN:
            continue
        if kind == "message":
            value = decode_message(ref, bytes(raw))
        elif kind == "map":
            entry = MESSAGES[ref]
            key_spec, value_spec = entry[1], entry[2]
            key: Any = ""
            item: Any = None
            for n, w, v in fields(bytes(raw)):
                if n == 1:
                    key = _scalar(key_spec[1], w, v)
                elif n == 2:
                    item = (
                        decode_message(value_spec[2], bytes(v))
                        if value_spec[1] == "message"
                        else _scalar(value_spec[1], w, v)
                    )
            if item is None:
                item = {} if value_spec[1] == "message" else _zero(value_spec[1])
            out.setdefault(member, {})[key] = item
            continue
        elif repeated and wire == 2 and kind not in ("string", "bytes"):
            out.setdefault(member, []).extend(_packed(kind, bytes(raw)))
            continue
        else:
            value = _scalar(kind, wire, raw)
        if repeated:
            out.setdefault(member, []).append(value)
        elif (name, member) in INLINE and isinstance(value, dict):
            out.update(value)
        elif value is None or (kind == "string" and value == ""):
            continue
        elif value_member and kind != "message" and not value:
            continue  # a Go value member at its zero: `omitempty` leaves it out
        else:
            out[member] = value
    return out


def _zero(kind: str) -> Any:
    if kind == "string":
        return ""
    if kind == "bytes":
        return ""
    if kind == "bool":
        return False
    return 0


def decode(body: bytes) -> tuple[str, str, JsonDict]:
    """``(apiVersion, kind, object)`` of a ``k8s\\x00`` + ``runtime.Unknown`` body.

    Raises:
        ProtobufError: no magic prefix, a malformed message, or a kind without schema.
    """
    if not body.startswith(MAGIC):
        raise ProtobufError("missing the k8s\\x00 prefix")
    api_version = kind = ""
    raw = b""
    encoding = ""
    for number, _, value in fields(body[len(MAGIC) :]):
        if number == 1:
            for n, _, v in fields(bytes(value)):
                if n == 1:
                    api_version = bytes(v).decode()
                elif n == 2:
                    kind = bytes(v).decode()
        elif number == 2:
            raw = bytes(value)
        elif number == 3:
            encoding = bytes(value).decode()
    if encoding:
        raise ProtobufError(f"unsupported contentEncoding {encoding!r}")
    message = message_of(api_version, kind)
    if message is None:
        raise ProtobufError(f"no protobuf schema for {api_version}, Kind={kind}")
    obj = decode_message(message, raw)
    if not isinstance(obj, dict):
        raise ProtobufError(f"{kind} is not an object")
    return api_version, kind, {"apiVersion": api_version, "kind": kind, **obj}


# -- encoding ------------------------------------------------------------------------

_WIRE: Final = {
    "double": 1, "fixed64": 1, "sfixed64": 1, "float": 5, "fixed32": 5, "sfixed32": 5,
    "string": 2, "bytes": 2,
}  # fmt: skip


def _put_varint(out: bytearray, n: int) -> None:
    n &= (1 << 64) - 1  # negative int32/int64: ten bytes of two's complement, as Go writes
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)


def _key(out: bytearray, number: int, wire: int) -> None:
    _put_varint(out, number << 3 | wire)


def _put_bytes(out: bytearray, number: int, data: bytes) -> None:
    _key(out, number, 2)
    _put_varint(out, len(data))
    out += data


def _put_scalar(out: bytearray, number: int, kind: str, value: Any, where: str) -> None:
    import struct

    wire = _WIRE.get(kind, 0)
    try:
        if kind == "string":
            _put_bytes(out, number, str(value).encode("utf-8"))
        elif kind == "bytes":
            _put_bytes(out, number, base64.b64decode(value))
        elif kind in ("double", "float"):
            _key(out, number, wire)
            out += struct.pack("<d" if kind == "double" else "<f", float(value))
        elif kind in ("fixed64", "sfixed64", "fixed32", "sfixed32"):
            _key(out, number, wire)
            size = 8 if wire == 1 else 4
            out += int(value).to_bytes(size, "little", signed=kind.startswith("s"))
        elif kind in ("sint32", "sint64"):
            _key(out, number, 0)
            n = int(value)
            _put_varint(out, (n << 1) ^ (n >> 63))
        else:  # int32, int64, uint32, uint64, bool
            _key(out, number, 0)
            _put_varint(out, int(value))
    except (TypeError, ValueError) as exc:
        raise ProtobufError(f"{where}: {value!r} is not a {kind}: {exc}") from None


def _rfc3339(text: str) -> tuple[int, int]:
    when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    seconds = int(when.timestamp() // 1)
    return seconds, when.microsecond * 1000


_DURATION_UNITS: Final = {
    "ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000,
    "m": 60_000_000_000, "h": 3_600_000_000_000,
}  # fmt: skip


def _parse_duration(text: str) -> int:
    import re

    sign = -1 if text.startswith("-") else 1
    body = text.lstrip("+-")
    if body == "0":
        return 0
    parts = re.findall(r"([0-9.]+)(ns|us|µs|ms|s|m|h)", body)
    if not parts or "".join(a + b for a, b in parts) != body:
        raise ProtobufError(f"invalid duration {text!r}")
    return sign * round(sum(float(a) * _DURATION_UNITS[b] for a, b in parts))


def _encode_special(name: str, value: Any, where: str) -> bytes | None:
    """The message bytes of a JSON value whose message is not an object of its fields;
    None for ordinary messages."""
    out = bytearray()
    if name in (_TIME, _MICRO_TIME):
        if value is None:
            return b""
        seconds, nanos = _rfc3339(str(value))
        if seconds:
            _key(out, 1, 0)
            _put_varint(out, seconds)
        if nanos and name == _MICRO_TIME:
            _key(out, 2, 0)
            _put_varint(out, nanos)
        return bytes(out)
    if name == _INT_OR_STRING:
        if isinstance(value, str):
            _put_scalar(out, 1, "int64", 1, where)
            _put_scalar(out, 3, "string", value, where)
        else:
            _put_scalar(out, 1, "int64", 0, where)
            _put_scalar(out, 2, "int32", value, where)
        return bytes(out)
    if name == _QUANTITY:
        _put_scalar(out, 1, "string", value, where)
        return bytes(out)
    if name == _DURATION:
        _put_scalar(out, 1, "int64", _parse_duration(str(value)), where)
        return bytes(out)
    if name in (_RAW_EXTENSION, _FIELDS_V1, _JSON):
        _put_bytes(out, 1, orjson.dumps(value))
        return bytes(out)
    if name in _STRING_LISTS:
        for verb in value:
            _put_scalar(out, 1, "string", verb, where)
        return bytes(out)
    if name == _OR_ARRAY:
        if isinstance(value, list):
            for item in value:
                _put_bytes(out, 2, encode_message(_SCHEMA, item, where))
        else:
            _put_bytes(out, 1, encode_message(_SCHEMA, value, where))
        return bytes(out)
    if name == _OR_BOOL:
        if isinstance(value, bool):
            _put_scalar(out, 1, "bool", value, where)
        else:
            _put_scalar(out, 1, "bool", True, where)
            _put_bytes(out, 2, encode_message(_SCHEMA, value, where))
        return bytes(out)
    if name == _OR_STRINGS:
        if isinstance(value, list):
            for item in value:
                _put_scalar(out, 2, "string", item, where)
        else:
            _put_bytes(out, 1, encode_message(_SCHEMA, value, where))
        return bytes(out)
    return None


def encode_message(name: str, value: Any, where: str = "") -> bytes:
    """The protobuf bytes of the message ``name`` whose JSON form is ``value``: the
    inverse of :func:`decode_message`. JSON members the message does not have
    (``apiVersion``, ``kind``: they go in the envelope) are left out; members embedded
    with ``json:",inline"`` are filled from the parent's own JSON.

    Raises:
        ProtobufError: a value of the wrong JSON type, or an unknown message.
    """
    special = _encode_special(name, value, where or name)
    if special is not None:
        return special
    table = MESSAGES.get(name)
    if table is None:
        raise ProtobufError(f"no schema for message {name}")
    if not isinstance(value, dict):
        raise ProtobufError(f"{where or name}: expected an object, got {value!r}")
    out = bytearray()
    for number in sorted(table):  # gogo writes members in field-number order
        member, kind, ref, repeated, _ = table[number]
        path = f"{where}.{member}" if where else member
        if (name, member) in INLINE:
            _put_bytes(out, number, encode_message(ref, value, where))
            continue
        item = value.get(member)
        if item is None:
            continue
        if kind == "map":
            if not isinstance(item, dict):
                raise ProtobufError(f"{path}: expected an object, got {item!r}")
            entry = MESSAGES[ref]
            value_spec = entry[2]
            for key in sorted(item):  # Go sorts map keys when it marshals
                pair = bytearray()
                _put_scalar(pair, 1, entry[1][1], key, path)
                if value_spec[1] == "message":
                    _put_bytes(pair, 2, encode_message(value_spec[2], item[key], f"{path}.{key}"))
                else:
                    _put_scalar(pair, 2, value_spec[1], item[key], f"{path}.{key}")
                _put_bytes(out, number, bytes(pair))
            continue
        items = item if repeated else [item]
        if repeated and not isinstance(item, list):
            raise ProtobufError(f"{path}: expected a list, got {item!r}")
        for one in items:
            if kind == "message":
                _put_bytes(out, number, encode_message(ref, one, path))
            else:
                _put_scalar(out, number, kind, one, path)
    return bytes(out)


def message_of(api_version: str, kind: str) -> str | None:
    """The message a built-in ``(apiVersion, kind)`` is written as; None if it has none
    (a custom resource, a Table, discovery documents)."""
    group, _, version = api_version.rpartition("/")
    message = KINDS.get((group, version, kind))
    if message is None and kind in _OPTIONS:
        message = _META + kind  # DeleteOptions and friends are served in every group
    elif message is None and (api_version, kind) == ("v1", "Status"):
        message = _META + kind  # errors: meta/v1 Status, written as `v1`
    return message


def encode(obj: JsonDict) -> bytes:
    """``k8s\\x00`` + ``runtime.Unknown`` of a built-in object (its ``apiVersion`` and
    ``kind`` in ``typeMeta``), as kube-apiserver answers ``Accept:
    application/vnd.kubernetes.protobuf``.

    Raises:
        ProtobufError: the kind has no protobuf message, or a value does not fit it.
    """
    api_version, kind = str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")
    message = message_of(api_version, kind)
    if message is None:
        raise ProtobufError(f"no protobuf schema for {api_version}, Kind={kind}")
    type_meta = bytearray()
    _put_bytes(type_meta, 1, api_version.encode())
    _put_bytes(type_meta, 2, kind.encode())
    out = bytearray(MAGIC)
    _put_bytes(out, 1, bytes(type_meta))
    _put_bytes(out, 2, encode_message(message, obj))
    _put_bytes(out, 3, b"")  # contentEncoding and contentType: gogo writes value members
    _put_bytes(out, 4, b"")
    return bytes(out)


def encode_frame(event_type: str, obj: JsonDict) -> bytes:
    """One event of a protobuf watch stream: a 4-byte big-endian length, then the
    ``metav1.WatchEvent`` message (no envelope: the stream's framing delimits it) whose
    ``object.raw`` is the enveloped object."""
    raw = bytearray()
    _put_bytes(raw, 1, encode(obj))
    event = bytearray()
    _put_bytes(event, 1, event_type.encode())
    _put_bytes(event, 2, bytes(raw))
    return len(event).to_bytes(4, "big") + bytes(event)

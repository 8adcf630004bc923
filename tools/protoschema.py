"""Generate ``manager/testing/protoschema.py`` from Kubernetes' protobuf descriptors.

Every Go binary built with ``k8s.io/api`` registers the ``generated.proto`` file
descriptors of each API package (gzipped ``FileDescriptorProto`` bytes). This script
finds them in such a binary (kubectl), decodes them with a few lines of wire-format
reading, and writes the field table the local API server's protobuf decoder uses:
message -> field number -> (JSON name, type, referenced message, repeated), plus the
(group, version, kind) -> message map of the served kinds.

    python tools/protoschema.py /usr/bin/kubectl > manager/testing/protoschema.py

Field numbers are the public wire format of the Kubernetes API; nothing else of the
binary is used.
"""

from __future__ import annotations

import re
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# Proto packages kept, and the API group each one serves.
PACKAGES = {
    "k8s.io.apimachinery.pkg.apis.meta.v1": ("meta.k8s.io", "v1"),
    "k8s.io.apimachinery.pkg.runtime": None,
    "k8s.io.apimachinery.pkg.util.intstr": None,
    "k8s.io.apimachinery.pkg.api.resource": None,
    "k8s.io.api.core.v1": ("", "v1"),
    "k8s.io.api.apps.v1": ("apps", "v1"),
    "k8s.io.api.batch.v1": ("batch", "v1"),
    "k8s.io.api.autoscaling.v1": ("autoscaling", "v1"),
    "k8s.io.api.autoscaling.v2": ("autoscaling", "v2"),
    "k8s.io.api.rbac.v1": ("rbac.authorization.k8s.io", "v1"),
    "k8s.io.api.policy.v1": ("policy", "v1"),
    "k8s.io.api.networking.v1": ("networking.k8s.io", "v1"),
    "k8s.io.api.coordination.v1": ("coordination.k8s.io", "v1"),
    "k8s.io.api.discovery.v1": ("discovery.k8s.io", "v1"),
    "k8s.io.api.events.v1": ("events.k8s.io", "v1"),
    "k8s.io.api.scheduling.v1": ("scheduling.k8s.io", "v1"),
    "k8s.io.api.node.v1": ("node.k8s.io", "v1"),
    "k8s.io.api.storage.v1": ("storage.k8s.io", "v1"),
    "k8s.io.api.certificates.v1": ("certificates.k8s.io", "v1"),
    "k8s.io.api.authentication.v1": ("authentication.k8s.io", "v1"),
    "k8s.io.api.authorization.v1": ("authorization.k8s.io", "v1"),
    "k8s.io.api.admissionregistration.v1": ("admissionregistration.k8s.io", "v1"),
    "k8s.io.api.flowcontrol.v1": ("flowcontrol.apiserver.k8s.io", "v1"),
}

OPTIONS = {"DeleteOptions", "CreateOptions", "UpdateOptions", "PatchOptions"}

# gogoproto.nullable (FieldOptions extension 65001): false on Go value members, absent
# on pointers; a zero scalar of a value member is what Go's `omitempty` leaves out.
GOGO_NULLABLE = 65001

# Proto names that start upper-case though the JSON name does not, except these.
KEEP_CASE = {("DaemonEndpoint", "Port")}

TYPES = {
    1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64",
    7: "fixed32", 8: "bool", 9: "string", 11: "message", 12: "bytes", 13: "uint32",
    15: "sfixed32", 16: "sfixed64", 17: "sint32", 18: "sint64",
}  # fmt: skip


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> Iterator[tuple[int, Any]]:
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos : pos + length], pos + length
        elif wire == 1:
            value, pos = data[pos : pos + 8], pos + 8
        elif wire == 5:
            value, pos = data[pos : pos + 4], pos + 4
        else:
            raise ValueError(f"wire type {wire}")
        yield number, value


def descriptors(binary: bytes) -> Iterator[bytes]:
    """Every gzipped FileDescriptorProto of a k8s.io package found in ``binary``."""
    for match in re.finditer(rb"\x1f\x8b\x08\x00\x00\x00\x00\x00", binary):
        try:
            data = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(
                binary[match.start() : match.start() + 4_000_000]
            )
        except zlib.error:
            continue
        if data[2:].startswith(b"k8s.io/"):
            yield data


def _messages(data: bytes, prefix: str, out: dict[str, Any], maps: set[str]) -> None:
    name = ""
    fields: list[tuple[int, str, str, str, bool, bool]] = []
    nested: list[bytes] = []
    map_entry = False
    for number, value in _fields(data):
        if number == 1:
            name = value.decode()
        elif number == 2:
            f: dict[int, Any] = dict(_fields(value))
            json_name = f.get(10, f[1]).decode()
            if json_name[:1].isupper() and (name, json_name) not in KEEP_CASE:
                json_name = json_name[0].lower() + json_name[1:]  # `protobuf:"name=Webhooks"`
            options = dict(_fields(f.get(8, b"")))
            fields.append(
                (
                    f[3],
                    json_name,
                    TYPES[f[5]],
                    f.get(6, b"").decode().lstrip("."),
                    f.get(4) == 3,
                    options.get(GOGO_NULLABLE) == 0,
                )
            )
        elif number == 3:
            nested.append(value)
        elif number == 7:
            map_entry = dict(_fields(value)).get(7) == 1
    full = f"{prefix}.{name}"
    out[full] = fields
    if map_entry:
        maps.add(full)
    for n in nested:
        _messages(n, full, out, maps)


def main(path: str) -> None:
    binary = Path(path).read_bytes()
    messages: dict[str, Any] = {}
    maps: set[str] = set()
    kinds: dict[tuple[str, str, str], str] = {}
    for data in descriptors(binary):
        top = dict(_fields(data))
        package = top[2].decode()
        if package not in PACKAGES:
            continue
        for number, value in _fields(data):
            if number == 4:
                _messages(value, package, messages, maps)
        gv = PACKAGES[package]
        if gv is None:
            continue
        for number, value in _fields(data):
            if number == 4:
                kind = dict(_fields(value))[1].decode()
                kinds[(gv[0], gv[1], kind)] = f"{package}.{kind}"
    # Keep the kinds a client can send (objects with ObjectMeta, and the options) and
    # every message they reach.
    object_meta = "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    roots = {
        key: name
        for key, name in kinds.items()
        if any(f[1] == "metadata" and f[3] == object_meta for f in messages[name])
        or name.rsplit(".", 1)[1] in OPTIONS
    }
    keep: set[str] = set()
    todo = list(roots.values())
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep.add(name)
        todo.extend(f[3] for f in messages[name] if f[3] and f[3] in messages)
    messages = {k: v for k, v in messages.items() if k in keep}
    kinds = roots
    lines = [
        '"""Protobuf field tables of the Kubernetes API (generated: do not edit).',
        "",
        "Written by ``tools/protoschema.py`` from the ``generated.proto`` descriptors of",
        "k8s.io/api and k8s.io/apimachinery. ``MESSAGES`` maps a message's full name to",
        "``{field number: (JSON name, type, message or map entry, repeated, value)}``",
        "(value: a Go value member, not a pointer); ``KINDS`` maps ``(group, version,",
        "kind)`` to the message of that kind.",
        '"""',
        "",
        "from typing import Final",
        "",
        "Field = tuple[str, str, str, bool, bool]",
        "",
        "MESSAGES: Final[dict[str, dict[int, Field]]] = {",
    ]
    for name in sorted(messages):
        lines.append(f"    {name!r}: {{")
        for number, json_name, kind, ref, repeated, value in messages[name]:
            is_map = kind == "message" and ref in maps
            shown = ("map", False) if is_map else (kind, repeated)
            lines.append(
                f"        {number}: ({json_name!r}, {shown[0]!r}, {ref!r}, {shown[1]}, {value}),"
            )
        lines.append("    },")
    lines.append("}")
    lines.append("")
    lines.append("KINDS: Final[dict[tuple[str, str, str], str]] = {")
    for key in sorted(kinds):
        lines.append(f"    {key!r}: {kinds[key]!r},")
    lines.append("}")
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/usr/bin/kubectl")

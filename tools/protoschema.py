"""Generate ``apiserver/machinery/protoschema.py`` from Kubernetes' protobuf definitions.

The wire format of every built-in kind is declared twice in Kubernetes' source: in the
``generated.proto`` of each API package (message, field number, type, repeated) and in
the Go struct tags of its types (``json:"name,omitempty" protobuf:"bytes,1,opt,name=x"``,
and whether a member is a pointer). This script reads both from the module sources of
one release (k8s.io/api, k8s.io/apimachinery, k8s.io/apiextensions-apiserver,
k8s.io/kube-aggregator at the tag of that release) and writes the field table the local
API server's protobuf codec uses: message -> field number -> (JSON name, type,
referenced message, repeated, value member), plus the (group, version, kind) -> message
map of the served kinds.

    python tools/protoschema.py SRC > apiserver/machinery/protoschema.py

where ``SRC`` holds ``api/``, ``apimachinery/``, ``apiextensions-apiserver/`` and
``kube-aggregator/``: each module's tree at the release's tag (v0.36.x for 1.36).
Field numbers are the public wire format of the Kubernetes API; nothing else of the
sources is used.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

# Proto packages kept: where their sources are (module, directory) and the API group
# each one serves (None: shared types only).
PACKAGES: dict[str, tuple[str, tuple[str, str] | None]] = {
    "k8s.io.apimachinery.pkg.apis.meta.v1": (
        "apimachinery/pkg/apis/meta/v1",
        ("meta.k8s.io", "v1"),
    ),
    "k8s.io.apimachinery.pkg.runtime": ("apimachinery/pkg/runtime", None),
    "k8s.io.apimachinery.pkg.runtime.schema": ("apimachinery/pkg/runtime/schema", None),
    "k8s.io.apimachinery.pkg.util.intstr": ("apimachinery/pkg/util/intstr", None),
    "k8s.io.apimachinery.pkg.api.resource": ("apimachinery/pkg/api/resource", None),
    "k8s.io.api.core.v1": ("api/core/v1", ("", "v1")),
    "k8s.io.api.apps.v1": ("api/apps/v1", ("apps", "v1")),
    "k8s.io.api.batch.v1": ("api/batch/v1", ("batch", "v1")),
    "k8s.io.api.autoscaling.v1": ("api/autoscaling/v1", ("autoscaling", "v1")),
    "k8s.io.api.autoscaling.v2": ("api/autoscaling/v2", ("autoscaling", "v2")),
    "k8s.io.api.rbac.v1": ("api/rbac/v1", ("rbac.authorization.k8s.io", "v1")),
    "k8s.io.api.policy.v1": ("api/policy/v1", ("policy", "v1")),
    "k8s.io.api.networking.v1": ("api/networking/v1", ("networking.k8s.io", "v1")),
    "k8s.io.api.coordination.v1": ("api/coordination/v1", ("coordination.k8s.io", "v1")),
    "k8s.io.api.discovery.v1": ("api/discovery/v1", ("discovery.k8s.io", "v1")),
    "k8s.io.api.events.v1": ("api/events/v1", ("events.k8s.io", "v1")),
    "k8s.io.api.scheduling.v1": ("api/scheduling/v1", ("scheduling.k8s.io", "v1")),
    "k8s.io.api.node.v1": ("api/node/v1", ("node.k8s.io", "v1")),
    "k8s.io.api.storage.v1": ("api/storage/v1", ("storage.k8s.io", "v1")),
    "k8s.io.api.certificates.v1": ("api/certificates/v1", ("certificates.k8s.io", "v1")),
    "k8s.io.api.authentication.v1": ("api/authentication/v1", ("authentication.k8s.io", "v1")),
    "k8s.io.api.authorization.v1": ("api/authorization/v1", ("authorization.k8s.io", "v1")),
    "k8s.io.api.admissionregistration.v1": (
        "api/admissionregistration/v1",
        ("admissionregistration.k8s.io", "v1"),
    ),
    "k8s.io.api.flowcontrol.v1": ("api/flowcontrol/v1", ("flowcontrol.apiserver.k8s.io", "v1")),
    "k8s.io.api.resource.v1": ("api/resource/v1", ("resource.k8s.io", "v1")),
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1": (
        "apiextensions-apiserver/pkg/apis/apiextensions/v1",
        ("apiextensions.k8s.io", "v1"),
    ),
    "k8s.io.kube_aggregator.pkg.apis.apiregistration.v1": (
        "kube-aggregator/pkg/apis/apiregistration/v1",
        ("apiregistration.k8s.io", "v1"),
    ),
}

# Kinds a client sends or receives besides the objects: the options of every write,
# and what answers carry (lists are found by their `items`).
OPTIONS = {"DeleteOptions", "CreateOptions", "UpdateOptions", "PatchOptions"}
ANSWERS = {"Status", "WatchEvent", "PartialObjectMetadata", "PartialObjectMetadataList"}

SCALARS = {
    "double", "float", "int64", "uint64", "int32", "fixed64", "fixed32", "bool", "string",
    "bytes", "uint32", "sfixed32", "sfixed64", "sint32", "sint64",
}  # fmt: skip

SCALAR_GO_TYPES = {
    "string", "bool", "int", "int32", "int64", "uint32", "uint64", "float32", "float64",
}  # fmt: skip

_MESSAGE = re.compile(r"^message (\w+) \{$")
_FIELD = re.compile(r"^  (optional|repeated) ([\w.]+) (\w+) = (\d+);")
_MAP = re.compile(r"^  map<(\w+), ([\w.]+)> (\w+) = (\d+);")
_STRUCT = re.compile(r"^type (\w+) struct \{")
_MEMBER = re.compile(r"^\t(?:(\w+)\s+)?(\S+)\s+`([^`]*)`")
_TAG = re.compile(r'(\w+):"([^"]*)"')


def go_members(directory: Path) -> dict[tuple[str, int], tuple[str, bool]]:
    """``(struct, field number) -> (JSON name, value)`` from the struct tags of the Go
    package in ``directory``: value is true for a Go value member (not a pointer) whose
    zero Go's JSON leaves out (a scalar needs ``omitempty``). An embedded member's JSON
    name is ``""``."""
    out: dict[tuple[str, int], tuple[str, bool]] = {}
    for path in sorted(directory.glob("*.go")):
        if path.name.endswith("_test.go") or path.name.startswith("zz_generated"):
            continue
        struct = ""
        for line in path.read_text().splitlines():
            if match := _STRUCT.match(line):
                struct = match.group(1)
            elif line == "}":
                struct = ""
            elif struct and (match := _MEMBER.match(line)):
                tags = dict(_TAG.findall(match.group(3)))
                proto = tags.get("protobuf", "").split(",")
                if len(proto) < 2 or not proto[1].isdigit():
                    continue
                json_name, *json_options = tags.get("json", "").split(",")
                go_type = match.group(2)
                value = go_type != "[]byte" and not go_type.startswith(("*", "[]*"))
                if go_type in SCALAR_GO_TYPES or go_type[:1].isupper():
                    # a scalar's zero is written by gogo and dropped by Go's JSON only
                    # with omitempty; a named string/int type counts as a scalar
                    value = value and "omitempty" in json_options
                out[(struct, int(proto[1]))] = (json_name, value)
    return out


def _entry_name(field: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in field.split("_")) + "Entry"


def messages_of(
    package: str, proto: str, members: dict[tuple[str, int], tuple[str, bool]]
) -> tuple[dict[str, list[tuple[int, str, str, str, bool, bool]]], set[str]]:
    """The messages of one ``generated.proto``: full name -> fields in declaration
    order, ``(number, JSON name, type, referenced message, repeated, value)``; and the
    names of the map entries it implies."""
    out: dict[str, list[tuple[int, str, str, str, bool, bool]]] = {}
    maps: set[str] = set()
    message = ""

    def resolve(type_name: str) -> tuple[str, str]:
        if type_name in SCALARS:
            return type_name, ""
        if type_name.startswith("."):
            return "message", type_name[1:]
        return "message", f"{package}.{type_name}"

    for line in proto.splitlines():
        if match := _MESSAGE.match(line):
            message = match.group(1)
            out[f"{package}.{message}"] = []
            continue
        if line == "}":
            message = ""
            continue
        if not message:
            continue
        json_name, value = "", False
        if match := _FIELD.match(line):
            label, type_name, name, number = match.groups()
            kind, ref = resolve(type_name)
            repeated = label == "repeated"
        elif match := _MAP.match(line):
            key, type_name, name, number = match.groups()
            entry = f"{package}.{message}.{_entry_name(name)}"
            value_kind, value_ref = resolve(type_name)
            out[entry] = [
                (1, "key", key, "", False, False),
                (2, "value", value_kind, value_ref, False, False),
            ]
            maps.add(entry)
            kind, ref, repeated = "message", entry, True
        else:
            continue
        if (message, int(number)) in members:
            json_name, value = members[(message, int(number))]
        elif any(struct == message for struct, _ in members):
            raise SystemExit(f"{package}.{message}.{name}: no Go member with that protobuf tag")
        else:  # a hand-written codec (Time, Quantity, IntOrString...): the codec knows it
            json_name, value = name, False
        if repeated and kind != "message":
            value = False  # gogo marks only slices of messages non-nullable
        if json_name == "-":  # the raw bytes of RawExtension and FieldsV1: the codec's
            json_name = name[:1].lower() + name[1:]
        out[f"{package}.{message}"].append(
            (int(number), json_name or name, kind, ref, repeated, value)
        )
    return out, maps


def main(source: str) -> None:
    root = Path(source)
    messages: dict[str, Any] = {}
    maps: set[str] = set()
    kinds: dict[tuple[str, str, str], str] = {}
    for package, (directory, gv) in PACKAGES.items():
        proto = (root / directory / "generated.proto").read_text()
        found, entries = messages_of(package, proto, go_members(root / directory))
        messages.update(found)
        maps |= entries
        if gv is None:
            continue
        for name in found:
            if name not in entries:
                kinds[(gv[0], gv[1], name.rsplit(".", 1)[1])] = name
    missing = {f[3] for fields in messages.values() for f in fields if f[3]} - set(messages)
    if missing:
        raise SystemExit(f"messages referenced but not defined: {sorted(missing)}")
    # Keep the kinds a client can send or be answered (objects with ObjectMeta, their
    # lists, the options, Status and watch events) and every message they reach.
    object_meta = "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    objects = {
        name
        for name in kinds.values()
        if any(f[1] == "metadata" and f[3] == object_meta for f in messages[name])
    }
    roots = {
        key: name
        for key, name in kinds.items()
        if name in objects
        or name.rsplit(".", 1)[1] in OPTIONS | ANSWERS
        or any(f[1] == "items" and f[3] in objects for f in messages[name])
    }
    keep: set[str] = set()
    todo = list(roots.values())
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep.add(name)
        todo.extend(f[3] for f in messages[name] if f[3])
    messages = {k: v for k, v in messages.items() if k in keep}
    kinds = roots
    lines = [
        "# Code generated by tools/protoschema.py from Kubernetes 1.36's generated.proto files;"
        " DO NOT EDIT. Regenerate: python tools/protoschema.py SRC"
        " > apiserver/machinery/protoschema.py",
        '"""Protobuf field tables of the Kubernetes API (generated: do not edit).',
        "",
        "Written by ``tools/protoschema.py`` from the ``generated.proto`` files and Go struct",
        "tags of k8s.io/api, k8s.io/apimachinery, k8s.io/apiextensions-apiserver and",
        "k8s.io/kube-aggregator (1.36). ``MESSAGES`` maps a message's full name to",
        "``{field number: (JSON name, type, message or map entry, repeated, value)}``",
        "(value: a Go value member, not a pointer, that Go's JSON omits at its zero);",
        "``KINDS`` maps ``(group, version,",
        "kind)`` to the message of that kind.",
        '"""',
        "",
        "# ruff: noqa: E501  (message names of apiextensions are longer than a line)",
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
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(sys.argv[1])

"""Generate ``apiserver/http/openapidocs.json``: what ``kubectl explain`` shows of each kind.

kube-apiserver's OpenAPI documents (api/openapi-spec/v3 of the release) carry, for every
type, a description, the names of its required members and, for members of an enum
type, the allowed values; kube-openapi's ``openapi-gen`` writes them from the Go
sources of the API types: the doc comment of each type and member (formatted by its
``generateDescription``: ``+tags`` and one-line TODOs dropped, lines joined, blank
lines kept as paragraphs, indented lines kept on lines of their own, nothing after
``---``), ``required`` for every member that is neither ``+optional`` nor
``omitempty`` (or that says ``+required``), and, for a member whose type is marked
``+enum``, the values of that type's constants, listed again under "Possible enum
values" in the description. This script does the same from the same sources:

    python tools/openapidocs.py SRC > apiserver/http/openapidocs.json

where ``SRC`` holds ``api/``, ``apimachinery/``, ``apiextensions-apiserver/`` and
``kube-aggregator/``: each module's tree at the release's tag (v0.36.x for 1.36), as for
``tools/protoschema.py``, whose package list it uses. The output is one JSON object,
message name (as in ``protoschema.py``) -> ``{"d": description, "p": {member:
description}, "r": [required members], "e": {member: [enum values]}}``, empty parts
left out, one message a line; its first line says where it comes from.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from protoschema import PACKAGES

_TYPE = re.compile(r"^type (\w+) (struct \{|[\w.\[\]*]+)")
_MEMBER = re.compile(r"^\t(?:(\w+)\s+)?([\w.\[\]*]+(?:\{\})?)\s+`([^`]*)`")
_CONST = re.compile(r'^\t(\w+)\s+([\w.]+)\s*=\s*"([^"]*)"')
_IMPORT = re.compile(r'^\s*(?:(\w+)\s+)?"([^"]+)"$')
_TAG = re.compile(r'(\w+):"([^"]*)"')


def description(lines: list[str]) -> str:
    """kube-openapi's ``generateDescription`` of comment lines (already without ``//``)."""
    out = ""
    for raw in lines:
        if raw == "---":
            break
        line = raw.rstrip(" ")
        leading = line.lstrip(" ")
        if not line:
            out = out[:-1] + "\n\n" if out else "\n\n"
        elif leading.startswith(("TODO", "+")):
            continue
        elif line.startswith((" ", "\t")):
            out = (out[:-1] if out else out) + "\n" + line + "\n"
        else:
            out += line + " "
    # The text becomes a Go string literal in openapi-gen's output (only quotes are
    # escaped there), so a doubled backslash of the comment reads as one.
    text = out.strip("\n").replace('\\"', '"').replace("\\\\", "\\")
    return text.strip(" ")


def _comment_text(block: list[str]) -> list[str]:
    """go/ast's CommentGroup.Text: markers and the first space gone, trailing space
    trimmed, leading and trailing blank lines dropped, runs of blank lines made one."""
    lines = []
    for raw in block:
        text = raw.strip()
        text = text[2:] if text.startswith("//") else text
        text = text[1:] if text.startswith(" ") else text
        lines.append(text.rstrip())
    out: list[str] = []
    for line in lines:
        if not line and (not out or not out[-1]):
            continue
        out.append(line)
    while out and not out[-1]:
        out.pop()
    return out


_SINGLE_CONST = re.compile(r'^const (\w+)\s+([\w.]+)\s*=\s*"([^"]*)"')


class Package:
    """The documented types of one Go package."""

    def __init__(self, directory: Path) -> None:
        self.types: dict[str, dict[str, Any]] = {}  # name -> {"doc", "members", "enum"}
        self.constants: dict[str, list[tuple[str, str]]] = {}  # type -> [(value, comment)]
        self.imports: dict[str, str] = {}  # alias -> import path
        for path in sorted(directory.glob("*.go")):
            if path.name.endswith("_test.go") or path.name.startswith(
                ("zz_generated", "generated")
            ):
                continue
            self._read(path.read_text().splitlines())

    def _constant(self, name: str, type_name: str, value: str, comment: list[str]) -> None:
        """kube-openapi's enumValue: the comment joined, its first word (the constant's
        name, by convention) dropped, whitespace runs made one; the first comment of a
        value wins."""
        doc = " ".join(_comment_text(comment)).strip()
        parts = doc.split(" ", 1)
        doc = " ".join((parts[1] if len(parts) == 2 else doc).split())
        values = self.constants.setdefault(type_name, [])
        for i, (known, known_doc) in enumerate(values):
            if known == value:
                if not known_doc:
                    values[i] = (value, doc)
                return
        values.append((value, doc))

    def _read(self, lines: list[str]) -> None:
        comment: list[str] = []
        struct = ""
        in_import = in_const = False
        for line in lines:
            stripped = line.strip()
            if line.startswith("import ("):
                in_import = True
                continue
            if in_import:
                if stripped == ")":
                    in_import = False
                elif match := _IMPORT.match(stripped):
                    path = match.group(2)
                    self.imports[match.group(1) or path.rsplit("/", 1)[-1]] = path
                continue
            if stripped.startswith("//"):
                comment.append(line)
                continue
            if line.startswith("const ("):
                in_const, comment = True, []
                continue
            if in_const:
                if stripped == ")":
                    in_const = False
                elif match := _CONST.match(line):
                    self._constant(*match.groups(), comment)
                comment = []
                continue
            if match := _SINGLE_CONST.match(line):
                self._constant(*match.groups(), comment)
                comment = []
                continue
            if match := _TYPE.match(line):
                name = match.group(1)
                text = _comment_text(comment)
                self.types[name] = {
                    "doc": text,
                    "members": [],
                    "enum": any(t.strip() == "+enum" for t in text),
                }
                struct = name if match.group(2) == "struct {" else ""
                comment = []
                continue
            if struct and line == "}":
                struct = ""
                comment = []
                continue
            if struct and (match := _MEMBER.match(line)):
                go_name, go_type, tag_text = match.groups()
                tags = dict(_TAG.findall(tag_text))
                self.types[struct]["members"].append(
                    {
                        "go": go_name or go_type.lstrip("*").rsplit(".", 1)[-1],
                        "type": go_type,
                        "json": tags.get("json", ""),
                        "doc": _comment_text(comment),
                        "embedded": go_name is None,
                    }
                )
            comment = []


def enum_lines(values: list[tuple[str, str]]) -> list[str]:
    """kube-openapi's ``DescriptionLines``: a paragraph, then one line a value, sorted."""
    lines = sorted(f" - `{json.dumps(value)}` {doc}" for value, doc in values)
    return ["", "Possible enum values:", *lines]


def main(src: Path) -> int:
    by_path: dict[str, tuple[str, Package]] = {}  # Go import path -> (proto pkg, Package)
    packages: list[tuple[str, Package]] = []
    for proto, (directory, _) in PACKAGES.items():
        package = Package(src / directory)
        module, _, rest = directory.partition("/")
        by_path[f"k8s.io/{module}/{rest}"] = (proto, package)
        packages.append((proto, package))

    def resolve(package: Package, go_type: str) -> tuple[Package, str] | None:
        base = go_type.lstrip("*[]")
        if "." not in base:
            return package, base
        alias, name = base.split(".", 1)
        found = by_path.get(package.imports.get(alias, ""))
        return None if found is None else (found[1], name)

    def enum_of(package: Package, go_type: str) -> list[tuple[str, str]] | None:
        found = resolve(package, go_type)
        if found is None:
            return None
        owner, name = found
        info = owner.types.get(name)
        if not info or not info["enum"] or name not in owner.constants:
            return None
        return sorted(owner.constants[name])

    def members(package: Package, name: str) -> tuple[dict[str, str], list[str], dict[str, Any]]:
        """(descriptions, required, enums) of a struct's JSON members, inline ones in."""
        props: dict[str, str] = {}
        required: list[str] = []
        enums: dict[str, list[str]] = {}
        for member in package.types.get(name, {}).get("members", []):
            json_name, *options = member["json"].split(",")
            if json_name == "-":
                continue
            if member["embedded"] and not json_name:
                found = resolve(package, member["type"])
                if found is not None:
                    p, r, e = members(*found)
                    props.update(p)
                    required += r
                    enums.update(e)
                continue
            json_name = json_name or member["go"]
            comment = list(member["doc"])
            documented = enum_of(package, member["type"])
            if documented is not None:
                enums[json_name] = sorted((v for v, _ in documented), key=json.dumps)
                comment += enum_lines(documented)
            text = description(comment)
            if text:
                props[json_name] = text
            tags = {t.strip() for t in member["doc"]}
            optional = "+optional" in tags or "omitempty" in options
            if "+required" in tags or not optional:
                required.append(json_name)
        return props, required, enums

    out: dict[str, dict[str, Any]] = {}
    for proto, package in packages:
        for name, info in sorted(package.types.items()):
            entry: dict[str, Any] = {}
            doc = description(info["doc"])
            if doc:
                entry["d"] = doc
            props, required, enums = members(package, name)
            if props:
                entry["p"] = props
            if required:
                entry["r"] = sorted(set(required))
            if enums:
                entry["e"] = enums
            if entry:
                out[f"{proto}.{name}"] = entry
    print(
        '{"": "generated by tools/openapidocs.py (do not edit) from the Go sources of k8s.io/api, '
        "apimachinery, apiextensions-apiserver and kube-aggregator at v0.36 (what "
        "openapi-gen writes into kube-apiserver 1.36's OpenAPI); regenerate: python "
        'tools/openapidocs.py SRC > apiserver/http/openapidocs.json",'
    )
    items = sorted(out.items())
    for i, (key, entry) in enumerate(items):
        sep = "," if i < len(items) - 1 else ""
        print(f"{json.dumps(key)}: {json.dumps(entry, ensure_ascii=False, sort_keys=True)}{sep}")
    print("}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} SRC")
    sys.exit(main(Path(sys.argv[1])))

"""Content negotiation: which request bodies the local API server reads, and what an
``Accept`` header asks it to answer with.

kube-apiserver reads a body by its ``Content-Type`` (``NegotiateInputSerializer``):
``application/json``, ``application/yaml`` and, for built-in kinds,
``application/vnd.kubernetes.protobuf``; anything else is ``415 Unsupported Media
Type``. It answers in the first ``Accept`` entry it can produce, and the ``as``, ``g``
and ``v`` parameters of that entry ask for a *transformed* answer: a ``Table``
(``as=Table;g=meta.k8s.io;v=v1``), the metadata only (``as=PartialObjectMetadata``),
or aggregated discovery (``as=APIGroupDiscoveryList;g=apidiscovery.k8s.io;v=v2``).
Built-in kinds are answered in protobuf when the first entry the server can produce
asks for it (client-go's typed clients and kubectl send ``application/vnd.kubernetes.
protobuf, application/json``); custom resources, Tables and discovery in JSON.

Thread-safety: pure functions; safe to share between threads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import orjson
import yaml

from apiserver.api.errors import StatusError
from apiserver.machinery import protobuf

__all__ = ["Target", "answer_media", "decode_body", "is_json", "target"]

JSON: Final = "application/json"
YAML: Final = "application/yaml"
PROTOBUF: Final = protobuf.CONTENT_TYPE
BUILTIN_TYPES: Final = (JSON, YAML, PROTOBUF)
CUSTOM_TYPES: Final = (JSON, YAML)


def _media_type(content_type: str) -> str:
    return content_type.split(";", maxsplit=1)[0].strip().lower()


def unsupported(accepted: tuple[str, ...]) -> StatusError:
    return StatusError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted),
    )


def is_json(content_type: str) -> bool:
    """Whether a body of this ``Content-Type`` is read as JSON (an empty one is)."""
    return (_media_type(content_type) or JSON) == JSON


def decode_body(body: bytes, content_type: str, *, custom: bool = False) -> Any:
    """The object a create/update body stands for, read by its ``Content-Type``.

    An empty ``Content-Type`` is read as JSON, as kube-apiserver does.

    Raises:
        StatusError: 415 for a media type the resource does not accept, 400 for a body
            that does not parse.
    """
    media = _media_type(content_type) or JSON
    if media == JSON:
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise StatusError(
                400, "BadRequest", f"the object provided is unrecognized: invalid JSON: {exc}"
            ) from None
    if media == YAML:
        try:
            return yaml.safe_load(body.decode("utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise StatusError(
                400, "BadRequest", f"the object provided is unrecognized: invalid YAML: {exc}"
            ) from None
    if media == PROTOBUF and not custom:
        try:
            return protobuf.decode(body)[2]
        except (protobuf.ProtobufError, UnicodeDecodeError) as exc:
            raise StatusError(
                400, "BadRequest", f"the object provided is unrecognized: invalid protobuf: {exc}"
            ) from None
    raise unsupported(CUSTOM_TYPES if custom else BUILTIN_TYPES)


@dataclass(frozen=True, slots=True)
class Target:
    """What an ``Accept`` header asks for: a plain object, or a transformation."""

    as_kind: str = ""  # "", "Table", "PartialObjectMetadata", "APIGroupDiscoveryList", ...
    group: str = ""
    version: str = ""
    include_object: str = ""


def _params(entry: str) -> tuple[str, dict[str, str]]:
    media, *rest = entry.split(";")
    params: dict[str, str] = {}
    for item in rest:
        key, _, value = item.partition("=")
        params[key.strip().lower()] = value.strip()
    return media.strip().lower(), params


_TRANSFORMS: Final = {
    ("Table", "meta.k8s.io"): ("v1", "v1beta1"),
    ("PartialObjectMetadata", "meta.k8s.io"): ("v1", "v1beta1"),
    ("PartialObjectMetadataList", "meta.k8s.io"): ("v1", "v1beta1"),
    # v2beta1 is gone: AggregatedDiscoveryRemoveBetaType is locked on since 1.35
    ("APIGroupDiscoveryList", "apidiscovery.k8s.io"): ("v2",),
}


# `as=` transformations that have a protobuf form (meta/v1's generated.proto); a Table
# does not, so a protobuf entry asking for one is skipped.
_PROTOBUF_AS: Final = frozenset({"", "PartialObjectMetadata", "PartialObjectMetadataList"})


def target(accept: str, *, custom: bool = False) -> Target:
    """The first ``Accept`` entry this server can answer (JSON or, for the built-in
    kinds, protobuf; maybe transformed): the entry :func:`answer_media` answers in.

    Entries asking for a transformation the server does not know are skipped, as
    kube-apiserver does; when none is left the plain object is the answer.
    """
    for entry in accept.split(","):
        media, params = _params(entry)
        if media == PROTOBUF:
            if custom or params.get("as", "") not in _PROTOBUF_AS:
                continue
        elif media not in (JSON, "application/*", "*/*", "") and not media.endswith("+json"):
            continue
        as_kind = params.get("as", "")
        if not as_kind:
            return Target()
        group, version = params.get("g", ""), params.get("v", "")
        if version in _TRANSFORMS.get((as_kind, group), ()):
            return Target(as_kind, group, version)
    return Target()


def answer_media(accept: str, *, custom: bool = False) -> str:
    """The media type of the answer: :data:`PROTOBUF` when the first ``Accept`` entry
    this server can produce is protobuf (built-in kinds only), else :data:`JSON`.

    Custom resources have no protobuf form (kube's unstructured serializer offers JSON
    and YAML): a protobuf entry is skipped, and an ``Accept`` naming protobuf only is
    refused, as kube-apiserver refuses it.

    Raises:
        StatusError: 406 for a custom resource asked only for protobuf.
    """
    refused = False
    for entry in accept.split(","):
        media, params = _params(entry)
        if media == PROTOBUF:
            if not custom and params.get("as", "") in _PROTOBUF_AS:
                return PROTOBUF
            refused = refused or custom
            continue
        if media in (JSON, YAML, "application/*", "*/*", "") or media.endswith("+json"):
            return JSON
    if refused:
        raise StatusError(
            406,
            "NotAcceptable",
            "only the following media types are accepted: application/json, application/yaml",
        )
    return JSON

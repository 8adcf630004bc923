"""Content negotiation: which request bodies the local API server reads, and what an
``Accept`` header asks it to answer with.

kube-apiserver reads a body by its ``Content-Type`` (``NegotiateInputSerializer``):
``application/json``, ``application/yaml`` and, for built-in kinds,
``application/vnd.kubernetes.protobuf``; anything else is ``415 Unsupported Media
Type``.

Its answers are negotiated before a request is served (``NegotiateOutputMediaType``,
handlers/negotiation/negotiate.go, a port of which is :func:`negotiate`): the
``Accept`` clauses by quality, and for each the serializers JSON, YAML and protobuf in
that order; the first pair the endpoint allows wins, and none is ``406 Not
Acceptable``. The ``as``, ``g`` and ``v`` parameters ask for a *transformed* answer: a
``Table`` (``as=Table;g=meta.k8s.io;v=v1``, JSON or YAML only), the metadata only
(``as=PartialObjectMetadata``, any media type). A custom resource has no protobuf form
(its handler's StandardSerializers leave it out), so protobuf alone is a 406 for one.
A watch needs a media type with a stream form (:func:`negotiate_stream`: not YAML).
Errors are written under the default restrictions (:func:`error_media`), where a
Status may be protobuf even for a custom resource, and as raw JSON when nothing fits.
YAML answers are the JSON rendering in YAML (:func:`to_yaml`). The discovery
endpoints read :func:`target` for aggregated discovery
(``as=APIGroupDiscoveryList;g=apidiscovery.k8s.io;v=v2``).

Thread-safety: pure functions; safe to share between threads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import orjson
import yaml

from apiserver.api.errors import StatusError
from apiserver.machinery import protobuf

__all__ = [
    "Accepted",
    "Target",
    "decode_body",
    "error_media",
    "is_json",
    "negotiate",
    "negotiate_stream",
    "not_acceptable",
    "target",
    "to_yaml",
]

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
    """The transformation the first ``Accept`` entry this server can answer asks for;
    the discovery endpoints (``/api``, ``/apis``) read it to tell aggregated discovery
    from the legacy documents. Resource endpoints negotiate with :func:`negotiate`.

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


# -- output negotiation (handlers/negotiation/negotiate.go) ------------------------------

STREAM_TYPES: Final = (f"{JSON};stream=watch", f"{PROTOBUF};stream=watch")
_STREAMING: Final = frozenset({JSON, PROTOBUF})  # YAML has no stream serializer
# A Table is written in JSON or YAML only (RequestScope.AllowsMediaTypeTransform).
_TABLE_MEDIA: Final = frozenset({JSON, YAML})
_META_VERSIONS: Final = frozenset({"v1", "v1beta1"})


@dataclass(frozen=True, slots=True)
class Accepted:
    """The answer an ``Accept`` header negotiated: the serializer's media type (one of
    :data:`BUILTIN_TYPES`) and the transformation asked for (``Target()`` for none)."""

    media: str = JSON
    target: Target = Target()

    @property
    def streams(self) -> bool:
        """Whether the media type has a watch form (a stream serializer)."""
        return self.media in _STREAMING


def _clauses(accept: str) -> list[tuple[str, str, dict[str, str]]]:
    """``goautoneg.ParseAccept``: the clauses as ``(type, subtype, params)``, by quality
    (then a concrete type before ``*``); a clause without ``/`` is dropped (``*`` alone is
    ``*/*``). Go's sort.Sort of so few clauses is an insertion sort: ties keep their order."""
    parsed: list[tuple[float, str, str, dict[str, str]]] = []
    for raw in accept.split(","):
        part = raw.strip(" ")
        if not part:
            continue
        media, *rest = part.split(";")
        kind, slash, sub = media.partition("/")
        kind, sub = kind.strip(" "), sub.strip(" ")
        if not slash:
            if kind != "*":
                continue
            sub = "*"
        elif "/" in sub:
            continue
        quality, params = 1.0, {}
        for item in rest:
            key, eq, value = item.partition("=")
            if not eq or "=" in value:
                continue
            key, value = key.strip(" "), value.strip(" ")
            if key == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
            else:
                params[key] = value
        parsed.append((quality, kind, sub, params))

    def less(
        a: tuple[float, str, str, dict[str, str]], b: tuple[float, str, str, dict[str, str]]
    ) -> bool:
        return a[0] > b[0] or (a[1] != "*" and b[1] == "*") or (a[2] != "*" and b[2] == "*")

    for i in range(1, len(parsed)):
        j = i
        while j > 0 and less(parsed[j], parsed[j - 1]):
            parsed[j], parsed[j - 1] = parsed[j - 1], parsed[j]
            j -= 1
    return [(kind, sub, params) for _, kind, sub, params in parsed]


def _transform_allowed(media: str, target: Target | None, *, custom: bool, table: bool) -> bool:
    """``RequestScope.AllowsMediaTypeTransform`` of a resource endpoint; ``target`` None
    is a request for no transformation."""
    if target is None:
        # a custom resource's StandardSerializers leave protobuf out
        return media in CUSTOM_TYPES if custom else True
    if target.group != "meta.k8s.io" or target.version not in _META_VERSIONS:
        return False
    if target.as_kind == "Table":
        return table and media in _TABLE_MEDIA
    return target.as_kind in ("PartialObjectMetadata", "PartialObjectMetadataList")


def _first(accept: str, *, custom: bool, table: bool, restricted: bool) -> Accepted | None:
    """``NegotiateMediaTypeOptions``: the first clause, serializer by serializer, whose
    parameters the endpoint allows; the restrictions are a resource endpoint's
    (``restricted``) or the default ones error writers use (no transformation, no
    server version)."""
    if not accept:
        return Accepted()
    for kind, sub, params in _clauses(accept):
        for media in BUILTIN_TYPES:
            media_kind, _, media_sub = media.partition("/")
            if not (kind == "*" and sub == "*") and (
                kind != media_kind or sub not in ("*", media_sub)
            ):
                continue
            target: Target | None = None
            if params.keys() & {"as", "g", "v"}:
                target = Target(params.get("as", ""), params.get("g", ""), params.get("v", ""))
            stream = params.get("stream", "")
            if stream and (media not in _STREAMING or stream != "watch"):
                continue
            server_version = params.get("sv", "")
            if server_version and (not restricted or server_version != "v1"):
                continue
            if restricted:
                if not _transform_allowed(media, target, custom=custom, table=table):
                    continue
            elif target is not None:
                continue
            return Accepted(media, target or Target())
    return None


def not_acceptable(accepted: tuple[str, ...]) -> StatusError:
    """kube's ``errNotAcceptable``: 406 naming what the endpoint can write."""
    return StatusError(
        406,
        "NotAcceptable",
        "only the following media types are accepted: " + ", ".join(accepted),
    )


def negotiate(accept: str, *, custom: bool = False, table: bool = True) -> Accepted:
    """What a resource endpoint answers in (``NegotiateOutputMediaType`` under the
    endpoint's restrictions), decided before the request is served.

    Built-in and custom resources share the serializers JSON, YAML and protobuf, but a
    custom object has no protobuf form: a plain protobuf clause is skipped for one,
    while its metadata-only forms (``as=PartialObjectMetadata[List]``) may be protobuf.
    A Table is JSON or YAML, and only where the endpoint has a table convertor
    (``table``). An empty ``Accept`` is JSON.

    Raises:
        StatusError: 406 when no clause can be answered.
    """
    accepted = _first(accept, custom=custom, table=table, restricted=True)
    if accepted is None:
        raise not_acceptable(BUILTIN_TYPES)
    return accepted


def negotiate_stream(accept: str, *, custom: bool = False, table: bool = True) -> Accepted:
    """What a watch answers in (``NegotiateOutputMediaTypeStream``): as
    :func:`negotiate`, and the media type must have a watch form.

    Raises:
        StatusError: 406 naming the watch media types when the negotiated one has none
            (YAML: ``Accept: application/yaml, application/json`` is refused too, since
            the first clause that can be answered is YAML).
    """
    accepted = _first(accept, custom=custom, table=table, restricted=True)
    if accepted is None or not accepted.streams:
        raise not_acceptable(STREAM_TYPES)
    return accepted


def error_media(accept: str) -> str | None:
    """The media type an error Status is written in (``ErrorNegotiated`` negotiates
    under the default endpoint restrictions: any of the serializers, no
    transformation); None when no clause fits, and the Status is then written as raw
    JSON (``WriteRawJSON``)."""
    accepted = _first(accept, custom=False, table=False, restricted=False)
    return None if accepted is None else accepted.media


def to_yaml(obj: Any) -> bytes:
    """An answer in YAML as kube writes it: the JSON rendering converted by
    sigs.k8s.io/yaml's ``JSONToYAML`` (go-yaml v2: block style, keys sorted, strings that
    would read as another type quoted)."""
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    text: str = yaml.dump(
        obj, Dumper=dumper, sort_keys=True, default_flow_style=False, allow_unicode=True
    )
    return text.encode()

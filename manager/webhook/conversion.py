"""CRD conversion webhooks (controller-runtime ``pkg/webhook/conversion`` and its
``Hub``/``Convertible`` contract; the API server's side is apiextensions-apiserver's
``pkg/apiserver/conversion/webhook_converter.go``).

A plugin declares, per CustomResourceDefinition, one *hub* version and *spokes*, each
spoke with two functions: ``to_hub`` (this version's object → the hub's) and
``from_hub``. Any version converts to any other through the hub (``v1 → v2(hub) → v3``),
so N versions need 2(N-1) functions, not N(N-1). A function gets a plain dict (its own
copy) and returns the converted dict; it need not touch ``apiVersion``, ``kind`` or
``metadata``: the framework sets ``apiVersion`` and keeps the metadata.

A ``ConversionReview`` (``apiextensions.k8s.io/v1``) converts every object of
``request.objects`` to ``request.desiredAPIVersion``; an object already there is
returned as it came (the API server does not send those; a client may). The answer keeps
what kube-apiserver enforces on a converted object (``validateConvertedObject``,
``restoreObjectMeta``), checked here so that a mistake is named where it is made: the
same kind, name, namespace and uid (a function that changes one fails the review); the
metadata is the original's, except labels and annotations, which come from the converted
object when it has them (they must be valid labels and annotations, 256 KiB of
annotations at most). The whole review fails (``result.status: Failure``, with the
message the API server passes on) if any object fails: an unknown version (the hub or
spokes do not cover the CRD's versions: found when a request names one), another API
group, a function that raises (logged once with its traceback, counted).

Thread-safe: a :class:`Conversion` is immutable; :func:`convert` keeps no state.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson
from opentelemetry import trace

from manager.keys import JsonDict
from manager.labels import is_qualified_name, is_valid_label_value
from manager.logs import reconcile_context
from manager.webhook.admission import BadReview, decode
from manager.webhook.configuration import InvalidWebhook, check_path
from manager.webhook.metrics import CONVERSION_PANICS, HANDLER_ERRORS

__all__ = ["CONVERSION_REVIEW", "Conversion", "Spoke", "convert"]

logger = logging.getLogger(__name__)

CONVERSION_REVIEW: Final = "apiextensions.k8s.io/v1"
_DNS1035: Final = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_ANNOTATIONS_LIMIT: Final = 256 * 1024  # kube's TotalAnnotationSizeLimitB


@dataclass(frozen=True, slots=True)
class Spoke:
    """How one version converts to the hub and back."""

    to_hub: Callable[[JsonDict], JsonDict]
    from_hub: Callable[[JsonDict], JsonDict]


@dataclass(frozen=True, kw_only=True, slots=True)
class Conversion:
    """The conversions of one CRD (``crd``: ``<plural>.<group>``): ``hub`` is the version
    every spoke converts through, ``spokes`` maps every other version to its functions.

    Raises:
        InvalidWebhook: a CRD name, a version or a path kube would refuse, the hub among
            the spokes, no spokes, a spoke without both functions.
    """

    crd: str
    hub: str
    spokes: Mapping[str, Spoke]
    path: str | None = None  # default: /convert/<crd>

    def __post_init__(self) -> None:
        object.__setattr__(self, "spokes", dict(self.spokes))
        problems = []
        plural, _, group = self.crd.partition(".") if isinstance(self.crd, str) else ("", "", "")
        if not plural or "." not in group or not _DNS1035.match(plural):
            problems.append(
                f"crd: Invalid value: {self.crd!r}: the CRD's name, <plural>.<group> "
                "(widgets.example.com): a DNS-1035 plural and a group with a dot"
            )
        elif check_path("/" + group):
            problems.append(f"crd: Invalid value: {self.crd!r}: the group is no DNS subdomain")
        versions = [self.hub, *self.spokes]
        for version in versions:
            if not isinstance(version, str) or not _DNS1035.match(version):
                problems.append(
                    f"version {version!r}: a DNS-1035 label (lower case letters, digits, "
                    "'-', starting with a letter: v1, v2beta1)"
                )
        if not self.spokes:
            problems.append("spokes: at least one version besides the hub")
        if self.hub in self.spokes:
            problems.append(f"spokes: {self.hub!r} is the hub: it converts to nothing")
        spokes: Mapping[str, Any] = self.spokes
        for version, spoke in spokes.items():
            if not isinstance(spoke, Spoke) or not (
                callable(spoke.to_hub) and callable(spoke.from_hub)
            ):
                problems.append(f"spokes[{version}]: expected Spoke(to_hub=..., from_hub=...)")
        if self.path is not None:
            problems.extend(check_path(self.path))
        if problems:
            raise InvalidWebhook(f"Conversion {self.crd!r}", problems)

    @property
    def group(self) -> str:
        return self.crd.partition(".")[2]

    @property
    def served_path(self) -> str:
        """Where the server answers this CRD's ConversionReviews."""
        return self.path if self.path is not None else f"/convert/{self.crd}"

    @property
    def versions(self) -> tuple[str, ...]:
        return (self.hub, *sorted(self.spokes))

    def client_config(self, client_config: Mapping[str, Any]) -> JsonDict:
        """The CRD's ``spec.conversion`` calling ``client_config`` (the path is added to
        a service reference that has none)."""
        config = dict(client_config)
        service = config.get("service")
        if isinstance(service, Mapping) and "path" not in service:
            config["service"] = {**service, "path": self.served_path}
        return {
            "strategy": "Webhook",
            "webhook": {"clientConfig": config, "conversionReviewVersions": ["v1"]},
        }


class _Failed(Exception):
    """The review fails with this message."""


def _version_of(obj: Any, conversion: Conversion, index: int) -> str:
    if not isinstance(obj, dict):
        raise _Failed(f"objects[{index}]: expected an object, got {type(obj).__name__}")
    api_version = obj.get("apiVersion")
    parts = api_version.partition("/") if isinstance(api_version, str) else ("", "", "")
    group, slash, version = parts
    if not slash or group != conversion.group:
        raise _Failed(
            f"objects[{index}]: apiVersion {api_version!r} is not of {conversion.crd} "
            f"(group {conversion.group})"
        )
    return version


def _check_version(version: str, conversion: Conversion, what: str) -> None:
    if version != conversion.hub and version not in conversion.spokes:
        raise _Failed(
            f"{conversion.crd}: no conversion for {what} {version!r}: the hub is "
            f"{conversion.hub!r}, the spokes {', '.join(sorted(conversion.spokes))}; "
            "declare every version of the CRD"
        )


def _call(
    func: Callable[[JsonDict], JsonDict], obj: JsonDict, what: str, conversion: Conversion
) -> JsonDict:
    try:
        out: Any = func(obj)
    except Exception as exc:
        CONVERSION_PANICS.inc()
        HANDLER_ERRORS.labels(conversion.served_path).inc()
        logger.error("conversion failed", extra={"conversion": what}, exc_info=True)
        raise _Failed(f"{what}: {type(exc).__name__}: {exc}") from None
    if not isinstance(out, dict):
        HANDLER_ERRORS.labels(conversion.served_path).inc()
        raise _Failed(f"{what}: returned {type(out).__name__}, expected the converted object")
    converted: JsonDict = out
    return converted


def _string_map(meta: Mapping[str, Any], key: str, where: str) -> dict[str, str] | None:
    value = meta.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _Failed(f"{where}: invalid metadata.{key} of type {type(value).__name__}")
    for k, v in value.items():
        if not isinstance(v, str):
            raise _Failed(f"{where}: metadata.{key}[{k}] must be a string, but is {v!r}")
    return value


def _check_labels(labels: Mapping[str, str], where: str) -> None:
    for key, value in labels.items():
        for problem in is_qualified_name(key):
            raise _Failed(f'{where}: metadata.labels: Invalid value: "{key}": {problem}')
        for problem in is_valid_label_value(value):
            raise _Failed(f'{where}: metadata.labels: Invalid value: "{value}": {problem}')


def _check_annotations(annotations: Mapping[str, str], where: str) -> None:
    size = 0
    for key, value in annotations.items():
        for problem in is_qualified_name(key.lower()):
            raise _Failed(f'{where}: metadata.annotations: Invalid value: "{key}": {problem}')
        size += len(key) + len(value)
    if size > _ANNOTATIONS_LIMIT:
        raise _Failed(
            f"{where}: metadata.annotations: Too long: must have at most {_ANNOTATIONS_LIMIT} bytes"
        )


def _restore(original: JsonDict, converted: JsonDict, where: str) -> JsonDict:
    """``converted`` with the original's kind and metadata, except labels and
    annotations (kube's ``validateConvertedObject`` and ``restoreObjectMeta``)."""
    kind = converted.get("kind", original.get("kind"))
    if kind != original.get("kind"):
        raise _Failed(f"{where}: must have the same kind: {original.get('kind')} != {kind}")
    converted["kind"] = kind
    old_meta = original.get("metadata")
    meta = dict(old_meta) if isinstance(old_meta, dict) else {}
    new_meta = converted.get("metadata")
    if new_meta is not None and not isinstance(new_meta, dict):
        raise _Failed(f"{where}: invalid metadata of type {type(new_meta).__name__}")
    if new_meta:
        for field in ("name", "namespace", "uid"):
            if field in new_meta and new_meta[field] != meta.get(field):
                raise _Failed(
                    f"{where}: must have the same {field}: "
                    f"{meta.get(field)!r} != {new_meta[field]!r}"
                )
        for field, check in (("labels", _check_labels), ("annotations", _check_annotations)):
            if field in new_meta:
                values = _string_map(new_meta, field, where)
                if values:
                    check(values, where)
                    meta[field] = values
                else:
                    meta.pop(field, None)
    converted["metadata"] = meta
    return converted


def _response(uid: str, objects: list[JsonDict] | None, failure: str = "") -> bytes:
    response: JsonDict = {"uid": uid}
    if failure:
        response["result"] = {"status": "Failure", "message": failure}
    else:
        response["convertedObjects"] = objects
        response["result"] = {"status": "Success"}
    return orjson.dumps(
        {"apiVersion": CONVERSION_REVIEW, "kind": "ConversionReview", "response": response}
    )


def convert(body: bytes, conversion: Conversion) -> tuple[bool, str, bytes]:
    """Answer one ConversionReview body: (succeeded, the failure message, the
    ConversionReview to send).

    Raises:
        BadReview: the body is not an ``apiextensions.k8s.io/v1`` ConversionReview with a
            request, a uid, a desired apiVersion and a list of objects (an HTTP 400).
    """
    request = decode(body, "ConversionReview", CONVERSION_REVIEW)
    uid: str = request["uid"]
    desired = request.get("desiredAPIVersion")
    objects = request.get("objects")
    if not isinstance(desired, str) or "/" not in desired:
        raise BadReview(f"request.desiredAPIVersion: expected group/version, got {desired!r}")
    if not isinstance(objects, list):
        raise BadReview(f"request.objects: expected a list, got {type(objects).__name__}")
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attributes(
            {"crd": conversion.crd, "desired-api-version": desired, "object-count": len(objects)}
        )
    token = reconcile_context.set({"conversion": conversion.crd, "uid": uid})
    try:
        out = _convert_all(body, conversion, desired, objects)
    except _Failed as exc:
        if span.is_recording():
            span.set_status(trace.Status(trace.StatusCode.ERROR, str(exc)))
        return False, str(exc), _response(uid, None, str(exc))
    finally:
        reconcile_context.reset(token)
    return True, "", _response(uid, out)


def _convert_all(
    body: bytes, conversion: Conversion, desired: str, objects: list[Any]
) -> list[JsonDict]:
    group, _, target = desired.partition("/")
    if group != conversion.group:
        raise _Failed(f"desiredAPIVersion {desired!r} is not of {conversion.crd}")
    _check_version(target, conversion, "the desired version")
    originals: list[Any] | None = None
    hub_version = f"{group}/{conversion.hub}"
    out = []
    for i, obj in enumerate(objects):
        source = _version_of(obj, conversion, i)
        if source == target:
            out.append(obj)
            continue
        _check_version(source, conversion, f"objects[{i}]'s version")
        if originals is None:  # untouched copies: the functions may change their input
            originals = orjson.loads(body)["request"]["objects"]
        meta = obj.get("metadata")
        name = meta.get("name", "") if isinstance(meta, dict) else ""
        where = f"{conversion.crd} {name or f'objects[{i}]'}"
        hub = obj
        if source != conversion.hub:
            what = f"converting {where} from {source} to the hub {conversion.hub}"
            hub = _call(conversion.spokes[source].to_hub, obj, what, conversion)
            hub["apiVersion"] = hub_version
        converted = hub
        if target != conversion.hub:
            what = f"converting {where} from the hub {conversion.hub} to {target}"
            converted = _call(conversion.spokes[target].from_hub, hub, what, conversion)
        converted["apiVersion"] = desired
        out.append(_restore(originals[i], converted, f"converted {where}"))
    return out

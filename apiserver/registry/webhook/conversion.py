"""Custom resources converted between the versions of their CRD, by its conversion webhook.

A port of ``staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/conversion/
webhook_converter.go``. With ``spec.conversion.strategy: Webhook`` the objects not
already at the desired version are sent in one ``ConversionReview`` (the first of
``conversionReviewVersions`` kube knows: v1, v1beta1); the answer must be a
``ConversionReview`` for the same uid with ``result.status: Success`` and one object per
object sent, each of the desired apiVersion and the same kind, name, namespace and uid;
of each converted object's metadata only labels and annotations are kept (validated),
the rest is the original's. Failures are worded as kube words them
(``conversion webhook for <group>/<version>, Kind=<Kind> failed: ...``). With strategy
None only the apiVersion changes.

Like kube, nothing is cached here and no timeout is set by the CRD: a call gives up after
30 seconds (kube's has no deadline of its own). The REST layer keeps what it converted
for reads (see ``apiserver.machinery.rest``).

Thread-safety: safe from any thread (each call is independent).
"""

from __future__ import annotations

import uuid
from typing import Any, Final, Protocol

import orjson

from apiserver.api.field import FieldError
from apiserver.machinery.admission import ConversionFailed
from apiserver.registry import core
from apiserver.registry.webhook.client import CallError, ClientConfig, WebhookClient

__all__ = ["CRDS", "CrdConverter"]

JsonDict = dict[str, Any]

CRDS: Final = "apiextensions.k8s.io/customresourcedefinitions"
_TIMEOUT: Final = 30.0  # seconds
_GROUP: Final = "apiextensions.k8s.io"


class Storage(Protocol):
    def get(self, key: tuple[str, str, str]) -> JsonDict | None: ...


def _gvk(obj: JsonDict) -> str:
    group, _, version = str(obj.get("apiVersion") or "").rpartition("/")
    return f"{group}/{version}, Kind={obj.get('kind') or ''}"


class CrdConverter:
    """:class:`~apiserver.machinery.admission.Converter` of custom resources."""

    def __init__(self, storage: Storage, client: WebhookClient) -> None:
        self._storage = storage
        self._client = client

    def strategy(self, crd_name: str) -> str:
        """The CRD's conversion strategy (None or Webhook)."""
        crd = self._storage.get((CRDS, "", crd_name)) or {}
        conversion = (crd.get("spec") or {}).get("conversion") or {}
        return str(conversion.get("strategy") or "None")

    def convert(self, crd_name: str, objects: list[JsonDict], api_version: str) -> list[JsonDict]:
        todo = [i for i, o in enumerate(objects) if o.get("apiVersion") != api_version]
        if not todo:
            return objects
        crd = self._storage.get((CRDS, "", crd_name)) or {}
        conversion = (crd.get("spec") or {}).get("conversion") or {}
        if conversion.get("strategy") != "Webhook":
            return [o if o.get("apiVersion") == api_version else {**o, "apiVersion": api_version}
                    for o in objects]  # fmt: skip
        sent = [objects[i] for i in todo]
        converted = self._call(conversion.get("webhook") or {}, sent, api_version)
        out = list(objects)
        for i, obj in zip(todo, converted, strict=True):
            out[i] = obj
        return out

    def _call(self, webhook: JsonDict, sent: list[JsonDict], api_version: str) -> list[JsonDict]:
        what = _gvk(sent[0])
        single = len(sent) == 1
        version = next(
            (v for v in webhook.get("conversionReviewVersions") or [] if v in ("v1", "v1beta1")),
            "",
        )
        if not version:
            raise ConversionFailed("no supported conversion review versions")
        uid = str(uuid.uuid4())
        review = {
            "kind": "ConversionReview",
            "apiVersion": f"{_GROUP}/{version}",
            "request": {"uid": uid, "desiredAPIVersion": api_version, "objects": sent},
            "response": {"uid": "", "convertedObjects": None, "result": {"metadata": {}}},
        }
        try:
            body = self._client.post(
                ClientConfig.from_api(webhook.get("clientConfig")),
                orjson.dumps(review),
                timeout=_TIMEOUT,
                query=False,
            )
        except CallError as exc:
            raise ConversionFailed(f"conversion webhook for {what} failed: {exc.text}") from None
        try:
            objects = _objects(body, uid, version)
        except ValueError as exc:
            raise ConversionFailed(f"conversion webhook for {what} failed: {exc}") from None
        if len(objects) != len(sent):
            raise ConversionFailed(
                f"conversion webhook for {what} returned {len(objects)} objects, expected "
                f"{len(sent)}"
            )
        out = []
        for index, (original, obj) in enumerate(zip(sent, objects, strict=True)):
            at = "object at index 0" if single else f"converted object at index {index}"
            if not isinstance(obj, dict):
                raise ConversionFailed(f"conversion webhook for {what} returned invalid {at}")
            got = str(obj.get("apiVersion") or "")
            if got != api_version:
                raise ConversionFailed(
                    f"conversion webhook for {what} returned invalid {at}: invalid groupVersion "
                    f"(expected {api_version}, received {got})"
                )
            if obj.get("kind") != original.get("kind"):
                raise ConversionFailed(
                    f"conversion webhook for {what} returned invalid {at}: invalid kind "
                    f"(expected {original.get('kind')}, received {obj.get('kind')})"
                )
            problem = _changed_identity(original, obj)
            if problem:
                where = "object" if single else at
                raise ConversionFailed(
                    f"conversion webhook for {what} returned invalid {where}: {problem}"
                )
            try:
                out.append(_restore_meta(original, obj))
            except ValueError as exc:
                where = "metadata" if single else f"metadata in object at index {index}"
                raise ConversionFailed(
                    f"conversion webhook for {what} returned invalid {where}: {exc}"
                ) from None
        return out


def _objects(body: bytes, uid: str, version: str) -> list[Any]:
    """``getConvertedObjectsFromResponse``.

    Raises:
        ValueError: the answer is not a valid ConversionReview, or not a success.
    """
    try:
        review = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"couldn't get version/kind; json parse error: {exc}") from None
    if not isinstance(review, dict) or not review.get("kind"):
        raise ValueError(f"Object 'Kind' is missing in '{body.decode('utf-8', 'replace')}'")
    if version == "v1" and (review.get("apiVersion"), review.get("kind")) != (
        f"{_GROUP}/v1",
        "ConversionReview",
    ):
        raise ValueError(
            f"expected webhook response of {_GROUP}/v1, Kind=ConversionReview, got {_gvk(review)}"
        )
    response = review.get("response")
    if not isinstance(response, dict):
        raise ValueError("no response provided")
    if version == "v1" and str(response.get("uid") or "") != uid:
        raise ValueError(f'expected response.uid="{uid}", got "{response.get("uid") or ""}"')
    result = response.get("result") or {}
    if result.get("status") != "Success":
        if result.get("message"):
            raise ValueError(str(result["message"]))
        raise ValueError(
            f"response.result.status was '{result.get('status') or ''}', not 'Success'"
        )
    return list(response.get("convertedObjects") or [])


def _changed_identity(original: JsonDict, converted: JsonDict) -> str:
    """``validateConvertedObject``: kind, name, namespace and uid must not change."""
    a, b = original.get("metadata") or {}, converted.get("metadata") or {}
    if not isinstance(b, dict):
        b = {}
    for what, key in (("name", "name"), ("namespace", "namespace"), ("UID", "uid")):
        if str(a.get(key) or "") != str(b.get(key) or ""):
            return f"must have the same {what}: {a.get(key) or ''} != {b.get(key) or ''}"
    return ""


def _restore_meta(original: JsonDict, converted: JsonDict) -> JsonDict:
    """``restoreObjectMeta``: the original's metadata, with the converted labels and
    annotations (validated when changed).

    Raises:
        ValueError: the converted metadata is missing or invalid.
    """
    meta = converted.get("metadata")
    if meta is None:
        raise ValueError("missing metadata in converted object")
    if not isinstance(meta, dict):
        raise ValueError(f"invalid metadata of type {type(meta).__name__} in converted object")
    restored = dict(original.get("metadata") or {})
    for key in ("labels", "annotations"):
        value = meta.get(key)
        if value is None:
            restored.pop(key, None)
            continue
        if not isinstance(value, dict):
            raise ValueError(
                f"invalid metadata.{key} of type {type(value).__name__} in converted object"
            )
        for k, v in value.items():
            if not isinstance(v, str):
                raise ValueError(
                    f"metadata.{key}[{k}] must be a string, but is {type(v).__name__} in "
                    "converted object"
                )
        if value != (restored.get(key) or {}):
            errors: list[FieldError] = (
                core.validate_labels(value, "metadata.labels")
                if key == "labels"
                else core.validate_annotations(value, "metadata.annotation")
            )
            if errors:
                texts = [str(e) for e in errors]
                raise ValueError(texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]")
        restored[key] = value
    return {**converted, "metadata": restored}

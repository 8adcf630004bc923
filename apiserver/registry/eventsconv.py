"""The two views of one Event: core ``v1`` and ``events.k8s.io/v1``.

A real cluster stores Events once; ``/api/v1/.../events`` and
``/apis/events.k8s.io/v1/.../events`` are two encodings of the same internal object,
converted field by field. This module ports that conversion
(``pkg/apis/events/v1/conversion.go`` over the generated ``zz_generated.conversion.go``):

==========================  ===========================
core ``v1``                 ``events.k8s.io/v1``
==========================  ===========================
``message``                 ``note``
``involvedObject``          ``regarding``
``related``                 ``related``
``reportingComponent``      ``reportingController``
``reportingInstance``       ``reportingInstance``
``source``                  ``deprecatedSource``
``firstTimestamp``          ``deprecatedFirstTimestamp``
``lastTimestamp``           ``deprecatedLastTimestamp``
``count``                   ``deprecatedCount``
``series``                  ``series`` (``count``, ``lastObservedTime``)
==========================  ===========================

``metadata``, ``eventTime``, ``action``, ``reason`` and ``type`` keep their names.

Contract:
    * Each function returns a new dict (nothing shared with its argument) whose
      ``apiVersion``/``kind`` name the target view; fields the target type does not
      have are dropped, as decoding into the typed struct drops them.
    * The result is shaped as kube-apiserver serialises the Go type: fields without
      ``omitempty`` are always present (core: ``involvedObject``, ``source``,
      ``firstTimestamp``, ``lastTimestamp``, ``eventTime``, ``reportingComponent``,
      ``reportingInstance``; events.k8s.io: ``eventTime``, ``regarding``,
      ``deprecatedSource``, ``deprecatedFirstTimestamp``, ``deprecatedLastTimestamp``),
      an unset timestamp is ``null``, and empty strings and zero counts are left out.
    * A round trip through the other view is lossless for every field both views have;
      an object already in that serialised shape comes back equal.

Thread-safety: pure functions; safe to call from any thread.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["core_to_events", "events_to_core"]

JsonDict = dict[str, Any]

CORE_API_VERSION = "v1"
EVENTS_API_VERSION = "events.k8s.io/v1"

_OBJECT_REFERENCE_FIELDS = (
    "kind",
    "namespace",
    "name",
    "uid",
    "apiVersion",
    "resourceVersion",
    "fieldPath",
)


def core_to_events(obj: JsonDict) -> JsonDict:
    """A core ``v1`` Event as ``events.k8s.io/v1`` serves it."""
    out: JsonDict = {"kind": "Event", "apiVersion": EVENTS_API_VERSION}
    out["metadata"] = copy.deepcopy(obj.get("metadata") or {})
    out["eventTime"] = obj.get("eventTime")
    series = _series(obj.get("series"), always=True)
    if series is not None:
        out["series"] = series
    _put_str(out, "reportingController", obj.get("reportingComponent"))
    _put_str(out, "reportingInstance", obj.get("reportingInstance"))
    _put_str(out, "action", obj.get("action"))
    _put_str(out, "reason", obj.get("reason"))
    out["regarding"] = _object_reference(obj.get("involvedObject"))
    if obj.get("related") is not None:
        out["related"] = _object_reference(obj.get("related"))
    _put_str(out, "note", obj.get("message"))
    _put_str(out, "type", obj.get("type"))
    out["deprecatedSource"] = _event_source(obj.get("source"))
    out["deprecatedFirstTimestamp"] = obj.get("firstTimestamp")
    out["deprecatedLastTimestamp"] = obj.get("lastTimestamp")
    _put_int(out, "deprecatedCount", obj.get("count"))
    return out


def events_to_core(obj: JsonDict) -> JsonDict:
    """An ``events.k8s.io/v1`` Event as core ``v1`` serves it."""
    out: JsonDict = {"kind": "Event", "apiVersion": CORE_API_VERSION}
    out["metadata"] = copy.deepcopy(obj.get("metadata") or {})
    out["involvedObject"] = _object_reference(obj.get("regarding"))
    _put_str(out, "reason", obj.get("reason"))
    _put_str(out, "message", obj.get("note"))
    out["source"] = _event_source(obj.get("deprecatedSource"))
    out["firstTimestamp"] = obj.get("deprecatedFirstTimestamp")
    out["lastTimestamp"] = obj.get("deprecatedLastTimestamp")
    _put_int(out, "count", obj.get("deprecatedCount"))
    _put_str(out, "type", obj.get("type"))
    out["eventTime"] = obj.get("eventTime")
    series = _series(obj.get("series"), always=False)
    if series is not None:
        out["series"] = series
    _put_str(out, "action", obj.get("action"))
    if obj.get("related") is not None:
        out["related"] = _object_reference(obj.get("related"))
    out["reportingComponent"] = obj.get("reportingController") or ""
    out["reportingInstance"] = obj.get("reportingInstance") or ""
    return out


def _put_str(out: JsonDict, key: str, value: Any) -> None:
    if value:
        out[key] = value


def _put_int(out: JsonDict, key: str, value: Any) -> None:
    if value:
        out[key] = value


def _object_reference(ref: Any) -> JsonDict:
    """An ``ObjectReference``: every field is ``omitempty``."""
    if not isinstance(ref, dict):
        return {}
    return {k: ref[k] for k in _OBJECT_REFERENCE_FIELDS if ref.get(k)}


def _event_source(src: Any) -> JsonDict:
    """An ``EventSource`` (``component``, ``host``; both ``omitempty``)."""
    if not isinstance(src, dict):
        return {}
    return {k: src[k] for k in ("component", "host") if src.get(k)}


def _series(series: Any, *, always: bool) -> JsonDict | None:
    """An ``EventSeries``.

    ``events.k8s.io/v1`` declares both fields without ``omitempty`` (``always``); core
    ``v1`` omits a zero count and an unset time.
    """
    if not isinstance(series, dict):
        return None
    out: JsonDict = {}
    count, last = series.get("count"), series.get("lastObservedTime")
    if always or count:
        out["count"] = count or 0
    if always or last is not None:
        out["lastObservedTime"] = last
    return out

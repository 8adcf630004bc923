"""The two views of one HorizontalPodAutoscaler: ``autoscaling/v2`` and ``autoscaling/v1``.

kube-apiserver stores HorizontalPodAutoscalers once (at ``autoscaling/v2``) and serves
``autoscaling/v1`` through a conversion (``pkg/apis/autoscaling/v1/conversion.go`` and
the round-trip helpers of ``pkg/apis/autoscaling/annotations.go``/``helpers.go``).
``v1`` can say only one thing about metrics, a CPU utilization target
(``spec.targetCPUUtilizationPercentage``, ``status.currentCPUUtilizationPercentage``);
everything else ``v2`` has travels in annotations, so that a ``v1`` client reading an
object and writing it back loses nothing:

====================================================  =================================
annotation                                            carries (in ``v1``'s shapes)
====================================================  =================================
``autoscaling.alpha.kubernetes.io/metrics``           the metrics other than CPU
                                                      utilization (``v1`` MetricSpec)
``autoscaling.alpha.kubernetes.io/current-metrics``   every current metric (``v1``
                                                      MetricStatus)
``autoscaling.alpha.kubernetes.io/conditions``        ``status.conditions``
``autoscaling.alpha.kubernetes.io/behavior``          ``spec.behavior``, as Go marshals
                                                      the *internal* type: Go field
                                                      names (``ScaleUp``...), nil as null
====================================================  =================================

Contract:
    * :func:`v2_to_v1` and :func:`v1_to_v2` return new dicts (nothing shared with
      their argument) whose ``apiVersion`` names the target view.
    * ``v1_to_v2`` applies what kube's decoding of a ``v1`` body does on the way in:
      ``v1`` defaulting (``minReplicas: 1``) and the implicit CPU default (80 %) when no
      metric is left; the round-trip annotations are consumed (dropped).
    * ``v2_to_v1`` drops any round-trip annotation the stored object carried and writes
      the ones its content needs; the ``v1`` status is always present (a Go struct with
      ``currentReplicas``/``desiredReplicas`` not omitempty).
    * Annotation values that do not parse are ignored where kube's conversion would fail
      the request; :class:`ConversionError` says which annotation was malformed.

Thread-safety: pure functions; safe to call from any thread.
"""

from __future__ import annotations

import copy
from typing import Any, Final

import orjson

__all__ = [
    "ANNOTATIONS",
    "BEHAVIOR",
    "CONDITIONS",
    "CURRENT_METRICS",
    "METRICS",
    "ConversionError",
    "v1_to_v2",
    "v2_to_v1",
]

JsonDict = dict[str, Any]

METRICS: Final = "autoscaling.alpha.kubernetes.io/metrics"
CURRENT_METRICS: Final = "autoscaling.alpha.kubernetes.io/current-metrics"
CONDITIONS: Final = "autoscaling.alpha.kubernetes.io/conditions"
BEHAVIOR: Final = "autoscaling.alpha.kubernetes.io/behavior"
_TOLERANCE_DOWN: Final = "autoscaling.alpha.kubernetes.io/scale-down-tolerance"
_TOLERANCE_UP: Final = "autoscaling.alpha.kubernetes.io/scale-up-tolerance"
# DropRoundTripHorizontalPodAutoscalerAnnotations removes all of these.
ANNOTATIONS: Final = (
    METRICS,
    BEHAVIOR,
    _TOLERANCE_DOWN,
    _TOLERANCE_UP,
    CURRENT_METRICS,
    CONDITIONS,
)
_DEFAULT_CPU_UTILIZATION: Final = 80


class ConversionError(ValueError):
    """A round-trip annotation whose value kube's conversion cannot decode."""


def _d(value: Any) -> JsonDict:
    return value if isinstance(value, dict) else {}


def _put(out: JsonDict, key: str, src: JsonDict, src_key: str) -> None:
    """``out[key] = src[src_key]`` when set (a Go pointer that is not nil)."""
    if src.get(src_key) is not None:
        out[key] = copy.deepcopy(src[src_key])


def _zero_quantity(src: JsonDict, key: str) -> Any:
    """A Go ``resource.Quantity`` value field: its zero marshals as ``"0"``."""
    value = src.get(key)
    return "0" if value is None else copy.deepcopy(value)


def _ref(src: Any) -> JsonDict:
    """CrossVersionObjectReference: kind and name always written, apiVersion omitempty."""
    src = _d(src)
    out = {"kind": src.get("kind", ""), "name": src.get("name", "")}
    if src.get("apiVersion"):
        out["apiVersion"] = src["apiVersion"]
    return out


def _is_cpu_utilization(metric: JsonDict) -> bool:
    resource = _d(metric.get("resource"))
    return (
        metric.get("type") == "Resource"
        and resource.get("name") == "cpu"
        and _d(resource.get("target")).get("averageUtilization") is not None
    )


# -- metric specs and statuses: v2 <-> v1 shapes ----------------------------------------


def _identifier(metric: JsonDict, selector_key: str) -> JsonDict:
    """v1 (metricName, selector) from a v2 MetricIdentifier."""
    ident = _d(metric.get("metric"))
    out: JsonDict = {"metricName": ident.get("name", "")}
    _put(out, selector_key, ident, "selector")
    return out


def _v2_identifier(src: JsonDict, selector_key: str) -> JsonDict:
    out: JsonDict = {"name": src.get("metricName", "")}
    _put(out, "selector", src, selector_key)
    return out


def _spec_to_v1(metric: JsonDict) -> JsonDict:
    out: JsonDict = {"type": metric.get("type", "")}
    if isinstance(metric.get("object"), dict):
        src = metric["object"]
        target = _d(src.get("target"))
        obj = {"target": _ref(src.get("describedObject")), **_identifier(src, "selector")}
        obj["targetValue"] = _zero_quantity(target, "value")
        _put(obj, "averageValue", target, "averageValue")
        out["object"] = obj
    if isinstance(metric.get("pods"), dict):
        src = metric["pods"]
        pods = _identifier(src, "selector")
        pods["targetAverageValue"] = _zero_quantity(_d(src.get("target")), "averageValue")
        out["pods"] = pods
    for key in ("resource", "containerResource"):
        if isinstance(metric.get(key), dict):
            src = metric[key]
            target = _d(src.get("target"))
            res: JsonDict = {"name": src.get("name", "")}
            _put(res, "targetAverageUtilization", target, "averageUtilization")
            _put(res, "targetAverageValue", target, "averageValue")
            if key == "containerResource":
                res["container"] = src.get("container", "")
            out[key] = res
    if isinstance(metric.get("external"), dict):
        src = metric["external"]
        target = _d(src.get("target"))
        ext = _identifier(src, "metricSelector")
        _put(ext, "targetValue", target, "value")
        _put(ext, "targetAverageValue", target, "averageValue")
        out["external"] = ext
    return out


def _spec_to_v2(metric: JsonDict) -> JsonDict:
    out: JsonDict = {"type": metric.get("type", "")}
    if isinstance(metric.get("object"), dict):
        src = metric["object"]
        target: JsonDict = {
            "type": "Value" if src.get("averageValue") is None else "AverageValue",
            "value": _zero_quantity(src, "targetValue"),
        }
        _put(target, "averageValue", src, "averageValue")
        out["object"] = {
            "describedObject": _ref(src.get("target")),
            "target": target,
            "metric": _v2_identifier(src, "selector"),
        }
    if isinstance(metric.get("pods"), dict):
        src = metric["pods"]
        out["pods"] = {
            "metric": _v2_identifier(src, "selector"),
            "target": {
                "type": "AverageValue",
                "averageValue": _zero_quantity(src, "targetAverageValue"),
            },
        }
    for key in ("resource", "containerResource"):
        if isinstance(metric.get(key), dict):
            src = metric[key]
            utilization = src.get("targetAverageUtilization")
            target = {"type": "AverageValue" if utilization is None else "Utilization"}
            _put(target, "averageUtilization", src, "targetAverageUtilization")
            _put(target, "averageValue", src, "targetAverageValue")
            res: JsonDict = {"name": src.get("name", ""), "target": target}
            if key == "containerResource":
                res["container"] = src.get("container", "")
            out[key] = res
    if isinstance(metric.get("external"), dict):
        src = metric["external"]
        target = {"type": "AverageValue" if src.get("targetValue") is None else "Value"}
        _put(target, "value", src, "targetValue")
        _put(target, "averageValue", src, "targetAverageValue")
        out["external"] = {"metric": _v2_identifier(src, "metricSelector"), "target": target}
    return out


def _status_to_v1(metric: JsonDict) -> JsonDict:
    out: JsonDict = {"type": metric.get("type", "")}
    if isinstance(metric.get("object"), dict):
        src = metric["object"]
        current = _d(src.get("current"))
        obj = {"target": _ref(src.get("describedObject")), **_identifier(src, "selector")}
        obj["currentValue"] = _zero_quantity(current, "value")
        _put(obj, "averageValue", current, "averageValue")
        out["object"] = obj
    if isinstance(metric.get("pods"), dict):
        src = metric["pods"]
        pods = _identifier(src, "selector")
        pods["currentAverageValue"] = _zero_quantity(_d(src.get("current")), "averageValue")
        out["pods"] = pods
    for key in ("resource", "containerResource"):
        if isinstance(metric.get(key), dict):
            src = metric[key]
            current = _d(src.get("current"))
            res: JsonDict = {"name": src.get("name", "")}
            _put(res, "currentAverageUtilization", current, "averageUtilization")
            res["currentAverageValue"] = _zero_quantity(current, "averageValue")
            if key == "containerResource":
                res["container"] = src.get("container", "")
            out[key] = res
    if isinstance(metric.get("external"), dict):
        src = metric["external"]
        current = _d(src.get("current"))
        ext = _identifier(src, "metricSelector")
        ext["currentValue"] = _zero_quantity(current, "value")
        _put(ext, "currentAverageValue", current, "averageValue")
        out["external"] = ext
    return out


def _status_to_v2(metric: JsonDict) -> JsonDict:
    out: JsonDict = {"type": metric.get("type", "")}
    if isinstance(metric.get("object"), dict):
        src = metric["object"]
        current: JsonDict = {"value": _zero_quantity(src, "currentValue")}
        _put(current, "averageValue", src, "averageValue")
        out["object"] = {
            "metric": _v2_identifier(src, "selector"),
            "current": current,
            "describedObject": _ref(src.get("target")),
        }
    if isinstance(metric.get("pods"), dict):
        src = metric["pods"]
        out["pods"] = {
            "metric": _v2_identifier(src, "selector"),
            "current": {"averageValue": _zero_quantity(src, "currentAverageValue")},
        }
    for key in ("resource", "containerResource"):
        if isinstance(metric.get(key), dict):
            src = metric[key]
            current = {"averageValue": _zero_quantity(src, "currentAverageValue")}
            _put(current, "averageUtilization", src, "currentAverageUtilization")
            res: JsonDict = {"name": src.get("name", ""), "current": current}
            if key == "containerResource":
                res["container"] = src.get("container", "")
            out[key] = res
    if isinstance(metric.get("external"), dict):
        src = metric["external"]
        current = {"value": _zero_quantity(src, "currentValue")}
        _put(current, "averageValue", src, "currentAverageValue")
        out["external"] = {"metric": _v2_identifier(src, "metricSelector"), "current": current}
    return out


# -- behavior: the internal Go type, marshalled without json tags -----------------------

_RULE_FIELDS: Final = (
    ("StabilizationWindowSeconds", "stabilizationWindowSeconds"),
    ("SelectPolicy", "selectPolicy"),
    ("Policies", "policies"),
    ("Tolerance", "tolerance"),
)
_POLICY_FIELDS: Final = (
    ("Type", "type", ""),
    ("Value", "value", 0),
    ("PeriodSeconds", "periodSeconds", 0),
)


def _behavior_to_go(behavior: JsonDict) -> JsonDict:
    def rules(value: Any) -> Any:
        if not isinstance(value, dict):
            return None
        out: JsonDict = {}
        for go, js in _RULE_FIELDS:
            if go == "Policies" and isinstance(value.get(js), list):
                out[go] = [
                    {g: _d(p).get(j, zero) for g, j, zero in _POLICY_FIELDS} for p in value[js]
                ]
            else:
                out[go] = copy.deepcopy(value.get(js))
        return out

    return {
        "ScaleUp": rules(behavior.get("scaleUp")),
        "ScaleDown": rules(behavior.get("scaleDown")),
    }


def _field(obj: JsonDict, name: str) -> Any:
    """A member looked up as Go's ``encoding/json`` matches keys: exact, else any case."""
    if name in obj:
        return obj[name]
    lowered = name.lower()
    return next((v for k, v in obj.items() if k.lower() == lowered), None)


def _behavior_from_go(raw: Any) -> JsonDict | None:
    """The v2 behavior from the annotation; None when it is not a well-formed, non-zero
    behavior (kube moves only well-formed data from annotations to fields)."""
    if not isinstance(raw, dict):
        return None

    def rules(value: Any) -> JsonDict | None:
        if not isinstance(value, dict):
            return None
        out: JsonDict = {}
        for go, js in _RULE_FIELDS:
            member = _field(value, go)
            if member is None:
                continue
            if go == "Policies" and isinstance(member, list):
                member = [
                    {
                        j: _field(_d(p), g) if _field(_d(p), g) is not None else zero
                        for g, j, zero in _POLICY_FIELDS
                    }
                    for p in member
                ]
            out[js] = copy.deepcopy(member)
        return out

    out = {}
    for go, js in (("ScaleUp", "scaleUp"), ("ScaleDown", "scaleDown")):
        value = rules(_field(raw, go))
        if value is not None:
            out[js] = value
    return out or None


# -- the objects --------------------------------------------------------------------------


def _annotation_json(annotations: JsonDict, key: str) -> Any:
    if key not in annotations:
        return None
    try:
        return orjson.loads(str(annotations[key]))
    except orjson.JSONDecodeError:
        raise ConversionError(f"annotation {key}: not valid JSON") from None


def _drop_round_trip(metadata: JsonDict) -> None:
    annotations = metadata.get("annotations")
    if isinstance(annotations, dict) and any(k in annotations for k in ANNOTATIONS):
        kept = {k: v for k, v in annotations.items() if k not in ANNOTATIONS}
        if kept:
            metadata["annotations"] = kept
        else:
            metadata.pop("annotations")


def v2_to_v1(obj: JsonDict) -> JsonDict:
    """The ``autoscaling/v1`` view of a stored ``autoscaling/v2`` object."""
    out = {k: copy.deepcopy(v) for k, v in obj.items() if k not in ("spec", "status")}
    out["apiVersion"] = "autoscaling/v1"
    out.setdefault("kind", "HorizontalPodAutoscaler")
    metadata = _d(out.get("metadata"))
    out["metadata"] = metadata
    _drop_round_trip(metadata)
    spec_in, status_in = _d(obj.get("spec")), _d(obj.get("status"))
    metrics = [_d(m) for m in spec_in.get("metrics") or []]

    spec: JsonDict = {"scaleTargetRef": _ref(spec_in.get("scaleTargetRef"))}
    _put(spec, "minReplicas", spec_in, "minReplicas")
    spec["maxReplicas"] = spec_in.get("maxReplicas", 0)
    for metric in metrics:
        resource = _d(metric.get("resource"))
        if metric.get("type") == "Resource" and resource.get("name") == "cpu":
            _put(
                spec,
                "targetCPUUtilizationPercentage",
                _d(resource.get("target")),
                "averageUtilization",
            )
            break
    out["spec"] = spec

    status: JsonDict = {}
    _put(status, "observedGeneration", status_in, "observedGeneration")
    _put(status, "lastScaleTime", status_in, "lastScaleTime")
    status["currentReplicas"] = status_in.get("currentReplicas", 0)
    status["desiredReplicas"] = status_in.get("desiredReplicas", 0)
    current = [_d(m) for m in status_in.get("currentMetrics") or []]
    for metric in current:  # no break in kube's loop: the last CPU utilization wins
        resource = _d(metric.get("resource"))
        if metric.get("type") == "Resource" and resource.get("name") == "cpu":
            _put(
                status,
                "currentCPUUtilizationPercentage",
                _d(resource.get("current")),
                "averageUtilization",
            )
    out["status"] = status

    added: JsonDict = {}
    others = [_spec_to_v1(m) for m in metrics if not _is_cpu_utilization(m)]
    if others:
        added[METRICS] = orjson.dumps(others).decode()
    if current:
        added[CURRENT_METRICS] = orjson.dumps([_status_to_v1(m) for m in current]).decode()
    if isinstance(spec_in.get("behavior"), dict):
        added[BEHAVIOR] = orjson.dumps(_behavior_to_go(spec_in["behavior"])).decode()
    if status_in.get("conditions"):
        added[CONDITIONS] = orjson.dumps(status_in["conditions"]).decode()
    if added:
        metadata["annotations"] = {**_d(metadata.get("annotations")), **added}
    return out


def v1_to_v2(obj: JsonDict) -> JsonDict:
    """The ``autoscaling/v2`` object an ``autoscaling/v1`` one stands for.

    Raises:
        ConversionError: a round-trip annotation is not valid JSON.
    """
    out = {k: copy.deepcopy(v) for k, v in obj.items() if k not in ("spec", "status")}
    out["apiVersion"] = "autoscaling/v2"
    metadata = _d(out.get("metadata"))
    if "metadata" in out:
        out["metadata"] = metadata
    annotations = _d(metadata.get("annotations"))
    spec_in, status_in = _d(obj.get("spec")), _d(obj.get("status"))

    spec: JsonDict = {"scaleTargetRef": _ref(spec_in.get("scaleTargetRef"))}
    spec["minReplicas"] = spec_in["minReplicas"] if spec_in.get("minReplicas") is not None else 1
    spec["maxReplicas"] = spec_in.get("maxReplicas", 0)
    metrics: list[JsonDict] = []
    if spec_in.get("targetCPUUtilizationPercentage") is not None:
        metrics.append(_cpu_metric(spec_in["targetCPUUtilizationPercentage"]))
    others = _annotation_json(annotations, METRICS)
    if isinstance(others, list):
        # the plain spec conversion's CPU metric, if any, goes after the annotation's
        metrics = [_spec_to_v2(_d(m)) for m in others] + metrics
    if not metrics:  # autoscaling/v1's implicit default, made explicit
        metrics = [_cpu_metric(_DEFAULT_CPU_UTILIZATION)]
    spec["metrics"] = metrics
    behavior = _behavior_from_go(_annotation_json(annotations, BEHAVIOR))
    if behavior is not None:
        spec["behavior"] = behavior
    out["spec"] = spec

    status: JsonDict = {}
    _put(status, "observedGeneration", status_in, "observedGeneration")
    _put(status, "lastScaleTime", status_in, "lastScaleTime")
    status["currentReplicas"] = status_in.get("currentReplicas", 0)
    status["desiredReplicas"] = status_in.get("desiredReplicas", 0)
    if status_in.get("currentCPUUtilizationPercentage") is not None:
        status["currentMetrics"] = [
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "current": {"averageUtilization": status_in["currentCPUUtilizationPercentage"]},
                },
            }
        ]
    current = _annotation_json(annotations, CURRENT_METRICS)
    if isinstance(current, list):  # these carry more than the CPU percentage
        status["currentMetrics"] = [_status_to_v2(_d(m)) for m in current]
    conditions = _annotation_json(annotations, CONDITIONS)
    if isinstance(conditions, list):
        status["conditions"] = conditions
    out["status"] = status
    if metadata:
        _drop_round_trip(metadata)
    return out


def _cpu_metric(utilization: Any) -> JsonDict:
    return {
        "type": "Resource",
        "resource": {
            "name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": utilization},
        },
    }

"""Server-side printing: the ``meta.k8s.io/v1 Table`` that ``kubectl get`` asks for.

When a client sends ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``,
kube-apiserver answers a list or a single object with a ``Table``: column definitions,
then one row of cells per object, each row carrying the object itself, its metadata
only (a ``PartialObjectMetadata``), or nothing, as the ``includeObject`` query
parameter asks. This module ports the pieces that build it:

* ``pkg/printers/internalversion/printers.go``: the per-kind columns and cell
  functions of the built-in resources this server serves. The server always prints
  *wide* (``printers/storage.TableConvertor`` passes ``Wide: true``); columns with
  ``priority: 1`` are the ones kubectl shows only under ``-o wide``.
* ``apiextensions-apiserver/.../tableconvertor``: custom resources print ``Name``
  followed by the CRD version's ``additionalPrinterColumns`` (by default one ``Age``
  column of type ``date``), each evaluated with a JSONPath.
* ``apiserver/pkg/registry/rest.defaultTableConvertor``: ``Name``, ``Created At`` for a
  resource without printers (here: CustomResourceDefinitions).
* ``apimachinery/pkg/util/duration.HumanDuration``: ``5s``, ``3m12s``, ``2d``.
* ``apiserver/pkg/endpoints/handlers/response.go`` ``asTable``: the ``includeObject``
  choice.

Contract: :func:`to_table` takes plain dicts as the API serves them (already in the
requested version) and returns a new dict; it neither mutates nor shares its input.
Ages are measured against ``now`` (default: the current UTC time).

Thread-safety: pure functions; safe to call from any thread.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, Final

from apiserver.api.quantity import QuantityError, from_json
from apiserver.registry.eventsconv import events_to_core
from apiserver.registry.hpaconv import v1_to_v2
from manager.labels import SelectorError, label_selector_from_dict

__all__ = [
    "JsonPathError",
    "human_duration",
    "jsonpath_find",
    "to_table",
]

JsonDict = dict[str, Any]
Cell = Any  # str | int | float | bool | None: what a Table cell may hold

TABLE_API_VERSION: Final = "meta.k8s.io/v1"
INCLUDE_OBJECT_VALUES: Final = ("None", "Metadata", "Object")

_NAME_DOC: Final = (
    "Name must be unique within a namespace. Is required when creating resources, although "
    "some resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
_CREATED_DOC: Final = (
    "CreationTimestamp is a timestamp representing the server time when this object was "
    "created. It is not guaranteed to be set in happens-before order across separate "
    "operations. Clients may not set this value. It is represented in RFC3339 form and is "
    "in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)
_CONTAINERS_DOC: Final = "Names of each container in the template."
_IMAGES_DOC: Final = "Images referenced by each container in the template."


# --- durations and timestamps ----------------------------------------------------------


def human_duration(d: timedelta) -> str:
    """``duration.HumanDuration``: a succinct age with two or three significant figures.

    Up to two seconds in the future reads as ``0s`` (clock skew); further is
    ``<invalid>``.
    """
    seconds = int(d.total_seconds())  # Go's int(d.Seconds()) truncates toward zero
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 60 * 2:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        s = seconds % 60
        return f"{minutes}m" if s == 0 else f"{minutes}m{s}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = seconds // 3600
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        years = hours // 24 // 365
        return f"{years}y" if dy == 0 else f"{years}y{dy}d"
    return f"{hours // 24 // 365}y"


_RFC3339: Final = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})\Z")


def _parse_time(value: Any) -> datetime | None:
    """An RFC 3339 ``metav1.Time``/``MicroTime``; None for unset or unparseable."""
    if not isinstance(value, str) or not _RFC3339.match(value):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _since(value: Any, now: datetime) -> str:
    """``translateTimestampSince``: the age of a timestamp, ``<unknown>`` when unset."""
    ts = _parse_time(value)
    if ts is None:
        return "<unknown>"
    return human_duration(now - ts)


# --- JSONPath (the subset printer columns use) -----------------------------------------


class JsonPathError(ValueError):
    """A JSONPath this evaluator does not parse."""


@dataclass(frozen=True, slots=True)
class _Step:
    op: str  # "field", "index", "all", "filter"
    key: str = ""
    index: int = 0
    sub: tuple[_Step, ...] = ()  # filter: the @-relative path
    cmp: str = ""  # filter: "==", "!=", or "" (exists)
    literal: Any = None


_IDENT_END: Final = re.compile(r"[.\[]")


def _parse_jsonpath(path: str) -> tuple[_Step, ...]:
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    if text.startswith("$"):
        text = text[1:]
    steps, rest = _parse_steps(text, path)
    if rest:
        raise JsonPathError(f"unrecognized JSONPath {path!r} at {rest!r}")
    return steps


def _parse_steps(text: str, path: str, stop: str = "") -> tuple[tuple[_Step, ...], str]:
    steps: list[_Step] = []
    while text and text[0] not in stop:
        if text.startswith(".."):
            raise JsonPathError(f"recursive descent is not supported: {path!r}")
        if text[0] == ".":
            text = text[1:]
            if text.startswith("*"):
                steps.append(_Step("all"))
                text = text[1:]
                continue
            end = _IDENT_END.search(text)
            stop_at = min(
                [end.start() if end else len(text)]
                + [i for i in (text.find(c) for c in stop) if i >= 0]
            )
            name = text[:stop_at]
            if name:  # an empty name (".", ".[0]") stays on the current value
                steps.append(_Step("field", key=name))
            text = text[stop_at:]
        elif text[0] == "[":
            close = _bracket_end(text, path)
            steps.append(_parse_bracket(text[1:close].strip(), path))
            text = text[close + 1 :]
        else:
            raise JsonPathError(f"unrecognized JSONPath {path!r} at {text!r}")
    return tuple(steps), text


def _bracket_end(text: str, path: str) -> int:
    quote = ""
    depth = 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
            if depth == 0 and ch == "]":
                return i
    raise JsonPathError(f"unclosed bracket in {path!r}")


def _parse_bracket(inner: str, path: str) -> _Step:
    if inner == "*":
        return _Step("all")
    if len(inner) >= 2 and inner[0] == inner[-1] and inner[0] in "'\"":
        return _Step("field", key=inner[1:-1])
    if re.fullmatch(r"-?\d+", inner):
        return _Step("index", index=int(inner))
    if inner.startswith("?(") and inner.endswith(")"):
        expr = inner[2:-1].strip()
        if not expr.startswith("@"):
            raise JsonPathError(f"filter must start with @: {path!r}")
        sub, rest = _parse_steps(expr[1:], path, stop="=!<> ")
        rest = rest.strip()
        if not rest:
            return _Step("filter", sub=sub)
        m = re.fullmatch(r"(==|!=)\s*(.+)", rest)
        if not m:
            raise JsonPathError(f"unsupported filter in {path!r}")
        return _Step("filter", sub=sub, cmp=m.group(1), literal=_literal(m.group(2), path))
    raise JsonPathError(f"unsupported subscript [{inner}] in {path!r}")


def _literal(text: str, path: str) -> Any:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    if text in ("true", "false"):
        return text == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise JsonPathError(f"unsupported literal {text!r} in {path!r}") from None


def _apply(steps: tuple[_Step, ...], values: list[Any]) -> list[Any]:
    for step in steps:
        out: list[Any] = []
        for v in values:
            if step.op == "field":
                if isinstance(v, dict) and step.key in v:
                    out.append(v[step.key])
            elif step.op == "index":
                if isinstance(v, list) and -len(v) <= step.index < len(v):
                    out.append(v[step.index])
            elif step.op == "all":
                if isinstance(v, list):
                    out.extend(v)
                elif isinstance(v, dict):
                    out.extend(v[k] for k in sorted(v))
            elif isinstance(v, list):  # filter
                out.extend(item for item in v if _keep(step, item))
        values = out
    return values


def _keep(step: _Step, item: Any) -> bool:
    found = _apply(step.sub, [item])
    if not step.cmp:
        return bool(found)
    if len(found) != 1:
        return False
    same = _same(found[0], step.literal)
    return same if step.cmp == "==" else not same


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b)


def jsonpath_find(data: Any, path: str) -> list[Any]:
    """Every value ``path`` selects in ``data``, in document order.

    Supports what CRD printer columns use: ``.a.b``, ``['a.b']``, ``[0]`` (negative
    counts from the end), ``[*]``, ``.*`` and filters ``[?(@.type=="Ready")]`` with
    ``==``, ``!=`` or bare existence. A missing key or index selects nothing (kube's
    ``AllowMissingKeys``).

    Raises:
        JsonPathError: the path uses syntax outside that subset.
    """
    return _apply(_parse_jsonpath(path), [data])


# --- column definitions ----------------------------------------------------------------


def _col(
    name: str, description: str, type_: str = "string", *, fmt: str = "", priority: int = 0
) -> JsonDict:
    return {
        "name": name,
        "type": type_,
        "format": fmt,
        "description": description,
        "priority": priority,
    }


_NAME_COL: Final = _col("Name", _NAME_DOC, fmt="name")
_AGE_COL: Final = _col("Age", _CREATED_DOC)


# --- built-in printers -----------------------------------------------------------------

_Row = tuple[list[Cell], list[JsonDict] | None]  # cells, row conditions


def _name(obj: JsonDict) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _age(obj: JsonDict, now: datetime) -> str:
    return _since((obj.get("metadata") or {}).get("creationTimestamp"), now)


def _d(obj: Any, *path: str) -> Any:
    """``obj[path[0]][path[1]]...`` or None."""
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> JsonDict:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _format_labels(labels: Any) -> str:
    """``labels.FormatLabels``: sorted ``k=v`` pairs, ``<none>`` when empty."""
    text = ",".join(f"{k}={v}" for k, v in sorted(_dict(labels).items()))
    return text or "<none>"


def _selector_string(selector: Any, *, invalid: str) -> str:
    """``LabelSelectorAsSelector(sel).String()``; ``invalid`` when it does not convert."""
    if not isinstance(selector, dict):
        return ""
    try:
        return str(label_selector_from_dict(selector))
    except SelectorError:
        return invalid


def _containers(template_spec: Any) -> tuple[str, str]:
    """``layoutContainerCells``: container names and images, comma-joined."""
    containers = [_dict(c) for c in _list(_d(template_spec, "containers"))]
    names = ",".join(str(c.get("name", "")) for c in containers)
    images = ",".join(str(c.get("image", "")) for c in containers)
    return names, images


def _print_namespace(obj: JsonDict, now: datetime) -> _Row:
    return [_name(obj), str(_d(obj, "status", "phase") or ""), _age(obj, now)], None


_POD_SUCCEEDED: Final = {
    "type": "Completed",
    "status": "True",
    "reason": "Succeeded",
    "message": "The pod has completed successfully.",
}
_POD_FAILED: Final = {
    "type": "Completed",
    "status": "True",
    "reason": "Failed",
    "message": "The pod failed.",
}


def _later(current: datetime | None, candidate: Any) -> datetime | None:
    ts = _parse_time(candidate)
    if ts is None:
        return current
    return ts if current is None or current < ts else current


def _terminated_reason(term: JsonDict, prefix: str) -> str:
    if term.get("reason"):
        return f"{prefix}{term['reason']}"
    if _int(term.get("signal")):
        return f"{prefix}Signal:{_int(term.get('signal'))}"
    return f"{prefix}ExitCode:{_int(term.get('exitCode'))}"


def _print_pod(obj: JsonDict, now: datetime) -> _Row:
    spec, status = _dict(obj.get("spec")), _dict(obj.get("status"))
    conditions = [_dict(c) for c in _list(status.get("conditions"))]
    restarts = 0
    sidecar_restarts = 0
    total = len(_list(spec.get("containers")))
    ready = 0
    last_restart: datetime | None = None
    last_sidecar_restart: datetime | None = None

    phase = str(status.get("phase") or "")
    reason = str(status.get("reason") or "") or phase
    for cond in conditions:
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"

    row_conditions: list[JsonDict] | None = None
    if phase == "Succeeded":
        row_conditions = [dict(_POD_SUCCEEDED)]
    elif phase == "Failed":
        row_conditions = [dict(_POD_FAILED)]

    init_specs = [_dict(c) for c in _list(spec.get("initContainers"))]
    sidecars = {c.get("name") for c in init_specs if c.get("restartPolicy") == "Always"}
    total += len([c for c in init_specs if c.get("restartPolicy") == "Always"])

    initializing = False
    for i, cs in enumerate(_dict(c) for c in _list(status.get("initContainerStatuses"))):
        state = _dict(cs.get("state"))
        terminated_last = _d(cs, "lastState", "terminated")
        restarts += _int(cs.get("restartCount"))
        if isinstance(terminated_last, dict):
            last_restart = _later(last_restart, terminated_last.get("finishedAt"))
        is_sidecar = cs.get("name") in sidecars
        if is_sidecar:
            sidecar_restarts += _int(cs.get("restartCount"))
            if isinstance(terminated_last, dict):
                last_sidecar_restart = _later(
                    last_sidecar_restart, terminated_last.get("finishedAt")
                )
        terminated = state.get("terminated")
        waiting = state.get("waiting")
        if isinstance(terminated, dict) and _int(terminated.get("exitCode")) == 0:
            continue
        if is_sidecar and cs.get("started") is True:
            if cs.get("ready") is True:
                ready += 1
            continue
        if isinstance(terminated, dict):
            reason = _terminated_reason(terminated, "Init:")
        elif (
            isinstance(waiting, dict)
            and waiting.get("reason")
            and waiting.get("reason") != "PodInitializing"
        ):
            reason = f"Init:{waiting['reason']}"
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        initializing = True
        break

    initialized = any(
        c.get("type") == "Initialized" and c.get("status") == "True" for c in conditions
    )
    if not initializing or initialized:
        restarts = sidecar_restarts
        last_restart = last_sidecar_restart
        has_running = False
        for cs in reversed([_dict(c) for c in _list(status.get("containerStatuses"))]):
            state = _dict(cs.get("state"))
            restarts += _int(cs.get("restartCount"))
            terminated_last = _d(cs, "lastState", "terminated")
            if isinstance(terminated_last, dict):
                last_restart = _later(last_restart, terminated_last.get("finishedAt"))
            waiting, terminated = state.get("waiting"), state.get("terminated")
            if isinstance(waiting, dict) and waiting.get("reason"):
                reason = str(waiting["reason"])
            elif isinstance(terminated, dict):
                reason = _terminated_reason(terminated, "")
            elif cs.get("ready") is True and isinstance(state.get("running"), dict):
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            pod_ready = any(
                c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
            )
            reason = "Running" if pod_ready else "NotReady"

    deleting = _d(obj, "metadata", "deletionTimestamp") is not None
    if deleting and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif deleting and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"

    restarts_cell = str(restarts)
    if restarts != 0 and last_restart is not None:
        restarts_cell = f"{restarts} ({human_duration(now - last_restart)} ago)"

    pod_ips = _list(status.get("podIPs"))
    pod_ip = str(_d(pod_ips[0], "ip") or "") if pod_ips else str(status.get("podIP") or "")
    readiness_gates = "<none>"
    gates = [_dict(g) for g in _list(spec.get("readinessGates"))]
    if gates:
        true_conditions = 0
        for gate in gates:
            for cond in conditions:
                if cond.get("type") == gate.get("conditionType"):
                    true_conditions += cond.get("status") == "True"
                    break
        readiness_gates = f"{true_conditions}/{len(gates)}"
    cells: list[Cell] = [
        _name(obj),
        f"{ready}/{total}",
        reason,
        restarts_cell,
        _age(obj, now),
        pod_ip or "<none>",
        str(spec.get("nodeName") or "") or "<none>",
        str(status.get("nominatedNodeName") or "") or "<none>",
        readiness_gates,
    ]
    return cells, row_conditions


def _lb_ingress(status: Any) -> str:
    """``loadBalancerStatusStringer`` (wide: never clipped): sorted unique IPs/hostnames."""
    found = set()
    for item in _list(_d(status, "loadBalancer", "ingress")):
        ing = _dict(item)
        if ing.get("ip"):
            found.add(str(ing["ip"]))
        elif ing.get("hostname"):
            found.add(str(ing["hostname"]))
    return ",".join(sorted(found))


def _service_external_ip(spec: JsonDict, status: Any, svc_type: str) -> str:
    external = [str(ip) for ip in _list(spec.get("externalIPs"))]
    if svc_type in ("ClusterIP", "NodePort"):
        return ",".join(external) if external else "<none>"
    if svc_type == "LoadBalancer":
        lb = _lb_ingress(status)
        if external:
            return ",".join(([*lb.split(",")] if lb else []) + external)
        return lb or "<pending>"
    if svc_type == "ExternalName":
        return str(spec.get("externalName") or "")
    return "<unknown>"


def _print_service(obj: JsonDict, now: datetime) -> _Row:
    spec = _dict(obj.get("spec"))
    svc_type = str(spec.get("type") or "ClusterIP")  # the API defaults it
    cluster_ips = _list(spec.get("clusterIPs"))
    internal_ip = str(cluster_ips[0]) if cluster_ips else str(spec.get("clusterIP") or "")
    pieces = []
    for port in (_dict(p) for p in _list(spec.get("ports"))):
        protocol = port.get("protocol") or "TCP"
        if _int(port.get("nodePort")) > 0:
            pieces.append(f"{_int(port.get('port'))}:{_int(port.get('nodePort'))}/{protocol}")
        else:
            pieces.append(f"{_int(port.get('port'))}/{protocol}")
    cells: list[Cell] = [
        _name(obj),
        svc_type,
        internal_ip or "<none>",
        _service_external_ip(spec, obj.get("status"), svc_type),
        ",".join(pieces) or "<none>",
        _age(obj, now),
        _format_labels(spec.get("selector")),
    ]
    return cells, None


def _print_configmap(obj: JsonDict, now: datetime) -> _Row:
    count = len(_dict(obj.get("data"))) + len(_dict(obj.get("binaryData")))
    return [_name(obj), count, _age(obj, now)], None


def _print_secret(obj: JsonDict, now: datetime) -> _Row:
    keys = set(_dict(obj.get("data"))) | set(_dict(obj.get("stringData")))
    secret_type = str(obj.get("type") or "Opaque")  # the API defaults it
    return [_name(obj), secret_type, len(keys), _age(obj, now)], None


def _print_service_account(obj: JsonDict, now: datetime) -> _Row:
    return [_name(obj), len(_list(obj.get("secrets"))), _age(obj, now)], None


def _print_event(obj: JsonDict, now: datetime) -> _Row:
    """``printEvent`` over a core-shaped Event."""
    first = _since(obj.get("firstTimestamp"), now)
    if _parse_time(obj.get("firstTimestamp")) is None:
        first = _since(obj.get("eventTime"), now)
    last = _since(obj.get("lastTimestamp"), now)
    if _parse_time(obj.get("lastTimestamp")) is None:
        last = first
    count = _int(obj.get("count"))
    series = obj.get("series")
    if isinstance(series, dict):
        last = _since(series.get("lastObservedTime"), now)
        count = _int(series.get("count"))
    elif count == 0:
        count = 1  # singleton events carry no count in the new API
    involved = _dict(obj.get("involvedObject"))
    kind = str(involved.get("kind") or "").lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = _dict(obj.get("source"))
    component = source.get("component") or obj.get("reportingComponent") or ""
    instance = source.get("host") or obj.get("reportingInstance") or ""
    formatted_source = f"{component}, {instance}" if instance else str(component)
    cells: list[Cell] = [
        last,
        str(obj.get("type") or ""),
        str(obj.get("reason") or ""),
        target,
        str(involved.get("fieldPath") or ""),
        formatted_source,
        str(obj.get("message") or "").strip(),
        first,
        count,
        _name(obj),
    ]
    return cells, None


def _print_events_event(obj: JsonDict, now: datetime) -> _Row:
    return _print_event(events_to_core(obj), now)


def _print_deployment(obj: JsonDict, now: datetime) -> _Row:
    spec, status = _dict(obj.get("spec")), _dict(obj.get("status"))
    desired = _int(spec.get("replicas")) if "replicas" in spec else 1  # API default
    names, images = _containers(_d(spec, "template", "spec"))
    selector = spec.get("selector")
    cells: list[Cell] = [
        _name(obj),
        f"{_int(status.get('readyReplicas'))}/{desired}",
        _int(status.get("updatedReplicas")),
        _int(status.get("availableReplicas")),
        _age(obj, now),
        names,
        images,
        _selector_string(selector, invalid="<invalid>"),
    ]
    return cells, None


def _print_replicaset(obj: JsonDict, now: datetime) -> _Row:
    spec, status = _dict(obj.get("spec")), _dict(obj.get("status"))
    desired = _int(spec.get("replicas")) if "replicas" in spec else 1  # API default
    names, images = _containers(_d(spec, "template", "spec"))
    selector = _selector_string(spec.get("selector"), invalid="<error>") or "<none>"
    cells: list[Cell] = [
        _name(obj),
        desired,
        _int(status.get("replicas")),
        _int(status.get("readyReplicas")),
        _age(obj, now),
        names,
        images,
        selector,
    ]
    return cells, None


def _format_hosts(rules: list[Any]) -> str:
    """``formatHosts``: up to three hosts, ``*`` when no rule names one."""
    hosts: list[str] = []
    limit, more = 3, False
    for rule in rules:
        if len(hosts) == limit:
            more = True
        host = _dict(rule).get("host")
        if not more and host:
            hosts.append(str(host))
    if not hosts:
        return "*"
    text = ",".join(hosts)
    return f"{text} + {len(rules) - limit} more..." if more else text


def _print_ingress(obj: JsonDict, now: datetime) -> _Row:
    spec = _dict(obj.get("spec"))
    class_name = spec.get("ingressClassName")
    cells: list[Cell] = [
        _name(obj),
        "<none>" if class_name is None else str(class_name),
        _format_hosts(_list(spec.get("rules"))),
        _lb_ingress(obj.get("status")),
        "80, 443" if _list(spec.get("tls")) else "80",
        _age(obj, now),
    ]
    return cells, None


def _print_lease(obj: JsonDict, now: datetime) -> _Row:
    holder = _d(obj, "spec", "holderIdentity")
    return [_name(obj), "" if holder is None else str(holder), _age(obj, now)], None


def _print_node(obj: JsonDict, now: datetime) -> _Row:
    spec, status = _dict(obj.get("spec")), _dict(obj.get("status"))
    states: list[str] = []
    ready = None
    for cond in (_dict(c) for c in _list(status.get("conditions"))):
        if cond.get("type") == "Ready":
            ready = cond  # the last one wins, as in kube's condition map
    if ready is not None:
        states.append("Ready" if ready.get("status") == "True" else "NotReady")
    else:
        states.append("Unknown")
    if spec.get("unschedulable") is True:
        states.append("SchedulingDisabled")
    roles: set[str] = set()
    for key, value in _dict(_d(obj, "metadata", "labels")).items():
        if key.startswith("node-role.kubernetes.io/"):
            role = key[len("node-role.kubernetes.io/") :]
            if role:
                roles.add(role)
        elif key == "kubernetes.io/role" and value:
            roles.add(str(value))
    info = _dict(status.get("nodeInfo"))
    addresses = [_dict(a) for a in _list(status.get("addresses"))]

    def address(kind: str) -> str:
        return next((str(a.get("address")) for a in addresses if a.get("type") == kind), "<none>")

    cells: list[Cell] = [
        _name(obj),
        ",".join(states),
        ",".join(sorted(roles)) or "<none>",
        _age(obj, now),
        str(info.get("kubeletVersion") or ""),
        address("InternalIP"),
        address("ExternalIP"),
        str(info.get("osImage") or "") or "<unknown>",
        str(info.get("kernelVersion") or "") or "<unknown>",
        str(info.get("containerRuntimeVersion") or "") or "<unknown>",
    ]
    return cells, None


def _print_created_at(obj: JsonDict, now: datetime) -> _Row:
    """``defaultTableConvertor``: the name and the RFC 3339 creation time in UTC."""
    ts = _parse_time(_d(obj, "metadata", "creationTimestamp"))
    created = ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if ts else "0001-01-01T00:00:00Z"
    return [_name(obj), created], None


@dataclass(frozen=True, slots=True)
class _Printer:
    columns: tuple[JsonDict, ...]
    row: Callable[[JsonDict, datetime], _Row]
    rows_null_when_empty: bool = False  # defaultTableConvertor leaves Rows nil


_EVENT_COLUMNS: Final = (
    _col(
        "Last Seen",
        "Optional. The time at which the most recent occurrence of this event was recorded.",
    ),
    _col("Type", "Type of this event (Normal, Warning), new types could be added in the future"),
    _col(
        "Reason",
        "This should be a short, machine understandable string that gives the reason for the "
        "transition into the object's current status.",
    ),
    _col("Object", "The object that this event is about."),
    _col(
        "Subobject",
        "If referring to a piece of an object instead of an entire object, this string should "
        "contain a valid JSON/Go field access statement, such as "
        "desiredState.manifest.containers[2].",
        priority=1,
    ),
    _col(
        "Source",
        "The component reporting this event. Should be a short machine understandable string.",
        priority=1,
    ),
    _col("Message", "A human-readable description of the status of this operation."),
    _col(
        "First Seen",
        "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
        priority=1,
    ),
    _col("Count", "The number of times this event has occurred.", priority=1),
    _col("Name", _NAME_DOC, fmt="name", priority=1),
)

_PRINTERS: Final[dict[tuple[str, str], _Printer]] = {
    ("", "Namespace"): _Printer(
        (_NAME_COL, _col("Status", "The status of the namespace"), _AGE_COL),
        _print_namespace,
    ),
    ("", "Pod"): _Printer(
        (
            _NAME_COL,
            _col("Ready", "The aggregate readiness state of this pod for accepting traffic."),
            _col("Status", "The aggregate status of the containers in this pod."),
            _col(
                "Restarts",
                "The number of times the containers in this pod have been restarted and "
                "when the last container in this pod has restarted.",
            ),
            _AGE_COL,
            _col("IP", "podIP address allocated to the pod.", priority=1),
            _col("Node", "NodeName indicates in which node this pod is scheduled.", priority=1),
            _col(
                "Nominated Node",
                "nominatedNodeName is set only when this pod preempts other pods on the node.",
                priority=1,
            ),
            _col(
                "Readiness Gates",
                "If specified, all readiness gates will be evaluated for pod readiness.",
                priority=1,
            ),
        ),
        _print_pod,
    ),
    ("", "Service"): _Printer(
        (
            _NAME_COL,
            _col("Type", "type determines how the Service is exposed."),
            _col("Cluster-IP", "clusterIP is the IP address of the service."),
            _col(
                "External-IP",
                "externalIPs is a list of IP addresses for which nodes in the cluster will also "
                "accept traffic for this service.",
            ),
            _col("Port(s)", "The list of ports that are exposed by this service."),
            _AGE_COL,
            _col(
                "Selector",
                "Route service traffic to pods with label keys and values matching this selector.",
                priority=1,
            ),
        ),
        _print_service,
    ),
    ("", "ConfigMap"): _Printer(
        (_NAME_COL, _col("Data", "Data contains the configuration data."), _AGE_COL),
        _print_configmap,
    ),
    ("", "Secret"): _Printer(
        (
            _NAME_COL,
            _col("Type", "Used to facilitate programmatic handling of secret data."),
            _col("Data", "Data contains the secret data."),
            _AGE_COL,
        ),
        _print_secret,
    ),
    ("", "ServiceAccount"): _Printer(
        (
            _NAME_COL,
            _col(
                "Secrets",
                "Secrets is a list of the secrets in the same namespace that pods running using "
                "this ServiceAccount are allowed to use.",
            ),
            _AGE_COL,
        ),
        _print_service_account,
    ),
    ("", "Event"): _Printer(_EVENT_COLUMNS, _print_event),
    ("events.k8s.io", "Event"): _Printer(_EVENT_COLUMNS, _print_events_event),
    ("", "Node"): _Printer(
        (
            _NAME_COL,
            _col("Status", "The status of the node"),
            _col("Roles", "The roles of the node"),
            _AGE_COL,
            _col("Version", "Kubelet Version reported by the node."),
            _col("Internal-IP", "List of addresses reachable to the node.", priority=1),
            _col("External-IP", "List of addresses reachable to the node.", priority=1),
            _col("OS-Image", "OS Image reported by the node from /etc/os-release.", priority=1),
            _col("Kernel-Version", "Kernel Version reported by the node.", priority=1),
            _col("Container-Runtime", "ContainerRuntime Version reported by the node.", priority=1),
        ),
        _print_node,
    ),
    ("apps", "Deployment"): _Printer(
        (
            _NAME_COL,
            _col("Ready", "Number of the pod with ready state"),
            _col(
                "Up-to-date",
                "Total number of non-terminated pods targeted by this deployment that have the "
                "desired template spec.",
            ),
            _col(
                "Available",
                "Total number of available pods (ready for at least minReadySeconds) targeted by "
                "this deployment.",
            ),
            _AGE_COL,
            _col("Containers", _CONTAINERS_DOC, priority=1),
            _col("Images", _IMAGES_DOC, priority=1),
            _col("Selector", "Label selector for pods.", priority=1),
        ),
        _print_deployment,
    ),
    ("apps", "ReplicaSet"): _Printer(
        (
            _NAME_COL,
            _col("Desired", "Replicas is the number of desired replicas."),
            _col("Current", "Replicas is the most recently observed number of replicas."),
            _col("Ready", "The number of ready replicas for this replica set."),
            _AGE_COL,
            _col("Containers", _CONTAINERS_DOC, priority=1),
            _col("Images", _IMAGES_DOC, priority=1),
            _col(
                "Selector",
                "Selector is a label query over pods that should match the replica count.",
                priority=1,
            ),
        ),
        _print_replicaset,
    ),
    ("networking.k8s.io", "Ingress"): _Printer(
        (
            _NAME_COL,
            _col(
                "Class",
                "The name of the IngressClass resource that should be used for additional "
                "configuration",
            ),
            _col(
                "Hosts", "Hosts that incoming requests are matched against before the ingress rule"
            ),
            _col("Address", "Address is a list containing ingress points for the load-balancer"),
            _col("Ports", "Ports of TLS configurations that open"),
            _AGE_COL,
        ),
        _print_ingress,
    ),
    ("coordination.k8s.io", "Lease"): _Printer(
        (
            _NAME_COL,
            _col(
                "Holder", "holderIdentity contains the identity of the holder of a current lease."
            ),
            _AGE_COL,
        ),
        _print_lease,
    ),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): _Printer(
        (_NAME_COL, _col("Created At", _CREATED_DOC, "date")),
        _print_created_at,
        rows_null_when_empty=True,
    ),
}


# --- the other built-in kinds (printers.go) ----------------------------------------------


def _since_or_none(value: Any, now: datetime) -> str:
    return "<none>" if value is None else _since(value, now)


def _print_daemonset(obj: JsonDict, now: datetime) -> _Row:
    spec, status = _dict(obj.get("spec")), _dict(obj.get("status"))
    names, images = _containers(_d(spec, "template", "spec"))
    cells: list[Cell] = [
        _name(obj),
        _int(status.get("desiredNumberScheduled")),
        _int(status.get("currentNumberScheduled")),
        _int(status.get("numberReady")),
        _int(status.get("updatedNumberScheduled")),
        _int(status.get("numberAvailable")),
        _format_labels(_d(spec, "template", "spec", "nodeSelector")),
        _age(obj, now),
        names,
        images,
        _selector_string(spec.get("selector"), invalid="<invalid>") or "<none>",
    ]
    return cells, None


def _print_statefulset(obj: JsonDict, now: datetime) -> _Row:
    spec, status = _dict(obj.get("spec")), _dict(obj.get("status"))
    desired = _int(spec.get("replicas")) if "replicas" in spec else 1
    names, images = _containers(_d(spec, "template", "spec"))
    ready = f"{_int(status.get('readyReplicas'))}/{desired}"
    return [_name(obj), ready, _age(obj, now), names, images], None


def _print_replication_controller(obj: JsonDict, now: datetime) -> _Row:
    spec, status = _dict(obj.get("spec")), _dict(obj.get("status"))
    desired = _int(spec.get("replicas")) if "replicas" in spec else 1
    names, images = _containers(_d(spec, "template", "spec"))
    cells: list[Cell] = [
        _name(obj),
        desired,
        _int(status.get("replicas")),
        _int(status.get("readyReplicas")),
        _age(obj, now),
        names,
        images,
        _format_labels(spec.get("selector")),
    ]
    return cells, None


def _job_status(obj: JsonDict) -> str:
    conditions = {
        str(_dict(c).get("type")): _dict(c).get("status")
        for c in _list(_d(obj, "status", "conditions"))
    }
    for state in ("Complete", "Failed", "FailureTarget", "SuccessCriteriaMet"):
        if conditions.get(state) == "True":
            return state
    if _d(obj, "spec", "suspend") is True or conditions.get("Suspended") == "True":
        return "Suspended"
    return "Running"


def _print_job(obj: JsonDict, now: datetime) -> _Row:
    spec, status = _dict(obj.get("spec")), _dict(obj.get("status"))
    succeeded = _int(status.get("succeeded"))
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{_int(spec.get('completions'))}"
    else:
        parallelism = _int(spec.get("parallelism"))
        completions = f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"
    started = _parse_time(status.get("startTime"))
    finished = _parse_time(status.get("completionTime")) or now
    duration = "" if started is None else human_duration(finished - started)
    names, images = _containers(_d(spec, "template", "spec"))
    selector = _selector_string(spec.get("selector"), invalid="<error>") or "<none>"
    cells: list[Cell] = [
        _name(obj),
        _job_status(obj),
        completions,
        duration,
        _age(obj, now),
        names,
        images,
        selector,
    ]
    return cells, None


def _print_cronjob(obj: JsonDict, now: datetime) -> _Row:
    spec, status = _dict(obj.get("spec")), _dict(obj.get("status"))
    template_spec = _d(spec, "jobTemplate", "spec", "template", "spec")
    names, images = _containers(template_spec)
    selector = _d(spec, "jobTemplate", "spec", "selector")
    cells: list[Cell] = [
        _name(obj),
        str(spec.get("schedule", "")),
        str(spec.get("timeZone")) if spec.get("timeZone") else "<none>",
        "True" if spec.get("suspend") else "False",
        len(_list(status.get("active"))),
        _since_or_none(status.get("lastScheduleTime"), now),
        _age(obj, now),
        names,
        images,
        _selector_string(selector, invalid="<error>") or "<none>",
    ]
    return cells, None


def _print_pdb(obj: JsonDict, now: datetime) -> _Row:
    spec, status = _dict(obj.get("spec")), _dict(obj.get("status"))
    cells: list[Cell] = [
        _name(obj),
        "N/A" if spec.get("minAvailable") is None else str(spec["minAvailable"]),
        "N/A" if spec.get("maxUnavailable") is None else str(spec["maxUnavailable"]),
        _int(status.get("disruptionsAllowed")),
        _age(obj, now),
    ]
    return cells, None


def _print_binding(obj: JsonDict, now: datetime) -> _Row:
    ref = _dict(obj.get("roleRef"))
    users, groups, sas = [], [], []
    for subject in (_dict(s) for s in _list(obj.get("subjects"))):
        kind, name = subject.get("kind"), str(subject.get("name", ""))
        if kind == "User":
            users.append(name)
        elif kind == "Group":
            groups.append(name)
        elif kind == "ServiceAccount":
            sas.append(f"{subject.get('namespace', '')}/{name}")
    cells: list[Cell] = [
        _name(obj),
        f"{ref.get('kind', '')}/{ref.get('name', '')}",
        _age(obj, now),
        ", ".join(users),
        ", ".join(groups),
        ", ".join(sas),
    ]
    return cells, None


def _print_apiservice(obj: JsonDict, now: datetime) -> _Row:
    service = _d(obj, "spec", "service")
    shown = "Local" if not service else f"{service.get('namespace', '')}/{service.get('name', '')}"
    available = "Unknown"
    for cond in (_dict(c) for c in _list(_d(obj, "status", "conditions"))):
        if cond.get("type") == "Available":
            available = str(cond.get("status"))
            if available != "True":
                available = f"{available} ({cond.get('reason', '')})"
    return [_name(obj), shown, available, _age(obj, now)], None


def _print_endpointslice(obj: JsonDict, now: datetime) -> _Row:
    ports = [str(_dict(p).get("port", "")) for p in _list(obj.get("ports"))]
    addresses = [
        str(a) for e in _list(obj.get("endpoints")) for a in _list(_dict(e).get("addresses"))
    ]
    shown = ",".join(addresses[:3]) + (
        f" + {len(addresses) - 3} more..." if len(addresses) > 3 else ""
    )
    cells: list[Cell] = [
        _name(obj),
        str(obj.get("addressType", "")),
        ",".join(ports) or "<unset>",
        shown or "<unset>",
        _age(obj, now),
    ]
    return cells, None


def _print_priority_class(obj: JsonDict, now: datetime) -> _Row:
    cells: list[Cell] = [
        _name(obj),
        _int(obj.get("value")),
        bool(obj.get("globalDefault")),
        _age(obj, now),
        str(obj.get("preemptionPolicy") or ""),
    ]
    return cells, None


def _print_storage_class(obj: JsonDict, now: datetime) -> _Row:
    name = _name(obj)
    annotations = _dict(_d(obj, "metadata", "annotations"))
    if annotations.get("storageclass.kubernetes.io/is-default-class") == "true":
        name += " (default)"
    cells: list[Cell] = [
        name,
        str(obj.get("provisioner", "")),
        str(obj.get("reclaimPolicy") or "Delete"),
        str(obj.get("volumeBindingMode") or "Immediate"),
        bool(obj.get("allowVolumeExpansion")),
        _age(obj, now),
    ]
    return cells, None


_ACCESS_MODES: Final = {
    "ReadWriteOnce": "RWO",
    "ReadOnlyMany": "ROX",
    "ReadWriteMany": "RWX",
    "ReadWriteOncePod": "RWOP",
}


def _access_modes(modes: Any) -> str:
    return ",".join(_ACCESS_MODES.get(str(m), str(m)) for m in _list(modes))


def _print_pvc(obj: JsonDict, now: datetime) -> _Row:
    spec, status = _dict(obj.get("spec")), _dict(obj.get("status"))
    phase = str(status.get("phase") or "")
    if _d(obj, "metadata", "deletionTimestamp"):
        phase = "Terminating"
    capacity = (
        str(_dict(status.get("capacity")).get("storage", "")) if spec.get("volumeName") else ""
    )
    cells: list[Cell] = [
        _name(obj),
        phase,
        str(spec.get("volumeName") or ""),
        capacity,
        _access_modes(status.get("accessModes")) if spec.get("volumeName") else "",
        str(spec.get("storageClassName") or "<unset>"),
        str(spec.get("volumeAttributesClassName") or "<unset>"),
        _age(obj, now),
        str(spec.get("volumeMode") or "<unset>"),
    ]
    return cells, None


def _print_pv(obj: JsonDict, now: datetime) -> _Row:
    spec, status = _dict(obj.get("spec")), _dict(obj.get("status"))
    claim = _dict(spec.get("claimRef"))
    phase = "Terminating" if _d(obj, "metadata", "deletionTimestamp") else status.get("phase", "")
    cells: list[Cell] = [
        _name(obj),
        str(_dict(spec.get("capacity")).get("storage", "")),
        _access_modes(spec.get("accessModes")),
        str(spec.get("persistentVolumeReclaimPolicy") or ""),
        str(phase),
        f"{claim['namespace']}/{claim['name']}" if claim.get("name") else "",
        str(spec.get("storageClassName") or ""),
        str(spec.get("volumeAttributesClassName") or "<unset>"),
        str(status.get("reason") or ""),
        _age(obj, now),
        str(spec.get("volumeMode") or "<unset>"),
    ]
    return cells, None


def _print_resource_quota(obj: JsonDict, now: datetime) -> _Row:
    """``printResourceQuota``: ``name: used/hard`` for each name of ``status.hard``, sorted;
    the ``limits.*`` names in the Limit column, the others in Request."""
    status = _dict(obj.get("status"))
    hard, used = _dict(status.get("hard")), _dict(status.get("used"))
    columns: dict[bool, list[str]] = {False: [], True: []}
    for name in sorted(hard):
        pieces = name.split(".")
        is_limit = len(pieces) > 1 and pieces[0] == "limits"
        columns[is_limit].append(f"{name}: {_quantity(used.get(name))}/{_quantity(hard[name])}")
    cells: list[Cell] = [_name(obj), ", ".join(columns[False]), ", ".join(columns[True])]
    return [*cells, _age(obj, now)], None


def _quantity(value: Any) -> str:
    """``Quantity.String()`` of a stored quantity (a missing one is zero: ``0``)."""
    try:
        return str(from_json(value))
    except QuantityError:
        return str(value)


def _print_name_created_age(obj: JsonDict, now: datetime) -> _Row:
    return [_name(obj), _age(obj, now)], None


def _print_hpa(obj: JsonDict, now: datetime) -> _Row:
    if obj.get("apiVersion") == "autoscaling/v1":
        obj = v1_to_v2(obj)  # printed from what v1 stands for, as kube prints the internal type
    spec, status = _dict(obj.get("spec")), _dict(obj.get("status"))
    ref = _dict(spec.get("scaleTargetRef"))
    targets = []
    for metric in (_dict(m) for m in _list(spec.get("metrics"))):
        if metric.get("type") == "Resource":
            resource = _dict(metric.get("resource"))
            target = _dict(resource.get("target"))
            if target.get("averageUtilization") is not None:
                targets.append(f"{resource.get('name')}: <unknown>/{target['averageUtilization']}%")
            else:
                targets.append(
                    f"{resource.get('name')}: <unknown>/{target.get('averageValue', '')}"
                )
        else:
            targets.append("<unknown>")
    shown = ", ".join(targets[:2]) + (f" + {len(targets) - 2} more..." if len(targets) > 2 else "")
    cells: list[Cell] = [
        _name(obj),
        f"{ref.get('kind', '')}/{ref.get('name', '')}",
        shown or "<none>",
        _int(spec.get("minReplicas")) if spec.get("minReplicas") is not None else "<unset>",
        _int(spec.get("maxReplicas")),
        _int(status.get("currentReplicas")),
        _age(obj, now),
    ]
    return cells, None


def _print_controller_revision(obj: JsonDict, now: datetime) -> _Row:
    owner = next(
        (
            _dict(r)
            for r in _list(_d(obj, "metadata", "ownerReferences"))
            if _dict(r).get("controller")
        ),
        None,
    )
    controller = "<none>"
    if owner is not None:
        group = str(owner.get("apiVersion", "")).rpartition("/")[0]
        kind = str(owner.get("kind", "")).lower()
        controller = (
            f"{kind}.{group}/{owner.get('name', '')}"
            if group
            else f"{kind}/{owner.get('name', '')}"
        )
    return [_name(obj), controller, _int(obj.get("revision")), _age(obj, now)], None


def _print_network_policy(obj: JsonDict, now: datetime) -> _Row:
    selector = _d(obj, "spec", "podSelector")
    shown = _selector_string(selector, invalid="<invalid>") or "<none>"
    return [_name(obj), shown, _age(obj, now)], None


def _print_ingress_class(obj: JsonDict, now: datetime) -> _Row:
    spec = _dict(obj.get("spec"))
    params = _dict(spec.get("parameters"))
    shown = "<none>"
    if params:
        group = params.get("apiGroup") or ""
        kind = f"{params.get('kind', '')}.{group}" if group else str(params.get("kind", ""))
        shown = f"{kind}/{params.get('name', '')}"
    return [_name(obj), str(spec.get("controller", "")), shown, _age(obj, now)], None


def _print_runtime_class(obj: JsonDict, now: datetime) -> _Row:
    return [_name(obj), str(obj.get("handler", "")), _age(obj, now)], None


def _print_webhooks(obj: JsonDict, now: datetime) -> _Row:
    return [_name(obj), len(_list(obj.get("webhooks"))), _age(obj, now)], None


_SELECTOR_DOC: Final = "Selector is a label query over pods."
_MORE_PRINTERS: Final[dict[tuple[str, str], _Printer]] = {
    ("apps", "DaemonSet"): _Printer(
        (
            _NAME_COL,
            _col("Desired", "The total number of nodes that should be running the daemon pod."),
            _col("Current", "The number of nodes running at least one daemon pod."),
            _col(
                "Ready",
                "The number of nodes that should be running the daemon pod and have one or "
                "more ready.",
            ),
            _col("Up-to-date", "The total number of nodes that are running updated daemon pod"),
            _col(
                "Available",
                "The number of nodes that should be running the daemon pod and have one or "
                "more available.",
            ),
            _col(
                "Node Selector",
                "NodeSelector is a selector which must be true for the pod to fit on a node.",
            ),
            _AGE_COL,
            _col("Containers", _CONTAINERS_DOC, priority=1),
            _col("Images", _IMAGES_DOC, priority=1),
            _col("Selector", _SELECTOR_DOC, priority=1),
        ),
        _print_daemonset,
    ),
    ("apps", "StatefulSet"): _Printer(
        (
            _NAME_COL,
            _col("Ready", "Number of the pod with ready state"),
            _AGE_COL,
            _col("Containers", _CONTAINERS_DOC, priority=1),
            _col("Images", _IMAGES_DOC, priority=1),
        ),
        _print_statefulset,
    ),
    ("", "ReplicationController"): _Printer(
        (
            _NAME_COL,
            _col("Desired", "Replicas is the number of desired replicas."),
            _col("Current", "Replicas is the most recently observed number of replicas."),
            _col("Ready", "The number of ready replicas for this replication controller."),
            _AGE_COL,
            _col("Containers", _CONTAINERS_DOC, priority=1),
            _col("Images", _IMAGES_DOC, priority=1),
            _col("Selector", _SELECTOR_DOC, priority=1),
        ),
        _print_replication_controller,
    ),
    ("batch", "Job"): _Printer(
        (
            _NAME_COL,
            _col("Status", "Status of the job."),
            _col(
                "Completions",
                "The desired number of successfully finished pods the job should be run with.",
            ),
            _col("Duration", "Time required to complete the job."),
            _AGE_COL,
            _col("Containers", _CONTAINERS_DOC, priority=1),
            _col("Images", _IMAGES_DOC, priority=1),
            _col("Selector", _SELECTOR_DOC, priority=1),
        ),
        _print_job,
    ),
    ("batch", "CronJob"): _Printer(
        (
            _NAME_COL,
            _col(
                "Schedule", "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron."
            ),
            _col("Timezone", "The time zone name for the given schedule."),
            _col("Suspend", "This flag tells the controller to suspend subsequent executions."),
            _col("Active", "A list of pointers to currently running jobs."),
            _col(
                "Last Schedule",
                "Information when was the last time the job was successfully scheduled.",
            ),
            _AGE_COL,
            _col("Containers", _CONTAINERS_DOC, priority=1),
            _col("Images", _IMAGES_DOC, priority=1),
            _col("Selector", _SELECTOR_DOC, priority=1),
        ),
        _print_cronjob,
    ),
    ("policy", "PodDisruptionBudget"): _Printer(
        (
            _NAME_COL,
            _col(
                "Min Available", "The minimum number of pods that must be available simultaneously."
            ),
            _col(
                "Max Unavailable",
                "The maximum number of pods that may be unavailable simultaneously.",
            ),
            _col(
                "Allowed Disruptions",
                "Calculated number of pods that may be disrupted at this time.",
            ),
            _AGE_COL,
        ),
        _print_pdb,
    ),
    **{
        ("rbac.authorization.k8s.io", kind): _Printer(
            (_NAME_COL, _col("Created At", _CREATED_DOC, "date")), _print_created_at
        )
        for kind in ("Role", "ClusterRole")
    },
    **{
        ("rbac.authorization.k8s.io", kind): _Printer(
            (
                _NAME_COL,
                _col("Role", "Role for this binding."),
                _AGE_COL,
                _col("Users", "Users in the binding.", priority=1),
                _col("Groups", "Groups in the binding.", priority=1),
                _col("ServiceAccounts", "ServiceAccounts in the binding.", priority=1),
            ),
            _print_binding,
        )
        for kind in ("RoleBinding", "ClusterRoleBinding")
    },
    ("apiregistration.k8s.io", "APIService"): _Printer(
        (
            _NAME_COL,
            _col("Service", "The reference to the service that hosts this API endpoint."),
            _col("Available", "Whether this service is available."),
            _AGE_COL,
        ),
        _print_apiservice,
    ),
    ("discovery.k8s.io", "EndpointSlice"): _Printer(
        (
            _NAME_COL,
            _col("AddressType", "The type of address carried by this EndpointSlice."),
            _col("Ports", "Ports provided by this EndpointSlice."),
            _col("Endpoints", "Endpoints in this EndpointSlice."),
            _AGE_COL,
        ),
        _print_endpointslice,
    ),
    ("scheduling.k8s.io", "PriorityClass"): _Printer(
        (
            _NAME_COL,
            _col("Value", "The value of this priority class.", "integer"),
            _col(
                "Global-Default",
                "globalDefault specifies whether this PriorityClass should be considered as "
                "the default priority.",
                "boolean",
            ),
            _AGE_COL,
            _col(
                "PreemptionPolicy",
                "PreemptionPolicy is the Policy for preempting pods with lower priority.",
            ),
        ),
        _print_priority_class,
    ),
    ("storage.k8s.io", "StorageClass"): _Printer(
        (
            _NAME_COL,
            _col("Provisioner", "Indicates the type of the provisioner."),
            _col("ReclaimPolicy", "Indicates the type of the reclaim policy."),
            _col(
                "VolumeBindingMode",
                "Indicates how PersistentVolumeClaims should be provisioned and bound.",
            ),
            _col(
                "AllowVolumeExpansion",
                "Indicates whether the storage class allow volume expand.",
                "boolean",
            ),
            _AGE_COL,
        ),
        _print_storage_class,
    ),
    ("", "PersistentVolumeClaim"): _Printer(
        (
            _NAME_COL,
            _col(
                "Status",
                "The phase indicates if a volume is available, bound to a claim, or released "
                "by a claim.",
            ),
            _col(
                "Volume",
                "VolumeName is the binding reference to the PersistentVolume backing this claim.",
            ),
            _col("Capacity", "Capacity represents the actual resources of the underlying volume."),
            _col(
                "Access Modes",
                "AccessModes contains the desired access modes the volume should have.",
            ),
            _col(
                "StorageClass",
                "StorageClassName is the name of the StorageClass required by the claim.",
            ),
            _col("VolumeAttributesClass", "VolumeAttributesClassName of the claim."),
            _AGE_COL,
            _col(
                "VolumeMode",
                "volumeMode defines what type of volume is required by the claim.",
                priority=1,
            ),
        ),
        _print_pvc,
    ),
    ("", "PersistentVolume"): _Printer(
        (
            _NAME_COL,
            _col(
                "Capacity",
                "capacity is the description of the persistent volume's resources and capacity.",
            ),
            _col("Access Modes", "accessModes contains all ways the volume can be mounted."),
            _col(
                "Reclaim Policy",
                "persistentVolumeReclaimPolicy defines what happens to a persistent volume "
                "when released from its claim.",
            ),
            _col(
                "Status",
                "phase indicates if a volume is available, bound to a claim, or released by a"
                " claim.",
            ),
            _col(
                "Claim",
                "claimRef is part of a bi-directional binding between PersistentVolume and "
                "PersistentVolumeClaim.",
            ),
            _col(
                "StorageClass",
                "storageClassName is the name of StorageClass to which this persistent volume"
                " belongs.",
            ),
            _col(
                "VolumeAttributesClass",
                "Name of VolumeAttributesClass to which this persistent volume belongs.",
            ),
            _col("Reason", "reason is a brief CamelCase string that describes any failure."),
            _AGE_COL,
            _col(
                "VolumeMode",
                "volumeMode defines if a volume is intended to be used with a formatted "
                "filesystem or to remain in raw block state.",
                priority=1,
            ),
        ),
        _print_pv,
    ),
    ("autoscaling", "HorizontalPodAutoscaler"): _Printer(
        (
            _NAME_COL,
            _col(
                "Reference",
                "reference to scaled resource; horizontal pod autoscaler will learn the "
                "current resource consumption and will set the desired number of pods by "
                "using its Scale subresource.",
            ),
            _col(
                "Targets",
                "metrics contains the specifications for which to use to calculate the "
                "desired replica count.",
            ),
            _col(
                "MinPods",
                "minReplicas is the lower limit for the number of replicas to which the "
                "autoscaler can scale down.",
            ),
            _col(
                "MaxPods",
                "maxReplicas is the upper limit for the number of replicas to which the "
                "autoscaler can scale up.",
                "integer",
            ),
            _col(
                "Replicas",
                "currentReplicas is current number of replicas of pods managed by this autoscaler.",
                "integer",
            ),
            _AGE_COL,
        ),
        _print_hpa,
    ),
    ("apps", "ControllerRevision"): _Printer(
        (
            _NAME_COL,
            _col("Controller", "Controller of the object"),
            _col(
                "Revision",
                "Revision indicates the revision of the state represented by Data.",
                "integer",
            ),
            _AGE_COL,
        ),
        _print_controller_revision,
    ),
    ("networking.k8s.io", "NetworkPolicy"): _Printer(
        (
            _NAME_COL,
            _col("Pod-Selector", "Selects the pods to which this NetworkPolicy object applies."),
            _AGE_COL,
        ),
        _print_network_policy,
    ),
    ("networking.k8s.io", "IngressClass"): _Printer(
        (
            _NAME_COL,
            _col("Controller", "Controller that is responsible for handling this class"),
            _col("Parameters", "A reference to a resource with additional parameters"),
            _AGE_COL,
        ),
        _print_ingress_class,
    ),
    ("", "ResourceQuota"): _Printer(
        (
            _NAME_COL,
            _col(
                "Request",
                "Request represents a minimum amount of cpu/memory that a container may consume.",
            ),
            _col(
                "Limit",
                "Limits control the maximum amount of cpu/memory that a container may use "
                "independent of contention on the node.",
            ),
            _AGE_COL,
        ),
        _print_resource_quota,
    ),
    # no printer in kube: rest.NewDefaultTableConvertor (pkg/registry/core/limitrange)
    ("", "LimitRange"): _Printer(
        (_NAME_COL, _col("Created At", _CREATED_DOC, "date")),
        _print_created_at,
        rows_null_when_empty=True,
    ),
    ("node.k8s.io", "RuntimeClass"): _Printer(
        (
            _NAME_COL,
            _col("Handler", "Handler is the name of the underlying runtime and configuration."),
            _AGE_COL,
        ),
        _print_runtime_class,
    ),
    **{
        ("admissionregistration.k8s.io", kind): _Printer(
            (
                _NAME_COL,
                _col("Webhooks", "Webhooks indicates the number of webhooks.", "integer"),
                _AGE_COL,
            ),
            _print_webhooks,
        )
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
    },
}
_PRINTERS.update(_MORE_PRINTERS)


# --- custom resources ------------------------------------------------------------------


def _go_float(f: float) -> str:
    """Go's ``fmt.Sprint(float64)`` (``%v``): shortest digits, ``e`` form when the
    decimal exponent is below -4 or at least 6 (``1e+06``, ``1.5e-05``)."""
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0:
        return "-0" if math.copysign(1.0, f) < 0 else "0"
    sign, digits, exponent = Decimal(repr(f)).normalize().as_tuple()
    assert isinstance(exponent, int)
    ds = "".join(map(str, digits))
    point = len(ds) + exponent  # decimal point position relative to the digit string
    x = point - 1
    neg = "-" if sign else ""
    if x < -4 or x >= 6:
        mantissa = ds[0] + ("." + ds[1:] if len(ds) > 1 else "")
        return f"{neg}{mantissa}e{'+' if x >= 0 else '-'}{abs(x):02d}"
    if point <= 0:
        return f"{neg}0.{'0' * -point}{ds}"
    if point >= len(ds):
        return f"{neg}{ds}{'0' * (point - len(ds))}"
    return f"{neg}{ds[:point]}.{ds[point:]}"


def _go_json(value: Any) -> str:
    """``json.Marshal`` of a decoded JSON value: compact, sorted keys, HTML escaped."""
    text = json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _text(value: Any) -> str:
    """``JSONPath.PrintResults`` of one value (what a ``string`` column shows)."""
    if value is None:
        return "<no value>"
    if isinstance(value, dict | list):
        return _go_json(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _go_float(value)
    return str(value)


def _typed_cell(col_type: str, value: Any, now: datetime) -> Cell:
    """``cellForJSONValue``: a non-string column's cell, None when the type does not fit."""
    if value is None or (isinstance(value, bool) and col_type in ("integer", "number")):
        return None
    if col_type == "integer" and isinstance(value, int | float):
        return int(value)
    if col_type == "number" and isinstance(value, int | float):
        return float(value)
    if col_type == "boolean" and isinstance(value, bool):
        return value
    if col_type == "string" and isinstance(value, str):
        return value
    if col_type == "date" and isinstance(value, str):
        if value in ("", "null"):
            return "<unknown>"
        ts = _parse_time(value)
        return "<invalid>" if ts is None else human_duration(now - ts)
    return None


def _custom_printer(
    crd_columns: list[dict[str, Any]] | None,
) -> tuple[tuple[JsonDict, ...], Callable[[JsonDict, datetime], _Row]]:
    columns = crd_columns or [
        {
            "name": "Age",
            "type": "date",
            "jsonPath": ".metadata.creationTimestamp",
            "description": _CREATED_DOC,
        }
    ]
    defs: list[JsonDict] = [_NAME_COL]
    paths: list[tuple[_Step, ...] | None] = []
    for col in columns:
        json_path = str(col.get("jsonPath", ""))
        defs.append(
            _col(
                str(col.get("name", "")),
                str(col.get("description") or "")
                or f"Custom resource definition column (in JSONPath format): {json_path}",
                str(col.get("type", "")),
                fmt=str(col.get("format") or ""),
                priority=_int(col.get("priority")),
            )
        )
        try:
            paths.append(_parse_jsonpath(json_path))
        except JsonPathError:
            paths.append(None)

    def row(obj: JsonDict, now: datetime) -> _Row:
        cells: list[Cell] = [_name(obj)]
        for col_def, steps in zip(defs[1:], paths, strict=True):
            found = _apply(steps, [obj]) if steps is not None else []
            if not found:
                cells.append(None)
                continue
            value = found[0]  # kube prints only the first match
            if col_def["type"] == "string":
                cells.append(_text(value))
            else:
                cells.append(_typed_cell(col_def["type"], value, now))
        return cells, None

    return tuple(defs), row


# --- the Table -------------------------------------------------------------------------


def _row_object(obj: JsonDict, include_object: str) -> JsonDict | None:
    if include_object == "None":
        return None
    if include_object == "Object":
        return copy.deepcopy(obj)
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": TABLE_API_VERSION,
        "metadata": copy.deepcopy(obj.get("metadata") or {}),
    }


def to_table(
    kind: str,
    group: str,
    objs: list[dict[str, Any]],
    *,
    list_metadata: dict[str, Any],
    include_object: str = "Metadata",
    now: datetime | None = None,
    crd_columns: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The ``meta.k8s.io/v1 Table`` kube-apiserver answers for ``objs``.

    Args:
        kind: the objects' kind (``Pod``); with ``group`` it picks the printer.
        group: the API group (``""`` for core); ``events.k8s.io`` Events are printed
            through their core view.
        objs: the objects, as served in the requested version (one for a GET).
        list_metadata: the list's ``metadata`` (``resourceVersion``, ``continue``,
            ``remainingItemCount``); for a single GET, ``{"resourceVersion": ...}``.
        include_object: the ``includeObject`` parameter: ``None``, ``Metadata`` (also
            ``""``, the default) or ``Object``.
        now: the instant ages are measured against; default the current UTC time.
        crd_columns: for a custom resource, the served version's
            ``additionalPrinterColumns`` (name, type, jsonPath, description, priority,
            format); None or empty prints ``Name``, ``Age``.

    Raises:
        ValueError: ``include_object`` is not one kube accepts (``unrecognized
            includeObject value: "x"``; a 400 BadRequest).
    """
    include = include_object or "Metadata"
    if include not in INCLUDE_OBJECT_VALUES:
        raise ValueError(f'unrecognized includeObject value: "{include_object}"')
    at = now if now is not None else datetime.now(UTC)
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)

    printer = _PRINTERS.get((group, kind))
    if printer is None:
        columns, row_fn = _custom_printer(crd_columns)
        printer = _Printer(columns, row_fn)

    rows: list[JsonDict] = []
    for obj in objs:
        cells, conditions = printer.row(obj, at)
        row: JsonDict = {"cells": cells}
        if conditions:
            row["conditions"] = conditions
        row["object"] = _row_object(obj, include)
        rows.append(row)

    metadata: JsonDict = {}
    for key in ("resourceVersion", "continue"):
        if list_metadata.get(key):
            metadata[key] = list_metadata[key]
    if list_metadata.get("remainingItemCount") is not None:
        metadata["remainingItemCount"] = list_metadata["remainingItemCount"]

    return {
        "kind": "Table",
        "apiVersion": TABLE_API_VERSION,
        "metadata": metadata,
        "columnDefinitions": [dict(c) for c in printer.columns],
        "rows": None if not rows and printer.rows_null_when_empty else rows,
    }

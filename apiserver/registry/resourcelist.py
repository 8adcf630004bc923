"""Validation of resource lists and their quantities, as ``pkg/apis/core/validation`` does it.

The rules kube-apiserver 1.36 applies to the quantities of the built-in kinds, with its
field paths and messages:

* resource names (``validateResourceName``, ``validateContainerResourceName``,
  ``ValidateResourceQuotaResourceName``) and the predicates of
  ``pkg/apis/core/helper`` (standard, native, extended, huge page, integer resources);
* ``ValidateResourceQuantityValue`` (not negative; a whole number for the integer
  resources: ``pods``, ``services``, extended resources, ...);
* ``validateResourceRequirements`` (containers, pod-level resources, pod and RuntimeClass
  overhead): requests within limits, equal to them for resources that cannot be
  overcommitted, huge pages in whole pages and with cpu or memory;
* the pod spec's other quantities (``emptyDir.sizeLimit``, an ephemeral volume's claim
  template, pod-level resources against the containers');
* ResourceQuota (``spec.hard``, ``status.hard``, ``status.used``), LimitRange
  (``ValidateLimitRange``: min <= defaultRequest <= default <= max, ratios),
  PersistentVolumeClaim storage, PersistentVolume capacity, Node capacity and
  allocatable, RuntimeClass overhead, CSIStorageCapacity capacity.

Go ranges over maps in random order; where kube's messages would come in that order this
module uses the sorted one (a single bad entry reads the same either way).

Not checked (nothing local needs them yet): the quota scopes, the DRA kinds' capacities,
HorizontalPodAutoscaler metric targets, container ``claims`` against the pod's
``resourceClaims``.

Thread-safety: pure functions; safe to share between threads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from apiserver.api.field import FieldError, GoValue, forbidden, invalid, not_supported, required
from apiserver.api.gofmt import go_json
from apiserver.api.quantity import ZERO, Quantity, QuantityError, from_json, parse
from manager.labels import is_qualified_name

__all__ = [
    "container_resources",
    "limit_range",
    "node",
    "nonnegative",
    "persistent_volume_capacity",
    "pod_spec",
    "positive",
    "pvc_spec",
    "resource_quota",
    "runtime_class",
]

JsonDict = dict[str, Any]
NameCheck = Callable[[str, str], list[FieldError]]

_NOT_INTEGER: Final = "must be an integer"
_NEGATIVE: Final = "must be greater than or equal to 0"
_NOT_POSITIVE: Final = "must be greater than zero"
_HUGE_PAGES: Final = "hugepages-"
_DEFAULT_NAMESPACE: Final = "kubernetes.io/"

_STANDARD_CONTAINER: Final = frozenset({"cpu", "memory", "ephemeral-storage"})
_STANDARD_QUOTA: Final = frozenset(
    {
        "cpu",
        "memory",
        "ephemeral-storage",
        "requests.cpu",
        "requests.memory",
        "requests.storage",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
        "pods",
        "resourcequotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "persistentvolumeclaims",
        "configmaps",
        "services.nodeports",
        "services.loadbalancers",
    }
)
_STANDARD: Final = _STANDARD_QUOTA | {"storage"}
_INTEGER: Final = frozenset(
    {
        "pods",
        "resourcequotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
    }
)
_POD_LEVEL: Final = ("cpu", "memory")
_LIMIT_TYPES: Final = frozenset({"Pod", "Container", "PersistentVolumeClaim"})


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _quantities(resources: Any) -> dict[str, Quantity]:
    """A decoded ``ResourceList`` (the decoder refused what does not parse)."""
    out: dict[str, Quantity] = {}
    for name, value in _map(resources).items():
        try:
            out[str(name)] = from_json(value)
        except QuantityError:
            continue
    return out


# --- pkg/apis/core/helper -------------------------------------------------------------------


def _huge_pages(name: str) -> bool:
    return name.startswith(_HUGE_PAGES)


def _quota_huge_pages(name: str) -> bool:
    return name.startswith((_HUGE_PAGES, "requests." + _HUGE_PAGES))


def _native(name: str) -> bool:
    """``IsNativeResource``: unqualified, or in the kubernetes.io/ namespace."""
    return "/" not in name or _DEFAULT_NAMESPACE in name


def _extended(name: str) -> bool:
    """``IsExtendedResourceName``."""
    if _native(name) or name.startswith("requests."):
        return False
    return not is_qualified_name("requests." + name)


def _overcommit_allowed(name: str) -> bool:
    return _native(name) and not _huge_pages(name)


def _integer(name: str) -> bool:
    """``IsIntegerResourceName``."""
    return name in _INTEGER or _extended(name)


# --- names ----------------------------------------------------------------------------------


def _resource_name(name: str, path: str) -> list[FieldError]:
    """``validateResourceName``."""
    errs = [invalid(path, name, m) for m in is_qualified_name(name)]
    if errs:
        return errs
    if "/" not in name and not (name in _STANDARD or _quota_huge_pages(name)):
        return [invalid(path, name, "must be a standard resource type or fully qualified")]
    return []


def _container_resource_name(name: str, path: str) -> list[FieldError]:
    """``validateContainerResourceName``."""
    errs = _resource_name(name, path)
    if "/" not in name:
        if not (name in _STANDARD_CONTAINER or _huge_pages(name)):
            errs.append(invalid(path, name, "must be a standard resource for containers"))
    elif not _native(name) and not _extended(name):
        errs.append(invalid(path, name, "doesn't follow extended resource name standard"))
    return errs


def _pod_resource_name(name: str, path: str) -> list[FieldError]:
    """``validatePodResourceName``: the resources pod-level requirements may name."""
    errs = _resource_name(name, path)
    if errs:
        return errs
    if name not in _POD_LEVEL and not _huge_pages(name):
        return [not_supported(path, name, list(_POD_LEVEL))]
    return []


def _quota_resource_name(name: str, path: str) -> list[FieldError]:
    """``ValidateResourceQuotaResourceName``."""
    errs = _resource_name(name, path)
    if "/" not in name and not (name in _STANDARD_QUOTA or _quota_huge_pages(name)):
        errs.append(invalid(path, name, "must be a standard resource for quota"))
    return errs


# --- values ---------------------------------------------------------------------------------


def nonnegative(q: Quantity, path: str) -> list[FieldError]:
    """``ValidateNonnegativeQuantity``."""
    return [invalid(path, str(q), _NEGATIVE)] if q.sign() < 0 else []


def positive(q: Quantity, path: str) -> list[FieldError]:
    """``ValidatePositiveQuantityValue``."""
    return [invalid(path, str(q), _NOT_POSITIVE)] if q.sign() <= 0 else []


def _quantity_value(name: str, q: Quantity, path: str) -> list[FieldError]:
    """``ValidateResourceQuantityValue``."""
    errs = nonnegative(q, path)
    if _integer(name) and q.milli_value() % 1000 != 0:
        errs.append(invalid(path, str(q), _NOT_INTEGER))
    return errs


def _huge_page_problem(name: str, q: Quantity) -> str:
    """``validateResourceQuantityHugePageValue``: a whole number of pages ("" if so)."""
    try:
        page = parse(name.removeprefix(_HUGE_PAGES))
    except QuantityError:
        page = ZERO
    divisible = page.sign() > 0 and page.milli_value() % 1000 == 0
    if divisible and q.value() % page.value() == 0:
        return ""
    return f"{q} is not positive integer multiple of {name}"


# --- ResourceRequirements -------------------------------------------------------------------


def _requirements(resources: Any, path: str, name_check: NameCheck) -> list[FieldError]:
    """``validateResourceRequirements``: limits first, then requests against them."""
    res = _map(resources)
    limits, requests = _quantities(res.get("limits")), _quantities(res.get("requests"))
    errs: list[FieldError] = []
    cpu_or_memory = huge_pages = False
    for name in sorted(limits):
        q, p = limits[name], f"{path}.limits[{name}]"
        errs.extend(name_check(name, p))
        errs.extend(_quantity_value(name, q, p))
        if _huge_pages(name):
            huge_pages = True
            problem = _huge_page_problem(name, q)
            if problem:
                errs.append(invalid(p, str(q), problem))
        cpu_or_memory = cpu_or_memory or name in ("cpu", "memory")
    for name in sorted(requests):
        q, p = requests[name], f"{path}.requests[{name}]"
        errs.extend(name_check(name, p))
        errs.extend(_quantity_value(name, q, p))
        limit = limits.get(name)
        if limit is not None:
            if q != limit and not _overcommit_allowed(name):
                errs.append(
                    invalid(f"{path}.requests", str(q), f"must be equal to {name} limit of {limit}")
                )
            elif q > limit:
                errs.append(
                    invalid(
                        f"{path}.requests",
                        str(q),
                        f"must be less than or equal to {name} limit of {limit}",
                    )
                )
        elif not _overcommit_allowed(name):
            errs.append(
                required(f"{path}.limits", "Limit must be set for non overcommitable resources")
            )
        if _huge_pages(name):
            huge_pages = True
            problem = _huge_page_problem(name, q)
            if problem:
                errs.append(invalid(p, str(q), problem))
        cpu_or_memory = cpu_or_memory or name in ("cpu", "memory")
    if huge_pages and not cpu_or_memory:
        errs.append(forbidden(path, "HugePages require cpu or memory"))
    return errs


def container_resources(resources: Any, path: str) -> list[FieldError]:
    """``ValidateContainerResourceRequirements`` of one container's ``resources``."""
    return _requirements(resources, path, _container_resource_name)


def _overhead(overhead: Any, path: str) -> list[FieldError]:
    """``validateOverhead``: the overhead checked as the limits of a container."""
    return _requirements({"limits": overhead}, path, _container_resource_name)


# --- pod specs ------------------------------------------------------------------------------


def volume_source(volume: Mapping[str, Any], path: str) -> list[FieldError]:
    """The quantities of ``validateVolumeSource``: ``emptyDir.sizeLimit`` and an ephemeral
    volume's claim template."""
    errs: list[FieldError] = []
    empty_dir = volume.get("emptyDir")
    if isinstance(empty_dir, Mapping) and empty_dir.get("sizeLimit") is not None:
        size = _quantities({"s": empty_dir["sizeLimit"]}).get("s", ZERO)
        if size.sign() < 0:
            errs.append(
                forbidden(
                    f"{path}.emptyDir.sizeLimit",
                    "SizeLimit field must be a valid resource quantity",
                )
            )
    template = _map(_map(volume.get("ephemeral")).get("volumeClaimTemplate"))
    if template:
        errs.extend(
            _claim_storage(template.get("spec"), f"{path}.ephemeral.volumeClaimTemplate.spec")
        )
    return errs


def _aggregate_requests(spec: Mapping[str, Any]) -> dict[str, Quantity]:
    """``AggregateContainerRequests``: the containers' sum, at least what any init
    container needs with the sidecars started before it."""
    total: dict[str, Quantity] = {}
    for ctr in spec.get("containers") or []:
        for name, q in _quantities(_map(_map(ctr).get("resources")).get("requests")).items():
            total[name] = total[name] + q if name in total else q
    sidecars: dict[str, Quantity] = {}
    for raw in spec.get("initContainers") or []:
        ctr = _map(raw)
        own = _quantities(_map(ctr.get("resources")).get("requests"))
        if ctr.get("restartPolicy") == "Always":
            for name, q in own.items():
                sidecars[name] = sidecars[name] + q if name in sidecars else q
            continue
        for name, q in own.items():
            need = sidecars[name] + q if name in sidecars else q
            if name not in total or need > total[name]:
                total[name] = need
    for name, q in sidecars.items():
        total[name] = total[name] + q if name in total else q
    return total


def _pod_resources(spec: Mapping[str, Any], path: str) -> list[FieldError]:
    """``validatePodResources``: pod-level requirements, and the containers within them."""
    resources = spec.get("resources")
    if not isinstance(resources, Mapping):
        return []
    errs: list[FieldError] = []
    if resources.get("claims") is not None:
        errs.append(forbidden(f"{path}.claims", "claims cannot be set for Resources at pod-level"))
    errs.extend(_requirements(resources, path, _pod_resource_name))
    requests = _quantities(resources.get("requests"))
    aggregate = _aggregate_requests(spec)
    for name in sorted(aggregate):
        pod = requests.get(name, ZERO)
        if aggregate[name] > pod:
            errs.append(
                invalid(
                    f"{path}.requests[{name}]",
                    str(pod),
                    f"must be greater than or equal to aggregate container requests of "
                    f"{aggregate[name]}",
                )
            )
    limits = _quantities(resources.get("limits"))
    for i, raw in enumerate(spec.get("containers") or []):
        own = _quantities(_map(_map(raw).get("resources")).get("limits"))
        for name in sorted(own):
            if name in limits and own[name] > limits[name]:
                errs.append(
                    invalid(
                        f"{path}.containers[{i}][{name}].limits",
                        str(own[name]),
                        f"must be less than or equal to pod limits of {limits[name]}",
                    )
                )
    return errs


def pod_spec(spec: Mapping[str, Any], path: str) -> list[FieldError]:
    """The pod-level quantities of ``ValidatePodSpec`` (containers and volumes are checked
    where they are walked: :func:`container_resources`, :func:`volume_source`)."""
    errs = _pod_resources(spec, f"{path}.resources")
    if spec.get("overhead") is not None:
        errs.extend(_overhead(spec.get("overhead"), f"{path}.overhead"))
    return errs


# --- storage --------------------------------------------------------------------------------


def _claim_storage(spec: Any, path: str) -> list[FieldError]:
    """The storage request of ``ValidatePersistentVolumeClaimSpec`` (when it is given)."""
    requests = _map(_map(_map(spec).get("resources")).get("requests"))
    if "storage" not in requests:
        return []
    storage = _quantities(requests).get("storage", ZERO)
    return positive(storage, f"{path}.resources[storage]")


def pvc_spec(spec: Any, path: str) -> list[FieldError]:
    """A claim's storage request: ``must be greater than zero``."""
    return _claim_storage(spec, path)


def persistent_volume_capacity(spec: Mapping[str, Any]) -> list[FieldError]:
    """``ValidatePersistentVolumeSpec``'s capacity: exactly ``storage``, a positive one."""
    capacity = _map(spec.get("capacity"))
    errs: list[FieldError] = []
    if not capacity:
        errs.append(required("spec.capacity"))
    if "storage" not in capacity or len(capacity) > 1:
        shown = {str(k): str(v) for k, v in _quantities(capacity).items()}
        text = go_json(shown) if isinstance(spec.get("capacity"), Mapping) else "null"
        errs.append(not_supported("spec.capacity", GoValue(text), ["storage"]))
    for name, q in sorted(_quantities(capacity).items()):
        p = f"spec.capacity[{name}]"
        if q.value() < 0:
            errs.append(invalid(p, q.value(), "must be a valid resource quantity"))
        errs.extend(positive(q, p))
    return errs


# --- ResourceQuota, LimitRange, Node, RuntimeClass, CSIStorageCapacity ---------------------


def _quota_list(resources: Any, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for name, q in sorted(_quantities(resources).items()):
        p = f"{path}[{name}]"
        errs.extend(_quota_resource_name(name, p))
        errs.extend(_quantity_value(name, q, p))
    return errs


def resource_quota(obj: Mapping[str, Any]) -> list[FieldError]:
    """``ValidateResourceQuotaSpec`` and ``ValidateResourceQuotaStatus``: names a quota
    may track, values not negative, whole numbers for the object counts."""
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    errs = _quota_list(spec.get("hard"), "spec.hard")
    errs.extend(_quota_list(status.get("hard"), "status.hard"))
    errs.extend(_quota_list(status.get("used"), "status.used"))
    return errs


def _limit_type_name(value: str, path: str) -> list[FieldError]:
    errs = [invalid(path, value, m) for m in is_qualified_name(value)]
    if not errs and "/" not in value and value not in _LIMIT_TYPES:
        errs.append(invalid(path, value, "must be a standard limit type or fully qualified"))
    return errs


def limit_range(obj: Mapping[str, Any]) -> list[FieldError]:
    """``ValidateLimitRange``."""
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, raw in enumerate(_map(obj.get("spec")).get("limits") or []):
        item, path = _map(raw), f"spec.limits[{i}]"
        kind = str(item.get("type") or "")
        errs.extend(_limit_type_name(kind, f"{path}.type"))
        if kind in seen:
            errs.append(FieldError("Duplicate", f"{path}.type", kind))
        seen.add(kind)
        names = _container_resource_name if kind in ("Pod", "Container") else _resource_name
        lists: dict[str, dict[str, Quantity]] = {}
        for member in ("max", "min", "default", "defaultRequest"):
            lists[member] = _quantities(item.get(member))
            if kind == "Pod" and member in ("default", "defaultRequest"):
                if lists.pop(member):
                    errs.append(
                        forbidden(f"{path}.{member}", "may not be specified when `type` is 'Pod'")
                    )
                continue
            for name in sorted(lists[member]):
                errs.extend(names(name, f"{path}.{member}[{name}]"))
        if kind == "PersistentVolumeClaim" and not (
            "storage" in lists["min"] or "storage" in lists["max"]
        ):
            errs.append(
                required(
                    f"{path}.limits",
                    "either minimum or maximum storage value is required, but neither was provided",
                )
            )
        lists["maxLimitRequestRatio"] = _quantities(item.get("maxLimitRequestRatio"))
        for name in sorted(lists["maxLimitRequestRatio"]):
            errs.extend(names(name, f"{path}.maxLimitRequestRatio[{name}]"))
        keys = sorted({k for values in lists.values() for k in values})
        for name in keys:
            errs.extend(_limit_order(name, lists, path))
    return errs


def _limit_order(
    name: str, lists: Mapping[str, Mapping[str, Quantity]], path: str
) -> list[FieldError]:
    """The ordering rules of one resource of a LimitRange item."""
    low, high = lists["min"].get(name), lists["max"].get(name)
    default, request = lists.get("default", {}).get(name), lists.get("defaultRequest", {}).get(name)
    ratio = lists["maxLimitRequestRatio"].get(name)
    errs: list[FieldError] = []
    if low is not None and high is not None and low > high:
        errs.append(
            invalid(
                f"{path}.min[{name}]", str(low), f"min value {low} is greater than max value {high}"
            )
        )
    if request is not None and low is not None and low > request:
        errs.append(
            invalid(
                f"{path}.defaultRequest[{name}]",
                str(request),
                f"min value {low} is greater than default request value {request}",
            )
        )
    if request is not None and high is not None and request > high:
        errs.append(
            invalid(
                f"{path}.defaultRequest[{name}]",
                str(request),
                f"default request value {request} is greater than max value {high}",
            )
        )
    if request is not None and default is not None and request > default:
        errs.append(
            invalid(
                f"{path}.defaultRequest[{name}]",
                str(request),
                f"default request value {request} is greater than default limit value {default}",
            )
        )
    if default is not None and low is not None and low > default:
        errs.append(
            invalid(
                f"{path}.default[{name}]",
                str(low),
                f"min value {low} is greater than default value {default}",
            )
        )
    if default is not None and high is not None and default > high:
        errs.append(
            invalid(
                f"{path}.default[{name}]",
                str(high),
                f"default value {default} is greater than max value {high}",
            )
        )
    if ratio is not None and ratio < Quantity.of(1):
        errs.append(
            invalid(
                f"{path}.maxLimitRequestRatio[{name}]", str(ratio), f"ratio {ratio} is less than 1"
            )
        )
    if ratio is not None and low is not None and high is not None:
        # kube compares in milli-units when they fit an int64, in whole units otherwise
        limit = 1 << 63
        if max(ratio.value(), low.value(), high.value()) < (limit - 1) // 1000:
            ratio_value = ratio.milli_value() / 1000
            low_value, high_value = low.milli_value(), high.milli_value()
        else:
            ratio_value, low_value, high_value = ratio.value(), low.value(), high.value()
        bound = high_value / low_value if low_value else float("inf")
        if ratio_value > bound:
            errs.append(
                invalid(
                    f"{path}.maxLimitRequestRatio[{name}]",
                    str(ratio),
                    f"ratio {ratio} is greater than max/min = {bound:f}",
                )
            )
    if (
        not _overcommit_allowed(name)
        and default is not None
        and request is not None
        and default != request
    ):
        errs.append(
            invalid(
                f"{path}.defaultRequest[{name}]",
                str(request),
                f"default value {default} must equal to defaultRequest value {request} in {name}",
            )
        )
    return errs


def node(obj: Mapping[str, Any]) -> list[FieldError]:
    """``ValidateNodeResources``: capacity and allocatable (paths without brackets)."""
    status = _map(obj.get("status"))
    errs: list[FieldError] = []
    for member in ("capacity", "allocatable"):
        for name, q in sorted(_quantities(status.get(member)).items()):
            errs.extend(_quantity_value(name, q, f"status.{member}.{name}"))
    return errs


def runtime_class(obj: Mapping[str, Any]) -> list[FieldError]:
    """``ValidateRuntimeClass``'s overhead: ``overhead.limits[...]`` (the container rules)."""
    overhead = obj.get("overhead")
    if not isinstance(overhead, Mapping):
        return []
    return _overhead(overhead.get("podFixed"), "overhead")


def csi_storage_capacity(obj: Mapping[str, Any]) -> list[FieldError]:
    """``ValidateCSIStorageCapacity``: a capacity that is not negative."""
    if obj.get("capacity") is None:
        return []
    return nonnegative(_quantities({"c": obj["capacity"]}).get("c", ZERO), "capacity")

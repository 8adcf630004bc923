"""Defaulting and validation of objects, as kube-apiserver's registry strategies do them.

Before an object is stored, kube-apiserver defaults it (scheme defaulting, then the
``ServiceAccount``, ``Priority`` and ``DefaultTolerationSeconds`` admission plugins, then
``PrepareForCreate``) and validates it (``pkg/apis/*/validation``). This module does the
same for the built-in kinds the local API server serves:

* :func:`default` returns the defaulted copy of an object;
* :func:`validate` raises :class:`AdmissionError` listing *every* problem, with the
  ``StatusCause`` list and the 422 message kube-apiserver sends
  (``Deployment.apps "web" is invalid: [spec.selector: Required value, ...]``);
* :func:`service_update_keeps` carries a Service's allocated ``clusterIP`` across a PUT.

Field errors are rendered the way ``k8s.io/apimachinery/pkg/util/validation/field`` does
(``Invalid value: "A": ...``, ``json.Marshal`` of maps, lists and structs), and the name
checks return the messages of ``k8s.io/apimachinery/pkg/util/validation``.

Thread-safety: pure functions (``default`` calls the allocators it is given); safe to share
between threads.
"""

from __future__ import annotations

import base64
import copy
import ipaddress
import re
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

from apiserver.api.field import (
    AdmissionError,
    Cause,
    FieldError,
)
from apiserver.api.field import (
    GoValue as _Go,
)
from apiserver.api.field import (
    duplicate as _duplicate,
)
from apiserver.api.field import (
    forbidden as _forbidden,
)
from apiserver.api.field import (
    invalid as _invalid,
)
from apiserver.api.field import (
    label_selector_value as _label_selector,
)
from apiserver.api.field import (
    not_supported as _not_supported,
)
from apiserver.api.field import (
    render as _render,
)
from apiserver.api.field import (
    required as _required,
)
from apiserver.api.field import (
    str_list as _str_list,
)
from apiserver.api.field import (
    str_map as _str_map,
)
from apiserver.api.gofmt import quote
from apiserver.api.quantity import Quantity, QuantityError, from_json
from apiserver.api.resources import builtin_kinds
from apiserver.registry import resourcelist
from apiserver.storage.store import copy_json
from manager.labels import (
    SelectorError,
    is_qualified_name,
    is_valid_label_value,
    label_selector_from_dict,
    regex_error,
)

__all__ = [
    "DEFAULTED_KINDS",
    "AdmissionError",
    "Cause",
    "default",
    "is_dns1035_label",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "service_update_keeps",
    "validate",
    "validate_annotations",
    "validate_events_v1_create",
    "validate_labels",
]

JsonDict = dict[str, Any]
OtherValidator = Callable[[str, str, JsonDict, JsonDict | None], list[FieldError]]


class OtherDefaulter(Protocol):
    """Defaults, in place, an object of a kind :func:`default` does not know."""

    def __call__(self, kind: str, group: str, obj: JsonDict, *, creating: bool) -> None: ...


# --- name checks (k8s.io/apimachinery/pkg/util/validation) -----------------------------

_DNS1123_LABEL_FMT: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_MSG: Final = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_FMT: Final = f"{_DNS1123_LABEL_FMT}(\\.{_DNS1123_LABEL_FMT})*"
_DNS1123_SUBDOMAIN_MSG: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character"
)
_DNS1035_LABEL_FMT: Final = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_LABEL_MSG: Final = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
    "start with an alphabetic character, and end with an alphanumeric character"
)
_WILDCARD_FMT: Final = f"\\*\\.{_DNS1123_SUBDOMAIN_FMT}"
_WILDCARD_MSG: Final = (
    "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, "
    "which must consist of lower case alphanumeric characters, '-' or '.' and end with an "
    "alphanumeric character"
)
_CONFIG_KEY_FMT: Final = "[-._a-zA-Z0-9]+"
_CONFIG_KEY_MSG: Final = (
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'"
)


def _max_len(n: int) -> str:
    return f"must be no more than {n} characters"


def is_dns1123_label(value: str) -> list[str]:
    """kube's ``IsDNS1123Label``: errors for a lowercase RFC 1123 label (≤ 63); [] if valid."""
    errs: list[str] = []
    if len(value) > 63:
        errs.append(_max_len(63))
    if not re.fullmatch(_DNS1123_LABEL_FMT, value):
        if re.fullmatch(_DNS1123_SUBDOMAIN_FMT, value):
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    """kube's ``IsDNS1123Subdomain``: errors for a lowercase RFC 1123 subdomain (≤ 253)."""
    errs: list[str] = []
    if len(value) > 253:
        errs.append(_max_len(253))
    if not re.fullmatch(_DNS1123_SUBDOMAIN_FMT, value):
        errs.append(regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_dns1035_label(value: str) -> list[str]:
    """kube's ``IsDNS1035Label``: errors for a DNS-1035 label (starts with a letter, ≤ 63)."""
    errs: list[str] = []
    if len(value) > 63:
        errs.append(_max_len(63))
    if not re.fullmatch(_DNS1035_LABEL_FMT, value):
        errs.append(regex_error(_DNS1035_LABEL_MSG, _DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errs


def _is_wildcard_subdomain(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > 253:
        errs.append(_max_len(253))
    if not re.fullmatch(_WILDCARD_FMT, value):
        errs.append(regex_error(_WILDCARD_MSG, _WILDCARD_FMT, "*.example.com"))
    return errs


def _is_config_key(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > 253:
        errs.append(_max_len(253))
    if not re.fullmatch(_CONFIG_KEY_FMT, value):
        errs.append(
            regex_error(_CONFIG_KEY_MSG, _CONFIG_KEY_FMT, "key.name", "KEY_NAME", "key-name")
        )
    if value == ".":
        errs.append("must not be '.'")
    elif value == "..":
        errs.append("must not be '..'")
    elif value.startswith(".."):
        errs.append("must not start with '..'")
    return errs


def _is_port_name(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > 15:
        errs.append(_max_len(15))
    if not re.fullmatch("[-a-z0-9]+", value):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not re.search("[a-z]", value):
        errs.append("must contain at least one letter (a-z)")
    if "--" in value:
        errs.append("must not contain consecutive hyphens")
    if value and (value[0] == "-" or value[-1] == "-"):
        errs.append("must not begin or end with a hyphen")
    return errs


def _is_port_num(value: Any) -> list[str]:
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535:
        return []
    return ["must be between 1 and 65535, inclusive"]


def _map(value: Any) -> Mapping[str, Any]:
    """``value`` if it is a JSON object, else an empty one (malformed input validates as absent)."""
    return value if isinstance(value, Mapping) else {}


# --- metadata --------------------------------------------------------------------------

_ANNOTATIONS_LIMIT: Final = 256 * 1024


def _is_path_segment_name(value: str) -> list[str]:
    """``path.IsValidPathSegmentName``: RBAC and APIService names (``system:...``, ``v1.``)."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{c}'" for c in "/%" if c in value]


_NAME_RULES: Final[Mapping[str, Callable[[str], list[str]]]] = {
    "Namespace": is_dns1123_label,
    # 1.36 serves RelaxedServiceNameValidation: a Service name is an RFC 1123 label.
    "Service": is_dns1123_label,
    **dict.fromkeys(
        ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding", "APIService"),
        _is_path_segment_name,
    ),
}


def _labels(labels: Any, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if not isinstance(labels, Mapping):
        return errs
    for key, value in sorted(labels.items()):
        errs.extend(_invalid(path, key, m) for m in is_qualified_name(str(key)))
        if not isinstance(value, str):
            errs.append(_invalid(path, value, "label values must be strings"))
            continue
        errs.extend(_invalid(path, value, m) for m in is_valid_label_value(value))
    return errs


def _annotations(annotations: Any, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if not isinstance(annotations, Mapping):
        return errs
    size = 0
    for key, value in sorted(annotations.items()):
        errs.extend(_invalid(path, key, m) for m in is_qualified_name(str(key).lower()))
        size += len(str(key)) + len(str(value))
    if size > _ANNOTATIONS_LIMIT:
        errs.append(
            FieldError("TooLong", path, detail=f"may not be more than {_ANNOTATIONS_LIMIT} bytes")
        )
    return errs


def validate_labels(labels: Any, path: str) -> list[FieldError]:
    """``ValidateLabels``: every key a qualified name, every value a label value."""
    return _labels(labels, path)


def validate_annotations(annotations: Any, path: str) -> list[FieldError]:
    """``ValidateAnnotations``: qualified keys (lower-cased), 256 KiB in all."""
    return _annotations(annotations, path)


def _object_meta(kind: str, meta: Mapping[str, Any], path: str = "metadata") -> list[FieldError]:
    errs: list[FieldError] = []
    name = meta.get("name")
    if not name:
        errs.append(_required(f"{path}.name", "name or generateName is required"))
    else:
        rule = _NAME_RULES.get(kind, is_dns1123_subdomain)
        errs.extend(_invalid(f"{path}.name", name, m) for m in rule(str(name)))
    generation = meta.get("generation")
    if isinstance(generation, int) and generation < 0:
        errs.append(
            _invalid(f"{path}.generation", generation, "must be greater than or equal to 0")
        )
    errs.extend(_labels(meta.get("labels"), f"{path}.labels"))
    errs.extend(_annotations(meta.get("annotations"), f"{path}.annotations"))
    refs = meta.get("ownerReferences") or []
    controllers = 0
    for raw_ref in refs if isinstance(refs, list) else []:
        ref = _map(raw_ref)
        api_version = str(ref.get("apiVersion") or "")
        if not api_version.rsplit("/", 1)[-1]:
            errs.append(
                _invalid(
                    f"{path}.ownerReferences.apiVersion", api_version, "version must not be empty"
                )
            )
        for fld, what in (("kind", "kind"), ("name", "name"), ("uid", "uid")):
            if not ref.get(fld):
                errs.append(
                    _invalid(
                        f"{path}.ownerReferences.{fld}",
                        str(ref.get(fld) or ""),
                        f"{what} must not be empty",
                    )
                )
        if ref.get("controller") is True:
            controllers += 1
    if controllers > 1:
        errs.append(
            _invalid(
                f"{path}.ownerReferences",
                _Go("[]v1.OwnerReference{...}"),
                "Only one reference can have Controller set to true",
            )
        )
    finalizers = meta.get("finalizers") or []
    for fin in finalizers if isinstance(finalizers, list) else []:
        errs.extend(_invalid(f"{path}.finalizers", fin, m) for m in is_qualified_name(str(fin)))
    return errs


_STANDARD_FINALIZERS: Final = frozenset({"kubernetes", "orphan", "foregroundDeletion"})
# Kinds whose validation calls apimachinery's ValidateObjectMeta, not core's
_GENERIC_META_GROUPS: Final = frozenset({"apiextensions.k8s.io", "apiregistration.k8s.io"})


def _kube_finalizer_names(meta: Mapping[str, Any], path: str = "metadata") -> list[FieldError]:
    """core's ValidateObjectMeta on top of apimachinery's: each finalizer without a ``/``
    must be a standard one (``kubernetes``, ``orphan``, ``foregroundDeletion``)."""
    finalizers = meta.get("finalizers") or []
    return [
        _invalid(
            f"{path}.finalizers[{i}]",
            fin,
            "name is neither a standard finalizer name nor is it fully qualified",
        )
        for i, fin in enumerate(finalizers if isinstance(finalizers, list) else [])
        if "/" not in str(fin) and str(fin) not in _STANDARD_FINALIZERS
    ]


def _immutable(path: str, new: Any, old: Any, shown: Any = None) -> list[FieldError]:
    if new == old:
        return []
    return [_invalid(path, new if shown is None else shown, "field is immutable")]


# --- pods ------------------------------------------------------------------------------

_PROTOCOLS: Final = ["SCTP", "TCP", "UDP"]


def _container_ports(ports: Any, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    names: set[str] = set()
    for i, raw_port in enumerate(ports if isinstance(ports, list) else []):
        p = f"{path}[{i}]"
        port = _map(raw_port)
        name = port.get("name")
        if name:
            msgs = _is_port_name(str(name))
            if msgs:
                errs.extend(_invalid(f"{p}.name", name, m) for m in msgs)
            elif name in names:
                errs.append(_duplicate(f"{p}.name", name))
            else:
                names.add(str(name))
        number = port.get("containerPort")
        if not number:
            errs.append(_required(f"{p}.containerPort"))
        else:
            errs.extend(_invalid(f"{p}.containerPort", number, m) for m in _is_port_num(number))
        host = port.get("hostPort")
        if host:
            errs.extend(_invalid(f"{p}.hostPort", host, m) for m in _is_port_num(host))
        if "protocol" in port:
            protocol = port.get("protocol")
            if not protocol:
                errs.append(_required(f"{p}.protocol"))
            elif protocol not in _PROTOCOLS:
                errs.append(_not_supported(f"{p}.protocol", protocol, _PROTOCOLS))
    return errs


def _containers(
    containers: Any, path: str, volumes: set[str], names: set[str], *, required: bool
) -> list[FieldError]:
    errs: list[FieldError] = []
    items = containers if isinstance(containers, list) else []
    if required and not items:
        return [_required(path)]
    for i, raw_ctr in enumerate(items):
        p = f"{path}[{i}]"
        ctr = _map(raw_ctr)
        name = ctr.get("name")
        if not name:
            errs.append(_required(f"{p}.name"))
        else:
            errs.extend(_invalid(f"{p}.name", name, m) for m in is_dns1123_label(str(name)))
        if not ctr.get("image"):
            errs.append(_required(f"{p}.image"))
        errs.extend(_container_ports(ctr.get("ports"), f"{p}.ports"))
        for j, env in enumerate(ctr.get("env") or []):
            if not isinstance(env, Mapping) or not env.get("name"):
                errs.append(_required(f"{p}.env[{j}].name"))
        for j, raw_mount in enumerate(ctr.get("volumeMounts") or []):
            mount = _map(raw_mount)
            mname = mount.get("name")
            if not mname:
                errs.append(_required(f"{p}.volumeMounts[{j}].name"))
            elif mname not in volumes:
                errs.append(FieldError("NotFound", f"{p}.volumeMounts[{j}].name", mname))
            if not mount.get("mountPath"):
                errs.append(_required(f"{p}.volumeMounts[{j}].mountPath"))
        policy = ctr.get("imagePullPolicy")
        if policy is not None and policy not in ("Always", "IfNotPresent", "Never"):
            errs.append(
                _not_supported(f"{p}.imagePullPolicy", policy, ["Always", "IfNotPresent", "Never"])
            )
        errs.extend(resourcelist.container_resources(ctr.get("resources"), f"{p}.resources"))
        if name:
            if name in names:
                errs.append(_duplicate(f"{p}.name", name))
            else:
                names.add(str(name))
    return errs


def _pod_spec(spec: Any, path: str, *, is_pod: bool = False) -> list[FieldError]:
    spec = spec if isinstance(spec, Mapping) else {}
    errs: list[FieldError] = []
    volumes: set[str] = set()
    for i, raw_vol in enumerate(spec.get("volumes") or []):
        vol = _map(raw_vol)
        vname = vol.get("name")
        vpath = f"{path}.volumes[{i}].name"
        errs.extend(resourcelist.volume_source(vol, f"{path}.volumes[{i}]"))
        if not vname:
            errs.append(_required(vpath))
            continue
        errs.extend(_invalid(vpath, vname, m) for m in is_dns1123_label(str(vname)))
        if vname in volumes:
            errs.append(_duplicate(vpath, vname))
        volumes.add(str(vname))
    names: set[str] = set()
    errs.extend(
        _containers(spec.get("containers"), f"{path}.containers", volumes, names, required=True)
    )
    errs.extend(
        _containers(
            spec.get("initContainers"), f"{path}.initContainers", volumes, names, required=False
        )
    )
    restart = spec.get("restartPolicy")
    if restart is not None and restart not in ("Always", "OnFailure", "Never"):
        errs.append(
            _not_supported(f"{path}.restartPolicy", restart, ["Always", "OnFailure", "Never"])
        )
    dns = spec.get("dnsPolicy")
    dns_ok = ["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"]
    if dns is not None and dns not in dns_ok:
        errs.append(_not_supported(f"{path}.dnsPolicy", dns, dns_ok))
    grace = spec.get("terminationGracePeriodSeconds")
    if isinstance(grace, int) and grace < 0:
        errs.append(
            _invalid(
                f"{path}.terminationGracePeriodSeconds", grace, "must be greater than or equal to 0"
            )
        )
    errs.extend(resourcelist.pod_spec(spec, path))
    if spec.get("hostNetwork") is True:
        errs.extend(_host_network_ports(spec, path, is_pod=is_pod))
    return errs


def _host_network_ports(spec: Mapping[str, Any], path: str, *, is_pod: bool) -> list[FieldError]:
    """``validateHostNetwork``: host ports equal container ports (templates may leave 0)."""
    errs: list[FieldError] = []
    for key in ("containers", "initContainers"):
        for i, raw in enumerate(spec.get(key) or []):
            for j, raw_port in enumerate(_map(raw).get("ports") or []):
                port = _map(raw_port)
                host, container = port.get("hostPort") or 0, port.get("containerPort") or 0
                if (is_pod or host != 0) and host != container:
                    errs.append(
                        _invalid(
                            f"{path}.{key}[{i}].ports[{j}].hostPort",
                            host,
                            "must match `containerPort` when `hostNetwork` is true",
                        )
                    )
    return errs


_POD_UPDATABLE: Final = ",".join(
    [
        "`spec.containers[*].image`",
        "`spec.initContainers[*].image`",
        "`spec.activeDeadlineSeconds`",
        "`spec.tolerations` (only additions to existing tolerations)",
        "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously "
        "negative)",
    ]
)


def _go_field(key: str) -> str:
    return key[:1].upper() + key[1:]


def _pod_update(obj: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    """``ValidatePodUpdate``: only images, activeDeadlineSeconds, added tolerations and a
    negative grace period turned to 1 may change in a pod's spec."""
    new_spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    old_spec = old.get("spec") if isinstance(old.get("spec"), Mapping) else {}
    assert isinstance(new_spec, Mapping) and isinstance(old_spec, Mapping)
    munged = dict(new_spec)
    for key in ("containers", "initContainers"):
        new_ctrs, old_ctrs = new_spec.get(key), old_spec.get(key)
        if isinstance(new_ctrs, list) and isinstance(old_ctrs, list):
            munged[key] = [
                {**c, "image": o.get("image")}
                if isinstance(c, Mapping) and isinstance(o, Mapping) and "image" in o
                else c
                for c, o in zip(new_ctrs, old_ctrs, strict=False)
            ] + new_ctrs[len(old_ctrs) :]
    for key in ("activeDeadlineSeconds", "schedulingGates"):
        if key in old_spec:
            munged[key] = old_spec[key]
        else:
            munged.pop(key, None)
    old_tol = old_spec.get("tolerations") or []
    new_tol = new_spec.get("tolerations") or []
    if isinstance(new_tol, list) and all(t in new_tol for t in old_tol):
        if "tolerations" in old_spec:
            munged["tolerations"] = old_spec["tolerations"]
        else:
            munged.pop("tolerations", None)
    old_grace = old_spec.get("terminationGracePeriodSeconds")
    if (
        isinstance(old_grace, int)
        and old_grace < 0
        and new_spec.get("terminationGracePeriodSeconds") == 1
    ):
        munged["terminationGracePeriodSeconds"] = old_grace
    if munged == dict(old_spec):
        return []
    lines = ["  core.PodSpec{"]
    for key in sorted(set(munged) | set(old_spec)):
        before, after = old_spec.get(key), munged.get(key)
        if before == after:
            continue
        if key in old_spec:
            lines.append(f"- \t{_go_field(key)}: {_render(before)},")
        if key in munged:
            lines.append(f"+ \t{_go_field(key)}: {_render(after)},")
    lines.append("  }")
    return [
        _forbidden(
            "spec",
            f"pod updates may not change fields other than {_POD_UPDATABLE}\n" + "\n".join(lines),
        )
    ]


def _pod(obj: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> list[FieldError]:
    errs = _pod_spec(obj.get("spec"), "spec", is_pod=True)
    if old is not None:
        errs.extend(_pod_update(obj, old))
    return errs


# --- workloads -------------------------------------------------------------------------


def _nonnegative(spec: Mapping[str, Any], key: str, path: str) -> list[FieldError]:
    value = spec.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        return [_invalid(f"{path}.{key}", value, "must be greater than or equal to 0")]
    return []


def _label_selector_errors(sel: Mapping[str, Any], path: str) -> list[FieldError]:
    errs = _labels(sel.get("matchLabels"), f"{path}.matchLabels")
    for i, raw_expr in enumerate(sel.get("matchExpressions") or []):
        p = f"{path}.matchExpressions[{i}]"
        expr = _map(raw_expr)
        op = expr.get("operator")
        values = expr.get("values") or []
        if op in ("In", "NotIn"):
            if not values:
                errs.append(
                    _required(f"{p}.values", "must be specified when `operator` is 'In' or 'NotIn'")
                )
        elif op in ("Exists", "DoesNotExist"):
            if values:
                errs.append(
                    _forbidden(
                        f"{p}.values",
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    )
                )
        else:
            errs.append(_invalid(f"{p}.operator", op, "not a valid selector operator"))
        key = str(expr.get("key") or "")
        errs.extend(_invalid(f"{p}.key", key, m) for m in is_qualified_name(key))
    return errs


def _workload(kind: str, obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    errs = _nonnegative(spec, "replicas", "spec")
    sel = spec.get("selector")
    selector = None
    check_match = True
    if not isinstance(sel, Mapping):
        errs.append(_required("spec.selector"))  # a nil selector selects nothing: no match
    else:
        errs.extend(_label_selector_errors(sel, "spec.selector"))
        if not sel.get("matchLabels") and not sel.get("matchExpressions"):
            errs.append(
                _invalid(
                    "spec.selector",
                    _label_selector(sel),
                    f"empty selector is invalid for {kind.lower()}",
                )
            )
        try:
            selector = label_selector_from_dict(sel)
        except SelectorError:
            errs.append(_invalid("spec.selector", _label_selector(sel), "invalid label selector"))
            check_match = False
    template = spec.get("template")
    if not isinstance(template, Mapping):
        template = {}  # a struct in Go: never absent, validated as empty
    tmeta = template.get("metadata")
    tmeta = tmeta if isinstance(tmeta, Mapping) else {}
    tlabels = tmeta.get("labels")
    labels = tlabels if isinstance(tlabels, Mapping) else {}
    if check_match and (
        selector is None
        or (
            not selector.empty()
            and not selector.matches({str(k): str(v) for k, v in labels.items()})
        )
    ):
        errs.append(
            _invalid(
                "spec.template.metadata.labels",
                _str_map(tlabels),
                "`selector` does not match template `labels`",
            )
        )
    errs.extend(_labels(tlabels, "spec.template.metadata.labels"))
    errs.extend(_annotations(tmeta.get("annotations"), "spec.template.metadata.annotations"))
    tspec = template.get("spec")
    errs.extend(_pod_spec(tspec, "spec.template.spec"))
    restart = (tspec or {}).get("restartPolicy") if isinstance(tspec, Mapping) else None
    if restart is not None and restart != "Always":
        errs.append(_not_supported("spec.template.spec.restartPolicy", restart, ["Always"]))
    if kind == "Deployment":
        errs.extend(_deployment_strategy(spec))
        errs.extend(_nonnegative(spec, "minReadySeconds", "spec"))
        errs.extend(_nonnegative(spec, "revisionHistoryLimit", "spec"))
        deadline = spec.get("progressDeadlineSeconds")
        if isinstance(deadline, int):
            min_ready = spec.get("minReadySeconds") or 0
            if deadline <= min_ready:
                errs.append(
                    _invalid(
                        "spec.progressDeadlineSeconds",
                        deadline,
                        "must be greater than minReadySeconds",
                    )
                )
    else:
        errs.extend(_nonnegative(spec, "minReadySeconds", "spec"))
    if old is not None:
        old_spec = old.get("spec") if isinstance(old.get("spec"), Mapping) else {}
        old_sel = old_spec.get("selector") if isinstance(old_spec, Mapping) else None
        errs.extend(
            _immutable(
                "spec.selector",
                spec.get("selector"),
                old_sel,
                _label_selector(spec.get("selector")),
            )
        )
    return errs


def _int_or_percent(value: Any) -> tuple[int, bool] | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value, False
    if isinstance(value, str) and re.fullmatch(r"[0-9]+%", value):
        return int(value[:-1]), True
    return None


_PERCENT_MSG: Final = regex_error(
    "a valid percent string must be a numeric string followed by an ending '%'",
    "[0-9]+%",
    "1%",
    "93%",
)


def _deployment_strategy(spec: Mapping[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    strategy = spec.get("strategy")
    if not isinstance(strategy, Mapping):
        return errs
    stype = strategy.get("type")
    if stype is not None and stype not in ("Recreate", "RollingUpdate"):
        errs.append(_not_supported("spec.strategy.type", stype, ["Recreate", "RollingUpdate"]))
    rolling = strategy.get("rollingUpdate")
    if stype == "Recreate" and rolling is not None:
        errs.append(
            _forbidden(
                "spec.strategy.rollingUpdate",
                "may not be specified when strategy `type` is 'Recreate'",
            )
        )
    if stype == "RollingUpdate" and isinstance(rolling, Mapping):
        parsed: dict[str, tuple[int, bool]] = {}
        for key in ("maxUnavailable", "maxSurge"):
            value = rolling.get(key)
            if value is None:
                continue
            p = f"spec.strategy.rollingUpdate.{key}"
            result = _int_or_percent(value)
            if result is None:
                errs.append(_invalid(p, value, _PERCENT_MSG))
                continue
            parsed[key] = result
            number, percent = result
            if number < 0:
                errs.append(_invalid(p, value, "must be greater than or equal to 0"))
            if percent and number > 100 and key == "maxUnavailable":
                errs.append(_invalid(p, value, "must not be greater than 100%"))
        unavailable = parsed.get("maxUnavailable")
        surge = parsed.get("maxSurge")
        if unavailable is not None and surge is not None and unavailable[0] == 0 and surge[0] == 0:
            errs.append(
                _invalid(
                    "spec.strategy.rollingUpdate.maxUnavailable",
                    rolling.get("maxUnavailable"),
                    "may not be 0 when `maxSurge` is 0",
                )
            )
    return errs


# --- services --------------------------------------------------------------------------

_SERVICE_TYPES: Final = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]


def _service_port_struct(port: Mapping[str, Any]) -> _Go:
    target = port.get("targetPort")
    if isinstance(target, str):
        tp = f"intstr.IntOrString{{Type:1, IntVal:0, StrVal:{quote(target)}}}"
    else:
        tp = f'intstr.IntOrString{{Type:0, IntVal:{int(target or 0)}, StrVal:""}}'
    return _Go(
        f"core.ServicePort{{Name:{quote(str(port.get('name') or ''))}, "
        f"Protocol:{quote(str(port.get('protocol') or ''))}, AppProtocol:(*string)(nil), "
        f"Port:{int(port.get('port') or 0)}, TargetPort:{tp}, "
        f"NodePort:{int(port.get('nodePort') or 0)}}}"
    )


def _service(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    errs: list[FieldError] = []
    stype = spec.get("type") or "ClusterIP"
    cluster_ip = spec.get("clusterIP") or ""
    headless = cluster_ip == "None"
    ports = spec.get("ports") if isinstance(spec.get("ports"), list) else []
    assert isinstance(ports, list)
    if not ports and not headless and stype != "ExternalName":
        errs.append(_required("spec.ports"))
    if stype == "ExternalName":
        if cluster_ip:
            errs.append(_forbidden("spec.clusterIP", "may not be set for ExternalName services"))
        external = str(spec.get("externalName") or "")
        if not external:
            errs.append(_required("spec.externalName"))
        else:
            errs.extend(
                _invalid("spec.externalName", external, m)
                for m in is_dns1123_subdomain(external.removesuffix("."))
            )
    names: set[str] = set()
    seen: set[tuple[Any, Any]] = set()
    for i, raw_port in enumerate(ports):
        p = f"spec.ports[{i}]"
        port = _map(raw_port)
        name = port.get("name")
        if len(ports) > 1 and not name:
            errs.append(_required(f"{p}.name"))
        elif name:
            errs.extend(_invalid(f"{p}.name", name, m) for m in is_dns1123_label(str(name)))
            if name in names:
                errs.append(_duplicate(f"{p}.name", name))
            names.add(str(name))
        number = port.get("port")
        errs.extend(
            _invalid(f"{p}.port", number if number is not None else 0, m)
            for m in _is_port_num(number)
        )
        protocol = port.get("protocol", "TCP")
        if not protocol:
            errs.append(_required(f"{p}.protocol"))
        elif protocol not in _PROTOCOLS:
            errs.append(_not_supported(f"{p}.protocol", protocol, _PROTOCOLS))
        target = port.get("targetPort")
        if isinstance(target, str):
            errs.extend(_invalid(f"{p}.targetPort", target, m) for m in _is_port_name(target))
        elif target is not None:
            errs.extend(_invalid(f"{p}.targetPort", target, m) for m in _is_port_num(target))
        node_port = port.get("nodePort")
        if node_port:
            if stype not in ("NodePort", "LoadBalancer"):
                errs.append(
                    _forbidden(f"{p}.nodePort", f"may not be used when `type` is '{stype}'")
                )
            elif not (isinstance(node_port, int) and 30000 <= node_port <= 32767):
                errs.append(
                    _invalid(
                        f"{p}.nodePort",
                        node_port,
                        "provided port is not in the valid range. "
                        "The range of valid ports is 30000-32767",
                    )
                )
        key = (number, protocol)
        if key in seen:
            errs.append(_duplicate(p, _service_port_struct(port)))
        seen.add(key)
    if stype not in _SERVICE_TYPES:
        errs.append(_not_supported("spec.type", stype, _SERVICE_TYPES))
    if cluster_ip and not headless:
        try:
            ipaddress.ip_address(cluster_ip)
        except ValueError:
            errs.append(
                _invalid(
                    "spec.clusterIPs[0]",
                    cluster_ip,
                    "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                )
            )
    errs.extend(_labels(spec.get("selector"), "spec.selector"))
    if old is not None:
        old_spec = old.get("spec") if isinstance(old.get("spec"), Mapping) else {}
        assert isinstance(old_spec, Mapping)
        old_type = old_spec.get("type") or "ClusterIP"
        old_ips = old_spec.get("clusterIPs") or (
            [old_spec["clusterIP"]] if old_spec.get("clusterIP") else []
        )
        new_ips = spec.get("clusterIPs") or ([cluster_ip] if cluster_ip else [])
        if (
            "ExternalName" not in (stype, old_type)
            and old_ips
            and new_ips
            and new_ips[0] != old_ips[0]
        ):
            errs.append(
                _invalid("spec.clusterIPs[0]", _str_list(new_ips), "may not change once set")
            )
    return errs


def service_update_keeps(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A PUT of a Service keeps what the server allocated (a new dict; inputs untouched).

    A missing ``clusterIP``/``clusterIPs`` takes the old values (unless either side is an
    ExternalName service); ``clusterIPs`` follows a changed ``clusterIP`` so validation
    reports the change; every port gets ``protocol: TCP`` and ``targetPort = port`` again.
    """
    out = copy.deepcopy(new)
    spec = out.get("spec")
    if not isinstance(spec, dict):
        return out
    old_spec = old.get("spec") if isinstance(old.get("spec"), dict) else {}
    assert isinstance(old_spec, dict)
    external = "ExternalName" in (
        spec.get("type") or "ClusterIP",
        old_spec.get("type") or "ClusterIP",
    )
    if not external:
        if not spec.get("clusterIP") and not spec.get("clusterIPs"):
            if old_spec.get("clusterIP"):
                spec["clusterIP"] = old_spec["clusterIP"]
            if old_spec.get("clusterIPs"):
                spec["clusterIPs"] = copy.deepcopy(old_spec["clusterIPs"])
            for key in ("ipFamilies", "ipFamilyPolicy"):
                if key not in spec and key in old_spec:
                    spec[key] = copy.deepcopy(old_spec[key])
        elif spec.get("clusterIP") and (
            not spec.get("clusterIPs") or spec.get("clusterIPs") == old_spec.get("clusterIPs")
        ):
            spec["clusterIPs"] = [spec["clusterIP"], *list(old_spec.get("clusterIPs") or [])[1:]]
        elif spec.get("clusterIPs") and not spec.get("clusterIP"):
            spec["clusterIP"] = spec["clusterIPs"][0]
    _default_service_ports(spec)
    return out


# --- ingresses, leases, config ---------------------------------------------------------


def _ingress_backend(backend: Any, path: str) -> list[FieldError]:
    backend = backend if isinstance(backend, Mapping) else {}
    has_service = isinstance(backend.get("service"), Mapping)
    has_resource = isinstance(backend.get("resource"), Mapping)
    if has_service and has_resource:
        return [_invalid(path, "", "cannot set both resource and service backends")]
    if has_resource:
        return []
    if not has_service:
        return [_invalid(path, "", "resource or service backend is required")]
    errs: list[FieldError] = []
    service = backend["service"]
    name = service.get("name")
    if not name:
        errs.append(_required(f"{path}.service.name"))
    else:
        errs.extend(_invalid(f"{path}.service.name", name, m) for m in is_dns1123_label(str(name)))
    port = service.get("port")
    port = port if isinstance(port, Mapping) else {}
    port_name, number = port.get("name"), port.get("number")
    if port_name and number:
        errs.append(_invalid(path, "", "cannot set both port name & port number"))
    elif port_name:
        errs.extend(
            _invalid(f"{path}.service.port.name", port_name, m)
            for m in _is_port_name(str(port_name))
        )
    elif number:
        errs.extend(
            _invalid(f"{path}.service.port.number", number, m) for m in _is_port_num(number)
        )
    else:
        errs.append(_required(path, "port name or number is required"))
    return errs


_INVALID_PATH_SEQUENCES: Final = ("//", "/./", "/../", "%2f", "%2F")
_INVALID_PATH_SUFFIXES: Final = ("/..", "/.")
_PATH_TYPES: Final = ["Exact", "ImplementationSpecific", "Prefix"]


def _ingress(obj: Mapping[str, Any]) -> list[FieldError]:
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    errs: list[FieldError] = []
    rules = spec.get("rules") if isinstance(spec.get("rules"), list) else []
    assert isinstance(rules, list)
    default_backend = spec.get("defaultBackend")
    if not rules and default_backend is None:
        errs.append(
            _invalid(
                "spec",
                _Go("[]networking.IngressRule(nil)"),
                "either `defaultBackend` or `rules` must be specified",
            )
        )
    if default_backend is not None:
        errs.extend(_ingress_backend(default_backend, "spec.defaultBackend"))
    for i, raw_rule in enumerate(rules):
        p = f"spec.rules[{i}]"
        rule = _map(raw_rule)
        host = str(rule.get("host") or "")
        if host:
            try:
                ipaddress.ip_address(host)
                errs.append(_invalid(f"{p}.host", host, "must be a DNS name, not an IP address"))
            except ValueError:
                pass
            check = _is_wildcard_subdomain if "*" in host else is_dns1123_subdomain
            errs.extend(_invalid(f"{p}.host", host, m) for m in check(host))
        http = rule.get("http")
        if not isinstance(http, Mapping):
            continue
        paths = http.get("paths") or []
        if not paths:
            errs.append(_required(f"{p}.http.paths"))
        for j, raw_item in enumerate(paths):
            pp = f"{p}.http.paths[{j}]"
            item = _map(raw_item)
            path_type = item.get("pathType")
            value = str(item.get("path") or "")
            if path_type is None:
                errs.append(_required(f"{pp}.pathType", "pathType must be specified"))
                continue
            if path_type in ("Exact", "Prefix"):
                if not value.startswith("/"):
                    errs.append(_invalid(f"{pp}.path", value, "must be an absolute path"))
                if value:
                    for seq in _INVALID_PATH_SEQUENCES:
                        if seq in value:
                            errs.append(_invalid(f"{pp}.path", value, f"must not contain '{seq}'"))
                    for suffix in _INVALID_PATH_SUFFIXES:
                        if value.endswith(suffix):
                            errs.append(
                                _invalid(f"{pp}.path", value, f"cannot end with '{suffix}'")
                            )
            elif path_type == "ImplementationSpecific":
                if value and not value.startswith("/"):
                    errs.append(_invalid(f"{pp}.path", value, "must be an absolute path"))
            else:
                errs.append(_not_supported(f"{pp}.pathType", path_type, _PATH_TYPES))
            errs.extend(_ingress_backend(item.get("backend"), f"{pp}.backend"))
    class_name = spec.get("ingressClassName")
    if class_name:
        errs.extend(
            _invalid("spec.ingressClassName", class_name, m)
            for m in is_dns1123_subdomain(str(class_name))
        )
    return errs


def _lease(obj: Mapping[str, Any]) -> list[FieldError]:
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    errs: list[FieldError] = []
    duration = spec.get("leaseDurationSeconds")
    if isinstance(duration, int) and duration <= 0:
        errs.append(_invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    transitions = spec.get("leaseTransitions")
    if isinstance(transitions, int) and transitions < 0:
        errs.append(
            _invalid("spec.leaseTransitions", transitions, "must be greater than or equal to 0")
        )
    return errs


def _config_data(
    obj: Mapping[str, Any], old: Mapping[str, Any] | None, *, binary: bool
) -> list[FieldError]:
    errs: list[FieldError] = []
    data = obj.get("data") if isinstance(obj.get("data"), Mapping) else {}
    assert isinstance(data, Mapping)
    bdata = obj.get("binaryData") if isinstance(obj.get("binaryData"), Mapping) else {}
    assert isinstance(bdata, Mapping)
    for key in sorted(data):
        errs.extend(_invalid(f"data[{key}]", key, m) for m in _is_config_key(str(key)))
        if binary and key in bdata:
            errs.append(_invalid(f"data[{key}]", key, "duplicate of key present in binaryData"))
    if binary:
        for key in sorted(bdata):
            errs.extend(_invalid(f"binaryData[{key}]", key, m) for m in _is_config_key(str(key)))
    if old is not None and old.get("immutable") is True:
        for fld in ("data", "binaryData") if binary else ("data", "stringData"):
            if (obj.get(fld) or {}) != (old.get(fld) or {}):
                errs.append(_forbidden(fld, "field is immutable when `immutable` is set"))
        if obj.get("immutable") is not True:
            errs.append(_forbidden("immutable", "field is immutable when `immutable` is set"))
    return errs


def _event(obj: Mapping[str, Any]) -> list[FieldError]:
    """``legacyValidateEvent``: what every Event (core or events.k8s.io) must satisfy."""
    errs: list[FieldError] = []
    meta = _map(obj.get("metadata"))
    namespace = str(meta.get("namespace") or "")
    involved = str(_map(obj.get("involvedObject")).get("namespace") or "")
    if not obj.get("eventTime"):
        if not involved:
            if namespace not in ("", "default"):
                errs.append(
                    _invalid("involvedObject.namespace", involved, "does not match event.namespace")
                )
        elif namespace != involved:
            errs.append(
                _invalid("involvedObject.namespace", involved, "does not match event.namespace")
            )
    else:
        if not involved and namespace not in ("default", "kube-system"):
            errs.append(
                _invalid("involvedObject.namespace", involved, "does not match event.namespace")
            )
        controller = str(obj.get("reportingComponent") or "")
        if not controller:
            errs.append(_required("reportingController"))
        errs.extend(
            _invalid("reportingController", controller, m)
            for m in is_qualified_name(controller)
            if controller
        )
        instance = str(obj.get("reportingInstance") or "")
        if not instance:
            errs.append(_required("reportingInstance"))
        elif len(instance) > 128:
            errs.append(_invalid("reportingInstance", "", "can have at most 128 characters"))
        for key, limit in (("action", 128), ("reason", 128)):
            value = str(obj.get(key) or "")
            if not value:
                errs.append(_required(key))
            elif len(value) > limit:
                errs.append(_invalid(key, "", f"can have at most {limit} characters"))
        if len(str(obj.get("message") or "")) > 1024:
            errs.append(_invalid("message", "", "can have at most 1024 characters"))
    return errs


def validate_events_v1_create(obj: dict[str, Any]) -> None:
    """``ValidateEventCreate`` for ``events.k8s.io/v1`` (``obj`` is the core form).

    Raises:
        AdmissionError: 422 naming ``Event`` (kube's BeforeCreate names the internal
            type's first registered kind, the core group's).
    """
    meta = _map(obj.get("metadata"))
    errs = _event(obj)
    series = obj.get("series")
    if isinstance(series, Mapping):
        if int(series.get("count") or 0) < 2:
            errs.append(_invalid("series.count", "", "should be at least 2"))
        if not series.get("lastObservedTime"):
            errs.append(_required("series.lastObservedTime"))
    if not obj.get("eventTime"):
        errs.append(_required("eventTime"))
    if obj.get("type") not in ("Normal", "Warning"):
        errs.append(_invalid("type", "", f"has invalid value: {obj.get('type') or ''}"))
    for key in ("firstTimestamp", "lastTimestamp"):
        if obj.get(key):
            errs.append(_invalid(key, "", "needs to be unset"))
    if obj.get("count"):
        errs.append(_invalid("count", "", "needs to be unset"))
    source = _map(obj.get("source"))
    if source.get("component") or source.get("host"):
        errs.append(_invalid("source", "", "needs to be unset"))
    if errs:
        # Named by the internal type's first registered kind: the core Event.
        raise AdmissionError("Event", "", str(meta.get("name") or ""), [e.cause() for e in errs])


def _namespace(obj: Mapping[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    spec = obj.get("spec")
    finalizers = spec.get("finalizers") if isinstance(spec, Mapping) else None
    for i, fin in enumerate(finalizers if isinstance(finalizers, list) else []):
        text = str(fin)
        errs.extend(_invalid(f"spec.finalizers[{i}]", fin, m) for m in is_qualified_name(text))
        if "/" not in text and text != "kubernetes":
            errs.append(
                _invalid(
                    f"spec.finalizers[{i}]",
                    fin,
                    "name is neither a standard finalizer name nor is it fully qualified",
                )
            )
    return errs


def _crd_versions_repr(versions: list[Any]) -> _Go:
    items = []
    for raw_v in versions:
        v = _map(raw_v)
        items.append(
            "apiextensions.CustomResourceDefinitionVersion"
            f"{{Name:{quote(str(v.get('name') or ''))}, "
            f"Served:{'true' if v.get('served') else 'false'}, "
            f"Storage:{'true' if v.get('storage') else 'false'}}}"
        )
    return _Go("[]apiextensions.CustomResourceDefinitionVersion{" + ", ".join(items) + "}")


def _crd(obj: Mapping[str, Any]) -> list[FieldError]:
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    errs: list[FieldError] = []
    group = str(spec.get("group") or "")
    names = spec.get("names") if isinstance(spec.get("names"), Mapping) else {}
    assert isinstance(names, Mapping)
    plural = str(names.get("plural") or "")
    name = str((obj.get("metadata") or {}).get("name") or "")
    if name and name != f"{plural}.{group}":
        errs.append(_invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group'))
    if not group:
        errs.append(_required("spec.group"))
    elif msgs := is_dns1123_subdomain(group):
        errs.append(_invalid("spec.group", group, ",".join(msgs)))
    elif "." not in group:
        errs.append(_invalid("spec.group", group, "should be a domain with at least one dot"))
    scope = spec.get("scope")
    if not scope:
        errs.append(_required("spec.scope"))
    elif scope not in ("Cluster", "Namespaced"):
        errs.append(_not_supported("spec.scope", scope, ["Cluster", "Namespaced"]))
    versions = spec.get("versions") if isinstance(spec.get("versions"), list) else []
    assert isinstance(versions, list)
    seen: set[str] = set()
    unique = True
    storage = 0
    for i, raw_version in enumerate(versions):
        version = _map(raw_version)
        vname = str(version.get("name") or "")
        if vname in seen:
            unique = False
        seen.add(vname)
        if msgs := is_dns1035_label(vname):
            errs.append(_invalid(f"spec.versions[{i}].name", vname, ",".join(msgs)))
        if version.get("storage") is True:
            storage += 1
        schema = version.get("schema")
        if not isinstance(schema, Mapping) or not isinstance(
            schema.get("openAPIV3Schema"), Mapping
        ):
            errs.append(
                _required(f"spec.versions[{i}].schema.openAPIV3Schema", "schemas are required")
            )
    if not versions:
        errs.append(_required("spec.versions", "must have at least one version"))
    if not unique:
        errs.append(
            _invalid(
                "spec.versions", _crd_versions_repr(versions), "must contain unique version names"
            )
        )
    if storage != 1:
        errs.append(
            _invalid(
                "spec.versions",
                _crd_versions_repr(versions),
                "must have exactly one version marked as storage version",
            )
        )
    if not plural:
        errs.append(_required("spec.names.plural"))
    elif msgs := is_dns1035_label(plural):
        errs.append(_invalid("spec.names.plural", plural, ",".join(msgs)))
    singular = str(names.get("singular") or "")
    if singular and (msgs := is_dns1035_label(singular)):
        errs.append(_invalid("spec.names.singular", singular, ",".join(msgs)))
    kind = str(names.get("kind") or "")
    if not kind:
        errs.append(_required("spec.names.kind"))
    elif msgs := is_dns1035_label(kind.lower()):
        errs.append(
            _invalid(
                "spec.names.kind",
                kind,
                "may have mixed case, but should otherwise match: " + ",".join(msgs),
            )
        )
    list_kind = names.get("listKind")
    if list_kind is not None and not list_kind:
        errs.append(_required("spec.names.listKind"))
    return errs


# --- validate --------------------------------------------------------------------------


def validate(
    kind: str,
    group: str,
    obj: dict[str, Any],
    old: dict[str, Any] | None,
    *,
    others: OtherValidator | None = None,
) -> None:
    """Validate an object about to be created (``old is None``) or updated.

    The core kinds get their kind-specific checks; any other kind gets the metadata checks
    and what ``others`` finds (the other built-in kinds' validator; custom resources: none).

    Raises:
        AdmissionError: 422 Invalid listing every field error, in kube's order.
    """
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    errs = _object_meta(kind, meta)
    builtin = (kind, group)
    if builtin in builtin_kinds() and group not in _GENERIC_META_GROUPS:
        errs.extend(_kube_finalizer_names(meta))
    if builtin == ("Pod", ""):
        errs.extend(_pod(obj, old))
    elif builtin in (("Deployment", "apps"), ("ReplicaSet", "apps")):
        errs.extend(_workload(kind, obj, old))
    elif builtin == ("Service", ""):
        errs.extend(_service(obj, old))
    elif builtin == ("Ingress", "networking.k8s.io"):
        errs.extend(_ingress(obj))
    elif builtin == ("Lease", "coordination.k8s.io"):
        errs.extend(_lease(obj))
    elif builtin == ("Namespace", ""):
        errs.extend(_namespace(obj))
    elif builtin == ("ConfigMap", ""):
        errs.extend(_config_data(obj, old, binary=True))
    elif builtin == ("Secret", ""):
        errs.extend(_config_data(obj, old, binary=False))
        if old is not None:
            errs.extend(_immutable("type", obj.get("type"), old.get("type")))
    elif builtin == ("CustomResourceDefinition", "apiextensions.k8s.io"):
        errs.extend(_crd(obj))
    elif builtin == ("Event", ""):
        errs.extend(_event(obj))
    elif others is not None:  # the other built-in kinds (apiserver.registry.strategy)
        errs.extend(others(kind, group, obj, old))
    if errs:
        raise AdmissionError(kind, group, str(meta.get("name") or ""), [e.cause() for e in errs])


# --- defaulting ------------------------------------------------------------------------

_TOKEN_MOUNT_PATH: Final = "/var/run/secrets/kubernetes.io/serviceaccount"
_TOLERATED_TAINTS: Final = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def _pull_policy(image: str) -> str:
    """``Always`` for ``:latest`` or an untagged image, else ``IfNotPresent`` (digests too)."""
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        return "Always"
    return "Always" if last.rsplit(":", 1)[1] == "latest" else "IfNotPresent"


def _default_container(ctr: dict[str, Any]) -> None:
    ctr.setdefault("terminationMessagePath", "/dev/termination-log")
    ctr.setdefault("terminationMessagePolicy", "File")
    if not ctr.get("imagePullPolicy"):
        ctr["imagePullPolicy"] = _pull_policy(str(ctr.get("image") or ""))
    ctr.setdefault("resources", {})
    for port in ctr.get("ports") or []:
        if isinstance(port, dict) and not port.get("protocol"):
            port["protocol"] = "TCP"


def _default_pod_spec(spec: dict[str, Any]) -> None:
    """Scheme defaults of a PodSpec (these apply to templates too)."""
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    for key in ("containers", "initContainers", "ephemeralContainers"):
        for ctr in spec.get(key) or []:
            if isinstance(ctr, dict):
                _default_container(ctr)


def _qos_resources(resources: Any) -> dict[str, Quantity]:
    """The positive cpu and memory amounts of a resource list (``processResourceList``)."""
    out: dict[str, Quantity] = {}
    for name, value in (resources if isinstance(resources, Mapping) else {}).items():
        if name not in ("cpu", "memory"):
            continue
        try:
            amount = from_json(value)
        except QuantityError:
            continue
        if amount.sign() > 0:
            out[name] = amount
    return out


def _qos_class(spec: Mapping[str, Any]) -> str:
    """``qos.ComputePodQOS``: pod-level resources when set, else the containers' (init
    ones included); only positive cpu and memory amounts count."""
    requests: dict[str, Quantity] = {}
    limits: dict[str, Quantity] = {}
    guaranteed = True

    def add(into: dict[str, Quantity], amounts: Mapping[str, Quantity]) -> None:
        for name, amount in amounts.items():
            into[name] = into[name] + amount if name in into else amount

    pod_level = spec.get("resources")
    if isinstance(pod_level, Mapping):
        add(requests, _qos_resources(pod_level.get("requests")))
        found = _qos_resources(pod_level.get("limits"))
        add(limits, found)
        guaranteed = set(found) == {"cpu", "memory"}
    else:
        for key in ("containers", "initContainers"):
            for ctr in spec.get(key) or []:
                resources = ctr.get("resources") if isinstance(ctr, Mapping) else None
                resources = resources if isinstance(resources, Mapping) else {}
                add(requests, _qos_resources(resources.get("requests")))
                found = _qos_resources(resources.get("limits"))
                add(limits, found)
                if set(found) != {"cpu", "memory"}:
                    guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and any(limits.get(k) != v for k, v in requests.items()):
        guaranteed = False
    return "Guaranteed" if guaranteed and len(requests) == len(limits) else "Burstable"


def _default_host_ports(spec: dict[str, Any]) -> None:
    """A host-network pod's ports default their ``hostPort`` to the ``containerPort``."""
    if spec.get("hostNetwork") is not True:
        return
    for key in ("containers", "initContainers"):
        for ctr in spec.get(key) or []:
            for port in (ctr.get("ports") if isinstance(ctr, dict) else None) or []:
                if isinstance(port, dict) and not port.get("hostPort"):
                    port["hostPort"] = port.get("containerPort")


def _default_secret(obj: dict[str, Any]) -> None:
    """Conversion merges ``stringData`` into ``data`` (base64) and drops it."""
    obj.setdefault("type", "Opaque")
    string_data = obj.pop("stringData", None)
    if isinstance(string_data, dict) and string_data:
        data = obj.get("data")
        data = dict(data) if isinstance(data, dict) else {}
        for k, v in string_data.items():
            data[k] = base64.b64encode(str(v).encode()).decode()
        obj["data"] = data


def _default_pod(obj: dict[str, Any], suffix: Callable[[], str], *, plugins: bool) -> None:
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    _default_pod_spec(spec)
    _default_host_ports(spec)
    spec.setdefault("enableServiceLinks", True)
    for key in ("containers", "initContainers"):
        for ctr in spec.get(key) or []:
            resources = ctr.get("resources") if isinstance(ctr, dict) else None
            if isinstance(resources, dict) and isinstance(resources.get("limits"), dict):
                requests = resources.setdefault("requests", {})
                for name, value in resources["limits"].items():
                    requests.setdefault(name, value)
    if not plugins:
        return
    # ServiceAccount admission
    if not spec.get("serviceAccountName"):
        spec["serviceAccountName"] = spec.get("serviceAccount") or "default"
    spec["serviceAccount"] = spec["serviceAccountName"]
    if spec.get("automountServiceAccountToken") is not False:
        _mount_token(obj, spec, suffix)
    # Priority admission
    spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    # DefaultTolerationSeconds admission
    tolerations = spec.setdefault("tolerations", [])
    if isinstance(tolerations, list):
        for taint in _TOLERATED_TAINTS:
            covered = any(
                isinstance(t, Mapping)
                and (t.get("key") == taint or (not t.get("key") and t.get("operator") == "Exists"))
                and t.get("effect") in (None, "", "NoExecute")
                for t in tolerations
            )
            if not covered:
                tolerations.append(
                    {
                        "key": taint,
                        "operator": "Exists",
                        "effect": "NoExecute",
                        "tolerationSeconds": 300,
                    }
                )
    obj["status"] = {"phase": "Pending", "qosClass": _qos_class(spec)}


def _mount_token(obj: dict[str, Any], spec: dict[str, Any], suffix: Callable[[], str]) -> None:
    volumes = spec.setdefault("volumes", [])
    if not isinstance(volumes, list):
        return
    existing = next(
        (
            v["name"]
            for v in volumes
            if isinstance(v, dict) and str(v.get("name", "")).startswith("kube-api-access-")
        ),
        None,
    )
    name = existing or f"kube-api-access-{suffix()}"
    if existing is None:
        volumes.append(
            {
                "name": name,
                "projected": {
                    "defaultMode": 420,
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {
                            "configMap": {
                                "name": "kube-root-ca.crt",
                                "items": [{"key": "ca.crt", "path": "ca.crt"}],
                            }
                        },
                        {
                            "downwardAPI": {
                                "items": [
                                    {
                                        "path": "namespace",
                                        "fieldRef": {
                                            "apiVersion": "v1",
                                            "fieldPath": "metadata.namespace",
                                        },
                                    }
                                ]
                            }
                        },
                    ],
                },
            }
        )
    for key in ("containers", "initContainers"):
        for ctr in spec.get(key) or []:
            if not isinstance(ctr, dict):
                continue
            mounts = ctr.setdefault("volumeMounts", [])
            if not any(
                isinstance(m, Mapping) and m.get("mountPath") == _TOKEN_MOUNT_PATH for m in mounts
            ):
                mounts.append({"name": name, "readOnly": True, "mountPath": _TOKEN_MOUNT_PATH})


def _default_workload(kind: str, obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    spec.setdefault("replicas", 1)
    if kind == "Deployment":
        strategy = spec.setdefault("strategy", {})
        if isinstance(strategy, dict):
            strategy.setdefault("type", "RollingUpdate")
            if strategy["type"] == "RollingUpdate":
                rolling = strategy.setdefault("rollingUpdate", {})
                if isinstance(rolling, dict):
                    rolling.setdefault("maxUnavailable", "25%")
                    rolling.setdefault("maxSurge", "25%")
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
    template = spec.get("template")
    if isinstance(template, dict):
        tspec = template.setdefault("spec", {})
        if isinstance(tspec, dict):
            _default_pod_spec(tspec)


def _default_service_ports(spec: dict[str, Any]) -> None:
    for port in spec.get("ports") or []:
        if not isinstance(port, dict):
            continue
        if not port.get("protocol"):
            port["protocol"] = "TCP"
        if port.get("targetPort") in (None, 0, "") and "port" in port:
            port["targetPort"] = port["port"]


def _default_service(
    obj: dict[str, Any], allocate: Callable[[], str], *, plugins: bool = True
) -> None:
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    stype = spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    _default_service_ports(spec)
    if stype == "ExternalName":
        return
    spec.setdefault("internalTrafficPolicy", "Cluster")
    if stype in ("NodePort", "LoadBalancer"):
        spec.setdefault("externalTrafficPolicy", "Cluster")
    if stype == "LoadBalancer":
        spec.setdefault("allocateLoadBalancerNodePorts", True)
    if not plugins:
        return
    cluster_ip = spec.get("clusterIP")
    if not cluster_ip:
        ips = spec.get("clusterIPs")
        cluster_ip = ips[0] if isinstance(ips, list) and ips else allocate()
        spec["clusterIP"] = cluster_ip
    if not spec.get("clusterIPs"):
        spec["clusterIPs"] = [cluster_ip]
    spec.setdefault("ipFamilies", ["IPv6"] if ":" in str(cluster_ip) else ["IPv4"])
    spec.setdefault("ipFamilyPolicy", "SingleStack")


def _default_namespace(obj: dict[str, Any], *, creating: bool) -> None:
    meta = obj.setdefault("metadata", {})
    name = meta.get("name")
    if name:
        labels = meta.get("labels")
        if not isinstance(labels, dict):
            labels = meta["labels"] = {}
        labels["kubernetes.io/metadata.name"] = name
    status = obj.get("status")
    if not isinstance(status, dict):
        status = obj["status"] = {}
    if creating:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            spec = obj["spec"] = {}
        finalizers = spec.get("finalizers")
        if not isinstance(finalizers, list):
            finalizers = spec["finalizers"] = []
        if "kubernetes" not in finalizers:
            finalizers.append("kubernetes")
        status["phase"] = "Active"
    else:
        status.setdefault("phase", "Active")


def _default_crd(obj: dict[str, Any]) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    names = spec.get("names")
    if isinstance(names, dict) and names.get("kind"):
        names.setdefault("singular", str(names["kind"]).lower())
        names.setdefault("listKind", f"{names['kind']}List")
    spec.setdefault("conversion", {"strategy": "None"})


DEFAULTED_KINDS: Final = frozenset(
    {
        ("Pod", ""),
        ("Deployment", "apps"),
        ("ReplicaSet", "apps"),
        ("Service", ""),
        ("Namespace", ""),
        ("Secret", ""),
        ("CustomResourceDefinition", "apiextensions.k8s.io"),
        ("Event", ""),
    }
)
"""The kinds :func:`default` changes (any other comes back as an unchanged copy)."""


def _go_event_shape(event: dict[str, Any]) -> None:
    """A core Event as kube stores it, decoded into its Go struct: the fields without
    ``omitempty`` (or that are structs) are always there, zero when the client left them
    out (``source: {}``, the three timestamps ``null``, the reporting strings ``""``)."""
    event.setdefault("involvedObject", {})
    if not isinstance(event.get("source"), dict):
        event["source"] = {}
    for key in ("firstTimestamp", "lastTimestamp", "eventTime"):
        event.setdefault(key, None)
    for key in ("reportingComponent", "reportingInstance"):
        if event.get(key) is None:
            event[key] = ""


def default(
    kind: str,
    group: str,
    obj: dict[str, Any],
    *,
    allocate_cluster_ip: Callable[[], str],
    token_volume_suffix: Callable[[], str],
    old: dict[str, Any] | None = None,
    plugins: bool = True,
    others: OtherDefaulter | None = None,
) -> dict[str, Any]:
    """Return ``obj`` defaulted the way kube-apiserver stores it (``obj`` is not mutated).

    Args:
        kind, group: the object's Kind and API group ("" for core).
        obj: the object as sent by the client.
        allocate_cluster_ip: gives a Service its ``clusterIP`` when it has none.
        token_volume_suffix: the 5-character suffix of ``kube-api-access-<suffix>``.
        old: the stored object on an update. Create-only steps (the Namespace
            ``kubernetes`` finalizer and ``Active`` phase, the Pod status and admission
            plugins) run only when ``old`` is None *and* ``obj`` has no
            ``metadata.uid`` (an object with a uid has been stored before).
        others: defaults, in place, a kind this module does not know (the other
            built-in kinds' defaulter).
        plugins: False stops after scheme defaulting (what decoding does, before the
            admission plugins and the registry's allocations): the object the field
            manager attributes to the writer.
    """
    builtin = (kind, group)
    out: dict[str, Any] = copy_json(obj)
    meta = out.get("metadata")
    creating = old is None and not (isinstance(meta, Mapping) and meta.get("uid"))
    if builtin == ("Pod", ""):
        if creating:
            _default_pod(out, token_volume_suffix, plugins=plugins)
        elif isinstance(out.get("spec"), dict):
            _default_pod_spec(out["spec"])
            _default_host_ports(out["spec"])
    elif builtin in (("Deployment", "apps"), ("ReplicaSet", "apps")):
        _default_workload(kind, out)
    elif builtin == ("Service", ""):
        _default_service(out, allocate_cluster_ip, plugins=plugins)
    elif builtin == ("Namespace", ""):
        _default_namespace(out, creating=creating)
    elif builtin == ("Secret", ""):
        _default_secret(out)
    elif builtin == ("CustomResourceDefinition", "apiextensions.k8s.io"):
        _default_crd(out)
    elif builtin == ("Event", ""):
        if plugins:
            _go_event_shape(out)
    elif others is not None:  # the other built-in kinds (apiserver.registry.strategy)
        others(kind, group, out, creating=creating)
    return out

"""Defaulting and validation of the built-in kinds beyond the core set.

:mod:`.admission` covers Pods, Services, Deployments, ReplicaSets, Namespaces,
ConfigMaps, Secrets, Ingresses, Leases and CRDs. This module covers the rest of what a
1.36 server serves (DaemonSets, StatefulSets, ControllerRevisions, Jobs, CronJobs,
ReplicationControllers, PodTemplates, HorizontalPodAutoscalers, PodDisruptionBudgets,
RBAC, APIServices, EndpointSlices, storage, scheduling and the rest) with the scheme
defaults (``pkg/apis/*/v1/defaults.go``), the status each strategy's
``PrepareForCreate`` leaves, and the validation a client can notice
(``pkg/apis/*/validation``): required fields, enumerations, immutable fields, and
the pod template rules of the workloads. Rules that need a scheduler, a kubelet or
CEL are not checked.

Thread-safety: pure functions; safe to share between threads.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from apiserver.api.field import (
    FieldError,
    GoValue,
    duplicate,
    forbidden,
    invalid,
    label_selector_value,
    not_supported,
    required,
    str_list,
    str_map,
)
from apiserver.api.gofmt import go_json
from apiserver.registry import core as a
from apiserver.registry import resourcelist
from apiserver.registry.cel import syntax_error

__all__ = ["default", "validate"]

JsonDict = dict[str, Any]


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return a._map(obj.get("spec"))


def _dspec(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = obj["spec"] = {}
    return spec


def _template_spec(template: Any) -> None:
    if isinstance(template, dict):
        tspec = template.setdefault("spec", {})
        if isinstance(tspec, dict):
            a._default_pod_spec(tspec)


# --- defaulting ------------------------------------------------------------------------

_EMPTY_STATUS: Final[Mapping[tuple[str, str], JsonDict]] = {
    # What Go's JSON prints for each strategy's zero status (non-omitempty counters).
    ("apps", "DaemonSet"): {
        "currentNumberScheduled": 0,
        "numberMisscheduled": 0,
        "desiredNumberScheduled": 0,
        "numberReady": 0,
    },
    ("apps", "StatefulSet"): {"replicas": 0, "availableReplicas": 0},
    ("", "ReplicationController"): {"replicas": 0},
    ("policy", "PodDisruptionBudget"): {
        "disruptionsAllowed": 0,
        "currentHealthy": 0,
        "desiredHealthy": 0,
        "expectedPods": 0,
    },
    ("autoscaling", "HorizontalPodAutoscaler"): {"currentReplicas": 0, "desiredReplicas": 0},
    ("batch", "Job"): {},
    ("batch", "CronJob"): {},
    ("", "PersistentVolumeClaim"): {"phase": "Pending"},
    ("", "PersistentVolume"): {"phase": "Pending"},
    ("", "ResourceQuota"): {},
    ("apiregistration.k8s.io", "APIService"): {},
    ("certificates.k8s.io", "CertificateSigningRequest"): {},
}


def _default_daemonset(obj: dict[str, Any]) -> None:
    spec = _dspec(obj)
    strategy = spec.setdefault("updateStrategy", {})
    if isinstance(strategy, dict):
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.setdefault("rollingUpdate", {})
            if isinstance(rolling, dict):
                rolling.setdefault("maxUnavailable", 1)
                rolling.setdefault("maxSurge", 0)
    spec.setdefault("revisionHistoryLimit", 10)
    _template_spec(spec.get("template"))


def _default_statefulset(obj: dict[str, Any]) -> None:
    spec = _dspec(obj)
    spec.setdefault("replicas", 1)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    strategy = spec.setdefault("updateStrategy", {})
    if isinstance(strategy, dict):
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.setdefault("rollingUpdate", {})
            if isinstance(rolling, dict):
                rolling.setdefault("partition", 0)
    spec.setdefault("revisionHistoryLimit", 10)
    retention = spec.setdefault("persistentVolumeClaimRetentionPolicy", {})
    if isinstance(retention, dict):
        retention.setdefault("whenDeleted", "Retain")
        retention.setdefault("whenScaled", "Retain")
    _template_spec(spec.get("template"))
    for claim in spec.get("volumeClaimTemplates") or []:
        if isinstance(claim, dict):
            claim.setdefault("apiVersion", "v1")
            claim.setdefault("kind", "PersistentVolumeClaim")
            _default_pvc_spec(_dspec(claim))
            claim.setdefault("status", {"phase": "Pending"})


def _default_rc(obj: dict[str, Any]) -> None:
    spec = _dspec(obj)
    spec.setdefault("replicas", 1)
    template = spec.get("template")
    labels = a._map(a._map(template).get("metadata")).get("labels")
    if isinstance(labels, Mapping) and labels:
        if not spec.get("selector"):
            spec["selector"] = dict(labels)
        meta = obj.setdefault("metadata", {})
        if isinstance(meta, dict) and not meta.get("labels"):
            meta["labels"] = dict(labels)
    _template_spec(template)


_JOB_LABELS: Final = (
    "batch.kubernetes.io/controller-uid",
    "controller-uid",
    "batch.kubernetes.io/job-name",
    "job-name",
)


def _default_job_spec(spec: dict[str, Any]) -> None:
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    if not spec.get("podFailurePolicy"):
        spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    else:
        spec.setdefault("podReplacementPolicy", "Failed")
    _template_spec(spec.get("template"))


def _default_job(obj: dict[str, Any], *, creating: bool) -> None:
    spec = _dspec(obj)
    _default_job_spec(spec)
    if not creating or spec.get("manualSelector"):
        return
    # The strategy's generateSelector: the Job's uid names its pods.
    meta = obj.setdefault("metadata", {})
    uid = meta.setdefault("uid", str(uuid.uuid4())) if isinstance(meta, dict) else ""
    name = str(meta.get("name", "")) if isinstance(meta, dict) else ""
    values = {_JOB_LABELS[0]: uid, _JOB_LABELS[1]: uid, _JOB_LABELS[2]: name, _JOB_LABELS[3]: name}
    template = spec.setdefault("template", {})
    if isinstance(template, dict):
        tmeta = template.setdefault("metadata", {})
        if isinstance(tmeta, dict):
            tlabels = tmeta.setdefault("labels", {})
            if isinstance(tlabels, dict):
                tlabels.update(values)
    if not spec.get("selector"):
        spec["selector"] = {"matchLabels": {_JOB_LABELS[0]: uid}}
    if isinstance(meta, dict) and not meta.get("labels"):
        meta["labels"] = dict(values)


def _default_cronjob(obj: dict[str, Any]) -> None:
    spec = _dspec(obj)
    spec.setdefault("concurrencyPolicy", "Allow")
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)
    job = spec.get("jobTemplate")
    if isinstance(job, dict):
        jspec = job.setdefault("spec", {})
        if isinstance(jspec, dict):
            _template_spec(jspec.get("template"))


def _default_pvc_spec(spec: dict[str, Any]) -> None:
    spec.setdefault("volumeMode", "Filesystem")
    spec.setdefault("resources", {})


def _default_hpa(obj: dict[str, Any]) -> None:
    spec = _dspec(obj)
    spec.setdefault("minReplicas", 1)
    if not spec.get("metrics"):
        spec["metrics"] = [
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 80},
                },
            }
        ]


def _default_webhooks(obj: dict[str, Any], *, mutating: bool) -> None:
    for hook in obj.get("webhooks") or []:
        if not isinstance(hook, dict):
            continue
        hook.setdefault("failurePolicy", "Fail")
        hook.setdefault("matchPolicy", "Equivalent")
        hook.setdefault("namespaceSelector", {})
        hook.setdefault("objectSelector", {})
        hook.setdefault("timeoutSeconds", 10)
        if mutating:
            hook.setdefault("reinvocationPolicy", "Never")
        for rule in hook.get("rules") or []:
            if isinstance(rule, dict):
                rule.setdefault("scope", "*")
        client = hook.get("clientConfig")
        if isinstance(client, dict) and isinstance(client.get("service"), dict):
            client["service"].setdefault("port", 443)


_ADMISSION_POLICY_KINDS: Final = frozenset(
    ("admissionregistration.k8s.io", kind)
    for kind in (
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "MutatingAdmissionPolicy",
        "MutatingAdmissionPolicyBinding",
    )
)


def _default_match_resources(match: Any) -> None:
    """SetDefaults_MatchResources, and SetDefaults_Rule on each of its rules."""
    if not isinstance(match, dict):
        return
    match.setdefault("matchPolicy", "Equivalent")
    match.setdefault("namespaceSelector", {})
    match.setdefault("objectSelector", {})
    for key in ("resourceRules", "excludeResourceRules"):
        for rule in match.get(key) or []:
            if isinstance(rule, dict):
                rule.setdefault("scope", "*")


def _default_admission_policy(kind: str, obj: dict[str, Any]) -> None:
    """admissionregistration/v1 defaults: a policy fails closed (failurePolicy Fail);
    match constraints (a policy's, or a binding's when given) match equivalent versions,
    every namespace and object, at any scope."""
    spec = _dspec(obj)
    if kind.endswith("Binding"):
        _default_match_resources(spec.get("matchResources"))
        return
    spec.setdefault("failurePolicy", "Fail")
    _default_match_resources(spec.get("matchConstraints"))


DEFAULTED: Final = frozenset(
    {
        ("DaemonSet", "apps"),
        ("StatefulSet", "apps"),
        ("ReplicationController", ""),
        ("PodTemplate", ""),
        ("Job", "batch"),
        ("CronJob", "batch"),
        ("PersistentVolumeClaim", ""),
        ("PersistentVolume", ""),
        ("LimitRange", ""),
        ("Node", ""),
        ("HorizontalPodAutoscaler", "autoscaling"),
        ("StorageClass", "storage.k8s.io"),
        ("PriorityClass", "scheduling.k8s.io"),
        ("NetworkPolicy", "networking.k8s.io"),
        ("MutatingWebhookConfiguration", "admissionregistration.k8s.io"),
        ("ValidatingWebhookConfiguration", "admissionregistration.k8s.io"),
        *((kind, group) for group, kind in _ADMISSION_POLICY_KINDS),
        ("APIService", "apiregistration.k8s.io"),
        ("RoleBinding", "rbac.authorization.k8s.io"),
        ("ClusterRoleBinding", "rbac.authorization.k8s.io"),
    }
    | {(kind, group) for group, kind in _EMPTY_STATUS}
)
"""The (kind, group) pairs :func:`default` changes; others need no defaulting copy."""


def _default_limit_range(obj: dict[str, Any]) -> None:
    """SetDefaults_LimitRangeItem: a Container item's default limit is its max, its default
    request the default limit, else its min."""
    for item in _spec(obj).get("limits") or []:
        if not isinstance(item, dict) or item.get("type") != "Container":
            continue
        default = dict(a._map(item.get("default")))
        request = dict(a._map(item.get("defaultRequest")))
        for name, value in a._map(item.get("max")).items():
            default.setdefault(name, value)
        for name, value in default.items():
            request.setdefault(name, value)
        for name, value in a._map(item.get("min")).items():
            request.setdefault(name, value)
        if default:
            item["default"] = default
        if request:
            item["defaultRequest"] = request


def _default_node(obj: dict[str, Any]) -> None:
    """SetDefaults_NodeStatus: a Node without allocatable resources has its capacity."""
    status = obj.get("status")
    if isinstance(status, dict) and status.get("allocatable") is None:
        capacity = status.get("capacity")
        if isinstance(capacity, dict):
            status["allocatable"] = dict(capacity)


def default(kind: str, group: str, obj: dict[str, Any], *, creating: bool) -> None:
    """Default ``obj`` in place (the kinds of this module; any other is left alone)."""
    key = (group, kind)
    if key == ("apps", "DaemonSet"):
        _default_daemonset(obj)
    elif key == ("apps", "StatefulSet"):
        _default_statefulset(obj)
    elif key == ("", "ReplicationController"):
        _default_rc(obj)
    elif key == ("", "PodTemplate"):
        _template_spec(obj.get("template"))
    elif key == ("batch", "Job"):
        _default_job(obj, creating=creating)
    elif key == ("batch", "CronJob"):
        _default_cronjob(obj)
    elif key == ("", "PersistentVolumeClaim"):
        _default_pvc_spec(_dspec(obj))
    elif key == ("", "LimitRange"):
        _default_limit_range(obj)
    elif key == ("", "Node"):
        _default_node(obj)
    elif key == ("", "PersistentVolume"):
        spec = _dspec(obj)
        spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
        spec.setdefault("volumeMode", "Filesystem")
    elif key == ("autoscaling", "HorizontalPodAutoscaler"):
        _default_hpa(obj)
    elif key == ("policy", "PodDisruptionBudget"):
        pass
    elif key == ("storage.k8s.io", "StorageClass"):
        obj.setdefault("reclaimPolicy", "Delete")
        obj.setdefault("volumeBindingMode", "Immediate")
    elif key == ("scheduling.k8s.io", "PriorityClass"):
        obj.setdefault("preemptionPolicy", "PreemptLowerPriority")
    elif key == ("networking.k8s.io", "NetworkPolicy"):
        spec = _dspec(obj)
        if not spec.get("policyTypes"):
            spec["policyTypes"] = ["Ingress", *(["Egress"] if spec.get("egress") else [])]
    elif key in _ADMISSION_POLICY_KINDS:
        _default_admission_policy(kind, obj)
    elif key == ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"):
        _default_webhooks(obj, mutating=True)
    elif key == ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"):
        _default_webhooks(obj, mutating=False)
    elif key == ("apiregistration.k8s.io", "APIService"):
        service = a._map(_spec(obj).get("service"))
        if service and isinstance(obj["spec"]["service"], dict):
            obj["spec"]["service"].setdefault("port", 443)
    elif group == "rbac.authorization.k8s.io" and kind in ("RoleBinding", "ClusterRoleBinding"):
        for subject in obj.get("subjects") or []:
            if isinstance(subject, dict) and subject.get("kind") in ("User", "Group"):
                subject.setdefault("apiGroup", "rbac.authorization.k8s.io")
    if creating and key in _EMPTY_STATUS:
        obj["status"] = dict(_EMPTY_STATUS[key])
    if creating and key == ("apiregistration.k8s.io", "APIService"):
        from apiserver.registry.subresources import apiservice_status

        obj["status"] = apiservice_status(obj)


# --- validation ------------------------------------------------------------------------


def _restart_policy(tspec: Any, path: str, allowed: list[str]) -> list[FieldError]:
    restart = a._map(tspec).get("restartPolicy")
    if restart is not None and restart not in allowed:
        return [not_supported(path, restart, allowed)]
    return []


def _job_template(
    spec: Mapping[str, Any], path: str, old: Mapping[str, Any] | None
) -> list[FieldError]:
    errs: list[FieldError] = []
    template = spec.get("template")
    if not isinstance(template, Mapping):
        return [required(f"{path}.template")]
    tspec = template.get("spec")
    errs.extend(a._pod_spec(tspec, f"{path}.template.spec"))
    restart = a._map(tspec).get("restartPolicy")
    if restart not in ("OnFailure", "Never"):
        errs.append(
            not_supported(
                f"{path}.template.spec.restartPolicy", restart or "", ["OnFailure", "Never"]
            )
        )
    for key in ("parallelism", "completions", "activeDeadlineSeconds", "backoffLimit"):
        errs.extend(a._nonnegative(spec, key, path))
    mode = spec.get("completionMode")
    if mode is not None and mode not in ("NonIndexed", "Indexed"):
        errs.append(not_supported(f"{path}.completionMode", mode, ["NonIndexed", "Indexed"]))
    return errs


def _job(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    spec = _spec(obj)
    errs = _job_template(spec, "spec", old)
    sel = spec.get("selector")
    if not isinstance(sel, Mapping):
        errs.append(required("spec.selector"))
    if old is not None:
        old_spec = _spec(old)
        errs.extend(
            a._immutable("spec.selector", sel, old_spec.get("selector"), label_selector_value(sel))
        )
        if spec.get("completionMode") != old_spec.get("completionMode"):
            errs.append(
                invalid("spec.completionMode", spec.get("completionMode"), "field is immutable")
            )
        if not spec.get("suspend") or not old_spec.get("suspend"):
            errs.extend(
                a._immutable(
                    "spec.template",
                    spec.get("template"),
                    old_spec.get("template"),
                    GoValue("core.PodTemplateSpec{...}"),
                )
            )
    return errs


_CRON_FIELD: Final = re.compile(r"^[0-9*/,?LW#-]+$|^[A-Za-z]{3}([,-][A-Za-z]{3})*$")
_CRON_MACROS: Final = frozenset(
    {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
)


def _cron_ok(schedule: str) -> bool:
    text = schedule.strip()
    if text.startswith(("TZ=", "CRON_TZ=")):
        return False  # kube: use spec.timeZone instead
    if text in _CRON_MACROS or text.startswith("@every "):
        return True
    parts = text.split()
    return len(parts) == 5 and all(_CRON_FIELD.match(p) for p in parts)


def _cronjob(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    spec = _spec(obj)
    errs: list[FieldError] = []
    schedule = spec.get("schedule")
    if not schedule:
        errs.append(required("spec.schedule"))
    elif not isinstance(schedule, str) or not _cron_ok(schedule):
        detail = (
            "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
            if isinstance(schedule, str) and schedule.strip().startswith(("TZ=", "CRON_TZ="))
            else f"Expected exactly 5 fields, found {len(str(schedule).split())}: {schedule}"
        )
        errs.append(invalid("spec.schedule", schedule, detail))
    policy = spec.get("concurrencyPolicy")
    if policy not in (None, "Allow", "Forbid", "Replace"):
        errs.append(not_supported("spec.concurrencyPolicy", policy, ["Allow", "Forbid", "Replace"]))
    for key in ("startingDeadlineSeconds", "successfulJobsHistoryLimit", "failedJobsHistoryLimit"):
        errs.extend(a._nonnegative(spec, key, "spec"))
    job = spec.get("jobTemplate")
    if not isinstance(job, Mapping):
        errs.append(required("spec.jobTemplate"))
    else:
        errs.extend(_job_template(a._map(job.get("spec")), "spec.jobTemplate.spec", None))
    return errs


def _rc(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    spec = _spec(obj)
    errs = a._nonnegative(spec, "replicas", "spec")
    selector = a._map(spec.get("selector"))
    if not selector:
        errs.append(required("spec.selector"))
    else:
        errs.extend(a._labels(selector, "spec.selector"))
    template = spec.get("template")
    if not isinstance(template, Mapping):
        errs.append(required("spec.template"))
    else:
        labels = a._map(a._map(template.get("metadata")).get("labels"))
        if selector and any(labels.get(k) != v for k, v in selector.items()):
            errs.append(
                invalid(
                    "spec.template.metadata.labels",
                    str_map(labels),
                    "`selector` does not match template `labels`",
                )
            )
        tspec = template.get("spec")
        errs.extend(a._pod_spec(tspec, "spec.template.spec"))
        errs.extend(_restart_policy(tspec, "spec.template.spec.restartPolicy", ["Always"]))
    return errs


_STS_MUTABLE: Final = frozenset(
    {
        "replicas",
        "ordinals",
        "template",
        "updateStrategy",
        "persistentVolumeClaimRetentionPolicy",
        "minReadySeconds",
        "revisionHistoryLimit",
    }
)


def _statefulset(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    errs = a._workload("StatefulSet", obj, old)
    spec = _spec(obj)
    policy = spec.get("podManagementPolicy")
    if policy not in (None, "OrderedReady", "Parallel"):
        errs.append(not_supported("spec.podManagementPolicy", policy, ["OrderedReady", "Parallel"]))
    if old is not None:
        old_spec = _spec(old)
        rest = {k: v for k, v in spec.items() if k not in _STS_MUTABLE}
        old_rest = {k: v for k, v in old_spec.items() if k not in _STS_MUTABLE}
        if rest != old_rest:
            errs.append(
                forbidden(
                    "spec",
                    "updates to statefulset spec for fields other than 'replicas', 'ordinals', "
                    "'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and "
                    "'minReadySeconds' are forbidden",
                )
            )
    return errs


def _pdb(obj: Mapping[str, Any]) -> list[FieldError]:
    spec = _spec(obj)
    errs: list[FieldError] = []
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        errs.append(
            invalid(
                "spec",
                GoValue("policy.PodDisruptionBudgetSpec{...}"),
                "minAvailable and maxUnavailable cannot be both set",
            )
        )
    for key in ("minAvailable", "maxUnavailable"):
        value = spec.get(key)
        if value is None:
            continue
        parsed = a._int_or_percent(value)
        if parsed is None:
            errs.append(invalid(f"spec.{key}", value, a._PERCENT_MSG))
        elif parsed[0] < 0:
            errs.append(invalid(f"spec.{key}", value, "must be greater than or equal to 0"))
        elif parsed[1] and parsed[0] > 100:
            errs.append(invalid(f"spec.{key}", value, "must not be greater than 100%"))
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in ("AlwaysAllow", "IfHealthyBudget"):
        errs.append(
            not_supported(
                "spec.unhealthyPodEvictionPolicy", policy, ["AlwaysAllow", "IfHealthyBudget"]
            )
        )
    if isinstance(spec.get("selector"), Mapping):
        errs.extend(a._label_selector_errors(spec["selector"], "spec.selector"))
    return errs


def _rules(obj: Mapping[str, Any], *, namespaced: bool) -> list[FieldError]:
    errs: list[FieldError] = []
    for i, raw in enumerate(obj.get("rules") or []):
        rule = a._map(raw)
        path = f"rules[{i}]"
        if not rule.get("verbs"):
            errs.append(required(f"{path}.verbs", "verbs must contain at least one value"))
        urls = rule.get("nonResourceURLs") or []
        if urls:
            if namespaced:
                errs.append(
                    invalid(
                        f"{path}.nonResourceURLs",
                        str_list(urls),
                        "namespaced rules cannot apply to non-resource URLs",
                    )
                )
            if rule.get("apiGroups") or rule.get("resources") or rule.get("resourceNames"):
                errs.append(
                    invalid(
                        f"{path}.nonResourceURLs",
                        str_list(urls),
                        "rules cannot apply to both regular resources and non-resource URLs",
                    )
                )
            continue
        if not rule.get("resources"):
            errs.append(
                required(f"{path}.resources", "resource rules must supply at least one resource")
            )
        if not rule.get("apiGroups"):
            errs.append(
                required(f"{path}.apiGroups", "resource rules must supply at least one api group")
            )
    return errs


def _binding(
    obj: Mapping[str, Any], old: Mapping[str, Any] | None, *, namespaced: bool
) -> list[FieldError]:
    errs: list[FieldError] = []
    ref = a._map(obj.get("roleRef"))
    if ref.get("apiGroup") != "rbac.authorization.k8s.io":
        errs.append(
            not_supported(
                "roleRef.apiGroup", ref.get("apiGroup", ""), ["rbac.authorization.k8s.io"]
            )
        )
    allowed = ["Role", "ClusterRole"] if namespaced else ["ClusterRole"]
    if ref.get("kind") not in allowed:
        errs.append(not_supported("roleRef.kind", ref.get("kind", ""), allowed))
    if not ref.get("name"):
        errs.append(required("roleRef.name"))
    if old is not None and ref != a._map(old.get("roleRef")):
        # the internal rbac.RoleRef has no json tags: json.Marshal names its Go fields
        shown = ",".join(
            f'"{go_field}":{go_json(str(ref.get(key) or ""))}'
            for go_field, key in (("APIGroup", "apiGroup"), ("Kind", "kind"), ("Name", "name"))
        )
        errs.append(invalid("roleRef", GoValue("{" + shown + "}"), "cannot change roleRef"))
    for i, raw in enumerate(obj.get("subjects") or []):
        subject = a._map(raw)
        path = f"subjects[{i}]"
        if not subject.get("name"):
            errs.append(required(f"{path}.name"))
        kind = subject.get("kind")
        if kind not in ("ServiceAccount", "User", "Group"):
            errs.append(
                not_supported(f"{path}.kind", kind or "", ["ServiceAccount", "User", "Group"])
            )
        elif kind == "ServiceAccount" and not namespaced and not subject.get("namespace"):
            errs.append(required(f"{path}.namespace"))
    return errs


def _apiservice(obj: Mapping[str, Any]) -> list[FieldError]:
    spec = _spec(obj)
    errs: list[FieldError] = []
    group, version = str(spec.get("group") or ""), str(spec.get("version") or "")
    name = str(a._map(obj.get("metadata")).get("name") or "")
    if not version:
        errs.append(required("spec.version"))
    expected = f"{version}.{group}"
    if name and version and name != expected:
        errs.append(
            invalid("metadata.name", name, f'must be `spec.version+"."+spec.group`: "{expected}"')
        )
    for key in ("groupPriorityMinimum", "versionPriority"):
        value = spec.get(key)
        if not isinstance(value, int) or value <= 0:
            errs.append(
                invalid(
                    f"spec.{key}",
                    value or 0,
                    "must be positive and less than 20000"
                    if key == "groupPriorityMinimum"
                    else "must be positive and less than 1000",
                )
            )
    if spec.get("service") is None and (spec.get("caBundle") or spec.get("insecureSkipTLSVerify")):
        errs.append(
            required("spec.service", "must be specified when caBundle or insecureSkipTLSVerify")
        )
    return errs


_ADDRESS_TYPES: Final = ["IPv4", "IPv6", "FQDN"]


def _endpointslice(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    errs: list[FieldError] = []
    address_type = obj.get("addressType")
    if not address_type:
        errs.append(required("addressType"))
    elif address_type not in _ADDRESS_TYPES:
        errs.append(not_supported("addressType", address_type, _ADDRESS_TYPES))
    for i, raw in enumerate(obj.get("endpoints") or []):
        addresses = a._map(raw).get("addresses") or []
        if not addresses:
            errs.append(required(f"endpoints[{i}].addresses", "must contain at least 1 address"))
    if old is not None:
        errs.extend(a._immutable("addressType", address_type, old.get("addressType")))
    return errs


def _pvc(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    spec = _spec(obj)
    errs: list[FieldError] = []
    if not spec.get("accessModes"):
        errs.append(required("spec.accessModes", "at least 1 access mode is required"))
    storage = a._map(a._map(spec.get("resources")).get("requests")).get("storage")
    if storage is None and not spec.get("dataSourceRef"):
        errs.append(required("spec.resources[storage]"))
    errs.extend(resourcelist.pvc_spec(spec, "spec"))
    if old is not None:
        mutable = ("resources", "volumeAttributesClassName", "volumeName")
        keep = {k: v for k, v in spec.items() if k not in mutable}
        old_keep = {k: v for k, v in _spec(old).items() if k not in mutable}
        if keep != old_keep:
            errs.append(
                forbidden(
                    "spec",
                    "spec is immutable after creation except resources.requests and "
                    "volumeAttributesClassName for bound claims",
                )
            )
    return errs


def _pv(obj: Mapping[str, Any]) -> list[FieldError]:
    spec = _spec(obj)
    errs: list[FieldError] = []
    if not spec.get("accessModes"):
        errs.append(required("spec.accessModes"))
    errs.extend(resourcelist.persistent_volume_capacity(spec))
    sources = {
        "hostPath",
        "nfs",
        "csi",
        "local",
        "iscsi",
        "fc",
        "cephfs",
        "rbd",
        "azureDisk",
        "azureFile",
        "gcePersistentDisk",
        "awsElasticBlockStore",
        "glusterfs",
        "flexVolume",
        "cinder",
        "vsphereVolume",
        "quobyte",
        "portworxVolume",
        "scaleIO",
        "storageos",
        "photonPersistentDisk",
        "flocker",
    }
    if not sources & set(spec):
        errs.append(required("spec", "must specify a volume type"))
    return errs


def _required_fields(obj: Mapping[str, Any], *paths: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for path in paths:
        cur: Any = obj
        for part in path.split("."):
            cur = a._map(cur).get(part)
        if cur in (None, "", [], {}):
            errs.append(required(path))
    return errs


def _webhooks(obj: Mapping[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    names: set[str] = set()
    for i, raw in enumerate(obj.get("webhooks") or []):
        hook = a._map(raw)
        path = f"webhooks[{i}]"
        name = str(hook.get("name") or "")
        if not name:
            errs.append(required(f"{path}.name"))
        elif name in names:
            errs.append(duplicate(f"{path}.name", name))
        else:
            names.add(name)
            errs.extend(invalid(f"{path}.name", name, m) for m in a.is_dns1123_subdomain(name))
            if name.count(".") < 2:
                errs.append(
                    invalid(
                        f"{path}.name",
                        name,
                        "should be a domain with at least three segments separated by dots",
                    )
                )
        if not hook.get("admissionReviewVersions"):
            errs.append(
                required(f"{path}.admissionReviewVersions", "must specify one of v1, v1beta1")
            )
        side = hook.get("sideEffects")
        allowed = ["None", "NoneOnDryRun"]
        if side is None:
            errs.append(required(f"{path}.sideEffects", "must specify one of None, NoneOnDryRun"))
        elif side not in allowed:
            errs.append(not_supported(f"{path}.sideEffects", side, allowed))
        errs.extend(_webhook_fields(hook, path))
        client = a._map(hook.get("clientConfig"))
        if bool(client.get("url")) == bool(client.get("service")):
            errs.append(
                required(f"{path}.clientConfig", "exactly one of url or service is required")
            )
        elif client.get("url"):
            errs.extend(_webhook_url(f"{path}.clientConfig.url", str(client["url"])))
        else:
            errs.extend(_webhook_service(f"{path}.clientConfig.service", a._map(client["service"])))
    return errs


_OPERATIONS: Final = ["*", "CONNECT", "CREATE", "DELETE", "UPDATE"]
_SCOPES: Final = ["*", "Cluster", "Namespaced"]
_URL_FORM: Final = "; desired format: https://host[/path]"


def _webhook_fields(hook: Mapping[str, Any], path: str) -> list[FieldError]:
    """``validateValidatingWebhook``/``validateMutatingWebhook`` beyond the name, side
    effects and client config: rules, policies, timeout, selectors, match conditions."""
    errs: list[FieldError] = []
    for i, raw in enumerate(hook.get("rules") or []):
        rule, at = a._map(raw), f"{path}.rules[{i}]"
        operations = list(rule.get("operations") or [])
        if not operations:
            errs.append(required(f"{at}.operations"))
        elif len(operations) > 1 and "*" in operations:
            errs.append(
                invalid(
                    f"{at}.operations",
                    operations,
                    "if '*' is present, must not specify other operations",
                )
            )
        errs.extend(
            not_supported(f"{at}.operations[{j}]", op, _OPERATIONS)
            for j, op in enumerate(operations)
            if op not in _OPERATIONS
        )
        for member in ("apiGroups", "apiVersions", "resources"):
            if not rule.get(member):
                errs.append(required(f"{at}.{member}"))
        scope = rule.get("scope")
        if scope is not None and scope not in _SCOPES:
            errs.append(not_supported(f"{at}.scope", scope, _SCOPES))
    for member, supported in (
        ("failurePolicy", ["Fail", "Ignore"]),
        ("matchPolicy", ["Equivalent", "Exact"]),
        ("reinvocationPolicy", ["IfNeeded", "Never"]),
    ):
        value = hook.get(member)
        if value is not None and value not in supported:
            errs.append(not_supported(f"{path}.{member}", value, supported))
    timeout = hook.get("timeoutSeconds")
    if isinstance(timeout, int) and not 1 <= timeout <= 30:
        errs.append(
            invalid(
                f"{path}.timeoutSeconds",
                timeout,
                "the timeout value must be between 1 and 30 seconds",
            )
        )
    versions = list(hook.get("admissionReviewVersions") or [])
    if versions and not any(v in ("v1", "v1beta1") for v in versions):
        errs.append(
            invalid(
                f"{path}.admissionReviewVersions",
                versions,
                "must include at least one of v1, v1beta1",
            )
        )
    names: set[str] = set()
    for i, raw in enumerate(hook.get("matchConditions") or []):
        condition, at = a._map(raw), f"{path}.matchConditions[{i}]"
        name = str(condition.get("name") or "")
        if not name:
            errs.append(required(f"{at}.name"))
        elif name in names:
            errs.append(duplicate(f"{at}.name", name))
        names.add(name)
        expression = condition.get("expression")
        if not isinstance(expression, str) or not expression.strip():
            errs.append(required(f"{at}.expression"))
            continue
        error = syntax_error(expression.strip())
        if error:
            errs.append(invalid(f"{at}.expression", expression, f"compilation failed: {error}"))
    return errs


def _webhook_url(path: str, url: str) -> list[FieldError]:
    """``webhook.ValidateWebhookURL`` (https only)."""
    try:
        split = urlsplit(url)
        split.port  # noqa: B018 (a bad port raises)
    except ValueError as exc:
        return [required(path, f"url must be a valid URL: {exc}{_URL_FORM}")]
    errs: list[FieldError] = []
    if split.scheme != "https":
        errs.append(
            invalid(path, split.scheme, f"'https' is the only allowed URL scheme{_URL_FORM}")
        )
    if not split.netloc.rpartition("@")[2]:
        errs.append(invalid(path, "", f"host must be specified{_URL_FORM}"))
    if "@" in split.netloc:
        user = split.netloc.rpartition("@")[0]
        errs.append(invalid(path, user, "user information is not permitted in the URL"))
    if split.fragment:
        errs.append(invalid(path, split.fragment, "fragments are not permitted in the URL"))
    if split.query:
        errs.append(invalid(path, split.query, "query parameters are not permitted in the URL"))
    return errs


def _webhook_service(path: str, service: Mapping[str, Any]) -> list[FieldError]:
    """``webhook.ValidateWebhookService``."""
    errs: list[FieldError] = []
    if not service.get("name"):
        errs.append(required(f"{path}.name"))
    if not service.get("namespace"):
        errs.append(required(f"{path}.namespace"))
    port = service.get("port", 443)
    if not isinstance(port, int) or not 1 <= port <= 65535:
        errs.append(
            invalid(
                f"{path}.port", port, "port is not valid: must be between 1 and 65535, inclusive"
            )
        )
    url_path = service.get("path")
    if not isinstance(url_path, str) or url_path in ("", "/"):
        return errs
    if url_path == "//":
        return [*errs, invalid(f"{path}.path", url_path, "segment[0] may not be empty")]
    if not url_path.startswith("/"):
        errs.append(invalid(f"{path}.path", url_path, "must start with a '/'"))
    steps = url_path[1:]
    steps = steps.removesuffix("/")
    for i, step in enumerate(steps.split("/")):
        if not step:
            errs.append(invalid(f"{path}.path", url_path, f"segment[{i}] may not be empty"))
            continue
        errs.extend(
            invalid(f"{path}.path", url_path, f"segment[{i}]: {m}")
            for m in a.is_dns1123_subdomain(step)
        )
    return errs


def _validating_policy(obj: Mapping[str, Any]) -> list[FieldError]:
    """The CEL of a ValidatingAdmissionPolicy must parse (kube compiles it, and also
    type-checks it against the resource's schema, which is not done here)."""
    spec = a._map(obj.get("spec"))
    errs: list[FieldError] = []
    checked = (
        ("matchConditions", "expression"),
        ("variables", "expression"),
        ("validations", "expression"),
        ("validations", "messageExpression"),
        ("auditAnnotations", "valueExpression"),
    )
    for list_name, member in checked:
        for i, item in enumerate(spec.get(list_name) or []):
            expression = a._map(item).get(member)
            path = f"spec.{list_name}[{i}].{member}"
            if not isinstance(expression, str) or not expression.strip():
                if member in ("expression", "valueExpression"):
                    errs.append(required(path, f"{member} is not specified"))
                continue
            error = syntax_error(expression.strip())
            if error:
                errs.append(invalid(path, expression, f"compilation failed: {error}"))
    return errs


def validate(
    kind: str, group: str, obj: Mapping[str, Any], old: Mapping[str, Any] | None
) -> list[FieldError]:
    """The field errors of ``obj`` (a kind of this module; [] for any other)."""
    key = (group, kind)
    if key == ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"):
        return _validating_policy(obj)
    if key == ("apps", "DaemonSet"):
        return a._workload("DaemonSet", obj, old)
    if key == ("apps", "StatefulSet"):
        return _statefulset(obj, old)
    if key == ("apps", "ControllerRevision"):
        errs = a._nonnegative(obj, "revision", "")
        if old is not None:
            errs.extend(
                a._immutable(
                    "data", obj.get("data"), old.get("data"), GoValue("runtime.RawExtension{...}")
                )
            )
        return errs
    if key == ("", "ReplicationController"):
        return _rc(obj, old)
    if key == ("", "PodTemplate"):
        template = a._map(obj.get("template"))
        return a._pod_spec(template.get("spec"), "template.spec")
    if key == ("batch", "Job"):
        return _job(obj, old)
    if key == ("batch", "CronJob"):
        return _cronjob(obj, old)
    if key == ("policy", "PodDisruptionBudget"):
        return _pdb(obj)
    if key == ("rbac.authorization.k8s.io", "Role"):
        return _rules(obj, namespaced=True)
    if key == ("rbac.authorization.k8s.io", "ClusterRole"):
        return _rules(obj, namespaced=False)
    if key == ("rbac.authorization.k8s.io", "RoleBinding"):
        return _binding(obj, old, namespaced=True)
    if key == ("rbac.authorization.k8s.io", "ClusterRoleBinding"):
        return _binding(obj, old, namespaced=False)
    if key == ("apiregistration.k8s.io", "APIService"):
        return _apiservice(obj)
    if key == ("discovery.k8s.io", "EndpointSlice"):
        return _endpointslice(obj, old)
    if key == ("", "PersistentVolumeClaim"):
        return _pvc(obj, old)
    if key == ("", "PersistentVolume"):
        return _pv(obj)
    if key == ("autoscaling", "HorizontalPodAutoscaler"):
        errs = _required_fields(obj, "spec.scaleTargetRef.kind", "spec.scaleTargetRef.name")
        spec = _spec(obj)
        max_replicas = spec.get("maxReplicas")
        if not isinstance(max_replicas, int) or max_replicas < 1:
            errs.append(
                invalid("spec.maxReplicas", max_replicas or 0, "must be greater than or equal to 1")
            )
        elif isinstance(spec.get("minReplicas"), int) and spec["minReplicas"] > max_replicas:
            errs.append(
                invalid(
                    "spec.maxReplicas",
                    max_replicas,
                    "must be greater than or equal to `minReplicas`",
                )
            )
        return errs
    if key == ("storage.k8s.io", "StorageClass"):
        errs = _required_fields(obj, "provisioner")
        if old is not None:
            errs.extend(a._immutable("parameters", obj.get("parameters"), old.get("parameters")))
            errs.extend(a._immutable("provisioner", obj.get("provisioner"), old.get("provisioner")))
        return errs
    if key == ("scheduling.k8s.io", "PriorityClass"):
        errs = []
        if not isinstance(obj.get("value"), int):
            errs.append(required("value"))
        name = str(a._map(obj.get("metadata")).get("name") or "")
        if name.startswith("system-"):
            errs.append(
                forbidden(
                    "metadata.name", "priority class names with 'system-' prefix are reserved"
                )
            )
        if old is not None:
            errs.extend(a._immutable("value", obj.get("value"), old.get("value")))
        return errs
    if key == ("node.k8s.io", "RuntimeClass"):
        handler = obj.get("handler")
        if not handler:
            return [required("handler"), *resourcelist.runtime_class(obj)]
        errs = [invalid("handler", handler, m) for m in a.is_dns1123_label(str(handler))]
        errs.extend(resourcelist.runtime_class(obj))
        if old is not None:
            errs.extend(a._immutable("handler", handler, old.get("handler")))
        return errs
    if key == ("networking.k8s.io", "IngressClass"):
        errs = _required_fields(obj, "spec.controller")
        if old is not None:
            errs.extend(
                a._immutable(
                    "spec.controller", _spec(obj).get("controller"), _spec(old).get("controller")
                )
            )
        return errs
    if key == ("certificates.k8s.io", "CertificateSigningRequest"):
        return _required_fields(obj, "spec.request", "spec.signerName")
    if key == ("storage.k8s.io", "VolumeAttachment"):
        return _required_fields(obj, "spec.attacher", "spec.nodeName")
    if key == ("storage.k8s.io", "CSIStorageCapacity"):
        return _required_fields(obj, "storageClassName") + resourcelist.csi_storage_capacity(obj)
    if key == ("", "ResourceQuota"):
        return resourcelist.resource_quota(obj)
    if key == ("", "LimitRange"):
        return resourcelist.limit_range(obj)
    if key == ("", "Node"):
        return resourcelist.node(obj)
    if key == ("storage.k8s.io", "VolumeAttributesClass"):
        errs = _required_fields(obj, "driverName")
        if old is not None:
            errs.extend(a._immutable("driverName", obj.get("driverName"), old.get("driverName")))
            errs.extend(a._immutable("parameters", obj.get("parameters"), old.get("parameters")))
        return errs
    if key in (
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ):
        return _webhooks(obj)
    return []

"""Defaulting and validation of the built-in kinds beyond the core set (kinds.py),
reached through the built-in strategy's default/validate as the server reaches them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from apiserver.api.field import AdmissionError
from apiserver.registry.strategy import default, validate

PAUSE = "registry.k8s.io/pause:3.9"


def _defaulted(kind: str, group: str, obj: dict[str, Any]) -> dict[str, Any]:
    return default(
        kind,
        group,
        obj,
        allocate_cluster_ip=lambda: "10.96.0.10",
        token_volume_suffix=lambda: "abcde",
    )


def _fields(kind: str, group: str, obj: dict[str, Any], old: Any = None) -> list[str]:
    try:
        validate(kind, group, obj, old)
    except AdmissionError as exc:
        return [c.field for c in exc.causes]
    return []


def _template(restart: str | None = None, app: str = "a") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": PAUSE}]}
    if restart:
        spec["restartPolicy"] = restart
    return {"metadata": {"labels": {"app": app}}, "spec": spec}


def _sts(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": _template(), **spec},
    }


def test_statefulset_defaults_and_forbidden_updates() -> None:
    sts = _defaulted("StatefulSet", "apps", _sts())
    assert sts["spec"]["replicas"] == 1
    assert sts["spec"]["podManagementPolicy"] == "OrderedReady"
    assert sts["spec"]["template"]["spec"]["restartPolicy"] == "Always"
    assert sts["status"] == {"replicas": 0, "availableReplicas": 0}
    assert _fields("StatefulSet", "apps", sts) == []
    scaled = copy.deepcopy(sts)
    scaled["spec"]["replicas"] = 5
    assert _fields("StatefulSet", "apps", scaled, sts) == []
    renamed = copy.deepcopy(sts)
    renamed["spec"]["serviceName"] = "other"
    assert _fields("StatefulSet", "apps", renamed, sts) == ["spec"]


def test_daemonset_status_starts_at_zero_counters() -> None:
    ds = _defaulted("DaemonSet", "apps", _sts())
    assert ds["status"]["desiredNumberScheduled"] == 0
    assert ds["spec"]["updateStrategy"]["rollingUpdate"] == {"maxUnavailable": 1, "maxSurge": 0}


def test_job_restart_policy_and_generated_selector() -> None:
    job = {"metadata": {"name": "j"}, "spec": {"template": _template("Never")}}
    out = _defaulted("Job", "batch", job)
    uid = out["metadata"]["uid"]
    assert out["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert out["metadata"]["labels"]["job-name"] == "j"
    assert _fields("Job", "batch", out) == []
    always = {"metadata": {"name": "j"}, "spec": {"template": _template("Always")}}
    assert "spec.template.spec.restartPolicy" in _fields(
        "Job", "batch", _defaulted("Job", "batch", always)
    )


def test_job_template_is_immutable_unless_suspended() -> None:
    job = _defaulted(
        "Job", "batch", {"metadata": {"name": "j"}, "spec": {"template": _template("Never")}}
    )
    changed = copy.deepcopy(job)
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "other"
    assert "spec.template" in _fields("Job", "batch", changed, job)
    job["spec"]["suspend"] = True
    changed["spec"]["suspend"] = True
    assert _fields("Job", "batch", changed, job) == []


@pytest.mark.parametrize(
    ("schedule", "ok"),
    [
        ("*/5 * * * *", True),
        ("@hourly", True),
        ("0 3 * * MON-FRI", True),
        ("* * * *", False),
        ("TZ=UTC 0 3 * * *", False),
    ],
)
def test_cronjob_schedule(schedule: str, ok: bool) -> None:
    cj = {
        "metadata": {"name": "cj"},
        "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": _template("Never")}}},
    }
    fields = _fields("CronJob", "batch", _defaulted("CronJob", "batch", cj))
    assert (fields == []) is ok, fields


def test_replication_controller_selector_defaults_from_template() -> None:
    rc = {"metadata": {"name": "rc"}, "spec": {"template": _template(app="x")}}
    out = _defaulted("ReplicationController", "", rc)
    assert out["spec"]["selector"] == {"app": "x"}
    assert out["metadata"]["labels"] == {"app": "x"}
    assert out["spec"]["replicas"] == 1
    assert _fields("ReplicationController", "", out) == []


def test_pdb_min_available_and_max_unavailable_exclude_each_other() -> None:
    pdb = {"metadata": {"name": "p"}, "spec": {"minAvailable": 1, "maxUnavailable": "10%"}}
    assert _fields("PodDisruptionBudget", "policy", pdb) == ["spec"]
    bad = {"metadata": {"name": "p"}, "spec": {"minAvailable": "abc"}}
    assert _fields("PodDisruptionBudget", "policy", bad) == ["spec.minAvailable"]


def test_rbac_rules_and_names() -> None:
    role = {
        "metadata": {"name": "system:reader"},  # RBAC names are path segments
        "rules": [{"resources": ["pods"], "verbs": ["get"]}],
    }
    assert _fields("Role", "rbac.authorization.k8s.io", role) == ["rules[0].apiGroups"]
    role["rules"] = [{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]
    assert _fields("Role", "rbac.authorization.k8s.io", role) == ["rules[0].nonResourceURLs"]
    assert _fields("ClusterRole", "rbac.authorization.k8s.io", role) == []


def test_rolebinding_role_ref() -> None:
    rb = {
        "metadata": {"name": "rb"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
        "subjects": [{"kind": "ServiceAccount", "name": "sa"}],
    }
    out = _defaulted("RoleBinding", "rbac.authorization.k8s.io", rb)
    assert _fields("RoleBinding", "rbac.authorization.k8s.io", out) == []
    crb = copy.deepcopy(out)
    assert _fields("ClusterRoleBinding", "rbac.authorization.k8s.io", crb) == [
        "roleRef.kind",
        "subjects[0].namespace",
    ]
    changed = copy.deepcopy(out)
    changed["roleRef"]["name"] = "other"
    assert _fields("RoleBinding", "rbac.authorization.k8s.io", changed, out) == ["roleRef"]


def test_apiservice_name_must_be_version_dot_group() -> None:
    spec = {"group": "example.com", "version": "v1", "groupPriorityMinimum": 100,
            "versionPriority": 10}  # fmt: skip
    good = {"metadata": {"name": "v1.example.com"}, "spec": spec}
    out = _defaulted("APIService", "apiregistration.k8s.io", good)
    assert out["status"]["conditions"][0]["reason"] == "Local"
    assert _fields("APIService", "apiregistration.k8s.io", out) == []
    bad = {"metadata": {"name": "v2.example.com"}, "spec": spec}
    assert _fields("APIService", "apiregistration.k8s.io", bad) == ["metadata.name"]
    core = {"metadata": {"name": "v1."}, "spec": {**spec, "group": ""}}
    assert _fields("APIService", "apiregistration.k8s.io", core) == []


def test_pvc_spec_is_immutable_except_requests() -> None:
    pvc = _defaulted(
        "PersistentVolumeClaim",
        "",
        {
            "metadata": {"name": "data"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    )
    assert pvc["spec"]["volumeMode"] == "Filesystem"
    assert pvc["status"] == {"phase": "Pending"}
    grown = copy.deepcopy(pvc)
    grown["spec"]["resources"]["requests"]["storage"] = "2Gi"
    assert _fields("PersistentVolumeClaim", "", grown, pvc) == []
    moved = copy.deepcopy(pvc)
    moved["spec"]["accessModes"] = ["ReadWriteMany"]
    assert _fields("PersistentVolumeClaim", "", moved, pvc) == ["spec"]


def test_hpa_defaults_cpu_target() -> None:
    hpa = {
        "metadata": {"name": "h"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "d"}, "maxReplicas": 2},
    }
    out = _defaulted("HorizontalPodAutoscaler", "autoscaling", hpa)
    assert out["spec"]["minReplicas"] == 1
    assert out["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 80
    out["spec"]["maxReplicas"] = 0
    assert _fields("HorizontalPodAutoscaler", "autoscaling", out) == ["spec.maxReplicas"]


def test_webhook_defaults_and_required_fields() -> None:
    config = {
        "metadata": {"name": "hooks"},
        "webhooks": [
            {"name": "a.b.c", "clientConfig": {"service": {"namespace": "n", "name": "s"}}}
        ],
    }
    out = _defaulted("ValidatingWebhookConfiguration", "admissionregistration.k8s.io", config)
    hook = out["webhooks"][0]
    assert (hook["failurePolicy"], hook["timeoutSeconds"]) == ("Fail", 10)
    assert hook["clientConfig"]["service"]["port"] == 443
    assert _fields("ValidatingWebhookConfiguration", "admissionregistration.k8s.io", out) == [
        "webhooks[0].admissionReviewVersions",
        "webhooks[0].sideEffects",
    ]

"""Defaulting and validation match what kube-apiserver stores and refuses."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest

from apiserver.api.field import AdmissionError, Cause
from apiserver.registry.core import (
    is_dns1035_label,
    is_dns1123_label,
    is_dns1123_subdomain,
    service_update_keeps,
)
from apiserver.registry.strategy import default, validate

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def _errors(
    kind: str, group: str, obj: dict[str, Any], old: dict[str, Any] | None = None
) -> AdmissionError:
    with pytest.raises(AdmissionError) as exc:
        validate(kind, group, obj, old)
    return exc.value


def _fields(err: AdmissionError) -> list[str]:
    return [c.field for c in err.causes]


def _pod(**spec: Any) -> dict[str, Any]:
    spec.setdefault("containers", [{"name": "c", "image": "nginx"}])
    return {"metadata": {"name": "p", "namespace": "ns"}, "spec": spec}


def _deployment(**spec: Any) -> dict[str, Any]:
    spec.setdefault("selector", {"matchLabels": {"app": "web"}})
    spec.setdefault(
        "template",
        {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]},
        },
    )
    return {"metadata": {"name": "web", "namespace": "ns"}, "spec": spec}


def _service(**spec: Any) -> dict[str, Any]:
    spec.setdefault("ports", [{"port": 80}])
    return {"metadata": {"name": "svc", "namespace": "ns"}, "spec": spec}


# --- names ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("check", "value", "ok"),
    [
        (is_dns1123_subdomain, "example.com", True),
        (is_dns1123_subdomain, "a" * 253, True),
        (is_dns1123_subdomain, "a" * 254, False),
        (is_dns1123_subdomain, "Example", False),
        (is_dns1123_subdomain, "-a", False),
        (is_dns1123_label, "my-name", True),
        (is_dns1123_label, "1abc", True),
        (is_dns1123_label, "a.b", False),
        (is_dns1123_label, "a" * 64, False),
        (is_dns1035_label, "my-name", True),
        (is_dns1035_label, "1abc", False),
        (is_dns1035_label, "a-", False),
    ],
)
def test_name_checks(check: Any, value: str, ok: bool) -> None:
    assert (check(value) == []) is ok


def test_name_messages_are_kubes() -> None:
    assert is_dns1123_subdomain("A") == [SUBDOMAIN_MSG]
    assert is_dns1123_label("a.b") == ["must not contain dots"]
    assert is_dns1123_label("a" * 64) == ["must be no more than 63 characters"]
    assert is_dns1035_label("1a") == [
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
        "an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
        "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
    ]


@pytest.mark.parametrize(
    ("kind", "group", "name", "ok"),
    [
        ("Namespace", "", "a.b", False),  # DNS label
        ("Namespace", "", "team-a", True),
        ("Service", "", "1svc", True),  # RFC 1123 label in 1.36 (RelaxedServiceNameValidation)
        ("Service", "", "svc.dotted", False),
        ("ConfigMap", "", "a.b", True),  # DNS subdomain
        ("Lease", "coordination.k8s.io", "kube.leader", True),
        ("Widget", "example.com", "Bad_Name", False),  # custom resources: subdomain
        ("Widget", "example.com", "good.name", True),
    ],
)
def test_name_rules_by_kind(kind: str, group: str, name: str, ok: bool) -> None:
    obj: dict[str, Any] = {"metadata": {"name": name}}
    if kind == "Service":
        obj["spec"] = {"ports": [{"port": 80}]}
    if ok:
        validate(kind, group, obj, None)
    else:
        assert "metadata.name" in _fields(_errors(kind, group, obj))


# --- messages ---------------------------------------------------------------------------


def test_single_cause_message_and_details() -> None:
    err = _errors("ConfigMap", "", {"metadata": {}})
    assert err.status == 422 and err.reason == "Invalid"
    assert err.message == (
        'ConfigMap "" is invalid: metadata.name: Required value: name or generateName is required'
    )
    assert err.causes == [
        Cause(
            "FieldValueRequired",
            "Required value: name or generateName is required",
            "metadata.name",
        )
    ]
    assert (err.kind, err.group) == ("ConfigMap", "")


def test_many_causes_are_bracketed_and_group_qualifies_kind() -> None:
    obj = _deployment(selector=None)
    del obj["spec"]["selector"]
    err = _errors("Deployment", "apps", obj)
    assert err.message == (
        'Deployment.apps "web" is invalid: [spec.selector: Required value, '
        'spec.template.metadata.labels: Invalid value: {"app":"web"}: '
        "`selector` does not match template `labels`]"
    )
    assert (err.kind, err.group, err.name) == ("Deployment", "apps", "web")


def test_pod_message_lists_every_cause() -> None:
    err = _errors("Pod", "", {"metadata": {"name": "A"}, "spec": {}})
    assert err.message == (
        f'Pod "A" is invalid: [metadata.name: Invalid value: "A": {SUBDOMAIN_MSG}, '
        "spec.containers: Required value]"
    )


# --- metadata ---------------------------------------------------------------------------


def test_labels_and_annotations_are_validated() -> None:
    obj = {
        "metadata": {
            "name": "cm",
            "labels": {"bad key": "v", "ok": "bad value!"},
            "annotations": {"Example.com/Mixed": "fine", "a/b/c": "x"},
        }
    }
    err = _errors("ConfigMap", "", obj)
    assert _fields(err) == ["metadata.labels", "metadata.labels", "metadata.annotations"]
    assert 'Invalid value: "bad key"' in err.causes[0].message


def test_annotations_total_size_limit() -> None:
    obj = {"metadata": {"name": "cm", "annotations": {"a": "x" * (256 * 1024)}}}
    err = _errors("ConfigMap", "", obj)
    assert err.causes[0].reason == "FieldValueTooLong"
    assert err.causes[0].field == "metadata.annotations"


def test_owner_references_need_their_fields() -> None:
    obj = {"metadata": {"name": "cm", "ownerReferences": [{"apiVersion": "v1", "kind": "Pod"}]}}
    err = _errors("ConfigMap", "", obj)
    assert _fields(err) == ["metadata.ownerReferences.name", "metadata.ownerReferences.uid"]
    assert err.causes[1].message == 'Invalid value: "": uid must not be empty'


# --- pods -------------------------------------------------------------------------------


def test_valid_pod_passes() -> None:
    validate("Pod", "", _pod(), None)


@pytest.mark.parametrize(
    ("containers", "field", "message"),
    [
        ([], "spec.containers", "Required value"),
        ([{"image": "x"}], "spec.containers[0].name", "Required value"),
        ([{"name": "C", "image": "x"}], "spec.containers[0].name", 'Invalid value: "C"'),
        ([{"name": "c"}], "spec.containers[0].image", "Required value"),
        (
            [{"name": "c", "image": "x"}, {"name": "c", "image": "y"}],
            "spec.containers[1].name",
            'Duplicate value: "c"',
        ),
        (
            [{"name": "c", "image": "x", "ports": [{"containerPort": 70000}]}],
            "spec.containers[0].ports[0].containerPort",
            "Invalid value: 70000: must be between 1 and 65535, inclusive",
        ),
        (
            [{"name": "c", "image": "x", "ports": [{"containerPort": 80, "protocol": "HTTP"}]}],
            "spec.containers[0].ports[0].protocol",
            'Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP"',
        ),
        (
            [
                {
                    "name": "c",
                    "image": "x",
                    "ports": [{"containerPort": 80, "name": "a-very-long-port-name"}],
                }
            ],
            "spec.containers[0].ports[0].name",
            "must be no more than 15 characters",
        ),
        (
            [
                {
                    "name": "c",
                    "image": "x",
                    "ports": [
                        {"containerPort": 80, "name": "h"},
                        {"containerPort": 81, "name": "h"},
                    ],
                }
            ],
            "spec.containers[0].ports[1].name",
            'Duplicate value: "h"',
        ),
        (
            [{"name": "c", "image": "x", "volumeMounts": [{"name": "v", "mountPath": "/v"}]}],
            "spec.containers[0].volumeMounts[0].name",
            'Not found: "v"',
        ),
    ],
)
def test_pod_container_rules(containers: list[dict[str, Any]], field: str, message: str) -> None:
    err = _errors("Pod", "", _pod(containers=containers))
    assert field in _fields(err)
    cause = next(c for c in err.causes if c.field == field)
    assert message in cause.message


# --- deployments ------------------------------------------------------------------------


def test_valid_deployment_passes() -> None:
    validate("Deployment", "apps", _deployment(), None)


def test_deployment_template_must_match_selector() -> None:
    err = _errors("Deployment", "apps", _deployment(selector={"matchLabels": {"app": "db"}}))
    assert err.causes == [
        Cause(
            "FieldValueInvalid",
            'Invalid value: {"app":"web"}: `selector` does not match template `labels`',
            "spec.template.metadata.labels",
        )
    ]


def test_deployment_rules() -> None:
    obj = _deployment(replicas=-1, selector={"matchLabels": {}})
    obj["spec"]["template"]["spec"]["containers"] = []
    obj["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    err = _errors("Deployment", "apps", obj)
    fields = _fields(err)
    assert "spec.replicas" in fields
    assert "spec.selector" in fields  # empty selector is invalid for deployment
    assert "spec.template.spec.containers" in fields
    assert "spec.template.spec.restartPolicy" in fields
    assert "Invalid value: -1: must be greater than or equal to 0" in err.message


def test_deployment_selector_is_immutable() -> None:
    old = _deployment()
    new = _deployment(selector={"matchLabels": {"app": "web", "x": "y"}})
    new["spec"]["template"]["metadata"]["labels"]["x"] = "y"
    err = _errors("Deployment", "apps", new, old)
    assert _fields(err) == ["spec.selector"]
    assert err.causes[0].message == (
        'Invalid value: {"matchLabels":{"app":"web","x":"y"}}: field is immutable'
    )
    validate("Deployment", "apps", _deployment(replicas=3), old)


def test_rolling_update_cannot_have_zero_surge_and_unavailable() -> None:
    obj = _deployment(
        strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"}}
    )
    err = _errors("Deployment", "apps", obj)
    assert err.causes[0].message == 'Invalid value: "0%": may not be 0 when `maxSurge` is 0'


# --- services ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        ({"ports": []}, "spec.ports", "Required value"),
        ({"ports": [{"port": 0}]}, "spec.ports[0].port", "must be between 1 and 65535"),
        ({"ports": [{"port": 80}, {"port": 81}]}, "spec.ports[0].name", "Required value"),
        (
            {"ports": [{"port": 80, "name": "a"}, {"port": 81, "name": "a"}]},
            "spec.ports[1].name",
            'Duplicate value: "a"',
        ),
        (
            {"type": "Bogus"},
            "spec.type",
            'Unsupported value: "Bogus": supported values: "ClusterIP", "ExternalName", '
            '"LoadBalancer", "NodePort"',
        ),
        ({"ports": [{"port": 80, "protocol": "ICMP"}]}, "spec.ports[0].protocol", "Unsupported"),
        ({"clusterIP": "not-an-ip"}, "spec.clusterIPs[0]", "must be a valid IP address"),
        ({"ports": [{"port": 80, "nodePort": 30001}]}, "spec.ports[0].nodePort", "Forbidden"),
    ],
)
def test_service_rules(spec: dict[str, Any], field: str, message: str) -> None:
    err = _errors("Service", "", _service(**spec))
    cause = next(c for c in err.causes if c.field == field)
    assert message in cause.message


@pytest.mark.parametrize(
    "spec",
    [
        {"clusterIP": "None", "ports": []},  # headless without ports
        {"type": "ExternalName", "externalName": "db.example.com", "ports": []},
        {"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]},
    ],
)
def test_services_that_are_valid(spec: dict[str, Any]) -> None:
    validate("Service", "", _service(**spec), None)


def test_service_cluster_ip_is_immutable_once_set() -> None:
    old = _service(clusterIP="10.96.0.5", clusterIPs=["10.96.0.5"])
    new = service_update_keeps(old, _service(clusterIP="10.96.0.9"))
    err = _errors("Service", "", new, old)
    assert err.causes == [
        Cause(
            "FieldValueInvalid",
            'Invalid value: ["10.96.0.9"]: may not change once set',
            "spec.clusterIPs[0]",
        )
    ]
    validate("Service", "", service_update_keeps(old, _service()), old)


def test_service_update_keeps_cluster_ip_and_redefaults_ports() -> None:
    old = _service(clusterIP="10.96.0.5", clusterIPs=["10.96.0.5"], ipFamilies=["IPv4"])
    new = _service(ports=[{"port": 8080}])
    before = copy.deepcopy(new)
    kept = service_update_keeps(old, new)
    assert new == before
    assert kept["spec"]["clusterIP"] == "10.96.0.5"
    assert kept["spec"]["clusterIPs"] == ["10.96.0.5"]
    assert kept["spec"]["ports"] == [{"port": 8080, "protocol": "TCP", "targetPort": 8080}]


# --- ingresses, leases, config, CRDs ----------------------------------------------------


def _ingress(rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {"metadata": {"name": "ing"}, "spec": {"rules": rules}}


def _rule(host: str = "example.com", **path: Any) -> dict[str, Any]:
    path.setdefault("pathType", "Prefix")
    path.setdefault("path", "/")
    path.setdefault("backend", {"service": {"name": "svc", "port": {"number": 80}}})
    return {"host": host, "http": {"paths": [path]}}


def test_valid_ingresses() -> None:
    validate("Ingress", "networking.k8s.io", _ingress([_rule(), _rule("*.example.com")]), None)
    port_by_name = {"service": {"name": "svc", "port": {"name": "http"}}}
    validate("Ingress", "networking.k8s.io", _ingress([_rule(backend=port_by_name)]), None)


@pytest.mark.parametrize(
    ("rule", "field", "message"),
    [
        (_rule("Bad_Host"), "spec.rules[0].host", "a lowercase RFC 1123 subdomain"),
        (_rule("*.bad_host"), "spec.rules[0].host", "a wildcard DNS-1123 subdomain"),
        (_rule("10.0.0.1"), "spec.rules[0].host", "must be a DNS name, not an IP address"),
        (_rule(path="x"), "spec.rules[0].http.paths[0].path", "must be an absolute path"),
        (
            _rule(pathType=None),
            "spec.rules[0].http.paths[0].pathType",
            "pathType must be specified",
        ),
        (_rule(pathType="Regex"), "spec.rules[0].http.paths[0].pathType", "Unsupported value"),
        (
            _rule(backend={"service": {"port": {"number": 80}}}),
            "spec.rules[0].http.paths[0].backend.service.name",
            "Required value",
        ),
        (
            _rule(backend={"service": {"name": "svc"}}),
            "spec.rules[0].http.paths[0].backend",
            "port name or number is required",
        ),
    ],
)
def test_ingress_rules(rule: dict[str, Any], field: str, message: str) -> None:
    if rule["http"]["paths"][0].get("pathType") is None:
        del rule["http"]["paths"][0]["pathType"]
    err = _errors("Ingress", "networking.k8s.io", _ingress([rule]))
    cause = next(c for c in err.causes if c.field == field)
    assert message in cause.message


@pytest.mark.parametrize(("seconds", "ok"), [(15, True), (None, True), (0, False), (-1, False)])
def test_lease_duration(seconds: int | None, ok: bool) -> None:
    obj = {"metadata": {"name": "l"}, "spec": {"leaseDurationSeconds": seconds}}
    if ok:
        validate("Lease", "coordination.k8s.io", obj, None)
    else:
        err = _errors("Lease", "coordination.k8s.io", obj)
        assert err.causes[0].message == f"Invalid value: {seconds}: must be greater than 0"


def test_configmap_keys() -> None:
    obj = {"metadata": {"name": "cm"}, "data": {"ok.key_1-x": "", "bad key": "", "..x": ""}}
    err = _errors("ConfigMap", "", obj)
    assert _fields(err) == ["data[..x]", "data[bad key]"]
    assert "must not start with '..'" in err.causes[0].message


def test_immutable_configmap_data() -> None:
    old = {"metadata": {"name": "cm"}, "immutable": True, "data": {"a": "1"}}
    new = {"metadata": {"name": "cm"}, "immutable": True, "data": {"a": "2"}}
    err = _errors("ConfigMap", "", new, old)
    assert err.causes[0].message == "Forbidden: field is immutable when `immutable` is set"


def _crd(**over: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "kind": "Widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": {"type": "object"}},
            }
        ],
    }
    spec.update(over)
    return {"metadata": {"name": "widgets.example.com"}, "spec": spec}


def test_valid_crd() -> None:
    validate("CustomResourceDefinition", "apiextensions.k8s.io", _crd(), None)


@pytest.mark.parametrize(
    ("over", "field", "message"),
    [
        ({"group": "other.io"}, "metadata.name", 'must be spec.names.plural+"."+spec.group'),
        ({"scope": "Global"}, "spec.scope", 'supported values: "Cluster", "Namespaced"'),
        ({"names": {"plural": "widgets"}}, "spec.names.kind", "Required value"),
        ({"versions": []}, "spec.versions", "must have exactly one version marked as storage"),
        (
            {"versions": [{"name": "v1", "storage": False, "schema": {"openAPIV3Schema": {}}}]},
            "spec.versions",
            "must have exactly one version marked as storage version",
        ),
        (
            {"versions": [{"name": "v1", "storage": True}]},
            "spec.versions[0].schema.openAPIV3Schema",
            "schemas are required",
        ),
    ],
)
def test_crd_rules(over: dict[str, Any], field: str, message: str) -> None:
    err = _errors("CustomResourceDefinition", "apiextensions.k8s.io", _crd(**over))
    assert any(c.field == field and message in c.message for c in err.causes), err.causes


def test_custom_resources_get_metadata_validation_only() -> None:
    validate("Widget", "example.com", {"metadata": {"name": "w"}, "spec": {"anything": -1}}, None)


# --- defaulting -------------------------------------------------------------------------


def _defaults(kind: str, group: str, obj: dict[str, Any], **kw: Any) -> dict[str, Any]:
    ips = (f"10.96.0.{i}" for i in itertools.count(10))
    return default(
        kind,
        group,
        obj,
        allocate_cluster_ip=lambda: next(ips),
        token_volume_suffix=lambda: "abcde",
        **kw,
    )


def test_pod_defaults() -> None:
    pod = _pod(containers=[{"name": "c", "image": "nginx", "ports": [{"containerPort": 80}]}])
    before = copy.deepcopy(pod)
    out = _defaults("Pod", "", pod)
    assert pod == before
    spec = out["spec"]
    assert {
        k: spec[k]
        for k in (
            "restartPolicy",
            "dnsPolicy",
            "schedulerName",
            "terminationGracePeriodSeconds",
            "securityContext",
            "serviceAccountName",
            "serviceAccount",
            "enableServiceLinks",
            "preemptionPolicy",
            "priority",
        )
    } == {
        "restartPolicy": "Always",
        "dnsPolicy": "ClusterFirst",
        "schedulerName": "default-scheduler",
        "terminationGracePeriodSeconds": 30,
        "securityContext": {},
        "serviceAccountName": "default",
        "serviceAccount": "default",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0,
    }
    assert spec["tolerations"] == [
        {
            "key": f"node.kubernetes.io/{t}",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        }
        for t in ("not-ready", "unreachable")
    ]
    ctr = spec["containers"][0]
    assert ctr["terminationMessagePath"] == "/dev/termination-log"
    assert ctr["terminationMessagePolicy"] == "File"
    assert ctr["imagePullPolicy"] == "Always"
    assert ctr["resources"] == {}
    assert ctr["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    assert ctr["volumeMounts"] == [
        {
            "name": "kube-api-access-abcde",
            "readOnly": True,
            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
        }
    ]
    volume = spec["volumes"][0]
    assert volume["name"] == "kube-api-access-abcde"
    assert volume["projected"]["defaultMode"] == 420
    sources = volume["projected"]["sources"]
    assert sources[0] == {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}
    assert sources[1]["configMap"]["name"] == "kube-root-ca.crt"
    assert sources[2]["downwardAPI"]["items"][0]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert out["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    validate("Pod", "", out, None)


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("nginx", "Always"),
        ("nginx:latest", "Always"),
        ("nginx:1.25", "IfNotPresent"),
        ("localhost:5000/app", "Always"),
        ("localhost:5000/app:v1", "IfNotPresent"),
        ("nginx@sha256:" + "a" * 64, "IfNotPresent"),
    ],
)
def test_image_pull_policy_default(image: str, policy: str) -> None:
    out = _defaults("Pod", "", _pod(containers=[{"name": "c", "image": image}]))
    assert out["spec"]["containers"][0]["imagePullPolicy"] == policy


def test_pod_defaults_keep_what_is_given() -> None:
    pod = _pod(
        automountServiceAccountToken=False,
        serviceAccountName="robot",
        tolerations=[{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}],
        containers=[
            {
                "name": "c",
                "image": "x:1",
                "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
            }
        ],
    )
    out = _defaults("Pod", "", pod)
    spec = out["spec"]
    assert "volumes" not in spec or spec["volumes"] == []
    assert spec["serviceAccountName"] == spec["serviceAccount"] == "robot"
    assert [t["key"] for t in spec["tolerations"]] == [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ]
    assert spec["containers"][0]["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}
    assert out["status"]["qosClass"] == "Guaranteed"


def test_deployment_defaults_without_pod_only_parts() -> None:
    out = _defaults("Deployment", "apps", _deployment())
    spec = out["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
    }
    assert spec["revisionHistoryLimit"] == 10
    assert spec["progressDeadlineSeconds"] == 600
    tspec = spec["template"]["spec"]
    assert tspec["restartPolicy"] == "Always"
    assert tspec["schedulerName"] == "default-scheduler"
    assert tspec["containers"][0]["imagePullPolicy"] == "Always"
    for pod_only in ("tolerations", "volumes", "serviceAccountName", "enableServiceLinks"):
        assert pod_only not in tspec
    assert "status" not in out
    validate("Deployment", "apps", out, None)


def test_recreate_strategy_gets_no_rolling_update() -> None:
    out = _defaults("Deployment", "apps", _deployment(strategy={"type": "Recreate"}))
    assert out["spec"]["strategy"] == {"type": "Recreate"}


def test_service_defaults() -> None:
    svc = _service(ports=[{"port": 80}, {"port": 81, "targetPort": "http", "protocol": "UDP"}])
    out = _defaults("Service", "", svc)
    spec = out["spec"]
    assert spec["type"] == "ClusterIP"
    assert spec["sessionAffinity"] == "None"
    assert spec["internalTrafficPolicy"] == "Cluster"
    assert spec["ipFamilies"] == ["IPv4"]
    assert spec["ipFamilyPolicy"] == "SingleStack"
    assert spec["clusterIP"] == "10.96.0.10"
    assert spec["clusterIPs"] == ["10.96.0.10"]
    assert spec["ports"] == [
        {"port": 80, "protocol": "TCP", "targetPort": 80},
        {"port": 81, "targetPort": "http", "protocol": "UDP"},
    ]
    assert "externalTrafficPolicy" not in spec


def test_service_defaults_headless_nodeport_externalname() -> None:
    headless = _defaults("Service", "", _service(clusterIP="None"))["spec"]
    assert headless["clusterIP"] == "None" and headless["clusterIPs"] == ["None"]
    nodeport = _defaults("Service", "", _service(type="NodePort"))["spec"]
    assert nodeport["externalTrafficPolicy"] == "Cluster"
    assert "nodePort" not in nodeport["ports"][0]
    given = _defaults("Service", "", _service(clusterIP="10.96.1.1"))["spec"]
    assert given["clusterIPs"] == ["10.96.1.1"]
    external = _defaults("Service", "", _service(type="ExternalName", externalName="x.io"))["spec"]
    assert "clusterIP" not in external and "internalTrafficPolicy" not in external


def test_namespace_defaults() -> None:
    out = _defaults("Namespace", "", {"metadata": {"name": "team"}})
    assert out["spec"] == {"finalizers": ["kubernetes"]}
    assert out["status"] == {"phase": "Active"}
    assert out["metadata"]["labels"] == {"kubernetes.io/metadata.name": "team"}


def test_namespace_finalizer_is_added_on_create_only() -> None:
    stored = {"metadata": {"name": "team", "uid": "u"}, "spec": {"finalizers": []}}
    out = _defaults("Namespace", "", stored)
    assert out["spec"]["finalizers"] == []
    out = _defaults(
        "Namespace", "", {"metadata": {"name": "t"}, "spec": {"finalizers": []}}, old={}
    )
    assert out["spec"]["finalizers"] == []


@pytest.mark.parametrize(
    ("kind", "group"),
    [
        ("Ingress", "networking.k8s.io"),
        ("Lease", "coordination.k8s.io"),
        ("ConfigMap", ""),
    ],
)
def test_kinds_without_defaults_are_copied_unchanged(kind: str, group: str) -> None:
    obj = {"metadata": {"name": "x"}, "spec": {"a": [1]}}
    out = _defaults(kind, group, obj)
    assert out == obj
    out["spec"]["a"].append(2)
    assert obj["spec"]["a"] == [1]


def test_a_core_event_is_stored_with_the_keys_of_its_go_struct() -> None:
    sent = {"metadata": {"name": "e"}, "reason": "R", "source": {"component": "me"}}
    out = _defaults("Event", "", sent)
    assert out == {
        "metadata": {"name": "e"},
        "reason": "R",
        "source": {"component": "me"},
        "involvedObject": {},
        "firstTimestamp": None,
        "lastTimestamp": None,
        "eventTime": None,
        "reportingComponent": "",
        "reportingInstance": "",
    }
    assert "involvedObject" not in sent
    bare = _defaults("Event", "", {"metadata": {"name": "e"}, "reportingInstance": "i-1"})
    assert (bare["source"], bare["reportingInstance"]) == ({}, "i-1")

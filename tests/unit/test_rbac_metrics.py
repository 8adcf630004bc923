"""``overseer rbac`` with secure metrics: the manager's ClusterRole may create
TokenReviews and SubjectAccessReviews, and the reader ClusterRoles (bound to no one) grant
GET on /metrics and on the z-pages; with plain metrics, none of that."""

from __future__ import annotations

import yaml

from manager.rbac import RbacOptions, render


def _objects(secure: bool) -> dict[str, dict]:  # type: ignore[type-arg]
    text = render([], RbacOptions(name="ovs", namespace="ns", metrics_secure=secure))
    return {f"{d['kind']}/{d['metadata']['name']}": d for d in yaml.safe_load_all(text) if d}


def test_secure_metrics_rules_and_reader_roles() -> None:
    objs = _objects(True)
    rules = objs["ClusterRole/ovs"]["rules"]
    assert {
        "apiGroups": ["authentication.k8s.io"],
        "resources": ["tokenreviews"],
        "verbs": ["create"],
    } in rules
    assert {
        "apiGroups": ["authorization.k8s.io"],
        "resources": ["subjectaccessreviews"],
        "verbs": ["create"],
    } in rules
    assert objs["ClusterRole/ovs-metrics-reader"]["rules"] == [
        {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}
    ]
    assert objs["ClusterRole/ovs-status-reader"]["rules"] == [
        {"nonResourceURLs": ["/statusz", "/flagz"], "verbs": ["get"]}
    ]
    bound = {d["roleRef"]["name"] for d in objs.values() if d["kind"].endswith("Binding")}
    assert "ovs-metrics-reader" not in bound and "ovs-status-reader" not in bound


def test_plain_metrics_need_no_reviews() -> None:
    objs = _objects(False)
    assert not [r for r in objs["ClusterRole/ovs"]["rules"] if "tokenreviews" in r["resources"]]
    assert "ClusterRole/ovs-metrics-reader" not in objs

"""``overseer rbac``'s objects: namespaced rules become a Role in their namespace, and the
shard Leases' Role goes where the shard Leases are."""

from __future__ import annotations

import pytest
import yaml

from manager.rbac import RbacOptions, render


def _objects(text: str) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def test_rules_with_namespaces_become_a_role_there_and_not_in_the_cluster_role() -> None:
    rules = [
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]},
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "verbs": ["get", "list", "watch"],
            "namespaces": ["source"],
        },
    ]
    docs = _objects(render([("mirror", rules)], RbacOptions(leader_election=False)))
    by_kind = {(d["kind"], d["metadata"].get("namespace", "")): d for d in docs}
    # the ClusterRole named overseer (the metrics reader ClusterRoles sit beside it)
    cluster_rules = next(
        d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "overseer"
    )["rules"]
    assert all("secrets" not in r["resources"] for r in cluster_rules)
    assert {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]} in (
        cluster_rules
    )
    role = by_kind[("Role", "source")]
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]}
    ]
    binding = by_kind[("RoleBinding", "source")]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "overseer",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "overseer", "namespace": "overseer-system"}
    ]


def test_the_sharding_role_is_in_the_shard_leases_namespace() -> None:
    opts = RbacOptions(sharding=True, sharding_namespace="rings")
    docs = _objects(render([], opts))
    role = next(
        d for d in docs if d["metadata"]["name"] == "overseer-sharding" and d["kind"] == "Role"
    )
    binding = next(
        d
        for d in docs
        if d["metadata"]["name"] == "overseer-sharding" and d["kind"] == "RoleBinding"
    )
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "rings"
    assert binding["subjects"][0]["namespace"] == "overseer-system"


def test_a_namespaced_rule_names_real_namespaces() -> None:
    from manager.errors import PluginLoadError
    from manager.plugins import declared_rbac_rules

    class Plugin:
        rbac_rules = [
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "namespaces": ["A_b"]}
        ]

    with pytest.raises(PluginLoadError, match="'A_b' is not a namespace name"):
        declared_rbac_rules("p", Plugin(), None)  # type: ignore[arg-type]

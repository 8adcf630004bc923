"""The spread check of the kind e2e suite (``e2e/spread.py``): what deploy/'s hard
topology spread constraints allow on the nodes a cluster has (issue 34: a one-node
cluster runs all three replicas on its node, which the old "two nodes or more" check
refused)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.spread import eligible, hard_constraints, spread_violations

DEPLOYMENT = Path(__file__).parents[2] / "deploy" / "base" / "deployment.yaml"
CONTROL_PLANE_TAINT = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}


def _template() -> dict[str, Any]:
    spec: dict[str, Any] = yaml.safe_load(DEPLOYMENT.read_text())["spec"]["template"]["spec"]
    return spec


def _node(
    name: str, *, taints: list[dict[str, str]] | None = None, **labels: str
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "spec": {"taints": taints or []},
    }


def _pods(
    *nodes: str, spec: dict[str, Any] | None = None, hash_: str = "h1"
) -> list[dict[str, Any]]:
    return [
        {
            "metadata": {
                "name": f"overseer-{hash_}-{i}",
                "labels": {"app.kubernetes.io/name": "overseer", "pod-template-hash": hash_},
            },
            "spec": {**(spec or _template()), "nodeName": node},
        }
        for i, node in enumerate(nodes)
    ]


def _kind(workers: int) -> list[dict[str, Any]]:
    """A kind cluster: a tainted control plane and ``workers`` workers."""
    plane = _node("control-plane", taints=[CONTROL_PLANE_TAINT])
    return [plane] + [_node(f"worker-{i}") for i in range(1, workers + 1)]


def test_the_manifest_spreads_over_hostnames_as_a_hard_constraint() -> None:
    constraints = hard_constraints(_template())
    assert [c["topologyKey"] for c in constraints] == ["kubernetes.io/hostname"]


@pytest.mark.parametrize(
    ("workers", "placement", "allowed"),
    [
        (0, ["control-plane"] * 3, True),  # one node, untainted: it takes all three
        (1, ["worker-1"] * 3, True),  # the cluster: one schedulable node
        (2, ["worker-1", "worker-1", "worker-2"], True),
        (2, ["worker-1"] * 3, False),
        (3, ["worker-1", "worker-2", "worker-3"], True),
        (3, ["worker-1", "worker-1", "worker-2"], False),
    ],
)
def test_replicas_spread_evenly_over_the_schedulable_nodes(
    workers: int, placement: list[str], allowed: bool
) -> None:
    nodes = _kind(workers) if workers else [_node("control-plane")]
    problems = spread_violations(_pods(*placement), nodes)
    assert (problems == []) is allowed, problems


def test_a_violation_names_the_domains_and_the_skew() -> None:
    problems = spread_violations(_pods("worker-1", "worker-1", "worker-1"), _kind(2))
    assert problems == [
        "kubernetes.io/hostname: {'worker-1': 3, 'worker-2': 0} skews 3 > maxSkew 1"
    ]


def test_a_tainted_node_counts_only_when_the_taint_is_tolerated_or_ignored() -> None:
    pods = _pods("worker-1", "worker-1", "worker-2")
    assert spread_violations(pods, _kind(2)) == []
    tolerant = {**_template(), "tolerations": [{"operator": "Exists"}]}
    assert spread_violations(_pods("worker-1", "worker-1", "worker-2", spec=tolerant), _kind(2))
    ignoring = _template()
    ignoring["topologySpreadConstraints"] = [
        {k: v for k, v in c.items() if k != "nodeTaintsPolicy"}
        for c in ignoring["topologySpreadConstraints"]
    ]
    assert spread_violations(_pods("worker-1", "worker-1", "worker-2", spec=ignoring), _kind(2))
    # a taint without a scheduling effect never excludes the node
    soft = [*_kind(1), _node("worker-2", taints=[{"key": "x", "effect": "PreferNoSchedule"}])]
    assert spread_violations(_pods("worker-1", "worker-1", "worker-1"), soft)


def test_a_toleration_matches_by_key_value_and_effect() -> None:
    constraint = hard_constraints(_template())[0]
    node = _node("n", taints=[{"key": "dedicated", "value": "ops", "effect": "NoSchedule"}])
    for toleration, tolerated in [
        ({"key": "dedicated", "operator": "Equal", "value": "ops"}, True),
        ({"key": "dedicated", "value": "dev"}, False),
        ({"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}, True),
        ({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "other", "operator": "Exists"}, False),
    ]:
        spec = {**_template(), "tolerations": [toleration]}
        assert eligible(constraint, spec, node) is tolerated, toleration


def test_nodes_outside_the_node_selector_or_affinity_are_no_domains() -> None:
    nodes = [*_kind(1), _node("worker-2", pool="batch")]
    selected = {**_template(), "nodeSelector": {"kubernetes.io/os": "linux"}}
    for n in nodes:
        n["metadata"]["labels"]["kubernetes.io/os"] = "linux"
    nodes[-1]["metadata"]["labels"]["kubernetes.io/os"] = "windows"
    assert spread_violations(_pods("worker-1", "worker-1", "worker-1", spec=selected), nodes) == []
    affinity = {
        **_template(),
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "pool", "operator": "NotIn", "values": ["batch"]}
                            ]
                        }
                    ]
                }
            }
        },
    }
    assert spread_violations(_pods("worker-1", "worker-1", "worker-1", spec=affinity), nodes) == []
    assert spread_violations(_pods("worker-1", "worker-1", "worker-1"), nodes)


def test_only_one_replica_sets_pods_count_together_and_terminating_pods_not_at_all() -> None:
    # mid-rollout: the old ReplicaSet's pods (2 and 1) and the new one's first (1 and 0)
    # are each spread, though together they are 3 and 1
    pods = _pods("worker-1", "worker-1", "worker-2", hash_="old") + _pods("worker-1", hash_="new")
    assert spread_violations(pods, _kind(2)) == []
    # two replicas on their way out of worker-1: what stays is 1 and 1
    leaving = _pods("worker-1", "worker-1", "worker-1", "worker-2")
    for pod in leaving[1:3]:
        pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert spread_violations(leaving, _kind(2)) == []
    for pod in leaving[1:3]:
        del pod["metadata"]["deletionTimestamp"]
    assert spread_violations(leaving, _kind(2))


def test_fewer_domains_than_min_domains_count_the_emptiest_as_zero() -> None:
    spec = _template()
    spec["topologySpreadConstraints"] = [
        {**hard_constraints(spec)[0], "minDomains": 3, "maxSkew": 2}
    ]
    assert spread_violations(_pods("worker-1", "worker-1", "worker-2", spec=spec), _kind(2)) == []
    assert spread_violations(_pods("worker-1", "worker-1", "worker-1", spec=spec), _kind(2))
    assert spread_violations(_pods("worker-1", "worker-1", "worker-1", spec=spec), _kind(1))


def test_soft_constraints_promise_nothing() -> None:
    spec = _template()
    spec["topologySpreadConstraints"] = [
        {**c, "whenUnsatisfiable": "ScheduleAnyway"} for c in spec["topologySpreadConstraints"]
    ]
    assert hard_constraints(spec) == []
    assert spread_violations(_pods("worker-1", "worker-1", "worker-1", spec=spec), _kind(3)) == []

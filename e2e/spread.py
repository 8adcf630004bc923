"""Topology spread: what a pod template's hard spread constraints promise about where
its replicas run, on the nodes a cluster actually has.

A constraint with ``whenUnsatisfiable: DoNotSchedule`` lets the scheduler place a pod in
a topology domain only while ``pods there + 1 - fewest pods in any domain <= maxSkew``
(kube-scheduler's PodTopologySpread Filter, ``framework/plugins/podtopologyspread``).
Placed one at a time, the replicas then end up with at most ``maxSkew`` between the
fullest and the emptiest domain. The domains are the values of ``topologyKey`` on the
*eligible* nodes: those that have the key, match the pod's node selector and required
node affinity (``nodeAffinityPolicy: Honor``, the default), and, with
``nodeTaintsPolicy: Honor``, carry no NoSchedule/NoExecute taint the pod does not
tolerate. Only pods that match the constraint's ``labelSelector`` and share the values
of its ``matchLabelKeys`` (one ReplicaSet's pods) count together; terminating pods do
not count. With fewer domains than ``minDomains`` the fewest is taken as 0.

So one schedulable node takes every replica, two take 2 and 1, three or more one each:
:func:`spread_violations` checks the placement the cluster shows against that, rather
than against a node count the test assumed.

Thread-safety: pure functions; safe to share between threads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from manager.labels import label_selector_from_dict

__all__ = ["eligible", "hard_constraints", "spread_violations"]

JsonDict = Mapping[str, Any]
_DO_NOT_SCHEDULE_EFFECTS = ("NoSchedule", "NoExecute")


def hard_constraints(pod_spec: JsonDict) -> list[JsonDict]:
    """The ``DoNotSchedule`` topology spread constraints of a pod (template) spec."""
    return [
        c
        for c in pod_spec.get("topologySpreadConstraints") or []
        if c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"
    ]


def _tolerates(toleration: JsonDict, taint: JsonDict) -> bool:
    """``Toleration.ToleratesTaint`` (core/v1 helpers), without the alpha Lt/Gt."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return (toleration.get("value") or "") == (taint.get("value") or "")


def _matches_node_selector_term(term: JsonDict, labels: Mapping[str, str]) -> bool:
    if term.get("matchFields"):
        raise ValueError("node affinity matchFields is not supported by this check")
    expressions = term.get("matchExpressions") or []
    if not expressions:
        return False  # an empty term matches no node
    return label_selector_from_dict({"matchExpressions": expressions}).matches(labels)


def _matches_affinity(pod_spec: JsonDict, node: JsonDict) -> bool:
    """The pod's ``nodeSelector`` and required node affinity (``RequiredNodeAffinity``)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    for key, value in (pod_spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms")
    if terms is None:
        return True
    return any(_matches_node_selector_term(t, labels) for t in terms)


def eligible(constraint: JsonDict, pod_spec: JsonDict, node: JsonDict) -> bool:
    """Whether ``node`` is one of the constraint's domains for a pod of ``pod_spec``."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    if constraint["topologyKey"] not in labels:
        return False
    if constraint.get("nodeAffinityPolicy", "Honor") == "Honor" and not _matches_affinity(
        pod_spec, node
    ):
        return False
    if constraint.get("nodeTaintsPolicy", "Ignore") == "Honor":
        tolerations = pod_spec.get("tolerations") or []
        for taint in (node.get("spec") or {}).get("taints") or []:
            if taint.get("effect") not in _DO_NOT_SCHEDULE_EFFECTS:
                continue
            if not any(_tolerates(t, taint) for t in tolerations):
                return False
    return True


def _counts(
    constraint: JsonDict, pods: Sequence[JsonDict], nodes: Sequence[JsonDict]
) -> dict[str, int]:
    """Pods per domain (every domain, empty ones at 0), for pods placed like ``pods[0]``."""
    spec = pods[0]["spec"]
    key = constraint["topologyKey"]
    domain_of = {
        n["metadata"]["name"]: n["metadata"]["labels"][key]
        for n in nodes
        if eligible(constraint, spec, n)
    }
    counts = dict.fromkeys(domain_of.values(), 0)
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node in domain_of:
            counts[domain_of[node]] += 1
    return counts


def spread_violations(pods: Sequence[JsonDict], nodes: Sequence[JsonDict]) -> list[str]:
    """What breaks the hard spread constraints of ``pods`` (scheduled, not terminating;
    one workload's) on ``nodes``: one line per constraint and group of pods whose
    fullest and emptiest domains differ by more than ``maxSkew``; empty when the
    placement is one the scheduler allows."""
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    problems: list[str] = []
    constraints = hard_constraints(live[0]["spec"]) if live else []
    for constraint in constraints:
        selector = label_selector_from_dict(constraint.get("labelSelector") or {})
        keys = tuple(constraint.get("matchLabelKeys") or ())
        groups: dict[tuple[str | None, ...], list[JsonDict]] = {}
        for pod in live:
            labels = pod["metadata"].get("labels") or {}
            if selector.matches(labels):
                groups.setdefault(tuple(labels.get(k) for k in keys), []).append(pod)
        for group in groups.values():
            counts = _counts(constraint, group, nodes)
            if not counts:
                problems.append(f"{constraint['topologyKey']}: no eligible node")
                continue
            fewest = min(counts.values())
            if len(counts) < int(constraint.get("minDomains") or 1):
                fewest = 0
            skew = max(counts.values()) - fewest
            if skew > int(constraint["maxSkew"]):
                problems.append(
                    f"{constraint['topologyKey']}: {dict(sorted(counts.items()))} skews "
                    f"{skew} > maxSkew {constraint['maxSkew']}"
                )
    return problems

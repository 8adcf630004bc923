"""Unit tests of quota accounting: what a pod uses, admission's refusals."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.api.resources import ResourceRegistry
from apiserver.registry import quota
from apiserver.registry.strategy import new_rest
from apiserver.storage.store import Storage


def _container(name: str, cpu: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "resources": {"requests": {"cpu": cpu}}, **extra}


def test_pod_usage_takes_init_containers_sidecars_and_overhead() -> None:
    pod = {
        "spec": {
            "containers": [_container("a", "100m"), _container("b", "200m")],
            "initContainers": [
                _container("side", "50m", restartPolicy="Always"),
                _container("init", "1"),
            ],
            "overhead": {"cpu": "10m"},
        }
    }
    used = {k: str(v) for k, v in quota.usage("/pods", pod).items()}
    # max(100m + 200m + 50m sidecar, 50m sidecar + 1 init) + 10m overhead
    assert used["requests.cpu"] == "1060m"
    assert used["cpu"] == "1060m"
    assert used["pods"] == "1"
    assert used["count/pods"] == "1"
    finished = {**pod, "status": {"phase": "Succeeded"}}
    assert set(quota.usage("/pods", finished)) == {"count/pods"}


def test_a_create_while_the_quota_has_no_usage_is_refused() -> None:
    """A quota whose status names a limit without its usage: ``status unknown``. (One
    with no status at all matches nothing yet: kube matches on ``status.hard``.)"""
    rest = new_rest(Storage(), ResourceRegistry())
    served = rest.registry.lookup("", "v1", "resourcequotas")
    configmaps = rest.registry.lookup("", "v1", "configmaps")
    assert served is not None and configmaps is not None
    rest.bootstrap()
    body = {"metadata": {"name": "q"}, "spec": {"hard": {"configmaps": "5"}}}
    created = rest.create(served, "default", body)
    quota.admit(rest, configmaps, "default", {"metadata": {"name": "c"}}, False)
    rest.update(
        served,
        "default",
        "q",
        {**created, "status": {"hard": {"configmaps": "5"}}},
        subresource="status",
    )
    with pytest.raises(
        quota.QuotaRefused, match="status unknown for quota: q, resources: configmaps"
    ):
        quota.admit(rest, configmaps, "default", {"metadata": {"name": "c"}}, False)
    quota.QuotaController(rest).sync("default")
    quota.admit(rest, configmaps, "default", {"metadata": {"name": "c"}}, False)
    counted = rest.storage.get(("/resourcequotas", "default", "q"))
    assert counted is not None
    # kube-root-ca.crt counted by the controller, "c" charged by admission
    assert counted["status"] == {"hard": {"configmaps": "5"}, "used": {"configmaps": "2"}}


def test_service_usage_counts_the_node_ports_it_will_get() -> None:
    def used(spec: dict[str, Any]) -> dict[str, str]:
        amounts = quota.usage("/services", {"spec": spec})
        return {k: str(v) for k, v in amounts.items()}

    two = [{"port": 80}, {"port": 81, "nodePort": 30001}]
    assert used({"ports": two})["services.nodeports"] == "0"
    assert used({"type": "NodePort", "ports": two})["services.nodeports"] == "2"
    balanced = used({"type": "LoadBalancer", "ports": two})
    assert (balanced["services.loadbalancers"], balanced["services.nodeports"]) == ("1", "2")
    explicit = used({"type": "LoadBalancer", "ports": two, "allocateLoadBalancerNodePorts": False})
    assert explicit["services.nodeports"] == "1"  # only the port that names one

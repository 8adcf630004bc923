"""Manager wiring without an API server: listers share the informers controllers use."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client as k8s_client

from manager.kube import KubeClient
from manager.manager import Manager, ManagerOptions
from manager.reconcile import Request, Result
from manager.resources import builtin

CONFIGMAPS = builtin("v1", "configmaps")
NAMESPACES = builtin("v1", "namespaces")


@pytest.fixture
def mgr() -> Iterator[Manager]:
    configuration = k8s_client.Configuration()
    configuration.host = "http://127.0.0.1:9"  # never contacted: nothing runs
    with KubeClient(configuration) as kube:
        yield Manager(kube, ManagerOptions(leader_election=False))


class _Noop:
    def reconcile(self, request: Request) -> Result:
        return Result()


def test_lister_with_the_same_selector_reads_the_informer_for_uses(mgr: Manager) -> None:
    lister = mgr.lister(CONFIGMAPS, label_selector="team")
    mgr.controller("c", _Noop()).for_(CONFIGMAPS, label_selector="team").complete()
    informers = mgr.factory.informers()
    assert len(informers) == 1  # one cache: the one whose events wake the reconciler
    obj = {"metadata": {"name": "a", "namespace": "ns", "labels": {"team": "x"}}}
    informers[0].indexer.add(obj)
    assert lister.get("a", "ns") is obj


def test_lister_with_a_namespace_for_a_cluster_scoped_resource_fails_at_wiring(
    mgr: Manager,
) -> None:
    with pytest.raises(ValueError, match="v1/namespaces is cluster-scoped"):
        mgr.lister(NAMESPACES, namespace="payments")

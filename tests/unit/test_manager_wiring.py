"""Manager wiring without an API server: listers share the informers controllers use."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client as k8s_client

from manager.client import KubeClient
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


def test_a_lister_of_another_scope_than_the_watch_is_named_with_both_scopes(
    mgr: Manager,
) -> None:
    """Issue 22, item 3: a lister of another scope than the watch is a second cache."""
    mgr.lister(CONFIGMAPS, namespace="b")
    mgr.controller("c", _Noop()).for_(CONFIGMAPS, namespace="a").complete()
    [warning] = mgr.scope_warnings()
    assert "the lister of v1/configmaps ns=b reads another cache" in warning
    assert "v1/configmaps ns=a" in warning  # the controller's scope, named


def test_a_lister_of_the_watch_scope_or_of_an_unwatched_resource_is_fine(mgr: Manager) -> None:
    mgr.lister(CONFIGMAPS, namespace="a")
    mgr.lister(NAMESPACES)  # nobody watches Namespaces: the lister is the only cache
    mgr.controller("c", _Noop()).for_(CONFIGMAPS, namespace="a").complete()
    assert mgr.scope_warnings() == []


def test_owns_and_watches_take_a_namespace_and_a_label_selector_sharing_informers(
    mgr: Manager,
) -> None:
    """Issue 22, item 5: narrowing what owns()/watches() cache, shared with listers of
    the same scope."""
    children = mgr.lister(CONFIGMAPS, label_selector="app.kubernetes.io/managed-by=me")
    sources = mgr.lister(CONFIGMAPS, namespace="source", label_selector="mirror=true")
    (
        mgr.controller("c", _Noop())
        .for_(NAMESPACES, label_selector="mirror")
        .owns(CONFIGMAPS, label_selector="app.kubernetes.io/managed-by=me")
        .watches(CONFIGMAPS, lambda obj: [], namespace="source", label_selector="mirror=true")
        .complete()
    )
    names = sorted(i.name for i in mgr.factory.informers())
    assert len(names) == 3, names  # one per scope, the listers' included
    assert mgr.scope_warnings() == []
    by_scope = {i.name: i for i in mgr.factory.informers()}
    owned = next(i for n, i in by_scope.items() if "managed-by" in n)
    obj = {
        "metadata": {
            "name": "c",
            "namespace": "t",
            "labels": {"app.kubernetes.io/managed-by": "me"},
        }
    }
    owned.indexer.add(obj)
    assert children.get("c", "t") is obj
    assert sources.get("c", "source") is None


def test_watches_refuses_a_namespace_for_a_cluster_scoped_resource(mgr: Manager) -> None:
    with pytest.raises(ValueError, match="cluster-scoped"):
        mgr.controller("c", _Noop()).watches(NAMESPACES, lambda obj: [], namespace="a")


def test_a_lister_refuses_reads_outside_the_namespace_it_holds() -> None:
    """Issue 22, item 2: with watchNamespace (run_plugin's watch_namespace) a read of
    another namespace could never find anything: it fails loudly instead of None."""
    configuration = k8s_client.Configuration()
    configuration.host = "http://127.0.0.1:9"
    with KubeClient(configuration) as kube:
        mgr = Manager(kube, ManagerOptions(leader_election=False, namespace="a"))
        lister = mgr.lister(CONFIGMAPS)
        assert lister.get("x", "a") is None
        with pytest.raises(ValueError, match=r"holds only the namespace 'a'.*nothing in 'b'"):
            lister.get("x", "b")
        with pytest.raises(ValueError, match="holds only the namespace 'a'"):
            lister.list("b")
        assert lister.list() == []


@pytest.mark.parametrize("lister_first", [True, False])
def test_a_wider_lister_reads_the_watched_namespace_from_the_controllers_cache(
    mgr: Manager, lister_first: bool
) -> None:
    """Issue 22, item 3: for_(X, namespace="a") with mgr.lister(X) read a second cache
    that lags behind the event ("not in cache" 1 run in 4). The lister now reads the
    namespace the controller watches from the controller's own cache."""
    lister = mgr.lister(CONFIGMAPS) if lister_first else None
    mgr.controller("c", _Noop()).for_(CONFIGMAPS, namespace="a").complete()
    if lister is None:
        lister = mgr.lister(CONFIGMAPS)
    watched = next(i for i in mgr.factory.informers() if i.name == "v1/configmaps ns=a")
    obj = {"metadata": {"name": "x", "namespace": "a"}}
    watched.indexer.add(obj)  # the event that woke the reconcile: in this cache first
    assert lister.get("x", "a") is obj
    assert lister.list("a") == [obj]
    assert lister.get("x", "b") is None  # elsewhere: the lister's own cache
    assert mgr.scope_warnings() == []  # the reads that matter are shared


def test_a_lister_of_other_selectors_is_not_shared_and_is_warned_about(mgr: Manager) -> None:
    lister = mgr.lister(CONFIGMAPS)
    mgr.controller("c", _Noop()).for_(CONFIGMAPS, namespace="a", label_selector="x").complete()
    watched = next(i for i in mgr.factory.informers() if "labels=x" in i.name)
    watched.indexer.add({"metadata": {"name": "x", "namespace": "a", "labels": {"x": ""}}})
    assert lister.get("x", "a") is None  # a different set of objects: not shared
    assert len(mgr.scope_warnings()) == 1


def _sharded_mgr(kube: KubeClient) -> Manager:
    from manager.sharding import ShardingOptions

    return Manager(kube, ManagerOptions(leader_election=False, sharding=ShardingOptions()))


@pytest.mark.parametrize("sharded", [False, True], ids=["unsharded", "sharded"])
def test_ctx_lister_reads_the_controllers_own_caches_sharded_or_not(sharded: bool) -> None:
    """A plugin written with ctx.lister(..., shard=...) reads the caches its for_() and
    owns() fill, whether its section says sharded or not: no second, full cache."""
    from manager.plugins import ControllerSettings, PluginContext

    configuration = k8s_client.Configuration()
    configuration.host = "http://127.0.0.1:9"
    with KubeClient(configuration) as kube:
        mgr = _sharded_mgr(kube)  # sharding options: another controller may be sharded
        ctx: PluginContext[None] = PluginContext(
            "c", None, ControllerSettings(sharded=sharded), mgr
        )
        primary = ctx.lister(NAMESPACES, label_selector="team", shard="primary")
        owned = ctx.lister(CONFIGMAPS, shard="owned")
        ctx.controller(_Noop()).for_(NAMESPACES, label_selector="team").owns(CONFIGMAPS).complete()
        assert mgr.scope_warnings() == []
        names = sorted(i.name for i in mgr.factory.informers() if "leases" not in i.name)
        assert len(names) == 2, names  # the lister's caches are the watches' caches
        assert primary._informer is not None and owned._informer is not None
        assert ("shardBy=" in primary._informer.name) is sharded
        assert ("shardBy=owner" in owned._informer.name) is sharded
        with pytest.raises(ValueError, match="shard must be"):
            ctx.lister(CONFIGMAPS, shard="mine")


def test_a_plain_lister_of_a_sharded_controllers_resource_is_warned_about_with_the_fix() -> None:
    configuration = k8s_client.Configuration()
    configuration.host = "http://127.0.0.1:9"
    with KubeClient(configuration) as kube:
        mgr = _sharded_mgr(kube)
        mgr.lister(CONFIGMAPS)
        mgr.controller("c", _Noop(), sharded=True).for_(CONFIGMAPS).complete()
        [warning] = mgr.scope_warnings()
        assert 'ctx.lister(..., shard="primary")' in warning

"""One manager, a fleet of clusters (issue 35): clusters engage and disengage at run time,
an unreachable member stops alone, credentials rotate, and a write to a member is fenced
by the home cluster's Lease.

The home cluster is this suite's API server (the local one, or the real cluster of
``OVERSEER_TEST_KUBECONFIG``); the members are more local API servers
(``local_servers``), so these tests run against a real home cluster too.

The plugin under test stamps ConfigMaps carrying the test's label with the name of the
cluster they live in (a uniform reconciler: one per cluster, reading that cluster's
cache and writing through its client).
"""

from __future__ import annotations

import base64
import contextlib
import gc
import os
import threading
import time
import urllib.request
import uuid
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from manager import (
    AlreadyExists,
    Cluster,
    JsonDict,
    KubeClient,
    Manager,
    NotFound,
    PluginContext,
    Request,
    Result,
    WriteFenced,
    builtin,
)
from manager.client import ClientOptions
from manager.fleet import FleetOptions, KubeconfigFile
from manager.fleet.fleet import CLUSTER_ENGAGEMENTS
from manager.manager import ManagerOptions
from manager.metrics import REGISTRY
from manager.testing import eventually, run_manager, run_plugin
from manager.testing.proxy import TcpProxy
from tests.integration.running import ManagerThread

CONFIGMAPS = builtin("v1", "configmaps")
SECRETS = builtin("v1", "secrets")
LEASES = builtin("coordination.k8s.io/v1", "leases")
STAMP = "fleet.overseer.io/cluster"
# test-only switch: the break-check of test_a_member_write_after_the_home_lease_is_lost
FENCE_OFF = os.environ.get("OVERSEER_TEST_FENCE_OFF") == "1"


@dataclass(frozen=True, kw_only=True, slots=True)
class StampConfig:
    selector: str = field(default="fleet-test=yes", metadata={"format": "labelSelector"})


class Stamp:
    """One cluster's reconciler: annotates each selected ConfigMap with its cluster."""

    def __init__(self, cluster: Cluster, config: StampConfig) -> None:
        self.client = cluster.client
        self.maps = cluster.lister(CONFIGMAPS, label_selector=config.selector)

    def reconcile(self, request: Request) -> Result:
        found = self.maps.get(request.name, request.namespace)
        if found is None or (found["metadata"].get("annotations") or {}).get(STAMP):
            return Result()
        patch = {"metadata": {"annotations": {STAMP: request.cluster}}}
        self.client.patch(CONFIGMAPS, request.name, patch, namespace=request.namespace)
        return Result()


class StampPlugin:
    config_class = StampConfig
    rbac_rules = [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "verbs": ["get", "list", "watch", "patch"],
        }
    ]

    def setup(self, mgr: Manager, ctx: PluginContext[StampConfig]) -> None:
        config = ctx.config
        (
            ctx.controller(lambda cluster: Stamp(cluster, config))
            .for_(CONFIGMAPS, label_selector=config.selector)
            .complete()
        )


def _kubeconfig(path: Path, server: str, token: str = "") -> Path:
    user = {"token": token} if token else {}
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def _secret(name: str, kubeconfig: Path, mark: str) -> JsonDict:
    """A kubeconfig Secret as Cluster API writes it (plus the test's label)."""
    return {
        "metadata": {
            "name": f"{name}-kubeconfig",
            "labels": {"cluster.x-k8s.io/cluster-name": name, "fleet-test-secret": mark},
        },
        "type": "cluster.x-k8s.io/secret",
        "data": {"value": base64.b64encode(kubeconfig.read_bytes()).decode()},
    }


def _stamp(client: KubeClient, name: str, namespace: str = "default") -> str | None:
    obj = client.get(CONFIGMAPS, name, namespace)
    return (obj["metadata"].get("annotations") or {}).get(STAMP)


def _configmap(client: KubeClient, name: str, mark: str, namespace: str = "default") -> None:
    body = {"metadata": {"name": name, "labels": {"fleet-test": mark}}}
    client.create(CONFIGMAPS, body, namespace)


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@contextlib.contextmanager
def _clients(*servers: Any) -> Iterator[list[KubeClient]]:
    """Admin clients of the member servers (no client-side rate limit: the tests'
    setup is not the manager's traffic)."""
    clients = [
        KubeClient.from_kubeconfig(str(s.kubeconfig_path), options=ClientOptions(qps=0))
        for s in servers
    ]
    try:
        yield clients
    finally:
        for client in clients:
            client.close()


def _threads_of(cluster: str) -> list[str]:
    return sorted(
        t.name
        for t in threading.enumerate()
        if f"cluster={cluster}" in t.name or t.name.endswith(f"/{cluster}")
    )


def test_clusters_engage_and_disengage_with_their_secrets(
    kubeconfig_path: str, kube_client: KubeClient, namespace: str, local_servers: Any
) -> None:
    """Kubeconfig Secrets in the home cluster (Cluster API's shape) engage their clusters
    while the manager runs; a deleted Secret stops the cluster's keys and drops its caches
    (their memory is returned); recreated, the cluster is engaged again and what changed
    meanwhile is reconciled."""
    mark = uuid.uuid4().hex[:8]
    a, b = local_servers(2)
    config = {
        "clusters": {
            "secrets": {
                "enabled": True,
                "namespace": namespace,
                "labelSelector": f"fleet-test-secret={mark}",
            }
        },
    }
    section = {"selector": f"fleet-test={mark}", "fleet": True}
    with (
        _clients(a, b) as (ca, cb),
        run_plugin(StampPlugin, kubeconfig_path, section, config=config, probes=True) as running,
    ):
        mgr = running.manager
        kube_client.create(SECRETS, _secret("a", Path(a.kubeconfig_path), mark), namespace)
        eventually(lambda: mgr.fleet.clusters() == ["a"])
        _configmap(ca, "one", mark)
        eventually(lambda: _stamp(ca, "one") == "a")
        # b joins at run time
        kube_client.create(SECRETS, _secret("b", Path(b.kubeconfig_path), mark), namespace)
        _configmap(cb, "one", mark)
        eventually(lambda: _stamp(cb, "one") == "b")
        status, text = _get(f"{running.probes_url}/readyz?verbose")
        assert status == 200 and "[+]cluster/a ok" in text and "[+]cluster/b ok" in text, text
        member = mgr.fleet._members["b"].cluster
        assert member is not None
        cache = weakref.ref(member.informers()[0].indexer)
        del member
        # b leaves: its keys stop, its caches and threads go, its memory is returned
        kube_client.delete(SECRETS, "b-kubeconfig", namespace)
        eventually(lambda: mgr.fleet.clusters() == ["a"])
        eventually(lambda: "b" not in mgr.fleet.known() and "b" not in mgr.fleet._members)
        assert _threads_of("b") == []

        def freed() -> bool:
            gc.collect()
            return cache() is None

        eventually(freed, what="the cache of the disengaged cluster is garbage")
        _configmap(cb, "two", mark)  # while b is out of the fleet
        _configmap(ca, "two", mark)
        eventually(lambda: _stamp(ca, "two") == "a")  # a goes on
        assert _stamp(cb, "two") is None
        # b back: engaged afresh, and what it missed is reconciled
        kube_client.create(SECRETS, _secret("b", Path(b.kubeconfig_path), mark), namespace)
        eventually(lambda: _stamp(cb, "two") == "b")
        assert CLUSTER_ENGAGEMENTS.labels("b")._value.get() == 1  # counted afresh


def test_an_unreachable_member_stops_alone_and_comes_back(
    kubeconfig_path: str, local_servers: Any, tmp_path: Path
) -> None:
    """A member that stops answering is disengaged after ``unreachableAfter`` (its keys
    stopped, its caches dropped), reported not ready in ``/readyz?verbose`` and
    ``/statusz`` while the replica stays ready and the other member is reconciled; when
    it answers again it is engaged again and reconciled."""
    mark = uuid.uuid4().hex[:8]
    a, b = local_servers(2)
    b_port = int(b.url.rsplit(":", 1)[1])
    proxy = TcpProxy(("127.0.0.1", b_port)).start()
    port = proxy.port
    files = {
        "a": _kubeconfig(tmp_path / "a", a.url),
        "b": _kubeconfig(tmp_path / "b", proxy.url),
    }
    config = {
        "clusters": {"probePeriod": 0.1, "probeTimeout": 1.0, "unreachableAfter": 0.5},
        "client": {"timeout": 2.0},
    }
    section = {"selector": f"fleet-test={mark}"}
    try:
        with (
            _clients(a, b) as (ca, cb),
            run_plugin(
                StampPlugin,
                kubeconfig_path,
                section,
                config=config,
                fleet=files,
                probes=True,
                metrics=True,
            ) as running,
        ):
            mgr = running.manager
            _configmap(cb, "one", mark)
            eventually(lambda: _stamp(cb, "one") == "b")
            proxy.stop()  # b unreachable: connections refused
            eventually(lambda: mgr.fleet.clusters() == ["a"])
            _configmap(ca, "one", mark)
            eventually(lambda: _stamp(ca, "one") == "a")  # a is not held up
            status, text = _get(f"{running.probes_url}/readyz?verbose")
            assert status == 200, text  # the replica stays ready
            assert "[-]cluster/b failed (informational): unreachable" in text, text
            status, one = _get(f"{running.probes_url}/readyz/cluster/b")
            assert status == 500 and "unreachable" in one, one
            assert running.metrics_url is not None
            statusz = _get(running.metrics_url.replace("/metrics", "/statusz"))[1]
            line = next(li for li in statusz.splitlines() if li.strip().startswith("b "))
            assert "unreachable" in line, statusz
            _, metrics = _get(running.metrics_url)
            assert 'overseer_fleet_cluster_ready{cluster="b"} 0.0' in metrics
            assert 'overseer_fleet_cluster_unreachable_total{cluster="b"} 1.0' in metrics
            _configmap(cb, "two", mark)  # made while b is out
            proxy = TcpProxy(("127.0.0.1", b_port), port=port).start()  # b is back
            eventually(lambda: _stamp(cb, "two") == "b", timeout=15)
            assert "[+]cluster/b ok" in _get(f"{running.probes_url}/readyz?verbose")[1]
    finally:
        proxy.stop()


def _token(client: KubeClient, account: str) -> str:
    """A token of ServiceAccount ``account`` in ``default``, bound to cluster-admin."""
    accounts = builtin("v1", "serviceaccounts")
    client.create(accounts, {"metadata": {"name": account}}, "default")
    client.create(
        builtin("rbac.authorization.k8s.io/v1", "clusterrolebindings"),
        {
            "metadata": {"name": account},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "cluster-admin",
            },
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": "default"}],
        },
    )
    answer = client.request(
        "POST",
        f"/api/v1/namespaces/default/serviceaccounts/{account}/token",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        idempotent=False,
    )
    return str(answer["status"]["token"])


def test_credentials_rotate_when_the_secret_changes(
    kubeconfig_path: str,
    kube_client: KubeClient,
    namespace: str,
    local_servers: Any,
    tmp_path: Path,
) -> None:
    """The member's kubeconfig Secret gets a new token and the old one is revoked: the
    new token is swapped into the cluster's clients in place — no new engagement, no
    relist: caches and keys go on — and the next writes use it. A kubeconfig that names
    another server (or TLS settings) engages the cluster again."""
    mark = uuid.uuid4().hex[:8]
    (member,) = local_servers(1)
    config = {
        "clusters": {
            "secrets": {
                "enabled": True,
                "namespace": namespace,
                "labelSelector": f"fleet-test-secret={mark}",
            }
        },
    }
    section = {"selector": f"fleet-test={mark}", "fleet": True}
    with _clients(member) as (admin,):
        old, new = _token(admin, "fleet-old"), _token(admin, "fleet-new")
        first = _kubeconfig(tmp_path / "old", member.url, old)
        kube_client.create(SECRETS, _secret("m", first, mark), namespace)
        with run_plugin(StampPlugin, kubeconfig_path, section, config=config) as running:
            mgr = running.manager
            eventually(lambda: mgr.fleet.clusters() == ["m"])
            _configmap(admin, "one", mark)
            eventually(lambda: _stamp(admin, "one") == "m")
            engaged = CLUSTER_ENGAGEMENTS.labels("m")._value.get()
            # rotate: the Secret gets the new token, the old one is revoked
            second = _kubeconfig(tmp_path / "new", member.url, new)
            value = base64.b64encode(second.read_bytes()).decode()
            kube_client.patch(
                SECRETS, "m-kubeconfig", {"data": {"value": value}}, namespace=namespace
            )
            admin.delete(builtin("v1", "serviceaccounts"), "fleet-old", "default")
            _configmap(admin, "two", mark)  # reconciled with the new token only
            eventually(lambda: _stamp(admin, "two") == "m")
            assert CLUSTER_ENGAGEMENTS.labels("m")._value.get() == engaged  # in place
            # another server address: a new connection, engaged again
            other = member.url.replace("127.0.0.1", "localhost")
            third = _kubeconfig(tmp_path / "other", other, new)
            value = base64.b64encode(third.read_bytes()).decode()
            kube_client.patch(
                SECRETS, "m-kubeconfig", {"data": {"value": value}}, namespace=namespace
            )
            eventually(lambda: CLUSTER_ENGAGEMENTS.labels("m")._value.get() == engaged + 1)
            _configmap(admin, "three", mark)
            eventually(lambda: _stamp(admin, "three") == "m")
            status = {c.name: c for c in mgr.fleet.status()}["m"]
            assert status.state == "ready" and status.server == other


class Hold:
    """A cluster-aware reconciler that holds the reconcile of ``hold`` until released,
    then makes a blind write to the member cluster (no resourceVersion: nothing on the
    server refuses it)."""

    def __init__(self, mgr: Manager) -> None:
        self.mgr = mgr
        self.entered = threading.Event()
        self.release = threading.Event()
        self.outcome: list[str] = []

    def reconcile(self, request: Request) -> Result:
        if request.name != "hold":
            return Result()
        client = self.mgr.cluster(request.cluster).client
        self.entered.set()
        self.release.wait(30)
        try:
            client.patch(
                CONFIGMAPS,
                "hold",
                {"data": {"written": "after the lease was lost"}},
                namespace=request.namespace,
            )
        except WriteFenced as exc:
            self.outcome.append(f"fenced: {exc.reason}")
            raise
        self.outcome.append("written")
        return Result()


def test_a_member_write_after_the_home_lease_is_lost_is_refused(
    kubeconfig_path: str,
    kube_client: KubeClient,
    namespace: str,
    local_servers: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The leader Lease is in the home cluster; a reconcile of a member's object is held
    while another holder takes the Lease; the write it then makes to the member is refused
    by the leader fence, and the member's object is unchanged. With the fence switched off
    (``OVERSEER_TEST_FENCE_OFF=1``, test-only) the write lands and this test fails."""
    if FENCE_OFF:
        from manager import fencing

        monkeypatch.setattr(fencing.ValidityFence, "check", lambda self: None)
    (member,) = local_servers(1)
    with _clients(member) as (admin,):
        admin.create(CONFIGMAPS, {"metadata": {"name": "hold"}, "data": {}}, "default")
        client = KubeClient.from_kubeconfig(kubeconfig_path)
        mgr = Manager(
            client,
            ManagerOptions(
                metrics_bind_address="0",
                health_probe_bind_address="0",
                leader_election_namespace=namespace,
                leader_election_id="fleet-fence",
                lease_duration=2.0,
                renew_deadline=1.5,
                retry_period=0.3,
                graceful_shutdown_timeout=5.0,
                fleet=FleetOptions(
                    kubeconfigs=(KubeconfigFile(name="m", path=str(member.kubeconfig_path)),)
                ),
            ),
        )
        hold = Hold(mgr)
        mgr.controller("hold", hold, fleet=True, rate_limiters=_limiter).for_(CONFIGMAPS).complete()
        runner = ManagerThread(mgr)
        try:
            assert hold.entered.wait(15), "the reconcile of the member's object never came"
            # another holder takes the Lease in the home cluster
            lease = kube_client.get(LEASES, "fleet-fence", namespace)
            lease["spec"]["holderIdentity"] = "someone-else"
            lease["spec"]["leaseDurationSeconds"] = 60
            kube_client.replace(LEASES, lease, namespace)
            eventually(lambda: not mgr.is_leader(), timeout=10)
            hold.release.set()
            eventually(lambda: hold.outcome, what="the held reconcile's write")
            assert hold.outcome == ["fenced: not_leader"], hold.outcome
            assert "written" not in (admin.get(CONFIGMAPS, "hold", "default").get("data") or {})
        finally:
            rc = runner.close(hold.release)
            client.close()
        assert rc == 1  # the Lease was lost: the process must exit


def _limiter() -> Any:
    from manager.workqueue import default_controller_rate_limiter

    return default_controller_rate_limiter()


DEPLOYMENTS = builtin("apps/v1", "deployments")
SERVICES = builtin("v1", "services")
PODS = builtin("v1", "pods")


def _deployment(name: str) -> JsonDict:
    labels = {"app": name}
    return {
        "metadata": {"name": name, "annotations": {"overseer.io/expose": "true"}},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {"name": "web", "image": "nginx", "ports": [{"containerPort": 80}]}
                    ]
                },
            },
        },
    }


def test_both_built_in_controllers_run_fleet_wide(kubeconfig_path: str, local_servers: Any) -> None:
    """The exposer and podport, ``fleet: true``: each member gets its Services and
    Ingresses, its LogicalPort CRD and ports, written there by that cluster's reconciler;
    their figures carry a ``cluster`` label."""
    a, b = local_servers(2)
    net = f"t{uuid.uuid4().hex[:8]}"
    config = {
        "controllers": {
            "exposer": {"fleet": True},
            "podport": {
                "fleet": True,
                "installCrd": True,
                "networks": [{"name": net, "cidr": "10.78.0.0/28"}],
                "defaultNetwork": net,
            },
        }
    }
    plugins = {
        "exposer": "controllers.exposer:ExposerPlugin",
        "podport": "controllers.podport:PodPortPlugin",
    }
    fleet = {"a": a.kubeconfig_path, "b": b.kubeconfig_path}
    with (
        _clients(a, b) as clients,
        run_manager(kubeconfig_path, plugins, config, fleet=fleet),
    ):
        for client in clients:
            client.create(DEPLOYMENTS, _deployment("web"), "default")
            pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
            client.create(PODS, pod, "default")
        for client in clients:
            eventually(lambda c=client: c.get(SERVICES, "web", "default")["metadata"]["uid"])
            eventually(
                lambda c=client: (
                    (c.get(PODS, "p", "default")["metadata"].get("annotations") or {})
                    .get("overseer.io/ip", "")
                    .startswith("10.78.0.")
                )
            )
        for cluster in ("a", "b"):
            exposed = {"cluster": cluster}
            eventually(
                lambda x=exposed: (
                    REGISTRY.get_sample_value("overseer_exposer_exposed_deployments", x) == 1
                )
            )
            used = {"cluster": cluster, "network": net}
            assert REGISTRY.get_sample_value("overseer_podport_addresses_used", used) == 1


class Inventory:
    """A cluster-aware reconciler: reads a ConfigMap in the cluster its request names and
    writes a copy of its data into the home cluster (``<cluster>.<name>`` in ``into``)."""

    def __init__(self, mgr: Manager, into: str, selector: str) -> None:
        self.mgr = mgr
        self.into = into
        self.selector = selector

    def reconcile(self, request: Request) -> Result:
        source = self.mgr.cluster(request.cluster)  # where the object lives
        found = source.lister(CONFIGMAPS, label_selector=self.selector).get(
            request.name, request.namespace
        )
        home = self.mgr.cluster()  # where the inventory is kept
        name = f"{request.cluster}.{request.name}"
        if found is None:
            with contextlib.suppress(NotFound):
                home.client.delete(CONFIGMAPS, name, self.into)
            return Result()
        body = {"metadata": {"name": name}, "data": dict(found.get("data") or {})}
        try:
            home.client.create(CONFIGMAPS, body, self.into)
        except AlreadyExists:
            home.client.patch(CONFIGMAPS, name, {"data": body["data"]}, namespace=self.into)
        return Result()


@dataclass(frozen=True, kw_only=True, slots=True)
class InventoryConfig:
    into: str = ""
    selector: str = field(default="fleet-test=yes", metadata={"format": "labelSelector"})


class InventoryPlugin:
    config_class = InventoryConfig
    rbac_rules = [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "verbs": ["get", "list", "watch", "create", "patch", "delete"],
        }
    ]

    def setup(self, mgr: Manager, ctx: PluginContext[InventoryConfig]) -> None:
        config = ctx.config
        (
            ctx.controller(Inventory(mgr, config.into, config.selector))
            .for_(CONFIGMAPS, label_selector=config.selector)
            .complete()
        )


def test_a_cluster_aware_reconciler_reads_in_one_cluster_and_writes_in_another(
    kubeconfig_path: str, kube_client: KubeClient, namespace: str, local_servers: Any
) -> None:
    """One reconciler for every cluster of the fleet, the home cluster a member too
    (``clusters.home``): it reads the object in the cluster its request names and keeps an
    inventory of it in the home cluster."""
    mark = uuid.uuid4().hex[:8]
    (a,) = local_servers(1)
    selector = f"fleet-test={mark}"
    section = {"into": namespace, "selector": selector}
    config = {"clusters": {"home": True, "homeName": "home"}}
    with (
        _clients(a) as (ca,),
        run_plugin(
            InventoryPlugin, kubeconfig_path, section, config=config, fleet={"a": a.kubeconfig_path}
        ) as running,
    ):
        assert running.manager.fleet.clusters() == ["a", "home"]
        body = {"metadata": {"name": "db", "labels": {"fleet-test": mark}}, "data": {"v": "1"}}
        ca.create(CONFIGMAPS, body, "default")
        kube_client.create(CONFIGMAPS, {**body, "data": {"v": "home"}}, namespace)

        def copy(name: str) -> dict[str, str]:
            return dict(kube_client.get(CONFIGMAPS, name, namespace).get("data") or {})

        eventually(lambda: copy("a.db") == {"v": "1"})
        eventually(lambda: copy("home.db") == {"v": "home"})
        ca.patch(CONFIGMAPS, "db", {"data": {"v": "2"}}, namespace="default")
        eventually(lambda: copy("a.db") == {"v": "2"})
        ca.delete(CONFIGMAPS, "db", "default")

        def gone() -> bool:
            try:
                copy("a.db")
            except NotFound:
                return True
            return False

        eventually(gone)


def test_a_slow_or_cut_off_member_holds_up_no_other(
    kubeconfig_path: str, local_servers: Any, tmp_path: Path
) -> None:
    """A member whose writes hang holds only its own worker: the other member's keys go
    on. Cut off (requests and watches hang, as in a partition), it is disengaged while the
    other goes on; healed, it is engaged again and what waited is reconciled."""
    mark = uuid.uuid4().hex[:8]
    a, b = local_servers(2)
    proxy = TcpProxy(("127.0.0.1", int(b.url.rsplit(":", 1)[1]))).start()
    files = {
        "a": _kubeconfig(tmp_path / "a", a.url),
        "b": _kubeconfig(tmp_path / "b", proxy.url),
    }
    config = {
        "clusters": {"probePeriod": 0.1, "probeTimeout": 0.3, "unreachableAfter": 0.5},
        "client": {"timeout": 5.0},
    }
    section = {"selector": f"fleet-test={mark}", "workers": 1}  # one worker per cluster
    try:
        with (
            _clients(a, b) as (ca, cb),
            run_plugin(
                StampPlugin, kubeconfig_path, section, config=config, fleet=files
            ) as running,
        ):
            slow = proxy.delay_requests(b"^PATCH ", 30.0)  # b's writes hang
            _configmap(cb, "one", mark)
            eventually(lambda: slow.matched == 1, what="b's write is held")
            for i in range(3):  # b's only worker is busy: a's are not
                _configmap(ca, f"n{i}", mark)
                eventually(lambda i=i: _stamp(ca, f"n{i}") == "a")
            slow.release()
            eventually(lambda: _stamp(cb, "one") == "b")
            proxy.block()  # b cut off
            _configmap(cb, "two", mark)  # its watch event is held on the way
            _configmap(ca, "m", mark)
            eventually(lambda: _stamp(ca, "m") == "a")
            eventually(lambda: running.manager.fleet.clusters() == ["a"])
            proxy.unblock()
            eventually(lambda: _stamp(cb, "two") == "b", timeout=15)
    finally:
        proxy.stop()


def test_a_member_waiting_for_the_podport_crd_lets_go_when_the_keys_stop(
    kubeconfig_path: str, local_servers: Any
) -> None:
    """podport fleet-wide in a member that lacks its CRD (``installCrd: false``): that
    cluster's reconciler waits for the CRD, up to the cache sync timeout (here 120 s).
    The manager stopping meanwhile ends the wait at once (``manager.fleet.
    cluster_stopping()``): it stops gracefully, every thread joined, rather than
    polling on for the rest of those two minutes."""
    from controllers.podport import PodPortPlugin
    from manager.config import load_config, manager_options
    from manager.plugins import PluginInfo, PluginSet, setup_plugins

    (member,) = local_servers(1)
    loaded = PluginSet()
    loaded.infos["podport"] = PluginInfo("podport", "", "(test)", "-")
    loaded.plugins["podport"] = PodPortPlugin()
    doc = {
        "leaderElection": {"enabled": False},
        "cacheSyncTimeout": 120,
        "gracefulShutdownTimeout": 5,
        "metricsBindAddress": "0",
        "healthProbeBindAddress": "0",
        "clusters": {"kubeconfigs": [{"name": "m", "path": str(member.kubeconfig_path)}]},
        "controllers": {"podport": {"fleet": True, "installCrd": False}},
    }
    settings, controllers, _ = load_config(doc, loaded, source="<test>")
    client = KubeClient.from_kubeconfig(kubeconfig_path)
    try:
        mgr = Manager(client, manager_options(settings, controllers))
        setup_plugins(mgr, loaded.plugins, controllers)
        running = ManagerThread(mgr)
        eventually(lambda: mgr.fleet.clusters() == ["m"], what="the member engaged")
        eventually(
            lambda: any(t.name == "controller/podport/m" for t in threading.enumerate()),
            what="its keys thread (waiting for the CRD)",
        )
        time.sleep(1.5)  # a poll or two
        code = running.close()
    finally:
        client.close()
    assert code == 0


def test_a_members_caches_are_listed_in_pages(
    kubeconfig_path: str, local_servers: Any, tmp_path: Path
) -> None:
    """A replica may engage many clusters at once: each member's lists come in pages of
    500 (consistent lists), so no list is ever parsed whole — parsed at once, a list
    costs its bytes and its objects together, and Python keeps that memory (bench fleet:
    one member of 20,000 ConfigMaps peaked at 144 MiB listed whole, 93 in pages)."""
    mark = uuid.uuid4().hex[:8]
    (member,) = local_servers(1)
    with _clients(member) as (admin,):
        for i in range(501):  # two pages, already stamped: nothing to write
            body = {
                "metadata": {
                    "name": f"p{i}",
                    "labels": {"fleet-test": mark},
                    "annotations": {STAMP: "m"},
                }
            }
            admin.create(CONFIGMAPS, body, "default")
        proxy = TcpProxy(("127.0.0.1", int(member.url.rsplit(":", 1)[1]))).start()
        try:
            pages = proxy.delay_requests(rb"^GET /api/v1/configmaps\?[^ ]*limit=500", 0.0)
            files = {"m": _kubeconfig(tmp_path / "m", proxy.url)}
            section = {"selector": f"fleet-test={mark}", "fleet": True}
            with run_plugin(StampPlugin, kubeconfig_path, section, fleet=files) as running:
                # started: the member's caches are synced
                lister = running.manager.cluster("m").lister(
                    CONFIGMAPS, label_selector=f"fleet-test={mark}"
                )
                assert len(lister.list("default")) == 501
                assert pages.matched == 2
        finally:
            proxy.stop()

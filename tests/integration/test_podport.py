"""The podport controller against an API server (local by default, a real cluster with
``OVERSEER_TEST_KUBECONFIG``).

LogicalPorts are cluster-scoped: every test uses a network name of its own (``t<hex>``)
and deletes that network's ports at the end. Pods use a real image and never depend on
their phase, so the tests hold on a real cluster too.
"""

from __future__ import annotations

import contextlib
import ipaddress
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from controllers.podport import Network, PodPortConfig
from controllers.podport.crd import LOGICAL_PORTS, install_crd
from controllers.podport.ipam import is_dns_subdomain
from controllers.podport.reconciler import PODS
from manager import REGISTRY, ControllerSettings, KubeClient, Manager, ManagerOptions, NotFound
from manager.client import ClientOptions
from manager.plugins import PluginContext, load_path
from manager.resources import builtin

EVENTS = builtin("v1", "events")
LABEL = "network.overseer.io/network"
IMAGE = "registry.k8s.io/pause:3.9"
FAST = ClientOptions(qps=200.0, burst=400)  # bursts of pods: not limited by client QPS


@pytest.fixture
def client(kubeconfig_path: str) -> Iterator[KubeClient]:
    with KubeClient.from_kubeconfig(kubeconfig_path, options=FAST) as c:
        install_crd(c)
        yield c


@pytest.fixture
def net(client: KubeClient) -> Iterator[str]:
    name = f"t{uuid.uuid4().hex[:8]}"
    yield name
    client.delete_collection(LOGICAL_PORTS, label_selector=f"{LABEL}={name}")


def wait_for(what: str, cond: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


@contextlib.contextmanager
def running(
    kubeconfig_path: str,
    namespace: str,
    config: PodPortConfig,
    *,
    workers: int = 2,
    options: ClientOptions | None = FAST,
) -> Iterator[Manager]:
    """A manager running the podport plugin, stopped and joined on exit."""
    client = KubeClient.from_kubeconfig(kubeconfig_path, options=options)
    mgr = Manager(
        client,
        ManagerOptions(
            leader_election=False,
            metrics_bind_address="0",
            health_probe_bind_address="127.0.0.1:0",
            namespace=namespace,
        ),
    )
    plugin = load_path("podport", "controllers.podport:PodPortPlugin")
    plugin.setup(mgr, PluginContext("podport", config, ControllerSettings(workers=workers), mgr))
    stop = threading.Event()
    thread = threading.Thread(target=mgr.run, args=(stop,), name="test-manager")
    thread.start()
    try:
        yield mgr
    finally:
        stop.set()
        thread.join(30)
        assert mgr.join(30)
        client.close()


def cfg(net: str, cidr: str = "10.77.0.0/24", **kw: Any) -> PodPortConfig:
    nets = kw.pop("networks", None) or (Network(name=net, cidr=cidr),)
    return PodPortConfig(networks=nets, default_network=net, gc_interval=3600.0, **kw)


def make_pod(
    client: KubeClient,
    namespace: str,
    name: str,
    annotations: dict[str, str] | None = None,
    host_network: bool = False,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "pause", "image": IMAGE}]}
    if host_network:
        spec["hostNetwork"] = True
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": spec,
    }
    return client.create(PODS, body, namespace)


def delete_pod(client: KubeClient, namespace: str, name: str) -> None:
    with contextlib.suppress(NotFound):
        client.delete(PODS, name, namespace, grace_period_seconds=0)


def wait_pod_gone(client: KubeClient, namespace: str, name: str) -> None:
    def gone() -> bool:
        try:
            client.get(PODS, name, namespace)
        except NotFound:
            return True
        return False

    wait_for(f"pod {name} gone", gone)


def ports(client: KubeClient, net: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = client.list(LOGICAL_PORTS, label_selector=f"{LABEL}={net}")[
        "items"
    ]
    return items


def annotations(client: KubeClient, namespace: str, name: str) -> dict[str, str]:
    meta = client.get(PODS, name, namespace)["metadata"]
    return dict(meta.get("annotations") or {})


def allocated(client: KubeClient, namespace: str, name: str) -> dict[str, str] | None:
    a = annotations(client, namespace, name)
    return a if "overseer.io/logical-port" in a else None


def events(client: KubeClient, namespace: str, name: str, reason: str) -> list[dict[str, Any]]:
    items = client.list(EVENTS, namespace, field_selector=f"involvedObject.name={name}")["items"]
    return [e for e in items if e.get("reason") == reason]


def check_consistent(client: KubeClient, namespace: str, net: str) -> None:
    """Every pod of the namespace with a port has exactly one, the one it is annotated
    with; no address twice; no port without its pod."""
    pods = {p["metadata"]["uid"]: p for p in client.list(PODS, namespace)["items"]}
    lps = ports(client, net)
    by_uid: dict[str, list[dict[str, Any]]] = {}
    for lp in lps:
        by_uid.setdefault(lp["spec"]["podUID"], []).append(lp)
    assert set(by_uid) <= set(pods), "a port outlived its pod"
    for uid, owned in by_uid.items():
        assert len(owned) == 1, f"pod {pods[uid]['metadata']['name']} has {len(owned)} ports"
        a = pods[uid]["metadata"].get("annotations") or {}
        assert a.get("overseer.io/logical-port") == owned[0]["metadata"]["name"]
        assert a.get("overseer.io/ip") == owned[0]["spec"]["ip"]
    ips = [lp["spec"]["ip"] for lp in lps]
    assert len(ips) == len(set(ips))


# -- allocation, annotations, release --------------------------------------------------


def test_allocates_annotates_and_releases(
    kubeconfig_path: str, namespace: str, client: KubeClient, net: str
) -> None:
    with running(kubeconfig_path, namespace, cfg(net, "10.77.0.0/28")):
        make_pod(client, namespace, "a")
        a = wait_for("pod a allocated", lambda: allocated(client, namespace, "a"))
        assert a["overseer.io/ip"] == "10.77.0.2"  # .0 network, .1 gateway
        assert a["overseer.io/mac"] == "0a:58:0a:4d:00:02"
        assert a["overseer.io/network"] == net
        assert a["overseer.io/logical-port"] == f"{net}.10.77.0.2"
        lp = client.get(LOGICAL_PORTS, f"{net}.10.77.0.2")
        pod = client.get(PODS, "a", namespace)
        assert lp["spec"]["podUID"] == pod["metadata"]["uid"]
        assert lp["spec"]["podName"] == "a" and lp["spec"]["podNamespace"] == namespace
        make_pod(client, namespace, "b")
        b = wait_for("pod b allocated", lambda: allocated(client, namespace, "b"))
        assert b["overseer.io/ip"] == "10.77.0.3"
        wait_for(
            "metrics",
            lambda: (
                REGISTRY.get_sample_value("overseer_podport_addresses_used", {"network": net})
                == 2.0
            ),
        )
        # a /28 has 16 addresses: network, broadcast and gateway are not handed out
        assert (
            REGISTRY.get_sample_value("overseer_podport_addresses_free", {"network": net}) == 11.0
        )
        delete_pod(client, namespace, "a")
        wait_for("port of a released", lambda: len(ports(client, net)) == 1)
        assert ports(client, net)[0]["spec"]["podName"] == "b"
        # the allocator frees an address when its cache sees the port go (not when the
        # server has deleted it): under load that comes a moment later
        wait_for(
            "the release seen by the allocator",
            lambda: (
                REGISTRY.get_sample_value("overseer_podport_addresses_used", {"network": net})
                == 1.0
            ),
        )
        # the freed lowest address is handed out again
        make_pod(client, namespace, "c")
        c = wait_for("pod c allocated", lambda: allocated(client, namespace, "c"))
        assert c["overseer.io/ip"] == "10.77.0.2"
        check_consistent(client, namespace, net)


def _podport_idle() -> bool:
    depth = REGISTRY.get_sample_value(
        "workqueue_depth", {"name": "podport", "controller": "podport"}
    )
    active = REGISTRY.get_sample_value(
        "controller_runtime_active_workers", {"controller": "podport"}
    )
    return depth == 0 and active == 0


@pytest.mark.local_only  # the local server's request records
def test_each_pod_costs_one_port_create_and_one_pod_patch(
    kubeconfig_path: str, namespace: str, client: KubeClient, net: str, local_server: Any
) -> None:
    count = 20
    with running(kubeconfig_path, namespace, cfg(net), workers=4):
        make_pod(client, namespace, "canary")
        wait_for("the canary allocated", lambda: allocated(client, namespace, "canary"))
        before = local_server.requests()
        for i in range(count):
            make_pod(client, namespace, f"p-{i}")
        for i in range(count):
            wait_for(f"p-{i} allocated", lambda i=i: allocated(client, namespace, f"p-{i}"))
        wait_for("podport idle", _podport_idle)
        after = local_server.requests()
    writes = {
        k: n - before.get(k, 0)
        for k, n in after.items()
        if k[0] in ("create", "update", "patch", "delete") and n != before.get(k, 0)
    }
    assert writes == {
        ("create", "", "pods", ""): count,  # the test's own
        ("create", "network.overseer.io", "logicalports", ""): count,
        ("patch", "", "pods", ""): count,
    }
    assert not events(client, namespace, "p-0", "PortAllocated")


def test_same_name_new_uid_gets_a_new_port(
    kubeconfig_path: str, namespace: str, client: KubeClient, net: str
) -> None:
    with running(kubeconfig_path, namespace, cfg(net)):
        first = make_pod(client, namespace, "p")
        wait_for("first allocated", lambda: allocated(client, namespace, "p"))
        delete_pod(client, namespace, "p")
        wait_pod_gone(client, namespace, "p")
        second = make_pod(client, namespace, "p")
        assert second["metadata"]["uid"] != first["metadata"]["uid"]

        def settled() -> bool:
            lps = ports(client, net)
            return len(lps) == 1 and lps[0]["spec"]["podUID"] == second["metadata"]["uid"]

        wait_for("one port, for the new pod", settled)
        wait_for("second annotated", lambda: allocated(client, namespace, "p"))
        check_consistent(client, namespace, net)


def test_host_network_and_skip_get_no_port(
    kubeconfig_path: str, namespace: str, client: KubeClient, net: str
) -> None:
    with running(kubeconfig_path, namespace, cfg(net)):
        make_pod(client, namespace, "host", host_network=True)
        make_pod(client, namespace, "skip", {"overseer.io/skip-port": "true"})
        make_pod(client, namespace, "later")
        make_pod(client, namespace, "normal")
        wait_for("normal allocated", lambda: allocated(client, namespace, "normal"))
        wait_for("later allocated", lambda: allocated(client, namespace, "later"))
        time.sleep(0.5)  # the skipped pods were reconciled long before
        assert {lp["spec"]["podName"] for lp in ports(client, net)} == {"normal", "later"}
        assert allocated(client, namespace, "host") is None
        assert allocated(client, namespace, "skip") is None
        # opting out later releases the port and removes the annotations
        client.patch(
            PODS,
            "later",
            {"metadata": {"annotations": {"overseer.io/skip-port": "true"}}},
            namespace=namespace,
        )
        wait_for("later released", lambda: allocated(client, namespace, "later") is None)
        assert {lp["spec"]["podName"] for lp in ports(client, net)} == {"normal"}
        wait_for("PortReleased", lambda: events(client, namespace, "later", "PortReleased"))


def test_invalid_skip_annotation_is_rejected_and_changes_nothing(
    kubeconfig_path: str,
    namespace: str,
    client: KubeClient,
    net: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``overseer.io/skip-port: "maybe"`` is neither opt-out nor opt-in: a Warning (Event
    and log), no port made, and a port a pod has is kept; "True"/"FALSE" count."""
    skip = "overseer.io/skip-port"
    with running(kubeconfig_path, namespace, cfg(net)):
        make_pod(client, namespace, "maybe", {skip: "maybe"})
        make_pod(client, namespace, "had", {skip: "FALSE"})
        wait_for("had allocated", lambda: allocated(client, namespace, "had"))
        event = wait_for(
            "a warning", lambda: events(client, namespace, "maybe", "InvalidAnnotation")
        )
        assert event[0]["type"] == "Warning"
        assert event[0]["message"].startswith(f'{skip}: expected "true" or "false", got \'maybe\'')
        assert allocated(client, namespace, "maybe") is None
        client.patch(PODS, "had", {"metadata": {"annotations": {skip: "yes"}}}, namespace=namespace)
        wait_for("a warning", lambda: events(client, namespace, "had", "InvalidAnnotation"))
        assert allocated(client, namespace, "had") is not None  # kept
        client.patch(
            PODS, "had", {"metadata": {"annotations": {skip: "True"}}}, namespace=namespace
        )
        wait_for("had released", lambda: allocated(client, namespace, "had") is None)
    logged = [r for r in caplog.records if r.getMessage() == "invalid annotation"]
    assert logged and {r.levelname for r in logged} == {"WARNING"}


def test_network_selection_ipv6_and_invalid_network(
    kubeconfig_path: str, namespace: str, client: KubeClient, net: str
) -> None:
    v6 = f"{net}-v6"
    config = cfg(
        net,
        networks=(
            Network(name=net, cidr="10.78.0.0/24"),
            Network(name=v6, cidr="fd00:77::/120", exclude=("fd00:77::2-fd00:77::4",)),
        ),
        mac_prefix="0a:58",
    )
    try:
        with running(kubeconfig_path, namespace, config):
            make_pod(client, namespace, "four")
            make_pod(client, namespace, "six", {"overseer.io/network": v6})
            make_pod(client, namespace, "bad", {"overseer.io/network": "no-such-net"})
            four = wait_for("four allocated", lambda: allocated(client, namespace, "four"))
            six = wait_for("six allocated", lambda: allocated(client, namespace, "six"))
            assert ipaddress.ip_address(four["overseer.io/ip"]) in ipaddress.ip_network(
                "10.78.0.0/24"
            )
            assert six["overseer.io/network"] == v6
            assert six["overseer.io/ip"] == "fd00:77::5"  # ::0 anycast, ::1 gateway, 2-4 out
            assert six["overseer.io/mac"] == "0a:58:00:00:00:05"
            name = six["overseer.io/logical-port"]
            assert is_dns_subdomain(name)
            assert client.get(LOGICAL_PORTS, name)["spec"]["ip"] == "fd00:77::5"
            wait_for("InvalidNetwork", lambda: events(client, namespace, "bad", "InvalidNetwork"))
            assert allocated(client, namespace, "bad") is None
    finally:
        client.delete_collection(LOGICAL_PORTS, label_selector=f"{LABEL}={v6}")


def test_exhaustion_and_recovery(
    kubeconfig_path: str, namespace: str, client: KubeClient, net: str
) -> None:
    # a /29: 8 addresses - network, broadcast, gateway = 5 ports
    with running(kubeconfig_path, namespace, cfg(net, "10.79.0.0/29")):
        for i in range(5):
            make_pod(client, namespace, f"p{i}")
        wait_for("five ports", lambda: len(ports(client, net)) == 5)
        make_pod(client, namespace, "late")
        wait_for("NoFreeAddress", lambda: events(client, namespace, "late", "NoFreeAddress"))
        time.sleep(1.0)  # retries with backoff; still nothing to hand out
        assert allocated(client, namespace, "late") is None
        assert REGISTRY.get_sample_value("overseer_podport_addresses_free", {"network": net}) == 0
        freed = annotations(client, namespace, "p3")["overseer.io/ip"]
        delete_pod(client, namespace, "p3")
        late = wait_for("late allocated", lambda: allocated(client, namespace, "late"), 10.0)
        assert late["overseer.io/ip"] == freed
        check_consistent(client, namespace, net)


# -- restarts and two leaders ------------------------------------------------------------


def test_restart_collects_orphans_and_allocates_new_pods(
    kubeconfig_path: str, namespace: str, client: KubeClient, net: str
) -> None:
    config = cfg(net)
    with running(kubeconfig_path, namespace, config):
        for i in range(5):
            make_pod(client, namespace, f"old{i}")
        wait_for("five ports", lambda: len(ports(client, net)) == 5)
    # while no controller runs: pods go and come
    for i in (0, 3):
        delete_pod(client, namespace, f"old{i}")
    for i in range(3):
        make_pod(client, namespace, f"new{i}")
    for i in (0, 3):
        wait_pod_gone(client, namespace, f"old{i}")
    assert len(ports(client, net)) == 5  # nobody released anything
    with running(kubeconfig_path, namespace, config):

        def converged() -> bool:
            lps = ports(client, net)
            names = {lp["spec"]["podName"] for lp in lps}
            return names == {"old1", "old2", "old4", "new0", "new1", "new2"} and len(lps) == 6

        wait_for("orphans collected, new pods allocated", converged)
        for i in range(3):
            wait_for("new annotated", lambda i=i: allocated(client, namespace, f"new{i}"))
        check_consistent(client, namespace, net)


@pytest.mark.slow
def test_split_brain_two_leaders_never_share_an_address(
    kubeconfig_path: str, namespace: str, client: KubeClient, net: str
) -> None:
    n = 500
    config = cfg(net, "10.80.0.0/16")
    with (
        running(kubeconfig_path, namespace, config, workers=4),
        running(kubeconfig_path, namespace, config, workers=4),
    ):
        with ThreadPoolExecutor(8, thread_name_prefix="create") as pool:
            list(pool.map(lambda i: make_pod(client, namespace, f"p{i:03d}"), range(n)))

        def all_allocated() -> bool:
            items = client.list(PODS, namespace)["items"]
            done = [
                p
                for p in items
                if "overseer.io/logical-port" in (p["metadata"].get("annotations") or {})
            ]
            return len(done) == n and len(ports(client, net)) == n

        wait_for("every pod allocated", all_allocated, timeout=120.0)
        time.sleep(1.0)  # let duplicate resolution settle, then check nothing moved
        check_consistent(client, namespace, net)
        assert len(ports(client, net)) == n


# -- the CRD -------------------------------------------------------------------------------


@pytest.mark.local_only
def test_missing_crd_is_reported_and_installed_when_configured(namespace: str) -> None:
    from manager.testing import LocalApiServer

    server = LocalApiServer().start()
    try:
        path = str(server.kubeconfig_path)
        with KubeClient.from_kubeconfig(path) as c:
            c.create(
                builtin("v1", "namespaces"),
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            )
            wait_for("default service account", lambda: _has_sa(c, namespace))
            net = "tcrd"
            with running(path, namespace, cfg(net)) as mgr:
                reason = wait_for("not ready", lambda: _readyz(mgr, "CRD"))
                assert "CRD logicalports.network.overseer.io is not installed" in reason
                make_pod(c, namespace, "p")
                time.sleep(0.5)
                assert allocated(c, namespace, "p") is None
            with running(path, namespace, cfg(net, install_crd=True)) as mgr:
                wait_for("ready", lambda: _readyz(mgr, "") == "ok")
                wait_for("allocated", lambda: allocated(c, namespace, "p"))
    finally:
        server.stop()


def _has_sa(c: KubeClient, namespace: str) -> bool:
    try:
        c.get(builtin("v1", "serviceaccounts"), "default", namespace)
    except NotFound:
        return False
    return True


def _readyz(mgr: Manager, expect: str) -> str:
    address = mgr.health_probe_address
    if address is None:
        return ""  # not serving yet
    url = f"http://{address[0]}:{address[1]}/readyz" + ("?verbose" if expect else "")
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return str(r.read().decode())
    except urllib.error.HTTPError as exc:
        text = exc.read().decode()
        exc.close()
        return text if expect in text else ""

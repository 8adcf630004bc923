"""The exposer end to end against an API server (the local one, or a real cluster with
``OVERSEER_TEST_KUBECONFIG``): a manager runs the plugin as the CLI would, the test
creates and edits Deployments and watches Services, Ingresses and Events appear through
the API. Nothing here relies on the local server's knobs.
"""

from __future__ import annotations

import contextlib
import copy
import ipaddress
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from controllers.exposer import ExposerConfig, ExposerReconciler, NamespaceScope, TLSConfig
from controllers.exposer import plugin as exposer_plugin
from controllers.exposer.reconciler import EXPOSER_METRICS
from manager import (
    REGISTRY,
    ApiError,
    JsonDict,
    KubeClient,
    Lister,
    Manager,
    ManagerOptions,
    NotFound,
    Request,
    Resource,
    Result,
    UnknownResource,
    builtin,
)
from manager.cache.store import new_indexer
from manager.client import ClientOptions
from manager.plugins import ControllerSettings, PluginContext, load_path
from manager.sharding import ShardingOptions
from manager.testing import FakeRecorder, eventually

DEPLOYMENTS = builtin("apps/v1", "deployments")
SERVICES = builtin("v1", "services")
INGRESSES = builtin("networking.k8s.io/v1", "ingresses")
EVENTS = builtin("v1", "events")
CONFIGMAPS = builtin("v1", "configmaps")
NAMESPACES = builtin("v1", "namespaces")

EXPOSE = "overseer.io/expose"
URL = "overseer.io/exposed-url"
DOMAIN = "apps.example.test"
FAST = ClientOptions(qps=1000.0, burst=2000)  # test-side writes; not the subject

# -- helpers ----------------------------------------------------------------------------


def deployment(
    name: str,
    *,
    ports: list[JsonDict] | None = None,
    annotations: dict[str, str] | None = None,
    expose: bool = True,
    selector: JsonDict | None = None,
) -> JsonDict:
    labels = {"app": name}
    anns = {EXPOSE: "true"} if expose else {}
    anns.update(annotations or {})
    container: JsonDict = {"name": "app", "image": "registry.k8s.io/pause:3.9"}
    if ports is None:
        ports = [{"name": "http", "containerPort": 8080}, {"containerPort": 9090}]
    if ports:
        container["ports"] = ports
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "annotations": anns, "labels": labels},
        "spec": {
            "replicas": 0,
            "selector": selector if selector is not None else {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }


def events_for(client: KubeClient, namespace: str, name: str, reason: str) -> list[JsonDict]:
    items = client.list(EVENTS, namespace)["items"]
    return [
        e
        for e in items
        if (e.get("involvedObject") or {}).get("name") == name and e.get("reason") == reason
    ]


def wait_event(client: KubeClient, namespace: str, name: str, reason: str) -> JsonDict:
    return eventually(lambda: events_for(client, namespace, name, reason), timeout=10)[0]


def get_or_none(client: KubeClient, resource: Any, namespace: str, name: str) -> JsonDict | None:
    try:
        return client.get(resource, name, namespace)
    except NotFound:
        return None


def edit(client: KubeClient, resource: Any, namespace: str, name: str, fn: Any) -> JsonDict:
    """Read-modify-write with retries on conflict (the exposer writes too)."""
    for _ in range(20):
        obj = client.get(resource, name, namespace)
        fn(obj)
        try:
            return client.replace(resource, obj, namespace)
        except Exception as exc:  # Conflict
            if getattr(exc, "status", None) != 409:
                raise
    raise AssertionError("could not edit: too many conflicts")


def set_annotations(client: KubeClient, namespace: str, name: str, anns: dict[str, Any]) -> None:
    client.patch(DEPLOYMENTS, name, {"metadata": {"annotations": anns}}, namespace=namespace)


def conflicts_409() -> float:
    total = 0.0
    for metric in REGISTRY.collect():
        if metric.name == "rest_client_requests":
            total += sum(
                s.value
                for s in metric.samples
                if s.name.endswith("_total") and s.labels.get("code") == "409"
            )
    return total


# -- fixtures ---------------------------------------------------------------------------


@pytest.fixture
def client(kubeconfig_path: str) -> Iterator[KubeClient]:
    with KubeClient.from_kubeconfig(kubeconfig_path, options=FAST) as c:
        yield c


Starter = Callable[..., Manager]


@pytest.fixture
def start_exposer(
    kubeconfig_path: str, namespace: str, caplog: pytest.LogCaptureFixture
) -> Iterator[Starter]:
    """Start a manager running the exposer plugin; stopped and joined at teardown.

    The exposer logs at every level (so that every log call is exercised) and a test
    fails if any reconcile raised.
    """
    caplog.set_level(logging.DEBUG, logger="controllers.exposer")
    caplog.set_level(logging.INFO, logger="manager.controller")
    running: list[tuple[threading.Event, threading.Thread, Manager, KubeClient]] = []

    def start(
        config: ExposerConfig | None = None,
        *,
        workers: int = 3,
        client_options: ClientOptions | None = None,
        sharded: bool = False,
    ) -> Manager:
        kube = KubeClient.from_kubeconfig(kubeconfig_path, options=client_options)
        sharding = None
        if sharded:  # a ring of its own; fast Leases: a key starts after one lease duration
            ring = f"x{uuid.uuid4().hex[:6]}"
            sharding = ShardingOptions(
                ring_name=ring,
                namespace=namespace,
                lease_duration=1.0,
                renew_deadline=0.8,
                retry_period=0.2,
            )
        mgr = Manager(
            kube,
            ManagerOptions(
                leader_election=False,
                metrics_bind_address="0",
                health_probe_bind_address="0",
                namespace=namespace,
                sharding=sharding,
            ),
        )
        plugin = load_path("exposer", "controllers.exposer:ExposerPlugin")
        plugin.setup(
            mgr,
            PluginContext(
                "exposer",
                config or ExposerConfig(domain=DOMAIN),
                ControllerSettings(workers=workers, sharded=sharded),
                mgr,
            ),
        )
        stop = threading.Event()
        thread = threading.Thread(target=mgr.run, args=(stop,), name="test/manager")
        thread.start()
        running.append((stop, thread, mgr, kube))
        return mgr

    yield start
    for stop, thread, mgr, kube in running:
        stop.set()
        thread.join(30)
        assert mgr.join(30)
        kube.close()
    records = [r for when in ("setup", "call") for r in caplog.get_records(when)]
    failed = [r for r in records + caplog.records if r.name == "manager.controller" and r.exc_info]
    assert not failed, [r.getMessage() for r in failed]


def wait_exposed(client: KubeClient, namespace: str, name: str, timeout: float = 5.0) -> Any:
    def both() -> tuple[JsonDict, JsonDict] | None:
        svc = get_or_none(client, SERVICES, namespace, name)
        ing = get_or_none(client, INGRESSES, namespace, name)
        return (svc, ing) if svc and ing else None

    return eventually(both, timeout=timeout)


def spec_ports(svc: JsonDict) -> list[tuple[Any, ...]]:
    return [
        (p.get("name"), p["port"], p.get("targetPort"), p.get("protocol"))
        for p in svc["spec"]["ports"]
    ]


def backend_of(ing: JsonDict) -> tuple[str, str, JsonDict, str]:
    rule = ing["spec"]["rules"][0]
    path = rule["http"]["paths"][0]
    svc = path["backend"]["service"]
    return rule["host"], path["path"], svc["port"], svc["name"]


# -- creation and convergence -------------------------------------------------------------


def test_create_exposes_service_and_ingress_within_2s(
    client: KubeClient, namespace: str, start_exposer: Starter
) -> None:
    start_exposer(ExposerConfig(domain=DOMAIN, ingress_class_name="nginx"))
    started = time.monotonic()
    dep = client.create(DEPLOYMENTS, deployment("web"), namespace)
    svc, ing = wait_exposed(client, namespace, "web", timeout=2.0)
    assert time.monotonic() - started < 2.0

    uid = dep["metadata"]["uid"]
    for obj in (svc, ing):
        assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "overseer"
        assert obj["metadata"]["ownerReferences"] == [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": "web",
                "uid": uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    assert svc["spec"]["type"] == "ClusterIP"
    assert svc["spec"]["selector"] == {"app": "web"}
    assert spec_ports(svc) == [("http", 8080, 8080, "TCP"), ("tcp-9090", 9090, 9090, "TCP")]
    assert ing["spec"]["ingressClassName"] == "nginx"
    assert backend_of(ing) == (f"web.{namespace}.{DOMAIN}", "/", {"name": "http"}, "web")
    assert ing["spec"]["rules"][0]["http"]["paths"][0]["pathType"] == "Prefix"
    assert "tls" not in ing["spec"]

    url = f"http://web.{namespace}.{DOMAIN}/"
    assert ing["metadata"]["annotations"][URL] == url
    event = wait_event(client, namespace, "web", "Exposed")
    assert event["type"] == "Normal"
    assert url in event["message"]
    # The Deployment itself is never written by default (DESIGN.md §4.1).
    dep_now = client.get(DEPLOYMENTS, "web", namespace)
    assert URL not in dep_now["metadata"]["annotations"]
    assert dep_now["metadata"]["generation"] == dep["metadata"]["generation"]
    eventually(lambda: REGISTRY.get_sample_value("overseer_exposer_exposed_deployments") == 1)


def test_port_change_updates_in_place_and_keeps_cluster_ip(
    client: KubeClient, namespace: str, start_exposer: Starter
) -> None:
    start_exposer()
    client.create(DEPLOYMENTS, deployment("web"), namespace)
    svc, _ = wait_exposed(client, namespace, "web")

    def new_ports(d: JsonDict) -> None:
        d["spec"]["template"]["spec"]["containers"][0]["ports"] = [
            {"name": "web", "containerPort": 8081},
            {"name": "dns", "containerPort": 5353, "protocol": "UDP"},
        ]

    edit(client, DEPLOYMENTS, namespace, "web", new_ports)
    updated = eventually(
        lambda: (
            (s := client.get(SERVICES, "web", namespace))
            and spec_ports(s) == [("web", 8081, 8081, "TCP"), ("dns", 5353, 5353, "UDP")]
            and s
        )
    )
    assert updated["metadata"]["uid"] == svc["metadata"]["uid"]
    assert updated["spec"]["clusterIP"] == svc["spec"]["clusterIP"]
    assert updated["spec"]["clusterIPs"] == svc["spec"]["clusterIPs"]
    ing = eventually(
        lambda: (
            (i := client.get(INGRESSES, "web", namespace))
            and backend_of(i)[2] == {"name": "web"}
            and i
        )
    )
    assert backend_of(ing)[3] == "web"
    assert "ports" in wait_event(client, namespace, "web", "Updated")["message"]


def test_host_and_path_annotations(
    client: KubeClient, namespace: str, start_exposer: Starter
) -> None:
    start_exposer(ExposerConfig(domain=DOMAIN, tls=TLSConfig(enabled=True)))
    client.create(
        DEPLOYMENTS,
        deployment(
            "shop",
            annotations={
                "overseer.io/expose-host": "shop.example.org",
                "overseer.io/expose-path": "/api",
            },
        ),
        namespace,
    )
    _, ing = wait_exposed(client, namespace, "shop")
    assert backend_of(ing)[:2] == ("shop.example.org", "/api")
    assert ing["spec"]["tls"] == [{"hosts": ["shop.example.org"], "secretName": "shop-tls"}]
    assert ing["metadata"]["annotations"][URL] == "https://shop.example.org/api"
    set_annotations(client, namespace, "shop", {"overseer.io/expose-host": "store.example.org"})
    moved = eventually(
        lambda: (
            (i := client.get(INGRESSES, "shop", namespace))
            and backend_of(i)[0] == "store.example.org"
            and i
        )
    )
    assert moved["metadata"]["annotations"][URL] == "https://store.example.org/api"
    set_annotations(client, namespace, "shop", {"overseer.io/expose-path": None})
    eventually(lambda: backend_of(client.get(INGRESSES, "shop", namespace))[1] == "/")


def test_expose_port_by_name_and_number(
    client: KubeClient, namespace: str, start_exposer: Starter
) -> None:
    start_exposer()
    ports = [
        {"name": "http", "containerPort": 8080},
        {"name": "metrics", "containerPort": 9090},
        {"containerPort": 7070},
    ]
    client.create(
        DEPLOYMENTS,
        deployment("api", ports=ports, annotations={"overseer.io/expose-port": "metrics"}),
        namespace,
    )
    _, ing = wait_exposed(client, namespace, "api")
    assert backend_of(ing)[2] == {"name": "metrics"}
    set_annotations(client, namespace, "api", {"overseer.io/expose-port": "7070"})
    eventually(
        lambda: backend_of(client.get(INGRESSES, "api", namespace))[2] == {"name": "tcp-7070"}
    )
    set_annotations(client, namespace, "api", {"overseer.io/expose-port": "8080"})
    eventually(lambda: backend_of(client.get(INGRESSES, "api", namespace))[2] == {"name": "http"})


def test_single_unnamed_port_is_referenced_by_number(
    client: KubeClient, namespace: str, start_exposer: Starter
) -> None:
    start_exposer()
    client.create(DEPLOYMENTS, deployment("one", ports=[{"containerPort": 80}]), namespace)
    svc, ing = wait_exposed(client, namespace, "one")
    assert spec_ports(svc) == [(None, 80, 80, "TCP")]
    assert backend_of(ing)[2] == {"number": 80}


def test_opt_in_removed_deletes_owned_objects_and_url(
    client: KubeClient, namespace: str, start_exposer: Starter
) -> None:
    start_exposer(ExposerConfig(domain=DOMAIN, annotate_deployment=True))
    client.create(DEPLOYMENTS, deployment("web"), namespace)
    wait_exposed(client, namespace, "web")
    eventually(lambda: URL in client.get(DEPLOYMENTS, "web", namespace)["metadata"]["annotations"])
    set_annotations(client, namespace, "web", {EXPOSE: None})
    eventually(lambda: get_or_none(client, SERVICES, namespace, "web") is None)
    eventually(lambda: get_or_none(client, INGRESSES, namespace, "web") is None)
    eventually(
        lambda: (
            URL
            not in (client.get(DEPLOYMENTS, "web", namespace)["metadata"].get("annotations") or {})
        )
    )
    wait_event(client, namespace, "web", "Unexposed")
    eventually(lambda: REGISTRY.get_sample_value("overseer_exposer_exposed_deployments") == 0)


def test_deployment_deletion_garbage_collects_owned_objects(
    client: KubeClient, namespace: str, start_exposer: Starter
) -> None:
    start_exposer()
    client.create(DEPLOYMENTS, deployment("web"), namespace)
    wait_exposed(client, namespace, "web")
    client.delete(DEPLOYMENTS, "web", namespace)
    # The API server's garbage collector does it (a real one may take a while).
    eventually(lambda: get_or_none(client, SERVICES, namespace, "web") is None, timeout=30)
    eventually(lambda: get_or_none(client, INGRESSES, namespace, "web") is None, timeout=30)


# -- drift repair -----------------------------------------------------------------------


def test_deleted_service_is_recreated(
    client: KubeClient, namespace: str, start_exposer: Starter
) -> None:
    start_exposer()
    client.create(DEPLOYMENTS, deployment("web"), namespace)
    svc, _ = wait_exposed(client, namespace, "web")
    client.delete(SERVICES, "web", namespace)
    again = eventually(
        lambda: (
            (s := get_or_none(client, SERVICES, namespace, "web"))
            and s["metadata"]["uid"] != svc["metadata"]["uid"]
            and s
        )
    )
    assert spec_ports(again) == spec_ports(svc)
    assert "recreated Service" in wait_event(client, namespace, "web", "Updated")["message"]


def test_edited_service_is_restored_keeping_foreign_fields(
    client: KubeClient, namespace: str, start_exposer: Starter
) -> None:
    start_exposer()
    client.create(DEPLOYMENTS, deployment("web"), namespace)
    svc, _ = wait_exposed(client, namespace, "web")
    want = spec_ports(svc)

    def tamper(s: JsonDict) -> None:
        s["spec"]["ports"] = [{"name": "other", "port": 1234, "targetPort": 1234}]
        s["spec"]["selector"] = {"app": "someone-else"}
        s["metadata"].setdefault("annotations", {})["team"] = "payments"

    tampered = edit(client, SERVICES, namespace, "web", tamper)
    restored = eventually(
        lambda: (
            (s := client.get(SERVICES, "web", namespace))
            and s["metadata"]["resourceVersion"] != tampered["metadata"]["resourceVersion"]
            and s
        )
    )
    assert spec_ports(restored) == want
    assert restored["spec"]["selector"] == {"app": "web"}
    assert restored["metadata"]["annotations"]["team"] == "payments"
    assert restored["metadata"]["uid"] == svc["metadata"]["uid"]
    assert restored["spec"]["clusterIP"] == svc["spec"]["clusterIP"]


def test_edited_ingress_is_restored(
    client: KubeClient, namespace: str, start_exposer: Starter
) -> None:
    start_exposer()
    client.create(DEPLOYMENTS, deployment("web"), namespace)
    _, ing = wait_exposed(client, namespace, "web")
    want = copy.deepcopy(ing["spec"]["rules"])

    def tamper(i: JsonDict) -> None:
        i["spec"]["rules"][0]["host"] = "evil.example.org"

    tampered = edit(client, INGRESSES, namespace, "web", tamper)
    restored = eventually(
        lambda: (
            (i := client.get(INGRESSES, "web", namespace))
            and i["metadata"]["resourceVersion"] != tampered["metadata"]["resourceVersion"]
            and i
        )
    )
    assert restored["spec"]["rules"] == want
    assert restored["metadata"]["uid"] == ing["metadata"]["uid"]


# -- refusals -----------------------------------------------------------------------------


@pytest.mark.parametrize("sharded", [False, True], ids=["leader", "sharded"])
def test_name_conflict_leaves_foreign_service_untouched(
    client: KubeClient, namespace: str, start_exposer: Starter, sharded: bool
) -> None:
    foreign = client.create(
        SERVICES,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web"},
            "spec": {"selector": {"app": "legacy"}, "ports": [{"port": 80}]},
        },
        namespace,
    )
    start_exposer(sharded=sharded)
    client.create(DEPLOYMENTS, deployment("web"), namespace)
    event = wait_event(client, namespace, "web", "ExposeConflict")
    assert event["type"] == "Warning"
    assert "Service web" in event["message"]
    time.sleep(0.5)  # give a wrong write the chance to happen
    now = client.get(SERVICES, "web", namespace)
    assert now["metadata"]["resourceVersion"] == foreign["metadata"]["resourceVersion"]
    assert "ownerReferences" not in now["metadata"]
    assert get_or_none(client, INGRESSES, namespace, "web") is None
    annotations = client.get(DEPLOYMENTS, "web", namespace)["metadata"]["annotations"]
    assert URL not in annotations


@pytest.mark.parametrize("sharded", [False, True], ids=["leader", "sharded"])
def test_conflict_resolves_when_the_foreign_object_goes(
    client: KubeClient, namespace: str, start_exposer: Starter, sharded: bool
) -> None:
    client.create(
        INGRESSES,
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": {"name": "web"},
            "spec": {"defaultBackend": {"service": {"name": "legacy", "port": {"number": 80}}}},
        },
        namespace,
    )
    start_exposer(sharded=sharded)
    client.create(DEPLOYMENTS, deployment("web"), namespace)
    assert "Ingress web" in wait_event(client, namespace, "web", "ExposeConflict")["message"]
    assert get_or_none(client, SERVICES, namespace, "web") is None
    client.delete(INGRESSES, "web", namespace)  # nothing else changes: no Deployment event
    _, ing = wait_exposed(client, namespace, "web")
    assert backend_of(ing)[3] == "web"


def assert_nothing_written(client: KubeClient, namespace: str, name: str) -> None:
    time.sleep(0.5)  # a wrong write would have happened by now
    assert get_or_none(client, SERVICES, namespace, name) is None
    assert get_or_none(client, INGRESSES, namespace, name) is None
    annotations = client.get(DEPLOYMENTS, name, namespace)["metadata"].get("annotations") or {}
    assert URL not in annotations


def test_no_container_ports_warns_and_writes_nothing(
    client: KubeClient, namespace: str, start_exposer: Starter
) -> None:
    start_exposer()
    client.create(DEPLOYMENTS, deployment("batch", ports=[]), namespace)
    event = wait_event(client, namespace, "batch", "NoContainerPorts")
    assert event["type"] == "Warning"
    assert_nothing_written(client, namespace, "batch")


def test_match_expressions_only_selector_warns_and_writes_nothing(
    client: KubeClient, namespace: str, start_exposer: Starter
) -> None:
    start_exposer()
    selector = {"matchExpressions": [{"key": "app", "operator": "In", "values": ["expr"]}]}
    dep = deployment("expr", selector=selector)
    client.create(DEPLOYMENTS, dep, namespace)
    event = wait_event(client, namespace, "expr", "UnsupportedSelector")
    assert event["type"] == "Warning"
    assert_nothing_written(client, namespace, "expr")


@pytest.mark.parametrize(
    ("annotation", "value"),
    [
        ("overseer.io/expose-host", "Not_A_Host"),
        ("overseer.io/expose-path", "nope"),
        ("overseer.io/expose-port", "9999"),
        ("overseer.io/expose", "yes"),
    ],
)
def test_bad_annotation_warns_and_writes_nothing(
    client: KubeClient,
    namespace: str,
    start_exposer: Starter,
    annotation: str,
    value: str,
    *,
    caplog: pytest.LogCaptureFixture,
) -> None:
    start_exposer()
    client.create(DEPLOYMENTS, deployment("bad", annotations={annotation: value}), namespace)
    event = wait_event(client, namespace, "bad", "InvalidExposeAnnotation")
    assert event["type"] == "Warning"
    assert annotation in event["message"]
    assert_nothing_written(client, namespace, "bad")
    # a Warning Event is a warning in the log too
    logged = [r for r in caplog.records if r.getMessage() == "not exposable"]
    assert logged and {r.levelname for r in logged} == {"WARNING"}


def test_bad_annotation_on_exposed_deployment_keeps_last_good_objects(
    client: KubeClient, namespace: str, start_exposer: Starter
) -> None:
    start_exposer()
    client.create(DEPLOYMENTS, deployment("web"), namespace)
    svc, ing = wait_exposed(client, namespace, "web")
    set_annotations(client, namespace, "web", {"overseer.io/expose-host": "Not_A_Host"})
    wait_event(client, namespace, "web", "InvalidExposeAnnotation")
    time.sleep(0.5)
    assert (
        client.get(SERVICES, "web", namespace)["metadata"]["resourceVersion"]
        == (svc["metadata"]["resourceVersion"])
    )
    assert (
        client.get(INGRESSES, "web", namespace)["metadata"]["resourceVersion"]
        == (ing["metadata"]["resourceVersion"])
    )
    set_annotations(client, namespace, "web", {"overseer.io/expose-host": "fixed.example.org"})
    eventually(
        lambda: backend_of(client.get(INGRESSES, "web", namespace))[0] == "fixed.example.org"
    )


# -- scope ------------------------------------------------------------------------------


def test_expose_all_exposes_unannotated_and_respects_opt_out(
    client: KubeClient, namespace: str, start_exposer: Starter
) -> None:
    start_exposer(ExposerConfig(domain=DOMAIN, expose_all=True))
    client.create(DEPLOYMENTS, deployment("plain", expose=False), namespace)
    client.create(
        DEPLOYMENTS, deployment("private", expose=False, annotations={EXPOSE: "false"}), namespace
    )
    wait_exposed(client, namespace, "plain")
    time.sleep(0.5)
    assert get_or_none(client, SERVICES, namespace, "private") is None
    assert get_or_none(client, INGRESSES, namespace, "private") is None


def test_without_expose_all_unannotated_deployments_are_ignored(
    client: KubeClient, namespace: str, start_exposer: Starter
) -> None:
    start_exposer()
    client.create(DEPLOYMENTS, deployment("plain", expose=False), namespace)
    client.create(DEPLOYMENTS, deployment("marker"), namespace)
    wait_exposed(client, namespace, "marker")  # the controller is running
    time.sleep(0.3)
    assert get_or_none(client, SERVICES, namespace, "plain") is None


@pytest.mark.parametrize(
    "scope",
    [
        pytest.param(lambda ns: NamespaceScope(exclude=(ns,)), id="excluded"),
        pytest.param(
            lambda ns: NamespaceScope(include=("some-other-namespace",)), id="not-included"
        ),
    ],
)
def test_namespace_out_of_scope_is_left_alone(
    client: KubeClient, namespace: str, start_exposer: Starter, scope: Any
) -> None:
    mgr = start_exposer(ExposerConfig(domain=DOMAIN, namespaces=scope(namespace)))
    client.create(DEPLOYMENTS, deployment("web"), namespace)
    eventually(lambda: mgr.lister(DEPLOYMENTS).get("web", namespace))  # seen by the cache
    time.sleep(1.0)
    assert_nothing_written(client, namespace, "web")
    assert not events_for(client, namespace, "web", "Exposed")


def test_namespace_included_is_exposed(
    client: KubeClient, namespace: str, start_exposer: Starter
) -> None:
    start_exposer(
        ExposerConfig(
            domain=DOMAIN, namespaces=NamespaceScope(include=(namespace,), exclude=("x",))
        )
    )
    client.create(DEPLOYMENTS, deployment("web"), namespace)
    wait_exposed(client, namespace, "web")


# -- a burst ------------------------------------------------------------------------------


def _free_cluster_ips(client: KubeClient) -> int | None:
    """How many more ClusterIPs the cluster's ServiceCIDRs hold (None: a server that
    serves no ServiceCIDR, as the local one, which allocates from a /12)."""
    try:
        cidrs = client.resource("servicecidrs.networking.k8s.io")
    except UnknownResource:
        return None
    size = 0
    for item in client.list(cidrs)["items"]:
        for cidr in item["spec"].get("cidrs") or []:
            network = ipaddress.ip_network(cidr)
            if network.version == 4:  # the ClusterIPs below are IPv4 (single stack)
                size += network.num_addresses - 2  # the network and broadcast addresses
    taken = sum(
        len(s["spec"].get("clusterIPs") or [])
        for s in client.list(SERVICES)["items"]
        if s["spec"].get("clusterIP") not in (None, "", "None")
    )
    return size - taken


@pytest.mark.timeout(300)
def test_burst_of_500_deployments_exposed_exactly_once(
    client: KubeClient,
    namespace: str,
    start_exposer: Starter,
    caplog: pytest.LogCaptureFixture,
) -> None:
    count = 500
    free = _free_cluster_ips(client)
    if free is not None and free < count:
        # e.g. kube-apiserver's own default --service-cluster-ip-range, 10.0.0.0/24
        pytest.skip(f"the cluster's ServiceCIDRs hold {free} more ClusterIPs, not {count}")
    # The subject's client gets a high QPS: the figure under test is correctness under
    # concurrency, not the default client-side rate limit (20 QPS would make it ~100 s).
    start_exposer(workers=3, client_options=ClientOptions(qps=1000.0, burst=2000))
    before = conflicts_409()
    names = [f"burst-{i:04d}-{uuid.uuid4().hex[:4]}" for i in range(count)]
    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: client.create(DEPLOYMENTS, deployment(n), namespace), names))

    def all_exposed() -> bool:
        ings = client.list(INGRESSES, namespace)["items"]
        urls = sum(1 for i in ings if URL in (i["metadata"].get("annotations") or {}))
        return urls == count

    eventually(all_exposed, timeout=240, interval=0.5)
    elapsed = time.monotonic() - started
    services = {s["metadata"]["name"] for s in client.list(SERVICES, namespace)["items"]}
    ingresses = {i["metadata"]["name"] for i in client.list(INGRESSES, namespace)["items"]}
    assert services >= set(names)
    assert ingresses >= set(names)

    def events_settled() -> bool:
        items = client.list(EVENTS, namespace)["items"]
        return sum(1 for e in items if e.get("reason") == "Exposed") >= count

    eventually(events_settled, timeout=60, interval=0.5)
    items = client.list(EVENTS, namespace)["items"]
    exposed: dict[str, int] = {}
    for e in items:
        if e.get("reason") == "Exposed":
            who = e["involvedObject"]["name"]
            exposed[who] = exposed.get(who, 0) + int(e.get("count") or 1)
    assert exposed == dict.fromkeys(names, 1)
    assert not [e for e in items if e.get("reason") in ("Updated", "ExposeConflict")]
    assert conflicts_409() == before, "no AlreadyExists/Conflict answers"
    failed = [r for r in caplog.records if "reconcile failed" in r.getMessage()]
    assert not failed
    assert elapsed < 240


# -- what an exposure costs the API server ---------------------------------------------------


def _delta(after: dict[Any, int], before: dict[Any, int]) -> dict[Any, int]:
    return {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)}


@pytest.mark.local_only  # the local server's request records
def test_a_new_exposure_costs_three_writes_and_none_on_the_deployment(
    client: KubeClient, namespace: str, start_exposer: Starter, local_server: Any
) -> None:
    start_exposer()
    client.create(DEPLOYMENTS, deployment("canary"), namespace)
    wait_exposed(client, namespace, "canary")
    wait_event(client, namespace, "canary", "Exposed")
    count = 20
    before = local_server.requests()
    for i in range(count):
        client.create(DEPLOYMENTS, deployment(f"app-{i}"), namespace)
    for i in range(count):
        wait_exposed(client, namespace, f"app-{i}")
    eventually(
        lambda: (
            len([e for e in client.list(EVENTS, namespace)["items"] if e["reason"] == "Exposed"])
            == count + 1
        ),
        timeout=10,
    )
    writes = {
        k: n
        for k, n in _delta(local_server.requests(), before).items()
        if k[0] in ("create", "update", "patch", "delete", "deletecollection")
    }
    assert writes == {
        ("create", "apps", "deployments", ""): count,  # the test's own
        ("create", "", "services", ""): count,
        ("create", "networking.k8s.io", "ingresses", ""): count,
        ("create", "", "events", ""): count,
    }


# -- a namespace being deleted ---------------------------------------------------------------


class CountingClient:
    """A :class:`KubeClient` that records every create and how the server answered."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client
        self.creates: list[tuple[str, str]] = []  # (resource plural, answer)

    def create(self, resource: Resource, body: JsonDict, namespace: str | None = None) -> JsonDict:
        try:
            created = self._client.create(resource, body, namespace)
        except ApiError as exc:
            self.creates.append((resource.plural, f"{exc.status} {type(exc).__name__}"))
            raise
        self.creates.append((resource.plural, "201"))
        return created

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def _hold_namespace(client: KubeClient, namespace: str) -> None:
    """A ConfigMap with a finalizer keeps the namespace Terminating once it is deleted."""
    client.create(
        CONFIGMAPS,
        {"metadata": {"name": "hold", "finalizers": ["overseer.io/test-hold"]}},
        namespace,
    )


def _release_namespace(client: KubeClient, namespace: str) -> None:
    with contextlib.suppress(NotFound):
        client.patch(CONFIGMAPS, "hold", {"metadata": {"finalizers": None}}, namespace=namespace)


def _terminating(client: KubeClient, namespace: str) -> bool:
    hold = client.get(CONFIGMAPS, "hold", namespace)
    return bool(hold["metadata"].get("deletionTimestamp"))


def test_a_terminating_namespace_refuses_one_create_per_deployment_and_no_more(
    client: KubeClient, namespace: str
) -> None:
    """The exposer's caches lag behind a namespace deletion: its Services and Ingresses are
    gone while its Deployments still look alive. Every wake-up of such a Deployment (each
    Service, Ingress and Deployment event) must not cost another refused create."""
    count = 5
    deployments = [
        client.create(DEPLOYMENTS, deployment(f"app-{i}"), namespace) for i in range(count)
    ]
    _hold_namespace(client, namespace)
    try:
        client.delete(NAMESPACES, namespace)
        eventually(lambda: _terminating(client, namespace), timeout=30)
        cached = new_indexer()
        cached.replace(copy.deepcopy(d) for d in deployments)
        counting = CountingClient(client)
        reconciler = ExposerReconciler(
            counting,  # type: ignore[arg-type]
            deployments=Lister(cached, DEPLOYMENTS),
            services=Lister(new_indexer(), SERVICES),
            ingresses=Lister(new_indexer(), INGRESSES),
            recorder=FakeRecorder(),
            config=ExposerConfig(domain=DOMAIN),
        )
        EXPOSER_METRICS.attach()  # exported while an exposer runs: as if one did
        before = REGISTRY.get_sample_value("overseer_exposer_namespace_terminating_total") or 0
        for _ in range(3):
            for d in deployments:
                request = Request(namespace, d["metadata"]["name"])
                assert reconciler.reconcile(request) == Result()  # no requeue
        assert counting.creates == [("services", "403 NamespaceTerminating")] * count
        after = REGISTRY.get_sample_value("overseer_exposer_namespace_terminating_total")
        assert after == before + count
    finally:
        EXPOSER_METRICS.detach()
        _release_namespace(client, namespace)


def _exposer_idle() -> bool:
    depth = REGISTRY.get_sample_value(
        "workqueue_depth", {"name": "exposer", "controller": "exposer"}
    )
    active = REGISTRY.get_sample_value(
        "controller_runtime_active_workers", {"controller": "exposer"}
    )
    return depth == 0 and active == 0


def test_services_emptied_then_namespace_deleted_costs_at_most_one_refusal_each(
    client: KubeClient,
    namespace: str,
    start_exposer: Starter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the namespace controller may do: the Services go first, then the rest. The
    exposer re-creates what it can while the namespace is active; once it is terminating,
    each Deployment costs at most one refused create until it is gone, and its Events at
    most one refused create for the whole namespace."""
    refused: list[str] = []
    create = KubeClient.create

    def counting_create(
        self: KubeClient, resource: Resource, body: JsonDict, namespace: str | None = None
    ) -> JsonDict:
        try:
            return create(self, resource, body, namespace)
        except ApiError as exc:
            if exc.status == 403:
                refused.append(resource.plural)
            raise

    monkeypatch.setattr(KubeClient, "create", counting_create)
    mgr = start_exposer()
    count = 10
    for i in range(count):
        client.create(DEPLOYMENTS, deployment(f"app-{i}"), namespace)
    for i in range(count):
        wait_exposed(client, namespace, f"app-{i}")
    eventually(
        lambda: (
            len([e for e in client.list(EVENTS, namespace)["items"] if e["reason"] == "Exposed"])
            == count
        ),
        timeout=10,
    )
    _hold_namespace(client, namespace)
    try:
        for svc in client.list(SERVICES, namespace)["items"]:
            with contextlib.suppress(NotFound):
                client.delete(SERVICES, svc["metadata"]["name"], namespace)
        client.delete(NAMESPACES, namespace)
        eventually(lambda: _terminating(client, namespace), timeout=30)
        eventually(lambda: not client.list(DEPLOYMENTS, namespace)["items"], timeout=60)
        eventually(lambda: not mgr.lister(DEPLOYMENTS).list(namespace), timeout=30)
        eventually(_exposer_idle, timeout=30)
        assert mgr.events.flush(10)
        objects = [r for r in refused if r != "events"]
        assert len(objects) <= count, refused
        assert refused.count("events") <= 1, refused
    finally:
        _release_namespace(client, namespace)


# -- sharded: caches divide ------------------------------------------------------------------


def test_a_sharded_exposer_caches_no_whole_service_or_ingress_list(
    client: KubeClient, namespace: str, start_exposer: Starter
) -> None:
    """Sharded, every replica holds only its share of the exposer's Services and
    Ingresses (by their owner), and of the others only those it did not make (selected
    by the API server): no informer holds every Service or Ingress."""
    mgr = start_exposer(sharded=True)
    client.create(DEPLOYMENTS, deployment("web"), namespace)
    wait_exposed(client, namespace, "web")
    scopes = sorted(
        i.name for i in mgr.factory.informers() if "services" in i.name or "ingresses" in i.name
    )
    assert scopes, "no Service or Ingress informer"
    for name in scopes:
        assert "shardBy=owner" in name or "managed-by!=overseer" in name, scopes


def test_a_sharded_exposer_conflicts_with_a_foreign_object_carrying_its_label(
    client: KubeClient, namespace: str, start_exposer: Starter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Service someone labelled as the exposer's (app.kubernetes.io/managed-by=overseer)
    without being the Deployment's: a conflict, untouched; and once it goes, the
    Deployment is exposed, though the foreign watch (of unlabelled objects) never saw it."""
    foreign = client.create(
        SERVICES,
        {
            "metadata": {"name": "web", "labels": {"app.kubernetes.io/managed-by": "overseer"}},
            "spec": {"selector": {"app": "legacy"}, "ports": [{"port": 80}]},
        },
        namespace,
    )
    monkeypatch.setattr(exposer_plugin, "LABELLED_FOREIGN_RETRY", 0.5)  # 30 s by default
    mgr = start_exposer(sharded=True)
    shards = mgr.shards
    assert shards is not None
    eventually(lambda: shards.ready_reason() is None)  # its ring published
    time.sleep(1.0)  # and settled: no ring change requeues every key from here on
    client.create(DEPLOYMENTS, deployment("web"), namespace)
    assert "Service web" in wait_event(client, namespace, "web", "ExposeConflict")["message"]
    now = client.get(SERVICES, "web", namespace)
    assert now["metadata"]["resourceVersion"] == foreign["metadata"]["resourceVersion"]
    client.delete(SERVICES, "web", namespace)
    wait_exposed(client, namespace, "web", timeout=3.0)  # the retry, not a watch, finds it

"""The exposer's pure parts: desired objects, validation, merging, expectations, config."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controllers.exposer import RBAC_RULES, ExposerConfig, NamespaceScope, TLSConfig
from controllers.exposer.desired import (
    REASON_INVALID_ANNOTATION,
    REASON_NO_CONTAINER_PORTS,
    REASON_UNSUPPORTED_NAME,
    REASON_UNSUPPORTED_SELECTOR,
    ContainerPort,
    NotExposable,
    choose_port,
    container_ports,
    desired_exposure,
    opted_in,
    selector_of,
    service_ports,
)
from controllers.exposer.expectations import Expectations
from controllers.exposer.merge import controller_uid, ingress_update, service_update
from controllers.exposer.names import host_errors, http_path_errors
from manager import JsonDict
from manager.config import parse, render_defaults

CFG = ExposerConfig(domain="apps.example.com")


def deployment(
    *,
    name: str = "web",
    annotations: dict[str, str] | None = None,
    containers: list[JsonDict] | None = None,
    selector: JsonDict | None = None,
) -> JsonDict:
    if containers is None:
        containers = [
            {"name": "app", "ports": [{"name": "http", "containerPort": 8080}]},
            {"name": "side", "ports": [{"containerPort": 9090}]},
        ]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "uid": "uid-1",
            "resourceVersion": "10",
            "annotations": {"overseer.io/expose": "true", **(annotations or {})},
        },
        "spec": {
            "selector": selector if selector is not None else {"matchLabels": {"app": name}},
            "template": {"spec": {"containers": containers}},
        },
    }


def reason_of(fn: Any, *args: Any) -> str:
    with pytest.raises(NotExposable) as info:
        fn(*args)
    return info.value.reason


# -- opt-in ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expose_all", "want"),
    [
        (None, False, False),
        (None, True, True),
        ("true", False, True),
        ("True", False, True),
        ("false", True, False),
        (" FALSE ", False, False),
    ],
)
def test_opted_in(value: str | None, expose_all: bool, want: bool) -> None:
    dep = deployment()
    if value is None:
        del dep["metadata"]["annotations"]["overseer.io/expose"]
    else:
        dep["metadata"]["annotations"]["overseer.io/expose"] = value
    assert opted_in(dep, ExposerConfig(expose_all=expose_all)) is want


def test_opted_in_rejects_other_values() -> None:
    dep = deployment(annotations={"overseer.io/expose": "yes"})
    assert reason_of(opted_in, dep, CFG) == REASON_INVALID_ANNOTATION


# -- selector and ports -------------------------------------------------------------------


def test_selector_from_match_labels() -> None:
    assert selector_of(deployment()) == {"app": "web"}


@pytest.mark.parametrize(
    "selector",
    [
        {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]},
        {
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "Exists"}],
        },
        {},
    ],
    ids=["expressions-only", "labels-and-expressions", "empty"],
)
def test_selector_that_a_service_cannot_express(selector: JsonDict) -> None:
    dep = deployment(selector=selector)
    assert reason_of(selector_of, dep) == REASON_UNSUPPORTED_SELECTOR


def test_container_ports_of_all_containers_deduplicated() -> None:
    dep = deployment(
        containers=[
            {
                "ports": [
                    {"name": "http", "containerPort": 8080},
                    {"containerPort": 53, "protocol": "UDP"},
                ]
            },
            {"ports": [{"name": "again", "containerPort": 8080}, {"containerPort": 53}]},
            {"ports": [{"name": "Bad_Name", "containerPort": 7000}, {"containerPort": 0}]},
            {},
        ]
    )
    assert container_ports(dep) == [
        ContainerPort("http", 8080, "TCP"),
        ContainerPort("", 53, "UDP"),
        ContainerPort("", 53, "TCP"),
        ContainerPort("", 7000, "TCP"),
    ]


def test_service_ports_keep_names_and_protocols() -> None:
    ports = [ContainerPort("http", 8080, "TCP"), ContainerPort("", 53, "UDP")]
    assert service_ports(ports) == [
        {"name": "http", "port": 8080, "targetPort": 8080, "protocol": "TCP"},
        {"name": "udp-53", "port": 53, "targetPort": 53, "protocol": "UDP"},
    ]


def test_a_single_unnamed_port_stays_unnamed() -> None:
    assert service_ports([ContainerPort("", 80, "TCP")]) == [
        {"port": 80, "targetPort": 80, "protocol": "TCP"}
    ]


def test_generated_port_names_do_not_collide_with_real_ones() -> None:
    ports = [ContainerPort("tcp-80", 8080, "TCP"), ContainerPort("", 80, "TCP")]
    names = [p["name"] for p in service_ports(ports)]
    assert names == ["tcp-80", "tcp-80-2"]


def test_choose_port() -> None:
    ports = [
        ContainerPort("dns", 53, "UDP"),
        ContainerPort("http", 8080, "TCP"),
        ContainerPort("", 9090, "TCP"),
    ]
    assert choose_port(ports, None) == ports[1]
    assert choose_port(ports, "http") == ports[1]
    assert choose_port(ports, "9090") == ports[2]
    assert reason_of(choose_port, ports, "9999") == REASON_INVALID_ANNOTATION
    assert reason_of(choose_port, ports, "dns") == REASON_INVALID_ANNOTATION  # UDP
    assert reason_of(choose_port, ports, "53") == REASON_INVALID_ANNOTATION
    assert reason_of(choose_port, ports[:1], None) == REASON_NO_CONTAINER_PORTS


# -- the desired objects ----------------------------------------------------------------------


def test_desired_exposure_defaults() -> None:
    exposure = desired_exposure(deployment(), CFG)
    owner = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "web",
        "uid": "uid-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    meta = {
        "name": "web",
        "namespace": "shop",
        "labels": {"app.kubernetes.io/managed-by": "overseer"},
        "ownerReferences": [owner],
    }
    assert exposure.service == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "type": "ClusterIP",
            "selector": {"app": "web"},
            "ports": [
                {"name": "http", "port": 8080, "targetPort": 8080, "protocol": "TCP"},
                {"name": "tcp-9090", "port": 9090, "targetPort": 9090, "protocol": "TCP"},
            ],
        },
    }
    assert exposure.ingress == {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {
            **meta,
            "annotations": {"overseer.io/exposed-url": "http://web.shop.apps.example.com/"},
        },
        "spec": {
            "rules": [
                {
                    "host": "web.shop.apps.example.com",
                    "http": {
                        "paths": [
                            {
                                "path": "/",
                                "pathType": "Prefix",
                                "backend": {"service": {"name": "web", "port": {"name": "http"}}},
                            }
                        ]
                    },
                }
            ]
        },
    }
    assert exposure.url == "http://web.shop.apps.example.com/"


def test_desired_exposure_with_annotations_and_tls() -> None:
    config = ExposerConfig(
        domain="apps.example.com",
        ingress_class_name="nginx",
        service_type="NodePort",
        path_type="Exact",
        tls=TLSConfig(
            enabled=True,
            secret_name="{namespace}-{name}-cert",
            ingress_annotations={"cert-manager.io/cluster-issuer": "le"},
        ),
    )
    dep = deployment(
        annotations={
            "overseer.io/expose-host": "shop.example.org",
            "overseer.io/expose-path": "/api/v1",
            "overseer.io/expose-port": "9090",
        }
    )
    exposure = desired_exposure(dep, config)
    assert exposure.service["spec"]["type"] == "NodePort"
    spec = exposure.ingress["spec"]
    assert spec["ingressClassName"] == "nginx"
    path = spec["rules"][0]["http"]["paths"][0]
    assert spec["rules"][0]["host"] == "shop.example.org"
    assert path["path"] == "/api/v1"
    assert path["pathType"] == "Exact"
    assert path["backend"]["service"]["port"] == {"name": "tcp-9090"}
    assert spec["tls"] == [{"hosts": ["shop.example.org"], "secretName": "shop-web-cert"}]
    assert exposure.ingress["metadata"]["annotations"] == {
        "cert-manager.io/cluster-issuer": "le",
        "overseer.io/managed-annotations": "cert-manager.io/cluster-issuer",
        "overseer.io/exposed-url": "https://shop.example.org/api/v1",
    }
    assert exposure.url == "https://shop.example.org/api/v1"


@pytest.mark.parametrize(
    ("dep", "reason"),
    [
        (
            deployment(annotations={"overseer.io/expose-host": "Not_A_Host"}),
            REASON_INVALID_ANNOTATION,
        ),
        (
            deployment(annotations={"overseer.io/expose-host": "10.0.0.1"}),
            REASON_INVALID_ANNOTATION,
        ),
        (deployment(annotations={"overseer.io/expose-path": "nope"}), REASON_INVALID_ANNOTATION),
        (deployment(annotations={"overseer.io/expose-path": "/a b"}), REASON_INVALID_ANNOTATION),
        (deployment(annotations={"overseer.io/expose-port": "9999"}), REASON_INVALID_ANNOTATION),
        (deployment(containers=[{"name": "app"}]), REASON_NO_CONTAINER_PORTS),
        (
            deployment(selector={"matchExpressions": [{"key": "a", "operator": "Exists"}]}),
            REASON_UNSUPPORTED_SELECTOR,
        ),
        (deployment(name="1st-app"), REASON_UNSUPPORTED_NAME),
        (deployment(name="web.v2"), REASON_UNSUPPORTED_NAME),
    ],
    ids=["host", "host-ip", "path", "path-space", "port", "no-ports", "selector", "digit", "dots"],
)
def test_not_exposable(dep: JsonDict, reason: str) -> None:
    assert reason_of(desired_exposure, dep, CFG) == reason


def test_names() -> None:
    assert host_errors("shop.example.org") == []
    assert host_errors("localhost") == []
    assert host_errors("Shop.example.org")
    assert host_errors("*.example.org")
    assert host_errors("a" * 64 + ".org")
    assert http_path_errors("/") == []
    assert http_path_errors("/api/v1/%7Euser") == []
    for bad in ("", "api", "//x", "/a/../b", "/a/.", "/%2F", "/a?b", "/a#b", "/" + "a" * 1024):
        assert http_path_errors(bad), bad


# -- merging into observed objects ------------------------------------------------------------


def observed_service(desired: JsonDict) -> JsonDict:
    """``desired`` as the API server stores it: defaults, allocations, foreign fields."""
    svc = copy.deepcopy(desired)
    svc["metadata"].update(uid="svc-uid", resourceVersion="20")
    svc["metadata"]["annotations"] = {"team": "payments"}
    svc["metadata"]["labels"]["extra"] = "kept"
    svc["spec"].update(clusterIP="10.96.0.10", clusterIPs=["10.96.0.10"], sessionAffinity="None")
    svc["status"] = {"loadBalancer": {}}
    return svc


def test_service_update_none_when_owned_fields_match() -> None:
    desired = desired_exposure(deployment(), CFG).service
    observed = observed_service(desired)
    for port in observed["spec"]["ports"]:
        del port["protocol"]  # defaults the server would add back are equal
        del port["targetPort"]
    del observed["spec"]["type"]
    assert service_update(observed, desired) is None


def test_service_update_changes_only_owned_fields() -> None:
    desired = desired_exposure(deployment(), CFG).service
    observed = observed_service(desired)
    observed["spec"]["ports"] = [{"port": 1, "targetPort": 1, "protocol": "TCP"}]
    observed["spec"]["selector"] = {"app": "other"}
    del observed["metadata"]["labels"]["app.kubernetes.io/managed-by"]
    before = copy.deepcopy(observed)
    update = service_update(observed, desired)
    assert update is not None
    assert observed == before  # inputs are never mutated
    assert set(update.changes) == {"labels", "selector", "ports"}
    body = update.body
    assert body["spec"]["ports"] == desired["spec"]["ports"]
    assert body["spec"]["selector"] == {"app": "web"}
    assert body["spec"]["clusterIP"] == "10.96.0.10"
    assert body["spec"]["clusterIPs"] == ["10.96.0.10"]
    assert body["metadata"]["resourceVersion"] == "20"
    assert body["metadata"]["annotations"] == {"team": "payments"}
    assert body["metadata"]["labels"]["extra"] == "kept"


def test_service_update_keeps_allocated_node_ports() -> None:
    config = ExposerConfig(service_type="NodePort")
    desired = desired_exposure(deployment(), config).service
    observed = observed_service(desired)
    observed["spec"]["ports"][0]["nodePort"] = 30080
    observed["spec"]["ports"][1]["nodePort"] = 30090
    assert service_update(observed, desired) is None  # nodePort is not ours
    dep = deployment(
        containers=[{"ports": [{"name": "http", "containerPort": 8081}, {"containerPort": 7000}]}]
    )
    update = service_update(observed, desired_exposure(dep, config).service)
    assert update is not None
    assert update.body["spec"]["ports"][0] == {
        "name": "http",
        "port": 8081,
        "targetPort": 8081,
        "protocol": "TCP",
        "nodePort": 30080,
    }
    assert "nodePort" not in update.body["spec"]["ports"][1]  # a new port: the server picks


def test_service_update_to_cluster_ip_drops_node_ports() -> None:
    node_port = desired_exposure(deployment(), ExposerConfig(service_type="NodePort")).service
    observed = observed_service(node_port)
    observed["spec"]["ports"][0]["nodePort"] = 30080
    update = service_update(observed, desired_exposure(deployment(), CFG).service)
    assert update is not None
    assert update.changes == ("type", "ports")
    assert update.body["spec"]["type"] == "ClusterIP"
    assert all("nodePort" not in p for p in update.body["spec"]["ports"])


def test_ingress_update() -> None:
    desired = desired_exposure(deployment(), CFG).ingress
    observed = copy.deepcopy(desired)
    observed["metadata"].update(uid="ing-uid", resourceVersion="30")
    observed["spec"]["ingressClassName"] = "cluster-default"  # set by admission: not ours
    observed["status"] = {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}
    assert ingress_update(observed, desired) is None
    observed["spec"]["rules"][0]["host"] = "evil.example.org"
    observed["spec"]["tls"] = [{"hosts": ["evil.example.org"]}]
    update = ingress_update(observed, desired)
    assert update is not None
    assert update.changes == ("rules", "tls")
    assert update.body["spec"]["rules"] == desired["spec"]["rules"]
    assert "tls" not in update.body["spec"]
    assert update.body["spec"]["ingressClassName"] == "cluster-default"
    assert update.body["status"] == observed["status"]


def test_ingress_update_removes_annotations_it_no_longer_manages() -> None:
    tls = ExposerConfig(
        tls=TLSConfig(enabled=True, ingress_annotations={"a.io/x": "1", "a.io/y": "2"})
    )
    observed = copy.deepcopy(desired_exposure(deployment(), tls).ingress)
    observed["metadata"]["annotations"]["foreign"] = "kept"
    fewer = ExposerConfig(tls=TLSConfig(enabled=True, ingress_annotations={"a.io/y": "3"}))
    update = ingress_update(observed, desired_exposure(deployment(), fewer).ingress)
    assert update is not None
    assert update.body["metadata"]["annotations"] == {
        "a.io/y": "3",
        "foreign": "kept",
        "overseer.io/managed-annotations": "a.io/y",
        "overseer.io/exposed-url": "https://web.shop.example.com/",
    }
    plain = ingress_update(update.body, desired_exposure(deployment(), CFG).ingress)
    assert plain is not None
    assert plain.body["metadata"]["annotations"] == {
        "foreign": "kept",
        "overseer.io/exposed-url": "http://web.shop.apps.example.com/",
    }
    assert "tls" not in plain.body["spec"]


def test_ingress_update_keeps_the_url_annotation_current() -> None:
    observed = copy.deepcopy(desired_exposure(deployment(), CFG).ingress)
    assert ingress_update(observed, desired_exposure(deployment(), CFG).ingress) is None
    # An Ingress from a version that kept the URL only on the Deployment gets it.
    del observed["metadata"]["annotations"]
    update = ingress_update(observed, desired_exposure(deployment(), CFG).ingress)
    assert update is not None and update.changes == ("annotations",)
    assert update.body["metadata"]["annotations"] == {
        "overseer.io/exposed-url": "http://web.shop.apps.example.com/"
    }
    moved = deployment(annotations={"overseer.io/expose-path": "/v2"})
    update = ingress_update(update.body, desired_exposure(moved, CFG).ingress)
    assert update is not None and update.changes == ("annotations", "rules")
    assert update.body["metadata"]["annotations"]["overseer.io/exposed-url"] == (
        "http://web.shop.apps.example.com/v2"
    )


def test_controller_uid() -> None:
    obj = {"metadata": {"ownerReferences": [{"uid": "a"}, {"uid": "b", "controller": True}]}}
    assert controller_uid(obj) == "b"
    assert controller_uid({"metadata": {}}) is None


# -- expectations -----------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_expectations_create() -> None:
    clock = FakeClock()
    exp = Expectations(ttl=10.0, clock=clock)
    key = ("services", "ns", "web")
    assert exp.pending(key, None) is None
    exp.created(key, {"metadata": {"uid": "u1", "resourceVersion": "5"}})
    assert exp.pending(key, None) == "create"
    assert exp.pending(key, {"metadata": {"uid": "u1", "resourceVersion": "5"}}) is None
    assert exp.pending(key, None) is None  # met: forgotten
    exp.created(key, {"metadata": {"uid": "u2"}})
    clock.now = 11.0
    assert exp.pending(key, None) is None  # expired
    assert len(exp) == 0


def test_expectations_update() -> None:
    exp = Expectations(ttl=10.0, clock=FakeClock())
    key = ("deployments", "ns", "web")
    old = {"metadata": {"uid": "u1", "resourceVersion": "5"}}
    exp.updated(key, old)
    assert exp.pending(key, old) == "update"
    assert exp.pending(key, {"metadata": {"uid": "u1", "resourceVersion": "6"}}) is None
    exp.updated(key, old)
    assert exp.pending(key, {"metadata": {"uid": "u9", "resourceVersion": "5"}}) is None
    exp.updated(key, old)
    assert exp.pending(key, None) is None
    exp.updated(key, old)
    exp.forget(key)
    assert exp.pending(key, old) is None


# -- configuration and RBAC -------------------------------------------------------------------


def test_config_from_yaml_keys() -> None:
    _, controllers = parse(
        {
            "controllers": {
                "exposer": {
                    "workers": 4,
                    "domain": "apps.corp.example",
                    "ingressClassName": "nginx",
                    "serviceType": "LoadBalancer",
                    "pathType": "Exact",
                    "exposeAll": True,
                    "tls": {
                        "enabled": True,
                        "secretName": "{namespace}-{name}",
                        "ingressAnnotations": {"cert-manager.io/cluster-issuer": "le"},
                    },
                    "namespaces": {"include": ["a", "b"], "exclude": ["c"]},
                }
            }
        },
        {"exposer": ExposerConfig},
    )
    settings, config = controllers["exposer"]
    assert settings.workers == 4
    assert config == ExposerConfig(
        domain="apps.corp.example",
        ingress_class_name="nginx",
        service_type="LoadBalancer",
        path_type="Exact",
        expose_all=True,
        tls=TLSConfig(
            enabled=True,
            secret_name="{namespace}-{name}",
            ingress_annotations={"cert-manager.io/cluster-issuer": "le"},
        ),
        namespaces=NamespaceScope(include=("a", "b"), exclude=("c",)),
    )
    assert config.namespaces.selects("a")
    assert not config.namespaces.selects("c")
    assert not config.namespaces.selects("d")
    assert ExposerConfig().namespaces.selects("anything")


@pytest.mark.parametrize(
    ("section", "paths"),
    [
        ({"serviceType": "ExternalName"}, ["serviceType"]),
        ({"domain": "Not_A_Domain", "ingressClassName": "A B"}, ["domain", "ingressClassName"]),
        (
            {
                "tls": {"secretName": "{nme}-tls"},
                "namespaces": {"include": ["a"], "exclude": ["a", "B"]},
            },
            ["tls.secretName", "namespaces.exclude"],
        ),
        ({"tls": {"secretName": "{name}_tls"}}, ["tls.secretName"]),
    ],
)
def test_config_errors_have_paths(section: JsonDict, paths: list[str]) -> None:
    from manager.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        parse({"controllers": {"exposer": section}}, {"exposer": ExposerConfig})
    text = str(info.value)
    for path in paths:
        assert f"controllers.exposer.{path}:" in text


def test_defaults_render() -> None:
    text = render_defaults({"exposer": ExposerConfig})
    assert "ingressClassName" in text
    assert "secretName: '{name}-tls'" in text


def test_rbac_rules_cover_what_the_reconciler_does() -> None:
    verbs = {
        (g, r): set(rule["verbs"])
        for rule in RBAC_RULES
        for g in rule["apiGroups"]
        for r in rule["resources"]
    }
    assert {"get", "list", "watch", "patch"} <= verbs[("apps", "deployments")]
    assert {"update"} <= verbs[("apps", "deployments/finalizers")]
    for key in (("", "services"), ("networking.k8s.io", "ingresses")):
        assert {"get", "list", "watch", "create", "update", "delete"} <= verbs[key]
    assert {"create", "patch"} <= verbs[("", "events")]
    assert not any("secrets" in rule["resources"] for rule in RBAC_RULES)


def test_updates_never_touch_the_observed_object() -> None:
    """Cached objects are shared: the body to PUT is built beside them, never in them."""
    want = desired_exposure(deployment(), CFG)
    svc = copy.deepcopy(want.service)
    svc["metadata"]["labels"] = {"team": "a"}
    svc["spec"].update(type="NodePort", clusterIP="10.0.0.9")
    svc["spec"]["ports"] = [{"name": "old", "port": 1, "nodePort": 30001}]
    svc["status"] = {"loadBalancer": {}}
    ing = copy.deepcopy(want.ingress)
    ing["metadata"]["annotations"] = {"foreign": "kept", "overseer.io/exposed-url": "old"}
    ing["spec"]["rules"][0]["host"] = "old.example.com"
    ing["spec"]["tls"] = [{"hosts": ["old.example.com"]}]
    before = copy.deepcopy((svc, ing))
    s = service_update(svc, want.service)
    i = ingress_update(ing, want.ingress)
    assert s is not None and i is not None
    assert (svc, ing) == before
    assert s.body["status"] == svc["status"] and s.body["spec"]["clusterIP"] == "10.0.0.9"
    assert s.body["metadata"]["labels"] == {"team": "a", "app.kubernetes.io/managed-by": "overseer"}
    assert i.body["metadata"]["annotations"]["foreign"] == "kept"
    assert "tls" not in i.body["spec"]

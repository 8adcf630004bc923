"""Server-side printing answers the Table kube-apiserver answers ``kubectl get`` with."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from apiserver.http.printers import JsonPathError, human_duration, jsonpath_find, to_table

NOW = datetime(2024, 1, 10, 12, 0, 0, tzinfo=UTC)
CREATED = "2024-01-10T11:56:48Z"  # 3m12s before NOW


def meta(name: str = "x", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": "default",
        "uid": "u-" + name,
        "resourceVersion": "5",
        "creationTimestamp": CREATED,
        **extra,
    }


def table(kind: str, group: str, *objs: dict[str, Any], **kw: Any) -> dict[str, Any]:
    kw.setdefault("list_metadata", {"resourceVersion": "9"})
    kw.setdefault("now", NOW)
    return to_table(kind, group, list(objs), **kw)


def cells(kind: str, group: str, obj: dict[str, Any], **kw: Any) -> list[Any]:
    rows = table(kind, group, obj, **kw)["rows"]
    assert len(rows) == 1
    return list(rows[0]["cells"])


def columns(t: dict[str, Any]) -> list[tuple[str, int]]:
    return [(c["name"], c["priority"]) for c in t["columnDefinitions"]]


# --- HumanDuration ---------------------------------------------------------------------

D, H, M, S = 86400, 3600, 60, 1


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (-3, "<invalid>"),
        (-2, "<invalid>"),
        (-1.5, "0s"),  # within two seconds of now: clock skew
        (-1, "0s"),
        (0, "0s"),
        (0.9, "0s"),
        (5, "5s"),
        (119, "119s"),
        (120, "2m"),
        (121, "2m1s"),
        (3 * M + 12, "3m12s"),
        (9 * M + 59, "9m59s"),
        (10 * M, "10m"),
        (10 * M + 59, "10m"),
        (179 * M + 59, "179m"),
        (3 * H, "3h"),
        (3 * H + 1 * M, "3h1m"),
        (7 * H + 59 * M, "7h59m"),
        (8 * H, "8h"),
        (47 * H + 59 * M, "47h"),
        (48 * H, "2d"),
        (49 * H, "2d1h"),
        (7 * D + 23 * H, "7d23h"),
        (8 * D, "8d"),
        (729 * D, "729d"),
        (730 * D, "2y"),
        (731 * D, "2y1d"),
        (8 * 365 * D - 1, "7y364d"),
        (8 * 365 * D, "8y"),
        (20 * 365 * D, "20y"),
    ],
)
def test_human_duration_matches_kube_at_every_boundary(seconds: float, expected: str) -> None:
    assert human_duration(timedelta(seconds=seconds)) == expected


# --- the Table envelope ----------------------------------------------------------------


def test_table_envelope_and_list_metadata() -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("a")}
    t = table(
        "ConfigMap",
        "",
        cm,
        list_metadata={"resourceVersion": "9", "continue": "tok", "remainingItemCount": 3},
    )
    assert (t["kind"], t["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    assert t["metadata"] == {"resourceVersion": "9", "continue": "tok", "remainingItemCount": 3}
    assert list(t) == ["kind", "apiVersion", "metadata", "columnDefinitions", "rows"]
    name = t["columnDefinitions"][0]
    assert set(name) == {"name", "type", "format", "description", "priority"}
    assert (name["name"], name["type"], name["format"]) == ("Name", "string", "name")


def test_empty_continue_is_omitted_and_an_empty_list_has_no_rows() -> None:
    t = table("ConfigMap", "", list_metadata={"resourceVersion": "9", "continue": ""})
    assert t["metadata"] == {"resourceVersion": "9"}
    assert t["rows"] == []


@pytest.mark.parametrize(
    ("include", "expected"),
    [
        (
            "Metadata",
            {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta()},
        ),
        (
            "",
            {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta()},
        ),
        ("None", None),
        ("Object", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(), "data": {}}),
    ],
)
def test_include_object_chooses_what_each_row_carries(include: str, expected: Any) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(), "data": {}}
    row = table("ConfigMap", "", cm, include_object=include)["rows"][0]
    assert row["object"] == expected
    assert "object" in row


def test_metadata_is_the_default_include_object() -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta()}
    t = to_table("ConfigMap", "", [cm], list_metadata={}, now=NOW)
    assert t["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


def test_unknown_include_object_is_rejected() -> None:
    with pytest.raises(ValueError, match='unrecognized includeObject value: "All"'):
        table("ConfigMap", "", include_object="All")


def test_table_mutates_nothing_and_shares_nothing() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta(labels={"a": "b"}), "spec": {}}
    before = copy.deepcopy(pod)
    for include in ("Object", "Metadata"):
        row = table("Pod", "", pod, include_object=include)["rows"][0]
        row["object"]["metadata"]["labels"]["a"] = "changed"
    assert pod == before


def test_now_defaults_to_the_current_time() -> None:
    just_now = (datetime.now(UTC) - timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    cm = {"metadata": {"name": "a", "creationTimestamp": just_now}}
    age = to_table("ConfigMap", "", [cm], list_metadata={})["rows"][0]["cells"][2]
    assert age in ("30s", "31s", "32s")


# --- built-in kinds: columns -----------------------------------------------------------

AGE = ("Age", 0)
NAME = ("Name", 0)


@pytest.mark.parametrize(
    ("kind", "group", "expected"),
    [
        ("Namespace", "", [NAME, ("Status", 0), AGE]),
        (
            "Pod",
            "",
            [
                NAME,
                ("Ready", 0),
                ("Status", 0),
                ("Restarts", 0),
                AGE,
                ("IP", 1),
                ("Node", 1),
                ("Nominated Node", 1),
                ("Readiness Gates", 1),
            ],
        ),
        (
            "Service",
            "",
            [
                NAME,
                ("Type", 0),
                ("Cluster-IP", 0),
                ("External-IP", 0),
                ("Port(s)", 0),
                AGE,
                ("Selector", 1),
            ],
        ),
        ("ConfigMap", "", [NAME, ("Data", 0), AGE]),
        ("Secret", "", [NAME, ("Type", 0), ("Data", 0), AGE]),
        ("ServiceAccount", "", [NAME, ("Secrets", 0), AGE]),
        (
            "Event",
            "",
            [
                ("Last Seen", 0),
                ("Type", 0),
                ("Reason", 0),
                ("Object", 0),
                ("Subobject", 1),
                ("Source", 1),
                ("Message", 0),
                ("First Seen", 1),
                ("Count", 1),
                ("Name", 1),
            ],
        ),
        (
            "Node",
            "",
            [
                NAME,
                ("Status", 0),
                ("Roles", 0),
                AGE,
                ("Version", 0),
                ("Internal-IP", 1),
                ("External-IP", 1),
                ("OS-Image", 1),
                ("Kernel-Version", 1),
                ("Container-Runtime", 1),
            ],
        ),
        (
            "Deployment",
            "apps",
            [
                NAME,
                ("Ready", 0),
                ("Up-to-date", 0),
                ("Available", 0),
                AGE,
                ("Containers", 1),
                ("Images", 1),
                ("Selector", 1),
            ],
        ),
        (
            "ReplicaSet",
            "apps",
            [
                NAME,
                ("Desired", 0),
                ("Current", 0),
                ("Ready", 0),
                AGE,
                ("Containers", 1),
                ("Images", 1),
                ("Selector", 1),
            ],
        ),
        (
            "Ingress",
            "networking.k8s.io",
            [NAME, ("Class", 0), ("Hosts", 0), ("Address", 0), ("Ports", 0), AGE],
        ),
        ("Lease", "coordination.k8s.io", [NAME, ("Holder", 0), AGE]),
        ("CustomResourceDefinition", "apiextensions.k8s.io", [NAME, ("Created At", 0)]),
        ("Widget", "example.com", [NAME, AGE]),
    ],
)
def test_columns_per_kind_as_kube_defines_them(
    kind: str, group: str, expected: list[tuple[str, int]]
) -> None:
    assert columns(table(kind, group)) == expected


def test_events_k8s_io_events_print_like_core_events() -> None:
    assert columns(table("Event", "events.k8s.io")) == columns(table("Event", ""))


# --- built-in kinds: rows --------------------------------------------------------------


def test_namespace_row() -> None:
    ns = {"metadata": meta("team-a"), "status": {"phase": "Active"}}
    assert cells("Namespace", "", ns) == ["team-a", "Active", "3m12s"]


def test_configmap_counts_data_and_binary_data() -> None:
    cm = {"metadata": meta("cfg"), "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}}
    assert cells("ConfigMap", "", cm) == ["cfg", 3, "3m12s"]


@pytest.mark.parametrize(
    ("secret", "secret_type", "count"),
    [
        (
            {"type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}},
            "kubernetes.io/tls",
            2,
        ),
        ({"data": {"a": ""}, "stringData": {"a": "x", "b": "y"}}, "Opaque", 2),
        ({}, "Opaque", 0),
    ],
)
def test_secret_row(secret: dict[str, Any], secret_type: str, count: int) -> None:
    obj = {"metadata": meta("s"), **secret}
    assert cells("Secret", "", obj) == ["s", secret_type, count, "3m12s"]


def test_service_account_row() -> None:
    sa = {"metadata": meta("default"), "secrets": [{"name": "t"}]}
    assert cells("ServiceAccount", "", sa) == ["default", 1, "3m12s"]


def test_lease_row() -> None:
    lease = {"metadata": meta("leader"), "spec": {"holderIdentity": "pod-1_abc"}}
    assert cells("Lease", "coordination.k8s.io", lease) == ["leader", "pod-1_abc", "3m12s"]
    assert cells("Lease", "coordination.k8s.io", {"metadata": meta("l")})[1] == ""


def test_crd_prints_name_and_created_at_in_utc() -> None:
    crd = {"metadata": meta("widgets.example.com", creationTimestamp="2024-01-10T13:56:48+02:00")}
    assert cells("CustomResourceDefinition", "apiextensions.k8s.io", crd) == [
        "widgets.example.com",
        "2024-01-10T11:56:48Z",
    ]
    created_at = table("CustomResourceDefinition", "apiextensions.k8s.io")["columnDefinitions"][1]
    assert created_at["type"] == "date"
    # kube's default convertor leaves the rows of an empty list nil
    assert table("CustomResourceDefinition", "apiextensions.k8s.io")["rows"] is None


def pod(
    *,
    containers: int = 1,
    statuses: list[dict[str, Any]] | None = None,
    init: list[dict[str, Any]] | None = None,
    init_statuses: list[dict[str, Any]] | None = None,
    **status: Any,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": f"c{i}"} for i in range(containers)]}
    if init is not None:
        spec["initContainers"] = init
    st: dict[str, Any] = {"phase": "Running", **status}
    if statuses is not None:
        st["containerStatuses"] = statuses
    if init_statuses is not None:
        st["initContainerStatuses"] = init_statuses
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta("web"), "spec": spec, "status": st}


RUNNING = {"running": {"startedAt": "2024-01-10T11:57:00Z"}}


@pytest.mark.parametrize(
    ("obj", "ready", "status", "restarts"),
    [
        (pod(containers=2, phase="Pending"), "0/2", "Pending", "0"),
        (pod(statuses=[{"ready": True, "state": RUNNING}]), "1/1", "Running", "0"),
        (
            pod(statuses=[{"ready": False, "state": {"waiting": {"reason": "ImagePullBackOff"}}}]),
            "0/1",
            "ImagePullBackOff",
            "0",
        ),
        (
            pod(
                statuses=[
                    {
                        "ready": False,
                        "restartCount": 4,
                        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                        "lastState": {"terminated": {"finishedAt": "2024-01-10T11:59:00Z"}},
                    }
                ]
            ),
            "0/1",
            "CrashLoopBackOff",
            "4 (60s ago)",
        ),
        (
            pod(statuses=[{"state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]),
            "0/1",
            "Completed",
            "0",
        ),
        (pod(statuses=[{"state": {"terminated": {"exitCode": 3}}}]), "0/1", "ExitCode:3", "0"),
        (pod(statuses=[{"state": {"terminated": {"signal": 9}}}]), "0/1", "Signal:9", "0"),
        (pod(phase="Failed", reason="Evicted"), "0/1", "Evicted", "0"),
        (
            pod(
                phase="Pending", conditions=[{"type": "PodScheduled", "reason": "SchedulingGated"}]
            ),
            "0/1",
            "SchedulingGated",
            "0",
        ),
        (
            pod(
                phase="Pending",
                init=[{"name": "i0"}, {"name": "i1"}],
                init_statuses=[
                    {"name": "i0", "state": {"terminated": {"exitCode": 0}}},
                    {"name": "i1", "state": {"running": {}}},
                ],
            ),
            "0/1",
            "Init:1/2",
            "0",
        ),
        (
            pod(
                phase="Pending",
                init=[{"name": "i0"}],
                init_statuses=[{"name": "i0", "state": {"waiting": {"reason": "ErrImagePull"}}}],
            ),
            "0/1",
            "Init:ErrImagePull",
            "0",
        ),
        (
            pod(
                phase="Pending",
                init=[{"name": "i0"}],
                init_statuses=[
                    {"name": "i0", "restartCount": 2, "state": {"terminated": {"exitCode": 1}}}
                ],
            ),
            "0/1",
            "Init:ExitCode:1",
            "2",
        ),
        (  # a restartable init container (sidecar) counts toward READY
            pod(
                init=[{"name": "proxy", "restartPolicy": "Always"}],
                init_statuses=[{"name": "proxy", "started": True, "ready": True, "state": RUNNING}],
                statuses=[{"ready": True, "state": RUNNING}],
                conditions=[{"type": "Initialized", "status": "True"}],
            ),
            "2/2",
            "Running",
            "0",
        ),
        (  # one container completed, another still running: Running (or NotReady)
            pod(
                containers=2,
                statuses=[
                    {"ready": True, "state": RUNNING},
                    {"state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                ],
                conditions=[{"type": "Ready", "status": "True"}],
            ),
            "1/2",
            "Running",
            "0",
        ),
        (
            pod(
                containers=2,
                statuses=[
                    {"ready": True, "state": RUNNING},
                    {"state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                ],
            ),
            "1/2",
            "NotReady",
            "0",
        ),
    ],
)
def test_pod_ready_status_and_restarts(
    obj: dict[str, Any], ready: str, status: str, restarts: str
) -> None:
    assert cells("Pod", "", obj)[1:4] == [ready, status, restarts]


@pytest.mark.parametrize(
    ("phase", "reason", "expected"),
    [
        ("Running", "", "Terminating"),
        ("Succeeded", "", "Succeeded"),
        ("Running", "NodeLost", "Unknown"),
    ],
)
def test_pod_being_deleted(phase: str, reason: str, expected: str) -> None:
    obj = pod(phase=phase, reason=reason)
    obj["metadata"]["deletionTimestamp"] = "2024-01-10T11:59:00Z"
    assert cells("Pod", "", obj)[2] == expected


def test_pod_wide_columns() -> None:
    obj = pod(podIPs=[{"ip": "10.0.0.7"}, {"ip": "fd00::7"}], nominatedNodeName="n2")
    obj["spec"]["nodeName"] = "n1"
    obj["spec"]["readinessGates"] = [{"conditionType": "a"}, {"conditionType": "b"}]
    obj["status"]["conditions"] = [
        {"type": "a", "status": "True"},
        {"type": "b", "status": "False"},
    ]
    assert cells("Pod", "", obj) == [
        "web",
        "0/1",
        "Running",
        "0",
        "3m12s",
        "10.0.0.7",
        "n1",
        "n2",
        "1/2",
    ]
    assert cells("Pod", "", pod())[5:] == ["<none>", "<none>", "<none>", "<none>"]


@pytest.mark.parametrize(
    ("phase", "condition"),
    [
        (
            "Succeeded",
            {
                "type": "Completed",
                "status": "True",
                "reason": "Succeeded",
                "message": "The pod has completed successfully.",
            },
        ),
        (
            "Failed",
            {
                "type": "Completed",
                "status": "True",
                "reason": "Failed",
                "message": "The pod failed.",
            },
        ),
    ],
)
def test_finished_pods_carry_a_completed_row_condition(
    phase: str, condition: dict[str, str]
) -> None:
    row = table("Pod", "", pod(phase=phase))["rows"][0]
    assert row["conditions"] == [condition]
    assert "conditions" not in table("Pod", "", pod())["rows"][0]


def svc(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta("web"), "spec": spec}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (
            svc(
                type="ClusterIP",
                clusterIP="10.96.0.10",
                clusterIPs=["10.96.0.10"],
                ports=[{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
                selector={"tier": "web", "app": "x"},
            ),
            ["ClusterIP", "10.96.0.10", "<none>", "80/TCP,53/UDP", "app=x,tier=web"],
        ),
        (
            svc(
                type="NodePort",
                clusterIPs=["10.96.0.11"],
                ports=[{"port": 80, "nodePort": 30080}, {"port": 443, "nodePort": 30443}],
            ),
            ["NodePort", "10.96.0.11", "<none>", "80:30080/TCP,443:30443/TCP", "<none>"],
        ),
        (
            svc(type="LoadBalancer", clusterIPs=["10.96.0.12"], ports=[{"port": 443}]),
            ["LoadBalancer", "10.96.0.12", "<pending>", "443/TCP", "<none>"],
        ),
        (
            svc(type="ExternalName", externalName="db.example.com"),
            ["ExternalName", "<none>", "db.example.com", "<none>", "<none>"],
        ),
        (
            svc(clusterIP="None", externalIPs=["1.2.3.4", "5.6.7.8"]),
            ["ClusterIP", "None", "1.2.3.4,5.6.7.8", "<none>", "<none>"],
        ),
    ],
)
def test_service_row(obj: dict[str, Any], expected: list[str]) -> None:
    row = cells("Service", "", obj)
    assert row[0] == "web"
    assert row[5] == "3m12s"
    assert [*row[1:5], row[6]] == expected


def test_load_balancer_ingress_is_sorted_unique_and_joined_with_external_ips() -> None:
    obj = svc(type="LoadBalancer", clusterIPs=["10.0.0.1"], externalIPs=["9.9.9.9"])
    obj["status"] = {
        "loadBalancer": {
            "ingress": [{"ip": "5.5.5.5"}, {"hostname": "lb.example.com"}, {"ip": "5.5.5.5"}]
        }
    }
    assert cells("Service", "", obj)[3] == "5.5.5.5,lb.example.com,9.9.9.9"


def event_core(**fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": meta("web.17a"),
        "involvedObject": {"kind": "Pod", "name": "web", "fieldPath": "spec.containers{app}"},
        "reason": "Pulled",
        "message": "  Successfully pulled image\n",
        "type": "Normal",
        **fields,
    }


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (  # legacy kubelet event
            event_core(
                source={"component": "kubelet", "host": "n1"},
                firstTimestamp="2024-01-10T11:00:00Z",
                lastTimestamp="2024-01-10T11:59:50Z",
                count=5,
            ),
            ["10s", "60m", "kubelet, n1", 5],
        ),
        (  # new-style singleton: eventTime, no count, reporting controller
            event_core(
                eventTime="2024-01-10T11:59:00.000000Z",
                reportingComponent="ctrl",
                reportingInstance="",
            ),
            ["60s", "60s", "ctrl", 1],
        ),
        (  # series: last seen and count come from the series
            event_core(
                eventTime="2024-01-10T11:00:00.000000Z",
                series={"count": 9, "lastObservedTime": "2024-01-10T11:58:00.000000Z"},
                reportingComponent="ctrl",
                reportingInstance="ctrl-0",
            ),
            ["2m", "60m", "ctrl, ctrl-0", 9],
        ),
        (event_core(), ["<unknown>", "<unknown>", "", 1]),
    ],
)
def test_event_row(obj: dict[str, Any], expected: list[Any]) -> None:
    last, first, source, count = expected
    assert cells("Event", "", obj) == [
        last,
        "Normal",
        "Pulled",
        "pod/web",
        "spec.containers{app}",
        source,
        "Successfully pulled image",
        first,
        count,
        "web.17a",
    ]


def test_events_k8s_io_event_row_reads_the_new_field_names() -> None:
    obj = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": meta("e"),
        "eventTime": "2024-01-10T11:59:30.000000Z",
        "reportingController": "ctrl",
        "reportingInstance": "ctrl-0",
        "reason": "Synced",
        "regarding": {"kind": "Widget", "name": "w"},
        "note": "done",
        "type": "Normal",
    }
    assert cells("Event", "events.k8s.io", obj) == [
        "30s",
        "Normal",
        "Synced",
        "widget/w",
        "",
        "ctrl, ctrl-0",
        "done",
        "30s",
        1,
        "e",
    ]
    row = table("Event", "events.k8s.io", obj, include_object="Object")["rows"][0]
    assert row["object"] == obj  # the row carries the object as requested, unconverted


def test_event_about_a_kind_without_name() -> None:
    obj = event_core(involvedObject={"kind": "Node"})
    assert cells("Event", "", obj)[3] == "node"


def deployment(**spec: Any) -> dict[str, Any]:
    template = {
        "spec": {
            "containers": [{"name": "app", "image": "nginx:1"}, {"name": "log", "image": "busybox"}]
        }
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta("web"),
        "spec": {"template": template, **spec},
        "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 1},
    }


@pytest.mark.parametrize(
    ("spec", "ready", "selector"),
    [
        ({"replicas": 3, "selector": {"matchLabels": {"app": "web"}}}, "2/3", "app=web"),
        (
            {
                "replicas": 0,
                "selector": {
                    "matchLabels": {"app": "web"},
                    "matchExpressions": [
                        {"key": "env", "operator": "In", "values": ["prod", "dev"]},
                        {"key": "canary", "operator": "DoesNotExist"},
                    ],
                },
            },
            "2/0",
            "app=web,!canary,env in (dev,prod)",
        ),
        ({}, "2/1", ""),  # replicas defaults to 1
        (
            {"selector": {"matchExpressions": [{"key": "a", "operator": "Bogus"}]}},
            "2/1",
            "<invalid>",
        ),
    ],
)
def test_deployment_row(spec: dict[str, Any], ready: str, selector: str) -> None:
    assert cells("Deployment", "apps", deployment(**spec)) == [
        "web",
        ready,
        3,
        1,
        "3m12s",
        "app,log",
        "nginx:1,busybox",
        selector,
    ]


@pytest.mark.parametrize(
    ("spec", "desired", "selector"),
    [
        (
            {"replicas": 4, "selector": {"matchLabels": {"app": "web", "hash": "abc"}}},
            4,
            "app=web,hash=abc",
        ),
        ({}, 1, "<none>"),
    ],
)
def test_replicaset_row(spec: dict[str, Any], desired: int, selector: str) -> None:
    rs = {
        "metadata": meta("web-abc"),
        "spec": {
            "template": {"spec": {"containers": [{"name": "app", "image": "nginx:1"}]}},
            **spec,
        },
        "status": {"replicas": 3, "readyReplicas": 2},
    }
    assert cells("ReplicaSet", "apps", rs) == [
        "web-abc",
        desired,
        3,
        2,
        "3m12s",
        "app",
        "nginx:1",
        selector,
    ]


@pytest.mark.parametrize(
    ("spec", "status", "expected"),
    [
        ({}, {}, ["<none>", "*", "", "80"]),
        (
            {"ingressClassName": "nginx", "rules": [{"host": "a.example.com"}, {}], "tls": [{}]},
            {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}, {"hostname": "lb"}]}},
            ["nginx", "a.example.com", "1.2.3.4,lb", "80, 443"],
        ),
        (
            {"rules": [{"host": h} for h in ("a", "b", "c", "d", "e")]},
            {},
            ["<none>", "a,b,c + 2 more...", "", "80"],
        ),
    ],
)
def test_ingress_row(spec: dict[str, Any], status: dict[str, Any], expected: list[str]) -> None:
    ing = {"metadata": meta("web"), "spec": spec, "status": status}
    assert cells("Ingress", "networking.k8s.io", ing) == ["web", *expected, "3m12s"]


@pytest.mark.parametrize(
    ("labels", "conditions", "unschedulable", "status", "roles"),
    [
        ({}, [{"type": "Ready", "status": "True"}], False, "Ready", "<none>"),
        (
            {"node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "master"},
            [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "False"}],
            True,
            "NotReady,SchedulingDisabled",
            "control-plane,master",
        ),
        ({"node-role.kubernetes.io/": ""}, [], False, "Unknown", "<none>"),
    ],
)
def test_node_row(
    labels: dict[str, str],
    conditions: list[dict[str, str]],
    unschedulable: bool,
    status: str,
    roles: str,
) -> None:
    node = {
        "metadata": {"name": "n1", "creationTimestamp": CREATED, "labels": labels},
        "spec": {"unschedulable": unschedulable},
        "status": {
            "conditions": conditions,
            "nodeInfo": {"kubeletVersion": "v1.31.0", "osImage": "Debian"},
            "addresses": [
                {"type": "Hostname", "address": "n1"},
                {"type": "InternalIP", "address": "172.18.0.2"},
            ],
        },
    }
    assert cells("Node", "", node) == [
        "n1",
        status,
        roles,
        "3m12s",
        "v1.31.0",
        "172.18.0.2",
        "<none>",
        "Debian",
        "<unknown>",
        "<unknown>",
    ]


def test_missing_creation_timestamp_ages_as_unknown() -> None:
    assert cells("ConfigMap", "", {"metadata": {"name": "a"}}) == ["a", 0, "<unknown>"]


# --- custom resources ------------------------------------------------------------------

WIDGET = {
    "apiVersion": "example.com/v1",
    "kind": "Widget",
    "metadata": meta("w1"),
    "spec": {
        "replicas": 3,
        "ratio": 0.25,
        "big": 1000000.0,
        "paused": False,
        "ports": [{"port": 80}, {"port": 443}],
        "labels": {"b": "2", "a": "<1>"},
        "empty": None,
    },
    "status": {
        "conditions": [
            {"type": "Synced", "status": "False"},
            {"type": "Ready", "status": "True", "lastTransitionTime": "2024-01-10T11:00:00Z"},
        ],
        "phase": "Running",
    },
}


def crd_col(name: str, type_: str, path: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, "jsonPath": path, **extra}


def test_custom_resource_without_printer_columns_prints_name_and_age() -> None:
    no_columns: list[dict[str, Any]] = []
    for crd_columns in (None, no_columns):
        t = table("Widget", "example.com", WIDGET, crd_columns=crd_columns)
        assert columns(t) == [NAME, AGE]
        assert t["columnDefinitions"][1]["type"] == "date"
        assert t["rows"][0]["cells"] == ["w1", "3m12s"]


@pytest.mark.parametrize(
    ("col", "expected"),
    [
        (crd_col("Replicas", "integer", ".spec.replicas"), 3),
        (crd_col("Replicas", "string", ".spec.replicas"), "3"),
        (crd_col("Replicas", "number", ".spec.replicas"), 3.0),
        (crd_col("Ratio", "integer", ".spec.ratio"), 0),
        (crd_col("Ratio", "string", ".spec.ratio"), "0.25"),
        (crd_col("Big", "string", ".spec.big"), "1e+06"),
        (crd_col("Paused", "boolean", ".spec.paused"), False),
        (crd_col("Paused", "string", ".spec.paused"), "false"),
        (crd_col("Paused", "integer", ".spec.paused"), None),
        (crd_col("Phase", "string", ".status.phase"), "Running"),
        (crd_col("Phase", "integer", ".status.phase"), None),
        (crd_col("Missing", "string", ".status.nothing"), None),
        (crd_col("Null", "string", ".spec.empty"), "<no value>"),
        (crd_col("Ports", "string", ".spec.ports"), '[{"port":80},{"port":443}]'),
        (crd_col("Labels", "string", ".spec.labels"), '{"a":"\\u003c1\\u003e","b":"2"}'),
        (crd_col("First", "integer", ".spec.ports[*].port"), 80),  # kube prints the first match
        (crd_col("Last", "integer", ".spec.ports[-1].port"), 443),
        (crd_col("Out", "integer", ".spec.ports[5].port"), None),
        (
            crd_col("Ready", "string", '.status.conditions[?(@.type=="Ready")].status'),
            "True",
        ),
        (
            crd_col("Since", "date", '.status.conditions[?(@.type=="Ready")].lastTransitionTime'),
            "60m",
        ),
        (crd_col("Age", "date", ".metadata.creationTimestamp"), "3m12s"),
        (crd_col("Bad", "date", ".status.phase"), "<invalid>"),
        (crd_col("Unparsed", "string", ".spec..replicas"), None),
    ],
)
def test_printer_column_cells(col: dict[str, Any], expected: Any) -> None:
    row = cells("Widget", "example.com", WIDGET, crd_columns=[col])
    assert row[0] == "w1"
    assert row[1] == expected
    assert type(row[1]) is type(expected)


def test_printer_column_definitions() -> None:
    t = table(
        "Widget",
        "example.com",
        WIDGET,
        crd_columns=[
            crd_col("Replicas", "integer", ".spec.replicas", description="How many"),
            crd_col("Ratio", "number", ".spec.ratio", priority=1, format="float"),
            crd_col("Age", "date", ".metadata.creationTimestamp"),
        ],
    )
    assert t["columnDefinitions"][1:] == [
        {
            "name": "Replicas",
            "type": "integer",
            "format": "",
            "description": "How many",
            "priority": 0,
        },
        {
            "name": "Ratio",
            "type": "number",
            "format": "float",
            "description": "Custom resource definition column (in JSONPath format): .spec.ratio",
            "priority": 1,
        },
        {
            "name": "Age",
            "type": "date",
            "format": "",
            "description": "Custom resource definition column (in JSONPath format): "
            ".metadata.creationTimestamp",
            "priority": 0,
        },
    ]
    assert t["rows"][0]["cells"] == ["w1", 3, 0.25, "3m12s"]


# --- JSONPath --------------------------------------------------------------------------

DOC: dict[str, Any] = {
    "a": {"b": 1, "c.d": 2, "list": [{"n": "x", "v": 1}, {"n": "y", "v": 2}, {"n": "z"}]},
    "flag": True,
}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (".a.b", [1]),
        ("{.a.b}", [1]),
        ("$.a.b", [1]),
        (".a['c.d']", [2]),
        ('.a["c.d"]', [2]),
        (".a.list[0].n", ["x"]),
        (".a.list[-1].n", ["z"]),
        (".a.list[3].n", []),
        (".a.list[*].n", ["x", "y", "z"]),
        (".a.list[*].v", [1, 2]),
        (".a.list.n", []),  # a field of a list selects nothing
        (".a.missing.deeper", []),
        (".a.b.c", []),
        ('.a.list[?(@.n=="y")].v', [2]),
        (".a.list[?(@.n=='y')].v", [2]),
        ('.a.list[?(@.n == "y")].v', [2]),
        ('.a.list[?(@.n!="y")].n', ["x", "z"]),
        (".a.list[?(@.v==2)].n", ["y"]),
        (".a.list[?(@.v)].n", ["x", "y"]),
        (".flag", [True]),
        (".a.*", [1, 2, DOC["a"]["list"]]),
        (".", [DOC]),
        ("", [DOC]),
    ],
)
def test_jsonpath_find(path: str, expected: list[Any]) -> None:
    assert jsonpath_find(DOC, path) == expected


@pytest.mark.parametrize("path", [".a..b", ".a[1:2]", ".a[", ".a.list[?(@.v>1)]", "a.b"])
def test_jsonpath_outside_the_subset_is_an_error(path: str) -> None:
    with pytest.raises(JsonPathError):
        jsonpath_find(DOC, path)


# --- the other built-in kinds ------------------------------------------------------------


def test_job_row_status_completions_and_duration() -> None:
    job = {
        "metadata": meta("batch"),
        "spec": {
            "completions": 3,
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u"}},
            "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
        },
        "status": {
            "succeeded": 3,
            "startTime": "2024-01-10T11:57:00Z",
            "completionTime": "2024-01-10T11:57:42Z",
            "conditions": [{"type": "Complete", "status": "True"}],
        },
    }
    assert cells("Job", "batch", job) == [
        "batch",
        "Complete",
        "3/3",
        "42s",
        "3m12s",
        "c",
        "busybox",
        "batch.kubernetes.io/controller-uid=u",
    ]
    suspended = {"metadata": meta("s"), "spec": {"suspend": True, "completions": 1}}
    assert cells("Job", "batch", suspended)[1:4] == ["Suspended", "0/1", ""]


def test_cronjob_and_pdb_rows() -> None:
    cj = {
        "metadata": meta("nightly"),
        "spec": {"schedule": "0 3 * * *", "suspend": False, "jobTemplate": {"spec": {}}},
        "status": {"active": [{"name": "j"}]},
    }
    assert cells("CronJob", "batch", cj)[:7] == [
        "nightly",
        "0 3 * * *",
        "<none>",
        "False",
        1,
        "<none>",
        "3m12s",
    ]
    pdb = {
        "metadata": meta("guard"),
        "spec": {"maxUnavailable": "25%"},
        "status": {"disruptionsAllowed": 2},
    }
    assert cells("PodDisruptionBudget", "policy", pdb) == ["guard", "N/A", "25%", 2, "3m12s"]


def test_binding_and_apiservice_rows() -> None:
    rb = {
        "metadata": meta("rb"),
        "roleRef": {"kind": "ClusterRole", "name": "view"},
        "subjects": [
            {"kind": "User", "name": "ann"},
            {"kind": "ServiceAccount", "name": "sa", "namespace": "ns"},
        ],
    }
    assert cells("RoleBinding", "rbac.authorization.k8s.io", rb) == [
        "rb",
        "ClusterRole/view",
        "3m12s",
        "ann",
        "",
        "ns/sa",
    ]
    svc = {
        "metadata": meta("v1.example.com"),
        "spec": {"service": {"namespace": "ns", "name": "api"}},
        "status": {
            "conditions": [{"type": "Available", "status": "False", "reason": "ServiceNotFound"}]
        },
    }
    assert cells("APIService", "apiregistration.k8s.io", svc) == [
        "v1.example.com",
        "ns/api",
        "False (ServiceNotFound)",
        "3m12s",
    ]


def test_resource_quota_cells_read_status_and_count_what_is_unused_as_zero() -> None:
    quota = {
        "metadata": meta("q"),
        "status": {
            "hard": {"pods": "10", "limits.cpu": "2", "requests.memory": "1Gi", "limitsx": "1"},
            "used": {"pods": "3", "limits.cpu": "500m"},
        },
    }
    (row,) = table("ResourceQuota", "", quota)["rows"]
    assert row["cells"] == [
        "q",
        "limitsx: 0/1, pods: 3/10, requests.memory: 0/1Gi",
        "limits.cpu: 500m/2",
        "3m12s",
    ]
    (fresh,) = table("ResourceQuota", "", {"metadata": meta("new")})["rows"]
    assert fresh["cells"] == ["new", "", "", "3m12s"]

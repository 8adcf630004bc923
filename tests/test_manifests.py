"""The install (``deploy/``), checked without a cluster.

What ``kubectl apply -k deploy/`` (and the dev overlay) would create is rendered with
``kubectl kustomize`` when kubectl is on PATH, else with :func:`render_fallback`, a small
renderer of the kustomize features ``deploy/`` uses. Then:

* every object is well formed; namespaced ones land in ``overseer-system``;
* the pods meet the Pod Security Standard "restricted", rule by rule;
* probes, ports and the shutdown grace period agree with the configuration in the
  ConfigMap, and that configuration passes ``python -m manager config validate``;
* the base runs 3 spread replicas under a PodDisruptionBudget;
* the webhooks overlay: the Service overseer-webhook reaches the container port the
  webhook server listens on, managed certificates for that Service's names, and through
  a drain at least two endpoints;
* RBAC, in three ways: (a) the framework's own requests (Lease, Events), recorded by a
  local API server while a leader elector and an event recorder run, are granted by the
  Role; (b) every rule in each built-in controller's ``rbac_rules`` (the plugin
  contract) is granted by the ClusterRole, and nothing else is; (c) every (verb,
  resource) a manager running the built-in controllers with leader election actually
  requested during a scripted scenario is granted. (b) and (c) need the controllers
  (``controllers.exposer``, ``controllers.podport``): they skip with that reason while a
  controller cannot be imported. And ``deploy/base/rbac.yaml`` is exactly what
  ``overseer rbac --config deploy/config/overseer.yaml`` prints for the built-in
  controllers: ``python -m tests.test_manifests`` writes it again.

The Dockerfile cannot be built here (no docker engine): its structure is checked by
reading it.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
NAMESPACE = "overseer-system"
BASE, DEV, SHARDED = "deploy", "deploy/overlays/dev", "deploy/overlays/sharded"
WEBHOOKS = "deploy/overlays/webhooks"
FLEET = "deploy/overlays/fleet"
CONFIG_PATH = "/etc/overseer/overseer.yaml"
BUILTIN_DISTRIBUTION = "kube-overseer"  # the built-in controllers' distribution (the image's)
BUILTIN_CONTROLLERS = ("exposer", "podport")
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")

Obj = dict[str, Any]


# -- rendering ------------------------------------------------------------------------


def render_kubectl(path: str) -> list[Obj]:
    """``kubectl kustomize PATH``, decoded."""
    out = subprocess.run(
        ["kubectl", "kustomize", str(ROOT / path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def _json_patch(doc: Obj, ops: list[Obj]) -> None:
    """RFC 6902 ``add``/``replace``/``remove`` (what the overlays use)."""
    for op in ops:
        *parents, last = [
            p.replace("~1", "/").replace("~0", "~") for p in op["path"][1:].split("/")
        ]
        target: Any = doc
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        key: Any = int(last) if isinstance(target, list) and last != "-" else last
        if op["op"] == "remove":
            del target[key]
        elif op["op"] in ("add", "replace"):
            if isinstance(target, list) and op["op"] == "add":
                target.insert(len(target) if key == "-" else key, op["value"])
            else:
                target[key] = op["value"]
        else:
            raise NotImplementedError(f"fallback renderer: JSON patch op {op['op']!r}")


def render_fallback(path: str | Path) -> list[Obj]:
    """Render a kustomization without kubectl: the features ``deploy/`` uses (resources,
    namespace, configMapGenerator from files, images, JSON 6902 patches). Generated
    ConfigMaps keep their plain name (kustomize appends a content hash)."""
    here = ROOT / path
    k = yaml.safe_load((here / "kustomization.yaml").read_text())
    known = {"apiVersion", "kind", "namespace", "resources", "configMapGenerator", "images"}
    unknown = set(k) - known - {"patches"}
    assert not unknown, f"fallback renderer: unsupported kustomization fields {unknown}"
    objs: list[Obj] = []
    for res in k.get("resources", []):
        p = (here / res).resolve()
        if p.is_dir():
            objs.extend(render_fallback(p.relative_to(ROOT)))
        else:
            objs.extend(d for d in yaml.safe_load_all(p.read_text()) if d)
    for gen in k.get("configMapGenerator", []):
        data = {}
        for entry in gen.get("files", []):
            key, _, src = entry.partition("=") if "=" in entry else (Path(entry).name, "", entry)
            data[key] = (here / src).read_text()
        meta: Obj = {"name": gen["name"]}
        labels = (gen.get("options") or {}).get("labels")
        if labels:
            meta["labels"] = dict(labels)
        objs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data})
    namespace = k.get("namespace")
    if namespace:
        for o in objs:
            if o["kind"] not in CLUSTER_SCOPED:
                o["metadata"]["namespace"] = namespace
            for s in o.get("subjects") or []:
                if s.get("kind") == "ServiceAccount":
                    s["namespace"] = namespace
    for image in k.get("images", []):
        for o in objs:
            for c in _containers(o):
                if c["image"].split(":")[0] == image["name"]:
                    c["image"] = f"{image.get('newName', image['name'])}:{image['newTag']}"
    for patch in k.get("patches", []):
        target = patch["target"]
        for o in objs:
            if o["kind"] == target["kind"] and o["metadata"]["name"] == target["name"]:
                _json_patch(o, yaml.safe_load(patch["patch"]))
    return objs


@cache
def _rendered(path: str, how: str) -> tuple[Obj, ...]:
    return tuple(render_kubectl(path) if how == "kubectl" else render_fallback(path))


def rendered(path: str) -> list[Obj]:
    """The objects ``path`` renders to (a fresh copy), by kubectl if present."""
    how = "kubectl" if shutil.which("kubectl") else "fallback"
    return copy.deepcopy(list(_rendered(path, how)))


def _containers(obj: Obj) -> list[Obj]:
    spec = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    return [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]


def one(objs: list[Obj], kind: str, name: str | None = None) -> Obj:
    found = [
        o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def deployment(objs: list[Obj]) -> Obj:
    return one(objs, "Deployment", "overseer")


def config_of(objs: list[Obj]) -> tuple[str, Obj]:
    """The configuration file the Deployment mounts (text, decoded), via its volume."""
    dep = deployment(objs)
    pod = dep["spec"]["template"]["spec"]
    container = pod["containers"][0]
    args = container.get("args") or []
    assert "--config" in args, args
    path = Path(args[args.index("--config") + 1])
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == str(path.parent))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    cm = one(objs, "ConfigMap", volume["configMap"]["name"])
    text = cm["data"][path.name]
    return text, yaml.safe_load(text)


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


@pytest.fixture(
    params=[BASE, DEV, SHARDED, WEBHOOKS, FLEET],
    ids=["base", "dev", "sharded", "webhooks", "fleet"],
)
def install(request: pytest.FixtureRequest) -> tuple[str, list[Obj]]:
    return request.param, rendered(request.param)


# -- well formed ----------------------------------------------------------------------


def test_every_object_is_identified_and_in_the_namespace(install: tuple[str, list[Obj]]) -> None:
    _, objs = install
    kinds = {o["kind"] for o in objs}
    assert {
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "CustomResourceDefinition",
        "ConfigMap",
        "Deployment",
        "PodDisruptionBudget",
        "Service",
    } <= kinds
    for o in objs:
        assert o.get("apiVersion") and o.get("kind"), o
        assert (o.get("metadata") or {}).get("name"), o
        ns = o["metadata"].get("namespace")
        if o["kind"] in CLUSTER_SCOPED:
            assert ns is None, f"{o['kind']}/{o['metadata']['name']} is cluster-scoped"
        else:
            assert ns == NAMESPACE, f"{o['kind']}/{o['metadata']['name']} in {ns!r}"
    assert one(objs, "Namespace")["metadata"]["name"] == NAMESPACE
    crd = one(objs, "CustomResourceDefinition")
    assert crd["metadata"]["name"] == "logicalports.network.overseer.io"


@pytest.mark.skipif(
    shutil.which("kubectl") is None,
    reason="kubectl is not installed: cannot compare with `kubectl kustomize`",
)
def test_kubectl_renders_what_the_fallback_renders(install: tuple[str, list[Obj]]) -> None:
    """kubectl-specific: the fallback renderer (used without kubectl) agrees with
    ``kubectl kustomize`` except for the ConfigMap's content hash suffix."""
    path, _ = install
    from_kubectl = render_kubectl(path)
    cm = one(from_kubectl, "ConfigMap")
    hashed = cm["metadata"]["name"]
    assert re.fullmatch(r"overseer-config-[a-z0-9]{10}", hashed), hashed
    text = yaml.safe_dump_all(from_kubectl, sort_keys=True).replace(hashed, "overseer-config")

    def key(o: Obj) -> tuple[str, str]:
        return (o["kind"], o["metadata"]["name"])

    assert sorted(yaml.safe_load_all(text), key=key) == sorted(render_fallback(path), key=key)


# -- pod security ---------------------------------------------------------------------

# Pod Security Standards, "restricted" profile (which includes "baseline"), v1.32:
# https://kubernetes.io/docs/concepts/security/pod-security-standards/
RESTRICTED_VOLUME_TYPES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}


def test_pods_meet_the_restricted_pod_security_standard(install: tuple[str, list[Obj]]) -> None:
    _, objs = install
    pod = deployment(objs)["spec"]["template"]["spec"]
    psc = pod.get("securityContext") or {}
    containers = _containers(deployment(objs))
    assert containers
    # baseline: host namespaces
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        assert not pod.get(field), field
    # baseline: sysctls only from the safe set (we set none)
    assert not psc.get("sysctls")
    # restricted: volume types
    for v in pod.get("volumes") or []:
        types = set(v) - {"name"}
        assert types <= RESTRICTED_VOLUME_TYPES, f"volume {v['name']}: {types}"
    # restricted: non-root, seccomp, at pod level (containers may only tighten)
    assert psc.get("runAsNonRoot") is True
    assert psc.get("runAsUser") == 65532
    assert (psc.get("seccompProfile") or {}).get("type") == "RuntimeDefault"
    for c in containers:
        sc = c.get("securityContext") or {}
        where = f"container {c['name']}"
        # baseline: not privileged, no host ports, default /proc, no unconfined profiles
        assert sc.get("privileged") in (None, False), where
        assert all(not p.get("hostPort") for p in c.get("ports") or []), where
        assert sc.get("procMount", "Default") == "Default", where
        assert (sc.get("appArmorProfile") or {}).get("type") != "Unconfined", where
        assert not (sc.get("seLinuxOptions") or {}).get("user"), where
        # restricted: no privilege escalation
        assert sc.get("allowPrivilegeEscalation") is False, where
        # restricted: runAsNonRoot not overridden to false; runAsUser not 0
        assert sc.get("runAsNonRoot", psc.get("runAsNonRoot")) is True, where
        assert sc.get("runAsUser", psc.get("runAsUser")) not in (None, 0), where
        # restricted: seccomp RuntimeDefault or Localhost, never Unconfined
        seccomp = (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type")
        assert seccomp in ("RuntimeDefault", "Localhost"), where
        # restricted: drop ALL; add at most NET_BIND_SERVICE (we add nothing)
        caps = sc.get("capabilities") or {}
        assert "ALL" in (caps.get("drop") or []), where
        assert not caps.get("add"), where
        # ours (DESIGN.md §7): read-only root filesystem
        assert sc.get("readOnlyRootFilesystem") is True, where
    # the namespace enforces the profile the pods meet
    labels = one(objs, "Namespace")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"


# -- probes, ports, configuration ------------------------------------------------------


def test_probes_and_ports_match_the_configuration(install: tuple[str, list[Obj]]) -> None:
    _, objs = install
    _, config = config_of(objs)
    health = _port(config["healthProbeBindAddress"])
    metrics = _port(config["metricsBindAddress"])
    container = deployment(objs)["spec"]["template"]["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}

    def probe_port(probe: Obj) -> int:
        port = probe["httpGet"]["port"]
        return ports[port] if isinstance(port, str) else int(port)

    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert probe_port(container["livenessProbe"]) == health
    assert probe_port(container["readinessProbe"]) == health
    assert ports["metrics"] == metrics
    svc = one(objs, "Service", "overseer-metrics")
    (svc_port,) = svc["spec"]["ports"]
    assert svc_port["targetPort"] in ("metrics", metrics)
    pod_labels = deployment(objs)["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    resources = container["resources"]
    assert resources["requests"]["cpu"] and resources["requests"]["memory"]
    assert resources["limits"]["memory"]


def test_downward_api_and_command(install: tuple[str, list[Obj]]) -> None:
    _, objs = install
    dep = deployment(objs)
    container = dep["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}) for e in container["env"]}
    assert env["POD_NAME"]["fieldPath"] == "metadata.name"
    assert env["POD_NAMESPACE"]["fieldPath"] == "metadata.namespace"
    assert container["args"] == ["run", "--config", CONFIG_PATH]
    assert container["image"] == "overseer:dev"
    assert container.get("imagePullPolicy") == "IfNotPresent"  # kind-loaded image
    assert dep["spec"]["template"]["spec"]["serviceAccountName"] == "overseer"


def test_termination_grace_exceeds_graceful_shutdown(install: tuple[str, list[Obj]]) -> None:
    """SIGTERM → in-flight reconciles finish (gracefulShutdownTimeout) → Lease released →
    exit 0; the kubelet's SIGKILL must come later, with margin for the release."""
    _, objs = install
    _, config = config_of(objs)
    from manager.config import OverseerConfig

    timeout = config.get("gracefulShutdownTimeout", OverseerConfig().graceful_shutdown_timeout)
    grace = deployment(objs)["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    retry = config["leaderElection"]["retryPeriod"]
    assert grace > timeout + 2 * retry, (grace, timeout)


def test_configmap_config_passes_overseer_config_validate(
    install: tuple[str, list[Obj]], tmp_path: Path
) -> None:
    _, objs = install
    text, config = config_of(objs)
    path = tmp_path / "overseer.yaml"
    path.write_text(text)
    result = subprocess.run(
        [sys.executable, "-m", "manager", "config", "validate", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{path}: valid"
    # the image has only the built-in controllers: the file must not need others
    assert set(config.get("controllers") or {}) <= set(BUILTIN_CONTROLLERS)
    # the Lease lives in the pod's namespace, where the Role grants it
    assert config["leaderElection"].get("namespace", "") in ("", NAMESPACE)
    assert config["leaderElection"].get("enabled", True) is True


def test_base_runs_three_spread_replicas_under_a_pdb() -> None:
    objs = rendered(BASE)
    dep = deployment(objs)
    replicas = dep["spec"]["replicas"]
    assert replicas == 3
    pod = dep["spec"]["template"]["spec"]
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    spread = [
        c
        for c in pod.get("topologySpreadConstraints") or []
        if c["topologyKey"] == "kubernetes.io/hostname"
        and c["whenUnsatisfiable"] == "DoNotSchedule"
        and c["maxSkew"] == 1
    ]
    required_anti = [
        t
        for t in ((pod.get("affinity") or {}).get("podAntiAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or []
        if t["topologyKey"] == "kubernetes.io/hostname"
    ]
    assert spread or required_anti, "replicas are not spread across nodes"
    for c in spread:
        assert c["labelSelector"]["matchLabels"].items() <= pod_labels.items()
    pdb = one(objs, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    if "maxUnavailable" in pdb["spec"]:
        assert pdb["spec"]["maxUnavailable"] == 1
    else:
        assert pdb["spec"]["minAvailable"] == replicas - 1
    # a rollout never takes a replica away before its successor is Ready
    assert dep["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


def test_the_webhooks_overlay_serves_every_replica_behind_its_service() -> None:
    objs = rendered(WEBHOOKS)
    _, config = config_of(objs)
    webhooks = config["webhooks"]
    assert webhooks["certificates"] == "managed"
    dep = deployment(objs)
    container = dep["spec"]["template"]["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["webhook"] == webhooks["port"] == 9443
    svc = one(objs, "Service", webhooks["service"])
    (port,) = svc["spec"]["ports"]
    assert port["port"] == 443  # what `overseer webhooks` has the configurations call
    assert port["targetPort"] in ("webhook", ports["webhook"])
    assert svc["spec"]["selector"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    # the Secret and the Service live with the pods (webhooks.namespace: the pod's)
    assert webhooks.get("namespace", "") in ("", NAMESPACE)
    assert svc["metadata"]["namespace"] == NAMESPACE
    # an endpoint only when ready, and /readyz waits for the webhook server
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    # a drain never leaves API servers without an endpoint: two of three stay
    replicas = dep["spec"]["replicas"]
    pdb = one(objs, "PodDisruptionBudget")
    left = (
        replicas - pdb["spec"]["maxUnavailable"]
        if "maxUnavailable" in pdb["spec"]
        else (pdb["spec"]["minAvailable"])
    )
    assert replicas == 3 and left >= 2
    assert dep["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    # nothing declared by the built-in controllers: the RBAC is base's (a plugin's image
    # prints its own with `overseer rbac`)
    assert (
        builtin_rbac(DEPLOY / "overlays" / "webhooks" / "overseer.yaml")
        == (DEPLOY / "base" / "rbac.yaml").read_text()
    )


def test_dev_overlay_runs_one_replica_that_can_be_drained() -> None:
    objs = rendered(DEV)
    assert deployment(objs)["spec"]["replicas"] == 1
    pdb = one(objs, "PodDisruptionBudget")
    assert pdb["spec"].get("maxUnavailable", 0) >= 1 or pdb["spec"].get("minAvailable") == 0


# -- RBAC -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Grant:
    group: str
    resource: str  # plural, or plural/subresource
    verb: str


def grants(rules: list[Obj]) -> set[Grant]:
    out = set()
    for rule in rules:
        assert "*" not in rule.get("verbs", []) and "*" not in rule.get("resources", []), rule
        assert not rule.get("resourceNames"), rule
        for g in rule.get("apiGroups", []):
            for r in rule.get("resources", []):
                for v in rule.get("verbs", []):
                    out.add(Grant(g, r, v))
    return out


def bound_grants(objs: list[Obj], kind: str) -> set[Grant]:
    """What the ServiceAccount the Deployment runs as gets from ``kind`` (ClusterRole or
    Role), through bindings that name it."""
    account = deployment(objs)["spec"]["template"]["spec"]["serviceAccountName"]
    binding_kind = "ClusterRoleBinding" if kind == "ClusterRole" else "RoleBinding"
    out: set[Grant] = set()
    for b in objs:
        if b["kind"] != binding_kind or b["roleRef"]["kind"] != kind:
            continue
        if not any(
            s["kind"] == "ServiceAccount" and s["name"] == account and s["namespace"] == NAMESPACE
            for s in b["subjects"]
        ):
            continue
        role = one(objs, kind, b["roleRef"]["name"])
        if kind == "Role":
            assert role["metadata"]["namespace"] == b["metadata"]["namespace"] == NAMESPACE
        out |= grants(role["rules"])
    return out


def test_rbac_grants_no_secrets_and_no_wildcards() -> None:
    objs = rendered(BASE)
    everything = bound_grants(objs, "ClusterRole") | bound_grants(objs, "Role")
    assert everything
    assert not [g for g in everything if g.resource == "secrets"]
    # Leases only in the manager's namespace (DESIGN.md §7)
    assert not [g for g in bound_grants(objs, "ClusterRole") if g.resource == "leases"]


def _requested(server: Any) -> set[Grant]:
    """(group, resource, verb) of every request the local API server served; a
    subresource is named ``resource/subresource`` as RBAC names it."""
    out = set()
    for (verb, group, plural, sub), count in server.requests().items():
        if count:
            out.add(Grant(group, f"{plural}/{sub}" if sub else plural, verb))
    return out


def _wait(what: str, cond: Callable[[], Any], timeout: float = 20.0) -> Any:
    from manager.testing import eventually

    return eventually(cond, timeout=timeout, what=what, interval=0.02)


def test_role_grants_what_the_framework_requests() -> None:
    """(a) Leader election (acquire, renew, release) and the event recorder (an Event,
    then its repeat) against a local API server; every request they made is granted by
    the Role in the manager's namespace, where the Lease lives."""
    from manager.client import KubeClient
    from manager.events import EventBroadcaster
    from manager.leaderelection import LeaderElectionConfig, LeaderElector
    from manager.testing import LocalApiServer

    objs = rendered(BASE)
    role = bound_grants(objs, "Role")
    with LocalApiServer() as server, KubeClient.from_kubeconfig(str(server.kubeconfig_path)) as c:
        server.create("v1", "namespaces", {"metadata": {"name": NAMESPACE}})
        cm = server.create(
            "v1", "configmaps", {"metadata": {"name": "subject"}}, namespace=NAMESPACE
        )
        leading = threading.Event()
        elector = LeaderElector(
            c,
            LeaderElectionConfig(
                lease_name="overseer-leader",
                namespace=NAMESPACE,
                identity="overseer-0_test",
                lease_duration=2.0,
                renew_deadline=1.5,
                retry_period=0.1,
            ),
            on_started_leading=leading.set,
        )
        stop = threading.Event()
        thread = threading.Thread(target=elector.run, args=(stop,), name="test-elector")
        thread.start()
        events = EventBroadcaster(c, component="overseer")
        events_stop = threading.Event()
        events.start(events_stop)
        try:
            assert leading.wait(10)
            before = server.request_count("update", "leases")
            _wait("a renewal", lambda: server.request_count("update", "leases") > before)
            recorder = events.recorder()
            for _ in range(2):  # the repeat is a PATCH of the first Event's count
                recorder.event(cm, "Normal", "Checked", "checked by the manifest test")
                assert events.flush(10)
        finally:
            stop.set()
            thread.join(10)
            events_stop.set()
            events.shutdown(5)
        holder = server.rest.get(
            server.resource("coordination.k8s.io/v1", "leases"), NAMESPACE, "overseer-leader"
        )["spec"].get("holderIdentity")
        assert not holder, "the elector did not release the Lease on stop"
        requested = _requested(server)
    assert {g.resource for g in requested} == {"leases", "events"}, requested
    assert {g.verb for g in requested if g.resource == "leases"} >= {"get", "create", "update"}
    assert {g.verb for g in requested if g.resource == "events"} == {"create", "patch"}
    missing = requested - role
    assert not missing, f"the Role lacks what the framework requested: {sorted(missing, key=str)}"


def _builtin_plugins() -> dict[str, Any]:
    """The built-in controller plugins (those in the image), loaded by entry point."""
    from manager.plugins import discover, load

    infos = {i.name: i for i in discover() if i.distribution == BUILTIN_DISTRIBUTION}
    assert set(infos) == set(BUILTIN_CONTROLLERS), infos
    return {name: load(info) for name, info in sorted(infos.items())}


def _deployed_controller_configs(objs: list[Obj], plugins: dict[str, Any]) -> dict[str, Any]:
    """Per controller, (settings, own config) as the ConfigMap's file configures it."""
    from manager.config import parse

    _, config = config_of(objs)
    _, controllers = parse(config, {n: p.config_class for n, p in plugins.items()})
    return controllers


def _declared_rules(name: str, plugin: Any, own_config: Any) -> list[Obj]:
    """The plugin's ``rbac_rules`` for its configuration (the plugin contract)."""
    from manager.plugins import declared_rbac_rules

    rules = declared_rbac_rules(name, plugin, own_config)
    assert rules is not None, f"{name} declares no rbac_rules"
    return list(rules)


def builtin_rbac(config_file: Path = DEPLOY / "config" / "overseer.yaml") -> str:
    """What ``overseer rbac --config <config_file>`` prints where only the built-in
    controllers are installed (in the image)."""
    from manager.config import load_config
    from manager.plugins import PluginSet
    from manager.rbac import for_controllers

    plugins = _builtin_plugins()
    found = PluginSet(plugins=plugins)
    settings, controllers, _ = load_config(yaml.safe_load(config_file.read_text()), found)
    text, silent = for_controllers(plugins, settings, controllers)
    assert not silent
    return text


SHARDED_RBAC = DEPLOY / "overlays" / "sharded" / "rbac-sharding.yaml"
SHARDED_RBAC_MARK = "# Sharded controllers"


def sharded_rbac() -> str:
    """deploy/overlays/sharded/rbac-sharding.yaml: what ``overseer rbac`` prints for the
    sharded overlay's configuration beyond base/rbac.yaml (the shard Lease Role)."""
    return _overlay_rbac("sharded", SHARDED_RBAC_MARK)


FLEET_RBAC = DEPLOY / "overlays" / "fleet" / "rbac-fleet.yaml"
FLEET_RBAC_MARK = "# What the enabled controllers do in the namespace"


def fleet_rbac() -> str:
    """deploy/overlays/fleet/rbac-fleet.yaml: what ``overseer rbac`` prints for the fleet
    overlay's configuration beyond base/rbac.yaml (the Role reading kubeconfig Secrets,
    and its binding): the documents base/rbac.yaml does not have."""
    return _overlay_rbac("fleet", FLEET_RBAC_MARK)


def _overlay_rbac(overlay: str, mark: str) -> str:
    text = builtin_rbac(DEPLOY / "overlays" / overlay / "overseer.yaml")
    base = set(builtin_rbac().split("\n---\n"))
    start = text.index(mark)
    extra = "\n---\n".join(d for d in text[start:].split("\n---\n") if d not in base)
    if not extra.endswith("\n"):
        extra += "\n"
    return (
        "# Generated: the part of `overseer rbac --config "
        f"deploy/overlays/{overlay}/overseer.yaml`\n"
        "# beyond base/rbac.yaml. Regenerate with `.venv/bin/python -m tests.test_manifests`.\n"
        "---\n" + extra
    )


def test_the_sharded_overlay_grants_what_overseer_rbac_prints_for_it() -> None:
    """base/rbac.yaml plus the overlay's rbac-sharding.yaml is exactly ``overseer rbac``
    for the overlay's configuration: the Lease Role and the shard Lease Role."""
    assert SHARDED_RBAC.read_text() == sharded_rbac(), (
        f"{SHARDED_RBAC} is stale: run `.venv/bin/python -m tests.test_manifests`"
    )
    want = [
        (o["kind"], o["metadata"]["name"], str(o.get("rules") or o.get("roleRef")))
        for o in yaml.safe_load_all(builtin_rbac(DEPLOY / "overlays" / "sharded" / "overseer.yaml"))
        if o
    ]
    rbac_kinds = {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    have = [
        (o["kind"], o["metadata"]["name"], str(o.get("rules") or o.get("roleRef")))
        for o in rendered(SHARDED)
        if o["kind"] in rbac_kinds
    ]
    assert sorted(have) == sorted(want)


def test_the_fleet_overlay_reads_kubeconfig_secrets_in_its_namespace_only() -> None:
    """The exposer runs fleet-wide with kubeconfig Secrets in the manager's namespace, and
    base/rbac.yaml plus rbac-fleet.yaml is exactly ``overseer rbac`` for that
    configuration: Secrets are read (get, list, watch) in overseer-system only, written
    nowhere."""
    assert FLEET_RBAC.read_text() == fleet_rbac(), (
        f"{FLEET_RBAC} is stale: run `.venv/bin/python -m tests.test_manifests`"
    )
    objs = rendered(FLEET)
    _, config = config_of(objs)
    assert config["controllers"]["exposer"]["fleet"] is True
    assert config["clusters"]["secrets"]["enabled"] is True
    assert config["clusters"]["secrets"].get("namespace", "") in ("", NAMESPACE)
    want = [
        (o["kind"], o["metadata"]["name"], str(o.get("rules") or o.get("roleRef")))
        for o in yaml.safe_load_all(builtin_rbac(DEPLOY / "overlays" / "fleet" / "overseer.yaml"))
        if o
    ]
    rbac_kinds = {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    have = [
        (o["kind"], o["metadata"]["name"], str(o.get("rules") or o.get("roleRef")))
        for o in objs
        if o["kind"] in rbac_kinds
    ]
    assert sorted(have) == sorted(want)
    secrets = {g for g in bound_grants(objs, "Role") if g.resource == "secrets"}
    assert {g.verb for g in secrets} == {"get", "list", "watch"}
    assert not [g for g in bound_grants(objs, "ClusterRole") if g.resource == "secrets"]
    roles = [o for o in objs if o["kind"] == "Role" and "secrets" in str(o.get("rules"))]
    assert [r["metadata"]["namespace"] for r in roles] == [NAMESPACE]


def test_rbac_yaml_is_the_output_of_overseer_rbac() -> None:
    """deploy/base/rbac.yaml is generated; ``overseer rbac`` prints the same for the same
    controllers (here: every installed one, the built-ins among them)."""
    from manager.config import load_config
    from manager.plugins import load_plugins
    from manager.rbac import for_controllers

    assert (DEPLOY / "base" / "rbac.yaml").read_text() == builtin_rbac(), (
        "deploy/base/rbac.yaml is stale: run `.venv/bin/python -m tests.test_manifests`"
    )
    config_path = DEPLOY / "config" / "overseer.yaml"
    result = subprocess.run(
        [sys.executable, "-m", "manager", "rbac", "--config", str(config_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    installed = load_plugins()
    settings, controllers, _ = load_config(yaml.safe_load(config_path.read_text()), installed)
    expected, _ = for_controllers(installed.plugins, settings, controllers)
    assert result.stdout == expected


@pytest.mark.parametrize("name", BUILTIN_CONTROLLERS)
def test_clusterrole_grants_each_builtin_controllers_rbac_rules(name: str) -> None:
    """(b) Needs ``controllers.<name>``: every rule it declares is granted."""
    pytest.importorskip(f"controllers.{name}", reason=f"controllers.{name} is not importable yet")
    objs = rendered(BASE)
    plugins = _builtin_plugins()
    settings, own = _deployed_controller_configs(objs, plugins)[name]
    assert settings.enabled
    declared = grants(_declared_rules(name, plugins[name], own))
    assert declared
    missing = declared - bound_grants(objs, "ClusterRole")
    assert not missing, f"ClusterRole lacks {name}'s rules: {sorted(missing, key=str)}"


def test_clusterrole_grants_nothing_the_controllers_do_not_declare() -> None:
    """(b) Needs both built-in controllers: least privilege, the ClusterRole is exactly
    the union of their declared rules."""
    for name in BUILTIN_CONTROLLERS:
        pytest.importorskip(f"controllers.{name}", reason=f"controllers.{name} is not importable")
    objs = rendered(BASE)
    plugins = _builtin_plugins()
    configs = _deployed_controller_configs(objs, plugins)
    declared: set[Grant] = set()
    for name, plugin in plugins.items():
        declared |= grants(_declared_rules(name, plugin, configs[name][1]))
    # the manager's own: the secure metrics server's reviews (metrics.secure in deploy/)
    from manager.rbac import METRICS_AUTH_RULES

    declared |= grants(METRICS_AUTH_RULES)
    extra = bound_grants(objs, "ClusterRole") - declared
    assert not extra, f"ClusterRole grants what no controller declares: {sorted(extra, key=str)}"


@contextlib.contextmanager
def _running_builtins(server: Any, objs: list[Obj]) -> Iterator[Any]:
    """A manager with the built-in controllers, configured by the ConfigMap's file (leader
    election on, the Lease in ``overseer-system``, with short timings), against
    ``server``; stopped gracefully."""
    from manager.testing import run_manager

    _, config = config_of(objs)
    lease = {"namespace": NAMESPACE, "leaseDuration": 2.0, "renewDeadline": 1.5, "retryPeriod": 0.2}
    doc = {
        **config,
        "client": {"qps": 200.0, "burst": 400},
        "leaderElection": {**config["leaderElection"], **lease},
        "gracefulShutdownTimeout": 10.0,
    }
    # rbac=False: the server counts every request, and the kit's own (making the
    # ServiceAccount and its bindings) are not the controllers'; test_kit_rbac.py runs
    # the built-ins under enforced RBAC
    with run_manager(server.kubeconfig_path, _builtin_plugins(), doc, rbac=False) as running:
        assert running.manager.is_leader()
        yield running.manager


def test_rbac_grants_every_request_the_running_controllers_make() -> None:
    """(c) Needs both built-in controllers. A manager runs them with leader election
    against a local API server through a scenario (an exposed Deployment, one without
    ports, a pod; the Service, Ingress and LogicalPort appear; the opt-in is removed and
    the pod deleted, so they go). The scenario's own writes happen in process, so the
    server's request counts are the manager's alone; each (verb, resource) is checked
    against the ClusterRole, Leases against the Role."""
    for name in BUILTIN_CONTROLLERS:
        pytest.importorskip(f"controllers.{name}", reason=f"controllers.{name} is not importable")
    from apiserver.machinery.rest import DeleteOptions, ListOptions, StatusError
    from controllers.podport.crd import crd_manifest
    from manager.testing import LocalApiServer

    objs = rendered(BASE)
    cluster_role, role = bound_grants(objs, "ClusterRole"), bound_grants(objs, "Role")
    app = "app"
    with LocalApiServer() as server:
        rest = server.rest
        deployments = server.resource("apps/v1", "deployments")
        services = server.resource("v1", "services")
        ingresses = server.resource("networking.k8s.io/v1", "ingresses")
        pods = server.resource("v1", "pods")
        server.create("apiextensions.k8s.io/v1", "customresourcedefinitions", crd_manifest())
        ports = server.resource("network.overseer.io/v1alpha1", "logicalports")
        for ns in (NAMESPACE, app):
            server.create("v1", "namespaces", {"metadata": {"name": ns}})

        def exists(served: Any, name: str, namespace: str | None = app) -> bool:
            try:
                rest.get(served, namespace, name)
            except StatusError:
                return False
            return True

        def port_count() -> int:
            return len(rest.list(ports, None, ListOptions())["items"])

        with _running_builtins(server, objs):
            labels = {"app": "web"}
            for name, container_ports in (
                ("web", [{"name": "http", "containerPort": 8080}]),
                ("noports", []),
            ):
                server.create(
                    "apps/v1",
                    "deployments",
                    {
                        "metadata": {"name": name, "annotations": {"overseer.io/expose": "true"}},
                        "spec": {
                            "selector": {"matchLabels": labels},
                            "template": {
                                "metadata": {"labels": labels},
                                "spec": {
                                    "containers": [
                                        {"name": "c", "image": "nginx", "ports": container_ports}
                                    ]
                                },
                            },
                        },
                    },
                    namespace=app,
                )
            server.create(
                "v1",
                "pods",
                {
                    "metadata": {"name": "web-0", "labels": labels},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]},
                },
                namespace=app,
            )
            _wait("the Service", lambda: exists(services, "web"))
            _wait("the Ingress", lambda: exists(ingresses, "web"))
            _wait("a LogicalPort", lambda: port_count() == 1)
            _wait(
                "the pod's annotations",
                lambda: (
                    "overseer.io/ip"
                    in (rest.get(pods, app, "web-0")["metadata"].get("annotations") or {})
                ),
            )
            _wait(
                "the exposed URL",
                lambda: (
                    "overseer.io/exposed-url"
                    in (rest.get(ingresses, app, "web")["metadata"].get("annotations") or {})
                ),
            )
            _wait("a Warning Event", lambda: server.request_count("create", "events") > 0)
            # Rest.get hands out the stored object itself: change a copy
            web = copy.deepcopy(rest.get(deployments, app, "web"))
            del web["metadata"]["annotations"]["overseer.io/expose"]
            rest.update(deployments, app, "web", web)
            rest.delete(pods, app, "web-0", DeleteOptions(grace_period_seconds=0))
            _wait("the Service deleted", lambda: not exists(services, "web"))
            _wait("the Ingress deleted", lambda: not exists(ingresses, "web"))
            _wait("the LogicalPort deleted", lambda: port_count() == 0)
        requested = _requested(server)
    print("\nrequested by the running manager:")
    for g in sorted(requested, key=lambda g: (g.group, g.resource, VERBS.index(g.verb))):
        print(f"  {g.group or 'core'}/{g.resource}: {g.verb}")
    # the scenario exercised what it claims to
    for expected in (
        Grant("coordination.k8s.io", "leases", "update"),
        Grant("apps", "deployments", "watch"),
        Grant("", "pods", "patch"),
        Grant("", "services", "create"),
        Grant("", "services", "delete"),
        Grant("networking.k8s.io", "ingresses", "delete"),
        Grant("network.overseer.io", "logicalports", "create"),
        Grant("network.overseer.io", "logicalports", "delete"),
        Grant("", "events", "create"),
    ):
        assert expected in requested, expected
    missing = {g for g in requested if g not in (role if g.resource == "leases" else cluster_role)}
    assert not missing, f"requested but not granted: {sorted(missing, key=str)}"


# -- the image ------------------------------------------------------------------------


def _stages(dockerfile: str) -> list[list[str]]:
    """Instructions per stage (continuation lines joined, comments dropped)."""
    text = re.sub(r"\\\n\s*", " ", dockerfile)
    stages: list[list[str]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append([])
        if stages:
            stages[-1].append(line)
    return stages


def test_dockerfile_final_stage_is_slim_nonroot_and_pinned() -> None:
    """Read, not built (no docker engine in this environment)."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    builder, final = _stages(dockerfile)
    assert "python:3.11-slim" in dockerfile
    assert builder[0].endswith(" AS builder")
    install = next(i for i in builder if "pip install" in i)
    assert "--constraint constraints.txt" in install
    # only the venv crosses over; nothing is built or installed in the final stage
    copies = [i for i in final if i.startswith("COPY")]
    assert copies == ["COPY --from=builder /opt/overseer /opt/overseer"], copies
    runs = " ".join(i for i in final if i.startswith("RUN"))
    assert not re.search(r"apt-get install|pip install|gcc|build-essential", runs), runs
    assert "USER 65532:65532" in final
    assert 'ENTRYPOINT ["overseer"]' in final
    assert 'CMD ["run"]' in final
    env = " ".join(i for i in final if i.startswith("ENV"))
    assert "PYTHONDONTWRITEBYTECODE=1" in env
    # what the builder copies exists and is admitted by .dockerignore's allowlist
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    for instruction in builder:
        if instruction.startswith("COPY"):
            for src in instruction.split()[1:-1]:
                assert (ROOT / src).exists(), src
                assert src in allowed, f"{src} is excluded by .dockerignore"


if __name__ == "__main__":
    (DEPLOY / "base" / "rbac.yaml").write_text(builtin_rbac())
    print(f"wrote {DEPLOY / 'base' / 'rbac.yaml'}")
    SHARDED_RBAC.write_text(sharded_rbac())
    print(f"wrote {SHARDED_RBAC}")
    FLEET_RBAC.write_text(fleet_rbac())
    print(f"wrote {FLEET_RBAC}")

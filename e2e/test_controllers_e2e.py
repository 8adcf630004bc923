"""Both built-in controllers end to end, on three replicas that share one Lease.

One suite, two targets (``e2e/targets.py``): by default three local ``overseer run``
processes (lease 3 s, renew 2 s, retry 0.5 s); with ``OVERSEER_E2E_TARGET=kind`` (set by
``e2e/kind.sh``) the pods of the ``overseer`` Deployment that ``deploy/`` installs. The
replicas start once for the module and the scenarios run in order, in one namespace:

1. an opted-in Deployment gets its Service, and its Ingress with ``overseer.io/exposed-url``
   (one that is not opted in gets nothing); pods get a port (annotations + one
   LogicalPort on the target's network, no address twice); a deleted pod's port goes;
2. leader failover, by kill -9 and by a graceful stop: a new leader within lease
   duration + 2 retry periods (graceful: 2 retry periods, the Lease is released) plus
   slack, and the work created while nobody led gets done; times are printed;
3. ``/metrics`` of the leader counts reconciles of both controllers and reports
   ``leader_election_master_status`` 1; every standby reports 0 and reconciled nothing;
4. a rolling restart of every replica, with work created and pods deleted meanwhile,
   loses nothing: every opted-in Deployment exposed, every pod exactly one port (by pod
   UID), no orphan LogicalPorts, no address twice.

Every wait is bounded and fails with the replicas' logs; local processes are stopped at
the end, whatever happens. The local target also runs against a real cluster
(``OVERSEER_TEST_KUBECONFIG``) as long as no other Overseer acts in the test namespace.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from e2e.cluster import sample
from e2e.processes import wait_for
from e2e.targets import LOGICAL_PORTS, Target, target_from_env
from manager.client import KubeClient
from manager.errors import NotFound
from manager.resources import builtin

KIND = os.environ.get("OVERSEER_E2E_TARGET", "local") == "kind"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900 if KIND else 120)]

NAMESPACES = builtin("v1", "namespaces")
SERVICE_ACCOUNTS = builtin("v1", "serviceaccounts")
DEPLOYMENTS = builtin("apps/v1", "deployments")
PODS = builtin("v1", "pods")
SERVICES = builtin("v1", "services")
INGRESSES = builtin("networking.k8s.io/v1", "ingresses")
IMAGE = "registry.k8s.io/pause:3.9"
EXPOSE = "overseer.io/expose"
EXPOSED_URL = "overseer.io/exposed-url"
PORT_NAME, PORT_IP, PORT_MAC = "overseer.io/logical-port", "overseer.io/ip", "overseer.io/mac"


# -- fixtures ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client(kubeconfig_path: str) -> Iterator[KubeClient]:
    with KubeClient.from_kubeconfig(kubeconfig_path) as c:
        yield c


@pytest.fixture(scope="module")
def ns(client: KubeClient) -> Iterator[str]:
    """One namespace for the module (the local replicas watch only it)."""
    name = f"ovs-e2e-{uuid.uuid4().hex[:8]}"
    client.create(NAMESPACES, {"metadata": {"name": name}})
    # a real cluster creates the "default" ServiceAccount asynchronously; pods need it
    wait_for(lambda: _exists(client, SERVICE_ACCOUNTS, "default", name), 30, "default SA", 0.1)
    try:
        yield name
    finally:
        with contextlib.suppress(NotFound):
            client.delete(NAMESPACES, name)


@pytest.fixture(scope="module")
def target(
    client: KubeClient, kubeconfig_path: str, ns: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Target]:
    t = target_from_env(client, kubeconfig_path, ns, Path(tmp_path_factory.mktemp("replicas")))
    try:
        t.wait_all_ready()
        yield t
    finally:
        t.close()


# -- objects and checks -----------------------------------------------------------------


def _exists(client: KubeClient, resource: Any, name: str, namespace: str) -> bool:
    try:
        client.get(resource, name, namespace)
    except NotFound:
        return False
    return True


def _deployment(client: KubeClient, ns: str, name: str, *, expose: bool = True) -> None:
    labels = {"app": name}
    annotations = {EXPOSE: "true"} if expose else {}
    container = {"name": "c", "image": IMAGE, "ports": [{"name": "http", "containerPort": 8080}]}
    body = {
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }
    client.create(DEPLOYMENTS, body, ns)


def _pod(client: KubeClient, ns: str, name: str) -> str:
    body = {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": IMAGE}]}}
    return str(client.create(PODS, body, ns)["metadata"]["uid"])


def _delete_pod(client: KubeClient, ns: str, name: str) -> None:
    with contextlib.suppress(NotFound):
        client.delete(PODS, name, ns, grace_period_seconds=0)


def _exposure_problem(client: KubeClient, ns: str, dep: dict[str, Any]) -> str | None:
    """Why an opted-in Deployment is not exposed (None: it is)."""
    name, uid = dep["metadata"]["name"], dep["metadata"]["uid"]
    try:
        service = client.get(SERVICES, name, ns)
        ingress = client.get(INGRESSES, name, ns)
    except NotFound as exc:
        return f"{name}: {exc}"
    for obj in (service, ingress):
        owners = obj["metadata"].get("ownerReferences") or []
        if not any(o.get("controller") and o.get("uid") == uid for o in owners):
            return f"{name}: {obj.get('kind')} not controlled by the Deployment: {owners}"
    if service["spec"].get("selector") != dep["spec"]["selector"]["matchLabels"]:
        return f"{name}: Service selector {service['spec'].get('selector')}"
    host = ingress["spec"]["rules"][0].get("host", "")
    if not host.startswith(f"{name}.{ns}."):
        return f"{name}: Ingress host {host!r}"
    url = (ingress["metadata"].get("annotations") or {}).get(EXPOSED_URL, "")
    if host not in url:
        return f"{name}: {EXPOSED_URL} {url!r} (Ingress host {host!r})"
    return None


def _exposed(client: KubeClient, ns: str, name: str) -> bool:
    return _exposure_problem(client, ns, client.get(DEPLOYMENTS, name, ns)) is None


def _ports_by_uid(client: KubeClient, ns: str) -> dict[str, list[dict[str, Any]]]:
    """The LogicalPorts of the pods of ``ns``, by pod UID."""
    out: dict[str, list[dict[str, Any]]] = {}
    for port in client.list(LOGICAL_PORTS)["items"]:
        if port["spec"].get("podNamespace") == ns:
            out.setdefault(port["spec"]["podUID"], []).append(port)
    return out


def _has_one_port(client: KubeClient, ns: str, name: str) -> bool:
    pod = client.get(PODS, name, ns)
    ports = _ports_by_uid(client, ns).get(pod["metadata"]["uid"], [])
    ann = pod["metadata"].get("annotations") or {}
    return len(ports) == 1 and ann.get(PORT_IP) == ports[0]["spec"]["ip"]


def _audit(client: KubeClient, ns: str, target: Target) -> list[str]:
    """Everything that is not as it should be in ``ns`` once the controllers are idle."""
    problems: list[str] = []
    for dep in client.list(DEPLOYMENTS, ns)["items"]:
        name = dep["metadata"]["name"]
        if _opted_in(dep):
            problem = _exposure_problem(client, ns, dep)
            if problem:
                problems.append(f"not exposed: {problem}")
        elif _exists(client, SERVICES, name, ns) or _exists(client, INGRESSES, name, ns):
            problems.append(f"exposed without opting in: {name}")
    pods = [p for p in client.list(PODS, ns)["items"] if not p["metadata"].get("deletionTimestamp")]
    ports = _ports_by_uid(client, ns)
    for pod in pods:
        meta = pod["metadata"]
        mine = ports.get(meta["uid"], [])
        ann = meta.get("annotations") or {}
        if len(mine) != 1:
            names = [p["metadata"]["name"] for p in mine]
            problems.append(f"pod {meta['name']}: {len(mine)} ports {names}")
            continue
        port = mine[0]
        seen = (ann.get(PORT_NAME), ann.get(PORT_IP), ann.get(PORT_MAC))
        want = (port["metadata"]["name"], port["spec"]["ip"], port["spec"]["mac"])
        if seen != want:
            problems.append(f"pod {meta['name']}: annotations {seen}, port {want}")
        if port["spec"]["network"] != target.network:
            problems.append(f"pod {meta['name']}: network {port['spec']['network']}")
    live = {p["metadata"]["uid"] for p in pods}
    problems.extend(
        f"orphan LogicalPort {p['metadata']['name']} (pod {p['spec']['podName']})"
        for uid, owned in ports.items()
        if uid not in live
        for p in owned
    )
    held = Counter(p["spec"]["ip"] for owned in ports.values() for p in owned)
    problems.extend(f"address {ip} in {n} LogicalPorts" for ip, n in held.items() if n > 1)
    annotated = Counter((p["metadata"].get("annotations") or {}).get(PORT_IP) for p in pods)
    problems.extend(f"address {ip} on {n} pods" for ip, n in annotated.items() if ip and n > 1)
    return problems


def _opted_in(dep: dict[str, Any]) -> bool:
    return (dep["metadata"].get("annotations") or {}).get(EXPOSE) == "true"


def _wait(target: Target, predicate: Callable[[], Any], what: str, step: float = 0.05) -> Any:
    """wait_for with the target's bound; on timeout the replicas' logs join the message."""
    try:
        return wait_for(predicate, target.timeout, what, step=step if not KIND else 0.5)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{target.logs()}") from None


def _wait_clean(client: KubeClient, ns: str, target: Target) -> None:
    last: list[list[str]] = [[]]

    def clean() -> bool:
        last[0] = _audit(client, ns, target)
        return not last[0]

    try:
        wait_for(clean, target.timeout, "a clean audit", step=1.0 if KIND else 0.2)
    except AssertionError:
        raise AssertionError(
            "after waiting, still:\n  " + "\n  ".join(last[0]) + "\n" + target.logs()
        ) from None


# -- the scenarios ----------------------------------------------------------------------


def test_both_controllers_end_to_end(client: KubeClient, ns: str, target: Target) -> None:
    _deployment(client, ns, "web")
    _deployment(client, ns, "plain", expose=False)
    uids = {name: _pod(client, ns, name) for name in ("p-0", "p-1")}

    _wait(target, lambda: _exposed(client, ns, "web"), "web exposed")
    for name in uids:
        _wait(target, partial(_has_one_port, client, ns, name), f"{name} has one port")
    ports = _ports_by_uid(client, ns)
    ips = {ports[uid][0]["spec"]["ip"] for uid in uids.values()}
    assert len(ips) == 2, (ports, target.logs())
    assert all(ports[uid][0]["spec"]["podName"] == n for n, uid in uids.items()), ports

    _delete_pod(client, ns, "p-0")
    _wait(
        target,
        lambda: uids["p-0"] not in _ports_by_uid(client, ns),
        "p-0's LogicalPort released",
    )
    assert len(_ports_by_uid(client, ns)[uids["p-1"]]) == 1
    _wait_clean(client, ns, target)  # includes: "plain" got no Service, no URL


@pytest.mark.parametrize("graceful", [False, True], ids=["kill-9", "graceful"])
def test_leader_failover(client: KubeClient, ns: str, target: Target, graceful: bool) -> None:
    target.wait_all_ready()
    first, leader = target.holder(), target.leader()
    assert leader is not None, target.logs()
    tag = "graceful" if graceful else "kill9"

    started = time.monotonic()
    target.kill(leader, graceful=graceful)
    # work that arrives while nobody leads
    _deployment(client, ns, f"during-{tag}")
    _pod(client, ns, f"during-{tag}")
    bound = (0 if graceful else target.lease_duration) + 2 * target.retry_period
    try:
        new = wait_for(
            lambda: h if (h := target.holder()) and h != first else None,
            bound + target.failover_slack + 30,
            "a new leader",
            step=0.1 if KIND else 0.02,
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{target.logs()}") from None
    failover = time.monotonic() - started
    _wait(target, lambda: _exposed(client, ns, f"during-{tag}"), "the Deployment exposed")
    _wait(target, lambda: _has_one_port(client, ns, f"during-{tag}"), "the pod has a port")
    done = time.monotonic() - started
    print(
        f"\n[{target.kind}] {'graceful stop' if graceful else 'kill -9'} of the leader "
        f"{leader}: new leader {new} after {failover:.2f} s (bound {bound:.1f} s + "
        f"{target.failover_slack:.0f} s slack); work created meanwhile done after {done:.2f} s"
    )
    assert failover <= bound + target.failover_slack, target.logs()
    assert not new.startswith(f"{leader}_"), target.logs()
    target.wait_all_ready()  # the stopped replica is replaced (locally: exit status checked)
    _wait_clean(client, ns, target)


def test_metrics_show_reconciles_and_leader_status(
    client: KubeClient, ns: str, target: Target
) -> None:
    target.wait_all_ready()
    _deployment(client, ns, "metered")
    _pod(client, ns, "metered")
    _wait(target, lambda: _exposed(client, ns, "metered"), "metered exposed")
    _wait(target, lambda: _has_one_port(client, ns, "metered"), "metered has a port")
    leader = target.leader()
    assert leader is not None, target.logs()
    text = target.metrics(leader)
    assert sample(text, "leader_election_master_status", name=target.lease_name) == 1.0, text
    for controller in ("exposer", "podport"):
        count = sample(
            text, "controller_runtime_reconcile_total", controller=controller, result="success"
        )
        assert count is not None and count > 0, (controller, text)
    standbys = [r for r in target.replicas() if r != leader]
    assert len(standbys) == 2, (standbys, target.logs())
    for standby in standbys:
        text = target.metrics(standby)
        status = sample(text, "leader_election_master_status", name=target.lease_name)
        assert status == 0.0, (standby, text)
        for controller in ("exposer", "podport"):
            count = sample(
                text, "controller_runtime_reconcile_total", controller=controller, result="success"
            )
            assert not count, (f"standby {standby} reconciled {controller}", text)


def test_rolling_restart_loses_nothing(client: KubeClient, ns: str, target: Target) -> None:
    target.wait_all_ready()
    before = set(target.replicas())
    for i in range(4):
        _deployment(client, ns, f"roll-{i}")
    for i in range(6):
        _pod(client, ns, f"roll-{i}")
    _wait_clean(client, ns, target)

    failure: list[BaseException] = []

    def restart() -> None:
        try:
            target.rolling_restart()
        except BaseException as exc:  # re-raised in the test thread
            failure.append(exc)

    thread = threading.Thread(target=restart, name="test/rolling-restart")
    thread.start()
    try:
        # work arriving and pods going away while the replicas restart one by one
        i = 0
        while thread.is_alive() and i < 40:
            _deployment(client, ns, f"late-{i}")
            _pod(client, ns, f"late-{i}")
            if i < 6:
                _delete_pod(client, ns, f"roll-{i}")
            i += 1
            thread.join(2.0 if KIND else 0.5)
    finally:
        thread.join(900 if KIND else 100)
    assert not thread.is_alive(), "the rolling restart did not finish"
    if failure:
        raise failure[0]
    print(f"\n[{target.kind}] rolling restart: {i} Deployments and pods created meanwhile")

    after = set(target.replicas())
    assert len(after) == len(before) and not after & before, (before, after, target.logs())
    _wait_clean(client, ns, target)
    deployments = client.list(DEPLOYMENTS, ns)["items"]
    opted_in = {d["metadata"]["name"] for d in deployments if _opted_in(d)}
    exposed = {
        d["metadata"]["name"] for d in deployments if _exposure_problem(client, ns, d) is None
    }
    created = {f"roll-{n}" for n in range(4)} | {f"late-{n}" for n in range(i)}
    assert created <= opted_in == exposed, (sorted(opted_in ^ exposed), target.logs())

"""Chaos for admission webhooks: two ``overseer run`` replicas serving a validating
webhook with failurePolicy Fail while 200 creates a second go through it, and the proof
that no create fails for a reason other than what kube-apiserver itself does not retry.

The harness (:class:`WebhookHarness`) is the local API server in this process, a
namespace, two replica processes (leader election on, every replica serving the webhook
on a port of its own, managed certificates) and what a cluster adds around them:

* **The install**: the Service ``overseer-webhook`` (no selector: its EndpointSlices are
  the harness's), and the ValidatingWebhookConfiguration ``overseer webhooks`` prints for
  the test plugin (``e2e/webhook_plugin``: ConfigMap creates labelled
  ``webhook-chaos=load``, allowed when ``data.verdict`` is ``allow``, denied otherwise).
  The leader fills its ``caBundle``.
* **The kubelet and the EndpointSlice controller**: every second (the kubelet's PLEG
  relist period, and a readiness probe of period 1 s) each replica's endpoint is marked
  ready when its process runs and its ``/readyz`` answers 200, not ready otherwise; the
  local server sends each new webhook connection to one ready endpoint (kube-proxy behind
  the Service's ClusterIP) and keeps it alive (:mod:`apiserver.registry.webhook.client`).
  A replica that exits is replaced at once by a new one (the ReplicaSet), which becomes
  an endpoint when it is ready.
* **The load** (:class:`Load`): ``workers`` threads creating ConfigMaps at ``rate`` per
  second in all, one in ten with a verdict the webhook denies, through a client that
  never retries (as ``kubectl create``): every failure is the API server's answer.

Scenarios:

==========================  ==============================================================
``kill9-serving``           ``kill -9`` of one replica every 6 s (the leader, then a
                            standby, ...), 4 times; each killed replica is replaced
``sigterm-rolling``         a rolling restart: SIGTERM to one replica every 6 s (the
                            leader, then a standby, ...), 4 times, each replaced once it
                            has exited; nothing may fail at all
``rotation-under-load``     managed certificates renewed every ~4 s and the CA every ~9 s
                            (three steps, overlap 2 s) for 40 s; every review on a new
                            connection (no keep-alive), so that every handshake checks the
                            certificate served at that moment against the bundle the API
                            server holds then
==========================  ==============================================================

What counts (:class:`WebhookResult`): creates sent, created, denied as the webhook says;
**unreviewed** (a create the webhook would deny that was applied: must be 0); and the
failed creates, each explained or not. Explained: a transport failure (refused, reset,
EOF) of a review to the killed replica between the ``kill -9`` and the moment its
endpoint was marked not ready — kube-apiserver retries neither a POST whose connection
broke once sent nor a dial that was refused (``callHook`` has no retry; client-go retries
a POST only when nothing was written on a reused connection, which the local server does
too), so a killed webhook's in-flight reviews and the new connections kube-proxy sends it
before its endpoint goes are lost there as well. **Unexplained failures must be 0.**

The proof that the scenarios test what they claim, each with a test-only switch:
``--leader-only-runs N`` runs ``kill9-serving`` with only the leader ready to serve
(``e2e/leaderonly.py``): killing the leader leaves no endpoint until a standby has taken
the Lease, and creates fail; ``--one-shot-runs N`` runs ``rotation-under-load`` with the CA
renewed in one step as cert-controller does (``e2e/oneshotrotation.py``): handshakes fail
verification while the new CA is not yet in the API server's bundle; ``--no-drain-runs N``
runs ``sigterm-rolling`` with ``shutdownDelay: 0``: the listener closes at SIGTERM while
the endpoint is still ready, and reviews sent to it fail.

``python -m e2e.webhookchaos [--runs N] [--scenario NAME ...] [--leader-only-runs N]
[--one-shot-runs N] [--no-drain-runs N]`` prints the table; ``e2e/test_webhook_chaos.py``
runs each once.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import yaml

from apiserver.registry.webhook import client as webhook_client
from e2e.processes import ROOT
from e2e.replicapool import ReplicaPool, free_port
from manager.client import ClientOptions, KubeClient
from manager.errors import ApiError, NotFound
from manager.resources import builtin
from manager.testing import LocalApiServer

__all__ = ["SCENARIOS", "Load", "WebhookHarness", "WebhookResult", "run_webhook_scenario"]

NAMESPACES = builtin("v1", "namespaces")
SERVICES = builtin("v1", "services")
SECRETS = builtin("v1", "secrets")
CONFIGMAPS = builtin("v1", "configmaps")
SLICES = builtin("discovery.k8s.io/v1", "endpointslices")
LEASES = builtin("coordination.k8s.io/v1", "leases")
VALIDATING = builtin("admissionregistration.k8s.io/v1", "validatingwebhookconfigurations")

NAMESPACE = "webhook-chaos"
SERVICE = "overseer-webhook"
PORT_NAME = "webhook"
CONFIGURATION = "overseer-chaos"
SECRET = "overseer-webhook-tls"
LEASE_NAME = "webhook-chaos-leader"
LABEL = "webhook-chaos"
DENIED = "only 'allow' is allowed"
WEBHOOK_PLUGIN = Path(__file__).resolve().parent / "webhook_plugin"
RELIST = 1.0  # seconds: the kubelet's PLEG relist, and this harness's readiness probe
LEASE, RENEW, RETRY = 3.0, 2.0, 0.5
SIZE = 2
RATE = 200.0

_TRANSPORT = ("connection refused", "EOF", "connection reset", "broken pipe")


# -- the load -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Outcome:
    sent: float  # time.monotonic()
    took: float
    verdict: str  # what the webhook is asked: allow or deny
    result: str  # created, denied, failed
    message: str = ""


class Load:
    """ConfigMap creates at ``rate`` per second from ``workers`` threads, each paced on
    its own schedule (a slow answer delays only its thread's next create)."""

    def __init__(self, client: KubeClient, rate: float = RATE, workers: int = 16) -> None:
        self.client = client
        self.rate = rate
        self.workers = workers
        self.outcomes: list[Outcome] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.started = 0.0
        self.stopped = 0.0

    def start(self) -> Load:
        self.started = time.monotonic()
        for i in range(self.workers):
            t = threading.Thread(target=self._run, args=(i,), name=f"load/{i}")
            self._threads.append(t)
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(30)
        self.stopped = time.monotonic()

    def _run(self, index: int) -> None:
        interval = self.workers / self.rate
        due = self.started + index * interval / self.workers
        n = 0
        while not self._stop.is_set():
            wait = due - time.monotonic()
            if wait > 0 and self._stop.wait(wait):
                return
            due += interval
            n += 1
            verdict = "deny" if n % 10 == 0 else "allow"
            body = {
                "metadata": {"name": f"load-{index}-{n}", "labels": {LABEL: "load"}},
                "data": {"verdict": verdict},
            }
            sent = time.monotonic()
            try:
                self.client.create(CONFIGMAPS, body, NAMESPACE)
                outcome = Outcome(sent, time.monotonic() - sent, verdict, "created")
            except ApiError as exc:
                took = time.monotonic() - sent
                if verdict == "deny" and exc.status == 422 and DENIED in exc.message:
                    outcome = Outcome(sent, took, verdict, "denied")
                else:
                    outcome = Outcome(sent, took, verdict, "failed", f"{exc.status} {exc}")
            with self._lock:
                self.outcomes.append(outcome)


# -- the harness --------------------------------------------------------------------------


@dataclass
class Endpoint:
    port: int
    ready: bool = False
    ready_since: float | None = None  # monotonic, last time marked ready
    not_ready_at: float | None = None  # monotonic, last time marked not ready


@dataclass
class Kill:
    name: str
    port: int
    at: float  # monotonic, when the signal was sent
    leader: bool
    not_ready_at: float | None = None


class WebhookHarness(ReplicaPool):
    """The local API server, the install, the endpoints, and two replicas."""

    def __init__(
        self,
        workdir: Path,
        *,
        rotation: bool = False,
        module: str = "",
        drain: bool = True,
    ) -> None:
        super().__init__(LocalApiServer(), workdir, target=SIZE, module=module)
        self.rotation = rotation
        self.drain = drain
        # with only the leader able to serve (e2e.leaderonly), one endpoint is all there is
        self.serving_needed = 1 if module == "e2e.leaderonly" else SIZE
        self.driver: KubeClient | None = None
        self.endpoints: dict[str, Endpoint] = {}
        self._ep_lock = threading.Lock()
        self._ep_stop = threading.Event()
        self._ep_thread: threading.Thread | None = None

    # lifecycle

    def start(self) -> WebhookHarness:
        self.server.start()
        path = self.server.kubeconfig_for("chaos-driver", self.workdir / "driver.kubeconfig")
        self.driver = KubeClient.from_kubeconfig(
            str(path), options=ClientOptions(qps=0, max_retries=10, retry_max_wait=2.0)
        )
        self.driver.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
        self.driver.create(
            SERVICES,
            {
                "metadata": {"name": SERVICE},
                "spec": {"ports": [{"name": PORT_NAME, "port": 443, "targetPort": 9443}]},
            },
            NAMESPACE,
        )
        for doc in self._configurations():
            self.driver.create(VALIDATING, doc)
        self.start_replicas()
        self._ep_thread = threading.Thread(target=self._endpoints, name="chaos/endpoints")
        self._ep_thread.start()
        self.wait_serving()
        return self

    def close(self) -> None:
        self._ep_stop.set()
        if self._ep_thread is not None:
            self._ep_thread.join(10)
        self.stop_replicas(10)
        if self.driver is not None:
            self.driver.close()
        self.server.stop()

    def __enter__(self) -> WebhookHarness:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def client(self) -> KubeClient:
        assert self.driver is not None
        return self.driver

    def load_client(self, workers: int) -> KubeClient:
        """A client that never retries (every failure is the API server's answer)."""
        path = self.server.kubeconfig_for("chaos-load", self.workdir / "load.kubeconfig")
        return KubeClient.from_kubeconfig(
            str(path), options=ClientOptions(qps=0, max_retries=0, pool_size=workers)
        )

    # what a replica runs

    def _plugins(self) -> tuple[Path, ...]:
        return (WEBHOOK_PLUGIN,)

    def _document(self, port: int, health: str) -> dict[str, Any]:
        managed: dict[str, Any] = {"checkInterval": 1.0}
        if self.rotation:
            # the certificate renewed every ~4.3 s, the CA every ~8.6 s (three steps)
            managed.update(
                caValidityDays=0.002,
                certValidityDays=0.001,
                renewBeforePercentage=95,
                overlap=2.0,
            )
        return {
            "leaderElection": {
                "enabled": True,
                "namespace": NAMESPACE,
                "leaseName": LEASE_NAME,
                "leaseDuration": LEASE,
                "renewDeadline": RENEW,
                "retryPeriod": RETRY,
            },
            "client": {"qps": 50.0, "burst": 100},
            "metricsBindAddress": "0",
            "healthProbeBindAddress": health,
            "gracefulShutdownTimeout": 5.0,
            "watchNamespace": NAMESPACE,
            "log": {"format": "json", "level": "info"},
            "webhooks": {
                "host": "127.0.0.1",
                "port": port,
                "certificates": "managed",
                "namespace": NAMESPACE,
                "service": SERVICE,
                "configurationName": CONFIGURATION,
                # longer than a relist and a probe: the endpoint goes while it serves
                "shutdownDelay": 2.0 * RELIST + 0.5 if self.drain else 0.0,
                "managed": managed,
            },
            "controllers": {
                **{n: {"enabled": False} for n in _installed()},
                "webhookchaos": {"enabled": True, "namespace": NAMESPACE},
            },
        }

    def _config(self, name: str, health_port: int) -> Path:
        port = free_port()
        with self._ep_lock:
            self.endpoints[name] = Endpoint(port)
        path = self.workdir / f"{name}.yaml"
        path.write_text(yaml.safe_dump(self._document(port, f"127.0.0.1:{health_port}")))
        return path

    def _configurations(self) -> list[dict[str, Any]]:
        """What ``overseer webhooks`` prints for the test plugin (the install)."""
        path = self.workdir / "webhooks.yaml"
        path.write_text(yaml.safe_dump(self._document(9443, "0")))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(WEBHOOK_PLUGIN), str(ROOT)])}
        done = subprocess.run(
            [sys.executable, "-m", "manager", "webhooks", "--config", str(path)],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=60,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"overseer webhooks failed: {done.stderr}")
        docs = [d for d in yaml.safe_load_all(done.stdout) if d]
        if not docs:
            raise RuntimeError(f"overseer webhooks printed nothing: {done.stderr}")
        return docs

    # the kubelet and the EndpointSlice controller

    def _endpoints(self) -> None:
        while not self._ep_stop.is_set():
            began = time.monotonic()
            with self._lock:
                procs = {n: p.replica.returncode is None for n, p in self._procs.items()}
            for name, alive in procs.items():
                ready = alive and self._probe(name)
                self._mark(name, ready, gone=not alive)
            self._ep_stop.wait(max(0.0, RELIST - (time.monotonic() - began)))

    def _probe(self, name: str) -> bool:
        port = self.health_port(name)
        if port is None:
            return False
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=0.5) as r:
                return int(r.status) == 200
        except (urllib.error.URLError, OSError):
            return False

    def _mark(self, name: str, ready: bool, *, gone: bool) -> None:
        with self._ep_lock:
            ep = self.endpoints[name]
            changed = ep.ready != ready
            now = time.monotonic()
            if changed:
                ep.ready = ready
                if ready:
                    ep.ready_since = now
                else:
                    ep.not_ready_at = now
        slice_name = f"{SERVICE}-{name}"
        if gone and not ready:
            with contextlib.suppress(NotFound):
                self.client.delete(SLICES, slice_name, NAMESPACE)
            return
        body: dict[str, Any] = {
            "metadata": {
                "name": slice_name,
                "labels": {
                    "kubernetes.io/service-name": SERVICE,
                    "endpointslice.kubernetes.io/managed-by": "webhook-chaos-harness",
                },
            },
            "addressType": "IPv4",
            "ports": [{"name": PORT_NAME, "port": ep.port, "protocol": "TCP"}],
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": ready}}],
        }
        try:
            current = self.client.get(SLICES, slice_name, NAMESPACE)
        except NotFound:
            self.client.create(SLICES, body, NAMESPACE)
            return
        if changed or current.get("endpoints") != body["endpoints"]:
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            self.client.replace(SLICES, body, NAMESPACE)

    def ready_endpoints(self) -> list[str]:
        with self._ep_lock:
            return [n for n, ep in self.endpoints.items() if ep.ready]

    def wait_serving(self, timeout: float = 90.0) -> None:
        """Every replica running and a ready endpoint (one, with only the leader able to
        serve), and the configuration carrying a caBundle."""

        def serving() -> bool:
            live = set(self.live())
            ready = live & set(self.ready_endpoints())
            if len(live) < SIZE or len(ready) < self.serving_needed:
                return False
            conf = self.client.get(VALIDATING, CONFIGURATION)
            return all((h.get("clientConfig") or {}).get("caBundle") for h in conf["webhooks"])

        _wait(serving, timeout, f"{self.serving_needed} serving replicas", self.logs)

    def leader(self) -> str | None:
        try:
            lease = self.client.get(LEASES, LEASE_NAME, NAMESPACE)
        except NotFound:
            return None
        holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
        return next((n for n in self.live() if holder.startswith(f"{n}_")), None)

    def kill(self, name: str) -> Kill:
        with self._ep_lock:
            port = self.endpoints[name].port
        leader = self.leader() == name
        at = time.monotonic()
        self.signal(name, signal.SIGKILL, expected="kill")
        return Kill(name, port, at, leader)


def _installed() -> set[str]:
    return {ep.name for ep in entry_points(group="overseer.controllers")}


def _wait(predicate: Callable[[], Any], timeout: float, what: str, logs: Callable[[], str]) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(ApiError, OSError):
            found = predicate()
            if found:
                return found
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{logs()}")


# -- the scenarios ------------------------------------------------------------------------


@dataclass
class WebhookResult:
    scenario: str
    switch: str = ""  # the test-only switch the replicas ran with ("" = none)
    sent: int = 0
    created: int = 0
    denied: int = 0
    seconds: float = 0.0
    unreviewed: list[Outcome] = field(default_factory=list)  # denied verdicts applied
    explained: list[Outcome] = field(default_factory=list)
    unexplained: list[Outcome] = field(default_factory=list)
    kills: list[Kill] = field(default_factory=list)
    stops: int = 0  # SIGTERMs
    rotations: Counter[str] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.sent / self.seconds if self.seconds else 0.0

    def percentile(self, q: float) -> float:
        if not self.latencies:
            return 0.0
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    def why(self) -> Counter[str]:
        return Counter(_kind(o.message) for o in self.unexplained)


def _kind(message: str) -> str:
    for marker in (
        "connection refused",
        "EOF",
        "connection reset",
        "no endpoints available",
        "x509",
        "tls:",
        "deadline exceeded",
        "TooManyRequests",
    ):
        if marker in message:
            return marker
    return message[:80]


def _judge(result: WebhookResult, outcomes: list[Outcome], kills: list[Kill]) -> None:
    for o in outcomes:
        result.sent += 1
        result.latencies.append(o.took)
        if o.result == "created":
            result.created += 1
            if o.verdict == "deny":
                result.unreviewed.append(o)
        elif o.result == "denied":
            result.denied += 1
        elif _explained(o, kills):
            result.explained.append(o)
        else:
            result.unexplained.append(o)


def _explained(o: Outcome, kills: list[Kill]) -> bool:
    """A transport failure of a review to a killed replica, sent between its kill and
    the moment its endpoint was marked not ready (what kube-apiserver does not retry)."""
    if not any(marker in o.message for marker in _TRANSPORT):
        return False
    for k in kills:
        end = k.not_ready_at if k.not_ready_at is not None else k.at + RELIST + 0.5
        if k.at - 0.1 <= o.sent <= end + 0.05:
            if "connection refused" in o.message and f":{k.port}:" not in o.message:
                continue  # refused by another address
            return True
    return False


def _victims(h: WebhookHarness, quick: bool) -> Iterator[str]:
    """Every 6 s (3 quick) once the replicas serve, four times (two quick): the leader,
    then a standby, alternately."""
    for i in range(2 if quick else 4):
        h.wait_serving()
        time.sleep(3.0 if quick else 6.0)
        leader = h.leader()
        others = [n for n in h.live() if n != leader]
        victim = leader if i % 2 == 0 or not others else others[0]
        yield victim if victim is not None else h.live()[0]


def _kill9(h: WebhookHarness, load: Load, result: WebhookResult, quick: bool) -> None:
    for victim in _victims(h, quick):
        result.kills.append(h.kill(victim))
    h.wait_serving()
    time.sleep(2.0)
    for k in result.kills:
        with h._ep_lock:
            k.not_ready_at = h.endpoints[k.name].not_ready_at


def _sigterm(h: WebhookHarness, load: Load, result: WebhookResult, quick: bool) -> None:
    for victim in _victims(h, quick):
        h.signal(victim, signal.SIGTERM, expected="term")
        result.stops += 1
    h.wait_serving()
    time.sleep(2.0)


def _rotation(h: WebhookHarness, load: Load, result: WebhookResult, quick: bool) -> None:
    seen: dict[str, str] = {}
    until = time.monotonic() + (20.0 if quick else 40.0)
    while time.monotonic() < until:
        with contextlib.suppress(ApiError):
            data = h.client.get(SECRETS, SECRET, NAMESPACE).get("data") or {}
            for key, kind in (("tls.crt", "certificate"), ("ca.crt", "bundle")):
                value = str(data.get(key) or "")
                if key in seen and seen[key] != value:
                    result.rotations[kind] += 1
                seen[key] = value
        time.sleep(0.1)


SCENARIOS: dict[str, Callable[[WebhookHarness, Load, WebhookResult, bool], None]] = {
    "kill9-serving": _kill9,
    "sigterm-rolling": _sigterm,
    "rotation-under-load": _rotation,
}
SWITCHES = {
    "kill9-serving": "e2e.leaderonly",
    "sigterm-rolling": "shutdownDelay: 0",  # no drain: the listener closes at SIGTERM
    "rotation-under-load": "e2e.oneshotrotation",
}


@contextlib.contextmanager
def _keep_alive(on: bool) -> Iterator[None]:
    """The local server's idle webhook connections: kept (kube's) or none (a handshake
    per review)."""
    saved = webhook_client.MAX_IDLE_PER_HOST
    webhook_client.MAX_IDLE_PER_HOST = saved if on else 0  # type: ignore[misc]
    try:
        yield
    finally:
        webhook_client.MAX_IDLE_PER_HOST = saved  # type: ignore[misc]


def run_webhook_scenario(
    name: str, workdir: Path, *, switch: bool = False, quick: bool = False
) -> WebhookResult:
    """Run scenario ``name`` once (``switch``: with its test-only switch; ``quick``:
    fewer faults, for the test suite)."""
    scenario = SCENARIOS[name]
    rotation = name == "rotation-under-load"
    label = SWITCHES[name] if switch else ""
    module = label if label.startswith("e2e.") else ""
    result = WebhookResult(name, label)
    workdir.mkdir(parents=True, exist_ok=True)
    with (
        _keep_alive(not rotation),
        WebhookHarness(
            workdir, rotation=rotation, module=module, drain=not (switch and not module)
        ) as h,
    ):
        workers = 16
        load = Load(h.load_client(workers), RATE, workers).start()
        try:
            scenario(h, load, result, quick)
        finally:
            load.stop()
            load.client.close()
        result.seconds = load.stopped - load.started
        _judge(result, load.outcomes, result.kills)
        if not load.outcomes:
            result.notes.append("no create was sent")
        if rotation and not switch and result.rotations["bundle"] < 2:
            result.notes.append(f"too few CA rotations: {dict(result.rotations)}")
    return result


# -- the report ---------------------------------------------------------------------------


def _row(name: str, switch: str, results: list[WebhookResult]) -> str:
    sent = sum(r.sent for r in results)
    seconds = sum(r.seconds for r in results)
    explained = [o for r in results for o in r.explained]
    unexplained = [o for r in results for o in r.unexplained]
    why = Counter(_kind(o.message) for o in unexplained)
    rotations: Counter[str] = Counter()
    for r in results:
        rotations.update(r.rotations)
    p99 = statistics.median(r.percentile(0.99) for r in results) * 1000
    if results[0].kills:
        faults = f"{sum(len(r.kills) for r in results)} kill -9"
    elif results[0].stops:
        faults = f"{sum(r.stops for r in results)} SIGTERM"
    else:
        faults = f"{rotations['certificate']} certificates, {rotations['bundle']} bundle changes"
    return (
        f"| {name} | {switch or '-'} | {len(results)} | {faults} | {sent} | "
        f"{sent / seconds:.0f} | {sum(r.created for r in results)} | "
        f"{sum(r.denied for r in results)} | {sum(len(r.unreviewed) for r in results)} | "
        f"{len(explained)} | **{len(unexplained)}**"
        f"{' (' + ', '.join(f'{k}: {v}' for k, v in why.most_common()) + ')' if why else ''} | "
        f"{p99:.1f} |"
    )


HEADER = (
    "| scenario | test-only switch | runs | faults | creates | creates/s | created | "
    "denied | unreviewed | failed, explained | failed, unexplained | p99 ms |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.webhookchaos")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    parser.add_argument("--leader-only-runs", type=int, default=0)
    parser.add_argument("--one-shot-runs", type=int, default=0)
    parser.add_argument("--no-drain-runs", type=int, default=0)
    parser.add_argument("--workdir", default="/tmp/overseer-webhook-chaos")
    args = parser.parse_args(argv)
    rows = [HEADER]
    for name in args.scenario or sorted(SCENARIOS):
        for switch, runs in (
            (False, args.runs),
            (
                True,
                {
                    "kill9-serving": args.leader_only_runs,
                    "sigterm-rolling": args.no_drain_runs,
                    "rotation-under-load": args.one_shot_runs,
                }[name],
            ),
        ):
            results = []
            for i in range(runs):
                workdir = Path(args.workdir) / f"{name}{'-switch' if switch else ''}-{i}"
                r = run_webhook_scenario(name, workdir, switch=switch)
                results.append(r)
                print(
                    f"{name}{' (' + r.switch + ')' if switch else ''} run {i}: {r.sent} sent "
                    f"({r.rate:.0f}/s), {len(r.explained)} explained, "
                    f"{len(r.unexplained)} unexplained {dict(r.why())}, "
                    f"{len(r.unreviewed)} unreviewed, kills "
                    f"{[(k.name, k.leader) for k in r.kills]}, rotations {dict(r.rotations)} "
                    f"{r.notes}",
                    flush=True,
                )
            if results:
                rows.append(_row(name, SWITCHES[name] if switch else "", results))
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark ``podport-burst``: pods created in a burst → seconds until every one has its
LogicalPort and annotations (DESIGN.md §4.2, §6), and the controller's cost per pod.

The controller runs in the harness process (the API server is a separate process).
"""

from __future__ import annotations

import threading
import time
import uuid

from bench.registry import Metrics, Run, benchmark
from bench.workload import NO_SCHEDULER, run_parallel
from controllers.podport import Network, PodPortConfig
from controllers.podport.crd import LOGICAL_PORTS, install_crd
from manager import ControllerSettings, KubeClient, Manager, ManagerOptions
from manager.client import ClientOptions
from manager.plugins import PluginContext, load_path

PODS = 2_000
WORKERS = 4
QPS = 1000.0  # the default 20 QPS bounds 2 writes per pod (port, annotation) to ~10 pods/s
BURST = 2000
WRITERS = 4
TIMEOUT = 600.0
LABEL = "network.overseer.io/network"


def _pod(i: int) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"p-{i:05d}"},
        "spec": {
            "schedulerName": NO_SCHEDULER,  # stays Pending on a real cluster (bench.workload)
            "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.9"}],
        },
    }


def _count(client: KubeClient, net: str) -> int:
    return len(client.list(LOGICAL_PORTS, label_selector=f"{LABEL}={net}")["items"])


def _wait_ports(client: KubeClient, net: str, n: int, deadline: float) -> float:
    while time.monotonic() < deadline:
        if _count(client, net) >= n:
            return time.time()
        time.sleep(0.1)
    raise RuntimeError(f"only {_count(client, net)} of {n} ports after the timeout")


class _Running:
    def __init__(self, kubeconfig: str, ns: str, net: str) -> None:
        self.client = KubeClient.from_kubeconfig(
            kubeconfig, options=ClientOptions(qps=QPS, burst=BURST)
        )
        self.mgr = Manager(
            self.client,
            ManagerOptions(
                leader_election=False,
                metrics_bind_address="0",
                health_probe_bind_address="0",
                namespace=ns,
            ),
        )
        config = PodPortConfig(
            networks=(Network(name=net, cidr="10.90.0.0/16"),), default_network=net
        )
        plugin = load_path("podport", "controllers.podport:PodPortPlugin")
        ctx = PluginContext("podport", config, ControllerSettings(workers=WORKERS), self.mgr)
        plugin.setup(self.mgr, ctx)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.mgr.run, args=(self.stop,), name="bench-mgr")

    def __enter__(self) -> _Running:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(60)
        self.mgr.join(60)
        self.client.close()


@benchmark(
    "podport-burst",
    describe=f"""
**burst**: {PODS:,} pods are created by {WRITERS} writer threads while the podport controller
runs ({WORKERS} workers, client limited to {QPS:g} QPS so the figure is the controller's and
the API server's); **burst_seconds** runs from the first create until every pod has its
LogicalPort (polled by LIST). **backlog**: the controller is stopped, another {PODS:,} pods
are created, and a fresh controller starts: **backlog_seconds** until all have ports, and
**cpu_ms_per_pod**, the process CPU (user + sys) in that time divided by the pods (informer
sync, reconcile, two writes per pod: the LogicalPort and the pod annotation).
""",
    units={
        "burst_seconds": "s",
        "create_seconds": "s",
        "backlog_seconds": "s",
        "cpu_ms_per_pod": "ms",
        "pods_per_second": "1/s",
    },
)
def podport_burst(run: Run) -> Metrics:
    target = run.target
    ns = target.new_namespace("bench-podport")
    net = f"b{uuid.uuid4().hex[:8]}"
    base = f"/api/v1/namespaces/{ns}/pods"
    admin = KubeClient.from_kubeconfig(
        target.kubeconfig, options=ClientOptions(qps=QPS, burst=BURST)
    )
    try:
        install_crd(admin)
        with _Running(target.kubeconfig, ns, net):
            time.sleep(1.0)  # caches synced
            started = time.time()
            create_seconds, _ = run_parallel(
                PODS,
                WRITERS,
                lambda i: target.raw.json("POST", base, _pod(i)),
                deadline=time.monotonic() + TIMEOUT,
            )
            burst_done = _wait_ports(admin, net, PODS, time.monotonic() + TIMEOUT)
        run_parallel(
            PODS,
            WRITERS,
            lambda i: target.raw.json("POST", base, _pod(PODS + i)),
            deadline=time.monotonic() + TIMEOUT,
        )
        cpu0, wall0 = time.process_time(), time.time()
        with _Running(target.kubeconfig, ns, net):
            backlog_done = _wait_ports(admin, net, 2 * PODS, time.monotonic() + TIMEOUT)
            cpu = time.process_time() - cpu0
        burst_seconds = burst_done - started
        return {
            "burst_seconds": burst_seconds,
            "create_seconds": create_seconds,
            "pods_per_second": PODS / burst_seconds,
            "backlog_seconds": backlog_done - wall0,
            "cpu_ms_per_pod": 1000 * cpu / PODS,
        }
    finally:
        target.delete_namespace(ns)
        admin.delete_collection(LOGICAL_PORTS, label_selector=f"{LABEL}={net}")
        admin.close()

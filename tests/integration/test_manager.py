"""The manager end to end against an API server: start order, probes, metrics, spans,
graceful stop with Lease release, and lost leadership."""

from __future__ import annotations

import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from manager.client import KubeClient
from manager.events import EventBroadcaster
from manager.manager import Manager, ManagerOptions
from manager.reconcile import Request, Result
from manager.resources import builtin

CONFIGMAPS = builtin("v1", "configmaps")
LEASES = builtin("coordination.k8s.io/v1", "leases")


@pytest.fixture
def client(kubeconfig_path: str) -> Iterator[KubeClient]:
    with KubeClient.from_kubeconfig(kubeconfig_path) as c:
        yield c


@pytest.fixture(scope="module")
def spans() -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


def _options(namespace: str, **overrides: Any) -> ManagerOptions:
    base: dict[str, Any] = {
        "name": "test-manager",
        "metrics_bind_address": "127.0.0.1:0",
        "health_probe_bind_address": "127.0.0.1:0",
        "leader_election_id": f"lease-{uuid.uuid4().hex[:6]}",
        "leader_election_namespace": namespace,
        "lease_duration": 2.0,
        "renew_deadline": 1.5,
        "retry_period": 0.3,
        "namespace": namespace,
        "graceful_shutdown_timeout": 10.0,
    }
    base.update(overrides)
    return ManagerOptions(**base)


class Recorder:
    """A reconciler that records what it saw and can be held inside reconcile."""

    def __init__(self, mgr: Manager, namespace: str) -> None:
        self.lister = mgr.lister(CONFIGMAPS, namespace=namespace)
        self.namespace = namespace
        self.seen: list[Request] = []
        self.cached_at_first: int | None = None
        self.entered = threading.Event()
        self.release = threading.Event()
        self.release.set()
        self.done = threading.Event()
        self.lock = threading.Lock()

    def reconcile(self, request: Request) -> Result:
        with self.lock:
            if self.cached_at_first is None:
                self.cached_at_first = len(self.lister.list(self.namespace))
            self.seen.append(request)
        self.entered.set()
        assert self.release.wait(30)
        self.done.set()
        return Result()


def _run(mgr: Manager, stop: threading.Event) -> tuple[threading.Thread, dict[str, int]]:
    out: dict[str, int] = {}
    t = threading.Thread(target=lambda: out.setdefault("rc", mgr.run(stop)), name="test-manager")
    t.start()
    return t, out


def _wait(predicate: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def _get(address: tuple[str, int] | None, path: str) -> tuple[int, str]:
    assert address is not None
    try:
        with urllib.request.urlopen(f"http://{address[0]}:{address[1]}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_controllers_start_after_sync_and_endpoints_report(
    client: KubeClient, namespace: str, spans: InMemorySpanExporter
) -> None:
    for i in range(30):
        client.create(CONFIGMAPS, {"metadata": {"name": f"cm-{i}"}}, namespace)
    mgr = Manager(client, _options(namespace))
    rec = Recorder(mgr, namespace)
    mgr.controller("recorder", rec, workers=2).for_(CONFIGMAPS).complete()
    stop = threading.Event()
    thread, out = _run(mgr, stop)
    try:
        assert _wait(lambda: len(rec.seen) >= 31), rec.seen  # 30 + kube-root-ca.crt
        # The first reconcile already saw the whole cache: controllers start after sync.
        assert rec.cached_at_first is not None and rec.cached_at_first >= 31
        assert mgr.is_leader()
        status, body = _get(mgr.health_probe_address, "/healthz")
        assert (status, body) == (200, "ok")
        status, body = _get(mgr.health_probe_address, "/readyz?verbose")
        assert status == 200 and "[+]informers-synced ok" in body
        status, body = _get(mgr.metrics_address, "/metrics")
        assert status == 200
        for needle in (
            'controller_runtime_reconcile_total{controller="recorder",result="success"}',
            'workqueue_adds_total{controller="recorder",name="recorder"}',
            "controller_runtime_reconcile_time_seconds_count",
            'controller_runtime_max_concurrent_reconciles{controller="recorder"} 2.0',
            "controller_runtime_active_workers",
            f'leader_election_master_status{{name="{mgr.options.leader_election_id}"}} 1.0',
            "rest_client_requests_total",
            "workqueue_depth",
        ):
            assert needle in body, needle
        reconciles = [s for s in spans.get_finished_spans() if s.name == "reconcile"]
        mine = [s for s in reconciles if (s.attributes or {}).get("controller") == "recorder"]
        assert mine, "no reconcile spans"
        attrs = mine[0].attributes or {}
        assert attrs["k8s.namespace.name"] == namespace
        assert attrs["result"] == "success"
    finally:
        stop.set()
        thread.join(30)
    assert out["rc"] == 0
    assert mgr.join(10)


def test_graceful_stop_finishes_inflight_reconcile_and_releases_lease(
    client: KubeClient, namespace: str
) -> None:
    mgr = Manager(client, _options(namespace))
    rec = Recorder(mgr, namespace)
    rec.release.clear()
    mgr.controller("slow", rec).for_(CONFIGMAPS).complete()
    stop = threading.Event()
    thread, out = _run(mgr, stop)
    try:
        assert rec.entered.wait(15), "no reconcile started"
        stop.set()
        thread.join(0.5)
        assert thread.is_alive(), "manager returned while a reconcile was in flight"
        lease = client.get(LEASES, mgr.options.leader_election_id, namespace)
        assert lease["spec"]["holderIdentity"], "released before the reconcile finished"
        rec.release.set()
        thread.join(30)
    finally:
        rec.release.set()
        stop.set()
        thread.join(30)
    assert out["rc"] == 0
    assert rec.done.is_set()
    lease = client.get(LEASES, mgr.options.leader_election_id, namespace)
    assert lease["spec"].get("holderIdentity", "") == ""
    assert lease["spec"]["leaseDurationSeconds"] == 1
    assert mgr.join(10)


@pytest.mark.local_only
def test_lost_lease_stops_at_once_and_returns_nonzero(
    client: KubeClient, namespace: str, local_server: Any
) -> None:
    mgr = Manager(client, _options(namespace))
    rec = Recorder(mgr, namespace)
    mgr.controller("doomed", rec).for_(CONFIGMAPS).complete()
    stop = threading.Event()
    thread, out = _run(mgr, stop)
    try:
        assert _wait(mgr.is_leader, 15)
        local_server.faults.fail_next(10_000, 500, verb="update", resource="leases")
        started = time.monotonic()
        thread.join(10)
        elapsed = time.monotonic() - started
        assert not thread.is_alive(), "manager kept running after losing the lease"
        assert out["rc"] == 1
        # renew deadline 1.5 s, plus at most one retry period to notice
        assert elapsed < 5, elapsed
        assert not mgr.is_leader()
    finally:
        local_server.faults.clear()
        stop.set()
        thread.join(10)
    assert mgr.join(10)


def test_standby_does_not_reconcile_while_another_leads(client: KubeClient, namespace: str) -> None:
    lease_id = f"lease-{uuid.uuid4().hex[:6]}"
    first = Manager(client, _options(namespace, leader_election_id=lease_id))
    rec1 = Recorder(first, namespace)
    first.controller("ha", rec1).for_(CONFIGMAPS).complete()
    stop1 = threading.Event()
    t1, out1 = _run(first, stop1)
    second = Manager(client, _options(namespace, leader_election_id=lease_id))
    rec2 = Recorder(second, namespace)
    second.controller("ha", rec2).for_(CONFIGMAPS).complete()
    stop2 = threading.Event()
    t2, out2 = _run(second, stop2)
    try:
        assert _wait(lambda: first.is_leader() or second.is_leader(), 15)
        _, standby, rec_l, rec_s = (
            (first, second, rec1, rec2) if first.is_leader() else (second, first, rec2, rec1)
        )
        assert _wait(lambda: bool(rec_l.seen), 10)
        # the standby has warm caches (ready) but reconciles nothing
        assert _wait(lambda: _get(standby.health_probe_address, "/readyz")[0] == 200, 10)
        assert not standby.is_leader()
        assert rec_s.seen == []
    finally:
        stop1.set()
        stop2.set()
        t1.join(30)
        t2.join(30)
    assert out1["rc"] == 0 and out2["rc"] == 0
    assert first.join(10) and second.join(10)


class Killed(BaseException):
    """What no handler of the Event sender catches: it ends the thread (test only)."""


def test_healthz_fails_while_the_event_sender_is_gone_but_not_while_stopping(
    client: KubeClient, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sender that ended by itself is a fault worth a restart (reconciles record Events
    nobody sends); a manager draining in a graceful stop does not fail its probe."""

    def killed(self: EventBroadcaster, *args: Any) -> None:
        raise Killed("injected")

    monkeypatch.setattr(EventBroadcaster, "_send_batch", killed)
    about = client.create(CONFIGMAPS, {"metadata": {"name": "about"}}, namespace)
    about.update(apiVersion="v1", kind="ConfigMap")
    mgr = Manager(client, _options(namespace))
    rec = Recorder(mgr, namespace)
    rec.release.clear()
    mgr.controller("held", rec).for_(CONFIGMAPS).complete()
    stop = threading.Event()
    thread, out = _run(mgr, stop)
    try:
        assert rec.entered.wait(15), "no reconcile started"
        status, body = _get(mgr.health_probe_address, "/healthz?verbose")
        assert status == 200 and "[+]event-sender ok" in body, body

        mgr.events.recorder().event(about, "Normal", "Fatal", "kills the sender")
        assert _wait(lambda: _get(mgr.health_probe_address, "/healthz")[0] == 500)
        status, body = _get(mgr.health_probe_address, "/healthz?verbose")
        assert "[-]event-sender failed: the event sender has ended: Killed: injected" in body
        assert "[+]informers ok" in body and "[+]leader-election ok" in body, body

        stop.set()  # a reconcile is held: the manager drains
        assert _wait(lambda: mgr.role() == "stopping")
        status, body = _get(mgr.health_probe_address, "/healthz?verbose")
        assert status == 200 and "[+]event-sender ok" in body, body
    finally:
        rec.release.set()
        stop.set()
        thread.join(30)
    assert out["rc"] == 0
    assert mgr.join(10)

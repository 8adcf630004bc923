"""Exactly one leader writes: the two-leader windows of issue 12, each reproduced, and the
write fence that refuses a write a replica may no longer make.

Managers run in threads against the API server (the local one, or a real cluster with
``OVERSEER_TEST_KUBECONFIG``) with short Lease timings (2 s / 1.5 s / 0.3 s). A "thief"
takes the Lease over by writing it the way another candidate would; that works on any
server. Tests needing the local server's fault injection are marked ``local_only``.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from manager.client import ClientOptions, KubeClient, StopAwareSleep
from manager.errors import Conflict, NotFound, TooManyRequests, WriteFenced
from manager.leaderelection import LeaderElector
from manager.manager import Manager, ManagerOptions
from manager.reconcile import Request, Result
from manager.resources import Resource, builtin
from tests.integration.running import ManagerThread

CONFIGMAPS = builtin("v1", "configmaps")
LEASES = builtin("coordination.k8s.io/v1", "leases")
UNSERVED = Resource("unserved.overseer.io", "v1", "widgets", "Widget", namespaced=True)
LEASE, RENEW, RETRY = 2.0, 1.5, 0.3


@pytest.fixture
def client(kubeconfig_path: str) -> Iterator[KubeClient]:
    with KubeClient.from_kubeconfig(kubeconfig_path) as c:
        yield c


def _options(namespace: str, **overrides: Any) -> ManagerOptions:
    base: dict[str, Any] = {
        "name": "test-one-leader",
        "metrics_bind_address": "0",
        "health_probe_bind_address": "127.0.0.1:0",
        "leader_election_id": f"lease-{uuid.uuid4().hex[:6]}",
        "leader_election_namespace": namespace,
        "lease_duration": LEASE,
        "renew_deadline": RENEW,
        "retry_period": RETRY,
        "namespace": namespace,
        "graceful_shutdown_timeout": 10.0,
    }
    base.update(overrides)
    return ManagerOptions(**base)


class Blocker:
    """Holds the reconcile of ConfigMap ``stuck`` until :attr:`release` is set, then
    writes to it through the manager's client and records what the write met."""

    def __init__(self, mgr: Manager, namespace: str) -> None:
        self.client = mgr.client
        self.namespace = namespace
        self.entered = threading.Event()
        self.release = threading.Event()
        self.done = threading.Event()
        self.outcome: BaseException | str | None = None
        self.reconciles = 0

    def reconcile(self, request: Request) -> Result:
        self.reconciles += 1
        if request.name != "stuck" or self.done.is_set():
            return Result()
        self.entered.set()
        assert self.release.wait(60)
        try:
            self.client.patch(
                CONFIGMAPS, "stuck", {"data": {"written": "late"}}, namespace=self.namespace
            )
            self.outcome = "written"
        except BaseException as exc:
            self.outcome = exc
            raise
        finally:
            self.done.set()
        return Result()


def _wait(predicate: Callable[[], object], timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def _holder(client: KubeClient, mgr: Manager) -> dict[str, Any]:
    """The Lease's spec."""
    opts = mgr.options
    lease = client.get(LEASES, opts.leader_election_id, opts.leader_election_namespace)
    return dict(lease.get("spec") or {})


def _steal(client: KubeClient, mgr: Manager) -> None:
    """Take the Lease over as another candidate would (rv-checked, retried on races)."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    for _ in range(50):
        lease = client.get(
            LEASES, mgr.options.leader_election_id, mgr.options.leader_election_namespace
        )
        lease["spec"] = {
            **(lease.get("spec") or {}),
            "holderIdentity": "thief",
            "leaseDurationSeconds": 60,
            "acquireTime": now,
            "renewTime": now,
        }
        try:
            client.replace(LEASES, lease)
            return
        except Conflict:
            continue
    raise AssertionError("could not take the Lease over")


def _http(address: tuple[str, int] | None, path: str) -> tuple[int, str]:
    if address is None:  # not listening yet
        return 0, ""
    try:
        with urllib.request.urlopen(f"http://{address[0]}:{address[1]}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _stuck_manager(client: KubeClient, namespace: str, **options: Any) -> tuple[Manager, Blocker]:
    client.create(CONFIGMAPS, {"metadata": {"name": "stuck"}}, namespace)
    mgr = Manager(client, _options(namespace, **options))
    blocker = Blocker(mgr, namespace)
    mgr.controller("stuck", blocker).for_(CONFIGMAPS).complete()
    return mgr, blocker


# -- defect 1: the Lease released while a reconcile still runs ---------------------------


def test_a_drain_that_overruns_keeps_the_lease_and_fences_the_stuck_reconcile(
    client: KubeClient, namespace: str
) -> None:
    mgr, blocker = _stuck_manager(client, namespace, graceful_shutdown_timeout=1.0)
    running = ManagerThread(mgr)
    try:
        assert blocker.entered.wait(20), "the reconcile never started"
        stopped_at = time.monotonic()
        running.stop.set()
        assert running.ended_within(5), "run() did not return after the timeout"
        assert running.rc == 1
        assert time.monotonic() - stopped_at < 1.0 + 1.0
        spec = _holder(client, mgr)
        assert spec["holderIdentity"] == mgr.identity, "released while a reconcile runs"
        assert spec["leaseDurationSeconds"] == 2  # as written by the leader, not the 1 s release
        assert not mgr.is_leader()
        blocker.release.set()  # the stuck reconcile goes on: its write must not leave
        assert blocker.done.wait(10)
        assert isinstance(blocker.outcome, WriteFenced), blocker.outcome
        cm = client.get(CONFIGMAPS, "stuck", namespace)
        assert "written" not in (cm.get("data") or {})
    finally:
        running.close(blocker.release)


def test_a_clean_stop_releases_the_lease_and_is_no_longer_leader(
    client: KubeClient, namespace: str
) -> None:
    mgr, blocker = _stuck_manager(client, namespace)
    running = ManagerThread(mgr)
    try:
        assert blocker.entered.wait(20)
        assert mgr.is_leader()
        running.stop.set()
        blocker.release.set()
        assert running.ended_within(10)
        assert running.rc == 0
        assert blocker.outcome == "written"  # finished within the drain, while leading
        spec = _holder(client, mgr)
        assert (spec.get("holderIdentity") or "", spec["leaseDurationSeconds"]) == ("", 1)
        assert not mgr.is_leader()
        with pytest.raises(WriteFenced):
            mgr.client.patch(CONFIGMAPS, "stuck", {"data": {"after": "stop"}}, namespace=namespace)
    finally:
        running.close(blocker.release)


# -- defect 2: the Lease lost during the drain -------------------------------------------


def test_losing_the_lease_during_the_drain_stops_at_once(
    client: KubeClient, namespace: str
) -> None:
    mgr, blocker = _stuck_manager(client, namespace, graceful_shutdown_timeout=30.0)
    running = ManagerThread(mgr)
    try:
        assert blocker.entered.wait(20)
        running.stop.set()
        assert not running.ended_within(0.5), "returned while a reconcile was in flight"
        stolen_at = time.monotonic()
        _steal(client, mgr)
        assert running.ended_within(RENEW + 1.0), "kept draining after the Lease was lost"
        assert running.rc == 1
        assert time.monotonic() - stolen_at < RENEW + 1.0
        assert not mgr.is_leader()
        assert _holder(client, mgr)["holderIdentity"] == "thief"  # never written over
        blocker.release.set()
        assert blocker.done.wait(10)
        assert isinstance(blocker.outcome, WriteFenced), blocker.outcome
    finally:
        running.close(blocker.release)


# -- defect 3: a failed election thread --------------------------------------------------


@pytest.fixture
def failing_election(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Once set, the election's next round raises OSError (as a credential hook did)."""
    broken = threading.Event()
    original = LeaderElector._try_acquire_or_renew

    def round_(self: LeaderElector, deadline: float | None) -> bool:
        if broken.is_set():
            raise OSError("token file unreadable")
        return original(self, deadline)

    monkeypatch.setattr(LeaderElector, "_try_acquire_or_renew", round_)
    return broken


def test_an_election_failure_while_leading_is_a_lost_lease(
    client: KubeClient, namespace: str, failing_election: threading.Event
) -> None:
    mgr, blocker = _stuck_manager(client, namespace)
    running = ManagerThread(mgr)
    try:
        assert blocker.entered.wait(20)
        failing_election.set()
        assert running.ended_within(RETRY + 1.0), "kept leading without an election"
        assert running.rc == 1
        assert not mgr.is_leader()
        blocker.release.set()
        assert blocker.done.wait(10)
        assert isinstance(blocker.outcome, WriteFenced), blocker.outcome
    finally:
        running.close(blocker.release)


def test_an_election_failure_in_a_standby_ends_it(
    client: KubeClient, namespace: str, failing_election: threading.Event
) -> None:
    failing_election.set()
    mgr = Manager(client, _options(namespace))
    running = ManagerThread(mgr)
    try:
        assert running.ended_within(5), "a standby that cannot compete kept running"
        assert running.rc == 1
    finally:
        running.close()


def test_healthz_fails_when_the_election_thread_is_gone(
    client: KubeClient,
    namespace: str,
    failing_election: threading.Event,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The probe is a safety net of its own: even a manager that failed to react to a dead
    election thread is restarted by its liveness probe."""
    monkeypatch.setattr(Manager, "_on_lost", lambda self, reason: None)
    failing_election.set()
    mgr = Manager(client, _options(namespace))
    running = ManagerThread(mgr)
    try:
        assert _wait(lambda: mgr.health_probe_address is not None)
        assert _wait(lambda: _http(mgr.health_probe_address, "/healthz")[0] == 500, 10)
        status, body = _http(mgr.health_probe_address, "/healthz?verbose")
        assert status == 500, body
        assert "[-]leader-election failed: the leader election thread has ended" in body, body
        assert "[+]informers ok" in body
    finally:
        running.close()


# -- defect 4: renew rounds and the controllers' rate limiter ---------------------------


def test_a_low_client_qps_does_not_starve_the_election(
    kubeconfig_path: str, namespace: str
) -> None:
    slow = ClientOptions(qps=1.0, burst=1)
    with KubeClient.from_kubeconfig(kubeconfig_path, options=slow) as client:
        mgr = Manager(client, _options(namespace))
        running = ManagerThread(mgr)
        try:
            assert _wait(mgr.is_leader, 15)
            # 2 requests per 0.3 s round: at 1 qps a shared or copied limiter loses the Lease.
            assert not running.ended_within(4 * LEASE), "lost the Lease to its own rate limiter"
            assert mgr.is_leader()
        finally:
            running.close()
        assert running.rc == 0


# -- defect 5: a cold standby that lost the Lease while syncing --------------------------


def test_a_cold_standby_losing_the_lease_while_syncing_starts_nothing(
    client: KubeClient, namespace: str
) -> None:
    mgr = Manager(client, _options(namespace, warm_standby=False, cache_sync_timeout=60.0))
    blocker = Blocker(mgr, namespace)
    mgr.controller("cold", blocker).for_(CONFIGMAPS).complete()
    mgr.informer(UNSERVED)  # never syncs: the sync outlasts the Lease
    running = ManagerThread(mgr)
    try:
        assert _wait(lambda: _holder_or_none(client, mgr) == mgr.identity, 15)
        _steal(client, mgr)
        assert running.ended_within(RENEW + 1.5), "kept syncing after the Lease was lost"
        assert running.rc == 1
        assert blocker.reconciles == 0, "controllers started without the Lease"
    finally:
        running.close()


def _holder_or_none(client: KubeClient, mgr: Manager) -> str | None:
    try:
        return str(_holder(client, mgr).get("holderIdentity") or "")
    except NotFound:
        return None


# -- defect 6: Retry-After after SIGTERM -------------------------------------------------


@pytest.mark.local_only
def test_retry_after_is_honoured_while_stopping(kubeconfig_path: str, local_server: Any) -> None:
    stop = threading.Event()
    stop.set()  # SIGTERM came: a draining reconcile meets a 429
    sleep = StopAwareSleep(stop, grace=10.0)
    with KubeClient.from_kubeconfig(kubeconfig_path, retry_sleep=sleep) as client:
        local_server.faults.fail_next(1, 429, retry_after=1, verb="get", resource="namespaces")
        started = time.monotonic()
        client.get(builtin("v1", "namespaces"), "default")
        assert time.monotonic() - started >= 1.0, "retried before Retry-After"

    short = StopAwareSleep(stop, grace=0.5)  # the budget is shorter than Retry-After
    with KubeClient.from_kubeconfig(kubeconfig_path, retry_sleep=short) as client:
        local_server.faults.fail_next(1, 429, retry_after=2, verb="get", resource="namespaces")
        before = local_server.request_count("get", "namespaces")
        with pytest.raises(TooManyRequests):
            client.get(builtin("v1", "namespaces"), "default")
        assert local_server.request_count("get", "namespaces") == before + 1


# -- write fencing --------------------------------------------------------------------


def test_a_standby_refuses_every_controller_write(client: KubeClient, namespace: str) -> None:
    lease_id = f"lease-{uuid.uuid4().hex[:6]}"
    leader = Manager(client, _options(namespace, leader_election_id=lease_id))
    first = ManagerThread(leader)
    try:
        assert _wait(leader.is_leader, 15)
        standby = Manager(client, _options(namespace, leader_election_id=lease_id))
        # set-up writes (before run) are allowed: plugins install what they need there
        standby.client.create(CONFIGMAPS, {"metadata": {"name": "setup"}}, namespace)
        second = ManagerThread(standby)
        try:
            assert _wait(lambda: _http(standby.health_probe_address, "/readyz")[0] == 200)
            with pytest.raises(WriteFenced):
                standby.client.create(CONFIGMAPS, {"metadata": {"name": "nope"}}, namespace)
            with pytest.raises(WriteFenced):
                standby.client.delete(CONFIGMAPS, "setup", namespace)
            standby.client.get(CONFIGMAPS, "setup", namespace)  # reads are not fenced
            leader.client.patch(
                CONFIGMAPS, "setup", {"data": {"by": "leader"}}, namespace=namespace
            )
        finally:
            second.close()
        assert second.rc == 0
    finally:
        first.close()
    with pytest.raises(NotFound):
        client.get(CONFIGMAPS, "nope", namespace)


@pytest.mark.local_only
def test_a_write_unanswered_when_the_permission_ends_is_abandoned_and_not_applied(
    client: KubeClient, namespace: str, local_server: Any
) -> None:
    """The fence caps a write's timeout; the client then closes its connection, and the
    API server (like kube-apiserver, whose request context a client's close cancels)
    does not apply a request whose client has gone."""
    from manager.errors import Unavailable
    from manager.fencing import ValidityFence

    fence = ValidityFence(lambda: 0.3, reason="test", message="test")
    fenced_client = client.with_fence(fence)
    local_server.faults.set_latency(1.0)
    try:
        started = time.monotonic()
        with pytest.raises(Unavailable):
            fenced_client.create(CONFIGMAPS, {"metadata": {"name": "late"}}, namespace)
        assert time.monotonic() - started < 0.9
        time.sleep(1.5)  # the server has now read the request, and the close behind it
    finally:
        local_server.faults.clear()
    with pytest.raises(NotFound):
        client.get(CONFIGMAPS, "late", namespace)

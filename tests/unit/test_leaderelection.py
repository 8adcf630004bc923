"""Lease leader election against the local API server: acquire, renew, take over, races,
the renew deadline, release. A FakeClock decides every timing except in the two tests
that measure real takeover and hung-request behaviour."""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from manager.client import ClientOptions, JsonDict, KubeClient
from manager.clock import Clock, FakeClock
from manager.errors import ApiError, Conflict
from manager.leaderelection import LeaderElectionConfig, LeaderElector, default_identity
from manager.metrics import REGISTRY
from manager.resources import builtin

LEASES = builtin("coordination.k8s.io/v1", "leases")
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
REAL = 5.0  # real seconds any single wait in a test may take at most


@pytest.fixture
def client(kubeconfig_path: str) -> Iterator[KubeClient]:
    with KubeClient.from_kubeconfig(kubeconfig_path) as c:
        yield c


def make_config(namespace: str, identity: str, lease: str, **timings: Any) -> LeaderElectionConfig:
    return LeaderElectionConfig(lease_name=lease, namespace=namespace, identity=identity, **timings)


def master_status(lease: str) -> float | None:
    return REGISTRY.get_sample_value("leader_election_master_status", {"name": lease})


class Candidate:
    """One elector running in its own thread, with its callbacks recorded."""

    def __init__(
        self,
        client: KubeClient,
        config: LeaderElectionConfig,
        clock: Clock | None = None,
    ) -> None:
        self.clock = clock
        self.stop = threading.Event()
        self.started = threading.Event()
        self.stopped = threading.Event()
        self.new_leaders: list[str] = []
        self.result: bool | None = None
        self.elector = LeaderElector(
            client,
            config,
            on_started_leading=self.started.set,
            on_stopped_leading=self.stopped.set,
            on_new_leader=self.new_leaders.append,
            clock=clock,
            rand=lambda: 0.0,
        )
        self.thread = threading.Thread(
            target=self._run, name=f"test-elector/{config.identity}", daemon=False
        )

    def _run(self) -> None:
        self.result = self.elector.run(self.stop)

    def start(self) -> Candidate:
        self.thread.start()
        return self

    def parked_at(self, when: float) -> None:
        """Wait (real time) until the elector sleeps on its FakeClock until ``when``."""
        assert isinstance(self.clock, FakeClock)
        assert self.clock.wait_for_waiters(1, deadline=when, timeout=REAL), (
            f"elector not parked at {when}: {self.clock.waiter_deadlines()}"
        )

    def finished(self) -> bool | None:
        self.thread.join(REAL)
        assert not self.thread.is_alive(), "elector did not return"
        return self.result

    def shutdown(self) -> None:
        """Stop and join, moving a fake clock so that its sleep ends (cleanup path)."""
        self.stop.set()
        if not self.thread.is_alive() and self.thread.ident is None:
            return
        deadline = time.monotonic() + REAL
        while self.thread.is_alive() and time.monotonic() < deadline:
            if isinstance(self.clock, FakeClock) and self.clock.has_waiters():
                self.clock.step(1.0)
            self.thread.join(0.02)


@pytest.fixture
def candidates() -> Iterator[Callable[..., Candidate]]:
    made: list[Candidate] = []

    def make(client: KubeClient, config: LeaderElectionConfig, clock: Clock | None) -> Candidate:
        candidate = Candidate(client, config, clock)
        made.append(candidate)
        return candidate

    yield make
    for candidate in made:
        candidate.shutdown()


@pytest.fixture
def lease_name() -> str:
    return f"lease-{uuid.uuid4().hex[:8]}"


def read_lease(client: KubeClient, namespace: str, name: str) -> JsonDict:
    return client.get(LEASES, name, namespace)


def spec_of(client: KubeClient, namespace: str, name: str) -> JsonDict:
    spec = read_lease(client, namespace, name)["spec"]
    assert isinstance(spec, dict)
    return spec


def put_lease(client: KubeClient, namespace: str, name: str, holder: str, renew: str) -> JsonDict:
    """Create or overwrite the Lease as another holder would write it."""
    spec = {
        "holderIdentity": holder,
        "leaseDurationSeconds": 15,
        "acquireTime": "2026-01-01T00:00:00.000000Z",
        "renewTime": renew,
        "leaseTransitions": 3,
    }
    try:
        current = read_lease(client, namespace, name)
    except ApiError:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }
        return client.create(LEASES, body, namespace)
    return client.replace(LEASES, {**current, "spec": spec}, namespace)


# -- configuration ------------------------------------------------------------------------


def test_config_defaults_are_client_go_s() -> None:
    config = LeaderElectionConfig(lease_name="l", namespace="ns", identity="me")
    assert (config.lease_duration, config.renew_deadline, config.retry_period) == (15.0, 10.0, 2.0)
    assert (config.jitter, config.release_on_cancel) == (1.2, True)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"lease_duration": 10.0},
            r"lease_duration \(10.0 s\) must be greater than renew_deadline",
        ),
        ({"renew_deadline": 2.4}, r"renew_deadline \(2.4 s\) must be greater than jitter \* "),
        ({"retry_period": 0.0}, r"retry_period: must be a positive number of seconds, got 0.0"),
        ({"lease_duration": -1.0}, r"lease_duration: must be a positive number"),
        ({"jitter": 0.5}, r"jitter: must be a number >= 1.0, got 0.5"),
        ({"lease_name": ""}, r"lease_name: must be a non-empty string"),
        ({"namespace": " "}, r"namespace: must be a non-empty string"),
        ({"identity": ""}, r"identity: must be a non-empty string"),
    ],
)
def test_invalid_config_is_rejected_with_a_message(changes: dict[str, Any], message: str) -> None:
    fields: dict[str, Any] = {"lease_name": "l", "namespace": "ns", "identity": "me", **changes}
    with pytest.raises(ValueError, match=message):
        LeaderElectionConfig(**fields)


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(ValueError) as info:
        LeaderElectionConfig(lease_name="", namespace="", identity="me", retry_period=-2.0)
    text = str(info.value)
    assert "lease_name" in text and "namespace" in text and "retry_period" in text


def test_default_identity_is_the_pod_name_plus_a_random_suffix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POD_NAME", "overseer-7d9f")
    first, second = default_identity(), default_identity()
    assert re.fullmatch(r"overseer-7d9f_[0-9a-f]{8}", first)
    assert first != second
    monkeypatch.delenv("POD_NAME")
    assert re.fullmatch(r".+_[0-9a-f]{8}", default_identity())


def test_stop_before_acquiring_returns_true_without_callbacks(
    client: KubeClient, namespace: str, lease_name: str
) -> None:
    called: list[str] = []
    elector = LeaderElector(
        client,
        make_config(namespace, "a", lease_name),
        on_started_leading=lambda: called.append("started"),
        on_stopped_leading=lambda: called.append("stopped"),
        clock=FakeClock(),
    )
    stop = threading.Event()
    stop.set()
    assert elector.run(stop) is True
    assert called == [] and not elector.is_leader()


# -- acquire and renew --------------------------------------------------------------------


def test_acquires_a_fresh_lease_and_renews_it(
    client: KubeClient,
    namespace: str,
    lease_name: str,
    candidates: Callable[..., Candidate],
) -> None:
    clock = FakeClock()
    config = make_config(namespace, "a", lease_name, lease_duration=14.5)
    a = candidates(client, config, clock).start()
    assert a.started.wait(REAL)
    a.parked_at(2.0)  # the first renew round
    spec = spec_of(client, namespace, lease_name)
    assert spec["holderIdentity"] == "a"
    assert spec["leaseTransitions"] == 0
    assert spec["leaseDurationSeconds"] == 15  # 14.5 s, rounded up
    assert MICRO_TIME.match(spec["acquireTime"]) and spec["renewTime"] == spec["acquireTime"]
    assert a.elector.is_leader() and a.elector.leader() == "a"
    assert a.new_leaders == ["a"]
    assert master_status(lease_name) == 1.0
    version = read_lease(client, namespace, lease_name)["metadata"]["resourceVersion"]

    clock.step(2.0)
    a.parked_at(4.0)
    renewed = read_lease(client, namespace, lease_name)
    assert renewed["metadata"]["resourceVersion"] != version
    assert renewed["spec"]["renewTime"] > spec["renewTime"]
    assert renewed["spec"]["acquireTime"] == spec["acquireTime"]
    assert renewed["spec"]["leaseTransitions"] == 0
    assert renewed["spec"]["holderIdentity"] == "a"
    assert a.new_leaders == ["a"] and not a.stopped.is_set()


def test_a_standby_takes_over_only_after_a_full_lease_duration_without_change(
    client: KubeClient,
    namespace: str,
    lease_name: str,
    candidates: Callable[..., Candidate],
) -> None:
    put_lease(client, namespace, lease_name, "other", "2026-01-01T00:00:00.000000Z")
    clock = FakeClock()
    # b's own lease_duration (30 s) differs from the record's (15 s): the record's counts.
    config = make_config(namespace, "b", lease_name, lease_duration=30.0)
    b = candidates(client, config, clock).start()
    b.parked_at(2.0)
    assert b.new_leaders == ["other"] and b.elector.leader() == "other"

    # The holder keeps renewing (the record changes between b's rounds) for 30 s: > 15 s.
    for second in range(2, 32, 2):
        put_lease(client, namespace, lease_name, "other", f"2026-01-01T00:00:{second:02d}.000000Z")
        clock.step(2.0)
        b.parked_at(second + 2.0)
    assert not b.started.is_set() and not b.elector.is_leader()
    assert spec_of(client, namespace, lease_name)["holderIdentity"] == "other"

    # The holder stops. b saw the last change at t=30; 15 s must pass on b's clock.
    for now in range(34, 48, 2):  # rounds at t=32..44: 2..14 s without change
        clock.step(2.0)
        b.parked_at(float(now))
        assert not b.started.is_set(), f"took over at t={now - 2}, too early"
    clock.step(2.0)  # t=46: 16 s without change >= 15 s
    assert b.started.wait(REAL)
    spec = spec_of(client, namespace, lease_name)
    assert spec["holderIdentity"] == "b"
    assert spec["leaseTransitions"] == 4  # 3 + 1
    assert spec["leaseDurationSeconds"] == 30
    assert MICRO_TIME.match(spec["acquireTime"]) and spec["acquireTime"] == spec["renewTime"]
    assert spec["acquireTime"] != "2026-01-01T00:00:00.000000Z"
    assert b.new_leaders == ["other", "b"]


class GatedClient(KubeClient):
    """Holds its first replace until ``gate`` is set; records what that replace met."""

    def __init__(self, configuration: object, options: ClientOptions) -> None:
        super().__init__(configuration, options=options)
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.sent_version: str | None = None
        self.errors: list[ApiError] = []

    def replace(
        self,
        resource: Any,
        body: JsonDict,
        namespace: str | None = None,
        subresource: str | None = None,
        *,
        timeout: float | None = None,
    ) -> JsonDict:
        if not self.entered.is_set():
            self.sent_version = body["metadata"]["resourceVersion"]
            self.entered.set()
            assert self.gate.wait(REAL)
        try:
            return super().replace(resource, body, namespace, subresource, timeout=timeout)
        except ApiError as exc:
            self.errors.append(exc)
            raise


def test_two_candidates_racing_from_the_same_version_exactly_one_wins(
    client: KubeClient,
    kubeconfig_path: str,
    namespace: str,
    lease_name: str,
    candidates: Callable[..., Candidate],
) -> None:
    initial = put_lease(client, namespace, lease_name, "", "2026-01-01T00:00:00.000000Z")
    version = initial["metadata"]["resourceVersion"]
    configuration = k8s_client.Configuration()
    loader: Any = k8s_config  # untyped package
    loader.load_kube_config(config_file=kubeconfig_path, client_configuration=configuration)
    # Short, unretried and unthrottled: the elector uses this client as is.
    gated = GatedClient(configuration, ClientOptions(timeout=1.0, max_retries=0, qps=0))
    a = candidates(gated, make_config(namespace, "a", lease_name), FakeClock())
    b = candidates(client, make_config(namespace, "b", lease_name), FakeClock())
    try:
        a.start()
        assert gated.entered.wait(REAL)  # a read the free Lease and is about to write it
        b.start()
        assert b.started.wait(REAL)  # b read the same version and won
        gated.gate.set()
        a.parked_at(2.0)  # a's write came back: it retries in one period
        assert gated.sent_version == version
        assert [type(e) for e in gated.errors] == [Conflict]
        assert not a.started.is_set() and not a.elector.is_leader()
        assert b.elector.is_leader()
        spec = spec_of(client, namespace, lease_name)
        assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("b", 4)
    finally:
        gated.gate.set()
        for candidate in (a, b):
            candidate.shutdown()
        gated.close()


# -- losing and releasing -----------------------------------------------------------------


@pytest.mark.local_only
def test_renew_failing_past_the_deadline_stops_leading_at_once(
    client: KubeClient,
    namespace: str,
    lease_name: str,
    local_server: Any,
    candidates: Callable[..., Candidate],
) -> None:
    clock = FakeClock()
    a = candidates(client, make_config(namespace, "a", lease_name), clock).start()
    assert a.started.wait(REAL)
    a.parked_at(2.0)
    acquired = spec_of(client, namespace, lease_name)
    local_server.faults.fail_next(1000, 500, verb="update", resource="leases")
    for now in (2.0, 4.0, 6.0, 8.0):  # four failed rounds, each one unretried request
        clock.step(2.0)
        a.parked_at(now + 2.0)
        assert a.elector.is_leader() and not a.stopped.is_set()
    clock.step(2.0)  # t=10: no renew succeeded within the 10 s deadline
    assert a.stopped.wait(REAL)
    assert a.finished() is False
    assert not a.elector.is_leader()
    assert master_status(lease_name) == 0.0
    local_server.faults.clear()
    assert spec_of(client, namespace, lease_name) == acquired  # nothing written after losing


@pytest.mark.local_only
def test_a_hung_request_cannot_keep_a_leader_past_its_deadline(
    client: KubeClient,
    namespace: str,
    lease_name: str,
    local_server: Any,
    candidates: Callable[..., Candidate],
) -> None:
    config = make_config(
        namespace, "a", lease_name, lease_duration=1.5, renew_deadline=1.0, retry_period=0.2
    )
    a = candidates(client, config, None).start()
    assert a.started.wait(REAL)
    local_server.faults.set_latency(0.5)  # every answer now comes after the 0.1 s timeout
    try:
        hung = time.monotonic()
        assert a.stopped.wait(REAL)
        lost_after = time.monotonic() - hung
        assert a.finished() is False
    finally:
        local_server.faults.clear()
    print(f"hung API server: leadership given up {lost_after:.3f} s later (deadline 1.0 s)")
    assert lost_after <= 1.0 + 0.2
    assert not a.elector.is_leader()


def test_release_on_stop_frees_the_lease(
    client: KubeClient,
    namespace: str,
    lease_name: str,
    candidates: Callable[..., Candidate],
) -> None:
    clock = FakeClock()
    a = candidates(client, make_config(namespace, "a", lease_name), clock).start()
    assert a.started.wait(REAL)
    a.parked_at(2.0)
    held = spec_of(client, namespace, lease_name)
    a.stop.set()
    clock.step(2.0)
    assert a.finished() is True
    assert a.stopped.is_set() and not a.elector.is_leader()
    assert master_status(lease_name) == 0.0
    spec = spec_of(client, namespace, lease_name)
    assert spec["holderIdentity"] == ""
    assert spec["leaseDurationSeconds"] == 1
    assert spec["leaseTransitions"] == held["leaseTransitions"]
    assert spec["renewTime"] > held["renewTime"]


def test_without_release_the_holder_stays_written(
    client: KubeClient,
    namespace: str,
    lease_name: str,
    candidates: Callable[..., Candidate],
) -> None:
    clock = FakeClock()
    config = make_config(namespace, "a", lease_name, release_on_cancel=False)
    a = candidates(client, config, clock).start()
    assert a.started.wait(REAL)
    a.parked_at(2.0)
    a.stop.set()
    clock.step(2.0)
    assert a.finished() is True
    assert spec_of(client, namespace, lease_name)["holderIdentity"] == "a"


def test_a_standby_leads_about_one_retry_period_after_a_release(
    client: KubeClient,
    namespace: str,
    lease_name: str,
    candidates: Callable[..., Candidate],
) -> None:
    timings = {"lease_duration": 1.5, "renew_deadline": 1.0, "retry_period": 0.2}
    a = candidates(client, make_config(namespace, "a", lease_name, **timings), None).start()
    assert a.started.wait(REAL)
    b = candidates(client, make_config(namespace, "b", lease_name, **timings), None).start()
    deadline = time.monotonic() + REAL
    while b.new_leaders != ["a"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert b.new_leaders == ["a"]

    released = time.monotonic()
    a.stop.set()
    assert b.started.wait(REAL)
    takeover = time.monotonic() - released
    assert a.finished() is True
    print(f"release -> takeover: {takeover:.3f} s (retry period 0.2 s)")
    assert takeover < 1.5  # without the release: >= the 2 s written duration
    assert b.elector.is_leader() and not a.elector.is_leader()
    assert b.new_leaders == ["a", "b"]
    assert a.new_leaders == ["a"]
    spec = spec_of(client, namespace, lease_name)
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("b", 1)


def test_run_twice_at_once_is_refused(
    client: KubeClient,
    namespace: str,
    lease_name: str,
    candidates: Callable[..., Candidate],
) -> None:
    clock = FakeClock()
    a = candidates(client, make_config(namespace, "a", lease_name), clock).start()
    assert a.started.wait(REAL)
    with pytest.raises(RuntimeError, match="already running"):
        a.elector.run(threading.Event())


# -- the renew deadline bounds every request ------------------------------------------


class SlowReadClient(KubeClient):
    """Unthrottled, short, unretried (so the elector uses it as is); while ``armed``, a
    GET of the Lease takes ``seconds`` of the fake clock."""

    def __init__(self, configuration: object, clock: FakeClock) -> None:
        super().__init__(configuration, options=ClientOptions(timeout=1.0, max_retries=0, qps=0))
        self.clock = clock
        self.armed = threading.Event()
        self.seconds = 0.0
        self.timeouts: list[float | None] = []

    def get(
        self,
        resource: Any,
        name: str,
        namespace: str | None = None,
        *,
        timeout: float | None = None,
    ) -> JsonDict:
        self.timeouts.append(timeout)
        lease = super().get(resource, name, namespace, timeout=timeout)
        if self.armed.is_set():
            self.clock.step(self.seconds)
        return lease


def _configuration(kubeconfig_path: str) -> object:
    configuration = k8s_client.Configuration()
    loader: Any = k8s_config  # untyped package
    loader.load_kube_config(config_file=kubeconfig_path, client_configuration=configuration)
    return configuration


def test_no_write_once_the_deadline_passed_during_the_read(
    kubeconfig_path: str,
    client: KubeClient,
    namespace: str,
    lease_name: str,
    candidates: Callable[..., Candidate],
) -> None:
    clock = FakeClock()
    slow = SlowReadClient(_configuration(kubeconfig_path), clock)
    try:
        a = candidates(slow, make_config(namespace, "a", lease_name), clock).start()
        assert a.started.wait(REAL)
        a.parked_at(2.0)
        held = spec_of(client, namespace, lease_name)
        slow.seconds = 9.0  # the round at t=2 reads until t=11: past the deadline (t=10)
        slow.armed.set()
        clock.step(2.0)
        assert a.stopped.wait(REAL)
        assert a.finished() is False
        assert not a.elector.is_leader() and a.elector.valid_for() == 0.0
        assert spec_of(client, namespace, lease_name) == held, "renewed after the deadline"
        # every request of a renew round was given what was left until the deadline
        assert slow.timeouts[-1] is not None and slow.timeouts[-1] <= 1.0
    finally:
        slow.close()


def test_valid_for_counts_down_to_the_renew_deadline_and_ends_with_leading(
    client: KubeClient,
    namespace: str,
    lease_name: str,
    candidates: Callable[..., Candidate],
) -> None:
    clock = FakeClock()
    a = candidates(client, make_config(namespace, "a", lease_name), clock).start()
    assert a.started.wait(REAL)
    a.parked_at(2.0)
    assert a.elector.valid_for() == pytest.approx(10.0)  # renewed at t=0, deadline 10 s
    clock.step(1.5)  # no round yet (next at t=2): the permission shrinks with the clock
    assert a.elector.valid_for() == pytest.approx(8.5)
    a.stop.set()
    clock.step(0.5)
    assert a.finished() is True
    assert a.elector.valid_for() == 0.0 and not a.elector.is_leader()


# -- a Lease deleted under the candidates (issue 20) --------------------------------------


def test_a_leader_whose_lease_is_deleted_stops_leading_and_does_not_recreate_it(
    client: KubeClient,
    namespace: str,
    lease_name: str,
    candidates: Callable[..., Candidate],
) -> None:
    """``kubectl delete lease`` on the holder's Lease: losing the Lease object is losing
    the Lease. The holder stops at its next round and writes nothing (a re-created Lease
    would carry none of what was published on the old one)."""
    clock = FakeClock()
    a = candidates(client, make_config(namespace, "a", lease_name), clock).start()
    assert a.started.wait(REAL)
    a.parked_at(2.0)
    client.delete(LEASES, lease_name, namespace)
    clock.step(2.0)
    assert a.stopped.wait(REAL)
    assert a.finished() is False  # lost, not stopped
    assert not a.elector.is_leader() and a.elector.valid_for() == 0.0
    with pytest.raises(ApiError):
        read_lease(client, namespace, lease_name)  # not re-created


def test_a_standby_takes_a_deleted_lease_only_after_a_full_lease_duration(
    client: KubeClient,
    namespace: str,
    lease_name: str,
    candidates: Callable[..., Candidate],
) -> None:
    """A vanished Lease whose holder this candidate saw alive is treated like a record
    that has stopped changing: the old holder may still act until its renew deadline, so
    it is created only once a whole lease duration has passed since the last change seen
    (client-go creates it at once, and two leaders write for up to a retry period)."""
    put_lease(client, namespace, lease_name, "other", "2026-01-01T00:00:00.000000Z")
    clock = FakeClock()
    b = candidates(client, make_config(namespace, "b", lease_name), clock).start()
    b.parked_at(2.0)  # saw "other" at t=0 (record duration 15 s)
    put_lease(client, namespace, lease_name, "other", "2026-01-01T00:00:02.000000Z")
    clock.step(2.0)
    b.parked_at(4.0)  # saw it change at t=2
    client.delete(LEASES, lease_name, namespace)
    for now in range(6, 20, 2):  # rounds at t=4..16: missing, but < 15 s since t=2
        clock.step(2.0)
        b.parked_at(float(now))
        assert not b.started.is_set(), f"created the deleted Lease at t={now - 2}, too early"
        with pytest.raises(ApiError):
            read_lease(client, namespace, lease_name)
    clock.step(2.0)  # t=18: 16 s since the last change >= 15 s
    assert b.started.wait(REAL)
    assert spec_of(client, namespace, lease_name)["holderIdentity"] == "b"


def test_a_candidate_that_never_saw_a_holder_creates_a_missing_lease_at_once(
    client: KubeClient,
    namespace: str,
    lease_name: str,
    candidates: Callable[..., Candidate],
) -> None:
    """A fresh Lease (first start, or one released before it was deleted) costs no wait."""
    put_lease(client, namespace, lease_name, "", "2026-01-01T00:00:00.000000Z")
    clock = FakeClock()
    b = candidates(client, make_config(namespace, "b", lease_name), clock).start()
    assert b.started.wait(REAL)  # a released Lease is taken at once
    b.stop.set()
    clock.step(2.0)
    assert b.finished() is True  # released on stop
    client.delete(LEASES, lease_name, namespace)
    c = candidates(client, make_config(namespace, "c", lease_name), FakeClock()).start()
    assert c.started.wait(REAL)

"""Write fencing (manager.fencing) and the client's use of it (manager.client), against the
scripted stub API server of test_kube: a refused write sends nothing, and a fence that
closes anywhere before the first byte leaves stops the request. No test sleeps."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from manager.client import ClientOptions, KubeClient, StopAwareSleep
from manager.errors import ServerError, TooManyRequests, WriteFenced
from manager.fencing import (
    IN_FLIGHT,
    UNFENCED,
    ValidityFence,
    WritesInFlight,
    current_fence,
    fenced,
)
from manager.flowcontrol import TokenBucket
from manager.metrics import REGISTRY
from manager.resources import BUILTINS
from tests.unit.test_kube import Reply, StubApiServer, pod, status_body, write_kubeconfig

PODS = BUILTINS["v1/pods"]
POD_PATH = "/api/v1/namespaces/default/pods"


def refused(reason: str) -> float:
    return REGISTRY.get_sample_value("overseer_fenced_writes_total", {"reason": reason}) or 0.0


class Switch:
    """A validity that a test turns on and off; counts how often it was asked."""

    def __init__(self, seconds: float | None = 5.0) -> None:
        self.seconds = seconds
        self.asked = 0

    def __call__(self) -> float | None:
        self.asked += 1
        return self.seconds


@pytest.fixture
def make_client(stub: StubApiServer, tmp_path: Path) -> Iterator[Callable[..., KubeClient]]:
    clients: list[KubeClient] = []
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", stub.url)

    def make(**kwargs: Any) -> KubeClient:
        kwargs.setdefault("rate_limiter", TokenBucket(0, 1))
        kwargs.setdefault("retry_sleep", lambda seconds: None)
        client = KubeClient.from_kubeconfig(
            str(kubeconfig), options=ClientOptions(max_retries=3), **kwargs
        )
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


# -- the fence itself -------------------------------------------------------------------


def test_a_validity_fence_allows_while_valid_and_refuses_after(
    caplog: pytest.LogCaptureFixture,
) -> None:
    validity = Switch(2.5)
    fence = ValidityFence(validity, reason="unit_a", message="no Lease here")
    assert fence.check() == 2.5
    validity.seconds = None
    assert fence.check() is None  # no limit
    validity.seconds = 0.0
    before = refused("unit_a")
    with caplog.at_level(logging.WARNING, logger="manager.fencing"):
        for _ in range(3):
            with pytest.raises(WriteFenced, match="no Lease here") as info:
                fence.check()
            assert info.value.reason == "unit_a"
    assert refused("unit_a") == before + 3
    # logged once per closed period, not once per refused request
    assert [r.getMessage() for r in caplog.records] == [
        "writes refused: this replica may not write now"
    ]
    validity.seconds = 1.0
    fence.check()
    validity.seconds = -1.0
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="manager.fencing"), pytest.raises(WriteFenced):
        fence.check()
    assert len(caplog.records) == 1  # a new closed period is logged again


def test_the_context_fence_is_per_thread_and_restored() -> None:
    closed = ValidityFence(lambda: 0.0, reason="unit_b", message="closed")
    seen: list[object] = []
    assert current_fence() is None
    with fenced(closed):
        assert current_fence() is closed
        other = threading.Thread(target=lambda: seen.append(current_fence()))
        other.start()
        other.join()
        with fenced(UNFENCED):
            assert current_fence() is UNFENCED
        assert current_fence() is closed
    assert current_fence() is None
    assert seen == [None]  # a plain new thread does not inherit the context


# -- the client ---------------------------------------------------------------------------


def test_a_refused_write_sends_nothing_and_reads_are_not_fenced(
    make_client: Callable[..., KubeClient], stub: StubApiServer
) -> None:
    fence = ValidityFence(lambda: 0.0, reason="unit_c", message="standby")
    client = make_client().with_fence(fence)
    assert client.fence is fence
    with pytest.raises(WriteFenced):
        client.create(PODS, pod("a"))
    with pytest.raises(WriteFenced):
        client.replace(PODS, pod("a"))
    with pytest.raises(WriteFenced):
        client.patch(PODS, "a", {"metadata": {"labels": {"x": "y"}}}, namespace="default")
    with pytest.raises(WriteFenced):
        client.delete(PODS, "a", "default")
    with pytest.raises(WriteFenced):
        client.request("POST", POD_PATH, body=pod("a"), idempotent=False)
    assert stub.requests() == []
    stub.reply("GET", f"{POD_PATH}/a", Reply(body=pod("a")))
    assert client.get(PODS, "a", "default")["metadata"]["name"] == "a"


def test_the_client_without_a_fence_is_untouched_by_it(
    make_client: Callable[..., KubeClient], stub: StubApiServer
) -> None:
    raw = make_client()
    closed = ValidityFence(lambda: 0.0, reason="unit_d", message="closed")
    raw.with_fence(closed)  # a fenced copy; the original stays unfenced
    assert raw.fence is None
    stub.reply("POST", POD_PATH, Reply(201, pod("a")))
    with fenced(closed):  # an unfenced client (the election's) ignores context fences
        raw.create(PODS, pod("a"))
    assert len(stub.requests("POST")) == 1


def test_the_context_fence_takes_precedence_over_the_clients(
    make_client: Callable[..., KubeClient], stub: StubApiServer
) -> None:
    closed = ValidityFence(lambda: 0.0, reason="unit_e", message="closed")
    open_ = ValidityFence(lambda: 10.0, reason="unit_e", message="open")
    client = make_client().with_fence(open_)
    with fenced(closed), pytest.raises(WriteFenced):
        client.create(PODS, pod("a"))
    assert stub.requests() == []
    stub.reply("POST", POD_PATH, Reply(201, pod("a")))
    leader_only = make_client().with_fence(closed)
    with fenced(UNFENCED):  # components every replica runs
        leader_only.create(PODS, pod("a"))
    assert len(stub.requests("POST")) == 1


def test_a_fence_closing_after_the_check_stops_the_request_before_its_first_byte(
    make_client: Callable[..., KubeClient], stub: StubApiServer
) -> None:
    """A pause between the client's checks and the send (GC, SIGSTOP): the connection asks
    the fence once more right before it writes."""
    answers = iter([5.0, 5.0])  # before and after the rate limiter; then closed

    def validity() -> float:
        return next(answers, 0.0)

    client = make_client().with_fence(ValidityFence(validity, reason="unit_f", message="late"))
    with pytest.raises(WriteFenced):
        client.create(PODS, pod("a"))
    assert stub.requests() == []


def test_a_wait_for_the_rate_limiter_is_checked_again(
    make_client: Callable[..., KubeClient], stub: StubApiServer
) -> None:
    validity = Switch(5.0)

    class Slow:
        qps = 1.0

        def accept(self) -> None:
            validity.seconds = 0.0  # the Lease ran out while we waited for a token

        def try_accept(self) -> bool:
            return True

    client = make_client(rate_limiter=Slow()).with_fence(
        ValidityFence(validity, reason="unit_g", message="expired while throttled")
    )
    with pytest.raises(WriteFenced):
        client.create(PODS, pod("a"))
    assert stub.requests() == []


def test_a_retry_asks_the_fence_again(
    make_client: Callable[..., KubeClient], stub: StubApiServer
) -> None:
    validity = Switch(5.0)

    def sleep(seconds: float) -> None:
        validity.seconds = 0.0  # lost the Lease during the Retry-After wait

    client = make_client(retry_sleep=sleep).with_fence(
        ValidityFence(validity, reason="unit_h", message="lost during the wait")
    )
    throttled = Reply(429, status_body(429, "TooManyRequests", "slow down"), {"Retry-After": "1"})
    stub.reply("POST", POD_PATH, throttled, Reply(201, pod("a")))
    with pytest.raises(WriteFenced):
        client.create(PODS, pod("a"))
    assert len(stub.requests("POST")) == 1


# -- retries while stopping -------------------------------------------------------------


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def throttled(seconds: int) -> Reply:
    return Reply(
        429, status_body(429, "TooManyRequests", "slow down"), {"Retry-After": str(seconds)}
    )


def unavailable() -> Reply:
    return Reply(503, status_body(503, "ServiceUnavailable", "no etcd"))


def test_stop_aware_sleep_waits_in_full_before_a_stop(
    make_client: Callable[..., KubeClient], stub: StubApiServer
) -> None:
    t = FakeTime()
    stop = threading.Event()
    waited: list[float] = []

    def wait(seconds: float) -> bool:
        waited.append(seconds)
        t.now += seconds
        return False

    sleep = StopAwareSleep(stop, 5.0, clock=t.clock, sleep=t.sleep, wait=wait)
    client = make_client(retry_sleep=sleep)
    stub.reply("GET", f"{POD_PATH}/a", throttled(3), unavailable(), Reply(body=pod("a")))
    client.get(PODS, "a", "default")
    assert waited[0] == 3.0 and len(waited) == 2 and t.slept == []


def test_stop_aware_sleep_keeps_waiting_when_the_stop_comes_mid_wait(
    make_client: Callable[..., KubeClient], stub: StubApiServer
) -> None:
    t = FakeTime()
    stop = threading.Event()

    def wait(seconds: float) -> bool:
        t.now += 1.0  # SIGTERM one second into a 3 s Retry-After
        stop.set()
        return True

    client = make_client(
        retry_sleep=StopAwareSleep(stop, 5.0, clock=t.clock, sleep=t.sleep, wait=wait)
    )
    stub.reply("POST", POD_PATH, throttled(3), Reply(201, pod("a")))
    client.create(PODS, pod("a"))
    assert t.slept == [2.0]  # the rest of the Retry-After, not an immediate retry
    assert len(stub.requests("POST")) == 2


def test_while_stopping_retry_after_is_honoured_within_the_budget_only(
    make_client: Callable[..., KubeClient], stub: StubApiServer
) -> None:
    t = FakeTime()
    stop = threading.Event()
    stop.set()
    sleep = StopAwareSleep(stop, 5.0, clock=t.clock, sleep=t.sleep, wait=lambda s: True)
    client = make_client(retry_sleep=sleep)
    stub.reply("POST", POD_PATH, throttled(2), throttled(2), throttled(2), Reply(201, pod("a")))
    with pytest.raises(TooManyRequests, match="slow down"):
        client.create(PODS, pod("a"))
    assert t.slept == [2.0, 2.0]  # the third 2 s wait would end after the 5 s budget
    assert len(stub.requests("POST")) == 3


def test_while_stopping_a_backoff_retry_is_abandoned(
    make_client: Callable[..., KubeClient], stub: StubApiServer
) -> None:
    """Without Retry-After the client is only guessing; an unreachable or failing server
    does not come back for a shutdown: the request fails now with its error."""
    t = FakeTime()
    stop = threading.Event()
    stop.set()
    sleep = StopAwareSleep(stop, 30.0, clock=t.clock, sleep=t.sleep, wait=lambda s: True)
    client = make_client(retry_sleep=sleep)
    stub.reply("GET", f"{POD_PATH}/a", unavailable(), Reply(body=pod("a")))
    with pytest.raises(ServerError, match="no etcd"):
        client.get(PODS, "a", "default")
    assert t.slept == [] and len(stub.requests("GET")) == 1


def test_stop_aware_sleep_refuses_a_negative_budget() -> None:
    with pytest.raises(ValueError, match="grace"):
        StopAwareSleep(threading.Event(), -1.0)


def test_a_fence_exports_its_refusals_at_zero_before_the_first() -> None:
    reason = f"zero-{uuid.uuid4().hex[:8]}"
    ValidityFence(lambda: None, reason=reason, message="m")
    assert REGISTRY.get_sample_value("overseer_fenced_writes_total", {"reason": reason}) == 0.0


# -- clients derived from a fenced client, and writes in flight (issue 20) ---------------


def test_a_client_derived_with_other_options_keeps_the_fence(
    make_client: Callable[..., KubeClient], stub: StubApiServer
) -> None:
    closed = ValidityFence(lambda: 0.0, reason="unit_h", message="standby")
    client = make_client().with_fence(closed)
    with client.with_options(ClientOptions(timeout=5.0)) as derived:
        assert derived.fence is closed
        with pytest.raises(WriteFenced):
            derived.create(PODS, pod("a"))
    assert stub.requests() == []
    with make_client().with_options(ClientOptions(timeout=5.0)) as plain:
        assert plain.fence is None  # an unfenced client's copies stay unfenced


def test_an_abandoned_write_in_flight_has_its_connection_closed_and_is_refused(
    make_client: Callable[..., KubeClient], stub: StubApiServer
) -> None:
    """A write sent while the fence was open, whose answer has not come when the
    permission is given up: its connection is shut down, its writer gets WriteFenced."""
    fence = ValidityFence(lambda: 30.0, reason="unit_i", message="open")
    other = ValidityFence(lambda: 30.0, reason="unit_i", message="another key")
    client = make_client().with_fence(fence)
    held = threading.Event()
    stub.reply("POST", POD_PATH, Reply(201, chunks=[], hold=held))
    outcome: list[BaseException | None] = []

    def write() -> None:
        try:
            client.create(PODS, pod("a"))
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert IN_FLIGHT.wait(lambda f: False, 0)  # nothing matches: nothing to wait for
        for _ in range(500):
            if stub.requests("POST"):
                break
            writer.join(0.01)
        assert IN_FLIGHT.count(lambda f: f is fence) == 1
        assert IN_FLIGHT.abandon(lambda f: f is other, "not this one") == 0
        assert IN_FLIGHT.give_up(lambda f: f is fence, "the key moved", timeout=5.0)
        writer.join(5)
        assert not writer.is_alive()
        assert isinstance(outcome[0], WriteFenced), outcome
        assert outcome[0].reason == "abandoned"
        assert "the key moved" in str(outcome[0])
        assert IN_FLIGHT.count(lambda f: f is fence) == 0
    finally:
        held.set()
        writer.join(5)


def test_a_write_abandoned_before_its_first_byte_is_not_sent(
    make_client: Callable[..., KubeClient], stub: StubApiServer
) -> None:
    """Abandoned between the fence's check and the send (the rate limiter's wait, say):
    the connection refuses to send it."""
    fence = ValidityFence(lambda: 30.0, reason="unit_j", message="open")

    class AbandonWhileWaiting:
        qps = 1.0

        def accept(self) -> None:
            # the write registers after the limiter: abandon it from its first check on
            original = IN_FLIGHT.begin

            def begin(f: Any) -> Any:
                flight = original(f)
                IN_FLIGHT.abandon(lambda g: g is fence, "given up")
                return flight

            IN_FLIGHT.begin = begin  # type: ignore[method-assign]

        def try_accept(self) -> bool:
            return True

    client = make_client(rate_limiter=AbandonWhileWaiting()).with_fence(fence)
    try:
        with pytest.raises(WriteFenced, match="given up"):
            client.create(PODS, pod("a"))
    finally:
        del IN_FLIGHT.begin  # type: ignore[method-assign]
    assert stub.requests() == []
    assert IN_FLIGHT.count(lambda f: f is fence) == 0


# -- writes in flight: pipelines the server reads ahead, and releases ---------------------


class _Conn:
    sock = None


def test_an_abandoned_pipelined_flight_counts_until_the_server_will_have_handled_it() -> None:
    """Shutting a pipeline's connection down does not stop the writes queued behind the
    first (the server reads them ahead): abandoned, the flight counts as under way until
    its ``lands_by``, although its writer has ended it."""
    now = [100.0]
    flights = WritesInFlight(clock=lambda: now[0])
    fence = ValidityFence(lambda: 5.0, reason="unit_landing", message="a test fence")
    mine: Callable[[Any], bool] = lambda f: f is fence  # noqa: E731
    flight = flights.begin(fence)
    flights.sending(flight, _Conn(), lands_by=103.0)
    assert flights.abandon(mine, "released") == 1
    flights.end(flight)  # its writer saw the connection shut down
    assert flights.count(mine) == 1
    assert not flights.wait(mine, 0.0)
    now[0] = 103.5
    assert flights.count(mine) == 0
    assert flights.wait(mine, 0.0)


def test_an_abandoned_single_write_stops_counting_when_its_writer_ends_it() -> None:
    now = [100.0]
    flights = WritesInFlight(clock=lambda: now[0])
    fence = ValidityFence(lambda: 5.0, reason="unit_landing", message="a test fence")
    flight = flights.begin(fence)
    flights.sending(flight, _Conn())  # alone on its connection: the close stops it
    flights.abandon(lambda f: f is fence, "released")
    flights.end(flight)
    assert flights.count(lambda f: f is fence) == 0


def test_settle_allows_a_release_only_when_every_write_under_it_was_answered() -> None:
    now = [100.0]
    flights = WritesInFlight(clock=lambda: now[0])
    fence = ValidityFence(lambda: 5.0, reason="unit_settle", message="a test fence")
    other = ValidityFence(lambda: 5.0, reason="unit_settle", message="another fence")
    mine: Callable[[Any], bool] = lambda f: f is fence  # noqa: E731

    answered = flights.begin(fence)
    flights.sending(answered, _Conn())
    answered.answered = True
    flights.end(answered)
    refused = flights.begin(fence)  # refused before a byte left: no conn
    flights.end(refused)
    elsewhere = flights.begin(other)  # another fence's write: none of this release's
    flights.sending(elsewhere, _Conn())
    flights.end(elsewhere)
    assert flights.settle(mine, "release", timeout=0.0, window=15.0)

    unanswered = flights.begin(fence)  # sent, then reset / timed out: fate unknown
    flights.sending(unanswered, _Conn())
    flights.end(unanswered)
    assert not flights.settle(mine, "release", timeout=0.0, window=15.0)
    now[0] += 15.1  # a lease duration later, the Lease rules bound it anyway
    assert flights.settle(mine, "release", timeout=0.0, window=15.0)

    stuck = flights.begin(fence)  # still under way: abandoned, and no release
    flights.sending(stuck, _Conn())
    assert not flights.settle(mine, "release", timeout=0.0, window=15.0)
    assert stuck.aborted == "release"

"""Kubernetes Events through manager.events, written to an API server over HTTP (the local
one by default): Events about a ConfigMap in the test namespace. Time that decides
behaviour (aggregation window, spam bucket, retry waits) is a FakeClock; the tests wait
for the sender with ``flush``/``shutdown`` (event driven) and never sleep.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from manager.client import ClientOptions, KubeClient, Write, WriteSession
from manager.client.kubeconfig import Credentials
from manager.clock import FakeClock
from manager.errors import ApiError, ConfigError, ServerError, WriteFenced
from manager.events import (
    COMBINED_PREFIX,
    NORMAL,
    WARNING,
    EventBroadcaster,
    EventOptions,
    EventRecorder,
    FakeRecorder,
    RecordedEvent,
)
from manager.fencing import UNFENCED, ValidityFence, fenced
from manager.keys import JsonDict
from manager.metrics import REGISTRY
from manager.resources import builtin

EVENTS = builtin("v1", "events")
CM = builtin("v1", "configmaps")
NAMESPACES = builtin("v1", "namespaces")
WAIT = 20.0  # real seconds: an upper bound, never an expected duration
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def dropped(reason: str) -> float:
    return REGISTRY.get_sample_value("overseer_events_dropped_total", {"reason": reason}) or 0.0


def sent(type_: str = NORMAL) -> float:
    return REGISTRY.get_sample_value("overseer_events_sent_total", {"type": type_}) or 0.0


def sender_errors() -> float:
    return REGISTRY.get_sample_value("overseer_event_sender_errors_total") or 0.0


def events_about(kube: KubeClient, namespace: str, name: str) -> list[JsonDict]:
    items = kube.list(EVENTS, namespace)["items"]
    found = [e for e in items if e["involvedObject"].get("name") == name]
    return sorted(found, key=lambda e: e["metadata"]["name"])


def describe_query(obj: JsonDict) -> str:
    """The field selector ``kubectl describe`` lists an object's Events with (kubectl's
    ``searchEvents``: in the object's namespace, every namespace for a cluster-scoped
    one, by name, namespace, kind and uid)."""
    meta = obj["metadata"]
    return (
        f"involvedObject.name={meta['name']},"
        f"involvedObject.namespace={meta.get('namespace', '')},"
        f"involvedObject.kind={obj['kind']},"
        f"involvedObject.uid={meta['uid']}"
    )


class GatedClient(KubeClient):
    """A KubeClient whose Event creates (the sender's write session) wait for ``release``;
    ``entered`` says one is waiting."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.entered = threading.Event()
        self.release = threading.Event()

    def write_session(self) -> WriteSession:
        return GatedSession(self)


class GatedSession(WriteSession):
    def __init__(self, client: GatedClient) -> None:
        super().__init__(client)
        self.gated = client

    def create(self, resource: Any, body: JsonDict, namespace: str | None = None) -> JsonDict:
        self.gated.entered.set()
        assert self.gated.release.wait(WAIT), "test never released the gate"
        return super().create(resource, body, namespace)

    def pipeline(
        self, writes: Sequence[Write], *, decode: bool = True
    ) -> list[JsonDict | ApiError | WriteFenced]:
        if any(w.method == "POST" for w in writes):
            self.gated.entered.set()
            assert self.gated.release.wait(WAIT), "test never released the gate"
        return super().pipeline(writes, decode=decode)


@pytest.fixture
def kube(kubeconfig_path: str) -> Iterator[KubeClient]:
    client = KubeClient.from_kubeconfig(kubeconfig_path, options=ClientOptions(qps=0))
    try:
        yield client
    finally:
        client.close()


def make_configmap(kube: KubeClient, namespace: str) -> JsonDict:
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"cm-{uuid.uuid4().hex[:8]}", "namespace": namespace},
        "data": {"k": "v"},
    }
    created = kube.create(CM, body)
    created.setdefault("apiVersion", "v1")
    created.setdefault("kind", "ConfigMap")
    return created


@pytest.fixture
def configmap(kube: KubeClient, namespace: str) -> JsonDict:
    return make_configmap(kube, namespace)


class Running:
    """A started broadcaster on a FakeClock and its recorder."""

    def __init__(self, client: KubeClient, options: EventOptions | None = None) -> None:
        self.clock = FakeClock(1000.0)
        self.stop = threading.Event()
        self.broadcaster = EventBroadcaster(
            client, component="overseer-test", host="node-1", clock=self.clock, options=options
        )
        self.recorder: EventRecorder = self.broadcaster.recorder()

    def start(self) -> Running:
        self.broadcaster.start(self.stop)
        return self

    def flush(self) -> None:
        assert self.broadcaster.flush(WAIT), "events were not handled in time"


@pytest.fixture
def running(kube: KubeClient) -> Iterator[Callable[..., Running]]:
    made: list[Running] = []

    def make(client: KubeClient | None = None, **options: Any) -> Running:
        r = Running(client or kube, EventOptions(**options) if options else None)
        made.append(r)
        return r

    yield make
    for r in made:
        r.stop.set()
        assert r.broadcaster.shutdown(WAIT), "event sender did not stop"


# -- what one Event looks like ------------------------------------------------------------


def test_first_event_creates_an_event_with_count_1_and_the_reference_fields(
    kube: KubeClient, namespace: str, configmap: JsonDict, running: Callable[..., Running]
) -> None:
    r = running().start()
    before = sent(WARNING)
    r.recorder.event(configmap, WARNING, "PortsMissing", "no container ports")
    r.flush()

    [event] = events_about(kube, namespace, configmap["metadata"]["name"])
    meta = configmap["metadata"]
    assert event["metadata"]["namespace"] == namespace
    # what `kubectl describe configmap NAME -n NAMESPACE` asks for
    [found] = kube.list(EVENTS, namespace, field_selector=describe_query(configmap))["items"]
    assert found["metadata"]["uid"] == event["metadata"]["uid"]
    assert re.fullmatch(re.escape(meta["name"]) + r"\.[0-9a-f]+", event["metadata"]["name"])
    assert event["involvedObject"] == {
        "kind": "ConfigMap",
        "namespace": namespace,
        "name": meta["name"],
        "uid": meta["uid"],
        "apiVersion": "v1",
        "resourceVersion": meta["resourceVersion"],
    }
    assert (event["type"], event["reason"], event["message"]) == (
        WARNING,
        "PortsMissing",
        "no container ports",
    )
    assert event["source"] == {"component": "overseer-test", "host": "node-1"}
    assert event["reportingComponent"] == "overseer-test"
    assert event["reportingInstance"] == "node-1"
    assert event["count"] == 1
    assert RFC3339.match(event["firstTimestamp"]), event["firstTimestamp"]
    assert event["lastTimestamp"] == event["firstTimestamp"]
    assert sent(WARNING) == before + 1


def test_a_long_message_is_cut_to_1024_bytes_on_a_character_boundary(
    kube: KubeClient, namespace: str, configmap: JsonDict, running: Callable[..., Running]
) -> None:
    r = running().start()
    message = "a" + "é" * 600  # 1201 bytes of UTF-8
    r.recorder.event(configmap, NORMAL, "Long", message)
    r.flush()

    [event] = events_about(kube, namespace, configmap["metadata"]["name"])
    stored = event["message"].encode("utf-8")
    assert len(stored) == 1023  # the 1024th byte would split an "é"
    assert message.startswith(event["message"])


def test_an_event_about_a_cluster_scoped_object_goes_to_the_default_namespace(
    kube: KubeClient, namespace: str, running: Callable[..., Running]
) -> None:
    ns_object = kube.get(NAMESPACES, namespace)
    ns_object.setdefault("apiVersion", "v1")
    ns_object.setdefault("kind", "Namespace")
    r = running().start()
    r.recorder.event(ns_object, NORMAL, "Seen", "namespace seen")
    r.flush()

    [event] = events_about(kube, "default", namespace)
    try:
        assert event["metadata"]["name"].startswith(namespace + ".")
        assert "namespace" not in event["involvedObject"]
        assert event["involvedObject"]["kind"] == "Namespace"
        # not among the Events of the namespace of that name (`kubectl get events -n X`)
        assert events_about(kube, namespace, namespace) == []
        # `kubectl describe` of a cluster-scoped object lists Events in every namespace
        # by its reference, an empty namespace included (kubectl's searchEvents)
        [found] = kube.list(EVENTS, None, field_selector=describe_query(ns_object))["items"]
        assert found["metadata"]["uid"] == event["metadata"]["uid"]
    finally:
        kube.delete(EVENTS, event["metadata"]["name"], "default")


# -- correlation --------------------------------------------------------------------------


def test_identical_repeats_patch_one_event_up_to_count_6(
    kube: KubeClient, namespace: str, configmap: JsonDict, running: Callable[..., Running]
) -> None:
    r = running().start()
    r.recorder.event(configmap, NORMAL, "Synced", "all good")
    r.flush()
    [first] = events_about(kube, namespace, configmap["metadata"]["name"])

    for _ in range(5):
        r.recorder.event(configmap, NORMAL, "Synced", "all good")
    r.flush()

    [event] = events_about(kube, namespace, configmap["metadata"]["name"])
    assert event["metadata"]["name"] == first["metadata"]["name"]
    assert event["count"] == 6
    assert event["firstTimestamp"] == first["firstTimestamp"]
    assert event["lastTimestamp"] >= event["firstTimestamp"]


def test_a_different_reason_is_a_second_event(
    kube: KubeClient, namespace: str, configmap: JsonDict, running: Callable[..., Running]
) -> None:
    r = running().start()
    r.recorder.event(configmap, NORMAL, "Synced", "all good")
    r.recorder.event(configmap, NORMAL, "Synced", "all good")
    r.recorder.event(configmap, NORMAL, "Exposed", "all good")
    r.flush()

    events = events_about(kube, namespace, configmap["metadata"]["name"])
    assert sorted((e["reason"], e["count"]) for e in events) == [("Exposed", 1), ("Synced", 2)]


def test_a_deleted_event_is_created_anew_on_the_next_repeat(
    kube: KubeClient, namespace: str, configmap: JsonDict, running: Callable[..., Running]
) -> None:
    r = running().start()
    r.recorder.event(configmap, NORMAL, "Synced", "all good")
    r.flush()
    [first] = events_about(kube, namespace, configmap["metadata"]["name"])
    kube.delete(EVENTS, first["metadata"]["name"], namespace)  # as the event TTL would

    r.recorder.event(configmap, NORMAL, "Synced", "all good")
    r.flush()

    [event] = events_about(kube, namespace, configmap["metadata"]["name"])
    assert event["count"] == 2
    assert event["metadata"]["uid"] != first["metadata"]["uid"]


def test_similar_events_are_combined_from_the_tenth_distinct_message(
    kube: KubeClient, namespace: str, configmap: JsonDict, running: Callable[..., Running]
) -> None:
    r = running().start()
    for i in range(11):
        r.recorder.event(configmap, WARNING, "AllocationFailed", f"pool exhausted, try {i}")
    r.flush()

    events = events_about(kube, namespace, configmap["metadata"]["name"])
    combined = [e for e in events if e["message"].startswith(COMBINED_PREFIX)]
    single = [e for e in events if not e["message"].startswith(COMBINED_PREFIX)]
    assert sorted(e["message"] for e in single) == sorted(
        f"pool exhausted, try {i}" for i in range(9)
    )
    assert len(combined) == 1
    assert combined[0]["message"] == COMBINED_PREFIX + "pool exhausted, try 10"
    assert combined[0]["count"] == 2
    assert (combined[0]["type"], combined[0]["reason"]) == (WARNING, "AllocationFailed")


def test_the_aggregation_window_is_measured_on_the_clock(
    kube: KubeClient, namespace: str, configmap: JsonDict, running: Callable[..., Running]
) -> None:
    r = running().start()
    for i in range(9):
        r.recorder.event(configmap, WARNING, "AllocationFailed", f"try {i}")
    r.flush()
    r.clock.step(601.0)  # the window (600 s) has passed: counting starts over
    r.recorder.event(configmap, WARNING, "AllocationFailed", "try 9")
    r.flush()

    events = events_about(kube, namespace, configmap["metadata"]["name"])
    assert len(events) == 10
    assert not any(e["message"].startswith(COMBINED_PREFIX) for e in events)


def test_the_spam_filter_drops_beyond_25_per_object_and_refills_on_the_clock(
    kube: KubeClient, namespace: str, configmap: JsonDict, running: Callable[..., Running]
) -> None:
    other = make_configmap(kube, namespace)
    r = running().start()
    spam_before = dropped("spam")
    for _ in range(30):
        r.recorder.event(configmap, NORMAL, "Hot", "looping")
    r.recorder.event(other, NORMAL, "Hot", "looping")  # another object has its own bucket
    r.flush()

    assert dropped("spam") == spam_before + 5
    [event] = events_about(kube, namespace, configmap["metadata"]["name"])
    assert event["count"] == 25
    [other_event] = events_about(kube, namespace, other["metadata"]["name"])
    assert other_event["count"] == 1

    r.recorder.event(configmap, NORMAL, "Hot", "looping")
    r.flush()
    assert dropped("spam") == spam_before + 6  # still empty: no time has passed

    r.clock.step(300.0)  # one token back
    r.recorder.event(configmap, NORMAL, "Hot", "looping")
    r.flush()
    [event] = events_about(kube, namespace, configmap["metadata"]["name"])
    # As in client-go, the count includes the occurrences the filter kept back.
    assert event["count"] == 32
    assert dropped("spam") == spam_before + 6


# -- the queue and the sender ----------------------------------------------------------


def test_recording_never_blocks_while_a_write_is_in_flight(
    kubeconfig_path: str, namespace: str, configmap: JsonDict, running: Callable[..., Running]
) -> None:
    with GatedClient.from_kubeconfig(kubeconfig_path, options=ClientOptions(qps=0)) as gated:
        r = running(gated).start()
        before = sent()
        r.recorder.event(configmap, NORMAL, "Slow", "first")
        assert gated.entered.wait(WAIT)  # the sender is inside the first create

        for i in range(100):
            r.recorder.event(configmap, NORMAL, "Slow", f"message {i % 5}")
        # All 100 calls returned while the first write still cannot complete.
        assert sent() == before
        gated.release.set()
        r.flush()
        assert sent() > before
        r.stop.set()
        assert r.broadcaster.shutdown(WAIT)


def test_a_full_queue_drops_and_counts_without_blocking(
    kubeconfig_path: str, namespace: str, configmap: JsonDict, running: Callable[..., Running]
) -> None:
    with GatedClient.from_kubeconfig(kubeconfig_path, options=ClientOptions(qps=0)) as gated:
        r = running(gated, queue_size=5).start()
        full_before = dropped("queue_full")
        r.recorder.event(configmap, NORMAL, "Slow", "in flight")
        assert gated.entered.wait(WAIT)

        for i in range(8):  # 5 fit, 3 are dropped
            r.recorder.event(configmap, NORMAL, "Slow", f"queued {i}")
        assert dropped("queue_full") == full_before + 3
        gated.release.set()
        r.flush()
        r.stop.set()
        assert r.broadcaster.shutdown(WAIT)


def test_shutdown_flushes_what_is_queued_and_refuses_later_events(
    kube: KubeClient, namespace: str, configmap: JsonDict, running: Callable[..., Running]
) -> None:
    r = running()
    for i in range(5):  # queued before the sender even runs
        r.recorder.event(configmap, NORMAL, f"Reason{i}", "queued")
    r.start()
    assert r.broadcaster.shutdown(WAIT)

    events = events_about(kube, namespace, configmap["metadata"]["name"])
    assert sorted(e["reason"] for e in events) == [f"Reason{i}" for i in range(5)]

    refused_before = dropped("shutdown")
    r.recorder.event(configmap, NORMAL, "Late", "after shutdown")  # no error, no block
    assert dropped("shutdown") == refused_before + 1
    with pytest.raises(RuntimeError):
        r.broadcaster.start(r.stop)


def test_shutdown_is_bounded_and_drops_what_it_could_not_send(
    kubeconfig_path: str, namespace: str, configmap: JsonDict, running: Callable[..., Running]
) -> None:
    with GatedClient.from_kubeconfig(kubeconfig_path, options=ClientOptions(qps=0)) as gated:
        r = running(gated).start()
        dropped_before = dropped("shutdown")
        r.recorder.event(configmap, NORMAL, "InFlight", "stuck in create")
        assert gated.entered.wait(WAIT)
        for i in range(3):
            r.recorder.event(configmap, NORMAL, f"Queued{i}", "behind it")

        # The sender cannot finish while the gate is closed: shutdown gives up in time.
        assert not r.broadcaster.shutdown(0.05)
        gated.release.set()
        assert r.broadcaster.shutdown(WAIT)  # the sender exits after the write in flight

        assert dropped("shutdown") == dropped_before + 3
        events = events_about(gated, namespace, configmap["metadata"]["name"])
        assert [e["reason"] for e in events] == ["InFlight"]


def test_setting_stop_ends_the_sender_after_writing_what_is_queued(
    kube: KubeClient, namespace: str, configmap: JsonDict, running: Callable[..., Running]
) -> None:
    r = running()
    r.recorder.event(configmap, NORMAL, "Before", "queued")
    r.stop.set()
    r.start()
    assert r.broadcaster.flush(WAIT)
    assert r.broadcaster.shutdown(WAIT)
    [event] = events_about(kube, namespace, configmap["metadata"]["name"])
    assert event["reason"] == "Before"


@pytest.mark.local_only
def test_server_errors_are_retried_on_the_clock_then_dropped_and_counted(
    kube: KubeClient,
    namespace: str,
    configmap: JsonDict,
    local_server: Any,
    running: Callable[..., Running],
) -> None:
    r = running().start()
    errors_before = dropped("api_error")
    local_server.faults.fail_next(3, 500, verb="create", resource="events")
    r.recorder.event(configmap, WARNING, "Failing", "cannot be written")
    for _ in range(2):  # two waits between three attempts, each at most retry_interval
        assert r.clock.wait_for_waiters(1, timeout=WAIT), "sender did not back off"
        r.clock.step(10.0)
    r.flush()

    assert dropped("api_error") == errors_before + 1
    assert events_about(kube, namespace, configmap["metadata"]["name"]) == []
    # The sender survived: the next event is written.
    r.recorder.event(configmap, NORMAL, "Recovered", "written")
    r.flush()
    [event] = events_about(kube, namespace, configmap["metadata"]["name"])
    assert event["reason"] == "Recovered"


@pytest.mark.local_only
def test_shutdown_does_not_wait_out_a_retry_backoff(
    kube: KubeClient,
    namespace: str,
    configmap: JsonDict,
    local_server: Any,
    running: Callable[..., Running],
) -> None:
    r = running().start()
    errors_before = dropped("api_error")
    local_server.faults.fail_next(3, 500, verb="create", resource="events")
    r.recorder.event(configmap, WARNING, "Failing", "cannot be written")
    assert r.clock.wait_for_waiters(1, timeout=WAIT), "sender did not back off"

    assert r.broadcaster.shutdown(WAIT)  # the fake clock never moves: shutdown cuts the wait
    assert dropped("api_error") == errors_before + 1


@pytest.mark.local_only
def test_a_flush_does_not_wait_out_a_retry_backoff(
    kube: KubeClient,
    namespace: str,
    configmap: JsonDict,
    local_server: Any,
    running: Callable[..., Running],
) -> None:
    """A stopping manager flushes its Events while its Lease is still its own: a write
    waiting out a retry backoff (retry_interval, 10 s) is tried again at once, so the
    stop does not spend its graceful timeout waiting."""
    r = running().start()
    errors_before = dropped("api_error")
    local_server.faults.fail_next(1, 500, verb="create", resource="events")
    r.recorder.event(configmap, NORMAL, "Flaky", "written at the flush")
    assert r.clock.wait_for_waiters(1, timeout=WAIT), "sender did not back off"

    assert r.broadcaster.flush(WAIT)  # the fake clock never moves: the flush cuts the wait
    [event] = events_about(kube, namespace, configmap["metadata"]["name"])
    assert (event["reason"], event["count"]) == ("Flaky", 1)
    assert dropped("api_error") == errors_before


@pytest.mark.local_only
def test_a_transient_server_error_is_retried_until_written(
    kube: KubeClient,
    namespace: str,
    configmap: JsonDict,
    local_server: Any,
    running: Callable[..., Running],
) -> None:
    r = running().start()
    errors_before = dropped("api_error")
    local_server.faults.fail_next(1, 500, verb="create", resource="events")
    r.recorder.event(configmap, NORMAL, "Flaky", "written on the second attempt")
    assert r.clock.wait_for_waiters(1, timeout=WAIT)
    [deadline] = r.clock.waiter_deadlines()
    assert deadline is not None and deadline <= r.clock.now() + 10.0
    r.clock.step(10.0)
    r.flush()

    [event] = events_about(kube, namespace, configmap["metadata"]["name"])
    assert (event["reason"], event["count"]) == ("Flaky", 1)
    assert dropped("api_error") == errors_before


@pytest.mark.local_only
def test_a_repeat_patched_behind_its_failed_create_keeps_its_count(
    kube: KubeClient,
    namespace: str,
    configmap: JsonDict,
    local_server: Any,
    running: Callable[..., Running],
) -> None:
    """One batch: another Event's repeat (the namespace's first write), then E and E's
    repeat pipelined behind it: E's create fails (500) and E's repeat PATCH finds no
    Event (404). E's create is retried and written; the repeat must then patch it (count
    2), not create it anew into an AlreadyExists that loses the repeat."""
    r = running().start()
    r.recorder.event(configmap, NORMAL, "Other", "first")
    r.flush()
    local_server.faults.fail_next(1, 500, verb="create", resource="events")
    r.recorder.event(configmap, NORMAL, "Other", "first")
    r.recorder.event(configmap, NORMAL, "Flaky", "twice")
    r.recorder.event(configmap, NORMAL, "Flaky", "twice")
    assert r.clock.wait_for_waiters(1, timeout=WAIT)  # E's create waits to be retried
    r.clock.step(10.0)
    r.flush()

    events = events_about(kube, namespace, configmap["metadata"]["name"])
    assert sorted((e["reason"], e["count"]) for e in events) == [("Flaky", 2), ("Other", 2)]


@pytest.mark.local_only
def test_a_create_whose_answer_was_lost_is_sent_again_and_already_exists_is_written(
    *,
    namespace: str,
    configmap: JsonDict,
    local_server: Any,
    running: Callable[..., Running],
    kube: KubeClient,
    tmp_path: Any,
) -> None:
    """Event names are fixed: a create whose outcome is unknown (the server committed
    it, the answer was lost) is sent again, and its AlreadyExists means written."""
    from manager.testing.proxy import TcpProxy

    host, port = local_server.url.removeprefix("http://").split(":")
    with TcpProxy((host, int(port))) as proxy:
        path = local_server.kubeconfig_for("events", tmp_path / "events", server=proxy.url)
        client = KubeClient.from_kubeconfig(str(path), options=ClientOptions(qps=0))
        try:
            r = running(client).start()
            sent_before, errors_before = sent(), dropped("api_error")
            proxy.reset_after_answer(rb"POST /api/v1/namespaces/[^/]+/events")
            r.recorder.event(configmap, NORMAL, "Lost", "answer lost")
            assert r.clock.wait_for_waiters(1, timeout=WAIT)
            r.clock.step(10.0)
            r.flush()
            r.stop.set()
            assert r.broadcaster.shutdown(WAIT)
        finally:
            client.close()
    [event] = events_about(kube, namespace, configmap["metadata"]["name"])
    assert (event["reason"], event["count"]) == ("Lost", 1)
    assert sent() == sent_before + 1
    assert dropped("api_error") == errors_before


@pytest.mark.local_only
def test_client_errors_are_dropped_without_retrying(
    kube: KubeClient,
    namespace: str,
    configmap: JsonDict,
    local_server: Any,
    running: Callable[..., Running],
) -> None:
    r = running().start()
    errors_before = dropped("api_error")
    local_server.faults.fail_next(1, 403, verb="create", resource="events")
    r.recorder.event(configmap, NORMAL, "Forbidden", "refused")
    r.flush()

    assert not r.clock.has_waiters()  # no backoff for an error retrying cannot fix
    assert dropped("api_error") == errors_before + 1
    assert events_about(kube, namespace, configmap["metadata"]["name"]) == []


class CountingCreates(KubeClient):
    """A KubeClient that counts its Event creates (sent requests, whatever the answer)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.creates = 0

    def write_session(self) -> WriteSession:
        return CountingSession(self)


class CountingSession(WriteSession):
    def __init__(self, client: CountingCreates) -> None:
        super().__init__(client)
        self.counting = client

    def create(self, resource: Any, body: JsonDict, namespace: str | None = None) -> JsonDict:
        self.counting.creates += 1
        return super().create(resource, body, namespace)

    def pipeline(
        self, writes: Sequence[Write], *, decode: bool = True
    ) -> list[JsonDict | ApiError | WriteFenced]:
        self.counting.creates += sum(1 for w in writes if w.method == "POST")
        return super().pipeline(writes, decode=decode)


def test_a_terminating_namespace_costs_one_refused_event_then_none_for_a_while(
    kubeconfig_path: str, kube: KubeClient, namespace: str, running: Callable[..., Running]
) -> None:
    held = {"metadata": {"name": "hold", "finalizers": ["overseer.io/test-hold"]}}
    about = make_configmap(kube, namespace)
    kube.create(CM, held, namespace)
    counting = CountingCreates.from_kubeconfig(kubeconfig_path, options=ClientOptions(qps=0))
    try:
        kube.delete(NAMESPACES, namespace)
        deadline = time.monotonic() + WAIT
        while not kube.get(CM, "hold", namespace)["metadata"].get("deletionTimestamp"):
            assert time.monotonic() < deadline, "the namespace deletion never started"
            time.sleep(0.05)
        r = running(counting, terminating_namespace_ttl=60.0).start()
        before = dropped("namespace_terminating")
        for i in range(3):
            r.recorder.event(about, NORMAL, "Tick", f"message {i}")
        r.flush()
        assert counting.creates == 1  # refused once; the next two were not sent
        assert dropped("namespace_terminating") == before + 3
        assert not r.clock.has_waiters()  # no retry backoff either
        r.clock.step(61.0)
        r.recorder.event(about, NORMAL, "Tick", "after the ttl")
        r.flush()
        assert counting.creates == 2  # tried again once the ttl is over
    finally:
        counting.close()
        kube.patch(CM, "hold", {"metadata": {"finalizers": None}}, namespace=namespace)


@pytest.mark.local_only
def test_a_dropped_patch_still_counts_toward_the_next_one(
    kube: KubeClient,
    namespace: str,
    configmap: JsonDict,
    local_server: Any,
    running: Callable[..., Running],
) -> None:
    r = running().start()
    r.recorder.event(configmap, NORMAL, "Synced", "ok")
    r.flush()
    local_server.faults.fail_next(1, 403, verb="patch", resource="events")
    r.recorder.event(configmap, NORMAL, "Synced", "ok")  # count 2 is lost
    r.recorder.event(configmap, NORMAL, "Synced", "ok")
    r.flush()

    [event] = events_about(kube, namespace, configmap["metadata"]["name"])
    assert event["count"] == 3


# -- validation, options, FakeRecorder ----------------------------------------------------


def test_invalid_calls_raise_value_error_at_once(kube: KubeClient) -> None:
    broadcaster = EventBroadcaster(kube, component="overseer-test")
    recorder = broadcaster.recorder()
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "n"}}
    with pytest.raises(ValueError, match="type"):
        recorder.event(obj, "Error", "Reason", "message")
    with pytest.raises(ValueError, match="reason"):
        recorder.event(obj, NORMAL, "", "message")
    with pytest.raises(ValueError, match="kind"):
        recorder.event({"metadata": {"name": "a", "namespace": "n"}}, NORMAL, "R", "m")
    with pytest.raises(ValueError, match=r"metadata\.name"):
        recorder.event({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}, NORMAL, "R", "m")
    with pytest.raises(ValueError, match="component"):
        EventBroadcaster(kube, component="")
    assert broadcaster.shutdown(1.0)


def test_event_options_reject_out_of_range_values() -> None:
    with pytest.raises(ValueError) as info:
        EventOptions(queue_size=0, spam_qps=0, max_attempts=0, retry_interval=-1)
    text = str(info.value)
    for field in ("queue_size", "spam_qps", "max_attempts", "retry_interval"):
        assert field in text


def test_fake_recorder_records_validates_and_is_thread_safe() -> None:
    fake = FakeRecorder()
    recorder: EventRecorder = fake
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "n"}}
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}}

    recorder.event(cm, WARNING, "Collision", "service exists")
    recorder.event(node, NORMAL, "Seen", "ok")
    assert fake.events == [
        RecordedEvent(WARNING, "Collision", "service exists", "n/a"),
        RecordedEvent(NORMAL, "Seen", "ok", "node-1"),
    ]
    with pytest.raises(ValueError):
        recorder.event(cm, "Error", "Collision", "bad type")
    with pytest.raises(ValueError):
        recorder.event({"metadata": {"name": "a"}}, NORMAL, "NoKind", "bad object")

    fake.clear()
    barrier = threading.Barrier(4)

    def emit(worker: int) -> None:
        barrier.wait()
        for i in range(250):
            recorder.event(cm, NORMAL, "Worker", f"{worker}/{i}")

    threads = [threading.Thread(target=emit, args=(w,), name=f"emit/{w}") for w in range(4)]
    for t in threads:
        t.start()
    assert fake.wait_for(lambda events: len(events) == 1000, timeout=WAIT)
    for t in threads:
        t.join(WAIT)
    assert len({e.message for e in fake.events}) == 1000
    assert not fake.wait_for(lambda events: len(events) > 1000, timeout=0.0)


# -- write fencing --------------------------------------------------------------------


def test_an_event_goes_out_under_the_fence_where_it_was_recorded(
    kube: KubeClient, namespace: str, configmap: JsonDict, running: Callable[..., Running]
) -> None:
    """An Event recorded by a reconcile of a leader that lost the Lease before the sender
    wrote it is not written: the fence of the recording context decides at send time."""
    allowed = {"leader": True}
    fence = ValidityFence(
        lambda: 5.0 if allowed["leader"] else 0.0, reason="unit_events", message="lost"
    )
    client = kube.with_fence(UNFENCED)  # a fenced client: context fences apply to it
    r = running(client).start()
    name = configmap["metadata"]["name"]
    with fenced(fence):
        r.recorder.event(configmap, NORMAL, "Leading", "written")
    r.flush()
    before = dropped("fenced")
    allowed["leader"] = False
    with fenced(fence):
        r.recorder.event(configmap, NORMAL, "Lost", "never written")
    r.recorder.event(configmap, NORMAL, "Elsewhere", "unfenced context: the client's fence")
    r.flush()
    assert dropped("fenced") == before + 1
    reasons = sorted(e["reason"] for e in events_about(kube, namespace, name))
    assert reasons == ["Elsewhere", "Leading"]


# -- the sender survives what goes wrong --------------------------------------------


class FlakyCredentials:
    """Credentials that fail their next ``failures`` uses with a ``ConfigError`` (an exec
    plugin failing at a token refresh), and otherwise answer as ``inner`` does."""

    def __init__(self, inner: Credentials | None) -> None:
        self.inner = inner
        self.failures = 0
        self.calls = 0

    def authorization(self) -> str | None:
        self.calls += 1
        if self.failures:
            self.failures -= 1
            raise ConfigError(["users[0].user.exec: the plugin exited with status 1"])
        return None if self.inner is None else self.inner.authorization()


@pytest.fixture
def flaky(kubeconfig_path: str) -> Iterator[tuple[KubeClient, FlakyCredentials]]:
    client = KubeClient.from_kubeconfig(kubeconfig_path, options=ClientOptions(qps=0))
    credentials = FlakyCredentials(client._config.credentials)
    client._config = dataclasses.replace(client._config, credentials=credentials)
    try:
        yield client, credentials
    finally:
        client.close()


def test_a_credential_error_while_building_the_request_head_is_retried_and_survived(
    kube: KubeClient,
    namespace: str,
    configmap: JsonDict,
    flaky: tuple[KubeClient, FlakyCredentials],
    running: Callable[..., Running],
) -> None:
    """An exec plugin that fails once at a token refresh: the batch's writes wait on the
    clock and go out again (client-go's recordToSink retries a failed write), and the
    sender keeps writing what is recorded later."""
    client, credentials = flaky
    r = running(client).start()
    errors_before, shutdown_before = sender_errors(), dropped("shutdown")
    lost_before = dropped("sender_error") + dropped("api_error")
    credentials.failures = 1
    for i in range(3):
        r.recorder.event(configmap, WARNING, f"Before{i}", "recorded while the plugin fails")
    assert r.clock.wait_for_waiters(1, timeout=WAIT), "the sender did not back off"
    assert sender_errors() == errors_before + 1
    r.clock.step(10.0)  # the first wait is at most retry_interval
    r.flush()
    assert not r.clock.has_waiters()  # one wait: the rest of the batch went out after it
    for i in range(5):
        r.recorder.event(configmap, NORMAL, f"After{i}", "recorded once the plugin works")
    r.flush()

    reasons = sorted(
        e["reason"] for e in events_about(kube, namespace, configmap["metadata"]["name"])
    )
    assert reasons == [f"After{i}" for i in range(5)] + [f"Before{i}" for i in range(3)]
    assert r.broadcaster.sender_alive() is None
    assert dropped("shutdown") == shutdown_before
    assert dropped("sender_error") + dropped("api_error") == lost_before
    assert sender_errors() == errors_before + 1


def test_a_credential_error_that_lasts_drops_the_batch_after_max_attempts_and_counts_it(
    kube: KubeClient,
    namespace: str,
    configmap: JsonDict,
    flaky: tuple[KubeClient, FlakyCredentials],
    running: Callable[..., Running],
) -> None:
    client, credentials = flaky
    r = running(client, max_attempts=2).start()
    errors_before, lost_before = sender_errors(), dropped("sender_error")
    credentials.failures = 2
    r.recorder.event(configmap, NORMAL, "First", "never written")
    assert r.clock.wait_for_waiters(1, timeout=WAIT), "the sender did not back off"
    r.clock.step(10.0)
    r.flush()
    assert not r.clock.has_waiters()  # two attempts in all: no third wait
    assert dropped("sender_error") == lost_before + 1
    assert sender_errors() == errors_before + 2

    r.recorder.event(configmap, NORMAL, "Later", "written")
    r.flush()
    [event] = events_about(kube, namespace, configmap["metadata"]["name"])
    assert event["reason"] == "Later"


class RaisingOnRetry(KubeClient):
    """A KubeClient whose write session answers the first pipelined write with a 500 and
    raises ``RuntimeError`` at the first single write (a retry): something other than an
    API error, where the sender writes one Event again."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pipelines = 0
        self.creates = 0

    def write_session(self) -> WriteSession:
        return RaisingOnRetrySession(self)


class RaisingOnRetrySession(WriteSession):
    def __init__(self, client: RaisingOnRetry) -> None:
        super().__init__(client)
        self.counting = client

    def pipeline(
        self, writes: Sequence[Write], *, decode: bool = True
    ) -> list[JsonDict | ApiError | WriteFenced]:
        self.counting.pipelines += 1
        if self.counting.pipelines == 1:
            return [ServerError("injected", status=500, reason="InternalError")] * len(writes)
        return super().pipeline(writes, decode=decode)

    def create(self, resource: Any, body: JsonDict, namespace: str | None = None) -> JsonDict:
        self.counting.creates += 1
        if self.counting.creates == 1:
            raise RuntimeError("injected: the session broke")
        return super().create(resource, body, namespace)


def test_an_exception_in_a_retried_write_is_one_more_failed_attempt(
    kubeconfig_path: str,
    kube: KubeClient,
    namespace: str,
    configmap: JsonDict,
    running: Callable[..., Running],
) -> None:
    with RaisingOnRetry.from_kubeconfig(kubeconfig_path, options=ClientOptions(qps=0)) as client:
        r = running(client).start()
        errors_before, api_errors_before = sender_errors(), dropped("api_error")
        r.recorder.event(configmap, NORMAL, "Flaky", "written on the third attempt")
        for _ in range(2):  # after the 500, after the exception
            assert r.clock.wait_for_waiters(1, timeout=WAIT), "the sender did not back off"
            r.clock.step(10.0)
        r.flush()
        [event] = events_about(kube, namespace, configmap["metadata"]["name"])
        assert event["reason"] == "Flaky"
        assert client.creates == 2
        assert sender_errors() == errors_before + 1
        assert dropped("api_error") == api_errors_before
        assert r.broadcaster.shutdown(WAIT)


def test_an_exception_escaping_a_batch_drops_and_counts_its_events_and_the_sender_goes_on(
    kube: KubeClient,
    namespace: str,
    configmap: JsonDict,
    running: Callable[..., Running],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The safety net: a defect anywhere in a batch costs that batch's events (dropped,
    counted), not the sender; a flush waiting on the batch returns."""
    original = EventBroadcaster._write_pending
    calls = {"n": 0}

    def broken_once(self: EventBroadcaster, *args: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("injected: a defect in the sender")
        original(self, *args)

    monkeypatch.setattr(EventBroadcaster, "_write_pending", broken_once)
    r = running().start()
    errors_before, lost_before = sender_errors(), dropped("sender_error")
    r.recorder.event(configmap, NORMAL, "Lost1", "in the broken batch")
    r.recorder.event(configmap, NORMAL, "Lost2", "in the broken batch")
    r.flush()  # the barrier of the failed batch is released
    assert dropped("sender_error") == lost_before + 2
    assert sender_errors() == errors_before + 1
    assert r.clock.wait_for_waiters(1, timeout=WAIT), "the sender did not back off"
    r.recorder.event(configmap, NORMAL, "Later", "written after the backoff")
    r.clock.step(10.0)
    r.flush()

    [event] = events_about(kube, namespace, configmap["metadata"]["name"])
    assert event["reason"] == "Later"
    assert r.broadcaster.sender_alive() is None


class Killed(BaseException):
    """What no handler of the sender catches: it ends the thread (test only)."""


def test_sender_alive_reports_a_sender_that_ended_by_itself_not_one_that_was_stopped(
    configmap: JsonDict, running: Callable[..., Running], monkeypatch: pytest.MonkeyPatch
) -> None:
    healthy = running()
    assert healthy.broadcaster.sender_alive() is None  # not started: nothing to report
    healthy.start()
    healthy.recorder.event(configmap, NORMAL, "Fine", "written")
    healthy.flush()
    assert healthy.broadcaster.sender_alive() is None
    assert healthy.broadcaster.shutdown(WAIT)
    assert healthy.broadcaster.sender_alive() is None  # ended as asked

    stopped = running().start()
    stopped.stop.set()
    assert stopped.broadcaster.flush(WAIT)
    assert stopped.broadcaster.sender_alive() is None  # ended as asked

    def killed(self: EventBroadcaster, *args: Any) -> None:
        raise Killed("injected")

    monkeypatch.setattr(EventBroadcaster, "_send_batch", killed)
    dead = running().start()
    dead.recorder.event(configmap, NORMAL, "Fatal", "kills the sender")
    assert dead.broadcaster.flush(WAIT)  # returns: the sender has ended
    reason = dead.broadcaster.sender_alive()
    assert reason is not None and "the event sender has ended" in reason and "Killed" in reason
    dead.stop.set()
    assert dead.broadcaster.shutdown(WAIT)
    assert dead.broadcaster.sender_alive() == reason  # a stop later does not hide it


# -- batching -------------------------------------------------------------------------


class CountingSessions(KubeClient):
    """A KubeClient that counts the write sessions the sender opens and the rounds (the
    batches) it uses them for."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sessions = 0
        self.rounds = 0

    def write_session(self) -> WriteSession:
        self.sessions += 1
        return RoundCountingSession(self)


class RoundCountingSession(WriteSession):
    def __init__(self, client: CountingSessions) -> None:
        super().__init__(client)
        self.counting = client

    def __enter__(self) -> RoundCountingSession:
        self.counting.rounds += 1
        return self


def test_events_recorded_together_are_written_in_one_batch_on_one_connection(
    kubeconfig_path: str, kube: KubeClient, namespace: str, running: Callable[..., Running]
) -> None:
    objects = [make_configmap(kube, namespace) for _ in range(20)]
    with CountingSessions.from_kubeconfig(
        kubeconfig_path, options=ClientOptions(qps=0)
    ) as counting:
        # a long interval: every event below is recorded well within it
        r = running(counting, batch_interval=5.0).start()
        for obj in objects:
            r.recorder.event(obj, NORMAL, "Batched", "one of twenty")
        r.recorder.event(objects[0], NORMAL, "Batched", "one of twenty")  # a repeat: PATCH
        r.flush()  # a flush does not wait for the interval
        assert counting.rounds == 1
        for obj in objects:
            [event] = events_about(kube, namespace, obj["metadata"]["name"])
            assert event["reason"] == "Batched"
            assert event["count"] == (2 if obj is objects[0] else 1)


def test_the_sender_keeps_one_write_session_and_uses_it_once_per_batch(
    kubeconfig_path: str, kube: KubeClient, namespace: str, running: Callable[..., Running]
) -> None:
    about = make_configmap(kube, namespace)
    with CountingSessions.from_kubeconfig(
        kubeconfig_path, options=ClientOptions(qps=0)
    ) as counting:
        r = running(counting, batch_interval=5.0).start()
        r.recorder.event(about, NORMAL, "First", "one")
        r.flush()
        r.recorder.event(about, NORMAL, "Second", "two")
        r.flush()
        assert (counting.sessions, counting.rounds) == (1, 2)
        reasons = sorted(
            e["reason"] for e in events_about(kube, namespace, about["metadata"]["name"])
        )
        assert reasons == ["First", "Second"]


# -- correlation keys -------------------------------------------------------------------


@pytest.mark.parametrize(
    "obj",
    [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "n", "uid": "u"},
        },
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}},
    ],
    ids=["namespaced", "cluster-scoped"],
)
def test_the_senders_object_key_is_the_correlators_key_of_the_event_it_builds(
    obj: JsonDict,
) -> None:
    from manager.events import _build_event, _involved_object, _object_key, _recorded_object_key

    ref = _involved_object(obj)
    event = _build_event(
        ref, NORMAL, "R", "m", component="c", host="h", at=time.time_ns(), stamp="s"
    )
    assert _recorded_object_key(ref, "c", "h") == _object_key(event)


def test_the_correlator_takes_fields_that_are_no_strings_as_empty() -> None:
    from manager.clock import FakeClock
    from manager.events import EventCorrelator

    def event(name: object, message: object) -> JsonDict:
        return {
            "metadata": {"name": "e.1", "namespace": "n"},
            "involvedObject": {"kind": "Pod", "namespace": "n", "name": name},
            "source": {"component": "c"},
            "type": NORMAL,
            "reason": "R",
            "message": message,
            "count": 1,
            "firstTimestamp": "2026-11-28T15:00:00Z",
            "lastTimestamp": "2026-11-28T15:00:00Z",
        }

    correlator = EventCorrelator(FakeClock())
    first = correlator.correlate(event(None, 7))
    again = correlator.correlate(event("", ""))
    assert first is not None and first.patch is None
    assert again is not None and again.patch is not None  # the same event: a repeat

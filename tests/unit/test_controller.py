"""The controller (DESIGN.md §3.6, §3.11): informer events → predicates → mapping →
rate-limited workqueue → N workers → Reconciler, and what each outcome does to the
request; panic recovery; stopping; metrics, logging context and tracing.

Controllers run on a FakeClock (it drives only their queue's delays and rate limiter),
so a retry happens exactly when the test moves the clock. Synchronisation is by
conditions, events, barriers and ``FakeClock.wait_for_waiters``; every wait is bounded.
With one worker the queue is FIFO, so a request added after others is reconciled after
them: a "sentinel" request proves that everything before it has been handled.
"""

from __future__ import annotations

import io
import json
import logging
import threading
import uuid
from collections.abc import Callable, Hashable, Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from manager.cache.informer import HandlerFuncs, HandlerRegistration, SharedInformer
from manager.clock import FakeClock
from manager.controller import Controller
from manager.errors import ApiError, NamespaceTerminating, TerminalError, WriteFenced
from manager.fencing import current_fence, fenced
from manager.handler import EnqueueRequestForOwner
from manager.keys import JsonDict
from manager.logs import JsonFormatter, reconcile_context
from manager.metrics import REGISTRY
from manager.predicate import GenerationChanged, LabelChanged
from manager.reconcile import Request, Result
from manager.workqueue import RateLimiter, default_controller_rate_limiter
from manager.workqueue.delaying import MAX_WAIT
from tests.unit.cache.fakes import WAIT, FakeListerWatcher, cm, wait_until

Behaviour = Callable[[Request, int], Result]

SENTINEL_NS = "~sentinel"


def _ok(req: Request, n: int) -> Result:
    return Result()


def metric(metric_name: str, /, **labels: str) -> float:
    value = REGISTRY.get_sample_value(metric_name, labels)
    return 0.0 if value is None else value


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# -- fakes ---------------------------------------------------------------------------


class Recon:
    """A Reconciler that records each call, then does what ``behave(request, n)`` says
    (``n``: the how-manieth call for that request, from 1). Sentinels always succeed."""

    def __init__(self, behave: Behaviour = _ok) -> None:
        self.cond = threading.Condition()
        self.calls: list[Request] = []
        self.threads: list[str] = []
        self.behave = behave

    def reconcile(self, request: Request) -> Result:
        with self.cond:
            self.calls.append(request)
            self.threads.append(threading.current_thread().name)
            n = self.calls.count(request)
            self.cond.notify_all()
        if request.namespace == SENTINEL_NS:
            return Result()
        return self.behave(request, n)

    def count(self, request: Request) -> int:
        with self.cond:
            return self.calls.count(request)

    def wait_calls(self, request: Request, n: int = 1) -> None:
        wait_until(self.cond, lambda: self.calls.count(request) >= n, f"{n} calls of {request}")

    def sentinels(self) -> int:
        with self.cond:
            return sum(1 for c in self.calls if c.namespace == SENTINEL_NS)

    def real_calls(self) -> list[Request]:
        with self.cond:
            return [c for c in self.calls if c.namespace != SENTINEL_NS]


class RecordingLimiter:
    """Wraps a rate limiter and records ``("when", item, delay)`` / ``("forget", item)``."""

    def __init__(self, inner: RateLimiter[Hashable]) -> None:
        self.inner = inner
        self.cond = threading.Condition()
        self.log: list[tuple[Any, ...]] = []

    def when(self, item: Hashable) -> float:
        delay = self.inner.when(item)
        with self.cond:
            self.log.append(("when", item, delay))
            self.cond.notify_all()
        return delay

    def forget(self, item: Hashable) -> None:
        self.inner.forget(item)
        with self.cond:
            self.log.append(("forget", item))
            self.cond.notify_all()

    def num_requeues(self, item: Hashable) -> int:
        return self.inner.num_requeues(item)

    def calls_for(self, item: Hashable) -> list[tuple[Any, ...]]:
        with self.cond:
            return [c for c in self.log if c[1] == item]


class SpyInformer(SharedInformer):
    """Records handler registrations; ``removed`` is set when one is removed (the
    controller does that after it stopped taking new work)."""

    def __init__(self, lw: FakeListerWatcher) -> None:
        super().__init__(lw)
        self.added: list[HandlerRegistration] = []
        self.resync_periods: list[float] = []
        self.removed_regs: list[HandlerRegistration] = []
        self.removed = threading.Event()

    def add_event_handler(self, handler: Any, resync_period: float = 0.0) -> HandlerRegistration:
        reg = super().add_event_handler(handler, resync_period)
        self.added.append(reg)
        self.resync_periods.append(resync_period)
        return reg

    def remove_event_handler(self, registration: HandlerRegistration) -> None:
        super().remove_event_handler(registration)
        self.removed_regs.append(registration)
        self.removed.set()


class _Started(logging.Handler):
    """Sets ``event`` when the named controller logs that it started (its queue and
    workers exist then)."""

    def __init__(self, name: str, event: threading.Event) -> None:
        super().__init__(logging.DEBUG)
        self._name = name
        self._event = event

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg == "controller started" and getattr(record, "controller", "") == self._name:
            self._event.set()


class Running:
    """A controller's ``run`` in a thread."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller
        self.stop = threading.Event()
        self.returned = threading.Event()
        started = threading.Event()
        log = logging.getLogger("manager.controller")
        handler = _Started(controller.name, started)
        old_level = log.level
        log.setLevel(logging.INFO)
        log.addHandler(handler)
        try:
            self.thread = threading.Thread(target=self._run, name=f"test-run/{controller.name}")
            self.thread.start()
            assert started.wait(WAIT), "controller did not start"
        finally:
            log.removeHandler(handler)
            log.setLevel(old_level)

    def _run(self) -> None:
        self.controller.run(self.stop)
        self.returned.set()

    def add(self, *requests: Request) -> None:
        for r in requests:
            self.controller.queue.add(r)

    def sync(self, recon: Recon) -> None:
        """With one worker: return once everything queued so far has been handled."""
        sentinel = Request(SENTINEL_NS, uuid.uuid4().hex)
        self.controller.queue.add(sentinel)
        recon.wait_calls(sentinel)

    def shutdown(self) -> None:
        self.stop.set()
        self.thread.join(WAIT)
        assert not self.thread.is_alive(), "controller run() did not return"


class Env:
    """Starts controllers and informers; stops controllers first, then informers."""

    def __init__(self) -> None:
        self.controllers: list[Running] = []
        self.informers: list[tuple[threading.Event, threading.Thread]] = []

    def run(self, controller: Controller) -> Running:
        r = Running(controller)
        self.controllers.append(r)
        return r

    def informer(self, inf: SharedInformer) -> SharedInformer:
        stop = threading.Event()
        t = threading.Thread(target=inf.run, args=(stop,), name=f"test-informer/{inf.name}")
        t.start()
        self.informers.append((stop, t))
        return inf

    def close(self) -> None:
        for r in self.controllers:
            r.shutdown()
        for stop, _ in self.informers:
            stop.set()
        for _, t in self.informers:
            t.join(WAIT)
            assert not t.is_alive(), "informer did not stop"


@pytest.fixture
def env() -> Iterator[Env]:
    e = Env()
    try:
        yield e
    finally:
        e.close()


@pytest.fixture(scope="module")
def _exporter() -> InMemorySpanExporter:
    # The global provider can be set once per process, and manager.controller's tracer
    # (a proxy) delegates to whichever is set: reuse an SDK provider if one is there.
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        trace.set_tracer_provider(TracerProvider())
        provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider), "another tracer provider is installed"
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


@pytest.fixture
def spans(_exporter: InMemorySpanExporter) -> Iterator[InMemorySpanExporter]:
    _exporter.clear()
    yield _exporter
    _exporter.clear()


def step_until_redelivered(
    clock: FakeClock, run: Running, recon: Recon, req: Request, delay: float
) -> None:
    """``req`` (reconciled, its outcome handled) waits ``delay`` s in the delaying queue:
    it comes back when the clock reaches the delay, not before."""
    due = clock.now() + delay
    calls = recon.count(req)

    def parked() -> bool:
        # the queue's waiter sleeps until the item is due, at most MAX_WAIT at a time
        return clock.wait_for_waiters(1, deadline=min(due, clock.now() + MAX_WAIT))

    assert parked(), f"nothing parked until {due}"
    assert recon.count(req) == calls
    assert run.controller.queue.len() == 0
    clock.set(due - delay * 0.01)  # not yet
    assert parked()
    assert recon.count(req) == calls
    assert run.controller.queue.len() == 0
    clock.set(due)
    recon.wait_calls(req, calls + 1)


def assert_never_retried(clock: FakeClock, run: Running, recon: Recon, req: Request) -> None:
    """Move the clock past every possible backoff: ``req`` does not come back."""
    calls = recon.count(req)
    clock.step(2000.0)  # beyond the 1000 s backoff cap
    # the queue's waiter has moved everything due into the queue once it parks again
    assert clock.wait_for_waiters(1, deadline=clock.now() + MAX_WAIT)
    run.sync(recon)
    assert recon.count(req) == calls


def new_controller(
    recon: Recon, *, workers: int = 1, limiter: RateLimiter[Hashable] | None = None
) -> tuple[Controller, FakeClock]:
    clock = FakeClock()
    return Controller(
        unique("ctl"), recon, workers=workers, rate_limiter=limiter, clock=clock
    ), clock


# -- the outcome table ---------------------------------------------------------------


def test_success_forgets_the_failure_history(env: Env) -> None:
    def flaky(req: Request, n: int) -> Result:
        if n == 1:
            raise ApiError("transient", status=500)
        return Result()

    recon = Recon(flaky)
    clock = FakeClock()
    limiter = RecordingLimiter(default_controller_rate_limiter(clock=clock))
    ctl = Controller(unique("ctl"), recon, rate_limiter=limiter, clock=clock)
    run = env.run(ctl)
    req = Request("ns", "a")
    run.add(req)
    recon.wait_calls(req)
    step_until_redelivered(clock, run, recon, req, 0.005)
    run.sync(recon)
    assert limiter.calls_for(req) == [("when", req, 0.005), ("forget", req)]
    assert ctl.queue.num_requeues(req) == 0
    assert_never_retried(clock, run, recon, req)
    # done was called: the same key is processed again when added again
    run.add(req)
    recon.wait_calls(req, 3)
    run.shutdown()
    successes = metric("controller_runtime_reconcile_total", controller=ctl.name, result="success")
    assert successes == 2 + recon.sentinels()


def test_requeue_after_forgets_and_comes_back_only_after_the_delay(env: Env) -> None:
    def behave(req: Request, n: int) -> Result:
        if n == 1:
            raise ApiError("transient", status=500)  # gives it a failure history
        if n == 2:
            return Result(requeue_after=30.0)
        return Result()

    recon = Recon(behave)
    clock = FakeClock()
    limiter = RecordingLimiter(default_controller_rate_limiter(clock=clock))
    ctl = Controller(unique("ctl"), recon, rate_limiter=limiter, clock=clock)
    run = env.run(ctl)
    req = Request("ns", "a")
    run.add(req)
    recon.wait_calls(req)
    step_until_redelivered(clock, run, recon, req, 0.005)
    step_until_redelivered(clock, run, recon, req, 30.0)
    run.sync(recon)
    # forget before add_after, and once more after the third (successful) reconcile
    assert limiter.calls_for(req) == [("when", req, 0.005), ("forget", req), ("forget", req)]
    assert ctl.queue.num_requeues(req) == 0
    assert (
        metric("controller_runtime_reconcile_total", controller=ctl.name, result="requeue_after")
        == 1
    )
    assert_never_retried(clock, run, recon, req)
    run.add(req)
    recon.wait_calls(req, 4)


def test_requeue_true_backs_off_with_the_rate_limiter(env: Env) -> None:
    recon = Recon(lambda req, n: Result(requeue=n <= 3))
    ctl, clock = new_controller(recon)
    run = env.run(ctl)
    req = Request("ns", "a")
    run.add(req)
    recon.wait_calls(req)
    for i, delay in enumerate([0.005, 0.01, 0.02], start=1):
        assert clock.wait_for_waiters(1, deadline=clock.now() + delay)
        assert ctl.queue.num_requeues(req) == i
        step_until_redelivered(clock, run, recon, req, delay)
    run.sync(recon)
    assert recon.count(req) == 4
    assert ctl.queue.num_requeues(req) == 0
    assert metric("controller_runtime_reconcile_total", controller=ctl.name, result="requeue") == 3
    assert metric("controller_runtime_reconcile_errors_total", controller=ctl.name) == 0
    assert_never_retried(clock, run, recon, req)


@pytest.mark.parametrize(
    ("result", "counted_as", "again_after", "limiter_calls"),
    [
        # both: the delay wins (controller-runtime: RequeueAfter > 0 first), no backoff
        (Result(requeue=True, requeue_after=5.0), "requeue_after", 5.0, ["forget", "forget"]),
        # 0 asks for no delay: done, as Result()
        (Result(requeue_after=0), "success", None, ["forget"]),
        # ... and with requeue=True it is requeue=True: the rate limiter's backoff
        (Result(requeue=True, requeue_after=0.0), "requeue", 0.005, ["when", "forget"]),
    ],
    ids=["both", "zero", "zero-and-requeue"],
)
def test_requeue_and_requeue_after_together_and_requeue_after_zero(
    env: Env,
    result: Result,
    counted_as: str,
    again_after: float | None,
    limiter_calls: list[str],
) -> None:
    recon = Recon(lambda req, n: result if n == 1 else Result())
    clock = FakeClock()
    limiter = RecordingLimiter(default_controller_rate_limiter(clock=clock))
    ctl = Controller(unique("ctl"), recon, rate_limiter=limiter, clock=clock)
    run = env.run(ctl)
    req = Request("ns", "a")
    run.add(req)
    recon.wait_calls(req)
    if again_after is None:
        assert_never_retried(clock, run, recon, req)
    else:
        step_until_redelivered(clock, run, recon, req, again_after)
        run.sync(recon)
        assert_never_retried(clock, run, recon, req)
    assert [call[0] for call in limiter.calls_for(req)] == limiter_calls
    assert metric("controller_runtime_reconcile_total", controller=ctl.name, result=counted_as) == (
        1 if counted_as != "success" else 1 + recon.sentinels()
    )


def test_a_negative_requeue_after_is_refused_where_it_is_made() -> None:
    with pytest.raises(ValueError, match="requeue_after must be >= 0"):
        Result(requeue_after=-1.0)


def test_exception_is_retried_with_growing_backoff_on_the_default_limiter(env: Env) -> None:
    def failing(req: Request, n: int) -> Result:
        raise ApiError("conflict", status=409, reason="Conflict")

    recon = Recon(failing)
    ctl, clock = new_controller(recon)  # rate_limiter=None: the controller default
    run = env.run(ctl)
    req, other = Request("ns", "a"), Request("ns", "b")
    run.add(req)
    recon.wait_calls(req)
    for i, delay in enumerate([0.005, 0.01, 0.02, 0.04], start=1):
        # the waiter is parked until exactly now + delay: the failure was counted
        assert clock.wait_for_waiters(1, deadline=clock.now() + delay)
        assert ctl.queue.num_requeues(req) == i
        step_until_redelivered(clock, run, recon, req, delay)
    assert ctl.queue.num_requeues(other) == 0  # per item
    errors = metric("controller_runtime_reconcile_errors_total", controller=ctl.name)
    assert errors >= 4
    assert metric("controller_runtime_reconcile_total", controller=ctl.name, result="error") >= 4
    assert metric("controller_runtime_reconcile_panics_total", controller=ctl.name) == 0  # API


def test_terminal_error_forgets_and_never_retries(env: Env) -> None:
    def behave(req: Request, n: int) -> Result:
        if n == 1:
            raise ApiError("transient", status=503)
        raise TerminalError("spec.ports is invalid")

    recon = Recon(behave)
    clock = FakeClock()
    limiter = RecordingLimiter(default_controller_rate_limiter(clock=clock))
    ctl = Controller(unique("ctl"), recon, rate_limiter=limiter, clock=clock)
    run = env.run(ctl)
    req = Request("ns", "a")
    run.add(req)
    recon.wait_calls(req)
    step_until_redelivered(clock, run, recon, req, 0.005)
    run.sync(recon)
    assert limiter.calls_for(req) == [("when", req, 0.005), ("forget", req)]
    assert ctl.queue.num_requeues(req) == 0
    assert_never_retried(clock, run, recon, req)
    assert recon.count(req) == 2
    assert metric("controller_runtime_terminal_reconcile_errors_total", controller=ctl.name) == 1
    assert metric("controller_runtime_reconcile_errors_total", controller=ctl.name) == 2
    assert metric("controller_runtime_reconcile_panics_total", controller=ctl.name) == 0
    # done was called: a new event for it is reconciled again
    run.add(req)
    recon.wait_calls(req, 3)


@pytest.mark.parametrize(
    ("error", "result"),
    [
        # This replica may not write (lost the Lease, or the key moved): the replica that
        # may handles the object; retrying here would only be refused again.
        (WriteFenced("write refused: not the leader", reason="not_leader"), "fenced"),
        # NamespaceLifecycle refused a create: the namespace and what is in it are going
        # away, and every retry would be refused again (issue 15: ~3 refused creates per
        # object). Any plugin gets this, not only the exposer.
        (
            NamespaceTerminating(
                'services "a" is forbidden: unable to create new content in namespace ns '
                "because it is being terminated"
            ),
            "namespace_terminating",
        ),
    ],
    ids=["fenced-write", "terminating-namespace"],
)
def test_a_refusal_no_retry_can_change_ends_the_reconcile_without_a_retry(
    env: Env, error: Exception, result: str
) -> None:
    def behave(req: Request, n: int) -> Result:
        raise error

    recon = Recon(behave)
    clock = FakeClock()
    limiter = RecordingLimiter(default_controller_rate_limiter(clock=clock))
    ctl = Controller(unique("ctl"), recon, rate_limiter=limiter, clock=clock)
    run = env.run(ctl)
    req = Request("ns", "a")
    run.add(req)
    recon.wait_calls(req)
    run.sync(recon)
    assert limiter.calls_for(req) == [("forget", req)]
    assert_never_retried(clock, run, recon, req)
    assert metric("controller_runtime_reconcile_total", controller=ctl.name, result=result) == 1
    assert metric("controller_runtime_reconcile_errors_total", controller=ctl.name) == 0
    assert metric("controller_runtime_reconcile_panics_total", controller=ctl.name) == 0


def test_workers_reconcile_under_the_fence_of_the_thread_that_runs_the_controller(
    env: Env,
) -> None:
    seen: list[object] = []

    def behave(req: Request, n: int) -> Result:
        seen.append(current_fence())
        return Result()

    class Marker:
        def check(self) -> float | None:
            return None

    fence = Marker()
    recon = Recon(behave)
    ctl, _ = new_controller(recon)
    stop = threading.Event()
    started = threading.Event()
    log = logging.getLogger("manager.controller")
    handler = _Started(ctl.name, started)
    old_level = log.level
    log.setLevel(logging.INFO)
    log.addHandler(handler)

    def run_fenced() -> None:
        with fenced(fence):
            ctl.run(stop)

    thread = threading.Thread(target=run_fenced, name="test-fenced-controller")
    thread.start()
    try:
        assert started.wait(WAIT), "controller did not start"
        ctl.queue.add(Request("ns", "a"))
        recon.wait_calls(Request("ns", "a"))
    finally:
        log.removeHandler(handler)
        log.setLevel(old_level)
        stop.set()
        thread.join(WAIT)
    assert seen == [fence]


# -- panic recovery ------------------------------------------------------------------


def test_a_bug_in_reconcile_is_counted_logged_and_the_worker_goes_on(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    def behave(req: Request, n: int) -> Result:
        if req.name == "bug":
            return {"present": Result()}[req.namespace]  # KeyError: a bug
        if req.name == "none":
            return None  # type: ignore[return-value]
        return Result()

    caplog.set_level(logging.ERROR, logger="manager.controller")
    recon = Recon(behave)
    ctl, clock = new_controller(recon)
    run = env.run(ctl)
    bug, none, nxt = Request("ns", "bug"), Request("ns", "none"), Request("ns", "next")
    run.add(bug, none, nxt)
    recon.wait_calls(nxt)
    run.sync(recon)
    assert recon.real_calls() == [bug, none, nxt]
    assert set(recon.threads) == {f"worker/{ctl.name}/0"}  # one worker did all of it
    assert metric("controller_runtime_reconcile_panics_total", controller=ctl.name) == 2
    assert metric("controller_runtime_reconcile_errors_total", controller=ctl.name) == 2
    assert metric("controller_runtime_reconcile_total", controller=ctl.name, result="success") == 2
    failures = [r for r in caplog.records if r.name == "manager.controller"]
    assert len(failures) == 2
    assert failures[0].levelno == logging.ERROR
    assert failures[0].exc_info is not None and failures[0].exc_info[0] is KeyError
    assert failures[1].exc_info is not None and failures[1].exc_info[0] is TypeError
    # a panic is retried like any error
    assert ctl.queue.num_requeues(bug) == 1
    step_until_redelivered(clock, run, recon, bug, 0.005)


# -- watches: for, owns, predicates ----------------------------------------------------


def svc(name: str, rv: str, *refs: JsonDict, namespace: str = "prod") -> JsonDict:
    return cm(name, rv, namespace, metadata={"ownerReferences": list(refs)})


def dep_ref(name: str, *, controller: bool = True, api_version: str = "apps/v1") -> JsonDict:
    return {
        "apiVersion": api_version,
        "kind": "Deployment",
        "name": name,
        "uid": f"uid-{name}",
        "controller": controller,
    }


def test_owns_wakes_the_controller_owner_of_child_events(env: Env) -> None:
    recon = Recon()
    lw = FakeListerWatcher(
        [
            svc("noise-1", "1", dep_ref("shared", controller=False)),
            svc("noise-2", "2", {**dep_ref("ss"), "kind": "StatefulSet"}),
            svc("noise-3", "3", dep_ref("old-api", api_version="extensions/v1beta1")),
            svc("web-svc", "4", dep_ref("web")),
        ],
        rv="10",
    )
    inf = env.informer(SharedInformer(lw))
    ctl = Controller(unique("ctl"), recon, clock=FakeClock()).owns(inf, "apps", "Deployment")
    run = env.run(ctl)
    web, web2 = Request("prod", "web"), Request("prod", "web2")
    recon.wait_calls(web)
    w = lw.next_watch()
    # the owner reference moved from web to web2: both owners are woken
    w.send("MODIFIED", svc("web-svc", "11", dep_ref("web2")))
    recon.wait_calls(web, 2)
    recon.wait_calls(web2)
    # a child deleted while the watch was down arrives as a tombstone: its last state's
    # owner is woken
    lw.set_state([s for s in lw.items if s["metadata"]["name"] != "web-svc"], rv="20")
    w.error(410)
    recon.wait_calls(web2, 2)
    run.sync(recon)
    assert recon.real_calls() == [web, web, web2, web2] or recon.real_calls() == [
        web,
        web2,
        web,
        web2,
    ]


def test_owns_counts_non_controller_owners_only_when_asked(env: Env) -> None:
    recon = Recon()
    lw = FakeListerWatcher([svc("s", "1", dep_ref("a", controller=False), dep_ref("b"))], rv="5")
    inf = env.informer(SharedInformer(lw))
    ctl = Controller(unique("ctl"), recon, clock=FakeClock()).watch(
        inf, EnqueueRequestForOwner("apps", "Deployment", only_controller=False)
    )
    run = env.run(ctl)
    recon.wait_calls(Request("prod", "a"))
    recon.wait_calls(Request("prod", "b"))
    w = lw.next_watch()
    w.send("DELETED", svc("s", "6", dep_ref("a", controller=False), dep_ref("b")))
    recon.wait_calls(Request("prod", "a"), 2)
    recon.wait_calls(Request("prod", "b"), 2)
    run.sync(recon)
    assert sorted(recon.real_calls()) == [Request("prod", "a")] * 2 + [Request("prod", "b")] * 2


def test_filtered_update_does_not_reach_the_reconciler(env: Env) -> None:
    recon = Recon()
    lw = FakeListerWatcher([cm("d", "1", metadata={"generation": 1})], rv="10")
    inf = env.informer(SharedInformer(lw))
    ctl = Controller(unique("ctl"), recon, clock=FakeClock()).for_(inf, GenerationChanged())
    run = env.run(ctl)  # a late start first receives what the informer has cached
    d, marker = Request("default", "d"), Request("default", "marker")
    recon.wait_calls(d)
    w = lw.next_watch()
    w.send("MODIFIED", cm("d", "11", metadata={"generation": 1}))  # status-only: filtered
    w.send("ADDED", cm("marker", "12"))  # passes (creates always do)
    recon.wait_calls(marker)
    run.sync(recon)
    assert recon.count(d) == 1
    w.send("MODIFIED", cm("d", "13", metadata={"generation": 2}))  # spec change: passes
    recon.wait_calls(d, 2)
    w.send("DELETED", cm("d", "14", metadata={"generation": 2}))  # deletes pass
    recon.wait_calls(d, 3)


def test_a_controller_asks_its_informers_for_no_periodic_resync(env: Env) -> None:
    """controller-runtime re-delivers every cached object every 10 hours by default;
    here an object nobody changes is reconciled again only when a reconcile asked
    (``requeue_after``)."""
    recon = Recon()
    inf = SpyInformer(FakeListerWatcher([cm("a", "1")], rv="10"))
    env.run(Controller(unique("ctl"), recon, clock=FakeClock()).for_(inf))
    env.informer(inf)
    recon.wait_calls(Request("default", "a"))
    assert inf.resync_periods == [0.0]


def test_every_predicate_of_a_watch_must_pass(env: Env) -> None:
    recon = Recon()
    lw = FakeListerWatcher([cm("d", "1", metadata={"generation": 1})], rv="10")
    inf = env.informer(SharedInformer(lw))
    ctl = Controller(unique("ctl"), recon, clock=FakeClock())
    run = env.run(ctl.for_(inf, GenerationChanged(), LabelChanged()))
    d = Request("default", "d")
    recon.wait_calls(d)  # a create: both predicates pass creates
    w = lw.next_watch()
    w.send("MODIFIED", cm("d", "11", metadata={"generation": 2}))  # spec only: dropped
    w.send("MODIFIED", cm("d", "12", metadata={"generation": 2, "labels": {"a": "1"}}))  # labels
    run.sync(recon)
    assert recon.count(d) == 1
    w.send("MODIFIED", cm("d", "13", metadata={"generation": 3, "labels": {"a": "2"}}))  # both
    recon.wait_calls(d, 2)


# -- workers ---------------------------------------------------------------------------


def test_n_workers_reconcile_n_keys_at_the_same_time(env: Env) -> None:
    both = threading.Barrier(4, timeout=WAIT)
    leave = threading.Barrier(4, timeout=WAIT)
    active_seen: list[float] = []
    name = unique("ctl")

    def behave(req: Request, n: int) -> Result:
        both.wait()  # all four are inside reconcile now
        active_seen.append(metric("controller_runtime_active_workers", controller=name))
        leave.wait()
        return Result()

    recon = Recon(behave)
    ctl = Controller(name, recon, workers=4, clock=FakeClock())
    run = env.run(ctl)
    assert metric("controller_runtime_max_concurrent_reconciles", controller=name) == 4
    reqs = [Request("ns", f"k{i}") for i in range(4)]
    run.add(*reqs)
    for r in reqs:
        recon.wait_calls(r)
    run.shutdown()
    assert not both.broken and not leave.broken
    assert active_seen == [4.0] * 4
    assert sorted(recon.threads) == [f"worker/{name}/{i}" for i in range(4)]
    assert metric("controller_runtime_reconcile_total", controller=name, result="success") == 4
    assert metric("controller_runtime_active_workers", controller=name) == 0


def test_the_same_key_is_never_reconciled_by_two_workers_at_once(env: Env) -> None:
    """Many events for three keys, four workers. Each reconcile holds its key until the
    test has sent another event for that very key (and the others) while it is in
    flight: the moment a queue without a processing set would hand it to an idle worker.
    """
    keys = [Request("ns", k) for k in ("a", "b", "c")]
    target = 300  # reconciles
    cond = threading.Condition()
    in_flight: list[Request] = []
    readded: set[Request] = set()
    overlaps: list[Request] = []
    entries = [0]
    release = [False]

    def behave(req: Request, n: int) -> Result:
        with cond:
            if req in in_flight:
                overlaps.append(req)
            in_flight.append(req)
            readded.discard(req)
            entries[0] += 1
            cond.notify_all()
            cond.wait_for(lambda: req in readded or release[0], timeout=1.0)
            in_flight.remove(req)
        return Result()

    recon = Recon(behave)
    ctl = Controller(unique("ctl"), recon, workers=4, clock=FakeClock())
    run = env.run(ctl)
    run.add(*keys)
    try:
        while True:
            with cond:
                assert cond.wait_for(
                    lambda: entries[0] >= target or any(k not in readded for k in in_flight),
                    WAIT,
                ), "no reconcile in flight"
                if entries[0] >= target:
                    break
                held = [k for k in in_flight if k not in readded]
            for k in held + keys:  # the held keys again, and the others
                ctl.queue.add(k)
            with cond:
                readded.update(held)
                cond.notify_all()
    finally:
        with cond:
            release[0] = True
            cond.notify_all()
    run.shutdown()
    assert overlaps == []
    assert entries[0] >= target


# -- metrics ---------------------------------------------------------------------------


def test_reconcile_and_workqueue_metrics(env: Env) -> None:
    active_seen: list[float] = []

    def behave(req: Request, n: int) -> Result:
        active_seen.append(metric("controller_runtime_active_workers", controller=name))
        if req.name == "err":
            raise ApiError("boom", status=500)
        if req.name == "rq":
            return Result(requeue=True)
        if req.name == "ra":
            return Result(requeue_after=60.0)
        return Result()

    name = unique("ctl")
    recon = Recon(behave)
    ctl = Controller(name, recon, workers=3, clock=FakeClock())
    run = env.run(ctl)
    assert metric("controller_runtime_max_concurrent_reconciles", controller=name) == 3
    reqs = [Request("ns", n) for n in ("ok", "err", "rq", "ra")]
    run.add(*reqs)
    for r in reqs:
        recon.wait_calls(r)
    run.shutdown()  # every reconcile has ended once run() returned
    for result in ("success", "error", "requeue", "requeue_after"):
        assert metric("controller_runtime_reconcile_total", controller=name, result=result) == 1
    assert metric("controller_runtime_reconcile_errors_total", controller=name) == 1
    assert metric("controller_runtime_reconcile_time_seconds_count", controller=name) == 4
    assert metric("controller_runtime_reconcile_time_seconds_sum", controller=name) > 0
    assert active_seen and all(1 <= v <= 3 for v in active_seen)
    assert metric("controller_runtime_active_workers", controller=name) == 0
    # the workqueue's metrics carry the controller's name
    assert metric("workqueue_adds_total", name=name, controller=name) == 4
    assert metric("workqueue_queue_duration_seconds_count", name=name, controller=name) == 4
    assert metric("workqueue_work_duration_seconds_count", name=name, controller=name) == 4
    assert metric("workqueue_depth", name=name, controller=name) == 0


def test_workqueue_retries_are_labelled_with_the_controller(env: Env) -> None:
    def behave(req: Request, n: int) -> Result:
        if req.name == "err":
            raise ApiError("boom", status=500)
        return Result(requeue=req.name == "rq", requeue_after=60.0 if req.name == "ra" else None)

    recon = Recon(behave)
    ctl, _ = new_controller(recon)
    run = env.run(ctl)
    run.add(*(Request("ns", n) for n in ("ok", "err", "rq", "ra")))
    run.sync(recon)  # one worker: every outcome above has been handled
    assert metric("workqueue_retries_total", name=ctl.name, controller=ctl.name) == 3
    assert metric("workqueue_retries_total", name=ctl.name, controller="") == 0


# -- stopping --------------------------------------------------------------------------


def test_stop_waits_for_the_reconcile_in_flight_and_starts_nothing_queued(env: Env) -> None:
    entered, gate = threading.Event(), threading.Event()
    order: list[str] = []

    def behave(req: Request, n: int) -> Result:
        entered.set()
        assert gate.wait(WAIT), "gate never opened"
        order.append("reconcile finished")
        return Result()

    recon = Recon(behave)
    inf = SpyInformer(FakeListerWatcher())  # never run: only shows the stop sequence
    ctl = Controller(unique("ctl"), recon, clock=FakeClock()).for_(inf)
    run = env.run(ctl)
    a, b, c = Request("ns", "a"), Request("ns", "b"), Request("ns", "c")
    run.add(a)
    assert entered.wait(WAIT)
    run.add(b, c)  # queued behind a
    run.stop.set()
    assert inf.removed.wait(WAIT)  # run() is winding down: no new work is taken
    run.thread.join(0.05)  # a reconcile is in flight: run() must not return
    assert not run.returned.is_set()
    gate.set()
    assert run.returned.wait(WAIT)
    order.append("run returned")
    run.shutdown()
    assert order == ["reconcile finished", "run returned"]
    assert recon.real_calls() == [a]


def test_stop_removes_the_event_handlers_from_the_informer(env: Env) -> None:
    recon = Recon()
    mapped: list[str] = []
    lw = FakeListerWatcher([cm("a", "1")], rv="10")
    inf = SpyInformer(lw)

    class Mapper:
        def requests(self, obj: JsonDict) -> list[Request]:
            mapped.append(obj["metadata"]["name"])
            return [Request("default", obj["metadata"]["name"])]

    probe_events: list[str] = []
    probe_got = threading.Event()
    ctl = Controller(unique("ctl"), recon, clock=FakeClock()).watch(inf, Mapper())
    run = env.run(ctl)

    def probe_add(o: JsonDict) -> None:
        probe_events.append(o["metadata"]["name"])
        probe_got.set()

    probe = HandlerFuncs(add=probe_add)
    env.informer(inf)
    recon.wait_calls(Request("default", "a"))
    w = lw.next_watch()
    inf.add_event_handler(probe)
    assert probe_got.wait(WAIT)
    run.shutdown()
    assert inf.removed_regs == inf.added[:1]  # the controller's own registration
    handler_threads = [t for t in threading.enumerate() if t.name.startswith("handler/")]
    assert len(handler_threads) == 1  # the probe's; the controller's listener has ended
    probe_got.clear()
    w.send("ADDED", cm("late", "11"))
    assert probe_got.wait(WAIT)
    assert probe_events == ["a", "late"]
    assert mapped == ["a"]
    assert Request("default", "late") not in recon.calls


# -- logging context and tracing ---------------------------------------------------------


def test_reconcile_logs_carry_controller_namespace_name_and_trace_id(
    env: Env, spans: InMemorySpanExporter
) -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    user_log = logging.getLogger("tests.reconciler")
    loggers = [user_log, logging.getLogger("manager.controller")]
    contexts: list[dict[str, str] | None] = []

    def behave(req: Request, n: int) -> Result:
        contexts.append(reconcile_context.get())
        user_log.info("converging", extra={"step": 1})
        if req.name == "bad":
            raise ApiError("boom", status=500)
        return Result()

    for lg in loggers:
        lg.addHandler(handler)
    user_log.setLevel(logging.INFO)
    try:
        recon = Recon(behave)
        ctl, _ = new_controller(recon)
        run = env.run(ctl)
        run.add(Request("ns1", "web"), Request("", "cluster-thing"), Request("ns2", "bad"))
        run.sync(recon)
        run.shutdown()
    finally:
        for lg in loggers:
            lg.removeHandler(handler)
        user_log.setLevel(logging.NOTSET)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    user = [ln for ln in lines if ln["msg"] == "converging"]
    assert [(ln["controller"], ln["namespace"], ln["name"]) for ln in user] == [
        (ctl.name, "ns1", "web"),
        (ctl.name, "", "cluster-thing"),
        (ctl.name, "ns2", "bad"),
    ]
    assert all(ln["step"] == 1 for ln in user)
    trace_ids = {format(s.context.trace_id, "032x") for s in spans.get_finished_spans()}
    assert all(ln["trace_id"] in trace_ids for ln in user)
    assert len({ln["trace_id"] for ln in user}) == 3  # one trace per reconcile
    # the controller's own failure log is in the same context, with the traceback
    (failure,) = [ln for ln in lines if ln["level"] == "error"]
    assert (failure["controller"], failure["namespace"], failure["name"]) == (
        ctl.name,
        "ns2",
        "bad",
    )
    assert "ApiError" in failure["exception"]
    assert contexts[0] is not None and contexts[0]["controller"] == ctl.name


def _by_object(spans: list[ReadableSpan]) -> dict[str, ReadableSpan]:
    out = {}
    for s in spans:
        assert s.attributes is not None
        out[str(s.attributes["k8s.object.name"])] = s
    return out


def test_span_attributes_and_recorded_exceptions(env: Env, spans: InMemorySpanExporter) -> None:
    def behave(req: Request, n: int) -> Result:
        if req.name == "err":
            raise ApiError("boom", status=500)
        if req.name == "bug":
            raise KeyError("oops")
        if req.name == "term":
            raise TerminalError("invalid")
        if req.name == "ra":
            return Result(requeue_after=5.0)
        if req.name == "rq":
            return Result(requeue=True)
        return Result()

    recon = Recon(behave)
    ctl, _ = new_controller(recon)
    run = env.run(ctl)
    names = ["ok", "err", "bug", "term", "ra", "rq"]
    run.add(*(Request("ns", n) for n in names))
    run.sync(recon)
    run.shutdown()
    finished = [
        s
        for s in spans.get_finished_spans()
        if s.attributes is not None and s.attributes.get("controller") == ctl.name
    ]
    assert all(s.name == "reconcile" for s in finished)
    by = _by_object(
        [s for s in finished if s.attributes and s.attributes["k8s.namespace.name"] == "ns"]
    )
    assert sorted(by) == sorted(names)  # one span each (a dict would hide duplicates: below)
    assert len(finished) == len(names) + 1  # + the sentinel
    expected = {
        "ok": "success",
        "err": "error",
        "bug": "error",
        "term": "terminal_error",
        "ra": "requeue_after",
        "rq": "requeue",
    }
    for n, result in expected.items():
        s = by[n]
        assert s.attributes is not None
        assert s.attributes["controller"] == ctl.name
        assert s.attributes["k8s.namespace.name"] == "ns"
        assert s.attributes["result"] == result
        errored = n in ("err", "bug", "term")
        assert (s.status.status_code is trace.StatusCode.ERROR) is errored
        exceptions = [e for e in s.events if e.name == "exception"]
        assert len(exceptions) == (1 if errored else 0)
    assert by["ra"].attributes is not None and by["ra"].attributes["requeue_after"] == 5.0
    bug_exc = next(e for e in by["bug"].events if e.name == "exception")
    assert bug_exc.attributes is not None and bug_exc.attributes["exception.type"] == "KeyError"
    assert "Traceback" in str(bug_exc.attributes["exception.stacktrace"])


# -- wiring --------------------------------------------------------------------------------


def test_controller_validates_its_options_and_lifecycle(env: Env) -> None:
    with pytest.raises(ValueError, match="name"):
        Controller("", Recon())
    with pytest.raises(ValueError, match="workers"):
        Controller("c", Recon(), workers=0)
    ctl = Controller(unique("ctl"), Recon(), clock=FakeClock())
    with pytest.raises(RuntimeError, match="not started"):
        _ = ctl.queue
    run = env.run(ctl)
    inf = SharedInformer(FakeListerWatcher())
    with pytest.raises(RuntimeError, match="after start"):
        ctl.for_(inf)
    with pytest.raises(RuntimeError, match="once"):
        ctl.run(run.stop)


def test_error_and_result_series_exist_at_zero_once_started(env: Env) -> None:
    # controller-runtime's initMetrics: a rate() or an alert over errors needs a series
    # before the first error happens (the monitoring bundle's queries read them).
    ctl = Controller(unique("zero"), Recon(_ok))
    env.run(ctl)
    for result in ("success", "error", "requeue", "requeue_after", "fenced"):
        labels = {"controller": ctl.name, "result": result}
        assert REGISTRY.get_sample_value("controller_runtime_reconcile_total", labels) == 0.0
    for name in (
        "controller_runtime_reconcile_errors_total",
        "controller_runtime_reconcile_panics_total",
        "controller_runtime_terminal_reconcile_errors_total",
    ):
        assert REGISTRY.get_sample_value(name, {"controller": ctl.name}) == 0.0
    assert ctl.last_error is None
    assert ctl.queue_depth == 0


def test_a_reconcile_refused_by_rbac_is_one_warning_line_naming_the_rule(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 32, item 2: a missing write permission logged a traceback per retry. Now one
    line says what was refused and the rule that would allow it; it is still retried
    (a rule granted meanwhile lets it through) and kept for the test kit."""
    from manager.errors import Forbidden

    refused = Forbidden(
        'configmaps "old" is forbidden: User "system:serviceaccount:team:ovs" cannot '
        'delete resource "configmaps" in API group "" in the namespace "team"',
        reason="Forbidden",
    )

    def behave(req: Request, n: int) -> Result:
        raise refused

    caplog.set_level(logging.INFO, logger="manager.controller")
    recon = Recon(behave)
    ctl, _ = new_controller(recon)
    run = env.run(ctl)
    req = Request("team", "old")
    run.add(req)
    recon.wait_calls(req)
    run.sync(recon)
    [line] = [r for r in caplog.records if r.name == "manager.controller" and r.levelno >= 30]
    assert line.levelno == logging.WARNING and line.exc_info is None
    assert line.getMessage() == "reconcile refused (403 Forbidden), requeued with backoff"
    assert line.__dict__["refused"] == 'delete configmaps in the namespace "team"'
    assert line.__dict__["rule"] == (
        '{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["delete"]}'
    )
    assert ctl.queue.num_requeues(req) == 1
    assert ctl.last_refusal == (req, refused)
    assert metric("controller_runtime_reconcile_errors_total", controller=ctl.name) == 1
    assert metric("controller_runtime_reconcile_panics_total", controller=ctl.name) == 0

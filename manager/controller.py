"""The controller: informer events → rate-limited workqueue → N workers → Reconciler
(controller-runtime ``pkg/internal/controller``, the seeds' processNextItem loop).

Contract (DESIGN.md §3.6):

* Watches are registered with :meth:`Controller.watch` (or :meth:`for_`/:meth:`owns`) and
  attached to their informers when the controller starts, so a controller that starts
  late (a new leader with warm caches) first receives every cached object.
* Predicates filter events before enqueue; an update enqueues the requests of both the
  old and the new object.
* ``workers`` threads (``worker/<controller>/<n>``) take requests from one queue; the
  queue guarantees a request is never reconciled by two workers at once.
* Outcome → queue: success → ``forget``; ``requeue_after`` → ``forget`` + ``add_after``;
  ``requeue`` → ``add_rate_limited``; exception → ``add_rate_limited``;
  :class:`~manager.errors.TerminalError` → ``forget``, no retry; ``done`` always.
* Exceptions never kill a worker; they are logged with the traceback and counted. An
  exception that is not an API or Overseer error is a bug and is also counted as a panic
  (``controller_runtime_reconcile_panics_total``).
* A write refused by the write fence (:class:`~manager.errors.WriteFenced`: this replica
  may not write now) ends the reconcile without a retry: ``forget``, counted as
  ``result="fenced"``, logged at debug level (the fence itself logs once). The replica
  that may write handles the object.
* A create refused because its namespace is being deleted
  (:class:`~manager.errors.NamespaceTerminating`) ends the reconcile without a retry:
  ``forget``, ``result="namespace_terminating"``, debug log. Every retry would be refused
  too, and the namespace's deletion removes what lives in it; an object that wants
  to act again when such a namespace is recreated gets its event then, or its resync.
* Workers run in a copy of the context of the thread that runs the controller, so a
  write fence set there (:func:`manager.fencing.fenced`) applies to every reconcile.
* Stopping: no new request is started; reconciles in flight finish; ``run`` returns when
  every worker has ended (the manager bounds the wait).

Every reconcile runs in an OpenTelemetry span ``reconcile`` and with a logging context
(controller, namespace, name, trace id).

Thread-safe: ``run`` occupies the calling thread; ``watch`` only before ``run``.
"""

from __future__ import annotations

import contextvars
import json
import logging
import threading
import time
from collections.abc import Hashable
from dataclasses import dataclass

from opentelemetry import trace
from prometheus_client import Counter, Gauge, Histogram

from manager.cache.informer import HandlerRegistration, SharedInformer
from manager.clock import Clock
from manager.errors import (
    ApiError,
    Forbidden,
    NamespaceTerminating,
    OverseerError,
    TerminalError,
    WriteFenced,
)
from manager.handler import EnqueueRequestForObject, EnqueueRequestForOwner, EventMapper, unwrap
from manager.keys import DeletedFinalStateUnknown, JsonDict
from manager.logs import reconcile_context
from manager.metrics import REGISTRY
from manager.predicate import Predicate
from manager.reconcile import Reconciler, Request, Result
from manager.workqueue import RateLimiter, RateLimitingQueue, new_rate_limiting_queue
from manager.workqueue.metrics import remove_queue_metrics

__all__ = ["Controller"]

logger = logging.getLogger(__name__)
tracer = trace.get_tracer("overseer.controller")


def log_context(controller: str, req: Request, span: trace.SpanContext) -> dict[str, str]:
    """What every record logged during a reconcile carries: controller, namespace, name,
    the cluster of a fleet-wide controller's request, and the trace id when tracing is
    on (no ``trace_id=""`` on every line otherwise)."""
    ctx = {"controller": controller, "namespace": req.namespace, "name": req.name}
    if req.cluster:
        ctx["cluster"] = req.cluster
    if span.is_valid:
        ctx["trace_id"] = format(span.trace_id, "032x")
    return ctx


RECONCILE_TOTAL = Counter(
    "controller_runtime_reconcile_total",
    "Total number of reconciliations per controller.",
    ["controller", "result"],
    registry=REGISTRY,
)
RECONCILE_ERRORS = Counter(
    "controller_runtime_reconcile_errors_total",
    "Total number of reconciliation errors per controller.",
    ["controller"],
    registry=REGISTRY,
)
RECONCILE_PANICS = Counter(
    "controller_runtime_reconcile_panics_total",
    "Total number of reconciliation panics (unexpected exceptions) per controller.",
    ["controller"],
    registry=REGISTRY,
)
TERMINAL_ERRORS = Counter(
    "controller_runtime_terminal_reconcile_errors_total",
    "Total number of terminal reconciliation errors per controller.",
    ["controller"],
    registry=REGISTRY,
)
RECONCILE_TIME = Histogram(
    "controller_runtime_reconcile_time_seconds",
    "Length of time per reconciliation per controller.",
    ["controller"],
    buckets=(
        0.005,
        0.01,
        0.025,
        0.05,
        0.1,
        0.15,
        0.2,
        0.25,
        0.3,
        0.35,
        0.4,
        0.45,
        0.5,
        0.6,
        0.7,
        0.8,
        0.9,
        1.0,
        1.25,
        1.5,
        1.75,
        2.0,
        2.5,
        3.0,
        3.5,
        4.0,
        4.5,
        5,
        6,
        7,
        8,
        9,
        10,
        15,
        20,
        25,
        30,
        40,
        50,
        60,
    ),
    registry=REGISTRY,
)
MAX_CONCURRENT = Gauge(
    "controller_runtime_max_concurrent_reconciles",
    "Maximum number of concurrent reconciles per controller.",
    ["controller"],
    registry=REGISTRY,
)
ACTIVE_WORKERS = Gauge(
    "controller_runtime_active_workers",
    "Number of currently used workers per controller.",
    ["controller"],
    registry=REGISTRY,
)


@dataclass(frozen=True, slots=True)
class _Watch:
    informer: SharedInformer
    mapper: EventMapper
    predicates: tuple[Predicate, ...]


class _Enqueuer:
    """The informer event handler of one watch: predicates, mapping, enqueue."""

    def __init__(self, queue: RateLimitingQueue[Request], watch: _Watch) -> None:
        self._queue = queue
        self._mapper = watch.mapper
        self._preds = watch.predicates

    def on_add(self, obj: JsonDict, is_in_initial_list: bool) -> None:
        if all(p.create(obj) for p in self._preds):
            for req in self._mapper.requests(obj):
                self._queue.add(req)

    def on_update(self, old: JsonDict, new: JsonDict) -> None:
        if all(p.update(old, new) for p in self._preds):
            reqs = set(self._mapper.requests(old))
            reqs.update(self._mapper.requests(new))
            for req in reqs:
                self._queue.add(req)

    def on_delete(self, obj: JsonDict | DeletedFinalStateUnknown) -> None:
        state = unwrap(obj)
        if all(p.delete(state) for p in self._preds):
            for req in self._mapper.requests(state):
                self._queue.add(req)


class Controller:
    """Runs a :class:`~manager.reconcile.Reconciler` over the requests its watches make."""

    def __init__(
        self,
        name: str,
        reconciler: Reconciler,
        *,
        workers: int = 1,
        rate_limiter: RateLimiter[Hashable] | None = None,
        clock: Clock | None = None,
        cluster: str = "",
    ) -> None:
        """
        Args:
            cluster: this controller runs a fleet-wide controller's keys of one cluster
                (:mod:`manager.fleet`): its queue is ``<name>/<cluster>`` and is dropped
                from the metrics when it stops; the per-controller gauges add up over the
                clusters.
        """
        if not name:
            raise ValueError("controller name must not be empty")
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.name = name
        self.reconciler = reconciler
        self.workers = workers
        self.cluster = cluster
        self._rate_limiter = rate_limiter
        self._clock = clock
        self._watches: list[_Watch] = []
        self._queue: RateLimitingQueue[Request] | None = None
        self._stopping = threading.Event()
        self._started = False
        self._active = 0
        self._active_lock = threading.Lock()
        self._last_error: tuple[float, str] | None = None  # (wall time, message), /statusz
        self._last_refusal: tuple[Request, Forbidden] | None = None  # a 403 in a reconcile

    # -- wiring ----------------------------------------------------------------------

    def watch(
        self, informer: SharedInformer, mapper: EventMapper, *predicates: Predicate
    ) -> Controller:
        """Enqueue ``mapper``'s requests for events of ``informer`` that pass ``predicates``."""
        if self._started:
            raise RuntimeError(f"controller {self.name}: watch() after start")
        self._watches.append(_Watch(informer, mapper, predicates))
        return self

    def for_(self, informer: SharedInformer, *predicates: Predicate) -> Controller:
        """Watch the primary resource: each object is its own request."""
        return self.watch(informer, EnqueueRequestForObject(), *predicates)

    def owns(
        self,
        informer: SharedInformer,
        owner_group: str,
        owner_kind: str,
        *predicates: Predicate,
        owner_namespaced: bool = True,
    ) -> Controller:
        """Watch an owned resource: an event wakes the object's controller owner (in the
        object's namespace; with ``owner_namespaced=False`` a cluster-scoped owner,
        requested with namespace "")."""
        mapper = EnqueueRequestForOwner(owner_group, owner_kind, owner_namespaced=owner_namespaced)
        return self.watch(informer, mapper, *predicates)

    @property
    def queue(self) -> RateLimitingQueue[Request]:
        """The workqueue (exists once :meth:`run` has started)."""
        if self._queue is None:
            raise RuntimeError(f"controller {self.name} has not started")
        return self._queue

    @property
    def queue_depth(self) -> int | None:
        """Requests waiting in the queue now (None before :meth:`run`)."""
        queue = self._queue
        return None if queue is None else queue.len()

    @property
    def active_workers(self) -> int:
        """Reconciles running now."""
        with self._active_lock:
            return self._active

    @property
    def last_error(self) -> tuple[float, str] | None:
        """The last failed reconcile: (wall-clock time, ``namespace/name: error``), or None."""
        with self._active_lock:
            return self._last_error

    @property
    def last_refusal(self) -> tuple[Request, Forbidden] | None:
        """The last reconcile the API server refused with a 403 (a missing RBAC rule, most
        often), and the error; None if none was. The test kit fails a test on it at once."""
        with self._active_lock:
            return self._last_refusal

    def _failed(self, req: Request, exc: BaseException) -> None:
        key = str(req)
        with self._active_lock:
            self._last_error = (time.time(), f"{key}: {type(exc).__name__}: {exc}")
            if isinstance(exc, Forbidden):
                self._last_refusal = (req, exc)

    def enqueue(self, request: Request) -> bool:
        """Add ``request`` to the queue (False, and nothing done, before :meth:`run`)."""
        queue = self._queue
        if queue is None or self._stopping.is_set():
            return False
        queue.add(request)
        return True

    # -- running ---------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Attach the watches, run the workers until ``stop`` is set, then wind down."""
        if self._started:
            raise RuntimeError(f"controller {self.name} may be run once")
        self._started = True
        queue_name = f"{self.name}/{self.cluster}" if self.cluster else self.name
        queue: RateLimitingQueue[Request] = new_rate_limiting_queue(
            self._rate_limiter, name=queue_name, controller=self.name, clock=self._clock
        )
        self._queue = queue
        registrations: list[tuple[SharedInformer, HandlerRegistration]] = []
        for w in self._watches:
            registrations.append((w.informer, w.informer.add_event_handler(_Enqueuer(queue, w))))
        if not self.cluster:  # one cluster's share of a fleet-wide controller's: added up
            MAX_CONCURRENT.labels(self.name).set(self.workers)
            ACTIVE_WORKERS.labels(self.name).set(0)
        # Every series at 0 from the start, as controller-runtime's initMetrics: a rate or
        # an alert over errors has a series to read before the first error.
        for result in ("success", "error", "requeue", "requeue_after", "fenced"):
            RECONCILE_TOTAL.labels(self.name, result)
        for counter in (RECONCILE_ERRORS, RECONCILE_PANICS, TERMINAL_ERRORS):
            counter.labels(self.name)
        if not self._wait_for_sync(stop):
            self._stopping.set()
            for informer, reg in registrations:
                informer.remove_event_handler(reg)
            queue.shut_down()
            if self.cluster:
                remove_queue_metrics(queue_name, self.name)
            return
        threads = [
            threading.Thread(
                target=contextvars.copy_context().run,
                args=(self._worker,),
                name=f"worker/{self.name}/{i}",
            )
            for i in range(self.workers)
        ]
        for t in threads:
            t.start()
        where = {"cluster": self.cluster} if self.cluster else {}
        logger.info(
            "controller started",
            extra={"controller": self.name, "workers": self.workers, **where},
        )
        try:
            stop.wait()
        finally:
            self._stopping.set()
            for informer, reg in registrations:
                informer.remove_event_handler(reg)
            queue.shut_down()
            for t in threads:
                t.join()
            if self.cluster:
                remove_queue_metrics(queue_name, self.name)
            logger.info("controller stopped", extra={"controller": self.name, **where})

    def _wait_for_sync(self, stop: threading.Event) -> bool:
        """Workers start once every watched informer that runs has synced
        (controller-runtime's WaitForSync): at once for a controller started with the
        manager, later for one whose watches were added while the manager runs. False if
        ``stop`` came first."""
        pending = [
            w.informer for w in self._watches if w.informer.started and not w.informer.has_synced()
        ]
        if pending:
            logger.info(
                "waiting for caches to sync",
                extra={"controller": self.name, "informers": ",".join(i.name for i in pending)},
            )
        while not all(i.has_synced() for i in pending):
            if stop.wait(0.02):
                return False
        return True

    def _worker(self) -> None:
        queue = self.queue
        while True:
            req, shutdown = queue.get()
            if shutdown or req is None:
                return
            try:
                if self._stopping.is_set():
                    return  # stop taking new work; the next leader relists everything
                self._reconcile(queue, req)
            finally:
                queue.done(req)

    def _reconcile(self, queue: RateLimitingQueue[Request], req: Request) -> None:
        name = self.name
        with self._active_lock:
            self._active += 1
            if self.cluster:
                ACTIVE_WORKERS.labels(name).inc()
            else:
                ACTIVE_WORKERS.labels(name).set(self._active)
        start = time.perf_counter()
        with tracer.start_as_current_span(
            "reconcile",
            attributes={
                "controller": name,
                "k8s.namespace.name": req.namespace,
                "k8s.object.name": req.name,
            },
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            if req.cluster:
                span.set_attribute("k8s.cluster.name", req.cluster)
            token = reconcile_context.set(log_context(name, req, span.get_span_context()))
            try:
                result = self.reconciler.reconcile(req)
                if not isinstance(result, Result):
                    raise TypeError(f"reconcile returned {type(result).__name__}, expected Result")
            except WriteFenced as exc:
                queue.forget(req)
                RECONCILE_TOTAL.labels(name, "fenced").inc()
                span.set_attribute("result", "fenced")
                logger.debug("reconcile ended: write refused by the fence", extra={"why": str(exc)})
            except NamespaceTerminating as exc:
                queue.forget(req)
                RECONCILE_TOTAL.labels(name, "namespace_terminating").inc()
                span.set_attribute("result", "namespace_terminating")
                logger.debug(
                    "reconcile ended: the namespace is being terminated", extra={"why": str(exc)}
                )
            except TerminalError as exc:
                queue.forget(req)
                TERMINAL_ERRORS.labels(name).inc()
                RECONCILE_ERRORS.labels(name).inc()
                self._failed(req, exc)
                RECONCILE_TOTAL.labels(name, "error").inc()
                span.record_exception(exc)
                span.set_status(trace.Status(trace.StatusCode.ERROR, str(exc)))
                span.set_attribute("result", "terminal_error")
                logger.error("reconcile failed terminally, not retrying", exc_info=True)
            except Forbidden as exc:
                # Refused by authorization (a missing RBAC rule) or an admission plugin:
                # one line saying what and which rule would allow it, not a traceback per
                # retry. Retried with backoff: a rule granted meanwhile lets it through.
                queue.add_rate_limited(req)
                RECONCILE_ERRORS.labels(name).inc()
                self._failed(req, exc)
                RECONCILE_TOTAL.labels(name, "error").inc()
                span.record_exception(exc)
                span.set_status(trace.Status(trace.StatusCode.ERROR, str(exc)))
                span.set_attribute("result", "error")
                refusal = exc.refusal
                context: dict[str, object] = {"requeues": queue.num_requeues(req)}
                if refusal is None:
                    context["error"] = str(exc)
                else:
                    context.update(
                        refused=refusal.describe(),
                        user=refusal.user,
                        rule=json.dumps(refusal.rule),
                    )
                logger.warning(
                    "reconcile refused (403 Forbidden), requeued with backoff", extra=context
                )
            except Exception as exc:
                queue.add_rate_limited(req)
                RECONCILE_ERRORS.labels(name).inc()
                self._failed(req, exc)
                RECONCILE_TOTAL.labels(name, "error").inc()
                if not isinstance(exc, ApiError | OverseerError):
                    RECONCILE_PANICS.labels(name).inc()
                span.record_exception(exc)
                span.set_status(trace.Status(trace.StatusCode.ERROR, str(exc)))
                span.set_attribute("result", "error")
                logger.error(
                    "reconcile failed, requeued with backoff",
                    extra={"requeues": queue.num_requeues(req)},
                    exc_info=True,
                )
            else:
                if result.requeue_after:  # 0 means "no delay requested", as controller-runtime
                    queue.forget(req)
                    queue.add_after(req, result.requeue_after)
                    RECONCILE_TOTAL.labels(name, "requeue_after").inc()
                    span.set_attribute("result", "requeue_after")
                    span.set_attribute("requeue_after", result.requeue_after)
                elif result.requeue:
                    queue.add_rate_limited(req)
                    RECONCILE_TOTAL.labels(name, "requeue").inc()
                    span.set_attribute("result", "requeue")
                else:
                    queue.forget(req)
                    RECONCILE_TOTAL.labels(name, "success").inc()
                    span.set_attribute("result", "success")
            finally:
                reconcile_context.reset(token)
                RECONCILE_TIME.labels(name).observe(time.perf_counter() - start)
                with self._active_lock:
                    self._active -= 1
                    if self.cluster:
                        ACTIVE_WORKERS.labels(name).dec()
                    else:
                        ACTIVE_WORKERS.labels(name).set(self._active)

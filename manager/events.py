"""Kubernetes Events: a recorder that never blocks, and one sender that deduplicates,
aggregates and rate-limits before it writes core ``v1`` Events.

Port of client-go ``tools/record`` (``event.go``: ``EventRecorder``,
``EventBroadcaster``, ``recordToSink``; ``events_cache.go``: ``EventCorrelator`` with its
``EventAggregator``, ``eventLogger`` and ``EventSourceObjectSpamFilter``).

Contract:

* :meth:`EventRecorder.event` validates its arguments (``ValueError`` for a type other
  than ``Normal``/``Warning``, an empty reason, an object without ``kind``,
  ``apiVersion`` or ``metadata.name``), takes the object's reference and appends the call
  to a bounded queue (a deque: no lock; an idle sender is woken). It never blocks and
  never raises for anything that happens later: a full queue drops the event
  (``overseer_events_dropped_total{reason="queue_full"}``).
* One sender thread (``events/sender``, started by :meth:`EventBroadcaster.start`) works
  in batches by time: it lets events gather for ``batch_interval`` seconds (a flush or a
  stop ends the wait), then builds each Event (its timestamps and name from the time it
  was recorded), runs it through the :class:`EventCorrelator` and writes it, in order,
  one after the other on one held connection (:meth:`KubeClient.write_session`, kept
  from batch to batch, a new one after a failed batch: the request head built once per
  batch, one ``orjson.dumps`` per body, the answers read together at the server's pace
  by a minimal parser, a successful answer's body not decoded: the correlator keeps the
  Event as written), which costs a fraction of an ordinary request's CPU. The
  correlator's rules are client-go's:

  - *Aggregation*: events that differ only by message (same involved object, type,
    reason, source) are tracked per object for ``aggregate_window`` seconds (sliding:
    every such event renews it). When the number of distinct messages reaches
    ``aggregate_max_events`` (client-go's ``< maxEvents`` test: the 10th distinct
    message), the event is replaced by one whose message is
    ``"(combined from similar events): <message>"``; further new messages in the window
    count on that single combined Event.
  - *Deduplication*: an event equal to one seen before (same object, type, reason,
    message, source) is not created again: the Event written for it is PATCHed
    (``count`` + 1, ``lastTimestamp``, ``message``). If that Event is gone (expired by
    the API server's event TTL, or deleted) the PATCH answers 404 and the Event is
    created anew under the same name. Seen events are remembered in an LRU of
    ``cache_size`` entries, without a time limit, as in client-go.
  - *Spam filter*: per involved object and source, a token bucket of ``spam_burst``
    tokens refilled at ``spam_qps`` (25, one per 5 minutes); an event finding it empty
    is dropped (``reason="spam"``). As in client-go, correlation runs before the filter,
    so a dropped repeat still counts: the next written ``count`` includes it.

* An Event refused because its namespace is being terminated (403, cause
  ``NamespaceTerminating``) is dropped (``reason="namespace_terminating"``, logged at
  debug), and so is every Event for that namespace for the next
  ``terminating_namespace_ttl`` seconds, without a request: a namespace going away takes
  its Events with it, and a controller reacting to its deletion must not cost one refused
  create per Event.
* Writes that fail with a 5xx or an unreachable server are tried ``max_attempts``
  times in all, waiting on the injected clock between attempts (the first wait
  ``retry_interval`` times a random factor in [0.5, 1), then ``retry_interval``; a
  :meth:`EventBroadcaster.flush` cuts the waits short while it waits, so the manager's
  flush before it releases its Lease does not spend its graceful timeout in one). Other
  API errors (4xx) are not retried. An event that cannot be written is logged and dropped
  (``reason="api_error"``); nothing reaches the caller and the sender keeps going. 429s
  and retryable 5xx are also retried inside :class:`~manager.client.KubeClient`.
* Any other exception the sender meets never ends it. One raised by a write (the
  credentials failing while the request head is built, as an exec plugin does at a
  refresh; a broken session) is, as client-go's ``recordToSink`` treats a transport
  error, a failed attempt: logged with its traceback, counted
  (``overseer_event_sender_errors_total``), the session closed (the next attempt takes a
  connection and builds its head anew), and the write tried again after the same waits
  as a 5xx, ``max_attempts`` in all — a pipeline's writes together, one wait for all of
  them — then dropped (``reason="sender_error"``). One that escapes a batch anyway (a
  defect) is logged and counted the same way; the batch's events not yet written or
  dropped are dropped (``reason="sender_error"``), a flush waiting on the batch returns,
  the session is made anew, and the sender waits (on the clock: the first wait
  ``retry_interval`` times a random factor in [0.5, 1), then ``retry_interval``; a stop
  cuts it short) before its next batch. :meth:`EventBroadcaster.sender_alive` reports a
  sender that ended other than as asked (what no handler catches, a ``BaseException``)
  for a liveness check; from then on events are dropped (``reason="sender_error"``).
* Write fencing: an event is written under the write fence that applied where it was
  recorded (:func:`manager.fencing.current_fence`, else the client's), so a replica that
  may no longer write does not write the Events its reconciles recorded either; such an
  event is dropped (``reason="fenced"``).
* Stopping: once ``stop`` is set, or :meth:`EventBroadcaster.shutdown` is called, new
  events are refused (``reason="shutdown"``), the sender writes what is queued without
  retry waits, and exits. ``shutdown(timeout)`` bounds that flush: what is still queued
  after ``timeout`` seconds is dropped (``reason="shutdown"``).

Events are written as client-go's recorder writes them: ``metadata.name`` is
``<object name>.<hex nanoseconds>``, in the involved object's namespace (``default``
for a cluster-scoped object), with ``involvedObject``, ``reason``, ``message``
(truncated to 1024 bytes of UTF-8), ``type``, ``source``, ``firstTimestamp``,
``lastTimestamp`` (RFC 3339, seconds), ``count``, ``reportingComponent`` and
``reportingInstance``; ``eventTime`` stays unset (the legacy core Event shape).

Why core ``v1`` Events and not ``events.k8s.io/v1`` with ``series`` (client-go
``tools/events``): the rules kept here — aggregation of similar messages, the per-object
spam filter, a count increment per repeat — are ``tools/record``'s; ``tools/events``
replaces them with series whose count is written at most every 6 minutes (a repeat
costs no request until then) and no aggregation. A repeat here costs one small merge
PATCH, already correlated in memory, so series would only save requests for hot
repeats, which the spam filter bounds anyway (25 per object, then one per 5 minutes);
the costly Events are first occurrences (the exposer's ``Exposed``), one create each
under either API. ``kubectl describe`` shows both kinds.

Time: windows, buckets and retry waits read the injected :class:`~manager.clock.Clock`;
timestamps written into Events are wall-clock UTC.

Thread-safety: recorders, :meth:`EventBroadcaster.flush` and
:meth:`EventBroadcaster.shutdown` may be used from any thread; a :class:`FakeRecorder`
too. An :class:`EventCorrelator` belongs to one thread (the sender).
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import repeat
from typing import Final, Generic, Protocol, TypeVar

from prometheus_client import Counter

from manager.client import KubeClient, Write, WriteSession
from manager.clock import Clock, RealClock
from manager.errors import (
    AlreadyExists,
    ApiError,
    NamespaceTerminating,
    NotFound,
    OutcomeUnknown,
    ServerError,
    TooManyRequests,
    WriteFenced,
)
from manager.fencing import Fence, current_fence, fenced
from manager.flowcontrol import TokenBucket
from manager.keys import JsonDict, meta_namespace_key
from manager.metrics import REGISTRY
from manager.resources import builtin

__all__ = [
    "NORMAL",
    "WARNING",
    "Correlation",
    "EventBroadcaster",
    "EventCorrelator",
    "EventOptions",
    "EventRecorder",
    "FakeRecorder",
    "RecordedEvent",
]

logger = logging.getLogger(__name__)

NORMAL: Final = "Normal"
"""Event type of an ordinary happening."""
WARNING: Final = "Warning"
"""Event type of something the owner of the object should look at."""

EVENTS: Final = builtin("v1", "events")

MESSAGE_LIMIT: Final = 1024  # bytes of UTF-8, as the API server accepts
COMBINED_PREFIX: Final = "(combined from similar events): "
_NAME_LIMIT: Final = 253  # a DNS subdomain
_POLL: Final = 0.2  # real seconds: how often an idle sender looks at ``stop``
_PIPELINE_DEPTH: Final = 64  # writes sent back to back at most (what one broken connection costs)

_SENT = Counter(
    "overseer_events_sent_total",
    "Kubernetes Events written (created or patched), by type.",
    ["type"],
    registry=REGISTRY,
)
_DROPPED = Counter(
    "overseer_events_dropped_total",
    "Kubernetes Events not written, by reason (queue_full, spam, api_error, fenced, "
    "namespace_terminating, sender_error, shutdown).",
    ["reason"],
    registry=REGISTRY,
)
_SENDER_ERRORS = Counter(
    "overseer_event_sender_errors_total",
    "Exceptions other than API errors met by the Kubernetes Event sender (a failed write "
    "attempt, or a failed batch); it logged each, waited and went on.",
    registry=REGISTRY,
)


_SENT_BY_TYPE: dict[str, Counter] = {}


def _sent(type_: str) -> Counter:
    """``overseer_events_sent_total{type}``, its child looked up once per type
    (``labels`` takes the metric's lock)."""
    child = _SENT_BY_TYPE.get(type_)
    if child is None:
        child = _SENT_BY_TYPE[type_] = _SENT.labels(type_)
    return child


class EventRecorder(Protocol):
    """Records Events about objects (client-go ``record.EventRecorder``).

    Calls return at once: the Event is written later, or dropped, by the sender. Safe to
    call from any thread.
    """

    def event(self, obj: JsonDict, type_: str, reason: str, message: str) -> None:
        """Record that ``reason`` happened to ``obj``.

        Args:
            obj: the involved object; needs ``kind``, ``apiVersion`` and
                ``metadata.name`` (objects read from a LIST carry no ``kind`` or
                ``apiVersion``: set them).
            type_: ``"Normal"`` or ``"Warning"``.
            reason: a short UpperCamelCase reason (``"PortsMissing"``); not empty.
            message: for humans; truncated to 1024 bytes.

        Raises:
            ValueError: a bad ``type_``, an empty ``reason``, or an object that cannot
                be referenced.
        """
        ...


@dataclass(frozen=True, kw_only=True, slots=True)
class EventOptions:
    """How an :class:`EventBroadcaster` queues, correlates and writes (client-go defaults)."""

    queue_size: int = 1000
    """Events waiting for the sender; more are dropped (default 1000 events)."""
    spam_burst: int = 25
    """Events per involved object allowed back to back (default 25 events)."""
    spam_qps: float = 1.0 / 300.0
    """Refill of the per-object bucket, events per second (default 1/300: one per 5 min)."""
    aggregate_max_events: int = 10
    """Distinct messages per object/type/reason before combining (default 10 messages)."""
    aggregate_window: float = 600.0
    """Sliding window of aggregation (default 600.0 seconds)."""
    cache_size: int = 4096
    """Entries of each correlator LRU cache (default 4096 entries)."""
    max_attempts: int = 3
    """Writes tried per event, the first included (default 3 attempts)."""
    batch_interval: float = 0.2
    """How long the sender lets events gather before it writes them (default 0.2 seconds;
    0: write as they come)."""
    retry_interval: float = 10.0
    """Wait between attempts; the first is jittered down to half (default 10.0 seconds)."""
    terminating_namespace_ttl: float = 60.0
    """After a refusal because the namespace is terminating, Events for that namespace are
    dropped unsent for this long (default 60.0 seconds)."""

    def __post_init__(self) -> None:
        problems = []
        for name in ("queue_size", "spam_burst", "aggregate_max_events", "cache_size"):
            value = getattr(self, name)
            if value < 1:
                problems.append(f"{name}: must be at least 1, got {value}")
        if self.max_attempts < 1:
            problems.append(f"max_attempts: must be at least 1, got {self.max_attempts}")
        if self.spam_qps <= 0:
            problems.append(f"spam_qps: must be positive, got {self.spam_qps}")
        if self.aggregate_window <= 0:
            problems.append(f"aggregate_window: must be positive, got {self.aggregate_window}")
        if self.batch_interval < 0:
            problems.append(f"batch_interval: must not be negative, got {self.batch_interval}")
        if self.retry_interval < 0:
            problems.append(f"retry_interval: must not be negative, got {self.retry_interval}")
        if self.terminating_namespace_ttl < 0:
            problems.append(
                "terminating_namespace_ttl: must not be negative, "
                f"got {self.terminating_namespace_ttl}"
            )
        if problems:
            raise ValueError("invalid EventOptions: " + "; ".join(problems))


# -- building Events ---------------------------------------------------------------------


def _involved_object(obj: JsonDict) -> JsonDict:
    """client-go ``ref.GetReference``: the ObjectReference of ``obj``."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    name = meta.get("name")
    kind = obj.get("kind")
    api_version = obj.get("apiVersion")
    if not isinstance(name, str) or not name:
        raise ValueError("event: the involved object has no metadata.name")
    if not isinstance(kind, str) or not kind or not isinstance(api_version, str) or not api_version:
        raise ValueError(
            f"event: the involved object {name!r} has no kind/apiVersion "
            "(objects from a LIST lack them: set them before recording)"
        )
    ref: JsonDict = {"kind": kind}
    for field, value in (
        ("namespace", meta.get("namespace")),
        ("name", name),
        ("uid", meta.get("uid")),
        ("apiVersion", api_version),
        ("resourceVersion", meta.get("resourceVersion")),
    ):
        if isinstance(value, str) and value:
            ref[field] = value
    return ref


def _check(type_: str, reason: str) -> None:
    if type_ not in (NORMAL, WARNING):
        raise ValueError(f"event: type must be {NORMAL!r} or {WARNING!r}, got {type_!r}")
    if not isinstance(reason, str) or not reason:
        raise ValueError("event: reason must be a non-empty string")


def _truncate(message: str) -> str:
    """``message`` cut to :data:`MESSAGE_LIMIT` bytes of UTF-8, on a character boundary."""
    data = message.encode("utf-8")
    if len(data) <= MESSAGE_LIMIT:
        return message
    return data[:MESSAGE_LIMIT].decode("utf-8", "ignore")


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_suffix_lock = threading.Lock()
_last_suffix = 0


def _unique_nanos(at: int | None = None) -> int:
    """``at`` (default: now), in wall-clock nanoseconds, made strictly increasing within
    the process."""
    global _last_suffix
    with _suffix_lock:
        _last_suffix = max(time.time_ns() if at is None else at, _last_suffix + 1)
        return _last_suffix


def _event_name(object_name: str, at: int | None = None) -> str:
    """client-go's ``<name>.<hex UnixNano>``, shortened to stay a DNS subdomain."""
    suffix = f".{_unique_nanos(at):x}"
    prefix = object_name[: _NAME_LIMIT - len(suffix)].rstrip(".-")
    return prefix + suffix


class _Stamps:
    """RFC 3339 seconds of wall-clock nanoseconds, the last one remembered (events come
    in bursts within one second). One thread: the sender's."""

    __slots__ = ("_second", "_text")

    def __init__(self) -> None:
        self._second = -1
        self._text = ""

    def __call__(self, nanos: int) -> str:
        second = nanos // 1_000_000_000
        if second != self._second:
            self._text = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))
            self._second = second
        return self._text


def _build_event(
    ref: JsonDict,
    type_: str,
    reason: str,
    message: str,
    *,
    component: str,
    host: str,
    at: int,
    stamp: str,
) -> JsonDict:
    """The core v1 Event for a recorded call (``at``: when, in wall-clock nanoseconds)."""
    source: JsonDict = {"component": component}
    if host:
        source["host"] = host
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": _event_name(ref["name"], at),
            "namespace": ref.get("namespace") or "default",
        },
        "involvedObject": ref,
        "reason": reason,
        "message": _truncate(message),
        "type": type_,
        "source": source,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "reportingComponent": component,
        "reportingInstance": host,
    }


# -- correlation -------------------------------------------------------------------------

_K = TypeVar("_K")
_V = TypeVar("_V")


class _Lru(Generic[_K, _V]):
    """A bounded mapping that forgets the least recently used entry."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._data: OrderedDict[_K, _V] = OrderedDict()

    def get(self, key: _K) -> _V | None:
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value

    def put(self, key: _K, value: _V) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self._size:
            self._data.popitem(last=False)


CorrelationKey = tuple[str, ...]


@dataclass(slots=True)
class _AggregateRecord:
    messages: set[str]
    last: float  # clock reading of the latest similar event


@dataclass(frozen=True, slots=True)
class _Observation:
    count: int
    first_timestamp: str
    name: str
    resource_version: str


@dataclass(frozen=True, slots=True)
class Correlation:
    """What to write for one event: the Event, its dedup key, and the patch for an
    Event that exists already (``None``: create)."""

    event: JsonDict
    key: CorrelationKey
    patch: JsonDict | None


def _str(mapping: object, field: str) -> str:
    value = mapping.get(field) if isinstance(mapping, dict) else None
    return value if isinstance(value, str) else ""


def _strs(mapping: object, fields: tuple[str, ...]) -> tuple[str, ...]:
    """``_str(mapping, f)`` for each of ``fields``, the lookups done by C code (the
    correlator builds three keys per event)."""
    if not isinstance(mapping, dict):
        return ("",) * len(fields)
    values = tuple(map(mapping.get, fields, repeat("")))
    if set(map(type, values)) <= _ONLY_STR:
        return values
    return tuple(v if isinstance(v, str) else "" for v in values)


_ONLY_STR: Final = frozenset({str})
_SOURCE_FIELDS: Final = ("component", "host")
_REF_FIELDS: Final = ("kind", "namespace", "name", "uid", "apiVersion")
_AGGREGATE_FIELDS: Final = ("type", "reason", "reportingComponent", "reportingInstance")
_EVENT_FIELDS: Final = ("type", "reason", "message")


def _object_key(event: JsonDict) -> CorrelationKey:
    return (
        *_strs(event.get("source"), _SOURCE_FIELDS),
        *_strs(event.get("involvedObject"), _REF_FIELDS),
    )


def _recorded_object_key(ref: JsonDict, component: str, host: str) -> CorrelationKey:
    """``_object_key`` of the Event built for a recorded call, from what builds it (a
    reference from :func:`_involved_object` holds only non-empty strings)."""
    return (component, host, *map(ref.get, _REF_FIELDS, repeat("")))


def _aggregate_key(event: JsonDict, object_key: CorrelationKey | None = None) -> CorrelationKey:
    okey = object_key if object_key is not None else _object_key(event)
    return ("aggregate", *okey, *_strs(event, _AGGREGATE_FIELDS))


def _event_key(event: JsonDict, object_key: CorrelationKey | None = None) -> CorrelationKey:
    okey = object_key if object_key is not None else _object_key(event)
    field_path = _str(event.get("involvedObject"), "fieldPath")
    return ("event", *okey, field_path, *_strs(event, _EVENT_FIELDS))


class EventCorrelator:
    """Aggregation, deduplication and spam filtering of events (client-go
    ``EventCorrelator``); see the module docstring for the rules.

    Not thread-safe: it belongs to the sender thread.
    """

    def __init__(self, clock: Clock, options: EventOptions | None = None) -> None:
        self._clock = clock
        self._options = options if options is not None else EventOptions()
        size = self._options.cache_size
        self._buckets: _Lru[CorrelationKey, TokenBucket] = _Lru(size)
        self._aggregates: _Lru[CorrelationKey, _AggregateRecord] = _Lru(size)
        self._observed: _Lru[CorrelationKey, _Observation] = _Lru(size)

    def correlate(self, event: JsonDict) -> Correlation | None:
        """The write to make for ``event`` (a new dict), or ``None`` when the spam filter
        drops it. Records the observation either way, as client-go does."""
        return self._correlate(event, _object_key(event))

    def _correlate(self, event: JsonDict, object_key: CorrelationKey) -> Correlation | None:
        """:meth:`correlate` with the event's object key (the same for the event and its
        combined form) given: the sender builds it from the recorded reference."""
        event, key = self._aggregate(event, object_key)
        correlation = self._observe(event, key)
        if not self._allow(object_key):
            return None
        return correlation

    def update_state(self, key: CorrelationKey, written: JsonDict) -> None:
        """Remember what the API server answered for the write of ``key``.

        The count kept is the larger of the answer's and the one observed since: writes
        go out in pipelined batches, so later occurrences of ``key`` (those the spam
        filter kept back included) may have been correlated before this answer came,
        and the next write must count them, as client-go's does."""
        meta = written.get("metadata")
        count = written.get("count")
        count = count if isinstance(count, int) and count > 0 else 1
        last = self._observed.get(key)
        if last is not None and last.name == _str(meta, "name"):
            count = max(count, last.count)
        self._observed.put(
            key,
            _Observation(
                count=count,
                first_timestamp=_str(written, "firstTimestamp"),
                name=_str(meta, "name"),
                resource_version=_str(meta, "resourceVersion"),
            ),
        )

    def _aggregate(
        self, event: JsonDict, object_key: CorrelationKey
    ) -> tuple[JsonDict, CorrelationKey]:
        """client-go ``EventAggregator.EventAggregate``."""
        now = self._clock.now()
        key = _aggregate_key(event, object_key)
        record = self._aggregates.get(key)
        if record is None or now - record.last > self._options.aggregate_window:
            record = _AggregateRecord(set(), now)
        record.messages.add(_str(event, "message"))
        record.last = now
        self._aggregates.put(key, record)
        if len(record.messages) < self._options.aggregate_max_events:
            return event, _event_key(event, object_key)
        record.messages.pop()  # do not grow beyond the limit
        stamp = _rfc3339(datetime.now(UTC))
        combined = dict(event)
        combined["metadata"] = {
            "name": _event_name(_str(event.get("involvedObject"), "name")),
            "namespace": event["metadata"]["namespace"],
        }
        combined["message"] = _truncate(COMBINED_PREFIX + _str(event, "message"))
        combined["firstTimestamp"] = combined["lastTimestamp"] = stamp
        combined["count"] = 1
        return combined, key

    def _observe(self, event: JsonDict, key: CorrelationKey) -> Correlation:
        """client-go ``eventLogger.eventObserve``."""
        last = self._observed.get(key)
        event = dict(event)
        patch: JsonDict | None = None
        if last is not None:
            metadata = dict(event["metadata"])
            metadata["name"] = last.name
            if last.resource_version:
                metadata["resourceVersion"] = last.resource_version
            event["metadata"] = metadata
            if last.first_timestamp:
                event["firstTimestamp"] = last.first_timestamp
            event["count"] = last.count + 1
            patch = {
                "count": event["count"],
                "lastTimestamp": event["lastTimestamp"],
                "message": event["message"],
            }
        self._observed.put(
            key,
            _Observation(
                count=event["count"],
                first_timestamp=_str(event, "firstTimestamp"),
                name=event["metadata"]["name"],
                resource_version=_str(event["metadata"], "resourceVersion"),
            ),
        )
        return Correlation(event, key, patch)

    def _allow(self, key: CorrelationKey) -> bool:
        """client-go ``EventSourceObjectSpamFilter.Filter`` (inverted: True lets it pass);
        ``key``: the event's object key."""
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = TokenBucket(
                self._options.spam_qps, self._options.spam_burst, clock=self._clock.now
            )
            self._buckets.put(key, bucket)
        return bucket.try_accept()


# -- the broadcaster ---------------------------------------------------------------------


# What a recorder queues: (involved object reference, type, reason, message, wall-clock
# nanoseconds, component, the recording context's fence). A flush queues a barrier.
_Recorded = tuple[JsonDict, str, str, str, int, str, "Fence | None"]


class _Recorder:
    """An :class:`EventRecorder` that queues on its broadcaster."""

    def __init__(self, broadcaster: EventBroadcaster, component: str) -> None:
        self._broadcaster = broadcaster
        self._component = component

    def event(self, obj: JsonDict, type_: str, reason: str, message: str) -> None:
        _check(type_, reason)
        ref = _involved_object(obj)
        self._broadcaster._enqueue(
            (ref, type_, reason, message, time.time_ns(), self._component, current_fence())
        )

    def __repr__(self) -> str:
        return f"EventRecorder(component={self._component!r})"


class EventBroadcaster:
    """The queue and the sender thread behind every recorder of a manager (client-go
    ``EventBroadcaster`` + ``StartRecordingToSink``).

    Recording costs the caller a few microseconds and no lock: the reference to the
    object is taken, the call is appended to a deque, and only a sender that sleeps for
    want of work is woken. The sender wakes by time: it lets events gather for
    ``batch_interval`` seconds, then builds, correlates and writes them one after the
    other on one held connection (:meth:`KubeClient.write_session`).

    Args:
        client: where Events are written.
        component: ``source.component`` / ``reportingComponent`` of the recorders
            (``"overseer"``); a recorder may name its own.
        host: ``source.host`` / ``reportingInstance`` (the pod or node name), may be "".
        clock: time for aggregation windows, spam buckets and retry waits.
        options: queue size, batching, correlation and retry settings.
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        component: str,
        host: str = "",
        clock: Clock | None = None,
        options: EventOptions | None = None,
    ) -> None:
        if not component:
            raise ValueError("EventBroadcaster: component must not be empty")
        self._client = client
        self._component = component
        self._host = host
        self._clock: Clock = clock if clock is not None else RealClock()
        self._options = options if options is not None else EventOptions()
        self._correlator = EventCorrelator(self._clock, self._options)
        self._stamps = _Stamps()
        # appended by any thread, popped by the sender: deque operations are atomic
        self._queue: deque[_Recorded | threading.Event] = deque()
        self._wake = threading.Event()  # set to wake an idle sender
        self._hurry = threading.Event()  # set to end the batch interval now
        self._idle = False  # the sender sleeps for want of work: the next event wakes it
        self._lock = threading.Lock()  # start/shutdown only, never taken by a recorder
        self._retry_cond = threading.Condition()  # retry waits; shutdown cuts them short
        self._closed = False  # no more events accepted
        self._abandon = False  # drop what is queued instead of sending it
        self._flushing = 0  # flushes waiting: no retry waits meanwhile (under _retry_cond)
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None
        # namespace -> clock time until which its Events are dropped (sender thread only)
        self._terminating: dict[str, float] = {}
        # events of the batch being sent not yet written or dropped (sender thread only)
        self._in_hand = 0
        self._failure: str | None = None  # why the sender ended other than as asked

    def recorder(self, component: str | None = None) -> EventRecorder:
        """A recorder whose events come from ``component`` (default: the broadcaster's)."""
        return _Recorder(self, component or self._component)

    def start(self, stop: threading.Event) -> None:
        """Start the sender thread (``events/sender``) and return. It runs until ``stop``
        is set or :meth:`shutdown` is called, then writes what is queued and exits.

        Raises:
            RuntimeError: started before, or shut down.
        """
        with self._lock:
            if self._thread is not None or self._closed:
                raise RuntimeError("EventBroadcaster: start may be called once, before shutdown")
            self._stop = stop
            self._thread = threading.Thread(
                target=self._run, args=(stop,), name="events/sender", daemon=False
            )
            try:
                self._thread.start()
            except BaseException as exc:
                self._thread = None  # a shutdown drops what is queued: nothing to join
                self._failure = f"the event sender could not start: {type(exc).__name__}: {exc}"
                raise

    def sender_alive(self) -> str | None:
        """For a liveness check: why the sender cannot write Events, or None.

        None while the sender runs (failing writes included: it survives them), before
        :meth:`start`, and once it has ended as asked (``stop`` set, :meth:`shutdown`).
        A reason when its thread could not start or has ended by itself (an exception no
        handler of the sender catches); that stays so, a later stop does not hide it.
        """
        with self._lock:
            failure, thread, stop = self._failure, self._thread, self._stop
        if failure is not None or thread is None or thread.is_alive():
            return failure
        if self._closed or (stop is not None and stop.is_set()):
            return None
        return "the event sender is not running"  # no thread ends without a reason set

    def flush(self, timeout: float) -> bool:
        """Block until every event queued before the call is written or dropped.

        Args:
            timeout: real seconds to wait at most.

        Returns:
            True when done, False if ``timeout`` passed first (as it does when the
            sender was never started).
        """
        barrier = threading.Event()
        self._queue.append(barrier)
        self._hurry.set()  # no need to wait for the batch interval
        self._wake.set()
        with self._retry_cond:  # nor for retry backoffs: the writes waiting go again now
            self._flushing += 1
            self._retry_cond.notify_all()
        try:
            deadline = time.monotonic() + timeout
            while not barrier.wait(min(max(deadline - time.monotonic(), 0.0), _POLL)):
                thread = self._thread
                if thread is not None and not thread.is_alive():
                    return True  # the sender has ended: it wrote or dropped what it had
                if time.monotonic() >= deadline:
                    return False
            return True
        finally:
            with self._retry_cond:
                self._flushing -= 1

    def shutdown(self, timeout: float = 10.0) -> bool:
        """Refuse new events, let the sender write what is queued, and join it.

        Waits up to ``timeout`` seconds for the queue to drain; what is left then is
        dropped (``reason="shutdown"``) and the request in flight gets up to ``timeout``
        more seconds. Idempotent. Without :meth:`start`, queued events are dropped.

        Returns:
            True if every queued event was handled and the sender has exited.
        """
        with self._lock:
            self._closed = True
            thread = self._thread
        self._hurry.set()
        self._wake.set()
        with self._retry_cond:
            self._retry_cond.notify_all()
        if thread is None:
            self._drop_queued()
            return True
        thread.join(timeout)
        flushed = not thread.is_alive()
        if not flushed:
            self._abandon = True
            self._hurry.set()
            self._wake.set()
            with self._retry_cond:
                self._retry_cond.notify_all()
            thread.join(timeout)
            if thread.is_alive():
                logger.warning(
                    "event sender did not stop in time", extra={"timeout_seconds": timeout}
                )
                return False
        return flushed

    # -- internals ----------------------------------------------------------------------

    def _enqueue(self, recorded: _Recorded) -> None:
        # Any thread; no lock: a length check, an append, and a wake-up only when the
        # sender sleeps idle (the first event of a quiet period).
        stopped = self._closed or (self._stop is not None and self._stop.is_set())
        if not stopped and len(self._queue) < self._options.queue_size:
            self._queue.append(recorded)
            if self._idle:
                self._wake.set()
            return
        reason = "queue_full" if not stopped else "sender_error" if self._failure else "shutdown"
        _DROPPED.labels(reason).inc()
        logger.debug("event dropped", extra={"reason": reason, **_describe_recorded(recorded)})

    def _stopping(self, stop: threading.Event) -> bool:
        return self._closed or stop.is_set()

    def _drop_queued(self) -> None:
        dropped = 0
        while self._queue:
            item = self._queue.popleft()
            if isinstance(item, threading.Event):
                item.set()
            else:
                dropped += 1
        if dropped:
            reason = "sender_error" if self._failure else "shutdown"
            _DROPPED.labels(reason).inc(dropped)
            logger.warning(
                "events dropped at shutdown", extra={"events": dropped, "reason": reason}
            )

    def _run(self, stop: threading.Event) -> None:
        """The sender thread: batches until ``stop`` or :meth:`shutdown`. An exception
        escaping a batch ends the batch, not the thread (see :meth:`_batch_failed`);
        what no handler catches (a ``BaseException``) is logged and recorded for
        :meth:`sender_alive`."""
        interval = self._options.batch_interval
        session: WriteSession | None = None  # kept from batch to batch until one fails
        failures = 0  # batches in a row that failed
        try:
            while True:
                if self._abandon:
                    break
                if not self._queue:
                    if self._stopping(stop):
                        break
                    self._wake.clear()
                    self._idle = True  # before looking again: an enqueue sees it or we do
                    if not self._queue:
                        self._wake.wait(_POLL)  # real time: only to notice ``stop``
                    self._idle = False
                    continue
                if interval > 0 and not self._stopping(stop):
                    # a batch by time: what else arrives within the interval goes too
                    # (a flush or a shutdown cuts it short)
                    self._hurry.wait(interval)
                self._hurry.clear()
                items = [self._queue.popleft() for _ in range(len(self._queue))]
                self._in_hand = sum(1 for item in items if not isinstance(item, threading.Event))
                try:
                    if session is None:
                        session = self._client.write_session()
                    self._send_batch(items, stop, session)
                except Exception:  # never let one batch end the sender
                    failures += 1
                    self._batch_failed(items, session, failures)
                    session = None  # the next batch makes a new one
                    self._backoff(failures, stop, hurried=False)  # cut short by a stop
                else:
                    failures = 0
        except BaseException as exc:  # not survivable: say why the sender is gone
            self._failure = f"the event sender has ended: {type(exc).__name__}: {exc}"
            _SENDER_ERRORS.inc()
            logger.exception("event sender ended", extra={"error": repr(exc)})
        finally:
            if self._failure is None and not (self._stopping(stop) or self._abandon):
                self._failure = "the event sender has ended"
            self._closed = True
            self._drop_queued()

    def _batch_failed(
        self,
        items: list[_Recorded | threading.Event],
        session: WriteSession | None,
        failures: int,
    ) -> None:
        """What an exception that escaped a batch costs (called in its ``except``): it is
        logged with its traceback and counted, the batch's events not yet written or
        dropped are dropped (``reason="sender_error"``), its flushes are released (their
        events are handled: dropped), and its session is closed."""
        lost, self._in_hand = self._in_hand, 0
        _SENDER_ERRORS.inc()
        logger.exception(
            "event batch failed",
            extra={"events_dropped": lost, "failures_in_a_row": failures},
        )
        if lost:
            _DROPPED.labels("sender_error").inc(lost)
        for item in items:
            if isinstance(item, threading.Event):
                item.set()
        if session is not None:
            self._close_session(session)

    def _close_session(self, session: WriteSession) -> None:
        """Close ``session`` after a failure: its connection is given back (or closed if
        broken) and its head forgotten; its next use starts afresh."""
        try:
            session.close()
        except Exception:  # closing must not mask the failure it follows
            logger.debug("event write session close failed", exc_info=True)

    def _send_batch(
        self, items: list[_Recorded | threading.Event], stop: threading.Event, session: WriteSession
    ) -> None:
        """Build, correlate and write ``items`` (what was queued), on one held connection
        (given back when the batch is done). Every event leaving the batch, written or
        dropped, leaves ``_in_hand``."""
        pending: list[_Pending] = []
        with session:
            for i, item in enumerate(items):
                if self._abandon:  # back in front, to be dropped at the shutdown
                    self._queue.extendleft(reversed(items[i:]))
                    self._in_hand = 0
                    return
                if isinstance(item, threading.Event):
                    self._write_pending(pending, session, stop)
                    pending = []
                    item.set()  # a flush: everything before it is handled
                    continue
                try:
                    prepared = self._prepare(item)
                except Exception:  # never let one event kill the sender
                    self._in_hand -= 1
                    _DROPPED.labels("api_error").inc()
                    logger.exception("event could not be sent", extra=_describe_recorded(item))
                    continue
                if prepared is not None:
                    pending.append(prepared)
                else:
                    self._in_hand -= 1
            self._write_pending(pending, session, stop)

    def _prepare(self, item: _Recorded) -> _Pending | None:
        """client-go ``recordToSink``'s first half: build and correlate; None when the
        spam filter or a terminating namespace drops the event."""
        ref, type_, reason, message, at, component, fence = item
        event = _build_event(
            ref,
            type_,
            reason,
            message,
            component=component,
            host=self._host,
            at=at,
            stamp=self._stamps(at),
        )
        object_key = _recorded_object_key(ref, component, self._host)
        correlation = self._correlator._correlate(event, object_key)
        if correlation is None:
            _DROPPED.labels("spam").inc()
            logger.debug("event dropped", extra={"reason": "spam", **_describe(event)})
            return None
        if self._namespace_terminating(_namespace_of(event)):
            self._drop_terminating(event)
            return None
        return correlation, fence

    def _namespace_terminating(self, namespace: str) -> bool:
        until = self._terminating.get(namespace)
        if until is None:
            return False
        if self._clock.now() < until:
            return True
        del self._terminating[namespace]
        return False

    def _write_pending(
        self, pending: list[_Pending], session: WriteSession, stop: threading.Event
    ) -> None:
        """Write ``pending`` pipelined, by runs of one fence: first the first Event of
        each namespace, then the others of the namespaces that did not refuse (a
        namespace being deleted costs one refused request, not one per Event)."""
        start = 0
        while start < len(pending):
            fence = pending[start][1]
            end = start
            while end < len(pending) and pending[end][1] is fence:
                end += 1
            run = pending[start:end]
            start = end
            seen: set[str] = set()
            first: list[_Pending] = []
            rest: list[_Pending] = []
            for entry in run:
                namespace = _namespace_of(entry[0].event)
                (rest if namespace in seen else first).append(entry)
                seen.add(namespace)
            with fenced(fence) if fence is not None else contextlib.nullcontext():
                self._pipeline(first, session, stop)
                kept = []
                for entry in rest:
                    if self._namespace_terminating(_namespace_of(entry[0].event)):
                        self._in_hand -= 1
                        self._drop_terminating(entry[0].event)
                    else:
                        kept.append(entry)
                self._pipeline(kept, session, stop)

    def _pipeline(
        self, entries: list[_Pending], session: WriteSession, stop: threading.Event
    ) -> None:
        if not entries:
            return
        answered: list[tuple[Correlation, _Result]] = []
        for at in range(0, len(entries), _PIPELINE_DEPTH):
            chunk = entries[at : at + _PIPELINE_DEPTH]
            results = self._send_pipeline([c for c, _ in chunk], session, stop)
            if results is not None:
                answered += zip((c for c, _ in chunk), results, strict=True)
        for correlation, result in answered:
            try:
                self._complete(correlation, result, session, stop)
            except Exception:  # never let one event kill the sender
                _DROPPED.labels("api_error").inc()
                logger.exception("event could not be sent", extra=_describe(correlation.event))
            finally:
                self._in_hand -= 1

    def _send_pipeline(
        self, correlations: list[Correlation], session: WriteSession, stop: threading.Event
    ) -> Sequence[_Result] | None:
        """Write ``correlations`` pipelined (the answers not decoded: what was written is
        what the correlator keeps); their results, in order.

        An exception instead of results (the credentials failing while the head is
        built, a broken session) is a failed attempt for all of them: logged, counted,
        the session closed, and after a wait on the clock the pipeline goes out again,
        ``max_attempts`` in all (none after a stop). None: they were dropped
        (``reason="sender_error"``).
        """
        writes = [_write_of(correlation) for correlation in correlations]
        attempt = 1
        while True:
            try:
                return session.pipeline(writes, decode=False)
            except Exception:  # not an answer of the server: never let it kill the sender
                _SENDER_ERRORS.inc()
                logger.exception(
                    "event writes failed", extra={"attempt": attempt, "events": len(writes)}
                )
                self._close_session(session)
            if (
                attempt >= self._options.max_attempts
                or self._stopping(stop)
                or not self._backoff(attempt, stop)
            ):
                self._in_hand -= len(writes)
                _DROPPED.labels("sender_error").inc(len(writes))
                logger.warning(
                    "events dropped after sender errors",
                    extra={"attempts": attempt, "events": len(writes)},
                )
                return None
            logger.info("retrying event writes", extra={"attempt": attempt, "events": len(writes)})
            attempt += 1

    def _complete(
        self,
        correlation: Correlation,
        result: _Result,
        session: WriteSession,
        stop: threading.Event,
    ) -> None:
        """client-go ``recordToSink``'s second half: the answer's consequences, with
        bounded retries (one after the other, on the clock) for what may be retried: a
        5xx, a 429, and an exception that is no answer (client-go retries a transport
        error)."""
        event = correlation.event
        attempt = 1
        unknown = False  # a create of this Event may have been applied already
        repatched = False
        while True:
            if isinstance(result, OutcomeUnknown) and correlation.patch is None:
                unknown = True
            if isinstance(result, AlreadyExists) and unknown:
                # the Event has a fixed name: the create whose answer was lost did it
                result = {}
            if isinstance(result, dict):
                # a pipeline's undecoded success is {}: the Event is what was written
                self._correlator.update_state(correlation.key, result or correlation.event)
                _sent(_str(event, "type")).inc()
                return
            if isinstance(result, WriteFenced):
                _DROPPED.labels("fenced").inc()
                logger.debug("event dropped", extra={"reason": "fenced", **_describe(event)})
                return
            if isinstance(result, NotFound) and correlation.patch is not None and not repatched:
                # The Event to update was not there when the pipelined PATCH came: gone
                # (client-go recordEvent then creates it anew), or its create, ahead in
                # the same pipeline, had failed and has been retried since. Patch again,
                # creating it only if it is still missing (_write), or the retried create
                # would make the new one an AlreadyExists and lose this repeat's count.
                repatched = True
                result = self._write_one(correlation, session)
                continue
            if isinstance(result, NamespaceTerminating):
                namespace = _namespace_of(event)
                self._terminating[namespace] = (
                    self._clock.now() + self._options.terminating_namespace_ttl
                )
                self._drop_terminating(event)
                return
            api_error = isinstance(result, ApiError)
            retryable = isinstance(result, ServerError | TooManyRequests) or not api_error
            if (
                not retryable
                or attempt >= self._options.max_attempts
                or self._stopping(stop)
                or not self._backoff(attempt, stop)
            ):
                reason = "api_error" if api_error else "sender_error"
                _DROPPED.labels(reason).inc()
                logger.warning(
                    "event dropped after API error"
                    if api_error
                    else "event dropped after sender error",
                    extra={"attempts": attempt, "error": str(result), **_describe(event)},
                )
                return
            logger.info(
                "retrying event write",
                extra={"attempt": attempt, "error": str(result), **_describe(event)},
            )
            attempt += 1
            result = self._write_one(correlation, session)

    def _write_one(self, correlation: Correlation, session: WriteSession) -> _Result:
        """One write of ``correlation``: the answer, or the exception met instead (one
        that is no answer of the server logged and counted, the session closed)."""
        try:
            return self._write(correlation, session)
        except (ApiError, WriteFenced) as exc:
            return exc
        except Exception as exc:  # not an answer of the server: never let it kill the sender
            _SENDER_ERRORS.inc()
            logger.exception("event write failed", extra=_describe(correlation.event))
            self._close_session(session)
            return exc

    def _drop_terminating(self, event: JsonDict) -> None:
        _DROPPED.labels("namespace_terminating").inc()
        logger.debug("event dropped", extra={"reason": "namespace_terminating", **_describe(event)})

    def _write(self, correlation: Correlation, session: WriteSession) -> JsonDict:
        """client-go ``recordEvent``: PATCH the existing Event, else (or if it is gone)
        create it."""
        event = correlation.event
        name = event["metadata"]["name"]
        namespace = event["metadata"]["namespace"]
        if correlation.patch is not None:
            try:
                return session.patch(EVENTS, name, correlation.patch, namespace=namespace)
            except NotFound:
                logger.debug("event to update is gone, creating it", extra=_describe(event))
        return session.create(EVENTS, _create_body(event), namespace=namespace)

    def _backoff(self, attempt: int, stop: threading.Event, *, hurried: bool = True) -> bool:
        """Wait before the next attempt on the clock; False if stopping cut it short. A
        flush waiting ends a write's retry wait at once (``hurried``, True): its next
        attempt goes now (still at most ``max_attempts`` in all); not the sender's wait
        after a defect."""
        delay = self._options.retry_interval
        if attempt == 1:  # spread clients that all failed at once (client-go)
            delay *= random.uniform(0.5, 1.0)
        deadline = self._clock.now() + delay
        with self._retry_cond:
            while not self._stopping(stop) and not self._abandon:
                remaining = deadline - self._clock.now()
                if remaining <= 0 or (hurried and self._flushing):
                    return True
                self._clock.wait(self._retry_cond, min(remaining, _POLL))
        return False


# An event ready to be written: its correlation and the fence it is written under.
_Pending = tuple[Correlation, "Fence | None"]
# What a write came to: the answer (an empty dict for an undecoded success), the API
# error or fence refusal it met, or an exception that is no answer (credentials, defects).
_Result = JsonDict | Exception


def _namespace_of(event: JsonDict) -> str:
    return str((event.get("metadata") or {}).get("namespace") or "")


def _write_of(correlation: Correlation) -> Write:
    """The first write for a correlated event: the PATCH of the Event it repeats, or its
    create (client-go ``recordEvent``)."""
    event = correlation.event
    metadata = event["metadata"]
    if correlation.patch is not None:
        return Write.patch(EVENTS, metadata["name"], correlation.patch, metadata["namespace"])
    return Write.create(EVENTS, _create_body(event), metadata["namespace"])


def _create_body(event: JsonDict) -> JsonDict:
    metadata = event["metadata"]
    if "resourceVersion" not in metadata:
        return event
    body = dict(event)
    body["metadata"] = {k: v for k, v in metadata.items() if k != "resourceVersion"}
    return body


def _describe_recorded(recorded: _Recorded) -> dict[str, str]:
    ref, type_, reason = recorded[0], recorded[1], recorded[2]
    return {
        "event_type": type_,
        "event_reason": reason,
        "object_kind": _str(ref, "kind"),
        "object_namespace": _str(ref, "namespace"),
        "object_name": _str(ref, "name"),
    }


def _describe(event: JsonDict) -> dict[str, str]:
    ref = event.get("involvedObject")
    return {
        "event_type": _str(event, "type"),
        "event_reason": _str(event, "reason"),
        "object_kind": _str(ref, "kind"),
        "object_namespace": _str(ref, "namespace"),
        "object_name": _str(ref, "name"),
    }


# -- for tests of controllers ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecordedEvent:
    """One call of :meth:`FakeRecorder.event`."""

    type: str
    reason: str
    message: str
    key: str  # ``namespace/name`` of the involved object (``name`` if cluster-scoped)


class FakeRecorder:
    """An :class:`EventRecorder` that keeps events in memory (client-go
    ``record.FakeRecorder``). It validates like the real one, so a controller test fails
    where production would. Thread-safe.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._events: list[RecordedEvent] = []

    def event(self, obj: JsonDict, type_: str, reason: str, message: str) -> None:
        _check(type_, reason)
        _involved_object(obj)
        recorded = RecordedEvent(type_, reason, _truncate(message), meta_namespace_key(obj))
        with self._cond:
            self._events.append(recorded)
            self._cond.notify_all()

    @property
    def events(self) -> list[RecordedEvent]:
        """The events recorded so far, oldest first (a copy)."""
        with self._cond:
            return list(self._events)

    def clear(self) -> None:
        """Forget every recorded event."""
        with self._cond:
            self._events.clear()

    def wait_for(
        self, predicate: Callable[[list[RecordedEvent]], bool], timeout: float = 5.0
    ) -> bool:
        """Block until ``predicate(events)`` holds (for events recorded by other threads).

        Returns:
            True once it holds, False if ``timeout`` real seconds passed first.
        """
        with self._cond:
            return self._cond.wait_for(lambda: predicate(list(self._events)), timeout)

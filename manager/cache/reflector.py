"""The reflector: list, then watch, one resource into a sink (client-go
``tools/cache/reflector.go``).

Contract (DESIGN.md §3.2):

* The first list asks for ``resourceVersion=0`` (served from the API server's watch
  cache); with ``page_size`` set and a consistent list (after a 410) it paginates with
  ``limit``/``continue``.
* The watch starts from the list's resourceVersion with ``allowWatchBookmarks=true`` and
  ``timeoutSeconds`` random in [5, 10) minutes; the client read timeout is a little longer,
  so a dead connection is noticed. ``stop()`` closes the open stream at once.
* A watch that ends cleanly is re-opened from the last resourceVersion seen (events and
  bookmarks advance it): no relist.
* 410 Gone (an HTTP 410, or an ERROR event with code 410): relist with
  ``resourceVersion=""`` (a consistent read) and replace the sink's contents; objects
  that vanished are delivered as deletes carrying their last known state (the sink does
  that in ``replace``).
* Other errors: wait with exponential backoff (0.8 s doubling to 30 s, jittered, reset
  after two healthy minutes) and try again; a watch that ends within a second without
  delivering anything counts as an error.
* Every object passes through ``transform`` before it reaches the sink; the default
  drops ``metadata.managedFields``.
* Then it is frozen (:func:`~manager.cache.frozen.freeze_in_place`), once: what the sink
  stores and hands to handlers is read-only, whichever way it came (list page, watch
  event, relist). ``cached`` finds the version the sink holds already, so that the parts
  an update did not change are shared with it rather than converted again.

Thread-safe: ``run`` occupies one thread; ``stop`` may be called from any thread.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Protocol

from prometheus_client import Counter

from manager.cache.backoff import Backoff
from manager.cache.frozen import freeze_in_place
from manager.clock import Clock, RealClock
from manager.errors import ApiError, Gone, api_error_from_status
from manager.keys import JsonDict
from manager.metrics import REGISTRY

__all__ = [
    "ListerWatcher",
    "Reflector",
    "ReflectorSink",
    "Transform",
    "WatchEvents",
    "drop_managed_fields",
]

logger = logging.getLogger(__name__)

Transform = Callable[[JsonDict], JsonDict]
"""Runs on every decoded object before it is frozen and stored; it may change the object
in place. It returns JSON as decoded (dicts, lists, strings, numbers, booleans, None):
dict or list subclasses in its answer are not frozen."""

MIN_WATCH_TIMEOUT = 300
MAX_WATCH_TIMEOUT = 600
READ_TIMEOUT_MARGIN = 30.0
SHORT_WATCH = 1.0
STOP_POLL = 0.1  # seconds between checks of the caller's stop event during a backoff wait

_LISTS = Counter(
    "overseer_informer_lists_total",
    "LIST requests made by reflectors (first list and relists).",
    ["resource"],
    registry=REGISTRY,
)
_RELISTS = Counter(
    "overseer_informer_relists_total",
    "Relists caused by 410 Gone.",
    ["resource"],
    registry=REGISTRY,
)
_WATCHES = Counter(
    "overseer_informer_watches_total",
    "WATCH requests opened by reflectors.",
    ["resource"],
    registry=REGISTRY,
)
_RESTARTS = Counter(
    "overseer_informer_watch_restarts_total",
    "Watches closed on purpose because they had stalled (and opened again).",
    ["resource"],
    registry=REGISTRY,
)
_LISTED = Counter(
    "overseer_informer_listed_objects_total",
    "Objects received in LIST answers (before any filter: what the server sent).",
    ["resource"],
    registry=REGISTRY,
)
_WATCH_EVENTS = Counter(
    "overseer_informer_watch_events_total",
    "Object events (ADDED, MODIFIED, DELETED) received on watches, before any filter.",
    ["resource"],
    registry=REGISTRY,
)
_ERRORS = Counter(
    "overseer_informer_errors_total",
    "List or watch failures that made a reflector back off.",
    ["resource"],
    registry=REGISTRY,
)


class WatchEvents(AbstractContextManager["WatchEvents"], Protocol):
    """An open watch: iterate for events, ``close()`` from any thread to end it."""

    def __iter__(self) -> Iterator[JsonDict]: ...

    def close(self) -> None: ...


class ListerWatcher(Protocol):
    """Where a reflector lists and watches from (client-go ``cache.ListerWatcher``)."""

    @property
    def description(self) -> str:
        """A name for logs and metrics, e.g. ``apps/v1/deployments``."""
        ...

    def list(self, *, resource_version: str, limit: int | None, continue_: str | None) -> JsonDict:
        """One LIST page (the whole List object)."""
        ...

    def watch(
        self, *, resource_version: str, timeout_seconds: int, read_timeout: float
    ) -> WatchEvents:
        """Open a WATCH from ``resource_version`` with bookmarks allowed."""
        ...


class ReflectorSink(Protocol):
    """What a reflector feeds (the informer: store + handler fan-out)."""

    def replace(self, objs: list[JsonDict], resource_version: str) -> None:
        """The full state after a list; the sink computes adds, updates and deletes."""

    def add(self, obj: JsonDict) -> None: ...

    def update(self, obj: JsonDict) -> None: ...

    def delete(self, obj: JsonDict) -> None: ...


def drop_managed_fields(obj: JsonDict) -> JsonDict:
    """The default transform: ``metadata.managedFields`` is large and never read."""
    meta = obj.get("metadata")
    if meta is not None:
        meta.pop("managedFields", None)
    return obj


class _Expired(Exception):
    """The watch's resourceVersion is too old: relist."""


class Reflector:
    """Keeps a sink in step with one resource on the API server."""

    def __init__(
        self,
        lister_watcher: ListerWatcher,
        sink: ReflectorSink,
        *,
        transform: Transform | None = drop_managed_fields,
        page_size: int | None = None,
        paged_lists: bool = False,
        keep: Callable[[JsonDict], bool] | None = None,
        backoff: Backoff | None = None,
        clock: Clock | None = None,
        rand: Callable[[], float] = random.random,
        on_synced: Callable[[], None] | None = None,
        cached: Callable[[JsonDict], JsonDict | None] | None = None,
    ) -> None:
        self._lw = lister_watcher
        self._cached = cached
        self._sink = sink
        self._transform = transform
        self._page_size = page_size
        # paged_lists: every list is a consistent one (resourceVersion ""), in pages of
        # page_size; keep: what a list page keeps (the rest is dropped page by page, so
        # a cache of a share the server cannot filter never holds the whole list)
        self._paged_lists = paged_lists and page_size is not None
        self._keep = keep
        self._clock = clock or RealClock()
        self._backoff = backoff or Backoff(clock=self._clock, rand=rand)
        self._rand = rand
        self._on_synced = on_synced
        self._stop = threading.Event()
        self._wake = threading.Condition(threading.Lock())  # stop() notifies a backoff wait
        self._lock = threading.Lock()
        self._stream: WatchEvents | None = None
        self._last_rv = ""
        self._need_list = True
        self._consistent_list = False  # after a 410: list with resourceVersion=""
        self._name = lister_watcher.description
        for counter in (_LISTS, _RELISTS, _WATCHES, _ERRORS, _LISTED, _WATCH_EVENTS):
            counter.labels(self._name)  # exported at 0 before the first (rates, alerts)
        self._last_list_was_relist = False
        self._events_since_list = 0
        self.last_error: str = ""  # the last list/watch failure, "" once a list succeeds
        self._rewatch = False  # rewatch(): the open watch ends on purpose, no backoff

    @property
    def last_sync_resource_version(self) -> str:
        """The resourceVersion the sink is known to be in step with."""
        return self._last_rv

    # -- lifecycle -------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """List and watch until ``stop`` is set (or :meth:`stop` is called)."""
        while not (stop.is_set() or self._stop.is_set()):
            try:
                self._list_and_watch(stop)
                continue
            except _Expired:
                self._need_list = True
                self._consistent_list = True
                _RELISTS.labels(self._name).inc()
                if self._events_since_list or not self._last_list_was_relist:
                    logger.info("watch expired, relisting", extra={"resource": self._name})
                    continue
                # Expired again right after a relist, before any event: relisting at once
                # would spin (every answer 410); back off like any other failure.
                delay = self._backoff.next()
                logger.warning(
                    "watch expired right after a relist, backing off",
                    extra={"resource": self._name, "delay": round(delay, 3)},
                )
            except Exception as exc:
                if stop.is_set() or self._stop.is_set():
                    break
                _ERRORS.labels(self._name).inc()
                self.last_error = f"{type(exc).__name__}: {exc}"
                delay = self._backoff.next()
                logger.warning(
                    "list/watch failed, backing off",
                    extra={"resource": self._name, "error": str(exc), "delay": round(delay, 3)},
                    exc_info=not isinstance(exc, ApiError),
                )
            if self._wait(stop, delay):
                break

    def stop(self) -> None:
        """End :meth:`run` promptly: closes the open watch stream."""
        self._stop.set()
        with self._wake:
            self._wake.notify_all()
        with self._lock:
            stream = self._stream
        if stream is not None:
            stream.close()

    def restart_watch(self) -> None:
        """Close the open watch stream: :meth:`run` watches again from the last
        resourceVersion on a new connection (no relist). For a watch that is known to
        have stalled — its connection open, its events held somewhere on the way."""
        with self._lock:
            stream = self._stream
        if stream is not None:
            _RESTARTS.labels(self._name).inc()
            stream.close()

    def rewatch(self) -> None:
        """End the open watch and open a new one from the last resourceVersion seen, no
        relist and no backoff: for a lister-watcher whose selector narrowed (a sharded
        informer that lost hash ranges)."""
        with self._lock:
            self._rewatch = True
            stream = self._stream
        if stream is not None:
            stream.close()

    def _rewatch_asked(self) -> bool:
        return self._rewatch

    def _wait(self, stop: threading.Event, seconds: float) -> bool:
        """Sleep ``seconds`` on the clock unless stopped first; True if stopped.

        :meth:`stop` notifies ``_wake``; the caller's ``stop`` event cannot, so on a real
        clock it is checked every ``STOP_POLL`` seconds. On a fake clock the wait is one
        park until the deadline (tests observe it with ``wait_for_waiters``).
        """
        poll = isinstance(self._clock, RealClock)
        deadline = self._clock.now() + seconds
        with self._wake:
            while not (stop.is_set() or self._stop.is_set()):
                remaining = deadline - self._clock.now()
                if remaining <= 0:
                    break
                self._clock.wait(self._wake, min(remaining, STOP_POLL) if poll else remaining)
        return stop.is_set() or self._stop.is_set()

    # -- list ------------------------------------------------------------------------

    def _list_and_watch(self, stop: threading.Event) -> None:
        if self._need_list:
            self._list()
            self._need_list = False
        self._watch(stop)

    def _list(self) -> None:
        _LISTS.labels(self._name).inc()
        rv = "" if self._consistent_list or self._paged_lists else "0"
        paginate = self._page_size if rv == "" else None  # rv=0 is served from cache, unpaged
        items: list[JsonDict] = []
        continue_: str | None = None
        while True:
            try:
                page = self._lw.list(
                    resource_version=rv if continue_ is None else "",
                    limit=paginate,
                    continue_=continue_,
                )
            except Gone:
                if continue_ is None:
                    raise
                # The continue token expired mid-list: start over with a consistent list.
                items, continue_, rv = [], None, ""
                continue
            page_items = page.get("items") or []
            _LISTED.labels(self._name).inc(len(page_items))
            if self._keep is not None:
                page_items = [o for o in page_items if self._keep(o)]
            if self._transform is not None:
                page_items = [self._transform(o) for o in page_items]
            cached = self._cached
            items.extend(
                [freeze_in_place(o, cached(o) if cached is not None else None) for o in page_items]
            )
            meta = page.get("metadata") or {}
            continue_ = meta.get("continue") or None
            if continue_ is None:
                list_rv = str(meta.get("resourceVersion") or "")
                break
        self._sink.replace(items, list_rv)
        self._last_list_was_relist = rv == ""
        self._events_since_list = 0
        self._last_rv = list_rv
        self._consistent_list = False
        self.last_error = ""
        if self._on_synced is not None:
            self._on_synced()
        logger.debug("listed", extra={"resource": self._name, "items": len(items), "rv": list_rv})

    # -- watch -----------------------------------------------------------------------

    def _watch(self, stop: threading.Event) -> None:
        timeout = MIN_WATCH_TIMEOUT + int(self._rand() * (MAX_WATCH_TIMEOUT - MIN_WATCH_TIMEOUT))
        started = self._clock.now()
        _WATCHES.labels(self._name).inc()
        try:
            stream = self._lw.watch(
                resource_version=self._last_rv,
                timeout_seconds=timeout,
                read_timeout=timeout + READ_TIMEOUT_MARGIN,
            )
        except Gone:
            raise _Expired() from None
        with self._lock:
            if self._stop.is_set() or stop.is_set():
                stream.close()
                return
            if self._rewatch:  # asked while this stream was opening: open another one
                self._rewatch = False
                stream.close()
                return
            self._stream = stream
        delivered = 0
        try:
            with stream:
                for event in stream:
                    if stop.is_set() or self._stop.is_set():
                        return
                    if self._rewatch_asked():
                        break  # events past this point may be out of the new selector
                    self._handle(event)
                    delivered += 1
        except Exception:
            if not self._rewatch_asked():
                raise
        finally:
            with self._lock:
                self._stream = None
                rewatch, self._rewatch = self._rewatch, False
        if stop.is_set() or self._stop.is_set() or rewatch:
            return
        if delivered == 0 and self._clock.now() - started < SHORT_WATCH:
            raise ApiError(
                f"watch {self._name} closed after "
                f"{self._clock.now() - started:.3f}s with no events",
                reason="ShortWatch",
            )
        if self._clock.now() - started >= SHORT_WATCH:
            self._backoff.reset()

    def _handle(self, event: JsonDict) -> None:
        type_ = event.get("type")
        if type_ != "ERROR":
            self._events_since_list += 1
        obj = event.get("object")
        if not isinstance(obj, dict):
            raise ApiError(f"watch {self._name}: event without object", reason="InvalidWatchEvent")
        if type_ == "ERROR":
            code = int(obj.get("code") or 0)
            if code == 410:
                raise _Expired()
            raise api_error_from_status(code, obj, fallback_message="watch ERROR event")
        rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if type_ == "BOOKMARK":
            if rv:
                self._last_rv = rv
            return
        _WATCH_EVENTS.labels(self._name).inc()
        if self._transform is not None:
            obj = self._transform(obj)
        obj = freeze_in_place(obj, self._cached(obj) if self._cached is not None else None)
        if type_ == "ADDED":
            self._sink.add(obj)
        elif type_ == "MODIFIED":
            self._sink.update(obj)
        elif type_ == "DELETED":
            self._sink.delete(obj)
        else:
            raise ApiError(
                f"watch {self._name}: unknown event type {type_!r}", reason="InvalidWatchEvent"
            )
        if rv:
            self._last_rv = rv

"""In-memory, scripted stand-ins for the API server side of a reflector.

* :class:`FakeListerWatcher` answers LIST from a scripted queue (results or exceptions),
  falling back to its current ``items``/``rv``; every WATCH it opens is a
  :class:`FakeWatch` the test takes with :meth:`FakeListerWatcher.next_watch` and feeds.
* :class:`FakeWatch` is a queue of events; ``end()`` is a clean end by the server,
  ``close()`` (any thread) is what ``Reflector.stop`` calls.

Everything a test waits for is signalled (queues, conditions) and bounded by a timeout.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from manager.keys import JsonDict

WAIT = 5.0  # real seconds: a safety bound, never a synchronisation device

_END = object()


def cm(name: str, rv: str, namespace: str = "default", **extra: Any) -> JsonDict:
    """A ConfigMap-shaped object."""
    meta: JsonDict = {
        "name": name,
        "namespace": namespace,
        "resourceVersion": rv,
        "uid": f"uid-{name}",
    }
    meta.update(extra.pop("metadata", {}))
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, **extra}


def wait_until(cond: threading.Condition, predicate: Callable[[], bool], what: str) -> None:
    with cond:
        if not cond.wait_for(predicate, WAIT):
            raise AssertionError(f"timed out waiting for {what}")


class FakeWatch:
    """One open watch: the test sends events; iteration blocks until one arrives."""

    def __init__(self, resource_version: str, timeout_seconds: int, read_timeout: float) -> None:
        self.resource_version = resource_version
        self.timeout_seconds = timeout_seconds
        self.read_timeout = read_timeout
        self.closed = threading.Event()
        self._events: queue.Queue[object] = queue.Queue()

    def send(self, type_: str, obj: JsonDict) -> None:
        self._events.put({"type": type_, "object": obj})

    def bookmark(self, rv: str) -> None:
        self.send("BOOKMARK", {"kind": "ConfigMap", "metadata": {"resourceVersion": rv}})

    def error(self, code: int, reason: str = "Expired") -> None:
        self.send(
            "ERROR",
            {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "code": code,
                "reason": reason,
                "message": f"injected {code}",
            },
        )

    def end(self) -> None:
        """The server ends the watch cleanly (timeoutSeconds reached)."""
        self._events.put(_END)

    def close(self) -> None:
        self.closed.set()
        self._events.put(_END)

    def __enter__(self) -> FakeWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[JsonDict]:
        while True:
            item = self._events.get()
            if item is _END:
                return
            assert isinstance(item, dict)
            yield item


class FakeListerWatcher:
    """A scripted :class:`~manager.cache.reflector.ListerWatcher`."""

    description = "v1/configmaps fake"

    def __init__(self, items: list[JsonDict] | None = None, rv: str = "1") -> None:
        self.cond = threading.Condition()
        self.items: list[JsonDict] = list(items or [])
        self.rv = rv
        self.list_calls: list[dict[str, Any]] = []
        self.watch_calls: list[dict[str, Any]] = []
        self._list_script: deque[JsonDict | Exception] = deque()
        self._watch_script: deque[Exception] = deque()
        self._opened: queue.Queue[FakeWatch] = queue.Queue()
        self._all: list[FakeWatch] = []

    # -- scripting -------------------------------------------------------------------

    def set_state(self, items: list[JsonDict], rv: str) -> None:
        with self.cond:
            self.items, self.rv = list(items), rv

    def script_list(self, *results: JsonDict | Exception) -> None:
        with self.cond:
            self._list_script.extend(results)

    def fail_watch(self, *errors: Exception) -> None:
        with self.cond:
            self._watch_script.extend(errors)

    def next_watch(self) -> FakeWatch:
        """The next watch the reflector opens (blocks until it does)."""
        try:
            return self._opened.get(timeout=WAIT)
        except queue.Empty:
            raise AssertionError("the reflector opened no watch") from None

    def no_watch_opened(self) -> bool:
        return self._opened.empty()

    def wait_lists(self, n: int) -> None:
        wait_until(self.cond, lambda: len(self.list_calls) >= n, f"{n} list calls")

    def wait_watch_calls(self, n: int) -> None:
        wait_until(self.cond, lambda: len(self.watch_calls) >= n, f"{n} watch calls")

    def close_all(self) -> None:
        for w in list(self._all):
            w.close()

    # -- ListerWatcher -----------------------------------------------------------------

    def list(self, *, resource_version: str, limit: int | None, continue_: str | None) -> JsonDict:
        with self.cond:
            self.list_calls.append(
                {"resource_version": resource_version, "limit": limit, "continue_": continue_}
            )
            self.cond.notify_all()
            if self._list_script:
                result = self._list_script.popleft()
                if isinstance(result, Exception):
                    raise result
                return result
            return {
                "kind": "ConfigMapList",
                "metadata": {"resourceVersion": self.rv},
                "items": [dict(o, metadata=dict(o["metadata"])) for o in self.items],
            }

    def watch(
        self, *, resource_version: str, timeout_seconds: int, read_timeout: float
    ) -> FakeWatch:
        with self.cond:
            self.watch_calls.append(
                {
                    "resource_version": resource_version,
                    "timeout_seconds": timeout_seconds,
                    "read_timeout": read_timeout,
                }
            )
            self.cond.notify_all()
            if self._watch_script:
                raise self._watch_script.popleft()
            w = FakeWatch(resource_version, timeout_seconds, read_timeout)
            self._all.append(w)
        self._opened.put(w)
        return w

"""A raw watch that timestamps what it sees: how the harness observes the subjects' work.

:class:`ObjectWatch` lists a collection once (for its resourceVersion), then streams
``?watch=true`` from there on a thread of the harness, decodes each event line with
orjson and hands ``(type, object, seen_at)`` to a callback, ``seen_at`` being
``time.time()`` when the chunk holding the line arrived. The stream is reopened from the
last resourceVersion if the server ends it, so a long benchmark sees every event.
Observing through the API server, the same way as any client, makes the figures the same
for every subject, whatever it logs or reports about itself.

Thread-safe: the callback runs on the watch thread; callers lock their own state.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import orjson
import urllib3

from bench.rawhttp import RawClient

Callback = Callable[[str, dict[str, Any], float], None]
READ_TIMEOUT = 5.0  # seconds a read may block; the loop re-checks stop in between


class ObjectWatch:
    """Watch ``path`` (a collection, e.g. ``/api/v1/namespaces/x/services``)."""

    def __init__(self, raw: RawClient, path: str, callback: Callback) -> None:
        self.error: BaseException | None = None
        self._raw = raw
        self._path = path
        self._callback = callback
        self._stop = threading.Event()
        self._connected = threading.Event()
        self._resp: urllib3.BaseHTTPResponse | None = None
        listed = raw.json("GET", f"{path}?limit=1")
        self._rv = str(listed["metadata"]["resourceVersion"])
        self._thread = threading.Thread(target=self._run, name=f"bench-watch{path}")

    def start(self) -> ObjectWatch:
        self._thread.start()
        if not self._connected.wait(30):
            raise RuntimeError(f"watch {self._path} did not connect")
        if self.error is not None:
            raise self.error
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._stream()
            except (urllib3.exceptions.ReadTimeoutError, urllib3.exceptions.ProtocolError):
                continue  # idle stream or closed by the server: reopen from the last RV
            except BaseException as exc:
                self.error = exc
                self._connected.set()
                return

    def _stream(self) -> None:
        query = f"watch=true&allowWatchBookmarks=true&resourceVersion={self._rv}"
        resp = self._raw.stream(f"{self._path}?{query}", read_timeout=READ_TIMEOUT)
        self._resp = resp
        self._connected.set()
        buffer = b""
        try:
            while not self._stop.is_set():
                try:
                    chunk = resp.read1(256 * 1024)
                except urllib3.exceptions.ReadTimeoutError:
                    continue
                if not chunk:
                    return
                now = time.time()
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line:
                        self._dispatch(orjson.loads(line), now)
        finally:
            resp.close()
            resp.release_conn()

    def _dispatch(self, event: dict[str, Any], now: float) -> None:
        kind = str(event.get("type"))
        obj = event.get("object") or {}
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise RuntimeError(f"watch {self._path}: resourceVersion {self._rv} expired")
            return
        if rv:
            self._rv = str(rv)
        if kind != "BOOKMARK":
            self._callback(kind, obj, now)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(READ_TIMEOUT + 5)

"""A watch as a stream of decoded events (client-go ``rest/request.go``'s ``Watch`` with
``watch/streamwatcher.go``).
"""

from __future__ import annotations

import builtins
import logging
import threading
from collections.abc import Iterator
from types import TracebackType
from typing import Final, Self, cast

import orjson
import urllib3

from manager.client.answers import ERROR_TEXT_LIMIT
from manager.client.request import JsonDict
from manager.errors import (
    ApiError,
    Unavailable,
)

logger = logging.getLogger(__name__)

__all__ = ["WatchStream"]

_WATCH_CHUNK: Final = 64 * 1024


class WatchStream:
    """The events of one watch request, decoded line by line as they arrive.

    Iterating yields event dicts ``{"type": "ADDED"|"MODIFIED"|"DELETED"|"BOOKMARK"|"ERROR",
    "object": {...}}``. Iteration stops when the server ends the stream or after
    :meth:`close`; an incomplete last line is dropped. A read timeout or a broken
    connection raises :class:`~manager.errors.Unavailable` (``status=0``); an undecodable
    line raises :class:`~manager.errors.ApiError` with reason ``InvalidWatchEvent``. In
    every case the connection is released.

    Use it as a context manager so the connection is released when the caller leaves early.
    """

    def __init__(self, response: urllib3.BaseHTTPResponse, *, description: str) -> None:
        self._response = response
        self._description = description
        self._lock = threading.Lock()
        self._closed = False
        self._reading = False
        self._released = False
        self._tail: builtins.list[bytes] = []  # pieces of an incomplete line
        self._lines: builtins.list[bytes] = []  # complete lines not yet returned
        self._next_line = 0

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __iter__(self) -> Iterator[JsonDict]:
        return self

    def __next__(self) -> JsonDict:
        while True:
            while self._next_line < len(self._lines):
                line = self._lines[self._next_line]
                self._next_line += 1
                if line.strip():
                    return self._decode(line)
            chunk = self._read()
            if not chunk:
                dropped = sum(len(piece) for piece in self._tail)
                if dropped:
                    logger.debug(
                        "watch stream ended inside an event",
                        extra={"watch": self._description, "dropped_bytes": dropped},
                    )
                self._tail = []
                raise StopIteration
            if b"\n" not in chunk:  # a large object arrives in many chunks: no re-copying
                self._tail.append(chunk)
                continue
            parts = b"".join([*self._tail, chunk]).split(b"\n")
            last = parts.pop()
            self._tail = [last] if last else []
            self._lines = parts
            self._next_line = 0

    @property
    def closed(self) -> bool:
        """``True`` once the stream ended or was closed."""
        return self._closed

    def close(self) -> None:
        """Stop the stream and release its connection; safe from any thread, idempotent.

        A read blocked in another thread is woken up (the socket is shut down for reading)
        and that iteration stops without an error.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            reading = self._reading
        if not reading:
            self._release()
            return
        try:
            self._response.shutdown()
        except (ValueError, RuntimeError, NotImplementedError, OSError):
            # No socket to shut down: the reader wakes at its read timeout and releases.
            logger.debug(
                "watch stream could not interrupt a read", extra={"watch": self._description}
            )

    def _read(self) -> bytes:
        with self._lock:
            closed = self._closed
            self._reading = not closed
        if closed:
            self._release()
            return b""
        try:
            chunk = self._response.read1(_WATCH_CHUNK)
        except urllib3.exceptions.ReadTimeoutError:
            if self._stopped():
                return b""
            self._closed = True
            raise Unavailable(
                f"watch {self._description}: no data within the read timeout",
                status=0,
                reason="Timeout",
            ) from None
        except Exception as exc:
            if self._stopped():  # close() shut the socket under our feet
                return b""
            self._closed = True
            raise Unavailable(
                f"watch {self._description}: connection broken: {exc}",
                status=0,
                reason="ConnectionError",
            ) from None
        finally:
            with self._lock:
                self._reading = False
                finished = self._closed
            if finished:
                self._release()
        if not chunk:
            self._closed = True
            self._release()
        return chunk

    def _stopped(self) -> bool:
        # A method, not the attribute: close() may flip it from another thread mid-read.
        return self._closed

    def _release(self) -> None:
        with self._lock:
            if self._released:
                return
            self._released = True
        try:
            self._response.close()
            self._response.release_conn()
        except Exception:  # releasing must never mask the reason the stream ended
            logger.debug("watch stream release failed", exc_info=True)

    def _decode(self, line: bytes) -> JsonDict:
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            event = exc
        if not isinstance(event, dict) or "type" not in event or "object" not in event:
            self.close()
            text = line[:ERROR_TEXT_LIMIT].decode("utf-8", "replace")
            raise ApiError(
                f"watch {self._description}: not a watch event: {text!r}",
                status=0,
                reason="InvalidWatchEvent",
            )
        return cast(JsonDict, event)

"""When a request may be sent again, and how long to wait first: the retry rules of the
client, in one place (client-go ``rest/with_retry.go`` and ``net/http``'s
``shouldRetryRequest``, made exact for writes; see :mod:`manager.client`), and the wait
a stopping process wants between retries (:class:`StopAwareSleep`).

Thread-safety: the functions are pure; a :class:`StopAwareSleep` is shared by every
request of a client.
"""

from __future__ import annotations

import builtins
import contextvars
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

import urllib3

from manager.client.request import PATCH_CONTENT_TYPES, metadata_of
from manager.client.wire import NothingSent
from manager.errors import (
    ServerError,
    TooManyRequests,
    Unavailable,
)

__all__ = [
    "BACKOFF_INITIAL",
    "BACKOFF_JITTER",
    "SAFE_METHODS",
    "SERVER_ASKED_WAIT",
    "RetryAbandoned",
    "StopAwareSleep",
    "is_replayable",
    "is_retryable",
    "never_sent",
]

# Whether the wait tenacity is about to sleep was asked for by the server (Retry-After).
SERVER_ASKED_WAIT: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "overseer_server_asked_wait", default=False
)


class RetryAbandoned(Exception):
    """Raised by a ``retry_sleep`` to end the retries: the request then raises the error
    it was retrying."""


class StopAwareSleep:
    """The wait between retries of a :class:`KubeClient` in a process that stops gracefully.

    Until ``stop`` is set it waits the whole time asked (the server's ``Retry-After`` or
    the backoff). Once ``stop`` is set, a wait the server asked for (``Retry-After``) is
    still honoured — a throttled request of a draining reconcile is not retried back to
    back — but only within the shutdown budget, ``grace`` seconds from when the stop was
    first seen; a wait that does not fit in what is left, and any client-side backoff
    (an unreachable server will not come back for a shutdown), raise
    :class:`RetryAbandoned`, which ends the retries with the error being retried.

    Args:
        stop: set when the process starts stopping.
        grace: the shutdown budget in seconds (the graceful shutdown timeout).
        clock: monotonic seconds (default :func:`time.monotonic`).
        sleep: an uninterruptible wait (default :func:`time.sleep`).
        wait: waits on ``stop`` for at most the given seconds, True if it was set
            (default ``stop.wait``).

    Thread-safe: shared by every request of a client.
    """

    def __init__(
        self,
        stop: threading.Event,
        grace: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        wait: Callable[[float], bool] | None = None,
    ) -> None:
        if grace < 0:
            raise ValueError(f"grace must be >= 0, got {grace}")
        self._stop = stop
        self._grace = grace
        self._clock = clock
        self._sleep = sleep
        self._wait = wait if wait is not None else stop.wait
        self._lock = threading.Lock()
        self._stopped_at: float | None = None

    def __call__(self, seconds: float) -> None:
        now = self._clock()
        end = now + max(seconds, 0.0)
        if not self._stop.is_set():
            if not self._wait(max(seconds, 0.0)):
                return
            now = self._clock()
        with self._lock:
            if self._stopped_at is None:
                self._stopped_at = now
            budget_end = self._stopped_at + self._grace
        if not SERVER_ASKED_WAIT.get():
            raise RetryAbandoned("stopping: no backoff retries")
        if end > budget_end:
            raise RetryAbandoned(
                f"stopping: a retry in {end - now:.1f} s would outlast the shutdown budget "
                f"({max(budget_end - now, 0.0):.1f} s left)"
            )
        if end > now:
            self._sleep(end - now)


SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
BACKOFF_INITIAL: Final = 0.5  # seconds before the first retry, doubled per attempt
BACKOFF_JITTER: Final = 0.5  # up to this many seconds added at random


def is_retryable(exc: BaseException, replayable: bool) -> bool:
    """The module's retry rules: may a request that failed with ``exc`` go again?"""
    if isinstance(exc, TooManyRequests):
        return True  # refused before anything was done: safe for every verb
    if isinstance(exc, Unavailable) and never_sent(exc.__cause__):
        return True  # the connection never opened: nothing reached the server
    if isinstance(exc, ServerError) and exc.status >= 500 and exc.retry_after is not None:
        return True  # the server says it did not do it, and when to come back
    return replayable and isinstance(exc, ServerError)


def is_replayable(method: str, body: Any, content_type: str | None) -> bool:
    """Whether a request may be sent again although its bytes may have reached the
    server: a replay of it cannot be applied twice. GET, HEAD, OPTIONS; a PUT or PATCH
    with a resourceVersion precondition (the server applies one request of a given
    resourceVersion at most once: the replay of an applied one is a 409); a DELETE with
    a uid or resourceVersion precondition (the replay of an applied one is a 404, or a
    409 on a re-created object). Never a POST."""
    if method in SAFE_METHODS:
        return True
    if method == "DELETE":
        preconditions = body.get("preconditions") if isinstance(body, Mapping) else None
        return isinstance(preconditions, Mapping) and bool(
            preconditions.get("uid") or preconditions.get("resourceVersion")
        )
    if method not in ("PUT", "PATCH"):
        return False
    if content_type == PATCH_CONTENT_TYPES["json"]:
        return isinstance(body, builtins.list) and any(
            isinstance(op, Mapping)
            and op.get("op") == "test"
            and op.get("path") == "/metadata/resourceVersion"
            and bool(op.get("value"))
            for op in body
        )
    return bool(metadata_of(body).get("resourceVersion"))


def never_sent(cause: BaseException | None) -> bool:
    if isinstance(cause, NothingSent):
        return True
    if isinstance(cause, urllib3.exceptions.MaxRetryError):
        cause = cause.reason
    # NewConnectionError (refused, no route, DNS) is a ConnectTimeoutError in urllib3 2.
    return isinstance(cause, urllib3.exceptions.ConnectTimeoutError)

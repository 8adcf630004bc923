"""Fault injection for the local API server: what a flaky network or an overloaded API
server does to a client, on demand, so tests can prove the client copes.

* :meth:`Faults.drop_watches` closes every open watch stream now (a load balancer idle
  timeout, an API server restart);
* :meth:`Faults.fail_next` makes the next N matching requests fail with 429 (with
  ``Retry-After``) or a 5xx, before the server does anything;
* :meth:`Faults.set_latency` delays every answer.

Thread-safe: every knob is guarded by one lock; handler threads consult it per request.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from apiserver.api.errors import StatusError

__all__ = ["Faults"]

_REASONS = {
    429: "TooManyRequests",
    500: "InternalError",
    502: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


@dataclass(slots=True)
class _Failure:
    remaining: int
    status: int
    retry_after: float | None
    verb: str | None
    resource: str | None


class Faults:
    """The fault-injection knobs of one :class:`~apiserver.LocalApiServer`."""

    def __init__(self, drop_all_watches: Callable[[], int]) -> None:
        self._lock = threading.Lock()
        self._failures: list[_Failure] = []
        self._latency = 0.0
        self._drop_all_watches = drop_all_watches

    def drop_watches(self) -> int:
        """Close every open watch stream now; returns how many were closed."""
        return self._drop_all_watches()

    def fail_next(
        self,
        count: int,
        status: int = 500,
        *,
        retry_after: float | None = None,
        verb: str | None = None,
        resource: str | None = None,
    ) -> None:
        """Fail the next ``count`` requests matching ``verb`` and ``resource`` (plural).

        Verbs are the Kubernetes ones: get, list, watch, create, update, patch, delete,
        deletecollection. ``None`` matches any.
        """
        if count < 1:
            raise ValueError(f"count must be >= 1, got {count}")
        if status < 400:
            raise ValueError(f"status must be an error status (>= 400), got {status}")
        with self._lock:
            self._failures.append(_Failure(count, status, retry_after, verb, resource))

    def set_latency(self, seconds: float) -> None:
        """Delay every answer by ``seconds`` (0 turns it off)."""
        if seconds < 0:
            raise ValueError(f"latency must be >= 0, got {seconds}")
        with self._lock:
            self._latency = seconds

    @property
    def latency(self) -> float:
        with self._lock:
            return self._latency

    def clear(self) -> None:
        """Remove every pending failure and the latency."""
        with self._lock:
            self._failures.clear()
            self._latency = 0.0

    def check(self, verb: str, resource: str) -> StatusError | None:
        """The injected failure for this request, if one is due (consumes it)."""
        with self._lock:
            for failure in self._failures:
                if failure.verb not in (None, verb) or failure.resource not in (None, resource):
                    continue
                failure.remaining -= 1
                if failure.remaining <= 0:
                    self._failures.remove(failure)
                headers: dict[str, str] = {}
                details = None
                if failure.retry_after is not None:
                    seconds = max(1, round(failure.retry_after))
                    headers["Retry-After"] = str(seconds)
                    details = {"retryAfterSeconds": seconds}
                reason = _REASONS.get(failure.status, "InternalError")
                message = (
                    "Too many requests, please try again later."
                    if failure.status == 429
                    else f"injected failure ({failure.status}) for {verb} {resource}"
                )
                return StatusError(failure.status, reason, message, details, headers)
        return None

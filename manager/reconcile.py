"""Request, Result and Reconciler (controller-runtime ``pkg/reconcile``).

A reconciler is level-based: it is told only *which* object to look at
(:class:`Request`: namespace and name), reads the object's current state from the cache,
and converges the world towards it. It never depends on which event woke it.

What the outcome of ``reconcile`` does to the request (DESIGN.md §3.6):

==========================  =============================================
``Result()``                done: ``forget`` (rate-limit history cleared)
``Result(requeue_after=s)`` ``forget``, then ``add_after(request, s)``
``Result(requeue=True)``    ``add_rate_limited`` (back off, retry)
an exception                ``add_rate_limited``; logged with traceback, counted
:class:`TerminalError`      ``forget``; logged and counted, never retried
==========================  =============================================

Thread-safe: values are immutable; a Reconciler is called from several worker threads
at once (never twice at once for the same Request).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from manager.errors import TerminalError

__all__ = ["Reconciler", "Request", "Result", "TerminalError"]


@dataclass(frozen=True, slots=True, order=True)
class Request:
    """Which object to reconcile: ``namespace`` is "" for cluster-scoped objects."""

    namespace: str
    name: str

    @property
    def key(self) -> str:
        """The cache key: ``namespace/name`` or ``name``."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    def __str__(self) -> str:
        return self.key


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    """What to do with the request after a successful reconcile."""

    requeue_after: float | None = None  # seconds > 0: reconcile again after this delay
    requeue: bool = False  # reconcile again with rate-limited backoff

    def __post_init__(self) -> None:
        if self.requeue_after is not None and self.requeue_after < 0:
            raise ValueError(f"requeue_after must be >= 0, got {self.requeue_after}")


class Reconciler(Protocol):
    """Converges one object; raise to retry with backoff, TerminalError to give up."""

    def reconcile(self, request: Request) -> Result:
        """Bring the world in line with the object named by ``request``."""
        ...

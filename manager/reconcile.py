"""Request, Result and Reconciler (controller-runtime ``pkg/reconcile``).

A reconciler is level-based: it is told only *which* object to look at
(:class:`Request`: namespace and name), reads the object's current state from the cache,
and converges the world towards it. It never depends on which event woke it.

What the outcome of ``reconcile`` does to the request (DESIGN.md §3.6):

==================================  =============================================
``Result()``                        done: ``forget`` (rate-limit history cleared)
``Result(requeue_after=s)``, s > 0  ``forget``, then ``add_after(request, s)``, also
                                    with ``requeue=True`` (the delay wins, as in
                                    controller-runtime)
``Result(requeue=True)``            ``add_rate_limited`` (back off, retry)
``requeue_after=0``                 no delay asked: as if not given
an exception                        ``add_rate_limited``; logged with traceback, counted
:class:`TerminalError`              ``forget``; logged and counted, never retried
``WriteFenced``,                    ``forget``; no retry (see :mod:`manager.controller`)
``NamespaceTerminating``
==================================  =============================================

Thread-safe: values are immutable; a Reconciler is called from several worker threads
at once (never twice at once for the same Request).

A request names ``namespace/name``; a name deleted and created again is another object
(another uid, another *incarnation*). A sharded controller places a key by its primary
object's uid, so two incarnations of one name may be reconciled by two replicas at once
(the old one's cleanup, by the uid it last had, and the new one's provisioning).
:func:`incarnation` tells a reconcile which one it runs for: the uid whose shard
permission fences its writes (README "Sharding", re-used names).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

from manager.errors import TerminalError

__all__ = ["Reconciler", "Request", "Result", "TerminalError", "incarnation", "reconciling"]

_INCARNATION: ContextVar[str | None] = ContextVar("overseer_incarnation", default=None)


@dataclass(frozen=True, slots=True, order=True)
class Request:
    """Which object to reconcile: ``namespace`` is "" for cluster-scoped objects.

    ``cluster`` names the cluster of a fleet the object lives in (multicluster-runtime's
    ``mcreconcile.Request.ClusterName``): set on every request of a fleet-wide controller
    (:mod:`manager.fleet`), "" otherwise (the manager's own cluster)."""

    namespace: str
    name: str
    cluster: str = ""

    @property
    def key(self) -> str:
        """The cache key: ``namespace/name`` or ``name`` (within its cluster)."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    def __str__(self) -> str:
        return f"{self.cluster}:{self.key}" if self.cluster else self.key


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


def incarnation() -> str | None:
    """The uid of the primary object the running reconcile is for, when a sharded
    controller runs it: the object its cache holds under the request's key, or, if that
    was deleted since, the uid it last had. The replica's write permission is for this
    uid's place on the ring, nothing else: act on owned objects whose controller
    ownerReference names this uid, on the cached primary only if its uid is this one,
    and guard every write with the written object's uid (a delete's ``preconditions``,
    ``metadata.uid`` in a patch). None outside a sharded reconcile (a leader-elected
    controller's cache holds every incarnation it may act on)."""
    return _INCARNATION.get()


@contextmanager
def reconciling(uid: str | None) -> Iterator[None]:
    """Run a reconcile for incarnation ``uid`` (what :func:`incarnation` answers in the
    block, and in context copies made in it). For the manager's sharded reconciler."""
    token = _INCARNATION.set(uid)
    try:
        yield
    finally:
        _INCARNATION.reset(token)

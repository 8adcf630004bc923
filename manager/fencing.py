"""Write fencing: a replica writes only while it may, judged on its own monotonic clock.

A Lease says which replica may act (the leader, or the owner of a shard), but a replica
that was paused — a long GC, SIGSTOP, a frozen VM, a disk that stalled the process —
wakes up believing it still may, and a write it sends then lands while another replica
acts. A :class:`Fence` closes that gap on the client side: before every mutating request
(POST, PUT, PATCH, DELETE) the manager's :class:`~manager.kube.KubeClient` asks the fence
that applies, and a closed fence refuses the request with
:class:`~manager.errors.WriteFenced` without sending a byte. client-go and
controller-runtime have no such check; their leader keeps writing until it notices.

Which fence applies to a request:

* the fence set for the current context with :func:`fenced` (a context variable, so it
  follows the code that runs, not the client object): the manager runs components that
  act on every replica under :data:`UNFENCED`; a sharded controller sets the fence of the
  key it reconciles;
* otherwise the client's own fence (:meth:`~manager.kube.KubeClient.with_fence`): for the
  manager's client, "this replica holds the leader Lease".

Contract of :meth:`Fence.check`: return ``None`` (no limit) or the seconds for which
writes stay allowed, or raise :class:`~manager.errors.WriteFenced`. The client asks twice
per attempt: before it waits for its rate limiter, and again in the HTTP connection right
before the request's first byte is written, so a pause anywhere before the send is caught.
The first answer also caps the request's timeout, so the client gives up on a write whose
answer has not come while the permission lasted (and closes its connection: an API server
abandons a request whose client has gone, unless it was already committing it).

What remains (documented in the README, "What happens when…"): a request whose bytes left
before the fence closed but reach the API server only after another replica took over.
The Lease rules bound it: a fence closes at the renew deadline, ``lease_duration -
renew_deadline`` seconds before any other replica may take the Lease, so the request must
spend longer than that in the network (and its client's close must be later still).

Thread-safety: fences are shared by every worker thread; :func:`fenced` affects only the
calling thread's context (threads started with :func:`contextvars.copy_context` inherit it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Final, Protocol

from prometheus_client import Counter

from manager.errors import WriteFenced
from manager.metrics import REGISTRY

__all__ = [
    "FENCED_WRITES",
    "UNFENCED",
    "Fence",
    "ValidityFence",
    "current_fence",
    "fenced",
]

logger = logging.getLogger(__name__)

FENCED_WRITES = Counter(
    "overseer_fenced_writes_total",
    "Writes refused before they were sent, because this replica may not write now, by reason.",
    ["reason"],
    registry=REGISTRY,
)


class Fence(Protocol):
    """Whether this replica may write now."""

    def check(self) -> float | None:
        """Allow a write now: return for how many more seconds the permission lasts
        (``None``: no limit).

        Raises:
            WriteFenced: writes are not allowed now.
        """
        ...


class _Unfenced:
    """Always open: for work every replica does regardless of leadership."""

    def check(self) -> float | None:
        return None

    def __repr__(self) -> str:
        return "UNFENCED"


UNFENCED: Final[Fence] = _Unfenced()
"""The fence that always allows: for components that run on every replica."""

_CURRENT: ContextVar[Fence | None] = ContextVar("overseer_fence", default=None)


def current_fence() -> Fence | None:
    """The fence set for the current context with :func:`fenced`, or None."""
    return _CURRENT.get()


@contextmanager
def fenced(fence: Fence) -> Iterator[None]:
    """Writes made in this block (by this thread and its context copies) ask ``fence``."""
    token = _CURRENT.set(fence)
    try:
        yield
    finally:
        _CURRENT.reset(token)


class ValidityFence:
    """Open while ``valid_for()`` is positive or None: a Lease's remaining validity on this
    replica's monotonic clock.

    A refusal is counted in ``overseer_fenced_writes_total{reason}`` and logged once per
    closed period (the first refusal after writes were allowed), not once per request.

    Args:
        valid_for: seconds writes stay allowed (<= 0: not allowed; None: no limit).
        reason: the metric label and :attr:`WriteFenced.reason` (``not_leader``, ...).
        message: what a refusal says, e.g. "this replica does not hold the leader Lease".
    """

    def __init__(self, valid_for: Callable[[], float | None], *, reason: str, message: str) -> None:
        self._valid_for = valid_for
        self._reason = reason
        self._message = message
        FENCED_WRITES.labels(reason)  # exported at 0 from the start: rate() and alerts see it
        self._lock = threading.Lock()
        self._refusing = False

    def check(self) -> float | None:
        remaining = self._valid_for()
        if remaining is None or remaining > 0:
            if self._refusing:
                with self._lock:
                    self._refusing = False
            return remaining
        FENCED_WRITES.labels(self._reason).inc()
        with self._lock:
            first = not self._refusing
            self._refusing = True
        if first:
            logger.warning(
                "writes refused: this replica may not write now",
                extra={"reason": self._reason, "why": self._message},
            )
        raise WriteFenced(f"write refused: {self._message}", reason=self._reason)

    def __repr__(self) -> str:
        return f"ValidityFence(reason={self._reason!r})"

"""Write fencing: a replica writes only while it may, judged on its own monotonic clock.

A Lease says which replica may act (the leader, or the owner of a shard), but a replica
that was paused — a long GC, SIGSTOP, a frozen VM, a disk that stalled the process —
wakes up believing it still may, and a write it sends then lands while another replica
acts. A :class:`Fence` closes that gap on the client side: before every mutating request
(POST, PUT, PATCH, DELETE) the manager's :class:`~manager.client.KubeClient` asks the fence
that applies, and a closed fence refuses the request with
:class:`~manager.errors.WriteFenced` without sending a byte. client-go and
controller-runtime have no such check; their leader keeps writing until it notices.

Which fence applies to a request:

* the fence set for the current context with :func:`fenced` (a context variable, so it
  follows the code that runs, not the client object): the manager runs components that
  act on every replica under :data:`UNFENCED`; a sharded controller sets the fence of the
  key it reconciles;
* otherwise the client's own fence (:meth:`~manager.client.KubeClient.with_fence`): for the
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

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Final, Protocol

from prometheus_client import Counter

from manager.errors import WriteFenced
from manager.metrics import REGISTRY

__all__ = [
    "FENCED_WRITES",
    "IN_FLIGHT",
    "UNFENCED",
    "Fence",
    "Flight",
    "ValidityFence",
    "WritesInFlight",
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

    @property
    def reason(self) -> str:
        return self._reason

    def __repr__(self) -> str:
        return f"ValidityFence(reason={self._reason!r})"


class _Socketed(Protocol):
    """A connection with (maybe) a socket: urllib3's HTTPConnection."""

    sock: socket.socket | None


class Flight:
    """One fenced write (or pipeline of writes) from its first fence check until its
    answer has been read."""

    __slots__ = ("aborted", "answered", "conn", "fence", "lands_by")

    def __init__(self, fence: Fence) -> None:
        self.fence = fence
        self.conn: _Socketed | None = None  # set once its bytes start going out
        self.aborted = ""  # why it was abandoned ("" while it was not)
        self.answered = False  # every answer was read: nothing of it can land later
        # monotonic time until which the server may still apply it although its
        # connection was shut (writes queued behind others on a connection: the server
        # reads ahead and does not see the close); None: the close stops it
        self.lands_by: float | None = None


class WritesInFlight:
    """Every fenced write under way in this process, so that a permission can be given up
    only once none of its writes can still arrive.

    The client (:class:`~manager.client.KubeClient`) calls :meth:`begin` before a fenced
    write's first check, :meth:`sending` from the connection right before each piece of it
    goes on the wire (after the fence's last check), and :meth:`end` once the answer is read
    or the attempt failed. :meth:`abandon` shuts down the connections of the matching
    writes; a matching write that has not been sent yet is refused when it tries.

    Shutting a connection down stops a write the server has not begun to commit only if
    the server sees the close: one alone on its connection. Writes pipelined behind
    others are read ahead by the server (Go's net/http server too), which sees the next
    request's bytes, not the close, and applies them at its pace. Such a flight says until
    when it may land (``lands_by``, from :meth:`sending`); abandoned, it counts as under
    way until then, whatever its writer has noticed, so :meth:`wait` and :meth:`count`
    do not give a permission up while it may still be applied.

    Thread-safe: one lock; sockets are shut down outside it.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._cond = threading.Condition()
        self._flights: set[Flight] = set()
        self._landing: set[Flight] = set()  # abandoned and ended, that may still land
        # (fence, when) of writes that ended sent but unanswered: nobody knows when (or
        # whether) the server applies them
        self._unsettled: list[tuple[Fence, float]] = []
        self._clock = clock

    def begin(self, fence: Fence) -> Flight:
        flight = Flight(fence)
        with self._cond:
            self._flights.add(flight)
        return flight

    def sending(self, flight: Flight, conn: _Socketed, *, lands_by: float | None = None) -> None:
        """``flight`` goes out on ``conn`` now; ``lands_by``: for writes queued behind
        others on it, the monotonic time by which the server will have handled them.

        Raises:
            WriteFenced: the write was abandoned before it was sent.
        """
        with self._cond:
            if flight.aborted:
                raise WriteFenced(f"write refused: {flight.aborted}", reason="abandoned")
            flight.conn = conn
            if lands_by is not None:
                flight.lands_by = max(flight.lands_by or 0.0, lands_by)

    def end(self, flight: Flight) -> None:
        """The writer is done with ``flight``: answered (``flight.answered``), refused
        unsent, or failed once sent (then it is *unsettled*: see :meth:`settle`)."""
        with self._cond:
            self._flights.discard(flight)
            now = self._clock()
            if flight.aborted and flight.lands_by is not None and flight.lands_by > now:
                self._landing.add(flight)
            if flight.conn is not None and not flight.answered:
                self._unsettled = [u for u in self._unsettled if now - u[1] < _UNSETTLED_KEPT]
                self._unsettled.append((flight.fence, now))
            self._cond.notify_all()

    def _under_way(self) -> list[Flight]:
        """Flights under way, and abandoned ones that may still land (lock held)."""
        now = self._clock()
        self._landing = {f for f in self._landing if f.lands_by is not None and f.lands_by > now}
        return [*self._flights, *self._landing]

    def count(self, match: Callable[[Fence], bool]) -> int:
        """How many writes whose fence ``match`` accepts are under way (or may still
        land, abandoned)."""
        with self._cond:
            return sum(1 for f in self._under_way() if match(f.fence))

    def abandon(self, match: Callable[[Fence], bool], why: str) -> int:
        """Abandon every write whose fence ``match`` accepts: its connection is shut down
        now (both ways), so nothing more of it leaves and no answer is awaited; its writer
        gets :class:`~manager.errors.WriteFenced`. Returns how many were abandoned."""
        with self._cond:
            flights = [f for f in self._flights if match(f.fence) and not f.aborted]
            for flight in flights:
                flight.aborted = why
            sockets = [f.conn.sock for f in flights if f.conn is not None]
        for sock in sockets:
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        if flights:
            logger.warning("abandoned writes in flight", extra={"writes": len(flights), "why": why})
        return len(flights)

    def wait(self, match: Callable[[Fence], bool], timeout: float) -> bool:
        """Wait until no write ``match`` accepts is under way; False on timeout."""
        deadline = self._clock() + max(timeout, 0.0)
        with self._cond:
            while True:
                matching = [f for f in self._under_way() if match(f.fence)]
                if not matching:
                    return True
                now = self._clock()
                remaining = deadline - now
                if remaining <= 0:
                    return False
                landing = [f.lands_by - now for f in matching if f in self._landing and f.lands_by]
                self._cond.wait(min([remaining, *landing]))

    def settle(
        self, match: Callable[[Fence], bool], why: str, *, timeout: float, window: float
    ) -> bool:
        """Before a Lease is released: may it be, with nothing sent under it able to land
        afterwards? Waits up to ``timeout`` for the matching writes under way to be
        answered. True when none is left and none ended unanswered in the last
        ``window`` seconds (the Lease's duration: within it, such a write may still be
        on its way). Otherwise the ones under way are abandoned and the answer is
        False: the Lease must be left to expire, as after a crash, so that the Lease
        rules bound what is still on its way; a release would let a standby in at once.
        """
        if not self.wait(match, timeout):
            self.abandon(match, why)
            logger.warning(
                "writes unanswered when the Lease is to be released: not releasing it",
                extra={"why": why, "timeout_seconds": timeout},
            )
            return False
        now = self._clock()
        with self._cond:
            unsettled = sum(1 for f, at in self._unsettled if now - at < window and match(f))
        if unsettled:
            logger.warning(
                "writes ended unanswered lately: not releasing the Lease",
                extra={"why": why, "writes": unsettled, "window_seconds": window},
            )
            return False
        return True

    def give_up(self, match: Callable[[Fence], bool], why: str, timeout: float) -> bool:
        """Before a permission goes: abandon the matching writes and wait (at most
        ``timeout``) for their writers to notice. True when none is left."""
        self.abandon(match, why)
        return self.wait(match, timeout)


_UNSETTLED_KEPT: Final = 600.0  # seconds an unanswered write is remembered (> any Lease)

IN_FLIGHT: Final[WritesInFlight] = WritesInFlight()
"""The writes under way in this process (every client registers its fenced writes)."""

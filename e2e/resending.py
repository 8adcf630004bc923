"""Test-only: ``overseer run`` with the client's old resend — a write whose connection
broke after it was sent on a re-used (kept-alive) connection is sent once more, on a new
connection, whatever its verb.

That is what :class:`~manager.client.KubeClient` (``_exchange``) and
:class:`~manager.client.WriteSession` (``_write``, ``pipeline``) did before the write path
learnt that a reset after the request left may come after the server committed it
(``git show 5a26ff8^:manager/kube.py``, before it became ``manager/client/``): they
took any reset, broken pipe or early close on a re-used connection for a stale
kept-alive connection and sent the request again.
Now such a write raises :class:`~manager.errors.OutcomeUnknown` unless a replay cannot
apply it twice.

The chaos suite runs ``reset-after-commit`` this way (``run_scenario(...,
resending=True)``, ``python -m e2e.chaos --resending-runs N``) to show that the scenario
would catch a client that sends a committed write twice: its duplicates column must then
be above 0. Not a configuration of the product, never shipped in it: this module
replaces those three methods in this process only, wrapping the current ones:

* the exchange (or the session's write) raised a :class:`ConnectionError` (reset,
  broken pipe, closed before the answer) or an ``OutcomeUnknown`` caused by one, and the
  request had gone out on a socket that had carried a request before: it is sent again,
  once (a second break raises as usual);
* a pipeline's writes left without an answer for the same reason are sent again, once,
  as a pipeline (the old code did so when its connection had been re-used).

``python -m e2e.resending run --config ...`` takes the arguments of ``overseer``.
"""

from __future__ import annotations

import builtins
import logging
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from manager.cli import main
from manager.client import rest, session, wire
from manager.client.request import JsonDict
from manager.errors import ApiError, OutcomeUnknown, WriteFenced

logger = logging.getLogger("e2e.resending")

_carried: weakref.WeakSet[Any] = weakref.WeakSet()  # sockets that have carried a request
_carried_lock = threading.Lock()
_last = threading.local()  # .reused: this thread's last request went on such a socket

_send_request = wire.send_request
_exchange = rest.KubeClient._exchange
_write = session.WriteSession._write
_pipeline = session.WriteSession.pipeline


def _tracked_send(sock: Any, request: bytes) -> bool:
    with _carried_lock:
        _last.reused = sock in _carried
        _carried.add(sock)
    return _send_request(sock, request)


def _broken_on_reused(exc: BaseException) -> bool:
    cause = exc.__cause__ if isinstance(exc, OutcomeUnknown) else exc
    return isinstance(cause, ConnectionError) and bool(getattr(_last, "reused", False))


def _resent(method: str, path: str, count: int = 1) -> None:
    logger.info(
        "write sent again after its connection broke (e2e.resending)",
        extra={"method": method, "path": path, "writes": count},
    )


def _resending_exchange(  # noqa: PLR0917 (KubeClient._exchange's signature)
    self: rest.KubeClient,
    method: str,
    url: str,
    headers: dict[str, str],
    body: Any,
    timeout: float,
) -> Any:
    try:
        return _exchange(self, method, url, headers, body, timeout)
    except ConnectionError as exc:
        if not _broken_on_reused(exc):
            raise
    _resent(method, url)
    return _exchange(self, method, url, headers, body, timeout)


def _resending_write(
    self: session.WriteSession, method: str, path: str, body: JsonDict, content_type: str
) -> JsonDict:
    try:
        return _write(self, method, path, body, content_type)
    except OutcomeUnknown as exc:
        if not _broken_on_reused(exc):
            raise
    _resent(method, path)
    return _write(self, method, path, body, content_type)


def _resending_pipeline(
    self: session.WriteSession, writes: Sequence[session.Write], *, decode: bool = True
) -> builtins.list[JsonDict | ApiError | WriteFenced]:
    results = _pipeline(self, writes, decode=decode)
    broken = next(
        (
            i
            for i, r in enumerate(results)
            if isinstance(r, OutcomeUnknown) and _broken_on_reused(r)
        ),
        None,
    )
    if broken is None:
        return results
    _resent(writes[broken].method, writes[broken].path, len(writes) - broken)
    return results[:broken] + _pipeline(self, writes[broken:], decode=decode)


# the modules that send bind wire.send_request by name: each one's binding is replaced
rest.send_request = _tracked_send
session.send_request = _tracked_send
rest.KubeClient._exchange = _resending_exchange  # type: ignore[method-assign]
session.WriteSession._write = _resending_write  # type: ignore[method-assign]
session.WriteSession.pipeline = _resending_pipeline  # type: ignore[method-assign]

if __name__ == "__main__":
    raise SystemExit(main())

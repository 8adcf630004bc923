"""Many small writes on one held connection, pipelined in rounds that a fence bounds: the
Event sender's path (:class:`WriteSession`, :class:`Write`).
"""

from __future__ import annotations

import builtins
import contextlib
import io
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Self
from urllib.parse import urlsplit

import orjson
import urllib3
from urllib3.util.wait import wait_for_read

from manager.client.answers import decode_answer
from manager.client.request import PATCH_CONTENT_TYPES, JsonDict, namespace_for, object_path
from manager.client.wire import ClosedEarly, NothingSent, SocketReads, read_response, send_request
from manager.errors import (
    ApiError,
    WriteFenced,
)
from manager.fencing import IN_FLIGHT, Flight
from manager.resources import Resource

if TYPE_CHECKING:
    from manager.client.rest import KubeClient

__all__ = ["Write", "WriteSession"]


@dataclass(frozen=True, slots=True)
class Write:
    """One write of a :meth:`WriteSession.pipeline`: POST ``body`` to a collection or
    merge-PATCH an object with it (build it with :meth:`create` or :meth:`patch`)."""

    method: str
    path: str
    body: JsonDict
    content_type: str

    @classmethod
    def create(cls, resource: Resource, body: JsonDict, namespace: str | None = None) -> Write:
        path = resource.path(namespace_for(resource, namespace, body))
        return cls("POST", path, body, "application/json")

    @classmethod
    def patch(cls, resource: Resource, name: str, patch: JsonDict, namespace: str | None) -> Write:
        path = object_path(resource, namespace, name)
        return cls("PATCH", path, patch, PATCH_CONTENT_TYPES["merge"])


def _request_bytes(write: Write, prefix: str, head: bytes) -> bytes:
    payload = orjson.dumps(write.body)
    return b"".join(
        (
            f"{write.method} {prefix}{write.path} HTTP/1.1\r\n".encode(),
            head,
            f"Content-Type: {write.content_type}\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n".encode(),
            payload,
        )
    )


class WriteSession:
    """Writes (POST, merge PATCH) sent one after the other on one connection this session
    holds, without urllib3's and http.client's per-request machinery: the request head is
    built once per session (the authentication header included, so a refreshed token is
    picked up by the next session), the body is one ``orjson.dumps``, and the answer is
    read with a minimal HTTP/1.1 parser (status, ``Content-Length`` or chunked body).
    Built by :meth:`KubeClient.write_session`.

    The rules of the client's writes hold: every write passes the client's rate limiter;
    a fenced client's write asks the fence that applies (:mod:`manager.fencing`) before
    the limiter and again right before its bytes go out, registers with
    :data:`~manager.fencing.IN_FLIGHT` (so that an abandon shuts its connection) and
    raises :class:`~manager.errors.WriteFenced` when refused; answers other than 2xx raise
    the mapped :class:`~manager.errors.ApiError`; ``rest_client_*`` metrics count each
    write; a 401 makes the credentials fetch again and the head be built anew. Nothing is
    sent twice: a write goes again (on a new connection) only if not one byte of it had
    left, or (in a pipeline) if the server had closed the connection by ``Connection:
    close`` before handling it. A write that broke after that raises (or, in a
    pipeline, results in) :class:`~manager.errors.OutcomeUnknown`; one whose connection
    could not be opened, ``Unavailable``. The next write opens a new connection.

    When the client goes through an HTTP proxy or authenticates with a query parameter,
    the session falls back to the client's ordinary requests.

    A session may be used for many rounds (the Event sender keeps one for its life and
    uses it once per batch): :meth:`close` gives the connection back and forgets the head,
    the next write takes a connection and builds the head again. What it learnt about
    how fast the server answers a pipeline (see :meth:`pipeline`) it keeps.

    Not thread-safe: one thread (the Event sender) uses a session.
    """

    def __init__(self, client: KubeClient) -> None:
        self._client = client
        self._pool: Any = client._pool
        self._conn: Any = None
        self._reader: Any = None
        self._used = False  # the held connection has carried a write already
        self._head: bytes | None = None
        self._prefix = urlsplit(client._host).path.rstrip("/")
        self._raw: SocketReads | None = None  # under ``_reader``: counts the receives
        # seconds the server took per write of the last pipelines (0: not known yet)
        self._answer_seconds = 0.0
        # the slowest seconds per write the server showed lately (0: not known yet)
        self._write_seconds = 0.0
        self._authorization: str | None = None  # what the head sends
        self._sleep: Callable[[float], None] = time.sleep  # the wait for a pipeline's answers

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            self._release(keep=False)  # left by an exception: the connection may be mid-answer
        self.close()

    def create(self, resource: Resource, body: JsonDict, namespace: str | None = None) -> JsonDict:
        """POST ``body`` (as :meth:`KubeClient.create`: sent once, never again once a
        byte of it has left)."""
        ns = namespace_for(resource, namespace, body)
        return self._write("POST", resource.path(ns), body, "application/json")

    def patch(
        self, resource: Resource, name: str, patch: JsonDict, *, namespace: str | None = None
    ) -> JsonDict:
        """A merge PATCH (as :meth:`KubeClient.patch` with ``patch_type="merge"``, sent
        once: a session replays nothing)."""
        path = object_path(resource, namespace, name)
        return self._write("PATCH", path, patch, PATCH_CONTENT_TYPES["merge"])

    def pipeline(
        self, writes: Sequence[Write], *, decode: bool = True
    ) -> builtins.list[JsonDict | ApiError | WriteFenced]:
        """Send ``writes`` back to back (HTTP/1.1 pipelining: one buffer, one send) and
        read their answers in order: the result of each, a decoded object or the
        :class:`~manager.errors.ApiError` it met. Nothing raises. Every write takes its
        token from the rate limiter. The API server handles a connection's requests one
        after the other, in order, and reads ahead: a write queued behind others is
        handled even if this client has gone meanwhile.

        Nothing is sent twice. Writes behind an answer that closes the connection
        (``Connection: close``: the server handles nothing more on it) go out again on a
        new connection; when the connection breaks otherwise, every write without an
        answer is :class:`~manager.errors.OutcomeUnknown` (it may have been handled).

        A fenced session sends in rounds, asking the fence before each: a round holds
        as many writes as the server answers, at the slowest pace it showed on this
        session lately (:attr:`write_seconds`), within half of what is left of the
        fence's permission (at least one; one while the pace is not known yet). So no
        write waits in the server's queue beyond the permission of the replica that
        sent it, even if that replica is paused right after sending; writes left when
        the fence closes are :class:`~manager.errors.WriteFenced`, unsent.

        The server answers the writes of a round one by one as it handles them; reading
        each as it comes would wake this thread once per write. So a round of several
        writes first waits about as long as the server took per write before (at most
        :data:`_PACE_CAP`), then reads what has arrived in one go; a wait that found
        every answer there already is shortened next time.

        Args:
            writes: what to send, in order.
            decode: False: a successful answer's body is not decoded (nor checked),
                its result is an empty dict (for a caller that needs only to know that
                the write succeeded).
        """
        results: builtins.list[JsonDict | ApiError | WriteFenced] = []
        if not writes:
            return results
        client = self._client
        head = self._head if self._head is not None else self._build_head()
        if self._pool is None or head is None:  # a proxy or query auth: one by one
            for w in writes:
                try:
                    results.append(self._write(w.method, w.path, w.body, w.content_type))
                except ApiError as exc:
                    results.append(exc)
            return results
        fence = client._write_fence(writes[0].method)
        try:
            if fence is not None:
                fence.check()  # before waiting for tokens: a refused pipeline spends none
            for _ in writes:
                client._limiter.accept()
        except WriteFenced as exc:
            return [exc] * len(writes)
        requests = [_request_bytes(w, self._prefix, head) for w in writes]
        flight = IN_FLIGHT.begin(fence) if fence is not None else None
        start = time.monotonic()
        pending = 0  # index of the first write without an answer
        try:
            reopened = 0
            while pending < len(writes):
                timeout = client._options.timeout
                valid_for = fence.check() if fence is not None else None
                if valid_for is not None:
                    timeout = min(timeout, valid_for)
                count = self._round(len(writes) - pending, valid_for)
                conn = self._connection(timeout)
                reused = self._used
                if flight is not None:
                    flight.fence.check()
                    lands_by = None
                    if count > 1 and valid_for is not None:
                        lands_by = time.monotonic() + valid_for
                    IN_FLIGHT.sending(flight, conn, lands_by=lands_by)
                    flight.answered = False
                if not send_request(conn.sock, b"".join(requests[pending : pending + count])):
                    if reused:  # not a byte left on a stale connection: anew
                        self._release(keep=False)
                        continue
                    raise NothingSent("the connection broke before the request's first byte")
                self._used = True
                sent_at = time.monotonic()
                if count > 1 and self._answer_seconds > 0:
                    self._sleep(min(self._answer_seconds * count, _PACE_CAP, timeout))
                receives = self._raw.receives if self._raw is not None else 0
                answered = 0
                close = False
                while answered < count and not close:
                    answer = read_response(self._reader)
                    results.append(self._result(writes[pending], answer, start, decode))
                    close = answer[3]
                    pending += 1
                    answered += 1
                if answered == count:
                    self._learn(count, sent_at, self._raw.receives - receives if self._raw else 1)
                if flight is not None:
                    flight.answered = True  # this round's: nothing of it can land later
                if close:
                    # the server handles nothing more on this connection (RFC 9112 9.6):
                    # what it did not answer it did not handle; again on a new one
                    self._release(keep=False)
                    reopened += 1
                    if reopened > len(writes):
                        raise ClosedEarly("the server keeps closing the connection")
        except (OSError, urllib3.exceptions.HTTPError, WriteFenced) as exc:
            self._release(keep=False)
            error: ApiError | WriteFenced
            if isinstance(exc, WriteFenced):
                error = exc
            elif flight is not None and flight.aborted:
                error = WriteFenced(f"writes abandoned: {flight.aborted}", reason="abandoned")
            else:
                error = client._connection_error(exc, writes[pending].method, writes[pending].path)
            for w in writes[pending:]:
                client._observe(w.method, "<error>", start)
            results.extend([error] * (len(writes) - pending))
        except BaseException:
            self._release(keep=False)  # never give a connection back mid-exchange
            raise
        finally:
            if flight is not None:
                IN_FLIGHT.end(flight)
        return results

    @property
    def write_seconds(self) -> float:
        """The slowest time per write the server showed on this session's recent rounds
        (seconds, from the send to the last answer; 0 while not known). It bounds how
        many fenced writes a round holds."""
        return self._write_seconds

    def close(self) -> None:
        """Give the connection back to the client's pool (or close it if it is broken)
        and forget the request head; the session may be used again."""
        self._release(keep=True)
        self._head = None

    # -- internals ----------------------------------------------------------------------

    def _result(
        self, write: Write, answer: tuple[int, str, bytes, bool], start: float, decode: bool
    ) -> JsonDict | ApiError:
        status, retry_after, data, _ = answer
        self._client._observe(write.method, str(status), start)
        if not decode and 200 <= status < 300:
            return {}
        if status == 401:
            self._rejected()
        return decode_answer(status, retry_after, data, write.method, write.path)

    def _rejected(self) -> None:
        """A 401: the credentials are fetched again (an exec plugin's) and the head is
        built anew for the next write."""
        self._client._rejected(self._authorization)
        self._head = None

    def _round(self, left: int, valid_for: float | None) -> int:
        """How many of ``left`` writes the next round sends: all without a time limit;
        else as many as the server answers within half of ``valid_for`` at the pace
        of :attr:`write_seconds`, at least one (one alone on its connection: the
        server drops it when the connection closes before it commits), and one while
        the pace is not known."""
        if valid_for is None:
            return left
        if self._write_seconds <= 0:
            return 1
        return max(1, min(left, int(valid_for * _FENCED_SHARE / self._write_seconds)))

    def _learn(self, sent: int, sent_at: float, receives: int) -> None:
        """What a round whose answers all came says about the server's pace: the time
        per write for :attr:`write_seconds` (the slowest lately: a slower round raises
        it at once, a faster one lowers it by half at most), and the wait before reading
        the next round's answers (:meth:`_pace`)."""
        per_write = (time.monotonic() - sent_at) / sent
        self._write_seconds = max(per_write, self._write_seconds * _PACE_DECAY)
        if sent > 1:
            self._pace(sent, sent_at, receives)

    def _pace(self, sent: int, sent_at: float, receives: int) -> None:
        """Learn how long to wait before reading the next pipeline's answers from how
        this one's came: in one receive (every answer was there when the wait ended: it
        may have been too long) or in more (the server's pace is what it took)."""
        if receives <= 1:
            self._answer_seconds *= _PACE_SHRINK
        else:
            self._answer_seconds = (time.monotonic() - sent_at) / sent

    def _write(self, method: str, path: str, body: JsonDict, content_type: str) -> JsonDict:
        client = self._client
        if self._pool is None:  # a proxy: the ordinary, slower path
            return client._json(
                method, path, body=body, content_type=content_type, replayable=False
            )
        head = self._head if self._head is not None else self._build_head()
        if head is None:  # authentication in the query string: the ordinary path
            return client._json(
                method, path, body=body, content_type=content_type, replayable=False
            )
        fence = client._write_fence(method)
        timeout = client._options.timeout
        if fence is not None:
            fence.check()  # before waiting for a token: a refused write spends none
        client._limiter.accept()
        flight: Flight | None = None
        if fence is not None:
            valid_for = fence.check()  # the limiter may have made us wait
            if valid_for is not None:
                timeout = min(timeout, valid_for)
            flight = IN_FLIGHT.begin(fence)
        payload = orjson.dumps(body)
        request = b"".join(
            (
                f"{method} {self._prefix}{path} HTTP/1.1\r\n".encode(),
                head,
                f"Content-Type: {content_type}\r\nContent-Length: {len(payload)}\r\n\r\n".encode(),
                payload,
            )
        )
        start = time.monotonic()
        try:
            while True:
                conn = self._connection(timeout)
                reused = self._used
                if flight is not None:
                    flight.fence.check()
                    IN_FLIGHT.sending(flight, conn)  # refused if abandoned meanwhile
                if send_request(conn.sock, request):
                    break
                if not reused:
                    raise NothingSent("the connection broke before the request's first byte")
                self._release(keep=False)  # not a byte left on a stale connection: anew
            self._used = True
            sent_at = time.monotonic()
            status, retry_after, data, close = read_response(self._reader)
            if flight is not None:
                flight.answered = True
            self._learn(1, sent_at, 1)
        except (OSError, ValueError, urllib3.exceptions.HTTPError) as exc:
            self._release(keep=False)
            client._observe(method, "<error>", start)
            if flight is not None and flight.aborted:
                raise WriteFenced(
                    f"{method} {path}: write abandoned: {flight.aborted}", reason="abandoned"
                ) from exc
            raise client._connection_error(exc, method, path) from exc
        except BaseException:
            self._release(keep=False)  # never give a connection back mid-exchange
            raise
        finally:
            if flight is not None:
                IN_FLIGHT.end(flight)
        if close:
            self._release(keep=False)
        client._observe(method, str(status), start)
        if status == 401:
            self._rejected()
        answer = decode_answer(status, retry_after, data, method, path)
        if isinstance(answer, ApiError):
            raise answer
        return answer

    def _build_head(self) -> bytes | None:
        """Host, User-Agent, Accept, authentication and impersonation headers, once per
        session."""
        headers = self._client._headers()
        self._authorization = headers.get("Authorization")
        host = urlsplit(self._client._host).netloc
        lines = [f"Host: {host}"] + [
            f"{k}: {v}"
            for k, v in headers.items()
            if k.lower() not in ("host", "content-type", "content-length")
        ]
        lines.extend(f"{k}: {v}" for k, v in self._client._impersonation)
        self._head = ("\r\n".join(lines) + "\r\n").encode("latin-1")
        return self._head

    def _connection(self, timeout: float) -> Any:
        if self._conn is None:
            self._conn = self._pool._get_conn(timeout=timeout)
            self._used = self._conn.sock is not None  # a pooled, kept-alive connection
        conn = self._conn
        if conn.sock is not None and self._used and wait_for_read(conn.sock, timeout=0.0):
            # held since its last answer, and readable now: the server closed it (or
            # sent what nobody asked for): not to be written on
            self._release(keep=False)
            return self._connection(timeout)
        if conn.sock is None:
            conn.timeout = timeout
            conn.connect()
            self._reader = None
            self._used = False
        if self._reader is None:
            self._raw = SocketReads(conn.sock)
            self._reader = io.BufferedReader(self._raw, _READ_BUFFER)
        conn.sock.settimeout(timeout)
        return conn

    def _release(self, *, keep: bool) -> None:
        conn, reader = self._conn, self._reader
        self._conn = self._reader = self._raw = None
        self._used = keep and self._used
        if reader is not None:
            with contextlib.suppress(OSError):
                reader.close()
        if conn is None:
            return
        if not keep:
            conn.close()
        self._pool._put_conn(conn)


_READ_BUFFER: Final = 256 * 1024  # bytes a session reads at once: a pipeline's answers
_PACE_CAP: Final = 0.2  # seconds a pipeline waits for its answers before reading, at most
_PACE_SHRINK: Final = 0.75  # the next wait after one that found every answer there
_PACE_DECAY: Final = 0.5  # how far one faster round lowers WriteSession.write_seconds
_FENCED_SHARE: Final = 0.5  # of a fence's remaining permission, what a round may take

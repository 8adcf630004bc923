"""HTTP/1.1 on a socket: a request sent whole (knowing whether any byte of it left), an
answer read by a minimal parser (status, ``Retry-After``, ``Content-Length`` or chunked
body, ``Connection: close``), and urllib3 connections that ask the fence of the write they
carry right before each piece goes on the wire.

Only what the client's hot write path needs: ``h11`` and ``httptools`` parse the same, and
were measured against this parser (bench/RESULTS.md, "HTTP/1.1 answer parsing").

Thread-safety: a socket and its reader belong to one thread at a time.
"""

from __future__ import annotations

import contextvars
import io
from typing import Any, Final

import urllib3

from manager.fencing import IN_FLIGHT, Flight

__all__ = [
    "OUTGOING",
    "ClosedEarly",
    "NothingSent",
    "SocketReads",
    "check_outgoing",
    "read_response",
    "send_request",
    "use_fenced_connections",
]

# The fenced write this thread is sending, for the connection's last-moment check.
OUTGOING: contextvars.ContextVar[Flight | None] = contextvars.ContextVar(
    "overseer_outgoing_write", default=None
)


def check_outgoing(conn: Any) -> None:
    flight = OUTGOING.get()
    if flight is not None:
        flight.fence.check()
        IN_FLIGHT.sending(flight, conn)  # refused if abandoned meanwhile


class _FencedHTTPConnection(urllib3.connection.HTTPConnection):
    """Asks the fence of the write being sent right before each piece goes on the wire,
    so a pause between the client's check and the send cannot let a late write out; and
    tells :data:`~manager.fencing.IN_FLIGHT` which connection carries it, so that it can
    be abandoned."""

    def send(self, data: Any) -> None:
        check_outgoing(self)
        super().send(data)


class _FencedHTTPSConnection(urllib3.connection.HTTPSConnection):
    def send(self, data: Any) -> None:
        check_outgoing(self)
        super().send(data)


class _FencedHTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _FencedHTTPConnection


class _FencedHTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _FencedHTTPSConnection


def use_fenced_connections(pool_manager: Any) -> None:
    # pool_classes_by_scheme is PoolManager's documented hook for its pool classes; a
    # new dict, so urllib3's module-level default stays untouched.
    pool_manager.pool_classes_by_scheme = {"http": _FencedHTTPPool, "https": _FencedHTTPSPool}


_MAX_LINE: Final = 65536


def send_request(sock: Any, request: bytes) -> bool:
    """Send ``request`` whole. False when the connection refused its first byte (broken
    before anything left: safe to send on another one, as Go's ``nothingWrittenError``);
    an error once a byte has left is raised: the server may be handling the request."""
    try:
        sent = int(sock.send(request))
    except (BrokenPipeError, ConnectionResetError):
        return False
    if sent < len(request):
        sock.sendall(request[sent:])
    return True


class SocketReads(io.RawIOBase):
    """A socket as the raw stream under a write session's buffered reader, counting its
    receives (each one a wait for the server, unless its answers were there already)."""

    def __init__(self, sock: Any) -> None:
        super().__init__()
        self._sock = sock
        self.receives = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self.receives += 1
        return int(self._sock.recv_into(buffer))


class ClosedEarly(ConnectionError):
    """The server closed the connection before the first byte of its answer."""


class NothingSent(ConnectionError):
    """A new connection broke before the first byte of the request left."""


def read_response(reader: Any) -> tuple[int, str, bytes, bool]:
    """Read one HTTP/1.1 answer: (status, Retry-After, body, connection closes).

    Raises:
        ConnectionError: the connection ended inside the answer (``ClosedEarly``:
            before its first byte).
        urllib3.exceptions.ProtocolError: not an HTTP answer.
    """
    try:
        return _parse_response(reader)
    except ValueError as exc:  # a number that is none: the answer is garbled
        raise urllib3.exceptions.ProtocolError(f"not an HTTP answer: {exc}") from None


def _line(reader: Any) -> bytes:
    line = reader.readline(_MAX_LINE + 1)
    if not line:
        raise ConnectionError("the server closed the connection inside its answer")
    if len(line) > _MAX_LINE:
        raise urllib3.exceptions.ProtocolError("an answer line longer than 64 KiB")
    return bytes(line)


def _parse_response(reader: Any) -> tuple[int, str, bytes, bool]:
    while True:
        line = reader.readline(_MAX_LINE + 1)
        if not line:
            raise ClosedEarly("the server closed the connection before answering")
        parts = line.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/"):
            raise urllib3.exceptions.ProtocolError(f"not an HTTP status line: {line[:80]!r}")
        status = int(parts[1])
        length: int | None = None
        chunked = False
        close = parts[0] == b"HTTP/1.0"
        retry_after = ""
        while True:
            header = _line(reader)
            if header in (b"\r\n", b"\n"):
                break
            name, _, value = header.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"connection":
                close = value.strip().lower() == b"close"
            elif name == b"retry-after":
                retry_after = value.strip().decode("latin-1")
        if 100 <= status < 200:
            continue  # an interim answer: the real one follows
        if chunked:
            pieces = []
            while True:
                size = int(_line(reader).split(b";", 1)[0], 16)
                if size == 0:
                    while _line(reader) not in (b"\r\n", b"\n"):
                        pass  # trailers
                    break
                pieces.append(_read_exactly(reader, size))
                _line(reader)
            return status, retry_after, b"".join(pieces), close
        if length is not None:
            return status, retry_after, _read_exactly(reader, length), close
        if status in (204, 304):
            return status, retry_after, b"", close
        return status, retry_after, reader.read(), True  # delimited by the close


def _read_exactly(reader: Any, size: int) -> bytes:
    data = reader.read(size)
    if len(data) != size:
        raise ConnectionError(f"the answer ended after {len(data)} of {size} bytes")
    return bytes(data)

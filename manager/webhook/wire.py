"""HTTP/1.1 on the webhook server's side of a connection: read one request (request line,
the few headers a review needs, a ``Content-Length`` or chunked body) from a buffered
reader, and write an answer in one piece.

Only what kube-apiserver sends a webhook: it calls admission and conversion webhooks
over HTTP/1.1 only (kubernetes#82090: ``NextProtos: ["http/1.1"]``, so that concurrent
requests open several connections and spread over the Service's pods; HTTP/2 only for a
``localhost`` URL, kubernetes#122558), POSTs JSON with a ``Content-Length``, reuses
connections (keep-alive), and names its timeout in the query (``?timeout=10s``).
``http.server`` parses every header with the ``email`` package and builds a handler
object per request; this parser reads the few headers it needs and skips the rest.

Thread-safety: a reader belongs to its connection's thread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "MAX_BODY",
    "HttpError",
    "IncomingRequest",
    "answer",
    "go_duration",
    "read_request",
]

MAX_BODY: Final = 7 * 1024 * 1024  # controller-runtime's maxRequestSize: two 3 MB objects + 1 MB
_MAX_LINE: Final = 64 * 1024
_MAX_HEADERS: Final = 100
_REASONS: Final = {
    100: "Continue",
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    411: "Length Required",
    413: "Request Entity Too Large",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
_DURATION: Final = re.compile(r"(\d+(?:\.\d*)?)(h|ms|us|µs|ns|m|s)")
_UNITS: Final = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


class HttpError(Exception):
    """A request that cannot be read: answer ``status`` with ``message`` and close."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(slots=True)
class IncomingRequest:
    """One request: what the server looks at."""

    method: str
    target: str  # path and query
    content_type: str
    body: bytes
    close: bool  # the client asked to close after the answer (or spoke HTTP/1.0)
    traceparent: str = ""
    tracestate: str = ""


def _line(reader: Any) -> bytes:
    line: bytes = reader.readline(_MAX_LINE + 1)
    if len(line) > _MAX_LINE:
        raise HttpError(431, "a request line or header longer than 64 KiB")
    if not line:
        raise ConnectionError("the client closed the connection inside its request")
    return line


def read_request(reader: Any, sock: Any = None) -> IncomingRequest | None:
    """Read the next request from ``reader``; None when the client closed the connection
    between requests. ``sock`` receives ``100 Continue`` if the client expects it.

    Raises:
        HttpError: a request that cannot be answered (answer it, then close).
        ConnectionError: the connection ended inside a request.
        OSError: the socket failed (a timeout included).
    """
    line = reader.readline(_MAX_LINE + 1)
    if not line:
        return None
    while line in (b"\r\n", b"\n"):  # RFC 9112 2.2: ignore empty lines before a request
        line = _line(reader)
    if len(line) > _MAX_LINE:
        raise HttpError(431, "a request line longer than 64 KiB")
    parts = line.split()
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        raise HttpError(400, f"not an HTTP/1.1 request line: {line[:80]!r}")
    method, target, version = parts
    close = version == b"HTTP/1.0"
    length = -1
    chunked = False
    expect = False
    content_type = traceparent = tracestate = ""
    for _ in range(_MAX_HEADERS + 1):
        header = _line(reader)
        if header in (b"\r\n", b"\n"):
            break
        name, colon, value = header.partition(b":")
        if not colon:
            raise HttpError(400, f"a malformed header line: {header[:80]!r}")
        name = name.strip().lower()
        if name == b"content-length":
            try:
                length = int(value)
            except ValueError:
                raise HttpError(400, f"Content-Length: not a number: {value.strip()!r}") from None
            if length < 0:
                raise HttpError(400, "Content-Length: negative")
        elif name == b"content-type":
            content_type = value.strip().decode("latin-1")
        elif name == b"transfer-encoding":
            chunked = b"chunked" in value.lower()
        elif name == b"connection":
            token = value.strip().lower()
            close = token == b"close" or (close and token != b"keep-alive")
        elif name == b"expect":
            expect = value.strip().lower() == b"100-continue"
        elif name == b"traceparent":
            traceparent = value.strip().decode("latin-1")
        elif name == b"tracestate":
            tracestate = value.strip().decode("latin-1")
    else:
        raise HttpError(431, f"more than {_MAX_HEADERS} headers")
    if length > MAX_BODY:
        raise HttpError(413, f"request entity is too large; limit is {MAX_BODY} bytes")
    if expect and sock is not None and (chunked or length > 0):
        sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
    if chunked:
        body = _chunked(reader)
    elif length > 0:
        body = reader.read(length)
        if len(body) != length:
            raise ConnectionError(f"the request ended after {len(body)} of {length} bytes")
    else:
        body = b""
    return IncomingRequest(
        method.decode("latin-1"),
        target.decode("latin-1"),
        content_type,
        body,
        close,
        traceparent,
        tracestate,
    )


def _chunked(reader: Any) -> bytes:
    pieces: list[bytes] = []
    total = 0
    while True:
        size_line = _line(reader).split(b";", 1)[0].strip()
        try:
            size = int(size_line, 16)
        except ValueError:
            raise HttpError(400, f"a malformed chunk size: {size_line[:20]!r}") from None
        if size == 0:
            while _line(reader) not in (b"\r\n", b"\n"):
                pass  # trailers
            return b"".join(pieces)
        total += size
        if total > MAX_BODY:
            raise HttpError(413, f"request entity is too large; limit is {MAX_BODY} bytes")
        piece = reader.read(size)
        if len(piece) != size:
            raise ConnectionError("the request ended inside a chunk")
        pieces.append(piece)
        _line(reader)


def answer(
    status: int,
    body: bytes,
    *,
    content_type: str = "application/json",
    close: bool = False,
    extra: str = "",
) -> bytes:
    """The answer's bytes: status line, headers (``extra``: more header lines, each
    ending in CRLF), body."""
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}\r\n"
        f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n{extra}"
    )
    if close:
        head += "Connection: close\r\n"
    return head.encode("latin-1") + b"\r\n" + body


def go_duration(text: str) -> float | None:
    """A Go duration (``10s``, ``1m30s``, ``500ms``) in seconds; None if it is none."""
    if not text:
        return None
    pos = 0
    total = 0.0
    for match in _DURATION.finditer(text):
        if match.start() != pos:
            return None
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    return total if pos == len(text) and pos > 0 else None

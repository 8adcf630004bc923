"""The webhook server's HTTP/1.1 request reader and answer writer."""

from __future__ import annotations

import io

import pytest

from manager.webhook.wire import MAX_BODY, HttpError, answer, go_duration, read_request


class _Sock:
    def __init__(self) -> None:
        self.sent = b""

    def sendall(self, data: bytes) -> None:
        self.sent += data


def _reader(data: bytes) -> io.BufferedReader:
    return io.BufferedReader(io.BytesIO(data))  # type: ignore[arg-type]


def test_a_post_with_content_length_and_the_next_one_on_the_same_connection() -> None:
    body = b'{"kind":"AdmissionReview"}'
    one = (
        b"POST /validate/x?timeout=10s HTTP/1.1\r\nHost: svc\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\nAccept-Encoding: gzip\r\ntraceparent: 00-abc-def-01\r\n\r\n%s"
        % (len(body), body)
    )
    reader = _reader(one + one.replace(b"HTTP/1.1\r\n", b"HTTP/1.1\r\nConnection: close\r\n"))
    first = read_request(reader)
    assert first is not None
    assert (first.method, first.target, first.content_type) == (
        "POST",
        "/validate/x?timeout=10s",
        "application/json",
    )
    assert first.body == body and not first.close and first.traceparent == "00-abc-def-01"
    second = read_request(reader)
    assert second is not None and second.close and second.body == body
    assert read_request(reader) is None  # the client closed between requests


def test_a_chunked_body_with_expect_continue() -> None:
    sock = _Sock()
    data = (
        b"POST /mutate/x HTTP/1.1\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n"
        b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer: x\r\n\r\n"
    )
    request = read_request(_reader(data), sock)
    assert request is not None and request.body == b"hello world"
    assert sock.sent == b"HTTP/1.1 100 Continue\r\n\r\n"


def test_http_1_0_closes_unless_kept_alive() -> None:
    request = read_request(_reader(b"POST / HTTP/1.0\r\nContent-Length: 0\r\n\r\n"))
    assert request is not None and request.close
    kept = read_request(_reader(b"POST / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"))
    assert kept is not None and not kept.close


@pytest.mark.parametrize(
    ("data", "status"),
    [
        (b"GARBAGE\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nContent-Length: many\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nno colon here\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % (MAX_BODY + 1), 413),
        (b"POST / HTTP/1.1\r\n" + b"X: y\r\n" * 101 + b"\r\n", 431),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
    ],
)
def test_requests_that_cannot_be_answered(data: bytes, status: int) -> None:
    with pytest.raises(HttpError) as error:
        read_request(_reader(data))
    assert error.value.status == status


def test_a_request_cut_short_is_a_connection_error() -> None:
    with pytest.raises(ConnectionError):
        read_request(_reader(b"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc"))


def test_answer_bytes() -> None:
    assert answer(200, b"{}") == (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
    )
    assert b"Connection: close\r\n\r\n" in answer(429, b"x", close=True)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("10s", 10.0),
        ("1m30s", 90.0),
        ("500ms", 0.5),
        ("1h", 3600.0),
        ("", None),
        ("10", None),
        ("s", None),
    ],
)
def test_go_durations(text: str, seconds: float | None) -> None:
    assert go_duration(text) == seconds

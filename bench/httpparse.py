"""``python -m bench.httpparse``: the write path's HTTP/1.1 answer parser
(:func:`manager.client.wire.read_response`) against the two well-kept parsers a client
could use instead, ``h11`` (pure Python) and ``httptools`` (llhttp, in C), on the answers
the write path reads: one create's answer (``201``, a 1.4 KiB JSON body, with
``Content-Length``), the same chunked, and the 64 answers of a pipelined round read from
one buffer. CPU microseconds per answer, best of 5 repetitions.

The peers are not dependencies of Overseer: ``pip install h11 httptools`` (the ``bench``
extra installs them); a peer that is missing is reported as such.

What decides which parser stays is in bench/RESULTS.md ("HTTP/1.1 answer parsing").
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable

import orjson

from manager.client.wire import read_response

_OBJECT = {
    "apiVersion": "v1",
    "kind": "Event",
    "metadata": {
        "name": "web-0.18b2c3d4e5f60718",
        "namespace": "shop",
        "uid": "6b0f5f1e-8a57-4c47-9d1c-5f0e9b8c2a11",
        "resourceVersion": "123456",
        "creationTimestamp": "2026-11-28T23:00:00Z",
        "managedFields": [{"manager": "overseer", "operation": "Update"}],
    },
    "involvedObject": {"kind": "Deployment", "namespace": "shop", "name": "web", "uid": "x" * 36},
    "reason": "Exposed",
    "message": "exposed at http://web.shop.example.com/ " + "x" * 800,
    "source": {"component": "overseer", "host": "overseer-0"},
    "count": 1,
    "type": "Normal",
}
_BODY = orjson.dumps(_OBJECT) + b"\n"
_HEAD = (
    b"HTTP/1.1 201 Created\r\nAudit-Id: 5f1e8a57\r\nCache-Control: no-cache, private\r\n"
    b"Content-Type: application/json\r\nX-Kubernetes-Pf-Flowschema-Uid: a1\r\n"
    b"X-Kubernetes-Pf-Prioritylevel-Uid: b2\r\nDate: Sat, 28 Nov 2026 23:00:00 GMT\r\n"
)
LENGTH = _HEAD + b"Content-Length: %d\r\n\r\n" % len(_BODY) + _BODY
CHUNKED = (
    _HEAD
    + b"Transfer-Encoding: chunked\r\n\r\n"
    + b"%x\r\n" % len(_BODY)
    + _BODY
    + b"\r\n0\r\n\r\n"
)
PIPELINE = LENGTH * 64


def ours(data: bytes) -> int:
    reader = io.BufferedReader(io.BytesIO(data), 256 * 1024)  # type: ignore[arg-type]
    n = 0
    while True:
        try:
            status, _, body, _ = read_response(reader)
        except ConnectionError:
            return n
        assert status == 201 and len(body) == len(_BODY)
        n += 1


def h11_parser() -> Callable[[bytes], int] | None:
    try:
        import h11
    except ImportError:
        return None

    def parse(data: bytes) -> int:
        # an h11 client reads one answer per request it sent: no pipelining (its docs)
        conn = h11.Connection(h11.CLIENT)
        conn.send(h11.Request(method="POST", target="/x", headers=[("Host", "h")]))
        conn.send(h11.EndOfMessage())
        conn.receive_data(data)
        body = []
        while True:
            event = conn.next_event()
            if isinstance(event, h11.Data):
                body.append(event.data)
            elif isinstance(event, h11.EndOfMessage):
                break
        assert len(b"".join(body)) == len(_BODY)
        return 1

    return parse


def httptools_parser() -> Callable[[bytes], int] | None:
    try:
        import httptools
    except ImportError:
        return None

    class Answers:
        def __init__(self) -> None:
            self.body: list[bytes] = []
            self.n = 0

        def on_body(self, body: bytes) -> None:
            self.body.append(body)

        def on_message_complete(self) -> None:
            assert len(b"".join(self.body)) == len(_BODY)
            self.body = []
            self.n += 1

    def parse(data: bytes) -> int:
        answers = Answers()
        parser = httptools.HttpResponseParser(answers)
        parser.feed_data(data)
        assert parser.get_status_code() == 201
        return answers.n

    return parse


def _micros(parse: Callable[[bytes], int], data: bytes, answers: int) -> float:
    best = float("inf")
    loops = max(1, 2000 // answers)
    for _ in range(5):
        start = time.process_time()
        for _ in range(loops):
            assert parse(data) == answers
        best = min(best, (time.process_time() - start) / (loops * answers))
    return best * 1e6


def main() -> None:
    parsers: dict[str, Callable[[bytes], int] | None] = {
        "ours (manager.client.wire)": ours,
        "h11 0.16": h11_parser(),
        "httptools 0.9": httptools_parser(),
    }
    cases = [("201, Content-Length", LENGTH, 1), ("201, chunked", CHUNKED, 1)]
    print("| parser | " + " | ".join(c for c, _, _ in cases) + " | pipelined round of 64 |")
    print("|---|" + "---|" * (len(cases) + 1))
    for name, parse in parsers.items():
        if parse is None:
            print(f"| {name} | not installed |")
            continue
        cells = [f"{_micros(parse, data, n):.1f} µs" for _, data, n in cases]
        if name.startswith("h11"):
            cells.append("cannot (one answer per request sent)")
        else:
            cells.append(f"{_micros(parse, PIPELINE, 64):.1f} µs")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

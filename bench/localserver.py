"""The local API server for the benchmarks: ``python -m bench.localserver --kubeconfig-out K
--requests-out R [--feature-gates ShardedListAndWatch=true]``.

``python -m manager apiserver`` plus one thing the harness needs: the server's record of
the requests it served (``LocalApiServer.requests()``), by verb, group, resource and
subresource, so that a benchmark reports API requests per handled object
(:mod:`bench.requests`). The record is served as JSON rows ``[verb, group, resource,
subresource, count]`` by a side HTTP server on 127.0.0.1, whose URL is written to the
``--requests-out`` file once both servers listen. Runs until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType
from typing import Any

import orjson


def main(argv: list[str] | None = None) -> int:
    from apiserver.http.featuregates import parse_feature_gates
    from manager.logs import configure
    from manager.testing import LocalApiServer

    parser = argparse.ArgumentParser(prog="python -m bench.localserver")
    parser.add_argument("--kubeconfig-out", required=True)
    parser.add_argument("--requests-out", required=True)
    parser.add_argument("--feature-gates", default="", help="e.g. ShardedListAndWatch=true")
    args = parser.parse_args(argv)
    gates = parse_feature_gates(args.feature_gates) if args.feature_gates else None
    configure("warning", "text")
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    from apiserver.http.gcpause import freeze_after_full_collections

    freeze_after_full_collections()
    with LocalApiServer(port=0, kubeconfig_path=args.kubeconfig_out, feature_gates=gates) as server:

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                rows = [[*key, n] for key, n in sorted(server.requests().items())]
                body = orjson.dumps(rows)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *log_args: Any) -> None:
                pass

        side = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=side.serve_forever, name="bench-requests")
        thread.start()
        try:
            out = Path(args.requests_out)
            tmp = out.with_suffix(".tmp")
            tmp.write_text(f"http://127.0.0.1:{side.server_address[1]}/requests")
            tmp.replace(out)
            stop.wait()
        finally:
            side.shutdown()
            side.server_close()
            thread.join(5)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

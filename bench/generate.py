"""The write generator, run as its own process: ``python -m bench.generate ...``.

It updates ``--names`` ConfigMaps (``<prefix>-<n>``) in ``--namespace`` round-robin,
``--count`` merge PATCHes in all, on ``--threads`` keep-alive connections, and prints one
JSON line: ``{"writes": n, "seconds": s, "writes_per_s": r}``. A separate process keeps
its CPU off the process being measured (on 2 cores it still competes for the machine).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import orjson

from bench.rawhttp import RawClient
from bench.workload import run_parallel

MAX_SECONDS = 300.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.generate")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--prefix", default="cm")
    parser.add_argument("--names", type=int, required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args(argv)
    raw = RawClient(args.kubeconfig, pool_size=args.threads)
    base = f"/api/v1/namespaces/{args.namespace}/configmaps"
    nonce = f"{os.getpid()}-{time.time_ns()}"  # every PATCH changes the object: one event each

    def update(i: int) -> None:
        name = f"{args.prefix}-{i % args.names}"
        raw.request(
            "PATCH",
            f"{base}/{name}",
            {"data": {"seq": f"{nonce}-{i}"}},
            content_type="application/merge-patch+json",
        )

    elapsed, done = run_parallel(
        args.count, args.threads, update, deadline=time.monotonic() + MAX_SECONDS
    )
    raw.close()
    result = {"writes": done, "seconds": elapsed, "writes_per_s": done / elapsed}
    sys.stdout.write(orjson.dumps(result).decode() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

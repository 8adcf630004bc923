"""Benchmark ``apiserver``: the local API server's own throughput.

* creates/s: ``CREATES`` ConfigMaps POSTed by ``THREADS`` keep-alive connections
  (urllib3, raw JSON) from the harness process.
* watch events/s, live: one raw watch (lines counted, nothing decoded) on ConfigMaps
  while a generator process PATCHes ``WRITES`` times with ``THREADS`` connections; from
  the first to the last event. Bounded by the write rate, which is reported too.
* watch events/s, replay: a second watch opened from the resourceVersion before those
  writes, so the server streams its backlog as fast as it can; from the request to the
  last event.

Against a cluster these measure the cluster, in fresh namespaces.
"""

from __future__ import annotations

import threading
import time

import urllib3

from bench.child import Child
from bench.rawhttp import RawClient
from bench.registry import Goal, Metrics, Run, benchmark
from bench.workload import run_parallel

CREATES = 3000
THREADS = 4
WRITES = 20_000
NAMES = 100  # ConfigMaps the generator updates round-robin
TIMEOUT = 120.0  # seconds, any one phase


class WatchCounter:
    """Counts the lines of one raw watch stream on a thread until ``expect`` arrived."""

    def __init__(self, raw: RawClient, path: str, expect: int) -> None:
        self.expect = expect
        self.count = 0
        self.opened = 0.0
        self.first = 0.0
        self.last = 0.0
        self.error: BaseException | None = None
        self._raw = raw
        self._path = path
        self._resp: urllib3.BaseHTTPResponse | None = None
        self._connected = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-watch")

    def start(self) -> WatchCounter:
        self._thread.start()
        if not self._connected.wait(30):
            raise RuntimeError(f"watch {self._path} did not connect")
        if self.error is not None:
            raise self.error
        return self

    def _run(self) -> None:
        deadline = time.monotonic() + TIMEOUT
        try:
            self.opened = time.perf_counter()
            resp = self._raw.stream(self._path, read_timeout=30.0)
            self._resp = resp
            self._connected.set()
            while self.count < self.expect and time.monotonic() < deadline:
                chunk = resp.read1(256 * 1024)
                if not chunk:
                    break
                now = time.perf_counter()
                if not self.count:
                    self.first = now
                self.count += chunk.count(b"\n")
                self.last = now
        except BaseException as exc:  # reported by join()
            self.error = exc
        finally:
            self._connected.set()
            if self._resp is not None:  # never hand an unfinished stream back to the pool
                self._resp.close()
                self._resp.release_conn()

    def join(self) -> None:
        self._thread.join(TIMEOUT + 10)
        if self._resp is not None:
            self._resp.close()
        if self.error is not None:
            raise self.error
        if self.count < self.expect:
            raise RuntimeError(f"watch saw {self.count} of {self.expect} events")


@benchmark(
    "apiserver",
    describe=f"""
The local API server's own throughput, with the server in its own process.
**creates/s**: {CREATES} ConfigMaps POSTed by {THREADS} keep-alive connections from the
harness. **watch live**: one raw watch (lines counted, not decoded) while a generator
process sends {WRITES} merge PATCHes on {THREADS} connections (bounded by the write rate,
shown as **patches/s**). **watch replay**: a watch from the resourceVersion before those
writes, which the server streams from its history as fast as it can.
""",
    units={
        "creates_per_s": "1/s",
        "patches_per_s": "1/s",
        "watch_live_events_per_s": "1/s",
        "watch_replay_events_per_s": "1/s",
    },
    goals=[
        Goal("creates_per_s", ">=", 1000),
        Goal("watch_replay_events_per_s", ">=", 10_000),
        Goal("watch_live_events_per_s", ">=", 10_000),
    ],
)
def apiserver(run: Run) -> Metrics:
    target = run.target
    raw = target.raw
    ns = target.new_namespace("bench-api")
    try:
        base = f"/api/v1/namespaces/{ns}/configmaps"

        def create(i: int) -> None:
            body = {"metadata": {"name": f"cm-{i}", "labels": {"bench": "creates"}}}
            raw.request("POST", base, {**body, "data": {"key": f"value-{i}"}})

        seconds, done = run_parallel(CREATES, THREADS, create, deadline=time.monotonic() + TIMEOUT)
        if done < CREATES:
            raise RuntimeError(f"only {done} of {CREATES} creates within {TIMEOUT}s")
        creates_per_s = done / seconds

        listed = raw.json("GET", f"{base}?limit=1")
        before = listed["metadata"]["resourceVersion"]
        live = WatchCounter(raw, f"{base}?watch=true&resourceVersion={before}", WRITES).start()
        with Child(
            "bench.generate",
            "--kubeconfig",
            target.kubeconfig,
            "--namespace",
            ns,
            "--names",
            str(NAMES),
            "--count",
            str(WRITES),
            "--threads",
            str(THREADS),
        ) as generator:
            written = generator.next(TIMEOUT + 30)
        live.join()
        replay = WatchCounter(raw, f"{base}?watch=true&resourceVersion={before}", WRITES)
        replay.start().join()
        return {
            "creates_per_s": creates_per_s,
            "patches_per_s": float(written["writes_per_s"]),
            "watch_live_events_per_s": (live.count - 1) / (live.last - live.first),
            "watch_replay_events_per_s": replay.count / (replay.last - replay.opened),
        }
    finally:
        target.delete_namespace(ns)

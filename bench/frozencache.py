"""``python -m bench.frozencache [--objects N] [--runs R]``: what read-only cached objects
cost (:mod:`manager.cache.frozen`), in one process, no network.

The objects are a Pod and a ConfigMap as the local API server stores them (the bench's
realistic Pod of :mod:`bench.workload` with its Running status, and a one-key ConfigMap,
both with their ``managedFields``), read from an in-process server once; then everything
runs on bytes in memory:

* **list**: a LIST page of N objects decoded (``orjson.loads``), through the reflector's
  list path (transform, freeze) into a fresh :class:`~manager.cache.informer.SharedInformer`
  with one handler (its store, indexes and notifications).
* **watch, new**: N ADDED events (one decoded line each) for objects the cache does not
  hold: every object frozen from scratch.
* **watch, update**: N MODIFIED events of cached objects, each changing
  ``resourceVersion`` and (Pods) a condition's time or (ConfigMaps) the data: unchanged
  parts are shared with the cached version.

**before** is the same code with freezing switched off in the reflector (no conversion,
no lookup of the cached version): the informer as it was before objects were frozen.
CPU is ``time.process_time`` per object, the median of ``--runs`` runs, before and after
interleaved, with automatic garbage collection off (as ``overseer run`` has it until its
caches have synced); **list, collector on** is the first list with it on, as in any
process that does not pause it (a test process, an embedding program): there full
collections while the cache grows cost more than the conversion (see below). **freeze
alone**: the conversion of a decoded object by itself.

Memory per cached object: ``tracemalloc``'s bytes still allocated after N listed objects
sit in the cache (the decoded page freed), before and after; and objects the garbage
collector tracks per cached object and one full collection's time with only the cache
to visit (what was alive before is out of it, ``gc.freeze()``): a ``dict`` subclass
is tracked even when it holds only strings (CPython untracks only exact dicts), so
frozen labels, annotations and the like are more for the collector to visit (``overseer
run`` freezes what is alive at sync with ``gc.freeze()``, which takes them out of it).

The table it prints is the "Read-only cache" section of bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import orjson

import manager.cache.reflector as reflector_module
from manager.cache.frozen import freeze_in_place
from manager.cache.informer import HandlerFuncs, SharedInformer
from manager.keys import JsonDict


def _stored_objects() -> tuple[JsonDict, JsonDict]:
    """A Pod and a ConfigMap as the local API server stores them."""
    from bench.rawhttp import RawClient
    from bench.workload import owner, pod, pod_status
    from manager.testing import LocalApiServer

    with LocalApiServer(port=0) as server:
        raw = RawClient(str(server.kubeconfig_path))
        try:
            raw.request("POST", "/api/v1/namespaces", {"metadata": {"name": "bench"}})
            base = "/api/v1/namespaces/bench"
            made = orjson.loads(raw.request("POST", f"{base}/configmaps", owner(0, "bench")))
            created = orjson.loads(
                raw.request("POST", f"{base}/pods", pod(0, "bench", [made["metadata"]["uid"]]))
            )
            name = created["metadata"]["name"]
            raw.request("PUT", f"{base}/pods/{name}/status", pod_status(0, created))
            cm = {"metadata": {"name": "cm-0"}, "data": {"seq": "0"}}
            raw.request("POST", f"{base}/configmaps", cm)
            raw.request(
                "PATCH",
                f"{base}/configmaps/cm-0",
                {"data": {"seq": "1"}},
                content_type="application/merge-patch+json",
            )
            return (
                orjson.loads(raw.request("GET", f"{base}/pods/{name}")),
                orjson.loads(raw.request("GET", f"{base}/configmaps/cm-0")),
            )
        finally:
            raw.close()


def _variant(obj: JsonDict, i: int, rv: int, change: bool) -> JsonDict:
    """Object ``i`` (its own name and uid) at resourceVersion ``rv``; ``change``: the
    kind of change a watch brings (a condition's time, a data value)."""
    out = orjson.loads(orjson.dumps(obj))
    meta = out["metadata"]
    meta["name"] = f"{meta['name']}-{i}"
    meta["uid"] = f"{i:08d}-{meta['uid'][9:]}"
    meta["resourceVersion"] = str(rv)
    if change:
        if "status" in out:
            out["status"]["conditions"][1]["lastTransitionTime"] = f"2030-01-01T00:{i % 60:02d}:00Z"
        else:
            out["data"] = {"seq": str(rv)}
    return out


class _ListWatch:
    """Answers one LIST with a page decoded from bytes; never watched."""

    description = "bench/frozencache"

    def __init__(self, page: bytes) -> None:
        self.page = page

    def list(self, *, resource_version: str, limit: int | None, continue_: str | None) -> JsonDict:
        return dict(orjson.loads(self.page))

    def watch(self, **kwargs: Any) -> Any:
        raise RuntimeError("not watched")


def _informer(page: bytes, frozen: bool) -> tuple[SharedInformer, Callable[[bytes], None]]:
    informer = SharedInformer(_ListWatch(page))
    informer.add_event_handler(HandlerFuncs(add=_ignore, update=_ignore2))
    reflector = informer._reflector
    if not frozen:
        reflector._cached = None
    handle = reflector._handle

    def feed(line: bytes) -> None:
        handle(orjson.loads(line))

    return informer, feed


def _ignore(obj: JsonDict) -> None:
    pass


def _ignore2(old: JsonDict, new: JsonDict) -> None:
    pass


_REAL_FREEZE = reflector_module.freeze_in_place


def _switch(frozen: bool) -> None:
    reflector_module.freeze_in_place = _REAL_FREEZE if frozen else _off  # type: ignore[assignment]


def _off(obj: JsonDict, like: JsonDict | None = None) -> JsonDict:
    return obj


def _drain(informer: SharedInformer) -> None:
    for listener in informer._listeners:  # nothing runs the handler threads: drop notes
        listener._buffer.clear()


def _cpu(work: Callable[[], None], collect: bool = False) -> float:
    """CPU seconds of ``work``; automatic garbage collection off unless ``collect``."""
    gc.collect()
    if not collect:
        gc.disable()
    try:
        start = time.process_time()
        work()
        return time.process_time() - start
    finally:
        gc.enable()


def _measure_cpu(obj: JsonDict, n: int, frozen: bool) -> dict[str, float]:
    """Seconds of CPU per object for list, new watch events and update events."""
    _switch(frozen)
    try:
        page = orjson.dumps(
            {
                "metadata": {"resourceVersion": "1"},
                "items": [_variant(obj, i, 10, False) for i in range(n)],
            }
        )
        added = [
            orjson.dumps({"type": "ADDED", "object": _variant(obj, n + i, 20 + i, False)})
            for i in range(n)
        ]
        updates = [
            orjson.dumps({"type": "MODIFIED", "object": _variant(obj, i, 20 + n + i, True)})
            for i in range(n)
        ]
        out: dict[str, float] = {}
        informer, feed = _informer(page, frozen)
        out["list_collector_on"] = _cpu(informer._reflector._list, collect=True) / n
        del informer, feed
        informer, feed = _informer(page, frozen)
        out["list"] = _cpu(informer._reflector._list) / n
        _drain(informer)

        def events(lines: list[bytes]) -> Callable[[], None]:
            def run() -> None:
                for line in lines:
                    feed(line)

            return run

        out["watch_new"] = _cpu(events(added)) / n
        _drain(informer)
        out["watch_update"] = _cpu(events(updates)) / n  # of the listed ones
        _drain(informer)
        if len(informer.indexer) != 2 * n:
            raise RuntimeError(f"cache holds {len(informer.indexer)} objects, expected {2 * n}")
        return out
    finally:
        _switch(True)


def _freeze_alone(obj: JsonDict, n: int) -> float:
    without = dict(orjson.loads(orjson.dumps(obj)))
    without["metadata"] = {k: v for k, v in without["metadata"].items() if k != "managedFields"}
    data = orjson.dumps(without)
    decoded = [orjson.loads(data) for _ in range(n)]
    return _cpu(lambda: [freeze_in_place(o) for o in decoded]) / n


def _memory(obj: JsonDict, n: int, frozen: bool) -> dict[str, float]:
    """Bytes per cached object (tracemalloc), tracked objects per cached object, and a
    full collection's seconds with the cache alive."""
    _switch(frozen)
    try:
        page = orjson.dumps(
            {
                "metadata": {"resourceVersion": "1"},
                "items": [_variant(obj, i, 10, False) for i in range(n)],
            }
        )
        gc.collect()
        gc.freeze()  # what was alive before: out of the collections timed below
        tracked0 = len(gc.get_objects())
        tracemalloc.start()
        informer, _ = _informer(page, frozen)
        base = tracemalloc.get_traced_memory()[0]
        informer._reflector._list()
        _drain(informer)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.stop()
        tracked = len(gc.get_objects()) - tracked0
        start = time.perf_counter()
        gc.collect()
        collect = time.perf_counter() - start
        del informer
        return {"bytes": held / n, "tracked": tracked / n, "collect": collect}
    finally:
        gc.unfreeze()
        _switch(True)


def _runs(
    runs: int, both: Callable[[bool], dict[str, float]]
) -> Iterator[tuple[bool, dict[str, float]]]:
    for _ in range(runs):  # before and after interleaved: drift hits both
        for frozen in (False, True):
            yield frozen, both(frozen)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.frozencache")
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    pod, cm = _stored_objects()
    n = args.objects
    print(
        f"objects: {n}, runs: {args.runs}, Pod {len(orjson.dumps(pod))} B stored, "
        f"ConfigMap {len(orjson.dumps(cm))} B stored (managedFields included)"
    )
    for kind, obj in (("Pod", pod), ("ConfigMap", cm)):
        cpu: dict[bool, list[dict[str, float]]] = {False: [], True: []}
        for frozen, figures in _runs(args.runs, lambda f, o=obj: _measure_cpu(o, n, f)):
            cpu[frozen].append(figures)
        mem: dict[bool, list[dict[str, float]]] = {False: [], True: []}
        for frozen, figures in _runs(args.runs, lambda f, o=obj: _memory(o, n, f)):
            mem[frozen].append(figures)
        alone = statistics.median(_freeze_alone(obj, n) for _ in range(args.runs))
        print(f"\n{kind}: CPU us per object (median of {args.runs}; min-max), before -> after")
        print("  (automatic garbage collection off, as overseer run has it until its caches")
        print("  have synced; list_collector_on: on, as in any other process)")
        for what in ("list", "list_collector_on", "watch_new", "watch_update"):
            b = [r[what] * 1e6 for r in cpu[False]]
            a = [r[what] * 1e6 for r in cpu[True]]
            mb, ma = statistics.median(b), statistics.median(a)
            print(
                f"  {what:13s} {mb:7.1f} ({min(b):.1f}-{max(b):.1f}) -> {ma:7.1f} "
                f"({min(a):.1f}-{max(a):.1f})  +{ma - mb:.1f} us  x{ma / mb:.2f}"
            )
        print(f"  freeze alone  {alone * 1e6:.1f} us")
        for what, unit, scale in (
            ("bytes", "B", 1),
            ("tracked", "objects", 1),
            ("collect", "ms", 1e3),
        ):
            b = [r[what] * scale for r in mem[False]]
            a = [r[what] * scale for r in mem[True]]
            print(
                f"  {what:13s} {statistics.median(b):9.1f} ({min(b):.1f}-{max(b):.1f}) -> "
                f"{statistics.median(a):9.1f} ({min(a):.1f}-{max(a):.1f}) {unit}"
            )
    return 0


if __name__ == "__main__":
    threading.current_thread().name = "bench-frozencache"
    raise SystemExit(main())

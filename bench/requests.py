"""API requests by verb and resource, as the API server under test counts them.

What a controller costs a real API server is mostly its writes (etcd, admission, watch
fan-out), and the local server hides that: a write costs it about what a read does. So
the benchmarks report **requests per handled object by verb**, a figure that transfers.

Where the counts come from:

* the local API server (started by :mod:`bench.localserver`) records every request it
  serves (``LocalApiServer.requests()``: verb, group, resource, subresource) and hands
  the record out on a side port;
* a cluster: ``GET /metrics``, kube-apiserver's ``apiserver_request_total`` (labels
  ``verb``, ``group``, ``resource``, ``subresource``; summed over code, scope, version and
  component). It needs the ``/metrics`` non-resource URL in the kubeconfig user's RBAC;
  without it the counts are ``None`` and the figures are left out. A cluster's own
  controllers (kube-controller-manager) use the same resources, so a benchmark takes a
  reference: the same workload with no subject (:func:`reference`), subtracted.

Verbs are Kubernetes verbs (``create``, ``update``, ``patch``, ``delete``,
``deletecollection``, ``get``, ``list``, ``watch``); ``apiserver_request_total``'s
``POST``/``PUT``/... are mapped to them.

Thread-safe: a :class:`RequestCounter` may be read from any thread.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
import urllib3

Key = tuple[str, str, str, str]  # (verb, group, resource, subresource)
Counts = dict[Key, int]

WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
VERBS = (*WRITE_VERBS, "get", "list", "watch")
_METRIC_VERBS = {
    "POST": "create",
    "PUT": "update",
    "PATCH": "patch",
    "APPLY": "patch",
    "DELETE": "delete",
    "DELETECOLLECTION": "deletecollection",
    "GET": "get",
    "LIST": "list",
    "WATCH": "watch",
    "WATCHLIST": "watch",
    "CONNECT": "connect",
}
_SAMPLE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text: str) -> Counts:
    """``apiserver_request_total`` samples of a ``/metrics`` page, summed by key."""
    counts: Counts = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None:
            continue
        labels = dict(_LABEL.findall(match["labels"]))
        verb = _METRIC_VERBS.get(labels.get("verb", "").upper(), labels.get("verb", "").lower())
        key = (
            verb,
            labels.get("group", ""),
            labels.get("resource", ""),
            labels.get("subresource", ""),
        )
        counts[key] = counts.get(key, 0) + int(float(match["value"]))
    return counts


def delta(after: Mapping[Key, int], before: Mapping[Key, int]) -> Counts:
    """``after - before`` per key, keys that did not change left out."""
    out = {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)}
    return {k: n for k, n in out.items() if n}


def subtract(counts: Mapping[Key, int], reference: Mapping[Key, int]) -> Counts:
    """``counts - reference`` per key, floored at 0 (what the subject added)."""
    return {k: max(0, n - reference.get(k, 0)) for k, n in counts.items()}


def record(state: dict[str, Any], subject: str, counts: Mapping[Key, int], objects: int) -> None:
    """Keep one run's requests per object by verb and resource in ``state["requests"]``
    (the harness renders them as a table: median over the runs)."""
    table = state.setdefault("requests", {}).setdefault(subject, {})
    for (verb, _, resource, sub), n in counts.items():
        what = f"{verb} {resource}/{sub}" if sub else f"{verb} {resource}"
        table.setdefault(what, []).append(n / objects)


def summary(
    counts: Mapping[Key, int], objects: int, prefix: str, per: str = "object"
) -> dict[str, float]:
    """The fixed set of per-object figures every run reports (same keys in every run):
    writes, writes to Deployments, creates, updates, patches, deletes, reads."""

    def total(verbs: tuple[str, ...], resource: str | None = None) -> float:
        n = sum(
            c
            for (verb, _, r, _), c in counts.items()
            if verb in verbs and (resource is None or r == resource)
        )
        return n / objects

    return {
        f"{prefix}_writes_per_{per}": total(WRITE_VERBS),
        f"{prefix}_creates_per_{per}": total(("create",)),
        f"{prefix}_updates_per_{per}": total(("update",)),
        f"{prefix}_patches_per_{per}": total(("patch",)),
        f"{prefix}_deletes_per_{per}": total(("delete", "deletecollection")),
        f"{prefix}_reads_per_{per}": total(("get", "list")),
    }


def describe(counts: Mapping[Key, int], objects: int) -> str:
    """``create services 1.00, patch deployments 1.00, ...`` per object, largest first."""
    rows = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    parts = []
    for (verb, _, resource, sub), n in rows:
        what = f"{resource}/{sub}" if sub else resource
        parts.append(f"{verb} {what} {n / objects:.2f}")
    return ", ".join(parts)


class RequestCounter:
    """Reads the request counts of one API server (see the module docstring)."""

    def __init__(self, *, local_url: str | None, raw: Any) -> None:
        self._local_url = local_url
        self._raw = raw
        self._pool = urllib3.PoolManager(maxsize=2, retries=False)
        self.error: str | None = None  # why counts are not available, once known

    def snapshot(self, resources: Iterable[str] | None = None) -> Counts | None:
        """Every request counted so far (only ``resources`` if given), or None when the
        server does not let us read them."""
        wanted = set(resources) if resources is not None else None
        try:
            counts = self._read()
        except Exception as exc:  # a cluster that hides /metrics: report without counts
            self.error = f"{type(exc).__name__}: {exc}"
            return None
        if wanted is None:
            return counts
        return {k: n for k, n in counts.items() if k[2] in wanted}

    def _read(self) -> Counts:
        if self._local_url is not None:
            resp = self._pool.request("GET", self._local_url, timeout=10.0)
            rows = orjson.loads(resp.data)
            return {(r[0], r[1], r[2], r[3]): int(r[4]) for r in rows}
        text = self._raw.request("GET", "/metrics", timeout=30.0).decode()
        counts = parse_metrics(text)
        if not counts:
            raise RuntimeError("/metrics has no apiserver_request_total")
        return counts

    def close(self) -> None:
        self._pool.clear()

"""bench.requests: what a benchmark reads from kube-apiserver's /metrics, and the figures
per object it derives (the benchmarks' API cost figures rest on these)."""

from __future__ import annotations

from bench.requests import delta, parse_metrics, subtract, summary

_LINE = (
    'apiserver_request_total{{code="{code}",component="apiserver",dry_run="",group="{group}",'
    'resource="{resource}",scope="resource",subresource="{sub}",verb="{verb}",version="v1"}} {n}'
)
METRICS = "\n".join(
    [
        "# HELP apiserver_request_total [STABLE] Counter of apiserver requests",
        "# TYPE apiserver_request_total counter",
        _LINE.format(code=201, group="", resource="services", sub="", verb="POST", n="7"),
        _LINE.format(code=403, group="", resource="services", sub="", verb="POST", n="2"),
        _LINE.format(
            code=200, group="apps", resource="deployments", sub="status", verb="PUT", n="3"
        ),
        _LINE.format(
            code=200, group="apps", resource="deployments", sub="", verb="LIST", n="1e+01"
        ),
        _LINE.format(code=200, group="apps", resource="deployments", sub="", verb="APPLY", n="1"),
        'apiserver_request_duration_seconds_bucket{verb="POST",le="0.1"} 99',
    ]
)


def test_apiserver_request_total_is_summed_by_kubernetes_verb_and_resource() -> None:
    assert parse_metrics(METRICS) == {
        ("create", "", "services", ""): 9,
        ("update", "apps", "deployments", "status"): 3,
        ("list", "apps", "deployments", ""): 10,
        ("patch", "apps", "deployments", ""): 1,
    }


def test_figures_per_object_leave_out_the_reference() -> None:
    before = {("create", "", "services", ""): 5}
    after = {
        ("create", "", "services", ""): 25,
        ("create", "apps", "deployments", ""): 10,
        ("patch", "apps", "deployments", ""): 10,
        ("get", "", "services", ""): 2,
    }
    own = subtract(delta(after, before), {("create", "apps", "deployments", ""): 10})
    assert summary(own, 10, "overseer") == {
        "overseer_writes_per_object": 3.0,
        "overseer_creates_per_object": 2.0,
        "overseer_updates_per_object": 0.0,
        "overseer_patches_per_object": 1.0,
        "overseer_deletes_per_object": 0.0,
        "overseer_reads_per_object": 0.2,
    }

"""The monitoring bundle (``deploy/monitoring/``) against real tools: every alert
unit-tested with ``promtool test rules``, the scrape config checked by ``promtool check
config``, and every Grafana dashboard query run by a real Prometheus (Debian's
``prometheus`` package) that scrapes a running ``overseer run --embedded --demo`` (leader
election on, exposer sharded): a query that returns nothing, or names a metric Overseer
does not export, fails the test.

Skipped, with the reason, only where ``prometheus``/``promtool`` are not installed
(``make test`` installs them where it runs as root with apt-get).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "deploy" / "monitoring"
JOB = "overseer-test"
RATE_INTERVAL = "20s"  # $__rate_interval: several 1 s scrapes


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(
            f"{name} is not installed: `apt-get install prometheus` gives prometheus and "
            "promtool (make test installs it when run as root with apt-get)"
        )
    return path


def _run(argv: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=cwd, check=False)


# -- the files ---------------------------------------------------------------------------


def test_prometheusrule_holds_the_plain_rule_file() -> None:
    plain = yaml.safe_load((BUNDLE / "prometheus-rules.yaml").read_text())
    operator = yaml.safe_load((BUNDLE / "prometheusrule.yaml").read_text())
    assert operator["kind"] == "PrometheusRule"
    assert operator["spec"] == plain
    alerts = {r["alert"] for g in plain["groups"] for r in g["rules"]}
    assert alerts == {
        "OverseerDown",
        "OverseerNoLeader",
        "OverseerReconcileErrors",
        "OverseerQueueGrowing",
        "OverseerWritesFenced",
        "OverseerReplicaOutsideRing",
    }


def test_every_alert_has_a_promtool_unit_test() -> None:
    plain = yaml.safe_load((BUNDLE / "prometheus-rules.yaml").read_text())
    alerts = {r["alert"] for g in plain["groups"] for r in g["rules"]}
    tests = yaml.safe_load((BUNDLE / "tests" / "alerts_test.yaml").read_text())
    fired = {
        case["alertname"]
        for t in tests["tests"]
        for case in t.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    quiet = {
        case["alertname"]
        for t in tests["tests"]
        for case in t.get("alert_rule_test", [])
        if not case.get("exp_alerts")
    }
    assert alerts <= fired, f"alerts never shown firing: {alerts - fired}"
    assert alerts <= quiet, f"alerts never shown quiet: {alerts - quiet}"


def test_servicemonitor_selects_the_metrics_service() -> None:
    monitor = yaml.safe_load((BUNDLE / "servicemonitor.yaml").read_text())
    service = yaml.safe_load((ROOT / "deploy" / "base" / "service.yaml").read_text())
    labels = service["metadata"]["labels"]
    spec = monitor["spec"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    assert labels[spec["jobLabel"]] == "overseer"  # the job the alerts select
    ports = {p["name"] for p in service["spec"]["ports"]}
    assert {e["port"] for e in spec["endpoints"]} <= ports
    assert all(e["scheme"] == "https" for e in spec["endpoints"])


def test_alert_rules_pass_promtool() -> None:
    promtool = _tool("promtool")
    checked = _run([promtool, "check", "rules", str(BUNDLE / "prometheus-rules.yaml")])
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = _run([promtool, "test", "rules", "tests/alerts_test.yaml"], cwd=BUNDLE)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_scrape_config_passes_promtool(tmp_path: Path) -> None:
    promtool = _tool("promtool")
    # the ServiceAccount token Prometheus reads in a pod: promtool wants the file to exist
    token = tmp_path / "token"
    token.write_text("x")
    config = (BUNDLE / "prometheus.yml").read_text()
    assert "/var/run/secrets/kubernetes.io/serviceaccount/token" in config
    config = config.replace("/var/run/secrets/kubernetes.io/serviceaccount/token", str(token))
    shutil.copy(BUNDLE / "prometheus-rules.yaml", tmp_path / "prometheus-rules.yaml")
    (tmp_path / "prometheus.yml").write_text(config)
    checked = _run([promtool, "check", "config", "prometheus.yml"], cwd=tmp_path)
    output = checked.stdout + checked.stderr
    if "field kubernetes_sd_configs not found" in output:
        # Debian builds Prometheus without Kubernetes service discovery: check the rest
        # of the file with the discovery replaced by a static target.
        doc = yaml.safe_load(config)
        for job in doc["scrape_configs"]:
            job.pop("kubernetes_sd_configs")
            job["static_configs"] = [{"targets": ["overseer-metrics:8080"]}]
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(doc))
        checked = _run([promtool, "check", "config", "prometheus.yml"], cwd=tmp_path)
        output = checked.stdout + checked.stderr
    assert checked.returncode == 0, output


# -- the dashboard against a real Prometheus ----------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.load(answer)


def _dashboard_queries() -> list[tuple[str, str]]:
    dashboard = json.loads((BUNDLE / "grafana-dashboard.json").read_text())
    queries = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            queries.append((panel["title"], target["expr"]))
    return queries


_FUNCTIONS = {
    "abs", "absent", "avg", "by", "changes", "count", "delta", "deriv", "group_left",
    "group_right", "histogram_quantile", "ignoring", "increase", "irate", "label_values",
    "max", "min", "on", "or", "and", "unless", "rate", "sum", "topk", "without", "bool",
    "offset", "time", "vector", "clamp_min", "max_over_time", "min_over_time",
}  # fmt: skip


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (selectors, not functions or labels)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        word = match.group(0)
        rest = text[match.end() :].lstrip()
        if word in _FUNCTIONS or rest.startswith("("):
            continue
        names.add(word)
    return names


def test_metric_names_of_an_expression() -> None:
    expr = (
        "histogram_quantile(0.99, sum by (name, le) "
        '(rate(workqueue_queue_duration_seconds_bucket{job="$job"}[5m])))'
        " / on (name) group_left max(workqueue_depth) > 2"
    )
    assert metric_names(expr) == {"workqueue_queue_duration_seconds_bucket", "workqueue_depth"}


def _exported(metrics_text: str) -> set[str]:
    return {
        line.split("{", 1)[0].split(" ", 1)[0]
        for line in metrics_text.splitlines()
        if line and not line.startswith("#")
    }


@pytest.fixture(scope="module")
def overseer_embedded(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``overseer run --embedded --demo``: leader election on, the exposer sharded. One
    process for the module: the tests only read its /metrics (it runs its own API server,
    so nothing a test does can reach another)."""
    tmp_path = tmp_path_factory.mktemp("overseer-embedded")
    port = _free_port()
    config = tmp_path / "overseer.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "leaderElection": {"leaseDuration": 4.0, "renewDeadline": 3.0, "retryPeriod": 1.0},
                "sharding": {"leaseDuration": 4.0, "renewDeadline": 3.0, "retryPeriod": 1.0},
                "controllers": {"exposer": {"sharded": True}},
            }
        )
    )
    exe = Path(sys.executable).with_name("overseer")
    log = (tmp_path / "overseer.log").open("w")
    proc = subprocess.Popen(
        [
            str(exe),
            "run",
            "--embedded",
            "--demo",
            "--config",
            str(config),
            "--metrics-bind-address",
            f"127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "POD_NAME": "overseer-test-0"},
    )
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url, timeout=2) as answer:
                    if b"shard_ring_member" in answer.read():
                        break
            except OSError:
                pass
            output = (tmp_path / "overseer.log").read_text()[-3000:]
            assert proc.poll() is None, f"overseer exited {proc.returncode}: {output}"
            assert time.monotonic() < deadline, f"overseer's /metrics did not come up: {output}"
            time.sleep(0.2)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


def _query_failures(api: str, queries: list[tuple[str, str]], exported: set[str]) -> list[str]:
    """The dashboard queries that name a metric not exported, or that Prometheus answers
    with nothing."""
    failures = []
    for title, expr in queries:
        unknown = metric_names(expr) - exported
        if unknown:
            failures.append(f"{title}: {expr}: not exported: {sorted(unknown)}")
            continue
        query = expr.replace("$job", JOB).replace("$__rate_interval", RATE_INTERVAL)
        answer = _get_json(f"{api}/query?" + urllib.parse.urlencode({"query": query}))
        if answer["status"] != "success" or not answer["data"]["result"]:
            failures.append(f"{title}: {query}: returned nothing ({answer})")
    return failures


def test_overseer_exports_no_created_series(
    overseer_embedded: tuple[str, subprocess.Popen[str]],
) -> None:
    """Go's client_golang exports no ``*_created`` series; prometheus_client does by
    default (one more series per counter and histogram child): ``overseer run`` turns
    them off, as kube components' pages have none."""
    url, _ = overseer_embedded
    with urllib.request.urlopen(url, timeout=5) as answer:
        text = answer.read().decode()
    created = sorted(n for n in _exported(text) if n.endswith("_created"))
    assert created == []
    assert "rest_client_requests_total" in _exported(text)


def test_every_dashboard_query_against_a_real_prometheus(
    overseer_embedded: tuple[str, subprocess.Popen[str]], tmp_path: Path
) -> None:
    prometheus = _tool("prometheus")
    metrics_url, overseer = overseer_embedded
    target = urllib.parse.urlsplit(metrics_url).netloc
    shutil.copy(BUNDLE / "prometheus-rules.yaml", tmp_path / "prometheus-rules.yaml")
    (tmp_path / "prometheus.yml").write_text(
        yaml.safe_dump(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": ["prometheus-rules.yaml"],
                "scrape_configs": [{"job_name": JOB, "static_configs": [{"targets": [target]}]}],
            }
        )
    )
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api/v1"
    with tempfile.TemporaryFile("w+") as log:
        server = subprocess.Popen(
            [
                prometheus,
                f"--config.file={tmp_path / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    targets = _get_json(f"{api}/targets")["data"]["activeTargets"]
                    if targets and targets[0]["health"] == "up":
                        break
                except OSError:
                    pass
                assert server.poll() is None, f"prometheus exited {server.returncode}"
                assert time.monotonic() < deadline, "prometheus never scraped overseer"
                time.sleep(0.3)
            queries = _dashboard_queries()
            assert len(queries) >= 20
            # rate() over a 20 s window answers once it holds two 1 s scrapes of a series:
            # ask every query again after each scrape until all answer, 30 s at most (a
            # query that never does is reported then)
            deadline = time.monotonic() + 30
            while True:
                with urllib.request.urlopen(metrics_url, timeout=5) as answer:
                    exported = _exported(answer.read().decode())
                failures = _query_failures(api, queries, exported)
                if not failures or time.monotonic() > deadline:
                    break
                time.sleep(1.0)
            rules = yaml.safe_load((BUNDLE / "prometheus-rules.yaml").read_text())
            for group in rules["groups"]:
                for rule in group["rules"]:
                    unknown = metric_names(rule["expr"]) - exported - {"up"}
                    if unknown:
                        failures.append(f"alert {rule['alert']}: not exported: {sorted(unknown)}")
            loaded = _get_json(f"{api}/rules")["data"]["groups"]
            assert {r["name"] for g in loaded for r in g["rules"]} >= {"OverseerNoLeader"}
            health = {r["name"]: r["health"] for g in loaded for r in g["rules"]}
            assert failures == [], "\n".join(failures)
            assert overseer.poll() is None
            assert all(h in ("ok", "unknown") for h in health.values()), health
        finally:
            server.terminate()
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(10)

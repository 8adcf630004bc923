"""z-pages of a running manager (the local API server, or a real cluster with
``OVERSEER_TEST_KUBECONFIG``): ``/statusz`` shows the role, each controller's workers,
queue depth and last error; its HTML view renders in a real headless Chromium; ``/flagz``
shows the effective configuration with secrets redacted."""

from __future__ import annotations

import html.parser
import os
import shutil
import subprocess
import tempfile
import urllib.request
from dataclasses import dataclass

import pytest

from manager import KubeClient, Manager, PluginContext, Request, Result, builtin
from manager.testing import eventually, run_plugin

CONFIGMAPS = builtin("v1", "configmaps")


@dataclass(frozen=True, kw_only=True, slots=True)
class PickyConfig:
    refuse: str = "bad"  # the ConfigMap name whose reconcile fails
    access_token: str = "hunter2"  # a secret: /flagz must not show it


class Picky:
    def __init__(self, refuse: str) -> None:
        self.refuse = refuse

    def reconcile(self, request: Request) -> Result:
        if request.name == self.refuse:
            raise RuntimeError(f"refusing {request.name} <on purpose>")
        return Result()


class PickyPlugin:
    config_class = PickyConfig
    rbac_rules = [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}
    ]

    def setup(self, mgr: Manager, ctx: PluginContext[PickyConfig]) -> None:
        ctx.controller(Picky(ctx.config.refuse)).for_(CONFIGMAPS).complete()


def _get(url: str, accept: str = "*/*") -> tuple[str, str, dict[str, str]]:
    request = urllib.request.Request(url, headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=5) as answer:
        return answer.read().decode(), answer.headers["Content-Type"], dict(answer.headers)


def _base(metrics_url: str | None) -> str:
    assert metrics_url is not None
    return metrics_url.removesuffix("/metrics")


def test_statusz_and_flagz(kubeconfig_path: str, kube_client: KubeClient, namespace: str) -> None:
    kube_client.create(CONFIGMAPS, {"metadata": {"name": "bad"}}, namespace)
    with run_plugin(
        PickyPlugin, kubeconfig_path, {"workers": 3}, watch_namespace=namespace, metrics=True
    ) as running:
        base = _base(running.metrics_url)

        def failed_once() -> str:
            text, ctype, _ = _get(f"{base}/statusz")
            assert ctype == "text/plain; charset=utf-8"
            assert "refusing bad <on purpose>" in text
            return text

        text = eventually(failed_once)
        lines = text.splitlines()
        assert lines[0] == "overseer statusz"
        assert lines[1].startswith("Warning: This endpoint is not meant to be machine parseable")
        assert "Role: leader (no election)" in lines
        assert "Binary version: 0.1.0" in lines
        row = next(line for line in lines if line.strip().startswith("picky "))
        name, mode, running_, workers, _active, queue, *error = row.split()
        # with leader election off, the controller runs here without an election
        assert (name, mode, running_, workers) == ("picky", "no-election", "yes", "3")
        assert queue.isdigit()
        assert f"{namespace}/bad: RuntimeError: refusing bad <on purpose>" in " ".join(error)

        flagz, ctype, _ = _get(f"{base}/flagz")
        assert ctype == "text/plain; charset=utf-8"
        values = dict(line.split("=", 1) for line in flagz.splitlines()[3:])
        assert values["watchNamespace"] == namespace
        assert values["controllers.picky.workers"] == "3"
        assert values["controllers.picky.refuse"] == "bad"
        assert values["controllers.picky.accessToken"] == "[REDACTED]"
        assert "hunter2" not in flagz


class _Cells(html.parser.HTMLParser):
    """The text of every element with an id, and the cells of controller rows."""

    def __init__(self) -> None:
        super().__init__()
        self.by_id: dict[str, str] = {}
        self.rows: dict[str, list[str]] = {}
        self._id: str | None = None
        self._row: str | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self._id = found["id"]
            self.by_id[self._id or ""] = ""
        if tag == "tr" and found.get("data-controller"):
            self._row = found["data-controller"]
            self.rows[self._row or ""] = []
        if tag == "td" and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._row is not None and self._cell is not None:
            self.rows[self._row].append("".join(self._cell))
            self._cell = None
        if tag == "tr":
            self._row = None
        self._id = None

    def handle_data(self, data: str) -> None:
        if self._id is not None:
            self.by_id[self._id] += data
        if self._cell is not None:
            self._cell.append(data)


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def test_statusz_html_in_headless_chromium(
    kubeconfig_path: str, kube_client: KubeClient, namespace: str
) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip(
            "chromium is not installed: `apt-get install chromium` (make test does it as root)"
        )
    kube_client.create(CONFIGMAPS, {"metadata": {"name": "bad"}}, namespace)
    with run_plugin(
        PickyPlugin, kubeconfig_path, {"workers": 2}, watch_namespace=namespace, metrics=True
    ) as running:
        base = _base(running.metrics_url)
        eventually(lambda: "refusing bad" in _get(f"{base}/statusz")[0])
        _, ctype, headers = _get(f"{base}/statusz", "text/html,*/*;q=0.8")
        assert ctype == "text/html; charset=utf-8"
        assert headers["Content-Security-Policy"].startswith("default-src 'none'")
        with tempfile.TemporaryDirectory(prefix="overseer-chromium-") as profile:
            # The browser asks with its own Accept header (text/html first): the page it
            # renders is what a person sees. --dump-dom prints the DOM after rendering.
            argv = [
                browser,
                "--headless",
                "--disable-gpu",
                "--no-sandbox",  # root in CI containers has no user namespace sandbox
                "--no-first-run",
                "--disable-dev-shm-usage",
                f"--user-data-dir={profile}",
                "--virtual-time-budget=2000",
                "--dump-dom",
                f"{base}/statusz",
            ]
            done = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                timeout=90,
                env={**os.environ, "HOME": profile},
                check=False,
            )
        assert done.returncode == 0, done.stderr[-2000:]
        dom = done.stdout
        assert "<title>overseer statusz</title>" in dom, dom[:2000]
        page = _Cells()
        page.feed(dom)
        assert page.by_id["role"] == "leader (no election)"
        assert page.by_id["binary-version"] == "0.1.0"
        cells = page.rows["picky"]
        assert cells[:4] == ["picky", "no-election", "yes", "2"]
        assert cells[5].isdigit()
        assert f"{namespace}/bad: RuntimeError: refusing bad <on purpose>" in cells[6]

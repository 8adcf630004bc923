"""The ``overseer`` command as an operator meets it: real ``python -m manager`` processes.

Exit codes (2 for bad configuration, flags or a plugin that cannot load; 0 for a clean
stop), what the messages say, that bad input starts nothing, that an unreachable API
server is retried without tracebacks, the sample third-party plugin reconciling, and
``run --embedded --demo`` printing its table and stopping cleanly on Ctrl-C.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.processes import wait_for
from manager.client import KubeClient
from manager.plugins import discover
from manager.resources import builtin

ROOT = Path(__file__).resolve().parent.parent
CONFIGMAPS = builtin("v1", "configmaps")
BUILTINS = ("exposer", "podport")


def overseer(
    *args: str, extra_path: Path | None = None, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m manager ARGS`` to completion."""
    return subprocess.run(
        [sys.executable, "-m", "manager", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env(extra_path),
        cwd=ROOT,
        check=False,
    )


def _env(extra_path: Path | None = None) -> dict[str, str]:
    paths = [str(extra_path)] if extra_path is not None else []
    return {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, str(ROOT)])}


class Process:
    """A long-running ``python -m manager`` with its output collected by a thread."""

    def __init__(
        self,
        *args: str,
        extra_path: Path | None = None,
        cwd: Path = ROOT,
        env: dict[str, str] | None = None,
    ) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "manager", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env if env is not None else _env(extra_path),
            cwd=cwd,
        )
        self._lines: list[str] = []
        self._reader = threading.Thread(target=self._read, name="test/output-reader")
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self._lines)

    def wait_for_output(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self._reader.join(2)
                if text in self.output:
                    return
                raise AssertionError(f"no {text!r} in the output:\n{self.output}")
            time.sleep(0.05)

    def stop(self, sig: int, timeout: float = 15) -> int:
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(5)
            self._finish()
        return rc

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        self._finish()

    def _finish(self) -> None:
        self._reader.join(5)
        if self.proc.stdout is not None and not self._reader.is_alive():
            self.proc.stdout.close()


@pytest.fixture
def processes() -> Iterator[list[Process]]:
    started: list[Process] = []
    yield started
    for p in started:
        p.close()


def _kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    return path


def _write(path: Path, doc: Any) -> Path:
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    return path


def _broken_plugin(root: Path) -> Path:
    """A distribution ``overseer-broken`` whose ``broken`` controller fails to import."""
    dist = root / "overseer_broken-0.1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: overseer-broken\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text(
        "[overseer.controllers]\nbroken = overseer_broken:BrokenPlugin\n"
    )
    (root / "overseer_broken.py").write_text("import overseer_dependency_that_is_missing\n")
    return root


# -- --help and simple commands -----------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["run"],
        ["config"],
        ["config", "defaults"],
        ["config", "validate"],
        ["plugins"],
        ["rbac"],
        ["webhooks"],
        ["version"],
        ["apiserver"],
    ],
    ids=lambda c: " ".join(c) or "overseer",
)
def test_help_on_every_command(command: list[str]) -> None:
    result = overseer(*command, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: overseer"), result.stdout
    assert result.stderr == ""


@pytest.mark.parametrize("command", [["version"], ["--version"]], ids=" ".join)
def test_version(command: list[str]) -> None:
    result = overseer(*command)
    assert result.returncode == 0
    assert result.stdout.strip() == "overseer 0.1.0"


def test_unknown_flag_is_exit_2() -> None:
    result = overseer("run", "--no-such-flag")
    assert result.returncode == 2
    assert "unrecognized arguments: --no-such-flag" in result.stderr


def _plugin_rows(stdout: str) -> dict[str, list[str]]:
    rows = [line.split(None, 4) for line in stdout.splitlines()]
    assert rows[0][:4] == ["NAME", "DISTRIBUTION", "VERSION", "ENABLED"]
    return {r[0]: r[1:] for r in rows[1:]}


def _installed() -> list[str]:
    """The controllers installed where the tests run (more than ours, maybe)."""
    return [info.name for info in discover()]


def test_plugins_lists_the_sample_plugin_with_distribution_and_version(tmp_path: Path) -> None:
    result = overseer("plugins")
    assert result.returncode == 0, result.stderr
    rows = _plugin_rows(result.stdout)
    assert list(rows) == _installed()
    assert rows["sample"] == ["overseer-sample-plugin", "0.3.0", "yes", "ok"]
    for name in BUILTINS:
        assert rows[name] == ["kube-overseer", "0.1.0", "yes", "ok"]

    config = _write(tmp_path / "c.yaml", {"controllers": {"sample": {"enabled": False}}})
    rows = _plugin_rows(overseer("plugins", "--config", str(config)).stdout)
    assert rows["sample"][2] == "no"


@pytest.mark.parametrize(
    "path",
    sorted(p.relative_to(ROOT) for p in (ROOT / "config").rglob("*.yaml")),
    ids=str,
)
def test_every_shipped_config_file_validates(path: Path) -> None:
    result = overseer("config", "validate", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{path}: valid\n"
    assert result.stderr == ""


def test_shipped_config_files_exist() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in (ROOT / "config").rglob("*.yaml")}
    assert {
        "config/overseer.yaml",
        "config/examples/minimal.yaml",
        "config/examples/production.yaml",
    } <= names


# -- bad input: exit 2, every error with its path, nothing started -----------------------


class _Listener:
    """A TCP port that records whether anything connected (a stand-in API server)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.setblocking(False)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def connections(self) -> int:
        count = 0
        while True:
            try:
                conn, _ = self.sock.accept()
            except BlockingIOError:
                return count
            conn.close()
            count += 1

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[_Listener]:
    lst = _Listener()
    yield lst
    lst.close()


def test_several_errors_all_listed_exit_2_and_nothing_started(
    tmp_path: Path, listener: _Listener
) -> None:
    config = _write(
        tmp_path / "bad.yaml",
        """\
leaderElection:
  leaseDuraton: 15
client:
  qps: 0
log:
  format: xml
controllers:
  sample:
    workers: four
    greting: hi
""",
    )
    kubeconfig = _kubeconfig(tmp_path / "kubeconfig", listener.url)
    result = overseer(
        "run",
        "--config",
        str(config),
        "--kubeconfig",
        str(kubeconfig),
        "--metrics-bind-address",
        "127.0.0.1:0",
    )
    assert result.returncode == 2, result.stderr
    err = result.stderr
    assert err.startswith("overseer: invalid configuration:\n")
    assert (
        "  leaderElection.leaseDuraton: unknown key, did you mean leaseDuration? "
        "(known keys: enabled, leaseDuration,"
    ) in err
    assert "  client.qps: expected number >= 0.1, got 0" in err
    assert "  log.format: expected one of 'text', 'json', got \"xml\"" in err
    assert '  controllers.sample.workers: expected integer >= 1 and <= 256, got "four"' in err
    assert (
        "  controllers.sample.greting: unknown key, did you mean greeting? "
        "(known keys: greeting, label)"
    ) in err
    assert "Traceback" not in err
    assert "starting" not in result.stdout + err
    assert listener.connections() == 0, "the API server was contacted"


def test_invalid_yaml_names_line_and_column(tmp_path: Path) -> None:
    config = _write(tmp_path / "broken.yaml", "client:\n  qps: 1\n bad: [\n")
    for command in (["run", "--config", str(config)], ["config", "validate", str(config)]):
        result = overseer(*command)
        assert result.returncode == 2
        assert f"{config}:3:" in result.stderr
        assert "not valid YAML" in result.stderr
        assert "Traceback" not in result.stderr


def test_missing_config_file(tmp_path: Path) -> None:
    result = overseer("config", "validate", str(tmp_path / "nope.yaml"))
    assert result.returncode == 2
    assert f"{tmp_path / 'nope.yaml'}: cannot read: No such file or directory" in result.stderr


def test_unknown_controller_lists_the_installed_ones(tmp_path: Path) -> None:
    config = _write(tmp_path / "c.yaml", {"controllers": {"exposr": {"workers": 2}}})
    result = overseer("config", "validate", str(config))
    assert result.returncode == 2
    installed = ", ".join(_installed())
    assert (
        f"controllers.exposr: unknown controller, did you mean exposer? (installed: {installed})"
    ) in result.stderr


def test_enabled_plugin_that_cannot_import_is_exit_2(tmp_path: Path, listener: _Listener) -> None:
    """An installed plugin is enabled unless the file disables it, whether or not it
    loads (issue 22, item 6): one that cannot load stops the start, named with its
    distribution and the error, whether the file mentions it or not."""
    extra = _broken_plugin(tmp_path / "site")
    enabling = _write(tmp_path / "c.yaml", {"controllers": {"broken": {"workers": 2}}})
    silent = _write(tmp_path / "silent.yaml", "{}\n")
    kubeconfig = _kubeconfig(tmp_path / "kubeconfig", listener.url)
    for config, said in ((enabling, "enabled"), (silent, "installed, so enabled,")):
        for command in (
            ["config", "validate", str(config)],
            ["run", "--config", str(config), "--kubeconfig", str(kubeconfig)],
        ):
            result = overseer(*command, extra_path=extra)
            assert result.returncode == 2, result.stderr
            assert f"controllers.broken: {said} but cannot load" in result.stderr
            assert "overseer-broken 0.1.0" in result.stderr
            assert "ModuleNotFoundError: No module named 'overseer_dependency_that_is_missing'" in (
                result.stderr
            )
            assert "(disable it with controllers.broken.enabled: false)" in result.stderr
            assert "Traceback" not in result.stderr
    assert listener.connections() == 0

    rows = _plugin_rows(overseer("plugins", extra_path=extra).stdout)
    assert rows["broken"] == [
        "overseer-broken",
        "0.1.0",
        "yes",
        "broken: ModuleNotFoundError: No module named 'overseer_dependency_that_is_missing'",
    ]
    # `plugins` says so plainly instead of failing; disabled, it is off and the file valid
    disabled = _write(tmp_path / "off.yaml", {"controllers": {"broken": {"enabled": False}}})
    result = overseer("plugins", "--config", str(disabled), extra_path=extra)
    assert result.returncode == 0, result.stderr
    assert _plugin_rows(result.stdout)["broken"][2:] == ["no", rows["broken"][3]]
    result = overseer("config", "validate", str(disabled), extra_path=extra)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("problem", ["missing", "not-a-kubeconfig", "directory"])
def test_unreadable_kubeconfig_is_exit_2_naming_the_path(tmp_path: Path, problem: str) -> None:
    path = tmp_path / "kubeconfig"
    if problem == "not-a-kubeconfig":
        path.write_text("- just\n- a list\n")
    elif problem == "directory":
        path.mkdir()
    result = overseer("run", "--kubeconfig", str(path), "--metrics-bind-address", "0")
    assert result.returncode == 2, result.stderr
    assert f"kubeconfig {path}: " in result.stderr
    assert "Traceback" not in result.stderr
    assert "starting" not in result.stderr


@pytest.mark.parametrize(
    ("flag", "server", "setting"),
    [
        ("--metrics-bind-address", "metrics", "metricsBindAddress"),
        ("--health-probe-bind-address", "probes", "healthProbeBindAddress"),
    ],
)
def test_address_in_use_is_a_clear_exit_1_naming_address_and_setting(
    listener: _Listener, kubeconfig_path: str, flag: str, server: str, setting: str
) -> None:
    port = listener.url.rsplit(":", 1)[1]
    other = ({"--metrics-bind-address", "--health-probe-bind-address"} - {flag}).pop()
    result = overseer(
        "run",
        "--kubeconfig",
        kubeconfig_path,
        "--no-leader-elect",
        flag,
        f"127.0.0.1:{port}",
        other,
        "127.0.0.1:0",
    )
    assert result.returncode == 1, result.stderr
    assert (
        f"overseer: {server}: cannot listen on 127.0.0.1:{port}: Address already in use "
        f"(set by {setting} or {flag})"
    ) in result.stderr
    assert "Traceback" not in result.stderr


# -- running ----------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_unreachable_api_server_is_retried_and_sigterm_exits_0(
    tmp_path: Path, processes: list[Process]
) -> None:
    kubeconfig = _kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{_closed_port()}")
    p = Process(
        "run",
        "--kubeconfig",
        str(kubeconfig),
        "--no-leader-elect",
        "--metrics-bind-address",
        "0",
        "--health-probe-bind-address",
        "0",
    )
    processes.append(p)
    p.wait_for_output("retrying API request", timeout=10)
    time.sleep(1.0)  # a few retries; the process keeps running
    assert p.proc.poll() is None, p.output
    rc = p.stop(signal.SIGTERM, timeout=10)
    assert rc == 0, p.output
    assert "cannot reach http://127.0.0.1:" in p.output
    assert "signal received, stopping" in p.output
    assert "Traceback" not in p.output


@pytest.fixture
def client(kubeconfig_path: str) -> Iterator[KubeClient]:
    with KubeClient.from_kubeconfig(kubeconfig_path) as c:
        yield c


@pytest.mark.slow
def test_sample_plugin_reconciles_in_overseer_run_and_a_broken_disabled_plugin_only_warns(
    tmp_path: Path,
    processes: list[Process],
    client: KubeClient,
    namespace: str,
    kubeconfig_path: str,
) -> None:
    extra = _broken_plugin(tmp_path / "site")
    config = _write(
        tmp_path / "overseer.yaml",
        {
            "leaderElection": {
                "namespace": namespace,
                "leaseName": f"smoke-{uuid.uuid4().hex[:6]}",
                "leaseDuration": 3.0,
                "renewDeadline": 2.0,
                "retryPeriod": 0.5,
            },
            "metricsBindAddress": "127.0.0.1:0",
            "healthProbeBindAddress": "127.0.0.1:0",
            "watchNamespace": namespace,
            "log": {"format": "json"},
            "controllers": {
                # whatever else is installed here stays off too
                **{name: {"enabled": False} for name in _installed()},
                "broken": {"enabled": False},
                "sample": {"greeting": "Ahoy", "label": "smoke.example.com/greeted"},
            },
        },
    )
    p = Process("run", "--config", str(config), "--kubeconfig", kubeconfig_path, extra_path=extra)
    processes.append(p)
    client.create(
        CONFIGMAPS,
        {"metadata": {"name": "hello", "annotations": {"sample.overseer.io/greet": "true"}}},
        namespace,
    )

    def greeted() -> bool:
        ann = client.get(CONFIGMAPS, "hello", namespace)["metadata"].get("annotations") or {}
        return ann.get("sample.overseer.io/greeting") == "Ahoy, hello!"

    try:
        wait_for(greeted, 20, "the sample plugin's greeting", step=0.1)
    except AssertionError:
        raise AssertionError(p.output) from None
    labels = client.get(CONFIGMAPS, "hello", namespace)["metadata"]["labels"]
    assert labels == {"smoke.example.com/greeted": "true"}
    assert p.stop(signal.SIGTERM) == 0, p.output
    assert '"msg":"controller plugin skipped"' in p.output
    assert "overseer-broken 0.1.0" in p.output
    assert '"controllers":"sample"' in p.output
    assert "Traceback" not in p.output


@pytest.mark.slow
def test_embedded_demo_prints_its_table_and_stops_cleanly_on_ctrl_c(
    processes: list[Process],
) -> None:
    # no bind flags: --embedded listens on 127.0.0.1 and free ports, and says where
    p = Process("run", "--embedded", "--demo")
    processes.append(p)
    p.wait_for_output("press Ctrl-C to stop", timeout=40)
    rc = p.stop(signal.SIGINT)
    out = p.output
    assert rc == 0, out
    assert "Traceback" not in out
    assert "kubeconfig: " in out
    metrics = re.search(r"^metrics: http://127\.0\.0\.1:(\d+)/metrics$", out, re.M)
    probes = re.search(r"^probes: http://127\.0\.0\.1:(\d+)/healthz, /readyz$", out, re.M)
    assert metrics and probes, out
    assert {metrics.group(1), probes.group(1)}.isdisjoint({"8080", "8081"})
    table = out[out.index("What the controllers made:") :]
    # exposer: a Service, an Ingress and a URL for each annotated Deployment
    assert "http://web.demo.example.com/" in table
    assert "http://api.demo.example.com/" in table
    # podport: an address, a MAC and a LogicalPort for each Pod
    for pod in ("web-0", "web-1", "api-0", "api-1"):
        row = next(line for line in table.splitlines() if line.strip().startswith(pod))
        assert "10.16.0." in row, row
    assert "not everything converged" not in out
    assert "stopped cleanly" in out


# -- the development loop: --plugin ------------------------------------------------------

GREETER = '''\
"""A controller that is not installed: overseer run --plugin greeter.py:GreeterPlugin."""

from dataclasses import dataclass

from manager import Manager, PluginContext, Request, Result, builtin

CONFIGMAPS = builtin("v1", "configmaps")


@dataclass(frozen=True, kw_only=True, slots=True)
class GreeterConfig:
    greeting: str = "Hello"

    def validate(self) -> list[str]:
        return [] if self.greeting.strip() else ["must say something"]


class Greeter:
    def __init__(self, mgr: Manager, config: GreeterConfig) -> None:
        self.client = mgr.client
        self.lister = mgr.lister(CONFIGMAPS)
        self.greeting = config.greeting

    def reconcile(self, request: Request) -> Result:
        obj = self.lister.get(request.name, request.namespace)
        if obj is None or (obj.get("data") or {}).get("greeting"):
            return Result()
        data = {"greeting": f"{self.greeting}, {request.name}!"}
        self.client.patch(CONFIGMAPS, request.name, {"data": data}, namespace=request.namespace)
        return Result()


class GreeterPlugin:
    config_class = GreeterConfig
    rbac_rules = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list", "patch"]}]

    def setup(self, mgr: Manager, ctx: PluginContext[GreeterConfig]) -> None:
        if ctx.config.greeting == "boom":
            raise ValueError("a greeting cannot be boom")
        ctx.controller(Greeter(mgr, ctx.config)).for_(CONFIGMAPS).complete()
'''


@pytest.fixture
def greeter(tmp_path: Path) -> Path:
    """A plugin file in a directory of its own: not installed, not on sys.path."""
    path = tmp_path / "dev" / "greeter.py"
    path.parent.mkdir()
    path.write_text(GREETER)
    return path


def test_plugin_file_is_configured_like_an_installed_one(greeter: Path, tmp_path: Path) -> None:
    spec = f"{greeter}:GreeterPlugin"
    # its name: the class, lower case, without "Plugin"
    result = overseer("plugins", "--plugin", spec)
    assert result.returncode == 0, result.stderr
    assert _plugin_rows(result.stdout)["greeter"] == ["(--plugin)", "-", "yes", "ok"]
    defaults = overseer("config", "defaults", "--plugin", spec).stdout
    assert "  greeter:\n    # run this controller\n    enabled: true\n" in defaults
    assert "    greeting: Hello\n" in defaults
    # the same strict loader, the same paths
    config = _write(
        tmp_path / "c.yaml",
        {"controllers": {"greeter": {"greting": "Hi", "workers": 0}, "gretter": {}}},
    )
    result = overseer("config", "validate", str(config), "--plugin", spec)
    assert result.returncode == 2
    assert "  controllers.greeter.workers: expected integer >= 1 and <= 256, got 0" in (
        result.stderr
    )
    assert "  controllers.greeter.greting: unknown key, did you mean greeting?" in result.stderr
    assert "  controllers.gretter: unknown controller, did you mean greeter?" in result.stderr
    config = _write(tmp_path / "c.yaml", {"controllers": {"greeter": {"greeting": " "}}})
    result = overseer("config", "validate", str(config), "--plugin", spec)
    assert "  controllers.greeter: must say something\n" in result.stderr
    # NAME= chooses the section; and the rules it declares are in `overseer rbac`
    config = _write(tmp_path / "c.yaml", {"controllers": {"hi": {"greeting": "Hi"}}})
    result = overseer("config", "validate", str(config), "--plugin", f"hi={spec}")
    assert result.returncode == 0, result.stderr
    rbac = overseer("rbac", "--config", str(config), "--plugin", f"hi={spec}")
    assert rbac.returncode == 0, rbac.stderr
    rule = re.search(
        r'^  # (.*)\n  - apiGroups: \[""\]\n    resources: \["configmaps"\]', rbac.stdout, re.M
    )
    assert rule and "hi" in rule.group(1).split(", "), rbac.stdout


WIDGETS = """
from manager import Admission, Conversion, Manager, PluginContext, Rule, Spoke, ValidatingWebhook

RULES = [Rule(operations=["CREATE"], resources=["widgets"], api_groups=["example.com"],
              api_versions=["v1"])]


class WidgetsPlugin:
    def setup(self, mgr: Manager, ctx: PluginContext[None]) -> None:
        ctx.webhook(ValidatingWebhook(name="check.widgets.example.com", rules=RULES,
                                      handler=lambda req: Admission.allow()))
        ctx.conversion(Conversion(crd="widgets.example.com", hub="v2",
                                  spokes={"v1": Spoke(to_hub=dict, from_hub=dict)}))
"""


def test_webhooks_prints_the_configurations_and_rbac_what_managed_certificates_need(
    tmp_path: Path,
) -> None:
    plugin = tmp_path / "widgets.py"
    plugin.write_text(WIDGETS)
    spec = f"{plugin}:WidgetsPlugin"
    managed = _write(
        tmp_path / "managed.yaml",
        {"webhooks": {"certificates": "managed", "namespace": "shop"}},
    )
    result = overseer("webhooks", "--config", str(managed), "--plugin", spec)
    assert result.returncode == 0, result.stderr
    assert "caBundle: filled in by the leader" in result.stdout
    assert "`overseer webhooks --conversions` prints their patches" in result.stdout
    (config,) = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert config["kind"] == "ValidatingWebhookConfiguration"
    assert config["metadata"]["name"] == "overseer"
    (hook,) = config["webhooks"]
    assert hook["clientConfig"]["service"] == {
        "name": "overseer-webhook",
        "namespace": "shop",
        "port": 443,
        "path": "/validate/check.widgets.example.com",
    }
    conversions = overseer("webhooks", "--conversions", "--config", str(managed), "--plugin", spec)
    assert conversions.returncode == 0, conversions.stderr
    (crd,) = [d for d in yaml.safe_load_all(conversions.stdout) if d]
    assert crd["metadata"]["name"] == "widgets.example.com"
    assert crd["spec"]["conversion"]["strategy"] == "Webhook"
    # the rules managed certificates need are in `overseer rbac`, by name
    rbac = overseer("rbac", "--config", str(managed), "--plugin", spec)
    assert rbac.returncode == 0, rbac.stderr
    objs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(rbac.stdout) if d}
    role = objs[("Role", "overseer-webhook-certificates")]
    assert role["metadata"]["namespace"] == "shop"
    assert role["rules"][0]["resourceNames"] == ["overseer-webhook-tls"]
    cluster = objs[("ClusterRole", "overseer-webhook-certificates")]
    assert [r["resourceNames"] for r in cluster["rules"]] == [["overseer"], ["widgets.example.com"]]
    # cert-manager instead: the injector's annotation; with managed certificates, refused
    plain = _write(tmp_path / "plain.yaml", {"webhooks": {"certDir": "/tls"}})
    injected = overseer(
        "webhooks", "--config", str(plain), "--plugin", spec, "--inject-ca-from", "shop/tls"
    )
    assert injected.returncode == 0, injected.stderr
    (config,) = [d for d in yaml.safe_load_all(injected.stdout) if d]
    assert config["metadata"]["annotations"] == {"cert-manager.io/inject-ca-from": "shop/tls"}
    refused = overseer(
        "webhooks", "--config", str(managed), "--plugin", spec, "--inject-ca-from", "shop/tls"
    )
    assert refused.returncode == 2
    assert "--inject-ca-from: the leader fills caBundle" in refused.stderr
    rbac = overseer("rbac", "--config", str(plain), "--plugin", spec)
    assert "webhook-certificates" not in rbac.stdout


def test_plugin_named_like_an_installed_one_is_refused(greeter: Path) -> None:
    result = overseer("config", "defaults", "--plugin", f"sample={greeter}:GreeterPlugin")
    assert result.returncode == 2
    assert (
        f"overseer: --plugin sample={greeter}:GreeterPlugin: 'sample' is the name of an "
        "installed controller (overseer-sample-plugin 0.3.0, overseer_sample_plugin:SamplePlugin)"
    ) in result.stderr
    # the installed object itself under its own name is no clash
    result = overseer("plugins", "--plugin", "sample=overseer_sample_plugin:SamplePlugin")
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("greeter.py", "expected [NAME=]path/to/file.py:Class or [NAME=]module:Class"),
        ("nowhere/greeter.py:GreeterPlugin", "no such file: "),
        ("{greeter}:Missing", "AttributeError: module 'greeter' has no attribute 'Missing'"),
        ("no_such_module_here:OnePlugin", "ModuleNotFoundError: No module named 'no_such_module_"),
        ("{greeter}:Plugin", "'' is not a controller name"),
    ],
)
def test_bad_plugin_spec_is_exit_2(greeter: Path, spec: str, message: str) -> None:
    result = overseer("config", "defaults", "--plugin", spec.format(greeter=greeter))
    assert result.returncode == 2
    assert message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_setup_that_raises_is_exit_2_with_the_controllers_name(
    greeter: Path, tmp_path: Path, listener: _Listener
) -> None:
    config = _write(tmp_path / "c.yaml", {"controllers": {"greeter": {"greeting": "boom"}}})
    kubeconfig = _kubeconfig(tmp_path / "kubeconfig", listener.url)
    result = overseer(
        "run",
        "--config",
        str(config),
        "--kubeconfig",
        str(kubeconfig),
        "--plugin",
        f"{greeter}:GreeterPlugin",
        "--metrics-bind-address",
        "0",
        "--health-probe-bind-address",
        "0",
    )
    assert result.returncode == 2, result.stderr
    assert (
        "overseer: controllers.greeter: setup failed: ValueError: a greeting cannot be boom"
    ) in result.stderr
    assert "Traceback" not in result.stderr
    assert "starting" not in result.stderr


@pytest.mark.slow
def test_embedded_run_with_a_plugin_file(
    greeter: Path, tmp_path: Path, processes: list[Process]
) -> None:
    config = _write(
        tmp_path / "c.yaml",
        {
            "controllers": {
                **{name: {"enabled": False} for name in _installed()},
                "greeter": {"greeting": "Hej"},
            }
        },
    )
    p = Process(
        "run", "--embedded", "--config", str(config), "--plugin", f"{greeter}:GreeterPlugin"
    )
    processes.append(p)
    p.wait_for_output("probes: http://127.0.0.1:", timeout=40)
    found = re.search(r"^kubeconfig: (\S+)", p.output, re.M)
    assert found, p.output
    with KubeClient.from_kubeconfig(found.group(1)) as c:
        c.create(CONFIGMAPS, {"metadata": {"name": "world"}}, "default")

        def greeted() -> bool:
            data = c.get(CONFIGMAPS, "world", "default").get("data") or {}
            return data.get("greeting") == "Hej, world!"

        try:
            wait_for(greeted, 20, "the --plugin controller's greeting", step=0.1)
        except AssertionError:
            raise AssertionError(p.output) from None
    assert p.stop(signal.SIGINT) == 0, p.output
    assert "Traceback" not in p.output


def test_embedded_demo_with_its_address_in_use_prints_no_table(listener: _Listener) -> None:
    port = listener.url.rsplit(":", 1)[1]
    result = overseer(
        "run", "--embedded", "--demo", "--metrics-bind-address", f"127.0.0.1:{port}", timeout=60
    )
    assert result.returncode == 1, result.stderr
    assert f"overseer: metrics: cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "What the controllers made" not in result.stdout
    assert "Traceback" not in result.stdout + result.stderr


def test_a_closed_pipe_ends_the_output_quietly() -> None:
    """Issue 22, item 7: ``overseer plugins | head -1`` ended in a BrokenPipeError
    traceback (when head had exited before the writes): a reader that has gone is not
    an error of ours. Deterministic here: the pipe's read end is closed before the
    command writes anything."""
    read, write = os.pipe()
    os.close(read)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "manager", "plugins"],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=30,
            env=_env(),
            cwd=ROOT,
            check=False,
        )
    finally:
        os.close(write)
    assert result.stderr == ""
    assert result.returncode == 141  # as a command that SIGPIPE ended (coreutils' head)


def test_run_embedded_writes_its_kubeconfig_where_asked(tmp_path: Path) -> None:
    """Issue 22, item 7: ``run --embedded`` had no ``--kubeconfig-out``."""
    out = tmp_path / "k" / "kubeconfig"
    p = Process("run", "--embedded", "--kubeconfig-out", str(out))
    try:
        p.wait_for_output(f"kubeconfig: {out}", 30)
        doc = yaml.safe_load(out.read_text())
        assert doc["clusters"][0]["cluster"]["server"].startswith("http://127.0.0.1:")
        with KubeClient.from_kubeconfig(str(out)) as client:
            assert client.get(builtin("v1", "namespaces"), "default")
        assert p.stop(signal.SIGTERM) == 0
    finally:
        p.close()
    result = overseer("run", "--kubeconfig-out", str(tmp_path / "x"))
    assert result.returncode == 2
    assert "--kubeconfig-out needs --embedded" in result.stderr


def test_make_run_runs_the_builtin_controllers_only() -> None:
    """Issue 22, item 7: the development venv's test plugin (``sample``) ran in ``make
    run``: its configuration turns it off, and everything else installed stays on."""
    makefile = (ROOT / "Makefile").read_text()
    config = re.search(r"^RUN_CONFIG := (\S+)$", makefile, re.M)
    assert config is not None
    recipe = makefile.split("\nrun: ", 1)[1].split("\n\n", 1)[0]
    assert "overseer run --embedded --demo --config $(RUN_CONFIG)" in recipe
    result = overseer("plugins", "--config", config.group(1))
    assert result.returncode == 0, result.stderr
    rows = _plugin_rows(result.stdout)
    for name in BUILTINS:
        assert rows[name][2] == "yes"
    if "sample" in rows:
        assert rows["sample"][2] == "no"
    assert overseer("config", "validate", config.group(1)).returncode == 0


NAMESPACED_TEAMS = '''\
"""A controller whose primary resource is cluster-scoped (Namespaces)."""

from manager import Manager, PluginContext, Request, Result, builtin

NAMESPACES = builtin("v1", "namespaces")


class Teams:
    def reconcile(self, request: Request) -> Result:
        return Result()


class TeamsPlugin:
    def setup(self, mgr: Manager, ctx: PluginContext[None]) -> None:
        ctx.controller(Teams()).for_(NAMESPACES).complete()
'''


def test_config_validate_runs_the_checks_run_makes_before_it_connects(
    greeter: Path, tmp_path: Path
) -> None:
    """Issue 32, item 4: ``config validate`` passed what ``overseer run`` refused at
    start-up: a plugin whose setup refuses its configuration, and sharding by namespace
    for a controller whose primary resource is cluster-scoped. Now validate runs every
    check ``run`` runs short of connecting (bind addresses, each controller's setup
    against a manager that never connects), and says the same."""
    teams = tmp_path / "dev" / "teams.py"
    teams.write_text(NAMESPACED_TEAMS)
    plugins = ["--plugin", f"{greeter}:GreeterPlugin", "--plugin", f"{teams}:TeamsPlugin"]
    sharded = _write(
        tmp_path / "sharded.yaml",
        {"sharding": {"shardBy": "namespace"}, "controllers": {"teams": {"sharded": True}}},
    )
    result = overseer("config", "validate", str(sharded), *plugins)
    assert result.returncode == 2, result.stdout
    assert "controllers.teams: setup failed" in result.stderr
    assert "sharding.shardBy is namespace" in result.stderr
    assert "cluster-scoped" in result.stderr
    boom = _write(tmp_path / "boom.yaml", {"controllers": {"greeter": {"greeting": "boom"}}})
    result = overseer("config", "validate", str(boom), *plugins)
    assert result.returncode == 2, result.stdout
    assert "controllers.greeter: setup failed: ValueError: a greeting cannot be boom" in (
        result.stderr
    )
    bind = _write(tmp_path / "bind.yaml", {"metricsBindAddress": "nowhere:port"})
    result = overseer("config", "validate", str(bind), *plugins)
    assert result.returncode == 2, result.stdout
    assert "metricsBindAddress" in result.stderr
    fine = _write(tmp_path / "fine.yaml", {"controllers": {"teams": {"sharded": True}}})
    result = overseer("config", "validate", str(fine), *plugins)
    assert (result.returncode, result.stdout) == (0, f"{fine}: valid\n"), result.stderr

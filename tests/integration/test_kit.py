"""The test kit against an API server (the local one, or a real cluster with
``OVERSEER_TEST_KUBECONFIG``): ``run_plugin`` / ``run_manager`` start a manager that
reconciles, serve metrics on loopback when asked, stop cleanly, and surface a manager
that failed; the pytest plugin's fixtures work in a test suite of their own."""

from __future__ import annotations

import os
import textwrap
import threading
import urllib.request
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

from manager import (
    Conflict,
    JsonDict,
    KubeClient,
    Manager,
    PluginContext,
    Request,
    Resource,
    Result,
    builtin,
)
from manager.errors import PluginSetupError
from manager.testing import ManagerFailed, eventually, run_manager, run_plugin

CONFIGMAPS = builtin("v1", "configmaps")
LEASES = builtin("coordination.k8s.io/v1", "leases")
# a resource no API server serves: its informer never syncs
WIDGETS = Resource(
    group="kit.example.com", version="v1", plural="widgets", kind="Widget", namespaced=True
)


@dataclass(frozen=True, kw_only=True, slots=True)
class StampConfig:
    value: str = "stamped"
    fail_setup: bool = False
    watch_missing: bool = False


class Stamper:
    """Writes data.stamp into every ConfigMap it sees."""

    def __init__(self, mgr: Manager, config: StampConfig) -> None:
        self.client = mgr.client
        self.lister = mgr.lister(CONFIGMAPS)
        self.value = config.value

    def reconcile(self, request: Request) -> Result:
        obj = self.lister.get(request.name, request.namespace)
        if obj is None or (obj.get("data") or {}).get("stamp") == self.value:
            return Result()
        patch: JsonDict = {"data": {"stamp": self.value}}
        self.client.patch(CONFIGMAPS, request.name, patch, namespace=request.namespace)
        return Result()


class StampPlugin:
    config_class = StampConfig
    rbac_rules = [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch", "patch"]}
    ]

    def setup(self, mgr: Manager, ctx: PluginContext[StampConfig]) -> None:
        if ctx.config.fail_setup:
            raise RuntimeError("asked to fail")
        builder = ctx.controller(Stamper(mgr, ctx.config)).for_(CONFIGMAPS)
        if ctx.config.watch_missing:
            builder.watches(WIDGETS, lambda obj: [])
        builder.complete()


def stamp(client: KubeClient, namespace: str, name: str) -> str | None:
    return (client.get(CONFIGMAPS, name, namespace).get("data") or {}).get("stamp")


def test_run_plugin_reconciles_and_serves_metrics_on_loopback(
    kubeconfig_path: str, kube_client: KubeClient, namespace: str
) -> None:
    kube_client.create(CONFIGMAPS, {"metadata": {"name": "before"}}, namespace)
    with run_plugin(
        StampPlugin,
        kubeconfig_path,
        {"value": "v1", "workers": 2},
        watch_namespace=namespace,
        metrics=True,
    ) as running:
        assert running.controllers["stamp"][0].workers == 2
        assert running.config.watch_namespace == namespace
        # the caches had synced: the object made before the start is reconciled
        eventually(lambda: stamp(kube_client, namespace, "before") == "v1")
        kube_client.create(CONFIGMAPS, {"metadata": {"name": "after"}}, namespace)
        eventually(lambda: stamp(kube_client, namespace, "after") == "v1")
        assert running.metrics_url is not None
        assert running.metrics_url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(running.metrics_url, timeout=5) as answer:
            body = answer.read().decode()
        assert 'controller_runtime_reconcile_total{controller="stamp",result="success"}' in body
        assert running.probes_url is None
        manager_threads = [t for t in threading.enumerate() if t.name.startswith("informer/")]
        assert manager_threads
    # stopped and joined: none of the manager's threads is left
    assert not [t for t in manager_threads if t.is_alive()]


def test_setup_that_raises_names_the_controller(kubeconfig_path: str) -> None:
    with pytest.raises(PluginSetupError) as info:  # noqa: SIM117
        with run_plugin(StampPlugin, kubeconfig_path, {"failSetup": True}):
            raise AssertionError("not reached")
    assert str(info.value) == "controllers.stamp: setup failed: RuntimeError: asked to fail"


def test_caches_that_never_sync_fail_the_start(kubeconfig_path: str, namespace: str) -> None:
    """A watched resource the server does not serve: the manager gives up after
    cacheSyncTimeout, and the kit says so instead of hanging or passing."""
    with pytest.raises(ManagerFailed) as info:  # noqa: SIM117
        with run_plugin(
            StampPlugin,
            kubeconfig_path,
            {"watchMissing": True},
            config={"cacheSyncTimeout": 1.0},
            watch_namespace=namespace,
        ):
            raise AssertionError("not reached")
    assert str(info.value) == "the manager stopped by itself with 1 (see the log)"


def test_a_manager_that_raises_fails_the_start_with_the_error(
    kubeconfig_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_run(self: Manager, stop: threading.Event) -> int:
        raise OSError("cannot listen on 127.0.0.1:8080: Address already in use")

    monkeypatch.setattr(Manager, "run", broken_run)
    with pytest.raises(ManagerFailed) as info:  # noqa: SIM117
        with run_plugin(StampPlugin, kubeconfig_path):
            raise AssertionError("not reached")
    assert str(info.value) == (
        "the manager failed: OSError: cannot listen on 127.0.0.1:8080: Address already in use"
    )
    assert isinstance(info.value.__cause__, OSError)


def test_a_deployed_files_addresses_do_not_bind(kubeconfig_path: str) -> None:
    """The kit decides: off, or loopback and a free port (never ":8080" from a file)."""
    config = {"metricsBindAddress": ":8080", "healthProbeBindAddress": ":8081"}
    with run_plugin(StampPlugin, kubeconfig_path, config=config, probes=True) as running:
        assert running.metrics_url is None
        assert running.probes_url is not None
        assert running.probes_url.startswith("http://127.0.0.1:")
        assert not running.probes_url.endswith(":8081")


@pytest.fixture
def lease_name() -> str:
    return f"kit-{uuid.uuid4().hex[:8]}"


def test_a_manager_that_stops_during_the_test_fails_it(
    kubeconfig_path: str, kube_client: KubeClient, namespace: str, lease_name: str
) -> None:
    """Another replica takes the Lease: the manager stops leading and returns 1 (the CLI
    would exit). The test's own failure (a check that waits for the impossible) is not
    what is reported: the manager's is."""
    config: dict[str, Any] = {
        "leaderElection": {
            "enabled": True,
            "namespace": namespace,
            "leaseName": lease_name,
            "leaseDuration": 2.0,
            "renewDeadline": 1.5,
            "retryPeriod": 0.2,
        }
    }
    with pytest.raises(ManagerFailed) as info:  # noqa: SIM117
        with run_plugin(
            StampPlugin, kubeconfig_path, config=config, watch_namespace=namespace
        ) as run:
            assert run.manager.is_leader()

            def take_the_lease() -> bool:
                lease = kube_client.get(LEASES, lease_name, namespace)
                lease["spec"]["holderIdentity"] = "another-replica"
                lease["spec"]["leaseDurationSeconds"] = 3600
                try:
                    kube_client.replace(LEASES, lease, namespace)
                except Conflict:
                    return False  # renewed meanwhile: read it again
                return True

            eventually(take_the_lease)
            eventually(lambda: False, timeout=6.0, what="something that never happens")
    assert str(info.value) == "the manager stopped by itself with 1 (see the log)"
    assert isinstance(info.value.__context__, AssertionError)
    assert "something that never happens" in str(info.value.__context__)


def test_run_manager_runs_several_plugins_from_one_file(
    kubeconfig_path: str, kube_client: KubeClient, namespace: str
) -> None:
    config = textwrap.dedent(
        """
        controllers:
          first: {value: one}
          second: {enabled: false, value: two}
        """
    )
    plugins = {"first": StampPlugin, "second": StampPlugin()}
    with run_manager(kubeconfig_path, plugins, config, watch_namespace=namespace) as running:
        assert running.controllers["second"][0].enabled is False
        kube_client.create(CONFIGMAPS, {"metadata": {"name": "x"}}, namespace)
        eventually(lambda: stamp(kube_client, namespace, "x") == "one")


# -- the pytest plugin, as a plugin author's test suite uses it ---------------------------

AUTHOR_PLUGIN = """
from dataclasses import dataclass

from manager import Manager, PluginContext, Request, Result, builtin

CONFIGMAPS = builtin("v1", "configmaps")


@dataclass(frozen=True, kw_only=True, slots=True)
class StampConfig:
    value: str = "stamped"


class Stamper:
    def __init__(self, mgr: Manager, value: str) -> None:
        self.client, self.lister, self.value = mgr.client, mgr.lister(CONFIGMAPS), value

    def reconcile(self, request: Request) -> Result:
        obj = self.lister.get(request.name, request.namespace)
        if obj is not None and (obj.get("data") or {}).get("stamp") != self.value:
            patch = {"data": {"stamp": self.value}}
            self.client.patch(CONFIGMAPS, request.name, patch, namespace=request.namespace)
        return Result()


class StampPlugin:
    config_class = StampConfig
    rbac_rules = [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch", "patch"]}
    ]

    def setup(self, mgr: Manager, ctx: PluginContext[StampConfig]) -> None:
        ctx.controller(Stamper(mgr, ctx.config.value)).for_(CONFIGMAPS).complete()
"""

AUTHOR_TESTS = """
import pytest

from manager import KubeClient, builtin
from manager.testing import eventually, run_plugin
from stamper import CONFIGMAPS, StampPlugin


def test_stamps(kubeconfig_path: str, kube_client: KubeClient, namespace: str) -> None:
    with run_plugin(StampPlugin, kubeconfig_path, {"value": "ok"}, watch_namespace=namespace):
        kube_client.create(CONFIGMAPS, {"metadata": {"name": "a"}}, namespace)
        eventually(
            lambda: (kube_client.get(CONFIGMAPS, "a", namespace).get("data") or {}).get("stamp")
            == "ok"
        )


def test_namespace_has_its_default_service_account(kube_client, namespace) -> None:
    assert kube_client.get(builtin("v1", "serviceaccounts"), "default", namespace)


@pytest.mark.local_only
def test_local_knobs(local_server) -> None:
    assert local_server.faults is not None
"""


@pytest.fixture
def author_suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(stamper=AUTHOR_PLUGIN, test_author=AUTHOR_TESTS)
    return pytester


@pytest.mark.slow
def test_the_fixtures_in_a_plugin_authors_suite(author_suite: pytest.Pytester) -> None:
    result = author_suite.runpytest_subprocess("-p", "no:cacheprovider")
    expected = "the local API server (in process)"
    if os.environ.get("OVERSEER_TEST_KUBECONFIG"):  # this very suite runs on a cluster
        expected = f"the cluster of {os.environ['OVERSEER_TEST_KUBECONFIG']}"
        result.assert_outcomes(passed=2, skipped=1)
    else:
        result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([f"overseer: API server: {expected}"])


@pytest.mark.slow
def test_the_fixtures_against_a_real_cluster(
    author_suite: pytest.Pytester, kubeconfig_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``OVERSEER_TEST_KUBECONFIG`` (here: this session's API server, standing in for a
    real cluster): the fixtures use it, ``local_only`` tests are skipped with why."""
    monkeypatch.setenv("OVERSEER_TEST_KUBECONFIG", kubeconfig_path)
    result = author_suite.runpytest_subprocess("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(
        [
            f"overseer: API server: the cluster of {kubeconfig_path}",
            "*local_only: needs the local API server's knobs; OVERSEER_TEST_KUBECONFIG is set*",
        ]
    )


LEAKY_TESTS = """
from manager import builtin

CONFIGMAPS = builtin("v1", "configmaps")


def test_leaves_a_finalizer(kube_client, namespace):
    held = {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}
    kube_client.create(CONFIGMAPS, held, namespace)
    gc_only = {"metadata": {"name": "gc", "finalizers": ["foregroundDeletion"]}}
    kube_client.create(CONFIGMAPS, gc_only, namespace)
    kube_client.delete(CONFIGMAPS, "gc", namespace)
"""


@pytest.mark.slow
def test_a_test_that_leaves_a_finalizer_behind_fails(
    pytester: pytest.Pytester, kubeconfig_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a real cluster its namespace would never finish terminating: the ``namespace``
    fixture names what holds it, removes the finalizer, and fails the test (this
    session's server standing in for a cluster, as the fixture does the same on both)."""
    monkeypatch.setenv("OVERSEER_TEST_KUBECONFIG", kubeconfig_path)
    pytester.makepyfile(test_leaky=LEAKY_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    out = result.stdout.str()
    assert "the test left objects with finalizers in its namespace ovs-test-" in out
    assert "configmaps/held: ['example.com/hold']" in out
    assert "configmaps/gc" not in result.stdout.str()  # the garbage collector's own


PAPERCUT_PLUGIN = """
from dataclasses import dataclass

from manager import Manager, PluginContext, Request, Result, builtin

CONFIGMAPS = builtin("v1", "configmaps")


@dataclass(frozen=True, kw_only=True, slots=True)
class FailConfig:
    pass


class Failing:
    def reconcile(self, request: Request) -> Result:
        raise RuntimeError("this one fails")


class FailPlugin:
    config_class = FailConfig
    rbac_rules = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list", "watch"]}]

    def setup(self, mgr: Manager, ctx: PluginContext[FailConfig]) -> None:
        ctx.controller(Failing()).for_(CONFIGMAPS).complete()
"""

PAPERCUT_TESTS = """
import pytest

from manager.testing import eventually, run_plugin
from overseer_fail import CONFIGMAPS, FailPlugin  # not installed: found in the rootdir


def test_failure_logs_name_the_object(kubeconfig_path, kube_client, namespace, caplog):
    with run_plugin(FailPlugin, kubeconfig_path, watch_namespace=namespace):
        kube_client.create(CONFIGMAPS, {"metadata": {"name": "bad"}}, namespace)
        wanted = f"controller=fail namespace={namespace} name=bad"
        eventually(lambda: any(
            "reconcile failed" in line and wanted in line for line in caplog.text.splitlines()
        ))
"""


@pytest.mark.slow
def test_a_plugin_in_the_rootdir_is_found_and_its_failure_logs_name_the_object(
    pytester: pytest.Pytester,
) -> None:
    """Issue 22, item 7: a plugin's tests (in tests/) import it from the project root
    without installing it; pytest's captured logs name the object a reconcile failed
    for."""
    pytester.mkpydir("overseer_fail").joinpath("__init__.py").write_text(PAPERCUT_PLUGIN)
    tests = pytester.mkdir("tests")
    (tests / "test_fail.py").write_text(PAPERCUT_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "tests")
    result.assert_outcomes(passed=1)


class _Quiet:
    def reconcile(self, request: Request) -> Result:
        return Result()


class QuietPlugin:
    """Watches ConfigMaps and does nothing: a manager without the built-in controllers."""

    rbac_rules = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list", "watch"]}]

    def setup(self, mgr: Manager, ctx: PluginContext[None]) -> None:
        ctx.controller(_Quiet()).for_(builtin("ConfigMap")).complete()


def test_metrics_of_controllers_not_set_up_are_not_exported(
    kubeconfig_path: str, namespace: str
) -> None:
    """The built-in controllers' modules are imported (as ``overseer run`` imports every
    installed plugin), but neither runs: none of their series or families is exported."""
    import controllers.exposer
    import controllers.podport

    assert controllers.exposer.EXPOSED_DEPLOYMENTS is not None
    with run_plugin(QuietPlugin, kubeconfig_path, metrics=True, watch_namespace=namespace) as run:
        assert run.metrics_url is not None
        with urllib.request.urlopen(run.metrics_url, timeout=5) as answer:
            text = answer.read().decode()
    assert "controller_runtime_reconcile_total" in text  # the page is the manager's
    assert "overseer_exposer_" not in text
    assert "overseer_podport_" not in text

"""A controller of a custom resource whose CRD is not installed yet waits for it
(``PluginContext.when_served``): the replica is not ready and says which resource is
missing, nothing crashes, and once the CRD is installed the controller is wired and
reconciles. Custom resources are found by discovery by the names kubectl takes. On the
local API server and on a real cluster alike."""

from __future__ import annotations

import contextlib
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from manager import (
    JsonDict,
    KubeClient,
    Manager,
    NotFound,
    PluginContext,
    Request,
    Resource,
    Result,
    UnknownResource,
    builtin,
)
from manager.testing import eventually, run_plugin

CRDS = builtin("CustomResourceDefinition")
CONFIGMAPS = builtin("ConfigMap")


def _crd(group: str) -> JsonDict:
    schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gizmos.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {
                "plural": "gizmos",
                "singular": "gizmo",
                "kind": "Gizmo",
                "shortNames": ["gz"],
            },
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


@pytest.fixture
def group(kube_client: KubeClient, namespace: str) -> Iterator[str]:
    """A group of this test's own, its CRD deleted afterwards (if the test made it)."""
    name = f"{namespace}.overseer-test.example.com"
    yield name
    with contextlib.suppress(NotFound):
        kube_client.delete(CRDS, f"gizmos.{name}")


class GizmoReconciler:
    """Tells each Gizmo's name in a ConfigMap ``gizmo-<name>``."""

    def __init__(self, mgr: Manager, gizmos: Resource) -> None:
        self.client = mgr.client
        self.gizmos = mgr.lister(gizmos)

    def reconcile(self, request: Request) -> Result:
        if self.gizmos.get(request.name, request.namespace) is not None:
            body = {"metadata": {"name": f"gizmo-{request.name}"}, "data": {"seen": "yes"}}
            self.client.create(CONFIGMAPS, body, request.namespace)
        return Result()


class GizmoPlugin:
    """Wires its controller once ``gizmos.<group>`` is served; the group is the section's."""

    group = ""

    def rbac_rules(self, config: object) -> list[JsonDict]:
        return [
            {"apiGroups": [self.group], "resources": ["gizmos"], "verbs": ["list", "watch"]},
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
        ]

    def setup(self, mgr: Manager, ctx: PluginContext[None]) -> None:
        def wire(gizmos: Resource) -> None:
            ctx.controller(GizmoReconciler(mgr, gizmos)).for_(gizmos).complete()

        ctx.when_served(f"gizmos.{self.group}", wire)


def _served(client: KubeClient, name: str) -> Resource | None:
    try:
        return client.resource(name)
    except UnknownResource:
        return None


def _readyz(probes: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"{probes}/readyz?verbose", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_a_controller_waits_for_its_crd_then_runs(
    kubeconfig_path: str, kube_client: KubeClient, namespace: str, group: str
) -> None:
    plugin = GizmoPlugin()
    plugin.group = group
    with pytest.raises(UnknownResource, match=r"CustomResourceDefinition installed\?"):
        kube_client.resource(f"gizmos.{group}")
    with run_plugin(plugin, kubeconfig_path, probes=True, watch_namespace=namespace) as running:
        probes = running.probes_url
        assert probes is not None
        # until the waiter's first discovery answers, readiness says only what it waits for
        status, text = eventually(
            lambda: None if "waiting for " in (answer := _readyz(probes))[1] else answer
        )
        assert status == 500
        assert f"no resource 'gizmos.{group}' is served" in text

        kube_client.create(CRDS, _crd(group))
        gizmos = Resource(group, "v1", "gizmos", "Gizmo", namespaced=True)
        eventually(lambda: _served(kube_client, f"gizmos.{group}"), timeout=30)
        for name in (f"Gizmo.{group}", f"gizmo.{group}", f"{group}/v1/Gizmo", f"gz.{group}"):
            assert kube_client.resource(name) == gizmos  # by any name kubectl takes
        eventually(lambda: _readyz(running.probes_url or "")[0] == 200, timeout=30)
        kube_client.create(gizmos, {"metadata": {"name": "one"}}, namespace)
        made = eventually(lambda: kube_client.get(CONFIGMAPS, "gizmo-one", namespace))
        assert made["data"] == {"seen": "yes"}


class BrokenWiringPlugin:
    """Its wiring raises once the resource is served (here a built-in: at once)."""

    rbac_rules: list[JsonDict] = []

    def setup(self, mgr: Manager, ctx: PluginContext[None]) -> None:
        def wire(configmaps: Resource) -> None:
            raise ValueError("a bad selector in the wiring")

        ctx.when_served("configmaps", wire)


def test_a_wiring_that_raises_fails_the_tests_wait_at_once(
    kubeconfig_path: str, kube_client: KubeClient, namespace: str
) -> None:
    import time

    with run_plugin(BrokenWiringPlugin, kubeconfig_path, watch_namespace=namespace):
        started = time.monotonic()
        with pytest.raises(AssertionError, match="wiring failed: ValueError: a bad selector"):
            eventually(lambda: False, timeout=20)
        assert time.monotonic() - started < 10  # at once, not at the timeout

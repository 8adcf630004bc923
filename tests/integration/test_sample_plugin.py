"""The sample third-party plugin (``tests/plugins/overseer-sample-plugin``, installed by
``make test``): discovered through its entry point, configured from its YAML section,
enabled and disabled by ``enabled:``, and reconciling against the API server in-process.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from e2e.processes import wait_for
from manager.config import parse
from manager.kube import KubeClient
from manager.manager import Manager, ManagerOptions
from manager.plugins import PluginContext, discover, load
from manager.resources import builtin

CONFIGMAPS = builtin("v1", "configmaps")


@pytest.fixture
def client(kubeconfig_path: str) -> Iterator[KubeClient]:
    with KubeClient.from_kubeconfig(kubeconfig_path) as c:
        yield c


def _sample() -> Any:
    infos = {info.name: info for info in discover()}
    assert "sample" in infos, "run `make venv`: it installs tests/plugins/overseer-sample-plugin"
    return infos["sample"]


def test_discovered_through_its_entry_point() -> None:
    info = _sample()
    assert (info.distribution, info.version, info.value) == (
        "overseer-sample-plugin",
        "0.3.0",
        "overseer_sample_plugin:SamplePlugin",
    )
    plugin = load(info)
    assert plugin.config_class.__name__ == "SampleConfig"


def _parse(text: str) -> dict[str, Any]:
    schemas = {"sample": load(_sample()).config_class}
    _, controllers = parse(yaml.safe_load(text), schemas)
    return controllers


def test_configured_from_its_section_and_enabled_or_not() -> None:
    settings, own = _parse("controllers: {sample: {greeting: Hi, label: x.io/hi, workers: 3}}")[
        "sample"
    ]
    assert (own.greeting, own.label, settings.workers, settings.enabled) == (
        "Hi",
        "x.io/hi",
        3,
        True,
    )
    settings, own = _parse("controllers: {sample: {enabled: false}}")["sample"]
    assert settings.enabled is False
    assert own.greeting == "Hello"  # the plugin's default
    settings, _ = _parse("{}")["sample"]
    assert settings.enabled is True  # an installed controller runs unless disabled


def _run(mgr: Manager) -> tuple[threading.Event, threading.Thread]:
    stop = threading.Event()
    thread = threading.Thread(target=mgr.run, args=(stop,), name="test/manager")
    thread.start()
    return stop, thread


def test_reconciles_against_the_api_server(
    client: KubeClient, namespace: str, kubeconfig_path: str
) -> None:
    settings, own = _parse(
        "controllers: {sample: {greeting: Salut, label: test.io/greeted, workers: 2}}"
    )["sample"]
    plugin = load(_sample())
    with KubeClient.from_kubeconfig(kubeconfig_path) as mgr_client:
        mgr = Manager(
            mgr_client,
            ManagerOptions(
                leader_election=False,
                metrics_bind_address="0",
                health_probe_bind_address="0",
                namespace=namespace,
                graceful_shutdown_timeout=5.0,
                identity=f"test-{uuid.uuid4().hex[:6]}",
            ),
        )
        plugin.setup(mgr, PluginContext("sample", own, settings, mgr))
        stop, thread = _run(mgr)
        try:
            client.create(
                CONFIGMAPS,
                {"metadata": {"name": "a", "annotations": {"sample.overseer.io/greet": "true"}}},
                namespace,
            )
            client.create(CONFIGMAPS, {"metadata": {"name": "b"}}, namespace)

            def meta(name: str) -> dict[str, Any]:
                return dict(client.get(CONFIGMAPS, name, namespace)["metadata"])

            wait_for(
                lambda: (
                    (meta("a").get("annotations") or {}).get("sample.overseer.io/greeting")
                    == "Salut, a!"
                ),
                10,
                "configmap a greeted",
            )
            assert meta("a")["labels"] == {"test.io/greeted": "true"}
            # annotating b later wakes the controller too (an update event)
            client.patch(
                CONFIGMAPS,
                "b",
                {"metadata": {"annotations": {"sample.overseer.io/greet": "true"}}},
                namespace=namespace,
            )
            wait_for(
                lambda: (meta("b").get("labels") or {}).get("test.io/greeted") == "true",
                10,
                "configmap b greeted",
            )
        finally:
            stop.set()
            thread.join(15)
            assert mgr.join(10)
        assert not thread.is_alive()

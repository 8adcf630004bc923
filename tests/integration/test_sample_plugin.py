"""The sample third-party plugin (``tests/plugins/overseer-sample-plugin``, installed by
``make venv``): discovered through its entry point, configured from its YAML section,
enabled and disabled by ``enabled:``, and reconciling against the API server in-process,
tested with the kit a plugin author uses."""

from __future__ import annotations

from typing import Any

from manager import JsonDict, KubeClient, builtin
from manager.plugins import ControllerPlugin, PluginInfo, discover, load
from manager.testing import eventually, run_plugin, validate_section

CONFIGMAPS = builtin("v1", "configmaps")


def _sample() -> PluginInfo:
    infos = {info.name: info for info in discover()}
    assert "sample" in infos, "run `make venv`: it installs tests/plugins/overseer-sample-plugin"
    return infos["sample"]


def _plugin() -> ControllerPlugin:
    return load(_sample())


def test_discovered_through_its_entry_point() -> None:
    info = _sample()
    assert (info.distribution, info.version, info.value) == (
        "overseer-sample-plugin",
        "0.3.0",
        "overseer_sample_plugin:SamplePlugin",
    )
    assert _plugin().config_class.__name__ == "SampleConfig"


def test_configured_from_its_section_and_enabled_or_not() -> None:
    settings, own = validate_section(_plugin(), "{greeting: Hi, label: x.io/hi, workers: 3}")
    assert (own.greeting, own.label, settings.workers, settings.enabled) == (
        "Hi",
        "x.io/hi",
        3,
        True,
    )
    settings, own = validate_section(_plugin(), {"enabled": False})
    assert settings.enabled is False
    assert own.greeting == "Hello"  # the plugin's default
    settings, _ = validate_section(_plugin())
    assert settings.enabled is True  # an installed controller runs unless disabled


def test_reconciles_against_the_api_server(
    kube_client: KubeClient, namespace: str, kubeconfig_path: str
) -> None:
    section = {"greeting": "Salut", "label": "test.io/greeted", "workers": 2}
    with run_plugin(_plugin(), kubeconfig_path, section, name="sample", watch_namespace=namespace):
        greet = {"sample.overseer.io/greet": "true"}
        kube_client.create(CONFIGMAPS, {"metadata": {"name": "a", "annotations": greet}}, namespace)
        kube_client.create(CONFIGMAPS, {"metadata": {"name": "b"}}, namespace)

        def meta(name: str) -> JsonDict:
            return dict(kube_client.get(CONFIGMAPS, name, namespace)["metadata"])

        def annotation(name: str, key: str) -> Any:
            return (meta(name).get("annotations") or {}).get(key)

        eventually(lambda: annotation("a", "sample.overseer.io/greeting") == "Salut, a!")
        assert meta("a")["labels"] == {"test.io/greeted": "true"}
        # annotating b later wakes the controller too (an update event)
        kube_client.patch(
            CONFIGMAPS, "b", {"metadata": {"annotations": greet}}, namespace=namespace
        )
        eventually(lambda: (meta("b").get("labels") or {}).get("test.io/greeted") == "true")

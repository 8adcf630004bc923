"""The README's "Write your own controller" works as printed.

The code blocks marked with a ``title=`` (```python title=overseer_hello/__init__.py,
```toml title=pyproject.toml, ```yaml title=overseer.yaml) are written into a temporary
directory; a ``.dist-info`` made from the pyproject's name, version and entry points puts
the plugin on ``sys.path`` the way ``pip install`` would. Then it is discovered, its
section is validated, and it reconciles against the API server.
"""

from __future__ import annotations

import re
import sys
import threading
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.processes import wait_for
from manager.config import parse
from manager.errors import ConfigError
from manager.kube import KubeClient
from manager.manager import Manager, ManagerOptions
from manager.plugins import ENTRY_POINT_GROUP, PluginContext, discover, load
from manager.resources import builtin

README = Path(__file__).resolve().parents[2] / "README.md"
CONFIGMAPS = builtin("v1", "configmaps")
BLOCK = re.compile(r"^```(\w+) title=(\S+)\n(.*?)^```$", re.M | re.S)


def readme_files() -> dict[str, str]:
    text = README.read_text()
    section = text[text.index("## Write your own controller") :]
    return {title: body for _lang, title, body in BLOCK.findall(section)}


@pytest.fixture
def hello(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    files = readme_files()
    for name in ("pyproject.toml", "overseer_hello/__init__.py"):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(files[name])
    project = tomllib.loads(files["pyproject.toml"])["project"]
    dist = tmp_path / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n"
    )
    entry_points = project["entry-points"][ENTRY_POINT_GROUP]
    (dist / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\n" + "".join(f"{k} = {v}\n" for k, v in entry_points.items())
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        yield files
    finally:
        sys.modules.pop("overseer_hello", None)


@pytest.fixture
def client(kubeconfig_path: str) -> Iterator[KubeClient]:
    with KubeClient.from_kubeconfig(kubeconfig_path) as c:
        yield c


def test_the_readme_has_the_plugin_files() -> None:
    assert set(readme_files()) == {"pyproject.toml", "overseer_hello/__init__.py", "overseer.yaml"}


def test_readme_plugin_is_discovered_configured_and_reconciles(
    hello: dict[str, str], client: KubeClient, namespace: str, kubeconfig_path: str
) -> None:
    infos = {i.name: i for i in discover()}
    assert (infos["hello"].distribution, infos["hello"].version) == ("overseer-hello", "0.1.0")
    plugin = load(infos["hello"])
    schemas: dict[str, type[Any]] = {"hello": plugin.config_class}

    _, controllers = parse(yaml.safe_load(hello["overseer.yaml"]), schemas)
    settings, own = controllers["hello"]
    assert (settings.workers, own.greeting, own.key) == (2, "Bonjour", "greeting")
    with pytest.raises(ConfigError) as info:
        parse({"controllers": {"hello": {"greting": "x", "workers": 0}}}, schemas)
    assert info.value.problems == [
        "controllers.hello.workers: expected integer >= 1 and <= 256, got 0",
        "controllers.hello.greting: unknown key (known keys: greeting, key)",
    ]

    with KubeClient.from_kubeconfig(kubeconfig_path) as mgr_client:
        mgr = Manager(
            mgr_client,
            ManagerOptions(
                leader_election=False,
                metrics_bind_address="0",
                health_probe_bind_address="0",
                namespace=namespace,
                graceful_shutdown_timeout=5.0,
                identity=f"readme-{uuid.uuid4().hex[:6]}",
            ),
        )
        plugin.setup(mgr, PluginContext("hello", own, settings, mgr))
        stop = threading.Event()
        thread = threading.Thread(target=mgr.run, args=(stop,), name="test/manager")
        thread.start()
        try:
            labels = {"hello.example.com/greet": "true"}
            client.create(CONFIGMAPS, {"metadata": {"name": "world", "labels": labels}}, namespace)
            client.create(CONFIGMAPS, {"metadata": {"name": "quiet"}}, namespace)
            wait_for(
                lambda: (
                    (client.get(CONFIGMAPS, "world", namespace).get("data") or {}).get("greeting")
                    == "Bonjour, world!"
                ),
                10,
                "the README plugin's greeting",
            )
            assert "data" not in client.get(CONFIGMAPS, "quiet", namespace)
        finally:
            stop.set()
            thread.join(15)
            assert mgr.join(10)
        assert not thread.is_alive()

"""The local API server is a package of its own, which the controller manager never loads.

``import manager`` (what a controller plugin does) and ``import manager.testing`` (what a
plugin's tests against a real cluster do) must not import ``apiserver``; the kit's
``LocalApiServer`` loads it on first use. Each check runs in a fresh interpreter, where
nothing else has imported the server yet. The layers inside ``apiserver`` are checked by
import-linter in ``make lint`` (pyproject.toml, ``[tool.importlinter]``).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

_LOADED = "import sys; print(sorted(m for m in sys.modules if m.split('.')[0] == 'apiserver'))"


def _server_modules_after(statement: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", f"{statement}; {_LOADED}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return out.stdout.strip()


@pytest.mark.parametrize(
    "statement",
    [
        "import manager",
        "import manager.testing",
        "import manager.cli",
        "import manager.testing.pytest_plugin",
        "import controllers.exposer, controllers.podport",
        "from manager.testing import run_plugin, eventually, FakeRecorder",
    ],
)
def test_the_manager_does_not_import_the_api_server(statement: str) -> None:
    assert _server_modules_after(statement) == "[]"


def test_the_kit_loads_the_server_when_a_test_asks_for_it() -> None:
    loaded = _server_modules_after("from manager.testing import LocalApiServer")
    assert "'apiserver.http.server'" in loaded


def test_the_kit_names_what_it_does_not_have() -> None:
    import manager.testing

    with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
        _ = manager.testing.NoSuchThing  # type: ignore[attr-defined]


def test_installing_warns_of_no_experimental_setuptools_option() -> None:
    """setuptools warns that ``[tool.distutils]`` in pyproject.toml is experimental on every
    ``pip install`` (a user's too): the strict editable mode is the Makefile's
    ``--config-settings editable_mode=strict`` instead."""
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    project = tomllib.loads((root / "pyproject.toml").read_text())
    assert "distutils" not in project.get("tool", {})
    assert "editable_mode=strict" in (root / "Makefile").read_text()

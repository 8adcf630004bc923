"""Test kit for Overseer and its plugin authors.

* :class:`LocalApiServer` speaks kube-apiserver's REST protocol over HTTP on 127.0.0.1,
  so the official ``kubernetes`` client, ``kubectl`` and Overseer itself use it as a
  cluster. See ``server.py`` for what it serves and DESIGN.md §5 for the behaviour it
  reproduces.
* :func:`run_manager`, :func:`run_plugin`, :func:`eventually`,
  :func:`validate_section` (``kit.py``): run controllers inside a test and check
  what they do.
* The pytest plugin (``pytest_plugin.py``, entry point ``pytest11: overseer``):
  fixtures ``kubeconfig_path``, ``kube_client``, ``namespace``, ``local_server``,
  ``api_client``, against the local server or ``$OVERSEER_TEST_KUBECONFIG``.
"""

from __future__ import annotations

from manager.errors import ConfigError
from manager.events import FakeRecorder, RecordedEvent
from manager.testing.faults import Faults
from manager.testing.kit import (
    ManagerFailed,
    RunningManager,
    eventually,
    plugin_name,
    run_manager,
    run_plugin,
    validate_section,
)
from manager.testing.server import LocalApiServer

__all__ = [
    "ConfigError",
    "FakeRecorder",
    "Faults",
    "LocalApiServer",
    "ManagerFailed",
    "RecordedEvent",
    "RunningManager",
    "eventually",
    "plugin_name",
    "run_manager",
    "run_plugin",
    "validate_section",
]

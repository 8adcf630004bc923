"""Test kit for Overseer and its plugin authors.

* :class:`LocalApiServer` (from the ``apiserver`` package, loaded on first use: importing
  this kit does not import the server) speaks kube-apiserver's REST protocol over HTTP on
  127.0.0.1, so the official ``kubernetes`` client, ``kubectl`` and Overseer itself use it
  as a cluster. See ``docs/local-apiserver.md`` and DESIGN.md §5.
* :func:`run_manager`, :func:`run_plugin`, :func:`eventually`,
  :func:`validate_section` (``kit.py``): run controllers inside a test and check
  what they do.
* :func:`review`, :func:`admission_request`, :func:`convert_objects` (``webhooks.py``):
  call a webhook's handler (or a CRD's conversion) as the webhook server does, without
  a server, and check the outcome (for a mutating one, the patched object).
* The pytest plugin (``pytest_plugin.py``, entry point ``pytest11: overseer``):
  fixtures ``kubeconfig_path``, ``kube_client``, ``namespace``, ``local_server``,
  ``api_client``, against the local server or ``$OVERSEER_TEST_KUBECONFIG``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from manager.errors import ConfigError
from manager.events import FakeRecorder, RecordedEvent
from manager.testing.kit import (
    ManagerFailed,
    RunningManager,
    eventually,
    plugin_name,
    run_manager,
    run_plugin,
    validate_section,
)
from manager.testing.webhooks import AdmissionOutcome, admission_request, convert_objects, review

if TYPE_CHECKING:
    from apiserver import Faults, LocalApiServer


def __getattr__(name: str) -> Any:
    """``LocalApiServer`` and ``Faults`` come from the ``apiserver`` package, imported
    here on first use only: a plugin's tests that run against a real cluster never load
    the server."""
    if name in ("LocalApiServer", "Faults"):
        import apiserver

        return getattr(apiserver, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AdmissionOutcome",
    "ConfigError",
    "FakeRecorder",
    "Faults",
    "LocalApiServer",
    "ManagerFailed",
    "RecordedEvent",
    "RunningManager",
    "admission_request",
    "convert_objects",
    "eventually",
    "plugin_name",
    "review",
    "run_manager",
    "run_plugin",
    "validate_section",
]

"""Test kit for Overseer and its plugin authors: a local Kubernetes API server.

:class:`LocalApiServer` speaks kube-apiserver's REST protocol over HTTP on 127.0.0.1,
so the official ``kubernetes`` client, ``kubectl`` and Overseer itself use it as a
cluster. See ``server.py`` for what it serves and DESIGN.md §5 for the behaviour it
reproduces.
"""

from __future__ import annotations

from manager.events import FakeRecorder, RecordedEvent
from manager.testing.faults import Faults
from manager.testing.server import LocalApiServer

__all__ = ["FakeRecorder", "Faults", "LocalApiServer", "RecordedEvent"]

"""Fixtures shared by the unit tests of the client (``test_kube``, ``test_fencing``,
``test_kubeconfig``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.unit.test_kube import StubApiServer


@pytest.fixture
def stub() -> Iterator[StubApiServer]:
    server = StubApiServer()
    server.thread.start()
    try:
        yield server
    finally:
        server.stop()

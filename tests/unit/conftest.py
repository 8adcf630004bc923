"""Fixtures shared by the unit tests of the client (``test_kube``, ``test_fencing``,
``test_kubeconfig``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from manager.client import ClientOptions, KubeClient
from manager.flowcontrol import TokenBucket
from tests.unit.test_kube import StubApiServer, write_kubeconfig


@pytest.fixture
def stub() -> Iterator[StubApiServer]:
    server = StubApiServer()
    server.thread.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def kubeconfig(stub: StubApiServer, tmp_path: Path) -> Path:
    return write_kubeconfig(tmp_path / "kubeconfig", stub.url)


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def make_client(kubeconfig: Path, sleeps: list[float]) -> Iterator[Callable[..., KubeClient]]:
    clients: list[KubeClient] = []

    def make(path: Path | None = None, **options: Any) -> KubeClient:
        options.setdefault("max_retries", 3)
        options.setdefault("retry_max_wait", 10.0)
        client = KubeClient.from_kubeconfig(
            str(path or kubeconfig),
            options=ClientOptions(**options),
            rate_limiter=TokenBucket(0, 1),
            retry_sleep=sleeps.append,
        )
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def client(make_client: Callable[..., KubeClient]) -> KubeClient:
    return make_client()

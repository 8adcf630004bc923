"""Fixtures shared by every test.

* ``no_thread_leaks`` (autouse): a test that leaves a thread running that it started
  fails. Threads get a grace period to finish joining.
* ``kubeconfig_path``: the local API server's kubeconfig, or ``$OVERSEER_TEST_KUBECONFIG``
  when that points to a real cluster.
* ``local_server``: the in-process local API server; tests marked ``local_only`` (fault
  injection, forced compaction) are skipped with a message against a real cluster.
* ``api_client``: a fresh ``kubernetes.client.ApiClient`` for the target.
* ``namespace``: a new namespace for this test, deleted afterwards.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

REAL_CLUSTER = os.environ.get("OVERSEER_TEST_KUBECONFIG", "")

# Threads other libraries start once per process and keep (not leaks of ours).
_ALLOWED_THREAD_PREFIXES = ("local-apiserver", "pytest_timeout", "OtelBatch", "ThreadPoolExecutor")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not REAL_CLUSTER:
        return
    skip = pytest.mark.skip(
        reason="local_only: needs the local API server's knobs; OVERSEER_TEST_KUBECONFIG is set"
    )
    for item in items:
        if "local_only" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def no_thread_leaks() -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 5.0
    while True:
        leaked = [
            t
            for t in threading.enumerate()
            if t not in before and t.is_alive() and not t.name.startswith(_ALLOWED_THREAD_PREFIXES)
        ]
        if not leaked or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert not leaked, f"test leaked threads: {sorted(t.name for t in leaked)}"


@pytest.fixture(scope="session")
def _local_server_session() -> Iterator[Any]:
    if REAL_CLUSTER:
        yield None
        return
    from manager.testing import LocalApiServer

    server = LocalApiServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def kubeconfig_path(_local_server_session: Any) -> str:
    if REAL_CLUSTER:
        return REAL_CLUSTER
    return str(_local_server_session.kubeconfig_path)


@pytest.fixture
def local_server(_local_server_session: Any) -> Iterator[Any]:
    """The local API server, with fault injection cleared before and after the test."""
    if _local_server_session is None:
        pytest.skip("needs the local API server; OVERSEER_TEST_KUBECONFIG is set")
    _local_server_session.faults.clear()
    yield _local_server_session
    _local_server_session.faults.clear()


@pytest.fixture
def api_client(kubeconfig_path: str) -> Iterator[Any]:
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=kubeconfig_path, client_configuration=configuration)
    api = client.ApiClient(configuration)
    try:
        yield api
    finally:
        # urllib3 2.x PoolManager.clear() forgets its pools without closing their
        # sockets (a server thread would linger): close them explicitly.
        pools = api.rest_client.pool_manager.pools
        for key in list(pools.keys()):
            pool = pools.get(key)
            if pool is not None:
                pool.close()
        api.close()


@pytest.fixture
def namespace(api_client: Any) -> Iterator[str]:
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    name = f"ovs-test-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(api_client)
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    # A real cluster creates the "default" ServiceAccount asynchronously; pods need it.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            core.read_namespaced_service_account("default", name)
            break
        except ApiException as exc:
            if exc.status != 404:
                raise
            time.sleep(0.1)
    try:
        yield name
    finally:
        try:
            core.delete_namespace(name)
        except ApiException as exc:
            if exc.status != 404:
                raise

"""Fixtures shared by every test.

The API server fixtures (``kubeconfig_path``, ``local_server``, ``kube_client``,
``namespace``) and the ``local_only`` marker come from the test kit's pytest plugin,
``manager.testing.pytest_plugin``, which the installed package registers (entry point
``pytest11: overseer``): the project's tests use the kit plugin authors use.

* ``no_thread_leaks`` (autouse): a test that leaves a thread running that it started
  fails. Threads get a grace period to finish joining.
* ``api_client``: the official ``kubernetes.client.ApiClient`` for the API server (the
  kit keeps the untyped official client out of its public surface).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

# pytester: the test kit's own tests run small test suites as a plugin author would
pytest_plugins = ("pytester",)

# Threads other libraries start once per process and keep (not leaks of ours).
_ALLOWED_THREAD_PREFIXES = ("local-apiserver", "pytest_timeout", "OtelBatch", "ThreadPoolExecutor")


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin("overseer"):
        raise pytest.UsageError(
            "the test kit's pytest plugin (entry point pytest11: overseer) is not loaded: "
            "run `make venv` (it installs this project), and do not pass -p no:overseer"
        )


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

"""The pytest plugin of the test kit: fixtures for testing controllers against an API
server. Registered through the ``pytest11`` entry point ``overseer``, so it is active in
every pytest run of an environment where Overseer is installed (``-p no:overseer``
turns it off).

The API server is the local one (:class:`~apiserver.LocalApiServer`, started once
per session, in process) unless ``OVERSEER_TEST_KUBECONFIG`` names the kubeconfig of a
real cluster; then every fixture below talks to that cluster, and tests marked
``local_only`` (they need the local server's knobs: fault injection, compaction) are
skipped with the reason.

Fixtures:

* ``kubeconfig_path`` (session): the kubeconfig of the API server, as a string. The
  local server enforces RBAC as a cluster does: this kubeconfig (no token: kubectl
  sends none over plain HTTP) acts as its admin (``system:masters``), and a
  ServiceAccount's token gets what is bound to it.
* ``local_server``: the local API server, its fault injection cleared before and after
  the test. A test that uses it, directly or through another fixture, is marked
  ``local_only`` at collection: against a real cluster it is skipped before any of its
  fixtures runs, and ``-m "not local_only"`` deselects it.
* ``local_servers``: a factory of more local API servers for one test (the member
  clusters of a fleet): ``local_servers(3)`` starts three (RBAC enforced, their
  kubeconfigs' user an admin: ``server.kubeconfig_path``), stopped after the test. They
  are in-process servers even when ``OVERSEER_TEST_KUBECONFIG`` names a real cluster
  (which is then the home cluster), so a test using them is not ``local_only``.
* ``kube_client``: a :class:`~manager.client.KubeClient` for the API server, closed after
  the test.
* ``namespace``: the name of a namespace made for this test (its ``default``
  ServiceAccount exists, so pods can be created) and deleted afterwards. An object
  the test leaves in it with a finalizer of its own (not one Kubernetes manages, such
  as ``foregroundDeletion`` or ``kubernetes.io/pvc-protection``) would keep the
  namespace terminating for ever on a real cluster: the teardown removes such
  finalizers and fails the test, naming the objects.

Marker: ``local_only`` (given by hand, or by using ``local_server``): skipped, with the
reason, when ``OVERSEER_TEST_KUBECONFIG`` is set; run as any other test otherwise.

The test run's root directory (``rootdir``) is put at the end of ``sys.path``, so a
plugin's tests import the plugin from the project root without installing it first.
Captured logs (in failure reports and ``caplog.text``) carry each record's context:
the reconcile's controller, namespace and name, and its ``extra`` values.

Nothing heavy is imported until a fixture is used: the plugin costs nothing to test
suites that do not use it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from apiserver.http.server import LocalApiServer
    from manager.client import KubeClient

__all__ = [
    "ENV_KUBECONFIG",
    "LocalServers",
    "kube_client",
    "kubeconfig_path",
    "local_server",
    "local_servers",
    "namespace",
    "real_cluster",
]

ENV_KUBECONFIG = "OVERSEER_TEST_KUBECONFIG"
NAMESPACE_PREFIX = "ovs-test-"
_SERVICE_ACCOUNT_TIMEOUT = 30.0  # seconds for a real cluster to make "default"


def real_cluster() -> str:
    """The kubeconfig of the real cluster the tests run against, or "" (local)."""
    return os.environ.get(ENV_KUBECONFIG, "")


def pytest_configure(config: pytest.Config) -> None:
    # a plugin's tests import it from the project's root without installing it: the
    # root goes last on sys.path, so an installed copy still wins
    root = str(config.rootpath)
    if root not in sys.path:
        sys.path.append(root)
    config.addinivalue_line(
        "markers",
        "local_only: needs the local API server's knobs (fault injection, compaction); "
        f"skipped when {ENV_KUBECONFIG} names a real cluster",
    )


def pytest_sessionstart(session: pytest.Session) -> None:
    _context_in_captured_logs(session.config)


def _context_in_captured_logs(config: pytest.Config) -> None:
    """pytest's captured and reported logs show only the message; a reconcile's
    controller, namespace and name (and ``extra`` values) live beside it. Wrap the
    logging plugin's formatters so they show them too."""
    from manager.logs import ContextFormatter

    logging_plugin = config.pluginmanager.get_plugin("logging-plugin")
    if logging_plugin is None:
        return
    for attr in ("caplog_handler", "report_handler", "log_cli_handler", "log_file_handler"):
        handler = getattr(logging_plugin, attr, None)
        formatter = getattr(handler, "formatter", None)
        if (
            handler is not None
            and formatter is not None
            and not isinstance(formatter, ContextFormatter)
        ):
            handler.setFormatter(ContextFormatter(formatter))


def pytest_report_header(config: pytest.Config) -> str:
    target = real_cluster()
    where = f"the cluster of {target}" if target else "the local API server (in process)"
    return f"overseer: API server: {where}"


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        # a test that needs local_server, directly or through other fixtures, is one
        if "local_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.local_only)
    if not real_cluster():
        return
    skip = pytest.mark.skip(
        reason=f"local_only: needs the local API server's knobs; {ENV_KUBECONFIG} is set"
    )
    for item in items:
        if "local_only" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def _overseer_local_server() -> Iterator[LocalApiServer | None]:
    if real_cluster():
        yield None
        return
    from apiserver.http.server import LocalApiServer

    server = LocalApiServer(rbac=True, anonymous_is_admin=True).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def kubeconfig_path(_overseer_local_server: LocalApiServer | None) -> str:
    """The API server's kubeconfig: the local server's, or ``$OVERSEER_TEST_KUBECONFIG``."""
    if _overseer_local_server is None:
        return real_cluster()
    return str(_overseer_local_server.kubeconfig_path)


@pytest.fixture
def local_server(_overseer_local_server: LocalApiServer | None) -> Iterator[LocalApiServer]:
    """The local API server, with fault injection cleared before and after the test."""
    if _overseer_local_server is None:
        pytest.skip(f"needs the local API server; {ENV_KUBECONFIG} is set")
    _overseer_local_server.faults.clear()
    yield _overseer_local_server
    _overseer_local_server.faults.clear()


class LocalServers:
    """``local_servers(n)``: ``n`` more local API servers, started now, stopped after the
    test; keyword arguments go to each :class:`~apiserver.LocalApiServer` (default:
    ``rbac=True, anonymous_is_admin=True``, as the session's server)."""

    def __init__(self) -> None:
        self.started: list[LocalApiServer] = []

    def __call__(self, count: int = 1, **options: object) -> list[LocalApiServer]:
        from apiserver.http.server import LocalApiServer

        options = {"rbac": True, "anonymous_is_admin": True, **options}
        servers = [LocalApiServer(**options).start() for _ in range(count)]  # type: ignore[arg-type]
        self.started.extend(servers)
        return servers

    def stop(self) -> None:
        for server in self.started:
            server.stop()
        self.started.clear()


@pytest.fixture
def local_servers() -> Iterator[LocalServers]:
    """A factory of local API servers for this test (see :class:`LocalServers`)."""
    servers = LocalServers()
    try:
        yield servers
    finally:
        servers.stop()


@pytest.fixture
def kube_client(kubeconfig_path: str) -> Iterator[KubeClient]:
    """A client for the API server (the test's own: not a manager's)."""
    from manager.client import KubeClient

    with KubeClient.from_kubeconfig(kubeconfig_path) as client:
        yield client


@pytest.fixture
def namespace(kube_client: KubeClient) -> Iterator[str]:
    """A namespace of this test's own, deleted afterwards (with what is in it)."""
    from manager.errors import NotFound
    from manager.resources import builtin

    namespaces = builtin("v1", "namespaces")
    accounts = builtin("v1", "serviceaccounts")
    name = f"{NAMESPACE_PREFIX}{uuid.uuid4().hex[:8]}"
    kube_client.create(namespaces, {"metadata": {"name": name}})
    try:
        # a real cluster makes the "default" ServiceAccount shortly after; pods need it
        deadline = time.monotonic() + _SERVICE_ACCOUNT_TIMEOUT
        while True:
            try:
                kube_client.get(accounts, "default", name)
                break
            except NotFound:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield name
        # its own client: a sweep of every resource must not wait on the test's rate limit,
        # nor retry an aggregated API that is down (it is skipped)
        options = dataclasses.replace(kube_client.options, qps=0, max_retries=0)
        with kube_client.with_options(options) as sweep:
            leftovers = _release_leftover_finalizers(sweep, name)
        if leftovers:
            pytest.fail(
                f"the test left objects with finalizers in its namespace {name} (removed "
                "now; on a real cluster the namespace would never finish terminating): "
                + "; ".join(leftovers)
            )
    finally:
        with contextlib.suppress(NotFound):  # deleted by the test itself
            kube_client.delete(namespaces, name)


def _managed_by_kubernetes(finalizer: str) -> bool:
    """A finalizer Kubernetes' own controllers remove (the garbage collector's
    ``foregroundDeletion``/``orphan``, ``kubernetes.io/pvc-protection``,
    ``batch.kubernetes.io/job-tracking``, ...): not a test's to clean up."""
    domain, slash, _ = finalizer.partition("/")
    if not slash:
        return True
    return any(domain == d or domain.endswith("." + d) for d in ("kubernetes.io", "k8s.io"))


def _release_leftover_finalizers(kube_client: KubeClient, namespace: str) -> list[str]:
    """Every object in ``namespace`` holding a finalizer that is not Kubernetes' own,
    as ``resource/name: [finalizers]``; those finalizers are removed. Served resources
    are found by discovery (custom resources included), so this holds on any server."""
    from manager.errors import ApiError, NotFound
    from manager.resources import Resource

    found: list[str] = []
    groups = kube_client.request("GET", "/apis", idempotent=True).get("groups") or []
    versions = ["v1"] + [
        str((g.get("preferredVersion") or {}).get("groupVersion") or "") for g in groups
    ]
    for group_version in filter(None, versions):
        path = f"/apis/{group_version}" if "/" in group_version else f"/api/{group_version}"
        try:
            listing = kube_client.request("GET", path, idempotent=True)
        except ApiError:  # a CRD deleted meanwhile, an aggregated API that is down
            continue
        group, _, version = group_version.rpartition("/")
        for entry in listing.get("resources") or []:
            verbs = set(entry.get("verbs") or [])
            plural = str(entry.get("name") or "")
            if not entry.get("namespaced") or "/" in plural or not {"list", "patch"} <= verbs:
                continue
            resource = Resource(group, version, plural, str(entry.get("kind", "")), True)
            try:
                items = kube_client.list(resource, namespace).get("items") or []
            except ApiError:
                continue
            for item in items:
                meta = item.get("metadata") or {}
                finalizers = list(meta.get("finalizers") or [])
                theirs = [f for f in finalizers if not _managed_by_kubernetes(f)]
                if not theirs:
                    continue
                found.append(f"{resource.group_resource}/{meta.get('name')}: {theirs}")
                kept = [f for f in finalizers if _managed_by_kubernetes(f)]
                with contextlib.suppress(NotFound):
                    kube_client.patch(
                        resource,
                        str(meta.get("name")),
                        {"metadata": {"finalizers": kept or None}},
                        namespace=namespace,
                    )
    return found

"""The local API server's chaos tools: restart with storage kept, the audit of who wrote
what while who held the Lease, and the TCP proxy that partitions one client. These are
knobs of the local server (and a proxy of ours), hence ``local_only``."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apiserver.api.errors import StatusError
from apiserver.http.audit import SYSTEM_USER
from manager.client import ClientOptions, KubeClient
from manager.errors import NotFound, Unavailable
from manager.resources import builtin
from manager.testing.proxy import TcpProxy

CONFIGMAPS = builtin("v1", "configmaps")
LEASES = builtin("coordination.k8s.io/v1", "leases")

pytestmark = pytest.mark.local_only


@pytest.fixture
def audit(local_server: Any) -> Iterator[Any]:
    local_server.audit.clear()
    local_server.audit.start()
    yield local_server.audit
    local_server.audit.stop()
    local_server.audit.clear()


def _client(local_server: Any, user: str, tmp_path: Path, server: str | None = None) -> KubeClient:
    path = local_server.kubeconfig_for(user, tmp_path / f"{user}.kubeconfig", server=server)
    return KubeClient.from_kubeconfig(str(path), options=ClientOptions(max_retries=0, timeout=5))


def test_the_audit_names_the_writer_and_the_lease_holder_at_each_write(
    local_server: Any, audit: Any, namespace: str, tmp_path: Path
) -> None:
    with (
        _client(local_server, "alice", tmp_path) as alice,
        _client(local_server, "bob", tmp_path) as bob,
    ):
        lease = alice.create(
            LEASES, {"metadata": {"name": "l"}, "spec": {"holderIdentity": "alice_1"}}, namespace
        )
        first = alice.create(CONFIGMAPS, {"metadata": {"name": "a"}}, namespace)
        lease["spec"]["holderIdentity"] = "bob_2"
        bob.replace(LEASES, lease)
        second = bob.patch(CONFIGMAPS, "a", {"data": {"k": "v"}}, namespace=namespace)
        alice.get(CONFIGMAPS, "a", namespace)  # reads are not recorded
    mine = [r for r in audit.records() if r.namespace == namespace and r.user in ("alice", "bob")]
    writes = [(r.user, r.verb, r.resource, r.name) for r in mine]
    assert writes == [
        ("alice", "create", "leases", "l"),
        ("alice", "create", "configmaps", "a"),
        ("bob", "update", "leases", "l"),
        ("bob", "patch", "configmaps", "a"),
    ]
    rv_first = int(first["metadata"]["resourceVersion"])
    rv_second = int(second["metadata"]["resourceVersion"])
    assert audit.lease_holder(namespace, "l", rv_first) == "alice_1"
    assert audit.lease_holder(namespace, "l", rv_second) == "bob_2"
    assert audit.lease_holder(namespace, "l", rv_first - 10) == ""
    assert [h for _, h in audit.lease_history(namespace, "l")] == ["alice_1", "bob_2"]


def test_writes_the_server_makes_itself_are_the_systems(
    local_server: Any, audit: Any, kubeconfig_path: str, namespace: str
) -> None:
    with KubeClient.from_kubeconfig(kubeconfig_path) as anonymous:
        owner = anonymous.create(CONFIGMAPS, {"metadata": {"name": "owner"}}, namespace)
        ref = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": "owner",
            "uid": owner["metadata"]["uid"],
        }
        anonymous.create(
            CONFIGMAPS, {"metadata": {"name": "child", "ownerReferences": [ref]}}, namespace
        )
        anonymous.delete(CONFIGMAPS, "owner", namespace)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                anonymous.get(CONFIGMAPS, "child", namespace)
            except NotFound:
                break
            time.sleep(0.05)
    users = {(r.user, r.name, r.event) for r in audit.records() if r.namespace == namespace}
    # the kubeconfig's user: the admin of a server that enforces RBAC (the kit's does)
    who = "system:admin" if local_server.rbac else "system:anonymous"
    assert (who, "owner", "ADDED") in users
    assert (SYSTEM_USER, "child", "DELETED") in users  # the garbage collector


def test_a_restart_cuts_everything_and_keeps_what_is_stored(
    local_server: Any, kubeconfig_path: str, namespace: str
) -> None:
    with KubeClient.from_kubeconfig(
        kubeconfig_path, options=ClientOptions(max_retries=0, timeout=5)
    ) as client:
        created = client.create(CONFIGMAPS, {"metadata": {"name": "kept"}}, namespace)
        revision = local_server.revision
        stream = client.watch(
            CONFIGMAPS,
            namespace,
            resource_version=created["metadata"]["resourceVersion"],
            timeout_seconds=60,
            read_timeout=10,
        )
        restarted = threading.Thread(target=local_server.restart, args=(1.0,), name="restart")
        restarted.start()
        try:
            with stream:
                assert list(stream) == []  # the watch is cut, cleanly
            time.sleep(0.3)
            with pytest.raises(Unavailable):  # refused while it is down
                client.get(CONFIGMAPS, "kept", namespace)
        finally:
            restarted.join(10)
        assert (
            client.get(CONFIGMAPS, "kept", namespace)["metadata"]["uid"]
            == (created["metadata"]["uid"])
        )
        assert local_server.revision == revision


def test_a_partition_holds_requests_and_delivers_them_after(
    local_server: Any, namespace: str, tmp_path: Path
) -> None:
    host, port = local_server.url.removeprefix("http://").split(":")
    with (
        TcpProxy((host, int(port))) as proxy,
        _client(local_server, "cut-off", tmp_path, server=proxy.url) as client,
    ):
        client.create(CONFIGMAPS, {"metadata": {"name": "before"}}, namespace)
        proxy.block()
        with pytest.raises(Unavailable):  # the answer never comes: the client gives up
            client.get(CONFIGMAPS, "before", namespace, timeout=0.5)
        done: dict[str, Any] = {}

        def write() -> None:
            try:
                done["ok"] = client.create(CONFIGMAPS, {"metadata": {"name": "during"}}, namespace)
            except Exception as exc:
                done["error"] = exc

        writer = threading.Thread(target=write, name="partitioned-write")
        writer.start()
        time.sleep(0.5)
        with pytest.raises(StatusError, match="not found"):  # nothing reached the server yet
            local_server.rest.get(local_server.resource("v1", "configmaps"), namespace, "during")
        proxy.unblock()
        writer.join(10)
        assert "ok" in done, done  # held, then delivered: the write was waiting on the wire
        client.get(CONFIGMAPS, "during", namespace)


def test_a_write_abandoned_during_a_partition_is_not_applied_after_it(
    local_server: Any, namespace: str, tmp_path: Path
) -> None:
    """The client gave up (timeout) and closed; its request and its close reach the server
    together once the partition ends: the server does not apply it."""
    host, port = local_server.url.removeprefix("http://").split(":")
    with (
        TcpProxy((host, int(port))) as proxy,
        _client(local_server, "cut-off", tmp_path, server=proxy.url) as client,
    ):
        client.get(CONFIGMAPS, "kube-root-ca.crt", namespace)  # a connection exists
        proxy.block()
        with pytest.raises(Unavailable):
            client.create(CONFIGMAPS, {"metadata": {"name": "late"}}, namespace, timeout=0.5)
        client.close()
        proxy.unblock()
        time.sleep(0.5)
    with pytest.raises(StatusError, match="not found"):
        local_server.rest.get(local_server.resource("v1", "configmaps"), namespace, "late")

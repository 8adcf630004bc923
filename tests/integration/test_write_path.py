"""The write path against the local API server (issue 31, defects 2 to 4): nothing sent
twice, and no fenced write applied after its permission ended.

* A server that commits a write and dies before answering (here: a
  :class:`~manager.testing.proxy.TcpProxy` that lets the request through, throws the
  answer away and resets the client's connection): the client must not send the write
  again. Counted on the server: one object per create, ``generateName`` included.
* A pipeline of fenced writes whose sender is paused right after sending (the send is
  followed by a sleep longer than the fence's permission), on a server that takes 80 ms
  per write: every write the server applies must be applied before the fence's end.

They need the proxy's rules, the server's latency and its audit: ``local_only``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import manager.client.session
from manager.client import ClientOptions, KubeClient, Write
from manager.errors import Conflict, OutcomeUnknown, WriteFenced
from manager.fencing import ValidityFence
from manager.resources import builtin
from manager.testing import LocalApiServer
from manager.testing.proxy import TcpProxy

pytestmark = [pytest.mark.local_only, pytest.mark.timeout(60)]

CONFIGMAPS = builtin("v1", "configmaps")


@pytest.fixture
def proxied(
    local_server: LocalApiServer, namespace: str, tmp_path: Path
) -> Iterator[tuple[TcpProxy, KubeClient]]:
    host, port = local_server.url.removeprefix("http://").split(":")
    proxy = TcpProxy((host, int(port))).start()
    path = local_server.kubeconfig_for("writer", tmp_path / "writer", server=proxy.url)
    client = KubeClient.from_kubeconfig(str(path), options=ClientOptions(qps=0))
    try:
        yield proxy, client
    finally:
        client.close()
        proxy.stop()


def _warm(client: KubeClient, namespace: str) -> None:
    """One answered request: the write then goes on a kept-alive, reused connection (the
    case where the old client assumed a broken connection had carried nothing)."""
    client.list(CONFIGMAPS, namespace)


def _named(client: KubeClient, namespace: str, prefix: str) -> list[str]:
    items = client.list(CONFIGMAPS, namespace)["items"]
    return sorted(i["metadata"]["name"] for i in items if i["metadata"]["name"].startswith(prefix))


def _cm(namespace: str, **meta: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, **meta}, "data": {"k": "v"}}


def _posts(namespace: str) -> bytes:
    return rf"POST /api/v1/namespaces/{namespace}/configmaps".encode()


def test_a_create_with_generate_name_committed_then_reset_makes_one_object(
    proxied: tuple[TcpProxy, KubeClient], namespace: str
) -> None:
    proxy, client = proxied
    _warm(client, namespace)
    rule = proxy.reset_after_answer(_posts(namespace))
    with pytest.raises(OutcomeUnknown):
        client.create(CONFIGMAPS, _cm(namespace, generateName="gen-"))
    assert rule.matched == 1
    assert len(_named(client, namespace, "gen-")) == 1


def test_a_create_of_a_name_committed_then_reset_is_outcome_unknown_not_already_exists(
    proxied: tuple[TcpProxy, KubeClient], namespace: str
) -> None:
    """The old client sent it again and reported ``AlreadyExists`` for the object this
    very call had created."""
    proxy, client = proxied
    _warm(client, namespace)
    proxy.reset_after_answer(_posts(namespace))
    with pytest.raises(OutcomeUnknown):
        client.create(CONFIGMAPS, _cm(namespace, name="fixed"))
    assert _named(client, namespace, "fixed") == ["fixed"]


@pytest.mark.parametrize("how", ["single", "pipeline"])
def test_a_write_session_create_committed_then_reset_makes_one_object(
    proxied: tuple[TcpProxy, KubeClient], namespace: str, how: str
) -> None:
    proxy, client = proxied
    with client.write_session() as session:
        session.create(CONFIGMAPS, _cm(namespace, name="first"))  # the connection is reused
        proxy.reset_after_answer(_posts(namespace))
        if how == "single":
            with pytest.raises(OutcomeUnknown):
                session.create(CONFIGMAPS, _cm(namespace, generateName="gen-"))
        else:
            results = session.pipeline(
                [Write.create(CONFIGMAPS, _cm(namespace, generateName="gen-"))]
            )
            assert isinstance(results[0], OutcomeUnknown)
    assert len(_named(client, namespace, "gen-")) == 1


def test_an_update_with_a_resource_version_committed_then_reset_is_replayed_and_refused(
    proxied: tuple[TcpProxy, KubeClient], namespace: str
) -> None:
    """A replayable write is sent again; the server, having applied it, refuses the
    replay (409): applied once."""
    proxy, client = proxied
    created = client.create(CONFIGMAPS, _cm(namespace, name="guarded"))
    proxy.reset_after_answer(rb"PUT /api/v1/namespaces/[^/]+/configmaps/guarded")
    updated = {**created, "data": {"k": "changed"}}
    with pytest.raises(Conflict):
        client.replace(CONFIGMAPS, updated)
    now = client.get(CONFIGMAPS, "guarded", namespace)
    assert now["data"] == {"k": "changed"}
    assert int(now["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])


# -- a paused sender with a pipeline of fenced writes ------------------------------------


def _pause_after_sending(monkeypatch: pytest.MonkeyPatch, seconds: float, sends: list[int]) -> None:
    """The sender stops right after the bytes of a round of several writes went out,
    as a process paused there (SIGSTOP, a long GC) would: the server goes on."""
    send = manager.client.session.send_request

    def paused(sock: Any, request: bytes) -> bool:
        ok = send(sock, request)
        count = request.count(b" HTTP/1.1\r\n")
        sends.append(count)
        if count > 1:
            time.sleep(seconds)
        return ok

    monkeypatch.setattr(manager.client.session, "send_request", paused)


def test_no_pipelined_write_is_applied_after_its_fence_ends_when_the_sender_pauses(
    local_server: LocalApiServer,
    kube_client: KubeClient,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Defect 3's reproduction: the server takes 80 ms per write, the sender holds a
    fence valid for 1.5 s and 40 writes, and is paused for 2.5 s right after each send.
    Every write the server applied was applied before the fence ended; the rest were
    refused unsent."""
    validity = 1.5
    ends_at = time.monotonic() + validity
    ends_at_wall = time.time() + validity
    fence = ValidityFence(
        lambda: ends_at - time.monotonic(), reason="unit_pipeline", message="a test fence"
    )
    sends: list[int] = []
    _pause_after_sending(monkeypatch, 2.5, sends)
    local_server.audit.clear()
    local_server.audit.start()
    local_server.faults.set_latency(0.08)
    prefix = f"p-{uuid.uuid4().hex[:6]}-"
    writes = [Write.create(CONFIGMAPS, _cm(namespace, name=f"{prefix}{i}")) for i in range(40)]
    try:
        with kube_client.with_fence(fence).write_session() as session:
            results = session.pipeline(writes, decode=False)
        time.sleep(40 * 0.08)  # whatever the server still had queued is applied by now
    finally:
        local_server.faults.set_latency(0.0)
        local_server.audit.stop()
    applied = [
        r
        for r in local_server.audit.records()
        if r.resource == "configmaps" and r.name.startswith(prefix)
    ]
    late = [f"{r.name} +{r.time - ends_at_wall:.2f} s" for r in applied if r.time > ends_at_wall]
    assert late == [], f"applied after the fence ended: {late} (rounds sent: {sends})"
    assert max(sends) > 1, f"the rounds never pipelined: {sends}"
    written = [r for r in results if isinstance(r, dict)]
    assert len(written) == len(applied) > 1
    assert all(isinstance(r, WriteFenced) for r in results[len(written) :])

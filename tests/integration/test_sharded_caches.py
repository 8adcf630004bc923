"""Sharded managers whose caches divide: each replica lists, watches and caches only its
share of the sharded controller's primary objects, in both modes of the local server —
``ShardedListAndWatch`` on (the server filters by ``shardSelector``) and off (the
fallback: the replicas filter on the client) — and a join and a leave move ranges with
nothing missed (every key converges) and nothing reconciled by two replicas at once (the
journal of reconcile spans and the audit of ``tests/integration/test_one_writer.py``).

They start their own server with the gate set: ``local_only``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from manager.cache.sharded import MODE_CLIENT, MODE_SERVER, ShardedInformer
from manager.client import ClientOptions, KubeClient
from manager.hashring import fnv1a_64
from manager.testing import LocalApiServer
from tests.integration.test_one_writer import CONFIGMAPS, KEYS, LABEL, Replica, Setup, _until

pytestmark = [
    pytest.mark.local_only(reason="starts its own server with the ShardedListAndWatch gate"),
    pytest.mark.slow,
    pytest.mark.timeout(180),
]


@pytest.fixture(params=[MODE_SERVER, MODE_CLIENT])
def gated(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Setup, str]]:
    gates = {"ShardedListAndWatch": request.param == MODE_SERVER}
    with LocalApiServer(feature_gates=gates) as server:
        client = KubeClient.from_kubeconfig(
            str(server.kubeconfig_path), options=ClientOptions(qps=0)
        )
        server.audit.start()
        setup = Setup(server, client, "default", tmp_path)
        try:
            yield setup, request.param
        finally:
            setup.close()
            for i in range(KEYS):
                client.delete(CONFIGMAPS, f"cm-{i}", "default")
            client.close()


def _cache(r: Replica) -> ShardedInformer:
    informer = r.mgr.informer(CONFIGMAPS, label_selector=LABEL, shard="primary")
    assert isinstance(informer, ShardedInformer)
    return informer


def _cached(r: Replica) -> set[str]:
    return {o["metadata"]["name"] for o in _cache(r).indexer.list()}


def _shares(setup: Setup, live: list[Replica]) -> bool:
    """Every live replica caches exactly what its applied ring gives it, and the shares
    cover every key once."""
    uids = {
        cm["metadata"]["name"]: cm["metadata"]["uid"]
        for cm in setup.client.list(CONFIGMAPS, setup.namespace, label_selector=LABEL)["items"]
    }
    seen: list[str] = []
    for r in live:
        assert r.mgr.shards is not None
        share = {n for n, uid in uids.items() if r.mgr.shards.owns(fnv1a_64(uid))}
        if _cached(r) != share:
            return False
        seen.extend(share)
    return sorted(seen) == sorted(uids)


def test_caches_hold_each_replicas_share_and_a_join_and_a_leave_move_it(
    gated: tuple[Setup, str],
) -> None:
    setup, mode = gated
    a = setup.replica("rep-a", hold=0.02).start()
    b = setup.replica("rep-b", hold=0.02).start()
    setup.tick()
    _until(
        lambda: setup.journal.written_by(a.identity) and setup.journal.written_by(b.identity),
        "A and B at work",
    )
    _until(lambda: _shares(setup, [a, b]), "A and B caching their shares")
    assert _cache(a).mode == mode and _cache(b).mode == mode
    assert all(0 < len(_cached(r)) < KEYS for r in (a, b))

    # a join: C lists its ranges, A and B drop what they lost
    c = setup.replica("rep-c", hold=0.02).start()
    _until(lambda: setup.journal.written_by(c.identity), "C at work")
    _until(lambda: _shares(setup, [a, b, c]), "A, B and C caching their shares")
    assert _cache(c).mode == mode

    # a leave: B stops gracefully, A and C take its ranges
    assert b.close() == 0
    _until(lambda: _shares(setup, [a, c]), "A and C caching their shares")
    time.sleep(1.0)
    setup.stop_ticking()
    _until(setup.converged, "every key reconciled", timeout=20)
    assert setup.journal.overlaps() == []
    assert setup.shard_violations() == []

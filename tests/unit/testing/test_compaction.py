"""Unit tests of the scheduled compaction (kube's etcd3 compactor, one round behind)."""

from __future__ import annotations

import pytest

from apiserver.storage.compaction import Compactor
from apiserver.storage.store import Storage, TooOldResourceVersion


def _write(storage: Storage, name: str) -> int:
    with storage.lock:
        rv = storage.next_revision()
        obj = {"metadata": {"name": name, "resourceVersion": str(rv)}}
        storage.commit("ADDED", ("configmaps", "ns", name), obj)
    return rv


def test_each_round_compacts_what_the_previous_round_saw() -> None:
    storage = Storage()
    compactor = Compactor(storage, 300.0)
    first = _write(storage, "a")
    assert compactor.round() == 0  # the first round only looks
    seen = storage.revision
    assert seen == first + 1  # its compact-key write
    assert storage.list_at("configmaps", "ns", first) != []
    second = _write(storage, "b")
    assert compactor.round() == seen
    assert storage.compacted_revision == seen
    with pytest.raises(TooOldResourceVersion):
        storage.list_at("configmaps", "ns", first)
    assert [o["metadata"]["name"] for o in storage.list_at("configmaps", "ns", second)] == [
        "a",
        "b",
    ]


def test_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="compaction_interval must be > 0 seconds, got -1"):
        Compactor(Storage(), -1)

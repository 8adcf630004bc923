"""The thread-safe indexed store: keys, add/update/delete/replace, named indexes."""

from __future__ import annotations

import threading

import pytest

from manager.cache.store import (
    BY_CONTROLLER_UID,
    BY_NAMESPACE,
    BY_OWNER_UID,
    IndexError_,
    index_by_controller_uid,
    new_indexer,
)
from manager.keys import JsonDict


def obj(
    name: str,
    namespace: str | None = "default",
    *,
    rv: str = "1",
    owners: list[tuple[str, bool]] | None = None,
    labels: dict[str, str] | None = None,
) -> JsonDict:
    meta: JsonDict = {"name": name, "resourceVersion": rv}
    if namespace is not None:
        meta["namespace"] = namespace
    if owners:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": f"o-{uid}",
                "uid": uid,
                "controller": controller,
            }
            for uid, controller in owners
        ]
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


def by_app(o: JsonDict) -> list[str]:
    app = ((o.get("metadata") or {}).get("labels") or {}).get("app")
    return [app] if app else []


def names(objs: list[JsonDict]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objs)


# -- keyed storage -------------------------------------------------------------------


def test_add_get_list_keys() -> None:
    s = new_indexer()
    a, b, node = obj("a"), obj("b", "other"), obj("n1", None)
    for o in (a, b, node):
        s.add(o)
    assert len(s) == 3
    assert sorted(s.list_keys()) == ["default/a", "n1", "other/b"]
    assert s.get_by_key("default/a") is a
    assert s.get_by_key("n1") is node  # cluster-scoped: key is the bare name
    assert s.get_by_key("default/b") is None
    assert names(s.list()) == ["a", "b", "n1"]


def test_update_replaces_the_stored_object() -> None:
    s = new_indexer()
    s.add(obj("a", rv="1"))
    newer = obj("a", rv="2")
    s.update(newer)
    assert len(s) == 1
    assert s.get_by_key("default/a") is newer


def test_add_of_existing_key_replaces_it() -> None:
    s = new_indexer()
    s.add(obj("a", rv="1"))
    s.add(obj("a", rv="7"))
    assert len(s) == 1
    assert s.get_by_key("default/a")["metadata"]["resourceVersion"] == "7"  # type: ignore[index]


def test_delete_removes_and_is_idempotent() -> None:
    s = new_indexer()
    s.add(obj("a"))
    s.add(obj("b"))
    s.delete(obj("a", rv="99"))  # only the key matters
    assert s.list_keys() == ["default/b"]
    s.delete(obj("a"))  # absent: no error
    s.delete(obj("never"))
    assert s.list_keys() == ["default/b"]


def test_object_without_name_is_rejected() -> None:
    s = new_indexer()
    with pytest.raises(ValueError, match=r"metadata\.name"):
        s.add({"metadata": {"namespace": "x"}})


def test_replace_makes_store_hold_exactly_the_given_objects() -> None:
    s = new_indexer()
    s.add(obj("old", owners=[("u-old", True)]))
    s.add(obj("kept", rv="1"))
    kept2 = obj("kept", rv="2")
    s.replace([kept2, obj("new", "ns2")])
    assert sorted(s.list_keys()) == ["default/kept", "ns2/new"]
    assert s.get_by_key("default/kept") is kept2
    # indexes are rebuilt: the vanished object is no longer indexed anywhere
    assert s.by_index(BY_OWNER_UID, "u-old") == []
    assert sorted(s.index_values(BY_NAMESPACE)) == ["default", "ns2"]
    s.replace([])
    assert len(s) == 0
    assert s.index_values(BY_NAMESPACE) == []


# -- indexes -------------------------------------------------------------------------


def test_default_indexes() -> None:
    s = new_indexer()
    assert sorted(s.indexer_names()) == sorted([BY_NAMESPACE, BY_OWNER_UID, BY_CONTROLLER_UID])


def test_index_by_namespace() -> None:
    s = new_indexer()
    s.add(obj("a", "ns1"))
    s.add(obj("b", "ns1"))
    s.add(obj("c", "ns2"))
    s.add(obj("node", None))  # cluster-scoped: in no namespace bucket
    assert names(s.by_index(BY_NAMESPACE, "ns1")) == ["a", "b"]
    assert names(s.by_index(BY_NAMESPACE, "ns2")) == ["c"]
    assert s.by_index(BY_NAMESPACE, "nope") == []
    assert sorted(s.index_values(BY_NAMESPACE)) == ["ns1", "ns2"]
    assert sorted(s.index_keys(BY_NAMESPACE, "ns1")) == ["ns1/a", "ns1/b"]


def test_index_by_owner_and_controller_uid() -> None:
    s = new_indexer()
    s.add(obj("a", owners=[("rs-1", True), ("other", False)]))
    s.add(obj("b", owners=[("rs-1", False)]))
    s.add(obj("c", owners=[("rs-2", True)]))
    s.add(obj("orphan"))
    assert names(s.by_index(BY_OWNER_UID, "rs-1")) == ["a", "b"]
    assert names(s.by_index(BY_OWNER_UID, "other")) == ["a"]
    assert sorted(s.index_values(BY_OWNER_UID)) == ["other", "rs-1", "rs-2"]
    # only controller owners count for the controller index
    assert names(s.by_index(BY_CONTROLLER_UID, "rs-1")) == ["a"]
    assert s.by_index(BY_CONTROLLER_UID, "other") == []
    assert sorted(s.index_values(BY_CONTROLLER_UID)) == ["rs-1", "rs-2"]


def test_update_moves_object_between_index_values() -> None:
    s = new_indexer({"app": by_app, BY_CONTROLLER_UID: index_by_controller_uid})
    s.add(obj("a", labels={"app": "web"}, owners=[("rs-1", True)]))
    s.add(obj("b", labels={"app": "web"}))
    s.update(obj("a", rv="2", labels={"app": "db"}, owners=[("rs-2", True)]))
    assert names(s.by_index("app", "web")) == ["b"]
    assert names(s.by_index("app", "db")) == ["a"]
    assert s.by_index(BY_CONTROLLER_UID, "rs-1") == []
    assert s.index_keys(BY_CONTROLLER_UID, "rs-2") == ["default/a"]
    # an emptied value disappears from index_values
    s.update(obj("b", rv="2", labels={"app": "db"}))
    assert s.index_values("app") == ["db"]
    s.delete(obj("a"))
    s.delete(obj("b"))
    assert s.index_values("app") == []
    assert s.index_values(BY_CONTROLLER_UID) == []


def test_multi_valued_index_function() -> None:
    def by_keys(o: JsonDict) -> list[str]:
        return sorted(((o.get("metadata") or {}).get("labels") or {}).keys())

    s = new_indexer({"label-keys": by_keys})
    s.add(obj("a", labels={"x": "1", "y": "2"}))
    s.add(obj("b", labels={"y": "3"}))
    assert names(s.by_index("label-keys", "y")) == ["a", "b"]
    assert names(s.by_index("label-keys", "x")) == ["a"]
    s.update(obj("a", labels={"x": "1"}))
    assert names(s.by_index("label-keys", "y")) == ["b"]


def test_custom_index_registered_later_indexes_existing_objects() -> None:
    s = new_indexer()
    s.add(obj("a", labels={"app": "web"}))
    s.add(obj("b", labels={"app": "db"}))
    s.add(obj("c"))
    s.add_indexers({"app": by_app})
    assert "app" in s.indexer_names()
    assert names(s.by_index("app", "web")) == ["a"]
    assert sorted(s.index_values("app")) == ["db", "web"]
    # and objects added afterwards too
    s.add(obj("d", labels={"app": "web"}))
    assert sorted(s.index_keys("app", "web")) == ["default/a", "default/d"]


def test_registering_an_existing_index_name_fails() -> None:
    s = new_indexer({"app": by_app})
    with pytest.raises(IndexError_, match="app"):
        s.add_indexers({"app": by_app})
    assert s.indexer_names() == ["app"]


@pytest.mark.parametrize("query", ["by_index", "index_keys", "index_values"])
def test_unknown_index_is_an_error(query: str) -> None:
    s = new_indexer()
    s.add(obj("a"))
    with pytest.raises(IndexError_, match="nope"):
        if query == "index_values":
            s.index_values("nope")
        else:
            getattr(s, query)("nope", "x")
    with pytest.raises(KeyError):  # IndexError_ is a KeyError for callers that catch that
        s.by_index("nope", "x")


def test_no_indexes() -> None:
    s = new_indexer({})
    s.add(obj("a"))
    s.replace([obj("b")])
    s.delete(obj("b"))
    assert len(s) == 0
    with pytest.raises(IndexError_):
        s.by_index(BY_NAMESPACE, "default")


# -- concurrency ---------------------------------------------------------------------


def test_concurrent_writers_and_readers_keep_indexes_consistent() -> None:
    s = new_indexer({BY_NAMESPACE: lambda o: [o["metadata"]["namespace"]], "app": by_app})
    writers, per_writer = 4, 300
    start = threading.Barrier(writers + 2)
    errors: list[BaseException] = []
    done = threading.Event()

    def write(w: int) -> None:
        try:
            start.wait(timeout=10)
            for i in range(per_writer):
                name = f"w{w}-{i % 50}"
                s.add(obj(name, f"ns{w}", rv=str(i), labels={"app": f"a{i % 3}"}))
                if i % 7 == 0:
                    s.delete(obj(name, f"ns{w}"))
        except BaseException as exc:
            errors.append(exc)

    def read() -> None:
        try:
            start.wait(timeout=10)
            while not done.is_set():
                for value in s.index_values("app"):
                    for o in s.by_index("app", value):
                        assert by_app(o) == [value]  # never a stale index entry
                s.index_keys(BY_NAMESPACE, "ns0")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    threads += [threading.Thread(target=read) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads[:writers]:
        t.join(timeout=30)
    done.set()
    for t in threads[writers:]:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    # the final state matches a single-threaded replay, and indexes agree with items
    expected: dict[str, str] = {}
    for w in range(writers):
        for i in range(per_writer):
            key = f"ns{w}/w{w}-{i % 50}"
            if i % 7 == 0:
                expected.pop(key, None)
            else:
                expected[key] = f"a{i % 3}"
    assert sorted(s.list_keys()) == sorted(expected)
    for value in ("a0", "a1", "a2"):
        assert sorted(s.index_keys("app", value)) == sorted(
            k for k, v in expected.items() if v == value
        )
    for w in range(writers):
        assert sorted(s.index_keys(BY_NAMESPACE, f"ns{w}")) == sorted(
            k for k in expected if k.startswith(f"ns{w}/")
        )

"""Read-only cached objects: every way of changing a frozen dict or list raises a
TypeError that says what to do, every way of reading one works as on a plain object,
and every copy is plain and changeable."""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Callable
from typing import Any

import orjson
import pytest

import manager
from manager.cache.frozen import FrozenDict, FrozenList, freeze, freeze_in_place, thaw


def _pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-0",
            "namespace": "shop",
            "labels": {"app": "web"},
            "ownerReferences": [{"kind": "ReplicaSet", "uid": "u1", "controller": True}],
        },
        "spec": {
            "containers": [
                {"name": "main", "ports": [{"containerPort": 80}], "args": ["-v", "2"]},
            ],
            "nodeSelector": {},
            "matrix": [[1, 2], [3]],
        },
        "status": {"phase": "Running", "podIP": None, "ready": True, "score": 1.5},
    }


def _containers(obj: Any) -> list[Any]:
    """Every dict and list in ``obj``, ``obj`` included."""
    out = [obj]
    values = obj.values() if isinstance(obj, dict) else obj
    for v in values:
        if isinstance(v, dict | list):
            out.extend(_containers(v))
    return out


@pytest.fixture
def frozen() -> Any:
    return freeze_in_place(_pod())


def test_every_nested_dict_and_list_is_frozen(frozen: Any) -> None:
    found = _containers(frozen)
    assert len(found) == 16
    for c in found:
        assert type(c) in (FrozenDict, FrozenList), c


DICT_MUTATORS: list[tuple[str, Callable[[Any], object]]] = [
    ("setitem", lambda d: d.__setitem__("x", 1)),
    ("setitem existing", lambda d: d.__setitem__("app", "db")),
    ("delitem", lambda d: d.__delitem__("app")),
    ("update", lambda d: d.update(x=1)),
    ("update mapping", lambda d: d.update({"x": 1})),
    ("pop", lambda d: d.pop("app")),
    ("pop default", lambda d: d.pop("missing", None)),
    ("popitem", lambda d: d.popitem()),
    ("setdefault", lambda d: d.setdefault("x", {})),
    ("setdefault existing", lambda d: d.setdefault("app", "db")),
    ("clear", lambda d: d.clear()),
    ("ior", lambda d: d.__ior__({"x": 1})),
]


@pytest.mark.parametrize(("name", "change"), DICT_MUTATORS, ids=[n for n, _ in DICT_MUTATORS])
def test_a_dict_refuses_every_change(
    frozen: Any, name: str, change: Callable[[Any], object]
) -> None:
    labels = frozen["metadata"]["labels"]
    with pytest.raises(TypeError, match=r"read-only.*copy\.deepcopy\(obj\).*manager\.thaw"):
        change(labels)
    assert labels == {"app": "web"}


def test_augmented_assignment_on_a_dict_refuses(frozen: Any) -> None:
    labels = frozen["metadata"]["labels"]
    with pytest.raises(TypeError, match="read-only"):
        labels |= {"x": "y"}
    assert frozen["metadata"]["labels"] == {"app": "web"}


def test_the_statement_the_issue_names_raises(frozen: Any) -> None:
    with pytest.raises(TypeError, match=r"setting \['x'\] on a read-only dict"):
        frozen["metadata"]["labels"]["x"] = "y"
    with pytest.raises(TypeError, match="read-only"):
        frozen["metadata"]["annotations"] = {}
    with pytest.raises(TypeError, match="read-only"):
        del frozen["status"]


LIST_MUTATORS: list[tuple[str, Callable[[Any], object]]] = [
    ("setitem", lambda v: v.__setitem__(0, "x")),
    ("setitem slice", lambda v: v.__setitem__(slice(0, 1), ["x"])),
    ("delitem", lambda v: v.__delitem__(0)),
    ("delitem slice", lambda v: v.__delitem__(slice(None))),
    ("append", lambda v: v.append("x")),
    ("extend", lambda v: v.extend(["x"])),
    ("insert", lambda v: v.insert(0, "x")),
    ("remove", lambda v: v.remove("-v")),
    ("pop", lambda v: v.pop()),
    ("pop index", lambda v: v.pop(0)),
    ("clear", lambda v: v.clear()),
    ("sort", lambda v: v.sort()),
    ("sort key", lambda v: v.sort(key=len)),
    ("reverse", lambda v: v.reverse()),
    ("iadd", lambda v: v.__iadd__(["x"])),
    ("imul", lambda v: v.__imul__(2)),
]


@pytest.mark.parametrize(("name", "change"), LIST_MUTATORS, ids=[n for n, _ in LIST_MUTATORS])
def test_a_list_refuses_every_change(
    frozen: Any, name: str, change: Callable[[Any], object]
) -> None:
    args = frozen["spec"]["containers"][0]["args"]
    with pytest.raises(TypeError, match=r"read-only.*copy\.deepcopy\(obj\).*manager\.thaw"):
        change(args)
    assert args == ["-v", "2"]


def test_augmented_assignment_and_slices_on_a_list_refuse(frozen: Any) -> None:
    spec = frozen["spec"]
    containers = spec["containers"]
    with pytest.raises(TypeError, match="read-only"):
        containers += [{}]
    with pytest.raises(TypeError, match="read-only"):
        containers *= 2
    with pytest.raises(TypeError, match="read-only"):
        containers[:] = []
    with pytest.raises(TypeError, match="read-only"):
        containers[0]["ports"][0]["containerPort"] = 8080
    with pytest.raises(TypeError, match="read-only"):
        spec["matrix"][0].append(3)
    assert spec["containers"] == [
        {"name": "main", "ports": [{"containerPort": 80}], "args": ["-v", "2"]}
    ]


def test_every_reader_works(frozen: Any) -> None:
    plain = _pod()
    assert isinstance(frozen, dict) and isinstance(frozen["spec"]["containers"], list)
    assert frozen == plain and plain == frozen and (frozen != plain) is False
    assert frozen["spec"]["containers"] == plain["spec"]["containers"]
    assert frozen.get("missing") is None and frozen.get("metadata")["name"] == "web-0"
    assert list(frozen) == list(plain) and list(frozen.keys()) == list(plain.keys())
    assert list(frozen.items()) == list(plain.items())
    assert list(frozen.values()) == list(plain.values())
    assert "spec" in frozen and len(frozen) == 5
    assert list(reversed(frozen)) == list(reversed(plain))
    args = frozen["spec"]["containers"][0]["args"]
    assert args[0] == "-v" and args[-1] == "2" and args[:1] == ["-v"]
    assert args.index("2") == 1 and args.count("-v") == 1 and "2" in args
    assert sorted(args) == ["-v", "2"] and list(reversed(args)) == ["2", "-v"]
    assert args + ["x"] == ["-v", "2", "x"]  # noqa: RUF005 - the operator is under test
    assert args * 2 == ["-v", "2", "-v", "2"]
    assert repr(frozen) == repr(plain) and str(args) == str(["-v", "2"])
    assert frozen | {"x": 1} == {**plain, "x": 1}
    assert {"x": 1} | frozen == {"x": 1, **plain}


def test_serialization_is_the_same_as_a_plain_object(frozen: Any) -> None:
    plain = _pod()
    assert orjson.dumps(frozen) == orjson.dumps(plain)
    assert orjson.dumps(frozen, option=orjson.OPT_SORT_KEYS) == orjson.dumps(
        plain, option=orjson.OPT_SORT_KEYS
    )
    assert json.dumps(frozen) == json.dumps(plain)
    assert json.dumps(frozen, indent=2, sort_keys=True) == json.dumps(
        plain, indent=2, sort_keys=True
    )


def test_deepcopy_and_thaw_give_a_plain_changeable_copy(frozen: Any) -> None:
    for copied in (copy.deepcopy(frozen), thaw(frozen), manager.thaw(frozen)):
        assert copied == frozen
        for c in _containers(copied):
            assert type(c) in (dict, list), c
        copied["metadata"]["labels"]["x"] = "y"
        copied["spec"]["containers"][0]["args"].append("--more")
        copied["spec"]["matrix"][0][0] = 9
        assert frozen["metadata"]["labels"] == {"app": "web"}
        assert frozen["spec"]["containers"][0]["args"] == ["-v", "2"]
        assert frozen["spec"]["matrix"] == [[1, 2], [3]]


def test_deepcopy_of_a_plain_dict_holding_cached_objects_thaws_them(frozen: Any) -> None:
    holder = {"objects": [frozen], "one": frozen["metadata"]}
    copied = copy.deepcopy(holder)
    assert type(copied["objects"][0]) is dict and type(copied["one"]["labels"]) is dict
    copied["one"]["labels"]["x"] = "y"
    assert "x" not in frozen["metadata"]["labels"]


def test_shallow_copies_are_plain_at_the_top_and_frozen_below(frozen: Any) -> None:
    for shallow in (copy.copy(frozen), frozen.copy(), dict(frozen), {**frozen}, frozen | {}):
        assert type(shallow) is dict and shallow == frozen
        shallow["metadata"] = {**shallow["metadata"], "labels": {"x": "y"}}  # the top: free
        with pytest.raises(TypeError, match="read-only"):
            shallow["spec"]["containers"].append({})  # below: the cache's, read-only
    args = frozen["spec"]["containers"][0]["args"]
    for shallow_list in (copy.copy(args), args.copy(), list(args), args[:], [*args]):
        assert type(shallow_list) is list
        shallow_list.append("x")
    assert args == ["-v", "2"] and frozen["metadata"]["labels"] == {"app": "web"}


def test_pickling_keeps_it_frozen(frozen: Any) -> None:
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        back = pickle.loads(pickle.dumps(frozen, protocol=protocol))
        assert back == frozen
        assert type(back) is FrozenDict and type(back["spec"]["containers"]) is FrozenList
        with pytest.raises(TypeError, match="read-only"):
            back["metadata"]["labels"]["x"] = "y"


def test_freeze_is_a_copy_and_leaves_its_argument_alone() -> None:
    plain = _pod()
    frozen = freeze(plain)
    assert frozen == plain and frozen is not plain
    for c in _containers(plain):
        assert type(c) in (dict, list)
    plain["metadata"]["labels"]["x"] = "y"  # the original is still the caller's
    assert frozen["metadata"]["labels"] == {"app": "web"}
    assert manager.freeze(frozen) is frozen  # already frozen: nothing to do


def test_freeze_in_place_keeps_frozen_children_and_converts_plain_ones(frozen: Any) -> None:
    mixed = {**frozen, "metadata": {**frozen["metadata"], "resourceVersion": "9"}}
    out = freeze_in_place(mixed)
    assert out["spec"] is frozen["spec"]  # already frozen: kept as it is
    assert type(out["metadata"]) is FrozenDict
    assert out["metadata"]["labels"] is frozen["metadata"]["labels"]


def test_like_shares_what_did_not_change_and_converts_what_did(frozen: Any) -> None:
    new = _pod()
    new["metadata"]["resourceVersion"] = "2"
    new["status"]["phase"] = "Succeeded"
    new["spec"]["matrix"][1].append(4)
    out = freeze_in_place(new, like=frozen)
    assert out == {**_pod(), **new}
    assert out["metadata"] is not frozen["metadata"]
    assert out["metadata"]["labels"] is frozen["metadata"]["labels"]
    assert out["metadata"]["ownerReferences"] is frozen["metadata"]["ownerReferences"]
    assert out["spec"] is not frozen["spec"]
    assert out["spec"]["containers"] is frozen["spec"]["containers"]
    assert out["spec"]["matrix"][0] is frozen["spec"]["matrix"][0]
    assert out["spec"]["matrix"][1] == [3, 4] and frozen["spec"]["matrix"][1] == [3]
    assert out["status"] is not frozen["status"] and out["status"]["phase"] == "Succeeded"
    for c in _containers(out):
        assert type(c) in (FrozenDict, FrozenList), c


def test_like_never_shares_a_part_that_differs_in_type_or_length(frozen: Any) -> None:
    new = _pod()
    new["spec"]["containers"].append({"name": "sidecar"})
    new["spec"]["nodeSelector"] = []  # equal to nothing of another type: converted anew
    new["metadata"]["labels"] = {}
    out = freeze_in_place(new, like=frozen)
    assert out["spec"]["containers"] == [*_pod()["spec"]["containers"], {"name": "sidecar"}]
    assert type(out["spec"]["nodeSelector"]) is FrozenList
    assert out["metadata"]["labels"] == {} and type(out["metadata"]["labels"]) is FrozenDict
    # a plain object is no template: nothing of it may end up in the cache
    plain_like = _pod()
    out = freeze_in_place(_pod(), like=plain_like)
    assert out["spec"] is not plain_like["spec"] and type(out["spec"]) is FrozenDict

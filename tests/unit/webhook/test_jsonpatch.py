"""RFC 6902 patches between two objects: what a mutating webhook answers, checked by
applying them (and, for the exact operations, against what kube-apiserver expects)."""

from __future__ import annotations

import copy
import datetime
import random
from typing import Any

import pytest

from manager.webhook.jsonpatch import PatchError, apply_patch, create_patch, escape, pointer


def _roundtrip(before: Any, after: Any) -> list[dict[str, Any]]:
    patch = create_patch(before, after)
    assert apply_patch(copy.deepcopy(before), patch) == after
    return patch


def test_unchanged_objects_give_an_empty_patch() -> None:
    obj = {"a": [1, {"b": None}], "c": "x"}
    assert create_patch(obj, copy.deepcopy(obj)) == []


def test_added_removed_and_replaced_keys() -> None:
    before = {"metadata": {"name": "w", "labels": {"old": "1", "keep": "k"}}, "spec": {"n": 1}}
    after = {"metadata": {"name": "w", "labels": {"keep": "k", "new": "2"}}, "spec": {"n": 2}}
    assert _roundtrip(before, after) == [
        {"op": "remove", "path": "/metadata/labels/old"},
        {"op": "add", "path": "/metadata/labels/new", "value": "2"},
        {"op": "replace", "path": "/spec/n", "value": 2},
    ]


def test_keys_with_slash_and_tilde_are_escaped() -> None:
    before = {"metadata": {"annotations": {}}}
    after = {"metadata": {"annotations": {"example.com/owner": "a", "x~y": "b", "~/": "c"}}}
    assert [op["path"] for op in _roundtrip(before, after)] == [
        "/metadata/annotations/example.com~1owner",
        "/metadata/annotations/x~0y",
        "/metadata/annotations/~0~1",
    ]
    assert escape("a~1/b") == "a~01~1b"  # ~ first, or "/" would become "~01"
    assert pointer("spec", "containers", 0, "a/b") == "/spec/containers/0/a~1b"


def test_none_is_a_value_and_not_an_absent_key() -> None:
    assert _roundtrip({}, {"a": None}) == [{"op": "add", "path": "/a", "value": None}]
    assert _roundtrip({"a": 1}, {"a": None}) == [{"op": "replace", "path": "/a", "value": None}]
    assert _roundtrip({"a": None}, {}) == [{"op": "remove", "path": "/a"}]
    assert _roundtrip({"a": None}, {"a": None}) == []


def test_lists_compare_by_index_then_grow_or_shrink_at_the_end() -> None:
    before = {"spec": {"containers": [{"name": "a", "env": []}, {"name": "b"}]}}
    after = {"spec": {"containers": [{"name": "a", "env": [{"name": "X", "value": "1"}]}]}}
    assert _roundtrip(before, after) == [
        {"op": "add", "path": "/spec/containers/0/env/0", "value": {"name": "X", "value": "1"}},
        {"op": "remove", "path": "/spec/containers/1"},
    ]
    # several removed: highest index first, so each path is valid when it is applied
    assert _roundtrip([1, 2, 3, 4], [1]) == [
        {"op": "remove", "path": "/3"},
        {"op": "remove", "path": "/2"},
        {"op": "remove", "path": "/1"},
    ]
    assert _roundtrip([1], [1, 2, 3]) == [
        {"op": "add", "path": "/1", "value": 2},
        {"op": "add", "path": "/2", "value": 3},
    ]


def test_a_changed_type_is_a_replace_and_bool_is_not_a_number() -> None:
    assert _roundtrip({"a": {"b": 1}}, {"a": [1]}) == [
        {"op": "replace", "path": "/a", "value": [1]}
    ]
    assert _roundtrip({"a": 1}, {"a": True}) == [{"op": "replace", "path": "/a", "value": True}]
    assert _roundtrip({"a": "1"}, {"a": 1}) == [{"op": "replace", "path": "/a", "value": 1}]
    assert create_patch({"a": 1}, {"a": 1.0}) == []  # one JSON number


def test_the_whole_document_replaced() -> None:
    assert _roundtrip(1, {"a": 1}) == [{"op": "replace", "path": "", "value": {"a": 1}}]


def test_values_that_are_not_json_are_refused_with_their_path() -> None:
    with pytest.raises(PatchError, match=r"/spec/when: datetime is not a JSON value"):
        create_patch({"spec": {}}, {"spec": {"when": datetime.datetime(2026, 1, 1)}})
    with pytest.raises(PatchError, match=r"/spec/tags/1: set is not a JSON value"):
        create_patch({"spec": {}}, {"spec": {"tags": ["a", {"x"}]}})
    with pytest.raises(PatchError, match=r"/spec: a key that is not a string: 1"):
        create_patch({"spec": {}}, {"spec": {1: "one"}})
    with pytest.raises(PatchError, match=r"/spec/ratio: nan is not a JSON number"):
        create_patch({"spec": {}}, {"spec": {"ratio": float("nan")}})


def test_apply_reports_a_path_that_does_not_exist() -> None:
    with pytest.raises(PatchError, match="does not exist"):
        apply_patch({"a": {}}, [{"op": "remove", "path": "/a/b"}])
    with pytest.raises(PatchError, match="out of range"):
        apply_patch({"a": [1]}, [{"op": "replace", "path": "/a/3", "value": 1}])
    doc = apply_patch({"a": [1, 2]}, [{"op": "add", "path": "/a/-", "value": 3}])
    assert doc == {"a": [1, 2, 3]}
    moved = apply_patch({"a": {"x": 1}}, [{"op": "move", "from": "/a/x", "path": "/b"}])
    assert moved == {"a": {}, "b": 1}


def _random_json(rng: random.Random, depth: int) -> Any:
    kind = rng.randrange(7 if depth > 0 else 4)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.randrange(-3, 4)
    if kind == 2:
        return rng.choice(["", "a", "a/b", "~", "x~1"])
    if kind == 3:
        return rng.choice([0.5, 2.0])
    if kind in (4, 5):
        keys = ["a", "b", "c/d", "e~f", ""]
        return {k: _random_json(rng, depth - 1) for k in rng.sample(keys, rng.randrange(4))}
    return [_random_json(rng, depth - 1) for _ in range(rng.randrange(4))]


def _mutate(rng: random.Random, value: Any, depth: int) -> Any:
    if isinstance(value, dict) and value and rng.random() < 0.7:
        out = dict(value)
        key = rng.choice(sorted(out))
        if rng.random() < 0.3:
            del out[key]
        else:
            out[key] = _mutate(rng, out[key], depth - 1)
        return out
    if isinstance(value, list) and value and rng.random() < 0.7:
        out_list = list(value)
        i = rng.randrange(len(out_list))
        out_list[i] = _mutate(rng, out_list[i], depth - 1)
        return out_list
    return _random_json(rng, depth)


def test_random_documents_roundtrip() -> None:
    rng = random.Random(6902)
    for _ in range(2000):
        before = _random_json(rng, 4)
        after = _mutate(rng, copy.deepcopy(before), 4)
        patched = apply_patch(copy.deepcopy(before), create_patch(before, after))
        assert create_patch(patched, after) == [], (before, after)

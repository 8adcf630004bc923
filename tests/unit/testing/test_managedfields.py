"""Unit tests of field ownership (structured-merge-diff's sets, compare, merge, apply)."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.machinery import managedfields as mf
from apiserver.machinery import typeinfo

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "ports": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["port", "protocol"],
                    "items": {
                        "type": "object",
                        "properties": {
                            "port": {"type": "integer"},
                            "protocol": {"type": "string", "default": "TCP"},
                            "name": {"type": "string"},
                        },
                    },
                },
                "tags": {
                    "type": "array",
                    "x-kubernetes-list-type": "set",
                    "items": {"type": "string"},
                },
                "args": {"type": "array", "items": {"type": "string"}},
                "selector": {
                    "type": "object",
                    "x-kubernetes-map-type": "atomic",
                    "additionalProperties": {"type": "string"},
                },
            },
        }
    },
}
CR = typeinfo.from_crd_schema(SCHEMA)


def _cr(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "x.io/v1", "kind": "W", "metadata": {"name": "w"}, "spec": spec}


def test_set_operations_keep_membership() -> None:
    a = {"f:a": {}, "f:b": {".": {}, "f:c": {}}}
    b = {"f:b": {"f:c": {}}, "f:d": {}}
    assert mf.union(a, b) == {"f:a": {}, "f:b": {".": {}, "f:c": {}}, "f:d": {}}
    assert mf.difference(a, b) == {"f:a": {}, "f:b": {}}
    assert mf.intersection(a, b) == {"f:b": {"f:c": {}}}
    assert list(mf.leaves(a)) == [("f:a",), ("f:b",), ("f:b", "f:c")]


def test_paths_print_as_kube_prints_them() -> None:
    path = ("f:spec", 'k:{"port":80,"protocol":"TCP"}', "f:name")
    assert mf.path_string(path) == '.spec[port=80,protocol="TCP"].name'
    assert mf.path_string(("f:spec", "f:tags", 'v:"a"')) == '.spec.tags[="a"]'


def test_keys_take_their_schema_default() -> None:
    fields = mf.to_set(_cr(ports=[{"port": 80}]), CR)
    assert fields["f:spec"]["f:ports"] == {
        'k:{"port":80,"protocol":"TCP"}': {".": {}, "f:port": {}}
    }


def test_atomic_lists_and_maps_are_leaves() -> None:
    fields = mf.to_set(_cr(args=["a", "b"], selector={"x": "y"}), CR)
    assert fields["f:spec"] == {"f:args": {}, "f:selector": {}}


def test_update_entries_move_ownership() -> None:
    old = _cr(tags=["a"])
    new = _cr(tags=["a", "b"], args=["x"])
    first = mf.record_update(None, old, [], manager="one", api_version="x.io/v1", t=CR)
    second = mf.record_update(old, new, first, manager="two", api_version="x.io/v1", t=CR)
    owners = {e["manager"]: e["fieldsV1"] for e in second}
    # created: the spec and the list were absent before, so both are members
    # (structured-merge-diff's compare marks every non-leaf node the old side lacks)
    assert owners["one"] == {"f:spec": {".": {}, "f:tags": {".": {}, 'v:"a"': {}}}}
    assert owners["two"] == {"f:spec": {"f:args": {}, "f:tags": {'v:"b"': {}}}}
    assert mf.record_update(new, new, second, manager="two", api_version="x.io/v1", t=CR) is second


def test_apply_merges_list_maps_by_key_and_prunes_what_it_stopped_applying() -> None:
    live, entries = mf.apply(
        None,
        _cr(ports=[{"port": 80, "name": "http"}, {"port": 81}]),
        [],
        manager="a",
        api_version="x.io/v1",
        t=CR,
        force=False,
    )
    live, entries = mf.apply(
        live,
        _cr(ports=[{"port": 82}]),
        entries,
        manager="b",
        api_version="x.io/v1",
        t=CR,
        force=False,
    )
    assert [p["port"] for p in live["spec"]["ports"]] == [80, 81, 82]
    live, entries = mf.apply(
        live,
        _cr(ports=[{"port": 80}]),
        entries,
        manager="a",
        api_version="x.io/v1",
        t=CR,
        force=False,
    )
    assert live["spec"]["ports"] == [{"port": 80}, {"port": 82}]


def test_apply_conflicts_name_every_field() -> None:
    live = _cr(args=["x"], selector={"a": "b"})
    entries = mf.record_update(None, live, [], manager="writer", api_version="x.io/v1", t=CR)
    with pytest.raises(mf.ConflictError) as caught:
        mf.apply(
            live,
            _cr(args=["y"], selector={"a": "c"}),
            entries,
            manager="applier",
            api_version="x.io/v1",
            t=CR,
            force=False,
        )
    assert [c.path for c in caught.value.conflicts] == [".spec.args", ".spec.selector"]
    assert caught.value.message() == (
        'Apply failed with 2 conflicts: conflicts with "writer" using x.io/v1:\n'
        "- .spec.args\n- .spec.selector"
    )
    merged, after = mf.apply(
        live,
        _cr(args=["y"]),
        entries,
        manager="applier",
        api_version="x.io/v1",
        t=CR,
        force=True,
    )
    assert merged["spec"]["args"] == ["y"]
    owners = {e["manager"]: e["fieldsV1"] for e in after}
    assert owners["writer"]["f:spec"].get("f:args") is None


def test_builtin_types_come_from_the_models() -> None:
    pod = typeinfo.builtin("", "v1", "Pod")
    assert pod is not None
    containers = pod.fields()["spec"].fields()["containers"]
    assert (containers.list_type, containers.keys) == ("map", ("name",))
    ports = containers.elem.fields()["ports"] if containers.elem else None
    assert ports is not None and ports.keys == ("containerPort", "protocol")
    assert pod.fields()["metadata"].fields()["labels"].kind == typeinfo.MAP


def test_update_managers_are_capped_at_ten() -> None:
    obj: dict[str, Any] = _cr()
    entries: list[dict[str, Any]] = []
    for i in range(12):
        new = _cr(args=[str(i)], **{"tags": [f"t{j}" for j in range(i + 1)]})
        entries = mf.record_update(
            obj, new, entries, manager=f"m{i:02d}", api_version="x.io/v1", t=CR
        )
        obj = new
    updaters = [e for e in entries if e["operation"] == "Update"]
    assert len(updaters) == 10
    managers = {e["manager"] for e in updaters}
    assert "ancient-changes" in managers
    assert "m11" in managers


CM = typeinfo.builtin("", "v1", "ConfigMap")


def test_prune_keeps_a_map_owned_whole_while_a_key_of_it_is_applied() -> None:
    live = {"metadata": {"name": "c", "annotations": {"x": "1"}}, "data": {"a": "1", "b": "1"}}
    last = {"f:data": {".": {}, "f:a": {}, "f:b": {}}, "f:metadata": {"f:annotations": {"f:x": {}}}}
    managed = {"f:metadata": {"f:name": {}}, "f:data": {"f:a": {}}}
    assert mf.prune(live, last, managed, CM) == {"metadata": {"name": "c"}, "data": {"a": "1"}}


def test_prune_keeps_what_it_did_not_apply_last_time_and_what_others_manage() -> None:
    live = {"metadata": {"name": "c"}, "data": {"a": "1", "b": "1", "c": "1"}}
    last = {"f:data": {"f:a": {}, "f:b": {}}}
    managed = {"f:metadata": {"f:name": {}}, "f:data": {"f:b": {}}}
    pruned = mf.prune(live, last, managed, CM)
    assert pruned == {"metadata": {"name": "c"}, "data": {"b": "1", "c": "1"}}
    assert mf.prune(live, {}, managed, CM) is live


def test_prune_drops_a_map_it_empties() -> None:
    live = {"metadata": {"name": "c"}, "data": {"a": "1"}}
    pruned = mf.prune(live, {"f:data": {"f:a": {}}}, {"f:data": {}}, CM)
    assert pruned == {"metadata": {"name": "c"}}


def test_kubectl_apply_forces_only_what_last_applied_records_unchanged() -> None:
    recorded = '{"apiVersion":"v1","data":{"a":"1","b":"1"},"kind":"ConfigMap"}\n'
    live = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "annotations": {mf.LAST_APPLIED: recorded}},
        "data": {"a": "1", "b": "9"},
    }
    csa = {
        "manager": "kubectl-client-side-apply",
        "operation": "Update",
        "apiVersion": "v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:data": {".": {}, "f:a": {}, "f:b": {}}},
    }
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    ok = {**config, "data": {"a": "2"}}
    merged, entries = mf.apply(
        live, ok, [csa], manager="kubectl", api_version="v1", t=CM, force=False
    )
    assert [(e["manager"], e["fieldsV1"]) for e in entries] == [
        ("kubectl", {"f:data": {"f:a": {}}}),
        ("kubectl-client-side-apply", {"f:data": {".": {}, "f:b": {}}}),
    ]
    assert merged["data"] == {"a": "2", "b": "9"}
    assert merged["metadata"]["annotations"][mf.LAST_APPLIED] == (
        '{"apiVersion":"v1","data":{"a":"2"},"kind":"ConfigMap","metadata":{"name":"c"}}\n'
    )
    with pytest.raises(mf.ConflictError) as clash:  # b changed since: not the CSA's to give
        mf.apply(
            live,
            {**config, "data": {"b": "2"}},
            [csa],
            manager="kubectl",
            api_version="v1",
            t=CM,
            force=False,
        )
    assert [c.path for c in clash.value.conflicts] == [".data.b"]
    with pytest.raises(mf.ConflictError):  # another manager: no upgrade
        mf.apply(live, ok, [csa], manager="other", api_version="v1", t=CM, force=False)


def test_last_applied_is_encoded_as_go_encodes_a_map() -> None:
    obj = {"metadata": {"annotations": {mf.LAST_APPLIED: "x"}}}
    sent = {"kind": "K", "metadata": {"annotations": {mf.LAST_APPLIED: "x", "n": "<&>"}}, "v": 1.0}
    updated = mf._update_last_applied(obj, sent)
    assert updated["metadata"]["annotations"][mf.LAST_APPLIED] == (
        '{"kind":"K","metadata":{"annotations":{"n":"\\u003c\\u0026\\u003e"}},"v":1}\n'
    )
    assert mf._update_last_applied({"metadata": {}}, sent) == {"metadata": {}}


POD = typeinfo.builtin("", "v1", "Pod")


def test_a_create_marks_what_the_zero_value_lacks() -> None:
    """A built-in's zero value has its structs and required lists (null), not its
    optional maps: those, list items and all inside an added item are members."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"a": "b"}},
        "spec": {
            "containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}],
            "nodeSelector": {"x": "y"},
        },
    }
    (entry,) = mf.record_update(None, pod, [], manager="m", api_version="v1", t=POD)
    port = 'k:{"containerPort":80,"protocol":"TCP"}'
    assert entry["fieldsV1"] == {
        "f:metadata": {"f:labels": {".": {}, "f:a": {}}},
        "f:spec": {
            "f:containers": {
                'k:{"name":"c"}': {
                    ".": {},
                    "f:name": {},
                    "f:image": {},
                    "f:ports": {".": {}, port: {".": {}, "f:containerPort": {}}},
                }
            },
            "f:nodeSelector": {".": {}, "f:x": {}},
        },
    }

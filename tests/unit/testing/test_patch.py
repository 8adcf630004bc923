"""Merge, JSON and strategic merge patches apply as kube-apiserver applies them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from apiserver.machinery.patch import (
    PatchError,
    json_merge_patch,
    json_patch,
    strategic_merge_patch,
)

# --- RFC 7386 ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
        ({"a": {"x": 1}}, {}, {"a": {"x": 1}}),
    ],
)
def test_json_merge_patch_rfc7386_examples(
    target: dict[str, Any], patch: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert json_merge_patch(target, patch) == expected


def test_json_merge_patch_mutates_nothing_and_shares_nothing() -> None:
    target = {"metadata": {"labels": {"a": "1"}}, "spec": {"x": [1]}}
    patch = {"metadata": {"labels": {"b": "2"}}, "data": {"k": ["v"]}}
    before_t, before_p = copy.deepcopy(target), copy.deepcopy(patch)
    out = json_merge_patch(target, patch)
    assert (target, patch) == (before_t, before_p)
    out["data"]["k"].append("w")
    out["spec"]["x"].append(2)
    assert (target, patch) == (before_t, before_p)


@pytest.mark.parametrize("patch", [None, [1], "x", 3])
def test_json_merge_patch_needs_an_object(patch: Any) -> None:
    with pytest.raises(PatchError) as exc:
        json_merge_patch({"a": 1}, patch)
    assert (exc.value.status, exc.value.reason) == (400, "BadRequest")


# --- RFC 6902 ----------------------------------------------------------------------------

DOC: dict[str, Any] = {"metadata": {"name": "x", "labels": {"a/b": "1"}}, "spec": {"l": [1, 2]}}


@pytest.mark.parametrize(
    ("ops", "expected"),
    [
        ([{"op": "add", "path": "/spec/n", "value": 3}], {"n": 3, "l": [1, 2]}),
        ([{"op": "add", "path": "/spec/l/-", "value": 3}], {"l": [1, 2, 3]}),
        ([{"op": "add", "path": "/spec/l/0", "value": 0}], {"l": [0, 1, 2]}),
        ([{"op": "add", "path": "/spec/l/2", "value": 3}], {"l": [1, 2, 3]}),
        ([{"op": "remove", "path": "/spec/l/0"}], {"l": [2]}),
        ([{"op": "replace", "path": "/spec/l/1", "value": 9}], {"l": [1, 9]}),
        ([{"op": "replace", "path": "/spec/l", "value": {}}], {"l": {}}),
        ([{"op": "copy", "from": "/spec/l", "path": "/spec/m"}], {"l": [1, 2], "m": [1, 2]}),
        ([{"op": "move", "from": "/spec/l", "path": "/spec/m"}], {"m": [1, 2]}),
        ([{"op": "move", "from": "/spec/l/0", "path": "/spec/l/-"}], {"l": [2, 1]}),
        (
            [
                {"op": "test", "path": "/spec/l", "value": [1, 2.0]},
                {"op": "add", "path": "/spec/ok", "value": True},
            ],
            {"l": [1, 2], "ok": True},
        ),
    ],
)
def test_json_patch_operations(ops: list[dict[str, Any]], expected: dict[str, Any]) -> None:
    assert json_patch(DOC, ops)["spec"] == expected


def test_json_patch_pointer_escapes() -> None:
    out = json_patch(DOC, [{"op": "replace", "path": "/metadata/labels/a~1b", "value": "2"}])
    assert out["metadata"]["labels"] == {"a/b": "2"}
    out = json_patch({"m": {}}, [{"op": "add", "path": "/m/t~0x", "value": 1}])
    assert out == {"m": {"t~x": 1}}


def test_json_patch_is_all_or_nothing_and_does_not_mutate() -> None:
    before = copy.deepcopy(DOC)
    ops = [
        {"op": "add", "path": "/spec/n", "value": [1]},
        {"op": "test", "path": "/metadata/name", "value": "y"},
    ]
    with pytest.raises(PatchError):
        json_patch(DOC, ops)
    assert before == DOC
    value = [1]
    out = json_patch(DOC, [{"op": "add", "path": "/spec/n", "value": value}])
    out["spec"]["n"].append(2)
    assert value == [1]
    assert before == DOC


@pytest.mark.parametrize(
    ("ops", "detail"),
    [
        ([{"op": "test", "path": "/metadata/name", "value": "y"}], "testing value /metadata/name"),
        ([{"op": "test", "path": "/spec/l/0", "value": True}], "testing value /spec/l/0 failed"),
        ([{"op": "remove", "path": "/spec/nope"}], "nonexistent key: nope"),
        ([{"op": "replace", "path": "/spec/nope", "value": 1}], "missing key: /spec/nope"),
        ([{"op": "add", "path": "/nope/x", "value": 1}], 'missing path: "/nope/x"'),
        ([{"op": "add", "path": "/spec/l/3", "value": 1}], "invalid index"),
        ([{"op": "remove", "path": "/spec/l/2"}], "invalid index"),
        ([{"op": "remove", "path": "/spec/l/-"}], "invalid index"),
        ([{"op": "add", "path": "/spec/l/01", "value": 1}], "invalid index"),
        ([{"op": "copy", "from": "/nope", "path": "/x"}], "missing from path: /nope"),
        ([{"op": "move", "from": "/spec", "path": "/spec/x"}], "is a child of"),
        ([{"op": "frob", "path": "/x"}], "Unexpected kind: frob"),
        ([{"path": "/x"}], "Unexpected kind: unknown"),
        ([{"op": "add", "path": "spec"}], "invalid JSON pointer"),
        ([{"op": "add", "path": "/x"}], "missing value"),
    ],
)
def test_json_patch_failures_are_422(ops: list[dict[str, Any]], detail: str) -> None:
    with pytest.raises(PatchError) as exc:
        json_patch(DOC, ops)
    assert (exc.value.status, exc.value.reason) == (422, "Invalid")
    assert exc.value.message == "the server rejected our request due to an error in our request"
    assert detail in exc.value.detail
    assert detail in str(exc.value)


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        ({"op": "add"}, "cannot unmarshal object into Go value of type jsonpatch.Patch"),
        ("x", "cannot unmarshal string into Go value of type jsonpatch.Patch"),
        (["x"], "cannot unmarshal string into Go value of type jsonpatch.Operation"),
    ],
)
def test_json_patch_that_is_not_a_list_of_objects_is_400(ops: Any, message: str) -> None:
    with pytest.raises(PatchError) as exc:
        json_patch(DOC, ops)
    assert (exc.value.status, exc.value.reason) == (400, "BadRequest")
    assert message in exc.value.message


def test_json_patch_test_of_missing_value_against_null_passes() -> None:
    assert json_patch({"a": 1}, [{"op": "test", "path": "/b", "value": None}]) == {"a": 1}


# --- strategic merge patch ---------------------------------------------------------------


def _pod(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


def _names(items: list[dict[str, Any]], key: str = "name") -> list[Any]:
    return [i[key] for i in items]


def test_containers_merge_by_name() -> None:
    pod = _pod(containers=[{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}])
    out = strategic_merge_patch(
        pod, {"spec": {"containers": [{"name": "b", "image": "b:2"}]}}, "Pod"
    )
    assert out["spec"]["containers"] == [
        {"name": "a", "image": "a:1"},
        {"name": "b", "image": "b:2"},
    ]


def test_new_list_elements_go_first_as_in_kube() -> None:
    pod = _pod(containers=[{"name": "a"}, {"name": "b"}])
    out = strategic_merge_patch(pod, {"spec": {"containers": [{"name": "c"}]}}, "Pod")
    assert _names(out["spec"]["containers"]) == ["c", "a", "b"]
    out = strategic_merge_patch(
        pod, {"spec": {"containers": [{"name": "b"}, {"name": "c"}]}}, "Pod"
    )
    assert _names(out["spec"]["containers"]) == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("field", "key", "old", "new"),
    [
        ("ports", "containerPort", [{"containerPort": 80, "name": "h"}], {"containerPort": 80}),
        ("env", "name", [{"name": "A", "value": "1"}], {"name": "A"}),
        ("volumeMounts", "mountPath", [{"mountPath": "/x", "name": "v"}], {"mountPath": "/x"}),
        ("volumeDevices", "devicePath", [{"devicePath": "/d", "name": "v"}], {"devicePath": "/d"}),
    ],
)
def test_container_lists_merge_by_their_keys(
    field: str, key: str, old: list[dict[str, Any]], new: dict[str, Any]
) -> None:
    pod = _pod(containers=[{"name": "c", field: old}])
    patch = {"spec": {"containers": [{"name": "c", field: [{**new, "extra": 1}]}]}}
    merged = strategic_merge_patch(pod, patch, "Pod")["spec"]["containers"][0][field]
    assert merged == [{**old[0], "extra": 1}]


@pytest.mark.parametrize(
    ("field", "key"),
    [("volumes", "name"), ("imagePullSecrets", "name"), ("hostAliases", "ip")],
)
def test_pod_spec_lists_merge_by_key_in_pods_and_templates(field: str, key: str) -> None:
    old = [{key: "1", "x": 1}, {key: "2", "x": 2}]
    pod = _pod(**{field: old})
    out = strategic_merge_patch(pod, {"spec": {field: [{key: "2", "x": 3}]}}, "Pod")
    assert out["spec"][field] == [{key: "1", "x": 1}, {key: "2", "x": 3}]
    deploy = {"spec": {"template": {"spec": {field: old}}}}
    patch = {"spec": {"template": {"spec": {field: [{key: "2", "x": 3}]}}}}
    for kind in ("Deployment", "ReplicaSet"):
        out = strategic_merge_patch(deploy, patch, kind)
        assert out["spec"]["template"]["spec"][field] == [{key: "1", "x": 1}, {key: "2", "x": 3}]


def test_template_containers_merge_in_deployments() -> None:
    deploy = {"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "1"}]}}}}
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "2"}]}}}}
    out = strategic_merge_patch(deploy, patch, "Deployment")
    assert out["spec"]["template"]["spec"]["containers"] == [{"name": "a", "image": "2"}]


def test_service_ports_merge_by_port() -> None:
    svc = {"spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443, "name": "https"}]}}
    out = strategic_merge_patch(
        svc, {"spec": {"ports": [{"port": 443, "targetPort": 8443}]}}, "Service"
    )
    assert out["spec"]["ports"][1] == {"port": 443, "name": "https", "targetPort": 8443}


def test_owner_references_merge_by_uid_and_finalizers_union() -> None:
    obj = {
        "metadata": {
            "ownerReferences": [{"uid": "1", "name": "a"}],
            "finalizers": ["x", "y"],
        }
    }
    patch = {
        "metadata": {
            "ownerReferences": [{"uid": "2", "name": "b"}],
            "finalizers": ["y", "z"],
        }
    }
    out = strategic_merge_patch(obj, patch, "ConfigMap")
    assert _names(out["metadata"]["ownerReferences"], "uid") == ["2", "1"]
    assert out["metadata"]["finalizers"] == ["x", "y", "z"]


@pytest.mark.parametrize("kind", ["Pod", "Deployment", "Node", "Namespace"])
def test_status_conditions_merge_by_type(kind: str) -> None:
    obj = {"status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "X"}]}}
    patch = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    out = strategic_merge_patch(obj, patch, kind)
    assert out["status"]["conditions"] == [{"type": "Ready", "status": "True"}, {"type": "X"}]


def test_lists_without_merge_key_are_replaced() -> None:
    pod = _pod(containers=[{"name": "c", "args": ["a", "b"]}], tolerations=[{"key": "k"}])
    patch = {"spec": {"containers": [{"name": "c", "args": ["z"]}], "tolerations": [{"key": "j"}]}}
    out = strategic_merge_patch(pod, patch, "Pod")
    assert out["spec"]["containers"][0]["args"] == ["z"]
    assert out["spec"]["tolerations"] == [{"key": "j"}]


def test_null_deletes_and_maps_merge() -> None:
    obj = {"metadata": {"labels": {"a": "1", "b": "2"}}, "data": {"k": "v"}}
    patch = {"metadata": {"labels": {"a": None, "c": "3"}}, "data": None}
    out = strategic_merge_patch(obj, patch, "ConfigMap")
    assert out == {"metadata": {"labels": {"b": "2", "c": "3"}}}


def test_patch_delete_directive_on_list_elements() -> None:
    pod = _pod(containers=[{"name": "a"}, {"name": "b"}])
    patch = {"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}
    out = strategic_merge_patch(pod, patch, "Pod")
    assert out["spec"]["containers"] == [{"name": "b"}]


def test_patch_replace_directive_on_list_and_map() -> None:
    pod = _pod(containers=[{"name": "a", "image": "x"}, {"name": "b"}])
    patch = {"spec": {"containers": [{"name": "c"}, {"$patch": "replace"}]}}
    assert strategic_merge_patch(pod, patch, "Pod")["spec"]["containers"] == [{"name": "c"}]
    obj = {"metadata": {"labels": {"a": "1"}}}
    patch2 = {"metadata": {"labels": {"b": "2", "$patch": "replace"}}}
    assert strategic_merge_patch(obj, patch2, "Secret")["metadata"]["labels"] == {"b": "2"}


def test_patch_delete_directive_on_a_map_empties_it() -> None:
    obj = {"data": {"a": "1"}}
    assert strategic_merge_patch(obj, {"data": {"$patch": "delete"}}, "ConfigMap") == {"data": {}}


def test_delete_from_primitive_list() -> None:
    obj = {"metadata": {"finalizers": ["a", "b", "c"]}}
    patch = {"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]}}
    out = strategic_merge_patch(obj, patch, "ConfigMap")
    assert out == {"metadata": {"finalizers": ["a", "c"]}}


def test_set_element_order_is_honoured() -> None:
    pod = _pod(containers=[{"name": "a"}, {"name": "b"}, {"name": "c"}])
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "c"}, {"name": "a"}, {"name": "b"}],
            "containers": [{"name": "a", "image": "x"}],
        }
    }
    out = strategic_merge_patch(pod, patch, "Pod")
    assert out["spec"]["containers"] == [{"name": "c"}, {"name": "a", "image": "x"}, {"name": "b"}]
    assert "$setElementOrder/containers" not in out["spec"]


def test_set_element_order_of_primitives() -> None:
    obj = {"metadata": {"finalizers": ["a", "b"]}}
    patch = {"metadata": {"$setElementOrder/finalizers": ["b", "a"]}}
    assert strategic_merge_patch(obj, patch, "Lease")["metadata"]["finalizers"] == ["b", "a"]


def test_set_element_order_must_cover_the_patch_list() -> None:
    pod = _pod(containers=[{"name": "a"}])
    patch = {
        "spec": {"$setElementOrder/containers": [{"name": "a"}], "containers": [{"name": "z"}]}
    }
    with pytest.raises(PatchError) as exc:
        strategic_merge_patch(pod, patch, "Pod")
    assert exc.value.status == 400


def test_retain_keys_drops_unlisted_keys() -> None:
    deploy = {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}}
    patch = {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}
    out = strategic_merge_patch(deploy, patch, "Deployment")
    assert out["spec"]["strategy"] == {"type": "Recreate"}
    bad = {"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {}}}}
    with pytest.raises(PatchError, match="retainKeys"):
        strategic_merge_patch(deploy, bad, "Deployment")


def test_new_values_lose_nulls_and_directives() -> None:
    out = strategic_merge_patch({}, {"spec": {"a": None, "b": {"c": None, "d": 1}}}, "Pod")
    assert out == {"spec": {"b": {"d": 1}}}


def test_strategic_merge_does_not_mutate_or_alias() -> None:
    pod = _pod(containers=[{"name": "a", "env": [{"name": "X", "value": "1"}]}])
    patch = {"spec": {"containers": [{"name": "b", "env": [{"name": "Y"}]}]}}
    before_pod, before_patch = copy.deepcopy(pod), copy.deepcopy(patch)
    out = strategic_merge_patch(pod, patch, "Pod")
    assert (pod, patch) == (before_pod, before_patch)
    for ctr in out["spec"]["containers"]:
        ctr["env"].append({"name": "Z"})
    assert (pod, patch) == (before_pod, before_patch)


def test_custom_resources_get_415() -> None:
    with pytest.raises(PatchError) as exc:
        strategic_merge_patch({"spec": {}}, {"spec": {"a": 1}}, "Widget")
    assert (exc.value.status, exc.value.reason) == (415, "UnsupportedMediaType")
    assert exc.value.message == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    )


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"spec": {"containers": [{"name": "a", "$patch": "bogus"}]}}, "unknown patch type: bogus"),
        ({"spec": {"$patch": "bogus"}}, "unknown patch type: bogus"),
        ({"spec": {"containers": [{"$patch": "merge"}]}}, "cannot yet be specified"),
    ],
)
def test_malformed_strategic_patches_are_400(patch: dict[str, Any], message: str) -> None:
    with pytest.raises(PatchError) as exc:
        strategic_merge_patch(_pod(containers=[{"name": "a"}]), patch, "Pod")
    assert (exc.value.status, exc.value.reason) == (400, "BadRequest")
    assert message in exc.value.message


def test_a_missing_merge_key_is_an_internal_error() -> None:
    with pytest.raises(PatchError) as exc:
        strategic_merge_patch(
            _pod(containers=[{"name": "a"}]), {"spec": {"containers": [{"image": "x"}]}}, "Pod"
        )
    assert (exc.value.status, exc.value.reason) == (500, "")
    assert exc.value.message == "map: map[image:x] does not contain declared merge key: name"


def test_strategic_patch_must_be_an_object() -> None:
    with pytest.raises(PatchError, match="cannot unmarshal array") as exc:
        strategic_merge_patch({}, [], "Pod")  # type: ignore[arg-type]
    assert exc.value.status == 400

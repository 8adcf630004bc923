"""Conformance: server-side apply and managedFields, as kube-apiserver's field manager does.

Each test names its field managers explicitly; on a real cluster other managers
(kube-controller-manager) only ever write ``status``, which these tests do not touch.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.integration.rawhttp import JSON_PATCH, MERGE, http, ok

APPLY = "application/apply-patch+yaml"
PAUSE_IMAGE = "registry.k8s.io/pause:3.9"


def _cm(name: str, data: dict[str, str], **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, **meta},
        "data": data,
    }


def _apply(
    api_client: Any, path: str, body: dict[str, Any], manager: str | None, **query: Any
) -> Any:
    params = dict(query)
    if manager is not None:
        params["fieldManager"] = manager
    return http(
        api_client, "PATCH", path, body=json.dumps(body).encode(), content_type=APPLY, query=params
    )


def _entries(obj: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(e["manager"], e["operation"]): e for e in obj["metadata"].get("managedFields") or []}


def test_apply_requires_a_field_manager(api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps/cm"
    response = _apply(api_client, path, _cm("cm", {"a": "1"}), None)
    assert response.status == 422, response.body
    body = response.body
    assert body["reason"] == "Invalid"
    assert body["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: '
        "is required for apply patch"
    )
    assert body["details"]["kind"] == "PatchOptions"
    assert body["details"]["group"] == "meta.k8s.io"
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueRequired",
            "message": "Required value: is required for apply patch",
            "field": "fieldManager",
        }
    ]
    assert http(api_client, "GET", path).status == 404


def test_force_is_refused_on_a_non_apply_patch(api_client: Any, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    ok(http(api_client, "POST", base, body=_cm("cm", {"a": "1"})))
    response = http(
        api_client,
        "PATCH",
        f"{base}/cm",
        body={"data": {"a": "2"}},
        content_type=MERGE,
        query={"force": True},
    )
    assert response.status == 422, response.body
    assert response.body["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: '
        "may not be specified for non-apply patch"
    )


def test_apply_creates_with_201_and_records_an_apply_entry(api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps/cm"
    config = _cm("cm", {"a": "1"}, labels={"app": "x"})
    response = _apply(api_client, path, config, "applier")
    assert response.status == 201, response.body
    obj = response.body
    assert obj["data"] == {"a": "1"}
    (entry,) = obj["metadata"]["managedFields"]
    assert entry["manager"] == "applier"
    assert entry["operation"] == "Apply"
    assert entry["apiVersion"] == "v1"
    assert entry["fieldsType"] == "FieldsV1"
    assert entry["time"].endswith("Z")
    assert "subresource" not in entry
    assert entry["fieldsV1"] == {"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {"f:app": {}}}}
    # The same apply again changes nothing: same resourceVersion, 200.
    again = _apply(api_client, path, config, "applier")
    assert again.status == 200, again.body
    assert again.body["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]


def test_create_records_an_update_entry_for_the_writer(api_client: Any, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    obj = ok(
        http(
            api_client,
            "POST",
            base,
            body=_cm("cm", {"a": "1"}),
            query={"fieldManager": "creator"},
        )
    )
    (entry,) = obj["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"], entry["apiVersion"]) == (
        "creator",
        "Update",
        "v1",
    )
    assert entry["fieldsV1"] == {"f:data": {".": {}, "f:a": {}}}


def test_create_records_the_maps_of_metadata_as_members(api_client: Any, namespace: str) -> None:
    """ObjectMeta exists (zero) before a create; its maps do not: each is added whole."""
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    body = _cm("cm", {"a": "1"}, labels={"app": "x"}, annotations={"note": "y"})
    obj = ok(http(api_client, "POST", base, body=body, query={"fieldManager": "creator"}))
    (entry,) = obj["metadata"]["managedFields"]
    assert entry["fieldsV1"] == {
        "f:data": {".": {}, "f:a": {}},
        "f:metadata": {
            "f:annotations": {".": {}, "f:note": {}},
            "f:labels": {".": {}, "f:app": {}},
        },
    }


def test_apply_conflicts_with_another_manager(api_client: Any, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    ok(
        http(
            api_client,
            "POST",
            base,
            body=_cm("cm", {"a": "1", "b": "1"}),
            query={"fieldManager": "creator"},
        )
    )
    path = f"{base}/cm"
    response = _apply(api_client, path, _cm("cm", {"a": "2"}), "applier")
    assert response.status == 409, response.body
    body = response.body
    assert body["reason"] == "Conflict"
    assert body["message"] == (
        'Apply failed with 1 conflict: conflict with "creator" using v1: .data.a'
    )
    assert body["details"]["causes"] == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "creator" using v1',
            "field": ".data.a",
        }
    ]
    two = _apply(api_client, path, _cm("cm", {"a": "2", "b": "2"}), "applier")
    assert two.status == 409
    assert two.body["message"] == (
        'Apply failed with 2 conflicts: conflicts with "creator" using v1:\n- .data.a\n- .data.b'
    )
    assert [c["field"] for c in two.body["details"]["causes"]] == [".data.a", ".data.b"]
    assert ok(http(api_client, "GET", path))["data"] == {"a": "1", "b": "1"}


def test_apply_with_the_same_value_shares_ownership(api_client: Any, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    ok(http(api_client, "POST", base, body=_cm("cm", {"a": "1"}), query={"fieldManager": "c"}))
    obj = ok(_apply(api_client, f"{base}/cm", _cm("cm", {"a": "1"}), "applier"), 200)
    entries = _entries(obj)
    assert entries[("applier", "Apply")]["fieldsV1"] == {"f:data": {"f:a": {}}}
    assert "f:a" in entries[("c", "Update")]["fieldsV1"]["f:data"]


def test_force_takes_ownership(api_client: Any, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    ok(http(api_client, "POST", base, body=_cm("cm", {"a": "1"}), query={"fieldManager": "c"}))
    obj = ok(_apply(api_client, f"{base}/cm", _cm("cm", {"a": "2"}), "applier", force=True), 200)
    assert obj["data"] == {"a": "2"}
    entries = _entries(obj)
    assert entries[("applier", "Apply")]["fieldsV1"] == {"f:data": {"f:a": {}}}
    creator = entries.get(("c", "Update"))
    assert creator is None or "f:a" not in creator["fieldsV1"].get("f:data", {})


def test_an_update_takes_ownership_from_an_applier(api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps/cm"
    ok(_apply(api_client, path, _cm("cm", {"a": "1"}), "applier"), 201)
    patched = ok(
        http(
            api_client,
            "PATCH",
            path,
            body={"data": {"a": "2"}},
            content_type=MERGE,
            query={"fieldManager": "patcher"},
        ),
        200,
    )
    entries = _entries(patched)
    assert ("applier", "Apply") not in entries  # it owned nothing else
    assert entries[("patcher", "Update")]["fieldsV1"] == {"f:data": {"f:a": {}}}
    response = _apply(api_client, path, _cm("cm", {"a": "1"}), "applier")
    assert response.status == 409
    assert response.body["message"] == (
        'Apply failed with 1 conflict: conflict with "patcher" using v1: .data.a'
    )


def test_fields_an_applier_stops_applying_are_removed(api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps/cm"
    ok(_apply(api_client, path, _cm("cm", {"a": "1", "b": "1"}, labels={"x": "1"}), "applier"))
    obj = ok(_apply(api_client, path, _cm("cm", {"a": "1"}), "applier"), 200)
    assert obj["data"] == {"a": "1"}
    assert "x" not in (obj["metadata"].get("labels") or {})
    assert _entries(obj)[("applier", "Apply")]["fieldsV1"] == {"f:data": {"f:a": {}}}


def test_a_field_another_manager_also_owns_is_kept(api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps/cm"
    ok(_apply(api_client, path, _cm("cm", {"a": "1", "b": "1"}), "one"))
    ok(_apply(api_client, path, _cm("cm", {"b": "1"}), "two"), 200)
    obj = ok(_apply(api_client, path, _cm("cm", {"a": "1"}), "one"), 200)
    assert obj["data"] == {"a": "1", "b": "1"}


def test_keyed_lists_merge_by_key(api_client: Any, namespace: str) -> None:
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments/web"
    labels = {"app": "web"}
    first = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "a", "image": PAUSE_IMAGE}]},
            },
        },
    }
    ok(_apply(api_client, path, first, "one"), 201)
    second = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"template": {"spec": {"containers": [{"name": "b", "image": PAUSE_IMAGE}]}}},
    }
    obj = ok(_apply(api_client, path, second, "two"), 200)
    names = [c["name"] for c in obj["spec"]["template"]["spec"]["containers"]]
    assert sorted(names) == ["a", "b"]
    entries = _entries(obj)
    two = entries[("two", "Apply")]["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]
    assert two == {'k:{"name":"b"}': {".": {}, "f:image": {}, "f:name": {}}}
    one = entries[("one", "Apply")]["fieldsV1"]["f:spec"]
    assert 'k:{"name":"a"}' in one["f:template"]["f:spec"]["f:containers"]
    assert one["f:selector"] == {}  # LabelSelector is atomic
    # "one" drops its container: only "b" stays.
    first["spec"]["template"]["spec"]["containers"] = []
    obj = ok(_apply(api_client, path, first, "one"), 200)
    assert [c["name"] for c in obj["spec"]["template"]["spec"]["containers"]] == ["b"]


def test_bad_dry_run_value_is_refused(api_client: Any, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    response = http(api_client, "POST", base, body=_cm("cm", {}), query={"dryRun": "Yes"})
    assert response.status == 422, response.body
    assert response.body["message"] == (
        'CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: '
        '["Yes"]: supported values: "All"'
    )
    assert http(api_client, "GET", f"{base}/cm").status == 404


def test_apply_of_an_undeclared_field_fails(api_client: Any, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps/cm"
    config = {**_cm("cm", {"a": "1"}), "extra": {"x": 1}}
    response = _apply(api_client, path, config, "applier")
    assert response.status == 500, response.body
    # structuredmerge.go names the applied configuration's own namespace and name
    # (objectGVKNN(patchObj)): this one names no namespace
    assert response.body["message"] == (
        "failed to create typed patch object (/cm; /v1, Kind=ConfigMap): "
        ".extra: field not declared in schema"
    )
    config["metadata"]["namespace"] = namespace
    response = _apply(api_client, path, config, "applier")
    assert response.status == 500, response.body
    assert response.body["message"].startswith(
        f"failed to create typed patch object ({namespace}/cm; /v1, Kind=ConfigMap): "
    )
    assert http(api_client, "GET", path).status == 404


def test_managed_fields_can_be_reset_and_then_belong_to_before_first_apply(
    api_client: Any, namespace: str
) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    created = ok(
        http(
            api_client,
            "POST",
            base,
            body=_cm("cm", {"a": "1"}),
            query={"fieldManager": "creator"},
        )
    )
    created["metadata"]["managedFields"] = [{}]
    reset = ok(http(api_client, "PUT", f"{base}/cm", body=created), 200)
    assert not reset["metadata"].get("managedFields")
    response = _apply(api_client, f"{base}/cm", _cm("cm", {"a": "2"}), "applier")
    assert response.status == 409, response.body
    assert response.body["message"] == (
        'Apply failed with 1 conflict: conflict with "before-first-apply" using v1: .data.a'
    )


# --- the upgrade from client-side apply (kubectl apply) to server-side apply ------------

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _client_side_applied(core: Any, namespace: str, name: str) -> dict[str, Any]:
    """What ``kubectl apply`` (client-side) creates: the manifest, its own JSON in the
    last-applied annotation, written by the ``kubectl-client-side-apply`` manager."""
    manifest = _cm(name, {"a": "1"}, annotations={}, namespace=namespace)
    body = _cm(
        name,
        {"a": "1"},
        annotations={LAST_APPLIED: json.dumps(manifest, sort_keys=True) + "\n"},
        namespace=namespace,
    )
    created = core.create_namespaced_config_map(
        namespace, body, field_manager="kubectl-client-side-apply"
    )
    return dict(core.api_client.sanitize_for_serialization(created))


def _official_apply(
    core: Any, namespace: str, name: str, value: str, manager: str, *, force: bool = False
) -> dict[str, Any]:
    applied = core.patch_namespaced_config_map(
        name,
        namespace,
        _cm(name, {"a": value}),
        field_manager=manager,
        force=force,
        _content_type=APPLY,
    )
    return dict(core.api_client.sanitize_for_serialization(applied))


def _fields(obj: dict[str, Any]) -> dict[tuple[str, str], Any]:
    return {(e["manager"], e["operation"]): e["fieldsV1"] for e in obj["metadata"]["managedFields"]}


def _union(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two FieldsV1 sets as one (``{}``: a member; ``"."``: a member with children)."""
    out: dict[str, Any] = {}
    for key in (*a, *(k for k in b if k not in a)):
        if key == ".":
            continue
        out[key] = _union(a[key], b[key]) if key in a and key in b else a.get(key, b.get(key))
    member = any(node == {} or "." in node for node in (a, b))
    return {".": {}, **out} if member and out else out


def test_kubectl_apply_takes_over_what_client_side_apply_set(
    api_client: Any, namespace: str
) -> None:
    """An apply by ``kubectl`` (kubectl's server-side manager) may change the fields the
    last-applied annotation of client-side apply records, where they still hold the
    recorded values: no conflict (lastappliedmanager.go); the server then rewrites the
    annotation to the applied configuration (lastappliedupdater.go)."""
    from kubernetes import client

    core = client.CoreV1Api(api_client)
    _client_side_applied(core, namespace, "cm")
    obj = _official_apply(core, namespace, "cm", "2", "kubectl")
    assert obj["data"] == {"a": "2"}
    fields = _fields(obj)
    assert fields[("kubectl", "Apply")] == {"f:data": {"f:a": {}}}
    assert "f:a" not in fields[("kubectl-client-side-apply", "Update")].get("f:data", {})
    expected = {"apiVersion": "v1", "data": {"a": "2"}, "kind": "ConfigMap"}
    expected["metadata"] = {"name": "cm"}
    assert (
        obj["metadata"]["annotations"][LAST_APPLIED]
        == json.dumps(expected, sort_keys=True, separators=(",", ":")) + "\n"
    )
    with pytest.raises(client.ApiException) as clash:
        _official_apply(core, namespace, "cm", "3", "other")
    assert clash.value.status == 409
    assert json.loads(clash.value.body)["message"] == (
        'Apply failed with 1 conflict: conflict with "kubectl": .data.a'
    )


def test_only_kubectl_takes_over_what_client_side_apply_set(
    api_client: Any, namespace: str
) -> None:
    """Another field manager gets the conflict (the opt-out kube documents)."""
    from kubernetes import client

    core = client.CoreV1Api(api_client)
    _client_side_applied(core, namespace, "cm")
    with pytest.raises(client.ApiException) as clash:
        _official_apply(core, namespace, "cm", "2", "other")
    assert clash.value.status == 409
    assert json.loads(clash.value.body)["message"] == (
        'Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using v1: .data.a'
    )


def test_kubectl_conflicts_on_fields_changed_since_client_side_apply(
    api_client: Any, namespace: str
) -> None:
    """A field whose live value no longer matches the last-applied annotation is not
    client-side apply's to give: ``kubectl`` gets the conflict."""
    from kubernetes import client

    core = client.CoreV1Api(api_client)
    _client_side_applied(core, namespace, "cm")
    core.patch_namespaced_config_map("cm", namespace, {"data": {"a": "5"}}, field_manager="editor")
    with pytest.raises(client.ApiException) as clash:
        _official_apply(core, namespace, "cm", "2", "kubectl")
    assert clash.value.status == 409
    assert json.loads(clash.value.body)["message"] == (
        'Apply failed with 1 conflict: conflict with "editor" using v1: .data.a'
    )


def test_apply_after_the_csa_migration_keeps_what_it_applies(
    api_client: Any, namespace: str
) -> None:
    """Client-side apply, a forced apply by ``other``, then kubectl's migration
    (csaupgrade: client-side apply's entry merged into ``other``'s Apply entry by a JSON
    patch of managedFields) and the apply sent again: only what ``other`` no longer
    applies (the annotation) goes; ``data``, which it owned as a whole and applies a key
    of, stays."""
    from kubernetes import client

    core = client.CoreV1Api(api_client)
    _client_side_applied(core, namespace, "cm")
    forced = _official_apply(core, namespace, "cm", "2", "other", force=True)
    assert forced["data"] == {"a": "2"}
    entries = forced["metadata"]["managedFields"]
    csa = next(e for e in entries if e["manager"] == "kubectl-client-side-apply")
    mine = next(e for e in entries if e["manager"] == "other")
    merged = {**mine, "fieldsV1": _union(mine["fieldsV1"], csa["fieldsV1"])}
    patch = [
        {
            "op": "test",
            "path": "/metadata/resourceVersion",
            "value": forced["metadata"]["resourceVersion"],
        },
        {"op": "replace", "path": "/metadata/managedFields", "value": [merged]},
    ]
    path = f"/api/v1/namespaces/{namespace}/configmaps/cm"
    migrated = ok(http(api_client, "PATCH", path, body=patch, content_type=JSON_PATCH))
    assert _fields(migrated) == {("other", "Apply"): merged["fieldsV1"]}
    again = _official_apply(core, namespace, "cm", "2", "other", force=True)
    assert again["data"] == {"a": "2"}
    assert "annotations" not in again["metadata"]
    assert _fields(again) == {("other", "Apply"): {"f:data": {"f:a": {}}}}
    assert core.read_namespaced_config_map("cm", namespace).data == {"a": "2"}

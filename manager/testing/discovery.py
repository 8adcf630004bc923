"""Discovery documents of the local API server (``/api``, ``/apis``, ``/apis/{g}/{v}``).

Shapes follow kube-apiserver's legacy (non-aggregated) discovery: ``APIVersions`` (which
carries no ``apiVersion``), ``APIGroupList``, ``APIGroup`` and ``APIResourceList``, with a
``{plural}/status`` entry for every resource that serves the status subresource.

Thread-safe: builds fresh documents from the registry on every call.
"""

from __future__ import annotations

from typing import Any

from manager.testing.registry import ResourceRegistry, ServedResource

__all__ = ["api_group", "api_group_list", "api_resource_list", "api_versions", "version_info"]

JsonDict = dict[str, Any]

KUBE_VERSION = ("1", "36", "v1.36.0")


def version_info() -> JsonDict:
    major, minor, git = KUBE_VERSION
    return {
        "major": major,
        "minor": minor,
        "gitVersion": f"{git}+overseer-local",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "python",
        "compiler": "cpython",
        "platform": "linux/amd64",
    }


def api_versions(server_address: str) -> JsonDict:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group(group: str, versions: list[str]) -> JsonDict:
    gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}


def api_group_list(registry: ResourceRegistry) -> JsonDict:
    groups = registry.group_versions()
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group(g, vs) for g, vs in sorted(groups.items())],
    }


def api_group(registry: ResourceRegistry, group: str) -> JsonDict | None:
    versions = registry.group_versions().get(group)
    if not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(group, versions)}


def _entries(served: ServedResource) -> list[JsonDict]:
    r = served.resource
    main: JsonDict = {
        "name": r.plural,
        "singularName": served.singular,
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": list(served.verbs),
    }
    if served.short_names:
        main["shortNames"] = list(served.short_names)
    if served.categories:
        main["categories"] = list(served.categories)
    out = [main]
    if r.has_status:
        out.append(
            {
                "name": f"{r.plural}/status",
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": ["get", "patch", "update"],
            }
        )
    if r.kind == "Namespace" and not r.group:
        out.append(
            {
                "name": "namespaces/finalize",
                "singularName": "",
                "namespaced": False,
                "kind": "Namespace",
                "verbs": ["update"],
            }
        )
    return out


def api_resource_list(registry: ResourceRegistry, group: str, version: str) -> JsonDict | None:
    served = [s for s in registry if s.resource.group == group and s.resource.version == version]
    if not served:
        return None
    gv = f"{group}/{version}" if group else version
    resources = [e for s in sorted(served, key=lambda s: s.resource.plural) for e in _entries(s)]
    out: JsonDict = {"kind": "APIResourceList"}
    if group:  # kube-apiserver omits apiVersion for the core group
        out["apiVersion"] = "v1"
    out.update({"groupVersion": gv, "resources": resources})
    return out


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def openapi_v3_root(registry: ResourceRegistry) -> JsonDict:
    """``/openapi/v3``: where each group-version's document lives."""
    gvs = {(s.resource.group, s.resource.version) for s in registry}
    return {
        "paths": {
            _gv_path(g, v): {"serverRelativeURL": f"/openapi/v3/{_gv_path(g, v)}?hash=local"}
            for g, v in sorted(gvs)
        }
    }


def openapi_v3_group_version(
    registry: ResourceRegistry, group: str, version: str
) -> JsonDict | None:
    """A minimal OpenAPI v3 document for one group-version.

    It lists each resource's paths and operations with ``x-kubernetes-group-version-kind``
    and the query parameters they accept, which is what kubectl reads to decide that the
    server validates fields itself (``fieldValidation``). Schemas are open objects: the
    local server does not publish the full Kubernetes schemas.
    """
    served = [s for s in registry if s.resource.group == group and s.resource.version == version]
    if not served:
        return None
    params = [
        {"name": n, "in": "query", "schema": {"type": "string"}}
        for n in ("dryRun", "fieldManager", "fieldValidation", "pretty")
    ]
    ok = {
        "200": {
            "description": "OK",
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
    }
    paths: JsonDict = {}
    for s in served:
        r = s.resource
        gvk = {"group": r.group, "version": r.version, "kind": r.kind}
        base = f"/{_gv_path(r.group, r.version)}"
        if r.namespaced:
            base = f"{base}/namespaces/{{namespace}}"

        def op(action: str, *, gvk: JsonDict = gvk) -> JsonDict:
            return {
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
                "parameters": params,
                "responses": ok,
            }

        paths[f"{base}/{r.plural}"] = {
            "get": op("list"),
            "post": op("post"),
            "delete": op("deletecollection"),
        }
        paths[f"{base}/{r.plural}/{{name}}"] = {
            "get": op("get"),
            "put": op("put"),
            "patch": op("patch"),
            "delete": op("delete"),
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": KUBE_VERSION[2]},
        "paths": paths,
        "components": {"schemas": {}},
    }

"""Discovery documents of the local API server (``/api``, ``/apis``, ``/apis/{g}/{v}``).

Shapes follow kube-apiserver's legacy (non-aggregated) discovery: ``APIVersions`` (which
carries no ``apiVersion``), ``APIGroupList``, ``APIGroup`` and ``APIResourceList``, with a
``{plural}/status`` entry for every resource that serves the status subresource.

Thread-safe: builds fresh documents from the registry on every call.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any, Final

from apiserver.api.resources import ResourceRegistry, ServedResource

__all__ = [
    "aggregated",
    "api_group",
    "api_group_list",
    "api_resource_list",
    "api_versions",
    "storage_version_hash",
    "version_info",
]

JsonDict = dict[str, Any]

KUBE_VERSION = ("1", "36", "v1.36.0")
MIN_COMPATIBILITY = ("1", "35")  # a binary is compatible with the previous minor


def version_info() -> JsonDict:
    """``/version``: version.Info of 1.36, emulating itself (no --emulated-version)."""
    major, minor, git = KUBE_VERSION
    return {
        "major": major,
        "minor": minor,
        "emulationMajor": major,
        "emulationMinor": minor,
        "minCompatibilityMajor": MIN_COMPATIBILITY[0],
        "minCompatibilityMinor": MIN_COMPATIBILITY[1],
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


# groupPriorityMinimum of the built-in groups (kube-apiserver's automanaged APIServices):
# discovery lists groups by it, highest first; CRD groups get 1000.
GROUP_PRIORITY: Final = {
    "": 18000,
    "apiregistration.k8s.io": 18000,
    "apps": 17800,
    "events.k8s.io": 17750,
    "authentication.k8s.io": 17700,
    "authorization.k8s.io": 17600,
    "autoscaling": 17500,
    "batch": 17400,
    "certificates.k8s.io": 17300,
    "networking.k8s.io": 17200,
    "policy": 17100,
    "rbac.authorization.k8s.io": 17000,
    "storage.k8s.io": 16800,
    "admissionregistration.k8s.io": 16700,
    "apiextensions.k8s.io": 16700,
    "scheduling.k8s.io": 16600,
    "coordination.k8s.io": 16500,
    "node.k8s.io": 16300,
    "discovery.k8s.io": 16200,
    "resource.k8s.io": 16200,
    "flowcontrol.apiserver.k8s.io": 16100,
}


def _ordered_groups(registry: ResourceRegistry) -> list[tuple[str, list[str]]]:
    groups = registry.group_versions()
    return sorted(groups.items(), key=lambda item: (-GROUP_PRIORITY.get(item[0], 1000), item[0]))


def api_group_list(registry: ResourceRegistry) -> JsonDict:
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group(g, vs) for g, vs in _ordered_groups(registry)],
    }


def api_group(registry: ResourceRegistry, group: str) -> JsonDict | None:
    versions = registry.group_versions().get(group)
    if not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(group, versions)}


_GET_PATCH_UPDATE: Final = ("get", "patch", "update")
# subresource -> (group, version, kind of its body; "" = the parent's), verbs
_SUBRESOURCES: Final[dict[str, tuple[tuple[str, str, str], tuple[str, ...]]]] = {
    "status": (("", "", ""), _GET_PATCH_UPDATE),
    "scale": (("autoscaling", "v1", "Scale"), _GET_PATCH_UPDATE),
    "binding": (("", "", "Binding"), ("create",)),
    "eviction": (("policy", "v1", "Eviction"), ("create",)),
    "log": (("", "", ""), ("get",)),
    "token": (("authentication.k8s.io", "v1", "TokenRequest"), ("create",)),
    "approval": (("", "", ""), _GET_PATCH_UPDATE),
    "finalize": (("", "", ""), ("update",)),
}


def storage_version_hash(group: str, version: str, kind: str) -> str:
    """``discovery.StorageVersionHash``: base64 of the first 8 bytes of the SHA-256 of
    ``group/version/kind`` (the storage version)."""
    digest = hashlib.sha256(f"{group}/{version}/{kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def _storage_version(served: ServedResource) -> tuple[str, str, str] | None:
    """The group-version-kind a resource is stored as; None when nothing is stored."""
    r = served.resource
    if "list" not in served.verbs:
        return None  # create-only: bindings, reviews
    if served.storage_key == "/events":
        return ("", "v1", "Event")  # events.k8s.io Events cohabit with core Events
    if (r.group, r.plural) == ("autoscaling", "horizontalpodautoscalers"):
        return ("autoscaling", "v2", r.kind)  # v1 is served by conversion from v2
    if served.custom:
        return (r.group, served.served_versions[0] if served.served_versions else r.version, r.kind)
    return (r.group, r.version, r.kind)


def _subresource_names(served: ServedResource) -> list[str]:
    r = served.resource
    names = ["status"] if r.has_status else []
    names += list(served.subresources)
    if r.kind == "Namespace" and not r.group:
        names.append("finalize")
    return sorted(names)


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
    stored = _storage_version(served)
    if stored is not None:
        main["storageVersionHash"] = storage_version_hash(*stored)
    out = [main]
    for sub in _subresource_names(served):
        (group, version, kind), verbs = _SUBRESOURCES[sub]
        entry: JsonDict = {
            "name": f"{r.plural}/{sub}",
            "singularName": "",
            "namespaced": r.namespaced,
        }
        if group or version:
            entry["group"], entry["version"] = group, version
        entry["kind"] = kind or r.kind
        entry["verbs"] = list(verbs)
        out.append(entry)
    return out


def _resource_discovery(served: ServedResource) -> JsonDict:
    """One ``apidiscovery.k8s.io/v2 APIResourceDiscovery``."""
    r = served.resource
    out: JsonDict = {
        "resource": r.plural,
        "responseKind": {"group": "", "version": "", "kind": r.kind},
        "scope": "Namespaced" if r.namespaced else "Cluster",
        "singularResource": served.singular,
        "verbs": list(served.verbs),
    }
    if served.short_names:
        out["shortNames"] = list(served.short_names)
    if served.categories:
        out["categories"] = list(served.categories)
    subs = []
    for sub in _subresource_names(served):
        (group, version, kind), verbs = _SUBRESOURCES[sub]
        subs.append(
            {
                "subresource": sub,
                "responseKind": {"group": group, "version": version, "kind": kind or r.kind},
                "verbs": list(verbs),
            }
        )
    if subs:
        out["subresources"] = subs
    return out


def aggregated(registry: ResourceRegistry, *, core: bool, version: str = "v2") -> JsonDict:
    """``APIGroupDiscoveryList`` (``apidiscovery.k8s.io/{version}``) for ``/api`` (core)
    or ``/apis`` (every other group, by priority; versions preferred first)."""
    items = []
    groups = [("", ["v1"])] if core else _ordered_groups(registry)
    for group, versions in groups:
        entries = []
        for v in versions:
            served = [s for s in registry if s.resource.group == group and s.resource.version == v]
            entries.append(
                {
                    "version": v,
                    "resources": [
                        _resource_discovery(s)
                        for s in sorted(served, key=lambda s: s.resource.plural)
                    ],
                    "freshness": "Current",
                }
            )
        meta: JsonDict = {"creationTimestamp": None}
        if group:
            meta = {"name": group, "creationTimestamp": None}
        items.append({"metadata": meta, "versions": entries})
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": f"apidiscovery.k8s.io/{version}",
        "metadata": {},
        "items": items,
    }


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

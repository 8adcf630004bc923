"""Which resources the local API server serves, and each one's storage strategy.

kube-apiserver keeps, per resource, a "strategy" that decides what a create, an update
or a delete does beyond storing bytes: whether ``metadata.generation`` moves, whether a
``/status`` subresource splits the object, whether DELETE answers with the object or
with a ``Status``, which name rule applies. :class:`ServedResource` holds those facts;
:class:`ResourceRegistry` holds the built-ins plus the resources that
CustomResourceDefinitions add at run time.

Thread-safe: the registry guards its table with a lock; entries are immutable.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Final

from manager.resources import Resource

__all__ = [
    "Generation",
    "ResourceRegistry",
    "ServedResource",
    "builtin_kinds",
    "served_from_crd",
]


class Generation(Enum):
    """When ``metadata.generation`` is bumped on update."""

    NONE = "none"  # the resource has no generation
    SPEC = "spec"  # spec changes
    SPEC_AND_ANNOTATIONS = "spec+annotations"  # Deployments, ReplicaSets
    NON_METADATA = "non-metadata"  # custom resources: anything but metadata (and status)


_DEFAULT_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True)
class ServedResource:
    """A resource as the server serves it: REST identity plus storage strategy."""

    resource: Resource
    singular: str
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = _DEFAULT_VERBS
    categories: tuple[str, ...] = ()
    generation: Generation = Generation.NONE
    delete_returns_object: bool = False  # else a Status{status: Success}
    strategic_merge: bool = True  # built-ins accept strategic merge patch; CRs do not
    custom: bool = False
    served_versions: tuple[str, ...] = ()  # CRs: every served version (same storage)
    crd_name: str = ""
    default_finalizers: tuple[str, ...] = field(default=())
    storage_key: str = ""  # stored as another resource (events.k8s.io Events are core Events)
    subresources: tuple[str, ...] = ()  # beyond status: scale, log, binding, eviction, ...
    default_propagation: str = ""  # "Orphan": DefaultGarbageCollectionPolicy (batch/v1 Jobs)

    @property
    def key(self) -> str:
        """Storage key shared by every version: ``group/plural`` (``/plural`` for core)."""
        return self.storage_key or f"{self.resource.group}/{self.resource.plural}"

    @property
    def kind(self) -> str:
        return self.resource.kind

    @property
    def qualified_kind(self) -> str:
        """``Deployment.apps`` as used in Invalid messages; ``Pod`` for the core group."""
        group = self.resource.group
        return f"{self.resource.kind}.{group}" if group else self.resource.kind


def _builtin(
    group: str,
    plural: str,
    kind: str,
    namespaced: bool,
    *,
    singular: str = "",
    short: tuple[str, ...] = (),
    status: bool = False,
    generation: Generation = Generation.NONE,
    returns_object: bool = False,
    categories: tuple[str, ...] = (),
    version: str = "v1",
    subresources: tuple[str, ...] = (),
    verbs: tuple[str, ...] = _DEFAULT_VERBS,
    default_propagation: str = "",
) -> ServedResource:
    return ServedResource(
        Resource(group, version, plural, kind, namespaced, has_status=status),
        singular=singular or kind.lower(),
        short_names=short,
        verbs=verbs,
        generation=generation,
        delete_returns_object=returns_object,
        categories=categories,
        subresources=subresources,
        default_propagation=default_propagation,
    )


_CREATE_ONLY: Final = ("create",)
_SPEC: Final = Generation.SPEC
_SPEC_ANN: Final = Generation.SPEC_AND_ANNOTATIONS


def _more_builtins() -> list[ServedResource]:
    """The rest of what a 1.36 server lists: plain CRUD + watch, with each strategy's
    generation, status split and DELETE answer (registry/*/strategy.go)."""
    b = _builtin
    return [
        # core/v1
        b("", "bindings", "Binding", True, verbs=_CREATE_ONLY),
        b("", "endpoints", "Endpoints", True, singular="endpoints", short=("ep",)),
        b("", "limitranges", "LimitRange", True, short=("limits",)),
        b("", "persistentvolumeclaims", "PersistentVolumeClaim", True, short=("pvc",), status=True),
        b("", "persistentvolumes", "PersistentVolume", False, short=("pv",), status=True),
        b("", "podtemplates", "PodTemplate", True),
        b(
            "",
            "replicationcontrollers",
            "ReplicationController",
            True,
            short=("rc",),
            status=True,
            generation=_SPEC,
            categories=("all",),
            subresources=("scale",),
            default_propagation="Orphan",  # v1 keeps the old default, for compatibility
        ),
        b("", "resourcequotas", "ResourceQuota", True, short=("quota",), status=True),
        # apps/v1
        b("apps", "controllerrevisions", "ControllerRevision", True),
        b(
            "apps",
            "daemonsets",
            "DaemonSet",
            True,
            short=("ds",),
            status=True,
            generation=_SPEC,
            categories=("all",),
        ),
        b(
            "apps",
            "statefulsets",
            "StatefulSet",
            True,
            short=("sts",),
            status=True,
            generation=_SPEC,
            categories=("all",),
            subresources=("scale",),
        ),
        # batch/v1
        b(
            "batch",
            "jobs",
            "Job",
            True,
            status=True,
            generation=_SPEC,
            categories=("all",),
            default_propagation="Orphan",  # batch/v1 keeps the old default, for compatibility
        ),
        b(
            "batch",
            "cronjobs",
            "CronJob",
            True,
            short=("cj",),
            status=True,
            generation=_SPEC,
            categories=("all",),
        ),
        # autoscaling/v2, and v1: the same objects through a conversion (hpaconv.py)
        b(
            "autoscaling",
            "horizontalpodautoscalers",
            "HorizontalPodAutoscaler",
            True,
            short=("hpa",),
            status=True,
            version="v2",
            categories=("all",),
        ),
        b(
            "autoscaling",
            "horizontalpodautoscalers",
            "HorizontalPodAutoscaler",
            True,
            short=("hpa",),
            status=True,
            version="v1",
            categories=("all",),
        ),
        # policy/v1
        b(
            "policy",
            "poddisruptionbudgets",
            "PodDisruptionBudget",
            True,
            short=("pdb",),
            status=True,
            generation=_SPEC,
        ),
        # rbac.authorization.k8s.io/v1
        b("rbac.authorization.k8s.io", "roles", "Role", True),
        b("rbac.authorization.k8s.io", "rolebindings", "RoleBinding", True),
        b("rbac.authorization.k8s.io", "clusterroles", "ClusterRole", False),
        b("rbac.authorization.k8s.io", "clusterrolebindings", "ClusterRoleBinding", False),
        # apiregistration.k8s.io/v1
        b("apiregistration.k8s.io", "apiservices", "APIService", False, status=True),
        # discovery.k8s.io/v1
        b("discovery.k8s.io", "endpointslices", "EndpointSlice", True),
        # networking.k8s.io/v1
        b("networking.k8s.io", "ingressclasses", "IngressClass", False),
        b(
            "networking.k8s.io",
            "networkpolicies",
            "NetworkPolicy",
            True,
            short=("netpol",),
            generation=_SPEC,
        ),
        # storage.k8s.io/v1
        b("storage.k8s.io", "storageclasses", "StorageClass", False, short=("sc",)),
        b("storage.k8s.io", "csidrivers", "CSIDriver", False),
        b("storage.k8s.io", "csinodes", "CSINode", False),
        b("storage.k8s.io", "csistoragecapacities", "CSIStorageCapacity", True),
        b("storage.k8s.io", "volumeattachments", "VolumeAttachment", False, status=True),
        b(
            "storage.k8s.io",
            "volumeattributesclasses",
            "VolumeAttributesClass",
            False,
            short=("vac",),
        ),
        # scheduling.k8s.io/v1, node.k8s.io/v1
        b("scheduling.k8s.io", "priorityclasses", "PriorityClass", False, short=("pc",)),
        b("node.k8s.io", "runtimeclasses", "RuntimeClass", False),
        # certificates.k8s.io/v1
        b(
            "certificates.k8s.io",
            "certificatesigningrequests",
            "CertificateSigningRequest",
            False,
            short=("csr",),
            status=True,
            subresources=("approval",),
        ),
        # admissionregistration.k8s.io/v1 (stored; webhooks are not called, CEL not run)
        b(
            "admissionregistration.k8s.io",
            "mutatingwebhookconfigurations",
            "MutatingWebhookConfiguration",
            False,
            categories=("api-extensions",),
        ),
        b(
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations",
            "ValidatingWebhookConfiguration",
            False,
            categories=("api-extensions",),
        ),
        b(
            "admissionregistration.k8s.io",
            "validatingadmissionpolicies",
            "ValidatingAdmissionPolicy",
            False,
            status=True,
            generation=_SPEC,
            categories=("api-extensions",),
        ),
        b(
            "admissionregistration.k8s.io",
            "validatingadmissionpolicybindings",
            "ValidatingAdmissionPolicyBinding",
            False,
            generation=_SPEC,
            categories=("api-extensions",),
        ),
        b(
            "admissionregistration.k8s.io",
            "mutatingadmissionpolicies",
            "MutatingAdmissionPolicy",
            False,
            generation=_SPEC,
            categories=("api-extensions",),
        ),
        b(
            "admissionregistration.k8s.io",
            "mutatingadmissionpolicybindings",
            "MutatingAdmissionPolicyBinding",
            False,
            generation=_SPEC,
            categories=("api-extensions",),
        ),
        # resource.k8s.io/v1 (dynamic resource allocation: stored, nothing allocates)
        b("resource.k8s.io", "deviceclasses", "DeviceClass", False, generation=_SPEC),
        b("resource.k8s.io", "resourceclaims", "ResourceClaim", True, status=True),
        b("resource.k8s.io", "resourceclaimtemplates", "ResourceClaimTemplate", True),
        b("resource.k8s.io", "resourceslices", "ResourceSlice", False, generation=_SPEC),
        # networking.k8s.io/v1 service IP objects (the allocator does not write them)
        b("networking.k8s.io", "ipaddresses", "IPAddress", False, short=("ip",)),
        b("networking.k8s.io", "servicecidrs", "ServiceCIDR", False, status=True),
        # v1 componentstatuses: read-only, answered from what the server knows
        b("", "componentstatuses", "ComponentStatus", False, short=("cs",),
          verbs=("get", "list")),
        # flowcontrol.apiserver.k8s.io/v1
        b("flowcontrol.apiserver.k8s.io", "flowschemas", "FlowSchema", False, status=True),
        b(
            "flowcontrol.apiserver.k8s.io",
            "prioritylevelconfigurations",
            "PriorityLevelConfiguration",
            False,
            status=True,
        ),
        # authorization.k8s.io/v1, authentication.k8s.io/v1: reviews, answered at once
        b("authorization.k8s.io", "selfsubjectaccessreviews", "SelfSubjectAccessReview", False,
          verbs=_CREATE_ONLY),
        b("authorization.k8s.io", "selfsubjectrulesreviews", "SelfSubjectRulesReview", False,
          verbs=_CREATE_ONLY),
        b("authorization.k8s.io", "subjectaccessreviews", "SubjectAccessReview", False,
          verbs=_CREATE_ONLY),
        b("authorization.k8s.io", "localsubjectaccessreviews", "LocalSubjectAccessReview", True,
          verbs=_CREATE_ONLY),
        b("authentication.k8s.io", "selfsubjectreviews", "SelfSubjectReview", False,
          verbs=_CREATE_ONLY),
        b("authentication.k8s.io", "tokenreviews", "TokenReview", False, verbs=_CREATE_ONLY),
    ]  # fmt: skip


def _builtins() -> list[ServedResource]:
    return [
        _builtin(
            "",
            "namespaces",
            "Namespace",
            False,
            singular="namespace",
            short=("ns",),
            status=True,
            returns_object=True,
            # the namespace REST storage has no DeleteCollection
            verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
        ),
        _builtin(
            "",
            "pods",
            "Pod",
            True,
            singular="pod",
            short=("po",),
            status=True,
            generation=Generation.SPEC,
            returns_object=True,
            categories=("all",),
            subresources=("binding", "eviction", "log"),
        ),
        _builtin(
            "",
            "services",
            "Service",
            True,
            singular="service",
            short=("svc",),
            status=True,
            returns_object=True,
            categories=("all",),
        ),
        _builtin("", "configmaps", "ConfigMap", True, singular="configmap", short=("cm",)),
        _builtin("", "secrets", "Secret", True, singular="secret"),
        _builtin(
            "",
            "serviceaccounts",
            "ServiceAccount",
            True,
            singular="serviceaccount",
            short=("sa",),
            returns_object=True,
            subresources=("token",),
        ),
        _builtin("", "events", "Event", True, singular="event", short=("ev",)),
        _builtin(
            "",
            "nodes",
            "Node",
            False,
            singular="node",
            short=("no",),
            status=True,
            returns_object=True,
        ),
        _builtin(
            "apps",
            "deployments",
            "Deployment",
            True,
            singular="deployment",
            short=("deploy",),
            status=True,
            generation=Generation.SPEC_AND_ANNOTATIONS,
            categories=("all",),
            subresources=("scale",),
        ),
        _builtin(
            "apps",
            "replicasets",
            "ReplicaSet",
            True,
            singular="replicaset",
            short=("rs",),
            status=True,
            generation=Generation.SPEC_AND_ANNOTATIONS,
            categories=("all",),
            subresources=("scale",),
        ),
        _builtin(
            "networking.k8s.io",
            "ingresses",
            "Ingress",
            True,
            singular="ingress",
            short=("ing",),
            status=True,
            generation=Generation.SPEC,
        ),
        _builtin("coordination.k8s.io", "leases", "Lease", True, singular="lease"),
        ServedResource(
            Resource("events.k8s.io", "v1", "events", "Event", True),
            singular="event",
            short_names=("ev",),
            storage_key="/events",
        ),
        _builtin(
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            False,
            singular="customresourcedefinition",
            short=("crd", "crds"),
            status=True,
            generation=Generation.SPEC,
        ),
        *_more_builtins(),
    ]


@functools.cache
def builtin_kinds() -> frozenset[tuple[str, str]]:
    """``(kind, group)`` of every resource compiled into the server."""
    return frozenset((s.resource.kind, s.resource.group) for s in _builtins())


def served_from_crd(crd: dict[str, Any]) -> list[ServedResource]:
    """The resources a CRD serves: one entry per served version, all sharing one storage."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = str(spec.get("group", ""))
    namespaced = spec.get("scope", "Namespaced") == "Namespaced"
    versions = [v for v in spec.get("versions") or [] if v.get("served", True)]
    served_names = tuple(str(v["name"]) for v in versions)
    out = []
    for version in versions:
        has_status = "status" in (version.get("subresources") or {})
        out.append(
            ServedResource(
                Resource(
                    group,
                    str(version["name"]),
                    str(names.get("plural", "")),
                    str(names.get("kind", "")),
                    namespaced,
                    has_status=has_status,
                ),
                singular=str(names.get("singular") or str(names.get("kind", "")).lower()),
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                generation=Generation.NON_METADATA,
                strategic_merge=False,
                custom=True,
                served_versions=served_names,
                crd_name=str((crd.get("metadata") or {}).get("name", "")),
            )
        )
    return out


class ResourceRegistry:
    """The table of served resources: built-ins and CRD-defined ones."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_path: dict[tuple[str, str, str], ServedResource] = {}
        builtins = _builtins()
        for served in builtins:
            self._add(served)
        self._builtin_groups = frozenset(s.resource.group for s in builtins)

    def _add(self, served: ServedResource) -> None:
        r = served.resource
        self._by_path[(r.group, r.version, r.plural)] = served

    def lookup(self, group: str, version: str, plural: str) -> ServedResource | None:
        """The resource served at ``/apis/{group}/{version}/.../{plural}``, or None."""
        with self._lock:
            return self._by_path.get((group, version, plural))

    def by_key(self, key: str) -> list[ServedResource]:
        """Every version served for one storage key (``group/plural``)."""
        with self._lock:
            return [s for s in self._by_path.values() if s.key == key]

    def register_crd(self, crd: dict[str, Any]) -> list[ServedResource]:
        """Serve the resources a CRD defines (replacing what an earlier version defined)."""
        served = served_from_crd(crd)
        name = str((crd.get("metadata") or {}).get("name", ""))
        with self._lock:
            for k in [k for k, s in self._by_path.items() if s.crd_name == name]:
                del self._by_path[k]
            for s in served:
                self._add(s)
        return served

    def by_crd(self, name: str) -> list[ServedResource]:
        """What the CRD ``name`` defines, every served version."""
        with self._lock:
            return [s for s in self._by_path.values() if s.crd_name == name]

    def unregister_crd(self, name: str) -> None:
        """Stop serving what the CRD ``name`` defined."""
        with self._lock:
            for k in [k for k, s in self._by_path.items() if s.crd_name == name]:
                del self._by_path[k]

    def __iter__(self) -> Iterator[ServedResource]:
        with self._lock:
            return iter(sorted(self._by_path.values(), key=lambda s: s.key + s.resource.version))

    def builtin_groups(self) -> frozenset[str]:
        """The API groups compiled into the server (not defined by a CRD)."""
        return self._builtin_groups

    def group_versions(self) -> dict[str, list[str]]:
        """``group -> [versions]`` for every served non-core group (discovery), each
        group's versions by kube's version priority (the preferred one first)."""
        out: dict[str, list[str]] = {}
        for s in self:
            if s.resource.group:
                versions = out.setdefault(s.resource.group, [])
                if s.resource.version not in versions:
                    versions.append(s.resource.version)
        return {group: sorted(versions, key=version_priority) for group, versions in out.items()}


_KUBE_VERSION: Final = re.compile(r"^v([1-9][0-9]*)(?:(alpha|beta)([1-9][0-9]*))?$")


def version_priority(version: str) -> tuple[int, int, int, str]:
    """A sort key putting versions in ``CompareKubeAwareVersionStrings`` order: GA before
    beta before alpha, higher numbers first, then versions that are not kube-like by
    name."""
    match = _KUBE_VERSION.match(version)
    if match is None:
        return (3, 0, 0, version)
    major, stage, minor = match.groups()
    rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (rank, -int(major), -int(minor or 0), "")

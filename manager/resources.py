"""The resource table: which API group, version and plural serve a kind.

client-go builds request paths from a ``schema.GroupVersionResource``; Overseer does the
same from :class:`Resource`. The built-in resources Overseer and its controllers use are
listed in :data:`BUILTINS` (every resource of Kubernetes 1.36), found by any name
kubectl takes with :func:`builtin`; custom resources are added at run time from
discovery (see ``manager.client.KubeClient.discover``).

Safe to share between threads: :class:`Resource` is immutable.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

__all__ = [
    "BUILTINS",
    "BUILTIN_TABLE",
    "Resource",
    "ResourceTable",
    "UnknownResource",
    "builtin",
    "short_names",
    "unknown_message",
]


@dataclass(frozen=True, slots=True)
class Resource:
    """One REST resource: ``/apis/{group}/{version}/namespaces/{ns}/{plural}/{name}``."""

    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    has_status: bool = False  # serves the /status subresource

    @property
    def api_version(self) -> str:
        """``v1`` for the core group, ``{group}/{version}`` otherwise."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self) -> str:
        """``plural.group`` (``deployments.apps``), or ``plural`` for the core group."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The URL path of the collection, or of one object when ``name`` is given.

        A namespaced resource without ``namespace`` gives the all-namespaces collection.

        Raises:
            ValueError: a namespace for a cluster-scoped resource, or a subresource without a name.
        """
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace and not self.namespaced:
            raise ValueError(f"{self.group_resource} is cluster-scoped: no namespace allowed")
        if namespace:
            base = f"{base}/namespaces/{namespace}"
        path = f"{base}/{self.plural}"
        if name is not None:
            if not name:
                raise ValueError(f"{self.group_resource}: empty object name")
            path = f"{path}/{name}"
        if subresource:
            if name is None:
                raise ValueError(f"{self.group_resource}: subresource {subresource} needs a name")
            path = f"{path}/{subresource}"
        return path

    def __str__(self) -> str:
        return f"{self.api_version}/{self.plural}"


def _e(
    group: str,
    version: str,
    plural: str,
    kind: str,
    *,
    namespaced: bool,
    has_status: bool = False,
    short: tuple[str, ...] = (),
) -> tuple[Resource, tuple[str, ...]]:
    return Resource(group, version, plural, kind, namespaced, has_status), short


# Every resource a Kubernetes 1.36 API server serves, with its short names, in the order
# a bare name is resolved in (the core group first, then as discovery lists the groups;
# of a group's versions, the preferred first): what `kubectl api-resources` prints.
# tests/unit/test_resources.py keeps it equal to the local API server's table, which is
# checked against kube-apiserver 1.36's discovery.
_TABLE: Final = (
    _e("", "v1", "namespaces", "Namespace", namespaced=False, has_status=True, short=("ns",)),
    _e("", "v1", "pods", "Pod", namespaced=True, has_status=True, short=("po",)),
    _e("", "v1", "services", "Service", namespaced=True, has_status=True, short=("svc",)),
    _e("", "v1", "configmaps", "ConfigMap", namespaced=True, short=("cm",)),
    _e("", "v1", "secrets", "Secret", namespaced=True),
    _e("", "v1", "serviceaccounts", "ServiceAccount", namespaced=True, short=("sa",)),
    _e("", "v1", "events", "Event", namespaced=True, short=("ev",)),
    _e("", "v1", "nodes", "Node", namespaced=False, has_status=True, short=("no",)),
    _e(
        "apps",
        "v1",
        "deployments",
        "Deployment",
        namespaced=True,
        has_status=True,
        short=("deploy",),
    ),
    _e("apps", "v1", "replicasets", "ReplicaSet", namespaced=True, has_status=True, short=("rs",)),
    _e(
        "networking.k8s.io",
        "v1",
        "ingresses",
        "Ingress",
        namespaced=True,
        has_status=True,
        short=("ing",),
    ),
    _e("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True),
    _e("events.k8s.io", "v1", "events", "Event", namespaced=True, short=("ev",)),
    _e(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        namespaced=False,
        has_status=True,
        short=("crd", "crds"),
    ),
    _e("", "v1", "bindings", "Binding", namespaced=True),
    _e("", "v1", "endpoints", "Endpoints", namespaced=True, short=("ep",)),
    _e("", "v1", "limitranges", "LimitRange", namespaced=True, short=("limits",)),
    _e(
        "",
        "v1",
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        namespaced=True,
        has_status=True,
        short=("pvc",),
    ),
    _e(
        "",
        "v1",
        "persistentvolumes",
        "PersistentVolume",
        namespaced=False,
        has_status=True,
        short=("pv",),
    ),
    _e("", "v1", "podtemplates", "PodTemplate", namespaced=True),
    _e(
        "",
        "v1",
        "replicationcontrollers",
        "ReplicationController",
        namespaced=True,
        has_status=True,
        short=("rc",),
    ),
    _e(
        "",
        "v1",
        "resourcequotas",
        "ResourceQuota",
        namespaced=True,
        has_status=True,
        short=("quota",),
    ),
    _e("apps", "v1", "controllerrevisions", "ControllerRevision", namespaced=True),
    _e("apps", "v1", "daemonsets", "DaemonSet", namespaced=True, has_status=True, short=("ds",)),
    _e(
        "apps",
        "v1",
        "statefulsets",
        "StatefulSet",
        namespaced=True,
        has_status=True,
        short=("sts",),
    ),
    _e("batch", "v1", "jobs", "Job", namespaced=True, has_status=True),
    _e("batch", "v1", "cronjobs", "CronJob", namespaced=True, has_status=True, short=("cj",)),
    _e(
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        namespaced=True,
        has_status=True,
        short=("hpa",),
    ),
    _e(
        "autoscaling",
        "v1",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        namespaced=True,
        has_status=True,
        short=("hpa",),
    ),
    _e(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        namespaced=True,
        has_status=True,
        short=("pdb",),
    ),
    _e("rbac.authorization.k8s.io", "v1", "roles", "Role", namespaced=True),
    _e("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", namespaced=True),
    _e("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False),
    _e(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        namespaced=False,
    ),
    _e(
        "apiregistration.k8s.io",
        "v1",
        "apiservices",
        "APIService",
        namespaced=False,
        has_status=True,
    ),
    _e("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", namespaced=True),
    _e("networking.k8s.io", "v1", "ingressclasses", "IngressClass", namespaced=False),
    _e(
        "networking.k8s.io",
        "v1",
        "networkpolicies",
        "NetworkPolicy",
        namespaced=True,
        short=("netpol",),
    ),
    _e("storage.k8s.io", "v1", "storageclasses", "StorageClass", namespaced=False, short=("sc",)),
    _e("storage.k8s.io", "v1", "csidrivers", "CSIDriver", namespaced=False),
    _e("storage.k8s.io", "v1", "csinodes", "CSINode", namespaced=False),
    _e("storage.k8s.io", "v1", "csistoragecapacities", "CSIStorageCapacity", namespaced=True),
    _e(
        "storage.k8s.io",
        "v1",
        "volumeattachments",
        "VolumeAttachment",
        namespaced=False,
        has_status=True,
    ),
    _e(
        "storage.k8s.io",
        "v1",
        "volumeattributesclasses",
        "VolumeAttributesClass",
        namespaced=False,
        short=("vac",),
    ),
    _e(
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        "PriorityClass",
        namespaced=False,
        short=("pc",),
    ),
    _e("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", namespaced=False),
    _e(
        "certificates.k8s.io",
        "v1",
        "certificatesigningrequests",
        "CertificateSigningRequest",
        namespaced=False,
        has_status=True,
        short=("csr",),
    ),
    _e(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        namespaced=False,
    ),
    _e(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        namespaced=False,
    ),
    _e(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicies",
        "ValidatingAdmissionPolicy",
        namespaced=False,
        has_status=True,
    ),
    _e(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicybindings",
        "ValidatingAdmissionPolicyBinding",
        namespaced=False,
    ),
    _e(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingadmissionpolicies",
        "MutatingAdmissionPolicy",
        namespaced=False,
    ),
    _e(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingadmissionpolicybindings",
        "MutatingAdmissionPolicyBinding",
        namespaced=False,
    ),
    _e("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", namespaced=False),
    _e(
        "resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", namespaced=True, has_status=True
    ),
    _e("resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", namespaced=True),
    _e("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", namespaced=False),
    _e("networking.k8s.io", "v1", "ipaddresses", "IPAddress", namespaced=False, short=("ip",)),
    _e("networking.k8s.io", "v1", "servicecidrs", "ServiceCIDR", namespaced=False, has_status=True),
    _e("", "v1", "componentstatuses", "ComponentStatus", namespaced=False, short=("cs",)),
    _e(
        "flowcontrol.apiserver.k8s.io",
        "v1",
        "flowschemas",
        "FlowSchema",
        namespaced=False,
        has_status=True,
    ),
    _e(
        "flowcontrol.apiserver.k8s.io",
        "v1",
        "prioritylevelconfigurations",
        "PriorityLevelConfiguration",
        namespaced=False,
        has_status=True,
    ),
    _e(
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        namespaced=False,
    ),
    _e(
        "authorization.k8s.io",
        "v1",
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
        namespaced=False,
    ),
    _e(
        "authorization.k8s.io",
        "v1",
        "subjectaccessreviews",
        "SubjectAccessReview",
        namespaced=False,
    ),
    _e(
        "authorization.k8s.io",
        "v1",
        "localsubjectaccessreviews",
        "LocalSubjectAccessReview",
        namespaced=True,
    ),
    _e("authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", namespaced=False),
    _e("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", namespaced=False),
)

BUILTINS: dict[str, Resource] = {f"{r.api_version}/{r.plural}": r for r, _ in _TABLE}
"""Every built-in resource by ``apiVersion/plural`` (``"apps/v1/deployments"``)."""

_VERSION = re.compile(r"v\d+((alpha|beta)\d+)?")


class UnknownResource(KeyError):
    """No resource goes by that name. The message names the closest ones, and how to
    address a custom resource."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ResourceTable:
    """Resources with the names kubectl knows them by, resolved as kubectl resolves a name.

    :data:`BUILTIN_TABLE` holds Kubernetes 1.36's; a client's discovery makes one of what a
    server serves (``KubeClient.resource``). Entries are in resolution order: of two
    resources answering to one name, the first wins.
    """

    def __init__(
        self,
        entries: Sequence[tuple[Resource, tuple[str, ...]]],
        *,
        singular: Mapping[Resource, str] | None = None,
    ) -> None:
        self._entries = tuple(entries)
        self._short = dict(self._entries)
        self._singular = dict(singular or {})

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Resource]:
        return (r for r, _ in self._entries)

    def short_names(self, resource: Resource) -> tuple[str, ...]:
        """The short names of ``resource`` (``("deploy",)``); () if it has none or is not here."""
        return self._short.get(resource, ())

    def names(self, resource: Resource) -> tuple[str, ...]:
        """Every lower-case name ``resource`` answers to: plural, singular, kind, short."""
        singular = self._singular.get(resource, resource.kind.lower())
        return (resource.plural, singular, resource.kind.lower(), *self._short.get(resource, ()))

    def find(
        self, name: str, *, api_version: str | None = None, group: str | None = None
    ) -> Resource | None:
        """The first resource answering to ``name`` (case-insensitive), in ``api_version``
        or ``group`` when given."""
        wanted = name.lower()
        for r, _ in self._entries:
            if api_version is not None and r.api_version != api_version:
                continue
            if group is not None and r.group != group:
                continue
            if wanted in self.names(r):
                return r
        return None

    def resolve(self, name: str, plural: str | None = None) -> Resource | None:
        """``name`` read the ways :func:`builtin` documents; None if nothing answers."""
        asked, api_version, group = _parse(name, plural)
        if api_version is not None:
            return self.find(asked, api_version=api_version)
        if group is not None:
            head_group, version_group = group
            found = self.find(asked, group=head_group)
            if found is None and version_group is not None:
                found = self.find(asked, api_version=version_group)
            return found
        return self.find(asked)

    def closest(self, name: str, *, api_version: str | None = None) -> list[Resource]:
        """Up to three resources whose names are nearest ``name`` (in ``api_version`` first)."""
        pool = [r for r in self if api_version is None or r.api_version == api_version]
        if not pool:
            pool = list(self)
        by_name: dict[str, Resource] = {}
        for r in pool:
            for n in (r.plural, r.kind, *self._short.get(r, ())):
                by_name.setdefault(n.lower(), r)
        seen: list[Resource] = []
        for n in difflib.get_close_matches(name.lower(), list(by_name), n=6, cutoff=0.6):
            if by_name[n] not in seen:
                seen.append(by_name[n])
        return seen[:3]


def _parse(name: str, plural: str | None) -> tuple[str, str | None, tuple[str, str | None] | None]:
    """(the bare name, an apiVersion it must be in, (group, group/version) it must be in).

    Raises:
        UnknownResource: an empty name.
    """
    if plural is not None:
        return plural, name, None
    if not name:
        raise UnknownResource('a resource name is required (e.g. "deployments")')
    if "/" in name:
        api_version, _, rest = name.rpartition("/")
        return rest, api_version, None
    if "." in name:
        head, _, qualifier = name.partition(".")
        version, _, group = qualifier.partition(".")
        as_version = f"{group}/{version}" if group and _VERSION.fullmatch(version) else None
        return head, None, (qualifier, as_version)
    return name, None, None


BUILTIN_TABLE: Final = ResourceTable(_TABLE)
"""Every resource of Kubernetes 1.36 with its short names, in kubectl's resolution order."""


def builtin(name: str, plural: str | None = None) -> Resource:
    """A built-in resource of Kubernetes 1.36, named the way kubectl takes it.

    One argument: ``"ResourceQuota"`` (kind), ``"resourcequotas"`` (plural),
    ``"resourcequota"`` (singular) or ``"quota"`` (short name), case-insensitive;
    qualified by group as ``"networkpolicies.networking.k8s.io"``,
    ``"NetworkPolicy.networking.k8s.io"`` or ``"deployments.v1.apps"``; or by
    ``apiVersion`` as ``"apps/v1/Deployment"``, ``"v1/pods"``. Two arguments: an
    ``apiVersion`` and a plural, kind or short name (``builtin("apps/v1", "deployments")``).
    A name several groups or versions serve resolves as kubectl resolves it: the core
    group first, then the preferred version (``"events"`` is ``v1`` Events,
    ``"hpa"`` is ``autoscaling/v2``).

    Custom resources are not built in: ``Resource(group, version, plural, kind,
    namespaced=...)``, or by discovery, by the same names:
    :meth:`~manager.client.KubeClient.resource`.

    Raises:
        UnknownResource: no built-in resource by that name (a ``KeyError``; its message
            names the closest matches).
    """
    found = BUILTIN_TABLE.resolve(name, plural)
    if found is None:
        raise UnknownResource(unknown_message(name, plural, [BUILTIN_TABLE]))
    return found


def short_names(resource: Resource) -> tuple[str, ...]:
    """The short names kubectl knows a built-in resource by (``("deploy",)``)."""
    return BUILTIN_TABLE.short_names(resource)


def unknown_message(
    name: str,
    plural: str | None,
    tables: Sequence[ResourceTable],
    *,
    head: str = "unknown built-in resource {asked}",
    hint: str = "",
) -> str:
    """Why ``name`` (``plural``) answers to nothing in ``tables``, naming the closest:
    ``head`` (``{asked}`` is the name quoted), then the names nearest it, then ``hint``."""
    asked_text = repr(f"{name}/{plural}" if plural is not None else name)
    start = head.format(asked=asked_text)
    asked, api_version, _ = _parse(name, plural)
    for table in tables:
        elsewhere = table.find(asked)
        if elsewhere is not None:
            return (
                f"{start}: {elsewhere.plural} is served in "
                f"{elsewhere.api_version} ({elsewhere.api_version}/{elsewhere.kind}, "
                f"{elsewhere.group_resource})"
            )
    seen: list[Resource] = []
    for table in tables:
        seen.extend(r for r in table.closest(asked, api_version=api_version) if r not in seen)
    text = " or ".join(f"{r.group_resource} ({r.api_version} {r.kind})" for r in seen[:3])
    return (
        start
        + (f"; did you mean {text}?" if text else ".")
        + (
            hint
            or " A custom resource is Resource(group, version, plural, kind, namespaced=...), "
            "or found by discovery by the same names: KubeClient.resource(name)"
        )
    )

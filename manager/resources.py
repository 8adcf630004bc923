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
from dataclasses import dataclass
from typing import Final

__all__ = ["BUILTINS", "Resource", "UnknownResource", "builtin", "short_names"]


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

_SHORT_NAMES: Final[dict[Resource, tuple[str, ...]]] = dict(_TABLE)
_VERSION = re.compile(r"v\d+((alpha|beta)\d+)?")


class UnknownResource(KeyError):
    """No built-in resource goes by that name. The message names the closest ones, and
    how to address a custom resource."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


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
    namespaced=...)``, or :meth:`~manager.client.KubeClient.resource_for` (discovery).

    Raises:
        UnknownResource: no built-in resource by that name (a ``KeyError``; its message
            names the closest matches).
    """
    if plural is not None:
        found = _find(plural, api_version=name)
        if found is None:
            raise UnknownResource(_unknown(f"{name}/{plural}", plural, api_version=name))
        return found
    if not name:
        raise UnknownResource('a resource name is required (e.g. "deployments")')
    if "/" in name:
        api_version, _, rest = name.rpartition("/")
        found = _find(rest, api_version=api_version)
        if found is None:
            raise UnknownResource(_unknown(name, rest, api_version=api_version))
        return found
    if "." in name:
        head, _, qualifier = name.partition(".")
        version, _, group = qualifier.partition(".")
        candidates = [_find(head, group=qualifier)]
        if group and _VERSION.fullmatch(version):
            candidates.append(_find(head, api_version=f"{group}/{version}"))
        found = next((c for c in candidates if c is not None), None)
        if found is None:
            raise UnknownResource(_unknown(name, head))
        return found
    found = _find(name)
    if found is None:
        raise UnknownResource(_unknown(name, name))
    return found


def short_names(resource: Resource) -> tuple[str, ...]:
    """The short names kubectl knows a built-in resource by (``("deploy",)``)."""
    return _SHORT_NAMES.get(resource, ())


def _names(resource: Resource) -> tuple[str, ...]:
    r = resource
    return (r.plural, r.kind.lower(), *_SHORT_NAMES.get(r, ()))


def _find(
    name: str, *, api_version: str | None = None, group: str | None = None
) -> Resource | None:
    wanted = name.lower()
    for r, _ in _TABLE:
        if api_version is not None and r.api_version != api_version:
            continue
        if group is not None and r.group != group:
            continue
        if wanted in _names(r):
            return r
    return None


def _unknown(asked: str, name: str, *, api_version: str | None = None) -> str:
    elsewhere = _find(name)
    if elsewhere is not None:
        return (
            f"unknown built-in resource {asked!r}: {elsewhere.plural} is served in "
            f"{elsewhere.api_version} ({elsewhere.api_version}/{elsewhere.kind}, "
            f"{elsewhere.group_resource})"
        )
    pool = [r for r, _ in _TABLE if api_version is None or r.api_version == api_version]
    if not pool:
        pool = [r for r, _ in _TABLE]
    by_name: dict[str, Resource] = {}
    for r in pool:
        for n in (r.plural, r.kind, *_SHORT_NAMES.get(r, ())):
            by_name.setdefault(n.lower(), r)
    close = difflib.get_close_matches(name.lower(), list(by_name), n=6, cutoff=0.6)
    seen: list[Resource] = []
    for n in close:
        if by_name[n] not in seen:
            seen.append(by_name[n])
    hint = " or ".join(f"{r.group_resource} ({r.api_version} {r.kind})" for r in seen[:3])
    return (
        f"unknown built-in resource {asked!r}"
        + (f"; did you mean {hint}?" if hint else ".")
        + " A custom resource is "
        "Resource(group, version, plural, kind, namespaced=...), or found by discovery: "
        "KubeClient.resource_for(api_version, kind)"
    )

"""The resource table: which API group, version and plural serve a kind.

client-go builds request paths from a ``schema.GroupVersionResource``; Overseer does the
same from :class:`Resource`. The built-in resources Overseer and its controllers use are
listed in :data:`BUILTINS`; custom resources are added at run time from discovery (see
``manager.client.KubeClient.discover``).

Safe to share between threads: :class:`Resource` is immutable.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["BUILTINS", "Resource", "builtin"]


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


_RBAC = "rbac.authorization.k8s.io"


def _table(entries: Iterable[Resource]) -> dict[str, Resource]:
    return {f"{r.api_version}/{r.plural}": r for r in entries}


BUILTINS: dict[str, Resource] = _table(
    [
        Resource("", "v1", "namespaces", "Namespace", namespaced=False, has_status=True),
        Resource("", "v1", "pods", "Pod", namespaced=True, has_status=True),
        Resource("", "v1", "services", "Service", namespaced=True, has_status=True),
        Resource("", "v1", "configmaps", "ConfigMap", namespaced=True),
        Resource("", "v1", "secrets", "Secret", namespaced=True),
        Resource("", "v1", "serviceaccounts", "ServiceAccount", namespaced=True),
        Resource("", "v1", "events", "Event", namespaced=True),
        Resource("", "v1", "nodes", "Node", namespaced=False, has_status=True),
        Resource("apps", "v1", "deployments", "Deployment", namespaced=True, has_status=True),
        Resource("apps", "v1", "replicasets", "ReplicaSet", namespaced=True, has_status=True),
        Resource(
            "networking.k8s.io", "v1", "ingresses", "Ingress", namespaced=True, has_status=True
        ),
        Resource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True),
        Resource("events.k8s.io", "v1", "events", "Event", namespaced=True),
        Resource(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            namespaced=False,
            has_status=True,
        ),
        Resource(_RBAC, "v1", "roles", "Role", namespaced=True),
        Resource(_RBAC, "v1", "rolebindings", "RoleBinding", namespaced=True),
        Resource(_RBAC, "v1", "clusterroles", "ClusterRole", namespaced=False),
        Resource(_RBAC, "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False),
    ]
)


def builtin(api_version: str, plural: str) -> Resource:
    """Look up a built-in resource by ``apiVersion`` and plural (``"apps/v1", "deployments"``).

    Raises:
        KeyError: not a built-in resource; custom resources come from discovery.
    """
    try:
        return BUILTINS[f"{api_version}/{plural}"]
    except KeyError:
        raise KeyError(f"unknown built-in resource {api_version}/{plural}") from None

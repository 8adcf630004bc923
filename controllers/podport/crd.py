"""The LogicalPort custom resource: its CRD as data, its served resource, the installer.

``CRD`` is the exact manifest that ``deploy/crds/logicalports.network.overseer.io.yaml``
holds (a unit test keeps the two identical). A LogicalPort is cluster-scoped; its name is
``<network>.<address>`` (see :mod:`controllers.podport.ipam`), which is what makes the API
server the lock on an address. Its spec is written once at creation; only ``nodeName`` is
patched later (pods are usually scheduled after their port is allocated).

Thread-safe: constants and functions over a shared client.
"""

from __future__ import annotations

import copy
import logging
from typing import Any, Final

from manager import AlreadyExists, JsonDict, KubeClient, NotFound, Resource, builtin

__all__ = [
    "CRD",
    "CRD_NAME",
    "GROUP",
    "LOGICAL_PORTS",
    "VERSION",
    "crd_manifest",
    "crd_served",
    "install_crd",
]

logger = logging.getLogger(__name__)

GROUP: Final = "network.overseer.io"
VERSION: Final = "v1alpha1"
CRD_NAME: Final = f"logicalports.{GROUP}"
CRDS: Final = builtin("apiextensions.k8s.io/v1", "customresourcedefinitions")
LOGICAL_PORTS: Final = Resource(GROUP, VERSION, "logicalports", "LogicalPort", namespaced=False)

_STRING: Final[dict[str, Any]] = {"type": "string"}

CRD: Final[dict[str, Any]] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {
        "name": CRD_NAME,
        "labels": {"app.kubernetes.io/part-of": "overseer"},
    },
    "spec": {
        "group": GROUP,
        "scope": "Cluster",
        "names": {
            "plural": "logicalports",
            "singular": "logicalport",
            "kind": "LogicalPort",
            "listKind": "LogicalPortList",
            "shortNames": ["lport"],
            "categories": ["overseer"],
        },
        "versions": [
            {
                "name": VERSION,
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "description": "A pod's logical network port: one address on one "
                        "network. The name is <network>.<address>, so an address can be "
                        "held by one LogicalPort only.",
                        "required": ["spec"],
                        "properties": {
                            "apiVersion": dict(_STRING),
                            "kind": dict(_STRING),
                            "metadata": {"type": "object"},
                            "spec": {
                                "type": "object",
                                "required": [
                                    "network",
                                    "ip",
                                    "mac",
                                    "podNamespace",
                                    "podName",
                                    "podUID",
                                ],
                                "properties": {
                                    "network": {
                                        "type": "string",
                                        "description": "Network name (a DNS label).",
                                        "maxLength": 63,
                                    },
                                    "ip": {
                                        "type": "string",
                                        "description": "IPv4 or IPv6 address.",
                                        "maxLength": 45,
                                    },
                                    "mac": {
                                        "type": "string",
                                        "description": "MAC address, lower-case.",
                                        "pattern": "^([0-9a-f]{2}:){5}[0-9a-f]{2}$",
                                    },
                                    "podNamespace": {
                                        "type": "string",
                                        "description": "Namespace of the pod.",
                                    },
                                    "podName": {
                                        "type": "string",
                                        "description": "Name of the pod.",
                                    },
                                    "podUID": {
                                        "type": "string",
                                        "description": "UID of the pod; a pod recreated "
                                        "with the same name is another pod.",
                                    },
                                    "nodeName": {
                                        "type": "string",
                                        "description": "Node of the pod (empty until scheduled).",
                                    },
                                },
                            },
                        },
                    }
                },
                "additionalPrinterColumns": [
                    {"name": "Network", "type": "string", "jsonPath": ".spec.network"},
                    {"name": "IP", "type": "string", "jsonPath": ".spec.ip"},
                    {"name": "MAC", "type": "string", "jsonPath": ".spec.mac"},
                    {
                        "name": "Pod-Namespace",
                        "type": "string",
                        "jsonPath": ".spec.podNamespace",
                        "priority": 1,
                    },
                    {"name": "Pod", "type": "string", "jsonPath": ".spec.podName"},
                    {"name": "Node", "type": "string", "jsonPath": ".spec.nodeName"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
            }
        ],
    },
}


def crd_manifest() -> JsonDict:
    """A fresh copy of :data:`CRD` (safe to modify)."""
    return copy.deepcopy(CRD)


def crd_served(client: KubeClient) -> bool:
    """Whether the API server serves ``logicalports`` in ``network.overseer.io/v1alpha1``
    (by discovery, which needs no RBAC rule).

    Raises:
        ApiError: discovery failed for another reason than "not served".
    """
    try:
        resources = client.discover(f"{GROUP}/{VERSION}")
    except NotFound:
        return False
    return any(r.plural == LOGICAL_PORTS.plural for r in resources)


def install_crd(client: KubeClient) -> bool:
    """Create the CRD; True if created, False if it existed already.

    Raises:
        ApiError: the create failed (Forbidden without the RBAC rule, ...).
    """
    try:
        client.create(CRDS, crd_manifest())
    except AlreadyExists:
        return False
    logger.info("installed the LogicalPort CRD", extra={"crd": CRD_NAME})
    return True

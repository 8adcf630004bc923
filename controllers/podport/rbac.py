"""The RBAC rules the podport controller needs, as data: the plugin's ``rbac_rules``
(``overseer rbac`` and deploy/base/rbac.yaml are made from them).

Thread-safe: constants and a pure function.
"""

from __future__ import annotations

from typing import Final

from controllers.podport.config import PodPortConfig

__all__ = ["INSTALL_CRD_RBAC_RULES", "RBAC_RULES", "rbac_rules"]

RBAC_RULES: Final[tuple[dict[str, list[str]], ...]] = (
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "patch"]},
    {
        "apiGroups": ["network.overseer.io"],
        "resources": ["logicalports"],
        "verbs": ["get", "list", "watch", "create", "patch", "delete"],
    },
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
)
"""ClusterRole rules the controller needs (LogicalPorts are cluster-scoped; ``patch``
keeps a port's ``nodeName`` current). Discovery, used to find the CRD, needs none."""

INSTALL_CRD_RBAC_RULES: Final[tuple[dict[str, list[str]], ...]] = (
    {
        "apiGroups": ["apiextensions.k8s.io"],
        "resources": ["customresourcedefinitions"],
        "verbs": ["get", "create"],
    },
)
"""Added to :data:`RBAC_RULES` only with ``installCrd: true``."""


def rbac_rules(config: PodPortConfig) -> list[dict[str, list[str]]]:
    """The rules for ``config``."""
    return [*RBAC_RULES, *(INSTALL_CRD_RBAC_RULES if config.install_crd else ())]

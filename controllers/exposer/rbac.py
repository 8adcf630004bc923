"""The RBAC rules the exposer needs, as data: the plugin's ``rbac_rules`` (``overseer
rbac`` and deploy/base/rbac.yaml are made from them).

Least privilege (DESIGN.md §7): exactly the verbs the reconciler and its informers use.

* ``deployments``: get/list/watch (informer), patch (``overseer.io/exposed-url``, only with
  ``annotateDeployment``, or to remove one left by an earlier version).
* ``deployments/finalizers``: update — setting ``blockOwnerDeletion: true`` on an
  ownerReference needs it where the ``OwnerReferencesPermissionEnforcement`` admission
  plugin is on (OpenShift and hardened clusters).
* ``services``, ``ingresses``: get/list/watch (informers; GET after ``AlreadyExists``),
  create, update (PUT with the observed resourceVersion), delete (opt-in removed); no
  ``patch``: the reconciler only PUTs.
* ``events``: create/patch (the recorder creates an Event, then patches its count).

Thread-safe: constants.
"""

from __future__ import annotations

from typing import Final

__all__ = ["RBAC_RULES"]

RBAC_RULES: Final[list[dict[str, list[str]]]] = [
    {
        "apiGroups": ["apps"],
        "resources": ["deployments"],
        "verbs": ["get", "list", "watch", "patch"],
    },
    {"apiGroups": ["apps"], "resources": ["deployments/finalizers"], "verbs": ["update"]},
    {
        "apiGroups": [""],
        "resources": ["services"],
        "verbs": ["get", "list", "watch", "create", "update", "delete"],
    },
    {
        "apiGroups": ["networking.k8s.io"],
        "resources": ["ingresses"],
        "verbs": ["get", "list", "watch", "create", "update", "delete"],
    },
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
]

"""Acting as a ServiceAccount in tests: a kubeconfig that carries its token.

:func:`service_account_kubeconfig` asks the API server for a token of a ServiceAccount
(``serviceaccounts/{name}/token``, the TokenRequest API a kubelet uses) and writes a
kubeconfig with the cluster of the given one and that token. It works on the local API
server (which then authenticates the token and, when it enforces RBAC, authorizes the
requests by what is bound to the account) and on a real cluster alike, so a test can
check what an account may do where the controller will run.

Thread-safe: each call works on its own objects.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from manager.errors import ConfigError
from manager.kube import KubeClient

__all__ = ["service_account_kubeconfig"]

JsonDict = dict[str, Any]


def _cluster_of(kubeconfig: Path) -> JsonDict:
    """The cluster entry of ``kubeconfig``'s current context, its paths made absolute."""
    doc = yaml.safe_load(kubeconfig.read_text()) or {}
    current = doc.get("current-context")
    context = next(
        (c.get("context") or {} for c in doc.get("contexts") or [] if c.get("name") == current),
        None,
    )
    if context is None:
        raise ConfigError([f"kubeconfig {kubeconfig}: no current context"])
    cluster = next(
        (
            dict(c.get("cluster") or {})
            for c in doc.get("clusters") or []
            if c.get("name") == context.get("cluster")
        ),
        None,
    )
    if cluster is None:
        raise ConfigError([f"kubeconfig {kubeconfig}: no cluster {context.get('cluster')!r}"])
    ca = cluster.get("certificate-authority")
    if ca and not os.path.isabs(ca):
        cluster["certificate-authority"] = str((kubeconfig.parent / ca).resolve())
    return cluster


def service_account_kubeconfig(
    kubeconfig: str | os.PathLike[str],
    namespace: str,
    name: str,
    path: str | os.PathLike[str],
    *,
    expiration_seconds: int = 3600,
) -> Path:
    """Write, at ``path``, a kubeconfig for the API server of ``kubeconfig`` whose
    requests come from the ServiceAccount ``namespace/name`` (which must exist).
    Returns ``path``.

    Raises:
        NotFound: there is no such ServiceAccount.
        ConfigError: ``kubeconfig`` has no current context or cluster.
    """
    source = Path(kubeconfig)
    with KubeClient.from_kubeconfig(os.fspath(source)) as client:
        answer = client.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            body={
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": expiration_seconds},
            },
            idempotent=False,
        )
    token = str((answer.get("status") or {}).get("token") or "")
    user = f"{namespace}-{name}"
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "cluster", "cluster": _cluster_of(source)}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [
            {
                "name": user,
                "context": {"cluster": "cluster", "user": user, "namespace": namespace},
            }
        ],
        "current-context": user,
    }
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    out.chmod(0o600)
    return out

"""Acting as a ServiceAccount in tests: a kubeconfig that carries its token.

:func:`service_account_kubeconfig` asks the API server for a token of a ServiceAccount
(``serviceaccounts/{name}/token``, the TokenRequest API a kubelet uses) and writes a
kubeconfig with the cluster of the given one and that token; :func:`bound_service_account`
also creates the account and the RBAC objects ``overseer rbac`` generated for it, and
deletes them afterwards (the test kit runs plugins this way). It works on the local API
server (which then authenticates the token and, when it enforces RBAC, authorizes the
requests by what is bound to the account) and on a real cluster alike, so a test can
check what an account may do where the controller will run.

Thread-safe: each call works on its own objects.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import yaml

from manager.client import KubeClient
from manager.errors import ApiError, ConfigError, NotFound
from manager.resources import Resource, builtin

__all__ = ["bound_service_account", "service_account_kubeconfig"]

JsonDict = dict[str, Any]
_NAMESPACES: Final = builtin("v1", "namespaces")
_ACCOUNTS: Final = builtin("v1", "serviceaccounts")


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


_RBAC_KINDS: Final = {
    "ClusterRole": builtin("rbac.authorization.k8s.io/v1", "clusterroles"),
    "ClusterRoleBinding": builtin("rbac.authorization.k8s.io/v1", "clusterrolebindings"),
    "Role": builtin("rbac.authorization.k8s.io/v1", "roles"),
    "RoleBinding": builtin("rbac.authorization.k8s.io/v1", "rolebindings"),
}


@contextlib.contextmanager
def bound_service_account(
    kubeconfig: str | os.PathLike[str],
    rbac: str,
    *,
    namespace: str,
    name: str,
) -> Iterator[Path]:
    """Create the ServiceAccount ``namespace/name`` (and its namespace, if missing) and
    the RBAC objects of the YAML stream ``rbac`` (``overseer rbac``'s output for that
    account); yield a kubeconfig acting as the account; delete all of it afterwards.

    Raises:
        ConfigError: an object of ``rbac`` is not an RBAC object, or cannot be created
            (e.g. a Role in a namespace that does not exist), named with the error.
    """
    made: list[tuple[Resource, str, str | None]] = []
    with KubeClient.from_kubeconfig(os.fspath(kubeconfig)) as admin:
        try:
            try:
                admin.get(_NAMESPACES, namespace)
            except NotFound:
                admin.create(_NAMESPACES, {"metadata": {"name": namespace}})
                made.append((_NAMESPACES, namespace, None))
            admin.create(_ACCOUNTS, {"metadata": {"name": name}}, namespace)
            made.append((_ACCOUNTS, name, namespace))
            for doc in yaml.safe_load_all(rbac):
                if not doc:
                    continue
                kind = doc.get("kind")
                meta = doc.get("metadata") or {}
                resource = _RBAC_KINDS.get(str(kind))
                if resource is None:
                    raise ConfigError([f"rbac: {kind} {meta.get('name')}: not an RBAC object"])
                ns = meta.get("namespace") if resource.namespaced else None
                try:
                    admin.create(resource, doc, ns)
                except ApiError as exc:
                    where = f" in the namespace {ns}" if ns else ""
                    raise ConfigError(
                        [f"rbac: {kind} {meta.get('name')}{where}: {exc.message}"]
                    ) from exc
                made.append((resource, str(meta.get("name")), ns))
            with tempfile.TemporaryDirectory(prefix="overseer-sa-") as tmp:
                yield service_account_kubeconfig(
                    kubeconfig, namespace, name, Path(tmp) / "kubeconfig"
                )
        finally:
            for resource, obj, ns in reversed(made):
                with contextlib.suppress(NotFound):
                    admin.delete(resource, obj, ns)

"""Authentication and RBAC as kube-apiserver enforces them: a ServiceAccount's token,
Roles, ClusterRoles and their bindings, 403 with kube's message, TokenReview and the
access reviews. The test kit's API server enforces RBAC (as a cluster does); every test
here runs against a real cluster too."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from manager import Forbidden, KubeClient, NotFound, builtin
from manager.errors import Unauthorized
from manager.testing import eventually
from manager.testing.serviceaccount import service_account_kubeconfig

CONFIGMAPS = builtin("v1", "configmaps")
SECRETS = builtin("v1", "secrets")
ACCOUNTS = builtin("v1", "serviceaccounts")
DEPLOYMENTS = builtin("apps/v1", "deployments")
ROLES = builtin("rbac.authorization.k8s.io/v1", "roles")
ROLE_BINDINGS = builtin("rbac.authorization.k8s.io/v1", "rolebindings")
CLUSTER_ROLES = builtin("rbac.authorization.k8s.io/v1", "clusterroles")
CLUSTER_ROLE_BINDINGS = builtin("rbac.authorization.k8s.io/v1", "clusterrolebindings")
RBAC = "rbac.authorization.k8s.io"


def _bind(
    kind: str, name: str, role_kind: str, role: str, *, sa: str, ns: str
) -> dict[str, object]:
    meta: dict[str, str] = {"name": name}
    if kind == "RoleBinding":
        meta["namespace"] = ns
    return {
        "metadata": meta,
        "roleRef": {"apiGroup": RBAC, "kind": role_kind, "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}],
    }


@pytest.fixture
def bot(
    kube_client: KubeClient, namespace: str, kubeconfig_path: str, tmp_path: Path
) -> KubeClient:
    """A client acting as the ServiceAccount ``bot`` of the test's namespace (granted
    nothing yet)."""
    kube_client.create(ACCOUNTS, {"metadata": {"name": "bot"}}, namespace)
    path = service_account_kubeconfig(kubeconfig_path, namespace, "bot", tmp_path / "bot")
    return KubeClient.from_kubeconfig(str(path))


@pytest.fixture
def cluster_objects(kube_client: KubeClient) -> Iterator[list[tuple[object, str]]]:
    """Cluster-scoped objects a test makes: deleted after it."""
    made: list[tuple[object, str]] = []
    yield made
    for resource, name in reversed(made):
        with contextlib.suppress(NotFound):
            kube_client.delete(resource, name)  # type: ignore[arg-type]


def _who(namespace: str) -> str:
    return f"system:serviceaccount:{namespace}:bot"


def test_a_role_grants_its_verbs_in_its_namespace_and_403_names_what_is_missing(
    kube_client: KubeClient, namespace: str, bot: KubeClient
) -> None:
    kube_client.create(CONFIGMAPS, {"metadata": {"name": "cm"}}, namespace)
    kube_client.create(
        ROLES,
        {
            "metadata": {"name": "read-cm"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}],
        },
        namespace,
    )
    kube_client.create(
        ROLE_BINDINGS, _bind("RoleBinding", "read-cm", "Role", "read-cm", sa="bot", ns=namespace)
    )
    with bot:
        assert eventually(lambda: bot.get(CONFIGMAPS, "cm", namespace))
        with pytest.raises(Forbidden) as err:
            bot.list(CONFIGMAPS, namespace)
        assert str(err.value.message) == (
            f'configmaps is forbidden: User "{_who(namespace)}" cannot list resource '
            f'"configmaps" in API group "" in the namespace "{namespace}"'
        )
        with pytest.raises(Forbidden) as err:
            bot.get(SECRETS, "s", namespace)
        assert err.value.message == (
            f'secrets "s" is forbidden: User "{_who(namespace)}" cannot get resource '
            f'"secrets" in API group "" in the namespace "{namespace}"'
        )
        with pytest.raises(Forbidden) as err:
            bot.list(DEPLOYMENTS)
        assert err.value.message == (
            f'deployments.apps is forbidden: User "{_who(namespace)}" cannot list resource '
            '"deployments" in API group "apps" at the cluster scope'
        )
        with pytest.raises(Forbidden) as err:
            bot.create(CONFIGMAPS, {"metadata": {"name": "new"}}, namespace)
        assert err.value.message == (
            f'configmaps is forbidden: User "{_who(namespace)}" cannot create resource '
            f'"configmaps" in API group "" in the namespace "{namespace}"'
        )


def test_cluster_role_through_a_role_binding_is_limited_to_that_namespace(
    kube_client: KubeClient,
    namespace: str,
    bot: KubeClient,
    cluster_objects: list[tuple[object, str]],
) -> None:
    role = f"ovs-test-{uuid.uuid4().hex[:8]}"
    kube_client.create(
        CLUSTER_ROLES,
        {
            "metadata": {"name": role},
            "rules": [
                {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list", "watch"]},
                {
                    "apiGroups": [""],
                    "resources": ["configmaps"],
                    "resourceNames": ["only-this"],
                    "verbs": ["get"],
                },
            ],
        },
    )
    cluster_objects.append((CLUSTER_ROLES, role))
    kube_client.create(
        ROLE_BINDINGS, _bind("RoleBinding", "b", "ClusterRole", role, sa="bot", ns=namespace)
    )
    for name in ("only-this", "other"):
        kube_client.create(CONFIGMAPS, {"metadata": {"name": name}}, namespace)
    with bot:
        assert eventually(lambda: bot.list(DEPLOYMENTS, namespace) is not None)
        assert bot.get(CONFIGMAPS, "only-this", namespace)
        with pytest.raises(Forbidden):
            bot.get(CONFIGMAPS, "other", namespace)
        with pytest.raises(Forbidden) as err:
            bot.list(DEPLOYMENTS)  # all namespaces: the cluster scope
        assert "at the cluster scope" in err.value.message


def test_subresources_are_their_own_resource(
    kube_client: KubeClient, namespace: str, bot: KubeClient
) -> None:
    kube_client.create(
        ROLES,
        {
            "metadata": {"name": "status"},
            "rules": [
                {"apiGroups": ["apps"], "resources": ["deployments/status"], "verbs": ["get"]}
            ],
        },
        namespace,
    )
    kube_client.create(
        ROLE_BINDINGS, _bind("RoleBinding", "s", "Role", "status", sa="bot", ns=namespace)
    )
    with bot:

        def status_allowed() -> bool:
            try:
                bot.request(
                    "GET",
                    f"/apis/apps/v1/namespaces/{namespace}/deployments/web/status",
                    idempotent=True,
                )
            except NotFound:  # allowed: then the Deployment is not there
                return True
            except Forbidden:
                return False
            return False

        assert eventually(status_allowed)
        with pytest.raises(Forbidden) as err:
            bot.get(DEPLOYMENTS, "web", namespace)
        assert err.value.message == (
            f'deployments.apps "web" is forbidden: User "{_who(namespace)}" cannot get '
            f'resource "deployments" in API group "apps" in the namespace "{namespace}"'
        )


def test_a_binding_to_a_missing_role_says_so_in_the_403(
    kube_client: KubeClient, namespace: str, bot: KubeClient
) -> None:
    kube_client.create(
        ROLE_BINDINGS, _bind("RoleBinding", "dangling", "Role", "missing", sa="bot", ns=namespace)
    )
    with bot:

        def refused_with_reason() -> bool:
            try:
                bot.list(SECRETS, namespace)
            except Forbidden as err:
                assert err.message.endswith(f': RBAC: role.{RBAC} "missing" not found'), err.message
                return True
            return False

        assert eventually(refused_with_reason)


def _review(client: KubeClient, kind: str, spec: dict[str, object], ns: str = "") -> dict:
    plural = kind.lower() + "s"
    group = (
        "authentication.k8s.io"
        if kind in ("TokenReview", "SelfSubjectReview")
        else ("authorization.k8s.io")
    )
    where = f"/namespaces/{ns}" if ns else ""
    return client.request(
        "POST",
        f"/apis/{group}/v1{where}/{plural}",
        body={"apiVersion": f"{group}/v1", "kind": kind, "spec": spec},
        idempotent=True,
    )


def test_access_reviews_answer_from_the_rbac_held(
    kube_client: KubeClient,
    namespace: str,
    bot: KubeClient,
    cluster_objects: list[tuple[object, str]],
) -> None:
    role = f"ovs-test-{uuid.uuid4().hex[:8]}"
    kube_client.create(
        CLUSTER_ROLES,
        {
            "metadata": {"name": role},
            "rules": [
                {"nonResourceURLs": ["/metrics"], "verbs": ["get"]},
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]},
            ],
        },
    )
    cluster_objects.append((CLUSTER_ROLES, role))
    kube_client.create(
        CLUSTER_ROLE_BINDINGS,
        _bind("ClusterRoleBinding", role, "ClusterRole", role, sa="bot", ns=namespace),
    )
    cluster_objects.append((CLUSTER_ROLE_BINDINGS, role))
    user = _who(namespace)
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]
    metrics = {
        "user": user,
        "groups": groups,
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
    }

    def allowed() -> dict:
        answer = _review(kube_client, "SubjectAccessReview", metrics)
        assert answer["status"]["allowed"] is True, answer["status"]
        return answer

    answer = eventually(allowed)
    assert answer["status"]["reason"] == (
        f'RBAC: allowed by ClusterRoleBinding "{role}" of ClusterRole "{role}" to '
        f'ServiceAccount "bot/{namespace}"'
    )
    other = {"user": user, "nonResourceAttributes": {"path": "/healthz/x", "verb": "post"}}
    assert _review(kube_client, "SubjectAccessReview", other)["status"]["allowed"] is False
    local = {
        "user": user,
        "resourceAttributes": {"namespace": namespace, "verb": "list", "resource": "secrets"},
    }
    assert _review(kube_client, "LocalSubjectAccessReview", local, namespace)["status"]["allowed"]
    local["resourceAttributes"] = {"namespace": namespace, "verb": "delete", "resource": "secrets"}
    assert not _review(kube_client, "LocalSubjectAccessReview", local, namespace)["status"][
        "allowed"
    ]
    with bot:
        own = {
            "resourceAttributes": {"namespace": namespace, "verb": "list", "resource": "secrets"}
        }
        assert _review(bot, "SelfSubjectAccessReview", own)["status"]["allowed"] is True
        own["resourceAttributes"]["verb"] = "watch"
        assert _review(bot, "SelfSubjectAccessReview", own)["status"]["allowed"] is False


def test_token_review_names_the_service_account(
    kube_client: KubeClient, namespace: str, kubeconfig_path: str, tmp_path: Path
) -> None:
    kube_client.create(ACCOUNTS, {"metadata": {"name": "bot"}}, namespace)
    path = service_account_kubeconfig(kubeconfig_path, namespace, "bot", tmp_path / "k")
    token = yaml.safe_load(path.read_text())["users"][0]["user"]["token"]
    status = _review(kube_client, "TokenReview", {"token": token})["status"]
    assert status["authenticated"] is True
    assert status["user"]["username"] == _who(namespace)
    assert {
        "system:serviceaccounts",
        f"system:serviceaccounts:{namespace}",
        "system:authenticated",
    } <= set(status["user"]["groups"])
    status = _review(kube_client, "TokenReview", {"token": token[:-4] + "AAAA"})["status"]
    assert not status.get("authenticated")


def test_unknown_tokens_and_deleted_accounts_are_unauthorized(
    kube_client: KubeClient, namespace: str, bot: KubeClient, kubeconfig_path: str, tmp_path: Path
) -> None:
    with bot:
        with pytest.raises(Forbidden):
            bot.list(SECRETS, namespace)  # authenticated: a 403, not a 401
        kube_client.delete(ACCOUNTS, "bot", namespace)

        def unauthorized() -> bool:
            try:
                bot.list(SECRETS, namespace)
            except Unauthorized:
                return True
            except Forbidden:
                return False
            return False

        assert eventually(unauthorized)


def test_aggregated_cluster_roles_take_the_rules_of_the_roles_they_select(
    kube_client: KubeClient,
    namespace: str,
    bot: KubeClient,
    cluster_objects: list[tuple[object, str]],
) -> None:
    label = f"ovs-test-{uuid.uuid4().hex[:8]}"
    kube_client.create(
        CLUSTER_ROLES,
        {
            "metadata": {"name": f"{label}-agg"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"aggregate-to": label}}]},
            "rules": [],
        },
    )
    cluster_objects.append((CLUSTER_ROLES, f"{label}-agg"))
    kube_client.create(
        CLUSTER_ROLES,
        {
            "metadata": {"name": f"{label}-part", "labels": {"aggregate-to": label}},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}],
        },
    )
    cluster_objects.append((CLUSTER_ROLES, f"{label}-part"))
    kube_client.create(
        ROLE_BINDINGS,
        _bind("RoleBinding", "agg", "ClusterRole", f"{label}-agg", sa="bot", ns=namespace),
    )
    # On a cluster kube-controller-manager's clusterrole-aggregation controller copies
    # the rules into the aggregated role some time after these writes, and the
    # authorizer sees them once its informers have: wait for the access as a client
    # would, a refusal meaning "not yet" (it still fails if aggregation never happens).
    with bot:

        def listed() -> bool:
            try:
                return bot.list(SECRETS, namespace) is not None
            except Forbidden:
                return False

        assert eventually(
            listed, timeout=30, what="the bot to list secrets through the aggregated role"
        )

"""The built-in resource table and :func:`manager.builtin` (issue 32, item 1): every
resource of Kubernetes 1.36, by any name kubectl takes, and an error that names the
closest ones when a name is none of them."""

from __future__ import annotations

import pytest

from apiserver.api.resources import _builtins
from manager import Resource, builtin
from manager.resources import BUILTINS, short_names


def test_the_table_is_the_local_servers_which_is_kube_apiserver_1_36s() -> None:
    """The local API server's table is checked against kube-apiserver 1.36's discovery
    (tests/integration/test_apiserver_discovery.py); this one must not drift from it."""
    served = {s.resource: tuple(s.short_names) for s in _builtins()}
    ours = {r: short_names(r) for r in BUILTINS.values()}
    assert ours == served
    assert all(s.singular == s.resource.kind.lower() for s in _builtins())


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("ResourceQuota", "v1/resourcequotas"),
        ("resourcequotas", "v1/resourcequotas"),
        ("resourcequota", "v1/resourcequotas"),
        ("quota", "v1/resourcequotas"),
        ("QUOTA", "v1/resourcequotas"),
        ("networkpolicies.networking.k8s.io", "networking.k8s.io/v1/networkpolicies"),
        ("NetworkPolicy.networking.k8s.io", "networking.k8s.io/v1/networkpolicies"),
        ("netpol", "networking.k8s.io/v1/networkpolicies"),
        ("apps/v1/Deployment", "apps/v1/deployments"),
        ("apps/v1/deploy", "apps/v1/deployments"),
        ("v1/pods", "v1/pods"),
        ("deployments.v1.apps", "apps/v1/deployments"),
        ("deployments.apps", "apps/v1/deployments"),
        # kubectl's resolution of a name several groups or versions serve: the core
        # group first, then the group's preferred version
        ("events", "v1/events"),
        ("events.events.k8s.io", "events.k8s.io/v1/events"),
        ("hpa", "autoscaling/v2/horizontalpodautoscalers"),
        ("autoscaling/v1/hpa", "autoscaling/v1/horizontalpodautoscalers"),
        ("horizontalpodautoscalers.v1.autoscaling", "autoscaling/v1/horizontalpodautoscalers"),
        ("crd", "apiextensions.k8s.io/v1/customresourcedefinitions"),
        ("Endpoints", "v1/endpoints"),
    ],
)
def test_a_builtin_resource_by_any_name_kubectl_takes(name: str, expected: str) -> None:
    assert builtin(name) is BUILTINS[expected]


def test_the_two_argument_form_takes_a_plural_kind_or_short_name() -> None:
    assert builtin("v1", "resourcequotas") is builtin("v1", "ResourceQuota") is builtin("quota")
    assert builtin("apps/v1", "deploy") == Resource(
        "apps", "v1", "deployments", "Deployment", namespaced=True, has_status=True
    )


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("quotas", "'quotas'; did you mean resourcequotas (v1 ResourceQuota)?"),
        ("Deploymnet", "did you mean deployments.apps (apps/v1 Deployment)"),
        ("networkpolicy.networking", "networkpolicies is served in networking.k8s.io/v1"),
        ("v1/deployments", "'v1/deployments': deployments is served in apps/v1"),
        ("foos.example.com", "'foos.example.com'. A custom resource is Resource("),
    ],
)
def test_an_unknown_name_is_a_key_error_naming_the_closest_ones(name: str, says: str) -> None:
    with pytest.raises(KeyError) as info:
        builtin(name)
    message = str(info.value)
    assert says in message
    assert not message.startswith(("'", '"'))  # the message itself, not a quoted key
    if "served in" not in message:
        assert "KubeClient.resource(name)" in message


def test_the_two_argument_form_names_the_closest_too() -> None:
    with pytest.raises(KeyError, match=r"'v1/resourcequota s'; did you mean resourcequotas"):
        builtin("v1", "resourcequota s")

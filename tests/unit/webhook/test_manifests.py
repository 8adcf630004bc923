"""``overseer webhooks``' objects and the RBAC of managed certificates, read back as YAML
and checked field by field: one configuration of each declared kind named after the
install, calling the Service at each webhook's path, the caBundle left to the leader (or
to cert-manager's injector); the conversion patches; and ``overseer rbac``'s Role on the
Secret by name and ClusterRole on the configurations and CRDs by name, only when managed
certificates have something to serve."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from manager import Manager, PluginContext
from manager.config import parse
from manager.plugins import ControllerSettings, NoSettings
from manager.rbac import certificate_rules, for_controllers
from manager.webhook import (
    Admission,
    Conversion,
    MutatingWebhook,
    Rule,
    Spoke,
    ValidatingWebhook,
)
from manager.webhook.manifests import (
    INJECT_CA_FROM,
    WebhookManifests,
    configurations,
    conversion_patches,
    declared_webhooks,
)

RULES = [
    Rule(
        operations=["CREATE", "UPDATE"],
        resources=["widgets"],
        api_groups=["example.com"],
        api_versions=["v1"],
    )
]
VALIDATE = ValidatingWebhook(
    name="validate.widgets.example.com", rules=RULES, handler=lambda r: Admission.allow()
)
DEFAULT = MutatingWebhook(
    name="default.widgets.example.com",
    rules=RULES,
    handler=lambda r: r.object or {},
    reinvocation_policy="IfNeeded",
)
CONVERT = Conversion(
    crd="widgets.example.com", hub="v2", spokes={"v1": Spoke(to_hub=dict, from_hub=dict)}
)


class WidgetsPlugin:
    def setup(self, mgr: Manager, ctx: PluginContext[Any]) -> None:
        ctx.webhook(VALIDATE)
        ctx.webhook(DEFAULT)
        ctx.conversion(CONVERT)


class ValidateOnlyPlugin:
    def setup(self, mgr: Manager, ctx: PluginContext[Any]) -> None:
        ctx.webhook(
            ValidatingWebhook(
                name="validate.gadgets.example.com",
                rules=RULES,
                handler=lambda r: Admission.allow(),
            )
        )


class QuietPlugin:
    def setup(self, mgr: Manager, ctx: PluginContext[Any]) -> None:
        pass


def _declared(doc: dict[str, Any], **plugins: Any) -> tuple[Any, dict[str, Any], list[Any]]:
    schemas = {name: NoSettings for name in plugins}
    config, controllers = parse(doc, schemas)
    return config, controllers, declared_webhooks(plugins, config, controllers)


def _yaml(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Through YAML and back, as kubectl reads it."""
    return [d for d in yaml.safe_load_all(yaml.safe_dump_all(docs)) if d]


def test_setup_runs_offline_and_says_who_declared_what() -> None:
    _, _, declared = _declared({}, widgets=WidgetsPlugin(), gadgets=ValidateOnlyPlugin())
    assert [(type(h).__name__, owner) for h, owner in declared] == [
        ("ValidatingWebhook", "gadgets"),
        ("ValidatingWebhook", "widgets"),
        ("MutatingWebhook", "widgets"),
        ("Conversion", "widgets"),
    ]


def test_one_configuration_of_each_kind_calling_the_service_at_each_path() -> None:
    _, _, declared = _declared({}, widgets=WidgetsPlugin(), gadgets=ValidateOnlyPlugin())
    options = WebhookManifests(name="shop", namespace="shop-system", managed=True)
    validating, mutating = _yaml(configurations(declared, options))
    assert validating["apiVersion"] == "admissionregistration.k8s.io/v1"
    assert validating["kind"] == "ValidatingWebhookConfiguration"
    assert mutating["kind"] == "MutatingWebhookConfiguration"
    assert validating["metadata"]["name"] == mutating["metadata"]["name"] == "shop"
    assert "annotations" not in validating["metadata"]
    assert [h["name"] for h in validating["webhooks"]] == [
        "validate.gadgets.example.com",
        "validate.widgets.example.com",
    ]
    hook = validating["webhooks"][1]
    assert hook["clientConfig"] == {
        "service": {
            "name": "overseer-webhook",
            "namespace": "shop-system",
            "port": 443,
            "path": "/validate/validate.widgets.example.com",
        }
    }  # no caBundle: the leader fills it
    assert hook["rules"] == [
        {
            "operations": ["CREATE", "UPDATE"],
            "apiGroups": ["example.com"],
            "apiVersions": ["v1"],
            "resources": ["widgets"],
            "scope": "*",
        }
    ]
    assert hook["sideEffects"] == "None" and hook["admissionReviewVersions"] == ["v1"]
    assert hook["failurePolicy"] == "Fail" and hook["timeoutSeconds"] == 10
    (default,) = mutating["webhooks"]
    assert default["reinvocationPolicy"] == "IfNeeded"
    assert default["clientConfig"]["service"]["path"] == "/mutate/default.widgets.example.com"


def test_a_kind_nobody_declares_is_left_out_and_cert_manager_is_named_when_asked() -> None:
    _, _, declared = _declared({}, gadgets=ValidateOnlyPlugin())
    options = WebhookManifests(inject_ca_from="overseer-system/overseer-webhook")
    (only,) = _yaml(configurations(declared, options))
    assert only["kind"] == "ValidatingWebhookConfiguration"
    assert only["metadata"]["annotations"] == {INJECT_CA_FROM: "overseer-system/overseer-webhook"}
    assert conversion_patches(declared, options) == []


def test_the_conversion_patch_makes_the_crd_call_the_webhook() -> None:
    _, _, declared = _declared({}, widgets=WidgetsPlugin())
    (patch,) = _yaml(conversion_patches(declared, WebhookManifests(namespace="ns")))
    assert patch["kind"] == "CustomResourceDefinition"
    assert patch["metadata"]["name"] == "widgets.example.com"
    assert patch["spec"] == {
        "conversion": {
            "strategy": "Webhook",
            "webhook": {
                "clientConfig": {
                    "service": {
                        "name": "overseer-webhook",
                        "namespace": "ns",
                        "port": 443,
                        "path": "/convert/widgets.example.com",
                    }
                },
                "conversionReviewVersions": ["v1"],
            },
        }
    }


MANAGED = {"webhooks": {"certificates": "managed", "configurationName": "shop"}}


def _rbac(doc: dict[str, Any], **plugins: Any) -> dict[str, dict[str, Any]]:
    config, controllers, declared = _declared(doc, **plugins)
    text, _ = for_controllers(
        plugins, config, controllers, name="ovs", namespace="ovs-system", webhooks=declared
    )
    return {
        f"{d['kind']}/{d['metadata'].get('namespace', '')}/{d['metadata']['name']}": d
        for d in yaml.safe_load_all(text)
        if d
    }


def test_rbac_for_managed_certificates_names_the_secret_the_configurations_and_the_crds() -> None:
    objs = _rbac(MANAGED, widgets=WidgetsPlugin())
    role = objs["Role/ovs-system/ovs-webhook-certificates"]
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": ["overseer-webhook-tls"],
            "verbs": ["get", "list", "watch", "update"],
        },
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
    ]
    binding = objs["RoleBinding/ovs-system/ovs-webhook-certificates"]
    assert binding["roleRef"]["name"] == "ovs-webhook-certificates"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "ovs", "namespace": "ovs-system"}
    ]
    cluster = objs["ClusterRole//ovs-webhook-certificates"]
    assert cluster["rules"] == [
        {
            "apiGroups": ["admissionregistration.k8s.io"],
            "resources": ["validatingwebhookconfigurations"],
            "resourceNames": ["shop"],
            "verbs": ["get", "update"],
        },
        {
            "apiGroups": ["admissionregistration.k8s.io"],
            "resources": ["mutatingwebhookconfigurations"],
            "resourceNames": ["shop"],
            "verbs": ["get", "update"],
        },
        {
            "apiGroups": ["apiextensions.k8s.io"],
            "resources": ["customresourcedefinitions"],
            "resourceNames": ["widgets.example.com"],
            "verbs": ["get", "update"],
        },
    ]
    assert objs["ClusterRoleBinding//ovs-webhook-certificates"]["roleRef"]["kind"] == (
        "ClusterRole"
    )
    # nothing about Secrets anywhere else, nor cluster-wide
    others = [o for k, o in objs.items() if "webhook-certificates" not in k and "rules" in o]
    assert not [r for o in others for r in o["rules"] if "secrets" in r.get("resources", [])]


def test_the_secrets_role_goes_where_the_webhooks_namespace_is() -> None:
    doc = {"webhooks": {**MANAGED["webhooks"], "namespace": "hooks"}}
    objs = _rbac(doc, gadgets=ValidateOnlyPlugin())
    assert "Role/hooks/ovs-webhook-certificates" in objs
    binding = objs["RoleBinding/hooks/ovs-webhook-certificates"]
    assert binding["subjects"][0]["namespace"] == "ovs-system"
    # a validating webhook only: no rule on MutatingWebhookConfigurations, nor on CRDs
    rules = objs["ClusterRole//ovs-webhook-certificates"]["rules"]
    assert [r["resources"] for r in rules] == [["validatingwebhookconfigurations"]]


@pytest.mark.parametrize(
    ("doc", "plugins"),
    [
        ({}, {"widgets": WidgetsPlugin()}),  # certificates from certDir or self-signed
        (MANAGED, {"quiet": QuietPlugin()}),  # managed, but nothing declared
    ],
    ids=["not-managed", "nothing-declared"],
)
def test_no_certificate_rules_without_managed_certificates_to_serve(
    doc: dict[str, Any], plugins: dict[str, Any]
) -> None:
    objs = _rbac(doc, **plugins)
    assert not [k for k in objs if "webhook-certificates" in k]
    config, _, declared = _declared(doc, **plugins)
    assert certificate_rules(config, declared) == ([], [])


def test_settings_are_per_controller() -> None:
    # the offline setup sees each controller's own settings (a disabled one declares nothing)
    doc = {"controllers": {"widgets": {"enabled": False}}}
    _, controllers, declared = _declared(doc, widgets=WidgetsPlugin(), gadgets=ValidateOnlyPlugin())
    assert controllers["widgets"][0] == ControllerSettings(enabled=False)
    assert [owner for _, owner in declared] == ["gadgets"]

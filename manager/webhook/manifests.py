"""What ``overseer webhooks`` prints: the install's webhook configurations and CRD
conversion patches, from what the enabled controllers declare (kubebuilder's
``config/webhook/manifests.yaml``, made by the image instead of controller-gen).

* One ``ValidatingWebhookConfiguration`` and one ``MutatingWebhookConfiguration`` per
  install, both named ``webhooks.configurationName`` (``overseer``), each with every
  declared webhook of its kind (webhook names are unique across plugins, so one object
  of each kind serves them all and RBAC names two objects, not one per plugin). A kind
  no plugin declares is left out.
* Each webhook calls the Service ``webhooks.service`` in ``webhooks.namespace`` (the
  manager's namespace by default) on port 443, at the webhook's path.
* The ``caBundle``: with ``webhooks.certificates: managed`` it is left out, and the leader
  fills it in (:mod:`manager.webhook.certificates`); with ``certDir`` filled by
  cert-manager, ``inject_ca_from`` (``<namespace>/<Certificate>``) adds the annotation
  ``cert-manager.io/inject-ca-from`` and cert-manager's CA injector fills it in;
  otherwise whoever installs it must.
* :func:`conversion_patches`: per declared conversion, a merge patch of the CRD's
  ``spec.conversion`` (strategy ``Webhook``, the same Service, ``/convert/<crd>``), for
  ``kubectl patch crd NAME --type merge --patch-file`` or a kustomize ``patches`` entry:
  the CRD itself belongs to the plugin's install.

:func:`declared_webhooks` runs the enabled controllers' ``setup`` against a manager that
never connects (what ``overseer config validate`` does) to learn what they declare.

Thread-safe: pure functions (``declared_webhooks`` builds its own manager).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from manager.errors import ConfigError
from manager.keys import JsonDict
from manager.webhook.configuration import MutatingWebhook, ValidatingWebhook
from manager.webhook.conversion import Conversion

if TYPE_CHECKING:
    from manager.config import OverseerConfig
    from manager.plugins import ControllerPlugin, ControllerSettings

__all__ = [
    "INJECT_CA_FROM",
    "Declaration",
    "WebhookManifests",
    "configurations",
    "conversion_patches",
    "declared_webhooks",
]

INJECT_CA_FROM: Final = "cert-manager.io/inject-ca-from"
SERVICE_PORT: Final = 443
_OFFLINE_SERVER: Final = "http://127.0.0.1:9"  # nothing listens: a setup that connects fails

Declaration = tuple[ValidatingWebhook | MutatingWebhook | Conversion, str]


@dataclass(frozen=True, kw_only=True, slots=True)
class WebhookManifests:
    """Names and choices in the printed objects."""

    name: str = "overseer"  # both configurations
    namespace: str = "overseer-system"  # the Service's
    service: str = "overseer-webhook"
    port: int = SERVICE_PORT
    managed: bool = False  # the leader fills caBundle
    inject_ca_from: str = ""  # cert-manager: "<namespace>/<Certificate>"
    labels: Mapping[str, str] | None = None  # default: app.kubernetes.io name/part-of

    def client_config(self) -> JsonDict:
        return {"service": {"name": self.service, "namespace": self.namespace, "port": self.port}}

    def metadata(self, name: str) -> JsonDict:
        meta: JsonDict = {
            "name": name,
            "labels": dict(
                self.labels
                or {"app.kubernetes.io/name": "overseer", "app.kubernetes.io/part-of": "overseer"}
            ),
        }
        if self.inject_ca_from:
            meta["annotations"] = {INJECT_CA_FROM: self.inject_ca_from}
        return meta


def configurations(declared: Sequence[Declaration], options: WebhookManifests) -> list[JsonDict]:
    """The ValidatingWebhookConfiguration and MutatingWebhookConfiguration of the declared
    webhooks (a kind nobody declares is left out), validating first."""
    out = []
    for kind, cls in (
        ("ValidatingWebhookConfiguration", ValidatingWebhook),
        ("MutatingWebhookConfiguration", MutatingWebhook),
    ):
        hooks = [h.entry(options.client_config()) for h, _ in declared if isinstance(h, cls)]
        if hooks:
            out.append(
                {
                    "apiVersion": "admissionregistration.k8s.io/v1",
                    "kind": kind,
                    "metadata": options.metadata(options.name),
                    "webhooks": hooks,
                }
            )
    return out


def conversion_patches(
    declared: Sequence[Declaration], options: WebhookManifests
) -> list[JsonDict]:
    """Per declared conversion, the merge patch that makes its CRD convert through the
    webhook."""
    return [
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": options.metadata(h.crd),
            "spec": {"conversion": h.client_config(options.client_config())},
        }
        for h, _ in declared
        if isinstance(h, Conversion)
    ]


def declared_webhooks(
    plugins: Mapping[str, ControllerPlugin],
    config: OverseerConfig,
    controllers: Mapping[str, tuple[ControllerSettings, Any]],
) -> list[Declaration]:
    """Set every enabled controller up on a manager that never connects, as ``overseer
    run`` would, and return the webhooks and conversions they declared (with who
    declared each).

    Raises:
        ConfigError: the manager's options refuse the configuration.
        PluginSetupError: a controller's setup refused it (or tried to reach the API
            server).
    """
    from manager.client import ClientOptions, KubeClient
    from manager.client.kubeconfig import ClusterConfig
    from manager.config import manager_options
    from manager.manager import Manager
    from manager.plugins import setup_plugins

    offline = KubeClient(
        ClusterConfig(_OFFLINE_SERVER, source="overseer (never connects)"),
        options=ClientOptions(max_retries=0, timeout=1.0),
    )
    try:
        try:
            options = manager_options(config, controllers)
        except ValueError as exc:
            raise ConfigError([str(exc)]) from exc
        # nothing runs: no certificate machinery either
        options = dataclasses.replace(
            options, webhook=dataclasses.replace(options.webhook, managed=None)
        )
        mgr = Manager(offline, options)
        setup_plugins(mgr, plugins, controllers)
        return mgr.webhooks.declarations()
    finally:
        offline.close()

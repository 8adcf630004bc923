"""The webhook of the webhook chaos scenarios (``e2e/webhookchaos.py``): a validating
webhook with failurePolicy Fail on ConfigMap creates labelled ``webhook-chaos=load`` in
the configured namespace, allowing those whose ``data.verdict`` is ``allow`` and denying
the others — so that the load can tell a review that was answered from one that was not
(a create that should have been denied and was not went unreviewed)."""

from __future__ import annotations

from dataclasses import dataclass

from manager import Admission, AdmissionRequest, Manager, PluginContext, Rule, ValidatingWebhook

NAME = "load.webhook-chaos.overseer.io"
LABEL = "webhook-chaos"


@dataclass(frozen=True, kw_only=True)
class WebhookChaosConfig:
    namespace: str = "webhook-chaos"


def judge(req: AdmissionRequest) -> Admission:
    verdict = ((req.object or {}).get("data") or {}).get("verdict")
    if verdict == "allow":
        return Admission.allow()
    return Admission.deny(f"verdict {verdict!r}: only 'allow' is allowed", code=422)


class WebhookChaosPlugin:
    config_class = WebhookChaosConfig

    def setup(self, mgr: Manager, ctx: PluginContext[WebhookChaosConfig]) -> None:
        ctx.webhook(
            ValidatingWebhook(
                name=NAME,
                rules=[
                    Rule(
                        operations=["CREATE"],
                        resources=["configmaps"],
                        api_groups=[""],
                        api_versions=["v1"],
                    )
                ],
                handler=judge,
                failure_policy="Fail",
                timeout_seconds=10,
                namespace_selector={
                    "matchLabels": {"kubernetes.io/metadata.name": ctx.config.namespace}
                },
                object_selector={"matchLabels": {LABEL: "load"}},
            )
        )

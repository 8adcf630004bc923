"""Admission and conversion webhooks (controller-runtime ``pkg/webhook``,
``pkg/webhook/admission``, ``pkg/webhook/conversion``, ``pkg/certwatcher``; kopf's
admission handlers).

* :mod:`~manager.webhook.configuration`: what a plugin declares (``ValidatingWebhook``,
  ``MutatingWebhook``, ``Rule``, ``MatchCondition``), checked as kube-apiserver checks a
  webhook configuration;
* :mod:`~manager.webhook.admission`: the request a handler sees and the answer it gives
  (``AdmissionRequest``, ``Admission``), and answering an ``AdmissionReview``;
* :mod:`~manager.webhook.jsonpatch`: the RFC 6902 patch from the object sent to the one
  a mutating handler returned;
* :mod:`~manager.webhook.conversion`: CRD conversion through a hub version
  (``Conversion``, ``Spoke``);
* :mod:`~manager.webhook.server`: the HTTPS server every replica runs
  (``WebhookServer``), over :mod:`~manager.webhook.wire` (HTTP/1.1);
* :mod:`~manager.webhook.metrics`: controller-runtime's webhook metrics;
* :mod:`~manager.webhook.manifests`: what ``overseer webhooks`` prints (the install's
  webhook configurations, CRD conversion patches).

The serving certificate is :class:`manager.servingcert.ServingCertificate` (a mounted
pair reloaded on change, like ``certwatcher``, or a self-signed one), or the managed one
(``webhooks.certificates: managed``, cert-controller's rotator):
:mod:`~manager.webhook.certificates` (the Secret every replica serves and the leader
keeps, the ``caBundle`` it writes), :mod:`~manager.webhook.rotation` (the schedule) and
:mod:`~manager.webhook.authority` (the CA and its certificates; the ``cryptography``
package, imported only then).
"""

from __future__ import annotations

from manager.webhook.admission import (
    Admission,
    AdmissionRequest,
    BadReview,
    GroupVersionKind,
    GroupVersionResource,
    UserInfo,
    review,
)
from manager.webhook.configuration import (
    InvalidWebhook,
    MatchCondition,
    MutatingWebhook,
    Rule,
    ValidatingWebhook,
    Webhook,
)
from manager.webhook.conversion import Conversion, Spoke, convert
from manager.webhook.server import WebhookServer, WebhookServerOptions

__all__ = [
    "Admission",
    "AdmissionRequest",
    "BadReview",
    "Conversion",
    "GroupVersionKind",
    "GroupVersionResource",
    "InvalidWebhook",
    "MatchCondition",
    "MutatingWebhook",
    "Rule",
    "Spoke",
    "UserInfo",
    "ValidatingWebhook",
    "Webhook",
    "WebhookServer",
    "WebhookServerOptions",
    "convert",
    "review",
]

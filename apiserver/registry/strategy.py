"""The built-in kinds' strategy, and the one place a :class:`Rest` is wired.

:mod:`apiserver.registry.core` defaults and validates the core kinds and every object's
metadata; :mod:`apiserver.registry.kinds` the other built-in kinds (it builds on the core
validators, which therefore never call it: this module chains the two). :func:`new_rest`
gives the REST verbs this strategy, the Service allocator, the admission chain (the
mutating admission webhooks; ValidatingAdmissionPolicy, then the validating admission
webhooks; ResourceQuota last, kube-apiserver's order) and the conversion of custom
resources by their CRD's webhook, as kube-apiserver's generic store gets its strategies
and admission plugins.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final

from apiserver.api.errors import StatusError
from apiserver.api.resources import ResourceRegistry
from apiserver.machinery.rest import Rest
from apiserver.registry import admissionpolicy, core, hpaconv, kinds, quota
from apiserver.registry.allocator import ServiceAllocator
from apiserver.registry.mutatingpolicy import MutatingPolicyAdmission
from apiserver.registry.webhook.admission import WebhookDispatcher
from apiserver.registry.webhook.client import WebhookClient
from apiserver.registry.webhook.conversion import CrdConverter
from apiserver.storage.store import Storage

__all__ = ["DEFAULTED", "BuiltinStrategy", "default", "new_rest", "validate"]

JsonDict = dict[str, Any]

DEFAULTED: Final = core.DEFAULTED_KINDS | kinds.DEFAULTED


def validate(kind: str, group: str, obj: JsonDict, old: JsonDict | None) -> None:
    """Validate an object about to be created (``old is None``) or updated: metadata for
    every kind, the kind's own rules for the built-in ones.

    Raises:
        AdmissionError: 422 Invalid listing every field error, in kube's order.
    """
    core.validate(kind, group, obj, old, others=kinds.validate)


def default(
    kind: str,
    group: str,
    obj: JsonDict,
    *,
    allocate_cluster_ip: Callable[[], str],
    token_volume_suffix: Callable[[], str],
    old: JsonDict | None = None,
    plugins: bool = True,
) -> JsonDict:
    """The defaulted copy of ``obj`` (see :func:`apiserver.registry.core.default`)."""
    return core.default(
        kind,
        group,
        obj,
        allocate_cluster_ip=allocate_cluster_ip,
        token_volume_suffix=token_volume_suffix,
        old=old,
        plugins=plugins,
        others=kinds.default,
    )


class BuiltinStrategy:
    """:class:`~apiserver.machinery.admission.Strategy` of the built-in kinds."""

    def defaults(self, kind: str, group: str) -> bool:
        return (kind, group) in DEFAULTED

    # the module's functions: the Strategy protocol's default and validate
    default = staticmethod(default)
    validate = staticmethod(validate)

    def prepare_update(self, kind: str, group: str, old: JsonDict, obj: JsonDict) -> JsonDict:
        if (kind, group) == ("Service", ""):
            return core.service_update_keeps(old, obj)
        return obj

    def validate_events_v1_create(self, core_event: JsonDict) -> None:
        core.validate_events_v1_create(core_event)


class _VersionConverter:
    """Moves an object between the served versions of its resource, for webhooks that
    match another version (``matchPolicy: Equivalent``): custom resources through their
    CRD, ``autoscaling/v1`` HorizontalPodAutoscalers through the v2 view."""

    def __init__(self, rest: Rest, registry: ResourceRegistry) -> None:
        self._rest = rest
        self._registry = registry

    def __call__(self, obj: JsonDict, group: str, resource: str, api_version: str) -> JsonDict:
        version = api_version.rpartition("/")[2]
        served = self._registry.lookup(group, version, resource)
        if served is None:
            raise StatusError(
                500,
                "InternalError",
                f"Internal error occurred: unable to convert to {api_version}: unknown kind",
            )
        if served.custom:
            return self._rest.convert_to(served, [obj])[0]
        if (group, resource) == ("autoscaling", "horizontalpodautoscalers"):
            return hpaconv.v2_to_v1(obj) if version == "v1" else hpaconv.v1_to_v2(obj)
        return {**obj, "apiVersion": api_version}


def new_rest(storage: Storage, registry: ResourceRegistry) -> Rest:
    """The REST verbs over ``storage`` with the built-in strategy and admission chain."""
    client = WebhookClient(storage)
    rest = Rest(
        storage,
        registry,
        strategy=BuiltinStrategy(),
        services=ServiceAllocator(lambda: storage.list("/services")),
        validating=[admissionpolicy.PolicyAdmission(storage, registry)],
        mutating=MutatingPolicyAdmission(storage, registry),
        converter=CrdConverter(storage, client),
    )
    rest.webhooks = WebhookDispatcher(storage, registry, client, _VersionConverter(rest, registry))
    rest.quota = functools.partial(quota.admit, rest)
    return rest

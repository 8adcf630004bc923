"""The admission interface between the REST verbs and the registry's strategies.

:class:`~apiserver.machinery.rest.Rest` knows no kind: what a create or update does to a
particular kind (defaulting, validation, a Service's IP allocation) and which admission
plugins judge a write (MutatingAdmissionPolicy, admission webhooks, ResourceQuota,
ValidatingAdmissionPolicy) come from the :class:`Strategy` and the plugins it is given,
as kube-apiserver's generic ``Store`` calls its ``RESTCreateStrategy`` and the admission
chain (``apiserver/pkg/admission``). The registry layer implements them
(``apiserver.registry.strategy`` wires one ``Rest``). Custom resources served at several
versions are converted by a :class:`Converter` (a CRD's conversion webhook).

The mutating plugins are one chain, run a second time when one of them changed the
object (``admission/reinvocation.go``): each plugin runs in passes (``round``) and keeps
its part of the chain's ``ReinvocationContext`` in a :class:`Reinvocation`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from apiserver.api.resources import ServedResource
    from apiserver.machinery.typeinfo import TypeNode

__all__ = [
    "Attributes",
    "ConversionFailed",
    "Converter",
    "MutatingAdmission",
    "QuotaAdmission",
    "Refused",
    "Reinvocation",
    "RequestContext",
    "ServiceIPs",
    "Strategy",
    "ValidatingAdmission",
    "WebhookAdmission",
    "current_request",
    "request_context",
]

JsonDict = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Attributes:
    """``admission.Attributes`` of one write."""

    operation: str  # CREATE, UPDATE, DELETE
    group: str
    version: str
    resource: str
    kind: str
    subresource: str
    namespace: str  # "" for cluster-scoped objects
    name: str
    obj: JsonDict | None  # null on DELETE
    old: JsonDict | None  # null on CREATE
    dry_run: bool = False
    # CreateOptions, UpdateOptions or DeleteOptions of the request (webhooks are sent them)
    options: JsonDict | None = None


@dataclass(slots=True)
class RequestContext:
    """Who sends the request being served, and the warnings admission adds to its answer
    (kube's request context carries both)."""

    user: str = "system:apiserver"
    groups: tuple[str, ...] = ("system:masters",)
    uid: str = ""
    warnings: list[str] = field(default_factory=list)


_CURRENT: ContextVar[RequestContext | None] = ContextVar("admission_request", default=None)


@contextmanager
def request_context(
    user: str, groups: tuple[str, ...] = (), uid: str = ""
) -> Iterator[RequestContext]:
    """Writes made inside the block are ``user``'s (the authenticated user.Info); the
    block collects the warnings admission adds."""
    ctx = RequestContext(user, tuple(groups), uid)
    token = _CURRENT.set(ctx)
    try:
        yield ctx
    finally:
        _CURRENT.reset(token)


def current_request() -> RequestContext:
    """The request being served (a default system context outside one)."""
    return _CURRENT.get() or RequestContext()


class Refused(Exception):
    """A write an admission plugin refuses with 403 Forbidden; the text says why."""


class Strategy(Protocol):
    """What a create or update does to each kind (kube's registry strategies)."""

    def defaults(self, kind: str, group: str) -> bool:
        """Whether objects of this kind are defaulted beyond their metadata."""
        ...

    def default(
        self,
        kind: str,
        group: str,
        obj: JsonDict,
        *,
        allocate_cluster_ip: Callable[[], str],
        token_volume_suffix: Callable[[], str],
        old: JsonDict | None = None,
        plugins: bool = True,
    ) -> JsonDict:
        """The defaulted copy of ``obj`` (``plugins=False``: scheme defaulting only)."""
        ...

    def validate(self, kind: str, group: str, obj: JsonDict, old: JsonDict | None) -> None:
        """Raise :class:`~apiserver.api.field.AdmissionError` listing every problem."""
        ...

    def prepare_update(self, kind: str, group: str, old: JsonDict, obj: JsonDict) -> JsonDict:
        """``obj`` with what an update keeps from ``old`` (a Service's allocated IPs)."""
        ...

    def validate_events_v1_create(self, core_event: JsonDict) -> None:
        """The rules an ``events.k8s.io/v1`` create adds to a core Event's."""
        ...


class ServiceIPs(Protocol):
    """The Service ClusterIP and node port allocator."""

    def next_ip(self) -> str: ...

    def admit(self, obj: JsonDict, old: JsonDict | None, requested: list[str]) -> None:
        """Raise :class:`~apiserver.api.field.AdmissionError` for an IP or port in use."""
        ...


class QuotaAdmission(Protocol):
    """Quota admission of a create (called with the storage lock held; it charges the
    quota's usage through the same verbs)."""

    def __call__(
        self, served: ServedResource, namespace: str, obj: JsonDict, dry_run: bool
    ) -> None:
        """Raise :class:`Refused` when a quota does not allow ``obj``."""
        ...


@dataclass(slots=True)
class Reinvocation:
    """One mutating admission plugin's part of a write's ``ReinvocationContext``
    (admission/reinvocation.go with the plugin's own ``*ReinvokeContext``): whether it
    asks the chain to run a second pass, the object as it last left it, and which of its
    ``reinvocationPolicy: IfNeeded`` policies or webhooks ran and which are due again.
    The chain runs its second pass when any plugin's :attr:`should_reinvoke` is set.
    Belongs to one write; not shared between threads."""

    should_reinvoke: bool = False  # this plugin changed the object: the chain runs again
    last_output: JsonDict | None = None  # the object as this plugin last left it
    invoked: set[Hashable] = field(default_factory=set)  # IfNeeded, invoked, not yet due
    due: set[Hashable] = field(default_factory=set)  # to run in the second pass

    def require_reinvoking(self) -> None:
        """``RequireReinvokingPreviouslyInvokedPlugins``: what ran so far is due again."""
        self.due |= self.invoked
        self.invoked = set()


class MutatingAdmission(Protocol):
    """A mutating admission plugin (MutatingAdmissionPolicy), reinvocation included."""

    def wants(self, attrs: Attributes) -> bool:
        """Whether the plugin may change the write ``attrs`` (cheap: no CEL runs)."""
        ...

    def admit(
        self,
        attrs: Attributes,
        decode: Callable[[JsonDict], JsonDict],
        schema: TypeNode | None,
    ) -> JsonDict:
        """``attrs.obj`` (as decoded: defaulted) after the plugin, as a chain of its own
        (both passes); ``decode`` makes a changed object what kube's decoding makes of
        it, ``schema`` is its type.

        Raises:
            StatusError: the plugin refused the write.
        """
        ...

    def round(
        self,
        attrs: Attributes,
        decode: Callable[[JsonDict], JsonDict],
        schema: TypeNode | None,
        state: Reinvocation,
        *,
        reinvoke: bool,
    ) -> JsonDict:
        """One pass of the plugin in a chain (``reinvoke``: the second), ``state`` its
        part of the chain's reinvocation context; as :meth:`admit` otherwise."""
        ...


class ValidatingAdmission(Protocol):
    """A validating admission plugin (ValidatingAdmissionPolicy)."""

    def validate(self, attrs: Attributes) -> None:
        """Raise :class:`~apiserver.api.errors.StatusError` to refuse the write."""
        ...


class WebhookAdmission(Protocol):
    """Admission webhooks: the mutating ones (with reinvocation) and the validating ones.

    The verbs release the storage lock while webhooks are called (a webhook may call the
    API server back): :meth:`wants` says, cheaply and under the lock, whether any webhook
    of the kind may apply to a write.
    """

    def configured(self) -> bool:
        """Whether any webhook configuration exists (a cheap first check)."""
        ...

    def close(self) -> None:
        """Close the connections kept alive to webhooks (the server stops)."""
        ...

    def wants(self, attrs: Attributes, *, mutating: bool) -> bool:
        """Whether some mutating (validating) webhook's rules match ``attrs``."""
        ...

    def admit(self, attrs: Attributes, decode: Callable[[JsonDict], JsonDict]) -> JsonDict | None:
        """``attrs.obj`` after every mutating webhook (None when there is no object), as
        a chain of its own (both passes); ``decode`` makes a patched object what kube's
        decoder makes of it (unknown fields dropped, defaults set).

        Raises:
            StatusError: a webhook refused the write, or could not be called and its
                failurePolicy is Fail.
        """
        ...

    def round(
        self,
        attrs: Attributes,
        decode: Callable[[JsonDict], JsonDict],
        state: Reinvocation,
        *,
        reinvoke: bool,
    ) -> JsonDict | None:
        """One pass of the mutating webhooks in a chain (``reinvoke``: the second),
        ``state`` their part of the chain's reinvocation context; as :meth:`admit`
        otherwise."""
        ...

    def validate(self, attrs: Attributes) -> None:
        """Call the validating webhooks (in parallel).

        Raises:
            StatusError: as :meth:`admit`.
        """
        ...


class ConversionFailed(Exception):
    """A conversion webhook failed; the text says why, as kube words it."""


class Converter(Protocol):
    """Converts custom resources between the versions of their CRD (the conversion
    webhook of ``spec.conversion.strategy: Webhook``; else the apiVersion is set)."""

    def convert(self, crd_name: str, objects: list[JsonDict], api_version: str) -> list[JsonDict]:
        """``objects`` at ``api_version`` (those already there come back unchanged).

        Raises:
            ConversionFailed: the webhook could not be called or answered wrongly.
        """
        ...

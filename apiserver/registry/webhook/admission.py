"""Admission webhooks: kube-apiserver's MutatingAdmissionWebhook and
ValidatingAdmissionWebhook plugins.

A port of ``staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook``:
``generic/webhook.go`` (``ShouldCallHook``, ``Dispatch``), ``mutating/dispatcher.go`` and
``mutating/reinvocationcontext.go`` with ``admission/reinvocation.go``,
``validating/dispatcher.go`` and ``matchconditions/matcher.go``:

* webhooks come from every Mutating/ValidatingWebhookConfiguration, the configurations
  by name and each one's webhooks in order; configurations are read on every write
  (kube's informer takes a moment; here a new one is active at once);
* a webhook is called when its ``namespaceSelector`` and ``objectSelector`` select the
  write, one of its ``rules`` matches (or, ``matchPolicy: Equivalent``, matches another
  served version of the resource: the object is converted to it) and no
  ``matchCondition`` is false; a condition that errors fails the write with 403 under
  ``failurePolicy: Fail`` and skips the webhook under ``Ignore``; admission
  configurations themselves are never sent to webhooks;
* mutating webhooks run one after the other, each on the object the previous ones made
  (its ``JSONPatch`` applied, then decoded and defaulted as kube decodes it); when one
  changes the object, the earlier ones with ``reinvocationPolicy: IfNeeded`` are called
  once more after the round (never a webhook the first round skipped); the round is
  one plugin of the mutating chain (:meth:`WebhookDispatcher.round`), after the
  MutatingAdmissionPolicies: when a policy changes the object in the chain's second
  pass, the IfNeeded webhooks called before are due again too;
* validating webhooks run in parallel; the first error in their order is answered;
* a dry run reaches only webhooks with ``sideEffects`` None or NoneOnDryRun (else kube's
  400 "does not support dry run");
* a webhook that cannot be called (connection, TLS, timeout, an error answer, an invalid
  review) is skipped under ``failurePolicy: Ignore`` and fails the write with 500
  ``Internal error occurred: failed calling webhook "<name>": ...`` under ``Fail``; a
  refusal is answered as the webhook words it; a patch that does not apply is a 500
  whatever the policy;
* warnings go to the response's ``Warning`` headers; audit annotations are dropped (there
  is no audit log).

Thread-safety: one instance serves every request thread; validating webhooks are called
from short-lived threads of their own.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol

import orjson

from apiserver.api.errors import StatusError
from apiserver.machinery import patch as jsonpatch
from apiserver.machinery.admission import (
    Attributes,
    Reinvocation,
    RequestContext,
    current_request,
)
from apiserver.registry.cel import WEBHOOK_VARIABLES, Cel
from apiserver.registry.matching import (
    Matched,
    equivalents,
    is_exempt,
    namespace_matches,
    object_matches,
    rule_matches,
)
from apiserver.registry.webhook.client import CallError, ClientConfig, WebhookClient
from apiserver.registry.webhook.review import (
    InvalidResponse,
    Undecodable,
    dry_run_unsupported,
    internal_error,
    parse_response,
    review_version,
    to_status_error,
)
from manager.labels import SelectorError

__all__ = ["MUTATING", "VALIDATING", "WebhookDispatcher"]

logger = logging.getLogger(__name__)

JsonDict = dict[str, Any]

MUTATING: Final = "admissionregistration.k8s.io/mutatingwebhookconfigurations"
VALIDATING: Final = "admissionregistration.k8s.io/validatingwebhookconfigurations"
_DEFAULT_TIMEOUT: Final = 10  # seconds: admissionregistration/v1's default


class Storage(Protocol):
    """Where configurations and namespaces are read."""

    def get(self, key: tuple[str, str, str]) -> JsonDict | None: ...

    def list(self, key: str, namespace: str | None = None) -> list[JsonDict]: ...

    def has_any(self, key: str) -> bool: ...


class VersionConverter(Protocol):
    """Converts an object of a resource to another of its served versions.

    Raises:
        StatusError: the conversion failed (a conversion webhook, say).
    """

    def __call__(self, obj: JsonDict, group: str, resource: str, api_version: str) -> JsonDict: ...


@dataclass(frozen=True, slots=True)
class _Hook:
    configuration: str
    index: int
    spec: JsonDict

    @property
    def name(self) -> str:
        return str(self.spec.get("name") or "")

    @property
    def uid(self) -> str:
        """The accessor's uid: configuration, webhook name and index."""
        return f"{self.configuration}/{self.name}/{self.index}"

    @property
    def ignore_failures(self) -> bool:
        return self.spec.get("failurePolicy") == "Ignore"


@dataclass(frozen=True, slots=True)
class _Invocation:
    hook: _Hook
    matched: Matched


class _CallingFailed(Exception):
    """``ErrCallingWebhook``: the webhook could not be called (failurePolicy decides)."""

    def __init__(self, webhook: str, reason: str) -> None:
        self.text = f'failed calling webhook "{webhook}": {reason}'
        super().__init__(self.text)


def _api_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


class WebhookDispatcher:
    """The MutatingAdmissionWebhook and ValidatingAdmissionWebhook plugins
    (:class:`~apiserver.machinery.admission.WebhookAdmission`)."""

    def __init__(
        self,
        storage: Storage,
        resources: Any,
        client: WebhookClient,
        convert: VersionConverter,
    ) -> None:
        """``resources`` is the served resources (for equivalents), ``convert`` moves
        an object between the versions of its resource."""
        self._storage = storage
        self._resources = resources
        self._client = client
        self._convert = convert
        self._cel = Cel(WEBHOOK_VARIABLES)

    # -- configurations --------------------------------------------------------------------

    def close(self) -> None:
        """Close the kept-alive connections to webhooks."""
        self._client.close()

    def _hooks(self, key: str) -> list[_Hook]:
        configurations = sorted(
            self._storage.list(key), key=lambda c: str((c.get("metadata") or {}).get("name"))
        )
        return [
            _Hook(str((c.get("metadata") or {}).get("name") or ""), i, hook)
            for c in configurations
            for i, hook in enumerate(c.get("webhooks") or [])
            if isinstance(hook, dict)
        ]

    def configured(self) -> bool:
        return self._storage.has_any(MUTATING) or self._storage.has_any(VALIDATING)

    def wants(self, attrs: Attributes, *, mutating: bool) -> bool:
        key = MUTATING if mutating else VALIDATING
        if not self._storage.has_any(key) or is_exempt(attrs):
            return False
        return any(self._rules(hook, attrs) is not None for hook in self._hooks(key))

    # -- matching (ShouldCallHook) -----------------------------------------------------------

    def _rules(self, hook: _Hook, attrs: Attributes) -> Matched | None:
        """The resource a rule of ``hook`` matches the write as, or None."""
        rules = [r for r in hook.spec.get("rules") or [] if isinstance(r, dict)]
        for rule in rules:
            if rule_matches(rule, attrs, attrs.group, attrs.version, attrs.resource):
                return Matched(attrs.group, attrs.version, attrs.resource, attrs.kind)
        if (hook.spec.get("matchPolicy") or "Equivalent") != "Equivalent":
            return None
        others = list(equivalents(self._resources, attrs))
        for rule in rules:
            for other in others:
                if rule_matches(rule, attrs, other.group, other.version, other.resource):
                    return other
        return None

    def _should_call(
        self,
        hook: _Hook,
        attrs: Attributes,
        versioned: Callable[[Matched], Attributes],
        context: RequestContext,
    ) -> _Invocation | None:
        """``ShouldCallHook``: the invocation, None when the webhook does not apply.

        Raises:
            StatusError: a selector does not parse (500), a matchCondition errs under
                failurePolicy Fail (403).
        """
        spec = hook.spec
        selector_error: StatusError | None = None
        try:
            if not namespace_matches(spec.get("namespaceSelector"), attrs, self._storage):
                return None
        except SelectorError as exc:
            selector_error = internal_error(str(exc))
        try:
            if not object_matches(spec.get("objectSelector"), attrs):
                return None
        except SelectorError as exc:
            selector_error = selector_error or internal_error(str(exc))
        matched = self._rules(hook, attrs)
        if matched is None:
            return None
        if selector_error is not None:
            raise selector_error
        conditions = [c for c in spec.get("matchConditions") or [] if isinstance(c, dict)]
        if conditions and not self._conditions_hold(
            hook, conditions, versioned(matched), matched, context
        ):
            return None
        return _Invocation(hook, matched)

    def _conditions_hold(
        self,
        hook: _Hook,
        conditions: list[JsonDict],
        attrs: Attributes,
        matched: Matched,
        context: RequestContext,
    ) -> bool:
        """``matchconditions.matcher.Match``: any false condition skips the webhook;
        errors fail the write (Fail) or skip the webhook (Ignore).

        Raises:
            StatusError: 403, an error under failurePolicy Fail.
        """
        data = {
            "object": attrs.obj,
            "oldObject": attrs.old,
            "request": _request(attrs, matched, context, uid=""),
        }
        errors: list[str] = []
        for condition in conditions:
            outcome = self._cel.evaluate(str(condition.get("expression", "")), data)
            if outcome.error:
                errors.append(outcome.error)
            elif outcome.value is False:
                return False
        if not errors:
            return True
        if hook.ignore_failures:
            return False
        text = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
        group_resource = f"{attrs.resource}.{attrs.group}" if attrs.group else attrs.resource
        named = f' "{attrs.name}"' if attrs.name else ""
        details: JsonDict = {"name": attrs.name}
        if attrs.group:
            details["group"] = attrs.group
        details["kind"] = attrs.resource
        raise StatusError(
            403, "Forbidden", f"{group_resource}{named} is forbidden: {text}", details
        )

    # -- versions ----------------------------------------------------------------------------

    def _at(self, obj: JsonDict | None, attrs: Attributes, matched: Matched) -> JsonDict | None:
        if obj is None:
            return None
        target = _api_version(matched.group, matched.version)
        if obj.get("apiVersion") == target:
            return obj
        return self._convert(obj, attrs.group, attrs.resource, target)

    def _versioned(self, attrs: Attributes, matched: Matched) -> Attributes:
        if (matched.group, matched.version) == (attrs.group, attrs.version):
            return attrs
        return dataclasses.replace(
            attrs, obj=self._at(attrs.obj, attrs, matched), old=self._at(attrs.old, attrs, matched)
        )

    # -- calling ---------------------------------------------------------------------------

    def _call(
        self,
        invocation: _Invocation,
        attrs: Attributes,
        context: RequestContext,
        *,
        mutating: bool,
    ) -> Any:
        """Send the review; the verified response.

        Raises:
            _CallingFailed: the webhook could not be called or answered wrongly.
            StatusError: a dry run the webhook cannot take.
        """
        hook = invocation.hook
        if attrs.dry_run:
            side = hook.spec.get("sideEffects")
            if side is None:
                raise _CallingFailed(hook.name, "Webhook SideEffects is nil")
            if side not in ("None", "NoneOnDryRun"):
                raise dry_run_unsupported(hook.name)
        version = review_version(hook.spec.get("admissionReviewVersions"))
        if not version:
            raise _CallingFailed(
                hook.name,
                "could not create admission objects: webhook does not accept known "
                "AdmissionReview versions (v1, v1beta1)",
            )
        uid = _new_uid()
        review = {
            "kind": "AdmissionReview",
            "apiVersion": f"admission.k8s.io/{version}",
            "request": {
                **_request(attrs, invocation.matched, context, uid=uid),
                "object": attrs.obj,
                "oldObject": attrs.old,
                "options": attrs.options,
            },
        }
        timeout = int(hook.spec.get("timeoutSeconds") or _DEFAULT_TIMEOUT)
        try:
            body = self._client.post(
                ClientConfig.from_api(hook.spec.get("clientConfig")),
                orjson.dumps(review),
                timeout=timeout,
                query=True,
            )
        except CallError as exc:
            raise _CallingFailed(hook.name, f"failed to call webhook: {exc.text}") from None
        try:
            return parse_response(body, uid, version, mutating=mutating)
        except Undecodable as exc:
            raise _CallingFailed(hook.name, f"failed to call webhook: {exc}") from None
        except InvalidResponse as exc:
            raise _CallingFailed(hook.name, f"received invalid webhook response: {exc}") from None

    # -- mutating -----------------------------------------------------------------------------

    def admit(self, attrs: Attributes, decode: Callable[[JsonDict], JsonDict]) -> JsonDict | None:
        """The mutating webhooks as a chain of their own: a round, and a second one
        when a webhook changed the object (admission/reinvocation.go)."""
        state = Reinvocation()
        obj = self.round(attrs, decode, state, reinvoke=False)
        if state.should_reinvoke:
            obj = self.round(dataclasses.replace(attrs, obj=obj), decode, state, reinvoke=True)
        return obj

    def round(
        self,
        attrs: Attributes,
        decode: Callable[[JsonDict], JsonDict],
        state: Reinvocation,
        *,
        reinvoke: bool,
    ) -> JsonDict | None:
        """One pass of the mutating webhooks (mutating/dispatcher.go ``Dispatch``) in a
        chain whose reinvocation context holds ``state``: ``attrs.obj`` after them.

        Raises:
            StatusError: a webhook refused the write, or could not be called and its
                failurePolicy is Fail.
        """
        if is_exempt(attrs):
            return attrs.obj
        hooks = self._hooks(MUTATING)
        if not hooks:
            return attrs.obj
        return self._mutating_round(
            attrs, hooks, decode, state, current_request(), reinvoke=reinvoke
        )

    def _mutating_round(
        self,
        attrs: Attributes,
        hooks: list[_Hook],
        decode: Callable[[JsonDict], JsonDict],
        state: Reinvocation,
        context: RequestContext,
        *,
        reinvoke: bool,
    ) -> JsonDict | None:
        if reinvoke and state.last_output != attrs.obj:
            state.require_reinvoking()
        current = attrs.obj  # always at the request's version

        def versioned(matched: Matched) -> Attributes:
            return self._versioned(dataclasses.replace(attrs, obj=current), matched)

        for hook in hooks:
            invocation = self._should_call(hook, attrs, versioned, context)
            if invocation is None:
                continue
            if reinvoke and hook.uid not in state.due:
                continue
            sent = versioned(invocation.matched)
            changed = False
            failure: _CallingFailed | None = None
            try:
                patched = self._mutate(invocation, sent, context)
            except _CallingFailed as exc:
                failure, patched = exc, None
            if patched is not None:
                back = patched
                # the webhook saw (and patched) the object at the version it matched
                matched = invocation.matched
                if (matched.group, matched.version) != (attrs.group, attrs.version):
                    back = self._convert(
                        patched,
                        attrs.group,
                        attrs.resource,
                        _api_version(attrs.group, attrs.version),
                    )
                decoded = decode(back)
                changed = decoded != current
                current = decoded
            if changed:
                state.require_reinvoking()
                state.should_reinvoke = True
            if hook.spec.get("reinvocationPolicy") == "IfNeeded":
                state.invoked.add(hook.uid)
            if failure is None:
                continue
            if hook.ignore_failures:
                logger.warning(
                    "failed calling webhook, failing open",
                    extra={"webhook": hook.name, "error": failure.text},
                )
                continue
            raise internal_error(failure.text)
        state.last_output = current
        return current

    def _mutate(
        self, invocation: _Invocation, attrs: Attributes, context: RequestContext
    ) -> JsonDict | None:
        """``callAttrMutatingHook``: the patched object, None when unchanged.

        Raises:
            _CallingFailed: as :meth:`_call`, or an undecodable or unsupported patch.
            StatusError: a refusal; a patch that does not apply (500).
        """
        name = invocation.hook.name
        result = self._call(invocation, attrs, context, mutating=True)
        context.warnings.extend(result.warnings)
        if not result.allowed:
            raise to_status_error(name, result.result)
        if not result.patch:
            return None
        try:
            ops = orjson.loads(result.patch)
        except orjson.JSONDecodeError as exc:
            raise _CallingFailed(
                name, f"received undecodable patch in webhook response: {exc}"
            ) from None
        if not isinstance(ops, list) or not all(isinstance(op, dict) for op in ops):
            raise _CallingFailed(
                name,
                "received undecodable patch in webhook response: json: cannot unmarshal "
                "object into Go value of type jsonpatch.Patch",
            )
        if not ops:
            return None
        if attrs.obj is None:
            raise internal_error(
                f'admission webhook "{name}" attempted to modify the object, which is not '
                "supported for this operation"
            )
        if result.patch_type != "JSONPatch":
            raise _CallingFailed(name, f'unsupported patch type "{result.patch_type}"')
        try:
            return jsonpatch.json_patch(attrs.obj, ops)
        except jsonpatch.PatchError as exc:
            raise internal_error(exc.detail or exc.message) from None

    # -- validating ---------------------------------------------------------------------------

    def validate(self, attrs: Attributes) -> None:
        if is_exempt(attrs):
            return
        hooks = self._hooks(VALIDATING)
        if not hooks:
            return
        context = current_request()
        cache: dict[tuple[str, str], Attributes] = {}

        def versioned(matched: Matched) -> Attributes:
            key = (matched.group, matched.version)
            if key not in cache:
                cache[key] = self._versioned(attrs, matched)
            return cache[key]

        relevant = [
            inv
            for hook in hooks
            if (inv := self._should_call(hook, attrs, versioned, context)) is not None
        ]
        if not relevant:
            return
        outcomes: list[tuple[tuple[str, ...], StatusError | None]] = [((), None)] * len(relevant)

        def run(i: int, invocation: _Invocation, sent: Attributes) -> None:
            outcomes[i] = self._validate_one(invocation, sent, context)

        jobs = [(i, inv, versioned(inv.matched)) for i, inv in enumerate(relevant)]
        threads = [
            threading.Thread(target=run, args=job, name=f"local-apiserver-webhook-{job[0]}")
            for job in jobs[1:]
        ]
        for thread in threads:
            thread.start()
        run(*jobs[0])
        for thread in threads:
            thread.join()
        for warnings, _ in outcomes:
            context.warnings.extend(warnings)
        for _, error in outcomes:
            if error is not None:
                raise error

    def _validate_one(
        self, invocation: _Invocation, attrs: Attributes, context: RequestContext
    ) -> tuple[tuple[str, ...], StatusError | None]:
        """One validating webhook's warnings and the error it makes the write fail with."""
        hook = invocation.hook
        try:
            result = self._call(invocation, attrs, context, mutating=False)
        except _CallingFailed as exc:
            if hook.ignore_failures:
                logger.warning(
                    "failed calling webhook, failing open",
                    extra={"webhook": hook.name, "error": exc.text},
                )
                return (), None
            return (), internal_error(exc.text)
        except StatusError as exc:
            return (), exc
        except Exception as exc:  # a bug: fail closed, and say so
            logger.exception("calling a validating webhook failed", extra={"webhook": hook.name})
            return (), internal_error(str(exc))
        if result.allowed:
            return result.warnings, None
        return result.warnings, to_status_error(hook.name, result.result)


def _request(attrs: Attributes, matched: Matched, context: RequestContext, *, uid: str) -> JsonDict:
    """The AdmissionRequest (without its objects): the resource the webhook matched as,
    the one requested, the user."""
    request: JsonDict = {
        "uid": uid,
        "kind": {"group": matched.group, "version": matched.version, "kind": matched.kind},
        "resource": {
            "group": matched.group,
            "version": matched.version,
            "resource": matched.resource,
        },
    }
    if attrs.subresource:
        request["subResource"] = attrs.subresource
    request["requestKind"] = {"group": attrs.group, "version": attrs.version, "kind": attrs.kind}
    request["requestResource"] = {
        "group": attrs.group,
        "version": attrs.version,
        "resource": attrs.resource,
    }
    if attrs.subresource:
        request["requestSubResource"] = attrs.subresource
    if attrs.name:
        request["name"] = attrs.name
    if attrs.namespace:
        request["namespace"] = attrs.namespace
    request["operation"] = attrs.operation
    user: JsonDict = {"username": context.user}
    if context.uid:
        user["uid"] = context.uid
    if context.groups:
        user["groups"] = list(context.groups)
    request["userInfo"] = user
    request["dryRun"] = attrs.dry_run
    return request


def _new_uid() -> str:
    return str(uuid.uuid4())

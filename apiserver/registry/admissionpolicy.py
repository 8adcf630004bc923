"""ValidatingAdmissionPolicy: CEL checks of writes, as kube-apiserver's admission plugin runs them.

A port of ``staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/validating``
(``dispatcher.go``, ``validator.go``), of the matching it shares with webhooks
(``policy/generic``, ``policy/matching``, ``webhook/predicates/rules``) and of
``generic.CollectParams``. For every write (CREATE, UPDATE, DELETE; patches are updates):

1. each ValidatingAdmissionPolicy whose ``matchConstraints`` match the request (resource
   rules with wildcards, subresources, scope and ``resourceNames``; exclude rules;
   ``matchPolicy: Equivalent`` across the versions of a resource; ``namespaceSelector``;
   ``objectSelector`` on the object or the old object) is taken;
2. each ValidatingAdmissionPolicyBinding naming it (``spec.policyName``) whose
   ``matchResources`` match too is taken; a binding whose policy does not exist is
   ignored, as kube documents;
3. the binding's params are collected (``paramRef`` by name or selector, in the request's
   namespace unless it names one; ``parameterNotFoundAction``);
4. per param: ``matchConditions`` (a false one skips the policy; errors go to the
   ``failurePolicy``), then ``variables`` and ``validations`` (``message``,
   ``messageExpression``, ``reason``), evaluated with CEL;
5. a failed validation is acted on by the binding's ``validationActions``: ``Deny`` refuses
   the request with kube's message (``ValidatingAdmissionPolicy 'p' with binding 'b'
   denied request: ...``, its ``reason`` and code, 422 Invalid by default), ``Warn`` adds a
   ``Warning`` header, ``Audit`` has nowhere to go here (no audit log) and is accepted.

Steps 1 to 3 are :mod:`apiserver.registry.policyinvocation`, shared with
MutatingAdmissionPolicies; CEL is :mod:`apiserver.registry.cel`; the rule and selector
matching is :mod:`apiserver.registry.matching`, shared with admission webhooks.

Thread-safety: :class:`PolicyAdmission` may be called from any thread; compiled
expressions are cached under a lock and evaluation is serialised.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from apiserver.api.errors import StatusError
from apiserver.machinery.admission import Attributes, RequestContext, current_request
from apiserver.registry.cel import Cel, syntax_error
from apiserver.registry.matching import is_exempt
from apiserver.registry.policyinvocation import (
    ConfigError,
    Invocation,
    PolicySource,
    ResourceTable,
    Storage,
    evaluate_variables,
    fails,
    match_conditions,
    name_of,
)

__all__ = [
    "PolicyAdmission",
    "PolicyDenied",
    "syntax_error",
]

JsonDict = dict[str, Any]

POLICIES: Final = "admissionregistration.k8s.io/validatingadmissionpolicies"
BINDINGS: Final = "admissionregistration.k8s.io/validatingadmissionpolicybindings"

_MAX_MESSAGE: Final = 5 * 1024  # celconfig.MaxEvaluatedMessageExpressionSizeBytes


class PolicyDenied(StatusError):
    """A request refused by a policy: an API ``Status`` to answer."""

    def __init__(self, code: int, reason: str, message: str, details: JsonDict) -> None:
        super().__init__(code, reason, message, details)


class PolicyAdmission:
    """The ValidatingAdmissionPolicy admission plugin over a storage and resource table."""

    def __init__(self, storage: Storage, resources: ResourceTable) -> None:
        self._source = PolicySource(storage, resources, policies=POLICIES, bindings=BINDINGS)
        self._cel = Cel()

    def validate(self, attrs: Attributes) -> None:
        """Run every policy that applies to the write ``attrs``.

        Raises:
            PolicyDenied: a Deny binding's validation failed, or a policy could not be
                evaluated and its failurePolicy is Fail.
        """
        if is_exempt(attrs):
            return
        context = current_request()
        denied: list[
            tuple[JsonDict, JsonDict | None, str, str]
        ] = []  # policy, binding, msg, reason
        for found in self._source.dispatch(attrs):
            if isinstance(found, ConfigError):
                if fails(found.policy):
                    denied.append((found.policy, found.binding, found.message, ""))
                continue
            self._invoke(found, attrs, context, denied)
        if denied:
            raise self._denial(attrs, *denied[0])

    def _invoke(
        self,
        invocation: Invocation,
        attrs: Attributes,
        context: RequestContext,
        denied: list[tuple[JsonDict, JsonDict | None, str, str]],
    ) -> None:
        policy, binding = invocation.policy, invocation.binding
        actions = list((binding.get("spec") or {}).get("validationActions") or [])
        for message, reason in self._validate(invocation, attrs, context):
            for action in actions:
                if action == "Deny":
                    denied.append((policy, binding, message, reason))
                elif action == "Warn":
                    context.warnings.append(
                        f"Validation failed for ValidatingAdmissionPolicy '{name_of(policy)}' "
                        f"with binding '{name_of(binding)}': {message}"
                    )
                # Audit: an audit annotation, and there is no audit log here

    @staticmethod
    def _denial(
        attrs: Attributes, policy: JsonDict, binding: JsonDict | None, message: str, reason: str
    ) -> PolicyDenied:
        """admission.NewForbidden, then the decision's reason and its code."""
        pname = str((policy.get("metadata") or {}).get("name", ""))
        if binding is not None:
            bname = str((binding.get("metadata") or {}).get("name", ""))
            text = (
                f"ValidatingAdmissionPolicy '{pname}' with binding '{bname}' denied request: "
                f"{message}"
            )
        else:
            text = f"ValidatingAdmissionPolicy '{pname}' denied request: {message}"
        meta = ((attrs.obj or attrs.old) or {}).get("metadata") or {}
        name = attrs.name or str(meta.get("name") or meta.get("generateName") or "Unknown")
        qualified = f"{attrs.resource}.{attrs.group}" if attrs.group else attrs.resource
        reason = reason or "Invalid"
        code = {"Forbidden": 403, "Unauthorized": 401, "RequestEntityTooLarge": 413}.get(
            reason, 422
        )
        details: JsonDict = {"name": name}
        if attrs.group:
            details["group"] = attrs.group
        details["kind"] = attrs.resource
        details["causes"] = [{"message": text}]
        return PolicyDenied(code, reason, f'{qualified} "{name}" is forbidden: {text}', details)

    # -- validation ----------------------------------------------------------------------

    def _validate(
        self, invocation: Invocation, attrs: Attributes, context: RequestContext
    ) -> list[tuple[str, str]]:
        """``validator.Validate``: the (message, reason) of every failed validation, and
        of every error when the failurePolicy is Fail."""
        spec = invocation.policy.get("spec") or {}
        fail = fails(invocation.policy)
        data = self._source.activation(invocation, attrs, context)
        matches, errors = match_conditions(self._cel, spec.get("matchConditions"), data)
        if not matches:
            return []
        if errors:
            return (
                [("[" + ", ".join(errors) + "]" if len(errors) > 1 else errors[0], "")]
                if fail
                else []
            )
        variables = evaluate_variables(self._cel, spec.get("variables"), data)
        data["variables"] = variables.values
        out: list[tuple[str, str]] = []
        for validation in spec.get("validations") or []:
            expression = str(validation.get("expression", ""))
            error = variables.error_in(expression)
            if error:
                if fail:
                    out.append((error, ""))
                continue
            outcome = self._cel.evaluate(expression, data)
            if outcome.error:
                if fail:
                    out.append((outcome.error, ""))
                continue
            if outcome.value is True:
                continue
            out.append(
                (self._message(validation, data), str(validation.get("reason") or "Invalid"))
            )
        return out

    def _message(self, validation: JsonDict, data: Mapping[str, Any]) -> str:
        message = ""
        if validation.get("messageExpression"):
            outcome = self._cel.evaluate(str(validation["messageExpression"]), data)
            if not outcome.error and isinstance(outcome.value, str):
                message = outcome.value.strip()
                if len(message) > _MAX_MESSAGE or "\n" in message:
                    message = ""
        if not message and validation.get("message"):
            message = str(validation["message"]).strip()
        if not message:
            message = f"failed expression: {str(validation.get('expression', '')).strip()}"
        return message

"""The MutatingAdmissionPolicy admission plugin: CEL mutations of writes, reinvoked as kube does.

A port of ``staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/mutating``
(``plugin.go``, ``dispatcher.go``, ``reinvocationcontext.go``, ``compilation.go``) with
the chain's reinvocation (``admission/reinvocation.go``). For every CREATE and UPDATE
with an object (kube's plugin handles no DELETE; admission's own configuration is
exempt):

1. the invocations: each policy whose ``matchConstraints`` match, each binding of it
   whose ``matchResources`` match, each param (:mod:`apiserver.registry.policyinvocation`,
   shared with ValidatingAdmissionPolicy);
2. per invocation: ``matchConditions`` (a false one skips the policy; an error skips it
   under ``failurePolicy: Ignore``, else refuses the write), then each of the policy's
   ``mutations`` in order, on the object as the previous ones left it, with its
   ``variables`` (evaluated for each mutation, as kube's lazy variables are): an
   ``ApplyConfiguration`` merged in, or a ``JSONPatch`` applied
   (:mod:`.patchers`); the result is decoded again (defaults set), as kube's defaulter
   runs after each patch. A mutation that fails is skipped (the policy's next one still
   runs) and, under ``failurePolicy: Fail``, refuses the write once all have run: 403,
   reason Invalid, ``policy 'p' with binding 'b' denied request: <why>``; a binding that
   cannot be configured refuses it with reason Forbidden;
3. reinvocation: when a policy changed the object, the policies with
   ``reinvocationPolicy: IfNeeded`` invoked before it are due again, and so is every
   such policy once any mutation applied (kube marks its versioned object dirty); the
   chain then runs once more, in which only the due ones run.

Admission webhooks are another plugin of the chain (after this one in kube's order:
``MutatingAdmissionPolicy``, ``MutatingAdmissionWebhook``); :meth:`MutatingPolicyAdmission.round`
runs one pass of this plugin with its :class:`~apiserver.machinery.admission.Reinvocation`
(its part of the chain's context, which ``Rest`` keeps for the write), so the chain runs
the policies then the webhooks, and both again when either changed the object;
:meth:`MutatingPolicyAdmission.admit` is the chain of this plugin alone (both passes).

Thread-safety: :class:`MutatingPolicyAdmission` may be called from any thread; compiled
expressions are cached under a lock and evaluation is serialised.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Final

from apiserver.api.errors import StatusError
from apiserver.machinery import typeinfo
from apiserver.machinery.admission import (
    Attributes,
    Reinvocation,
    RequestContext,
    current_request,
)
from apiserver.machinery.typeinfo import TypeNode
from apiserver.registry.cel import Cel
from apiserver.registry.matching import is_exempt
from apiserver.registry.mutatingpolicy import objects
from apiserver.registry.mutatingpolicy.patchers import (
    MutationFailed,
    apply_configuration,
    apply_json_patch,
)
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

__all__ = ["BINDINGS", "POLICIES", "MutatingPolicyAdmission", "Reinvocation"]

JsonDict = dict[str, Any]
Decode = Callable[[JsonDict], JsonDict]

POLICIES: Final = "admissionregistration.k8s.io/mutatingadmissionpolicies"
BINDINGS: Final = "admissionregistration.k8s.io/mutatingadmissionpolicybindings"

_Key = tuple[str, str, str, str]  # policy, binding, param namespace, param name


@dataclass(frozen=True, slots=True)
class _Denial:
    policy: JsonDict
    binding: JsonDict | None
    message: str
    reason: str  # "" for the generic dispatcher's configuration errors: Forbidden


class MutatingPolicyAdmission:
    """The MutatingAdmissionPolicy admission plugin over a storage and resource table."""

    def __init__(self, storage: Storage, resources: ResourceTable) -> None:
        self._source = PolicySource(storage, resources, policies=POLICIES, bindings=BINDINGS)
        self._cel = Cel(functions=objects.functions(), rewrite=objects.rewrite)

    def wants(self, attrs: Attributes) -> bool:
        """Whether some policy applies to the write ``attrs`` (no CEL is evaluated)."""
        if attrs.operation not in ("CREATE", "UPDATE") or attrs.obj is None:
            return False
        return not is_exempt(attrs) and bool(self._source.dispatch(attrs))

    def admit(self, attrs: Attributes, decode: Decode, schema: TypeNode | None) -> JsonDict:
        """``attrs.obj`` (as decoded) after every policy that applies, reinvoked as
        needed.

        Args:
            decode: what kube's decoding makes of a patched object (defaults set).
            schema: the object's type, for the merge of apply configurations.

        Raises:
            StatusError: a policy refused the write (see the module's docstring).
        """
        state = Reinvocation()
        obj = self.round(attrs, decode, schema, state, reinvoke=False)
        if state.should_reinvoke:
            obj = self.round(replace(attrs, obj=obj), decode, schema, state, reinvoke=True)
        return obj

    def round(
        self,
        attrs: Attributes,
        decode: Decode,
        schema: TypeNode | None,
        state: Reinvocation,
        *,
        reinvoke: bool,
    ) -> JsonDict:
        """One pass of the plugin (``dispatchInvocations``): ``attrs.obj`` after it.

        Raises:
            StatusError: as :meth:`admit`.
        """
        obj = attrs.obj
        assert obj is not None
        if reinvoke and state.last_output != obj:
            state.require_reinvoking()  # another plugin changed the object since
        context = current_request()
        denials: list[_Denial] = []
        dirty = False
        for found in self._source.dispatch(attrs):
            if isinstance(found, ConfigError):
                if fails(found.policy):
                    denials.append(_Denial(found.policy, found.binding, found.message, ""))
                continue
            spec = found.policy.get("spec") or {}
            data = self._source.activation(found, replace(attrs, obj=obj), context)
            matches, errors = match_conditions(
                self._cel, spec.get("matchConditions"), {**data, "namespaceObject": None}
            )
            if errors and matches:  # an error and no false condition: the failurePolicy
                if fails(found.policy):
                    text = "[" + ", ".join(errors) + "]" if len(errors) > 1 else errors[0]
                    denials.append(_Denial(found.policy, found.binding, text, "Invalid"))
                continue
            if not matches:
                continue
            key = _key(found)
            if reinvoke and key not in state.due:
                continue
            before = obj
            for mutation in spec.get("mutations") or []:
                try:
                    obj = self._mutate(
                        mutation,
                        found,
                        attrs=attrs,
                        obj=obj,
                        decode=decode,
                        schema=schema,
                        context=context,
                    )
                except MutationFailed as exc:
                    if fails(found.policy):
                        denials.append(_Denial(found.policy, found.binding, str(exc), "Invalid"))
                    continue
                dirty = True
            if obj != before:
                state.require_reinvoking()
                state.should_reinvoke = True
            if spec.get("reinvocationPolicy") == "IfNeeded":
                state.invoked.add(key)
        if dirty:
            state.require_reinvoking()
            state.should_reinvoke = True
        state.last_output = obj
        if denials:
            raise _refusal(attrs, denials)
        return copy.deepcopy(obj)

    def _mutate(
        self,
        mutation: JsonDict,
        invocation: Invocation,
        *,
        attrs: Attributes,
        obj: JsonDict,
        decode: Decode,
        schema: TypeNode | None,
        context: RequestContext,
    ) -> JsonDict:
        """One mutation of ``obj`` (``dispatchOne``), decoded again.

        Raises:
            MutationFailed: it could not be evaluated or applied.
            StatusError: the patched object does not decode.
        """
        kind = mutation.get("patchType")
        if kind == "ApplyConfiguration":
            expression = str((mutation.get("applyConfiguration") or {}).get("expression", ""))
        elif kind == "JSONPatch":
            expression = str((mutation.get("jsonPatch") or {}).get("expression", ""))
        else:
            return obj  # kube's compiler makes no patcher of it
        current = replace(attrs, obj=obj)
        data = self._source.activation(invocation, current, context)
        variables = evaluate_variables(self._cel, invocation.policy["spec"].get("variables"), data)
        failed = variables.error_in(expression)
        if failed:
            raise MutationFailed(failed)
        outcome = self._cel.evaluate(expression, {**data, "variables": variables.values})
        if outcome.error:
            raise MutationFailed(outcome.error)
        if kind == "ApplyConfiguration":
            patched = apply_configuration(obj, outcome.value, schema)
        else:
            builtin = typeinfo.builtin(attrs.group, attrs.version, attrs.kind) is not None
            patched = apply_json_patch(obj, outcome.value, schema, strict=builtin)
        return decode(patched)


def _key(invocation: Invocation) -> _Key:
    param = invocation.param or {}
    meta = param.get("metadata") or {}
    return (
        name_of(invocation.policy),
        name_of(invocation.binding),
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
    )


def _refusal(attrs: Attributes, denials: list[_Denial]) -> StatusError:
    """The generic dispatcher's refusal: ``admission.NewForbidden``, its message and
    reason replaced by the first error's, every error a cause."""
    messages = []
    for d in denials:
        if d.binding is not None:
            messages.append(
                f"policy '{name_of(d.policy)}' with binding '{name_of(d.binding)}' denied "
                f"request: {d.message}"
            )
        else:
            messages.append(f'policy "{name_of(d.policy)}" denied request: {d.message}')
    meta = ((attrs.obj or attrs.old) or {}).get("metadata") or {}
    name = attrs.name or str(meta.get("name") or meta.get("generateName") or "Unknown")
    details: JsonDict = {"name": name}
    if attrs.group:
        details["group"] = attrs.group
    details["kind"] = attrs.resource
    details["causes"] = [{"message": m} for m in messages]
    return StatusError(403, denials[0].reason or "Forbidden", messages[0], details)

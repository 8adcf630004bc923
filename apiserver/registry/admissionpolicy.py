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

CEL is :mod:`apiserver.registry.cel`; the matching is :mod:`apiserver.registry.matching`,
shared with admission webhooks.

Thread-safety: :class:`PolicyAdmission` may be called from any thread; compiled
expressions are cached under a lock and evaluation is serialised.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final, Protocol

from apiserver.api.errors import StatusError
from apiserver.machinery.admission import Attributes, RequestContext, current_request
from apiserver.registry.cel import Cel, inner_error, resulted, syntax_error
from apiserver.registry.matching import (
    Matched,
    equivalents,
    is_exempt,
    namespace_matches,
    object_matches,
    rule_matches,
)
from manager.labels import SelectorError, label_selector_from_dict

__all__ = [
    "PolicyAdmission",
    "PolicyDenied",
    "syntax_error",
]

JsonDict = dict[str, Any]

POLICIES: Final = "admissionregistration.k8s.io/validatingadmissionpolicies"
BINDINGS: Final = "admissionregistration.k8s.io/validatingadmissionpolicybindings"

_MAX_MESSAGE: Final = 5 * 1024  # celconfig.MaxEvaluatedMessageExpressionSizeBytes


class Storage(Protocol):
    """What the plugin reads: policies, bindings, params and namespaces."""

    def list(self, key: str, namespace: str | None = None) -> list[JsonDict]: ...

    def get(self, key: tuple[str, str, str]) -> JsonDict | None: ...


class ResourceTable(Protocol):
    """The served resources, to find a paramKind's resource and equivalent versions."""

    def __iter__(self) -> Iterator[Any]: ...


class PolicyDenied(StatusError):
    """A request refused by a policy: an API ``Status`` to answer."""

    def __init__(self, code: int, reason: str, message: str, details: JsonDict) -> None:
        super().__init__(code, reason, message, details)


# -- matching ------------------------------------------------------------------------------


class PolicyAdmission:
    """The ValidatingAdmissionPolicy admission plugin over a storage and resource table."""

    def __init__(self, storage: Storage, resources: ResourceTable) -> None:
        self._storage = storage
        self._resources = resources
        self._cel = Cel()

    # -- entry -------------------------------------------------------------------------

    def validate(self, attrs: Attributes) -> None:
        """Run every policy that applies to the write ``attrs``.

        Raises:
            PolicyDenied: a Deny binding's validation failed, or a policy could not be
                evaluated and its failurePolicy is Fail.
        """
        if is_exempt(attrs):
            return
        policies = self._storage.list(POLICIES)
        if not policies:
            return
        bindings = sorted(
            self._storage.list(BINDINGS), key=lambda b: str(b.get("metadata", {}).get("name"))
        )
        context = current_request()
        denied: list[
            tuple[JsonDict, JsonDict | None, str, str]
        ] = []  # policy, binding, msg, reason
        for policy in sorted(policies, key=lambda p: str(p.get("metadata", {}).get("name"))):
            self._dispatch(policy, bindings, attrs, context, denied)
        if denied:
            raise self._denial(attrs, *denied[0])

    def _dispatch(
        self,
        policy: JsonDict,
        bindings: list[JsonDict],
        attrs: Attributes,
        context: RequestContext,
        denied: list[tuple[JsonDict, JsonDict | None, str, str]],
    ) -> None:
        spec = policy.get("spec") or {}
        name = str((policy.get("metadata") or {}).get("name", ""))
        fail = (spec.get("failurePolicy") or "Fail") != "Ignore"

        def config_error(error: str, binding: JsonDict | None) -> None:
            if not fail:
                return
            what = "policy" if binding is None else "binding"
            denied.append((policy, binding, f"failed to configure {what}: {error}", ""))

        try:
            matched = self._matches(spec.get("matchConstraints"), attrs, required=True)
        except SelectorError as exc:
            config_error(str(exc), None)
            return
        if matched is None:
            return
        param_kind = spec.get("paramKind")
        param_resource = None
        if param_kind:
            param_resource = self._param_resource(param_kind)
            if param_resource is None:
                gvk = f"{param_kind.get('apiVersion', '')}, Kind={param_kind.get('kind', '')}"
                config_error(f"failed to find resource referenced by paramKind: '{gvk}'", None)
                return
        for binding in bindings:
            bspec = binding.get("spec") or {}
            if bspec.get("policyName") != name:
                continue
            try:
                if bspec.get("matchResources") is not None and (
                    self._matches(bspec["matchResources"], attrs, required=False) is None
                ):
                    continue
            except SelectorError as exc:
                config_error(str(exc), binding)
                continue
            try:
                params = self._params(param_kind, param_resource, bspec.get("paramRef"), attrs)
            except ValueError as exc:
                config_error(str(exc), binding)
                continue
            actions = list(bspec.get("validationActions") or [])
            bname = str((binding.get("metadata") or {}).get("name", ""))
            for param in params:
                for message, reason in self._validate(
                    spec, fail=fail, matched=matched, attrs=attrs, param=param, context=context
                ):
                    for action in actions:
                        if action == "Deny":
                            denied.append((policy, binding, message, reason))
                        elif action == "Warn":
                            context.warnings.append(
                                f"Validation failed for ValidatingAdmissionPolicy '{name}' "
                                f"with binding '{bname}': {message}"
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

    # -- matching ----------------------------------------------------------------------

    def _matches(self, constraints: Any, attrs: Attributes, *, required: bool) -> Matched | None:
        """The resource the request matched as (None: no match). A policy without
        constraints matches nothing; empty resourceRules match every resource.

        Raises:
            SelectorError: a namespace or object selector does not parse.
        """
        if not isinstance(constraints, dict):
            return None if required else self._as_is(attrs)
        if not self._namespace_matches(constraints.get("namespaceSelector"), attrs):
            return None
        if not self._object_matches(constraints.get("objectSelector"), attrs):
            return None
        policy = constraints.get("matchPolicy") or "Equivalent"  # the API's default
        if self._rules_match(constraints.get("excludeResourceRules"), attrs, policy) is not None:
            return None
        rules = constraints.get("resourceRules")
        if not rules:
            return self._as_is(attrs)
        return self._rules_match(rules, attrs, policy)

    @staticmethod
    def _as_is(attrs: Attributes) -> Matched:
        return Matched(attrs.group, attrs.version, attrs.resource, attrs.kind)

    def _rules_match(self, rules: Any, attrs: Attributes, policy: str) -> Matched | None:
        """``matchesResourceRules``: the request's own resource first, then (Equivalent)
        the other versions serving the same objects."""
        rules = [r for r in rules or [] if isinstance(r, dict)]
        for rule in rules:
            if rule_matches(rule, attrs, attrs.group, attrs.version, attrs.resource):
                names = rule.get("resourceNames") or []
                if not names or attrs.name in names:
                    return self._as_is(attrs)
        if policy != "Equivalent":
            return None
        others = list(equivalents(self._resources, attrs))
        for rule in rules:
            for m in others:
                if rule_matches(rule, attrs, m.group, m.version, m.resource):
                    return m
        return None

    def _namespace_matches(self, selector: Any, attrs: Attributes) -> bool:
        return namespace_matches(selector, attrs, self._storage)

    @staticmethod
    def _object_matches(selector: Any, attrs: Attributes) -> bool:
        return object_matches(selector, attrs)

    # -- params --------------------------------------------------------------------------

    def _param_resource(self, kind: JsonDict) -> Any:
        group, _, version = str(kind.get("apiVersion") or "").rpartition("/")
        for served in self._resources:
            r = served.resource
            if (r.group, r.version, r.kind) == (
                group,
                version,
                kind.get("kind"),
            ) and "list" in served.verbs:
                return served
        return None

    def _params(self, kind: Any, served: Any, ref: Any, attrs: Attributes) -> list[JsonDict | None]:
        """``generic.CollectParams``.

        Raises:
            ValueError: the paramRef cannot be resolved, or names nothing and says Deny.
        """
        if not kind or not isinstance(ref, dict):
            return [None]  # no paramKind, or a binding that uses none: validate without
        namespaced = served.resource.namespaced
        namespace = ""
        if namespaced:
            namespace = str(ref.get("namespace") or attrs.namespace)
            if not namespace:
                raise ValueError(
                    "cannot use namespaced paramRef in policy binding that matches "
                    "cluster-scoped resources"
                )
        elif ref.get("namespace"):
            raise ValueError(
                "paramRef.namespace must not be provided for a cluster-scoped `paramKind`"
            )
        params: list[JsonDict | None]
        if ref.get("name"):
            if ref.get("selector") is not None:
                raise ValueError("paramRef.name and paramRef.selector are mutually exclusive")
            found = self._storage.get((served.key, namespace, str(ref["name"])))
            params = [found] if found is not None else []
        elif ref.get("selector") is not None:
            selector = label_selector_from_dict(ref["selector"])
            params = [
                p
                for p in self._storage.list(served.key, namespace or None)
                if selector.matches((p.get("metadata") or {}).get("labels") or {})
            ]
        else:
            raise ValueError("one of name or selector must be provided")
        if not params and ref.get("parameterNotFoundAction") == "Deny":
            raise ValueError(
                "no params found for policy binding with `Deny` parameterNotFoundAction"
            )
        return params

    # -- validation ----------------------------------------------------------------------

    def _validate(
        self,
        spec: JsonDict,
        *,
        fail: bool,
        matched: Matched,
        attrs: Attributes,
        param: JsonDict | None,
        context: RequestContext,
    ) -> list[tuple[str, str]]:
        """``validator.Validate``: the (message, reason) of every failed validation, and
        of every error when the failurePolicy is Fail."""
        data: dict[str, Any] = {
            "object": attrs.obj,
            "oldObject": attrs.old,
            "params": param,
            "request": self._request(matched, attrs, context),
            "namespaceObject": self._namespace_object(attrs),
        }
        errors: list[str] = []
        for condition in spec.get("matchConditions") or []:
            outcome = self._cel.evaluate(
                str(condition.get("expression", "")), {**data, "variables": {}}
            )
            if outcome.error:
                errors.append(outcome.error)
            elif outcome.value is False:
                return []
        if errors:
            return (
                [("[" + ", ".join(errors) + "]" if len(errors) > 1 else errors[0], "")]
                if fail
                else []
            )
        variables: dict[str, Any] = {}
        broken: dict[str, str] = {}
        for variable in spec.get("variables") or []:
            vname = str(variable.get("name", ""))
            used = [
                n
                for n in broken
                if re.search(rf"\bvariables\.{re.escape(n)}\b", variable.get("expression", ""))
            ]
            if used:
                broken[vname] = broken[used[0]]
                continue
            outcome = self._cel.evaluate(
                str(variable.get("expression", "")), {**data, "variables": variables}
            )
            if outcome.error:
                broken[vname] = outcome.error
            else:
                variables[vname] = outcome.value
        data["variables"] = variables
        out: list[tuple[str, str]] = []
        for validation in spec.get("validations") or []:
            expression = str(validation.get("expression", ""))
            used = [n for n in broken if re.search(rf"\bvariables\.{re.escape(n)}\b", expression)]
            if used:
                if fail:
                    out.append((resulted(expression, inner_error(broken[used[0]])), ""))
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

    @staticmethod
    def _request(matched: Matched, attrs: Attributes, context: RequestContext) -> JsonDict:
        """``cel.CreateAdmissionRequest``: the AdmissionRequest an expression sees."""
        kind = {"group": matched.group, "version": matched.version, "kind": matched.kind}
        resource = {
            "group": matched.group,
            "version": matched.version,
            "resource": matched.resource,
        }
        request: JsonDict = {
            "kind": kind,
            "resource": resource,
            "subResource": attrs.subresource,
            "requestKind": {"group": attrs.group, "version": attrs.version, "kind": attrs.kind},
            "requestResource": {
                "group": attrs.group,
                "version": attrs.version,
                "resource": attrs.resource,
            },
            "requestSubResource": attrs.subresource,
            "name": attrs.name,
            "namespace": attrs.namespace,
            "operation": attrs.operation,
            "userInfo": {
                "username": context.user,
                **({"uid": context.uid} if context.uid else {}),
                "groups": list(context.groups),
            },
            "dryRun": attrs.dry_run,
        }
        return request

    def _namespace_object(self, attrs: Attributes) -> JsonDict | None:
        """``cel.CreateNamespaceObject``: the request's namespace, metadata trimmed."""
        if not attrs.namespace or (attrs.group, attrs.resource) == ("", "namespaces"):
            return None
        ns = self._storage.get(("/namespaces", "", attrs.namespace))
        if ns is None:
            return None
        meta = ns.get("metadata") or {}
        kept = (
            "name",
            "generateName",
            "namespace",
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "labels",
            "annotations",
        )
        return {
            "metadata": {k: meta[k] for k in kept if k in meta},
            "spec": ns.get("spec") or {},
            "status": ns.get("status") or {},
        }

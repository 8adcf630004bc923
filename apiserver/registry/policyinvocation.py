"""Admission policy invocations: which (policy, binding, param) a write makes, and what
their CEL expressions see.

What ValidatingAdmissionPolicy and MutatingAdmissionPolicy share in kube-apiserver: the
generic policy dispatcher (``plugin/policy/generic``: ``policy_dispatcher.go`` and
``policy_matcher.go``) with ``CollectParams``, the CEL activation of ``plugin/cel``
(``CreateAdmissionRequest``, ``CreateNamespaceObject``), the ``matchConditions`` matcher
of ``webhook/matchconditions`` and the variables of ``plugin/cel/composition.go``.
For every write:

1. each policy whose ``matchConstraints`` match the request (resource rules with
   wildcards, subresources, scope and ``resourceNames``; exclude rules;
   ``matchPolicy: Equivalent`` across the versions of a resource; ``namespaceSelector``;
   ``objectSelector`` on the object or the old object) is taken;
2. each binding naming it (``spec.policyName``) whose ``matchResources`` match too is
   taken; a binding whose policy does not exist is ignored, as kube documents;
3. the binding's params are collected (``paramRef`` by name or selector, in the request's
   namespace unless it names one; ``parameterNotFoundAction``): one invocation per
   param, or one without params.

What cannot be configured (a selector that does not parse, a paramKind nothing serves, a
paramRef that finds nothing and says Deny) is a :class:`ConfigError`, which the plugin
hands to the policy's ``failurePolicy``. Policies go by name, and a policy's bindings by
name (kube's order is its informer's, which no one may rely on).

Thread-safety: :class:`PolicySource` keeps no state between calls; the storage it reads
is thread-safe.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from apiserver.machinery.admission import Attributes, RequestContext
from apiserver.registry.cel import Cel, inner_error, resulted
from apiserver.registry.matching import (
    Matched,
    equivalents,
    namespace_matches,
    object_matches,
    rule_matches,
)
from manager.labels import SelectorError, label_selector_from_dict

__all__ = [
    "ConfigError",
    "Invocation",
    "PolicySource",
    "ResourceTable",
    "Storage",
    "Variables",
    "admission_request",
    "evaluate_variables",
    "fails",
    "match_conditions",
    "name_of",
]

JsonDict = dict[str, Any]


class Storage(Protocol):
    """What the plugins read: policies, bindings, params and namespaces."""

    def list(self, key: str, namespace: str | None = None) -> list[JsonDict]: ...

    def get(self, key: tuple[str, str, str]) -> JsonDict | None: ...


class ResourceTable(Protocol):
    """The served resources, to find a paramKind's resource and equivalent versions."""

    def __iter__(self) -> Iterator[Any]: ...


@dataclass(frozen=True, slots=True)
class Invocation:
    """``generic.PolicyInvocation``: one policy, through one binding, with one param."""

    policy: JsonDict
    binding: JsonDict
    matched: Matched  # the resource the request matched as (Equivalent: another version)
    param: JsonDict | None


@dataclass(frozen=True, slots=True)
class ConfigError:
    """A policy or binding that could not be configured for this write (``PolicyError``
    of the generic dispatcher: ``failed to configure policy|binding: <why>``)."""

    policy: JsonDict
    binding: JsonDict | None
    message: str


def name_of(obj: JsonDict | None) -> str:
    """``metadata.name`` of a policy or binding."""
    return str(((obj or {}).get("metadata") or {}).get("name", ""))


def fails(policy: JsonDict) -> bool:
    """Whether the policy's ``failurePolicy`` is Fail (the API's default)."""
    return ((policy.get("spec") or {}).get("failurePolicy") or "Fail") != "Ignore"


class PolicySource:
    """The policies and bindings of one plugin (validating or mutating) over storage."""

    def __init__(
        self, storage: Storage, resources: ResourceTable, *, policies: str, bindings: str
    ) -> None:
        """``policies`` and ``bindings`` are the storage keys of the plugin's two kinds."""
        self._storage = storage
        self._resources = resources
        self._policies = policies
        self._bindings = bindings

    def dispatch(self, attrs: Attributes) -> list[Invocation | ConfigError]:
        """``policyDispatcher.Dispatch`` up to the delegate: the invocations the write
        ``attrs`` makes and the configuration errors met, in policy order."""
        policies = self._storage.list(self._policies)
        if not policies:
            return []
        bindings = sorted(self._storage.list(self._bindings), key=name_of)
        out: list[Invocation | ConfigError] = []
        for policy in sorted(policies, key=name_of):
            self._policy(policy, bindings, attrs, out)
        return out

    def _policy(
        self,
        policy: JsonDict,
        bindings: list[JsonDict],
        attrs: Attributes,
        out: list[Invocation | ConfigError],
    ) -> None:
        spec = policy.get("spec") or {}
        name = name_of(policy)

        def config_error(error: str, binding: JsonDict | None) -> None:
            what = "policy" if binding is None else "binding"
            out.append(ConfigError(policy, binding, f"failed to configure {what}: {error}"))

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
            out.extend(Invocation(policy, binding, matched, param) for param in params)

    def activation(
        self, invocation: Invocation, attrs: Attributes, context: RequestContext
    ) -> dict[str, Any]:
        """The variables an invocation's expressions see (``variables`` aside)."""
        return {
            "object": attrs.obj,
            "oldObject": attrs.old,
            "params": invocation.param,
            "request": admission_request(invocation.matched, attrs, context),
            "namespaceObject": self.namespace_object(attrs),
        }

    # -- matching ----------------------------------------------------------------------

    def _matches(self, constraints: Any, attrs: Attributes, *, required: bool) -> Matched | None:
        """The resource the request matched as (None: no match). A policy without
        constraints matches nothing; empty resourceRules match every resource.

        Raises:
            SelectorError: a namespace or object selector does not parse.
        """
        if not isinstance(constraints, dict):
            return None if required else _as_is(attrs)
        if not namespace_matches(constraints.get("namespaceSelector"), attrs, self._storage):
            return None
        if not object_matches(constraints.get("objectSelector"), attrs):
            return None
        policy = constraints.get("matchPolicy") or "Equivalent"  # the API's default
        if self._rules_match(constraints.get("excludeResourceRules"), attrs, policy) is not None:
            return None
        rules = constraints.get("resourceRules")
        if not rules:
            return _as_is(attrs)
        return self._rules_match(rules, attrs, policy)

    def _rules_match(self, rules: Any, attrs: Attributes, policy: str) -> Matched | None:
        """``matchesResourceRules``: the request's own resource first, then (Equivalent)
        the other versions serving the same objects."""
        rules = [r for r in rules or [] if isinstance(r, dict)]
        for rule in rules:
            if rule_matches(rule, attrs, attrs.group, attrs.version, attrs.resource):
                names = rule.get("resourceNames") or []
                if not names or attrs.name in names:
                    return _as_is(attrs)
        if policy != "Equivalent":
            return None
        others = list(equivalents(self._resources, attrs))
        for rule in rules:
            for m in others:
                if rule_matches(rule, attrs, m.group, m.version, m.resource):
                    return m
        return None

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
            return [None]  # no paramKind, or a binding that uses none: evaluate without
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

    def namespace_object(self, attrs: Attributes) -> JsonDict | None:
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


def _as_is(attrs: Attributes) -> Matched:
    return Matched(attrs.group, attrs.version, attrs.resource, attrs.kind)


def admission_request(matched: Matched, attrs: Attributes, context: RequestContext) -> JsonDict:
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


def match_conditions(cel: Cel, conditions: Any, data: Mapping[str, Any]) -> tuple[bool, list[str]]:
    """``matchconditions.Matcher.Match``: (False, []) when a condition is false, else
    (True, the errors met); what errors mean is the caller's ``failurePolicy``."""
    errors: list[str] = []
    for condition in conditions or []:
        outcome = cel.evaluate(str(condition.get("expression", "")), {**data, "variables": {}})
        if outcome.error:
            errors.append(outcome.error)
        elif outcome.value is False:
            return False, []
    return True, errors


@dataclass(slots=True)
class Variables:
    """The policy's ``variables``: the values that evaluated, and why the others failed."""

    values: dict[str, Any] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)  # name -> its evaluation error

    def error_in(self, expression: str) -> str:
        """The error of an expression that uses a variable that failed ("" if it uses
        none), as kube's lazily evaluated variables word it."""
        for name, cause in self.broken.items():
            if _uses(expression, name):
                return resulted(expression, _failed_variable(name, cause))
        return ""


def _uses(expression: str, variable: str) -> bool:
    return re.search(rf"\bvariables\.{re.escape(variable)}\b", expression) is not None


def _failed_variable(name: str, cause: str) -> str:
    """composition.go's error for a variable that failed to evaluate."""
    return f'composited variable "{name}" fails to evaluate: {cause}'


def evaluate_variables(cel: Cel, variables: Any, data: Mapping[str, Any]) -> Variables:
    """Each variable in order, seeing the earlier ones (a variable that uses a failed one
    fails with that one's error)."""
    out = Variables()
    for variable in variables or []:
        name = str(variable.get("name", ""))
        expression = str(variable.get("expression", ""))
        used = [n for n in out.broken if _uses(expression, n)]
        if used:
            out.broken[name] = _failed_variable(used[0], out.broken[used[0]])
            continue
        outcome = cel.evaluate(expression, {**data, "variables": out.values})
        if outcome.error:
            out.broken[name] = inner_error(outcome.error)
        else:
            out.values[name] = outcome.value
    return out

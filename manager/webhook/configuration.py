"""What a plugin declares: admission webhooks as a ``ValidatingWebhookConfiguration`` or
``MutatingWebhookConfiguration`` lists them (``admissionregistration.k8s.io/v1``), each
with its handler (controller-runtime's ``builder.WebhookManagedBy``, kopf's
``@kopf.on.validate``/``@kopf.on.mutate``).

A declaration is checked when it is made, as kube-apiserver validates the configuration
(``pkg/apis/admissionregistration/validation``): the name is a fully qualified DNS name
of at least three segments; every rule has operations (``CREATE``, ``UPDATE``,
``DELETE``, ``CONNECT`` or ``*`` alone), resources (``*`` and ``*/*`` follow kube's
rules), API groups and versions; ``timeout_seconds`` is 1-30; ``side_effects`` is
``None`` or ``NoneOnDryRun`` (what v1 accepts); selectors parse as label selectors; at
most 64 match conditions with unique qualified names and an expression (the CEL itself is
compiled by the API server, not here); the path's segments are DNS subdomains. Every
problem is reported at once, naming the field: :class:`InvalidWebhook`.

Resources are :class:`~manager.resources.Resource` objects (their group and version
make the rule's) or names (``"widgets"``, ``"widgets/status"``, ``"*"``, ``"*/scale"``)
that take the groups and versions of the rule's objects, or ``api_groups`` and
``api_versions`` when given (required for names without objects).

Thread-safe: declarations are immutable.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from manager.errors import OverseerError
from manager.keys import JsonDict
from manager.labels import SelectorError, is_qualified_name, label_selector_from_dict
from manager.resources import Resource
from manager.webhook.admission import Admission, AdmissionRequest

__all__ = [
    "InvalidWebhook",
    "MatchCondition",
    "MutatingWebhook",
    "Rule",
    "ValidatingWebhook",
    "Webhook",
    "check_path",
]

_OPERATIONS: Final = ("*", "CONNECT", "CREATE", "DELETE", "UPDATE")
_SCOPES: Final = ("*", "Cluster", "Namespaced")
_DNS_LABEL: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN: Final = re.compile(f"^{_DNS_LABEL}(\\.{_DNS_LABEL})*$")
_SUBDOMAIN_MSG: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character"
)


class InvalidWebhook(OverseerError, ValueError):
    """A webhook declaration kube-apiserver would refuse; ``problems`` names each field."""

    def __init__(self, what: str, problems: Sequence[str]) -> None:
        super().__init__(f"{what}: " + "; ".join(problems))
        self.problems = list(problems)


def _quote(values: Sequence[str]) -> str:
    return ", ".join(f'"{v}"' for v in values)


def _not_supported(path: str, value: Any, supported: Sequence[str]) -> str:
    return f'{path}: Unsupported value: "{value}": supported values: {_quote(supported)}'


def _subdomain(value: str) -> list[str]:
    errs = []
    if len(value) > 253:
        errs.append("must be no more than 253 characters")
    if not _DNS_SUBDOMAIN.match(value):
        errs.append(_SUBDOMAIN_MSG)
    return errs


def check_path(path: str, where: str = "path") -> list[str]:
    """kube's ``ValidateWebhookService`` rule for a path: it starts with ``/`` and each
    segment is a DNS subdomain (``/validate/widgets.example.com``)."""
    if path in ("", "/"):
        return [f"{where}: must name a path other than /"]
    if not path.startswith("/"):
        return [f"{where}: must start with a '/'"]
    errs = []
    for i, step in enumerate(path[1:].removesuffix("/").split("/")):
        if not step:
            errs.append(f"{where}: segment[{i}] may not be empty")
        for failure in _subdomain(step):
            errs.append(f"{where}: segment[{i}]: {failure}")
    return errs


def _strings(value: Any, path: str, problems: list[str]) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        problems.append(f"{path}: expected a list of strings, got {value!r}")
        return ()
    if not all(isinstance(v, str) for v in value):
        problems.append(f"{path}: expected a list of strings, got {list(value)!r}")
        return ()
    return tuple(value)


@dataclass(frozen=True, kw_only=True, slots=True)
class Rule:
    """Which requests a webhook is called for: ``operations`` on ``resources`` (of
    ``api_groups`` and ``api_versions``) in ``scope`` (``Namespaced``, ``Cluster`` or
    ``*``)."""

    operations: Sequence[str]
    resources: Sequence[Resource | str]
    api_groups: Sequence[str] | None = None  # default: the groups of the Resource objects
    api_versions: Sequence[str] | None = None  # default: their versions
    scope: Literal["*", "Cluster", "Namespaced"] = "*"

    def __post_init__(self) -> None:
        for name in ("operations", "resources", "api_groups", "api_versions"):
            value = getattr(self, name)
            if isinstance(value, Sequence) and not isinstance(value, str | tuple):
                object.__setattr__(self, name, tuple(value))

    def problems(self, where: str) -> list[str]:
        """What kube would refuse in this rule, each starting with its field's path."""
        problems: list[str] = []
        operations = _strings(self.operations, f"{where}.operations", problems)
        if not operations and not problems:
            problems.append(f"{where}.operations: Required value")
        if len(operations) > 1 and "*" in operations:
            problems.append(
                f"{where}.operations: if '*' is present, must not specify other operations"
            )
        for i, op in enumerate(operations):
            if op not in _OPERATIONS:
                problems.append(_not_supported(f"{where}.operations[{i}]", op, _OPERATIONS))
        if self.scope not in _SCOPES:
            problems.append(_not_supported(f"{where}.scope", self.scope, _SCOPES))
        if isinstance(self.resources, str) or not isinstance(self.resources, Sequence):
            problems.append(f"{where}.resources: expected a list, got {self.resources!r}")
            return problems
        if not self.resources:
            problems.append(f"{where}.resources: Required value")
            return problems
        bad = [r for r in self.resources if not isinstance(r, Resource | str)]
        if bad:
            problems.append(
                f"{where}.resources: expected Resource objects or names, got {bad[0]!r}"
            )
            return problems
        for key, value in (("api_groups", self.api_groups), ("api_versions", self.api_versions)):
            if value is not None:
                values = _strings(value, f"{where}.{key}", problems)
                if not values:
                    problems.append(f"{where}.{key}: Required value")
                elif len(values) > 1 and "*" in values:
                    problems.append(f"{where}.{key}: if '*' is present, must not specify others")
                if key == "api_versions" and "" in values:
                    problems.append(f"{where}.{key}: a version may not be empty")
        if problems:
            return problems
        try:
            entries = self.entries()
        except ValueError as exc:
            return [f"{where}.{exc}"]
        for entry in entries:
            problems.extend(_resources_problems(entry["resources"], f"{where}.resources"))
        return problems

    def entries(self) -> list[JsonDict]:
        """The rule as kube's ``RuleWithOperations`` entries: one per group and version
        of its Resource objects (names join them), or one with the given groups and
        versions.

        Raises:
            ValueError: names without groups or versions to take (``api_groups: ...``).
        """
        groups = tuple(self.api_groups) if self.api_groups is not None else None
        versions = tuple(self.api_versions) if self.api_versions is not None else None
        by_key: dict[tuple[tuple[str, ...], tuple[str, ...]], list[str]] = {}
        names = []
        for item in self.resources:
            if isinstance(item, Resource):
                key = (groups or (item.group,), versions or (item.version,))
                plurals = by_key.setdefault(key, [])
                if item.plural not in plurals:
                    plurals.append(item.plural)
            else:
                names.append(item)
        if names:
            if groups is not None and versions is not None:
                by_key.setdefault((groups, versions), []).extend(names)
            elif len(by_key) == 1:
                next(iter(by_key.values())).extend(names)
            else:
                missing = "api_groups" if groups is None else "api_versions"
                why = (
                    "its Resource objects are of several groups and versions"
                    if by_key
                    else "it has no Resource objects to take them from"
                )
                raise ValueError(
                    f"{missing}: required for resources given by name ({names[0]!r}): {why}"
                )
        return [
            {
                "operations": list(self.operations),
                "apiGroups": list(g),
                "apiVersions": list(v),
                "resources": resources,
                "scope": self.scope,
            }
            for (g, v), resources in by_key.items()
        ]


def _resources_problems(resources: Sequence[str], where: str) -> list[str]:
    """kube's ``validateResources``."""
    problems = []
    with_wildcard_sub: set[str] = set()
    with_wildcard_res: set[str] = set()
    double = single = plain = False
    for i, item in enumerate(resources):
        if not item:
            problems.append(f"{where}[{i}]: Required value")
            continue
        if item == "*/*":
            double = True
        if item == "*":
            single = True
        res, slash, sub = item.partition("/")
        if not slash:
            plain = plain or item != "*"
            continue
        if res in with_wildcard_sub:
            problems.append(f"{where}[{i}]: if '{res}/*' is present, must not specify {item}")
        if sub in with_wildcard_res:
            problems.append(f"{where}[{i}]: if '*/{sub}' is present, must not specify {item}")
        if sub == "*":
            with_wildcard_sub.add(res)
        if res == "*":
            with_wildcard_res.add(sub)
    if len(resources) > 1 and double:
        problems.append(f"{where}: if '*/*' is present, must not specify other resources")
    if single and plain:
        problems.append(
            f"{where}: if '*' is present, must not specify other resources without subresources"
        )
    return problems


@dataclass(frozen=True, slots=True)
class MatchCondition:
    """A CEL expression the API server evaluates before calling the webhook: it is
    called only when every condition is true (``admissionregistration/v1``
    ``MatchCondition``)."""

    name: str
    expression: str


def _selector_problems(selector: Any, where: str) -> list[str]:
    if selector is None:
        return []
    if not isinstance(selector, Mapping):
        return [f"{where}: expected a label selector (matchLabels, matchExpressions)"]
    unknown = sorted(set(selector) - {"matchLabels", "matchExpressions"})
    if unknown:
        return [f"{where}: unknown field {unknown[0]!r} (matchLabels, matchExpressions)"]
    try:
        label_selector_from_dict(selector)
    except SelectorError as exc:
        return [f"{where}: {exc}"]
    return []


def _conditions_problems(conditions: Sequence[Any]) -> list[str]:
    problems = []
    if len(conditions) > 64:
        problems.append(f"match_conditions: Too many: {len(conditions)}: must have at most 64")
    seen: set[str] = set()
    for i, condition in enumerate(conditions):
        where = f"match_conditions[{i}]"
        if not isinstance(condition, MatchCondition):
            problems.append(f"{where}: expected a MatchCondition, got {condition!r}")
            continue
        if not condition.name:
            problems.append(f"{where}.name: Required value")
        else:
            problems.extend(f"{where}.name: {m}" for m in is_qualified_name(condition.name))
            if condition.name in seen:
                problems.append(f'{where}.name: Duplicate value: "{condition.name}"')
            seen.add(condition.name)
        if not isinstance(condition.expression, str) or not condition.expression.strip():
            problems.append(f"{where}.expression: Required value")
    return problems


def _fully_qualified(name: Any) -> list[str]:
    """kube's ``IsFullyQualifiedName``."""
    if not isinstance(name, str) or not name:
        return ["name: Required value"]
    errs = _subdomain(name)
    if errs:
        return [f'name: Invalid value: "{name}": ' + ",".join(errs)]
    if len(name.split(".")) < 3:
        return [
            f'name: Invalid value: "{name}": should be a domain with at least three segments '
            "separated by dots"
        ]
    return []


@dataclass(frozen=True, kw_only=True, slots=True)
class _Webhook:
    name: str
    rules: Sequence[Rule]
    failure_policy: Literal["Fail", "Ignore"] = "Fail"
    side_effects: Literal["None", "NoneOnDryRun"] = "None"
    timeout_seconds: int = 10
    match_policy: Literal["Exact", "Equivalent"] = "Equivalent"
    namespace_selector: Mapping[str, Any] | None = None
    object_selector: Mapping[str, Any] | None = None
    match_conditions: Sequence[MatchCondition] = ()
    path: str | None = None  # default: /validate/<name> or /mutate/<name>

    _PREFIX = "/"
    _KIND = ""

    def _problems(self) -> list[str]:
        problems = _fully_qualified(self.name)
        rules: Any = self.rules
        if isinstance(rules, Rule) or not isinstance(rules, Sequence):
            problems.append(f"rules: expected a list of Rule, got {rules!r}")
        elif not rules:
            problems.append("rules: at least one Rule (a webhook with none is never called)")
        else:
            for i, rule in enumerate(rules):
                if isinstance(rule, Rule):
                    problems.extend(rule.problems(f"rules[{i}]"))
                else:
                    problems.append(f"rules[{i}]: expected a Rule, got {rule!r}")
        for key, value, supported in (
            ("failure_policy", self.failure_policy, ("Fail", "Ignore")),
            ("side_effects", self.side_effects, ("None", "NoneOnDryRun")),
            ("match_policy", self.match_policy, ("Equivalent", "Exact")),
        ):
            if value not in supported:
                problems.append(_not_supported(key, value, supported))
        timeout = self.timeout_seconds
        if isinstance(timeout, bool) or not isinstance(timeout, int) or not 1 <= timeout <= 30:
            problems.append(
                f"timeout_seconds: Invalid value: {timeout!r}: the timeout value must be "
                "between 1 and 30 seconds"
            )
        problems.extend(_selector_problems(self.namespace_selector, "namespace_selector"))
        problems.extend(_selector_problems(self.object_selector, "object_selector"))
        conditions: Any = self.match_conditions
        if isinstance(conditions, Sequence):
            problems.extend(_conditions_problems(conditions))
        else:
            problems.append("match_conditions: expected a list of MatchCondition")
        if self.path is not None:
            problems.extend(check_path(self.path))
        elif not problems:
            problems.extend(check_path(self.served_path))
        if not callable(getattr(self, "handler", None)):
            problems.append("handler: expected a function of the AdmissionRequest")
        return problems

    def _check(self) -> None:
        for name in ("rules", "match_conditions"):
            value = getattr(self, name)
            if isinstance(value, list):
                object.__setattr__(self, name, tuple(value))
        problems = self._problems()
        if problems:
            raise InvalidWebhook(f"{self._KIND} {self.name!r}", problems)

    @property
    def served_path(self) -> str:
        """Where the server answers this webhook's reviews."""
        return self.path if self.path is not None else f"{self._PREFIX}{self.name}"

    @property
    def mutating(self) -> bool:
        return False

    def entry(self, client_config: Mapping[str, Any]) -> JsonDict:
        """The webhook as an entry of its configuration's ``webhooks``, calling
        ``client_config`` (``{"service": {...}, "caBundle": ...}``; the path is added to
        a service reference that has none)."""
        config = dict(client_config)
        service = config.get("service")
        if isinstance(service, Mapping) and "path" not in service:
            config["service"] = {**service, "path": self.served_path}
        out: JsonDict = {
            "name": self.name,
            "clientConfig": config,
            "rules": [entry for rule in self.rules for entry in rule.entries()],
            "failurePolicy": self.failure_policy,
            "sideEffects": self.side_effects,
            "timeoutSeconds": self.timeout_seconds,
            "matchPolicy": self.match_policy,
            "admissionReviewVersions": ["v1"],
            "namespaceSelector": dict(self.namespace_selector or {}),
            "objectSelector": dict(self.object_selector or {}),
        }
        if self.match_conditions:
            out["matchConditions"] = [
                {"name": c.name, "expression": c.expression} for c in self.match_conditions
            ]
        return out


@dataclass(frozen=True, kw_only=True, slots=True)
class ValidatingWebhook(_Webhook):
    """A webhook of a ``ValidatingWebhookConfiguration``: ``handler`` allows or denies.

    Raises:
        InvalidWebhook: what kube-apiserver would refuse in it (every field at once).
    """

    handler: Callable[[AdmissionRequest], Admission]

    _PREFIX = "/validate/"
    _KIND = "ValidatingWebhook"

    def __post_init__(self) -> None:
        self._check()


@dataclass(frozen=True, kw_only=True, slots=True)
class MutatingWebhook(_Webhook):
    """A webhook of a ``MutatingWebhookConfiguration``: ``handler`` returns the changed
    object (or an :class:`~manager.webhook.admission.Admission`); ``reinvocation_policy``
    ``IfNeeded`` calls it again when a later webhook changed the object.

    Raises:
        InvalidWebhook: what kube-apiserver would refuse in it (every field at once).
    """

    handler: Callable[[AdmissionRequest], JsonDict | Admission]
    reinvocation_policy: Literal["Never", "IfNeeded"] = "Never"

    _PREFIX = "/mutate/"
    _KIND = "MutatingWebhook"

    def __post_init__(self) -> None:
        self._check()

    def _problems(self) -> list[str]:
        problems = _Webhook._problems(self)
        if self.reinvocation_policy not in ("Never", "IfNeeded"):
            problems.append(
                _not_supported(
                    "reinvocation_policy", self.reinvocation_policy, ("IfNeeded", "Never")
                )
            )
        return problems

    @property
    def mutating(self) -> bool:
        return True

    def entry(self, client_config: Mapping[str, Any]) -> JsonDict:
        out = _Webhook.entry(self, client_config)
        out["reinvocationPolicy"] = self.reinvocation_policy
        return out


Webhook = ValidatingWebhook | MutatingWebhook

"""RBAC for an install: the ClusterRole of the enabled controllers and the manager's own
Role, from the rules each controller declares (``rbac_rules``, see
:mod:`manager.plugins`). ``overseer rbac`` prints :func:`render`.

* ClusterRole ``<name>``: the union of the enabled controllers' rules, plus what the
  framework needs cluster-wide (the event recorder writes Events in the namespace of the
  object they are about). One rule per API group and resource, verbs merged, each
  commented with who needs it. Rules with ``resourceNames`` or ``nonResourceURLs`` are
  kept as declared.
* Role ``<name>-leader-election`` in the manager's namespace (only with leader election
  on): the Lease (get, create, update; ``manager/leaderelection.py``) and the Events
  about it.
* Role ``<name>-sharding`` in the shard Leases' namespace (``sharding.namespace``, by
  default the manager's; only when a controller is ``sharded``): the shard
  Leases (``manager/sharding.py``): each replica creates, renews and publishes on its own,
  watches the others', and the lowest member deletes dead ones.
* With secure metrics (``metrics.secure``, the default), the ClusterRole also holds
  ``create`` on ``tokenreviews`` and ``subjectaccessreviews`` (the metrics server asks
  the API server who a caller is and whether it may read ``/metrics``:
  :mod:`manager.metricsauth`), and two ClusterRoles for the callers, bound to no one
  here: ``<name>-metrics-reader`` (GET ``/metrics``: bind Prometheus's ServiceAccount)
  and ``<name>-status-reader`` (GET ``/statusz`` and ``/flagz``: for people).
* Role ``<name>`` in each namespace a controller's rules name (a rule with
  ``namespaces: [...]``, e.g. a Secret mirror reading Secrets in ``source`` only): those
  rules there and nowhere else, bound by a RoleBinding ``<name>`` in that namespace.
* With managed webhook certificates (``webhooks.certificates: managed``) and a
  controller that declares webhooks or conversions: Role ``<name>-webhook-certificates``
  in the webhooks' namespace (``webhooks.namespace``, by default the manager's): the
  certificate Secret by name (get, list, watch: every replica watches it with
  ``fieldSelector=metadata.name``; update: the leader), and ``create`` on Secrets, which
  RBAC cannot narrow to a name (the name of a create is in its body); and ClusterRole
  ``<name>-webhook-certificates``: get and update of the install's
  Validating/MutatingWebhookConfiguration (``webhooks.configurationName``) and of the
  CRDs with declared conversions, each by name (the leader writes their ``caBundle``
  with a conditional update; it creates none of them).
* With kubeconfig Secrets as a source of clusters (``clusters.secrets.enabled``): a Role
  in their namespace (``clusters.secrets.namespace``, by default the manager's) to get,
  list and watch Secrets there, and nowhere else (:mod:`manager.fleet.providers`). What
  the controllers do in the member clusters is granted there, to the credentials their
  kubeconfigs carry: apply the same ClusterRole in each.
* A binding of each to the ServiceAccount ``<name>`` in that namespace.

The output is one YAML stream, ready to be a kustomize resource.

Thread-safe: pure functions.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import yaml

from manager.plugins import ControllerPlugin, ControllerSettings, RbacRule, declared_rbac_rules

if TYPE_CHECKING:
    from manager.config import OverseerConfig
    from manager.webhook.manifests import Declaration

__all__ = [
    "EVENT_RULES",
    "LEADER_ELECTION_RULES",
    "METRICS_AUTH_RULES",
    "METRICS_READER_RULES",
    "SHARDING_RULES",
    "RbacOptions",
    "certificate_rules",
    "for_controllers",
    "merge_rules",
    "render",
    "split_namespaced",
]

EVENT_RULES: Final[tuple[RbacRule, ...]] = (
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
)
"""The event recorder (``manager/events.py``): create an Event, patch a repeat's count."""

LEADER_ELECTION_RULES: Final[tuple[RbacRule, ...]] = (
    {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "verbs": ["get", "create", "update"],
    },
    *EVENT_RULES,
)
"""Leader election: GET the Lease, CREATE it, UPDATE it with the observed resourceVersion
(acquire, renew, release); no list, watch, patch or delete."""

SHARDING_RULES: Final[tuple[RbacRule, ...]] = (
    {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    },
)
"""Sharding: its own shard Lease (get, create, update: the election rules; patch: the
published ring), every shard Lease of the ring (list, watch), dead ones (delete)."""

METRICS_AUTH_RULES: Final[tuple[RbacRule, ...]] = (
    {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
    {
        "apiGroups": ["authorization.k8s.io"],
        "resources": ["subjectaccessreviews"],
        "verbs": ["create"],
    },
)
"""Secure metrics (``manager/metricsauth.py``): a TokenReview per caller's token and a
SubjectAccessReview per caller and path, each cached for a few seconds."""

METRICS_READER_RULES: Final[tuple[RbacRule, ...]] = (
    {"nonResourceURLs": ["/metrics"], "verbs": ["get"]},
)
"""What a scraper (Prometheus's ServiceAccount) needs: GET on ``/metrics``."""

STATUS_READER_RULES: Final[tuple[RbacRule, ...]] = (
    {"nonResourceURLs": ["/statusz", "/flagz"], "verbs": ["get"]},
)
"""What a person reading the z-pages needs: GET on ``/statusz`` and ``/flagz``."""

MANAGER = "manager"  # who needs the framework's rules, in the comments
METRICS = "manager (secure metrics)"
_VERB_ORDER = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")


@dataclass(frozen=True, kw_only=True, slots=True)
class RbacOptions:
    """Names in the rendered objects."""

    name: str = "overseer"  # ClusterRole, Role prefix, ServiceAccount
    namespace: str = "overseer-system"  # the ServiceAccount's and the Lease's namespace
    leader_election: bool = True  # render the Lease Role and its binding
    sharding: bool = False  # render the shard Lease Role and its binding
    metrics_secure: bool = True  # review rules, and the metrics/status reader ClusterRoles
    sharding_namespace: str = ""  # the shard Leases' namespace ("" = namespace)
    labels: Mapping[str, str] | None = None  # default: app.kubernetes.io name/part-of
    certificate_rules: Sequence[RbacRule] = ()  # the certificate Secret (managed certs)
    certificate_namespace: str = ""  # where that Secret is ("" = namespace)
    ca_bundle_rules: Sequence[RbacRule] = ()  # configurations and CRDs (managed certs)


def _verbs(verbs: Iterable[str]) -> list[str]:
    unique = set(verbs)
    known = [v for v in _VERB_ORDER if v in unique]
    return known + sorted(unique - set(_VERB_ORDER))


def merge_rules(
    declared: Sequence[tuple[str, Sequence[RbacRule]]],
) -> list[tuple[RbacRule, list[str]]]:
    """Merge ``(who, rules)`` pairs into one rule per (apiGroup, resource) in the order
    first declared, with the names of who needs each; special rules stay as they are."""
    order: list[tuple[str, str]] = []
    verbs: dict[tuple[str, str], set[str]] = {}
    needs: dict[tuple[str, str], list[str]] = {}
    special: list[tuple[RbacRule, list[str]]] = []
    for who, rules in declared:
        for rule in rules:
            if set(rule) - {"apiGroups", "resources", "verbs"}:
                special.append((dict(rule), [who]))
                continue
            for group in rule.get("apiGroups", []):
                for resource in rule.get("resources", []):
                    key = (group, resource)
                    if key not in verbs:
                        order.append(key)
                        verbs[key] = set()
                        needs[key] = []
                    verbs[key] |= set(rule["verbs"])
                    if who not in needs[key]:
                        needs[key].append(who)
    merged = [
        (
            {
                "apiGroups": [group],
                "resources": [resource],
                "verbs": _verbs(verbs[(group, resource)]),
            },
            needs[(group, resource)],
        )
        for group, resource in order
    ]
    return merged + special


def _flow(values: Sequence[str]) -> str:
    return "[" + ", ".join(yaml.safe_dump(v, default_style='"').strip() for v in values) + "]"


def _rules_yaml(rules: list[tuple[RbacRule, list[str]]]) -> list[str]:
    lines = ["rules:"]
    for rule, who in rules:
        lines.append(f"  # {', '.join(who)}")
        first = True
        for key, values in rule.items():
            lines.append(f"  {'- ' if first else '  '}{key}: {_flow(values)}")
            first = False
    return lines


def _meta(name: str, labels: Mapping[str, str], namespace: str | None = None) -> list[str]:
    lines = ["metadata:", f"  name: {name}"]
    if namespace is not None:
        lines.append(f"  namespace: {namespace}")
    lines.append("  labels:")
    lines.extend(f"    {k}: {v}" for k, v in labels.items())
    return lines


def _binding(
    kind: str, role_kind: str, name: str, opts: RbacOptions, labels: Mapping[str, str]
) -> list[str]:
    namespace = opts.namespace if kind == "RoleBinding" else None
    return [
        "apiVersion: rbac.authorization.k8s.io/v1",
        f"kind: {kind}",
        *_meta(name, labels, namespace),
        "roleRef:",
        "  apiGroup: rbac.authorization.k8s.io",
        f"  kind: {role_kind}",
        f"  name: {name}",
        "subjects:",
        "  - kind: ServiceAccount",
        f"    name: {opts.name}",
        f"    namespace: {opts.namespace}",
    ]


def split_namespaced(
    controllers: Sequence[tuple[str, Sequence[RbacRule]]],
) -> tuple[list[tuple[str, list[RbacRule]]], dict[str, list[tuple[str, list[RbacRule]]]]]:
    """The cluster-wide rules, and per namespace the rules that name it (``namespaces``,
    which is dropped from the rule: a Role's rule applies in the Role's namespace)."""
    cluster: list[tuple[str, list[RbacRule]]] = []
    local: dict[str, list[tuple[str, list[RbacRule]]]] = {}
    for who, rules in controllers:
        mine = [dict(r) for r in rules if not r.get("namespaces")]
        if mine:
            cluster.append((who, mine))
        for rule in rules:
            for ns in rule.get("namespaces") or []:
                plain = {k: v for k, v in rule.items() if k != "namespaces"}
                entries = local.setdefault(ns, [])
                if entries and entries[-1][0] == who:
                    entries[-1][1].append(plain)
                else:
                    entries.append((who, [plain]))
    return cluster, dict(sorted(local.items()))


def _namespaced_binding(
    name: str, namespace: str, opts: RbacOptions, labels: Mapping[str, str]
) -> list[str]:
    return [
        "apiVersion: rbac.authorization.k8s.io/v1",
        "kind: RoleBinding",
        *_meta(name, labels, namespace),
        "roleRef:",
        "  apiGroup: rbac.authorization.k8s.io",
        "  kind: Role",
        f"  name: {name}",
        "subjects:",
        "  - kind: ServiceAccount",
        f"    name: {opts.name}",
        f"    namespace: {opts.namespace}",
    ]


def render(
    controllers: Sequence[tuple[str, Sequence[RbacRule]]],
    options: RbacOptions | None = None,
    *,
    header: Sequence[str] = (),
) -> str:
    """The RBAC objects for ``(controller name, its rules)`` pairs, as YAML; ``header``
    lines become comments at the top. Rules with ``namespaces`` go into a Role in each
    of those namespaces instead of the ClusterRole."""
    opts = options or RbacOptions()
    controllers, namespaced = split_namespaced(controllers)
    labels = dict(
        opts.labels or {"app.kubernetes.io/name": opts.name, "app.kubernetes.io/part-of": opts.name}
    )
    lines = [f"# {line}".rstrip() for line in header]
    lines += [
        "---",
        "# What the enabled controllers do, cluster-wide.",
        "apiVersion: rbac.authorization.k8s.io/v1",
        "kind: ClusterRole",
        *_meta(opts.name, labels),
        *_rules_yaml(
            merge_rules(
                [
                    *controllers,
                    (MANAGER, EVENT_RULES),
                    *([(METRICS, METRICS_AUTH_RULES)] if opts.metrics_secure else []),
                ]
            )
        ),
        "---",
        *_binding("ClusterRoleBinding", "ClusterRole", opts.name, opts, labels),
    ]
    if opts.metrics_secure:
        for suffix, who, reader_rules in (
            (
                "metrics-reader",
                "scrape /metrics: bind Prometheus's ServiceAccount",
                METRICS_READER_RULES,
            ),
            (
                "status-reader",
                "read /statusz and /flagz: bind the people who may",
                STATUS_READER_RULES,
            ),
        ):
            lines += [
                "---",
                f"# Who may {who} to this.",
                "apiVersion: rbac.authorization.k8s.io/v1",
                "kind: ClusterRole",
                *_meta(f"{opts.name}-{suffix}", labels),
                *_rules_yaml([(dict(rule), [suffix]) for rule in reader_rules]),
            ]
    for ns, rules in namespaced.items():
        lines += [
            "---",
            f"# What the enabled controllers do in the namespace {ns} only.",
            "apiVersion: rbac.authorization.k8s.io/v1",
            "kind: Role",
            *_meta(opts.name, labels, ns),
            *_rules_yaml(merge_rules(rules)),
            "---",
            *_namespaced_binding(opts.name, ns, opts, labels),
        ]
    if opts.leader_election:
        role = f"{opts.name}-leader-election"
        lines += [
            "---",
            "# The manager itself, in its own namespace only: the leader-election Lease and",
            "# the Events about it.",
            "apiVersion: rbac.authorization.k8s.io/v1",
            "kind: Role",
            *_meta(role, labels, opts.namespace),
            *_rules_yaml(merge_rules([(MANAGER, LEADER_ELECTION_RULES)])),
            "---",
            *_binding("RoleBinding", "Role", role, opts, labels),
        ]
    if opts.sharding:
        role = f"{opts.name}-sharding"
        where = opts.sharding_namespace or opts.namespace
        binding = _binding("RoleBinding", "Role", role, opts, labels)
        # the binding lives with the Role; its subject stays in the manager's namespace
        binding[binding.index(f"  namespace: {opts.namespace}")] = f"  namespace: {where}"
        lines += [
            "---",
            "# Sharded controllers, in the manager's namespace only: the shard Leases."
            if where == opts.namespace
            else f"# Sharded controllers, in the namespace {where} only: the shard Leases.",
            "apiVersion: rbac.authorization.k8s.io/v1",
            "kind: Role",
            *_meta(role, labels, where),
            *_rules_yaml(merge_rules([(MANAGER, SHARDING_RULES)])),
            "---",
            *binding,
        ]
    if opts.certificate_rules:
        role = f"{opts.name}-webhook-certificates"
        where = opts.certificate_namespace or opts.namespace
        binding = _binding("RoleBinding", "Role", role, opts, labels)
        binding[binding.index(f"  namespace: {opts.namespace}")] = f"  namespace: {where}"
        lines += [
            "---",
            "# Managed webhook certificates: the Secret every replica serves and the leader",
            "# keeps (create cannot be narrowed to a name).",
            "apiVersion: rbac.authorization.k8s.io/v1",
            "kind: Role",
            *_meta(role, labels, where),
            *_rules_yaml([(dict(rule), [MANAGER]) for rule in opts.certificate_rules]),
            "---",
            *binding,
        ]
    if opts.ca_bundle_rules:
        role = f"{opts.name}-webhook-certificates"
        lines += [
            "---",
            "# Managed webhook certificates: the leader writes the CA bundle into these, by",
            "# name (it creates none of them).",
            "apiVersion: rbac.authorization.k8s.io/v1",
            "kind: ClusterRole",
            *_meta(role, labels),
            *_rules_yaml([(dict(rule), [MANAGER]) for rule in opts.ca_bundle_rules]),
            "---",
            *_binding("ClusterRoleBinding", "ClusterRole", role, opts, labels),
        ]
    return "\n".join(lines) + "\n"


def certificate_rules(
    config: OverseerConfig, declared: Sequence[Declaration]
) -> tuple[list[RbacRule], list[RbacRule]]:
    """What managed webhook certificates need: the rules on the Secret (namespaced) and
    those on the configurations and CRDs (cluster-wide); none without managed
    certificates or without a declared webhook or conversion."""
    from manager.webhook.configuration import MutatingWebhook, ValidatingWebhook
    from manager.webhook.conversion import Conversion

    wh = config.webhooks
    if wh.certificates != "managed" or not declared:
        return [], []
    secret = wh.managed.secret_name
    namespaced: list[RbacRule] = [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": [secret],
            "verbs": ["get", "list", "watch", "update"],
        },
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
    ]
    cluster: list[RbacRule] = []
    hooks = [h for h, _ in declared]
    for plural, cls in (
        ("validatingwebhookconfigurations", ValidatingWebhook),
        ("mutatingwebhookconfigurations", MutatingWebhook),
    ):
        if any(isinstance(h, cls) for h in hooks):
            cluster.append(
                {
                    "apiGroups": ["admissionregistration.k8s.io"],
                    "resources": [plural],
                    "resourceNames": [wh.configuration_name],
                    "verbs": ["get", "update"],
                }
            )
    crds = sorted({h.crd for h in hooks if isinstance(h, Conversion)})
    if crds:
        cluster.append(
            {
                "apiGroups": ["apiextensions.k8s.io"],
                "resources": ["customresourcedefinitions"],
                "resourceNames": crds,
                "verbs": ["get", "update"],
            }
        )
    return namespaced, cluster


def for_controllers(
    plugins: Mapping[str, ControllerPlugin],
    config: OverseerConfig,
    controllers: Mapping[str, tuple[ControllerSettings, Any]],
    *,
    name: str = "overseer",
    namespace: str | None = None,
    webhooks: Sequence[Declaration] | None = None,
) -> tuple[str, list[str]]:
    """What ``overseer rbac`` prints for a validated configuration: the YAML, and the
    enabled controllers that declare no ``rbac_rules`` (missing from it). ``webhooks``:
    what the enabled controllers declare (:func:`~manager.webhook.manifests.
    declared_webhooks`), for the rules of managed certificates.

    Raises:
        PluginLoadError: a controller's ``rbac_rules`` is broken.
    """
    declared = []
    silent = []
    for controller, (settings, own) in sorted(controllers.items()):
        if not settings.enabled:
            continue
        rules = declared_rbac_rules(controller, plugins[controller], own)
        if rules is None:
            silent.append(controller)
        else:
            declared.append((controller, rules))
    le = config.leader_election
    own_namespace = namespace or le.namespace or "overseer-system"
    names = ", ".join(n for n, _ in declared) or "none"
    secrets = config.clusters.secrets
    if secrets.enabled:
        declared.append(
            (
                "fleet (kubeconfig Secrets)",
                [
                    {
                        "apiGroups": [""],
                        "resources": ["secrets"],
                        "verbs": ["get", "list", "watch"],
                        "namespaces": [secrets.namespace or own_namespace],
                    }
                ],
            )
        )
    secret_rules, bundle_rules = certificate_rules(config, webhooks or [])
    options = RbacOptions(
        name=name,
        namespace=own_namespace,
        certificate_rules=secret_rules,
        certificate_namespace=config.webhooks.namespace,
        ca_bundle_rules=bundle_rules,
        leader_election=le.enabled,
        sharding=any(s.enabled and s.sharded for s, _ in controllers.values()),
        metrics_secure=config.metrics.secure,
        sharding_namespace=config.sharding.namespace,
    )
    header = textwrap.wrap(
        f"RBAC for Overseer with the controllers {names}. Generated by `overseer rbac` "
        "from the rules each controller declares (rbac_rules) and the manager's own "
        "needs: least privilege. Change those, then generate this again.",
        width=86,
    )
    return render(declared, options, header=header), silent

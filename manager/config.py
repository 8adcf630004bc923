"""Configuration: one YAML file → frozen, typed settings; strict.

The file has manager settings at the top and one section per controller under
``controllers:``. Keys are camelCase in YAML and snake_case in Python
(``gracefulShutdownTimeout`` ↔ ``graceful_shutdown_timeout``). Loading is strict, like
Kubernetes component config: an unknown key, a wrong type or a value out of range is an
error, and *every* error is reported with its path, e.g.
``controllers.exposer.workers: expected integer >= 1 and <= 256, got "four"``;
nothing starts.

The schema is the dataclasses themselves (:class:`OverseerConfig` here, each plugin's
``config_class``): field types, defaults, and ``metadata`` with ``min``, ``max``,
``help`` and ``format`` (``"labelSelector"``: a string, or each string of a list, is
parsed as kube parses a ``labelSelector``, so a bad one fails ``config validate``); a
``validate()`` method adds cross-field checks (each problem starts with the field it is
about: ``"cidr: not a network"``). An unknown key or controller name
comes with the closest known one (``did you mean leaseDuration?``). The keys of a
``dict[str, T]`` setting are the user's, kept as written (never camelCased); each must be
a string (YAML reads an unquoted ``yes``, ``1`` or ``null`` as something else: an error
says to quote it), each value is checked against ``T`` (and ``format``) with the key in
its path, and a mapping in the file replaces the default one whole.
:func:`render_defaults` writes the full default file with every field's help as a
comment. :func:`load_config` applies the plugin policy (an installed controller that
cannot load is fatal unless the file disables it) on top of :func:`parse`.

Thread-safe: pure functions over immutable values.
"""

from __future__ import annotations

import dataclasses
import datetime
import difflib
import re
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import yaml

from manager.errors import ConfigError, PluginLoadError
from manager.labels import LabelSelector, SelectorError
from manager.plugins import ControllerSettings, PluginSet

if TYPE_CHECKING:
    from manager.manager import ManagerOptions

__all__ = [
    "ClientConfig",
    "ClusterSecretsConfig",
    "ClustersConfig",
    "KubeconfigClusterConfig",
    "LeaderElectionSettings",
    "LogConfig",
    "ManagedCertificatesConfig",
    "MetricsConfig",
    "OverseerConfig",
    "TracingConfig",
    "WebhooksConfig",
    "camel",
    "load_config",
    "load_dataclass",
    "load_file",
    "manager_options",
    "parse",
    "read_yaml",
    "render_defaults",
]

T = TypeVar("T")


def _f(default: Any, help: str, **meta: Any) -> Any:
    return field(default=default, metadata={"help": help, **meta})


@dataclass(frozen=True, kw_only=True, slots=True)
class ClientConfig:
    """How Overseer talks to the API server."""

    qps: float = _f(20.0, "client-side request rate limit, requests per second", min=0.1)
    burst: int = _f(30, "client-side burst above qps", min=1)
    timeout: float = _f(30.0, "timeout of one API request, seconds", min=1.0)


@dataclass(frozen=True, kw_only=True, slots=True)
class LeaderElectionSettings:
    """Lease leader election: one replica leads, the others stand by."""

    enabled: bool = _f(True, "run controllers only in the replica that holds the Lease")
    namespace: str = _f("", 'namespace of the Lease ("" = $POD_NAMESPACE, else "default")')
    lease_name: str = _f("overseer-leader", "name of the Lease object")
    lease_duration: float = _f(15.0, "seconds a standby waits before taking over", min=1.0)
    renew_deadline: float = _f(10.0, "seconds the leader keeps trying to renew", min=0.5)
    retry_period: float = _f(2.0, "seconds between acquire/renew attempts", min=0.1)

    def validate(self) -> list[str]:
        problems = []
        if not self.lease_duration > self.renew_deadline:
            problems.append("renewDeadline: must be less than leaseDuration")
        if not self.renew_deadline > 1.2 * self.retry_period:
            problems.append("retryPeriod: renewDeadline must be greater than 1.2 x retryPeriod")
        return problems


@dataclass(frozen=True, kw_only=True, slots=True)
class ShardingSettings:
    """The ring of sharded controllers (``sharded: true`` in a controller's section):
    every replica holds a shard Lease and reconciles its share of the keys."""

    ring_name: str = _f("overseer", "the ring: label value and name prefix of the shard Leases")
    namespace: str = _f("", 'namespace of the shard Leases ("" = the leader election one)')
    shard_by: Literal["uid", "namespace"] = _f(
        "uid", "what places a key on the ring: its primary object's uid, or its namespace"
    )
    slots: int = _f(64, "equal slots the shard hash space is cut into", min=1, max=4096)
    lease_duration: float = _f(15.0, "seconds without a renew after which a shard is gone", min=1.0)
    renew_deadline: float = _f(
        10.0, "seconds a replica keeps trying to renew its shard Lease", min=0.5
    )
    retry_period: float = _f(2.0, "seconds between shard Lease renewals", min=0.1)
    drain_timeout: float = _f(
        30.0, "seconds a ring change waits for reconciles of keys that move away", min=0.0
    )

    def validate(self) -> list[str]:
        problems = []
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", self.ring_name):
            problems.append("ringName: must be a DNS label value (a-z, 0-9, '-', '.')")
        if not self.lease_duration > self.renew_deadline:
            problems.append("renewDeadline: must be less than leaseDuration")
        if not self.renew_deadline > 1.2 * self.retry_period:
            problems.append("retryPeriod: renewDeadline must be greater than 1.2 x retryPeriod")
        return problems


_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


@dataclass(frozen=True, kw_only=True, slots=True)
class KubeconfigClusterConfig:
    """One cluster of the fleet from a kubeconfig file."""

    name: str = _f("", "the cluster's name in the fleet (a DNS label)")
    path: str = _f("", "its kubeconfig file (a mounted Secret: re-read, credentials rotate)")
    context: str = _f("", 'the context to use ("" = its current-context)')

    def validate(self) -> list[str]:
        problems = []
        if not _DNS_LABEL.fullmatch(self.name):
            problems.append(f"name: must be a DNS label, got {self.name!r}")
        if not self.path:
            problems.append("path: must be set")
        return problems


@dataclass(frozen=True, kw_only=True, slots=True)
class ClusterSecretsConfig:
    """Clusters of the fleet from kubeconfig Secrets in the home cluster, watched: the
    shape Cluster API writes (Secret <cluster>-kubeconfig, key value)."""

    enabled: bool = _f(False, "engage a cluster per kubeconfig Secret (watched)")
    namespace: str = _f("", "the Secrets' namespace (\"\" = the manager's)")
    label_selector: str = _f(
        "cluster.x-k8s.io/cluster-name",
        "which Secrets of the namespace (Cluster API labels its own so)",
        format="labelSelector",
    )
    key: str = _f("value", "the data key holding the kubeconfig")

    def validate(self) -> list[str]:
        if self.namespace and not _DNS_LABEL.fullmatch(self.namespace):
            return [f"namespace: must be a namespace name, got {self.namespace!r}"]
        return []


@dataclass(frozen=True, kw_only=True, slots=True)
class ClustersConfig:
    """The fleet: the clusters fleet-wide controllers (fleet: true) work in."""

    home: bool = _f(False, "the manager's own cluster is a member too (named homeName)")
    home_name: str = _f("home", "the home cluster's name in the fleet")
    kubeconfigs: list[KubeconfigClusterConfig] = field(
        default_factory=list,
        metadata={"help": "a static list: name, path (a kubeconfig file), context"},
    )
    secrets: ClusterSecretsConfig = field(
        default_factory=ClusterSecretsConfig,
        # where Secrets are, not what they hold: /flagz shows it
        metadata={"help": "kubeconfig Secrets in the home cluster", "secret": False},
    )
    probe_period: float = _f(10.0, "seconds between probes of a member", min=0.01)
    probe_timeout: float = _f(5.0, "seconds a probe waits for its answer", min=0.01)
    unreachable_after: float = _f(
        60.0,
        "seconds a member answers no probe before its keys stop and its caches are dropped "
        "(it is probed with backoff and engaged again when it answers)",
        min=0.01,
    )
    reload_period: float = _f(30.0, "seconds between reads of the kubeconfig files", min=0.1)

    @property
    def configured(self) -> bool:
        """Whether any cluster provider is configured."""
        return self.home or bool(self.kubeconfigs) or self.secrets.enabled

    def validate(self) -> list[str]:
        problems = []
        if not _DNS_LABEL.fullmatch(self.home_name):
            problems.append(f"homeName: must be a DNS label, got {self.home_name!r}")
        names = [k.name for k in self.kubeconfigs] + ([self.home_name] if self.home else [])
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            problems.append(f"kubeconfigs: the cluster names {', '.join(twice)} are used twice")
        return problems


@dataclass(frozen=True, kw_only=True, slots=True)
class MetricsConfig:
    """How /metrics (and the z-pages /statusz, /flagz beside it) are served."""

    secure: bool = _f(
        True,
        "HTTPS, only to callers a TokenReview authenticates and a SubjectAccessReview "
        "allows (GET on the path); false: plain HTTP to anyone who reaches the port",
    )
    cert_dir: str = _f(
        "",
        "directory with the certificate and key (a mounted Secret; reloaded when they "
        'change); "" = a self-signed certificate made at start',
    )
    cert_name: str = _f("tls.crt", "the certificate's file name in certDir")
    key_name: str = _f("tls.key", "the key's file name in certDir")
    auth_cache_seconds: float = _f(
        10.0, "seconds a TokenReview or SubjectAccessReview answer is reused", min=0.0, max=600.0
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class ManagedCertificatesConfig:
    """Certificates the leader keeps in a Secret (webhooks.certificates: managed)."""

    secret_name: str = _f(
        "overseer-webhook-tls",
        "the Secret (kubernetes.io/tls, plus ca.crt and ca.key) in webhooks.namespace: "
        "made by the leader, read by every replica",
    )
    ca_validity_days: float = _f(3650.0, "days a CA is valid", min=0.001)
    cert_validity_days: float = _f(365.0, "days a serving certificate is valid", min=0.001)
    renew_before_percentage: int = _f(
        33,
        "a certificate (or the CA) is renewed when less than this share of its life is left",
        min=1,
        max=99,
    )
    overlap: float = _f(
        600.0,
        "seconds a new CA is in every caBundle before certificates it signed are served, "
        "and an old CA stays after they are",
        min=0.0,
        max=86400.0,
    )
    check_interval: float = _f(
        300.0,
        "seconds between the leader's checks that every caBundle is in place",
        min=1.0,
        max=86400.0,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class WebhooksConfig:
    """The HTTPS server of admission webhooks and CRD conversions: every replica runs it
    when an enabled controller declares one."""

    host: str = _f("", 'address to listen on ("" = every interface)')
    port: int = _f(9443, "port to listen on (0 = a free one)", min=0, max=65535)
    certificates: Literal["", "managed"] = _f(
        "",
        'where the serving certificate comes from: "" = certDir\'s files, or a self-signed '
        "one made at start without certDir; managed = a CA and a certificate the leader "
        "makes, rotates and puts in the caBundle of the webhook configurations and CRDs "
        "(see managed)",
    )
    cert_dir: str = _f(
        "",
        "directory with the certificate and key (a mounted Secret, e.g. cert-manager's; "
        'reloaded when they change); "" = a self-signed certificate made at start (API '
        "servers must be given it as caBundle)",
    )
    cert_name: str = _f("tls.crt", "the certificate's file name in certDir")
    key_name: str = _f("tls.key", "the key's file name in certDir")
    max_concurrent: int = _f(
        32,
        "reviews answered at once; one more waits for a free slot until its deadline, then "
        "is answered 429 (the webhook's failurePolicy applies)",
        min=1,
        max=4096,
    )
    shutdown_delay: float = _f(
        5.0,
        "seconds the server keeps answering after a stop (each answer closing its "
        "connection), while the API server learns that the pod is going",
        min=0.0,
        max=300.0,
    )
    service: str = _f(
        "overseer-webhook", "the Service in front of the replicas (port 443 to this port)"
    )
    namespace: str = _f(
        "", "the Service's namespace, and the managed Secret's (\"\" = $POD_NAMESPACE)"
    )
    configuration_name: str = _f(
        "overseer",
        "name of the ValidatingWebhookConfiguration and MutatingWebhookConfiguration "
        "(`overseer webhooks` prints them; with managed certificates the leader fills "
        "their caBundle)",
    )
    managed: ManagedCertificatesConfig = field(
        default_factory=ManagedCertificatesConfig,
        metadata={"help": "managed certificates (certificates: managed)"},
    )

    def validate(self) -> list[str]:
        problems = []
        if self.certificates == "managed" and self.cert_dir:
            problems.append(
                "certDir: not with certificates: managed (the leader keeps the certificate "
                "in managed.secretName)"
            )
        for key, value in (
            ("service", self.service),
            ("configurationName", self.configuration_name),
            ("managed.secretName", self.managed.secret_name),
        ):
            if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", value) or len(value) > 253:
                problems.append(f"{key}: must be a DNS subdomain name, got {value!r}")
        if self.namespace and not re.fullmatch(
            r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", (self.namespace)
        ):
            problems.append(f"namespace: must be a namespace name, got {self.namespace!r}")
        return problems


@dataclass(frozen=True, kw_only=True, slots=True)
class LogConfig:
    """Logging."""

    format: Literal["text", "json"] = _f("text", "text or json (one object per line)")
    level: Literal["debug", "info", "warning", "error"] = _f("info", "lowest level logged")


@dataclass(frozen=True, kw_only=True, slots=True)
class TracingConfig:
    """OpenTelemetry tracing (OTEL_* variables apply too)."""

    exporter: Literal["", "none", "console", "otlp"] = _f(
        "", 'none, console or otlp ("" = $OTEL_TRACES_EXPORTER, else none)'
    )
    service_name: str = _f("overseer", "service.name of the spans")


@dataclass(frozen=True, kw_only=True, slots=True)
class OverseerConfig:
    """The whole file. ``controllers`` maps controller names to their raw sections;
    :func:`parse` validates each against its plugin's schema."""

    client: ClientConfig = field(default_factory=ClientConfig, metadata={"help": "API client"})
    leader_election: LeaderElectionSettings = field(
        default_factory=LeaderElectionSettings, metadata={"help": "leader election"}
    )
    sharding: ShardingSettings = field(
        default_factory=ShardingSettings, metadata={"help": "sharding (sharded controllers)"}
    )
    clusters: ClustersConfig = field(
        default_factory=ClustersConfig,
        metadata={"help": "the fleet: clusters of fleet-wide controllers (fleet: true)"},
    )
    warm_standby: bool = _f(True, "standbys run informers too, for a fast takeover")
    metrics_bind_address: str = _f(":8080", 'address of /metrics ("0" disables it)')
    metrics: MetricsConfig = field(
        default_factory=MetricsConfig, metadata={"help": "how /metrics is served"}
    )
    health_probe_bind_address: str = _f(":8081", 'address of /healthz and /readyz ("0": off)')
    webhooks: WebhooksConfig = field(
        default_factory=WebhooksConfig,
        metadata={"help": "the webhook server (admission webhooks, CRD conversions)"},
    )
    graceful_shutdown_timeout: float = _f(
        30.0, "seconds in-flight reconciles get to finish on shutdown", min=0.0
    )
    cache_sync_timeout: float = _f(120.0, "seconds to wait for caches to sync", min=1.0)
    watch_namespace: str = _f("", 'watch only this namespace ("" = all namespaces)')
    log: LogConfig = field(default_factory=LogConfig, metadata={"help": "logging"})
    tracing: TracingConfig = field(default_factory=TracingConfig, metadata={"help": "tracing"})
    controllers: dict[str, Any] = field(
        default_factory=dict, metadata={"help": "one section per controller (see below)"}
    )


def camel(name: str) -> str:
    """``graceful_shutdown_timeout`` → ``gracefulShutdownTimeout``."""
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


# -- loading ----------------------------------------------------------------------------


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if tp is bool:
        return "boolean"
    if tp is int:
        return "integer"
    if tp is float:
        return "number"
    if tp is str:
        return "string"
    if origin in (list, tuple, Sequence):
        return "list"
    if origin in (dict, Mapping):
        return "mapping"
    if dataclasses.is_dataclass(tp):
        return "mapping"
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    return getattr(tp, "__name__", str(tp))


def _show(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def _show_key(key: Any) -> str:
    """A mapping key as the file has it (a date as ``2026-01-02``, not its repr)."""
    if isinstance(key, datetime.date):
        return key.isoformat()
    return _show(key)


def _yaml_type(value: Any) -> str:
    """What YAML made of an unquoted scalar that is no string."""
    if isinstance(value, bool):
        return "a boolean (true, yes, on, false, no, off)"
    if value is None:
        return "null (null, ~ or nothing)"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, datetime.date):
        return "a date"
    return type(value).__name__


def _range(meta: Mapping[str, Any]) -> str:
    parts = []
    if "min" in meta:
        parts.append(f">= {meta['min']}")
    if "max" in meta:
        parts.append(f"<= {meta['max']}")
    return " and ".join(parts)


def _convert(tp: Any, value: Any, path: str, meta: Mapping[str, Any], errors: list[str]) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _convert(inner[0], value, path, meta, errors)
    if origin is Literal:
        if value in args:
            return value
        errors.append(f"{path}: expected {_type_name(tp)}, got {_show(value)}")
        return None
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, Mapping):
            errors.append(f"{path}: expected a mapping, got {_show(value)}")
            return None
        return load_dataclass(tp, value, path, errors)  # type: ignore[arg-type]
    if origin in (list, tuple, Sequence):
        if not isinstance(value, list):
            errors.append(f"{path}: expected a list, got {_show(value)}")
            return None
        item_tp = args[0] if args else Any
        item_meta = {"format": meta["format"]} if "format" in meta else {}
        items = [
            _convert(item_tp, v, f"{path}[{i}]", item_meta, errors) for i, v in enumerate(value)
        ]
        return tuple(items) if origin is tuple else items
    if origin in (dict, Mapping):
        if not isinstance(value, Mapping):
            errors.append(f"{path}: expected a mapping, got {_show(value)}")
            return None
        key_tp, value_tp = args if len(args) == 2 else (Any, Any)
        value_meta = {"format": meta["format"]} if "format" in meta else {}
        out = {}
        for k, v in value.items():
            # the user's keys, as written: no camelCase, and no str() of what YAML read
            # as another type (``yes:`` → True → "True", and ``1:`` and ``true:`` one key)
            if key_tp is str and not isinstance(k, str):
                errors.append(
                    f"{path}: key {_show_key(k)} is not a string: YAML reads it, unquoted, "
                    f"as {_yaml_type(k)}; quote it"
                )
                continue
            key = k if key_tp in (str, Any) else _convert(key_tp, k, f"{path}.{k}", {}, errors)
            out[key] = _convert(value_tp, v, f"{path}.{k}", value_meta, errors)
        return out
    raw = value
    bounds = _range(meta)
    want = _type_name(tp) + (f" {bounds}" if bounds else "")
    if tp is bool:
        if not isinstance(value, bool):
            errors.append(f"{path}: expected boolean, got {_show(value)}")
            return None
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            errors.append(f"{path}: expected {want}, got {_show(value)}")
            return None
    elif tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            errors.append(f"{path}: expected {want}, got {_show(value)}")
            return None
        value = float(value)
    elif tp is str:
        if not isinstance(value, str):
            errors.append(f"{path}: expected string, got {_show(value)}")
            return None
        if meta.get("format") == "labelSelector":
            try:
                LabelSelector.parse(value)
            except SelectorError as exc:
                errors.append(f'{path}: invalid label selector "{value}": {exc}')
                return None
        return value
    if ("min" in meta and value < meta["min"]) or ("max" in meta and value > meta["max"]):
        errors.append(f"{path}: expected {want}, got {_show(raw)}")
        return None
    return value


def _did_you_mean(word: str, known: Iterable[str]) -> str:
    """``, did you mean X?`` for the closest known word (snake_case for camelCase
    first), else ""."""
    names = list(known)
    if camel(word) in names and camel(word) != word:
        return f", did you mean {camel(word)}?"
    lowered = {n.lower(): n for n in names}
    if word.lower() in lowered:
        return f", did you mean {lowered[word.lower()]}?"
    close = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
    return f", did you mean {close[0]}?" if close else ""


_FIELD_PATH = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?:[.\[][^:]*)?$")


def _join_problem(path: str, problem: str, keys: Iterable[str]) -> str:
    """A ``validate()`` problem with the section's path: ``path.field: message`` when it
    starts with one of the section's ``keys`` (``"field: message"``), else
    ``path: problem``."""
    head, sep, _ = problem.partition(": ")
    match = _FIELD_PATH.match(head) if sep else None
    if match is not None and match.group(1) in set(keys):
        return f"{path}.{problem}" if path else problem
    return f"{path}: {problem}" if path else problem


def load_dataclass(cls: type[T], data: Mapping[str, Any], path: str, errors: list[str]) -> T | None:
    """Build ``cls`` from a YAML mapping; every problem is appended to ``errors``."""
    hints = typing.get_type_hints(cls)
    fields = {camel(f.name): f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    before = len(errors)
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        where = f"{path}.{key}" if path else str(key)
        f = fields.get(str(key))
        if f is None:
            hint = f" (known keys: {', '.join(sorted(fields))})" if fields else ""
            errors.append(f"{where}: unknown key{_did_you_mean(str(key), fields)}{hint}")
            continue
        kwargs[f.name] = _convert(hints[f.name], value, where, f.metadata, errors)
    if len(errors) > before:
        return None
    try:
        obj = cls(**kwargs)
    except (TypeError, ValueError) as exc:
        errors.append(f"{path or '<root>'}: {exc}")
        return None
    validate = getattr(obj, "validate", None)
    if callable(validate):
        try:
            problems = validate() or []
            if isinstance(problems, str):
                problems = [problems]
            texts = [str(problem) for problem in problems]
        except Exception as exc:
            texts = [f"validate() raised {type(exc).__name__}: {exc}"]
        errors.extend(_join_problem(path, text, fields) for text in texts)
    return obj


def parse(
    data: Any,
    plugin_schemas: Mapping[str, type[Any]],
    *,
    source: str = "<config>",
    installed: Iterable[str] | None = None,
) -> tuple[OverseerConfig, dict[str, tuple[ControllerSettings, Any]]]:
    """Validate a decoded YAML document.

    Args:
        data: the document (None for an empty file).
        plugin_schemas: controller name → its ``config_class`` (loaded plugins).
        installed: every installed controller name, for the "unknown controller"
            message (default: the names in ``plugin_schemas``).

    Returns:
        The manager settings and, per installed controller, its common settings and its
        own config (defaults for controllers the file does not mention).

    Raises:
        ConfigError: every problem, each with its path.
    """
    if data is None:
        data = {}
    errors: list[str] = []
    if not isinstance(data, Mapping):
        raise ConfigError([f"{source}: expected a mapping at the top level, got {_show(data)}"])
    config = load_dataclass(OverseerConfig, data, "", errors)
    sections = data.get("controllers") or {}
    controllers: dict[str, tuple[ControllerSettings, Any]] = {}
    if not isinstance(sections, Mapping):
        sections = {}
    known = sorted(plugin_schemas if installed is None else installed)
    names = ", ".join(known) or "none"
    for name in sections:
        if name not in plugin_schemas:
            errors.append(
                f"controllers.{name}: unknown controller{_did_you_mean(str(name), known)} "
                f"(installed: {names})"
            )
    common_keys = {camel(f.name) for f in dataclasses.fields(ControllerSettings)}
    for name, schema in sorted(plugin_schemas.items()):
        section = sections.get(name) or {}
        path = f"controllers.{name}"
        if not isinstance(section, Mapping):
            errors.append(f"{path}: expected a mapping, got {_show(section)}")
            continue
        common = {k: v for k, v in section.items() if k in common_keys}
        own = {k: v for k, v in section.items() if k not in common_keys}
        settings = load_dataclass(ControllerSettings, common, path, errors)
        plugin_config = load_dataclass(schema, own, path, errors)
        if settings is not None and plugin_config is not None:
            controllers[name] = (settings, plugin_config)
    fleet_wide = {n: s.sharded for n, (s, _) in controllers.items() if s.enabled and s.fleet}
    if len(set(fleet_wide.values())) > 1:
        sharded = ", ".join(sorted(n for n, v in fleet_wide.items() if v))
        whole = ", ".join(sorted(n for n, v in fleet_wide.items() if not v))
        errors.append(
            f"controllers: fleet-wide controllers are all sharded by cluster or none (a replica "
            f"engages its share of the clusters or all of them): sharded {sharded}; not {whole}"
        )
    if errors or config is None:
        raise ConfigError(errors)
    return config, controllers


def load_config(
    data: Any, plugins: PluginSet, *, source: str = "<config>"
) -> tuple[OverseerConfig, dict[str, tuple[ControllerSettings, Any]], list[str]]:
    """:func:`parse` with the plugin policy: returns settings, controllers and warnings.

    A plugin that cannot load cannot have its section validated. An installed plugin
    runs unless the document disables it (``enabled: false``), so one that cannot load is
    an error unless disabled (then a warning, returned for the caller to report): an
    image missing a plugin's dependency does not start without that controller.

    Raises:
        PluginLoadError: an enabled controller cannot load.
        ConfigError: every problem of the document, each with its path.
    """
    sections_in = data.get("controllers") if isinstance(data, Mapping) else None
    sections = dict(sections_in) if isinstance(sections_in, Mapping) else {}
    problems = []
    warnings = []
    for name, error in sorted(plugins.broken.items()):
        section = sections.pop(name, None)
        disabled = isinstance(section, Mapping) and section.get("enabled") is False
        way_out = f"(disable it with controllers.{name}.enabled: false)"
        if disabled:
            warnings.append(f"controller {name!r} is disabled and cannot load: {error}")
        elif section is None:
            problems.append(
                f"controllers.{name}: installed, so enabled, but cannot load: {error} {way_out}"
            )
        else:
            problems.append(f"controllers.{name}: enabled but cannot load: {error} {way_out}")
    if problems:
        raise PluginLoadError("; ".join(problems))
    if isinstance(data, Mapping) and sections_in:
        data = {**data, "controllers": sections}
    config, controllers = parse(data, plugins.schemas, source=source, installed=plugins.infos)
    return config, controllers, warnings


def manager_options(
    config: OverseerConfig,
    controllers: Mapping[str, tuple[ControllerSettings, Any]] | None = None,
    **overrides: Any,
) -> ManagerOptions:
    """The :class:`~manager.manager.ManagerOptions` a configuration describes (what
    ``overseer run`` gives its manager); ``overrides`` replace single options. With
    ``controllers`` (as :func:`parse` returns them), the sharding ring is set up when an
    enabled one is ``sharded``."""
    from manager.fleet.fleet import FleetOptions
    from manager.fleet.providers import KubeconfigFile
    from manager.manager import ManagerOptions
    from manager.sharding import ShardingOptions
    from manager.webhook.server import ManagedCertificatesOptions, WebhookServerOptions

    le = config.leader_election
    wh = config.webhooks
    managed = None
    if wh.certificates == "managed":
        mc = wh.managed
        managed = ManagedCertificatesOptions(
            secret_name=mc.secret_name,
            ca_validity=mc.ca_validity_days * 86400.0,
            cert_validity=mc.cert_validity_days * 86400.0,
            renew_before=mc.renew_before_percentage / 100.0,
            overlap=mc.overlap,
            check_interval=mc.check_interval,
        )
    sharded = any(s.enabled and s.sharded for s, _ in (controllers or {}).values())
    sh = config.sharding
    options: dict[str, Any] = {
        "metrics_bind_address": config.metrics_bind_address,
        "metrics_secure": config.metrics.secure,
        "metrics_cert_dir": config.metrics.cert_dir,
        "metrics_cert_name": config.metrics.cert_name,
        "metrics_key_name": config.metrics.key_name,
        "metrics_auth_cache_ttl": config.metrics.auth_cache_seconds,
        "health_probe_bind_address": config.health_probe_bind_address,
        "leader_election": le.enabled,
        "leader_election_id": le.lease_name,
        "leader_election_namespace": le.namespace,
        "lease_duration": le.lease_duration,
        "renew_deadline": le.renew_deadline,
        "retry_period": le.retry_period,
        "warm_standby": config.warm_standby,
        "graceful_shutdown_timeout": config.graceful_shutdown_timeout,
        "cache_sync_timeout": config.cache_sync_timeout,
        "namespace": config.watch_namespace or None,
        "sharding": ShardingOptions(
            ring_name=sh.ring_name,
            namespace=sh.namespace,
            shard_by=sh.shard_by,
            slots=sh.slots,
            lease_duration=sh.lease_duration,
            renew_deadline=sh.renew_deadline,
            retry_period=sh.retry_period,
            drain_timeout=sh.drain_timeout,
        )
        if sharded
        else None,
        "fleet": _fleet_options(config.clusters, FleetOptions, KubeconfigFile),
        "webhook": WebhookServerOptions(
            host=wh.host,
            port=wh.port,
            cert_dir=wh.cert_dir,
            cert_name=wh.cert_name,
            key_name=wh.key_name,
            max_concurrent=wh.max_concurrent,
            shutdown_delay=wh.shutdown_delay,
            service=wh.service,
            namespace=wh.namespace,
            configuration_name=wh.configuration_name,
            managed=managed,
        ),
    }
    options.update(overrides)
    return ManagerOptions(**options)


def _fleet_options(clusters: ClustersConfig, options: Any, file: Any) -> Any:
    """The fleet's options, or None when no cluster provider is configured."""
    if not clusters.configured:
        return None
    return options(
        home=clusters.home_name if clusters.home else "",
        kubeconfigs=tuple(
            file(name=k.name, path=k.path, context=k.context) for k in clusters.kubeconfigs
        ),
        secrets_namespace=clusters.secrets.namespace if clusters.secrets.enabled else None,
        secrets_selector=clusters.secrets.label_selector,
        secrets_key=clusters.secrets.key,
        probe_period=clusters.probe_period,
        probe_timeout=clusters.probe_timeout,
        unreachable_after=clusters.unreachable_after,
        reload_period=clusters.reload_period,
    )


def read_yaml(path: str | Path) -> Any:
    """Read and decode a YAML file.

    Raises:
        ConfigError: the file cannot be read or is not YAML (with line and column).
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"{p}: cannot read: {exc.strerror or exc}"]) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{p}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(p)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError([f"{where}: not valid YAML: {problem}"]) from None


def load_file(
    path: str | Path, plugin_schemas: Mapping[str, type[Any]]
) -> tuple[OverseerConfig, dict[str, tuple[ControllerSettings, Any]]]:
    """Read and validate a configuration file.

    Raises:
        ConfigError: the file cannot be read, is not YAML, or does not validate.
    """
    return parse(read_yaml(path), plugin_schemas, source=str(path))


# -- rendering --------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A setting's value as YAML data: dataclasses become camelCase mappings, tuples lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {camel(f.name): _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _yaml_scalar(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=1000).strip()
    return text.removesuffix("\n...").strip()


def _yaml_value(key: str, value: Any, pad: str) -> list[str]:
    """``key: value``; a non-empty list or mapping as an indented block below the key."""
    data = _plain(value)
    if not data or not isinstance(data, list | dict):
        return [f"{pad}{key}: {_yaml_scalar(data)}"]
    block = yaml.safe_dump(data, default_flow_style=False, sort_keys=False, width=1000)
    return [f"{pad}{key}:"] + [f"{pad}  {line}" for line in block.splitlines()]


def _doc_line(tp: Any) -> str:
    """The first docstring line of a nested settings class (its fallback help)."""
    if not (isinstance(tp, type) and dataclasses.is_dataclass(tp)):
        return ""
    doc = (tp.__doc__ or "").strip()
    return "" if doc.startswith(tp.__name__ + "(") else doc.split("\n", 1)[0].rstrip(".")


def _render(obj: Any, indent: int, lines: list[str]) -> None:
    pad = "  " * indent
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        if f.name == "controllers" and indent == 0:
            continue  # rendered last, one section per installed controller
        help_text = f.metadata.get("help", "") or _doc_line(hints[f.name])
        bounds = _range(f.metadata)
        choices = ""
        if typing.get_origin(hints[f.name]) is Literal:
            choices = "one of: " + ", ".join(_show(a) for a in typing.get_args(hints[f.name]))
        note = "; ".join(x for x in (help_text, choices, bounds) if x)
        if note:
            lines.append(f"{pad}# {note}")
        value = getattr(obj, f.name)
        key = camel(f.name)
        if dataclasses.is_dataclass(value):
            lines.append(f"{pad}{key}:")
            _render(value, indent + 1, lines)
        else:
            lines.extend(_yaml_value(key, value, pad))


def render_defaults(plugin_schemas: Mapping[str, type[Any]]) -> str:
    """The complete default configuration file, every setting commented."""
    lines = [
        "# Overseer configuration: every setting with its default.",
        "# Generated by `overseer config defaults`; keys are camelCase.",
        "",
    ]
    _render(OverseerConfig(), 0, lines)
    lines.append("")
    lines.append("# One section per installed controller (name = entry point name).")
    lines.append("controllers:")
    for name, schema in sorted(plugin_schemas.items()):
        lines.append(f"  {name}:")
        _render(ControllerSettings(), 2, lines)
        _render(schema(), 2, lines)
    return "\n".join(lines) + "\n"

"""The exposer's configuration section (``controllers.exposer`` in the YAML file).

Every field has a default, so an empty section is valid; ``validate`` adds the checks a
field type cannot express (DNS names, the Secret name template, namespace lists). Keys
are camelCase in YAML (``ingressClassName``, ``exposeAll``).

Thread-safe: frozen values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from controllers.exposer.names import dns1123_label_errors, dns1123_subdomain_errors

__all__ = ["ExposerConfig", "NamespaceScope", "PathType", "ServiceType", "TLSConfig"]

ServiceType = Literal["ClusterIP", "NodePort", "LoadBalancer"]
PathType = Literal["Prefix", "Exact", "ImplementationSpecific"]


@dataclass(frozen=True, kw_only=True, slots=True)
class TLSConfig:
    """TLS on the Ingress: one Secret per Deployment, named from a template."""

    enabled: bool = field(
        default=False, metadata={"help": "add a tls section to every Ingress; URLs use https"}
    )
    secret_name: str = field(
        default="{name}-tls",
        metadata={"help": "Secret holding the certificate; {name} and {namespace} are replaced"},
    )
    ingress_annotations: dict[str, str] = field(
        default_factory=dict,
        metadata={
            "help": "extra Ingress annotations when TLS is on "
            "(e.g. cert-manager.io/cluster-issuer: letsencrypt)"
        },
    )

    def secret_for(self, name: str, namespace: str) -> str:
        """The Secret name for a Deployment ``name`` in ``namespace``."""
        return self.secret_name.format(name=name, namespace=namespace)

    def validate(self) -> list[str]:
        problems: list[str] = []
        try:
            sample = self.secret_for("my-app", "my-namespace")
        except (KeyError, IndexError, ValueError) as exc:
            problems.append(
                f"secretName: only {{name}} and {{namespace}} may be used, got "
                f"{self.secret_name!r} ({type(exc).__name__}: {exc})"
            )
        else:
            problems.extend(f"secretName: {m}" for m in dns1123_subdomain_errors(sample))
        for key in self.ingress_annotations:
            if not key or key.count("/") > 1:
                problems.append(f"ingressAnnotations: {key!r} is not an annotation key")
        return problems


@dataclass(frozen=True, kw_only=True, slots=True)
class NamespaceScope:
    """Which namespaces the exposer acts in: ``include`` (empty: all) minus ``exclude``."""

    include: tuple[str, ...] = field(
        default=(), metadata={"help": "namespaces to act in (empty: every namespace)"}
    )
    exclude: tuple[str, ...] = field(default=(), metadata={"help": "namespaces never acted in"})

    def selects(self, namespace: str) -> bool:
        """Whether Deployments in ``namespace`` are in scope."""
        if namespace in self.exclude:
            return False
        return not self.include or namespace in self.include

    def validate(self) -> list[str]:
        problems: list[str] = []
        for key, names in (("include", self.include), ("exclude", self.exclude)):
            for name in names:
                problems.extend(f"{key}: {name!r}: {m}" for m in dns1123_label_errors(name))
        both = sorted(set(self.include) & set(self.exclude))
        if both:
            problems.append(f"exclude: {', '.join(both)} also included")
        return problems


@dataclass(frozen=True, kw_only=True, slots=True)
class ExposerConfig:
    """The exposer's own settings (besides ``enabled``, ``workers``, ``rateLimiter``)."""

    domain: str = field(
        default="example.com",
        metadata={"help": "Ingress hosts are {name}.{namespace}.{domain}"},
    )
    ingress_class_name: str = field(
        default="", metadata={"help": 'spec.ingressClassName ("" = the cluster default class)'}
    )
    service_type: ServiceType = field(default="ClusterIP", metadata={"help": "Service type"})
    path_type: PathType = field(default="Prefix", metadata={"help": "pathType of the rule"})
    tls: TLSConfig = field(default_factory=TLSConfig, metadata={"help": "TLS on the Ingress"})
    namespaces: NamespaceScope = field(
        default_factory=NamespaceScope, metadata={"help": "where Deployments are exposed"}
    )
    expose_all: bool = field(
        default=False,
        metadata={
            "help": "expose every Deployment in scope unless annotated "
            'overseer.io/expose: "false" (default: only those annotated "true")'
        },
    )

    annotate_deployment: bool = field(
        default=False,
        metadata={
            "help": "also write the URL onto the Deployment as overseer.io/exposed-url (one "
            "more write per exposure, waking every Deployment watcher); it is always on the "
            "Ingress and in the Exposed Event. While off, one left on a Deployment is removed"
        },
    )
    exposed_event: bool = field(
        default=True,
        metadata={
            "help": "post a Normal Exposed Event (with the URL) when a Deployment's Ingress is "
            "created; Warning, Updated and Unexposed Events are posted either way"
        },
    )

    def validate(self) -> list[str]:
        problems = [f"domain: {m}" for m in dns1123_subdomain_errors(self.domain)]
        if self.ingress_class_name:
            problems.extend(
                f"ingressClassName: {m}" for m in dns1123_subdomain_errors(self.ingress_class_name)
            )
        return problems

"""The desired state: what Service and Ingress a Deployment should have.

Pure functions from a Deployment (the cached dict) and the :class:`ExposerConfig` to the
objects the exposer wants to exist, with every input from annotations validated first.
A Deployment that cannot be exposed raises :class:`NotExposable` carrying the Warning
Event reason and a message for the user; nothing here talks to the API server.

Annotations read (all on the Deployment):

* ``overseer.io/expose``: ``"true"`` opts in, ``"false"`` opts out (matters with
  ``exposeAll``); anything else is an error.
* ``overseer.io/expose-host``: the Ingress host (default ``{name}.{namespace}.{domain}``);
  a DNS name.
* ``overseer.io/expose-path``: the Ingress path (default ``/``); absolute, URL characters.
* ``overseer.io/expose-port``: the container port behind the Ingress, by name or number
  (default: the first TCP container port).

Thread-safe: pure functions over values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from controllers.exposer.config import ExposerConfig
from controllers.exposer.names import (
    dns1035_label_errors,
    host_errors,
    http_path_errors,
    port_name_errors,
)
from manager import JsonDict

__all__ = [
    "ANNOTATION_EXPOSE",
    "ANNOTATION_HOST",
    "ANNOTATION_MANAGED_ANNOTATIONS",
    "ANNOTATION_PATH",
    "ANNOTATION_PORT",
    "ANNOTATION_URL",
    "LABEL_MANAGED_BY",
    "MANAGED_BY",
    "REASON_INVALID_ANNOTATION",
    "REASON_NO_CONTAINER_PORTS",
    "REASON_UNSUPPORTED_NAME",
    "REASON_UNSUPPORTED_SELECTOR",
    "ContainerPort",
    "Exposure",
    "NotExposable",
    "choose_port",
    "container_ports",
    "desired_exposure",
    "ingress_for",
    "opted_in",
    "owner_reference",
    "selector_of",
    "service_for",
    "service_ports",
]

ANNOTATION_EXPOSE: Final = "overseer.io/expose"
ANNOTATION_HOST: Final = "overseer.io/expose-host"
ANNOTATION_PATH: Final = "overseer.io/expose-path"
ANNOTATION_PORT: Final = "overseer.io/expose-port"
ANNOTATION_URL: Final = "overseer.io/exposed-url"
"""On the Ingress (always) and on the Deployment (only with ``annotateDeployment``): the URL
the Deployment is exposed at."""
ANNOTATION_MANAGED_ANNOTATIONS: Final = "overseer.io/managed-annotations"
"""On the Ingress: the comma-separated keys of the annotations the exposer set (so that a
key removed from the configuration is removed from the Ingress too)."""
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
MANAGED_BY: Final = "overseer"

REASON_INVALID_ANNOTATION: Final = "InvalidExposeAnnotation"
REASON_NO_CONTAINER_PORTS: Final = "NoContainerPorts"
REASON_UNSUPPORTED_SELECTOR: Final = "UnsupportedSelector"
REASON_UNSUPPORTED_NAME: Final = "UnsupportedName"

_PROTOCOLS: Final = ("TCP", "UDP", "SCTP")


class NotExposable(Exception):
    """The Deployment cannot be exposed as it stands: ``reason`` is the Warning Event
    reason, ``message`` says what to fix."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True, slots=True)
class ContainerPort:
    """One container port of the pod template, as the Service will carry it."""

    name: str  # "" when the container port is unnamed
    port: int
    protocol: str  # TCP, UDP or SCTP

    def __str__(self) -> str:
        return f"{self.name + '/' if self.name else ''}{self.port}/{self.protocol}"


@dataclass(frozen=True, slots=True)
class Exposure:
    """Everything the exposer wants for one Deployment."""

    service: JsonDict
    ingress: JsonDict
    url: str  # on the Ingress as overseer.io/exposed-url (and the Deployment, if configured)
    backend: ContainerPort  # the port the Ingress routes to


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    annotations = _meta(obj).get("annotations")
    return annotations if isinstance(annotations, Mapping) else {}


def opted_in(deployment: JsonDict, config: ExposerConfig) -> bool:
    """Whether the Deployment asks to be exposed (namespace scope is checked elsewhere).

    Raises:
        NotExposable: ``overseer.io/expose`` is neither "true" nor "false".
    """
    value = _annotations(deployment).get(ANNOTATION_EXPOSE)
    if value is None:
        return config.expose_all
    text = str(value).strip().lower()
    if text == "true":
        return True
    if text == "false":
        return False
    raise NotExposable(
        REASON_INVALID_ANNOTATION,
        f'{ANNOTATION_EXPOSE}: expected "true" or "false", got {str(value)[:64]!r}',
    )


def owner_reference(deployment: JsonDict) -> JsonDict:
    """The controller ownerReference that makes an object belong to ``deployment``."""
    meta = _meta(deployment)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def selector_of(deployment: JsonDict) -> dict[str, str]:
    """The Service selector: the Deployment's ``spec.selector.matchLabels``.

    Raises:
        NotExposable: the selector has ``matchExpressions`` (a Service selector cannot
            express them, and ``matchLabels`` alone would select a superset of the pods),
            or selects nothing.
    """
    spec = deployment.get("spec") or {}
    selector = spec.get("selector") or {}
    expressions = selector.get("matchExpressions") or []
    labels = selector.get("matchLabels") or {}
    if expressions:
        raise NotExposable(
            REASON_UNSUPPORTED_SELECTOR,
            "spec.selector uses matchExpressions, which a Service selector cannot express; "
            "use matchLabels only to expose this Deployment",
        )
    if not labels:
        raise NotExposable(REASON_UNSUPPORTED_SELECTOR, "spec.selector has no matchLabels")
    return {str(k): str(v) for k, v in labels.items()}


def container_ports(deployment: JsonDict) -> list[ContainerPort]:
    """Every container port of the pod template's containers, in order.

    A (port, protocol) pair seen twice is kept once (the first); a port without a valid
    number is skipped (the API server would not have stored it).
    """
    template = (deployment.get("spec") or {}).get("template") or {}
    containers = (template.get("spec") or {}).get("containers") or []
    out: list[ContainerPort] = []
    seen: set[tuple[int, str]] = set()
    for container in containers:
        for raw in (container or {}).get("ports") or []:
            number = raw.get("containerPort")
            if isinstance(number, bool) or not isinstance(number, int):
                continue
            if not 1 <= number <= 65535:
                continue
            protocol = str(raw.get("protocol") or "TCP")
            if protocol not in _PROTOCOLS or (number, protocol) in seen:
                continue
            seen.add((number, protocol))
            name = raw.get("name")
            name = name if isinstance(name, str) and not port_name_errors(name) else ""
            out.append(ContainerPort(name, number, protocol))
    return out


def service_ports(ports: list[ContainerPort]) -> list[JsonDict]:
    """The Service ports: one per container port, ``port`` = ``targetPort`` = the
    container port, protocol kept, name kept. With more than one port every Service
    port needs a name, so an unnamed one gets ``<protocol>-<port>`` (``tcp-8080``)."""
    taken = {p.name for p in ports if p.name}
    out: list[JsonDict] = []
    for p in ports:
        entry: JsonDict = {"port": p.port, "targetPort": p.port, "protocol": p.protocol}
        name = p.name
        if not name and len(ports) > 1:
            name = f"{p.protocol.lower()}-{p.port}"
            suffix = 1
            while name in taken:
                suffix += 1
                name = f"{p.protocol.lower()}-{p.port}-{suffix}"[:15].rstrip("-")
            taken.add(name)
        if name:
            entry = {"name": name, **entry}
        out.append(entry)
    return out


def choose_port(ports: list[ContainerPort], wanted: str | None) -> ContainerPort:
    """The container port the Ingress routes to: ``wanted`` (a name or a number, from
    ``overseer.io/expose-port``) or the first TCP port.

    Raises:
        NotExposable: no TCP port, or ``wanted`` names no TCP container port.
    """
    tcp = [p for p in ports if p.protocol == "TCP"]
    if wanted is None:
        if not tcp:
            raise NotExposable(
                REASON_NO_CONTAINER_PORTS,
                "no TCP container port to route the Ingress to "
                f"(ports: {', '.join(map(str, ports))})",
            )
        return tcp[0]
    text = wanted.strip()
    if text.isdigit():
        match = [p for p in tcp if p.port == int(text)]
    else:
        match = [p for p in tcp if p.name and p.name == text]
    if not match:
        known = ", ".join(map(str, tcp)) or "none"
        raise NotExposable(
            REASON_INVALID_ANNOTATION,
            f"{ANNOTATION_PORT}: {wanted[:64]!r} is not a TCP container port of this "
            f"Deployment (TCP ports: {known})",
        )
    return match[0]


def _object_meta(deployment: JsonDict, extra_annotations: Mapping[str, str]) -> JsonDict:
    meta = _meta(deployment)
    out: JsonDict = {
        "name": meta["name"],
        "namespace": meta["namespace"],
        "labels": {LABEL_MANAGED_BY: MANAGED_BY},
        "ownerReferences": [owner_reference(deployment)],
    }
    if extra_annotations:
        out["annotations"] = dict(extra_annotations)
    return out


def service_for(
    deployment: JsonDict, config: ExposerConfig, ports: list[ContainerPort]
) -> JsonDict:
    """The Service: named like the Deployment, selecting its pods, one port per
    container port.

    Raises:
        NotExposable: as :func:`selector_of`.
    """
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _object_meta(deployment, {}),
        "spec": {
            "type": config.service_type,
            "selector": selector_of(deployment),
            "ports": service_ports(ports),
        },
    }


def ingress_for(
    deployment: JsonDict,
    config: ExposerConfig,
    *,
    host: str,
    path: str,
    backend: ContainerPort,
    service: JsonDict,
    url: str,
) -> JsonDict:
    """The Ingress: one rule, ``host`` + ``path`` → the Service port of ``backend``
    (by name when the Service port has one), TLS and its annotations when configured,
    and the ``url`` as annotation ``overseer.io/exposed-url`` (the Ingress is written
    anyway, so the URL costs no extra write there)."""
    meta = _meta(deployment)
    port_ref: JsonDict = {"number": backend.port}
    for sp in service["spec"]["ports"]:
        if sp["port"] == backend.port and sp["protocol"] == backend.protocol and sp.get("name"):
            port_ref = {"name": sp["name"]}
    annotations: dict[str, str] = {}
    if config.tls.enabled and config.tls.ingress_annotations:
        annotations = dict(config.tls.ingress_annotations)
        annotations[ANNOTATION_MANAGED_ANNOTATIONS] = ",".join(sorted(annotations))
    annotations[ANNOTATION_URL] = url
    spec: JsonDict = {}
    if config.ingress_class_name:
        spec["ingressClassName"] = config.ingress_class_name
    spec["rules"] = [
        {
            "host": host,
            "http": {
                "paths": [
                    {
                        "path": path,
                        "pathType": config.path_type,
                        "backend": {"service": {"name": meta["name"], "port": port_ref}},
                    }
                ]
            },
        }
    ]
    if config.tls.enabled:
        spec["tls"] = [
            {"hosts": [host], "secretName": config.tls.secret_for(meta["name"], meta["namespace"])}
        ]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": _object_meta(deployment, annotations),
        "spec": spec,
    }


def _host(deployment: JsonDict, config: ExposerConfig) -> str:
    meta = _meta(deployment)
    value = _annotations(deployment).get(ANNOTATION_HOST)
    if value is None:
        host = f"{meta['name']}.{meta['namespace']}.{config.domain}"
        problems = host_errors(host)
        if problems:
            raise NotExposable(
                REASON_UNSUPPORTED_NAME,
                f"the default host {host!r} is not a valid DNS name ({'; '.join(problems)}); "
                f"set {ANNOTATION_HOST}",
            )
        return host
    host = str(value).strip()
    problems = host_errors(host)
    if problems:
        raise NotExposable(
            REASON_INVALID_ANNOTATION,
            f"{ANNOTATION_HOST}: {str(value)[:64]!r} is not a DNS name: {'; '.join(problems)}",
        )
    return host


def _path(deployment: JsonDict) -> str:
    value = _annotations(deployment).get(ANNOTATION_PATH)
    if value is None:
        return "/"
    path = str(value)
    problems = http_path_errors(path)
    if problems:
        raise NotExposable(
            REASON_INVALID_ANNOTATION,
            f"{ANNOTATION_PATH}: {path[:64]!r} is not a valid path: {'; '.join(problems)}",
        )
    return path


def desired_exposure(deployment: JsonDict, config: ExposerConfig) -> Exposure:
    """The Service, the Ingress and the URL for an opted-in Deployment.

    Checks, in order: the name can be a Service name; the selector; the annotations
    (host, path, port); that there are container ports.

    Raises:
        NotExposable: with the first problem found.
    """
    name = str(_meta(deployment).get("name") or "")
    problems = dns1035_label_errors(name)
    if problems:
        raise NotExposable(
            REASON_UNSUPPORTED_NAME,
            f"the Deployment name {name!r} cannot be a Service name: {'; '.join(problems)}",
        )
    selector_of(deployment)
    host = _host(deployment, config)
    path = _path(deployment)
    ports = container_ports(deployment)
    wanted = _annotations(deployment).get(ANNOTATION_PORT)
    if not ports:
        raise NotExposable(
            REASON_NO_CONTAINER_PORTS,
            "the pod template declares no container ports: nothing to expose",
        )
    backend = choose_port(ports, None if wanted is None else str(wanted))
    service = service_for(deployment, config, ports)
    scheme = "https" if config.tls.enabled else "http"
    url = f"{scheme}://{host}{path}"
    ingress = ingress_for(
        deployment, config, host=host, path=path, backend=backend, service=service, url=url
    )
    return Exposure(service, ingress, url, backend)

"""The objects a peer exposer writes for one Deployment, as plain JSON dicts.

Pure functions of the Deployment (a dict as the API server serves it); the same shapes
Overseer's exposer writes (names, selector, ports, host, owner), without its options
(TLS, ingress class, service type).

Thread-safe: pure.
"""

from __future__ import annotations

from typing import Any

EXPOSE = "overseer.io/expose"
URL = "overseer.io/exposed-url"

JsonDict = dict[str, Any]


def opted_in(deployment: JsonDict) -> bool:
    annotations = (deployment.get("metadata") or {}).get("annotations") or {}
    return annotations.get(EXPOSE) == "true"


def owner(deployment: JsonDict) -> JsonDict:
    meta = deployment["metadata"]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def service_ports(deployment: JsonDict) -> list[JsonDict]:
    ports = []
    containers = deployment["spec"]["template"]["spec"].get("containers") or []
    for container in containers:
        for p in container.get("ports") or []:
            number = int(p["containerPort"])
            ports.append(
                {
                    "name": p.get("name") or f"port-{number}",
                    "port": number,
                    "targetPort": number,
                    "protocol": p.get("protocol") or "TCP",
                }
            )
    return ports


def service(deployment: JsonDict) -> JsonDict:
    meta = deployment["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "ownerReferences": [owner(deployment)],
        },
        "spec": {
            "selector": dict(deployment["spec"]["selector"]["matchLabels"]),
            "ports": service_ports(deployment),
        },
    }


def host(deployment: JsonDict, domain: str) -> str:
    meta = deployment["metadata"]
    return f"{meta['name']}.{meta['namespace']}.{domain}"


def url(deployment: JsonDict, domain: str) -> str:
    return f"http://{host(deployment, domain)}/"


def ingress_rules(deployment: JsonDict, domain: str) -> list[JsonDict]:
    port = service_ports(deployment)[0]["port"]
    backend = {"service": {"name": deployment["metadata"]["name"], "port": {"number": port}}}
    return [
        {
            "host": host(deployment, domain),
            "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": backend}]},
        }
    ]


def ingress(deployment: JsonDict, domain: str) -> JsonDict:
    """The Ingress, carrying the URL as ``overseer.io/exposed-url`` (as Overseer's)."""
    meta = deployment["metadata"]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "annotations": {URL: url(deployment, domain)},
            "ownerReferences": [owner(deployment)],
        },
        "spec": {"rules": ingress_rules(deployment, domain)},
    }

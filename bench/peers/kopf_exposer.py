"""The kopf peer: ``kopf run --standalone --namespace NS bench/peers/kopf_exposer.py``.

A kopf operator doing the exposer's job: on create (and resume, at start-up) of a
Deployment annotated ``overseer.io/expose: "true"``, create its Service and Ingress
(with an ownerReference to the Deployment; the URL as the Ingress's
``overseer.io/exposed-url``) through the official client; on an update of its
containers, merge-patch the Service's ports and the Ingress's rules. kopf itself patches
its bookkeeping annotations (``kopf.zalando.org/last-handled-configuration``) onto the
Deployment after each handler: that write is kopf's, it has no setting to avoid it.

Settings (``@kopf.on.startup``): ``BENCH_WORKERS`` (default 4) handler threads
(``settings.execution.max_workers``: at most 4 handlers run at once, as Overseer's 4
workers); peering off (standalone); Kubernetes Events for successful handlers not posted
(``settings.posting.level = WARNING``: fewer writes than kopf's default, so kopf's figures
are if anything flattered). Everything else is kopf's default, including its 0.1 s batch
window per object and its own annotations on every handled Deployment.

``settings.batching.worker_limit`` is left unset by default: it limits kopf's
*per-object* workers, and an idle one keeps its slot for ``idle_timeout`` (default 5 s)
after its object is handled, so with ``worker_limit = 4`` a burst is handled four objects
every 5 s (0.8 Deployments/s measured here), and still about 4x slower than unlimited with
``idle_timeout = 0.1``. ``BENCH_KOPF_WORKER_LIMIT=on`` (with
``BENCH_KOPF_IDLE_TIMEOUT``, default 0.1 s) measures that configuration.
``BENCH_DOMAIN`` sets the Ingress domain. Credentials come from ``$KUBECONFIG``.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import kopf
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from bench.peers import desired

DOMAIN = os.environ.get("BENCH_DOMAIN", "bench.example.test")
WORKERS = int(os.environ.get("BENCH_WORKERS", "4"))
# seconds an idle per-object worker lingers (still counted against worker_limit)
IDLE = float(os.environ.get("BENCH_KOPF_IDLE_TIMEOUT", "0.1"))
LIMIT = os.environ.get("BENCH_KOPF_WORKER_LIMIT", "off") == "on"
OPTED_IN = {desired.EXPOSE: "true"}
MERGE = "application/merge-patch+json"
_api: dict[str, Any] = {}


def _clients() -> tuple[client.CoreV1Api, client.NetworkingV1Api]:
    if not _api:
        api = config.new_client_from_config(config_file=os.environ.get("KUBECONFIG"))
        _api["core"] = client.CoreV1Api(api)
        _api["net"] = client.NetworkingV1Api(api)
    return _api["core"], _api["net"]


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    if LIMIT:
        settings.batching.worker_limit = WORKERS
        settings.batching.idle_timeout = IDLE
    settings.execution.max_workers = WORKERS
    settings.peering.standalone = True
    settings.posting.level = logging.WARNING
    _clients()


def _create(create: Any, namespace: str, body: dict[str, Any]) -> None:
    try:
        create(namespace, body)
    except ApiException as exc:
        if exc.status != 409:
            raise


@kopf.on.resume("apps", "v1", "deployments", annotations=OPTED_IN)
@kopf.on.create("apps", "v1", "deployments", annotations=OPTED_IN)
def expose(body: kopf.Body, namespace: str, **_: Any) -> None:
    core, net = _clients()
    deployment = dict(body)
    if not desired.service_ports(deployment):
        return
    svc = desired.service(deployment)
    ing = desired.ingress(deployment, DOMAIN)
    _create(core.create_namespaced_service, namespace, svc)
    _create(net.create_namespaced_ingress, namespace, ing)


@kopf.on.update(
    "apps", "v1", "deployments", annotations=OPTED_IN, field="spec.template.spec.containers"
)
def update(body: kopf.Body, name: str, namespace: str, **_: Any) -> None:
    core, net = _clients()
    deployment = dict(body)
    if not desired.service_ports(deployment):
        return
    ports = {"spec": {"ports": desired.service_ports(deployment)}}
    rules = {"spec": {"rules": desired.ingress_rules(deployment, DOMAIN)}}
    core.patch_namespaced_service(name, namespace, ports, _content_type=MERGE)
    net.patch_namespaced_ingress(name, namespace, rules, _content_type=MERGE)

"""``python -m bench.webhook_subject``: Overseer's webhook server in a process of its own,
for ``python -m bench webhooks``.

It serves two webhooks on Pods, as a plugin would declare them: a validating one (every
container has resource limits and no ``:latest`` image) and a mutating one (labels the
pod, defaults ``imagePullPolicy`` and adds an env var to each container: a JSON Patch of
a few operations). It prints one JSON line, ``{"port": N, "ca": PEM, "pid": N}``, once
it serves; then serves until SIGTERM, and stops. The objects alive at start are
frozen out of the garbage collector's scans, as ``overseer run`` does once its caches
have synced.
"""

from __future__ import annotations

import gc
import logging
import signal
import sys
import threading

import orjson

from manager import Admission, AdmissionRequest, JsonDict, MutatingWebhook, Rule, ValidatingWebhook
from manager.webhook import WebhookServer, WebhookServerOptions

RULES = [
    Rule(
        operations=["CREATE", "UPDATE"],
        resources=["pods"],
        api_groups=[""],
        api_versions=["v1"],
        scope="Namespaced",
    )
]


def check_pod(req: AdmissionRequest) -> Admission:
    pod = req.object or {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        if not (container.get("resources") or {}).get("limits"):
            return Admission.deny(f"container {container.get('name')}: resource limits required")
        if str(container.get("image", "")).endswith(":latest"):
            return Admission.deny(f"container {container.get('name')}: no :latest images")
    return Admission.allow()


def default_pod(req: AdmissionRequest) -> JsonDict:
    pod = req.object
    assert pod is not None
    pod["metadata"].setdefault("labels", {})["overseer.io/admitted"] = "true"
    for container in pod["spec"]["containers"]:
        container.setdefault("imagePullPolicy", "IfNotPresent")
        env = container.setdefault("env", [])
        env.append({"name": "OVERSEER_ADMITTED", "value": "true"})
    return pod


VALIDATE = ValidatingWebhook(name="check.pods.bench.overseer.io", rules=RULES, handler=check_pod)
MUTATE = MutatingWebhook(name="default.pods.bench.overseer.io", rules=RULES, handler=default_pod)


def main() -> int:
    logging.basicConfig(level=logging.ERROR)
    server = WebhookServer(
        WebhookServerOptions(host="127.0.0.1", port=0, shutdown_delay=0.0, max_concurrent=32)
    )
    server.register(VALIDATE, "bench")
    server.register(MUTATE, "bench")
    server.start()
    address = server.address
    assert address is not None
    gc.collect()
    gc.freeze()
    line = {"port": address[1], "ca": server.certificate.certificate_pem}
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    sys.stdout.write(orjson.dumps(line).decode() + "\n")
    sys.stdout.flush()
    try:
        while not stop.wait(1.0):
            pass
    finally:
        server.stop(timeout=2.0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Webhooks in a running manager: served before the replica is ready, on every replica
(a standby too), still answering while the controllers stop and after the probes are
gone, closed last; and a plugin's webhooks through the test kit."""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from manager import (
    Admission,
    AdmissionRequest,
    JsonDict,
    Manager,
    ManagerOptions,
    MutatingWebhook,
    PluginContext,
    Rule,
    ValidatingWebhook,
)
from manager.client import KubeClient
from manager.testing import eventually, run_plugin
from manager.webhook import WebhookServerOptions

RULES = [
    Rule(
        operations=["CREATE"],
        resources=["configmaps"],
        api_groups=[""],
        api_versions=["v1"],
        scope="Namespaced",
    )
]


def _no_secrets(req: AdmissionRequest) -> Admission:
    obj = req.object or {}
    if "password" in (obj.get("data") or {}):
        return Admission.deny("ConfigMaps hold no passwords: use a Secret")
    return Admission.allow()


def _labelled(req: AdmissionRequest) -> JsonDict:
    assert req.object is not None
    req.object["metadata"].setdefault("labels", {})["checked-by"] = "overseer"
    return req.object


VALIDATE = ValidatingWebhook(
    name="no-secrets.configmaps.example.com", rules=RULES, handler=_no_secrets
)
LABEL = MutatingWebhook(name="label.configmaps.example.com", rules=RULES, handler=_labelled)


def _review(obj: JsonDict) -> bytes:
    request = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
        "resource": {"group": "", "version": "v1", "resource": "configmaps"},
        "namespace": "shop",
        "name": obj["metadata"]["name"],
        "operation": "CREATE",
        "userInfo": {"username": "alice"},
        "object": obj,
    }
    return orjson.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    )


def _post(url: str, ca: str, path: str, obj: JsonDict) -> JsonDict:
    host, _, port = url.removeprefix("https://").rpartition(":")
    conn = http.client.HTTPSConnection(
        host, int(port), context=ssl.create_default_context(cadata=ca), timeout=5
    )
    try:
        conn.request("POST", path, _review(obj), {"Content-Type": "application/json"})
        response = conn.getresponse()
        assert response.status == 200, response.read()
        answer: JsonDict = orjson.loads(response.read())["response"]
        return answer
    finally:
        conn.close()


def _configmap(**data: str) -> JsonDict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": data}


@pytest.fixture
def client(kubeconfig_path: str) -> Iterator[KubeClient]:
    with KubeClient.from_kubeconfig(kubeconfig_path) as c:
        yield c


class _StopProbe:
    """A leader-only runnable (like a controller) that, while stopping, asks the webhook:
    it must still answer."""

    name = "stop-probe"

    def __init__(self, mgr: Manager) -> None:
        self.mgr = mgr
        self.answers: list[Any] = []

    def run(self, stop: threading.Event) -> None:
        stop.wait()
        url = self.mgr.webhooks.url
        assert url is not None
        try:
            ca = self.mgr.webhooks.certificate.certificate_pem
            self.answers.append(_post(url, ca, VALIDATE.served_path, _configmap())["allowed"])
        except Exception as exc:
            self.answers.append(exc)


def _readyz(base: str) -> int:
    try:
        with urllib.request.urlopen(f"{base}/readyz", timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def test_served_before_ready_and_stopped_after_everything_else(client: KubeClient) -> None:
    options = ManagerOptions(
        leader_election=False,
        metrics_bind_address="0",
        health_probe_bind_address="127.0.0.1:0",
        webhook=WebhookServerOptions(host="127.0.0.1", port=0, shutdown_delay=0.6),
    )
    mgr = Manager(client, options)
    mgr.webhook(VALIDATE, owner="test")
    ok, report = mgr._ready.run("webhook-server")
    assert not ok and report == [
        "[-]webhook-server failed: the webhook server has not been started yet"
    ]
    probe = _StopProbe(mgr)
    mgr.add(probe)
    stop = threading.Event()
    rc: list[int] = []
    runner = threading.Thread(target=lambda: rc.append(mgr.run(stop)), name="test/manager")
    runner.start()
    try:
        deadline = time.monotonic() + 10
        while (
            mgr.health_probe_address is None or mgr.webhooks.url is None
        ) and time.monotonic() < deadline:
            time.sleep(0.01)
        address = mgr.health_probe_address
        assert address is not None
        probes = f"http://{address[0]}:{address[1]}"
        while _readyz(probes) != 200 and time.monotonic() < deadline:
            time.sleep(0.01)
        # ready means serving
        url, ca = mgr.webhooks.url, mgr.webhooks.certificate.certificate_pem
        assert url is not None
        assert _post(url, ca, VALIDATE.served_path, _configmap(password="x"))["allowed"] is False
        webhook_address = mgr.webhook_address
        assert webhook_address is not None
    finally:
        stop.set()
    try:
        # the probes go first; the webhook server still answers during its drain
        deadline = time.monotonic() + 5
        while _readyz(probes) != 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _readyz(probes) == 0
        assert runner.is_alive()  # the manager has not finished: it drains its webhooks
        assert _post(url, ca, VALIDATE.served_path, _configmap())["allowed"] is True
    finally:
        runner.join(10)
    assert rc == [0]
    assert probe.answers == [True]  # the stopping controller could still ask
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(webhook_address, timeout=2).close()
    assert mgr.join(5)


class _WebhookPlugin:
    def setup(self, mgr: Manager, ctx: PluginContext[Any]) -> None:
        ctx.webhook(VALIDATE)
        ctx.webhook(LABEL)


def test_a_plugins_webhooks_in_the_test_kit(kubeconfig_path: str) -> None:
    with run_plugin(_WebhookPlugin, kubeconfig_path, name="webhooks", probes=True) as running:
        url = running.webhook_url
        assert url is not None and url.startswith("https://127.0.0.1:")
        assert running.manager.webhooks.paths == [
            "/mutate/label.configmaps.example.com",
            "/validate/no-secrets.configmaps.example.com",
        ]
        denied = _post(url, running.webhook_ca, VALIDATE.served_path, _configmap(password="x"))
        assert denied["status"]["message"] == "ConfigMaps hold no passwords: use a Secret"
        patched = _post(url, running.webhook_ca, LABEL.served_path, _configmap())
        assert patched["patchType"] == "JSONPatch"
        assert running.probes_url is not None and _readyz(running.probes_url) == 200
    assert running.webhook_url is None


def test_run_plugin_registers_its_webhooks_with_the_api_server(
    kubeconfig_path: str, client: KubeClient, namespace: str
) -> None:
    """With watch_namespace, run_plugin installs the plugin's webhook configurations
    (calling the kit's server by URL, trusting its certificate), scoped to that namespace:
    a create there is denied or mutated as kubectl's would be; they go on exit."""
    from manager import builtin
    from manager.errors import ApiError

    configmaps = builtin("ConfigMap")
    with run_plugin(_WebhookPlugin, kubeconfig_path, name="webhooks", watch_namespace=namespace):

        def denied() -> str:
            try:
                client.create(configmaps, _configmap(password="x"), namespace)
            except ApiError as exc:
                return exc.message
            client.delete(configmaps, "cm", namespace)  # not yet in force: again
            raise AssertionError("not denied yet")

        message = eventually(denied)
        assert message == (
            'admission webhook "no-secrets.configmaps.example.com" denied the request: '
            "ConfigMaps hold no passwords: use a Secret"
        )
        made = client.create(configmaps, _configmap(), namespace)
        assert made["metadata"]["labels"] == {"checked-by": "overseer"}
        names = _kit_configurations(client)
        assert len(names) == 2
    assert _kit_configurations(client) == []


def _kit_configurations(client: KubeClient) -> list[str]:
    from manager import builtin

    found = []
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        items = client.list(builtin(kind), label_selector="overseer.io/test-kit=true")["items"]
        found += [i["metadata"]["name"] for i in items]
    return found

"""Plugins declare webhooks in setup, next to their controllers: a declaration kube would
refuse, or one that clashes with another plugin's, stops the start with the controller's
name and the field; the manager serves nothing when nobody declared anything."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s_client

from manager import (
    Admission,
    AdmissionRequest,
    Conversion,
    Manager,
    ManagerOptions,
    PluginContext,
    Resource,
    Rule,
    Spoke,
    ValidatingWebhook,
)
from manager.client import KubeClient
from manager.errors import PluginSetupError
from manager.plugins import ControllerSettings, setup_plugins

WIDGETS = Resource("example.com", "v1", "widgets", "Widget", namespaced=True)


@pytest.fixture
def mgr() -> Iterator[Manager]:
    configuration = k8s_client.Configuration()
    configuration.host = "http://127.0.0.1:9"  # never contacted: nothing runs
    with KubeClient(configuration) as kube:
        yield Manager(kube, ManagerOptions(leader_election=False))


def _allow(req: AdmissionRequest) -> Admission:
    return Admission.allow()


def _hook(name: str = "validate.widgets.example.com", **fields: Any) -> ValidatingWebhook:
    return ValidatingWebhook(
        name=name,
        rules=[Rule(operations=["CREATE"], resources=[WIDGETS])],
        handler=_allow,
        **fields,
    )


class _Plugin:
    def __init__(self, *declare: Any) -> None:
        self.declare = declare

    def setup(self, mgr: Manager, ctx: PluginContext[Any]) -> None:
        for item in self.declare:
            made = item() if callable(item) else item
            if isinstance(made, Conversion):
                ctx.conversion(made)
            else:
                ctx.webhook(made)


def _setup(mgr: Manager, **plugins: _Plugin) -> None:
    controllers = {name: (ControllerSettings(), None) for name in plugins}
    setup_plugins(mgr, plugins, controllers)


def test_declared_webhooks_are_served_on_their_paths(mgr: Manager) -> None:
    assert not mgr.webhooks.has_routes
    conversion = Conversion(
        crd="widgets.example.com", hub="v2", spokes={"v1": Spoke(lambda o: o, lambda o: o)}
    )
    _setup(mgr, widgets=_Plugin(_hook(), conversion))
    assert mgr.webhooks.paths == [
        "/convert/widgets.example.com",
        "/validate/validate.widgets.example.com",
    ]
    assert mgr.webhooks.ready_reason() == "the webhook server has not been started yet"


def test_a_declaration_kube_would_refuse_fails_setup_naming_the_controller_and_field(
    mgr: Manager,
) -> None:
    with pytest.raises(PluginSetupError) as error:
        _setup(mgr, widgets=_Plugin(lambda: _hook(timeout_seconds=60)))
    assert str(error.value) == (
        "controllers.widgets: setup failed: InvalidWebhook: ValidatingWebhook "
        "'validate.widgets.example.com': timeout_seconds: Invalid value: 60: the timeout "
        "value must be between 1 and 30 seconds"
    )


def test_two_plugins_declaring_one_name_or_path(mgr: Manager) -> None:
    _setup(mgr, a=_Plugin(_hook()))
    with pytest.raises(PluginSetupError) as error:
        _setup(mgr, b=_Plugin(_hook()))
    assert "the webhook validate.widgets.example.com is declared twice (by a and by b)" in str(
        error.value
    )
    with pytest.raises(PluginSetupError) as error:
        _setup(
            mgr,
            c=_Plugin(
                _hook("other.widgets.example.com", path="/validate/validate.widgets.example.com")
            ),
        )
    assert (
        "path: /validate/validate.widgets.example.com is already served for "
        "validate.widgets.example.com (a)"
    ) in str(error.value)
    conversion = Conversion(
        crd="widgets.example.com", hub="v2", spokes={"v1": Spoke(lambda o: o, lambda o: o)}
    )
    _setup(mgr, d=_Plugin(conversion))
    with pytest.raises(
        PluginSetupError, match=r"the conversion of widgets\.example\.com is declared twice"
    ):
        _setup(mgr, e=_Plugin(conversion))

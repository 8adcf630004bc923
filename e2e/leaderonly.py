"""Test-only: ``overseer run`` whose webhook server is ready only while its replica leads
— the mistake of treating admission as leader work (a standby that does not serve).

The webhook chaos suite runs a scenario's replicas this way (``python -m e2e.webhookchaos
--leader-only-runs N``) to prove that it would catch it: with only the leader an
endpoint, a leader killed leaves the API server without one until a standby has taken
the Lease and is found ready, and creates fail meanwhile. This is not a configuration of
the product and never ships in it: it wraps :meth:`manager.webhook.server.WebhookServer.
ready_reason` in this process only.

``python -m e2e.leaderonly run --config ...`` takes the arguments of ``overseer``.
"""

from __future__ import annotations

from typing import Any

from manager import manager as manager_module
from manager.cli import main
from manager.webhook.server import WebhookServer

_managers: list[manager_module.Manager] = []
_init = manager_module.Manager.__init__
_ready = WebhookServer.ready_reason


def _remember(self: manager_module.Manager, *args: Any, **kwargs: Any) -> None:
    _init(self, *args, **kwargs)
    _managers.append(self)


def _leader_only(self: WebhookServer) -> str | None:
    if not any(m.webhooks is self and m.is_leader() for m in _managers):
        return "leader-only (a test switch): this replica does not lead"
    return _ready(self)


manager_module.Manager.__init__ = _remember  # type: ignore[method-assign]
WebhookServer.ready_reason = _leader_only  # type: ignore[method-assign]

if __name__ == "__main__":
    raise SystemExit(main())

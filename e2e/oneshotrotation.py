"""Test-only: ``overseer run`` whose managed certificates renew the CA in one step, as
open-policy-agent/cert-controller does — a new CA and a certificate it signed written at
once, the old CA dropped from the bundle — instead of the three steps of
:mod:`manager.webhook.rotation` (the new CA joins the bundle first; its certificate is
served once every configuration has carried it for the overlap; the old CA leaves last).

The webhook chaos suite runs the rotation scenario's replicas this way (``python -m
e2e.webhookchaos --one-shot-runs N``) to prove that it would catch it: between the
Secret's write and the new ``caBundle`` reaching the API server, and while replicas still
serve the old certificate after it, handshakes fail verification and creates fail. This
is not a configuration of the product and never ships in it: it replaces the leader's
schedule in this process only.

``python -m e2e.oneshotrotation run --config ...`` takes the arguments of ``overseer``.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence

from manager.cli import main
from manager.webhook import certificates, rotation

_plan = rotation.plan


def _one_shot(
    current: rotation.ServingSecret | rotation.Broken | None,
    *,
    now: datetime.datetime,
    names: Sequence[str],
    policy: rotation.RotationPolicy,
    injected_at: datetime.datetime | None,
) -> rotation.Step:
    step = _plan(current, now=now, names=names, policy=policy, injected_at=injected_at)
    if step.action == "rotate-ca":
        return rotation._fresh(  # a new CA and its certificate, the old CA gone
            "rotate-ca", "one step (a test switch)", now=now, names=names, policy=policy
        )
    return step


certificates.plan = _one_shot  # type: ignore[attr-defined]

if __name__ == "__main__":
    raise SystemExit(main())

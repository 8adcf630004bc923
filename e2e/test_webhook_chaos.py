"""The webhook chaos scenarios of ``e2e/webhookchaos.py``, each run once (quick: fewer
faults): two ``overseer run`` replicas serving a validating webhook with failurePolicy
Fail under 200 creates a second — one killed with ``kill -9`` (the leader, then a
standby), a rolling restart, or the managed certificates and their CA rotating every few
seconds — and no create failing for a reason other than what kube-apiserver itself does
not retry (none at all, but for a kill).

The proof that each catches what it claims (the test-only ``e2e.leaderonly`` and
``e2e.oneshotrotation``, and ``shutdownDelay: 0``) is in ``make chaos`` and
``e2e/CHAOS.md``: too slow for the suite.

They need the local API server's endpoints and a replica process per endpoint:
``local_only``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.webhookchaos import RELIST, run_webhook_scenario

pytestmark = [pytest.mark.slow, pytest.mark.local_only, pytest.mark.timeout(300)]


def test_a_killed_replica_costs_only_what_the_api_server_does_not_retry(
    tmp_path: Path,
) -> None:
    result = run_webhook_scenario("kill9-serving", tmp_path, quick=True)
    print(
        f"\nkill9-serving: {result.sent} creates ({result.rate:.0f}/s), "
        f"{len(result.explained)} explained failures, p99 {result.percentile(0.99) * 1000:.1f} ms"
    )
    assert result.notes == []
    assert len(result.kills) == 2 and result.kills[0].leader
    assert result.unreviewed == [], result.unreviewed[:3]
    assert result.unexplained == [], result.unexplained[:5]
    assert result.denied > 0 and result.created > 0
    # what was lost went to the killed replica before its endpoint left: a relist at most
    for o in result.explained:
        kill = max((k for k in result.kills if k.at - 0.1 <= o.sent), key=lambda k: k.at)
        assert o.sent - kill.at <= RELIST + 0.6, o


def test_a_rolling_restart_fails_no_review(tmp_path: Path) -> None:
    result = run_webhook_scenario("sigterm-rolling", tmp_path, quick=True)
    assert result.notes == [] and result.stops == 2
    assert result.unreviewed == []
    assert result.explained + result.unexplained == [], (result.explained + result.unexplained)[:5]


def test_certificates_rotate_under_load_without_a_failed_review(tmp_path: Path) -> None:
    result = run_webhook_scenario("rotation-under-load", tmp_path, quick=True)
    print(
        f"\nrotation-under-load: {result.sent} creates ({result.rate:.0f}/s), rotations "
        f"{dict(result.rotations)}"
    )
    assert result.notes == []
    assert result.rotations["bundle"] >= 2 and result.rotations["certificate"] >= 2
    assert result.unreviewed == []
    assert result.explained + result.unexplained == [], (result.explained + result.unexplained)[:5]

"""The chaos scenarios of ``e2e/chaos.py``, each run once: three real ``overseer run``
replicas under a fault with work going on; no write by a replica that did not hold the
Lease, nothing lost, every fault recovered from. The published table (``e2e/CHAOS.md``)
comes from ``python -m e2e.chaos --runs 3 --report e2e/CHAOS.md``.

They need the local API server's audit, restart and a proxy per replica: ``local_only``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.chaos import LEASE, RETRY, SCENARIOS, run_scenario

pytestmark = [pytest.mark.slow, pytest.mark.local_only, pytest.mark.timeout(300)]


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_exactly_one_leader_writes_under(name: str, tmp_path: Path) -> None:
    result = run_scenario(name, tmp_path)
    print(
        f"\n{name}: {result.replica_writes} replica writes, recovery "
        f"{', '.join(f'{r:.2f}' for r in result.recovery)} s"
    )
    assert result.non_holder_writes == [], result.notes
    assert result.during == [], result.during
    assert result.lost == [], result.notes
    assert result.notes == []
    assert result.recovery, "no fault was injected"
    if name == "kill9-leader-x10":
        # a new leader within lease + 2 retry periods (+ this harness's 50 ms polling)
        assert len(result.failover) == 10
        assert max(result.failover) <= LEASE + 2 * RETRY + 0.5, result.failover

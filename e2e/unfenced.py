"""Test-only: ``overseer run`` with the write fence switched off — every fence that judges
a Lease's validity (the leader's, a shard key's) allows every write, always, and writes in
flight are never abandoned when a permission is given up.

The chaos suite runs a scenario's replicas this way (``run_scenario(..., fence=False)``,
``python -m e2e.chaos --fence-off``) to prove that it would catch a replica writing when
it may not: a scenario that still reports zero writes by non-holders with the fence off
does not test the fence. This is not a configuration of the product and never ships in
it: it replaces :meth:`manager.fencing.ValidityFence.check` and
:meth:`manager.fencing.WritesInFlight.abandon` in this process only.

``python -m e2e.unfenced run --config ...`` takes the arguments of ``overseer``.
"""

from __future__ import annotations

from manager import fencing
from manager.cli import main


def _always_open(self: fencing.ValidityFence) -> float | None:
    return None


def _never_abandon(self: fencing.WritesInFlight, match: object, why: str) -> int:
    return 0


fencing.ValidityFence.check = _always_open  # type: ignore[method-assign]
fencing.WritesInFlight.abandon = _never_abandon  # type: ignore[method-assign,assignment]

if __name__ == "__main__":
    raise SystemExit(main())

"""The chaos scenarios of ``e2e/chaos.py`` and ``e2e/shardchaos.py``, each run once: real
``overseer run`` replicas under a fault with work going on; no write by a replica that
did not hold the Lease (or own the key), nothing lost, every fault recovered from. The
published tables (``e2e/CHAOS.md``) come from ``make chaos``.

And the proof that they test what they claim: a scenario run with the write fence
switched off (the test-only ``e2e.unfenced``) must report the stale writes the fence
otherwise refuses, and one run with the client's old resend of a write whose answer was
lost (the test-only ``e2e.resending``) the duplicates it makes — a safety test that
passes with its mechanism broken proves nothing.

A scenario mostly waits (Lease expiries, holds, convergence) on a third of one CPU: the
module's runs go two at a time, each in a child process of its own with its own API
server and replicas (``e2e/scenariopool.py``), started in the order of the tests that
read them; a test waits for its own run's result. Only the selected tests' runs start.

They need the local API server's audit, restart and a proxy per replica: ``local_only``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from e2e.chaos import LEASE, RETRY, SCENARIOS, ScenarioResult
from e2e.scenariopool import Run, ScenarioPool
from e2e.shardchaos import ShardResult

pytestmark = [pytest.mark.slow, pytest.mark.local_only, pytest.mark.timeout(300)]

# The sharding scenarios that exercise this round's mechanisms; kill -9, a join, a
# graceful stop and a pause are covered by e2e/test_sharding.py, a drain that times out
# with writes on the wire by tests/integration/test_one_writer.py (and, with the fence
# off, below), the rest by `make chaos` (so is sigstop-held-writes: its stale writes are
# dropped by the exit as much as by the fence). The suite stays well under 15 minutes.
SHARD_IN_SUITE = ["stalled-watch", "deleted-lease", "recreate-ring-change"]
LEADER_IN_SUITE = [n for n in SCENARIOS if n != "sigstop-held-writes"]
# sigstop-event-pipeline with the fence off (its rounds unbounded) is left to `make chaos`:
# tests/integration/test_write_path.py already shows unbounded rounds applied late.

PARALLEL = 2  # runs at once (each uses about a third of one CPU)
WAIT = 280.0  # seconds a test waits for its run (its own, started while others ran)

# the runs of the tests that are not parametrized by their run
PROOFS = {
    "test_the_suite_catches_a_disabled_fence": Run("leader", "sigstop-blind-write", fence=False),
    "test_the_suite_catches_a_resent_write": Run("leader", "reset-after-commit", resending=True),
    "test_the_sharding_suite_catches_a_disabled_fence": Run(
        "sharding", "drain-timeout", fence=False
    ),
    "test_the_sharding_suite_catches_deletes_without_uid_preconditions": Run(
        "sharding", "recreate-ring-change", preconditions=False
    ),
}


def _run_of(item: pytest.Item) -> Run:
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "run" in callspec.params:
        run: Run = callspec.params["run"]
        return run
    return PROOFS[getattr(item, "originalname", item.name)]


@pytest.fixture(scope="module")
def scenarios(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ScenarioPool]:
    """The runs of this module's selected tests (not those deselected or skipped), in
    their order, ``PARALLEL`` at a time."""
    runs = [
        _run_of(item)
        for item in request.session.items
        if item.path == request.path and item.get_closest_marker("skip") is None
    ]
    pool = ScenarioPool(runs, tmp_path_factory.mktemp("chaos"), parallel=PARALLEL)
    try:
        yield pool
    finally:
        pool.close()


def _leader(pool: ScenarioPool, run: Run) -> ScenarioResult:
    print(f"\n{run.key}: logs and configs in {pool.workdir / run.key}")
    result = pool.result(run, WAIT)
    assert isinstance(result, ScenarioResult)
    return result


def _sharding(pool: ScenarioPool, run: Run) -> ShardResult:
    print(f"\n{run.key}: logs and configs in {pool.workdir / run.key}")
    result = pool.result(run, WAIT)
    assert isinstance(result, ShardResult)
    return result


@pytest.mark.parametrize("run", [Run("leader", n) for n in LEADER_IN_SUITE], ids=LEADER_IN_SUITE)
def test_exactly_one_leader_writes_under(run: Run, scenarios: ScenarioPool) -> None:
    name = run.name
    result = _leader(scenarios, run)
    print(
        f"\n{name}: {result.replica_writes} replica writes, recovery "
        f"{', '.join(f'{r:.2f}' for r in result.recovery)} s"
    )
    assert result.non_holder_writes == [], result.notes
    assert result.duplicates == [], result.duplicates
    assert result.during == [], result.during
    assert result.lost == [], result.notes
    assert result.notes == []
    assert result.recovery, "no fault was injected"
    if name == "kill9-leader-x10":
        # a new leader within lease + 2 retry periods (+ this harness's 50 ms polling)
        assert len(result.failover) == 10
        assert max(result.failover) <= LEASE + 2 * RETRY + 0.5, result.failover


@pytest.mark.parametrize("run", [Run("sharding", n) for n in SHARD_IN_SUITE], ids=SHARD_IN_SUITE)
def test_one_replica_writes_each_key_under(run: Run, scenarios: ScenarioPool) -> None:
    name = run.name
    result = _sharding(scenarios, run)
    print(
        f"\nsharding/{name}: {result.writes} replica writes, recovery "
        f"{', '.join(f'{r:.2f}' for r in result.recovery)} s"
    )
    assert result.overlaps == [], result.notes
    assert result.violations == [], result.notes
    assert result.lost == [], result.notes
    assert result.notes == []
    assert result.recovery, "no fault was injected"


def test_the_suite_catches_a_disabled_fence(scenarios: ScenarioPool) -> None:
    """The leader paused inside reconciles that end with a blind write, with the fence
    switched off in every replica: the woken leader's writes land after the takeover, and
    the audit must report them."""
    result = _leader(scenarios, PROOFS["test_the_suite_catches_a_disabled_fence"])
    assert result.non_holder_writes, "the fence was off and no stale write was caught"
    assert all("held the Lease" in w for w in result.non_holder_writes)


def test_the_suite_catches_a_resent_write(scenarios: ScenarioPool) -> None:
    """Creates whose answers are lost, with the client's old resend switched on in every
    replica: a create with generateName sent twice makes two objects, and the duplicates
    check must report them."""
    result = _leader(scenarios, PROOFS["test_the_suite_catches_a_resent_write"])
    assert result.duplicates, "writes were resent and no duplicate was caught"


def test_the_sharding_suite_catches_a_disabled_fence(scenarios: ScenarioPool) -> None:
    """A replica's writes take a slow path when a join makes it drain keys to the newcomer,
    with the fence (and the abandoning of writes in flight) switched off: its late writes
    land after the new owner took the keys, and the audit must report them."""
    result = _sharding(scenarios, PROOFS["test_the_sharding_suite_catches_a_disabled_fence"])
    assert result.violations, "the fence was off and no write without ownership was caught"


def test_the_sharding_suite_catches_deletes_without_uid_preconditions(
    scenarios: ScenarioPool,
) -> None:
    """Re-used names: the fence cannot protect them (each incarnation's owner holds its
    own), the uid preconditions do. With them off in the owned-mode controller, an old
    incarnation's cleanup deletes the new incarnation's owned object, and the audit
    (owned objects placed by their owner's uid) must report it."""
    result = _sharding(
        scenarios, PROOFS["test_the_sharding_suite_catches_deletes_without_uid_preconditions"]
    )
    assert result.violations, "the preconditions were off and no such delete was caught"

"""The audit checks of the sharding and chaos tests (``e2e/shardaudit.py``) on scripted
histories: each one must report what breaks "one writer per key", or the tests that use
it prove nothing. Issue 20, item 8: a replica paused past its shard Lease that wakes and
writes a key another replica took meanwhile was not reported."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from apiserver.http.audit import AuditRecord, LeaseState
from e2e.shardaudit import (
    journal_overlaps,
    leader_violations,
    owner_hash,
    read_journals,
    shard_violations,
)
from manager.hashring import SlotRing, fnv1a_64
from manager.sharding import APPLIED_ANNOTATION, RING_LABEL, encode_ring

NS, RING, LEASE = "ns", "r", 3.0
A, B = "r-a_1", "r-b_1"  # shard Lease names (identities a_1, b_1)


@dataclass
class FakeAudit:
    records_: list[AuditRecord] = field(default_factory=list)
    leases: dict[tuple[str, str], list[LeaseState]] = field(default_factory=dict)
    revision: int = 0

    def records(self) -> list[AuditRecord]:
        return list(self.records_)

    def lease_states(self, namespace: str | None = None) -> dict[tuple[str, str], list[LeaseState]]:
        return {k: list(v) for k, v in self.leases.items()}

    def lease(
        self, name: str, t: float, holder: str, members: list[str], deleted: bool = False
    ) -> None:
        self.revision += 1
        applied = encode_ring(SlotRing(members)) if members else ""
        self.leases.setdefault((NS, name), []).append(
            LeaseState(
                revision=self.revision,
                time=t,
                holder=holder,
                labels={RING_LABEL: RING},
                annotations={APPLIED_ANNOTATION: applied} if applied else {},
                deleted=deleted,
            )
        )

    def write(self, user: str, uid: str, t: float) -> None:
        """A write of the ConfigMap whose uid is ``uid`` (and named so)."""
        self.revision += 1
        self.records_.append(
            AuditRecord(self.revision, t, user, "patch", "MODIFIED", "", "configmaps", NS, uid, uid)
        )


def _key(owner: str, ring: SlotRing) -> str:
    """A uid the ring places on ``owner``."""
    return next(u for u in (f"uid-{i}" for i in range(100)) if ring.owner_of(fnv1a_64(u)) == owner)


def _check(audit: FakeAudit) -> list[str]:
    _, bad = shard_violations(
        audit,
        NS,
        RING,
        LEASE,
        writer=lambda r: r.resource == "configmaps",  # type: ignore[arg-type]
    )
    return bad


def test_a_paused_replica_that_wakes_and_writes_a_key_taken_meanwhile_is_reported() -> None:
    audit = FakeAudit()
    both = SlotRing([A, B])
    k = _key(A, both)
    audit.lease(A, 0.0, "a_1", [A, B])
    audit.lease(B, 0.0, "b_1", [A, B])
    audit.write("a", k, 0.5)  # fine: a owns it
    # a is paused: no renew after t=0. b renews and, at t=3.5, a has expired: b takes all.
    audit.lease(B, 1.0, "b_1", [A, B])
    audit.lease(B, 3.5, "b_1", [B])
    audit.write("b", k, 3.6)  # fine: a expired at 3.0, b claims k since 3.5
    audit.write("a", k, 4.0)  # a woke and wrote: its own Lease expired a second ago
    bad = _check(audit)
    assert len(bad) == 1 and bad[0].startswith("a wrote"), bad


def test_writes_within_every_rule_are_not_reported() -> None:
    audit = FakeAudit()
    both = SlotRing([A, B])
    ka, kb = _key(A, both), _key(B, both)
    for t in (0.0, 1.0, 2.0):
        audit.lease(A, t, "a_1", [A, B])
        audit.lease(B, t, "b_1", [A, B])
        audit.write("a", ka, t + 0.1)
        audit.write("b", kb, t + 0.2)
    assert _check(audit) == []


def test_a_write_by_a_later_claimant_while_the_earlier_one_is_live_is_reported() -> None:
    audit = FakeAudit()
    alone_a, both = SlotRing([A]), SlotRing([A, B])
    k = _key(B, both)
    audit.lease(A, 0.0, "a_1", [A])  # a claims everything
    audit.lease(B, 0.5, "b_1", [A, B])  # b claims k later, while a is live
    audit.write("b", k, 0.7)
    audit.lease(A, 1.0, "a_1", [A])
    assert alone_a.owner_of(fnv1a_64(k)) == A
    bad = _check(audit)
    assert len(bad) == 1 and "claimed it since" in bad[0], bad


def test_a_deleted_shard_lease_keeps_its_claims_until_it_would_have_expired() -> None:
    audit = FakeAudit()
    both = SlotRing([A, B])
    k = _key(B, both)
    audit.lease(A, 0.0, "a_1", [A, B])
    audit.lease(B, 0.0, "b_1", [A, B])
    audit.lease(B, 0.5, "", [], deleted=True)  # kubectl delete lease: b may act until ~2.0
    audit.lease(A, 1.0, "a_1", [A])  # a takes b's keys at once
    audit.write("a", k, 1.1)
    bad = _check(audit)
    assert len(bad) == 1 and "claimed it since" in bad[0], bad


def test_leader_writes_after_another_acquired_are_reported_a_deleted_lease_is_its_holders() -> None:
    audit = FakeAudit()
    audit.revision += 1
    leader = [
        LeaseState(1, 0.0, "a_1", {}, {}),
        LeaseState(3, 1.0, "", {}, {}, deleted=True),
        LeaseState(5, 2.0, "b_1", {}, {}),
    ]
    audit.leases[(NS, "leader")] = leader
    for revision, user in ((2, "a"), (4, "a"), (6, "a"), (7, "b")):
        audit.records_.append(
            AuditRecord(revision, 0.0, user, "patch", "MODIFIED", "", "configmaps", NS, "x")
        )
    bad = leader_violations(audit, NS, "leader", writer=lambda r: True)  # type: ignore[arg-type]
    assert len(bad) == 1 and "at revision 6" in bad[0], bad


# -- the journals of the test controller (one JSON line per reconcile) ----------------------


def _entry(key: str, who: str) -> str:
    return json.dumps({"key": key, "who": who, "start": 1.0, "end": 2.0, "outcome": "written"})


def test_a_journal_line_without_its_newline_is_not_an_entry_yet(tmp_path: Path) -> None:
    """A line being written as the test reads (or cut by a kill -9: the kernel may end a
    write at a page boundary) has no newline yet; it is not an entry, and not an error."""
    (tmp_path / "a_1.jsonl").write_text(_entry("ns/k1", "a_1") + "\n" + _entry("ns/k2", "a_1")[:17])
    (tmp_path / "b_1.jsonl").write_text(_entry("ns/k3", "b_1") + "\n")
    (tmp_path / "c_1.jsonl").write_text("")
    entries = read_journals(tmp_path)
    assert sorted(e["key"] for e in entries) == ["ns/k1", "ns/k3"]


def test_a_damaged_journal_line_before_the_last_is_an_error_naming_the_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "a_1.jsonl"
    path.write_text(_entry("ns/k1", "a_1")[:17] + "\n" + _entry("ns/k2", "a_1") + "\n")
    with pytest.raises(ValueError, match=r"a_1\.jsonl, line 1"):
        read_journals(tmp_path)


def test_a_write_to_an_object_owned_by_another_incarnation_is_reported_by_its_owner() -> None:
    """Re-used names: A cleans up the deleted incarnation of ``k`` (its uid on A) and
    deletes the owned object that B made for the new incarnation (its uid on B). The
    owned object's own uid places it nowhere in particular; its owner's uid does."""
    audit = FakeAudit()
    both = SlotRing([A, B])
    old, new = _key(A, both), _key(B, both)
    audit.lease(A, 0.0, "a_1", [A, B])
    audit.lease(B, 0.0, "b_1", [A, B])
    owned = _key(A, both)  # an owned object's own uid that happens to hash to A
    for user, owner in (("a", old), ("b", new), ("a", new)):
        audit.revision += 1
        audit.records_.append(
            AuditRecord(
                audit.revision,
                0.5,
                user,
                "delete",
                "DELETED",
                "",
                "configmaps",
                NS,
                "k-owned",
                owned,
                owner_uid=owner,
            )
        )
    _, bad = shard_violations(
        audit,  # type: ignore[arg-type]
        NS,
        RING,
        LEASE,
        writer=lambda r: r.resource == "configmaps",
        key_hash=owner_hash,
    )
    assert len(bad) == 1 and bad[0].startswith("a wrote ns/k-owned"), bad


def test_two_incarnations_of_a_name_overlap_only_with_themselves() -> None:
    spans = [
        {"key": "ns/k", "uid": "u1", "who": "a", "start": 0.0, "end": 1.0},
        {"key": "ns/k", "uid": "u2", "who": "b", "start": 0.5, "end": 1.5},
    ]
    assert journal_overlaps(spans) == []
    spans.append({"key": "ns/k", "uid": "u2", "who": "a", "start": 1.0, "end": 2.0})
    assert journal_overlaps(spans) == ["ns/k@u2: b 0.500-1.500 and a 1.000-2.000"]

"""Who may have written which key, judged from the local API server's audit: the checks
the sharding and chaos tests share.

The audit (:class:`~apiserver.http.audit.Audit`) records every applied write with its
writer and every state of every Lease, in commit order. From it:

* :func:`leader_violations` — writes by a replica while *another* replica held the leader
  Lease. A Lease deleted under its holder counts as still held by it until somebody
  creates it again (its holder may act until its renew deadline; nobody else may act
  before then).
* :func:`shard_violations` — writes to a key by a replica that did not own it then: the
  writer's own shard Lease must have been held and live (changed within the lease
  duration before the write: the writer's own validity, so a paused replica that wakes
  and writes is caught), its published ring must have given it the key without a break
  since some revision, and no other live member may have claimed the key since earlier
  (the earlier claim wins: a later claimant sees it and waits). A claim is unbroken only
  while its Lease stays live: a Lease that went without a change for a lease duration
  expired, and its claims ended there.

Replicas are named by their tokens (the audit's user), and their Lease identities begin
with ``<user>_``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from apiserver.http.audit import Audit, AuditRecord, LeaseState
from manager.hashring import SHARD_BY_NAMESPACE, SlotRing, fnv1a_64
from manager.sharding import APPLIED_ANNOTATION, RING_LABEL, decode_ring

__all__ = [
    "journal_overlaps",
    "leader_violations",
    "owner_hash",
    "read_journals",
    "record_hash",
    "ring_of",
    "shard_violations",
]

_RINGS: dict[str, SlotRing | None] = {}


def ring_of(text: str) -> SlotRing | None:
    """The ring a Lease published (``<parameters>|<member>,...``), or None."""
    if text not in _RINGS:
        decoded = decode_ring(text)
        _RINGS[text] = SlotRing(decoded[1], decoded[0]) if decoded is not None else None
    return _RINGS[text]


def record_hash(record: AuditRecord, shard_by: str) -> int:
    """The shard hash of the key a write belongs to, when it wrote the primary object
    itself: FNV-1a 64 of its uid or namespace."""
    return fnv1a_64(record.namespace if shard_by == SHARD_BY_NAMESPACE else record.uid)


def owner_hash(record: AuditRecord, shard_by: str) -> int:
    """As :func:`record_hash`, but an owned object (one with a controller ownerReference)
    is placed by its owner's uid, as the ring places it: a write to an object of another
    incarnation of the same name is then a write to a key the writer does not own."""
    if shard_by == SHARD_BY_NAMESPACE or not record.owner_uid:
        return record_hash(record, shard_by)
    return fnv1a_64(record.owner_uid)


def _effective(history: list[LeaseState], revision: int) -> LeaseState | None:
    """The Lease as it stood right after ``revision``; a deleted one as it was last
    written (its holder may still act), until it is written again."""
    found: LeaseState | None = None
    for state in history:
        if state.revision > revision:
            break
        if state.deleted and found is not None:
            continue  # keep the last written state
        found = state
    return found


def leader_violations(
    audit: Audit,
    namespace: str,
    lease: str,
    *,
    writer: Callable[[AuditRecord], bool],
) -> list[str]:
    """Writes (those ``writer`` accepts) applied while another replica held ``lease``."""
    history = audit.lease_states(namespace).get((namespace, lease), [])
    bad = []
    for record in audit.records():
        if not writer(record):
            continue
        state = _effective(history, record.revision)
        holder = "" if state is None else state.holder
        if holder and not holder.startswith(f"{record.user}_"):
            bad.append(
                f"{record.user} {record.verb} {record.resource} {record.namespace}/"
                f"{record.name} at revision {record.revision} while {holder} held the Lease"
            )
    return bad


def shard_violations(
    audit: Audit,
    namespace: str,
    ring: str,
    lease_duration: float,
    *,
    writer: Callable[[AuditRecord], bool],
    key_hash: Callable[[AuditRecord, str], int] = record_hash,
) -> tuple[int, list[str]]:
    """Writes (those ``writer`` accepts) to keys their writer did not own then; returns
    (writes checked, violations). ``key_hash(record, shard_by)`` places the written key
    on a published ring (default: the written object is the primary one)."""
    histories = {
        name: history
        for (_, name), history in audit.lease_states(namespace).items()
        if any(s.labels.get(RING_LABEL) == ring for s in history)
    }

    def claim(lease: str, record: AuditRecord) -> int | None:
        """Since which revision ``lease`` has claimed ``k`` without a break, as of the
        write (None: it does not claim it then, or its Lease is not live)."""
        since: int | None = None
        last: LeaseState | None = None
        for state in histories[lease]:
            if state.revision > record.revision:
                break
            if state.deleted:
                continue  # as last written, until it expires
            if last is not None and state.time - last.time >= lease_duration:
                since = None  # it expired in between: its claims ended there
            published = ring_of(state.annotations.get(APPLIED_ANNOTATION) or "")
            claims = (
                bool(state.holder)
                and published is not None
                and published.owner_of(key_hash(record, published.shard_by)) == lease
            )
            since = (state.revision if since is None else since) if claims else None
            last = state
        if last is None or record.time - last.time >= lease_duration:
            return None  # not live when the write was applied
        return since

    checked, bad = 0, []
    for record in audit.records():
        if not writer(record):
            continue
        checked += 1
        k = f"{record.namespace}/{record.name}"
        mine = next(
            (
                lease
                for lease, history in histories.items()
                if any(s.holder.startswith(f"{record.user}_") for s in history)
            ),
            None,
        )
        since = None if mine is None else claim(mine, record)
        if since is None:
            bad.append(f"{record.user} wrote {k} at {record.revision} without a live claim on it")
            continue
        for lease in histories:
            if lease == mine:
                continue
            other = claim(lease, record)
            if other is not None and other <= since:
                bad.append(
                    f"{record.user} wrote {k} at {record.revision} (claim since {since}) "
                    f"while {lease} claimed it since {other}"
                )
    return checked, bad


def read_journals(directory: Path) -> list[dict[str, Any]]:
    """The entries of every ``*.jsonl`` journal in ``directory`` (one JSON object per
    line, as the sharding test controller appends them).

    A file's last line without its newline is not an entry: a replica is writing it as
    we read (a read may see part of a write), or was killed while it did (the kernel may
    end a write to a file at a page boundary when the process dies). Its span is lost to
    :func:`journal_overlaps`; the audit still has the write itself.

    Raises:
        ValueError: a complete line is not JSON (naming the file and the line).
    """
    entries = []
    for path in sorted(directory.glob("*.jsonl")):
        lines = path.read_text(encoding="utf-8").split("\n")
        for number, line in enumerate(lines[:-1], start=1):  # lines[-1]: not ended yet
            if not line.strip():
                continue
            try:
                entries.append(json.loads(line))
            except ValueError as exc:
                raise ValueError(f"journal {path}, line {number}: {exc}") from None
    return entries


def journal_overlaps(entries: Iterable[dict[str, Any]]) -> list[str]:
    """Keys two replicas worked on at the same moment: spans (``key``, ``who``,
    ``start``, ``end``, as the sharding test controller journals them) of one key by two
    replicas that overlap in time. Entries that carry a ``uid`` (the incarnation the
    reconcile was for) are keyed by ``key@uid``: two incarnations of one name are two
    keys (README "Sharding", re-used names)."""
    by_key: dict[str, list[dict[str, Any]]] = {}
    for e in entries:
        key = f"{e['key']}@{e['uid']}" if e.get("uid") else e["key"]
        by_key.setdefault(key, []).append(e)
    bad = []
    for key, spans in by_key.items():
        spans.sort(key=lambda e: e["start"])
        latest: dict[str, Any] | None = None
        for e in spans:
            if latest is not None and e["who"] != latest["who"] and e["start"] < latest["end"]:
                bad.append(
                    f"{key}: {latest['who']} {latest['start']:.3f}-{latest['end']:.3f} "
                    f"and {e['who']} {e['start']:.3f}-{e['end']:.3f}"
                )
            if latest is None or e["end"] > latest["end"]:
                latest = e
    return bad

"""The controller the sharding end-to-end tests run in every ``overseer run`` process.

It is installed for those processes only, through ``PYTHONPATH`` (this directory holds a
``.dist-info`` with its entry point), never into the development environment.

For each ConfigMap labelled ``overseer-shard-test=true`` whose ``data.tick`` differs from
the annotation ``shard/tick``, it holds the reconcile for ``holdSeconds`` (so that two
replicas reconciling one key at once would overlap), then writes the tick and its
identity, with the observed resourceVersion. Every reconcile it runs is journaled — key,
start, end, identity, outcome, and when its write was sent (``sent``, or null) — as one
JSON line in ``<journal>/<identity>.jsonl``, so the test can prove that no key was
ever reconciled by two replicas at the same moment.

With ``blind: true`` its write carries no resourceVersion (a careless controller's merge
patch): a stale replica's write is then refused by nothing but the key's write fence.

With ``owned: true`` it provisions instead one owned ConfigMap per key (``<name>-owned``,
labelled ``overseer-shard-test-owned``, controlled by the key's uid) and, once the key's
object is gone, cleans up the deleted incarnation's by the uid it last had
(:func:`manager.incarnation`) — the controller of the re-used-name scenario. Its writes
are the incarnation-safe ones (README "Sharding", re-used names): the cleanup deletes only
the owned object controlled by that uid, with ``preconditions.uid`` of that object as
cached; a create that meets an older incarnation's object waits for its cleanup or the
garbage collector. ``preconditions: false`` drops the uid precondition (test-only: the
mechanism broken on purpose). Its journal lines carry the incarnation's ``uid``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field

from manager import (
    AlreadyExists,
    Conflict,
    JsonDict,
    Manager,
    NotFound,
    PluginContext,
    Request,
    Result,
    WriteFenced,
    builtin,
    incarnation,
)

CONFIGMAPS = builtin("v1", "configmaps")
LABEL = "overseer-shard-test"
OWNED_LABEL = "overseer-shard-test-owned"
CLEANUP_HOLDS = (0.1, 0.2, 0.3, 0.4, 0.5)  # seconds, by key: before or after the collector


@dataclass(frozen=True, kw_only=True, slots=True)
class ShardTestConfig:
    hold_seconds: float = field(default=0.05, metadata={"min": 0.0, "help": "time in reconcile"})
    journal: str = field(default="", metadata={"help": "directory of the journals"})
    blind: bool = field(default=False, metadata={"help": "write without a resourceVersion"})
    owned: bool = field(default=False, metadata={"help": "provision an owned ConfigMap per key"})
    preconditions: bool = field(
        default=True, metadata={"help": "owned mode: delete with a uid precondition"}
    )


def controller_uid(obj: JsonDict) -> str:
    """The uid of ``obj``'s controller ownerReference, or ""."""
    refs = obj["metadata"].get("ownerReferences") or []
    return next((str(r.get("uid")) for r in refs if r.get("controller")), "")


class ShardTestReconciler:
    def __init__(self, mgr: Manager, config: ShardTestConfig, *, sharded: bool) -> None:
        self._client = mgr.client
        # sharded: the cache of this replica's share, the one its events come from
        self._lister = mgr.lister(
            CONFIGMAPS, label_selector=f"{LABEL}=true", shard="primary" if sharded else None
        )
        self._me = mgr.identity
        self._hold = config.hold_seconds
        self._blind = config.blind
        self._owned = (
            mgr.lister(CONFIGMAPS, label_selector=f"{OWNED_LABEL}=true") if config.owned else None
        )
        self._preconditions = config.preconditions
        self._lock = threading.Lock()
        path = os.path.join(config.journal or ".", f"{self._me}.jsonl")
        self._journal = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115

    def reconcile(self, request: Request) -> Result:
        if self._owned is not None:
            return self._reconcile_owned(request)
        start = time.time()
        outcome = "nothing"
        sent: float | None = None
        try:
            obj = self._lister.get(request.name, request.namespace)
            if obj is None:
                return Result()
            tick = (obj.get("data") or {}).get("tick", "")
            ann = obj["metadata"].get("annotations") or {}
            if ann.get("shard/tick") == tick:
                return Result()
            time.sleep(self._hold)
            meta: dict[str, object] = {"annotations": {"shard/tick": tick, "shard/by": self._me}}
            if not self._blind:
                meta["resourceVersion"] = obj["metadata"]["resourceVersion"]
            patch = {"metadata": meta}
            try:
                sent = time.time()
                self._client.patch(CONFIGMAPS, request.name, patch, namespace=request.namespace)
            except (Conflict, NotFound):
                outcome = "conflict"
                return Result(requeue=True)
            except WriteFenced:
                outcome = "fenced"
                raise
            outcome = "written"
            return Result()
        finally:
            line = {
                "key": request.key,
                "start": start,
                "end": time.time(),
                "who": self._me,
                "outcome": outcome,
                "sent": sent,
            }
            with self._lock:
                self._journal.write(json.dumps(line) + "\n")

    def _reconcile_owned(self, request: Request) -> Result:
        uid = incarnation()
        start = time.time()
        outcome = "nothing"
        try:
            obj = self._lister.get(request.name, request.namespace)
            if obj is not None:
                if uid is not None and obj["metadata"]["uid"] != uid:
                    return Result(requeue_after=0.05)  # a newer one: its own permission
                time.sleep(self._hold)
                outcome = self._provision(request, obj)
            elif uid is not None:
                outcome = self._clean_up(request, uid)
            return Result(requeue_after=0.05) if outcome == "waiting" else Result()
        except WriteFenced:
            outcome = "fenced"
            raise
        finally:
            line = {
                "key": request.key,
                "uid": uid,
                "start": start,
                "end": time.time(),
                "who": self._me,
                "outcome": outcome,
            }
            with self._lock:
                self._journal.write(json.dumps(line) + "\n")

    def _provision(self, request: Request, obj: JsonDict) -> str:
        assert self._owned is not None
        name, uid = f"{request.name}-owned", str(obj["metadata"]["uid"])
        cached = self._owned.get(name, request.namespace)
        if cached is not None and controller_uid(cached) == uid:
            return "nothing"
        owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": request.name, "uid": uid}
        body = {
            "metadata": {
                "name": name,
                "labels": {OWNED_LABEL: "true"},
                "ownerReferences": [{**owner, "controller": True}],
            },
            "data": {"owner": uid},
        }
        try:
            self._client.create(CONFIGMAPS, body, request.namespace)
            return "written"
        except AlreadyExists:
            pass
        try:
            there = self._client.get(CONFIGMAPS, name, request.namespace)
        except NotFound:
            return "waiting"
        # ours already, or an older incarnation's: its cleanup (or the collector) first
        return "nothing" if controller_uid(there) == uid else "waiting"

    def _clean_up(self, request: Request, uid: str) -> str:
        assert self._owned is not None
        name = f"{request.name}-owned"
        cached = self._owned.get(name, request.namespace)
        if cached is None or controller_uid(cached) != uid:
            return "nothing"
        preconditions = {"uid": cached["metadata"]["uid"]} if self._preconditions else None
        time.sleep(CLEANUP_HOLDS[sum(map(ord, request.name)) % len(CLEANUP_HOLDS)])
        try:
            self._client.delete(CONFIGMAPS, name, request.namespace, preconditions=preconditions)
        except (NotFound, Conflict):
            return "nothing"  # gone, or not the object we saw: another incarnation's
        return "written"


class ShardTestPlugin:
    config_class = ShardTestConfig

    def setup(self, mgr: Manager, ctx: PluginContext[ShardTestConfig]) -> None:
        (
            ctx.controller(ShardTestReconciler(mgr, ctx.config, sharded=ctx.settings.sharded))
            .for_(CONFIGMAPS, label_selector=f"{LABEL}=true")
            .complete()
        )

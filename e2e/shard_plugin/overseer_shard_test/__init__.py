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
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field

from manager import (
    Conflict,
    Manager,
    NotFound,
    PluginContext,
    Request,
    Result,
    WriteFenced,
    builtin,
)

CONFIGMAPS = builtin("v1", "configmaps")
LABEL = "overseer-shard-test"


@dataclass(frozen=True, kw_only=True, slots=True)
class ShardTestConfig:
    hold_seconds: float = field(default=0.05, metadata={"min": 0.0, "help": "time in reconcile"})
    journal: str = field(default="", metadata={"help": "directory of the journals"})
    blind: bool = field(default=False, metadata={"help": "write without a resourceVersion"})


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
        self._lock = threading.Lock()
        path = os.path.join(config.journal or ".", f"{self._me}.jsonl")
        self._journal = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115

    def reconcile(self, request: Request) -> Result:
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


class ShardTestPlugin:
    config_class = ShardTestConfig

    def setup(self, mgr: Manager, ctx: PluginContext[ShardTestConfig]) -> None:
        (
            ctx.controller(ShardTestReconciler(mgr, ctx.config, sharded=ctx.settings.sharded))
            .for_(CONFIGMAPS, label_selector=f"{LABEL}=true")
            .complete()
        )
